#include "backend/profiling.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "backend/forwarding.h"

namespace gt {
namespace {

/// "op" or, by shape, "op[768x128->384]" (a product's rows x inputs -> outputs) or
/// "op[B12,T64,C128,H4]" (attention): one word, as the table's readers split rows on spaces.
std::string row_name(std::string_view op, const OpShape& sh, bool by_shape) {
  if (!by_shape || sh.kind == OpShape::Kind::none) return std::string(op);
  if (sh.kind == OpShape::Kind::product) return fmt::format("{}[{}x{}->{}]", op, sh.a, sh.b, sh.c);
  return fmt::format("{}[B{},T{},C{},H{}]", op, sh.a, sh.b, sh.c, sh.d);
}

class ProfilingBackend final : public ForwardingBackend {
 public:
  ProfilingBackend(std::unique_ptr<Backend> inner, bool by_shape)
      : ForwardingBackend(std::move(inner)), by_shape_(by_shape) {}
  std::map<std::string, OpStats> stats;

  /// Runs the op. On a device with its own queue (a GPU, cuda-emu) the queue is drained
  /// before and after, so the time is the op's device work, not its enqueue.
  void around(std::string_view op, double flops, const OpShape& shape, OpCall call) override {
    const bool queued = inner().device() != Device::cpu;
    if (queued) inner().synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    call();
    if (queued) inner().synchronize();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    OpStats& s = stats[row_name(op, shape, by_shape_)];
    s.calls++;
    s.flops += flops;
    s.seconds += seconds;
  }

 private:
  bool by_shape_;
};

}  // namespace

std::unique_ptr<Backend> make_profiling_backend(std::unique_ptr<Backend> inner, bool by_shape) {
  return std::make_unique<ProfilingBackend>(std::move(inner), by_shape);
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
  // by shape, rows such as "attention_backward_fused[B12,T64,C128,H4]" are longer than 32
  size_t w = 32;
  for (auto& r : rows) w = std::max(w, r.first.size());
  fmt::print(f, "{:<{}} {:>8} {:>10} {:>7} {:>10}\n", "op", w, "calls", "seconds", "%", "GFLOP/s");
  for (auto& [name, s] : rows)
    fmt::print(f, "{:<{}} {:>8} {:>10.3f} {:>6.1f}% {:>10}\n", name, w, s.calls, s.seconds,
               total > 0 ? 100.0 * s.seconds / total : 0.0,
               s.flops > 0 ? fmt::format("{:.0f}", s.flops / s.seconds / 1e9) : "");
  fmt::print(f, "{:<{}} {:>8} {:>10.3f}\n", "total", w, "", total);
}

}  // namespace gt
