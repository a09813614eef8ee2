// sched/planner.cpp: make_plan: the objective's series, the strategies' candidates, the choice
// among them and the evaluation of plan and baseline on the true series. The slot-level search
// is in placement.cpp and placement_pieces.cpp.
#include "sched/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/name_table.h"
#include "sched/placement.h"

namespace gt::sched {

using detail::Placement;
using detail::Planner;

namespace {
constexpr NameTable<Strategy, 4> kStrategyNames{{{Strategy::arrival, "arrival"},
                                                 {Strategy::shift, "shift"},
                                                 {Strategy::interrupt, "interrupt"},
                                                 {Strategy::best, "best"}}};
constexpr NameTable<Objective, 3> kObjectiveNames{{{Objective::carbon, "carbon"},
                                                   {Objective::energy, "energy"},
                                                   {Objective::weighted, "weighted"}}};
}  // namespace

Strategy parse_strategy(std::string_view name) {
  return parse_name(kStrategyNames, name, "--strategy");
}
std::string_view strategy_name(Strategy s) { return name_of(kStrategyNames, s); }

Objective parse_objective(std::string_view name) {
  return parse_name(kObjectiveNames, name, "--objective");
}
std::string_view objective_name(Objective o) { return name_of(kObjectiveNames, o); }

std::size_t Plan::unscheduled() const {
  std::size_t n = 0;
  for (const JobPlan& j : jobs) n += !j.scheduled;
  return n;
}

double Plan::objective_value(double g, double e_j) const {
  switch (objective) {
    case Objective::carbon:
      return g;
    case Objective::energy:
      return e_j / kJoulesPerKwh;
    case Objective::weighted:
      return g + energy_weight_g_per_kwh * e_j / kJoulesPerKwh;
  }
  return g;
}

std::string_view Plan::objective_unit() const {
  switch (objective) {
    case Objective::carbon:
      return "gCO2e";
    case Objective::energy:
      return "kWh";
    case Objective::weighted:
      return "gCO2e-weighted";
  }
  return "?";
}

namespace {
// 100 * (base - x) / base, %; unknown without a compared job or a baseline > 0
std::optional<double> saved_pct(std::size_t compared, double base, double x) {
  if (compared == 0 || !(base > 0)) return std::nullopt;
  return 100.0 * (base - x) / base;
}
}  // namespace

std::optional<double> Plan::saving_pct() const {
  return saved_pct(compared, baseline_g_co2e, g_co2e);
}

std::optional<double> Plan::energy_saving_pct() const {
  return saved_pct(compared, baseline_energy_j, energy_j);
}

std::optional<double> Plan::objective_saving_pct() const {
  return saved_pct(compared, objective_value(baseline_g_co2e, baseline_energy_j),
                   objective_value(g_co2e, energy_j));
}

std::string Plan::saving_unknown_reason() const {
  if (compared == 0)
    return "no job was scheduled both in the plan and in the run-at-arrival baseline, so there "
           "is nothing to compare";
  std::string r;
  auto add = [&](bool unknown, const char* what) {
    if (unknown) r += (r.empty() ? "" : "; ") + std::string(what);
  };
  add(!saving_pct(), "the baseline's emissions are 0 gCO2e");
  add(!energy_saving_pct(), "the baseline's energy is 0 kWh");
  add(!objective_saving_pct() && objective != Objective::carbon && objective != Objective::energy,
      "the baseline's objective is 0");
  return r;
}

namespace {

// The objective as (a, b): cost per kWh in a slot of intensity I is a x I + b.
struct CostForm {
  double a = 1, b = 0;
};

CostForm cost_form(const PlanOptions& opt, const CarbonSeries& truth) {
  switch (opt.objective) {
    case Objective::carbon:
      return {1, 0};
    case Objective::energy:
      return {0, 1};
    case Objective::weighted:
      return {1, opt.energy_weight_g_per_kwh.value_or(truth.mean_g_co2e_per_kwh())};
  }
  return {};
}

// The series of the objective's cost per kWh in each slot.
CarbonSeries cost_series(const CarbonSeries& s, CostForm f) {
  CarbonSeries c = s;
  for (double& v : c.g_co2e_per_kwh) v = f.a * v + f.b;
  return c;
}

std::vector<Run> to_runs(const Placement& p, const CarbonSeries& s) {
  if (p.run) return {*p.run};
  std::vector<Run> runs;
  for (auto [slot, used_s] : p.slots) {
    const UnixTimeS a = s.start_s + slot * s.slot_s;
    if (!runs.empty() && runs.back().end_s == a)
      runs.back().end_s = a + used_s;
    else
      runs.push_back({a, a + used_s});
  }
  return runs;
}

double emissions(const std::vector<Run>& runs, const CarbonSeries& s, double power_w) {
  double g = 0;
  for (const Run& r : runs) g += s.g_co2e(r.start_s, r.end_s, power_w);
  return g;
}

// A placement's energy: power x (duration + interruptions x interruption_s), J (the duration not
// rounded up to whole seconds).
double energy_of(const Job& j, const detail::Variant& v, std::size_t interruptions) {
  return v.power_w * (v.duration_s + j.interruption_s * static_cast<double>(interruptions));
}

std::size_t interruptions_of(const Job& j, const std::vector<Run>& runs) {
  return j.interruptible && runs.size() > 1 ? runs.size() - 1 : 0;
}

struct Candidate {
  Strategy strategy;
  std::string method;
  std::vector<Placement> placements;
  std::size_t unscheduled = 0;
  double forecast_cost = 0;  // the objective on the forecast
};

// Sums a plan's totals over its jobs.
void total_up(Plan& plan) {
  plan.planned_energy_j = plan.planned_g_co2e = plan.energy_j = plan.g_co2e = plan.baseline_g_co2e =
      plan.baseline_energy_j = 0;
  plan.compared = 0;
  for (const JobPlan& jp : plan.jobs) {
    if (jp.scheduled) {
      plan.planned_energy_j += jp.energy_j;
      plan.planned_g_co2e += jp.g_co2e;
    }
    if (jp.scheduled && jp.baseline_scheduled) {
      ++plan.compared;
      plan.energy_j += jp.energy_j;
      plan.g_co2e += jp.g_co2e;
      plan.baseline_g_co2e += jp.baseline_g_co2e;
      plan.baseline_energy_j += jp.baseline_energy_j;
    }
  }
}

// One plan: with_caps = false runs every job at its own (highest) figures.
Plan plan_one(const std::vector<Job>& jobs, const CarbonSeries& truth, const PlanOptions& opt,
              bool with_caps) {
  const CostForm form = cost_form(opt, truth);
  const CarbonSeries fc = with_forecast_error(truth, opt.forecast_error_pct, opt.seed);
  const CarbonSeries fc_cost = cost_series(fc, form);
  Plan plan;
  plan.objective = opt.objective;
  plan.energy_weight_g_per_kwh = opt.objective == Objective::weighted ? form.b : 0;
  Planner planner(jobs, with_caps, fc_cost, opt.power_budget_w);
  // The arrival strategy and the baseline run each job from its nominal start, which may lie
  // after the window opens (a +-w window): the same jobs with earliest start = nominal.
  std::vector<Job> nominal_jobs = jobs;
  for (Job& j : nominal_jobs) j.earliest_start_s = j.nominal_s();
  Planner nominal_planner(nominal_jobs, with_caps, fc_cost, opt.power_budget_w);

  auto evaluate = [&](Strategy s) {
    Candidate c;
    c.strategy = s;
    Planner& p = s == Strategy::arrival ? nominal_planner : planner;
    c.placements = p.run(s, c.method, opt.exact_search_limit);
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const Placement& pl = c.placements[i];
      if (!pl.ok) {
        ++c.unscheduled;
        continue;
      }
      const detail::Variant& v = p.variant(pl.var);
      const std::vector<Run> runs = to_runs(pl, fc);
      c.forecast_cost += plan.objective_value(
          emissions(runs, fc, v.power_w), energy_of(jobs[i], v, interruptions_of(jobs[i], runs)));
    }
    return c;
  };
  Candidate chosen;
  if (opt.strategy == Strategy::best) {
    std::vector<Candidate> all = {evaluate(Strategy::arrival), evaluate(Strategy::shift),
                                  evaluate(Strategy::interrupt)};
    chosen = all[0];
    for (auto& c : all)
      if (c.unscheduled < chosen.unscheduled ||
          (c.unscheduled == chosen.unscheduled && c.forecast_cost < chosen.forecast_cost - 1e-9))
        chosen = c;
  } else {
    chosen = evaluate(opt.strategy);
  }
  const Planner& used = chosen.strategy == Strategy::arrival ? nominal_planner : planner;
  // The baseline needs no forecast: run at the nominal start at the highest limit, on the truth.
  const CarbonSeries truth_cost = cost_series(truth, form);  // the Planner keeps a reference
  Planner base_planner(nominal_jobs, /*with_caps=*/false, truth_cost, opt.power_budget_w);
  std::string base_method;
  std::vector<Placement> base = base_planner.run(Strategy::arrival, base_method, 0);

