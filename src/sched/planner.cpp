// sched/planner.cpp: slot-based carbon-aware placement of jobs under a power budget.
#include "sched/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>

#include "core/error.h"

namespace gt::sched {
namespace {

constexpr double kBudgetEps = 1e-9;

// Where one job may go, in slot indices of the series.
struct Window {
  std::int64_t dur_s = 0;        // whole seconds
  std::int64_t n = 0;            // slots occupied
  std::int64_t rem_s = 0;        // seconds used in the last (partial) slot, in (0, slot_s]
  std::int64_t lo = 0;           // first slot at or after earliest_start
  std::int64_t last_start = -1;  // last contiguous start slot that ends by the deadline
  std::int64_t hi_full = 0;      // slots [lo, hi_full) lie fully before the deadline
};

// One job's placement: (slot, seconds used) in chronological order; a job run in one piece
// also has its exact run (it may start at its arrival, between two slot boundaries).
struct Placement {
  bool ok = false;
  std::string reason;
  std::vector<std::pair<std::int64_t, std::int64_t>> slots;
  std::optional<Run> run;
};

// One way to run a job in one piece: from t for dur_s, occupying slots [first, first + n) for
// the budget; cost: forecast gCO2e.
struct Start {
  UnixTimeS t = 0;
  std::int64_t first = 0, n = 0;
  double cost = 0;
};

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return -floor_div(-a, b); }

class Planner {
 public:
  Planner(const std::vector<Job>& jobs, const CarbonSeries& fc, double budget_w)
      : jobs_(jobs), fc_(fc), budget_w_(budget_w) {
    n_slots_ = static_cast<std::int64_t>(fc.g_co2e_per_kwh.size());
    prefix_.assign(fc.g_co2e_per_kwh.size() + 1, 0.0);
    for (std::size_t i = 0; i < fc.g_co2e_per_kwh.size(); ++i)
      prefix_[i + 1] = prefix_[i] + fc.g_co2e_per_kwh[i];
    for (const Job& j : jobs) win_.push_back(window(j));
  }

