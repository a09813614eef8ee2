// run/fields.cpp: see fields.h.
#include "run/fields.h"

#include <fmt/format.h>

#include "core/bytes_json.h"
#include "core/json_number.h"

namespace gt::run::detail {

std::optional<nlohmann::json> parse_object(std::string_view text, std::string* why) {
  why->clear();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    *why = fmt::format("not valid JSON ({})", e.what());
    return std::nullopt;
  }
  if (j.is_object()) return j;
  std::string shown = dump_json(j);
  if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
  *why = fmt::format("{} is not an object", shown);
  return std::nullopt;
}

const nlohmann::json* Fields::at(const char* key) const {
  if (!obj_.is_object()) return nullptr;
  const auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

void Fields::wrong(const char* key, const nlohmann::json& v, const char* expected) {
  const std::string path = prefix_ + key;
  problems_.push_back({path, fmt::format("{} is {}; expected {}", path, v.type_name(), expected)});
}

std::optional<double> Fields::number(const char* key) {
  const auto* v = at(key);
  if (!v) return std::nullopt;
  if (v->is_number()) return v->get<double>();
  wrong(key, *v, "a number or null");
  return std::nullopt;
}

std::optional<int64_t> Fields::integer(const char* key, int64_t lo) {
  const auto* v = at(key);
  if (!v) return std::nullopt;
  if (auto x = json_integer<int64_t>(*v, lo)) return x;
  wrong(key, *v, lo == 0 ? "a whole number >= 0" : "a whole number");
  return std::nullopt;
}

std::optional<uint64_t> Fields::count(const char* key) {
  const auto* v = at(key);
  if (!v) return std::nullopt;
  if (auto x = json_integer<uint64_t>(*v)) return x;
  wrong(key, *v, "a whole number >= 0");
  return std::nullopt;
}

std::optional<bool> Fields::boolean(const char* key) {
  const auto* v = at(key);
  if (!v) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>();
  wrong(key, *v, "true or false");
  return std::nullopt;
}

std::optional<std::string> Fields::text(const char* key) {
  const auto* v = at(key);
  if (!v) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  wrong(key, *v, "a string");
  return std::nullopt;
}

const nlohmann::json* Fields::object(const char* key) {
  const auto* v = at(key);
  if (!v) return nullptr;
  if (v->is_object()) return v;
  wrong(key, *v, "an object");
  return nullptr;
}

std::optional<std::vector<std::string>> Fields::texts(const char* key) {
  const auto* v = at(key);
  if (!v) return std::nullopt;
  std::vector<std::string> out;
  bool ok = v->is_array();
  if (ok)
    for (const auto& s : *v) {
      if (!s.is_string()) {
        ok = false;
        break;
      }
      out.push_back(s.get<std::string>());
    }
  if (ok) return out;
  wrong(key, *v, "an array of strings");
  return std::nullopt;
}

std::optional<std::map<std::string, std::optional<double>>> Fields::numbers_by_name(
    const char* key) {
  const auto* v = at(key);
  if (!v) return std::nullopt;
  std::map<std::string, std::optional<double>> out;
  bool ok = v->is_object();
  if (ok)
    for (const auto& [name, x] : v->items()) {
      if (!x.is_null() && !x.is_number()) {
        ok = false;
        break;
      }
      out[name] = x.is_number() ? std::optional<double>(x.get<double>()) : std::nullopt;
    }
  if (ok) return out;
  wrong(key, *v, "an object of numbers or nulls");
  return std::nullopt;
}

}  // namespace gt::run::detail
