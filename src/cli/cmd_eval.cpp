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
  std::string run_dir, data, val_data, json;
  std::vector<std::string> sets;
};

// What eval scores, in words and for --json: the files and the part of them.
struct Scored {
  std::string source;              // data.val_path, or data.path whose last part is scored
  std::vector<std::string> files;  // what source names, in the order read
  double fraction = 1;             // the last fraction of them scored (1: all)
  std::string words() const {
    std::string s = fraction < 1 ? fmt::format("the last {:g}% of ", 100 * fraction) : "";
    s += source;
    if (files.size() > 1)
      s += fmt::format(" ({} files, {} .. {})", files.size(), files.front(), files.back());
    return s;
  }
};

Scored scored_data(const gt::TrainConfig& cfg) {
  Scored s;
  s.source = cfg.data_val_path.empty() ? cfg.data_path : cfg.data_val_path;
  s.files = gt::data_files(s.source, cfg.data_format);
  if (cfg.data_val_path.empty()) s.fraction = cfg.val_fraction;
  return s;
}

int run_eval(const Args& a) {
  gt::LoadedModel lm = gt::load_model(a.run_dir, 0, a.sets);
  gt::TrainConfig cfg = lm.cfg;
  // --data is scored as training splits it (its last data.val_fraction), --val-data whole:
  // the run's own validation file is not what the user named
  if (!a.data.empty()) {
    for (const auto& kv : a.sets)
      if (kv.rfind("data.val_path=", 0) == 0)
        throw gt::UsageError(fmt::format(
            "--data {} and --set {}: --data scores its own last data.val_fraction; expected "
            "one of them (--val-data PATH scores a file whole)",
            a.data, kv));
    cfg.data_path = a.data;
    cfg.data_val_path.clear();
  }
  if (!a.val_data.empty()) cfg.data_val_path = a.val_data;
  if (cfg.data_path.empty() && cfg.data_val_path.empty())
    throw gt::Error(fmt::format(
        "{}: no data to evaluate on; pass --data PATH (its last data.val_fraction is scored) or "
        "--val-data PATH (scored whole)",
        a.run_dir));
  if (cfg.data_val_path.empty() && cfg.val_fraction <= 0)
    throw gt::Error(
        fmt::format("{}: no validation split (data.val_fraction = 0 and no data.val_path); pass "
                    "--val-data PATH or --set data.val_fraction=F",
                    cfg.data_path));
  const Scored scored = scored_data(cfg);
  gt::TokenData d = gt::load_validation_data(cfg, lm.tokenizer);
  double loss =
      gt::evaluate_loss(*lm.model, d.val, cfg.batch_size, cfg.model.block_size, cfg.eval_steps);
  const double bytes_per_token = gt::eval_bytes_per_token(d.tokenizer, d.val, cfg.batch_size,
                                                          cfg.model.block_size, cfg.eval_steps);
  const auto bpb = gt::bits_per_byte(loss, bytes_per_token);
  const char* bpb_unknown =
      "pre-tokenized data without a tokenizer (ids): the bytes of the tokens are unknown";
  if (!a.json.empty()) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : scored.files) files.push_back(gt::bytes_to_json(f));
    nlohmann::json j = {
        {"schema", "greentrain.eval/1"},
        {"run_dir", gt::bytes_to_json(a.run_dir)},  // any bytes (issue 31 §1)
        {"step", lm.step},
        {"val_loss", loss},
        {"perplexity", std::exp(loss)},
        {"bits_per_byte", bpb ? nlohmann::json(*bpb) : nlohmann::json()},
        {"bytes_per_token", bpb ? nlohmann::json(bytes_per_token) : nlohmann::json()},
        {"tokenizer", d.tokenizer.kind},
        {"batches", cfg.eval_steps},
        {"batch_size", cfg.batch_size},
        {"block_size", cfg.model.block_size},
        {"data", gt::bytes_to_json(scored.source)},
        {"data_files", files},
        {"data_fraction", scored.fraction}};
    if (!bpb) j["bits_per_byte_unknown_reason"] = bpb_unknown;
    gt::cli::write_json_output(a.json, j);
  }
  std::fprintf(
      gt::cli::human_out(a.json),
      "step %lld | val loss %.4f | perplexity %.3f | %s | %d batches of %d x %d tokens from %s\n",
      (long long)lm.step, loss, std::exp(loss),
      bpb ? fmt::format("{:.4f} bits per byte ({:.3f} bytes per token, {} tokenizer)", *bpb,
                        bytes_per_token, d.tokenizer.kind)
                .c_str()
          : fmt::format("bits per byte unknown ({})", bpb_unknown).c_str(),
      cfg.eval_steps, cfg.batch_size, cfg.model.block_size, scored.words().c_str());
  return 0;
}

void setup(CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("eval", "Report validation loss and perplexity of a checkpoint");
  sub->add_option("run_dir", args->run_dir,
                  "Run folder written by greentrain train, or a Hugging Face GPT-2 folder "
                  "(config.json, model.safetensors, vocab.json + merges.txt)")
      ->required();
  auto* data = sub->add_option("--data", args->data,
                               "Data to score in place of the run's: its last data.val_fraction, "
                               "as training splits it (the run's data.val_path is not read)");
  sub->add_option("--val-data", args->val_data,
                  "Validation data to score whole in place of the run's (a text file, or token "
                  "files: a path or a pattern such as 'DIR/val_*.bin'); data.path is not read")
      ->excludes(data);
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
