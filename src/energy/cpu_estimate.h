// energy/cpu_estimate.h: CPU and memory power where no counter is readable. Every number is
// labelled "estimated" and the method is stated:
//   cpu power (W) = full-load power (W) x utilization (0..1)   (CodeCarbon's "cpu_load" model)
// where the full-load power is the TDP of the sockets on a physical machine and W per logical
// CPU x logical CPUs on a virtual one (cpu_power_table.h says how each is found).
//   ram power (W) = ram_w_per_gb x GiB   (CodeCarbon <= 2.x: 3 W per 8 GB = 0.375 W/GB, its GB 2^30
//   B)
// Utilization is that of the whole machine (/proc/stat) or of one process tree (/proc/PID/stat
// of the process and its descendants, reaped children included, and the orphans an adopter
// took in), over all online CPUs. The CPU estimate is read as a cumulative energy, TDP x busy
// CPU-seconds / CPUs, so that a window's energy is TDP x its own mean utilization x its
// length; its resolution (refresh_period_s) is 5 scheduler ticks, and shorter windows are
// flagged by the meter.
#pragma once
#include <optional>
#include <string>

#include "energy/cpu_power_table.h"
#include "energy/sensor.h"

namespace gt::energy {

/// Memory power per GiB (W/GiB): 3 W per 8 GB, CodeCarbon's RAM model (v2.x; its GB is 2^30 bytes).
constexpr double kDefaultRamWPerGb = 0.375;

struct CpuEstimateOptions {
  std::optional<double> tdp_w;  ///< per-socket TDP (W), the user's override; empty: the table
  double ram_w_per_gb = kDefaultRamWPerGb;  ///< W/GiB
  int pid = 0;  ///< 0: whole machine; otherwise the root of the measured process tree
  /// With pid: a child subreaper (`greentrain measure` itself, prctl PR_SET_CHILD_SUBREAPER)
  /// that the tree's orphans are reparented to. Its other children's trees count as part of
  /// the tree, and so does the time of the children it has reaped (its cutime + cstime), not its
  /// own. 0: none; orphans reparented elsewhere (to init) leave the tree.
  int adopter_pid = 0;
  std::string proc_root = "/proc";  ///< for tests
  std::string cpuinfo_path;         ///< for tests; empty: proc_root + "/cpuinfo"
};

/// The range of a CPU TDP per socket that a user gives (W): server CPUs are rated up to about
/// 500 W. `measure --tdp`, energy.cpu_tdp_w, Python's Meter(cpu_tdp_w=) and MeterOptions.
inline constexpr double kMinCpuTdpW = 1, kMaxCpuTdpW = 2000;

/// Throws Error "<what> = <tdp_w>: expected <unset> or a TDP per socket in [1, 2000] W" unless
/// tdp_w is in [kMinCpuTdpW, kMaxCpuTdpW] (NaN and infinities are not). `unset` says how that
/// front end asks for the CPU model's table instead, e.g. "0 (the CPU model's table)".
void check_cpu_tdp_w(double tdp_w, const std::string& what, const std::string& unset);

/// Throws Error "<what> = <pid>: ..." unless pid is 0 (the whole machine) or a process that
/// exists now (<proc_root>/<pid>/stat is there): a process tree that is not there would be
/// measured as nothing at all.
void check_process_pid(int pid, const std::string& what, const std::string& proc_root = "/proc");

/// TDP (W, per socket) of a CPU model name as in /proc/cpuinfo, from the table of vendor
/// datasheets (cpu_power_table.h); kDefaultTdpW when not found. `source` says which entry
/// matched or that the default was used.
double lookup_tdp_w(const std::string& model_name, std::string* source);

/// MemTotal of <proc_root>/meminfo in GiB (2^30 bytes, CodeCarbon's GB), as the memory estimate
/// counts it; nullopt with *err naming the file or the value that cannot be read.
std::optional<double> mem_total_gb(const std::string& proc_root, std::string* err);

/// The CPU estimate (domain "cpu") and the memory estimate (domain "ram").
SensorList make_cpu_estimate(const CpuEstimateOptions& opt);

}  // namespace gt::energy
