// sched/placement.cpp: windows, contiguous starts, greedy placement by deadline and the exact
// branch-and-bound search over (start, power limit) combinations under a power budget.
#include "sched/placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace gt::sched::detail {
namespace {
constexpr double kBudgetEps = 1e-9;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return -floor_div(-a, b); }

Planner::Planner(const std::vector<Job>& jobs, bool with_caps, const CarbonSeries& series,
                 double budget_w)
    : jobs_(jobs), fc_(series), budget_w_(budget_w) {
  n_slots_ = static_cast<std::int64_t>(series.g_co2e_per_kwh.size());
  prefix_.assign(series.g_co2e_per_kwh.size() + 1, 0.0);
  for (std::size_t i = 0; i < series.g_co2e_per_kwh.size(); ++i)
    prefix_[i + 1] = prefix_[i] + series.g_co2e_per_kwh[i];
  groups_.resize(jobs.size());
  auto add = [&](std::size_t i, double dur, double pw, double limit) {
    groups_[i].push_back(vars_.size());
    vars_.push_back(Variant{i, dur, pw, limit, window(jobs[i], dur)});
  };
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (with_caps && !jobs[i].caps.empty())
      for (const CapOption& c : jobs[i].caps) add(i, c.duration_s, c.power_w, c.limit_w);
    else
      add(i, jobs[i].duration_s, jobs[i].power_w, 0);
  }
}

