// The communicators: the local one and the bf16 conversion here; the MPI one on 2 ranks (this
// binary re-started under mpirun with GT_COMM_WORKER=1 runs the CommWorker cases on each rank).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <numeric>

#include "dist/communicator.h"
#include "dist/grad_sync.h"
#include "dist/mpi_comm.h"
#include "dist_util.h"
#include "engine/test_helpers.h"

namespace gt::test {
namespace {

using dist::CommType;

// (Element by element: GCC 12.2 with -march=native on an AVX-512 CPU compiles the constant
// std::vector<size_t>{1, 1, 0, 0} as four 1s, a broadcast of the first element.)
TEST(Comm, SplitEvenly) {
  const std::vector<size_t> a = dist::split_evenly(10, 3), b = dist::split_evenly(2, 4);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0], 4u);
  EXPECT_EQ(a[1], 3u);
  EXPECT_EQ(a[2], 3u);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0] + b[1], 2u);
  EXPECT_EQ(b[0], 1u);
  EXPECT_EQ(b[2] + b[3], 0u);
}

TEST(Comm, Bf16RoundsToNearestEven) {
  EXPECT_EQ(dist::float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(dist::bf16_to_float(dist::float_to_bf16(1.0f + 1.0f / 256)), 1.0f);  // tie: even
  EXPECT_EQ(dist::bf16_to_float(dist::float_to_bf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isnan(dist::bf16_to_float(dist::float_to_bf16(NAN))));
}

TEST(Comm, RunsOnTwoMpiRanks) {
  TempDir dir;
  const char* self = "/proc/self/exe";
  char path[4096] = {0};
  ASSERT_GT(readlink(self, path, sizeof path - 1), 0);
  auto [rc, out] = run_to_end(
      "GT_COMM_WORKER=1 " + mpirun(2) + path + " --gtest_color=no --gtest_filter='CommWorker.*'",
      dir.file("worker.log"), 120);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
}

// Each rank r contributes r + 1 + i/1000 at element i; sums in rank order.
TEST(CommWorker, Collectives) {
  if (!std::getenv("GT_COMM_WORKER")) GTEST_SKIP() << "runs under mpirun (Comm.RunsOnTwoMpiRanks)";
  dist::MpiRuntime mpi;
  auto comm = dist::make_mpi_communicator(30);
  const int r = comm->rank(), n = comm->size();
  ASSERT_EQ(n, 2);
  // all_reduce f64 sum and max
  double x[2] = {double(r + 1), double(r + 1)};
  comm->all_reduce(x, 1, CommType::f64, dist::ReduceOp::sum);
  comm->all_reduce(x + 1, 1, CommType::f64, dist::ReduceOp::max);
  EXPECT_EQ(x[0], 3.0);
  EXPECT_EQ(x[1], 2.0);
  // reduce_scatter of 7 floats in chunks 4 + 3, in place, then all_gather: an all-reduce
  const std::vector<size_t> counts = dist::split_evenly(7, n);
  std::vector<float> g(7);
  for (int i = 0; i < 7; ++i) g[i] = float(r + 1) + i / 1000.0f;
  const size_t off = r == 0 ? 0 : counts[0];
  comm->reduce_scatter(g.data(), CommType::f32, g.data() + off, counts);
  for (size_t i = 0; i < counts[r]; ++i)
    EXPECT_EQ(g[off + i], (1.0f + (off + i) / 1000.0f) + (2.0f + (off + i) / 1000.0f));
  comm->all_gather(g.data() + off, g.data(), counts, CommType::f32);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(g[i], (1.0f + i / 1000.0f) + (2.0f + i / 1000.0f)) << i;
  // bf16 on the wire, summed in fp32
  std::vector<uint16_t> h(7);
  for (int i = 0; i < 7; ++i) h[i] = dist::float_to_bf16(float(r + 1) + i / 1000.0f);
  std::vector<float> mine(counts[r]);
  comm->reduce_scatter(h.data(), CommType::bf16, mine.data(), counts);
  for (size_t i = 0; i < counts[r]; ++i)
    EXPECT_EQ(mine[i], dist::bf16_to_float(dist::float_to_bf16(1.0f + (off + i) / 1000.0f)) +
                           dist::bf16_to_float(dist::float_to_bf16(2.0f + (off + i) / 1000.0f)));
  // broadcast from rank 1, barrier
  int v = r == 1 ? 42 : 0;
  comm->broadcast(&v, sizeof v, 1);
  EXPECT_EQ(v, 42);
  comm->barrier();
  EXPECT_GT(comm->stats().collectives, 6);
  EXPECT_GT(comm->stats().bytes_sent, 0);

  // GradSync: three buckets, zero = 0 (all-reduced) and zero = 1 (this rank's chunks only)
  struct HostMem final : DeviceMemory {
    Device device() const override { return Device::cpu; }
    void* allocate(size_t b) override { return std::malloc(b); }
    void deallocate(void* p) override { std::free(p); }
    void zero(void* p, size_t b) override { std::memset(p, 0, b); }
    void copy_to_device(void* d, const void* s, size_t b) override { std::memcpy(d, s, b); }
    void copy_to_host(void* d, const void* s, size_t b) override { std::memcpy(d, s, b); }
    void synchronize() override {}
  } mem;
  for (int zero1 = 0; zero1 < 2; ++zero1) {
    std::vector<float> grads(20);
    for (int i = 0; i < 20; ++i) grads[i] = float(r + 1) * (i + 1);
    std::vector<dist::Range> buckets = {{15, 20}, {4, 15}, {0, 4}};
    dist::GradSync sync(*comm, mem, grads.data(), grads.size(), buckets, zero1 == 1, CommType::f32);
    for (size_t b = 0; b < buckets.size(); ++b) sync.start(b);
    sync.wait();
    for (size_t b = 0; b < buckets.size(); ++b) {
      const dist::Range c = sync.chunk(b);
      for (size_t i = buckets[b].begin; i < buckets[b].end; ++i) {
        const bool kept = !zero1 || (i >= c.begin && i < c.end);
        EXPECT_EQ(grads[i], kept ? 3.0f * (i + 1) : float(r + 1) * (i + 1))
            << "zero=" << zero1 << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace gt::test
