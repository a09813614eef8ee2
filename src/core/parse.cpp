// core/parse.cpp: see parse.h.
#include "core/parse.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/error.h"

namespace gt {
namespace {

template <class T>
std::string type_range() {
  if constexpr (std::is_floating_point_v<T>)
    return "a finite number";
  else if constexpr (std::is_signed_v<T>)
    return fmt::format("an integer in [{}, {}]", std::numeric_limits<T>::min(),
                       std::numeric_limits<T>::max());
  else
    return fmt::format("a whole number in [0, {}]", std::numeric_limits<T>::max());
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

template <class T>
std::optional<T> try_parse_number(std::string_view text, std::string_view source,
                                  std::string_view expected, std::string* error) {
  std::string_view s = text;
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  const std::string_view shown = s;  // without the spaces and line ends around it
  auto fail = [&](std::string what) -> std::optional<T> {
    if (error)
      *error = fmt::format("{}: '{}' is {}; expected {}", source, shown, what,
                           expected.empty() ? type_range<T>() : std::string(expected));
    return std::nullopt;
  };
  if (s.empty()) return fail("empty");
  if (s.front() == '+') {
    s.remove_prefix(1);
    if (s.empty() || s.front() == '-' || s.front() == '+') return fail("not a number");
  }
  if constexpr (std::is_unsigned_v<T>) {
    if (s.front() == '-') return fail("negative");
  }
  T v{};
  std::from_chars_result r{};
  if constexpr (std::is_floating_point_v<T>)
    r = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
  else
    r = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (r.ec == std::errc::result_out_of_range) {
    if constexpr (std::is_floating_point_v<T>)
      return fail("out of range for a double");
    else
      return fail(fmt::format("out of range (at most {}{})", std::numeric_limits<T>::max(),
                              std::is_signed_v<T>
                                  ? fmt::format(", at least {}", std::numeric_limits<T>::min())
                                  : std::string()));
  }
  if (r.ec != std::errc() || r.ptr == s.data())
    return fail(std::is_floating_point_v<T> ? "not a number" : "not an integer");
  if (r.ptr != s.data() + s.size()) {
    const std::string_view rest(r.ptr, static_cast<size_t>(s.data() + s.size() - r.ptr));
    return fail(fmt::format("not {} (it goes on with '{}')",
                            std::is_floating_point_v<T> ? "a number" : "an integer", rest));
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) return fail("not finite");
  }
  return v;
}

template <class T>
T parse_number(std::string_view text, std::string_view source, std::string_view expected) {
  std::string err;
  if (auto v = try_parse_number<T>(text, source, expected, &err)) return *v;
  throw Error(err);
}

#define GT_PARSE_INSTANTIATE(T)                                                     \
  template std::optional<T> try_parse_number<T>(std::string_view, std::string_view, \
                                                std::string_view, std::string*);    \
  template T parse_number<T>(std::string_view, std::string_view, std::string_view);
GT_PARSE_INSTANTIATE(int)
GT_PARSE_INSTANTIATE(long)
GT_PARSE_INSTANTIATE(long long)
GT_PARSE_INSTANTIATE(unsigned)
GT_PARSE_INSTANTIATE(unsigned long)
GT_PARSE_INSTANTIATE(unsigned long long)
GT_PARSE_INSTANTIATE(double)
#undef GT_PARSE_INSTANTIATE

}  // namespace gt
