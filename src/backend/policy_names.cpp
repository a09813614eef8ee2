// backend/policy_names.cpp: the names of the precision and recompute policies (backend.h), one
// table each, used for parsing, printing and error messages.
#include <fmt/format.h>

#include <array>
#include <string>
#include <utility>

#include "backend/backend.h"
#include "core/error.h"
#include "core/name_table.h"

namespace gt {

namespace {
constexpr NameTable<Precision, 4> kPrecisionNames{{{Precision::fp32, "fp32"},
                                                   {Precision::bf16, "bf16"},
                                                   {Precision::fp16, "fp16"},
                                                   {Precision::fp8, "fp8"}}};
constexpr NameTable<Recompute, 4> kRecomputeNames{{{Recompute::none, "none"},
                                                   {Recompute::gelu, "gelu"},
                                                   {Recompute::gelu_ln, "gelu+ln"},
                                                   {Recompute::block, "block"}}};
}  // namespace

Precision parse_precision(const std::string& s) {
  return parse_name(kPrecisionNames, s, "precision");
}
std::string to_string(Precision p) { return std::string(name_of(kPrecisionNames, p)); }
Recompute parse_recompute(const std::string& s) {
  return parse_name(kRecomputeNames, s, "recompute policy");
}
std::string to_string(Recompute r) { return std::string(name_of(kRecomputeNames, r)); }

}  // namespace gt
