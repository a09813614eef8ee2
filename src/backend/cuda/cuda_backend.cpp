// backend/cuda/cuda_backend.cpp: the CUDA runtime of the CUDA backend (cuda_backend_impl.h):
// device memory, one stream per backend (copies to the host wait for it), cuBLASLt products,
// and the kernels of kernels.cu.
#include "backend/cuda/cuda_backend.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/lt_emulation.h"
#include "core/error.h"

namespace gt {
namespace {

using cuda_impl::LtOperand;
using cuda_plan::LtType;

cudaDataType_t cuda_type(LtType t) {
  switch (t) {
    case LtType::bf16:
      return CUDA_R_16BF;
    case LtType::f16:
      return CUDA_R_16F;
    case LtType::e4m3:
      return CUDA_R_8F_E4M3;
    case LtType::e5m2:
      return CUDA_R_8F_E5M2;
    default:
      return CUDA_R_32F;
  }
}

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(
        fmt::format("CUDA: {} failed: {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e)));
}
void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(fmt::format("cuBLASLt: {} failed: {}", what, cublasLtGetStatusString(s)));
}

/// The GPU: cudaMalloc'd memory, one non-blocking stream, a cuBLASLt handle and workspace.
class CudaRuntime {
 public:
  using Kernels = cuda_kernels::DeviceKernels;
  static constexpr Device kDevice = Device::cuda;
  /// Bytes of cuBLASLt's workspace: 32 MiB, as NVIDIA recommends for Hopper (cuBLAS docs,
  /// "cublasSetWorkspace").
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;
  static std::string name(int index) { return fmt::format("cuda:{}", index); }