  plan.strategy = chosen.strategy;
  plan.method = chosen.method;
  plan.slot_s = truth.slot_s;
  plan.power_budget_w = opt.power_budget_w;
  plan.forecast_error_pct = opt.forecast_error_pct;
  plan.seed = opt.seed;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    const Placement& p = chosen.placements[i];
    const detail::Variant& v = used.variant(p.var);
    JobPlan jp;
    jp.name = j.name;
    jp.planned_power_w = p.ok ? v.power_w : j.power_w;
    jp.cap_limit_w = p.ok ? v.limit_w : 0;
    jp.interruption_s = j.interruption_s;
    jp.interruption_source = j.interruption_source;
    jp.estimated_reason = j.power_estimated_reason;
    jp.energy_j = p.ok ? energy_of(j, v, 0) : j.power_w * j.duration_s;
    jp.scheduled = p.ok;
    jp.reason = p.reason;
    if (p.ok) {
      jp.runs = to_runs(p, truth);
      jp.interruptions = interruptions_of(j, jp.runs);  // each resume's checkpoint and restart
      jp.energy_j = energy_of(j, v, jp.interruptions);
      jp.g_co2e = emissions(jp.runs, truth, v.power_w);
      jp.forecast_g_co2e = emissions(jp.runs, fc, v.power_w);
    }
    jp.baseline_scheduled = base[i].ok;
    if (base[i].ok) {
      jp.baseline_runs = to_runs(base[i], truth);
      jp.baseline_g_co2e = emissions(jp.baseline_runs, truth, j.power_w);
      jp.baseline_energy_j = j.power_w * j.duration_s;
    }
    plan.jobs.push_back(std::move(jp));
  }
  total_up(plan);
  return plan;
}

}  // namespace

