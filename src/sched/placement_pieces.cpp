// sched/placement_pieces.cpp: interruptible jobs in the cheapest slots of their window, and the
// dynamic programme for interruption costs and bounds; each power limit is tried and the
// cheapest placement that fits under the budget is taken.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "sched/placement.h"

namespace gt::sched::detail {

Placement Planner::place_pieces(std::size_t i) {
  Placement p;
  p.reason = group_reason(i, false);
  if (!p.reason.empty()) return p;
  const Job& j = jobs_[i];
  const bool costed = j.interruption_s > 0 || j.max_interruptions >= 0;
  std::optional<Placement> best;
  std::string why;
  for (std::size_t v : groups_[i]) {
    if (!static_reason(v, false).empty()) continue;
    Placement q = costed ? pieces_costed(v) : pieces_cheapest(v);
    if (!q.ok) {
      if (why.empty()) why = q.reason;
      continue;
    }
    if (!best || q.cost < best->cost - 1e-12) best = std::move(q);
  }
  if (!best) {
    p.reason = why.empty() ? budget_reason() : why;
    return p;
  }
  occupy(*best);
  return *best;
}

// No interruption costs or bound: the n cheapest slots that fit, the n-th cheapest taking the
// remainder (the optimum of the fractional problem).
Placement Planner::pieces_cheapest(std::size_t v) const {
  Placement p;
  p.var = v;
  const Window& w = vars_[v].w;
  const double pw = vars_[v].power_w;
  std::vector<std::int64_t> cand;
  for (std::int64_t k = w.lo; k < w.hi_full; ++k)
    if (fits(k, pw)) cand.push_back(k);
  if (static_cast<std::int64_t>(cand.size()) < w.n) {
    p.reason = budget_reason();
    return p;
  }
  // The n cheapest, ties to the earlier slot (as a stable sort by cost would give).
  std::partial_sort(cand.begin(), cand.begin() + w.n, cand.end(),
                    [&](std::int64_t a, std::int64_t b) {
                      const double ca = fc_.g_co2e_per_kwh[a], cb = fc_.g_co2e_per_kwh[b];
                      return ca < cb || (ca == cb && a < b);
                    });
  for (std::int64_t k = 0; k < w.n; ++k) {
    const std::int64_t used = k + 1 < w.n ? fc_.slot_s : w.rem_s;
    p.slots.push_back({cand[k], used});
    p.cost += slot_cost(v, cand[k], used);
  }
  std::sort(p.slots.begin(), p.slots.end());
  p.ok = true;
  return p;
}

// An interruptible job with interruption costs or a bound (Job::interruption_s,
// Job::max_interruptions): every stretch after an interruption runs interruption_s longer
// (checkpoint and restart), so b stretches need duration + (b-1) x interruption_s seconds, in
// whole slots but the last (partial) one. Dynamic programme over the window's slots, state
// (slots taken, stretches begun, whether the slot before was taken): the exact optimum of that
// model on the planner's series.
Placement Planner::pieces_costed(std::size_t v) const {
  Placement p;
  p.var = v;
  const Job& j = jobs_[vars_[v].job];
  const Window& w = vars_[v].w;
  const double pw = vars_[v].power_w;
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
  double best = inf;
  std::int64_t bt = -1, bu = 0, bc = 0;
  int bin = 0;
  for (std::int64_t t = 0; t < W; ++t) {
    const std::int64_t k = w.lo + t;
    const bool can = fits(k, pw);
    for (std::int64_t u = 0; u <= N; ++u)
      for (std::int64_t c = 0; c <= B; ++c)
        for (int in = 0; in < 2; ++in) {
          const double val = dp[idx(t, u, c, in)];
          if (val == inf) continue;
          double& skip = dp[idx(t + 1, u, c, 0)];
          skip = std::min(skip, val);
          if (!can || u >= N) continue;
          const std::int64_t c2 = in ? c : c + 1, u2 = u + 1;
          if (c2 > B || u2 > need[c2]) continue;
          if (u2 == need[c2]) {  // the last slot: the job ends rem seconds into it
            const double done = val + slot_cost(v, k, rem[c2]);
            if (done < best - 1e-12) best = done, bt = t, bu = u, bc = c, bin = in;
          } else {
            double& take = dp[idx(t + 1, u2, c2, 1)];
            take = std::min(take, val + slot_cost(v, k, slot));
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
    const double val = dp[idx(t, u, c, in)];
    const std::int64_t k = w.lo + t - 1;
    if (in == 0) {  // slot t-1 was skipped
      in = dp[idx(t - 1, u, c, 0)] == val ? 0 : 1;
      continue;
    }
    p.slots.push_back({k, slot});  // slot t-1 was taken: from (u-1, c or c-1, in')
    bool found = false;
    for (int pin = 0; pin < 2 && !found; ++pin) {
      const std::int64_t pc = pin ? c : c - 1;
      if (pc < 0) continue;
      if (dp[idx(t - 1, u - 1, pc, pin)] + slot_cost(v, k, slot) == val) {
        u -= 1, c = pc, in = pin;
        found = true;
      }
    }
    check(found, "planner: interruption-cost plan could not be traced back (internal error)");
  }
  std::sort(p.slots.begin(), p.slots.end());
  p.cost = best;
  p.ok = true;
  return p;
}

}  // namespace gt::sched::detail
