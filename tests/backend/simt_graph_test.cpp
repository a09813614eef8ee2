// Stream capture on the SIMT runtime (simt_host.h, "graphs"), as CUDA's stream capture
// behaves (CUDA C++ Programming Guide, "CUDA Graphs", "Creating a Graph Using Stream
// Capture"): what is queued while a stream captures is recorded and runs only when the graph is
// launched, each time with the arguments it was captured with, reading pinned host memory
// when it runs; and what CUDA refuses during a capture (a synchronization, a copy from or to
// pageable memory, cudaMalloc, cudaFree) is an error that invalidates the capture.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cuda/simt.h"
#include "backend/simt/internal.h"
#include "core/error.h"
#include "error_of.h"

namespace gt::simt {
namespace {

using LC = LaunchConfig;
using gt::test::error_of;

__global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }
__global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }

class SimtGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = config();
    set_device(0);
    s_ = create_stream();
    x_ = static_cast<float*>(device_malloc(4 * sizeof(float)));
  }
  void TearDown() override {
    if (stream_capturing(s_)) {
      try {
        stream_end_capture(s_);
      } catch (const Error&) {
      }
    }
    device_free(x_);
    destroy_stream(s_);
    set_config(saved_);
  }
  Stream* s_ = nullptr;
  float* x_ = nullptr;
  Config saved_;
};

TEST_F(SimtGraph, ACapturedGraphRunsWhenLaunchedEachTimeReadingPinnedMemoryThen) {
  std::vector<float> src(4, 0.f), dst(4, 0.f);  // stand for pinned host buffers
  reset_stats();
  stream_begin_capture(s_);
  EXPECT_TRUE(stream_capturing(s_));
  memcpy_h2d_async(s_, x_, src.data(), 16);
  launch(s_, LC{Dim3(1), Dim3(4)}, "add_one", &add_one, x_);
  memcpy_d2h_async(s_, dst.data(), x_, 16);
  const std::shared_ptr<const Graph> g = stream_end_capture(s_);
  EXPECT_FALSE(stream_capturing(s_));
  stream_synchronize(s_);
  EXPECT_TRUE(std::isnan(dst[0])) << "the captured copy ran before the graph was launched";
  EXPECT_EQ(graph_shape(*g).size(), 3u);

  src = {1, 2, 3, 4};
  graph_launch(s_, *g);
  stream_synchronize(s_);
  EXPECT_EQ(dst, (std::vector<float>{2, 3, 4, 5}));

  src = {10, 20, 30, 40};  // the next launch reads the pinned buffer as it is then
  graph_launch(s_, *g);
  EXPECT_TRUE(std::isnan(dst[0])) << "a copy to the host holds nothing before the synchronization";
  stream_synchronize(s_);
  EXPECT_EQ(dst, (std::vector<float>{11, 21, 31, 41}));
  EXPECT_EQ(stats().graph_launches, 2u);
  EXPECT_EQ(stats().launches, 1u) << "the kernel was launched once, at the capture";
}

TEST_F(SimtGraph, TheShapeOfAGraphIsItsSequenceOfWork) {
  auto capture = [&](bool second_kernel) {
    stream_begin_capture(s_);
    launch(s_, LC{Dim3(1), Dim3(4)}, "add_one", &add_one, x_);
    if (second_kernel) launch(s_, LC{Dim3(1), Dim3(4)}, "twice", &twice, x_);
    return graph_shape(*stream_end_capture(s_));
  };
  EXPECT_EQ(capture(true), capture(true));
  EXPECT_NE(capture(true), capture(false));
}

TEST_F(SimtGraph, WhatCudaRefusesWhileCapturingInvalidatesTheCapture) {
  std::vector<float> h(4);
  const std::vector<std::pair<std::string, std::function<void()>>> refused = {
      {"cudaStreamSynchronize", [&] { stream_synchronize(s_); }},
      {"a copy to pageable host memory", [&] { memcpy_d2h(s_, h.data(), x_, 16); }},
      {"a copy from pageable host memory", [&] { memcpy_h2d(s_, x_, h.data(), 16); }},
      {"cudaMalloc", [&] { device_malloc(64); }},
      {"cudaFree", [&] { device_free(x_); }},
      {"an event the host waits on", [&] { event_record(s_); }},
  };
  for (const auto& [what, call] : refused) {
    stream_begin_capture(s_);
    launch(s_, LC{Dim3(1), Dim3(4)}, "add_one", &add_one, x_);
    const std::string e = error_of(call);
    EXPECT_NE(e.find("while the stream is capturing a graph"), std::string::npos)
        << what << ": " << e;
    const std::string end = error_of([&] { stream_end_capture(s_); });
    EXPECT_NE(end.find("the stream capture was invalidated"), std::string::npos)
        << what << ": " << end;
    EXPECT_FALSE(stream_capturing(s_)) << what;
  }
  // the stream works as before, and nothing captured ran
  const std::vector<float> v = {1, 2, 3, 4};
  memcpy_h2d(s_, x_, v.data(), 16);
  launch(s_, LC{Dim3(1), Dim3(4)}, "add_one", &add_one, x_);
  memcpy_d2h(s_, h.data(), x_, 16);
  EXPECT_EQ(h, (std::vector<float>{2, 3, 4, 5}));
}

TEST_F(SimtGraph, ACaptureCanBeFailedOnPurposeForTests) {
  Config c = config();
  c.fail_captures = true;
  set_config(c);
  stream_begin_capture(s_);
  launch(s_, LC{Dim3(1), Dim3(4)}, "add_one", &add_one, x_);
  EXPECT_NE(error_of([&] { stream_end_capture(s_); }).find("fail_captures"), std::string::npos);
}

}  // namespace
}  // namespace gt::simt
