// The CUDA backend on the SIMT runtime (train.device = cuda-emu) as the training loop drives it:
//   - the host synchronizations of one training step are counted (the number a GPU waits on
//     the host each step; the aim is one);
//   - the cuBLASLt products a GPT-2 124M step asks for, in bf16 and in fp8, are recorded
//     without running them (the runtime checks and records launches and products only) and
//     compared with the reviewed set in tests/engine/data/products_gpt2_124m_*.txt, so a
//     change to what the GPU will be asked for is seen in review. GT_UPDATE_GOLDEN=1 rewrites
//     the files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>

#include "backend/cuda/lt_emulation.h"
#include "backend/simt/simt_host.h"
#include "dist/communicator.h"
#include "dist/grad_sync.h"
#include "test_helpers.h"
#include "train/trainer.h"

namespace gt {
namespace {

/// An llm.c token shard of n tokens below vocab (header: magic 20240520, version 1, count).
void write_shard(const std::string& path, int64_t n, int vocab) {
  std::ofstream f(path, std::ios::binary);
  int32_t hdr[256] = {20240520, 1, static_cast<int32_t>(n)};
  f.write(reinterpret_cast<const char*>(hdr), sizeof hdr);
  uint32_t x = 12345;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    const uint16_t t = static_cast<uint16_t>((x >> 8) % vocab);
    f.write(reinterpret_cast<const char*>(&t), 2);
  }
}

TEST(CudaEmu, HostSynchronizationsPerTrainingStepAreCounted) {
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(20000));
  for (bool fusion : {false, true}) {
    TrainConfig c = test::small_train_config(d.file("t.txt"), 32, 16, 3, 1);
    c.device = "cuda-emu";
    c.fusion = fusion;
    Trainer tr(c, d.file(fusion ? "fused" : "plain"), false, nullptr);
    tr.train_step();  // the first step makes the plans and buffers
    simt::reset_stats();
    tr.train_step();
    const simt::Stats s = simt::stats();
    // Fusion on: tokens up through pinned memory (their host copies kept for the embedding
    // backward's index and the targets' check), the norm, the clip and the skip on the device,
    // the losses and the update's result back asynchronously: one synchronization, at the
    // step's end. Fusion off keeps the unfused reference path (the loss read per micro-batch,
    // the norm on the host, the states checked): a few.
    if (fusion)
      EXPECT_EQ(s.host_syncs, 1u) << "a training step with fusion on synchronizes once";
    else
      EXPECT_LE(s.host_syncs, 16u) << "fusion off: more host synchronizations per step";
    EXPECT_GT(s.launches, 20u);
    RecordProperty(fusion ? "host_syncs_fused" : "host_syncs_plain", std::to_string(s.host_syncs));
    std::printf(
        "cuda-emu, fusion %s: %llu host synchronizations, %llu launches, %llu library "
        "calls per step\n",
        fusion ? "on" : "off", (unsigned long long)s.host_syncs, (unsigned long long)s.launches,
        (unsigned long long)s.tasks);
  }
}

/// The losses of `steps` steps of a small model on cuda-emu (train.fusion on), with
/// train.cuda_graph on or off, and what the run said of its graphs (RunResult::cuda_graph).
struct GraphRun {
  std::vector<double> losses;
  nlohmann::json graph;
  simt::Stats second_step;  ///< counted over the second step alone
};
GraphRun run_with_graph(test::TempDir& d, const std::string& name, bool graph, Precision p,
                        int accum) {
  TrainConfig c = test::small_train_config(d.file("t.txt"), 32, 16, 4, 1);
  c.device = "cuda-emu";
  c.fusion = true;
  c.precision = p;
  c.grad_accum_steps = accum;
  c.cuda_graph = graph;
  Trainer tr(c, d.file(name), false, nullptr);
  GraphRun g;
  g.losses.push_back(tr.train_step());
  simt::reset_stats();
  g.losses.push_back(tr.train_step());
  g.second_step = simt::stats();
  const RunResult r = tr.run();
  g.losses.insert(g.losses.end(), r.losses.begin(), r.losses.end());
  g.graph = r.cuda_graph;
  return g;
}

