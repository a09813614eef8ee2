// bench/own_kernels.cpp: the CPU backend's own memory-bound kernels (the fused residual +
// LayerNorm forward, the LayerNorm backward, the fused GELU forward, the fused softmax +
// cross-entropy, the AdamW step) against a copy of the same bytes: each kernel alternates in
// one process with a stream that reads as many bytes as the kernel must read and writes as many
// as it must write (AVX-512 loads and stores, the same OpenMP threads and static split), so
// "of copy" = copy time / kernel time is how close the kernel runs to the memory speed of its
// own traffic here (1.0: as fast as moving its bytes; below: its arithmetic or its passes cost
// more). In-place bytes (read and written back) count twice, as the yardstick moves them. Bytes are
// the least each kernel must move, in the dtypes a bf16 training step gives it (bf16 LayerNorm and
// GELU outputs, f32 residual stream, gradients and optimizer state). Each call works on one of
// `layers` sets of buffers in turn (4: what a step's layers leave in L2 and L3). Shapes: N x C of
// the CPU preset (768 x 128, vocabulary 65, 0.81M parameters) and of nanoGPT's shakespeare-char
// (2048 x 384, 10.7M), or one from the command line. Usage: gt_own_kernels [reps=200] [threads=2]
// [layers=4] [N C V params]
#include <fmt/format.h>
#include <omp.h>

#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "alternate.h"
#include "backend/backend.h"
#include "backend/cpu/simd512.h"
#include "core/error.h"
#include "energy/cpu_power_table.h"

namespace {

using gt::DevPtr;

struct KShape {
  int64_t N, C, V, params;
};

/// A kernel's least traffic: bytes only read, bytes read and written back in place (an
/// accumulated gradient, the optimizer's state), bytes only written.
struct Traffic {
  int64_t read, in_place, written;
  int64_t total() const { return read + 2 * in_place + written; }
};

/// The yardstick: reads t.read + t.in_place bytes of a (writing the first t.in_place back) and
/// writes t.written bytes of w, in 64-byte vectors (sizes rounded down to them), the work split
/// as the kernels split theirs; returns a value of the reads so that they are not optimised
/// away.
float stream(char* a, char* w, const Traffic& t) {
  const int64_t na = (t.read + t.in_place) / 64, np = t.in_place / 64, nw = t.written / 64;
  const int64_t n = na > nw ? na : nw;
  float acc = 0;
#if GT_SIMD512
#pragma omp parallel reduction(+ : acc)
  {
    __m512 s = _mm512_setzero_ps();
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      __m512 v = _mm512_set1_ps(1.0f);
      if (i < na) v = _mm512_loadu_ps(reinterpret_cast<const float*>(a + i * 64));
      if (i < np) _mm512_storeu_ps(reinterpret_cast<float*>(a + i * 64), v);
      if (i < nw) _mm512_storeu_ps(reinterpret_cast<float*>(w + i * 64), v);
      s = _mm512_add_ps(s, v);
    }
    acc += _mm512_reduce_add_ps(s);
  }
#else
  for (int64_t i = 0; i < n; ++i) {
    if (i < na) acc += a[i * 64];
    if (i < np) a[i * 64] = static_cast<char>(i);
    if (i < nw) w[i * 64] = static_cast<char>(i);
  }
#endif
  return acc;
}

/// One kernel's row: its median seconds per call and the yardstick's, alternated `reps` rounds
/// (each on buffer set r % layers); GB/s count t.total() bytes.
void row(const char* name, int reps, int layers, const Traffic& t,
         const std::function<void(int)>& kernel) {
  std::vector<std::vector<char>> a(layers, std::vector<char>(t.read + t.in_place, 1)),
      w(layers, std::vector<char>(t.written));
  volatile float sink = 0;
  const auto med = gt::bench::alternate(
      reps,
      [&](int r, int k) {
        const int l = r % layers;
        if (k == 0)
          kernel(l);
        else
          sink = sink + stream(a[l].data(), w[l].data(), t);
      },
      [](int, int) {});
  const double gb = t.total() / 1e9;
  fmt::print("  {:<30} {:>8.1f} {:>9.1f} {:>8.1f} {:>8.1f} {:>7.2f}\n", name, 1e6 * med[0],
             1e6 * med[1], gb / med[0], gb / med[1], med[1] / med[0]);
}

