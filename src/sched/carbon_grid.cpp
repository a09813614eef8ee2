// sched/carbon_grid.cpp: carbon-intensity series on the planner's grid (the CSV is read by
// energy/carbon.cpp), wall-clock times in the user's zone, and forecast noise.
#include "sched/carbon_grid.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "core/error.h"

namespace gt::sched {
UnixTimeS civil_to_unix_s(int year, int month, int day, int hour, int minute, int second,
                          const TimeZone& zone, std::string_view where) {
  const UnixTimeS local = energy::civil_to_unix_s(year, month, day, hour, minute, second, 0);
  return zone.to_utc(local, where);
}

UnixTimeS parse_wall_time(std::string_view text, const TimeZone& zone, std::string_view where) {
  if (zone.is_fixed())
    return energy::parse_time_or_throw(text, zone.fixed_offset_s(), where).unix_s;
  const energy::ParsedTime t = energy::parse_time_or_throw(text, 0, where);
  return t.explicit_offset ? t.unix_s : zone.to_utc(t.unix_s, where);
}

double CarbonSeries::mean_g_co2e_per_kwh() const {
  if (g_co2e_per_kwh.empty()) return 0;
  double s = 0;
  for (double v : g_co2e_per_kwh) s += v;
  return s / static_cast<double>(g_co2e_per_kwh.size());
}

double CarbonSeries::g_co2e(UnixTimeS t0_s, UnixTimeS t1_s, double power_w) const {
  if (t1_s <= t0_s) return 0;
  check(t0_s >= start_s && t1_s <= end_s(),
        fmt::format("carbon series covers [{}, {}) UTC; interval [{}, {}) is outside it",
                    format_wall_time(start_s, 0), format_wall_time(end_s(), 0),
                    format_wall_time(t0_s, 0), format_wall_time(t1_s, 0)));
  double g = 0;
  std::int64_t i = (t0_s - start_s) / slot_s;
  for (UnixTimeS t = t0_s; t < t1_s; ++i) {
    const UnixTimeS slot_end = start_s + (i + 1) * slot_s;
    const UnixTimeS e = std::min(slot_end, t1_s);
    g += power_w * static_cast<double>(e - t) / kJoulesPerKwh * g_co2e_per_kwh[i];
    t = e;
  }
  return g;
}

bool parse_slot_value(std::string_view text) {
  if (text == "mean") return false;
  if (text == "start") return true;
  throw Error(fmt::format("--slot-value '{}' is not known; expected mean or start", text));
}

CarbonSeries load_carbon_csv(const std::string& path, const TimeZone& zone, const SlotGrid& grid,
                             const energy::CarbonReadOptions& read) {
  // a slot of more than a year overflowed the slot arithmetic (start + (i + 1) * slot)
  check(grid.slot_s >= 0 && grid.slot_s <= kMaxSlotS,
        fmt::format("--slot-s {} is not valid; expected seconds in [1, {}] (a year), or 0 for "
                    "the CSV's smallest step",
                    grid.slot_s, kMaxSlotS));
  const energy::CarbonCsv csv = [&] {
    if (zone.is_fixed()) return energy::read_carbon_csv(path, zone.fixed_offset_s(), read);
    // A named zone: a repeated hour is read at its first occurrence unless time would go back.
    energy::NaiveTimeResolver resolve = [&zone](std::int64_t local_s,
                                                std::optional<std::int64_t> prev,
                                                const std::string& where) -> std::int64_t {
      const TimeZone::Local r = zone.resolve(local_s);
      if (r.kind == TimeZone::Local::Kind::ambiguous)
        return !prev || r.first_s > *prev ? r.first_s : r.second_s;
      return zone.to_utc(local_s, where);  // unique, or an error naming the skipped hour
    };
    return energy::read_carbon_csv(path, resolve, zone.describe(), read);
  }();
  const std::vector<UnixTimeS>& ts = csv.t_s;
  const std::vector<double>& vs = csv.g_co2e_per_kwh;
  check(ts.size() >= 2,
        fmt::format("{}: {} data row(s); expected at least 2 (the planner needs the series' step)",
                    path, ts.size()));
  std::int64_t slot = ts[1] - ts[0];  // the grid: the smallest step
  for (std::size_t i = 2; i < ts.size(); ++i) slot = std::min(slot, ts[i] - ts[i - 1]);
  if (grid.slot_s > 0) slot = grid.slot_s;
  const std::int64_t median = csv.step_s;  // the reader's step: the median spacing
  CarbonSeries s;
  s.path = path;
  s.source = csv.describe();
  s.row_step_s = csv.step_s;
  s.gaps = csv.gaps;
  s.implausible_warning = csv.implausible_warning;
  s.start_s = ts.front();
  s.slot_s = slot;
  const UnixTimeS end = ts.back() + median;
  const std::int64_t n = (end - s.start_s) / slot;
  check(n <= kMaxCarbonSlots,
        fmt::format("{}: the series runs from {} to {} ({}); on a grid of {} slots that is {} "
                    "slots, more than the {} the planner takes; expected rows of one period "
                    "(is a year mistyped?) or a longer --slot-s",
                    path, energy::format_wall_time(ts.front(), 0) + "Z",
                    energy::format_wall_time(end, 0) + "Z", energy::format_span_s(end - ts.front()),
                    energy::format_span_s(slot), n, kMaxCarbonSlots));
  s.g_co2e_per_kwh.resize(static_cast<std::size_t>(n));
  // Step function: sample k holds on [ts[k], ts[k+1]) (last: [ts.back(), end)).
  std::size_t k = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const UnixTimeS a = s.start_s + i * slot, b = a + slot;
    double acc = 0;
    while (k + 1 < ts.size() && ts[k + 1] <= a) ++k;
    if (grid.value_at_start) {  // the row in force at the slot's start
      s.g_co2e_per_kwh[static_cast<std::size_t>(i)] = vs[k];
      continue;
    }
    for (std::size_t j = k; j < ts.size() && ts[j] < b; ++j) {
      const UnixTimeS seg_end = j + 1 < ts.size() ? ts[j + 1] : end;
      const UnixTimeS lo = std::max(a, ts[j]), hi = std::min(b, seg_end);
      if (hi > lo) acc += vs[j] * static_cast<double>(hi - lo);
    }
    s.g_co2e_per_kwh[static_cast<std::size_t>(i)] = acc / static_cast<double>(slot);
  }
  return s;
}

std::vector<std::string> gap_warnings(const CarbonSeries& s) {
  std::vector<std::string> out;
  for (const energy::CarbonGap& g : s.gaps)
    out.push_back(fmt::format("carbon series {}: {}", s.path.empty() ? "(in memory)" : s.path,
                              energy::describe_gap(g, s.row_step_s)));
  return out;
}

CarbonSeries with_forecast_error(const CarbonSeries& truth, double error_pct, std::uint64_t seed) {
  check(error_pct >= 0 && std::isfinite(error_pct),
        fmt::format("forecast error {} % is not valid; expected a percentage >= 0", error_pct));
  CarbonSeries f = truth;
  if (error_pct == 0) return f;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, error_pct / 100.0 * truth.mean_g_co2e_per_kwh());
  for (double& v : f.g_co2e_per_kwh) v = std::max(0.0, v + noise(rng));
  return f;
}

}  // namespace gt::sched
