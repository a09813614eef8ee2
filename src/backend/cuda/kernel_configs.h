// backend/cuda/kernel_configs.h: the launch configuration of every own kernel of the CUDA
// backend, as pure functions of the op's sizes. The launchers (kernels_*.cu) launch exactly
// these, and tests/backend/launch_limits_test.cpp checks them at GPT-2 124M, 350M and XL
// shapes against the limits of compute capability 9.0 (grid, threads, shared memory,
// registers per block from ptxas's report). Host code only; no CUDA headers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/simt/launch_config.h"

namespace gt::cuda_kernels::configs {

using simt::Dim3;
using simt::LaunchConfig;

/// Threads per block of the element-wise kernels, and the most blocks they launch (a
/// grid-stride loop covers any n: 2^31 - 1 blocks would do, but more blocks than the GPU
/// holds at once buy nothing; 65,536 x 256 threads = 16.8 M per pass).
constexpr unsigned kElementThreads = 256;
constexpr int64_t kElementMaxBlocks = 65536;
/// Element-wise work over n items (each item a pack of 4 f32 or 8 bf16 in the vector paths).
inline LaunchConfig elementwise(int64_t n) {
  int64_t blocks = (n + kElementThreads - 1) / kElementThreads;
  blocks = blocks < 1 ? 1 : blocks > kElementMaxBlocks ? kElementMaxBlocks : blocks;
  return {Dim3(unsigned(blocks)), Dim3(kElementThreads), 0};
}

/// LayerNorm forward (and residual + LayerNorm): a warp per row, 8 rows per block.
constexpr unsigned kRowWarps = 8;
/// The 16-byte packs per lane a LayerNorm kernel keeps in registers for a row of C floats
/// (the template argument of layernorm_{forward,backward}_kernel): 2, 4, 8 or 16, or 0 (the row
/// re-read from the cache, coalesced) beyond 16 (forward) or 8 (backward: it holds two
/// arrays, and more registers would leave an SM under 25 % of its threads), or when C is not
/// a multiple of 4 (or the rows are not 16-byte aligned: the launcher's check).
inline int layernorm_packs(int C, bool backward) {
  if (C % 4 != 0) return 0;
  const int packs = (C + 127) / 128;
  const int most = backward ? 8 : 16;
  if (packs > most) return 0;
  return packs <= 2 ? 2 : packs <= 4 ? 4 : packs <= 8 ? 8 : 16;
}
inline LaunchConfig layernorm_forward(int64_t N) {
  const int64_t blocks = (N + kRowWarps - 1) / kRowWarps;
  return {Dim3(unsigned(blocks < 1 ? 1 : blocks)), Dim3(32 * kRowWarps), 0};
}

/// LayerNorm backward: a block of 8 warps per kLnBackwardRows consecutive rows (a warp per
/// row, rows w, w+8, ... of the block's), each warp's weight and bias gradient partials in its
/// own slice of shared memory (8 x 2C floats, dynamic), summed in a fixed order at the block's
/// end into partial[block][2C]; then layernorm_finish adds the blocks' partials in order. The
/// row count per block is a constant, so the sums are the same on every GPU.
constexpr int64_t kLnBackwardRows = 64;
inline int64_t layernorm_backward_blocks(int64_t N) {
  return (N + kLnBackwardRows - 1) / kLnBackwardRows;
}
inline LaunchConfig layernorm_backward(int64_t N, int C) {
  const int64_t blocks = layernorm_backward_blocks(N);
  return {Dim3(unsigned(blocks < 1 ? 1 : blocks)), Dim3(32 * kRowWarps),
          size_t(kRowWarps) * 2 * size_t(C) * sizeof(float)};
}
/// Column finish: one thread per output column (2C for LayerNorm's dw and db, C for a bias).
inline LaunchConfig column_finish(int64_t columns) { return elementwise(columns); }

/// Column sums (the bias gradient): a block of 256 threads per 256 column packs and
/// kColumnRows rows; partial[row chunk][C]; then column_finish.
constexpr int64_t kColumnRows = 256;
inline int64_t column_chunks(int64_t N) { return (N + kColumnRows - 1) / kColumnRows; }
inline LaunchConfig column_sums(int64_t N, int64_t C, int pack) {
  const int64_t packs = (C + pack - 1) / pack;
  const int64_t gx = (packs + kElementThreads - 1) / kElementThreads;
  return {Dim3(unsigned(gx < 1 ? 1 : gx), unsigned(column_chunks(N))), Dim3(kElementThreads), 0};
}

/// Softmax cross-entropy (the fused classifier): a block per row (rows in grid.x, up to
/// 2^31 - 1), of 1024 threads, or for a short row (V below 4096) of the power of two from 32
/// up that gives each thread about one pack of `pack` elements.
constexpr unsigned kClassifierThreads = 1024;
inline unsigned classifier_threads(int V, int pack) {
  unsigned t = 32;
  while (t < kClassifierThreads && int64_t(t) * pack < V) t *= 2;
  return t;
}
inline LaunchConfig classifier(int64_t N, int V, int pack) {
  return {Dim3(unsigned(N < 1 ? 1 : N)), Dim3(classifier_threads(V, pack)), 0};
}

/// The gradient norm: a grid that depends on n alone (so the partial sums, and the result, are
/// the same on every GPU): a block per 16 Ki elements, at most kNormBlocks; then one block.
constexpr unsigned kNormBlocks = 512;
inline unsigned sum_squares_blocks(int64_t n) {
  const int64_t b = (n + 16383) / 16384;
  return unsigned(b < 1 ? 1 : b > kNormBlocks ? kNormBlocks : b);
}
inline LaunchConfig sum_squares(int64_t n) {
  return {Dim3(sum_squares_blocks(n)), Dim3(kElementThreads), 0};
}
inline LaunchConfig sum_squares_finish(int64_t n) {
  const unsigned b = sum_squares_blocks(n);
  return {Dim3(1), Dim3(b < 32 ? 32 : (b + 31) / 32 * 32), 0};
}

/// The multi-tensor AdamW: one block per chunk of its table.
inline LaunchConfig adamw_multi(int64_t chunks) {
  return {Dim3(unsigned(chunks < 1 ? 1 : chunks)), Dim3(kElementThreads), 0};
}

/// fp8 cast with amax: the amax of x (n elements) over a grid of at most kAmaxBlocks blocks, a
/// block per kElementThreads elements below that (each block ends in one atomicMax, so a small
/// tensor costs few), then the cast (transposed in kFp8Tile x kFp8Tile tiles through shared
/// memory by 256 threads when asked).
constexpr unsigned kAmaxBlocks = 1024;
constexpr int kFp8Tile = 64;
inline LaunchConfig fp8_amax(int64_t n) {
  int64_t blocks = (n + kElementThreads - 1) / kElementThreads;
  blocks = blocks < 1 ? 1 : blocks > kAmaxBlocks ? kAmaxBlocks : blocks;
  return {Dim3(unsigned(blocks)), Dim3(kElementThreads), 0};
}
inline LaunchConfig fp8_transpose(int64_t rows, int64_t cols) {
  return {
      Dim3(unsigned((cols + kFp8Tile - 1) / kFp8Tile), unsigned((rows + kFp8Tile - 1) / kFp8Tile)),
      Dim3(256), 0};
}

/// Attention, flash form (tensor cores, bf16/fp16 operands, head sizes 32, 64 and 128): a block of
/// 4 warps per 64 queries (forward, dQ) or 64 keys (dK and dV) of one (batch, head), 16 rows a
/// warp; tiles of 64 rows x (hs + 8) 16-bit values in shared memory (the 8 shift each row by 16
/// bytes: no bank conflicts on the fragments' loads), dynamic.
constexpr int kFlashRows = 64, kFlashWarps = 4;
inline size_t flash_tile_bytes(int hs) { return size_t(kFlashRows) * (hs + 8) * 2; }
inline LaunchConfig flash_grid(int B, int T, int NH, size_t smem) {
  return {Dim3(unsigned((T + kFlashRows - 1) / kFlashRows), unsigned(NH), unsigned(B)),
          Dim3(32 * kFlashWarps), smem};
}
/// Forward: Q, K and V tiles.
inline LaunchConfig flash_forward(int B, int T, int NH, int hs) {
  return flash_grid(B, T, NH, 3 * flash_tile_bytes(hs));
}
/// dK and dV: K, V, Q and dO tiles, and the queries' log-sum-exp and row sums (f32).
inline LaunchConfig flash_backward_kv(int B, int T, int NH, int hs) {
  return flash_grid(B, T, NH, 4 * flash_tile_bytes(hs) + 2 * kFlashRows * sizeof(float));
}
/// dQ: Q, dO, K and V tiles.
inline LaunchConfig flash_backward_q(int B, int T, int NH, int hs) {
  return flash_grid(B, T, NH, 4 * flash_tile_bytes(hs));
}
/// The softmax backward's row sums delta = dout . out: a warp per (batch, head, query).
inline LaunchConfig attention_delta(int64_t rows) {
  const int64_t blocks = (rows + kRowWarps - 1) / kRowWarps;
  return {Dim3(unsigned(blocks < 1 ? 1 : blocks)), Dim3(32 * kRowWarps), 0};
}
/// Attention on CUDA cores (fp32, the unfused form with its probability matrix, and head
/// sizes the flash form does not take): a thread per query (or key) row, 64 a block. Not
/// tuned: training on a GPU takes the flash form (bf16, fusion on).
constexpr unsigned kAttnRowThreads = 64;
inline LaunchConfig attention_rows(int64_t rows) {
  const int64_t blocks = (rows + kAttnRowThreads - 1) / kAttnRowThreads;
  return {Dim3(unsigned(blocks < 1 ? 1 : blocks)), Dim3(kAttnRowThreads), 0};
}

}  // namespace gt::cuda_kernels::configs
