// backend/cuda/cuda_emulation.cpp: the CUDA backend's code on the CPU (train.device =
// cuda-emu): cuda_backend_impl.h over HostRuntime, whose memory is host memory, whose kernels
// are HostKernels (kernels_host.cpp: the same kernel_math.h functions over the same index
// spaces) and whose product runs the column-major plan as cuBLASLt would (operands decoded
// from their 16-bit types, f32 accumulation, bias and GELU epilogues). Slow; it exists so the
// op test and the training tests run every line of the CUDA backend above the CUDA runtime on
// machines without a GPU. What it cannot test: the launches, cuBLASLt's own behaviour, and
// the stream's ordering.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "core/error.h"

namespace gt {
namespace {

using cuda_impl::LtOperand;
namespace m = cuda_math;

/// Element i of a product operand, widened to float (fp8: times its dequantization factor).
float element(const LtOperand& x, int64_t i) {
  switch (x.type) {
    case CUDA_R_8F_E4M3:
      return m::fp8_to_float(static_cast<const uint8_t*>(x.p)[i], false) * *x.scale;
    case CUDA_R_8F_E5M2:
      return m::fp8_to_float(static_cast<const uint8_t*>(x.p)[i], true) * *x.scale;
    case CUDA_R_16BF:
      return m::bf16_to_float(static_cast<const uint16_t*>(x.p)[i]);
    case CUDA_R_16F:
      return m::f16_to_float(static_cast<const uint16_t*>(x.p)[i]);
    default:
      return static_cast<const float*>(x.p)[i];
  }
}

class HostRuntime {
 public:
  using Kernels = cuda_kernels::HostKernels;
  static constexpr Device kDevice = Device::cuda;  // as the backend it stands in for
  static constexpr size_t kWorkspaceBytes = 0;
  static std::string name(int) { return "cuda-emu"; }

  explicit HostRuntime(int) {}
  bool fp8_capable() const { return true; }
  std::string describe() const { return "the CUDA backend's code on the CPU"; }
  cudaStream_t stream() const { return nullptr; }
  void* malloc(size_t bytes) {
    void* p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
    if (!p) throw Error(fmt::format("cuda-emu: cannot allocate {} bytes", bytes));
    return p;
  }
  void free(void* p) { std::free(p); }
  void memset0(void* p, size_t bytes) { std::memset(p, 0, bytes); }
  void h2d(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
  void d2h(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
  void sync() {}
  void sync_noexcept() noexcept {}

  /// D = op(A) op(B) + beta D (column-major, g), the bias (length m, D's type) and GELU
  /// applied as cuBLASLt's epilogues; D f32 or bf16 (rounded to nearest even).
  bool product(const cuda_plan::Gemm& g, LtOperand A, LtOperand B, void* D, cudaDataType_t td,
               const void* bias, bool gelu, bool) {
    const LtOperand bias_op{bias, td};
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        float s = 0.f;
        for (int64_t p = 0; p < g.k; ++p)
          s += element(A, g.ta ? p + i * g.lda : i + p * g.lda) *
               element(B, g.tb ? j + p * g.ldb : p + j * g.ldb);
        const int64_t d = i + j * g.ldd;
        if (g.beta != 0.f) s += g.beta * element({D, td}, d);
        if (bias) s += element(bias_op, i);
        if (gelu) s = m::gelu(s);
        if (td == CUDA_R_16BF)
          static_cast<uint16_t*>(D)[d] = m::to_bf16(s);
        else
          static_cast<float*>(D)[d] = s;
      }
    return true;
  }
};

}  // namespace

std::unique_ptr<Backend> make_cuda_emulation_backend(int index, const BackendOptions& opt) {
  check(index == 0, "cuda-emu backend: there is one emulated device (index 0)");
  return std::make_unique<cuda_impl::CudaBackendT<HostRuntime>>(0, opt);
}

}  // namespace gt