  explicit CudaRuntime(int index) : index_(index) {
    cuda_check(cudaSetDevice(index), "cudaSetDevice");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    lt_check(cublasLtCreate(&lt_), "cublasLtCreate");
    workspace_ = malloc(kWorkspaceBytes);
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    cc_ = prop.major * 10 + prop.minor;
    gpu_name_ = prop.name;
  }
  /// fp8 tensor-core products: compute capability 8.9 (Ada) and 9.0 (Hopper) and later.
  bool fp8_capable() const { return cc_ >= 89; }
  /// cuDNN's fused attention on this stream (loads libcudnn.so.9; gt::Error when it cannot).
  void use_cudnn_attention() {
    if (!sdpa_) sdpa_ = std::make_unique<CudnnAttention>(stream_);
  }
  void sdpa_forward(uint16_t* out, float* lse, const uint16_t* qkv, const SdpaShape& s) {
    use_cudnn_attention();
    sdpa_->forward(out, lse, qkv, s);
  }
  void sdpa_backward(uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv, const uint16_t* out,
                     const float* lse, const SdpaShape& s) {
    use_cudnn_attention();
    sdpa_->backward(dqkv, dout, qkv, out, lse, s);
  }
  std::string describe() const {
    return fmt::format("{}, compute capability {}.{}", gpu_name_, cc_ / 10, cc_ % 10);
  }
  ~CudaRuntime() {
    sync_noexcept();
    for (auto& [id, e] : marks_) cudaEventDestroy(e);
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
    sdpa_.reset();
    if (exec_) cudaGraphExecDestroy(exec_);
    destroy_plans();
    if (workspace_) cudaFree(workspace_);
    if (lt_) cublasLtDestroy(lt_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  CudaRuntime(const CudaRuntime&) = delete;
  CudaRuntime& operator=(const CudaRuntime&) = delete;

  cudaStream_t stream() const { return stream_; }
  /// cudaSetDevice on the calling thread.
  void bind_thread() { cuda_check(cudaSetDevice(index_), "cudaSetDevice"); }
  void* malloc(size_t bytes) {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
    if (e != cudaSuccess)
      throw Error(fmt::format("cuda:{}: cannot allocate {} bytes of device memory: {}", index_,
                              bytes, cudaGetErrorString(e)));
    return p;  // aligned to 256 bytes
  }
  void free(void* p) {
    cudaStreamSynchronize(stream_);  // work queued on p finishes first
    cudaFree(p);
  }
  void memset0(void* p, size_t bytes) {
    cuda_check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync");
  }
  void h2d(void* dst, const void* src, size_t bytes) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync (to the device)");
    sync();  // the caller may free or reuse src on return
  }
  void d2h(void* dst, const void* src, size_t bytes) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync (to the host)");
    sync();
  }
  void sync() { cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  /// cudaEventRecord on the stream of an event from a pool (no timing): its number, for
  /// wait_mark() on another thread.
  uint64_t mark() {
    std::lock_guard lock(events_mutex_);
    cudaEvent_t e = nullptr;
    if (!free_events_.empty()) {
      e = free_events_.back();
      free_events_.pop_back();
    } else {
      cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    }
    const cudaError_t r = cudaEventRecord(e, stream_);
    if (r != cudaSuccess) free_events_.push_back(e);
    cuda_check(r, "cudaEventRecord");
    marks_.emplace(++last_mark_, e);
    return last_mark_;
  }
  /// cudaEventSynchronize of mark m (0, or one already waited for: returns at once); its
  /// event goes back to the pool.
  void wait_mark(uint64_t m) {
    cudaEvent_t e = nullptr;
    {
      std::lock_guard lock(events_mutex_);
      const auto it = marks_.find(m);
      if (it == marks_.end()) return;
      e = it->second;
      marks_.erase(it);
    }
    const cudaError_t r = cudaEventSynchronize(e);
    {
      std::lock_guard lock(events_mutex_);
      free_events_.push_back(e);
    }
    cuda_check(r, "cudaEventSynchronize");
  }
  /// Pinned (page-locked) host memory: copies from and to it are asynchronous.
  void* malloc_host(size_t bytes) {
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault);
    if (e != cudaSuccess)
      throw Error(fmt::format("cuda:{}: cannot allocate {} bytes of pinned host memory: {}", index_,
                              bytes, cudaGetErrorString(e)));
    return p;
  }
  void free_host(void* p) {
    cudaStreamSynchronize(stream_);  // a queued copy may still use it
    cudaFreeHost(p);
  }
  void h2d_async(void* dst, const void* src, size_t bytes) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync (pinned to the device)");
  }
  void d2h_async(void* dst, const void* src, size_t bytes) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync (to pinned memory)");
  }
  void sync_noexcept() noexcept {
    if (stream_) cudaStreamSynchronize(stream_);
  }

