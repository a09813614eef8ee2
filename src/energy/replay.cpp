// energy/replay.cpp: see replay.h.
#include "energy/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/parse.h"

namespace gt::energy {

ReplaySensor::ReplaySensor(const std::string& path, const std::string& name,
                           const std::string& domain) {
  std::ifstream f(path);
  if (!f) throw Error(fmt::format("{}: cannot open; expected a CSV power or energy trace", path));
  std::string line;
  std::getline(f, line);
  std::vector<std::string> cols;
  {
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, ',')) {
      while (!c.empty() && (c.back() == '\r' || c.back() == ' ')) c.pop_back();
      cols.push_back(c);
    }
  }
  int ti = -1, vi = -1;
  for (int i = 0; i < static_cast<int>(cols.size()); ++i) {
    if (cols[i] == "time_s") ti = i;
    if (cols[i] == "power_w") vi = i;
    if (cols[i] == "energy_j") vi = i, energy_ = true;
  }
  if (ti < 0 || vi < 0)
    throw Error(fmt::format(
        "{}: header '{}' lacks columns; expected time_s and power_w or energy_j", path, line));
  int lineno = 1;
  while (std::getline(f, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    std::stringstream ss(line);
    std::string c;
    std::vector<std::string> fld;
    while (std::getline(ss, c, ',')) fld.push_back(c);
    const char* vname = energy_ ? "energy_j" : "power_w";
    if (static_cast<int>(fld.size()) <= std::max(ti, vi))
      throw Error(fmt::format("{}:{}: '{}' has {} field(s); expected time_s and {}", path, lineno,
                              line, fld.size(), vname));
    const double t = parse_number<double>(fld[ti], fmt::format("{}:{}: time_s", path, lineno),
                                          "a time in seconds");
    const double v = parse_number<double>(fld[vi], fmt::format("{}:{}: {}", path, lineno, vname),
                                          energy_ ? "a counter value in J" : "a power in W");
    if (!t_.empty() && t <= t_.back())
      throw Error(fmt::format("{}:{}: time_s {} does not increase; expected > {}", path, lineno, t,
                              t_.back()));
    t_.push_back(t);
    v_.push_back(v);
  }
  if (t_.size() < 2)
    throw Error(fmt::format("{}: {} data rows; expected at least 2", path, t_.size()));
  cum_j_.assign(t_.size(), 0);
  for (size_t i = 1; i < t_.size(); ++i)
    cum_j_[i] =
        energy_ ? v_[i] - v_[0] : cum_j_[i - 1] + 0.5 * (v_[i] + v_[i - 1]) * (t_[i] - t_[i - 1]);
  info_.name = name;
  info_.domain = domain;
  info_.device = path;
  info_.kind = energy_ ? SensorKind::kEnergyCounter : SensorKind::kPowerGauge;
  info_.unit = energy_ ? "J" : "W";
  info_.available = true;
  info_.method = fmt::format("replayed {} trace {}", energy_ ? "energy" : "power", path);
}

double ReplaySensor::value_at(double t) const {
  if (t <= t_.front()) return v_.front();
  if (t >= t_.back()) return v_.back();
  size_t i = std::upper_bound(t_.begin(), t_.end(), t) - t_.begin();
  double a = (t - t_[i - 1]) / (t_[i] - t_[i - 1]);
  return v_[i - 1] + a * (v_[i] - v_[i - 1]);
}

double ReplaySensor::cumulative_at(double t) const {
  if (t <= t_.front()) return 0;
  if (t >= t_.back()) return cum_j_.back();
  size_t i = std::upper_bound(t_.begin(), t_.end(), t) - t_.begin();
  if (energy_) return value_at(t) - v_[0];
  const double p = value_at(t);
  return cum_j_[i - 1] + 0.5 * (v_[i - 1] + p) * (t - t_[i - 1]);
}

double ReplaySensor::integral_j(double t0_s, double t1_s) const {
  return cumulative_at(t1_s) - cumulative_at(t0_s);
}

Reading ReplaySensor::read(double now_s) {
  if (!started_) {
    started_ = true;
    offset_s_ = t_.front() - now_s;
  }
  Reading r;
  r.ok = true;
  const double t = now_s + offset_s_;
  if (energy_)
    r.energy_j = value_at(t);
  else
    r.power_w = value_at(t);
  return r;
}

}  // namespace gt::energy
