// serve/attribution.cpp: see attribution.h.
#include "serve/attribution.h"

#include <fmt/format.h>
#include <pwd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "energy/nvml.h"

namespace gt::serve {

EnergySplit split_energy(double energy_j, const std::vector<ProcessUtil>& util) {
  EnergySplit out;
  std::vector<std::pair<unsigned, double>> u;  // pid -> summed utilization
  for (const auto& x : util) {
    const double v = std::clamp(x.sm_util_percent, 0.0, 100.0);
    auto it = std::find_if(u.begin(), u.end(), [&](auto& p) { return p.first == x.pid; });
    if (it == u.end())
      u.emplace_back(x.pid, v);
    else
      it->second += v;
  }
  double total = 0;
  for (auto& p : u) total += p.second;
  const double denom = std::max(100.0, total);
  double given = 0;
  for (auto& p : u) {
    const double e = energy_j * p.second / denom;
    out.per_pid_j.emplace_back(p.first, e);
    given += e;
  }
  out.unattributed_j = std::max(0.0, energy_j - given);
  return out;
}

// ------------------------------------------------------------------ NVML's per-process samples
namespace {

class NvmlUtilization : public UtilizationSource {
 public:
  explicit NvmlUtilization(std::unique_ptr<energy::nvml::Library> lib) : lib_(std::move(lib)) {}

  std::optional<std::vector<ProcessUtil>> sample(const std::string& sensor,
                                                 std::string* err) override {
    if (sensor.rfind("nvml:", 0) != 0) {
      *err = "not an NVML GPU";
      return std::nullopt;
    }
    const unsigned index = static_cast<unsigned>(std::strtoul(sensor.c_str() + 5, nullptr, 10));
    auto d = lib_->device_by_index(index);
    if (!d.ok()) {
      *err = "nvmlDeviceGetHandleByIndex_v2: " + lib_->error_string(d.rc);
      return std::nullopt;
    }
    if (auto mig = lib_->mig_enabled(d.value); mig.ok() && mig.value)
      return mig_sample(d.value, err);
    unsigned long long& last = last_seen_us_[index];
    auto r = lib_->process_utilization(d.value, last);
    if (!r.ok()) {
      *err = "nvmlDeviceGetProcessUtilization: " + lib_->error_string(r.rc);
      return std::nullopt;
    }
    // Average each process's samples in the interval (NVML keeps one every ~1/6 s).
    std::vector<std::pair<unsigned, std::pair<double, int>>> acc;
    for (const auto& s : r.value) {
      last = std::max(last, s.timestamp_us);
      auto it = std::find_if(acc.begin(), acc.end(), [&](auto& p) { return p.first == s.pid; });
      if (it == acc.end())
        acc.push_back({s.pid, {static_cast<double>(s.sm_util), 1}});
      else
        it->second.first += s.sm_util, ++it->second.second;
    }
    std::vector<ProcessUtil> out;
    for (auto& [pid, a] : acc) out.push_back({pid, a.first / a.second});
    return out;
  }

 private:
  // A GPU in MIG mode: each instance's slice share, split equally among its processes
  // (attribution.h).
  std::optional<std::vector<ProcessUtil>> mig_sample(energy::nvml::Device gpu, std::string* err) {
    struct Instance {
      std::string name;
      unsigned slices = 0;
      std::vector<unsigned> pids;
    };
    std::vector<Instance> inst;
    unsigned total = 0;
    for (energy::nvml::Device m : lib_->mig_devices(gpu)) {
      const auto a = lib_->attributes(m);
      if (!a.ok()) {
        *err = "MIG mode; nvmlDeviceGetAttributes_v2: " + lib_->error_string(a.rc);
        return std::nullopt;
      }
      const auto procs = lib_->compute_processes(m);
      if (!procs.ok()) {
        *err = "MIG mode; nvmlDeviceGetComputeRunningProcesses: " + lib_->error_string(procs.rc);
        return std::nullopt;
      }
      const auto uuid = lib_->uuid(m);
      const auto gi = lib_->gpu_instance_id(m), ci = lib_->compute_instance_id(m);
      Instance x;
      x.name =
          fmt::format("{} (GPU instance {}, compute instance {}, {} slices)",
                      uuid.ok() ? uuid.value : "MIG", gi.ok() ? std::to_string(gi.value) : "?",
                      ci.ok() ? std::to_string(ci.value) : "?", a.value.compute_instance_slices);
      x.slices = a.value.compute_instance_slices;
      for (const auto& p : procs.value)
        if (std::find(x.pids.begin(), x.pids.end(), p.pid) == x.pids.end()) x.pids.push_back(p.pid);
      total += x.slices;
      inst.push_back(std::move(x));
    }
    if (total == 0) {
      *err = "MIG mode with no instance (or instances of 0 slices): nothing to attribute to";
      return std::nullopt;
    }
    std::vector<ProcessUtil> out;
    for (const auto& x : inst) {
      const double share = static_cast<double>(x.slices) / total;
      if (x.pids.empty()) out.push_back({0, 0, x.name, share});  // the instance, no process
      for (unsigned pid : x.pids)
        out.push_back({pid, 100.0 * share / static_cast<double>(x.pids.size()), x.name, share});
    }
    return out;
  }

