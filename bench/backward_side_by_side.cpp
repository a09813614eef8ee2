// bench/backward_side_by_side.cpp: a linear layer's two backward products, dX = dY W^T and
// dW += X^T dY, in two schedules:
//   sequential:   one after the other, each on the whole OpenMP team (as matmul_backward);
//   side by side: an OpenMP region of 2 threads, each running one product alone (oneDNN
//                 starts no threads inside a parallel region; each thread's team is set to 1
//                 so that its primitive is made for one thread).
// Shapes of nanoGPT's shakespeare-char layers (C = 384, N = batch x 256 rows: qkv 384x1152,
// attention projection 384x384, MLP 384x1536 and 1536x384, the LM head 384x65), or with
// `small` those of configs/shakespeare-char-cpu.toml (C = 128, N = batch x 64). The two
// schedules alternate in one process, `reps` rounds (medians); prints one JSON line per
// shape with each one's median seconds and the ratio, and whether each product's result is
// the same bit for bit in both schedules (dW accumulates onto the same start).
// Usage: gt_backward_side_by_side [precision=bf16] [batch=8] [reps=40] [threads=2] [small]
#include <fmt/format.h>
#include <omp.h>

#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "alternate.h"
#include "backend/cpu/onednn_matmul.h"

namespace {

using gt::cpu::MmType;
using gt::cpu::onednn_matmul;

struct Layer {
  const char* name;
  int64_t C, OC;
  bool w_transposed;  // the LM head's weight is wte, stored (V, C)
};

/// The two products of matmul_backward (cpu_backend.cpp), with the same arguments.
void dx(void* dinp, const void* dout, const void* w, const Layer& l, int64_t N, MmType t) {
  onednn_matmul(dinp, dout, w, nullptr, N, l.C, l.OC, false, !l.w_transposed, false, t);
}
void dw(float* dwt, const void* dout, const void* x, const Layer& l, int64_t N, MmType t) {
  if (!l.w_transposed)
    onednn_matmul(dwt, x, dout, nullptr, l.C, l.OC, N, true, false, true, t);
  else
    onednn_matmul(dwt, dout, x, nullptr, l.OC, l.C, N, true, false, true, t);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gt;
  const bool small = argc > 5 && std::string(argv[5]) == "small";
  const bench::Args args = bench::parse_args(argc > 5 ? 5 : argc, argv, 40);
  const MmType t = args.precision == Precision::fp32 ? MmType::f32 : MmType::bf16;
  const size_t es = t == MmType::f32 ? 4 : 2;
  const int64_t C = small ? 128 : 384, N = (int64_t)args.batch * (small ? 64 : 256);
  const Layer layers[] = {{"qkv", C, 3 * C, false},
                          {"attproj", C, C, false},
                          {"fc", C, 4 * C, false},
                          {"fcproj", 4 * C, C, false},
                          {"lm_head", C, 65, true}};
  std::mt19937 g(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  // random operands of `t` (bf16: the high half of each float)
  auto randn = [&](int64_t n) {
    std::vector<unsigned char> v(n * es);
    for (int64_t i = 0; i < n; ++i) {
      float f = nd(g);
      std::memcpy(&v[i * es], reinterpret_cast<char*>(&f) + (4 - es), es);
    }
    return v;
  };
  for (const Layer& l : layers) {
    auto dout = randn(N * l.OC), x = randn(N * l.C), w = randn(l.C * l.OC);
    std::vector<float> dinp0(N * l.C), dinp1(N * l.C), dw0(l.C * l.OC), dw1(l.C * l.OC);
    auto run = [&](int, int k) {
      float* di = k == 0 ? dinp0.data() : dinp1.data();
      float* dwt = k == 0 ? dw0.data() : dw1.data();
      if (k == 0) {
        dx(di, dout.data(), w.data(), l, N, t);
        dw(dwt, dout.data(), x.data(), l, N, t);
        return;
      }
#pragma omp parallel num_threads(2)
      {
        omp_set_num_threads(1);  // this thread's primitives are made for one thread
        if (omp_get_thread_num() == 0)
          dx(di, dout.data(), w.data(), l, N, t);
        else
          dw(dwt, dout.data(), x.data(), l, N, t);
      }
    };
    bool same_dx = true, same_dw = true;
    auto after = [&](int, int k) {
      if (k == 0) return;
      same_dx = same_dx && std::memcmp(dinp0.data(), dinp1.data(), dinp0.size() * 4) == 0;
      same_dw = same_dw && std::memcmp(dw0.data(), dw1.data(), dw0.size() * 4) == 0;
    };
    auto [seq, sbs] = bench::alternate(args.reps, run, after);
    // each product alone: on the team, then on one thread (the team set to 1)
    auto alone = [&](int threads) {
      omp_set_num_threads(threads);
      auto [x_s, w_s] = bench::alternate(
          args.reps,
          [&](int, int k) {
            if (k == 0)
              dx(dinp0.data(), dout.data(), w.data(), l, N, t);
            else
              dw(dw0.data(), dout.data(), x.data(), l, N, t);
          },
          [](int, int) {});
      omp_set_num_threads(args.threads);
      return std::array<double, 2>{x_s, w_s};
    };
    const auto team = alone(args.threads), one = alone(1);
    const double flop = 2.0 * 2.0 * N * l.C * l.OC;
    fmt::print(
        "{{\"precision\": \"{}\", \"layer\": \"{}\", \"N\": {}, \"C\": {}, \"OC\": {}, "
        "\"threads\": {}, \"reps\": {}, \"sequential_s\": {:.6f}, \"side_by_side_s\": {:.6f}, "
        "\"speedup\": {:.3f}, \"sequential_gflops\": {:.0f}, \"dx_same\": {}, "
        "\"dw_same\": {}, \"dx_team_s\": {:.6f}, \"dw_team_s\": {:.6f}, \"dx_1thread_s\": {:.6f}, "
        "\"dw_1thread_s\": {:.6f}}}\n",
        to_string(args.precision), l.name, N, l.C, l.OC, args.threads, args.reps, seq, sbs,
        seq / sbs, flop / seq * 1e-9, same_dx, same_dw, team[0], team[1], one[0], one[1]);
  }
}
