// energy/rapl.cpp: see rapl.h.
#include "energy/rapl.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "core/parse.h"

namespace gt::energy {
namespace fs = std::filesystem;

std::string powercap_root(const std::string& override_root) {
  if (!override_root.empty()) return override_root;
  if (const char* e = std::getenv("GT_POWERCAP_ROOT"); e && *e) return e;
  return "/sys/class/powercap";
}

namespace {

// Reads the first line of a small file; on failure returns false and sets *err to
// "<path>: <strerror>" with a hint when the file is readable by root only.
bool read_text(const std::string& path, std::string* out, std::string* err) {
  errno = 0;
  std::ifstream f(path);
  if (!f) {
    int e = errno;
    *err = fmt::format("{}: {}", path, e ? std::strerror(e) : "cannot open");
    if (e == EACCES)
      *err += fs::path(path).filename() == "energy_uj"
                  ? " (energy_uj is readable by root only since Linux 5.10; run as root or grant "
                    "read access with a udev rule)"
                  : " (run as root or grant read access to that file)";
    return false;
  }
  std::getline(f, *out);
  if (f.bad()) {
    *err = fmt::format("{}: read error", path);
    return false;
  }
  return true;
}

bool read_uint(const std::string& path, const char* expected, unsigned long long* v,
               std::string* err) {
  std::string s;
  if (!read_text(path, &s, err)) return false;
  auto x = try_parse_number<unsigned long long>(s, path, expected, err);
  if (!x) return false;
  *v = *x;
  return true;
}

struct Z {
  SensorInfo info;
  std::string energy_path;
  std::string zone;    // intel-rapl:N or intel-rapl:N:M
  std::string zname;   // contents of <zone>/name
  std::string parent;  // intel-rapl:N for a sub-zone, empty for a top-level zone
};

// The package index of a top-level zone named "package-N" or "package-N-die-M"; -1 otherwise.
int package_index(const std::string& zname) {
  int n = -1, used = 0;
  if (std::sscanf(zname.c_str(), "package-%d%n", &n, &used) != 1 || n < 0) return -1;
  const std::string rest = zname.substr(static_cast<size_t>(used));
  int die = 0, used2 = 0;
  if (rest.empty()) return n;
  if (std::sscanf(rest.c_str(), "-die-%d%n", &die, &used2) == 1 &&
      static_cast<size_t>(used2) == rest.size())
    return n;
  return -1;
}

// Top-level zones that name the same package and read the same counter are one domain: on
// multi-die CPUs (AMD Threadripper, EPYC) the powercap driver shows one package zone per die,
// each mirroring the socket's counter, and summing them counts the package once per die
// (codecarbon #1274, #1379). A zone whose counter reads what another zone of its package reads
// (bracketed by two reads of the other, within 1 J) is kept out of the count; zones with their
// own counter (readings that differ) are counted each, and counters that read 0 cannot be told
// apart: counted, with a note.
void mark_mirrored_packages(std::vector<Z>& zs) {
  auto read_uj = [](const std::string& path) -> std::optional<double> {
    std::string err;
    unsigned long long v = 0;
    if (!read_uint(path, "a count of uJ", &v, &err)) return std::nullopt;
    return static_cast<double>(v);
  };
  constexpr double kTolUj = 1e6;  // 1 J: reads ~1 ms apart at up to ~1 kW
  for (size_t k = 0; k < zs.size(); ++k) {
    Z& keep = zs[k];
    if (!keep.parent.empty() || !keep.info.available || !keep.info.counted) continue;
    const int pkg = package_index(keep.zname);
    if (pkg < 0) continue;
    for (size_t j = k + 1; j < zs.size(); ++j) {
      Z& z = zs[j];
      if (!z.parent.empty() || !z.info.available || !z.info.counted) continue;
      if (package_index(z.zname) != pkg) continue;
      const auto a1 = read_uj(keep.energy_path), b = read_uj(z.energy_path),
                 a2 = read_uj(keep.energy_path);
      if (!a1 || !b || !a2) continue;
      if (*a1 == 0 && *b == 0) {
        z.info.reason = fmt::format(
            "reads 0 uJ as {} does: whether they are one mirrored counter cannot be told yet; "
            "counted on its own",
            keep.info.name);
        continue;
      }
      if (*b >= std::min(*a1, *a2) - kTolUj && *b <= std::max(*a1, *a2) + kTolUj) {
        z.info.counted = false;
        z.info.reason = fmt::format(
            "mirrors {}: the same package's counter ({:.0f} uJ against {:.0f} uJ; per-die zones "
            "of one socket, as on multi-die AMD CPUs): counted once, there",
            keep.info.name, *b, *a1);
      }
    }
  }
}

}  // namespace

RaplSensor::RaplSensor(SensorInfo info, std::string energy_path)
    : info_(std::move(info)), energy_path_(std::move(energy_path)) {}

Reading RaplSensor::read(double) {
  Reading r;
  unsigned long long uj = 0;
  if (!read_uint(energy_path_, "a count of uJ", &uj, &r.error)) return r;
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
  std::vector<Z> zs;
  for (auto& z : zones) {
    const std::string dir = root + "/" + z;
    std::string zname, err;
    if (!read_text(dir + "/name", &zname, &err)) zname = "";
    Z x;
    x.zone = z;
    x.zname = zname;
    x.energy_path = dir + "/energy_uj";
    // The hierarchy is in the directory name: intel-rapl:N:M lies inside intel-rapl:N.
    const std::string idx = z.substr(std::strlen("intel-rapl:"));
    if (auto c = idx.rfind(':'); c != std::string::npos)
      x.parent = "intel-rapl:" + idx.substr(0, c);
    SensorInfo& i = x.info;
    const std::string shown = zname.empty() ? "unnamed" : zname;
    // Sub-zones carry their index (several packages have a dram, core, ... each).
    i.name = x.parent.empty() ? "rapl:" + shown : "rapl:" + shown + "-" + idx;
    i.domain = zname == "dram" ? "ram" : (zname == "psys" ? "psys" : "cpu");
    // The package number: intel-rapl:N and its sub-zones intel-rapl:N:M belong to package N.
    int pkg = 0;
    const std::string top = idx.substr(0, idx.find(':'));
    std::from_chars(top.data(), top.data() + top.size(), pkg);
    i.index = zname == "psys" ? 0 : pkg;
    i.device = dir;
    i.device_key = "rapl-" + z;
    i.kind = SensorKind::kEnergyCounter;
    i.unit = "uJ";
    i.refresh_period_s = 0.001;  // RAPL updates about every 976 us (Intel SDM vol. 3B, 15.10)
    i.method = "RAPL energy counter (uJ) differences, wrap-corrected";
    unsigned long long v = 0;
    if (!read_uint(x.energy_path, "a count of uJ", &v, &err)) {
      i.available = false;
      i.reason = err;
    } else {
      i.available = true;
      unsigned long long range = 0;
      std::string rerr;
      if (read_uint(dir + "/max_energy_range_uj", "the counter's range in uJ", &range, &rerr) &&
          range > 0) {
        i.wrap_j = static_cast<double>(range) * 1e-6;
      } else {
        if (rerr.empty()) rerr = dir + "/max_energy_range_uj: 0";
        i.reason = "wrap range unknown (" + rerr +
                   "): a counter that steps back is flagged untrusted, not corrected";
      }
    }
    zs.push_back(std::move(x));
  }
  // Names stay unique: a repeated name gets its zone index.
  std::map<std::string, int> uses;
  for (auto& z : zs) ++uses[z.info.name];
  for (auto& z : zs)
    if (uses[z.info.name] > 1) z.info.name += "@" + z.zone;

  // Counting follows the hierarchy. Top-level zones do not overlap, except psys (the platform),
  // which contains them all. A sub-zone lies inside its parent, except dram, which the package
  // zone does not include. So: packages, other top-level zones and dram sub-zones are counted,
  // psys is not, when a package is readable; otherwise psys alone, when it is readable.
  auto find_zone = [&](const std::string& zone) -> const Z* {
    for (auto& z : zs)
      if (z.zone == zone) return &z;
    return nullptr;
  };
  bool have_pkg = false, have_psys = false;
  for (auto& z : zs) {
    if (!z.info.available || !z.parent.empty()) continue;
    if (z.zname.rfind("package", 0) == 0) have_pkg = true;
    if (z.zname == "psys") have_psys = true;
  }
  const bool psys_counted = have_psys && !have_pkg;
  mark_mirrored_packages(zs);
  for (auto& z : zs) {
    SensorInfo& i = z.info;
    const Z* parent = z.parent.empty() ? nullptr : find_zone(z.parent);
    auto not_counted = [&](const std::string& why) {
      i.counted = false;
      // An unreadable zone keeps its error first; a readable one may have a wrap-range note.
      i.reason =
          i.available ? why + (i.reason.empty() ? "" : "; " + i.reason) : i.reason + "; " + why;
    };
    if (z.zname == "psys" && z.parent.empty()) {
      if (have_pkg) not_counted("platform zone includes the packages and DRAM, which are counted");
    } else if (psys_counted) {
      not_counted(z.parent.empty() ? fmt::format("top-level zone '{}' lies inside psys (counted)",
                                                 z.zname.empty() ? "unnamed" : z.zname)
                                   : "inside psys (counted)");
    } else if (!z.parent.empty() && z.zname != "dram") {
      const std::string pd =
          fmt::format("{} ({})", z.parent,
                      parent ? (parent->zname.empty() ? "unnamed" : parent->zname) : "absent");
      not_counted(parent && parent->info.available
                      ? fmt::format("inside its parent zone {} (counted there)", pd)
                      : fmt::format("inside its parent zone {}, which is not readable: a part "
                                    "of it, not counted on its own",
                                    pd));
    }
    if (i.available)
      out.push_back(std::make_unique<RaplSensor>(i, z.energy_path));
    else
      out.push_back(std::make_unique<UnavailableSensor>(i));
  }
  return out;
}

}  // namespace gt::energy
