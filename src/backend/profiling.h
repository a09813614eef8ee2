// backend/profiling.h: a Backend that times every op of another one (wall clock, after the
// op returns, so OpenMP work inside it is complete; on a device with a queue, a GPU or
// cuda-emu, between two synchronizations, so the device's work is timed and not the enqueue)
// and reports seconds per op and, for the matrix products, GFLOP/s. Turned on with
// GT_PROFILE=1 (train prints the table at the end), or GT_PROFILE=shapes for a row per shape
// of each product and attention op (an op of several layers' shapes, split).
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

/// Wraps `inner`, forwarding every call and adding its time to stats() under the op's name,
/// or with by_shape under the op's name and shape where it has one (GT_PROFILE=shapes): e.g.
/// "matmul_forward[768x128->384]" (a linear layer's rows x inputs -> outputs) and
/// "attention_forward_fused[B12,T64,C128,H4]" (batch, sequence length, channels, heads).
std::unique_ptr<Backend> make_profiling_backend(std::unique_ptr<Backend> inner,
                                                bool by_shape = false);

/// The stats of a backend made by make_profiling_backend (null for any other backend).
const std::map<std::string, OpStats>* profiling_stats(const Backend& be);

/// Writes the table (op, calls, s, % of the ops' total, GFLOP/s) sorted by time, to f; the op
/// column is as wide as the longest name (at least 32 characters).
void print_profile(const std::map<std::string, OpStats>& stats, FILE* f);

}  // namespace gt
