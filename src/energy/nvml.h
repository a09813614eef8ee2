// energy/nvml.h: a small C++ wrapper over the NVIDIA Management Library, loaded at run time with
// dlopen so greentrain starts on machines without a driver. The library is
// $GT_NVML_LIBRARY when set (tests load a stand-in), else libnvidia-ml.so.1. The few functions
// used are declared here (the NVML ABI is stable: opaque handles, int return codes, versioned
// names such as nvmlInit_v2), so no nvml.h header is needed. Units are NVML's: mJ, mW.
// Used by the NVML sensor (gpu_sensors.h) and by `greentrain tune` (power limits).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gt::energy::nvml {

using Return = int;                            ///< nvmlReturn_t
using Device = struct nvmlDevice_st*;          ///< nvmlDevice_t (opaque)
constexpr Return kSuccess = 0;                 ///< NVML_SUCCESS
constexpr Return kErrorNotSupported = 3;       ///< NVML_ERROR_NOT_SUPPORTED
constexpr Return kErrorNoPermission = 4;       ///< NVML_ERROR_NO_PERMISSION
constexpr Return kErrorNotFound = 6;           ///< NVML_ERROR_NOT_FOUND
constexpr Return kErrorInsufficientSize = 7;   ///< NVML_ERROR_INSUFFICIENT_SIZE
constexpr Return kErrorFunctionNotFound = 13;  ///< NVML_ERROR_FUNCTION_NOT_FOUND (symbol missing)

/// A value with the NVML return code that produced it.
template <class T>
struct Result {
  Return rc = kErrorFunctionNotFound;
  T value{};
  bool ok() const { return rc == kSuccess; }
};

/// nvmlProcessUtilizationSample_t (nvml.h): one process's utilization at one time.
struct ProcessUtilizationSample {
  unsigned pid;                     ///< process id
  unsigned long long timestamp_us;  ///< CPU timestamp (us)
  unsigned sm_util;                 ///< SM (3D/compute) utilization, percent
  unsigned mem_util;                ///< frame buffer memory utilization, percent
  unsigned enc_util;                ///< video encoder utilization, percent
  unsigned dec_util;                ///< video decoder utilization, percent
};

/// nvmlProcessInfo_v2_t (nvml.h; the layout nvmlDeviceGetComputeRunningProcesses_v2 and _v3
/// fill): one process with a compute context on a device.
struct ProcessInfo {
  unsigned pid;                      ///< process id
  unsigned long long used_memory_b;  ///< usedGpuMemory (bytes)
  unsigned gpu_instance_id;          ///< MIG GPU instance id (valid in MIG mode)
  unsigned compute_instance_id;      ///< MIG compute instance id (valid in MIG mode)
};

/// nvmlDeviceAttributes_t (nvml.h): what a MIG device holds of its GPU.
struct DeviceAttributes {
  unsigned multiprocessor_count, shared_copy_engines, shared_decoders, shared_encoders, shared_jpeg,
      shared_ofa;
  unsigned gpu_instance_slices;      ///< gpuInstanceSliceCount
  unsigned compute_instance_slices;  ///< computeInstanceSliceCount
  unsigned long long memory_mib;     ///< memorySizeMB
};

