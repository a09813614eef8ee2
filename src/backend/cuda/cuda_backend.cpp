// backend/cuda/cuda_backend.cpp: the CUDA runtime of the CUDA backend (cuda_backend_impl.h):
// device memory, one stream per backend (copies to the host wait for it), cuBLASLt products,
// and the kernels of kernels.cu.
#include "backend/cuda/cuda_backend.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "backend/cuda/cuda_backend_impl.h"
#include "core/error.h"

namespace gt {
namespace {

using cuda_impl::LtOperand;

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
  std::string describe() const {
    return fmt::format("{}, compute capability {}.{}", gpu_name_, cc_ / 10, cc_ % 10);
  }
  ~CudaRuntime() {
    sync_noexcept();
    if (workspace_) cudaFree(workspace_);
    if (lt_) cublasLtDestroy(lt_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  CudaRuntime(const CudaRuntime&) = delete;
  CudaRuntime& operator=(const CudaRuntime&) = delete;

  cudaStream_t stream() const { return stream_; }
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
  void sync_noexcept() noexcept {
    if (stream_) cudaStreamSynchronize(stream_);
  }

  /// D (m x n, column-major, type td) = op(A) op(B) + beta D through cuBLASLt, fp32
  /// accumulation, with the bias (length m; type of D) and/or GELU epilogue. Algorithms
  /// without split-K reductions only (CUBLASLT_REDUCTION_SCHEME_NONE): deterministic. With
  /// may_fail, returns false when cuBLASLt has no algorithm for the epilogue (the caller then
  /// applies it itself); otherwise that is an error.
  bool product(const cuda_plan::Gemm& g, LtOperand A, LtOperand B, void* Dp, cudaDataType_t td,
               const void* bias, bool gelu, bool may_fail = false) {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    struct Cleanup {
      cublasLtMatmulDesc_t& op;
      cublasLtMatrixLayout_t &la, &lb, &ld;
      cublasLtMatmulPreference_t& pref;
      ~Cleanup() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (ld) cublasLtMatrixLayoutDestroy(ld);
        if (lb) cublasLtMatrixLayoutDestroy(lb);
        if (la) cublasLtMatrixLayoutDestroy(la);
        if (op) cublasLtMatmulDescDestroy(op);
      }
    } cleanup{op, la, lb, ld, pref};
    lt_check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
    const cublasOperation_t ta = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
             "set TRANSA");
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
             "set TRANSB");
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_DEFAULT;
    if (bias && gelu)
      ep = CUBLASLT_EPILOGUE_GELU_BIAS;
    else if (bias)
      ep = CUBLASLT_EPILOGUE_BIAS;
    else if (gelu)
      ep = CUBLASLT_EPILOGUE_GELU;
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)),
             "set EPILOGUE");
    if (bias)
      lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                              sizeof(bias)),
               "set BIAS_POINTER");
    if (A.scale)  // fp8: the dequantization factors (cuBLASLt docs, "FP8 scaling")
      lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &A.scale,
                                              sizeof(A.scale)),
               "set A_SCALE_POINTER");
    if (B.scale)
      lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &B.scale,
                                              sizeof(B.scale)),
               "set B_SCALE_POINTER");
    lt_check(cublasLtMatrixLayoutCreate(&la, A.type, g.ta ? g.k : g.m, g.ta ? g.m : g.k, g.lda),
             "layout A");
    lt_check(cublasLtMatrixLayoutCreate(&lb, B.type, g.tb ? g.n : g.k, g.tb ? g.k : g.n, g.ldb),
             "layout B");
    lt_check(cublasLtMatrixLayoutCreate(&ld, td, g.m, g.n, g.ldd), "layout D");
    lt_check(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate");
    const uint64_t ws = kWorkspaceBytes;
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof(ws)),
             "set MAX_WORKSPACE_BYTES");
    // cuBLASLt assumes 256-byte aligned operands unless told (CUBLASLT_MATMUL_PREF_MIN_
    // ALIGNMENT_*_BYTES); tensors inside the model's arenas may be less aligned
    const std::pair<cublasLtMatmulPreferenceAttributes_t, const void*> aligned[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, A.p},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, B.p},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, Dp},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, Dp}};
    for (const auto& [attr, ptr] : aligned) {
      const auto addr = reinterpret_cast<uintptr_t>(ptr);
      const uint32_t align = static_cast<uint32_t>(std::min<uintptr_t>(addr & (~addr + 1), 256));
      lt_check(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)),
               "set MIN_ALIGNMENT");
    }
    const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                  &reduction, sizeof(reduction)),
             "set REDUCTION_SCHEME_MASK");
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    const cublasStatus_t hs =
        cublasLtMatmulAlgoGetHeuristic(lt_, op, la, lb, ld, ld, pref, 1, &heur, &found);
    if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
      if (may_fail) return false;
      throw Error(fmt::format(
          "cuBLASLt has no algorithm for the product ({} x {} x {}, transa {}, transb {}, "
          "epilogue {}): {}",
          g.m, g.n, g.k, g.ta, g.tb, static_cast<int>(ep), cublasLtGetStatusString(hs)));
    }
    const float alpha = 1.0f, beta = g.beta;
    lt_check(cublasLtMatmul(lt_, op, &alpha, A.p, la, B.p, lb, &beta, Dp, ld, Dp, ld, &heur.algo,
                            workspace_, kWorkspaceBytes, stream_),
             "cublasLtMatmul");
    return true;
  }

 private:
  int index_;
  int cc_ = 0;
  std::string gpu_name_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
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
