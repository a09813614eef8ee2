// backend/cpu/amx_tiles.h: what greentrain's AMX code shares (amx_matmul.cpp, attention_bf16.cpp):
// the target attribute of functions that use the tile instructions, and LDTILECFG's memory
// layout (Intel 64 and IA-32 Architectures Software Developer's Manual, vol. 2, LDTILECFG:
// palette 1, each tile's bytes per row and rows). Include only where the compiler targets
// x86-64 with AVX-512; call such functions only where amx_available() (amx_matmul.h).
#pragma once
#include <cstdint>

#define GT_AMX_TARGET \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

namespace gt::cpu {

/// The 64 bytes LDTILECFG reads (palette 1): colsb[i] bytes per row and rows[i] rows of tile i.
struct TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

}  // namespace gt::cpu