  std::vector<Placement> run(Strategy s, std::string& method, std::int64_t exact_limit) {
    used_w_.assign(static_cast<std::size_t>(n_slots_), 0.0);
    std::vector<Placement> out(jobs_.size());
    std::vector<std::size_t> order(jobs_.size());
    std::iota(order.begin(), order.end(), 0);
    method = "greedy";
    if (s == Strategy::arrival) {
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return jobs_[a].earliest_start_s < jobs_[b].earliest_start_s;
      });
      for (std::size_t i : order) out[i] = place_contiguous(i, /*earliest=*/true);
      if (budget_w_ <= 0) method = "exact";
      return out;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return jobs_[a].deadline_s < jobs_[b].deadline_s;
    });
    std::vector<std::size_t> contiguous, pieces;
    for (std::size_t i : order)
      (s == Strategy::interrupt && jobs_[i].interruptible ? pieces : contiguous).push_back(i);
    bool exact = budget_w_ <= 0;
    if (budget_w_ > 0 && exact_search(contiguous, out, exact_limit))
      exact = pieces.empty();
    else
      for (std::size_t i : contiguous) out[i] = place_contiguous(i, /*earliest=*/false);
    for (std::size_t i : pieces) out[i] = place_pieces(i);
    if (exact) method = "exact";
    return out;
  }

  const Window& win(std::size_t i) const { return win_[i]; }

 private:
  Window window(const Job& j) const {
    Window w;
    const std::int64_t slot = fc_.slot_s;
    w.dur_s = static_cast<std::int64_t>(std::ceil(j.duration_s));
    w.n = ceil_div(w.dur_s, slot);
    w.rem_s = w.dur_s - (w.n - 1) * slot;
    w.lo = std::max<std::int64_t>(0, ceil_div(j.earliest_start_s - fc_.start_s, slot));
    w.last_start = std::min(floor_div(j.deadline_s - w.dur_s - fc_.start_s, slot), n_slots_ - w.n);
    w.hi_full = std::min(floor_div(j.deadline_s - fc_.start_s, slot), n_slots_);
    return w;
  }

  // Forecast emissions of job i at contiguous start slot s, gCO2e.
  double cost_at(std::size_t i, std::int64_t s) const {
    const Window& w = win_[i];
    const double full = prefix_[s + w.n - 1] - prefix_[s];
    return jobs_[i].power_w / kJoulesPerKwh *
           (static_cast<double>(fc_.slot_s) * full +
            static_cast<double>(w.rem_s) * fc_.g_co2e_per_kwh[s + w.n - 1]);
  }

  bool fits(std::int64_t slot, double p) const {
    return budget_w_ <= 0 || used_w_[slot] + p <= budget_w_ + kBudgetEps;
  }
  bool fits_run(std::int64_t s, std::int64_t n, double p) const {
    for (std::int64_t k = s; k < s + n; ++k)
      if (!fits(k, p)) return false;
    return true;
  }
  void occupy(std::int64_t s, std::int64_t n, double p) {
    for (std::int64_t k = s; k < s + n; ++k) used_w_[k] += p;
  }

  // A reason when job i cannot be placed even on an empty cluster, else "".
  std::string static_reason(std::size_t i, bool contiguous) const {
    const Job& j = jobs_[i];
    const Window& w = win_[i];
    if (budget_w_ > 0 && j.power_w > budget_w_ + kBudgetEps)
      return fmt::format("power_w {} W exceeds the power budget of {} W", j.power_w, budget_w_);
    const std::int64_t room_s = contiguous
                                    ? (has_start(i) ? w.dur_s : 0)
                                    : std::max<std::int64_t>(0, w.hi_full - w.lo) * fc_.slot_s;
    if (room_s < w.dur_s)
      return fmt::format(
          "needs {} s between earliest_start and deadline on {}-s slot boundaries inside the "
          "carbon series ({} .. {} UTC); there is not that much room",
          w.dur_s, fc_.slot_s, format_wall_time(fc_.start_s, 0), format_wall_time(fc_.end_s(), 0));
    return "";
  }
  std::string budget_reason() const {
    return fmt::format("no room under the power budget of {} W before the deadline", budget_w_);
  }

  // The contiguous starts of job i, in time order: at its arrival when that falls between two
  // slot boundaries (partial slots integrated exactly), then on every boundary after it that
  // ends by the deadline inside the series.
  std::vector<Start> starts(std::size_t i) const {
    std::vector<Start> out;
    for_each_start(i, [&](const Start& st) {
      out.push_back(st);
      return true;
    });
    return out;
  }

  bool has_start(std::size_t i) const {
    bool any = false;
    for_each_start(i, [&](const Start&) { return !(any = true); });
    return any;
  }

  // Calls f(start) for the starts of starts(i), in time order, until f returns false.
  template <class F>
  void for_each_start(std::size_t i, F&& f) const {
    const Window& w = win_[i];
    const Job& j = jobs_[i];
    const std::int64_t slot = fc_.slot_s;
    const std::int64_t off = j.earliest_start_s - fc_.start_s;
    if (off > 0 && off % slot != 0) {
      const UnixTimeS t = j.earliest_start_s, end = t + w.dur_s;
      if (end <= j.deadline_s && end <= fc_.end_s()) {
        const std::int64_t first = off / slot;
        if (!f(Start{t, first, ceil_div(end - fc_.start_s, slot) - first,
                     fc_.g_co2e(t, end, j.power_w)}))
          return;
      }
    }
    for (std::int64_t s = w.lo; s <= w.last_start; ++s)
      if (!f(Start{fc_.start_s + s * slot, s, w.n, cost_at(i, s)})) return;
  }

  Placement contiguous_at(std::size_t i, const Start& st) const {
    Placement p;
    p.ok = true;
    const UnixTimeS end = st.t + win_[i].dur_s;
    p.run = Run{st.t, end};
    for (std::int64_t k = st.first; k < st.first + st.n; ++k) {
      const UnixTimeS a = std::max(st.t, fc_.start_s + k * fc_.slot_s);
      const UnixTimeS b = std::min(end, fc_.start_s + (k + 1) * fc_.slot_s);
      p.slots.push_back({k, b - a});
    }
    return p;
  }

  Placement place_contiguous(std::size_t i, bool earliest) {
    Placement p;
    p.reason = static_reason(i, true);
    if (!p.reason.empty()) return p;
    const double pw = jobs_[i].power_w;
    std::optional<Start> best;
    for_each_start(i, [&](const Start& st) {
      if (!fits_run(st.first, st.n, pw)) return true;
      if (earliest) {
        best = st;
        return false;  // the first start that fits
      }
      if (!best || st.cost < best->cost - 1e-12) best = st;
      return true;
    });
    if (!best) {
      p.reason = budget_reason();
      return p;
    }
    occupy(best->first, best->n, pw);
    return contiguous_at(i, *best);
  }

  // An interruptible job with interruption costs or a bound (Job::interruption_s,
  // Job::max_interruptions): every stretch after an interruption runs interruption_s longer
  // (checkpoint and restart), so b stretches need duration + (b-1) x interruption_s seconds, in
  // whole slots but the last (partial) one. Dynamic programme over the window's slots, state
  // (slots taken, stretches begun, whether the slot before was taken): the exact optimum of that
  // model on the forecast.
  Placement place_pieces_costed(std::size_t i) {
    Placement p;
    p.reason = static_reason(i, false);
    if (!p.reason.empty()) return p;
    const Job& j = jobs_[i];
    const Window& w = win_[i];
    const double pw = j.power_w;
    const std::int64_t slot = fc_.slot_s, W = w.hi_full - w.lo;
    const auto extra_s = static_cast<std::int64_t>(std::ceil(j.interruption_s));
    const std::int64_t B =
        std::min<std::int64_t>(W, j.max_interruptions >= 0 ? j.max_interruptions + 1 : W);
    std::vector<std::int64_t> need(B + 1, 0), rem(B + 1, 0);
    for (std::int64_t b = 1; b <= B; ++b) {
      const std::int64_t t = w.dur_s + (b - 1) * extra_s;
      need[b] = ceil_div(t, slot);
      rem[b] = t - (need[b] - 1) * slot;
    }
    const std::int64_t N = std::min(need[B], W);
    const double states = static_cast<double>(W + 1) * (N + 1) * (B + 1) * 2;
    if (states > 4e7) {
      p.reason = fmt::format(
          "window of {} slots for {} slots of work in up to {} stretches is too large to plan "
          "with interruption costs; expected a smaller max_interruptions",
          W, N, B);
      return p;
    }
    const double inf = std::numeric_limits<double>::infinity();
    auto idx = [&](std::int64_t t, std::int64_t u, std::int64_t c, int in) {
      return static_cast<std::size_t>(((t * (N + 1) + u) * (B + 1) + c) * 2 + in);
    };
    std::vector<double> dp(static_cast<std::size_t>(states), inf);
    dp[idx(0, 0, 0, 0)] = 0;
    auto g = [&](std::int64_t k, std::int64_t secs) {
      return pw / kJoulesPerKwh * static_cast<double>(secs) * fc_.g_co2e_per_kwh[k];
    };
    double best = inf;
    std::int64_t bt = -1, bu = 0, bc = 0;
    int bin = 0;
    for (std::int64_t t = 0; t < W; ++t) {
      const std::int64_t k = w.lo + t;
      const bool can = fits(k, pw);
      for (std::int64_t u = 0; u <= N; ++u)
        for (std::int64_t c = 0; c <= B; ++c)
          for (int in = 0; in < 2; ++in) {
            const double v = dp[idx(t, u, c, in)];
            if (v == inf) continue;
            double& skip = dp[idx(t + 1, u, c, 0)];
            skip = std::min(skip, v);
            if (!can || u >= N) continue;
            const std::int64_t c2 = in ? c : c + 1, u2 = u + 1;
            if (c2 > B || u2 > need[c2]) continue;
            if (u2 == need[c2]) {  // the last slot: the job ends rem seconds into it
              const double done = v + g(k, rem[c2]);
              if (done < best - 1e-12) best = done, bt = t, bu = u, bc = c, bin = in;
            } else {
              double& take = dp[idx(t + 1, u2, c2, 1)];
              take = std::min(take, v + g(k, slot));
            }
          }
    }
    if (bt < 0) {
      p.reason = budget_reason();
      return p;
    }
    // Back from the last slot: which predecessor state gave each value.
    const std::int64_t c_end = bin ? bc : bc + 1;
    p.slots.push_back({w.lo + bt, rem[c_end]});
    std::int64_t u = bu, c = bc;
    int in = bin;
    for (std::int64_t t = bt; t > 0 && u > 0; --t) {
      const double v = dp[idx(t, u, c, in)];
      const std::int64_t k = w.lo + t - 1;
      if (in == 0) {  // slot t-1 was skipped
        in = dp[idx(t - 1, u, c, 0)] == v ? 0 : 1;
        continue;
      }
      p.slots.push_back({k, slot});  // slot t-1 was taken: from (u-1, c or c-1, in')
      bool found = false;
      for (int pin = 0; pin < 2 && !found; ++pin) {
        const std::int64_t pc = pin ? c : c - 1;
        if (pc < 0) continue;
        if (dp[idx(t - 1, u - 1, pc, pin)] + g(k, slot) == v) {
          u -= 1, c = pc, in = pin;
          found = true;
        }
      }
      check(found, "planner: interruption-cost plan could not be traced back (internal error)");
    }
    std::sort(p.slots.begin(), p.slots.end());
    for (auto [k, used] : p.slots) occupy(k, 1, pw);
    p.ok = true;
    return p;
  }

  Placement place_pieces(std::size_t i) {
    if (jobs_[i].interruption_s > 0 || jobs_[i].max_interruptions >= 0)
      return place_pieces_costed(i);
    Placement p;
    p.reason = static_reason(i, false);
    if (!p.reason.empty()) return p;
    const Window& w = win_[i];
    const double pw = jobs_[i].power_w;
    std::vector<std::int64_t> cand;
    for (std::int64_t k = w.lo; k < w.hi_full; ++k)
      if (fits(k, pw)) cand.push_back(k);
    if (static_cast<std::int64_t>(cand.size()) < w.n) {
      p.reason = budget_reason();
      return p;
    }
    // The n cheapest, ties to the earlier slot (as a stable sort by intensity would give).
    std::partial_sort(cand.begin(), cand.begin() + w.n, cand.end(),
                      [&](std::int64_t a, std::int64_t b) {
                        const double ca = fc_.g_co2e_per_kwh[a], cb = fc_.g_co2e_per_kwh[b];
                        return ca < cb || (ca == cb && a < b);
                      });
    // Cheapest n-1 slots run fully; the n-th cheapest takes the remainder.
    for (std::int64_t k = 0; k < w.n; ++k) {
      p.slots.push_back({cand[k], k + 1 < w.n ? fc_.slot_s : w.rem_s});
      occupy(cand[k], 1, pw);
    }
    std::sort(p.slots.begin(), p.slots.end());
    p.ok = true;
    return p;
  }

  // Exact search over start combinations of the given contiguous jobs under the budget, as
  // (fewest unscheduled, lowest forecast emissions). False (nothing placed) when too large.
  bool exact_search(const std::vector<std::size_t>& ids, std::vector<Placement>& out,
                    std::int64_t limit) {
    using Cand = Start;
    std::vector<std::vector<Cand>> cands(ids.size());
    double combos = 1;
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const std::size_t i = ids[k];
      if (static_reason(i, true).empty()) cands[k] = starts(i);
      std::stable_sort(cands[k].begin(), cands[k].end(),
                       [](const Cand& a, const Cand& b) { return a.cost < b.cost; });
      combos *= static_cast<double>(cands[k].size() + 1);
    }
    if (combos > static_cast<double>(limit)) return false;
    std::vector<std::size_t> perm(ids.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::sort(perm.begin(), perm.end(),
              [&](std::size_t a, std::size_t b) { return cands[a].size() < cands[b].size(); });
    std::vector<double> rest_min(ids.size() + 1, 0.0);
    for (std::size_t d = ids.size(); d-- > 0;)
      rest_min[d] = rest_min[d + 1] + (cands[perm[d]].empty() ? 0.0 : cands[perm[d]][0].cost);
    std::vector<std::optional<Start>> cur(ids.size()), best(ids.size());
    std::size_t best_unsched = ids.size() + 1;
    double best_cost = std::numeric_limits<double>::infinity();
    auto better = [&](std::size_t u, double c) {
      return u < best_unsched || (u == best_unsched && c < best_cost - 1e-12);
    };
    auto dfs = [&](auto&& self, std::size_t d, std::size_t unsched, double cost) -> void {
      if (d == ids.size()) {
        if (better(unsched, cost)) best_unsched = unsched, best_cost = cost, best = cur;
        return;
      }
      const std::size_t k = perm[d];
      const std::size_t i = ids[k];
      const double pw = jobs_[i].power_w;
      for (const Cand& c : cands[k]) {
        if (!better(unsched, cost + c.cost + rest_min[d + 1])) break;
        if (!fits_run(c.first, c.n, pw)) continue;
        occupy(c.first, c.n, pw);
        cur[k] = c;
        self(self, d + 1, unsched, cost + c.cost);
        occupy(c.first, c.n, -pw);
      }
      cur[k].reset();
      // Leave job unscheduled: only worthwhile if it can still beat the best.
      if (better(unsched + 1, cost)) self(self, d + 1, unsched + 1, cost);
    };
    dfs(dfs, 0, 0, 0.0);
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const std::size_t i = ids[k];
      if (best[k]) {
        occupy(best[k]->first, best[k]->n, jobs_[i].power_w);
        out[i] = contiguous_at(i, *best[k]);
      } else {
        out[i].reason = static_reason(i, true);
        if (out[i].reason.empty()) out[i].reason = budget_reason();
      }
    }
    return true;
  }

  const std::vector<Job>& jobs_;
  const CarbonSeries& fc_;
  double budget_w_;
  std::int64_t n_slots_ = 0;
  std::vector<double> prefix_;
  std::vector<Window> win_;
  std::vector<double> used_w_;
};

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

