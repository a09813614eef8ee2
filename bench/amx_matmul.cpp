// bench/amx_matmul.cpp: the own bf16 product (cpu/amx_matmul.h; on AMX tiles, or on the vector
// unit where the CPU has no AMX or GT_CPU_BF16_KERNEL=avx512_bf16) against oneDNN's
// (cpu::onednn_matmul) at the row-major-A products of a training step, with the layouts and
// epilogues the CPU backend gives them: the forward products x W + b and the input gradients
// dY W^T (c_fc's times gelu', into bf16), alternating one call of each per round in one process
// (medians, bench/alternate.h). Default shapes: nanoGPT's shakespeare-char (B x T = 2048, C = 384)
// and the CPU preset (768, 128); or one shape from the command line. GT_BENCH_COLD=1 writes 256 MiB
// between calls, so that operands and C start in memory as in a step (whose products read what
// other ops wrote long before). Usage: gt_amx_matmul [reps=30] [threads=2] [M N K trans_b c_bf16
// bias mul [trans_a] (each 0|1; trans_a: A stored (K,M), C accumulated: a weight gradient)]
#include "backend/cpu/amx_matmul.h"

#include <fmt/format.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "alternate.h"
#include "backend/cpu/fast_math.h"
#include "backend/cpu/onednn_matmul.h"
#include "core/parse.h"

namespace {

struct Shape {
  int64_t M, N, K;
  bool trans_b, c_bf16, bias, mul;
  const char* what;
  bool trans_a = false;  // a weight gradient X^T dY, accumulated into f32 C
};

}  // namespace

int main(int argc, char** argv) {
  using gt::parse_number;
  namespace cpu = gt::cpu;
  const int reps = argc > 1 ? parse_number<int>(argv[1], "argument 1 (reps)", "a count") : 30;
  omp_set_num_threads(argc > 2 ? parse_number<int>(argv[2], "argument 2 (threads)", "a count") : 2);
  const cpu::Bf16Kernel kernel = cpu::own_bf16_kernel();  // GT_CPU_BF16_KERNEL=avx512_bf16
  if (kernel == cpu::Bf16Kernel::none) {
    fmt::print(
        "this CPU has neither AMX-BF16 nor AVX512_BF16 (or GT_CPU_OWN_AMX=0): nothing to "
        "compare\n");
    return 0;
  }
  fmt::print("own kernel: {}\n", cpu::bf16_kernel_name(kernel));
  std::vector<Shape> shapes;
  if (argc > 9) {
    auto num = [&](int i) { return parse_number<long>(argv[i], "a shape argument", "a size"); };
    shapes.push_back({num(3), num(4), num(5), num(6) != 0, num(7) != 0, num(8) != 0, num(9) != 0,
                      "command line", argc > 10 && num(10) != 0});
  } else {  // as the CPU backend calls them (GPT: weights stored (in, out))
    for (int64_t bt : {2048, 768}) {
      const int64_t c = bt == 2048 ? 384 : 128;
      shapes.push_back({bt, 3 * c, c, false, false, true, false, "qkv = ln1 W + b"});
      shapes.push_back({bt, c, c, false, false, true, false, "attention projection"});
      shapes.push_back({bt, 4 * c, c, false, false, true, false, "fc (pre-activation)"});
      shapes.push_back({bt, c, 4 * c, false, false, true, false, "fc projection"});
      shapes.push_back({bt, c, 3 * c, true, false, false, false, "d ln1 = dqkv W^T"});
      shapes.push_back({bt, c, c, true, false, false, false, "d atty = dY W^T"});
      shapes.push_back({bt, 4 * c, c, true, true, false, true, "d fc = (dY W^T) * gelu' (bf16)"});
      shapes.push_back({bt, c, 4 * c, true, false, false, false, "d ln2 = dfc W^T"});
      shapes.push_back({c, 3 * c, bt, false, false, false, false, "dWqkv += ln1^T dqkv", true});
      shapes.push_back({c, 4 * c, bt, false, false, false, false, "dWfc += ln2^T dfc", true});
      shapes.push_back({4 * c, c, bt, false, false, false, false, "dWproj += gelu^T dY", true});
    }
  }
  // lay: B stored (K,N) or (N,K); ^: A stored (K,M) (a weight gradient)
  fmt::print("{:>5} {:>5} {:>5} {:>4} {:>4}  {:>9} {:>9} {:>6}  {}\n", "M", "N", "K", "lay", "C",
             "oneDNN", "own", "ratio", "GFLOP/s medians of " + std::to_string(reps));
  const char* cold_env = std::getenv("GT_BENCH_COLD");
  const bool cold = cold_env && cold_env[0] == '1';
  std::vector<float> flush(cold ? 64 << 20 : 0);  // 256 MiB written between calls when cold
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  for (const Shape& s : shapes) {
    std::vector<uint16_t> a(s.M * s.K), b(s.K * s.N);
    for (auto& x : a) x = cpu::to_bf16(normal(gen));
    for (auto& x : b) x = cpu::to_bf16(normal(gen));
    std::vector<float> bias(s.N, 0.5f), c(s.M * s.N);
    std::vector<uint16_t> mul(s.mul ? s.M * s.N : 0, cpu::to_bf16(1.5f));
    const void* mp = s.mul ? mul.data() : nullptr;
    const float* bp = s.bias ? bias.data() : nullptr;
    auto med = gt::bench::alternate(
        reps,
        [&](int, int k) {
          if (k == 0)
            cpu::onednn_matmul(c.data(), a.data(), b.data(), bp, s.M, s.N, s.K, s.trans_a,
                               s.trans_b, s.trans_a, cpu::MmType::bf16,
                               {.mul = mp, .mul_bf16 = true, .c_bf16 = s.c_bf16});
          else
            cpu::amx_matmul_bf16(c.data(), a.data(), b.data(), s.M, s.N, s.K, s.trans_a, s.trans_b,
                                 {.bias = bp,
                                  .mul = mp,
                                  .mul_bf16 = true,
                                  .c_bf16 = s.c_bf16,
                                  .accumulate = s.trans_a});
        },
        [&](int, int) {
          if (!cold) return;
          for (size_t i = 0; i < flush.size(); i += 16) flush[i] += 1.0f;  // evict the caches
        });
    const double flop = 2.0 * s.M * s.N * s.K;
    fmt::print("{:>5} {:>5} {:>5} {:>4} {:>4}  {:>9.0f} {:>9.0f} {:>6.2f}  {}\n", s.M, s.N, s.K,
               s.trans_a   ? "KN^"
               : s.trans_b ? "NK"
                           : "KN",
               s.c_bf16 ? "bf16" : "f32", flop / med[0] / 1e9, flop / med[1] / 1e9, med[0] / med[1],
               s.what);
  }
  return 0;
}