std::vector<Placement> Planner::run(Strategy s, std::string& method, std::int64_t exact_limit) {
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

Window Planner::window(const Job& j, double duration_s) const {
  Window w;
  const std::int64_t slot = fc_.slot_s;
  w.dur_s = static_cast<std::int64_t>(std::ceil(duration_s));
  w.n = ceil_div(w.dur_s, slot);
  w.rem_s = w.dur_s - (w.n - 1) * slot;
  w.lo = std::max<std::int64_t>(0, ceil_div(j.earliest_start_s - fc_.start_s, slot));
  w.last_start = std::min(floor_div(j.deadline_s - w.dur_s - fc_.start_s, slot), n_slots_ - w.n);
  w.hi_full = std::min(floor_div(j.deadline_s - fc_.start_s, slot), n_slots_);
  return w;
}

double Planner::cost_at(std::size_t v, std::int64_t s) const {
  const Window& w = vars_[v].w;
  const double full = prefix_[s + w.n - 1] - prefix_[s];
  return vars_[v].power_w / kJoulesPerKwh *
         (static_cast<double>(fc_.slot_s) * full +
          static_cast<double>(w.rem_s) * fc_.g_co2e_per_kwh[s + w.n - 1]);
}

double Planner::slot_cost(std::size_t v, std::int64_t k, std::int64_t secs) const {
  return vars_[v].power_w / kJoulesPerKwh * static_cast<double>(secs) * fc_.g_co2e_per_kwh[k];
}

bool Planner::fits(std::int64_t slot, double p) const {
  return budget_w_ <= 0 || used_w_[slot] + p <= budget_w_ + kBudgetEps;
}
bool Planner::fits_run(std::int64_t s, std::int64_t n, double p) const {
  for (std::int64_t k = s; k < s + n; ++k)
    if (!fits(k, p)) return false;
  return true;
}
void Planner::occupy(std::int64_t s, std::int64_t n, double p) {
  for (std::int64_t k = s; k < s + n; ++k) used_w_[k] += p;
}
void Planner::occupy(const Placement& p, double sign) {
  for (auto [k, used] : p.slots) occupy(k, 1, sign * vars_[p.var].power_w);
}

std::string Planner::static_reason(std::size_t v, bool contiguous) const {
  const Variant& var = vars_[v];
  const Window& w = var.w;
  if (budget_w_ > 0 && var.power_w > budget_w_ + kBudgetEps)
    return fmt::format("power_w {} W exceeds the power budget of {} W", var.power_w, budget_w_);
  const std::int64_t room_s = contiguous ? (has_start(v) ? w.dur_s : 0)
                                         : std::max<std::int64_t>(0, w.hi_full - w.lo) * fc_.slot_s;
  if (room_s < w.dur_s)
    return fmt::format(
        "needs {} s between earliest_start and deadline on {}-s slot boundaries inside the "
        "carbon series ({} .. {} UTC); there is not that much room",
        w.dur_s, fc_.slot_s, format_wall_time(fc_.start_s, 0), format_wall_time(fc_.end_s(), 0));
  return "";
}

std::string Planner::group_reason(std::size_t i, bool contiguous) const {
  const auto& g = groups_[i];
  for (std::size_t v : g)
    if (static_reason(v, contiguous).empty()) return "";
  if (g.size() == 1) return static_reason(g[0], contiguous);
  // the lowest limit: the least power (and the longest run)
  return fmt::format("at every power limit of its profile; at the lowest, {} W: {}",
                     vars_[g.back()].limit_w, static_reason(g.back(), contiguous));
}

std::string Planner::budget_reason() const {
  return fmt::format("no room under the power budget of {} W before the deadline", budget_w_);
}

template <class F>
void Planner::for_each_start(std::size_t v, F&& f) const {
  const Window& w = vars_[v].w;
  const Job& j = jobs_[vars_[v].job];
  const std::int64_t slot = fc_.slot_s;
  const std::int64_t off = j.earliest_start_s - fc_.start_s;
  if (off > 0 && off % slot != 0) {  // at its arrival, between two slot boundaries
    const UnixTimeS t = j.earliest_start_s, end = t + w.dur_s;
    if (end <= j.deadline_s && end <= fc_.end_s()) {
      const std::int64_t first = off / slot;
      if (!f(Start{t, first, ceil_div(end - fc_.start_s, slot) - first,
                   fc_.g_co2e(t, end, vars_[v].power_w), v}))
        return;
    }
  }
  for (std::int64_t s = w.lo; s <= w.last_start; ++s)
    if (!f(Start{fc_.start_s + s * slot, s, w.n, cost_at(v, s), v})) return;
}

std::vector<Start> Planner::starts(std::size_t v) const {
  std::vector<Start> out;
  for_each_start(v, [&](const Start& st) {
    out.push_back(st);
    return true;
  });
  return out;
}

bool Planner::has_start(std::size_t v) const {
  bool any = false;
  for_each_start(v, [&](const Start&) { return !(any = true); });
  return any;
}

Placement Planner::contiguous_at(const Start& st) const {
  Placement p;
  p.ok = true;
  p.var = st.var;
  p.cost = st.cost;
  const UnixTimeS end = st.t + vars_[st.var].w.dur_s;
  p.run = Run{st.t, end};
  for (std::int64_t k = st.first; k < st.first + st.n; ++k) {
    const UnixTimeS a = std::max(st.t, fc_.start_s + k * fc_.slot_s);
    const UnixTimeS b = std::min(end, fc_.start_s + (k + 1) * fc_.slot_s);
    p.slots.push_back({k, b - a});
  }
  return p;
}

// earliest (the arrival strategy): each variant's first start that fits; the earliest of them,
// ties to the lowest cost (then the higher limit). Otherwise the lowest cost over every variant
// and start that fits, ties to the higher limit and the earlier start.
Placement Planner::place_contiguous(std::size_t i, bool earliest) {
  Placement p;
  p.reason = group_reason(i, true);
  if (!p.reason.empty()) return p;
  std::optional<Start> best;
  for (std::size_t v : groups_[i]) {
    if (!static_reason(v, true).empty()) continue;
    const double pw = vars_[v].power_w;
    for_each_start(v, [&](const Start& st) {
      if (!fits_run(st.first, st.n, pw)) return true;
      if (earliest) {
        if (!best || st.t < best->t || (st.t == best->t && st.cost < best->cost - 1e-12)) best = st;
        return false;  // this variant's first start that fits
      }
      if (!best || st.cost < best->cost - 1e-12) best = st;
      return true;
    });
  }
  if (!best) {
    p.reason = budget_reason();
    return p;
  }
  occupy(best->first, best->n, vars_[best->var].power_w);
  return contiguous_at(*best);
}

// Exact search over (start, limit) combinations of the given contiguous jobs under the budget,
// as (fewest unscheduled, lowest cost): depth-first over the jobs with the fewest candidates
// first, each job's candidates cheapest first, pruned by the sum of the remaining jobs' cheapest
// candidates (a lower bound). False (nothing placed) when there are more than `limit`.
bool Planner::exact_search(const std::vector<std::size_t>& ids, std::vector<Placement>& out,
                           std::int64_t limit) {
  std::vector<std::vector<Start>> cands(ids.size());
  double combos = 1;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    for (std::size_t v : groups_[ids[k]])
      if (static_reason(v, true).empty())
        for (const Start& st : starts(v)) cands[k].push_back(st);
    std::stable_sort(cands[k].begin(), cands[k].end(),
                     [](const Start& a, const Start& b) { return a.cost < b.cost; });
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
    for (const Start& c : cands[k]) {
      if (!better(unsched, cost + c.cost + rest_min[d + 1])) break;
      const double pw = vars_[c.var].power_w;
      if (!fits_run(c.first, c.n, pw)) continue;
      occupy(c.first, c.n, pw);
      cur[k] = c;
      self(self, d + 1, unsched, cost + c.cost);
      occupy(c.first, c.n, -pw);
    }
    cur[k].reset();
    // Leave the job unscheduled: only worthwhile if that can still beat the best.
    if (better(unsched + 1, cost)) self(self, d + 1, unsched + 1, cost);
  };
  dfs(dfs, 0, 0, 0.0);
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const std::size_t i = ids[k];
    if (best[k]) {
      occupy(best[k]->first, best[k]->n, vars_[best[k]->var].power_w);
      out[i] = contiguous_at(*best[k]);
    } else {
      out[i].reason = group_reason(i, true);
      if (out[i].reason.empty()) out[i].reason = budget_reason();
    }
  }
  return true;
}

}  // namespace gt::sched::detail
