// core/json_number.h: integers read from JSON that came from outside (checkpoint state,
// safetensors headers, data identities). nlohmann::json's get<int>() converts a float such as
// 1e300 to an integer type, which is undefined behaviour, and wraps an integer out of the
// type's range silently; these checked readers do neither.
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <type_traits>

#include "core/error.h"

namespace gt {

/// The integer `v` holds as T, when it holds an integer (not a float, bool, string, ...) within
/// [lo, hi] (default: T's range); nullopt otherwise.
template <class T>
std::optional<T> json_integer(const nlohmann::json& v, T lo = std::numeric_limits<T>::min(),
                              T hi = std::numeric_limits<T>::max()) {
  static_assert(std::is_integral_v<T> && sizeof(T) <= 8);
  if (v.is_number_unsigned()) {
    const auto x = v.get<std::uint64_t>();
    if (hi < 0 || x > static_cast<std::uint64_t>(hi)) return std::nullopt;
    if (lo > 0 && x < static_cast<std::uint64_t>(lo)) return std::nullopt;
    return static_cast<T>(x);
  }
  if (v.is_number_integer()) {
    const auto x = v.get<std::int64_t>();
    if (x < 0 && (std::is_unsigned_v<T> || x < static_cast<std::int64_t>(lo))) return std::nullopt;
    if (x >= 0 && static_cast<std::uint64_t>(x) > static_cast<std::uint64_t>(hi))
      return std::nullopt;
    if (x >= 0 && lo > 0 && static_cast<std::uint64_t>(x) < static_cast<std::uint64_t>(lo))
      return std::nullopt;
    return static_cast<T>(x);
  }
  return std::nullopt;
}

/// json_integer, or gt::Error "<where>: <v as JSON> is not valid; expected an integer in
/// [lo, hi]".
template <class T>
T json_integer_or_throw(const nlohmann::json& v, std::string_view where,
                        T lo = std::numeric_limits<T>::min(),
                        T hi = std::numeric_limits<T>::max()) {
  if (auto x = json_integer<T>(v, lo, hi)) return *x;
  std::string shown = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
  throw Error(
      fmt::format("{}: {} is not valid; expected an integer in [{}, {}]", where, shown, lo, hi));
}

}  // namespace gt
