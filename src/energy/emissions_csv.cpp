// energy/emissions_csv.cpp: see emissions_csv.h.
#include "energy/emissions_csv.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <mutex>
#include <random>

#include "core/error.h"
#include "energy/cpu_estimate.h"

namespace gt::energy {
namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string join_csv(const std::vector<std::string>& v) {
  std::string row;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) row += ',';
    row += csv_field(v[i]);
  }
  return row;
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

// Installed memory in CodeCarbon's GB (2^30 bytes, as the RAM estimate counts it); empty when
// /proc/meminfo cannot be read (unknown, not 0).
std::string ram_total_gb() {
  std::string err;
  const auto gb = mem_total_gb("/proc", &err);
  return gb ? num(*gb) : std::string();
}

/// The first record of CSV `text` (RFC 4180 quoting): its fields, and in `end` the offset just
/// past its line break (npos when `text` holds no complete record). `crlf`: it ended in "\r\n".
std::vector<std::string> first_record(const std::string& text, size_t& end, bool& crlf) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  end = std::string::npos;
  crlf = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c != '"')
        fields.back() += c;
      else if (i + 1 < text.size() && text[i + 1] == '"')
        fields.back() += '"', ++i;
      else
        quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c == '\n') {
      end = i + 1;
      if (!fields.back().empty() && fields.back().back() == '\r') {
        fields.back().pop_back();
        crlf = true;
      }
      return fields;
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

/// One line of `s` for an error message: at most 80 bytes, control bytes as '?'.
std::string quote_line(const std::string& s) {
  std::string out = s.substr(0, std::min<size_t>(s.find('\n'), 80));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  return out.size() < s.size() && s.find('\n') > 80 ? out + "..." : out;
}

constexpr size_t kMaxHeaderBytes = 64 * 1024;

/// The header of the open file `fd` (of `size` bytes), checked to be an emissions.csv header.
std::vector<std::string> read_header(int fd, off_t size, const std::string& path, bool& crlf) {
  std::string head(static_cast<size_t>(std::min<off_t>(size, kMaxHeaderBytes)), '\0');
  ssize_t got = 0;
  while (got < static_cast<ssize_t>(head.size())) {
    const ssize_t n = ::pread(fd, head.data() + got, head.size() - got, got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(fmt::format("{}: cannot read ({})", path, std::strerror(errno)));
    got += n;
  }
  size_t end = 0;
  auto cols = first_record(head, end, crlf);
  if (end == std::string::npos && static_cast<size_t>(size) > head.size())
    throw Error(fmt::format(
        "{}: no line break in its first {} KiB; expected an emissions.csv header line; the file "
        "is left as it was (choose another file)",
        path, kMaxHeaderBytes / 1024));
  const bool has = std::find(cols.begin(), cols.end(), "timestamp") != cols.end() &&
                   std::find(cols.begin(), cols.end(), "energy_consumed") != cols.end();
  if (!has)
    throw Error(fmt::format(
        "{}: its first line '{}' is not an emissions.csv header (expected CodeCarbon's columns, "
        "at least timestamp and energy_consumed); the file is left as it was (choose another "
        "file)",
        path, quote_line(head)));
  return cols;
}

void write_all(int fd, const std::string& text, off_t restore_size, const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      // no half row: cut what this call wrote (the lock keeps other writers out)
      if (::ftruncate(fd, restore_size) != 0) {
      }
      throw Error(fmt::format("{}: write failed ({}); the file is as it was before", path,
                              std::strerror(err ? err : EIO)));
    }
    done += static_cast<size_t>(n);
  }
}

// Whether the meter was asked for GPUs it could not read (its kGpusNotMeasured flag).
bool gpus_not_measured(const Measurement& m) {
  return std::any_of(m.flags.begin(), m.flags.end(), [](const std::string& f) {
    return f.find(kGpusNotMeasured) != std::string::npos;
  });
}

