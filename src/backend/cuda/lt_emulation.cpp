// backend/cuda/lt_emulation.cpp: cuBLASLt's contract for the emulated device (lt_emulation.h).
#include "backend/cuda/lt_emulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

namespace gt::cuda_lt {
namespace {
using cuda_plan::LtType;

bool fp8(LtType t) { return t == LtType::e4m3 || t == LtType::e5m2; }

std::mutex log_mutex;
bool logging = false;
std::vector<std::string> log;
}  // namespace

Refusal refusal(const Call& c) {
  const auto& g = c.g;
  auto no = [](std::string why, bool epilogue_only = false) {
    return Refusal{true, epilogue_only, std::move(why)};
  };
  if (g.m < 1 || g.n < 1 || g.k < 1) return no("a size below 1");
  const int64_t rows_a = g.ta ? g.k : g.m, rows_b = g.tb ? g.n : g.k;
  if (g.lda < rows_a || g.ldb < rows_b || g.ldd < g.m)
    return no(
        fmt::format("a leading dimension below its matrix's rows (lda {} < {}, ldb {} < {} "
                    "or ldd {} < {})",
                    g.lda, rows_a, g.ldb, rows_b, g.ldd, g.m));
  const bool f8 = fp8(c.a) || fp8(c.b);
  if (f8) {
    if (!fp8(c.a) || !fp8(c.b)) return no("an fp8 operand with a non-fp8 one");
    if (c.a == LtType::e5m2 && c.b == LtType::e5m2) return no("E5M2 x E5M2 (no such fp8 kernel)");
    if (!g.ta || g.tb) return no("fp8 needs A transposed and B not (the \"TN\" layout)");
    if (g.lda % 16 || g.ldb % 16 || g.k % 16)
      return no(fmt::format("fp8 needs lda, ldb and k multiples of 16 (lda {}, ldb {}, k {})",
                            g.lda, g.ldb, g.k));
    if (!c.scale_a || !c.scale_b) return no("an fp8 operand without its scale pointer");
    for (const void* s : {c.scale_a, c.scale_b})
      if (cuda_plan::alignment_of(s) < 16)
        return no(fmt::format("an fp8 scale pointer ({}) aligned to {} bytes, not 16", s,
                              cuda_plan::alignment_of(s)));
    if (c.d == LtType::e4m3 || c.d == LtType::e5m2) return no("an fp8 output (not used here)");
  } else if (c.a != c.b) {
    return no(fmt::format("operands of two types ({} and {})", cuda_plan::lt_name(c.a),
                          cuda_plan::lt_name(c.b)));
  }
  if (!f8 && c.a == LtType::f32 && c.d != LtType::f32)
    return no("f32 operands with a 16-bit output");
  // alignment: each element, fp8's 16 bytes, and what the plan declared
  struct Ptr {
    const void* p;
    LtType t;
    uint32_t declared;
    const char* name;
  };
  for (const Ptr& p : {Ptr{c.pa, c.a, g.align_a, "A"}, Ptr{c.pb, c.b, g.align_b, "B"},
                       Ptr{c.pd, c.d, g.align_d, "D"}}) {
    const uint32_t have = cuda_plan::alignment_of(p.p);
    const uint32_t need =
        std::max<uint32_t>({uint32_t(cuda_plan::lt_bytes(p.t)), fp8(p.t) ? 16u : 1u, p.declared});
    if (have < need)
      return no(fmt::format("{} at {} is aligned to {} bytes, below the {} {}", p.name, p.p, have,
                            need, p.declared >= need ? "the plan declared" : "its type needs"));
  }
  using cuda_plan::LtEpi;
  const LtEpi ep = c.ep.kind;
  if (ep == LtEpi::gelu_aux || ep == LtEpi::dgelu) {
    if (!c.ep.aux) return no(fmt::format("the {} epilogue without its aux matrix", epi_name(ep)));
    if (c.ep.ld < g.m || c.ep.ld % 8)
      return no(fmt::format("an aux leading dimension {} not divisible by 8 or below D's {} rows",
                            c.ep.ld, g.m));
    if (cuda_plan::alignment_of(c.ep.aux) < uint32_t(cuda_plan::lt_bytes(c.d)))
      return no(fmt::format("the aux matrix at {} is not aligned to its {}-byte elements", c.ep.aux,
                            cuda_plan::lt_bytes(c.d)));
    if (ep == LtEpi::dgelu && c.bias)
      return no("DGELU with a bias (DGELU_BGRAD makes the bias a gradient output)");
  } else if (c.ep.aux) {
    return no(fmt::format("an aux matrix with the {} epilogue", epi_name(ep)));
  }
  if (cuda_plan::bias_gradient(ep)) {
    // the bias gradient is written through the bias pointer: D's type, aligned to it
    if (!c.bias) return no(fmt::format("the {} epilogue without its bias gradient", epi_name(ep)));
    if (cuda_plan::alignment_of(c.bias) < uint32_t(cuda_plan::lt_bytes(c.d)))
      return no(fmt::format("the bias gradient at {} is not aligned to its {}-byte elements",
                            c.bias, cuda_plan::lt_bytes(c.d)));
  }
  if (f8 && ep != LtEpi::none)
    return no(fmt::format("fp8 with an f32 output has no {} epilogue", epi_name(ep)), true);
  if (f8 && c.bias)
    return no("fp8 with an f32 output takes a bf16 bias only, not an f32 one", true);
  return {};
}

std::string describe(const Call& c) {
  const auto& g = c.g;
  // a bias gradient epilogue's bias is its output, not a bias: named by the epilogue alone
  const bool bias_in = c.bias && !cuda_plan::bias_gradient(c.ep.kind);
  const std::string ep = c.ep.kind == cuda_plan::LtEpi::none
                             ? (c.bias ? "bias" : "none")
                             : fmt::format("{}{}", epi_name(c.ep.kind), bias_in ? "+bias" : "") +
                                   (c.ep.aux ? fmt::format(" (aux ld {})", c.ep.ld) : "");
  return fmt::format(
      "A {} {} (lda {}), B {} {} (ldb {}) -> D {} (ldd {}): m {}, n {}, k {}, "
      "beta {}, epilogue {}",
      cuda_plan::lt_name(c.a), g.ta ? "T" : "N", g.lda, cuda_plan::lt_name(c.b), g.tb ? "T" : "N",
      g.ldb, cuda_plan::lt_name(c.d), g.ldd, g.m, g.n, g.k, g.beta, ep);
}

void record_products(bool on) {
  std::lock_guard lock(log_mutex);
  logging = on;
  if (on) log.clear();
}
std::vector<std::string> recorded_products() {
  std::lock_guard lock(log_mutex);
  return log;
}
void record(const Call& c) {
  std::lock_guard lock(log_mutex);
  if (logging) log.push_back(describe(c));
}

}  // namespace gt::cuda_lt
