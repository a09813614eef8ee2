// core/name_table.h: the one way an enum gets its names: one table per enum, from which parsing,
// printing and the "expected ..." of an error message all come, so a new value is one line.
#pragma once
#include <fmt/format.h>

#include <array>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace gt {

/// An enum's values with their names, in the order messages list them.
template <class E, size_t N>
using NameTable = std::array<std::pair<E, std::string_view>, N>;

/// The name of v in `table`; "?" for a value the table lacks.
template <class E, size_t N>
constexpr std::string_view name_of(const NameTable<E, N>& table, E v) {
  for (const auto& [e, name] : table)
    if (e == v) return name;
  return "?";
}

/// The names as a message lists them: "a, b or c".
template <class E, size_t N>
std::string names_list(const NameTable<E, N>& table) {
  std::string s;
  for (size_t i = 0; i < N; ++i)
    s += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(table[i].second);
  return s;
}

/// The value named `s`. Throws gt::Error "<what> '<s>' is not known; expected a, b or c"
/// otherwise (what: where the name came from, e.g. "--objective" or "precision").
template <class E, size_t N>
E parse_name(const NameTable<E, N>& table, std::string_view s, std::string_view what) {
  for (const auto& [e, name] : table)
    if (s == name) return e;
  throw Error(fmt::format("{} '{}' is not known; expected {}", what, s, names_list(table)));
}

}  // namespace gt
