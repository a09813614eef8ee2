// ablate/table.cpp: the table's rows and its three forms (ablate/table.h).
#include "ablate/table.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/arena.h"
#include "core/atomic_file.h"
#include "core/bytes_json.h"
#include "energy/rapl.h"
#include "run/schema.h"

namespace fs = std::filesystem;

namespace gt::ablate {
namespace {

// "unknown" for an empty figure, never 0 or nan.
std::string fmt_or_unknown(std::optional<double> v, const char* spec, int width) {
  const std::string t = v ? fmt::format(fmt::runtime(spec), *v) : "unknown";
  return fmt::format("{:>{}}", t, width);
}

// NaN (an unknown figure of Measured) as an empty optional.
std::optional<double> known(double v) { return std::isnan(v) ? std::nullopt : std::optional(v); }

std::optional<double> ratio_of(std::optional<double> x, std::optional<double> y) {
  if (!x || !y || !(*y > 0)) return std::nullopt;
  return *x / *y;
}

double ratio(double x, double y) { return y > 0 ? x / y : NAN; }

nlohmann::ordered_json json_of(std::optional<double> v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
}

std::string csv_of(std::optional<double> v, const char* spec) {
  return v ? fmt::format(fmt::runtime(spec), *v) : "";
}

// Joules to train.target_loss of a row; empty when not reached or unknown.
std::optional<double> joules_to_target(const std::optional<run::Target>& target) {
  if (!target || !target->reached.value_or(false) || !target->energy_j) return std::nullopt;
  return *target->energy_j;
}

constexpr const char* kTrainingIntervals = run::kTrainingIntervalsBasis;

}  // namespace

std::string TableRow::text_header() {
  return fmt::format(
      "\n{:<12} {:>6} {:>9} {:>9} {:>9} {:>10} {:>10} {:>6} {:>6} {:>7} {:>8} {:>8} {:>8} {:>8} "
      "{:>8} {:>9}  {}\n",
      "row", "batch", "tok/s", "J/token", "tok/J", "peak mem", "planned", "vs pl", "loss", "val",
      "spd prev", "spd base", "tokJ prev", "tokJ base", "claimed", "claim cum", "energy");
}

std::string TableRow::csv_header() {
  return "row,precision,fusion,recompute,micro_batch,tokens_per_s,joules_per_token,"
         "tokens_per_joule,energy,peak_rss_bytes,planned_bytes,loss,val_loss,speedup_vs_prev,"
         "speedup_vs_baseline,factor_vs_prev,factor_vs_baseline,claimed_factor,"
         "claimed_cumulative,energy_basis,joules_to_target\n";
}

std::string TableRow::to_text() const {
  if (!measured)
    return fmt::format(
        "{:<12} {:>6} {:>9} {:>9} {:>9} {:>10} {:>10} {:>6} {:>6} {:>7} {:>8} {:>8} {:>8} {:>8} "
        "{:7.2f}x {:8.2f}x  not measured: {}\n",
        plan.name, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", claimed,
        claimed_cumulative, not_measured_reason);
  const bool whole_run = m.tokens_per_joule && m.energy_basis != kTrainingIntervals;
  const double vs_planned =
      m.planned_bytes
          ? 100.0 * ((double)m.peak_rss_bytes - (double)m.planned_bytes) / (double)m.planned_bytes
          : 0.0;
  return fmt::format(
      "{:<12} {:6d} {} {} {} {:>10} {:>10} {:+5.1f}% {} {} {:7.2f}x {:7.2f}x {} "
      "{} {:7.2f}x {:8.2f}x  {}{}\n",
      plan.name, plan.batch, fmt_or_unknown(known(m.tokens_per_s), "{:.0f}", 9),
      // significant digits: a small J/token is never 0.0000
      fmt_or_unknown(m.joules_per_token, "{:.4g}", 9),
      fmt_or_unknown(m.tokens_per_joule, "{:.4g}", 9), format_bytes(m.peak_rss_bytes),
      format_bytes(m.planned_bytes), vs_planned, fmt_or_unknown(known(m.loss), "{:.3f}", 6),
      fmt_or_unknown(known(m.val_loss), "{:.3f}", 7), speedup_vs_prev, speedup_vs_baseline,
      fmt_or_unknown(factor_vs_prev, "{:.2f}x", 9),
      fmt_or_unknown(factor_vs_baseline, "{:.2f}x", 9), claimed, claimed_cumulative, m.energy,
      whole_run ? " (whole run)" : "");
}

std::string TableRow::to_csv() const {
  if (!measured)
    return fmt::format("{},,,,,,,,not measured,,,,,,,,,{:.4g},{:.4g},,\n", plan.name, claimed,
                       claimed_cumulative);
  return fmt::format(
      "{},{},{},{},{},{},{},{},{},{},{},{},{},{:.4f},{:.4f},{},{},{:.4g},{:.4g},{},{}"
      "\n",
      plan.name, plan.precision, plan.fusion, plan.recompute, plan.batch,
      csv_of(known(m.tokens_per_s), "{:.1f}"), csv_of(m.joules_per_token, "{:.6g}"),
      csv_of(m.tokens_per_joule, "{:.6g}"), m.energy, m.peak_rss_bytes, m.planned_bytes,
      csv_of(known(m.loss), "{:.5f}"), csv_of(known(m.val_loss), "{:.5f}"), speedup_vs_prev,
      speedup_vs_baseline, csv_of(factor_vs_prev, "{:.4f}"), csv_of(factor_vs_baseline, "{:.4f}"),
      claimed, claimed_cumulative, m.energy_basis, csv_of(joules_to_target, "{:.6g}"));
}

nlohmann::ordered_json TableRow::to_json() const {
  nlohmann::ordered_json o;
  o["row"] = plan.name;
  if (!measured) {
    o["measured"] = false;
    o["reason"] = not_measured_reason;
    o["claimed_factor"] = claimed;
    o["claimed_cumulative"] = claimed_cumulative;
    return o;
  }
  o["precision"] = plan.precision;
  o["fusion"] = plan.fusion;
  o["recompute"] = plan.recompute;
  o["micro_batch"] = plan.batch;
  o["tokens_per_s"] = json_of(known(m.tokens_per_s));
  o["joules_per_token"] = json_of(m.joules_per_token);
  o["tokens_per_joule"] = json_of(m.tokens_per_joule);
  o["energy"] = m.energy;
  o["energy_basis"] = m.energy_basis;
  if (!m.energy_unknown_reason.empty()) o["energy_unknown_reason"] = m.energy_unknown_reason;
  o["energy_flags"] = m.flags;
  // null where the row's summary does not say (unknown is not "native")
  o["products_emulated"] =
      m.products_emulated ? nlohmann::ordered_json(*m.products_emulated) : nlohmann::ordered_json();
  if (m.products_emulated.value_or(false))
    o["products_emulated_reason"] = m.products_emulated_reason;
  o["peak_rss_bytes"] = m.peak_rss_bytes;
  o["planned_bytes"] = m.planned_bytes;
  o["loss"] = json_of(known(m.loss));
  o["val_loss"] = json_of(known(m.val_loss));
  o["speedup_vs_prev"] = speedup_vs_prev;
  o["speedup_vs_baseline"] = speedup_vs_baseline;
  o["factor_vs_prev"] = json_of(factor_vs_prev);
  o["factor_vs_baseline"] = json_of(factor_vs_baseline);
  o["claimed_factor"] = claimed;
  o["claimed_cumulative"] = claimed_cumulative;
  if (m.target) {
    o["target"] = m.target->raw;  // as the row's summary.json holds it
    o["joules_to_target"] = json_of(joules_to_target);
  }
  return o;
}

Table make_table(const Options& a, const Plan& plan, const std::vector<Measured>& measured,
                 bool can_cap) {
  Table t;
  t.config = a.config;
  t.steps = a.steps;
  t.budget_bytes = plan.budget_bytes;
  t.order = plan.order;
  t.has_target = plan.has_target;
  t.target_loss = plan.cfg.target_loss;
  double cum = 1.0;
  for (size_t i = 0; i < measured.size(); ++i) {
    TableRow r;
    r.plan = plan.rows[i];
    r.m = measured[i];
    const Measured& base = measured[0];
    const Measured& prev = measured[i == 0 ? 0 : i - 1];
    r.claimed = claimed_factor(r.plan.technique());
    r.claimed_cumulative = cum *= r.claimed;
    r.factor_vs_prev = ratio_of(r.m.tokens_per_joule, prev.tokens_per_joule);
    r.factor_vs_baseline = ratio_of(r.m.tokens_per_joule, base.tokens_per_joule);
    r.speedup_vs_prev = i == 0 ? 1.0 : ratio(r.m.tokens_per_s, prev.tokens_per_s);
    r.speedup_vs_baseline = ratio(r.m.tokens_per_s, base.tokens_per_s);
    r.joules_to_target = joules_to_target(r.m.target);
    t.energy_estimated |= r.m.energy == "estimated";
    t.rows.push_back(r);
  }
  TableRow cap;
  cap.plan.name = "+power_cap";
  cap.measured = false;
  cap.not_measured_reason =
      can_cap ? "a writable power limit exists; run `greentrain tune` for this row"
              : "no writable power-limit interface (RAPL powercap or NVML) on this machine";
  cap.claimed = claimed_factor("power_limit");
  cap.claimed_cumulative = cum *= cap.claimed;
  t.rows.push_back(cap);
  t.claimed_combined = cum;
  t.all_energy_known = std::all_of(measured.begin(), measured.end(), [](const Measured& w) {
    return w.tokens_per_joule.has_value();
  });
  t.combined_factor = ratio_of(measured.back().tokens_per_joule, measured[0].tokens_per_joule);
  t.combined_speedup = measured.back().tokens_per_s / measured[0].tokens_per_s;
  return t;
}

std::vector<size_t> Table::ranking() const {
  std::vector<size_t> order_j;
  if (!has_target) return order_j;
  // fewest joules to the target first; reached with unknown energy next; not reached last
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].measured) order_j.push_back(i);
  auto rank = [&](size_t i) {
    const auto& t = rows[i].m.target;
    return t && t->reached.value_or(false) ? (rows[i].joules_to_target ? 0 : 1) : 2;
  };
  std::stable_sort(order_j.begin(), order_j.end(), [&](size_t x, size_t y) {
    if (rank(x) != rank(y)) return rank(x) < rank(y);
    return rank(x) == 0 && *rows[x].joules_to_target < *rows[y].joules_to_target;
  });
  return order_j;
}

