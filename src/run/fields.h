// run/fields.h: typed reads of one JSON object's keys, for the run folder's readers
// (run/summary.cpp, run/metrics_jsonl.cpp). A missing key or null is unknown (an empty optional); a
// key of another type is unknown too, and named in the problems ("target.reached is string;
// expected true or false"). Nothing here throws: nlohmann's type_error never escapes.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "run/schema.h"

namespace gt::run::detail {

/// The JSON object `text` holds; empty, with *why set ("not valid JSON (...)", "[1,2] is not an
/// object"), when it holds none.
std::optional<nlohmann::json> parse_object(std::string_view text, std::string* why);

class Fields {
 public:
  /// obj: the object read (a non-object reads as empty); prefix: its path with a trailing dot
  /// ("target."), "" at the top; problems: where mistyped keys are named.
  Fields(const nlohmann::json& obj, std::string prefix, std::vector<Problem>& problems)
      : obj_(obj), prefix_(std::move(prefix)), problems_(problems) {}

  /// Any finite or infinite JSON number.
  std::optional<double> number(const char* key);
  /// A whole number >= lo (no fraction, within int64).
  std::optional<int64_t> integer(const char* key, int64_t lo = 0);
  /// A whole number >= 0 within uint64 (bytes).
  std::optional<uint64_t> count(const char* key);
  std::optional<bool> boolean(const char* key);
  std::optional<std::string> text(const char* key);
  /// The object at `key`; nullptr when missing, null, or of another type (named).
  const nlohmann::json* object(const char* key);
  /// An array of strings; empty optional when missing, null or not so (named).
  std::optional<std::vector<std::string>> texts(const char* key);
  /// An object of numbers or nulls ({"gpu": 250.5, "cpu": null}); named when not so.
  std::optional<std::map<std::string, std::optional<double>>> numbers_by_name(const char* key);

 private:
  // The value at key when present and not null; nullptr otherwise.
  const nlohmann::json* at(const char* key) const;
  void wrong(const char* key, const nlohmann::json& v, const char* expected);
  const nlohmann::json& obj_;
  std::string prefix_;
  std::vector<Problem>& problems_;
};

}  // namespace gt::run::detail
