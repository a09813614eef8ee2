// backend/cpu/onednn_matmul.h: C(M,N) [+]= op(A)(M,K) @ op(B)(K,N) [+ bias(N)] with oneDNN.
// A and B are f32, bf16 or f16; C and bias are always f32 (low-precision products
// accumulate in f32 inside oneDNN). Primitives are created once per shape and reused
// (oneDNN's "describe, create, execute" pattern); creation is the slow part.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace gt::cpu {

/// Element type of the A and B operands.
enum class MmType { f32, bf16, f16 };

/// What a product does to its result before storing it (oneDNN post-ops), and C's type.
struct MmPost {
  bool gelu = false;          ///< GELU (tanh form), eltwise post-op (not with accumulate)
  const void* mul = nullptr;  ///< if set, times this (M,N) row-major tensor, element-wise
                              ///< (not with accumulate: oneDNN would scale C_old + AB too)
  bool mul_bf16 = false;      ///< mul is bf16 (else f32)
  bool c_bf16 = false;        ///< C is bf16 (the f32 result rounded to nearest-even)
};

/// Row-major operands. trans_a: A is stored (K,M); trans_b: B is stored (N,K).
/// accumulate: C += result (oneDNN sum post-op) instead of C = result. bias may be null.
/// post: GELU, element-wise multiply and C's type (MmPost). C is f32 unless post.c_bf16.
/// Throws gt::Error when oneDNN has no kernel for the type and post-ops on this CPU, or for
/// accumulate with post.mul.
void onednn_matmul(void* c, const void* a, const void* b, const float* bias, int64_t M, int64_t N,
                   int64_t K, bool trans_a, bool trans_b, bool accumulate,
                   MmType type = MmType::f32, const MmPost& post = {});

/// C(M,N) [+]= alpha * op(A)(M,K) @ op(B)(K,N), row strides (in elements) lda, ldb, ldc; A is
/// stored (K,M) when trans_a, B (N,K) when trans_b; A and B of `type`, C f32; accumulate adds
/// to C (oneDNN sum post-op) instead of overwriting it. Built once, then
/// safe to run from many threads at once: each call passes its own scratchpad of
/// scratchpad_bytes() (oneDNN's user scratchpad mode) and runs on the calling thread alone
/// (oneDNN starts no threads inside an OpenMP parallel region).
class ThreadMatmul {
 public:
  ThreadMatmul(int64_t M, int64_t N, int64_t K, int64_t lda, bool trans_a, int64_t ldb,
               bool trans_b, int64_t ldc, float alpha, MmType type, bool accumulate = false);
  ~ThreadMatmul();
  size_t scratchpad_bytes() const;
  void run(float* c, const void* a, const void* b, void* scratchpad) const;

 private:
  struct Impl;
  Impl* impl_;
};

/// The ThreadMatmul for these arguments, created on first use and kept (thread-safe).
const ThreadMatmul& thread_matmul(int64_t M, int64_t N, int64_t K, int64_t lda, bool trans_a,
                                  int64_t ldb, bool trans_b, int64_t ldc, float alpha, MmType type,
                                  bool accumulate = false);

/// True when the CPU backend hands oneDNN `type` products: oneDNN can run one on this CPU
/// (tries a tiny primitive), low-precision emulation is not forced (set_lowp_emulation), and,
/// for bf16, its instruction set has bf16 instructions (onednn_isa_has_bf16). On avx512_core
/// and avx512_core_vnni (Intel Skylake to Ice Lake) oneDNN emulates the bf16 dot products
/// inside its kernels, 2.7-3.1x each product's fp32 time: the CPU backend's own emulation (f32
/// products of the rounded operands, the same numerics) ran 0.58x the time of 200 preset steps
/// (oneDNN capped at avx512_core on an EPYC 9004), 1.02x fp32's. Where oneDNN is capped below a
/// CPU's bf16 instructions (ONEDNN_MAX_CPU_ISA), the own bf16 kernels are then left out too.
bool onednn_supports(MmType type);

/// True when oneDNN's products run on AMX tiles here (its effective ISA is avx512_core_amx:
/// Intel Sapphire Rapids and later, and the kernel let the process use the tiles). Its AMX
/// bf16 products may split the shared dimension K among threads (a parallel reduction), so
/// their last bits depend on the team size (seen with oneDNN 2.6.3 on a Xeon with AMX:
/// 384 x 1536 x 2048 differed between 1 and 2 threads).
bool onednn_uses_amx();

/// The instruction set oneDNN's kernels use here (dnnl::get_effective_cpu_isa(): the CPU's,
/// or lower where ONEDNN_MAX_CPU_ISA caps it), by oneDNN's name: "avx2", "avx512_core",
/// "avx512_core_bf16", "avx512_core_amx", ...; "isa 0x..." for a value this build does not name.
std::string onednn_isa_name();

/// True when that instruction set has bf16 dot-product instructions (AVX512_BF16 or AMX-BF16:
/// oneDNN's avx512_core_bf16 and up). Below it oneDNN still takes bf16 products on avx512_core
/// and avx512_core_vnni, emulating the dot products in its kernels; onednn_supports() then says
/// no (see there).
bool onednn_isa_has_bf16();

/// For tests and benchmarks: while on, onednn_supports() reports no bf16 and no f16 product,
/// so the CPU backend and Attention emulate them (f32 products of rounded operands) on any CPU;
/// it takes effect at their next set_precision / set_type. The environment variable
/// GT_CPU_EMULATE_LOWP=1 turns it on for a whole run (to test the emulated path on a CPU with
/// AVX512_BF16).
void set_lowp_emulation(bool on);
/// Whether set_lowp_emulation (or GT_CPU_EMULATE_LOWP=1) forces the emulated products now.
bool lowp_emulation_forced();

}  // namespace gt::cpu
