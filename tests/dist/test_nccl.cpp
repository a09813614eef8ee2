// The NCCL communicator on the GPUs of this machine (min(2, devices) ranks under mpirun); skipped
// with "skipped: no CUDA device" where there is none.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "dist/mpi_comm.h"
#include "dist/nccl_comm.h"
#include "dist_util.h"
#include "engine/test_helpers.h"

namespace gt::test {
namespace {

TEST(Nccl, CollectivesOnTheGpus) {
  const int n = dist::cuda_device_count();
  if (n < 1) GTEST_SKIP() << "skipped: no CUDA device";
  TempDir dir;
  char path[4096] = {0};
  ASSERT_GT(readlink("/proc/self/exe", path, sizeof path - 1), 0);
  auto [rc, out] = run_to_end("GT_NCCL_WORKER=1 " + mpirun(std::min(n, 2)) + path +
                                  " --gtest_color=no --gtest_filter='NcclWorker.*'",
                              dir.file("worker.log"), 120);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
}

TEST(NcclWorker, Collectives) {
  if (!std::getenv("GT_NCCL_WORKER"))
    GTEST_SKIP() << "runs under mpirun (Nccl.CollectivesOnTheGpus)";
  dist::MpiRuntime mpi;
  auto host = dist::make_mpi_communicator(30);
  auto comm = dist::make_nccl_communicator(*host, host->rank(), 30);
  const int r = comm->rank(), n = comm->size();
  const std::vector<size_t> counts = dist::split_evenly(7, n);
  std::vector<float> g(7);
  for (int i = 0; i < 7; ++i) g[i] = float(r + 1) + i / 1000.0f;
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 7 * sizeof(float)), cudaSuccess);
  cudaMemcpy(d, g.data(), 7 * sizeof(float), cudaMemcpyHostToDevice);
  size_t off = 0;
  for (int k = 0; k < r; ++k) off += counts[k];
  comm->reduce_scatter(d, dist::CommType::f32, d + off, counts);
  comm->all_gather(d + off, d, counts, dist::CommType::f32);
  cudaMemcpy(g.data(), d, 7 * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < 7; ++i) {
    float want = 0;
    for (int k = 0; k < n; ++k) want += float(k + 1) + i / 1000.0f;
    EXPECT_NEAR(g[i], want, 1e-6) << i;
  }
  comm->all_reduce(d, 7, dist::CommType::f32, dist::ReduceOp::max);
  comm->barrier();
  cudaFree(d);
}

}  // namespace
}  // namespace gt::test
