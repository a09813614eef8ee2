// sched/carbon.cpp: carbon-intensity CSV loading, resampling and forecast noise.
#include "sched/carbon.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <random>

#include "core/error.h"

namespace gt::sched {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct Civil {
  std::int64_t y;
  unsigned m, d;
};
Civil civil_from_days(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {y + (m <= 2), m, d};
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '"'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '"' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool parse_int(std::string_view s, int& out) {
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

std::vector<std::string_view> split(std::string_view line, char sep) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (true) {
    std::size_t q = line.find(sep, pos);
    out.push_back(
        trim(line.substr(pos, q == std::string_view::npos ? std::string_view::npos : q - pos)));
    if (q == std::string_view::npos) break;
    pos = q + 1;
  }
  return out;
}

}  // namespace

UnixTimeS civil_to_unix_s(int year, int month, int day, int hour, int minute, int second,
                          std::int64_t utc_offset_s) {
  return days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day)) * 86400 +
         hour * 3600 + minute * 60 + second - utc_offset_s;
}

UnixTimeS parse_wall_time(std::string_view text, std::int64_t utc_offset_s,
                          std::string_view where) {
  std::string_view s = trim(text);
  auto bad = [&]() {
    return Error(
        fmt::format("{}: time '{}' is not valid; expected 'YYYY-MM-DD HH:MM[:SS]'", where, text));
  };
  // YYYY-MM-DD[ T]HH:MM[:SS]
  if (s.size() != 16 && s.size() != 19) throw bad();
  if (s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':') throw bad();
  int y, mo, d, h, mi, se = 0;
  if (!parse_int(s.substr(0, 4), y) || !parse_int(s.substr(5, 2), mo) ||
      !parse_int(s.substr(8, 2), d) || !parse_int(s.substr(11, 2), h) ||
      !parse_int(s.substr(14, 2), mi))
    throw bad();
  if (s.size() == 19 && (s[16] != ':' || !parse_int(s.substr(17, 2), se))) throw bad();
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) throw bad();
  return civil_to_unix_s(y, mo, d, h, mi, se, utc_offset_s);
}

std::string format_wall_time(UnixTimeS t, std::int64_t utc_offset_s) {
  const std::int64_t local = t + utc_offset_s;
  std::int64_t days = local >= 0 ? local / 86400 : -((-local + 86399) / 86400);
  std::int64_t sod = local - days * 86400;
  Civil c = civil_from_days(days);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", c.y, c.m, c.d, sod / 3600,
                     (sod / 60) % 60, sod % 60);
}

std::string format_iso_time(UnixTimeS t, std::int64_t utc_offset_s) {
  const std::int64_t a = utc_offset_s < 0 ? -utc_offset_s : utc_offset_s;
  return fmt::format("{}{}{:02}:{:02}", format_wall_time(t, utc_offset_s),
                     utc_offset_s < 0 ? '-' : '+', a / 3600, (a / 60) % 60);
}

