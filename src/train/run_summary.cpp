#include "train/run_summary.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace fs = std::filesystem;

namespace gt {

void RunSummaryWriter::finish(const RunResult& r) {
  const TrainConfig& c = trainer_.config();
  const auto mem = trainer_.model().memory();
  const int64_t tokens_per_step = (int64_t)c.batch_size * c.model.block_size * c.grad_accum_steps;
  nlohmann::ordered_json s;
  s["run_dir"] = dir_;
  s["step"] = r.step;
  s["max_steps"] = c.max_steps;
  s["last_loss"] = r.last_loss;
  if (r.val_loss) s["val_loss"] = *r.val_loss;
  s["tokens"] = r.tokens;
  s["duration_s"] = r.train_time_s;
  s["tokens_per_s"] = r.train_time_s > 0 ? r.tokens / r.train_time_s : 0.0;
  // median step time is robust to the first (warm-up) step and to noise
  if (!r.losses.empty()) {
    s["flops_per_token"] = gpt_flops_per_token(c.model, c.model.block_size);
  }
  s["num_params"] = gpt_num_params(c.model);
  s["device"] = c.device;
  s["precision"] = to_string(c.precision);
  s["recompute"] = to_string(c.recompute);
  s["fusion"] = c.fusion ? "on" : "off";
  if (c.precision == Precision::fp16) {
    s["loss_scale"] = r.loss_scale;
    s["skipped_steps"] = r.skipped_steps;
  }
  s["memory_planned_bytes"] = mem.total();
  s["memory_runtime_bytes"] = trainer_.runtime_bytes();
  s["memory_load_peak_bytes"] = trainer_.load_peak_bytes();
  s["memory_peak_rss_bytes"] = peak_rss_bytes();
  s["interrupted_by_signal"] = r.interrupted_by;
  std::printf("\n");
  if (r.val_loss)
    std::printf("validation loss %.4f at step %lld\n", *r.val_loss, (long long)r.step);
  const size_t planned = mem.total() + trainer_.runtime_bytes(), peak = peak_rss_bytes();
  std::printf(
      "trained %lld steps (%lld tokens) in %.1f s: %.0f tokens/s; peak memory %s (planned %s = "
      "arenas %s + runtime before allocation %s; peak %+.1f %%; loading the data peaked at "
      "%s)\n",
      (long long)r.losses.size(), (long long)r.tokens, r.train_time_s,
      r.train_time_s > 0 ? r.tokens / r.train_time_s : 0.0, format_bytes(peak).c_str(),
      format_bytes(planned).c_str(), format_bytes(mem.total()).c_str(),
      format_bytes(trainer_.runtime_bytes()).c_str(),
      planned ? 100.0 * ((double)peak - (double)planned) / (double)planned : 0.0,
      format_bytes(trainer_.load_peak_bytes()).c_str());
  (void)tokens_per_step;
  nlohmann::json extra;
  if (observer_hook_) observer_hook_(extra);
  for (auto& [k, v] : extra.items()) s[k] = v;
  fs::path p = fs::path(dir_) / "summary.json";
  // The figures above are this session's. run_totals adds up every session of the run
  // (a resumed run continues from the summary.json the previous session left, if that
  // session ended at the step this one started from).
  const int64_t start = r.step - (int64_t)r.losses.size();
  s["session_start_step"] = start;
  nlohmann::ordered_json totals;
  totals["sessions"] = 1;
  totals["first_step"] = start;
  for (const char* k : {"tokens", "duration_s", "energy_j", "g_co2e"})
    if (s.contains(k)) totals[k] = s[k];
  if (start > 0 && fs::exists(p)) {
    try {
      std::ifstream f(p);
      const auto prev = nlohmann::json::parse(f);
      if (prev.value("step", int64_t(-1)) == start) {
        const auto& pt = prev.contains("run_totals") ? prev["run_totals"] : prev;
        totals["sessions"] = pt.value("sessions", 1) + 1;
        totals["first_step"] = pt.value("first_step", pt.value("session_start_step", 0));
        if (pt.contains("tokens"))
          totals["tokens"] = totals["tokens"].get<int64_t>() + pt["tokens"].get<int64_t>();
        for (const char* k : {"duration_s", "energy_j", "g_co2e"})
          if (totals.contains(k) && pt.contains(k))
            totals[k] = totals[k].get<double>() + pt[k].get<double>();
      }
    } catch (const std::exception&) {  // unreadable: the totals cover this session only
    }
  }
  s["run_totals"] = totals;
  fs::path tmp = p.string() + fmt::format(".tmp-{}", getpid());
  {
    std::ofstream f(tmp);
    f << s.dump(2) << "\n";
    if (!f) throw Error(fmt::format("{}: write failed", tmp.string()));
  }
  fs::rename(tmp, p);
}

}  // namespace gt
