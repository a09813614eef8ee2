// sched/planner.h: plans when each job runs (and, with power-limit profiles, at which power
// limit) so that its objective is lowest: emissions (gCO2e), energy (J) or a weighted sum,
// under an optional cluster power budget (W), against a carbon-intensity series (gCO2e/kWh).
//
// Time is cut into the series' slots (15 min for Germany 2020). A job starts at its earliest
// start or on a slot boundary after it, never before, and ends by its deadline;
// emissions integrate partial slots exactly, so a job arriving between two boundaries is
// compared against running at that very time. A job occupies every slot it runs in, for the
// whole slot, when the budget is checked, so the sum of running jobs' power (each capped at its
// power_w, or its chosen limit's power) never exceeds the budget at any instant.
//
// Objectives (PlanOptions::objective). Each is a cost per kWh drawn in a slot, so every strategy
// below optimises it the same way (on a series of that cost per slot):
//  - carbon:   gCO2e = kWh x intensity (the default; the paper's objective);
//  - energy:   kWh (J / 3.6e6); the start no longer matters, the power limit and interruptions
//              do (a run's energy is its power x (duration + interruptions x interruption_s));
//  - weighted: gCO2e + lambda x kWh, lambda in gCO2e per kWh (PlanOptions::energy_weight), i.e.
//              every kWh is charged the intensity of its slot plus lambda. We chose this form over
//              a convex combination w x g + (1-w) x kWh because both terms then have one unit
//              (gCO2e) and lambda has a plain meaning: the emissions one attributes to a kWh
//              beyond the grid's (e.g. embodied or cooling emissions, or a carbon price for
//              energy). Default lambda: the series' mean intensity, which weighs saving energy
//              and shifting it to cleaner slots alike.
//
// Strategies (after Wiesner et al., "Let's Wait Awhile", Middleware '21):
//  - arrival:   start each job at its nominal start (Job::nominal_s(); the baseline), or, under
//               a budget, on the first boundary after it where it fits. The nominal start may
//               lie after the earliest start (the paper's +-w window around a nominal time);
//               a job with caps takes the limit that starts earliest (ties: the cheapest);
//  - shift:     run each job in one piece, in the window before its deadline with the lowest
//               cost;
//  - interrupt: interruptible jobs run in the cheapest slots before their deadline
//               (one partial slot at most: the cheapest slots are filled first, which is the
//               optimum of the fractional problem); other jobs are shifted. A job with
//               interruption costs or a bound (Job::interruption_s, max_interruptions) runs in
//               whole slots but its last; each stretch after the first runs interruption_s
//               longer (checkpoint and restart, counted in its emissions and energy), at most
//               max_interruptions + 1 stretches: a dynamic programme finds the exact optimum;
//  - best:      the one of the three whose plan (on the forecast) schedules most jobs and costs
//               least.
// Jobs with power-limit profiles (Job::caps) get their start (or slots) and their limit chosen
// together. With a budget, the shift strategy searches all (start, limit) combinations exactly
// (branch and bound) when there are at most PlanOptions::exact_search_limit of them, and
// otherwise, as do the other strategies, places jobs greedily by deadline, each job taking the
// (start, limit) of lowest cost that fits (a lower limit may fit where the highest does not).
// Without a budget jobs are independent and each strategy is optimal for its own problem.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "sched/carbon_grid.h"
#include "sched/jobs.h"

