// energy/cpu_estimate.cpp: see cpu_estimate.h.
#include "energy/cpu_estimate.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/parse.h"

namespace gt::energy {
namespace {

double mono_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CodeCarbon's GB is 2^30 bytes (codecarbon/external/hardware.py, B_TO_GB = 1024^3): its
// "3 W per 8 GB" per GiB here, 7.4 % more than per 10^9 bytes.
constexpr double kKiBPerGiB = 1024.0 * 1024.0, kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

// Busy and total jiffies of the machine from the first line of /proc/stat.
bool machine_jiffies(const std::string& proc_root, double* busy, double* total) {
  std::ifstream f(proc_root + "/stat");
  std::string cpu;
  f >> cpu;
  if (cpu != "cpu") return false;
  std::vector<double> v;
  double x;
  for (int i = 0; i < 8 && f >> x; ++i)
    v.push_back(x);  // user nice system idle iowait irq softirq steal
  if (v.size() < 4) return false;
  double t = 0;
  for (double y : v) t += y;
  *total = t;
  *busy = t - v[3] - (v.size() > 4 ? v[4] : 0);
  return true;
}

// Online CPUs as /proc/stat counts them (the "cpuN" lines), which its totals are over.
long stat_cpus(const std::string& proc_root) {
  std::ifstream f(proc_root + "/stat");
  long n = 0;
  for (std::string line; std::getline(f, line);)
    if (line.size() > 3 && line.rfind("cpu", 0) == 0 &&
        std::isdigit(static_cast<unsigned char>(line[3])))
      ++n;
  return n > 0 ? n : std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

// Scheduler ticks per CPU below which a window's utilization is not resolved.
constexpr double kEstimateResolutionTicks = 5;

struct ProcStat {
  int ppid = 0;
  double jiffies = 0;         // utime + stime + cutime + cstime
  double reaped_jiffies = 0;  // cutime + cstime: its children's that it has reaped
  double rss_bytes = 0;
};

bool read_proc_stat(const std::string& path, ProcStat* ps) {
  // POSIX read and strtod: this runs for every process at every tick of a process-tree estimate.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  char* p = std::strrchr(buf, ')');  // the command name may contain spaces and parentheses
  if (!p) return false;
  p += 2;
  // Fields after ")" start at field 3 (state): ppid=4, utime=14, stime=15, cutime=16,
  // cstime=17, rss=24 (pages); proc(5).
  double f[22];
  for (int i = 0; i < 22; ++i) {
    while (*p == ' ') ++p;
    if (!*p) return false;
    char* end = p;
    f[i] = i == 0 ? 0 : std::strtod(p, &end);
    if (i == 0) end = std::strchr(p, ' ');
    if (!end || end == p) return false;
    p = end;
  }
  ps->ppid = static_cast<int>(f[1]);
  ps->jiffies = f[11] + f[12] + f[13] + f[14];
  ps->reaped_jiffies = f[13] + f[14];
  static const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  ps->rss_bytes = f[21] * page;
  return true;
}

// CPU jiffies and RSS of the process tree rooted at pid, with the processes adopted by
// `adopter` (a child subreaper, 0: none): its other children's trees and its reaped children's
// time, not its own.
bool tree_usage_scan(const std::string& proc_root, int pid, int adopter, double* jiffies,
                     double* rss_bytes) {
  std::map<int, ProcStat> all;
  if (DIR* d = opendir(proc_root.c_str())) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      long p = std::strtol(e->d_name, &end, 10);
      if (*end || p <= 0) continue;
      ProcStat ps;
      if (read_proc_stat(proc_root + "/" + e->d_name + "/stat", &ps)) all[static_cast<int>(p)] = ps;
    }
    closedir(d);
  }
  if (!all.count(pid)) return false;
  std::map<int, std::vector<int>> kids;
  for (auto& [p, ps] : all) kids[ps.ppid].push_back(p);
  *jiffies = 0;
  *rss_bytes = 0;
  std::vector<int> stack{pid};
  if (adopter && all.count(adopter)) {
    *jiffies += all[adopter].reaped_jiffies;
    for (int k : kids[adopter])
      if (k != pid) stack.push_back(k);
  }
  while (!stack.empty()) {
    int p = stack.back();
    stack.pop_back();
    *jiffies += all[p].jiffies;
    *rss_bytes += all[p].rss_bytes;
    for (int k : kids[p]) stack.push_back(k);
  }
  return true;
}

// Pushes the children of the process whose /proc folder is `dir`, as each of its threads'
// task/TID/children file lists them, onto `out`, but `skip`.
void push_children(const std::string& dir, int skip, std::vector<int>* out) {
  DIR* d = opendir((dir + "/task").c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    int fd = ::open((dir + "/task/" + e->d_name + "/children").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) continue;
    buf[n] = 0;
    for (char* q = buf; *q;) {
      char* end = nullptr;
      long c = std::strtol(q, &end, 10);
      if (end == q) break;
      if (c > 0 && c != skip) out->push_back(static_cast<int>(c));
      q = end;
    }
  }
  closedir(d);
}

// The same through /proc/PID/task/TID/children (Linux 3.5+, CONFIG_PROC_CHILDREN): reads only
// the tree, not every process of the node. false if that file does not exist.
bool tree_usage_children(const std::string& proc_root, int pid, int adopter, double* jiffies,
                         double* rss_bytes) {
  const std::string probe =
      proc_root + "/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children";
  if (::access(probe.c_str(), R_OK) != 0) return false;
  *jiffies = 0;
  *rss_bytes = 0;
  std::vector<int> stack{pid};
  if (adopter) {  // the orphans it adopted, alive (its other children) and reaped (its cutime)
    const std::string dir = proc_root + "/" + std::to_string(adopter);
    ProcStat ps;
    if (read_proc_stat(dir + "/stat", &ps)) *jiffies += ps.reaped_jiffies;
    push_children(dir, pid, &stack);
  }
  bool root_ok = false;
  while (!stack.empty()) {
    const int p = stack.back();
    stack.pop_back();
    const std::string dir = proc_root + "/" + std::to_string(p);
    ProcStat ps;
    if (!read_proc_stat(dir + "/stat", &ps)) continue;  // exited meanwhile
    if (p == pid) root_ok = true;
    *jiffies += ps.jiffies;
    *rss_bytes += ps.rss_bytes;
    push_children(dir, 0, &stack);
  }
  return root_ok;
}

// The cpu and ram estimates of one process tree read it at the same tick: one /proc scan
// serves both (a result younger than 5 ms is reused).
bool tree_usage(const std::string& proc_root, int pid, int adopter, double* jiffies,
                double* rss_bytes) {
  static std::mutex mu;
  static double at_s = -1, j = 0, rss = 0;
  static int at_pid = 0, at_adopter = 0;
  static bool ok = false;
  std::lock_guard<std::mutex> g(mu);
  const double now = mono_s();
  if (pid != at_pid || adopter != at_adopter || now - at_s > 0.005) {
    ok = tree_usage_children(proc_root, pid, adopter, &j, &rss) ||
         tree_usage_scan(proc_root, pid, adopter, &j, &rss);
    at_s = now;
    at_pid = pid;
    at_adopter = adopter;
  }
  *jiffies = j;
  *rss_bytes = rss;
  return ok;
}

// Why a process tree's estimate reads nothing: its root is gone (Reading::gone).
std::string process_gone(int pid, const std::string& proc_root) {
  return fmt::format("process {} has ended (not in {})", pid, proc_root);
}

class CpuEstimateSensor : public Sensor {
 public:
  CpuEstimateSensor(const CpuEstimateOptions& opt) : opt_(opt) {
    const CpuInfo cpu =
        read_cpuinfo(opt.cpuinfo_path.empty() ? opt.proc_root + "/cpuinfo" : opt.cpuinfo_path);
    const std::string& model = cpu.model_name;
    const CpuPowerFigure fig = cpu_full_load_power(cpu, opt.tdp_w);
    tdp_w_ = fig.full_load_w;
    ncpu_ = opt.pid ? std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)) : stat_cpus(opt.proc_root);
    hz_ = static_cast<double>(sysconf(_SC_CLK_TCK));
    info_.name = "cpu-estimate";
    info_.domain = "cpu";
    info_.device = model.empty() ? "unknown CPU" : model;
    info_.kind = SensorKind::kEstimate;
    info_.unit = "W";
    info_.available = true;
    // Utilization is counted in scheduler ticks (1/hz s per CPU): a window needs a few ticks
    // per CPU before its mean utilization is resolved. Shorter windows are flagged.
    info_.refresh_period_s = kEstimateResolutionTicks / hz_;
    info_.method = fmt::format("estimated: {} x CPU utilization of {}", fig.how,
                               opt.pid ? fmt::format("process tree {} over {} CPUs", opt.pid, ncpu_)
                                       : std::string("the machine (/proc/stat)"));
    for (const auto& n : cpu.notes) info_.method += "; " + n;
    // A machine-wide estimate counts the whole node: one reader per node, like a device.
    if (opt.pid == 0) info_.device_key = "cpu-estimate-machine";
  }
  const SensorInfo& info() const override { return info_; }
  // The estimate is read as an energy counter: TDP x busy CPU-seconds / CPUs, cumulative.
  // Over any window this is TDP x the window's mean utilization x its length, without the
  // bias of holding a utilization that is only resolvable over several scheduler ticks (a
  // 20 ms window once read 0 J because the held value was still the initial 0).
  Reading read(double) override {
    Reading r;
    double busy = 0, t = 0;
    if (!sample(&busy, &t)) {
      r.gone = opt_.pid != 0;
      r.error = opt_.pid ? process_gone(opt_.pid, opt_.proc_root)
                         : fmt::format("{}/stat unreadable", opt_.proc_root);
      return r;
    }
    r.ok = true;
    r.energy_j = tdp_w_ * busy / (hz_ * static_cast<double>(ncpu_));
    return r;
  }

 private:
  // Machine: busy and total jiffies. Process tree: jiffies and monotonic time (s).
  bool sample(double* busy, double* t) {
    if (opt_.pid) {
      double rss = 0;
      if (!tree_usage(opt_.proc_root, opt_.pid, opt_.adopter_pid, busy, &rss)) return false;
      // A process reaped between the reads of its parent's reaped-children time and of its
      // own stat is in neither for that reading, and one reaped outside the tree (by init)
      // leaves it: the CPU time the tree has spent cannot decrease, so a dip holds the last
      // value (it read as a counter going backwards, with an untrusted fill).
      *busy = std::max(*busy, max_busy_);
      max_busy_ = *busy;
      *t = mono_s();
      return true;
    }
    return machine_jiffies(opt_.proc_root, busy, t);
  }
  CpuEstimateOptions opt_;
  SensorInfo info_;
  double max_busy_ = 0;  // the process tree's largest busy jiffies read so far
  double tdp_w_ = kDefaultTdpW;
  long ncpu_ = 1;
  double hz_ = 100;
};

