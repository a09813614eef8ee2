// bench/matmul_peak.cpp: the matrix-product throughput greentrain's products reach on this
// machine, the denominator of MFU (model FLOPs per second / peak, as in PaLM, Chowdhery et al.
// 2022, appendix B). Square n x n x n products through the call the training makes at that
// shape (cpu::onednn_matmul: f32, or bf16 operands with f32 accumulation; bf16 on the own kernel
// (AMX or AVX512_BF16) where it takes the product, cpu/amx_matmul.h; where oneDNN has no bf16
// product with bf16 instructions (onednn_supports), f32 products of the rounded operands, as the
// CPU backend emulates them: "bf16_kernel" says which),
// `reps` timed runs after one warm-up; prints JSON with the best and the median GFLOP/s of each
// type. Usage: gt_matmul_peak [n=2048] [reps=10] [threads=2]
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "backend/cpu/amx_matmul.h"
#include "backend/cpu/fast_math.h"
#include "backend/cpu/onednn_matmul.h"
#include "core/parse.h"

int main(int argc, char** argv) {
  using gt::parse_number;
  const int64_t n =
      argc > 1 ? parse_number<long>(argv[1], "argument 1 (n)", "a matrix size") : 2048;
  const int reps = argc > 2 ? parse_number<int>(argv[2], "argument 2 (reps)", "a count") : 10;
  omp_set_num_threads(argc > 3 ? parse_number<int>(argv[3], "argument 3 (threads)", "a count") : 2);
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (auto& x : a) x = normal(gen);
  for (auto& x : b) x = normal(gen);
  std::vector<uint16_t> a16(n * n), b16(n * n);
  for (int64_t i = 0; i < n * n; ++i) {
    a16[i] = gt::cpu::to_bf16(a[i]);
    b16[i] = gt::cpu::to_bf16(b[i]);
  }
  const bool own = gt::cpu::amx_matmul_takes(n, n, n);
  const bool emulated = !own && !gt::cpu::onednn_supports(gt::cpu::MmType::bf16);
  std::vector<float> ar, br;  // the rounded operands, widened: what an emulated product takes
  if (emulated)
    for (int64_t i = 0; i < n * n; ++i) {
      ar.push_back(gt::cpu::bf16_to_float(a16[i]));
      br.push_back(gt::cpu::bf16_to_float(b16[i]));
    }
  fmt::print("{{\"n\": {}, \"threads\": {}", n, omp_get_max_threads());
  for (auto type : {gt::cpu::MmType::f32, gt::cpu::MmType::bf16}) {
    const bool bf = type == gt::cpu::MmType::bf16;
    const void* pa = !bf ? a.data() : emulated ? (const void*)ar.data() : (const void*)a16.data();
    const void* pb = !bf ? b.data() : emulated ? (const void*)br.data() : (const void*)b16.data();
    const auto mm = bf && emulated ? gt::cpu::MmType::f32 : type;
    std::vector<double> gflops;
    for (int r = 0; r <= reps; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      if (bf && own)  // the product training runs here
        gt::cpu::amx_matmul_bf16(c.data(), a16.data(), b16.data(), n, n, n, false, false);
      else
        gt::cpu::onednn_matmul(c.data(), pa, pb, nullptr, n, n, n, false, false, false, mm);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) gflops.push_back(2.0 * n * n * n / s / 1e9);
    }
    std::sort(gflops.begin(), gflops.end());
    fmt::print(", \"{}\": {{\"best\": {:.1f}, \"median\": {:.1f}}}", bf ? "bf16" : "fp32",
               gflops.back(), gflops[gflops.size() / 2]);
  }
  fmt::print(", \"bf16_kernel\": \"{}\"}}\n",
             own        ? gt::cpu::bf16_kernel_name(gt::cpu::own_bf16_kernel())
             : emulated ? "emulated (oneDNN f32 products of the rounded operands)"
                        : "oneDNN");
  return 0;
}
