// energy/gpu_sensors.h: GPU sensors. NVIDIA through NVML (nvml.h): the total-energy counter
// (mJ) where the GPU has one (Volta and later), otherwise power (mW) sampled and integrated;
// only the GPUs of CUDA_VISIBLE_DEVICES. AMD through ROCm SMI (librocm_smi64.so, or
// $GT_ROCM_SMI_LIBRARY, dlopen'ed): energy counter ticks x resolution (uJ), checked against
// power x time at start and replaced by power sampling (uW) when implausible.
#pragma once
#include "energy/sensor.h"

namespace gt::energy {

/// One sensor per visible NVIDIA GPU, or one UnavailableSensor "nvml" saying why there is none
/// (library missing, init failed, no device). Reads CUDA_VISIBLE_DEVICES from the environment.
SensorList detect_nvml();

/// One sensor per AMD GPU, or one UnavailableSensor "rocm-smi" saying why there is none.
/// When the counter is available it is checked for `check_s` seconds (default 0.2 s).
SensorList detect_rocm_smi(double check_s = 0.2);

}  // namespace gt::energy
