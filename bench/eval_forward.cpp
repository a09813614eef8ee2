// bench/eval_forward.cpp: the evaluation forward (no backward follows) with c_fc and its GELU
// as one oneDNN product with a GELU post-op (GPT::forward(..., for_backward = false)) against
// the training forward (product, then gelu_forward_fused, which also writes gelu' for the
// backward), on the same model and batch.
// The two alternate in one process, `reps` times each, so the machine's drift hits both
// alike; prints JSON with the median seconds of each and their ratio.
// Usage: gt_eval_forward [precision=bf16] [batch=8] [reps=20] [threads=2]
// Model: nanoGPT's shakespeare-char (6 layers, 6 heads, 384 wide, context 256, vocabulary 65).
#include <fmt/format.h>

#include <random>
#include <string>
#include <vector>

#include "alternate.h"
#include "backend/backend.h"
#include "model/gpt.h"

int main(int argc, char** argv) {
  using namespace gt;
  const bench::Args args = bench::parse_args(argc, argv, 20);
  const Precision p = args.precision;
  const int B = args.batch;
  GPTConfig c{6, 6, 384, 256, 65};
  const int T = c.block_size;
  auto be = make_backend("cpu");
  be->set_precision(p);
  GPT m(c, B, Recompute::none, *be, /*fused=*/true);
  m.init_weights(1);
  std::mt19937 g(2);
  std::vector<int32_t> in((size_t)B * T), tg((size_t)B * T);
  for (size_t i = 0; i < in.size(); ++i) in[i] = g() % c.vocab_size, tg[i] = g() % c.vocab_size;
  float loss[2] = {0, 0};
  // k = 0: one product with GELU (evaluation); 1: the training forward
  auto [a, b] = bench::alternate(
      args.reps,
      [&](int, int k) { loss[k] = m.forward(in.data(), tg.data(), B, T, /*for_backward=*/k == 1); },
      [](int, int) {});
  fmt::print(
      "{{\"precision\": \"{}\", \"batch\": {}, \"reps\": {}, \"threads\": {}, "
      "\"fused_gelu_s\": {:.5f}, \"two_pass_s\": {:.5f}, \"speedup\": {:.3f}, "
      "\"loss_fused_gelu\": {:.6f}, \"loss_two_pass\": {:.6f}}}\n",
      to_string(p), B, args.reps, args.threads, a, b, b / a, loss[0], loss[1]);
}
