// energy/measurement_output.cpp: see measurement_output.h (and Measurement's sums per domain
// kind, declared in meter.h).
#include "energy/measurement_output.h"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/atomic_file.h"
#include "core/bytes_json.h"
#include "core/error.h"

namespace gt::energy {

double Measurement::energy_j_of(const std::string& domain) const {
  double e = 0;
  for (auto& d : domains)
    if (d.domain == domain) e += d.energy_j;
  return e;
}

double Measurement::power_w_of(const std::string& domain) const {
  return duration_s > 0 ? energy_j_of(domain) / duration_s : 0;
}

double Measurement::g_co2e_of(const std::string& domain) const {
  double g = 0;
  for (auto& d : domains)
    if (d.domain == domain) g += d.g_co2e;
  return g;
}

nlohmann::json to_json(const Measurement& m) {
  using nlohmann::json;
  json j;
  j["name"] = shown_bytes(m.name);
  j["start_unix_s"] = m.start_unix_s;
  j["duration_s"] = m.duration_s;
  const bool known = m.known_energy_j().has_value();
  j["energy_j"] = known ? json(m.energy_j) : json(nullptr);
  if (!known) j["energy_unknown_reason"] = m.energy_unknown_reason;
  j["avg_power_w"] = m.avg_power_w ? json(*m.avg_power_w) : json(nullptr);
  // the peak is of intervals at least as long as the sensors' refresh period: undefined (null)
  // whenever the average is
  j["peak_power_w"] =
      known && m.avg_power_w && m.peak_power_w ? json(*m.peak_power_w) : json(nullptr);
  j["g_co2e"] = known ? json(m.g_co2e) : json(nullptr);
  j["carbon_source"] = shown_bytes(m.carbon_source);  // may name a CSV: any bytes
  j["carbon_origin"] = m.carbon_origin;
  j["carbon_g_per_kwh"] = m.carbon_g_per_kwh ? json(*m.carbon_g_per_kwh) : json(nullptr);
  j["estimated"] = m.estimated;
  j["method"] = m.method;
  j["flags"] = m.flags;
  j["domains"] = json::array();
  for (auto& d : m.domains) {
    j["domains"].push_back(
        {{"sensor", d.sensor},
         {"domain", d.domain},
         {"index", d.index},
         {"method", to_string(d.method)},
         {"estimated", d.estimated},
         {"energy_j", d.energy_j},
         {"g_co2e", d.g_co2e},
         {"avg_power_w", d.avg_power_w ? json(*d.avg_power_w) : json(nullptr)},
         {"peak_power_w", d.avg_power_w && d.peak_power_w ? json(*d.peak_power_w) : json(nullptr)},
         {"wraps", d.wraps},
         {"untrusted_s", d.untrusted_s},
         {"incomplete", d.incomplete},
         {"flags", d.flags}});
  }
  return j;
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  write_file_atomic(path, dump_json(j, 2) + "\n");
}

std::string summary_line(const Measurement& m, std::optional<double> tokens) {
  if (!m.known_energy_j()) return "energy unknown";
  std::string s = m.avg_power_w ? fmt::format("{:.1f} W", *m.avg_power_w) : "power undefined";
  if (tokens && *tokens > 0) s += fmt::format(", {:.3g} J/token", m.energy_j / *tokens);
  if (m.estimated) s += " (estimated)";
  return s;
}

std::string carbon_short(const Measurement& m) {
  const std::string g =
      m.carbon_g_per_kwh ? fmt::format("{:.4g} gCO2e/kWh", *m.carbon_g_per_kwh) : "no energy";
  return fmt::format("{} ({}, {})",
                     m.known_g_co2e() ? fmt::format("{:.3g} gCO2e", m.g_co2e) : "unknown gCO2e", g,
                     m.carbon_origin.empty() ? "unknown origin" : m.carbon_origin);
}

}  // namespace gt::energy