// train.cuda_graph = on: every step after the first (which sizes the buffers) is captured and
// launched as one graph, updated in place from the third; the losses are those of the same
// steps queued op by op, bit for bit, and the step still synchronizes once.
TEST(CudaEmu, StepsAfterTheFirstRunAsOneGraphWithTheSameLosses) {
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(20000));
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) {
    const std::string tag = to_string(p);
    const GraphRun eager = run_with_graph(d, "eager-" + tag, false, p, 2);
    const GraphRun graph = run_with_graph(d, "graph-" + tag, true, p, 2);
    ASSERT_EQ(graph.losses.size(), 4u);
    EXPECT_EQ(graph.losses, eager.losses) << tag;
    EXPECT_EQ(graph.second_step.graph_launches, 1u) << tag;
    EXPECT_EQ(graph.second_step.host_syncs, 1u) << tag;
    EXPECT_EQ(eager.second_step.graph_launches, 0u) << tag;
    EXPECT_EQ(graph.graph["used"], true) << graph.graph.dump();
    EXPECT_EQ(graph.graph["launches"], 3) << graph.graph.dump();
    EXPECT_EQ(graph.graph["instantiations"], 1) << graph.graph.dump();
    EXPECT_EQ(graph.graph["updates"], 2) << graph.graph.dump();
    EXPECT_TRUE(graph.graph["why_not"].is_null());
    EXPECT_EQ(eager.graph["used"], false);
    EXPECT_EQ(eager.graph["why_not"], "train.cuda_graph = off");
  }
  // many micro-batches: each uploads its index through a pinned buffer of its own, all made by
  // the first step (a capture makes no pinned memory)
  const GraphRun many = run_with_graph(d, "graph-accum20", true, Precision::bf16, 20);
  EXPECT_EQ(many.graph["launches"], 3) << many.graph.dump();
}

// A capture that fails (here on purpose: the runtime's fail_captures) costs nothing but the
// graph: the step is queued again op by op, the run goes on without graphs and says why.
TEST(CudaEmu, AStepWhoseCaptureFailsRunsWithoutAGraph) {
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(20000));
  const GraphRun eager = run_with_graph(d, "eager", false, Precision::bf16, 1);
  const simt::Config saved = simt::config();
  simt::Config c = saved;
  c.fail_captures = true;
  simt::set_config(c);
  GraphRun failed;
  try {
    failed = run_with_graph(d, "failed", true, Precision::bf16, 1);
  } catch (...) {
    simt::set_config(saved);
    throw;
  }
  simt::set_config(saved);
  EXPECT_EQ(failed.losses, eager.losses);
  EXPECT_EQ(failed.graph["used"], false);
  EXPECT_NE(failed.graph["why_not"].get<std::string>().find("the capture of step 2 failed"),
            std::string::npos)
      << failed.graph.dump();
}

/// One product on its own cuda-emu backend: x (N x C) times w (OC x C), under precision p.
struct EmuProduct {
  std::unique_ptr<Backend> be = make_backend("cuda-emu");
  float *x = nullptr, *w = nullptr, *out = nullptr;
  int N, C, OC;
  EmuProduct(const std::vector<float>& hx, int n, int c, int oc, Precision p) : N(n), C(c), OC(oc) {
    be->set_precision(p);
    x = up(hx);
    w = up(std::vector<float>(size_t(OC) * C));
    out = up(std::vector<float>(size_t(N) * OC));
  }
  ~EmuProduct() {
    for (float* p : {x, w, out}) be->deallocate(p);
  }
  float* up(const std::vector<float>& h) {
    auto* p = static_cast<float*>(be->allocate(h.size() * sizeof(float)));
    be->copy_to_device(p, h.data(), h.size() * sizeof(float));
    return p;
  }
  void set_weights(const std::vector<float>& h) {
    be->copy_to_device(w, h.data(), h.size() * sizeof(float));
    be->weights_updated();
  }
  void queue() { be->matmul_forward(DevPtr(out), ConstDevPtr(x), w, nullptr, N, C, OC, false); }
  std::vector<float> forward() {
    queue();
    std::vector<float> h(size_t(N) * OC);
    be->copy_to_host(h.data(), out, h.size() * sizeof(float));
    return h;
  }
};

