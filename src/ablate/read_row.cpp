// ablate/read_row.cpp: what a finished row measured, from its run folder (ablate/runner.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <utility>

#include "ablate/runner.h"
#include "core/json_number.h"

namespace fs = std::filesystem;

namespace gt::ablate {
namespace {

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

// What the row's metrics.jsonl gives: step speeds and logged energy intervals (joules, tokens).
struct Intervals {
  std::vector<double> tokens_per_s;  ///< of steps that start no segment
  double energy_j = 0, tokens = 0;   ///< summed over the intervals holding no segment start
};

// Steps that start a segment create the kernels: left out of tokens/s, and the energy
// intervals holding them are left out too when there are others.
Intervals read_intervals(const fs::path& metrics, const std::vector<int>& starts) {
  std::ifstream mf(metrics);
  std::string line;
  Intervals out;
  std::vector<std::pair<double, double>> intervals, all;  // (joules, tokens)
  int prev = 0;  // the step of the previous energy interval's end
  auto is_start = [&](int st) {
    return std::find(starts.begin(), starts.end(), st) != starts.end();
  };
  while (std::getline(mf, line)) {
    // a row's own file read back: a line cut by a crash, or a figure of another type or out of
    // range (a step of 1e300), is a damaged line, left out; never an abort after every row ran
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    const auto step_read = json_integer<int>(j.value("step", nlohmann::json(0)), 0);
    const auto tps_read = j.value("tokens_per_s", nlohmann::json(0.0));
    if (!step_read || !tps_read.is_number()) continue;
    const int step = *step_read;
    if (!is_start(step)) out.tokens_per_s.push_back(tps_read.get<double>());
    if (j.contains("energy_j") && j.contains("energy_interval_tokens") &&
        j["energy_interval_tokens"].is_number()) {
      // an unknown interval (null) is NaN here, so the sum below is unknown too
      std::pair<double, double> e{j["energy_j"].is_number() ? j["energy_j"].get<double>() : NAN,
                                  j["energy_interval_tokens"].get<double>()};
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
void set_energy(Measured& row, const nlohmann::json& s, double energy, double tokens) {
  row.energy_basis = "training intervals";
  if (!(tokens > 0 && energy > 0)) {
    // The intervals' energy is unknown or reads 0 (intervals below the sensors' resolution):
    // use the whole run's window, which also holds the final validation pass, and say so.
    const bool run_known = s.contains("energy_j") && s["energy_j"].is_number();
    energy = run_known ? s["energy_j"].get<double>() : NAN;
    tokens = s.value("tokens", 0.0);
    row.energy_basis =
        fmt::format("whole run incl. final validation (the logged intervals' energy was {})",
                    std::isnan(energy) ? "unknown" : "unknown or 0");
  }
  if (s.contains("energy") && s["energy"].contains("flags"))  // e.g. a sensor left out
    for (auto& f : s["energy"]["flags"])
      row.flags += (row.flags.empty() ? "" : "; ") + f.get<std::string>();
  if (tokens > 0 && energy > 0) {
    row.joules_per_token = energy / tokens;
    row.tokens_per_joule = tokens / energy;
    row.energy = row.estimated ? "estimated" : "measured";
  } else {
    row.energy = "unknown";
    row.energy_unknown_reason = s.value(
        "energy_unknown_reason",
        std::isnan(energy) ? std::string("no sensor counted")
                           : fmt::format("the meter read {} J over {} tokens", energy, tokens));
  }
}

}  // namespace

Measured read_row(const fs::path& dir, const std::vector<int>& starts) {
  Measured row;
  const nlohmann::json s = read_json(dir / "summary.json");
  row.loss = s.value("last_loss", 0.0);
  if (s.contains("target")) row.target = s["target"];
  if (s.contains("val_loss")) row.val_loss = s["val_loss"].get<double>();
  // memory: the first segment's (a fresh start), when rounds resumed it
  const nlohmann::json mem =
      fs::exists(dir / "summary.first.json") ? read_json(dir / "summary.first.json") : s;
  row.peak_rss_bytes = mem.value("memory_peak_rss_bytes", size_t(0));
  // the plan's arenas plus what the process held before allocating them
  row.planned_bytes =
      mem.value("memory_planned_bytes", size_t(0)) + mem.value("memory_runtime_bytes", size_t(0));
  row.estimated = s.value("energy_estimated", true);
  // training steps only: median step speed without the first (primitive creation) step;
  // energy of the logged training intervals (validation is outside them)
  const Intervals iv = read_intervals(dir / "metrics.jsonl", starts);
  row.tokens_per_s = median(iv.tokens_per_s);
  set_energy(row, s, iv.energy_j, iv.tokens);
  return row;
}

}  // namespace gt::ablate
