// greentrain eval: validation loss and perplexity of a run's checkpoint.
#include <fmt/format.h>

#include <cmath>

#include "cli/command.h"
#include "core/bytes_json.h"
#include "core/error.h"
#include "train/data.h"
#include "train/trainer.h"

// the command's own names, apart from the other command files' in a unity batch
namespace gt_cmd_eval {
namespace {

struct Args {
  std::string run_dir, data, json;
  std::vector<std::string> sets;
};

int run_eval(const Args& a) {
  gt::LoadedModel lm = gt::load_model(a.run_dir, 0, a.sets);
  gt::TrainConfig cfg = lm.cfg;
  if (!a.data.empty()) cfg.data_path = a.data;
  if (cfg.data_path.empty())
    throw gt::Error(fmt::format("{}: no data to evaluate on; pass --data PATH", a.run_dir));
  gt::TokenData d = gt::load_data(cfg, &lm.tokenizer);
  if (d.val.empty())
    throw gt::Error(
        fmt::format("{}: no validation split (data.val_fraction = 0 and no "
                    "data.val_path)",
                    cfg.data_path));
  double loss =
      gt::evaluate_loss(*lm.model, d.val, cfg.batch_size, cfg.model.block_size, cfg.eval_steps);
  const double bytes_per_token = gt::eval_bytes_per_token(lm.tokenizer, d.val, cfg.batch_size,
                                                          cfg.model.block_size, cfg.eval_steps);
  const auto bpb = gt::bits_per_byte(loss, bytes_per_token);
  if (!a.json.empty()) {
    gt::cli::write_json_output(
        a.json, {{"schema", "greentrain.eval/1"},
                 {"run_dir", gt::bytes_to_json(a.run_dir)},  // paths: any bytes (issue 31 §1)
                 {"step", lm.step},
                 {"val_loss", loss},
                 {"perplexity", std::exp(loss)},
                 {"bits_per_byte", bpb ? nlohmann::json(*bpb) : nlohmann::json()},
                 {"bytes_per_token", bpb ? nlohmann::json(bytes_per_token) : nlohmann::json()},
                 {"tokenizer", lm.tokenizer.kind},
                 {"batches", cfg.eval_steps},
                 {"batch_size", cfg.batch_size},
                 {"block_size", cfg.model.block_size},
                 {"data", gt::bytes_to_json(cfg.data_path)}});
  }
  std::fprintf(
      gt::cli::human_out(a.json),
      "step %lld | val loss %.4f | perplexity %.3f | %s | %d batches of %d x %d tokens from %s\n",
      (long long)lm.step, loss, std::exp(loss),
      bpb ? fmt::format("{:.4f} bits per byte ({:.3f} bytes per token, {} tokenizer)", *bpb,
                        bytes_per_token, lm.tokenizer.kind)
                .c_str()
          : "bits per byte unknown (pre-tokenized data: the bytes of the tokens are unknown)",
      cfg.eval_steps, cfg.batch_size, cfg.model.block_size, cfg.data_path.c_str());
  return 0;
}

void setup(CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("eval", "Report validation loss and perplexity of a checkpoint");
  sub->add_option("run_dir", args->run_dir,
                  "Run folder written by greentrain train, or a Hugging Face GPT-2 folder "
                  "(config.json, model.safetensors, vocab.json + merges.txt)")
      ->required();
  sub->add_option("--data", args->data, "Data file (default: the run's data.path)");
  sub->add_option("--set", args->sets,
                  "Override a key, e.g. --set train.eval_steps=50 or --set data.format=nanogpt "
                  "(model.* keys stay the checkpoint's)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  gt::cli::add_json_option(sub, args->json, "the validation figures");
  sub->callback([args] { gt::cli::exit_code() = run_eval(*args); });
}

gt::cli::Registrar reg(30, "eval", setup);

}  // namespace
}  // namespace gt_cmd_eval