// energy_flags: why the energy is unknown (when it is), then the measurement's flags.
std::string flags_text(const Measurement& m, bool known) {
  std::string flags = known ? "" : "energy unknown: " + m.energy_unknown_reason;
  for (auto& f : m.flags) {
    if (!flags.empty()) flags += " | ";
    flags += f;
  }
  return flags;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void check_run_info(const RunInfo& run) {
  if (!(std::isfinite(run.pue) && run.pue >= 1 && run.pue <= 10))
    throw Error(fmt::format(
        "pue = {}: expected a power usage effectiveness in [1, 10] (1: no facility overhead)",
        run.pue));
  if (run.wue && !(std::isfinite(*run.wue) && *run.wue >= 0 && *run.wue <= 100))
    throw Error(
        fmt::format("wue = {}: expected a water usage effectiveness in [0, 100] L/kWh", *run.wue));
}

const std::vector<std::string>& codecarbon_columns() {
  static const std::vector<std::string> cols = {
      // CodeCarbon 3.x, in its order (EmissionsData's fields)
      "timestamp", "project_name", "run_id", "experiment_id", "duration", "emissions",
      "emissions_rate", "cpu_power", "gpu_power", "ram_power", "cpu_energy", "gpu_energy",
      "ram_energy", "energy_consumed", "water_consumed", "country_name", "country_iso_code",
      "region", "cloud_provider", "cloud_region", "os", "python_version", "codecarbon_version",
      "cpu_count", "cpu_model", "gpu_count", "gpu_model", "longitude", "latitude", "ram_total_size",
      "tracking_mode", "cpu_utilization_percent", "gpu_utilization_percent",
      "ram_utilization_percent", "ram_used_gb", "on_cloud", "pue", "wue",
      // greentrain's
      "energy_method", "energy_flags", "carbon_intensity", "carbon_source"};
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

std::vector<std::string> codecarbon_fields(const Measurement& m, const RunInfo& run) {
  check_run_info(run);
  const double kwh = 1.0 / 3.6e6;  // J -> kWh
  const double p = run.pue;        // CodeCarbon: each device's energy x pue; powers as measured
  const double cpu_j = m.energy_j_of("cpu") + m.energy_j_of("psys");
  const double gpu_j = m.energy_j_of("gpu"), ram_j = m.energy_j_of("ram");
  const double d = m.duration_s;
  const bool known = m.known_energy_j().has_value();
  // Unknown is an empty field, never 0 (CodeCarbon's readers take an empty field as missing).
  // A power is that of the window's domains of a kind: undefined (empty) when any of them has
  // no average power (a window shorter than its sensor's refresh period, flagged); 0 W when the
  // machine has no such domain (no GPU), as CodeCarbon writes it.
  auto w = [&m, d, known](std::initializer_list<const char*> kinds) {
    if (!known || !(d > 0)) return std::string();
    double watts = 0;
    for (const auto& x : m.domains)
      for (const char* k : kinds)
        if (x.domain == k) {
          if (!x.avg_power_w) return std::string();
          watts += *x.avg_power_w;
        }
    return num(watts);
  };
  auto e = [known, p, kwh](double j) { return known ? num(j * p * kwh) : std::string(); };
  const bool gpus_unread = gpus_not_measured(m);  // unknown, not the 0 of no GPU
  std::time_t t = static_cast<std::time_t>(m.start_unix_s + m.duration_s);
  char ts[32];
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  utsname u{};
  uname(&u);
  int gpus = 0;
  for (auto& x : m.domains) gpus += x.domain == "gpu";
  const std::string method =
      !known ? "none" : (m.estimated ? "estimated; " : "measured; ") + m.method;
  const std::string flags = flags_text(m, known);
  const double kg = m.g_co2e * p / 1000.0;
  const std::string water = known && run.wue ? num(m.energy_j * p * kwh * *run.wue) : std::string();
  std::vector<std::string> v = {ts,
                                run.project_name,
                                run.run_id.empty() ? make_run_id() : run.run_id,
                                run.experiment_id,
                                num(d),
                                known ? num(kg) : std::string(),
                                known && d > 0 ? num(kg / d) : std::string(),
                                w({"cpu", "psys"}),
                                gpus_unread ? std::string() : w({"gpu"}),
                                w({"ram"}),
                                e(cpu_j),
                                gpus_unread ? std::string() : e(gpu_j),
                                e(ram_j),
                                e(m.energy_j),
                                water,
                                run.country_name,
                                run.country_iso_code,
                                run.region,
                                "",
                                "",
                                fmt::format("{}-{}-{}", u.sysname, u.release, u.machine),
                                run.python_version,
                                "greentrain-0.1.0",
                                std::to_string(sysconf(_SC_NPROCESSORS_ONLN)),
                                first_cpuinfo("model name"),
                                gpus_unread ? std::string() : std::to_string(gpus),
                                "",
                                "",
                                "",
                                ram_total_gb(),
                                run.tracking_mode,
                                "",
                                "",
                                "",
                                "",  // utilization (cpu, gpu, ram) and ram_used_gb: not sampled
                                "N",
                                num(p),
                                run.wue ? num(*run.wue) : std::string(),
                                method,
                                flags,
                                m.carbon_g_per_kwh ? num(*m.carbon_g_per_kwh) : "",
                                m.carbon_source};
  if (v.size() != codecarbon_columns().size())
    throw Error("internal: emissions.csv row and header differ in length");
  return v;
}

std::string codecarbon_row(const Measurement& m, const RunInfo& run) {
  return join_csv(codecarbon_fields(m, run));
}

CsvAppend append_codecarbon_csv(const std::string& path, const Measurement& m, const RunInfo& run) {
  const auto ours = codecarbon_columns();
  const auto values = codecarbon_fields(m, run);
  // flock() locks belong to open file descriptions, so two threads of one process exclude each
  // other too; on NFS Linux maps flock to whole-file POSIX locks, which do not, hence the mutex.
  static std::mutex in_process;
  std::lock_guard<std::mutex> hold(in_process);
  Fd f;
  f.fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (f.fd < 0)
    throw Error(
        fmt::format("{}: cannot open for appending ({}); expected a writable file "
                    "in an existing folder",
                    path, std::strerror(errno)));
  while (::flock(f.fd, LOCK_EX) != 0)
    if (errno != EINTR)
      throw Error(fmt::format("{}: cannot lock ({})", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0)
    throw Error(fmt::format("{}: cannot stat ({})", path, std::strerror(errno)));
  CsvAppend res;
  std::string text;
  if (!S_ISREG(st.st_mode) || st.st_size == 0) {  // new (or a pipe, a terminal): our header
    res.created = true;
    text = join_csv(ours) + "\n" + join_csv(values) + "\n";
  } else {
    bool crlf = false;
    const auto cols = read_header(f.fd, st.st_size, path, crlf);
    std::vector<std::string> row(cols.size());
    for (size_t i = 0; i < cols.size(); ++i) {
      auto it = std::find(ours.begin(), ours.end(), cols[i]);
      const bool first = std::find(cols.begin(), cols.begin() + i, cols[i]) == cols.begin() + i;
      if (it != ours.end() && first)
        row[i] = values[it - ours.begin()];
      else
        res.left_empty.push_back(cols[i]);
    }
    for (auto& c : ours)
      if (std::find(cols.begin(), cols.end(), c) == cols.end()) res.left_out.push_back(c);
    char last = '\n';
    if (::pread(f.fd, &last, 1, st.st_size - 1) != 1) last = '\n';
    const char* eol = crlf ? "\r\n" : "\n";
    text = (last == '\n' ? "" : eol) + join_csv(row) + eol;
  }
  write_all(f.fd, text, st.st_size, path);
  return res;
}

void check_codecarbon_csv_writable(const std::string& path) {
  struct stat dir_st {};
  if (::stat(path.c_str(), &dir_st) == 0 && S_ISDIR(dir_st.st_mode))
    throw Error(fmt::format("{}: is a folder; expected a CSV file name (e.g. {}/emissions.csv)",
                            path, path));
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) {
    namespace fs = std::filesystem;
    const std::string parent = fs::path(path).parent_path().string();
    const std::string dir = parent.empty() ? std::string(".") : parent;
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      throw Error(fmt::format("{}: cannot be created ({}: {}); expected a writable folder", path,
                              dir, std::strerror(errno)));
    return;
  }
  if (::access(path.c_str(), W_OK) != 0)
    throw Error(fmt::format("{}: not writable ({})", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    bool crlf = false;
    read_header(f.fd, st.st_size, path, crlf);
  }
}

}  // namespace gt::energy
