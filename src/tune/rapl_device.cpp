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

namespace gt::tune {
namespace fs = std::filesystem;
namespace {

bool read_number(const std::string& path, double& out) {
  std::ifstream in(path);
  return static_cast<bool>(in >> out);
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
  double uw = 0;
  check(read_number(limit_path_, uw),
        fmt::format("{}: cannot read the RAPL power limit; expected a number in µW", limit_path_));
  zone_name_ = read_line(dir_ + "/name");
  double max_uw = 0, min_uw = 0;
  max_w_ = read_number(dir_ + "/constraint_0_max_power_uw", max_uw) && max_uw > 0 ? max_uw * 1e-6
                                                                                  : uw * 1e-6;
  min_w_ = read_number(dir_ + "/constraint_0_min_power_uw", min_uw) && min_uw > 0 ? min_uw * 1e-6
                                                                                  : max_w_ / 4;
}

std::string RaplDevice::name() const {
  return fmt::format("rapl:{} ({})", fs::path(dir_).filename().string(),
                     zone_name_.empty() ? std::string("?") : zone_name_);
}

double RaplDevice::limit_w() const {
  double uw = 0;
  check(read_number(limit_path_, uw),
        fmt::format("{}: cannot read the RAPL power limit; expected a number in µW", limit_path_));
  return uw * 1e-6;
}

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
  std::string root = root_arg;
  if (root.empty()) {
    const char* e = std::getenv("GT_POWERCAP_ROOT");
    root = e && *e ? e : "/sys/class/powercap";
  }
  std::vector<std::string> zones;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("intel-rapl:", 0) == 0 && n.find(':', 11) == std::string::npos &&
        fs::exists(e.path() / "constraint_0_power_limit_uw"))
      zones.push_back(e.path().string());
  }
  std::sort(zones.begin(), zones.end());
  std::vector<DevicePtr> out;
  for (auto& z : zones) out.push_back(std::make_shared<RaplDevice>(z));
  return out;
}

}  // namespace gt::tune
