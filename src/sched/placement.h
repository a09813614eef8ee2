// sched/placement.h (internal to src/sched): the slot-level search behind make_plan (planner.h).
//
// A Planner places jobs on the slots of one series whose values are the objective's cost per kWh
// (objective_series(): gCO2e/kWh for carbon, 1 for energy, gCO2e/kWh + lambda for weighted), so
// that the emissions integral of energy/carbon.h gives each placement's objective cost. Each job
// has one or more variants: its own duration and power, or (with power-limit profiles) one per
// limit, highest first; the planner chooses the variant together with the start (or slots).
//  - placement.cpp:        windows, contiguous starts, greedy placement by deadline, and the exact
//                          branch-and-bound search over (start, limit) combinations;
//  - placement_pieces.cpp: interruptible jobs in the cheapest slots, and the dynamic programme for
//                          interruption costs and bounds.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sched/carbon_grid.h"
#include "sched/jobs.h"
#include "sched/planner.h"

namespace gt::sched::detail {

std::int64_t floor_div(std::int64_t a, std::int64_t b);
std::int64_t ceil_div(std::int64_t a, std::int64_t b);

/// Where one variant of a job may go, in slot indices of the series.
struct Window {
  std::int64_t dur_s = 0;        ///< whole seconds (duration rounded up)
  std::int64_t n = 0;            ///< slots occupied
  std::int64_t rem_s = 0;        ///< seconds used in the last (partial) slot, in (0, slot_s]
  std::int64_t lo = 0;           ///< first slot at or after earliest_start
  std::int64_t last_start = -1;  ///< last contiguous start slot that ends by the deadline
  std::int64_t hi_full = 0;      ///< slots [lo, hi_full) lie fully before the deadline
};

/// One way to run a job: its own figures, or one limit of its power-limit profile.
struct Variant {
  std::size_t job = 0;    ///< index in the job list
  double duration_s = 0;  ///< s
  double power_w = 0;     ///< W while running
  double limit_w = 0;     ///< the power limit, W; 0 = no limit set (the job's own figures)
  Window w;
};

/// One job's placement: (slot, seconds used) in chronological order; a job run in one piece also
/// has its exact run (it may start at its arrival, between two slot boundaries).
struct Placement {
  bool ok = false;
  std::string reason;  ///< why not (when !ok)
  std::vector<std::pair<std::int64_t, std::int64_t>> slots;
  std::optional<Run> run;
  std::size_t var = 0;  ///< the chosen Variant (Planner::variant())
  double cost = 0;      ///< objective cost on the planner's series (gCO2e, kWh or weighted)
};

/// One way to run a variant in one piece: from t for its duration, occupying slots
/// [first, first + n) for the budget; cost on the planner's series.
struct Start {
  UnixTimeS t = 0;
  std::int64_t first = 0, n = 0;
  double cost = 0;
  std::size_t var = 0;
};

class Planner {
 public:
  /// jobs: the job list; with_caps: jobs with Job::caps get one variant per limit (else every
  /// job runs at its own duration_s and power_w); series: cost per kWh per slot (see above);
  /// budget_w: cluster power budget, W (0 = none).
  Planner(const std::vector<Job>& jobs, bool with_caps, const CarbonSeries& series,
          double budget_w);

  /// One placement per job (in job-list order) by strategy s; method is set to "exact" or
  /// "greedy". exact_limit: most combinations the exact search tries (shift under a budget).
  std::vector<Placement> run(Strategy s, std::string& method, std::int64_t exact_limit);

  const Variant& variant(std::size_t v) const { return vars_[v]; }

 private:
  Window window(const Job& j, double duration_s) const;
  double cost_at(std::size_t v, std::int64_t s) const;
  double slot_cost(std::size_t v, std::int64_t k, std::int64_t secs) const;
  bool fits(std::int64_t slot, double p) const;
  bool fits_run(std::int64_t s, std::int64_t n, double p) const;
  void occupy(std::int64_t s, std::int64_t n, double p);
  void occupy(const Placement& p, double sign = 1);
  std::string static_reason(std::size_t v, bool contiguous) const;
  std::string group_reason(std::size_t i, bool contiguous) const;
  std::string budget_reason() const;
  std::vector<Start> starts(std::size_t v) const;
  bool has_start(std::size_t v) const;
  template <class F>
  void for_each_start(std::size_t v, F&& f) const;
  Placement contiguous_at(const Start& st) const;
  Placement place_contiguous(std::size_t i, bool earliest);
  Placement place_pieces(std::size_t i);
  Placement pieces_cheapest(std::size_t v) const;
  Placement pieces_costed(std::size_t v) const;
  bool exact_search(const std::vector<std::size_t>& ids, std::vector<Placement>& out,
                    std::int64_t limit);

  const std::vector<Job>& jobs_;
  const CarbonSeries& fc_;
  double budget_w_;
  std::int64_t n_slots_ = 0;
  std::vector<double> prefix_;
  std::vector<Variant> vars_;
  std::vector<std::vector<std::size_t>> groups_;  ///< each job's variants, highest limit first
  std::vector<double> used_w_;
};

}  // namespace gt::sched::detail
