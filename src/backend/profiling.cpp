#include "backend/profiling.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "backend/forwarding.h"

namespace gt {
namespace {

class ProfilingBackend final : public ForwardingBackend {
 public:
  explicit ProfilingBackend(std::unique_ptr<Backend> inner) : ForwardingBackend(std::move(inner)) {}
  std::map<std::string, OpStats> stats;

  /// Runs the op. On a device with its own queue (a GPU, cuda-emu) the queue is drained
  /// before and after, so the time is the op's device work, not its enqueue.
  void around(std::string_view op, double flops, OpCall call) override {
    const bool queued = inner().device() != Device::cpu;
    if (queued) inner().synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    call();
    if (queued) inner().synchronize();
    OpStats& s = stats[std::string(op)];
    s.calls++;
    s.flops += flops;
    s.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

}  // namespace

std::unique_ptr<Backend> make_profiling_backend(std::unique_ptr<Backend> inner) {
  return std::make_unique<ProfilingBackend>(std::move(inner));
}

const std::map<std::string, OpStats>* profiling_stats(const Backend& be) {
  auto* p = dynamic_cast<const ProfilingBackend*>(&be);
  return p ? &p->stats : nullptr;
}

void print_profile(const std::map<std::string, OpStats>& stats, FILE* f) {
  std::vector<std::pair<std::string, OpStats>> rows(stats.begin(), stats.end());
  std::sort(rows.begin(), rows.end(),
            [](auto& a, auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (auto& r : rows) total += r.second.seconds;
  fmt::print(f, "\nbackend ops (GT_PROFILE): wall time inside each op, all steps and evals\n");
  fmt::print(f, "{:<32} {:>8} {:>10} {:>7} {:>10}\n", "op", "calls", "seconds", "%", "GFLOP/s");
  for (auto& [name, s] : rows)
    fmt::print(f, "{:<32} {:>8} {:>10.3f} {:>6.1f}% {:>10}\n", name, s.calls, s.seconds,
               total > 0 ? 100.0 * s.seconds / total : 0.0,
               s.flops > 0 ? fmt::format("{:.0f}", s.flops / s.seconds / 1e9) : "");
  fmt::print(f, "{:<32} {:>8} {:>10.3f}\n", "total", "", total);
}

}  // namespace gt
