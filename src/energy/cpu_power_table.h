// energy/cpu_power_table.h: the CPU power figure behind the CPU estimate (cpu_estimate.h).
// A table of server processors from the vendors' datasheets (TDP in W, cores, threads) for AMD
// EPYC 7001-9005 and Intel Xeon Scalable 1st-6th generation, with a few desktop parts; each row
// names its datasheet. What the estimate uses at full load:
//  - energy.cpu_tdp_w (the user's override): that TDP per socket x sockets;
//  - a physical machine: the part's TDP x sockets (the whole package is ours), else 85 W per
//    socket (CodeCarbon's fallback);
//  - a virtual machine (the "hypervisor" flag in /proc/cpuinfo): W per logical CPU x the
//    logical CPUs this machine has, where W per logical CPU = TDP / threads of the part named
//    in the model string, else of the generation's largest part (found from the CPU family and
//    model numbers, as clouds carve virtual machines from such parts), else the median W per
//    thread of the table's server rows (a stated default).
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace gt::energy {

/// One processor from its vendor's datasheet.
struct CpuPart {
  const char* name;        ///< as it appears in the model string, e.g. "EPYC 9654"
  int cores;               ///< physical cores per socket
  int threads;             ///< hardware threads per socket
  double tdp_w;            ///< TDP (AMD: default TDP; Intel: processor base power), W
  const char* generation;  ///< e.g. "AMD EPYC 9004 (Genoa)"
  const char* source;      ///< the datasheet, e.g. "amd.com product page"
  double w_per_thread() const { return tdp_w / threads; }  ///< W per logical CPU
};

/// The table (server rows first, then desktop rows).
const std::vector<CpuPart>& cpu_parts();

/// What /proc/cpuinfo says about this machine's CPUs.
struct CpuInfo {
  std::string vendor;      ///< vendor_id, e.g. "AuthenticAMD"
  std::string model_name;  ///< "model name" of the first processor; empty if none
  int family = -1, model = -1, stepping = -1;  ///< "cpu family", "model", "stepping"
  int logical_cpus = 0;                        ///< "processor" entries (online logical CPUs)
  int sockets = 1;                 ///< distinct "physical id" values (1 when none are listed)
  bool hypervisor = false;         ///< the "hypervisor" CPU flag: running in a virtual machine
  std::vector<std::string> notes;  ///< fields that could not be parsed, named with their value
};

/// Parses /proc/cpuinfo text. `source` names it in notes (e.g. "/proc/cpuinfo").
CpuInfo parse_cpuinfo(const std::string& text, const std::string& source);
/// Reads and parses the file at path; an unreadable file gives an empty CpuInfo with a note.
CpuInfo read_cpuinfo(const std::string& path);

/// The table row whose name appears in model_name as a whole word ("Gold 6248" does not match
/// "Gold 6248R"; an EPYC row also matches its single-socket "P" part), or nullopt.
std::optional<CpuPart> find_cpu_part(const std::string& model_name);

/// The generation's largest part from the CPU family/model numbers (AMD family 0x17 Rome,
/// 0x19 Milan/Genoa/Bergamo, 0x1A Turin; Intel family 6 models 0x55 Skylake/Cascade/Cooper
/// Lake, 0x6A/0x6C Ice Lake, 0x8F Sapphire Rapids, 0xCF Emerald Rapids, 0xAD Granite Rapids,
/// 0xAF Sierra Forest), or nullopt. Model numbers: the Linux kernel's
/// arch/x86/include/asm/intel-family.h and AMD's Processor Programming Reference per family.
std::optional<CpuPart> generation_part(const CpuInfo& cpu);

/// The median W per thread of the table's server rows: the default for an unknown part on a
/// virtual machine, W.
double default_w_per_thread();

/// CodeCarbon's per-socket fallback when the part is unknown on a physical machine, W.
constexpr double kDefaultTdpW = 85.0;

/// The CPU power at full load of this machine, W, and how it was found (for the method string).
struct CpuPowerFigure {
  double full_load_w = 0;
  std::string how;  ///< e.g. "2 logical CPUs x 1.88 W (AMD EPYC 9654: 360 W / 192 threads, ...)"
};

/// tdp_override_w: energy.cpu_tdp_w (per socket), taken as given.
CpuPowerFigure cpu_full_load_power(const CpuInfo& cpu, std::optional<double> tdp_override_w);

}  // namespace gt::energy
