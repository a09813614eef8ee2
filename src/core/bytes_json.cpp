// core/bytes_json.cpp: see bytes_json.h.
#include "core/bytes_json.h"

#include <fmt/format.h>

#include "core/error.h"

namespace gt {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when the byte there does not start one.
size_t utf8_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no UTF-16 surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string shown_bytes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_len(s, i);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

nlohmann::json bytes_to_json(const std::string& bytes) {
  if (valid_utf8(bytes)) return bytes;
  std::string hex;
  hex.reserve(2 * bytes.size());
  for (unsigned char c : bytes) hex += fmt::format("{:02x}", c);
  return {{"bytes_hex", hex}, {"shown", shown_bytes(bytes)}};
}

std::string bytes_from_json(const nlohmann::json& j, std::string_view where) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("bytes_hex") && j.at("bytes_hex").is_string()) {
    const std::string& hex = j.at("bytes_hex").get_ref<const std::string&>();
    std::string out;
    if (hex.size() % 2 == 0) {
      for (size_t i = 0; i < hex.size(); i += 2) {
        const int a = hex_digit(hex[i]), b = hex_digit(hex[i + 1]);
        if (a < 0 || b < 0) break;
        out += static_cast<char>(a * 16 + b);
      }
      if (out.size() * 2 == hex.size()) return out;
    }
    throw Error(
        fmt::format("{}: bytes_hex '{}' is not valid; expected an even number of hex "
                    "digits",
                    where, shown_bytes(hex.substr(0, 80))));
  }
  throw Error(fmt::format("{}: {} is not a path; expected a string or {{\"bytes_hex\": ...}}",
                          where, dump_json(j).substr(0, 80)));
}

std::string dump_json(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string dump_json(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace gt
