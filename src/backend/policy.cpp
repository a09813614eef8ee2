// backend/policy.cpp: the names of the precision and recompute policies (backend.h), one
// table each, used for parsing, printing and error messages.
#include <fmt/format.h>

#include <array>
#include <string>
#include <utility>

#include "backend/backend.h"
#include "core/error.h"

namespace gt {

namespace {
// The one list of each policy's names: parsing, printing and error messages all use it.
template <typename E, size_t N>
using NameTable = std::array<std::pair<E, const char*>, N>;
constexpr NameTable<Precision, 4> kPrecisionNames{{{Precision::fp32, "fp32"},
                                                   {Precision::bf16, "bf16"},
                                                   {Precision::fp16, "fp16"},
                                                   {Precision::fp8, "fp8"}}};
constexpr NameTable<Recompute, 4> kRecomputeNames{{{Recompute::none, "none"},
                                                   {Recompute::gelu, "gelu"},
                                                   {Recompute::gelu_ln, "gelu+ln"},
                                                   {Recompute::block, "block"}}};

template <typename E, size_t N>
E parse_name(const NameTable<E, N>& table, const std::string& s, const char* what) {
  std::string expected;
  for (size_t i = 0; i < N; ++i) {
    if (s == table[i].second) return table[i].first;
    expected += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(table[i].second);
  }
  throw Error(fmt::format("{} '{}' is unknown; expected {}", what, s, expected));
}

template <typename E, size_t N>
std::string name_of(const NameTable<E, N>& table, E v) {
  for (auto& [e, name] : table)
    if (e == v) return name;
  return "?";
}
}  // namespace

Precision parse_precision(const std::string& s) {
  return parse_name(kPrecisionNames, s, "precision");
}
std::string to_string(Precision p) { return name_of(kPrecisionNames, p); }
Recompute parse_recompute(const std::string& s) {
  return parse_name(kRecomputeNames, s, "recompute policy");
}
std::string to_string(Recompute r) { return name_of(kRecomputeNames, r); }

}  // namespace gt