namespace gt::sched {

enum class Strategy { arrival, shift, interrupt, best };

/// "arrival", "shift", "interrupt" or "best"; throws gt::Error otherwise.
Strategy parse_strategy(std::string_view name);
std::string_view strategy_name(Strategy s);

enum class Objective { carbon, energy, weighted };

/// "carbon", "energy" or "weighted"; throws gt::Error naming --objective otherwise.
Objective parse_objective(std::string_view name);
std::string_view objective_name(Objective o);

struct PlanOptions {
  Strategy strategy = Strategy::best;
  double power_budget_w = 0;                 ///< cluster power budget, W; 0 = none
  double forecast_error_pct = 0;             ///< Gaussian forecast noise, % of the series mean
  std::uint64_t seed = 1;                    ///< seed of the forecast noise
  std::int64_t exact_search_limit = 200000;  ///< most start combinations searched exactly
  Objective objective = Objective::carbon;
  /// weighted: lambda, gCO2e per kWh (>= 0); empty: the series' mean intensity (see above)
  std::optional<double> energy_weight_g_per_kwh;
};

/// One uninterrupted stretch of a job, UTC seconds [start_s, end_s).
struct Run {
  UnixTimeS start_s = 0;
  UnixTimeS end_s = 0;
};

struct JobPlan {
  std::string name;
  bool scheduled = false;
  std::string reason;     ///< why it could not be scheduled (when !scheduled)
  std::vector<Run> runs;  ///< chronological; one run unless interrupted
  /// The job's planned power draw while running, W (its power_w, or the average power at the
  /// chosen limit): what the power budget counts. Not its power limit (cap_limit_w).
  double planned_power_w = 0;
  double cap_limit_w = 0;           ///< the power limit chosen from the job's profile, W; 0 = none
                                    ///< (the job has no caps: no limit is set)
  double energy_j = 0;              ///< power_w * (duration_s + interruptions x interruption_s), J
  std::size_t interruptions = 0;    ///< times an interruptible job is stopped and resumed
  double interruption_s = 0;        ///< what each interruption costs, s (Job::interruption_s)
  std::string interruption_source;  ///< where that figure came from (Job::interruption_source)
  /// Why planned_power_w, energy_j and the gCO2e are estimates (Job::power_estimated_reason);
  /// empty when the job's power was stated or measured.
  std::string estimated_reason;
  double g_co2e = 0;           ///< emissions on the true series, gCO2e
  double forecast_g_co2e = 0;  ///< emissions on the forecast the plan was made on, gCO2e
  bool baseline_scheduled = false;
  double baseline_g_co2e = 0;    ///< emissions of the baseline (run at the nominal start) on the
                                 ///< true series, gCO2e
  double baseline_energy_j = 0;  ///< energy of the baseline (highest limit, no interruption), J
  std::vector<Run> baseline_runs;
};

struct Plan {
  Strategy strategy = Strategy::arrival;  ///< the strategy used (for best: the one chosen)
  std::string method;                     ///< "exact" or "greedy" (how placements were chosen)
  std::int64_t slot_s = 0;                ///< slot length, s
  double power_budget_w = 0;              ///< W; 0 = none
  double forecast_error_pct = 0;
  std::uint64_t seed = 0;
  Objective objective = Objective::carbon;
  double energy_weight_g_per_kwh = 0;  ///< lambda of the weighted objective; 0 otherwise
  std::vector<JobPlan> jobs;           ///< in the order of the job list
  /// Totals over all jobs the plan schedules: energy, J; emissions on the true series, gCO2e.
  double planned_energy_j = 0, planned_g_co2e = 0;
  /// Totals over jobs scheduled both in the plan and in the baseline (the fair comparison).
  double energy_j = 0, g_co2e = 0, baseline_g_co2e = 0, baseline_energy_j = 0;
  std::size_t compared = 0;  ///< number of jobs in that comparison
  /// With power-limit profiles (Job::caps), the savings in the plan's objective vs the baseline
  /// of shifting alone (every job at its highest limit, placed by the strategy) and of capping
  /// alone (every job at its nominal start, the cap with the lowest forecast cost), %; empty
  /// without caps. The plan itself chooses both (objective_saving_pct()).
  std::optional<double> shift_only_saving_pct, cap_only_saving_pct;
  /// Emissions saved vs the baseline: 100 * (baseline - plan) / baseline, %; empty (unknown,
  /// never 0) when no job was compared or the baseline's emissions are 0
  /// (saving_unknown_reason()).
  std::optional<double> saving_pct() const;
  /// Energy saved vs the baseline, %; empty when no job was compared or the baseline's energy
  /// is 0.
  std::optional<double> energy_saving_pct() const;
  /// The objective of g gCO2e and e_j J: gCO2e (carbon), kWh (energy) or gCO2e + lambda x kWh.
  double objective_value(double g, double e_j) const;
  /// objective_value's unit: "gCO2e", "kWh" or "gCO2e-weighted".
  std::string_view objective_unit() const;
  /// The objective saved vs the baseline (over the compared jobs), %; empty when no job was
  /// compared or the baseline's objective is 0.
  std::optional<double> objective_saving_pct() const;
  /// Why saving_pct(), energy_saving_pct() or objective_saving_pct() is unknown, in words; ""
  /// when all three are known.
  std::string saving_unknown_reason() const;
  std::size_t unscheduled() const;
};

/// Makes the plan on the forecast (truth plus noise when forecast_error_pct > 0) and evaluates it
/// and the baseline (each job run at its nominal start, at its highest limit) on the true
/// series. Jobs with power-limit profiles (Job::caps) get their start and limit chosen together
/// (ties: the higher limit), under the budget when there is one. Throws gt::Error on an empty
/// series, a negative or non-finite budget or energy weight.
Plan make_plan(const std::vector<Job>& jobs, const CarbonSeries& truth, const PlanOptions& opt);

/// Highest total power of running jobs (each at its JobPlan::planned_power_w) over all instants of
/// the plan, W.
double peak_power_w(const Plan& plan, const std::vector<Job>& jobs);

/// The plan as JSON: times ISO 8601 in `zone` with the offset in force at each instant;
/// "time_zone" is zone.describe(), "utc_offset_h" the fixed offset in hours (null for a named
/// zone, whose offset changes); energy in J and kWh; emissions in gCO2e.
nlohmann::json plan_to_json(const Plan& plan, const TimeZone& zone);

/// The plan as a human-readable table, times in `zone` with the offset in force at each instant.
std::string plan_table(const Plan& plan, const TimeZone& zone);

/// Writes text to path via a temporary file in the same folder and rename (atomic).
using gt::write_file_atomic;  // core/atomic_file.h

}  // namespace gt::sched
