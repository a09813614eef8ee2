// backend/cuda/cuda_backend.h: the CUDA backend (train.device = cuda or cuda:N): the op table
// of backend.h on an NVIDIA GPU, with matrix products through cuBLASLt (fp32, and bf16/fp16
// operands with fp32 accumulation) and own kernels for the rest (kernels.cu, whose arithmetic
// is kernel_math.h's). Deterministic: every sum runs in a fixed order, and cuBLASLt's split-K
// reductions keep theirs; so one GPU gives the same losses run to run.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"

namespace gt {

/// The CUDA backend on device `index` (of the devices CUDA_VISIBLE_DEVICES leaves visible).
/// Errors: gt::Error "no CUDA device" with the CUDA runtime's reason when there is none (no
/// driver, no GPU) or when index is not below the device count.
std::unique_ptr<Backend> make_cuda_backend(int index, const BackendOptions& opt);

/// The CUDA backend's code on the CPU (train.device = cuda-emu; cuda_emulation.cpp): the
/// kernels of kernels.cu run thread by thread on the SIMT runtime (backend/simt), device memory
/// with guard zones and poison, a plain product that refuses what cuBLASLt refuses. Slow; for
/// testing the backend on machines without a GPU. Built with or without the CUDA toolkit.
std::unique_ptr<Backend> make_cuda_emulation_backend(int index, const BackendOptions& opt);

/// How many CUDA devices this process sees; 0 with the runtime's reason in *why when none.
int cuda_device_count(std::string* why = nullptr);

}  // namespace gt