// What the backend marks done while it captures (a weight's 16-bit copy made) is undone when the
// capture does not run, so the same op queued again without a graph makes the copy.
TEST(CudaEmu, AnAbandonedCaptureLeavesNoStaleWeightCopy) {
  const int N = 4, C = 8, OC = 16;
  std::vector<float> x(N * C), w1(OC * C), w2(OC * C);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * float(i % 7) - 0.3f;
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = 0.05f * float(i % 11) - 0.25f;
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = 0.5f - 0.03f * float(i % 13);
  EmuProduct fresh(x, N, C, OC, Precision::bf16);
  fresh.set_weights(w2);
  const std::vector<float> expected = fresh.forward();

  EmuProduct d(x, N, C, OC, Precision::bf16);
  d.set_weights(w1);
  d.forward();  // w1's copy made
  d.set_weights(w2);
  d.be->begin_graph();
  d.queue();  // w2's copy captured, not made
  d.be->abandon_graph();
  EXPECT_EQ(d.forward(), expected) << "abandoned: the product used w1's copy";

  d.set_weights(w1);
  d.forward();
  d.set_weights(w2);
  d.be->begin_graph();
  d.queue();
  std::vector<float> h(size_t(N) * OC);
  EXPECT_THROW(d.be->copy_to_host(h.data(), d.out, h.size() * sizeof(float)), Error);
  EXPECT_NE(d.be->launch_graph(), "");  // invalidated by the copy: nothing ran
  EXPECT_EQ(d.forward(), expected) << "failed launch: the product used w1's copy";
}

// An fp8 scaling state first used inside a capture (its memory refused there) is made anew,
// zeroed, when the op is queued again without a graph.
TEST(CudaEmu, AnFp8StateFirstUsedInAFailedCaptureStartsFresh) {
  const int N = 16, C = 16, OC = 16;  // (fp8 products take multiples of 16)
  std::vector<float> x(N * C), w(OC * C);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * float(i % 7) - 0.3f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * float(i % 11) - 0.25f;
  EmuProduct fresh(x, N, C, OC, Precision::fp8);
  fresh.set_weights(w);
  const std::vector<float> expected = fresh.forward();
  EmuProduct d(x, N, C, OC, Precision::fp8);
  d.set_weights(w);
  d.be->begin_graph();
  EXPECT_THROW(d.queue(), Error);  // the state's cudaMalloc is refused while capturing
  d.be->abandon_graph();
  EXPECT_EQ(d.forward(), expected);
}

/// The products of one GPT-2 124M step (B 32, T 1024, V 50304) under `precision`, recorded
/// with the runtime checking and recording only (nothing runs; memory is mapped, not touched).
std::vector<std::string> gpt2_124m_products(const std::string& precision, test::TempDir& d) {
  write_shard(d.file("train.bin"), 70000, 50304);
  TrainConfig c;
  c.model = {12, 12, 768, 1024, 50304};
  c.batch_size = 32;
  c.max_steps = 1;
  c.warmup_steps = 0;
  c.eval_interval = 0;
  c.eval_steps = 1;
  c.checkpoint_interval = 0;
  c.data_path = d.file("train.bin");
  c.data_format = "llmc";
  c.device = "cuda-emu";
  c.fusion = true;
  c.precision = parse_precision(precision);
  simt::Config saved = simt::config(), plan = saved;
  plan.execute = false;
  simt::set_config(plan);
  std::vector<std::string> log;
  try {
    Trainer tr(c, d.file("run-" + precision), false, nullptr);
    cuda_lt::record_products(true);
    tr.train_step();
    log = cuda_lt::recorded_products();
    cuda_lt::record_products(false);
  } catch (...) {
    cuda_lt::record_products(false);
    simt::set_config(saved);
    throw;
  }
  simt::set_config(saved);
  std::sort(log.begin(), log.end());
  log.erase(std::unique(log.begin(), log.end()), log.end());
  return log;
}