  std::unique_ptr<energy::nvml::Library> lib_;
  std::map<unsigned, unsigned long long> last_seen_us_;
};

}  // namespace

std::unique_ptr<UtilizationSource> nvml_utilization() {
  std::string err;
  auto lib = energy::nvml::Library::load(&err);
  if (!lib) return nullptr;
  return std::make_unique<NvmlUtilization>(std::move(lib));
}

// ------------------------------------------------------------------ cumulative attribution
ProcessInfo Attribution::read_process(unsigned pid) const {
  ProcessInfo p;
  p.pid = pid;
  const std::string dir = fmt::format("{}/{}", proc_root_, pid);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    p.exited = true;
    return p;
  }
  p.uid = st.st_uid;
  passwd pw{}, *res = nullptr;
  char buf[4096];
  p.user = ::getpwuid_r(p.uid, &pw, buf, sizeof buf, &res) == 0 && res ? pw.pw_name
                                                                       : std::to_string(p.uid);
  std::ifstream(dir + "/comm") >> p.comm;
  std::ifstream cg(dir + "/cgroup");
  for (std::string line; std::getline(cg, line);)
    if (line.rfind("0::", 0) == 0) p.cgroup = line.substr(3);
  // Ancestors through /proc/PID/stat's ppid (field 4, after the parenthesised command).
  unsigned cur = pid;
  for (int depth = 0; depth < 64; ++depth) {
    std::ifstream f(fmt::format("{}/{}/stat", proc_root_, cur));
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto close = s.rfind(')');
    if (close == std::string::npos) break;
    std::istringstream rest(s.substr(close + 2));
    std::string state;
    unsigned ppid = 0;
    rest >> state >> ppid;
    if (cur == pid) {  // starttime is field 22: 18 fields after ppid
      std::string skip;
      for (int i = 0; i < 17 && rest >> skip; ++i) {
      }
      rest >> p.start_ticks;
    }
    if (ppid == 0) break;
    p.ancestors.push_back(ppid);
    if (ppid == 1) break;
    cur = ppid;
  }
  return p;
}

bool Attribution::in_tree(const ProcessInfo& p, unsigned root) {
  return p.pid == root ||
         std::find(p.ancestors.begin(), p.ancestors.end(), root) != p.ancestors.end();
}

void Attribution::add(const std::string& sensor, double energy_j,
                      const std::vector<ProcessUtil>& util, const std::string& util_error,
                      double now_unix_s) {
  std::vector<ProcessInfo> fresh;  // /proc reads outside the lock
  {
    std::lock_guard<std::mutex> g(mu_);
    for (const auto& u : util)
      if (u.pid != 0 && !procs_.count({sensor, u.pid})) {
        fresh.emplace_back();
        fresh.back().pid = u.pid;
      }
  }
  for (auto& p : fresh) p = read_process(p.pid);
  std::lock_guard<std::mutex> g(mu_);
  GpuEnergy& gpu = gpus_[sensor];
  gpu.gpu = sensor;
  gpu.energy_j += energy_j;
  if (!util_error.empty()) {
    gpu.unattributed_j += energy_j;
    gpu.note = "no per-process utilization: " + util_error;
    return;
  }
  gpu.note.clear();
  for (auto& p : fresh) {
    ProcessEnergy& e = procs_[{sensor, p.pid}];
    e.info = p;
    e.gpu = sensor;
  }
  // MIG instances: each its share of E, whether or not its processes take all of it.
  std::map<unsigned, std::string> device_of;
  std::map<std::string, double> share_of;
  for (const auto& u : util) {
    if (u.device.empty()) continue;
    device_of[u.pid] = u.device;
    share_of[u.device] = std::clamp(u.device_share, 0.0, 1.0);
  }
  for (const auto& [name, share] : share_of) gpu.mig_instances[name].energy_j += energy_j * share;
  std::vector<ProcessUtil> procs;  // without the pid-0 markers of instances with no process
  for (const auto& u : util)
    if (u.pid != 0) procs.push_back(u);
  const EnergySplit s = split_energy(energy_j, procs);
  for (const auto& [pid, j] : s.per_pid_j) {
    ProcessEnergy& e = procs_[{sensor, pid}];
    e.energy_j += j;
    gpu.attributed_j += j;
    if (auto it = device_of.find(pid); it != device_of.end()) {
      e.device = it->second;
      gpu.mig_instances[it->second].attributed_j += j;
    }
  }
  gpu.unattributed_j += s.unattributed_j;
  // Every 10 s: mark processes that ended; forget them retention_s after.
  if (now_unix_s - last_sweep_s_ < 10) return;
  last_sweep_s_ = now_unix_s;
  for (auto it = procs_.begin(); it != procs_.end();) {
    ProcessInfo& info = it->second.info;
    if (!info.exited) {
      struct stat st {};
      if (::stat(fmt::format("{}/{}", proc_root_, info.pid).c_str(), &st) != 0) {
        info.exited = true;
        ended_at_[info.pid] = now_unix_s;
      }
    }
    if (info.exited && now_unix_s - ended_at_[info.pid] > retention_s_) {
      ended_at_.erase(info.pid);
      it = procs_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<Attribution::ProcessEnergy> Attribution::processes() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<ProcessEnergy> out;
  for (const auto& [k, v] : procs_) out.push_back(v);
  return out;
}

std::vector<Attribution::GpuEnergy> Attribution::gpus() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<GpuEnergy> out;
  for (const auto& [k, v] : gpus_) out.push_back(v);
  return out;
}

}  // namespace gt::serve