struct Candidate {
  Strategy strategy;
  std::string method;
  std::vector<Placement> placements;
  std::size_t unscheduled = 0;
  double forecast_g = 0;
};

}  // namespace

Strategy parse_strategy(std::string_view name) {
  if (name == "arrival") return Strategy::arrival;
  if (name == "shift") return Strategy::shift;
  if (name == "interrupt") return Strategy::interrupt;
  if (name == "best") return Strategy::best;
  throw Error(fmt::format(
      "--strategy '{}' is not known; expected arrival, shift, interrupt or best", name));
}

std::string_view strategy_name(Strategy s) {
  switch (s) {
    case Strategy::arrival:
      return "arrival";
    case Strategy::shift:
      return "shift";
    case Strategy::interrupt:
      return "interrupt";
    case Strategy::best:
      return "best";
  }
  return "?";
}

std::size_t Plan::unscheduled() const {
  std::size_t n = 0;
  for (const JobPlan& j : jobs) n += !j.scheduled;
  return n;
}

namespace {

// Sums a plan's totals over its jobs.
void total_up(Plan& plan) {
  plan.planned_energy_j = plan.planned_g_co2e = plan.energy_j = plan.g_co2e = plan.baseline_g_co2e =
      0;
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
    }
  }
}

Plan plan_fixed(const std::vector<Job>& jobs, const CarbonSeries& truth, const PlanOptions& opt) {
  check(truth.slot_s > 0 && !truth.g_co2e_per_kwh.empty(),
        "carbon series is empty; expected at least one slot");
  check(opt.power_budget_w >= 0 && std::isfinite(opt.power_budget_w),
        fmt::format("--power-budget {} W is not valid; expected W > 0 (or 0 for none)",
                    opt.power_budget_w));
  const CarbonSeries fc = with_forecast_error(truth, opt.forecast_error_pct, opt.seed);
  Planner planner(jobs, fc, opt.power_budget_w);
  // The arrival strategy and the baseline run each job from its nominal start, which may lie
  // after the window opens (a +-w window): the same jobs with earliest start = nominal.
  std::vector<Job> nominal_jobs = jobs;
  for (Job& j : nominal_jobs) j.earliest_start_s = j.nominal_s();
  Planner nominal_planner(nominal_jobs, fc, opt.power_budget_w);

  auto evaluate = [&](Strategy s) {
    Candidate c;
    c.strategy = s;
    c.placements = (s == Strategy::arrival ? nominal_planner : planner)
                       .run(s, c.method, opt.exact_search_limit);
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (!c.placements[i].ok)
        ++c.unscheduled;
      else
        c.forecast_g += emissions(to_runs(c.placements[i], fc), fc, jobs[i].power_w);
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
          (c.unscheduled == chosen.unscheduled && c.forecast_g < chosen.forecast_g - 1e-9))
        chosen = c;
  } else {
    chosen = evaluate(opt.strategy);
  }
  // The baseline needs no forecast: run at the nominal start, evaluated on the truth.
  Planner base_planner(nominal_jobs, truth, opt.power_budget_w);
  std::string base_method;
  std::vector<Placement> base = base_planner.run(Strategy::arrival, base_method, 0);

  Plan plan;
  plan.strategy = chosen.strategy;
  plan.method = chosen.method;
  plan.slot_s = truth.slot_s;
  plan.power_budget_w = opt.power_budget_w;
  plan.forecast_error_pct = opt.forecast_error_pct;
  plan.seed = opt.seed;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    JobPlan jp;
    jp.name = j.name;
    jp.power_cap_w = j.power_w;
    jp.energy_j = j.power_w * j.duration_s;  // not rounded up to whole seconds
    const Placement& p = chosen.placements[i];
    jp.scheduled = p.ok;
    jp.reason = p.reason;
    if (p.ok) {
      jp.runs = to_runs(p, truth);
      if (j.interruptible && jp.runs.size() > 1) {  // each resume's checkpoint and restart
        jp.interruptions = jp.runs.size() - 1;
        jp.energy_j += j.power_w * j.interruption_s * static_cast<double>(jp.interruptions);
      }
      jp.g_co2e = emissions(jp.runs, truth, j.power_w);
      jp.forecast_g_co2e = emissions(jp.runs, fc, j.power_w);
    }
    jp.baseline_scheduled = base[i].ok;
    if (base[i].ok) {
      jp.baseline_runs = to_runs(base[i], truth);
      jp.baseline_g_co2e = emissions(jp.baseline_runs, truth, j.power_w);
    }
    plan.jobs.push_back(std::move(jp));
  }
  total_up(plan);
  return plan;
}

}  // namespace