  /// cudaStreamBeginCapture in thread-local mode: the calls of this thread that CUDA deems
  /// unsafe during a capture (cudaMalloc, synchronizations) fail it; other threads (the
  /// energy meter's) are not affected (CUDA Runtime API, cudaStreamCaptureMode).
  void begin_capture() {
    const cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) (void)cudaGetLastError();  // the ops queued without it must not see it
    cuda_check(e, "cudaStreamBeginCapture");
  }
  /// Ends the capture and launches it: the instantiated graph is updated in place when the
  /// new one has its shape (cudaGraphExecUpdate: same nodes and dependencies; kernel
  /// arguments, launch dimensions and copy addresses may differ), else instantiated again.
  /// Returns true when updated. Errors: gt::Error naming the call (an invalidated capture:
  /// cudaStreamEndCapture's error).
  bool end_capture_and_launch() {
    try {
      return end_and_launch();
    } catch (...) {
      (void)cudaGetLastError();  // so that the step queued again does not report it
      throw;
    }
  }
  bool end_and_launch() {
    cudaGraph_t g = nullptr;
    cuda_check(cudaStreamEndCapture(stream_, &g), "cudaStreamEndCapture");
    bool updated = false;
    if (exec_) {
      cudaGraphExecUpdateResultInfo info{};
      updated = cudaGraphExecUpdate(exec_, g, &info) == cudaSuccess;
      if (!updated) {
        (void)cudaGetLastError();  // the update's refusal is not an error of the stream
        cudaGraphExecDestroy(exec_);
        exec_ = nullptr;
      }
    }
    if (!exec_) {
      const cudaError_t e = cudaGraphInstantiate(&exec_, g, 0);
      cudaGraphDestroy(g);
      if (e != cudaSuccess) exec_ = nullptr;
      cuda_check(e, "cudaGraphInstantiate");
    } else {
      cudaGraphDestroy(g);
    }
    cuda_check(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch");
    return updated;
  }
  /// Ends a capture that is abandoned (an op threw): its graph is dropped.
  void abandon_capture() noexcept {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_, &st) != cudaSuccess || st == cudaStreamCaptureStatusNone) {
      (void)cudaGetLastError();
      return;
    }
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(stream_, &g);
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError();
  }

  /// D (m x n, column-major, type td) = op(A) op(B) + beta D through cuBLASLt, fp32
  /// accumulation, with the bias (length m; type of D) and/or a GELU epilogue (host_plan.h's
  /// LtEpilogue: GELU, GELU with its input written to aux, or DGELU reading aux), or a bias
  /// gradient written to bias (BGRADA/BGRADB; type of D). The plan of each
  /// distinct call (sizes, layouts, types, epilogue, alignments) is made once: descriptors
  /// and the heuristic's algorithm are kept, and a call only points the plan at its bias and
  /// scale pointers. Split-K is allowed with every reduction scheme cuBLASLt has: each keeps
  /// the order of the partial sums fixed (cublasLt.h, cublasLtReductionScheme_t), so results
  /// are the same run to run. With may_fail, returns false when cuBLASLt has no algorithm for
  /// the epilogue, or refuses an epilogue's call as not supported or invalid (nothing is
  /// written; the caller then applies it itself); otherwise that is an error.
  bool product(const cuda_plan::Gemm& g, LtOperand A, LtOperand B, void* Dp, LtType td,
               const void* bias, cuda_plan::LtEpilogue ep, bool may_fail = false) {
    const uint32_t al_a = g.align_a ? g.align_a : cuda_plan::alignment_of(A.p);
    const uint32_t al_b = g.align_b ? g.align_b : cuda_plan::alignment_of(B.p);
    const uint32_t al_d = g.align_d ? g.align_d : cuda_plan::alignment_of(Dp);
    const PlanKey key{g.m,
                      g.n,
                      g.k,
                      g.lda,
                      g.ldb,
                      g.ldd,
                      g.ta,
                      g.tb,
                      g.beta,
                      A.type,
                      B.type,
                      td,
                      bias != nullptr,
                      ep.kind,
                      ep.ld,
                      A.scale != nullptr,
                      B.scale != nullptr,
                      al_a,
                      al_b,
                      al_d,
                      bias ? cuda_plan::alignment_of(bias) : 0u,
                      ep.aux ? cuda_plan::alignment_of(ep.aux) : 0u};
    auto it = plans_.find(key);
    if (it == plans_.end())
      it = plans_.emplace(key, make_plan(key, bias, ep.aux, A.scale, B.scale)).first;
    Plan& p = it->second;
    if (!p.found) {
      if (may_fail) return false;
      throw Error(fmt::format(
          "cuBLASLt has no algorithm for the product ({} x {} x {}, transa {}, transb {}, "
          "epilogue bias {} {}): {}",
          g.m, g.n, g.k, g.ta, g.tb, bias != nullptr, cuda_plan::epi_name(ep.kind), p.why));
    }
    if (bias)
      lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                              sizeof(bias)),
               "set BIAS_POINTER");
    if (ep.aux)
      lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                              &ep.aux, sizeof(ep.aux)),
               "set EPILOGUE_AUX_POINTER");
    if (A.scale)  // fp8: the dequantization factors (cuBLASLt docs, "FP8 scaling")
      lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &A.scale,
                                              sizeof(A.scale)),
               "set A_SCALE_POINTER");
    if (B.scale)
      lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &B.scale,
                                              sizeof(B.scale)),
               "set B_SCALE_POINTER");
    const float alpha = 1.0f, beta = g.beta;
    const cublasStatus_t st =
        cublasLtMatmul(lt_, p.op, &alpha, A.p, p.la, B.p, p.lb, &beta, Dp, p.ld, Dp, p.ld, &p.algo,
                       workspace_, kWorkspaceBytes, stream_);
    if (st != CUBLAS_STATUS_SUCCESS && may_fail && ep.kind != cuda_plan::LtEpi::none &&
        (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE)) {
      // the epilogue refused at the call, not by the heuristic: nothing was written; the
      // caller applies it itself, now and at every later call of this plan
      p.found = false;
      p.why = cublasLtGetStatusString(st);
      return false;
    }
    if (st != CUBLAS_STATUS_SUCCESS)  // the product named, as the emulated cuBLASLt logs it
      throw Error(fmt::format(
          "cuBLASLt: cublasLtMatmul failed: {} ({})", cublasLtGetStatusString(st),
          cuda_lt::describe({g, A.type, B.type, td, A.p, B.p, Dp, bias, ep, A.scale, B.scale})));
    return true;
  }

 private:
  /// What makes two calls the same plan.
  struct PlanKey {
    int64_t m, n, k, lda, ldb, ldd;
    bool ta, tb;
    float beta;
    LtType a, b, d;
    bool bias;
    cuda_plan::LtEpi ep;
    int64_t ld_aux;
    bool scale_a, scale_b;
    uint32_t al_a, al_b, al_d;
    uint32_t al_bias;  // the heuristic saw a bias pointer so aligned (0: no bias)
    uint32_t al_aux;   // ... and an aux matrix so aligned (0: none)
    auto tie() const {
      return std::tie(m, n, k, lda, ldb, ldd, ta, tb, beta, a, b, d, bias, ep, ld_aux, scale_a,
                      scale_b, al_a, al_b, al_d, al_bias, al_aux);
    }
    bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
  };
  /// A plan: the descriptors and the algorithm (found false, with why, when there is none).
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool found = false;
    std::string why;
  };
  /// The plan of k; the heuristic sees the first call's bias and scale pointers (device
  /// memory, as every later call's), not stand-ins.
  Plan make_plan(const PlanKey& k, const void* bias, const void* aux, const float* scale_a,
                 const float* scale_b) {
    Plan p;
    lt_check(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
    const cublasOperation_t ta = k.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = k.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
             "set TRANSA");
    lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
             "set TRANSB");
    const cublasLtEpilogue_t ep = epilogue(k.ep, k.bias);
    lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)),
             "set EPILOGUE");
    if (aux) {  // GELU_AUX / DGELU: the aux matrix, D's type (the default aux data type)
      lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &k.ld_aux,
                                              sizeof(k.ld_aux)),
               "set EPILOGUE_AUX_LD");
      lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                              sizeof(aux)),
               "set EPILOGUE_AUX_POINTER");
    }
    // the pointers of this plan's first call (every call sets its own)
    if (k.bias)
      lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                              sizeof(bias)),
               "set BIAS_POINTER");
    if (cuda_plan::bias_gradient(k.ep)) {  // BGRADA/BGRADB: the gradient in D's type, said
      // explicitly (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER: "Bias gradient vector
      // elements are the same type as the output elements"; _BIAS_DATA_TYPE)
      const int32_t bt = cuda_type(k.d);
      lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                              sizeof(bt)),
               "set BIAS_DATA_TYPE");
    }
    if (k.scale_a)
      lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_a,
                                              sizeof(scale_a)),
               "set A_SCALE_POINTER");
    if (k.scale_b)
      lt_check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_b,
                                              sizeof(scale_b)),
               "set B_SCALE_POINTER");
    lt_check(cublasLtMatrixLayoutCreate(&p.la, cuda_type(k.a), k.ta ? k.k : k.m, k.ta ? k.m : k.k,
                                        k.lda),
             "layout A");
    lt_check(cublasLtMatrixLayoutCreate(&p.lb, cuda_type(k.b), k.tb ? k.n : k.k, k.tb ? k.k : k.n,
                                        k.ldb),
             "layout B");
    lt_check(cublasLtMatrixLayoutCreate(&p.ld, cuda_type(k.d), k.m, k.n, k.ldd), "layout D");
    cublasLtMatmulPreference_t pref = nullptr;
    lt_check(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate");
    const uint64_t ws = kWorkspaceBytes;
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof(ws)),
             "set MAX_WORKSPACE_BYTES");
    // cuBLASLt assumes 256-byte aligned operands unless told; the plan declares its alignments
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligned[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, k.al_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, k.al_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, k.al_d},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, k.al_d}};
    for (const auto& [attr, align] : aligned)
      lt_check(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)),
               "set MIN_ALIGNMENT");
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    const cublasStatus_t hs =
        cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.la, p.lb, p.ld, p.ld, pref, 1, &heur, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    p.found = hs == CUBLAS_STATUS_SUCCESS && found > 0;
    if (p.found)
      p.algo = heur.algo;
    else
      p.why = cublasLtGetStatusString(hs);
    return p;
  }
  /// cuBLASLt's epilogue for kind e with or without a bias (cublasLt.h, cublasLtEpilogue_t).
  static cublasLtEpilogue_t epilogue(cuda_plan::LtEpi e, bool bias) {
    switch (e) {
      case cuda_plan::LtEpi::gelu:
        return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
      case cuda_plan::LtEpi::gelu_aux:
        return bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
      case cuda_plan::LtEpi::dgelu:
        return CUBLASLT_EPILOGUE_DGELU;  // with no bias (refused before)
      case cuda_plan::LtEpi::bgrada:     // the bias pointer is the gradient written
        return CUBLASLT_EPILOGUE_BGRADA;
      case cuda_plan::LtEpi::bgradb:
        return CUBLASLT_EPILOGUE_BGRADB;
      case cuda_plan::LtEpi::none:
        break;
    }
    return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
  void destroy_plans() {
    for (auto& [k, p] : plans_) {
      if (p.ld) cublasLtMatrixLayoutDestroy(p.ld);
      if (p.lb) cublasLtMatrixLayoutDestroy(p.lb);
      if (p.la) cublasLtMatrixLayoutDestroy(p.la);
      if (p.op) cublasLtMatmulDescDestroy(p.op);
    }
    plans_.clear();
  }
  std::map<PlanKey, Plan> plans_;

  int index_;
  int cc_ = 0;
  std::string gpu_name_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;        ///< the step's instantiated graph (train.cuda_graph)
  std::unique_ptr<CudnnAttention> sdpa_;  ///< train.attention = cudnn
  std::mutex events_mutex_;               ///< marks are made and waited on two threads
  std::unordered_map<uint64_t, cudaEvent_t> marks_;  ///< recorded, not yet waited for
  std::vector<cudaEvent_t> free_events_;
  uint64_t last_mark_ = 0;
};

}  // namespace
int cuda_device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a failed runtime start
    if (why) *why = fmt::format("{} ({})", cudaGetErrorName(e), cudaGetErrorString(e));
    return 0;
  }
  if (n == 0 && why) *why = "the CUDA runtime reports 0 devices";
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(int index, const BackendOptions& opt) {
  std::string why;
  const int n = cuda_device_count(&why);
  if (n == 0) throw Error(fmt::format("train.device = 'cuda:{}': no CUDA device: {}", index, why));
  if (index >= n)
    throw Error(
        fmt::format("train.device = 'cuda:{}': no such CUDA device; this process sees {} "
                    "(cuda:0 .. cuda:{}; CUDA_VISIBLE_DEVICES selects them)",
                    index, n, n - 1));
  return std::make_unique<cuda_impl::CudaBackendT<CudaRuntime>>(index, opt);
}

}  // namespace gt
