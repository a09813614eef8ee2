// ablate/read_row.cpp: what a finished row measured, from its run folder (ablate/runner.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>

#include "ablate/runner.h"
#include "core/error.h"
#include "run/metrics_jsonl.h"
#include "run/schema.h"
#include "run/summary.h"

namespace fs = std::filesystem;

namespace gt::ablate {
namespace {

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

// A row's own summary.json (run/summary.h): a key the row needs with another type than train
// writes is a gt::Error naming the file and the key, never nlohmann's type_error after every
// row ran.
run::Summary read_summary(const fs::path& p) {
  run::Summary s = run::load_summary(p.string());
  if (!s.problems.empty()) {
    std::string keys;
    for (const auto& pr : s.problems) keys += (keys.empty() ? "" : "; ") + pr.text;
    throw Error(fmt::format("{}: {}; expected the summary.json `greentrain train` writes",
                            p.string(), keys));
  }
  return s;
}

// What the row's metrics.jsonl gives: step speeds and logged energy intervals (joules, tokens).
struct Intervals {
  std::vector<double> tokens_per_s;  ///< of steps that start no segment
  double energy_j = 0, tokens = 0;   ///< summed over the intervals holding no segment start
};

// Steps that start a segment create the kernels: left out of tokens/s, and the energy
// intervals holding them are left out too when there are others.
Intervals read_intervals(const fs::path& metrics, const std::vector<int>& starts) {
  // a row's own file read back (run/metrics_jsonl.h): a line cut by a crash, or a figure of another
  // type or out of range (a step of 1e300), is a damaged line, left out; never an abort after
  // every row ran
  const run::Metrics rows = run::read_metrics(read_text(metrics));
  Intervals out;
  std::vector<std::pair<double, double>> intervals, all;  // (joules, tokens)
  int64_t prev = 0;  // the step of the previous energy interval's end
  auto is_start = [&](int64_t st) {
    return std::find(starts.begin(), starts.end(), st) != starts.end();
  };
  for (const run::MetricsRow& j : rows.rows) {
    const int64_t step = *j.step;
    // a line without a speed (null) is left out, never a speed of 0
    if (!is_start(step) && j.tokens_per_s) out.tokens_per_s.push_back(*j.tokens_per_s);
    if (j.energy_interval_tokens) {
      // an unknown interval (null) is NaN here, so the sum below is unknown too
      std::pair<double, double> e{j.energy_j.value_or(NAN), *j.energy_interval_tokens};
      all.push_back(e);
      bool holds_start = false;
      for (int st : starts) holds_start |= prev < st && st <= step;
      if (!holds_start) intervals.push_back(e);
      prev = step;
    }
  }
  if (intervals.empty()) intervals = all;  // too few intervals to leave any out
  for (auto& [joules, tokens] : intervals) {
    out.energy_j += joules;
    out.tokens += tokens;
  }
  return out;
}

// The row's energy figures from the intervals, or from the whole run (summary s) when the
// intervals' energy is unknown or 0.
void set_energy(Measured& row, const run::Summary& s, double energy, double tokens) {
  row.energy_basis = run::kTrainingIntervalsBasis;
  if (!(tokens > 0 && energy > 0)) {
    // The intervals' energy is unknown or reads 0 (intervals below the sensors' resolution):
    // use the whole run's window, which also holds the final validation pass, and say so.
    energy = s.energy_j.value_or(NAN);
    tokens = s.tokens ? static_cast<double>(*s.tokens) : 0.0;
    // these are the last session's figures (summary.json's own): its flag, not the run's
    row.estimated = s.energy_estimated.value_or(true);
    row.energy_basis =
        fmt::format("whole run incl. final validation (the logged intervals' energy was {})",
                    std::isnan(energy) ? "unknown" : "unknown or 0");
  }
  if (s.energy_flags)  // e.g. a sensor left out
    for (const auto& f : *s.energy_flags) row.flags += (row.flags.empty() ? "" : "; ") + f;
  if (tokens > 0 && energy > 0) {
    row.joules_per_token = energy / tokens;
    row.tokens_per_joule = tokens / energy;
    row.energy = row.estimated ? "estimated" : "measured";
  } else {
    row.energy = "unknown";
    row.energy_unknown_reason = s.energy_unknown_reason.value_or(
        std::isnan(energy) ? std::string("no sensor counted")
                           : fmt::format("the meter read {} J over {} tokens", energy, tokens));
  }
}

}  // namespace

Measured read_row(const fs::path& dir, const std::vector<int>& starts) {
  Measured row;
  const run::Summary s = read_summary(dir / run::file::summary);
  row.loss = s.last_loss.value_or(NAN);  // unknown stays unknown (null in ablation.json)
  row.target = s.target;
  row.val_loss = s.val_loss.value_or(NAN);
  // memory: the first segment's (a fresh start), when rounds resumed it
  const fs::path first = dir / "summary.first.json";  // runner.cpp keeps it
  const run::Summary mem = fs::exists(first) ? read_summary(first) : s;
  row.peak_rss_bytes = mem.memory_peak_rss_bytes.value_or(0);
  // the plan's arenas plus what the process held before allocating them
  row.planned_bytes = mem.memory_planned_bytes.value_or(0) + mem.memory_runtime_bytes.value_or(0);
  // the logged intervals span every session of a row resumed over rounds: estimated when any
  // session's energy was (run_totals.energy_estimated), as schedule and report read it; a
  // run_totals written before that key falls back to this session's flag
  // (Summary::run_energy_estimated). Neither recorded: taken as estimated
  const bool known = s.energy_estimated || (s.run_totals && s.run_totals->energy_estimated);
  row.estimated = known ? s.run_energy_estimated() : true;
  // training steps only: median step speed without the first (primitive creation) step;
  // energy of the logged training intervals (validation is outside them)
  const Intervals iv = read_intervals(dir / run::file::metrics, starts);
  row.tokens_per_s = iv.tokens_per_s.empty() ? NAN : median(iv.tokens_per_s);
  set_energy(row, s, iv.energy_j, iv.tokens);
  row.products_emulated = s.products_emulated;
  if (s.products_emulated.value_or(false))
    row.products_emulated_reason =
        s.products_emulated_reason.value_or("summary.json gives no reason");
  return row;
}

}  // namespace gt::ablate
