// energy/cpu_estimate.h: CPU and memory power where no counter is readable. Every number is
// labelled "estimated" and the method is stated:
//   cpu power (W) = TDP (W) x utilization (0..1)   (CodeCarbon's "cpu_load" model)
//   ram power (W) = ram_w_per_gb x GB              (CodeCarbon <= 2.x: 3 W per 8 GB = 0.375 W/GB)
// Utilization is that of the whole machine (/proc/stat) or of one process tree (/proc/PID/stat
// of the process and its descendants, reaped children included), over all online CPUs. The CPU
// estimate is read as a cumulative energy, TDP x busy CPU-seconds / CPUs, so that a window's
// energy is TDP x its own mean utilization x its length; its resolution (refresh_period_s) is
// 5 scheduler ticks, and shorter windows are flagged by the meter.
#pragma once
#include <optional>
#include <string>

#include "energy/sensor.h"

namespace gt::energy {

/// Default TDP when the CPU model is not in the table: 85 W, CodeCarbon's fallback value.
constexpr double kDefaultTdpW = 85.0;
/// Memory power per GB (W/GB): 3 W per 8 GB, CodeCarbon's RAM model (v2.x).
constexpr double kDefaultRamWPerGb = 0.375;

struct CpuEstimateOptions {
  std::optional<double> tdp_w;  ///< per-socket TDP (W); empty: table lookup from /proc/cpuinfo
  double ram_w_per_gb = kDefaultRamWPerGb;  ///< W/GB
  int pid = 0;  ///< 0: whole machine; otherwise the root of the measured process tree
  std::string proc_root = "/proc";  ///< for tests
};

/// TDP (W, per socket) of a CPU model name as in /proc/cpuinfo, from a small table of vendor
/// specification sheets (ark.intel.com, amd.com); kDefaultTdpW when not found. `source` says
/// which entry matched or that the default was used.
double lookup_tdp_w(const std::string& model_name, std::string* source);

/// The CPU estimate (domain "cpu") and the memory estimate (domain "ram").
SensorList make_cpu_estimate(const CpuEstimateOptions& opt);

}  // namespace gt::energy
