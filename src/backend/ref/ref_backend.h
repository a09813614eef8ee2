// backend/ref/ref_backend.h: the reference backend's factory (registry.cpp registers it as
// "ref").
#pragma once
#include <memory>

#include "backend/backend.h"

namespace gt {

/// The reference backend: plain single-threaded fp32 loops, the definition of every op
/// (ref_backend.cpp). fp32 only. index must be 0; opt is ignored.
std::unique_ptr<Backend> make_ref_backend(int index, const BackendOptions& opt);

}  // namespace gt
