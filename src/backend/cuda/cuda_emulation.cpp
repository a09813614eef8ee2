// backend/cuda/cuda_emulation.cpp: the CUDA backend on the CPU (train.device = cuda-emu):
// cuda_backend_impl.h over HostRuntime, whose memory, stream and kernels are the SIMT
// runtime's (backend/simt: the kernels of kernels.cu run thread by thread), and whose
// product is cuBLASLt's contract run as plain loops: the column-major plan, operands decoded
// from their types, f32 accumulation, bias, GELU and bias gradient epilogues, and the
// refusals of the real library (lt_emulation.h), so a product the GPU would refuse fails here
// first.
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/lt_emulation.h"
#include "backend/simt/simt_host.h"
#include "core/error.h"

namespace gt {
namespace {

using cuda_impl::LtOperand;
using cuda_plan::LtType;
namespace m = cuda_math;

/// Operand x decoded to floats (fp8: times its dequantization factor), n elements.
void decode(const LtOperand& x, int64_t n, float* out) {
  switch (x.type) {
    case LtType::e4m3:
    case LtType::e5m2: {
      const float s = *x.scale;
      const auto* p = static_cast<const uint8_t*>(x.p);
      for (int64_t i = 0; i < n; ++i) out[i] = m::fp8_to_float(p[i], x.type == LtType::e5m2) * s;
      break;
    }
    case LtType::bf16: {
      const auto* p = static_cast<const uint16_t*>(x.p);
      for (int64_t i = 0; i < n; ++i) out[i] = m::bf16_to_float(p[i]);
      break;
    }
    case LtType::f16: {
      const auto* p = static_cast<const uint16_t*>(x.p);
      for (int64_t i = 0; i < n; ++i) out[i] = m::f16_to_float(p[i]);
      break;
    }
    default:
      std::memcpy(out, x.p, n * sizeof(float));
  }
}

class HostRuntime {
 public:
  using Kernels = cuda_kernels::HostKernels;
  static constexpr Device kDevice = Device::cuda;  // as the backend it stands in for
  static constexpr size_t kWorkspaceBytes = 0;
  static std::string name(int) { return "cuda-emu"; }

  explicit HostRuntime(int) {
    simt::set_device(0);
    stream_ = simt::create_stream();
  }
  ~HostRuntime() { simt::destroy_stream(stream_); }
  HostRuntime(const HostRuntime&) = delete;
  HostRuntime& operator=(const HostRuntime&) = delete;

