// bench/eval_forward.cpp: the evaluation forward (no backward follows) with c_fc and its GELU
// as one oneDNN product with a GELU post-op (GPT::forward(..., for_backward = false)) against
// the training forward (product, then gelu_forward_fused, which also writes gelu' for the
// backward), on the same model and batch.
// The two alternate in one process, `reps` times each, so the machine's drift hits both
// alike; prints JSON with the median seconds of each and their ratio.
// Usage: gt_eval_forward [precision=bf16] [batch=8] [reps=20] [threads=2]
// Model: nanoGPT's shakespeare-char (6 layers, 6 heads, 384 wide, context 256, vocabulary 65).
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/gpt.h"

int main(int argc, char** argv) {
  using namespace gt;
  const Precision p = parse_precision(argc > 1 ? argv[1] : "bf16");
  const int B = argc > 2 ? std::atoi(argv[2]) : 8;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 20;
  omp_set_num_threads(argc > 4 ? std::atoi(argv[4]) : 2);
  GPTConfig c{6, 6, 384, 256, 65};
  const int T = c.block_size;
  auto be = make_cpu_backend();
  be->set_precision(p);
  GPT m(c, B, Recompute::none, *be, /*fused=*/true);
  m.init_weights(1);
  std::mt19937 g(2);
  std::vector<int32_t> in((size_t)B * T), tg((size_t)B * T);
  for (size_t i = 0; i < in.size(); ++i) in[i] = g() % c.vocab_size, tg[i] = g() % c.vocab_size;
  std::vector<double> t[2];
  float loss[2] = {0, 0};
  for (int r = 0; r <= reps; ++r)
    for (int k = 0; k < 2; ++k) {  // k = 0: one product with GELU; 1: product, then GELU
      auto t0 = std::chrono::steady_clock::now();
      loss[k] = m.forward(in.data(), tg.data(), B, T, /*for_backward=*/k == 1);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) t[k].push_back(s);  // the first round warms up (primitive creation)
    }
  for (auto& v : t) std::sort(v.begin(), v.end());
  const double a = t[0][t[0].size() / 2], b = t[1][t[1].size() / 2];
  fmt::print(
      "{{\"precision\": \"{}\", \"batch\": {}, \"reps\": {}, \"threads\": {}, "
      "\"fused_gelu_s\": {:.5f}, \"two_pass_s\": {:.5f}, \"speedup\": {:.3f}, "
      "\"loss_fused_gelu\": {:.6f}, \"loss_two_pass\": {:.6f}}}\n",
      to_string(p), B, reps, omp_get_max_threads(), a, b, b / a, loss[0], loss[1]);
}