class RamEstimateSensor : public Sensor {
 public:
  RamEstimateSensor(const CpuEstimateOptions& opt) : opt_(opt) {
    info_.name = "ram-estimate";
    info_.domain = "ram";
    info_.kind = SensorKind::kEstimate;
    info_.unit = "W";
    info_.available = true;
    info_.refresh_period_s = 0;
    std::string err;
    const auto total = mem_total_gb(opt.proc_root, &err);
    const double gb = total.value_or(0);
    info_.device = total ? fmt::format("{:.1f} GiB RAM", gb) : "RAM of unknown size";
    // The machine-wide estimate needs the installed size: unknown is not 0 W.
    if (!total && opt.pid == 0) {
      info_.available = false;
      info_.reason = "installed memory unknown (" + err + ")";
    }
    info_.method = fmt::format(
        "estimated: {} W/GiB (CodeCarbon 3 W per 8 GB, its GB 2^30 bytes) x {}", opt.ram_w_per_gb,
        opt.pid ? fmt::format("resident memory of process tree {}", opt.pid)
                : fmt::format("{:.1f} GiB installed", gb));
    total_gb_ = gb;
    if (opt.pid == 0) info_.device_key = "ram-estimate-machine";
  }
  const SensorInfo& info() const override { return info_; }
  Reading read(double) override {
    Reading r;
    double gb = total_gb_;
    if (opt_.pid) {
      double j = 0, rss = 0;
      if (!tree_usage(opt_.proc_root, opt_.pid, opt_.adopter_pid, &j, &rss)) {
        r.gone = true;
        r.error = process_gone(opt_.pid, opt_.proc_root);
        return r;
      }
      gb = rss / kBytesPerGiB;
    }
    r.ok = true;
    r.power_w = gb * opt_.ram_w_per_gb;
    return r;
  }

