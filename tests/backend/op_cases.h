// The table of op cases of the backend op test: every op of backend.h (GT_BACKEND_OPS; the test
// checks that each has a case) at odd sizes (T not a multiple of 8 or 16, C not a multiple of
// 64, N = 1), aligned and large sizes, and each fused form against its unfused chain. A case
// runs on any backend; its outputs are compared with the same case (or its unfused chain) on
// the reference backend.
#pragma once
#include <fmt/format.h>

#include <functional>
#include <string>
#include <vector>

#include "op_harness.h"

namespace gt::test {

/// One row of the table.
struct OpCase {
  std::string name;     ///< "matmul_forward wT N=26 C=40 OC=37"
  std::vector<Op> ops;  ///< every op run() calls (a backend must support all of them)
  std::function<Outputs(Ctx&)> run;
  /// When set, the reference outputs come from this (the unfused chain) on ref instead of run.
  std::function<Outputs(Ctx&)> chain = nullptr;
  double flops = 0;  ///< of the timed call, for GFLOP/s (0: report GB/s)
  double bytes = 0;  ///< moved by the timed call, for GB/s
};

/// Sizes of one family of cases. hidden = 4C.
struct Dims {
  const char* label;
  int B, T, C, NH, V;
  int64_t N() const { return (int64_t)B * T; }
};

/// odd sizes, N = 1, aligned, large (a tail block of fused attention's 128 rows)
inline const std::vector<Dims>& all_dims() {
  static const std::vector<Dims> d = {{"odd", 2, 13, 40, 5, 37},
                                      {"one", 1, 1, 24, 3, 11},
                                      {"aligned", 4, 64, 128, 4, 256},
                                      {"large", 2, 200, 256, 4, 515}};
  return d;
}

std::vector<OpCase> make_op_cases();
/// make_op_cases(), made once per process.
const std::vector<OpCase>& op_cases();

/// Whether `be` runs every op of `ops` under p.
bool supports_all(const Backend& be, const std::vector<Op>& ops, Precision p);

/// The backend registered as `name`, made once per process and shared by the tests (the
/// table's rows ask it what it supports when they are listed); null, with the reason in *why,
/// for a backend that needs a device this machine lacks (cuda without a GPU).
Backend* shared_backend(const std::string& name, std::string* why = nullptr);

}  // namespace gt::test
