// tune/rapl_device.cpp: CPU package power limits through powercap RAPL files.
#include "tune/rapl_device.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/parse.h"
#include "energy/rapl.h"

namespace gt::tune {
namespace fs = std::filesystem;
namespace {

// The number in a powercap file (µW). Absent file: false, *err empty; present but unreadable
// or not a number: false, *err says which file, what it held and what was expected.
bool read_number(const std::string& path, double& out, std::string* err = nullptr) {
  std::ifstream in(path);
  if (!in) {
    if (err) *err = std::filesystem::exists(path) ? path + ": cannot read" : "";
    return false;
  }
  std::string s;
  std::getline(in, s);
  std::string e;
  auto v = try_parse_number<unsigned long long>(s, path, "a whole number of µW", &e);
  if (!v) {
    if (err) *err = e;
    return false;
  }
  out = static_cast<double>(*v);
  return true;
}

// Reads the limit file or throws gt::Error saying why.
double read_limit_uw(const std::string& path) {
  double uw = 0;
  std::string err;
  if (!read_number(path, uw, &err))
    throw Error(err.empty() ? fmt::format("{}: cannot read the RAPL power limit; expected a "
                                          "number in µW",
                                          path)
                            : err);
  return uw;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

}  // namespace

RaplDevice::RaplDevice(std::string zone_dir) : dir_(std::move(zone_dir)) {
  limit_path_ = dir_ + "/constraint_0_power_limit_uw";
  const double uw = read_limit_uw(limit_path_);
  zone_name_ = read_line(dir_ + "/name");
  // Optional files: absent is allowed, present and not a number is an error.
  auto optional_uw = [](const std::string& path) {
    double v = 0;
    std::string err;
    if (read_number(path, v, &err)) return v;
    if (!err.empty()) throw Error(err);
    return 0.0;
  };
  const double max_uw = optional_uw(dir_ + "/constraint_0_max_power_uw");
  const double min_uw = optional_uw(dir_ + "/constraint_0_min_power_uw");
  max_w_ = max_uw > 0 ? max_uw * 1e-6 : uw * 1e-6;
  min_w_ = min_uw > 0 ? min_uw * 1e-6 : max_w_ / 4;
}

std::string RaplDevice::name() const {
  return fmt::format("rapl:{} ({})", fs::path(dir_).filename().string(),
                     zone_name_.empty() ? std::string("?") : zone_name_);
}

double RaplDevice::limit_w() const { return read_limit_uw(limit_path_) * 1e-6; }

void RaplDevice::set_limit_w(double limit_w) {
  std::ofstream out(limit_path_);
  const long long uw = std::llround(limit_w * 1e6);
  out << uw << "\n";
  out.flush();
  if (!out.good())
    throw Error(
        fmt::format("{}: cannot write the power limit {} W ({}); writing RAPL limits "
                    "needs root",
                    limit_path_, limit_w, std::strerror(errno)));
}

std::string RaplDevice::permission_problem() const {
  if (::access(limit_path_.c_str(), W_OK) == 0) return "";
  return fmt::format("{} is not writable ({}): run as root, or grant write access to that file",
                     limit_path_, std::strerror(errno));
}

bool RaplDevice::restore_limit_w_from_signal(double limit_w) noexcept {
  char buf[32];
  // Format by hand: snprintf is not async-signal-safe.
  long long v = static_cast<long long>(limit_w * 1e6 + 0.5);
  int n = 0;
  char tmp[24];
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0 && n < 23);
  for (int i = 0; i < n; ++i) buf[i] = tmp[n - 1 - i];
  buf[n++] = '\n';
  int fd = ::open(limit_path_.c_str(), O_WRONLY | O_TRUNC);
  if (fd < 0) return false;
  bool ok = ::write(fd, buf, static_cast<std::size_t>(n)) == n;
  return ::close(fd) == 0 && ok;
}

std::vector<DevicePtr> open_rapl_devices(const std::string& root_arg) {
  const std::string root = energy::powercap_root(root_arg);  // root_arg, $GT_POWERCAP_ROOT, /sys
  // Only CPU package zones cap anything we run: top-level zones (intel-rapl:N, not a sub-zone
  // intel-rapl:N:M) named package-N. psys (the whole platform) and zones of other names are
  // never set.
  std::vector<std::string> zones;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("intel-rapl:", 0) == 0 && n.find(':', 11) == std::string::npos &&
        read_line((e.path() / "name").string()).rfind("package", 0) == 0 &&
        fs::exists(e.path() / "constraint_0_power_limit_uw"))
      zones.push_back(e.path().string());
  }
  std::sort(zones.begin(), zones.end());
  std::vector<DevicePtr> out;
  for (auto& z : zones) out.push_back(std::make_shared<RaplDevice>(z));
  return out;
}

}  // namespace gt::tune
