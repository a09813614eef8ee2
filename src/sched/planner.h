// sched/planner.h: plans when each job runs so that its emissions (gCO2e) are lowest, under an
// optional cluster power budget (W), against a carbon-intensity series (gCO2e/kWh).
//
// Time is cut into the series' slots (15 min for Germany 2020). A job starts at its earliest
// start or on a slot boundary after it, never before, and ends by its deadline;
// emissions integrate partial slots exactly, so a job arriving between two boundaries is
// compared against running at that very time. A job occupies every slot it runs in, for the
// whole slot, when the budget is checked, so the sum of running jobs' power (each capped at its
// power_w) never exceeds the budget at any instant.
//
// Strategies (after Wiesner et al., "Let's Wait Awhile", Middleware '21):
//  - arrival:   start each job at its nominal start (Job::nominal_s(); the baseline), or, under
//               a budget, on the first boundary after it where it fits. The nominal start may
//               lie after the earliest start (the paper's +-w window around a nominal time);
//  - shift:     run each job in one piece, in the window before its deadline with the lowest
//               mean intensity;
//  - interrupt: interruptible jobs run in the lowest-intensity slots before their deadline
//               (one partial slot at most: the cheapest slots are filled first, which is the
//               optimum of the fractional problem); other jobs are shifted. A job with
//               interruption costs or a bound (Job::interruption_s, max_interruptions) runs in
//               whole slots but its last; each stretch after the first runs interruption_s
//               longer (checkpoint and restart, counted in its emissions and energy), at most
//               max_interruptions + 1 stretches: a dynamic programme finds the exact optimum;
//  - best:      the one of the three whose plan (on the forecast) schedules most jobs and emits
//               least.
// With a budget, the shift strategy searches all start combinations exactly (branch and bound)
// when there are at most PlanOptions::exact_search_limit of them, and otherwise, as do the other
// strategies, places jobs greedily by deadline. Without a budget jobs are independent and each
// strategy is optimal for its own problem.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sched/carbon.h"
#include "sched/jobs.h"

namespace gt::sched {

enum class Strategy { arrival, shift, interrupt, best };

/// "arrival", "shift", "interrupt" or "best"; throws gt::Error otherwise.
Strategy parse_strategy(std::string_view name);
std::string_view strategy_name(Strategy s);

struct PlanOptions {
  Strategy strategy = Strategy::best;
  double power_budget_w = 0;                 ///< cluster power budget, W; 0 = none
  double forecast_error_pct = 0;             ///< Gaussian forecast noise, % of the series mean
  std::uint64_t seed = 1;                    ///< seed of the forecast noise
  std::int64_t exact_search_limit = 200000;  ///< most start combinations searched exactly
};

/// One uninterrupted stretch of a job, UTC seconds [start_s, end_s).
struct Run {
  UnixTimeS start_s = 0;
  UnixTimeS end_s = 0;
};

struct JobPlan {
  std::string name;
  bool scheduled = false;
  std::string reason;             ///< why it could not be scheduled (when !scheduled)
  std::vector<Run> runs;          ///< chronological; one run unless interrupted
  double power_cap_w = 0;         ///< average power while running, W (the job's power_w, or the
                                  ///< chosen limit's average power)
  double cap_limit_w = 0;         ///< the power limit chosen from the job's profile, W; 0 = none
                                  ///< (the job has no caps: no limit is set)
  double energy_j = 0;            ///< power_w * (duration_s + interruptions x interruption_s), J
  std::size_t interruptions = 0;  ///< times an interruptible job is stopped and resumed
  double g_co2e = 0;              ///< emissions on the true series, gCO2e
  double forecast_g_co2e = 0;     ///< emissions on the forecast the plan was made on, gCO2e
  bool baseline_scheduled = false;
  double baseline_g_co2e = 0;  ///< emissions of the baseline (run at the nominal start) on the
                               ///< true series, gCO2e
  std::vector<Run> baseline_runs;
};

struct Plan {
  Strategy strategy = Strategy::arrival;  ///< the strategy used (for best: the one chosen)
  std::string method;                     ///< "exact" or "greedy" (how placements were chosen)
  std::int64_t slot_s = 0;                ///< slot length, s
  double power_budget_w = 0;              ///< W; 0 = none
  double forecast_error_pct = 0;
  std::uint64_t seed = 0;
  std::vector<JobPlan> jobs;  ///< in the order of the job list
  /// Totals over all jobs the plan schedules: energy, J; emissions on the true series, gCO2e.
  double planned_energy_j = 0, planned_g_co2e = 0;
  /// Totals over jobs scheduled both in the plan and in the baseline (the fair comparison).
  double energy_j = 0, g_co2e = 0, baseline_g_co2e = 0;
  std::size_t compared = 0;  ///< number of jobs in that comparison
  /// With power-limit profiles (Job::caps), the savings vs the baseline of shifting alone (every
  /// job at its highest limit, placed by the strategy) and of capping alone (every job at its
  /// nominal start, the cap with the lowest forecast emissions), %; empty without caps. The
  /// plan itself chooses both (saving_pct()).
  std::optional<double> shift_only_saving_pct, cap_only_saving_pct;
  /// 100 * (baseline - plan) / baseline, %.
  double saving_pct() const {
    return baseline_g_co2e > 0 ? 100.0 * (baseline_g_co2e - g_co2e) / baseline_g_co2e : 0.0;
  }
  std::size_t unscheduled() const;
};

/// Makes the plan on the forecast (truth plus noise when forecast_error_pct > 0) and evaluates it
/// and the baseline (each job run at its nominal start, at its highest limit) on the true
/// series. Jobs with power-limit profiles (Job::caps) get their start and cap chosen together:
/// each (job, cap) pair is planned as a job of that cap's duration and power, and each job takes
/// the pair with the fewest unscheduled and lowest forecast emissions (ties: the higher limit);
/// without a budget jobs are independent, so this is the joint optimum of each strategy. Throws
/// gt::Error for caps together with a power budget (not planned yet).
Plan make_plan(const std::vector<Job>& jobs, const CarbonSeries& truth, const PlanOptions& opt);

/// Highest total power of running jobs (each at its JobPlan::power_cap_w) over all instants of
/// the plan, W.
double peak_power_w(const Plan& plan, const std::vector<Job>& jobs);

/// The plan as JSON: times ISO 8601 in `zone` with the offset in force at each instant;
/// "time_zone" is zone.describe(), "utc_offset_h" the fixed offset in hours (null for a named
/// zone, whose offset changes); energy in J and kWh; emissions in gCO2e.
nlohmann::json plan_to_json(const Plan& plan, const TimeZone& zone);

/// The plan as a human-readable table, times in `zone` with the offset in force at each instant.
std::string plan_table(const Plan& plan, const TimeZone& zone);

/// Writes text to path via a temporary file in the same folder and rename (atomic).
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace gt::sched
