// dist/nccl_comm.cpp: see nccl_comm.h.
#include "dist/nccl_comm.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <chrono>
#include <thread>
#include <vector>

#include "core/error.h"

namespace gt::dist {

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(fmt::format("NCCL communicator: {}: CUDA error {}", what, cudaGetErrorString(e)));
}
void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess && r != ncclInProgress)
    throw Error(fmt::format("NCCL communicator: {}: {}", what, ncclGetErrorString(r)));
}

ncclDataType_t nccl_type(CommType t) {
  switch (t) {
    case CommType::f32:
      return ncclFloat32;
    case CommType::bf16:
      return ncclBfloat16;
    case CommType::f64:
      return ncclFloat64;
    case CommType::i64:
      return ncclInt64;
    case CommType::byte:
      return ncclUint8;
  }
  return ncclUint8;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& boot, int device, double timeout_s)
      : rank_(boot.rank()), size_(boot.size()), device_(device), timeout_s_(timeout_s) {
    cuda_check(cudaSetDevice(device), "cudaSetDevice");
    ncclUniqueId id;
    if (rank_ == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    boot.broadcast(&id, sizeof id, 0);
    nccl_check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_check(cudaMalloc(&scratch_, 16), "cudaMalloc");
  }
  ~NcclCommunicator() override {
    if (!failed_) ncclCommDestroy(comm_);
    cudaFree(scratch_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }
  bool device_buffers() const override { return true; }

  void all_reduce(void* buf, size_t count, CommType t, ReduceOp op) override {
    check(t != CommType::byte, "all_reduce: bytes cannot be summed");
    nccl_check(ncclAllReduce(buf, buf, count, nccl_type(t), op == ReduceOp::sum ? ncclSum : ncclMax,
                             comm_, stream_),
               "ncclAllReduce");
    finish("all_reduce", count, t, 2 * count * comm_type_size(t) * (size_ - 1) / size_);
  }

  void reduce_scatter(const void* send, CommType send_type, float* recv,
                      const std::vector<size_t>& counts) override {
    check(send_type == CommType::f32,
          "NCCL reduce_scatter: only f32 gradients (train.grad_comm = 'fp32')");
    check((int)counts.size() == size_, "reduce_scatter: one count per rank expected");
    size_t off = 0, total = 0;
    for (size_t c : counts) total += c;
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < size_; ++r) {
      if (counts[r] > 0)
        nccl_check(ncclReduce(static_cast<const float*>(send) + off, r == rank_ ? recv : nullptr,
                              counts[r], ncclFloat32, ncclSum, r, comm_, stream_),
                   "ncclReduce");
      off += counts[r];
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    finish("reduce_scatter", total, send_type, (total - counts[rank_]) * sizeof(float));
  }

  void all_gather(const void* send, void* recv, const std::vector<size_t>& counts,
                  CommType t) override {
    check((int)counts.size() == size_, "all_gather: one count per rank expected");
    const size_t es = comm_type_size(t);
    size_t off = 0;
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < size_; ++r) {
      char* dst = static_cast<char*>(recv) + off * es;
      if (counts[r] > 0)
        nccl_check(ncclBroadcast(r == rank_ ? send : dst, dst, counts[r] * es, ncclUint8, r, comm_,
                                 stream_),
                   "ncclBroadcast");
      off += counts[r];
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    finish("all_gather", off, t, counts[rank_] * es * (size_ - 1));
  }

  void broadcast(void* buf, size_t bytes, int root) override {
    nccl_check(ncclBroadcast(buf, buf, bytes, ncclUint8, root, comm_, stream_), "ncclBroadcast");
    finish("broadcast", bytes, CommType::byte, rank_ == root ? bytes * (size_ - 1) : 0);
  }

  void barrier() override {
    nccl_check(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_),
               "ncclAllReduce (barrier)");
    finish("barrier", 0, CommType::byte, 0);
  }

 private:
  // Polls the stream until the collective is done (Communicator::wait_for paces the polls);
  // aborts the communicator when NCCL reports an error or after timeout_s.
  void finish(const char* what, size_t count, CommType t, size_t bytes) {
    auto fail = [&](const std::string& why) {
      failed_ = true;
      ncclCommAbort(comm_);
      throw Error(fmt::format("rank {} of {}: NCCL {} of {} {} elements on cuda:{} {}", rank_,
                              size_, what, count, comm_type_name(t), device_, why));
    };
    wait_for(
        [&] {
          const cudaError_t q = cudaStreamQuery(stream_);
          if (q == cudaSuccess) return true;
          if (q != cudaErrorNotReady) cuda_check(q, what);
          ncclResult_t async = ncclSuccess;
          ncclCommGetAsyncError(comm_, &async);
          if (async != ncclSuccess) fail(fmt::format("failed: {}", ncclGetErrorString(async)));
          return false;
        },
        timeout_s_,
        [&] {
          fail(
              fmt::format("did not complete within dist.timeout_s = {} s: another rank has died "
                          "or stopped responding",
                          timeout_s_));
        },
        bytes);
  }

  int rank_, size_, device_;
  double timeout_s_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  bool failed_ = false;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int cuda_device,
                                                     double timeout_s) {
  return std::make_unique<NcclCommunicator>(bootstrap, cuda_device, timeout_s);
}

int cuda_device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

}  // namespace gt::dist
