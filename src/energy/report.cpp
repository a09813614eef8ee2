// energy/report.cpp: see report.h.
#include "energy/report.h"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "energy/error.h"

namespace gt::energy {
namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string num(double v) { return fmt::format("{:.10g}", v); }

std::string first_cpuinfo(const char* key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) {
      auto c = line.find(':');
      return c == std::string::npos ? "" : line.substr(c + 2);
    }
  return "";
}

double ram_total_gb() {
  std::ifstream f("/proc/meminfo");
  std::string k;
  double kb = 0;
  f >> k >> kb;
  return k == "MemTotal:" ? kb * 1024 / 1e9 : 0;
}

void write_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f)
      throw EnergyError(fmt::format("{}: cannot write (directory missing or read-only?)", tmp));
    f << text;
    f.flush();
    if (!f) throw EnergyError(fmt::format("{}: write failed (disk full?)", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw EnergyError(fmt::format("{}: cannot rename {} into place", path, tmp));
  }
}

}  // namespace

const std::vector<std::string>& codecarbon_columns() {
  static const std::vector<std::string> cols = {
      "timestamp",      "project_name",       "run_id",           "experiment_id",
      "duration",       "emissions",          "emissions_rate",   "cpu_power",
      "gpu_power",      "ram_power",          "cpu_energy",       "gpu_energy",
      "ram_energy",     "energy_consumed",    "country_name",     "country_iso_code",
      "region",         "cloud_provider",     "cloud_region",     "os",
      "python_version", "codecarbon_version", "cpu_count",        "cpu_model",
      "gpu_count",      "gpu_model",          "longitude",        "latitude",
      "ram_total_size", "tracking_mode",      "on_cloud",         "pue",
      "energy_method",  "energy_flags",       "carbon_intensity", "carbon_source"};
  return cols;
}

std::string make_run_id() {
  std::random_device rd;
  std::mt19937_64 g(rd());
  uint64_t a = g(), b = g();
  a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 10
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xffff,
                     b >> 48, b & 0xffffffffffffULL);
}

std::string codecarbon_row(const Measurement& m, const RunInfo& run) {
  const double kwh = 1.0 / 3.6e6;  // J -> kWh
  const double cpu_j = m.energy_j_of("cpu") + m.energy_j_of("psys");
  const double gpu_j = m.energy_j_of("gpu"), ram_j = m.energy_j_of("ram");
  const double d = m.duration_s;
  const bool known = m.known_energy_j().has_value();
  // Unknown is an empty field, never 0 (CodeCarbon's readers take an empty field as missing).
  auto w = [d, known](double j) { return known && d > 0 ? num(j / d) : std::string(); };
  auto e = [known](double j) { return known ? num(j) : std::string(); };
  std::time_t t = static_cast<std::time_t>(m.start_unix_s + m.duration_s);
  char ts[32];
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  utsname u{};
  uname(&u);
  int gpus = 0;
  for (auto& x : m.domains) gpus += x.domain == "gpu";
  std::string method = m.estimated ? "estimated; " + m.method : "measured; " + m.method;
  std::string flags = known ? "" : "energy unknown: " + m.energy_unknown_reason;
  for (auto& f : m.flags) {
    if (!flags.empty()) flags += " | ";
    flags += f;
  }
  const double kg = m.g_co2e / 1000.0;
  std::vector<std::string> v = {ts,
                                run.project_name,
                                run.run_id.empty() ? make_run_id() : run.run_id,
                                run.experiment_id,
                                num(d),
                                e(kg),
                                known && d > 0 ? num(kg / d) : std::string(),
                                w(cpu_j),
                                w(gpu_j),
                                w(ram_j),
                                e(cpu_j * kwh),
                                e(gpu_j * kwh),
                                e(ram_j * kwh),
                                e(m.energy_j * kwh),
                                run.country_name,
                                run.country_iso_code,
                                run.region,
                                "",
                                "",
                                fmt::format("{}-{}-{}", u.sysname, u.release, u.machine),
                                "",
                                "greentrain-0.1.0",
                                std::to_string(sysconf(_SC_NPROCESSORS_ONLN)),
                                first_cpuinfo("model name"),
                                std::to_string(gpus),
                                "",
                                "",
                                "",
                                num(ram_total_gb()),
                                run.tracking_mode,
                                "N",
                                num(run.pue),
                                method,
                                flags,
                                m.carbon_g_per_kwh ? num(*m.carbon_g_per_kwh) : "",
                                m.carbon_source};
  std::string row;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) row += ',';
    row += csv_field(v[i]);
  }
  return row;
}

void append_codecarbon_csv(const std::string& path, const Measurement& m, const RunInfo& run) {
  std::string header;
  for (size_t i = 0; i < codecarbon_columns().size(); ++i)
    header += (i ? "," : "") + codecarbon_columns()[i];
  std::string old;
  if (std::ifstream f(path); f) {
    std::stringstream ss;
    ss << f.rdbuf();
    old = ss.str();
    const std::string first = old.substr(0, old.find('\n'));
    if (!old.empty() && first != header) {
      std::error_code ec;
      std::filesystem::rename(path, path + ".bak", ec);
      old.clear();
    }
    if (!old.empty() && old.back() != '\n') old += '\n';
  }
  if (old.empty()) old = header + "\n";
  write_atomic(path, old + codecarbon_row(m, run) + "\n");
}

nlohmann::json to_json(const Measurement& m) {
  using nlohmann::json;
  json j;
  j["name"] = m.name;
  j["start_unix_s"] = m.start_unix_s;
  j["duration_s"] = m.duration_s;
  const bool known = m.known_energy_j().has_value();
  j["energy_j"] = known ? json(m.energy_j) : json(nullptr);
  if (!known) j["energy_unknown_reason"] = m.energy_unknown_reason;
  j["avg_power_w"] = m.avg_power_w ? json(*m.avg_power_w) : json(nullptr);
  j["peak_power_w"] = known ? json(m.peak_power_w) : json(nullptr);
  j["g_co2e"] = known ? json(m.g_co2e) : json(nullptr);
  j["carbon_source"] = m.carbon_source;
  j["carbon_origin"] = m.carbon_origin;
  j["carbon_g_per_kwh"] = m.carbon_g_per_kwh ? json(*m.carbon_g_per_kwh) : json(nullptr);
  j["estimated"] = m.estimated;
  j["method"] = m.method;
  j["flags"] = m.flags;
  j["domains"] = json::array();
  for (auto& d : m.domains) {
    j["domains"].push_back({{"sensor", d.sensor},
                            {"domain", d.domain},
                            {"index", d.index},
                            {"method", to_string(d.method)},
                            {"estimated", d.estimated},
                            {"energy_j", d.energy_j},
                            {"g_co2e", d.g_co2e},
                            {"avg_power_w", d.avg_power_w ? json(*d.avg_power_w) : json(nullptr)},
                            {"peak_power_w", d.peak_power_w},
                            {"wraps", d.wraps},
                            {"untrusted_s", d.untrusted_s},
                            {"incomplete", d.incomplete},
                            {"flags", d.flags}});
  }
  return j;
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  write_atomic(path, j.dump(2) + "\n");
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