/// A loaded and initialised NVML. One per process is enough; not copyable. All calls are
/// thread-safe as NVML itself is.
class Library {
 public:
  /// dlopen + nvmlInit_v2. Returns nullptr and sets *error (library name, dlerror or NVML
  /// error string) when the library is missing or initialisation fails.
  static std::unique_ptr<Library> load(std::string* error);
  /// The library path load() tries: $GT_NVML_LIBRARY or "libnvidia-ml.so.1".
  static std::string library_name();
  ~Library();  ///< nvmlShutdown + dlclose
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  std::string error_string(Return rc) const;                     ///< nvmlErrorString
  Result<unsigned> device_count() const;                         ///< nvmlDeviceGetCount_v2
  Result<Device> device_by_index(unsigned index) const;          ///< nvmlDeviceGetHandleByIndex_v2
  Result<Device> device_by_uuid(const std::string& uuid) const;  ///< nvmlDeviceGetHandleByUUID
  Result<std::string> uuid(Device d) const;  ///< nvmlDeviceGetUUID: "GPU-..." or "MIG-..."
  Result<std::string> name(Device d) const;  ///< nvmlDeviceGetName
  /// nvmlDeviceGetTotalEnergyConsumption: mJ since the driver was loaded (Volta and later).
  Result<unsigned long long> total_energy_mj(Device d) const;
  /// nvmlDeviceGetPowerUsage: mW (on Ampere and later a 1 s average).
  Result<unsigned> power_mw(Device d) const;
  /// nvmlDeviceGetPowerManagementLimit: the current power limit (mW).
  Result<unsigned> power_limit_mw(Device d) const;
  /// nvmlDeviceGetPowerManagementLimitConstraints: {min, max} settable limit (mW).
  Result<std::pair<unsigned, unsigned>> power_limit_constraints_mw(Device d) const;
  /// nvmlDeviceSetPowerManagementLimit (needs root): sets the limit (mW).
  Return set_power_limit_mw(Device d, unsigned limit_mw) const;
  /// nvmlDeviceGetDeviceHandleFromMigDeviceHandle: the physical GPU of a MIG device.
  Result<Device> parent_of_mig(Device mig) const;
  /// MIG devices of a GPU (nvmlDeviceGetMaxMigDeviceCount + nvmlDeviceGetMigDeviceHandleByIndex);
  /// empty when MIG is off or unsupported.
  std::vector<Device> mig_devices(Device d) const;
  /// nvmlDeviceGetMigMode: true when MIG is enabled now (the current mode, not the pending one).
  Result<bool> mig_enabled(Device d) const;
  /// nvmlDeviceGetGpuInstanceId / nvmlDeviceGetComputeInstanceId of a MIG device.
  Result<unsigned> gpu_instance_id(Device mig) const;
  Result<unsigned> compute_instance_id(Device mig) const;
  /// nvmlDeviceGetAttributes_v2 (NVML: supported on MIG device handles only).
  Result<DeviceAttributes> attributes(Device mig) const;
  /// nvmlDeviceGetComputeRunningProcesses_v3 (or _v2 on older drivers): the processes with a
  /// compute context on a GPU or, given a MIG device handle, on that instance.
  Result<std::vector<ProcessInfo>> compute_processes(Device d) const;
  /// nvmlDeviceGetProcessUtilization: the samples NVML took since `last_seen_us` (CPU time, us;
  /// 0: all it keeps), one per process that used the GPU. NVML answers NOT_FOUND when it has no
  /// sample since then; that is returned as success with no samples.
  Result<std::vector<ProcessUtilizationSample>> process_utilization(
      Device d, unsigned long long last_seen_us) const;

 private:
  Library() = default;
  struct Fns;
  void* handle_ = nullptr;
  std::unique_ptr<Fns> fn_;
};

/// One GPU this process may use, after resolving CUDA_VISIBLE_DEVICES.
struct VisibleGpu {
  unsigned nvml_index = 0;  ///< NVML index of the physical GPU
  std::string uuid;         ///< "GPU-..."
  std::string requested;    ///< the CUDA_VISIBLE_DEVICES entry it came from ("" if unset)
};

/// Resolves `cuda_visible_devices` (the variable's value, nullptr when unset: all GPUs) to NVML
/// GPUs through UUIDs. Entries: integers (CUDA ordinals; taken as NVML indices, i.e. PCI bus
/// order, which equals CUDA's order with CUDA_DEVICE_ORDER=PCI_BUS_ID or identical GPUs),
/// "GPU-<uuid>" and "MIG-<uuid>" or unique prefixes of them (as CUDA accepts). As in CUDA, the
/// list stops at the first entry that matches nothing; *notes gets a line per such entry.
/// A MIG device maps to its physical GPU (energy is only counted per GPU); duplicates are
/// dropped.
std::vector<VisibleGpu> resolve_visible(const Library& lib, const char* cuda_visible_devices,
                                        std::vector<std::string>* notes);

}  // namespace gt::energy::nvml

namespace gt::energy {

/// Splits a *_VISIBLE_DEVICES value (CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,
/// HIP_VISIBLE_DEVICES) at its commas, each entry trimmed of blanks; empty entries are kept
/// (",1" gives "", "1"), for the caller to stop at as CUDA and HIP do.
std::vector<std::string> visible_entries(const std::string& value);

}  // namespace gt::energy
