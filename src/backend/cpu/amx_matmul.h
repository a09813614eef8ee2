// backend/cpu/amx_matmul.h: greentrain's own bf16 matrix product on Intel AMX tiles (Sapphire
// Rapids and later). The CPU backend runs every bf16 product of a step on it: the forward
// products (x W) and the input gradients (dY W^T), in nanoGPT's shakespeare-char step on a Xeon
// with AMX 1.05-1.6x faster than on Debian 12's oneDNN 2.6.3 (a 2048^3 product 1.8x), and the
// weight gradients (X^T dY, A transposed: pairs of stored rows interleaved, then 16 x 16
// transposed), whose calls inside the steps took 0.81-0.89x oneDNN's time (docs/benchmarks.md).
// C blocks of 32 x 32 in four accumulator tiles (2 x 2); B repacked once per call into AMX's
// pair-interleaved (VNNI) layout; A stored (M,K) read by the tiles in place (a transposed A, or
// a last partial block, packed into tile order first); each thread the 32-row block rows of C
// it wrote A's rows for in the op before, then what is left of the others'; where C has fewer block
// rows than block columns (a weight gradient) each thread takes a range of columns and packs its
// own part of B and all of A instead; C's rows prefetched while the tiles compute; epilogues (bf16
// C, a multiplier) run beside the next block's tiles; A's column sums (an input gradient's bias
// gradient) taken as A is packed. Intel's tile instructions: Intel 64 and IA-32 Architectures
// Software Developer's Manual, vol. 2, TDPBF16PS / TILELOADD; Linux asks a process to request the
// tile state first (arch_prctl ARCH_REQ_XCOMP_PERM, Documentation/arch/x86/xstate.rst). On CPUs
// with AVX512_BF16 but no AMX (AMD EPYC Zen 4 and Zen 5) the same driver (splits, chunks, packed B,
// column sums) runs each block on the vector unit instead (dpbf16_block.h): own_bf16_kernel() says
// which.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gt::cpu {

/// True when this CPU has AMX-BF16 (CPUID 7.0:EDX bits 22 and 24), the build has the
/// kernel (x86-64 with AVX-512), and Linux granted the process the tile data state.
bool amx_available();

/// What amx_matmul_bf16 does to the f32 result before storing it, in oneDNN's order:
/// (A B + bias) * mul, then + C's old value when accumulate.
struct AmxEpilogue {
  const float* bias = nullptr;  ///< (N) f32, or null
  const void* mul = nullptr;    ///< (M, N) row-major, f32 or bf16 (mul_bf16), or null
  bool mul_bf16 = false;
  bool c_bf16 = false;      ///< C is bf16, rounded to nearest even (as oneDNN); else f32
  bool accumulate = false;  ///< C += result (f32 C only)
  /// (K) f32, or null: a_col_sums[k] += sum over the M rows of A's column k (A stored (M,K)
  /// only), summed while A is packed: the bias gradient of an input gradient dY W^T (dY's
  /// column sums) without its own pass over dY. Each 32-row block of A is summed in row
  /// order, then the blocks in order, so the sums do not depend on the team size either.
  float* a_col_sums = nullptr;
  /// GELU last: C = gelu(v), v = (A B + bias) * mul, as gelu.h's passes compute it
  /// (gelu_and_grad512; a bf16 C rounded as their stores, bf16_512), so C is bitwise what an
  /// f32 C of v followed by gelu_fused_loop gives (not with accumulate)
  bool gelu = false;
  /// (M, N) bf16, or null: with gelu, gelu'(v) beside it, rounded the same way: the fused
  /// MLP's saved derivative (Backend::matmul_gelu_forward_fused) without an f32 pass between
  uint16_t* dgelu = nullptr;
};

/// The most elements of B amx_matmul_bf16 repacks per call (16 MiB of bf16): a larger B (a
/// GPT-2 classifier's 50257 x 768) goes to oneDNN, which reads it in place.
constexpr int64_t kAmxMaxBElems = int64_t{1} << 23;

