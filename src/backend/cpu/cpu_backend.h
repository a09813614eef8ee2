// backend/cpu/cpu_backend.h: the CPU backend's factory (registry.cpp registers it as "cpu").
#pragma once
#include <memory>

#include "backend/backend.h"

namespace gt {

/// The CPU backend: oneDNN matrix products, OpenMP for the rest. index must be 0. Sets the
/// OpenMP thread count to opt.threads when > 0 (threads are process-wide in OpenMP).
std::unique_ptr<Backend> make_cpu_backend(int index, const BackendOptions& opt);

}  // namespace gt
