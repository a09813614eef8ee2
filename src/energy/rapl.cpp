// energy/rapl.cpp: see rapl.h.
#include "energy/rapl.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

namespace gt::energy {
namespace fs = std::filesystem;

std::string powercap_root(const std::string& override_root) {
  if (!override_root.empty()) return override_root;
  if (const char* e = std::getenv("GT_POWERCAP_ROOT"); e && *e) return e;
  return "/sys/class/powercap";
}

namespace {

// Reads a whole small file; on failure returns false and sets *err to "<path>: <strerror>".
bool read_text(const std::string& path, std::string* out, std::string* err) {
  errno = 0;
  std::ifstream f(path);
  if (!f) {
    int e = errno;
    *err = fmt::format("{}: {}", path, e ? std::strerror(e) : "cannot open");
    if (e == EACCES)
      *err +=
          " (energy_uj is readable by root only since Linux 5.10; run as root or grant read "
          "access with a udev rule)";
    return false;
  }
  std::getline(f, *out);
  if (f.bad()) {
    *err = fmt::format("{}: read error", path);
    return false;
  }
  return true;
}

bool read_uint(const std::string& path, unsigned long long* v, std::string* err) {
  std::string s;
  if (!read_text(path, &s, err)) return false;
  char* end = nullptr;
  errno = 0;
  *v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || end == s.c_str() || errno) {
    *err = fmt::format("{}: '{}' is not an unsigned integer; expected a count of uJ", path, s);
    return false;
  }
  return true;
}

}  // namespace

RaplSensor::RaplSensor(SensorInfo info, std::string energy_path)
    : info_(std::move(info)), energy_path_(std::move(energy_path)) {}

Reading RaplSensor::read(double) {
  Reading r;
  unsigned long long uj = 0;
  if (!read_uint(energy_path_, &uj, &r.error)) return r;
  r.ok = true;
  r.energy_j = static_cast<double>(uj) * 1e-6;  // uJ -> J
  return r;
}

SensorList detect_rapl(const std::string& root_arg) {
  SensorList out;
  const std::string root = powercap_root(root_arg);
  std::error_code ec;
  std::vector<std::string> zones;
  if (fs::is_directory(root, ec)) {
    for (auto& e : fs::directory_iterator(root, ec)) {
      std::string n = e.path().filename().string();
      // intel-rapl:N (top) and intel-rapl:N:M (sub-zone); "intel-rapl" alone is the control type.
      if (n.rfind("intel-rapl:", 0) == 0) zones.push_back(n);
    }
  }
  std::sort(zones.begin(), zones.end());
  if (zones.empty()) {
    SensorInfo info;
    info.name = "rapl";
    info.domain = "cpu";
    info.kind = SensorKind::kEnergyCounter;
    info.unit = "uJ";
    info.reason =
        fmt::format("no RAPL zones under {} (no powercap driver, a VM or not Linux)", root);
    out.push_back(std::make_unique<UnavailableSensor>(info));
    return out;
  }
  struct Z {
    SensorInfo info;
    std::string energy_path;
    std::string zname;
  };
  std::vector<Z> zs;
  for (auto& z : zones) {
    const std::string dir = root + "/" + z;
    std::string zname, err;
    if (!read_text(dir + "/name", &zname, &err)) zname = "unknown";
    Z x;
    x.zname = zname;
    x.energy_path = dir + "/energy_uj";
    SensorInfo& i = x.info;
    i.name = "rapl:" + zname;
    // Several packages: name the zone by its index so names stay unique.
    if (zname == "dram" || zname == "core" || zname == "uncore")
      i.name = "rapl:" + zname + "-" + z.substr(std::strlen("intel-rapl:"));
    i.domain = zname == "dram" ? "ram" : (zname == "psys" ? "psys" : "cpu");
    i.device = dir;
    i.device_key = "rapl-" + z;
    i.kind = SensorKind::kEnergyCounter;
    i.unit = "uJ";
    i.refresh_period_s = 0.001;  // RAPL updates about every 976 us (Intel SDM vol. 3B, 15.10)
    i.method = "RAPL energy counter (uJ) differences, wrap-corrected";
    unsigned long long v = 0;
    if (!read_uint(x.energy_path, &v, &err)) {
      i.available = false;
      i.reason = err;
    } else {
      i.available = true;
      unsigned long long range = 0;
      std::string rerr;
      if (read_uint(dir + "/max_energy_range_uj", &range, &rerr) && range > 0) {
        i.wrap_j = static_cast<double>(range) * 1e-6;
      } else {
        i.reason = "wrap range unknown (" + rerr +
                   "): a counter that steps back is flagged untrusted, not corrected";
      }
    }
    zs.push_back(std::move(x));
  }
  bool have_pkg = false, have_psys = false;
  for (auto& z : zs) {
    if (!z.info.available) continue;
    if (z.zname.rfind("package", 0) == 0) have_pkg = true;
    if (z.zname == "psys") have_psys = true;
  }
  for (auto& z : zs) {
    SensorInfo& i = z.info;
    const bool pkg = z.zname.rfind("package", 0) == 0;
    if (z.zname == "core" || z.zname == "uncore") {
      i.counted = false;
      i.reason = "inside its package zone (counted there)";
    } else if (z.zname == "psys" && have_pkg) {
      i.counted = false;
      i.reason = "platform zone includes the packages and DRAM, which are counted";
    } else if ((pkg || z.zname == "dram") && !have_pkg && have_psys) {
      i.counted = false;
      i.reason = "inside psys (counted)";
    }
    if (i.available)
      out.push_back(std::make_unique<RaplSensor>(i, z.energy_path));
    else
      out.push_back(std::make_unique<UnavailableSensor>(i));
  }
  return out;
}

}  // namespace gt::energy