Plan make_plan(const std::vector<Job>& jobs, const CarbonSeries& truth, const PlanOptions& opt) {
  const bool any_caps =
      std::any_of(jobs.begin(), jobs.end(), [](const Job& j) { return !j.caps.empty(); });
  if (!any_caps) return plan_fixed(jobs, truth, opt);
  check(opt.power_budget_w <= 0,
        "jobs with power_profile (cap chosen by the planner) and --power-budget together are not "
        "planned yet; expected one of them");
  // Shifting alone: every job at its highest limit (its own duration_s and power_w).
  const Plan shift = plan_fixed(jobs, truth, opt);
  // Every (job, cap) pair as a job of its own; without a budget they do not interact.
  std::vector<Job> flat;
  std::vector<std::size_t> owner;
  std::vector<double> limit;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].caps.empty()) {
      flat.push_back(jobs[i]);
      owner.push_back(i);
      limit.push_back(0);
      continue;
    }
    for (const CapOption& c : jobs[i].caps) {
      Job v = jobs[i];
      v.duration_s = c.duration_s;
      v.power_w = c.power_w;
      v.caps.clear();
      flat.push_back(std::move(v));
      owner.push_back(i);
      limit.push_back(c.limit_w);
    }
  }
  auto pick = [&](const Plan& f) {
    Plan p = shift;
    p.strategy = f.strategy;
    p.method = f.method;
    std::vector<std::optional<std::size_t>> best(jobs.size());
    for (std::size_t v = 0; v < flat.size(); ++v) {
      auto& b = best[owner[v]];
      const JobPlan& c = f.jobs[v];
      if (!b || (c.scheduled &&
                 (!f.jobs[*b].scheduled || c.forecast_g_co2e < f.jobs[*b].forecast_g_co2e - 1e-12)))
        b = v;
    }
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      JobPlan jp = f.jobs[*best[i]];
      const JobPlan& base = shift.jobs[i];  // the baseline: the highest limit at nominal
      jp.baseline_scheduled = base.baseline_scheduled;
      jp.baseline_g_co2e = base.baseline_g_co2e;
      jp.baseline_runs = base.baseline_runs;
      jp.cap_limit_w = limit[*best[i]];
      p.jobs[i] = std::move(jp);
    }
    total_up(p);
    return p;
  };
  Plan both = pick(plan_fixed(flat, truth, opt));
  PlanOptions at_nominal = opt;
  at_nominal.strategy = Strategy::arrival;
  both.cap_only_saving_pct = pick(plan_fixed(flat, truth, at_nominal)).saving_pct();
  both.shift_only_saving_pct = shift.saving_pct();
  return both;
}

}  // namespace gt::sched
