// core/bytes_json.h: byte strings (Linux paths, command-line arguments) in JSON and TOML
// records. A Linux path is bytes, not text: `shakespeare-\xe9t\xe9.txt` (Latin-1) is a valid name
// that JSON and TOML strings, which are UTF-8, cannot hold. Every path greentrain records is
// written so that any byte string round-trips and is still shown readably: a valid UTF-8 string
// as itself; any other as {"bytes_hex": "<the bytes in hex>", "shown": "<the text with each
// invalid byte as \xHH>"}. Readers take either form.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace gt {

/// True when `s` is valid UTF-8 (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF).
bool valid_utf8(std::string_view s);

/// `s` for people: valid UTF-8 as it is, each byte that is not part of a valid sequence as
/// "\xHH" (lower-case hex). Always valid UTF-8.
std::string shown_bytes(std::string_view s);

/// `bytes` as JSON: the string when it is valid UTF-8, else {"bytes_hex", "shown"} (above).
nlohmann::json bytes_to_json(const std::string& bytes);

/// The bytes of a value written by bytes_to_json (a string, or the object). Throws gt::Error
/// "<where>: ...; expected a string or {\"bytes_hex\": ...}" for anything else or bad hex.
std::string bytes_from_json(const nlohmann::json& j, std::string_view where);

/// `j` as text (indent as nlohmann's dump; -1: one line). A string that is not valid UTF-8
/// (none should be: paths go through bytes_to_json) is written with each bad byte replaced by
/// U+FFFD rather than failing after the work is done. Never throws for encoding reasons.
std::string dump_json(const nlohmann::json& j, int indent = -1);
std::string dump_json(const nlohmann::ordered_json& j, int indent = -1);

}  // namespace gt
