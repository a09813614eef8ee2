// greentrain eval: validation loss and perplexity of a run's checkpoint.
#include <fmt/format.h>

#include <cmath>

#include "cli/command.h"
#include "core/error.h"
#include "train/data.h"
#include "train/trainer.h"

namespace {

struct Args {
  std::string run_dir, data;
};

int run_eval(const Args& a) {
  gt::LoadedModel lm = gt::load_model(a.run_dir);
  gt::TrainConfig cfg = lm.cfg;
  if (!a.data.empty()) cfg.data_path = a.data;
  gt::TokenData d = gt::load_data(cfg, &lm.tokenizer);
  if (d.val.empty())
    throw gt::Error(
        fmt::format("{}: no validation split (data.val_fraction = 0 and no "
                    "data.val_path)",
                    cfg.data_path));
  double loss =
      gt::evaluate_loss(*lm.model, d.val, cfg.batch_size, cfg.model.block_size, cfg.eval_steps);
  std::printf(
      "step %lld | val loss %.4f | perplexity %.3f | %d batches of %d x %d tokens from %s\n",
      (long long)lm.step, loss, std::exp(loss), cfg.eval_steps, cfg.batch_size,
      cfg.model.block_size, cfg.data_path.c_str());
  return 0;
}

void setup(CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("eval", "Report validation loss and perplexity of a checkpoint");
  sub->add_option("run_dir", args->run_dir, "Run folder written by greentrain train")->required();
  sub->add_option("--data", args->data, "Data file (default: the run's data.path)");
  sub->callback([args] { gt::cli::exit_code() = run_eval(*args); });
}

gt::cli::Registrar reg(30, "eval", setup);

}  // namespace