Plan make_plan(const std::vector<Job>& jobs, const CarbonSeries& truth, const PlanOptions& opt) {
  check(truth.slot_s > 0 && !truth.g_co2e_per_kwh.empty(),
        "carbon series is empty; expected at least one slot");
  check(opt.power_budget_w >= 0 && std::isfinite(opt.power_budget_w),
        fmt::format("--power-budget {} W is not valid; expected W > 0 (or 0 for none)",
                    opt.power_budget_w));
  check(!opt.energy_weight_g_per_kwh ||
            (*opt.energy_weight_g_per_kwh >= 0 && std::isfinite(*opt.energy_weight_g_per_kwh)),
        fmt::format("--energy-weight {} is not valid; expected gCO2e per kWh >= 0",
                    opt.energy_weight_g_per_kwh.value_or(0)));
  check(!opt.energy_weight_g_per_kwh || opt.objective == Objective::weighted,
        "--energy-weight applies to --objective weighted only");
  const bool any_caps =
      std::any_of(jobs.begin(), jobs.end(), [](const Job& j) { return !j.caps.empty(); });
  if (!any_caps) return plan_one(jobs, truth, opt, false);
  // Shifting alone: every job at its highest limit (its own duration_s and power_w); capping
  // alone: every job from its nominal start, the limit chosen; both: the plan.
  const Plan shift = plan_one(jobs, truth, opt, false);
  PlanOptions at_nominal = opt;
  at_nominal.strategy = Strategy::arrival;
  const Plan cap = plan_one(jobs, truth, at_nominal, true);
  Plan both = plan_one(jobs, truth, opt, true);
  both.shift_only_saving_pct = shift.objective_saving_pct();
  both.cap_only_saving_pct = cap.objective_saving_pct();
  return both;
}

}  // namespace gt::sched
