// greentrain sample: generates text from a run's checkpoint.
#include <fmt/format.h>

#include <cmath>
#include <random>

#include "cli/command.h"
#include "core/error.h"
#include "train/trainer.h"

// the command's own names, apart from the other command files' in a unity batch
namespace gt_cmd_sample {
namespace {

struct Args {
  std::string run_dir, prompt;
  int tokens = 300;
  double temperature = 0.8;
  int top_k = 0;
  uint64_t seed = 1337;
};

int run_sample(const Args& a) {
  // the options' ranges: a usage error (exit 2), before the model is loaded
  if (a.tokens < 0)
    throw gt::UsageError(fmt::format("--tokens {}: expected 0 to 2147483647", a.tokens));
  if (!(a.temperature >= 0))
    throw gt::UsageError(
        fmt::format("--temperature {}: expected 0 (greedy) or more", a.temperature));
  // a negative k was taken as "all" without a word
  if (a.top_k < 0)
    throw gt::UsageError(fmt::format("--top-k {}: expected 0 (all tokens) or more", a.top_k));
  gt::LoadedModel lm = gt::load_model(a.run_dir, 1);
  std::vector<int32_t> ctx;
  if (!a.prompt.empty()) {
    if (lm.tokenizer.kind == "ids")
      throw gt::Error(fmt::format(
          "--prompt: {} has no tokenizer (it was trained on token shards without data.tokenizer, "
          "or its folder has none), so text cannot be encoded; sample without --prompt",
          a.run_dir));
    try {
      ctx = lm.tokenizer.encode(a.prompt);
    } catch (const gt::Error& e) {
      throw gt::Error(fmt::format("--prompt: {}", e.what()));
    }
  } else {
    // start from a newline when the vocabulary has one, as nanoGPT's sample.py does
    auto nl = lm.tokenizer.kind == "ids" ? std::vector<int32_t>{} : lm.tokenizer.encode("\n");
    ctx.push_back(nl.empty() ? 0 : nl[0]);
  }
  std::fputs(lm.tokenizer.decode(ctx.data(), ctx.size()).c_str(), stdout);
  const int V = lm.cfg.model.vocab_size, BS = lm.cfg.model.block_size;
  const int V_tok = lm.tokenizer.vocab_size();
  std::mt19937_64 rng(a.seed);
  std::vector<double> p(V_tok);
  for (int n = 0; n < a.tokens; ++n) {
    int T = std::min<int>(ctx.size(), BS);
    lm.model->forward(ctx.data() + ctx.size() - T, nullptr, 1, T, /*for_backward=*/false);
    const std::vector<float> all = lm.model->logits();  // (1, T, V), through the backend
    const float* logits = all.data() + (int64_t)(T - 1) * V;
    int32_t next = 0;
    if (a.temperature == 0) {
      for (int j = 1; j < V_tok; ++j)
        if (logits[j] > logits[next]) next = j;
    } else {
      double maxv = -INFINITY;
      for (int j = 0; j < V_tok; ++j) maxv = std::max(maxv, (double)logits[j]);
      double kth = -INFINITY;
      if (a.top_k > 0 && a.top_k < V_tok) {
        std::vector<float> sorted(logits, logits + V_tok);
        std::nth_element(sorted.begin(), sorted.begin() + (a.top_k - 1), sorted.end(),
                         std::greater<float>());
        kth = sorted[a.top_k - 1];
      }
      for (int j = 0; j < V_tok; ++j)
        p[j] = logits[j] < kth ? 0.0 : std::exp((logits[j] - maxv) / a.temperature);
      std::discrete_distribution<int> dist(p.begin(), p.end());
      next = dist(rng);
    }
    ctx.push_back(next);
    std::fputs(lm.tokenizer.decode(&next, 1).c_str(), stdout);
    std::fflush(stdout);
  }
  std::fputs("\n", stdout);
  return 0;
}

void setup(CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("sample", "Generate text from a run's checkpoint");
  sub->add_option("run_dir", args->run_dir,
                  "Run folder written by greentrain train, or a Hugging Face GPT-2 folder "
                  "(config.json, model.safetensors, vocab.json + merges.txt)")
      ->required();
  sub->add_option("--prompt", args->prompt, "Text to continue (default: a newline)");
  sub->add_option("--tokens", args->tokens, "Tokens to generate, 0 to 2147483647")
      ->check(gt::cli::int_range(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  sub->add_option("--temperature", args->temperature, "Softmax temperature; 0 is greedy")
      ->capture_default_str();
  sub->add_option("--top-k", args->top_k, "Sample only from the k most likely tokens (0: all)")
      ->check(
          gt::cli::int_range(0, std::numeric_limits<int>::max(), "0 (all tokens) to 2147483647"));
  sub->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  sub->callback([args] { gt::cli::exit_code() = run_sample(*args); });
}

gt::cli::Registrar reg(20, "sample", setup);

}  // namespace
}  // namespace gt_cmd_sample
