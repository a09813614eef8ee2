// core/parse.h: the one checked way greentrain parses a number from text (environment
// variables, command-line values, TOML and --set values, CSV fields, sysfs files), for every
// module.
// The whole text must be the number (spaces, tabs and line ends around it are allowed); the
// value must fit the type. Errors name the source, the value (without the spaces and line ends
// around it, which a message would not show) and what was expected:
//   "<source>: '<text>' is <what is wrong>; expected <expected>"
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace gt {

/// Parses `text` as a T: int, long, long long, unsigned, unsigned long, unsigned long long
/// (decimal digits, an optional '+', and '-' for signed types only) or double (decimal or
/// exponent notation as std::from_chars reads it, an optional '+'; never hex, inf or nan).
/// source: where the text came from (a file and line, an environment variable, a key).
/// expected: what the caller wanted, in words (e.g. "a GPU index"); empty: the type's range.
/// Returns nullopt and sets *error (when not null) to the message above on failure.
template <class T>
std::optional<T> try_parse_number(std::string_view text, std::string_view source,
                                  std::string_view expected = {}, std::string* error = nullptr);

/// As try_parse_number, but throws gt::Error (core/error.h) with the message on failure.
template <class T>
T parse_number(std::string_view text, std::string_view source, std::string_view expected = {});

}  // namespace gt