std::string Table::csv() const {
  std::string csv = TableRow::csv_header();
  for (auto& r : rows) csv += r.to_csv();
  return csv;
}

nlohmann::ordered_json Table::json() const {
  nlohmann::ordered_json js = nlohmann::ordered_json::array();
  for (auto& r : rows) js.push_back(r.to_json());
  nlohmann::ordered_json doc;
  doc["config"] = bytes_to_json(config);  // a Linux path: any bytes (issue 31 §1)
  doc["steps"] = steps;
  doc["memory_budget_bytes"] = budget_bytes;
  doc["order"] = order;
  doc["energy_estimated"] = energy_estimated;
  doc["rows"] = js;
  doc["combined_factor"] = all_energy_known ? json_of(combined_factor) : nlohmann::ordered_json();
  doc["combined_speedup"] = combined_speedup;
  doc["claimed_combined"] = claimed_combined;
  if (has_target) {
    doc["target_loss"] = target_loss;
    nlohmann::ordered_json ranked = nlohmann::ordered_json::array();
    for (size_t i : ranking()) ranked.push_back(rows[i].plan.name);
    doc["ranking_by_joules_to_target"] = ranked;
  }
  return doc;
}

std::string Table::text() const {
  std::string s = TableRow::text_header();
  for (auto& r : rows) s += r.to_text();
  s += fmt::format(
      "\ncombined (measured rows): {:.2f}x tokens/s and {} tokens per joule against the "
      "baseline; the survey claims {:.1f}x with the power cap\n",
      combined_speedup, fmt_or_unknown(combined_factor, "{:.2f}x", 0), claimed_combined);
  if (energy_estimated)
    s += "energy is ESTIMATED here (CPU utilization x TDP, no energy counters), so tokens/J "
         "follows tokens/s\n";
  auto each_measured = [&](auto&& line) {
    for (auto& r : rows)
      if (r.measured) line(r.plan.name, r.m);
  };
  each_measured([&](const std::string& name, const Measured& m) {  // the reason once per row
    if (!m.tokens_per_joule)
      s += fmt::format("energy unknown for row {}: {}\n", name, m.energy_unknown_reason);
  });
  each_measured([&](const std::string& name, const Measured& m) {
    if (m.tokens_per_joule && m.energy_basis != kTrainingIntervals)
      s += fmt::format("row {}: energy is the {}\n", name, m.energy_basis);
  });
  each_measured([&](const std::string& name, const Measured& m) {
    if (m.products_emulated.value_or(false))
      s += fmt::format("row {}: its matrix products ran EMULATED ({})\n", name,
                       m.products_emulated_reason);
  });
  each_measured([&](const std::string& name, const Measured& m) {
    if (!m.flags.empty())
      s += fmt::format("warning: row {}: the energy meter flagged: {}\n", name, m.flags);
  });
  s += "tokens/s: median step without the first step of each run segment; J/token: the logged "
       "intervals without the ones holding those steps (they create the kernels)\n";
  if (has_target) s += ranking_text();
  return s;
}