void expect_golden(const std::vector<std::string>& got, const std::string& name) {
  const std::string path = std::string(GT_TEST_DATA) + "/" + name;
  if (const char* u = std::getenv("GT_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream f(path);
    f << "# The distinct cuBLASLt products of one GPT-2 124M training step (B 32, T 1024), as\n"
         "# tests/engine/test_cuda_emu.cpp records them; GT_UPDATE_GOLDEN=1 rewrites this file.\n";
    for (const auto& s : got) f << s << "\n";
    return;
  }
  std::ifstream f(path);
  ASSERT_TRUE(f) << path << " is missing: run with GT_UPDATE_GOLDEN=1 and review it";
  std::vector<std::string> want;
  for (std::string line; std::getline(f, line);)
    if (!line.empty() && line[0] != '#') want.push_back(line);
  std::string diff;
  for (const auto& s : got)
    if (!std::binary_search(want.begin(), want.end(), s)) diff += "  new:  " + s + "\n";
  for (const auto& s : want)
    if (!std::binary_search(got.begin(), got.end(), s)) diff += "  gone: " + s + "\n";
  EXPECT_EQ(diff, "") << "the products a GPT-2 124M step asks cuBLASLt for changed (" << path
                      << "); review, then GT_UPDATE_GOLDEN=1:\n"
                      << diff;
}

// The emulated GPU, as CUDA, refuses calls from a thread that selected no device; the
// data-parallel gradient synchronisation runs on its own thread, which selects the backend's
// device first (GradSync calls DeviceMemory::bind_thread), so it reduces a device's buckets.
TEST(CudaEmu, TheGradientSyncThreadSelectsItsDevice) {
  auto be = make_backend("cuda-emu");
  const size_t n = 1000;
  auto* g = static_cast<float*>(be->allocate(n * sizeof(float)));
  std::vector<float> h(n, 1.5f);
  be->copy_to_device(g, h.data(), n * sizeof(float));
  std::string unbound;
  std::thread t([&] {
    try {
      be->copy_to_host(h.data(), g, sizeof(float));
    } catch (const Error& e) {
      unbound = e.what();
    }
  });
  t.join();
  EXPECT_NE(unbound.find("from a thread that selected no device"), std::string::npos) << unbound;
  dist::LocalCommunicator comm;
  {
    dist::GradSync sync(comm, *be, g, n, {{0, 400}, {400, n}}, false, dist::CommType::f32);
    sync.start(0);
    sync.start(1);
    EXPECT_NO_THROW(sync.wait());
  }
  be->copy_to_host(h.data(), g, n * sizeof(float));
  EXPECT_EQ(h[0], 1.5f);
  EXPECT_EQ(h[n - 1], 1.5f);
  be->deallocate(g);
}

// A communicator of device buffers (as NCCL's) that reads what it is given at once: what a
// reduction would send.
struct SeeingComm final : dist::Communicator {
  std::vector<float> seen;
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "seeing"; }
  bool device_buffers() const override { return true; }
  void all_reduce(void*, size_t, dist::CommType, dist::ReduceOp) override {}
  void reduce_scatter(const void* send, dist::CommType, float* recv,
                      const std::vector<size_t>& counts) override {
    const auto* f = static_cast<const float*>(send);
    seen.assign(f, f + counts[0]);  // cuda-emu's device memory is host memory
    std::copy(f, f + counts[0], recv);
  }
  void all_gather(const void*, void*, const std::vector<size_t>&, dist::CommType) override {}
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
};

// Data parallelism on a GPU: the trainer hands each bucket over with a mark of the work
// queued so far (an event), not a host synchronization; the communication thread waits for
// the mark, so it reduces the gradients the backward wrote, while the trainer's thread went on
// without waiting. (The emulated stream runs nothing until something waits for it.)
TEST(CudaEmu, GradientBucketsWaitForTheirMarkNotTheTrainersThread) {
  auto be = make_backend("cuda-emu");
  const size_t n = 512;
  auto* g = static_cast<float*>(be->allocate(n * sizeof(float)));
  be->copy_to_device(g, std::vector<float>(n, 1.0f).data(), n * sizeof(float));
  SeeingComm comm;
  dist::GradSync sync(comm, *be, g, n, {{0, n}}, false, dist::CommType::f32);
  simt::reset_stats();
  be->scale(g, 3.0f, n);  // the backward's last write to the bucket, queued
  sync.start(0, be->mark_queued());
  be->scale(g, 5.0f, n);  // the next layer's work, queued after the mark
  sync.wait();
  const simt::Stats s = simt::stats();
  EXPECT_EQ(s.host_syncs, 0u) << "the trainer's thread waited for the device";
  EXPECT_EQ(s.event_syncs, 1u);
  ASSERT_EQ(comm.seen.size(), n);
  EXPECT_EQ(comm.seen[0], 3.0f) << "reduced before the bucket's gradients were written, or after "
                                   "later work";
  EXPECT_EQ(comm.seen[n - 1], 3.0f);
  be->synchronize();
  be->deallocate(g);
}

TEST(CudaEmu, TheProductsOfAGpt2Step124mAreTheReviewedSet) {
  test::TempDir d;
  for (const char* p : {"bf16", "fp8"}) {
    const auto got = gpt2_124m_products(p, d);
    EXPECT_GE(got.size(), 6u) << p;
    expect_golden(got, std::string("products_gpt2_124m_") + p + ".txt");
  }
}

}  // namespace
}  // namespace gt
