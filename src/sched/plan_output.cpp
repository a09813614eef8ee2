// sched/plan_output.cpp: a plan's peak power, JSON and table, and atomic file writes.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "sched/planner.h"

namespace gt::sched {

double peak_power_w(const Plan& plan, const std::vector<Job>& /*jobs*/) {
  std::vector<std::pair<UnixTimeS, double>> ev;
  for (std::size_t i = 0; i < plan.jobs.size(); ++i)
    for (const Run& r : plan.jobs[i].runs) {
      ev.push_back({r.start_s, plan.jobs[i].planned_power_w});
      ev.push_back({r.end_s, -plan.jobs[i].planned_power_w});
    }
  std::sort(ev.begin(), ev.end());  // at equal times the ends (negative) come first
  double cur = 0, peak = 0;
  for (auto& e : ev) peak = std::max(peak, cur += e.second);
  return peak;
}

namespace {
// a percentage that may be unknown: the number, or null
nlohmann::json pct_json(const std::optional<double>& p) { return p ? nlohmann::json(*p) : nullptr; }
// the same in text: "12.3 %" or "unknown"
std::string pct_text(const std::optional<double>& p) {
  return p ? fmt::format("{:.1f} %", *p) : std::string("unknown");
}
// the scheduled jobs whose power (so energy and gCO2e) is an estimate
std::size_t estimated_jobs(const Plan& plan) {
  return static_cast<std::size_t>(
      std::count_if(plan.jobs.begin(), plan.jobs.end(),
                    [](const JobPlan& j) { return j.scheduled && !j.estimated_reason.empty(); }));
}

// One job of the plan: its figures, its runs (when scheduled) or the reason (when not), and its
// baseline.
nlohmann::json job_json(const JobPlan& j, const TimeZone& zone) {
  using nlohmann::json;
  auto runs_json = [&](const std::vector<Run>& runs) {
    json a = json::array();
    for (const Run& r : runs)
      a.push_back({{"start", format_iso_time(r.start_s, zone)},
                   {"end", format_iso_time(r.end_s, zone)},
                   {"duration_s", r.end_s - r.start_s}});
    return a;
  };
  json o = {{"name", j.name},
            {"scheduled", j.scheduled},
            {"planned_power_w", j.planned_power_w},
            {"power_limit_w", j.cap_limit_w > 0 ? json(j.cap_limit_w) : json()},
            {"energy_j", j.energy_j},
            {"energy_kwh", j.energy_j / kJoulesPerKwh},
            {"interruption_s", j.interruption_s},
            {"interruption_source", j.interruption_source},
            // planned_power_w, energy and gCO2e made from an estimated run's joules
            {"estimated", !j.estimated_reason.empty()},
            {"estimated_reason", j.estimated_reason.empty() ? json() : json(j.estimated_reason)}};
  if (j.scheduled) {
    o["start"] = format_iso_time(j.runs.front().start_s, zone);
    o["end"] = format_iso_time(j.runs.back().end_s, zone);
    o["runs"] = runs_json(j.runs);
    o["interruptions"] = j.interruptions;
    o["g_co2e"] = j.g_co2e;
    o["forecast_g_co2e"] = j.forecast_g_co2e;
  } else {
    o["reason"] = j.reason;
  }
  json b = {{"scheduled", j.baseline_scheduled}};
  if (j.baseline_scheduled) {
    b["start"] = format_iso_time(j.baseline_runs.front().start_s, zone);
    b["end"] = format_iso_time(j.baseline_runs.back().end_s, zone);
    b["g_co2e"] = j.baseline_g_co2e;
    b["energy_j"] = j.baseline_energy_j;
    b["energy_kwh"] = j.baseline_energy_j / kJoulesPerKwh;
  }
  o["baseline"] = b;
  if (j.scheduled && j.baseline_scheduled && j.baseline_g_co2e > 0)
    o["saving_pct"] = 100.0 * (j.baseline_g_co2e - j.g_co2e) / j.baseline_g_co2e;
  return o;
}
}  // namespace

nlohmann::json plan_to_json(const Plan& plan, const TimeZone& zone) {
  using nlohmann::json;
  json jobs = json::array();
  json unscheduled = json::array();
  for (const JobPlan& j : plan.jobs) {
    jobs.push_back(job_json(j, zone));
    if (!j.scheduled) unscheduled.push_back(j.name);
  }
  return {{"strategy", strategy_name(plan.strategy)},
          {"method", plan.method},
          {"objective", objective_name(plan.objective)},
          {"objective_unit", plan.objective_unit()},
          {"energy_weight_g_per_kwh",
           plan.objective == Objective::weighted ? json(plan.energy_weight_g_per_kwh) : json()},
          {"slot_s", plan.slot_s},
          {"time_zone", zone.describe()},
          {"utc_offset_h",
           zone.is_fixed() ? json(static_cast<double>(zone.fixed_offset_s()) / 3600.0) : json()},
          // 0 is no budget: null, as the table's "none" (not a budget of 0 W)
          {"power_budget_w", plan.power_budget_w > 0 ? json(plan.power_budget_w) : json()},
          {"forecast_error_pct", plan.forecast_error_pct},
          {"seed", plan.seed},
          {"jobs", jobs},
          {"total",
           {{"energy_j", plan.planned_energy_j},
            {"energy_kwh", plan.planned_energy_j / kJoulesPerKwh},
            {"g_co2e", plan.planned_g_co2e},
            {"estimated", estimated_jobs(plan) > 0},
            {"unscheduled", unscheduled},
            {"vs_baseline",
             {{"jobs", plan.compared},
              {"energy_j", plan.energy_j},
              {"g_co2e", plan.g_co2e},
              {"baseline_g_co2e", plan.baseline_g_co2e},
              {"baseline_energy_j", plan.baseline_energy_j},
              {"saving_pct", pct_json(plan.saving_pct())},
              {"energy_saving_pct", pct_json(plan.energy_saving_pct())},
              {"objective_value", plan.objective_value(plan.g_co2e, plan.energy_j)},
              {"baseline_objective_value",
               plan.objective_value(plan.baseline_g_co2e, plan.baseline_energy_j)},
              {"objective_saving_pct", pct_json(plan.objective_saving_pct())},
              {"saving_unknown_reason",
               plan.saving_unknown_reason().empty() ? json() : json(plan.saving_unknown_reason())},
              {"shift_only_saving_pct",
               plan.shift_only_saving_pct ? json(*plan.shift_only_saving_pct) : json()},
              {"cap_only_saving_pct",
               plan.cap_only_saving_pct ? json(*plan.cap_only_saving_pct) : json()}}}}}};
}

std::string plan_table(const Plan& plan, const TimeZone& zone) {
  std::string out = fmt::format(
      "strategy {} ({}), objective {}{}, slots of {} s, power budget {}, forecast error {} %\n",
      strategy_name(plan.strategy), plan.method, objective_name(plan.objective),
      plan.objective == Objective::weighted
          ? fmt::format(" (gCO2e + {:g} gCO2e/kWh x kWh)", plan.energy_weight_g_per_kwh)
          : std::string(),
      plan.slot_s,
      plan.power_budget_w > 0 ? fmt::format("{} W", plan.power_budget_w) : std::string("none"),
      plan.forecast_error_pct);
  out +=
      fmt::format("{:<16} {:<25} {:<25} {:>4} {:>9} {:>10} {:>11} {:>11} {:>7}\n", "job", "start",
                  "end", "runs", "planned_W", "energy_kWh", "gCO2e", "base_gCO2e", "save_%");
  for (const JobPlan& j : plan.jobs) {
    const std::string base =
        j.baseline_scheduled ? fmt::format("{:.1f}", j.baseline_g_co2e) : std::string("-");
    if (!j.scheduled) {
      out += fmt::format("{:<16} NOT SCHEDULED: {}\n", j.name, j.reason);
      continue;
    }
    const std::string save =
        j.baseline_scheduled && j.baseline_g_co2e > 0
            ? fmt::format("{:.1f}", 100.0 * (j.baseline_g_co2e - j.g_co2e) / j.baseline_g_co2e)
            : std::string("-");
    out += fmt::format("{:<16} {:<25} {:<25} {:>4} {:>9.0f} {:>10.3f} {:>11.1f} {:>11} {:>7}\n",
                       j.name, format_iso_time(j.runs.front().start_s, zone),
                       format_iso_time(j.runs.back().end_s, zone), j.runs.size(), j.planned_power_w,
                       j.energy_j / kJoulesPerKwh, j.g_co2e, base, save);
    if (j.interruptions > 0 || j.interruption_source != "default 0")
      out += fmt::format("{:<16} {} interruption(s), each {:.1f} s: {}\n", "", j.interruptions,
                         j.interruption_s, j.interruption_source);
    if (!j.estimated_reason.empty())
      out +=
          fmt::format("{:<16} ESTIMATED planned_W, energy and gCO2e: {}\n", "", j.estimated_reason);
  }
  const std::size_t est = estimated_jobs(plan);
  out += fmt::format("total: {:.3f} kWh ({:.4g} J), {:.1f} gCO2e for {} scheduled job(s){}\n",
                     plan.planned_energy_j / kJoulesPerKwh, plan.planned_energy_j,
                     plan.planned_g_co2e, plan.jobs.size() - plan.unscheduled(),
                     est ? fmt::format(", {} of them ESTIMATED", est) : std::string());
  out += fmt::format(
      "vs arrival baseline ({} job(s) scheduled in both): {:.1f} gCO2e vs {:.1f} gCO2e: {} "
      "saved; {:.3f} kWh vs {:.3f} kWh: {} saved\n",
      plan.compared, plan.g_co2e, plan.baseline_g_co2e, pct_text(plan.saving_pct()),
      plan.energy_j / kJoulesPerKwh, plan.baseline_energy_j / kJoulesPerKwh,
      pct_text(plan.energy_saving_pct()));
  if (plan.objective != Objective::carbon)
    out += fmt::format("objective {}: {:.4g} {} vs {:.4g} {}: {} saved\n",
                       objective_name(plan.objective),
                       plan.objective_value(plan.g_co2e, plan.energy_j), plan.objective_unit(),
                       plan.objective_value(plan.baseline_g_co2e, plan.baseline_energy_j),
                       plan.objective_unit(), pct_text(plan.objective_saving_pct()));
  if (const std::string why = plan.saving_unknown_reason(); !why.empty())
    out += fmt::format("saving unknown: {}\n", why);
  if (plan.shift_only_saving_pct && plan.cap_only_saving_pct && plan.objective_saving_pct())
    out += fmt::format(
        "power limits chosen with the starts: {:.1f} % of the {} objective saved; shifting alone "
        "{:.1f} %, capping alone {:.1f} %\n",
        *plan.objective_saving_pct(), objective_name(plan.objective), *plan.shift_only_saving_pct,
        *plan.cap_only_saving_pct);
  if (const std::size_t u = plan.unscheduled())
    out += fmt::format("{} job(s) could not be scheduled (see above)\n", u);
  return out;
}

}  // namespace gt::sched