  bool fp8_capable() const { return true; }
  std::string describe() const { return "the CUDA backend's code on the SIMT runtime (CPU)"; }
  /// The SIMT runtime has no cuDNN: train.attention = cudnn is an error here.
  [[noreturn]] void use_cudnn_attention() {
    throw Error(
        "train.attention = 'cudnn' needs a GPU (train.device = cuda); cuda-emu runs the own "
        "kernels on the CPU and has no cuDNN");
  }
  void sdpa_forward(uint16_t*, float*, const uint16_t*, const SdpaShape&) { use_cudnn_attention(); }
  void sdpa_backward(uint16_t*, const uint16_t*, const uint16_t*, const uint16_t*, const float*,
                     const SdpaShape&) {
    use_cudnn_attention();
  }
  simt::Stream* stream() const { return stream_; }
  void bind_thread() { simt::set_device(0); }
  void* malloc(size_t bytes) { return simt::device_malloc(bytes); }
  void free(void* p) { simt::device_free(p); }
  void memset0(void* p, size_t bytes) { simt::memset_async(stream_, p, 0, bytes); }
  void h2d(void* dst, const void* src, size_t bytes) { simt::memcpy_h2d(stream_, dst, src, bytes); }
  void d2h(void* dst, const void* src, size_t bytes) { simt::memcpy_d2h(stream_, dst, src, bytes); }
  void sync() { simt::stream_synchronize(stream_); }
  void* malloc_host(size_t bytes) {
    refuse_while_capturing("cudaHostAlloc");
    void* p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
    if (!p) throw Error(fmt::format("cuda-emu: cannot allocate {} bytes of host memory", bytes));
    return p;
  }
  void free_host(void* p) {
    refuse_while_capturing("cudaFreeHost");
    std::free(p);
  }
  /// Pinned memory is made and freed outside a capture: whether CUDA allows it during one
  /// (cudaStreamCaptureModeThreadLocal) is not documented, and cudaFreeHost synchronizes.
  void refuse_while_capturing(const char* what) {
    if (simt::stream_capturing(stream_))
      throw Error(fmt::format(
          "cuda-emu: {} while the stream is capturing a graph (the backend makes its pinned "
          "buffers before a capture)",
          what));
  }
  void h2d_async(void* dst, const void* src, size_t bytes) {
    simt::memcpy_h2d_async(stream_, dst, src, bytes);
  }
  void d2h_async(void* dst, const void* src, size_t bytes) {
    simt::memcpy_d2h_async(stream_, dst, src, bytes);
  }
  /// Stream capture on the SIMT runtime (simt_host.h): what CUDA refuses while capturing is
  /// refused there and fails the capture.
  void begin_capture() { simt::stream_begin_capture(stream_); }
  /// Ends the capture and launches the graph; true when its shape (the sequence of kernels,
  /// copies and library calls) is that of the last graph, which cudaGraphExecUpdate would
  /// update in place. Errors: gt::Error when the capture was invalidated.
  bool end_capture_and_launch() {
    std::shared_ptr<const simt::Graph> g = simt::stream_end_capture(stream_);
    const std::vector<std::string> shape = simt::graph_shape(*g);
    const bool same = shape == shape_;
    shape_ = shape;
    graph_ = std::move(g);
    simt::graph_launch(stream_, *graph_);
    return same;
  }
  void abandon_capture() noexcept {
    try {
      if (simt::stream_capturing(stream_)) simt::stream_end_capture(stream_);
    } catch (...) {  // an invalidated capture: nothing to keep
    }
  }
  uint64_t mark() { return simt::event_record(stream_); }
  void wait_mark(uint64_t m) { simt::event_synchronize(stream_, m); }
  void sync_noexcept() noexcept {
    try {
      sync();
    } catch (...) {
    }
  }

  /// D = op(A) op(B) + beta D (column-major, g), the bias (length m, D's type) and the GELU
  /// epilogues (host_plan.h's LtEpi) applied as cuBLASLt's, or with BGRADA/BGRADB the bias
  /// gradient written to bias (D's type); D and the aux matrix f32 or bf16
  /// (rounded to nearest even). Refused as cuBLASLt refuses (lt_emulation.h); with may_fail,
  /// an epilogue it has no algorithm for returns false. Runs on the stream, as
  /// cublasLtMatmul does.
  bool product(const cuda_plan::Gemm& g, LtOperand A, LtOperand B, void* D, LtType td,
               const void* bias, cuda_plan::LtEpilogue ep, bool may_fail) {
    const cuda_lt::Call call{g, A.type, B.type, td, A.p, B.p, D, bias, ep, A.scale, B.scale};
    cuda_lt::record(call);
    if (const cuda_lt::Refusal r = cuda_lt::refusal(call); r.refused) {
      if (may_fail && r.epilogue_only) return false;
      throw Error(fmt::format("cuBLASLt (emulated) refuses the product {}: {}",
                              cuda_lt::describe(call), r.why));
    }
    simt::enqueue_task(stream_, "cublasLtMatmul (emulated)",
                       [g, A, B, D, td, bias, ep] { run_product(g, A, B, D, td, bias, ep); });
    return true;
  }

