// bench/mlp_gelu_fusion.cpp: the MLP's GELU with fusion on against its two-pass form, per
// layer of nanoGPT's shakespeare-char model (N = batch x 256 rows, C = 384):
//   two-pass: gelu_forward, then in the backward matmul_backward(mlp.c_proj) + gelu_backward;
//   fused:    gelu_forward_fused (also writes gelu'), then matmul_backward_gelu (the product
//             multiplies by gelu' as a oneDNN post-op).
// Six layers' buffers are used in turn, so the data comes from memory as in training. The two
// forms alternate in one process, `reps` rounds; prints JSON with each one's median seconds
// per layer and their ratio. Under bf16, with bf16 activations on, as the model runs it.
// Usage: gt_mlp_gelu_fusion [precision=bf16] [batch=8] [reps=30] [threads=2]
#include <fmt/format.h>

#include <random>
#include <vector>

#include "alternate.h"
#include "backend/backend.h"

int main(int argc, char** argv) {
  using namespace gt;
  const bench::Args args = bench::parse_args(argc, argv, 30);
  const Precision p = args.precision;
  const int B = args.batch;
  const int64_t N = (int64_t)B * 256, C = 384, H = 4 * C, L = 6;
  auto be = make_backend("cpu");
  be->set_precision(p);
  // under bf16 the tensors are typed as the model plans them: products' inputs, gelu' and the
  // gradient handed to c_fc's product are bf16
  const bool b16 = p == Precision::bf16;
  auto typed = [&](std::vector<float>& v) {
    return b16 ? DevPtr(v.data(), DType::bf16) : DevPtr(v.data());
  };
  std::mt19937 g(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto randn = [&](int64_t n, float s) {
    std::vector<float> v(n);
    for (auto& x : v) x = s * nd(g);
    return v;
  };
  struct Layer {
    std::vector<float> fch, fchg, dgelu, w, dw, db;
  };
  std::vector<Layer> layers(L);
  for (auto& l : layers)
    l = {randn(N * H, 1.f),   std::vector<float>(N * H), std::vector<float>(N * H),
         randn(H * C, 0.02f), std::vector<float>(H * C), std::vector<float>(C)};
  auto dres = randn(N * C, 1e-3f);
  std::vector<float> d4C(N * H), d4C16(N * H), dC(N * C), wfc = randn(C * H, 0.02f), dwfc(C * H),
                                                          dbfc(H);
  // c_fc's input (ln_2's output; a bf16 array under bf16 activations): zeros suit both
  std::vector<float> ln2(N * C, 0.0f);
  // k = 0: two-pass; 1: fused
  auto run = [&](int r, int k) {
    Layer& l = layers[r % L];
    if (k == 0) {
      be->gelu_forward(typed(l.fchg), l.fch.data(), N * H);
      be->matmul_backward(d4C.data(), l.dw.data(), l.db.data(), dres.data(), typed(l.fchg),
                          l.w.data(), N, H, C);
      be->gelu_backward(b16 ? typed(d4C16) : DevPtr(d4C.data()), l.fch.data(), d4C.data(), N * H);
    } else {
      be->gelu_forward_fused(typed(l.fchg), typed(l.dgelu), l.fch.data(), N * H);
      be->matmul_backward_gelu(typed(d4C), l.dw.data(), l.db.data(), dres.data(), typed(l.fchg),
                               l.w.data(), typed(l.dgelu), N, H, C);
    }
  };
  // the next product reads d4C (bf16: the copy the GELU's backward handed on), as c_fc's
  // backward does in training; the same in both forms, not timed
  auto next = [&](int, int k) {
    const DevPtr dout = b16 ? typed(k == 0 ? d4C16 : d4C) : DevPtr(d4C.data());
    be->matmul_backward(dC.data(), dwfc.data(), dbfc.data(), dout, typed(ln2), wfc.data(), N, C, H);
  };
  auto [a, b] = bench::alternate(args.reps, run, next);
  fmt::print(
      "{{\"precision\": \"{}\", \"batch\": {}, \"reps\": {}, \"threads\": {}, "
      "\"two_pass_s\": {:.5f}, \"fused_s\": {:.5f}, \"speedup\": {:.3f}}}\n",
      to_string(p), B, args.reps, args.threads, a, b, a / b);
}
