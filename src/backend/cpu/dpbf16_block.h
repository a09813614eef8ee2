// backend/cpu/dpbf16_block.h: the vector form of the own bf16 product's 32 x 32 block
// (amx_matmul.h), for CPUs with AVX512_BF16 but no AMX (AMD EPYC Zen 4 and Zen 5, Intel Cooper
// Lake): VDPBF16PS, each instruction 16 f32 accumulators += 16 pairs of bf16 products (Intel
// 64 and IA-32 Architectures Software Developer's Manual, vol. 2, VDPBF16PS; AMD64
// Architecture Programmer's Manual, vol. 4). The driver (splits, chunks, B packed into AMX's
// pair-interleaved layout, which is also VDPBF16PS's) is amx_matmul.cpp's; this file holds the
// block and the packing of A that differs. Where the build does not target x86-64 with AVX-512
// F and BW, dpbf16_available() is false; call the others only where it is true.
#pragma once
#include <cstdint>

#include "backend/cpu/amx_matmul.h"

namespace gt::cpu {

/// True when this CPU has AVX512_BF16 (CPUID 7.1:EAX bit 5) with AVX-512 F and BW, and the OS
/// saves the zmm state (XCR0 bits 1, 2, 5, 6, 7).
bool dpbf16_available();

/// Where a block's 32 rows of A are, pair by pair (a pair: the two bf16 of A(r, 2p), A(r,
/// 2p+1), one 32-bit word). Row-major (k_major false): row r's pairs are contiguous from a + r
/// ld (elements; A stored (M,K) read in place, or a partial block copied with zero rows).
/// k_major: pair (r, p) is word p 32 + r (a transposed A packed by dpbf16_pack_a).
struct Dpbf16A {
  const uint16_t* a = nullptr;
  int64_t ld = 0;
  bool k_major = false;
};

/// One 32 x 32 block of C (rows 32 i, columns 32 j; rows past M and columns past N are not
/// written) = op(A) B with e applied: (A B + bias) * mul, + C's old value when accumulate, a
/// bf16 C rounded to nearest even (VCVTNEPS2BF16). bp: B packed by amx_matmul.cpp's
/// pack_b_columns (column block j's two 16-column tiles at bp + 2 j (K/32) 512 and
/// (2 j + 1) (K/32) 512 elements, pair row p of a tile at 32 p: 64-byte aligned). K % 32 == 0.
/// Sums over K in order in f32, each step of two k as VDPBF16PS does it (Intel SDM: the odd k's
/// product added first, then the even one's, denormal inputs and results flushed to zero,
/// rounding to nearest even whatever MXCSR says); the same bits on any thread.
void dpbf16_block(void* c, const Dpbf16A& a, const uint16_t* bp, int64_t M, int64_t N, int64_t K,
                  int64_t i, int64_t j, const AmxEpilogue& e);

/// Blocks of rows [r0, r0 + 32 nblocks) of A into dst, 32 K elements per block: A stored (K,M)
/// (trans_a) as k-major pairs (Dpbf16A::k_major), else A stored (M,K) copied row by row (ld
/// K); rows past M are zeros.
void dpbf16_pack_a(uint16_t* dst, const uint16_t* a, int64_t M, int64_t K, bool trans_a, int64_t r0,
                   int64_t nblocks);

}  // namespace gt::cpu
