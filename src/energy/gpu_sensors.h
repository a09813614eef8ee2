// energy/gpu_sensors.h: GPU sensors. NVIDIA through NVML (nvml.h): the total-energy counter
// (mJ) where the GPU has one (Volta and later), otherwise power (mW) sampled and integrated;
// only the GPUs of CUDA_VISIBLE_DEVICES. AMD through ROCm SMI (librocm_smi64.so, or
// $GT_ROCM_SMI_LIBRARY, dlopen'ed): energy counter ticks x resolution (uJ), checked against
// power x time at start and replaced by power sampling (uW) when implausible.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "energy/sensor.h"

namespace gt::energy {

/// One sensor per visible NVIDIA GPU, or one UnavailableSensor "nvml" saying why there is none
/// (library missing, init failed, no device). Reads CUDA_VISIBLE_DEVICES from the environment.
SensorList detect_nvml();

/// One sensor per AMD GPU this process's HIP programs see (rocm_visible), in their order, or
/// one UnavailableSensor "rocm-smi" saying why there is none. When the counter is available it
/// is checked for `check_s` seconds (default 0.2 s).
SensorList detect_rocm_smi(double check_s = 0.2);

/// A GPU a HIP program here sees: its ROCm SMI index, and the entries that named it
/// ("ROCR_VISIBLE_DEVICES 2", empty where no variable is set).
struct RocmVisible {
  uint32_t rsmi_index = 0;
  std::string requested;
};
/// The AMD GPUs a HIP program here sees, in its order, of the n that ROCm SMI lists:
/// ROCR_VISIBLE_DEVICES (indices, or GPU-<unique id in hex>, which uid(i) gives for ROCm SMI
/// index i: rsmi_dev_unique_id_get) narrows the list first, then HIP_VISIBLE_DEVICES indexes
/// into what is left (ROCm documentation, "GPU isolation techniques"; CUDA_VISIBLE_DEVICES,
/// which HIP reads where HIP_VISIBLE_DEVICES is unset, is not: see gpu_sensors.cpp). Assumes
/// ROCm SMI's order is ROCr's. An
/// entry that matches nothing ends the list there, and `notes` says so (as CUDA does).
std::vector<RocmVisible> rocm_visible(uint32_t n,
                                      const std::function<std::optional<uint64_t>(uint32_t)>& uid,
                                      std::vector<std::string>* notes);

/// How many AMD GPUs ROCm SMI lists on this node (rsmi_num_monitor_devices: every GPU of the
/// node, whatever this process's ROCR_VISIBLE_DEVICES says): the n that detect_rocm_smi gives
/// rocm_visible. The node daemon tells it to its clients in hello (daemon_protocol.h). Empty,
/// with *why set, when ROCm SMI cannot be loaded or initialized or the count fails; 0 when it
/// lists none.
std::optional<uint32_t> rocm_smi_gpu_count(std::string* why);

/// rocm_visible with the unique ids read through ROCm SMI in this process, loaded only when
/// ROCR_VISIBLE_DEVICES has a GPU-<unique id> entry (a client of the node daemon, which reads
/// the GPUs, has the ids of its own environment to match). Where the library cannot be loaded
/// such an entry matches nothing, and `notes` says why.
std::vector<RocmVisible> rocm_visible_here(uint32_t n, std::vector<std::string>* notes);

}  // namespace gt::energy