/// The kernel that runs greentrain's own bf16 products here.
enum class Bf16Kernel {
  none,         ///< no own kernel (no AVX512_BF16, or turned off): oneDNN runs them
  amx,          ///< AMX tiles (TDPBF16PS), where amx_available()
  avx512_bf16,  ///< the vector unit (VDPBF16PS, dpbf16_block.h): AMD EPYC Zen 4 / Zen 5 and
                ///< other CPUs with AVX512_BF16 but no AMX
};
/// amx where amx_available(), else avx512_bf16 where the CPU has it, else none; none when turned
/// off (set_own_amx_matmul(false), GT_CPU_OWN_AMX=0); avx512_bf16 on an AMX CPU where
/// prefer_vector_bf16_kernel(true) or GT_CPU_BF16_KERNEL=avx512_bf16 (tests, benchmarks).
Bf16Kernel own_bf16_kernel();
/// "own AMX", "own AVX512_BF16" or "oneDNN" (none): for benchmarks' and reports' output.
const char* bf16_kernel_name(Bf16Kernel k);
/// Runs the vector kernel even where AMX exists (on) or not (off). Until called, the
/// environment decides (GT_CPU_BF16_KERNEL=avx512_bf16: on; otherwise off).
void prefer_vector_bf16_kernel(bool on);
/// The current choice of prefer_vector_bf16_kernel (or of the environment).
bool vector_bf16_kernel_preferred();

/// For tests: a product split by rows puts every block row in the first thread's share and
/// only the other threads run them, taking them from its back (on; a team of one runs them
/// itself), instead of one contiguous share per thread (off, the default).
void amx_matmul_rows_to_first_thread(bool on);

/// True when amx_matmul_bf16 takes a product of these sizes: an own kernel runs here
/// (own_bf16_kernel() not none), K a multiple of 32 (A's tiles are read in rows of 32),
/// N K <= kAmxMaxBElems, M <= 2^36 and no dimension zero.
bool amx_matmul_takes(int64_t M, int64_t N, int64_t K);

/// Bytes of the buffers amx_matmul_bf16 keeps (B repacked, N K rounded up; up to 256 rows of
/// A per thread; the column sums' f32 partials, one row of K per 32 rows of A; 64 bytes per
/// thread for its share of block rows) for products
/// whose M is at most max_m, N K at most max_nk and K at most max_k, on `threads` threads; 0
/// where it takes no product (no own kernel, or turned off).
size_t amx_matmul_workspace_bytes(int64_t max_m, int64_t max_nk, int64_t max_k, int threads);

/// C(M,N) [+]= op(A)(M,K) @ op(B)(K,N) on own_bf16_kernel(), A and B bf16, row-major and
/// contiguous: A is stored (M,K), or (K,M) when trans_a (X in a weight gradient X^T dY); B is
/// stored (N,K) when trans_b, else (K,N). Accumulates in f32 over K in order, each C block on one
/// thread: the result does not depend on the team size. Runs on the OpenMP team of the calling
/// thread (omp_set_num_threads); split by rows, each thread first runs its own contiguous share
/// (the rows the step's other ops gave it), then takes what is left of the others'. Throws
/// gt::Error when amx_matmul_takes() is false, for accumulate with a bf16 C or with gelu, for
/// a_col_sums with trans_a, or for dgelu without gelu.
void amx_matmul_bf16(void* c, const uint16_t* a, const uint16_t* b, int64_t M, int64_t N, int64_t K,
                     bool trans_a, bool trans_b, const AmxEpilogue& e = {});

/// True when greentrain's own AMX code runs here: amx_available() and not turned off
/// (set_own_amx_matmul, GT_CPU_OWN_AMX=0). attention_bf16.h's kernels then run their products
/// with row-major left operands on AMX tiles too.
bool own_amx_enabled();
/// Turns the own bf16 products (on AMX tiles or on the vector unit, own_bf16_kernel()) and the
/// own AMX code on (the default) or off: off, oneDNN runs every product and the own attention
/// kernels use the vector unit alone (benchmarks and tests compare the two). The environment
/// variable GT_CPU_OWN_AMX=0 turns it off for a whole run.
void set_own_amx_matmul(bool on);

}  // namespace gt::cpu