void run_shape(const KShape& s, int reps, int layers) {
  using namespace gt;
  auto be = make_backend("cpu");
  be->set_precision(Precision::bf16);
  const int64_t N = s.N, C = s.C, V = s.V, P = s.params, H = 4 * C;
  std::mt19937 g(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto randn = [&](int64_t n, float scale) {
    std::vector<float> v(n);
    for (auto& x : v) x = scale * nd(g);
    return v;
  };
  struct L {
    std::vector<float> a, b, res, mean, rstd, dinp, dout, fch, logits, losses;
    std::vector<uint16_t> out16, gelu16, dgelu16;
    std::vector<int32_t> targets;
  };
  std::vector<L> ls(layers);
  for (auto& l : ls) {
    l.a = randn(N * C, 1), l.b = randn(N * C, 1), l.res.resize(N * C), l.out16.resize(N * C);
    l.mean.resize(N), l.rstd.resize(N), l.dinp = randn(N * C, 1e-2f), l.dout = randn(N * C, 1e-2f);
    l.fch = randn(N * H, 1), l.gelu16.resize(N * H), l.dgelu16.resize(N * H);
    l.logits = randn(N * V, 1), l.losses.resize(N), l.targets.resize(N);
    for (auto& t : l.targets) t = static_cast<int32_t>(g() % V);
  }
  std::vector<float> w = randn(C, 1), bias = randn(C, 1), dw(C), db(C);
  // the layernorm statistics the backward reads
  for (auto& l : ls)
    be->residual_layernorm_forward(l.res.data(), DevPtr(l.out16.data(), DType::bf16), l.mean.data(),
                                   l.rstd.data(), l.a.data(), l.b.data(), w.data(), bias.data(), N,
                                   C);
  fmt::print("N {} x C {}, V {}, {} parameters\n", N, C, V, P);
  fmt::print("  {:<30} {:>8} {:>9} {:>8} {:>8} {:>7}\n", "kernel", "us", "copy us", "GB/s", "copy",
             "of copy");
  row("residual_layernorm_forward", reps, layers, {8 * N * C + 8 * C, 0, 6 * N * C + 8 * N},
      [&](int i) {
        L& l = ls[i];
        be->residual_layernorm_forward(l.res.data(), DevPtr(l.out16.data(), DType::bf16),
                                       l.mean.data(), l.rstd.data(), l.a.data(), l.b.data(),
                                       w.data(), bias.data(), N, C);
      });
  row("layernorm_backward", reps, layers, {8 * N * C + 8 * N + 4 * C, 4 * N * C + 8 * C, 0},
      [&](int i) {
        L& l = ls[i];
        be->layernorm_backward(l.dinp.data(), dw.data(), db.data(), l.dout.data(), l.res.data(),
                               w.data(), l.mean.data(), l.rstd.data(), N, C);
      });
  row("gelu_forward_fused (N x 4C)", reps, layers, {4 * N * H, 0, 4 * N * H}, [&](int i) {
    L& l = ls[i];
    be->gelu_forward_fused(DevPtr(l.gelu16.data(), DType::bf16),
                           DevPtr(l.dgelu16.data(), DType::bf16), l.fch.data(), N * H);
  });
  row("softmax_crossentropy_fused", reps, layers, {4 * N, 4 * N * V, 4 * N}, [&](int i) {
    L& l = ls[i];
    // in place: the logits become their gradient; their values stay in range each call
    be->softmax_crossentropy_fused(DevPtr(l.logits.data()), l.losses.data(), l.targets.data(),
                                   1.0f / N, N, V);
  });
  // AdamW over one tensor of P parameters: reads g twice (the global norm must be known before
  // the update), updates p, m, v in place (the bf16 weight copies are written only for
  // weights the products registered: none here)
  std::vector<std::vector<float>> p(layers), gr(layers), m(layers), v(layers);
  for (int l = 0; l < layers; ++l)
    p[l] = randn(P, 1e-2f), gr[l] = randn(P, 1e-3f), m[l].assign(P, 0.f), v[l].assign(P, 0.f);
  const float wd = 0.1f;
  int64_t step = 0;
  row("adamw_step", reps, layers, {8 * P, 12 * P, 0}, [&](int i) {
    float* pp = p[i].data();
    const float* gp = gr[i].data();
    float* mp = m[i].data();
    float* vp = v[i].data();
    AdamStep st;
    st.p = &pp, st.g = &gp, st.m = &mp, st.v = &vp, st.n = &P, st.wd = &wd, st.count = 1;
    st.grads = gp, st.grads_n = P, st.clip = 1.0, st.lr = 1e-4f, st.t = ++step;
    be->adamw_step(st);
    be->synchronize();
  });
}

}  // namespace

int run(int argc, char** argv) {
  using namespace gt;
  auto arg = [&](int i, const char* what, int64_t dflt) {
    return argc > i ? parse_number<int64_t>(argv[i], what, "a whole number") : dflt;
  };
  const int reps = static_cast<int>(arg(1, "argument 1 (reps)", 200));
  const int threads = static_cast<int>(arg(2, "argument 2 (threads)", 2));
  const int layers = static_cast<int>(arg(3, "argument 3 (layers)", 4));
  if (reps < 1 || threads < 1 || layers < 1)
    throw Error("reps, threads and layers must be at least 1");
  omp_set_num_threads(threads);
  std::vector<KShape> shapes = {{768, 128, 65, 810000}, {2048, 384, 65, 10700000}};
  if (argc > 4)
    shapes = {{arg(4, "argument 4 (N)", 768), arg(5, "argument 5 (C)", 128),
               arg(6, "argument 6 (V)", 65), arg(7, "argument 7 (params)", 810000)}};
  fmt::print("gt_own_kernels: {}, {} threads, medians of {} alternating rounds, {} buffer sets\n",
             energy::read_cpuinfo("/proc/cpuinfo").model_name, threads, reps, layers);
  for (const KShape& s : shapes) run_shape(s, reps, layers);
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a bad argument: its name, its value, what was expected
    fmt::print(stderr, "gt_own_kernels: {}\n", e.what());
    return 2;
  }
}