std::int64_t parse_utc_offset_s(std::string_view text) {
  std::string_view s = trim(text);
  auto bad = [&]() {
    return Error(fmt::format(
        "--utc-offset '{}' is not valid; expected hours east of UTC such as 0, 1, -5, 5.5 or "
        "+01:00",
        text));
  };
  if (s.empty()) throw bad();
  double hours = 0;
  if (auto c = s.find(':'); c != std::string_view::npos) {
    int sign = s[0] == '-' ? -1 : 1;
    std::string_view hs = s.substr(0, c);
    if (!hs.empty() && (hs[0] == '+' || hs[0] == '-')) hs.remove_prefix(1);
    int h, m;
    if (!parse_int(hs, h) || !parse_int(s.substr(c + 1), m) || m > 59) throw bad();
    hours = sign * (h + m / 60.0);
  } else {
    std::string str(s[0] == '+' ? s.substr(1) : s);
    std::size_t used = 0;
    try {
      hours = std::stod(str, &used);
    } catch (...) {
      throw bad();
    }
    if (used != str.size()) throw bad();
  }
  if (!(hours >= -14 && hours <= 14)) throw bad();
  return static_cast<std::int64_t>(std::llround(hours * 3600));
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

CarbonSeries load_carbon_csv(const std::string& path, std::int64_t utc_offset_s) {
  std::ifstream in(path);
  check(in.good(), fmt::format("{}: cannot open the carbon-intensity CSV; expected a readable file "
                               "with columns Time and Carbon Intensity",
                               path));
  std::string line;
  check(static_cast<bool>(std::getline(in, line)),
        fmt::format("{}: empty file; expected a header with columns Time and Carbon Intensity",
                    path));
  if (line.size() >= 3 && static_cast<unsigned char>(line[0]) == 0xEF) line.erase(0, 3);  // BOM
  auto header = split(line, ',');
  int time_col = -1, ci_col = -1;
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == "Time") time_col = static_cast<int>(i);
    if (header[i] == "Carbon Intensity") ci_col = static_cast<int>(i);
  }
  if (time_col < 0 || ci_col < 0)
    throw Error(
        fmt::format("{}: header '{}' has no column '{}'; expected columns Time and Carbon "
                    "Intensity (gCO2e/kWh)",
                    path, trim(line), time_col < 0 ? "Time" : "Carbon Intensity"));
  std::vector<UnixTimeS> ts;
  std::vector<double> vs;
  std::size_t lineno = 1;
  const std::size_t need = static_cast<std::size_t>(std::max(time_col, ci_col)) + 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (trim(line).empty()) continue;
    auto f = split(line, ',');
    const std::string where = fmt::format("{}:{}", path, lineno);
    check(f.size() >= need,
          fmt::format("{}: {} fields; expected at least {}", where, f.size(), need));
    UnixTimeS t = parse_wall_time(f[time_col], utc_offset_s, where);
    std::string vtext(f[ci_col]);
    double v;
    std::size_t used = 0;
    try {
      v = std::stod(vtext, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != vtext.size() || !std::isfinite(v) || v < 0)
      throw Error(
          fmt::format("{}: Carbon Intensity '{}' is not valid; expected a number >= 0 "
                      "(gCO2e/kWh)",
                      where, vtext));
    if (!ts.empty() && t <= ts.back())
      throw Error(
          fmt::format("{}: Time '{}' is not after the previous row; expected increasing "
                      "timestamps",
                      where, f[time_col]));
    ts.push_back(t);
    vs.push_back(v);
  }
  check(ts.size() >= 2, fmt::format("{}: {} data rows; expected at least 2", path, ts.size()));
  std::vector<std::int64_t> steps;
  for (std::size_t i = 1; i < ts.size(); ++i) steps.push_back(ts[i] - ts[i - 1]);
  std::vector<std::int64_t> sorted = steps;
  std::sort(sorted.begin(), sorted.end());
  const std::int64_t slot = sorted.front();
  const std::int64_t median = sorted[sorted.size() / 2];
  CarbonSeries s;
  s.start_s = ts.front();
  s.slot_s = slot;
  const UnixTimeS end = ts.back() + median;
  const std::int64_t n = (end - s.start_s) / slot;
  s.g_co2e_per_kwh.resize(static_cast<std::size_t>(n));
  // Step function: sample k holds on [ts[k], ts[k+1]) (last: [ts.back(), end)).
  std::size_t k = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const UnixTimeS a = s.start_s + i * slot, b = a + slot;
    double acc = 0;
    while (k + 1 < ts.size() && ts[k + 1] <= a) ++k;
    for (std::size_t j = k; j < ts.size() && ts[j] < b; ++j) {
      const UnixTimeS seg_end = j + 1 < ts.size() ? ts[j + 1] : end;
      const UnixTimeS lo = std::max(a, ts[j]), hi = std::min(b, seg_end);
      if (hi > lo) acc += vs[j] * static_cast<double>(hi - lo);
    }
    s.g_co2e_per_kwh[static_cast<std::size_t>(i)] = acc / static_cast<double>(slot);
  }
  return s;
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
