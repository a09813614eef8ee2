// backend/profiling.h: a Backend that times every op of another one (wall clock, after the
// op returns, so OpenMP work inside it is complete; on a device with a queue, a GPU or
// cuda-emu, between two synchronizations, so the device's work is timed and not the enqueue)
// and reports seconds per op and, for the matrix products, GFLOP/s. Turned on with
// GT_PROFILE=1 (train prints the table at the end).
#pragma once
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace gt {

/// Per-op totals: calls, seconds, floating-point operations (2*M*N*K for products, else 0).
struct OpStats {
  int64_t calls = 0;
  double seconds = 0.0;
  double flops = 0.0;
};

/// Wraps `inner`, forwarding every call and adding its time to stats() under the op's name.
std::unique_ptr<Backend> make_profiling_backend(std::unique_ptr<Backend> inner);

/// The stats of a backend made by make_profiling_backend (null for any other backend).
const std::map<std::string, OpStats>* profiling_stats(const Backend& be);

/// Writes the table (op, calls, s, % of the ops' total, GFLOP/s) sorted by time, to f.
void print_profile(const std::map<std::string, OpStats>& stats, FILE* f);

}  // namespace gt
