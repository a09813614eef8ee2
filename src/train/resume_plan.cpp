// train/resume_plan.cpp: the resume plan of resume_plan.h.
#include "train/resume_plan.h"

#include <fmt/format.h>

#include "core/error.h"

namespace gt {

void check_resume_steps(int64_t max_steps, int64_t checkpoint_step, const std::string& run_dir) {
  if (max_steps >= checkpoint_step) return;
  throw Error(fmt::format(
      "train.max_steps = {} is below the checkpoint's step {} in {}: resuming would train no "
      "step; expected train.max_steps above {} (--set train.max_steps=N) to train on, or --out "
      "elsewhere for a new run (nothing was written)",
      max_steps, checkpoint_step, run_dir, checkpoint_step));
}

ResumePlan plan_resume(TrainConfig& cfg, const std::string& run_dir, bool resume, int world,
                       FILE* log, bool allow_data_change) {
  ResumePlan plan;
  if (!resume) return plan;
  plan.state = load_checkpoint_state(run_dir);
  check_resume_steps(cfg.max_steps, plan.state->step, run_dir);
  load_config_string(plan.state->config_toml, checkpoint_dir(run_dir) + "/state.json", plan.saved);
  // another number of ranks: the same global batch (micro-batches x accumulation x ranks)
  if (plan.state->world_size != world && cfg.grad_accum_steps == plan.saved.grad_accum_steps) {
    const int64_t micro = (int64_t)plan.saved.grad_accum_steps * plan.state->world_size;
    if (micro % world != 0)
      throw Error(fmt::format(
          "resuming a run of {} ranks x {} accumulation steps on {} ranks: its {} micro-batches "
          "per step cannot be shared evenly; set train.grad_accum_steps (the global batch then "
          "changes) or use a rank count that divides {}",
          plan.state->world_size, plan.saved.grad_accum_steps, world, micro, micro));
    cfg.grad_accum_steps = static_cast<int>(micro / world);
    if (log)
      std::fprintf(log,
                   "note: resuming a run of %d ranks on %d: train.grad_accum_steps = %d keeps its "
                   "global batch of %lld micro-batches per step\n",
                   plan.state->world_size, world, cfg.grad_accum_steps, (long long)micro);
  }
  if (log) {  // a policy changed on resume: allowed, but say the run is no longer exact
    auto note = [&](const char* key, const std::string& was, const std::string& now) {
      if (was != now)
        std::fprintf(log,
                     "note: resuming with %s = %s (the checkpoint's run used %s): from here the "
                     "run differs from an uninterrupted one\n",
                     key, now.c_str(), was.c_str());
    };
    auto on_off = [](bool b) { return std::string(b ? "on" : "off"); };
    note("train.device", plan.saved.device, cfg.device);
    note("train.precision", to_string(plan.saved.precision), to_string(cfg.precision));
    note("train.fusion", on_off(plan.saved.fusion), on_off(cfg.fusion));
    note("train.recompute", to_string(plan.saved.recompute), to_string(cfg.recompute));
    note("train.stochastic_rounding", on_off(plan.saved.stochastic_rounding),
         on_off(cfg.stochastic_rounding));
    note("train.batch_size", std::to_string(plan.saved.batch_size), std::to_string(cfg.batch_size));
    note("micro-batches per step (train.grad_accum_steps x ranks)",
         std::to_string((int64_t)plan.saved.grad_accum_steps * plan.state->world_size),
         std::to_string((int64_t)cfg.grad_accum_steps * world));
  }
  // another tokenizer: the embedding rows are the old tokenizer's tokens
  // the vocabulary a bpe or gpt2 tokenizer is made from (data.vocab_size, data.tokenizer_model,
  // data.tokenizer_path), as words
  auto vocab_of = [](const TrainConfig& c) -> std::string {
    if (c.tokenizer == "gpt2") return fmt::format(" from '{}'", c.tokenizer_path);
    if (c.tokenizer != "bpe") return "";
    return c.tokenizer_model.empty() ? fmt::format(" of {} trained on the text", c.bpe_vocab_size)
                                     : fmt::format(" from '{}'", c.tokenizer_model);
  };
  if (plan.saved.tokenizer != cfg.tokenizer || plan.saved.data_format != cfg.data_format ||
      vocab_of(plan.saved) != vocab_of(cfg)) {
    if (!allow_data_change)
      throw Error(fmt::format(
          "--resume with another tokenizer: the checkpoint of step {} was trained with "
          "data.format = '{}', data.tokenizer = '{}'{}; this run has data.format = '{}', "
          "data.tokenizer = '{}'{}. Resume with the checkpoint's, or pass --allow-data-change to "
          "go on with this one (the data position then restarts at the beginning)",
          plan.state->step, plan.saved.data_format, plan.saved.tokenizer, vocab_of(plan.saved),
          cfg.data_format, cfg.tokenizer, vocab_of(cfg)));
    plan.new_tokenizer = true;
  }
  return plan;
}

TokenData load_resumed_data(const TrainConfig& cfg, const ResumePlan& plan) {
  try {
    return load_data(cfg, plan.state && !plan.new_tokenizer ? &plan.state->tokenizer : nullptr);
  } catch (const Error& e) {  // e.g. a character the checkpoint's tokenizer does not know
    if (!plan.state || plan.state->data.is_null()) throw;
    throw Error(fmt::format("{} (resuming the checkpoint of step {}, trained on {})", e.what(),
                            plan.state->step, describe_data(plan.state->data)));
  }
}

void check_resume_data(ResumePlan& plan, const nlohmann::json& data_id, bool allow_data_change) {
  // other data: the saved position belongs to the old data's permutation
  if (plan.state && (plan.new_tokenizer ||
                     (!plan.state->data.is_null() && !same_data(plan.state->data, data_id)))) {
    const std::string was = plan.state->data.is_null()
                                ? fmt::format("data.tokenizer = '{}'", plan.saved.tokenizer)
                                : describe_data(plan.state->data);
    if (!allow_data_change)
      throw Error(fmt::format(
          "--resume on other data: the checkpoint of step {} was trained on {}; this run reads "
          "{}. Resume on the same data, or pass --allow-data-change to go on with this data "
          "(the data position then restarts at the beginning)",
          plan.state->step, was, describe_data(data_id)));
    plan.data_note = fmt::format(
        "resuming at step {} on other data (--allow-data-change): the checkpoint was trained on "
        "{}; this run reads {}; the data position restarts at the beginning",
        plan.state->step, was, describe_data(data_id));
  }
}

}  // namespace gt
