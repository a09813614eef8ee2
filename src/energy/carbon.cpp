// energy/carbon.cpp: see carbon.h.
#include "energy/carbon.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "energy/error.h"

namespace gt::energy {

namespace {
// Days from 1970-01-01 of a civil date (Howard Hinnant's days_from_civil algorithm).
long days_from_civil(long y, unsigned m, unsigned d) {
  y -= m <= 2;
  const long era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<long>(doe) - 719468;
}
}  // namespace

std::optional<double> parse_local_time(const std::string& s, double utc_offset_h) {
  int y, mo, d, h, mi;
  double sec;
  char sep;
  if (std::sscanf(s.c_str(), "%d-%d-%d%c%d:%d:%lf", &y, &mo, &d, &sep, &h, &mi, &sec) != 7)
    return std::nullopt;
  if ((sep != ' ' && sep != 'T') || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 24 || mi > 59)
    return std::nullopt;
  return static_cast<double>(days_from_civil(y, mo, d)) * 86400.0 + h * 3600.0 + mi * 60.0 + sec -
         utc_offset_h * 3600.0;
}

CarbonIntensity::CarbonIntensity() = default;

CarbonIntensity CarbonIntensity::constant(double g, const std::string& region) {
  if (!(g >= 0)) throw EnergyError(fmt::format("carbon intensity {}: expected >= 0 gCO2e/kWh", g));
  CarbonIntensity c;
  c.constant_ = g;
  c.region_ = region.empty() ? "unspecified region" : region;
  return c;
}

CarbonIntensity CarbonIntensity::from_csv(const std::string& path, double utc_offset_h,
                                          const std::string& region) {
  std::ifstream f(path);
  if (!f)
    throw EnergyError(
        fmt::format("{}: cannot open; expected a CSV with columns Time and "
                    "Carbon Intensity (gCO2e/kWh)",
                    path));
  CarbonIntensity c;
  std::string line;
  std::getline(f, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  auto comma = line.find(',');
  if (comma == std::string::npos || line.substr(0, comma) != "Time" ||
      line.substr(comma + 1) != "Carbon Intensity")
    throw EnergyError(fmt::format("{}: header '{}'; expected 'Time,Carbon Intensity'", path, line));
  int lineno = 1;
  while (std::getline(f, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    comma = line.find(',');
    auto t = comma == std::string::npos ? std::nullopt
                                        : parse_local_time(line.substr(0, comma), utc_offset_h);
    char* end = nullptr;
    double g = comma == std::string::npos ? -1 : std::strtod(line.c_str() + comma + 1, &end);
    if (!t || !end || *end || !(g >= 0))
      throw EnergyError(fmt::format("{}:{}: '{}'; expected 'YYYY-MM-DD HH:MM:SS,<gCO2e/kWh >= 0>'",
                                    path, lineno, line));
    if (!c.t_.empty() && *t <= c.t_.back())
      throw EnergyError(fmt::format("{}:{}: time '{}' is not after the previous row", path, lineno,
                                    line.substr(0, comma)));
    c.t_.push_back(*t);
    c.g_.push_back(g);
  }
  if (c.t_.empty()) throw EnergyError(fmt::format("{}: no data rows", path));
  auto slash = path.find_last_of('/');
  c.source_ = fmt::format("series {} (UTC{:+g}), {} rows",
                          slash == std::string::npos ? path : path.substr(slash + 1), utc_offset_h,
                          c.t_.size());
  c.region_ = region.empty() ? c.source_ : region;
  return c;
}

double CarbonIntensity::at(double unix_s) const {
  if (t_.empty()) return constant_;
  // A series' last value holds for one more step (its row covers one step).
  const double step = t_.size() > 1 ? t_.back() - t_[t_.size() - 2] : 0;
  if (unix_s < t_.front() || unix_s > t_.back() + step) out_of_range_ = true;
  auto it = std::upper_bound(t_.begin(), t_.end(), unix_s);
  if (it == t_.begin()) return g_.front();
  return g_[static_cast<size_t>(it - t_.begin()) - 1];
}

double CarbonIntensity::integrate_g(double t0, double t1, double power_w) const {
  if (t1 <= t0) return 0;
  if (t_.empty()) return g_co2e(power_w * (t1 - t0), constant_);
  double g = 0, t = t0;
  while (t < t1) {
    auto it = std::upper_bound(t_.begin(), t_.end(), t);
    double next = it == t_.end() ? t1 : std::min(t1, *it);
    g += g_co2e(power_w * (next - t), at(t));
    t = next;
  }
  return g;
}

std::string CarbonIntensity::describe() const {
  if (t_.empty()) return fmt::format("constant {:g} gCO2e/kWh ({})", constant_, region_);
  return region_ == source_ ? source_ : fmt::format("{}: {}", region_, source_);
}

}  // namespace gt::energy