 private:
  static void run_product(const cuda_plan::Gemm& g, LtOperand A, LtOperand B, void* D, LtType td,
                          const void* bias, cuda_plan::LtEpilogue ep) {
    // op(A) as (m x k) and op(B) as (k x n), decoded once, then one dot product per element
    // a column-major (rows x cols) matrix spans (cols - 1) * ld + rows elements
    const int64_t a_elems = ((g.ta ? g.m : g.k) - 1) * g.lda + (g.ta ? g.k : g.m);
    const int64_t b_elems = ((g.tb ? g.k : g.n) - 1) * g.ldb + (g.tb ? g.n : g.k);
    std::vector<float> a(static_cast<size_t>(a_elems)), b(static_cast<size_t>(b_elems));
    decode(A, a_elems, a.data());
    decode(B, b_elems, b.data());
    std::vector<float> at(static_cast<size_t>(g.m * g.k)), bt(static_cast<size_t>(g.k * g.n));
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t p = 0; p < g.k; ++p) at[i * g.k + p] = a[g.ta ? p + i * g.lda : i + p * g.lda];
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t p = 0; p < g.k; ++p) bt[j * g.k + p] = b[g.tb ? j + p * g.ldb : p + j * g.ldb];
    if (cuda_plan::bias_gradient(ep.kind)) {
      // the bias gradient: the sums over k of op(A)'s m rows (BGRADA) or op(B)'s n columns
      // (BGRADB), of the decoded operand, in f32, written in D's type
      const bool on_a = ep.kind == cuda_plan::LtEpi::bgrada;
      const int64_t len = on_a ? g.m : g.n;
      const float* x = on_a ? at.data() : bt.data();
      for (int64_t i = 0; i < len; ++i) {
        float s = 0.f;
        for (int64_t p = 0; p < g.k; ++p) s += x[i * g.k + p];
        if (td == LtType::bf16)
          static_cast<uint16_t*>(const_cast<void*>(bias))[i] = m::to_bf16(s);
        else
          static_cast<float*>(const_cast<void*>(bias))[i] = s;
      }
      bias = nullptr;  // an output, not a bias to add
    }
    std::vector<float> bias_f(bias ? g.m : 0);
    if (bias) decode({bias, td}, g.m, bias_f.data());
    simt::run_parallel(g.n, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t i = 0; i < g.m; ++i) {
          const float* x = &at[i * g.k];
          const float* y = &bt[j * g.k];
          float s = 0.f;
          for (int64_t p = 0; p < g.k; ++p) s += x[p] * y[p];
          const int64_t d = i + j * g.ldd;
          if (g.beta != 0.f)
            s += g.beta * (td == LtType::bf16 ? m::bf16_to_float(static_cast<const uint16_t*>(D)[d])
                                              : static_cast<const float*>(D)[d]);
          if (bias) s += bias_f[i];
          const int64_t ax = i + j * ep.ld;  // the aux matrix's element
          switch (ep.kind) {
            case cuda_plan::LtEpi::none:
            case cuda_plan::LtEpi::bgrada:
            case cuda_plan::LtEpi::bgradb:
              break;
            case cuda_plan::LtEpi::gelu_aux:
              if (td == LtType::bf16)
                static_cast<uint16_t*>(const_cast<void*>(ep.aux))[ax] = m::to_bf16(s);
              else
                static_cast<float*>(const_cast<void*>(ep.aux))[ax] = s;
              [[fallthrough]];
            case cuda_plan::LtEpi::gelu:
              s = m::gelu(s);
              break;
            case cuda_plan::LtEpi::dgelu:
              s *= m::gelu_grad(td == LtType::bf16
                                    ? m::bf16_to_float(static_cast<const uint16_t*>(ep.aux)[ax])
                                    : static_cast<const float*>(ep.aux)[ax]);
              break;
          }
          if (td == LtType::bf16)
            static_cast<uint16_t*>(D)[d] = m::to_bf16(s);
          else
            static_cast<float*>(D)[d] = s;
        }
    });
  }

  simt::Stream* stream_ = nullptr;
  std::shared_ptr<const simt::Graph> graph_;  ///< the last graph launched
  std::vector<std::string> shape_;            ///< its work's names, in order
};

}  // namespace

std::unique_ptr<Backend> make_cuda_emulation_backend(int index, const BackendOptions& opt) {
  check(index == 0, "cuda-emu backend: there is one emulated device (index 0)");
  return std::make_unique<cuda_impl::CudaBackendT<HostRuntime>>(0, opt);
}

}  // namespace gt
