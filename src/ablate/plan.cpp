// ablate/plan.cpp: options, claimed factors and the rows of the ablation (ablate/plan.h).
#include "ablate/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "backend/backend.h"
#include "core/error.h"
#include "model/gpt.h"
#include "train/data.h"

namespace gt::ablate {

double claimed_factor(const std::string& t) {
  if (t == "bf16") return kClaimedBf16;
  if (t == "fusion") return kClaimedFusion;
  if (t == "recompute") return kClaimedRecompute;
  if (t == "power_limit") return kClaimedPowerLimit;
  if (t == "fp8") return kClaimedFp8;
  return 1.0;
}

std::vector<std::string> parse_order(const std::string& list) {
  std::vector<std::string> order;
  std::stringstream ss(list);
  std::string t;
  std::set<std::string> seen;
  while (std::getline(ss, t, ',')) {
    if (t != "bf16" && t != "fusion" && t != "recompute" && t != "fp8")
      throw Error(fmt::format(
          "--order '{}': '{}' is unknown; expected a list of bf16, fusion, recompute, fp8 (fp8: "
          "train.device = cuda or cuda-emu)",
          list, t));
    if (!seen.insert(t).second)
      throw Error(fmt::format("--order '{}': '{}' appears twice", list, t));
    order.push_back(t);
  }
  if (order.empty()) throw Error("--order is empty; expected e.g. bf16,fusion,recompute");
  return order;
}

void check_options(const Options& a) {
  if (a.config.empty())
    throw Error("a configuration file is needed, e.g. configs/shakespeare-char.toml");
  if (a.steps < 2) throw Error(fmt::format("--steps {}: expected at least 2", a.steps));
  if (a.rounds < 1 || a.steps / a.rounds < 2)
    throw Error(fmt::format("--rounds {}: expected 1 to {} (at least 2 steps per round)", a.rounds,
                            a.steps / 2));
  for (auto& kv : a.sets) {  // the keys each row sets itself
    const std::string key = kv.substr(0, kv.find('='));
    // (train.batch_size may be set: it is the baseline's micro-batch without --memory-budget)
    for (const char* own : {"train.memory_budget", "train.precision", "train.fusion",
                            "train.recompute", "train.max_steps"})
      if (key == own)
        throw Error(fmt::format(
            "--set {}: ablate sets {} for each row itself (use --memory-budget, --order, "
            "--recompute or --steps)",
            kv, own));
  }
  if (a.memory_budget < 0)
    throw Error(
        fmt::format("--memory-budget {}: expected a positive number of bytes", a.memory_budget));
  if (a.recompute != "gelu" && a.recompute != "gelu+ln" && a.recompute != "block")
    throw Error(fmt::format("--recompute '{}': expected gelu, gelu+ln or block", a.recompute));
}

namespace {

// The rows: the baseline at base_batch, then each technique switched on in turn.
std::vector<RowPlan> plan_rows(const Options& a, const Plan& p, int base_batch,
                               const Backend& backend) {
  std::vector<RowPlan> rows;
  RowPlan r;
  r.name = "baseline";
  r.batch = base_batch;
  rows.push_back(r);
  for (auto& t : p.order) {
    r.name = "+" + t;
    if (t == "bf16") r.precision = "bf16";
    if (t == "fp8") r.precision = "fp8";
    if (t == "fusion") r.fusion = "on";
    if (t == "recompute") r.recompute = a.recompute;
    const int fit =
        largest_batch_that_fits(p.cfg.model, parse_recompute(r.recompute), r.fusion == "on",
                                parse_precision(r.precision), p.budget_bytes, backend);
    // the recompute row takes the larger batch it lets fit; the others keep the baseline's
    r.batch = t == "recompute" ? std::max(fit, 1) : std::max(1, std::min(base_batch, fit));
    rows.push_back(r);
  }
  return rows;
}

}  // namespace

Plan make_plan(const Options& a) {
  check_options(a);
  Plan p;
  TrainConfig& cfg = p.cfg;
  load_config_file(a.config, cfg);
  apply_overrides(a.sets, cfg);
  // the backend the rows train on reports its workspace (per thread on the CPU)
  const auto backend = make_backend(cfg.device, {.threads = cfg.threads});
  if (!a.data.empty()) cfg.data_path = a.data;
  cfg.validate();
  if (cfg.stop_at_target && a.rounds > 1)
    throw Error(
        "--set train.stop_at_target=true: a row that stops early cannot be resumed in the next "
        "round; use --rounds 1");
  parse_recompute(a.recompute);
  p.order = parse_order(a.order);
  // an fp8 row on a device without fp8 failed after the rows before it had run
  if (std::find(p.order.begin(), p.order.end(), "fp8") != p.order.end() &&
      !device_traits(cfg.device).fp8)
    throw Error(fmt::format(
        "--order '{}': fp8 needs train.device = cuda or cuda-emu; this configuration has "
        "train.device = '{}' (leave fp8 out, or --set train.device=cuda)",
        a.order, cfg.device));
  TokenData data = load_data(cfg, nullptr);
  if (cfg.model.vocab_size == 0) cfg.model.vocab_size = data.tokenizer.vocab_size();
  p.budget_bytes = a.memory_budget > 0 ? static_cast<size_t>(a.memory_budget)
                                       : plan_memory(cfg.model, cfg.batch_size, Recompute::none,
                                                     false, Precision::fp32, *backend)
                                             .total();
  int base_batch = largest_batch_that_fits(cfg.model, Recompute::none, false, Precision::fp32,
                                           p.budget_bytes, *backend);
  if (base_batch == 0)
    throw Error(fmt::format("--memory-budget {}: the baseline does not fit a micro-batch of 1",
                            p.budget_bytes));
  if (a.memory_budget == 0) base_batch = cfg.batch_size;
  p.has_target = cfg.target_loss > 0;
  p.rows = plan_rows(a, p, base_batch, *backend);
  return p;
}

std::vector<std::string> train_arguments(const Options& a, const Plan& plan, const RowPlan& row,
                                         const std::string& dir, int stop_at, bool first) {
  std::vector<std::string> args;
  if (first) {
    args = {"train", a.config, "--out", dir};
    if (!plan.cfg.data_path.empty()) args.insert(args.end(), {"--data", plan.cfg.data_path});
    std::vector<std::string> sets = a.sets;
    // with a target the validation passes of the configuration find when it is reached
    if (!plan.has_target) sets.push_back("train.eval_interval=0");
    for (auto s :
         {fmt::format("train.max_steps={}", a.steps), std::string("train.checkpoint_interval=0"),
          fmt::format("train.log_interval={}", std::max(1, a.steps / a.rounds / 10)),
          fmt::format("train.batch_size={}", row.batch), "train.precision=" + row.precision,
          "train.fusion=" + row.fusion, "train.recompute=" + row.recompute})
      sets.push_back(s);
    for (auto& s : sets) args.insert(args.end(), {"--set", s});
  } else {  // the configuration comes from the checkpoint
    args = {"train", "--out", dir, "--resume"};
  }
  if (stop_at < a.steps) args.insert(args.end(), {"--stop-at", std::to_string(stop_at)});
  return args;
}

}  // namespace gt::ablate
