// bench/attention_bf16.cpp: the fused (no stored att) causal attention with bf16 operands, its
// oneDNN form (a head's six products as single-threaded oneDNN calls) against its own AVX512-BF16
// kernels (backend/cpu/attention_bf16.h), forward and backward, at shakespeare-char-cpu's
// shape by default (B = 12, T = 64, C = 128, NH = 4: head size 32), writing the bf16 outputs
// only (out16, dqkv16) as a bf16 training step does. Each call works on one of `layers` layers'
// buffers in turn (six: its input comes from L3 as in training; one: from L2, the kernels' own
// speed). The two forms alternate in one process, `reps` rounds; prints JSON with the CPU
// model, each form's median seconds per call, the ratios, and the form AttnKernels::fastest
// picks for this shape here (own_bf16_kernels_faster).
// Usage: gt_attention_bf16 [reps=200] [threads=2] [B=12] [T=64] [C=128] [NH=4] [layers=6]
#include <fmt/format.h>
#include <omp.h>

#include <random>
#include <vector>

#include "alternate.h"
#include "backend/cpu/attention.h"
#include "core/error.h"
#include "energy/cpu_power_table.h"

int main(int argc, char** argv) {
  using namespace gt;
  auto arg = [&](int i, const char* what, int dflt) {
    return argc > i ? parse_number<int>(argv[i], what, "a whole number") : dflt;
  };
  const int reps = arg(1, "argument 1 (reps)", 200), threads = arg(2, "argument 2 (threads)", 2);
  const int B = arg(3, "argument 3 (B)", 12), T = arg(4, "argument 4 (T)", 64),
            C = arg(5, "argument 5 (C)", 128), NH = arg(6, "argument 6 (NH)", 4);
  omp_set_num_threads(threads);
  const int L = arg(7, "argument 7 (layers)", 6);
  if (L < 1) throw Error("argument 7 (layers): expected at least 1, got " + std::to_string(L));
  std::mt19937 g(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  struct Layer {
    std::vector<float> qkv, lse, dout;
    std::vector<uint16_t> out16, dqkv16;
  };
  std::vector<Layer> layers(L);
  for (auto& l : layers) {
    l.qkv.resize((size_t)B * T * 3 * C);
    l.dout.resize((size_t)B * T * C);
    for (auto& x : l.qkv) x = nd(g);
    for (auto& x : l.dout) x = 1e-2f * nd(g);
    l.out16.resize((size_t)B * T * C);
    l.lse.resize((size_t)B * NH * T);
    l.dqkv16.resize((size_t)B * T * 3 * C);
  }
  // k = 0: oneDNN's products; 1: the own kernels
  cpu::Attention att[2];
  for (int k = 0; k < 2; ++k) {
    att[k].set_type(cpu::AttnType::bf16);
    att[k].set_bf16_kernels(k == 1 ? cpu::AttnKernels::own : cpu::AttnKernels::onednn);
  }
  if (!att[1].uses_own_bf16_kernels(T, C, NH)) {
    fmt::print(stderr,
               "gt_attention_bf16: the own bf16 kernels do not run here (no AVX512_BF16 "
               "in this build, or head size {} not a multiple of 16 up to 128)\n",
               C / NH);
    return 1;
  }
  auto nothing = [](int, int) {};
  auto fwd = bench::alternate(
      reps,
      [&](int r, int k) {
        Layer& l = layers[r % L];
        att[k].forward(nullptr, nullptr, l.lse.data(), l.qkv.data(), B, T, C, NH, l.out16.data());
      },
      nothing);
  auto bwd = bench::alternate(
      reps,
      [&](int r, int k) {
        Layer& l = layers[r % L];
        att[k].backward(nullptr, l.dout.data(), l.qkv.data(), nullptr, l.lse.data(), B, T, C, NH,
                        l.dqkv16.data());
      },
      nothing);
  const double one = fwd[0] + bwd[0], own = fwd[1] + bwd[1];
  fmt::print(
      "{{\"cpu\": \"{}\", \"B\": {}, \"T\": {}, \"C\": {}, \"NH\": {}, \"reps\": {}, "
      "\"threads\": {}, \"layers\": {}, \"onednn_forward_s\": {:.3e}, \"own_forward_s\": {:.3e}, "
      "\"onednn_backward_s\": {:.3e}, \"own_backward_s\": {:.3e}, \"forward_speedup\": {:.2f}, "
      "\"backward_speedup\": {:.2f}, \"total_speedup\": {:.2f}, \"fastest_picks\": \"{}\"}}\n",
      energy::read_cpuinfo("/proc/cpuinfo").model_name, B, T, C, NH, reps, threads, L, fwd[0],
      fwd[1], bwd[0], bwd[1], fwd[0] / fwd[1], bwd[0] / bwd[1], one / own,
      cpu::own_bf16_kernels_faster(T, C / NH) ? "own" : "onednn");
}
