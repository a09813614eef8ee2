// serve/attribution.h: the energy of each process on a GPU that several share. Over each
// sampling interval the daemon has the GPU's energy E (J, from its counter) and each process's
// SM utilization u_p (percent of the interval, NVML's per-process utilization samples,
// nvmlDeviceGetProcessUtilization, averaged over the samples NVML took in the interval). It
// attributes
//     E_p = E * u_p / max(100, sum_q u_q)        unattributed = E - sum_p E_p
// so a process that keeps the GPU busy alone gets all of E; at 40 % busy it gets 40 % and the
// rest (idle power, and what NVML saw of no process) stays unattributed, shown apart; when the
// utilizations add to more than 100 % (NVML's samples overlap), E is split in their ratio.
// On a GPU in MIG mode NVML has no per-process utilization (nvmlDeviceGetProcessUtilization is
// not supported there) and counts energy for the physical GPU only, so each MIG instance is its
// own device and gets the share of E its compute slices are of all the instances' slices
// (nvmlDeviceGetAttributes_v2's computeInstanceSliceCount, c_i / sum_j c_j); the processes on
// an instance (nvmlDeviceGetComputeRunningProcesses on its MIG handle) split that share equally,
// and an instance with no process leaves its share unattributed. In terms of the formula: each
// process on instance i counts as u_p = 100 * c_i / (sum_j c_j * n_i), n_i its processes, so
// the instances' shares add to at most E and nothing is counted twice.
// It is an attribution, a model of who caused the energy, and labelled so everywhere; the
// counter's E is the measurement. Figures are cumulative per process since the daemon first saw
// it, so a client's window is the difference of two readings over its process tree or cgroup.
#pragma once
#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gt::serve {

/// One process's SM utilization over an interval (percent, 0..100).
/// On a MIG instance, `device` names it and `device_share` is its share of the GPU (0..1);
/// pid 0 (never a user process) marks an instance with no process, so its share is still
/// counted, as unattributed.
struct ProcessUtil {
  ProcessUtil() = default;
  ProcessUtil(unsigned p, double sm, std::string dev = {}, double share = 1)
      : pid(p), sm_util_percent(sm), device(std::move(dev)), device_share(share) {}
  unsigned pid = 0;
  double sm_util_percent = 0;
  std::string device;       ///< "" (the whole GPU) or "MIG-<uuid> (GPU instance g, compute ...)"
  double device_share = 1;  ///< the device's share of the GPU's energy (slices; 1: whole GPU)
};

/// One MIG instance's part of its GPU's energy.
struct InstanceEnergy {
  double energy_j = 0, attributed_j = 0;  ///< J: E * share, and what its processes got
};

/// E split by the formula above: joules per pid, and the rest.
struct EnergySplit {
  std::vector<std::pair<unsigned, double>> per_pid_j;  ///< J per pid, in the order given
  double unattributed_j = 0;                           ///< J
};
/// Splits energy_j (J, >= 0) among `util`'s processes (duplicated pids are summed).
EnergySplit split_energy(double energy_j, const std::vector<ProcessUtil>& util);

/// Per-process utilization of each GPU, sensor by sensor ("nvml:0").
class UtilizationSource {
 public:
  virtual ~UtilizationSource() = default;
  /// The processes' utilization on GPU `sensor` since the previous call; empty optional with
  /// *err when the GPU or the driver cannot say (then nothing is attributed for the interval).
  virtual std::optional<std::vector<ProcessUtil>> sample(const std::string& sensor,
                                                         std::string* err) = 0;
};

/// NVML's nvmlDeviceGetProcessUtilization for the GPUs of sensors named "nvml:<index>". Null when
/// NVML cannot be loaded.
std::unique_ptr<UtilizationSource> nvml_utilization();

/// Who a process is, read from /proc when first seen.
struct ProcessInfo {
  unsigned pid = 0;
  uid_t uid = static_cast<uid_t>(-1);  ///< -1: unknown (the process ended before it was read)
  std::string user, comm, cgroup;      ///< cgroup: the v2 path, e.g. /user.slice/...
  std::vector<unsigned> ancestors;     ///< parent, grandparent, ... up to pid 1
  double start_ticks = 0;              ///< /proc/PID/stat starttime: tells a reused pid apart
  bool exited = false;
};

/// Cumulative attributed energy per (GPU, process), and unattributed energy per GPU.
/// Thread-safe.
class Attribution {
 public:
  /// `proc_root`: /proc (tests may point elsewhere). Processes that ended are kept
  /// `retention_s` seconds, so that a window that spans their end still counts them.
  explicit Attribution(std::string proc_root = "/proc", double retention_s = 3600)
      : proc_root_(std::move(proc_root)), retention_s_(retention_s) {}
  /// Adds one interval of GPU `sensor`: its energy (J) and its processes' utilization;
  /// `util_error` non-empty: no utilization was available (all of it unattributed, and said).
  void add(const std::string& sensor, double energy_j, const std::vector<ProcessUtil>& util,
           const std::string& util_error, double now_unix_s);

  struct ProcessEnergy {
    ProcessInfo info;
    std::string gpu;      ///< sensor name
    std::string device;   ///< the MIG instance it runs on, "" when not in MIG mode
    double energy_j = 0;  ///< J since first seen on this GPU
  };
  struct GpuEnergy {
    std::string gpu;
    double energy_j = 0, attributed_j = 0, unattributed_j = 0;  ///< J since the daemon started
    std::string note;  ///< why nothing could be attributed lately, if so
    std::map<std::string, InstanceEnergy> mig_instances;  ///< by ProcessUtil::device
  };
  std::vector<ProcessEnergy> processes() const;
  std::vector<GpuEnergy> gpus() const;
  /// true when `p` is `root` or descends from it.
  static bool in_tree(const ProcessInfo& p, unsigned root);

 private:
  ProcessInfo read_process(unsigned pid) const;
  std::string proc_root_;
  double retention_s_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, unsigned>, ProcessEnergy> procs_;  // (gpu, pid)
  std::map<std::string, GpuEnergy> gpus_;
  std::map<unsigned, double> ended_at_;  // pid -> unix s it was found gone
  double last_sweep_s_ = 0;
};

}  // namespace gt::serve