std::string Table::ranking_text() const {
  std::string s = fmt::format("\nranked by joules to validation loss {:g}:\n", target_loss);
  int place = 0;
  for (size_t i : ranking()) {
    const TableRow& w = rows[i];
    const run::Target t = w.m.target.value_or(run::Target{});
    if (!t.reached.value_or(false)) {
      s += fmt::format("  -  {:<12} not reached: {}\n", w.plan.name,
                       t.reason.value_or("no target in summary.json"));
      continue;
    }
    s += fmt::format("  {}. {:<12} {} J{} at step {}, {:.1f} s\n", ++place, w.plan.name,
                     fmt_or_unknown(w.joules_to_target, "{:.4g}", 0),
                     t.energy_estimated.value_or(false) ? " (estimated)" : "",
                     (long long)t.step.value_or(0), t.seconds.value_or(NAN));
  }
  return s;
}

void write_table(const Table& t, const std::string& out) {
  // temporary name, then rename; a failure names the file (never a half-written table)
  write_file_atomic((fs::path(out) / "ablation.csv").string(), t.csv());
  write_file_atomic((fs::path(out) / "ablation.json").string(), dump_json(t.json(), 2) + "\n");
}

bool power_limit_writable(const std::string& root) {
  const fs::path r = energy::powercap_root(root);
  for (const char* p : {"intel-rapl:0/constraint_0_power_limit_uw",
                        "intel-rapl/intel-rapl:0/constraint_0_power_limit_uw"})
    if (::access((r / p).c_str(), W_OK) == 0) return true;
  return false;
}

}  // namespace gt::ablate