 private:
  CpuEstimateOptions opt_;
  SensorInfo info_;
  double total_gb_ = 0;
};

}  // namespace

std::optional<double> mem_total_gb(const std::string& proc_root, std::string* err) {
  const std::string path = proc_root + "/meminfo";
  std::ifstream f(path);
  if (!f) {
    *err = path + ": cannot read";
    return std::nullopt;
  }
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    std::string v = line.substr(9);
    if (auto kb = v.rfind("kB"); kb != std::string::npos) v.erase(kb);
    auto x = try_parse_number<double>(v, path + ": MemTotal", "a size in kB", err);
    if (!x) return std::nullopt;
    return *x / kKiBPerGiB;
  }
  *err = path + ": no MemTotal line";
  return std::nullopt;
}

void check_cpu_tdp_w(double tdp_w, const std::string& what, const std::string& unset) {
  if (tdp_w >= kMinCpuTdpW && tdp_w <= kMaxCpuTdpW) return;
  throw Error(fmt::format("{} = {}: expected {} or a TDP per socket in [{}, {}] W", what, tdp_w,
                          unset, kMinCpuTdpW, kMaxCpuTdpW));
}

void check_process_pid(int pid, const std::string& what, const std::string& proc_root) {
  if (pid == 0) return;
  if (pid < 0)
    throw Error(fmt::format(
        "{} = {}: expected the id of a running process (> 0), or 0 for the whole machine", what,
        pid));
  struct stat st {};
  if (::stat(fmt::format("{}/{}/stat", proc_root, pid).c_str(), &st) != 0)
    throw Error(
        fmt::format("{} = {}: no such process (not in {}); expected the id of a running "
                    "process, or 0 for the whole machine",
                    what, pid, proc_root));
}

double lookup_tdp_w(const std::string& model_name, std::string* source) {
  if (auto p = find_cpu_part(model_name)) {
    if (source) *source = fmt::format("table entry '{}' ({})", p->name, p->source);
    return p->tdp_w;
  }
  if (source)
    *source = fmt::format("model '{}' not in table: default {:.0f} W (CodeCarbon's fallback)",
                          model_name, kDefaultTdpW);
  return kDefaultTdpW;
}

SensorList make_cpu_estimate(const CpuEstimateOptions& opt) {
  SensorList out;
  out.push_back(std::make_unique<CpuEstimateSensor>(opt));
  auto ram = std::make_unique<RamEstimateSensor>(opt);
  if (ram->info().available)
    out.push_back(std::move(ram));
  else
    out.push_back(std::make_unique<UnavailableSensor>(ram->info()));
  return out;
}

}  // namespace gt::energy
