#include "train/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "core/error.h"
#include "core/json_number.h"
#include "train/config.h"
#include "train/data.h"
#include "train/tokenizer_gpt2.h"
#include "train/tokenizer_sp.h"

namespace gt {
namespace {

// Splits UTF-8 into code points (as strings); throws at the first invalid sequence.
// Calls f(character) for each UTF-8 character of s (a view into s), after checking s is UTF-8.
template <class F>
void each_utf8_char(const std::string& s, const std::string& where, F f) {
  check_utf8(s, where);
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    f(std::string_view(s).substr(i, len));
    i += len;
  }
}

void fnv1a(uint64_t& h, std::string_view s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
}

}  // namespace

void check_utf8(std::string_view s, const std::string& where, size_t base, const char* use_byte) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    uint32_t cp = ok ? c & (0x7F >> len) : 0;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (p[i + k] >> 6) == 2;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // RFC 3629: the shortest form only, no UTF-16 surrogates, nothing above U+10FFFF
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[len] && !(cp >= 0xD800 && cp <= 0xDFFF) && cp <= 0x10FFFF;
    if (!ok)
      throw Error(fmt::format("{}: invalid UTF-8 at byte {}; expected UTF-8 text (or use {})",
                              where, base + i, use_byte));
    i += len;
  }
}

std::vector<size_t> cut_points(const SubwordModel& model, std::string_view text,
                               size_t piece_bytes) {
  std::vector<size_t> cuts;
  size_t pos = piece_bytes;
  while (pos < text.size()) {
    size_t p = pos;
    while (p < text.size() && !model.can_cut_before(text, p)) ++p;
    if (p >= text.size()) break;
    cuts.push_back(p);
    pos = p + piece_bytes;
  }
  return cuts;
}

int Tokenizer::vocab_size() const {
  if (kind == "char") return static_cast<int>(vocab.size());
  if (kind == "byte") return 256;
  if (subword) return subword->vocab_size();
  return ids_vocab_size;
}

std::vector<int32_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids;
  if (kind == "byte") {
    ids.reserve(text.size());
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  if (subword) {
    check_utf8(text, "text");
    std::vector<size_t> cuts = cut_points(*subword, text, size_t(1) << 20);
    cuts.insert(cuts.begin(), 0);
    cuts.push_back(text.size());
    const int64_t n = static_cast<int64_t>(cuts.size()) - 1;
    std::vector<std::vector<int32_t>> parts(n);
    std::string error;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < n; ++i) {
      try {
        subword->encode(std::string_view(text).substr(cuts[i], cuts[i + 1] - cuts[i]), parts[i]);
      } catch (const Error& e) {
#pragma omp critical
        error = e.what();
      }
    }
    if (!error.empty()) throw Error(error);
    size_t total = 0;
    for (auto& p : parts) total += p.size();
    ids.reserve(total);
    for (auto& p : parts) ids.insert(ids.end(), p.begin(), p.end());
    return ids;
  }
  if (kind != "char") throw Error("this run's data is pre-tokenized (ids): text cannot be encoded");
  // one-byte characters (all of tinyshakespeare) through a table, the others through a map
  std::array<int32_t, 128> ascii;
  ascii.fill(-1);
  std::map<std::string, int32_t, std::less<>> index;
  for (size_t i = 0; i < vocab.size(); ++i) {
    const auto& v = vocab[i];
    if (v.size() == 1 && static_cast<unsigned char>(v[0]) < 0x80)
      ascii[static_cast<unsigned char>(v[0])] = static_cast<int32_t>(i);
    else
      index[v] = static_cast<int32_t>(i);
  }
  ids.reserve(text.size());
  each_utf8_char(text, "text", [&](std::string_view ch) {
    int32_t id = -1;
    if (ch.size() == 1 && static_cast<unsigned char>(ch[0]) < 0x80) {
      id = ascii[static_cast<unsigned char>(ch[0])];
    } else if (auto it = index.find(ch); it != index.end()) {
      id = it->second;
    }
    if (id < 0)
      throw Error(fmt::format("character '{}' is not in the model's vocabulary of {} characters",
                              ch, vocab.size()));
    ids.push_back(id);
  });
  return ids;
}

std::string Tokenizer::decode(const int32_t* ids, size_t n) const {
  std::string s;
  const int V = vocab_size();
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = ids[i];
    if (kind == "char" && id >= 0 && id < V)
      s += vocab[id];
    else if (kind == "byte" && id >= 0 && id < 256)
      s += static_cast<char>(id);
    else if (subword && id >= 0 && id < V)
      s += subword->token_bytes(id);
    else
      s += fmt::format("<{}>", id);
  }
  return s;
}

int64_t Tokenizer::token_byte_count(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return -1;
  if (kind == "char") return static_cast<int64_t>(vocab[id].size());
  if (kind == "byte") return 1;
  if (subword) return static_cast<int64_t>(subword->token_bytes(id).size());
  return -1;
}

std::map<std::string, std::string> Tokenizer::files() const {
  return subword ? subword->files() : std::map<std::string, std::string>{};
}

std::string Tokenizer::fingerprint() const {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a offset basis and prime (Fowler, Noll, Vo)
  fnv1a(h, kind);
  fnv1a(h, std::string(1, '\0'));
  if (kind == "ids") fnv1a(h, std::to_string(ids_vocab_size));
  for (const auto& v : vocab) {
    fnv1a(h, v);
    fnv1a(h, std::string(1, '\0'));
  }
  for (const auto& [name, content] : files()) {
    fnv1a(h, name);
    fnv1a(h, std::string(1, '\0'));
    fnv1a(h, content);
  }
  return fmt::format("{:016x}", h);
}

nlohmann::json Tokenizer::to_json() const {
  nlohmann::json j;
  j["kind"] = kind;
  if (kind == "char") j["vocab"] = vocab;
  if (kind == "ids") j["vocab_size"] = ids_vocab_size;
  if (subword) {
    j["vocab_size"] = vocab_size();
    std::vector<std::string> names;
    for (const auto& [name, content] : files()) names.push_back(name);
    j["files"] = names;
    j["fingerprint"] = fingerprint();
  }
  return j;
}

Tokenizer Tokenizer::from_json(const nlohmann::json& j, const std::string& where,
                               const std::string& dir) {
  namespace fs = std::filesystem;
  Tokenizer t;
  try {
    t.kind = j.at("kind").get<std::string>();
    if (t.kind == "char") {
      t.vocab = j.at("vocab").get<std::vector<std::string>>();
    } else if (t.kind == "ids") {
      t.ids_vocab_size = json_integer_or_throw<int>(
          j.at("vocab_size"), fmt::format("{}: tokenizer.vocab_size", where), 1);
    } else if (t.kind == "bpe" || t.kind == "gpt2") {
      auto path = [&](const char* name) { return (fs::path(dir) / name).string(); };
      if (t.kind == "bpe") {
        std::string p = path("tokenizer.model");
        t.subword = SentencePieceBpe::load(read_file(p), p);
      } else {
        t.subword = Gpt2Bpe::from_dir(dir);
      }
      const std::string want = j.at("fingerprint").get<std::string>();
      if (t.fingerprint() != want)
        throw Error(fmt::format(
            "{}: the tokenizer files in {} have fingerprint {}, but the checkpoint recorded {}; "
            "they were changed after the checkpoint was written",
            where, dir, t.fingerprint(), want));
    } else if (t.kind != "byte") {
      throw Error(fmt::format("{}: tokenizer kind '{}'; expected char, byte, bpe, gpt2 or ids",
                              where, t.kind));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: tokenizer: {}", where, e.what()));
  }
  return t;
}

Tokenizer Tokenizer::build_char(const std::string& text, const std::string& where) {
  std::set<std::string, std::less<>> chars;  // sorted, as nanoGPT's sorted(set(text))
  std::array<bool, 128> seen{};
  each_utf8_char(text, where, [&](std::string_view ch) {
    const auto c = static_cast<unsigned char>(ch[0]);
    if (ch.size() == 1 && c < 0x80) {
      if (seen[c]) return;
      seen[c] = true;
    }
    if (chars.find(ch) == chars.end()) chars.emplace(ch);
  });
  Tokenizer t;
  t.kind = "char";
  t.vocab.assign(chars.begin(), chars.end());
  return t;
}

Tokenizer Tokenizer::from_config(const TrainConfig& cfg, const std::string& training_text,
                                 const std::string& where, const std::string& option_prefix) {
  // a setting with its value as the messages name it: "data.tokenizer_model = 'x.model'" (a
  // key; `text`: a string, quoted) or "--tokenizer-model x.model" (an option)
  auto setting = [&](std::string what, const std::string& value, bool text) {
    if (option_prefix.rfind("--", 0) == 0) {
      for (char& c : what) c = c == '_' ? '-' : c;
      return option_prefix + what + " " + value;
    }
    return option_prefix + what + " = " + (text ? "'" + value + "'" : value);
  };
  auto naming = [](const std::string& named, auto make) {
    try {
      return make();
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", named, e.what()));
    }
  };
  Tokenizer t;
  t.kind = cfg.tokenizer;
  if (cfg.tokenizer == "char") return build_char(training_text, where);
  if (cfg.tokenizer == "gpt2") {
    t.subword = naming(setting("tokenizer_path", cfg.tokenizer_path, true),
                       [&] { return Gpt2Bpe::from_dir(cfg.tokenizer_path); });
  } else if (cfg.tokenizer == "bpe") {
    if (!cfg.tokenizer_model.empty()) {
      t.subword = naming(setting("tokenizer_model", cfg.tokenizer_model, true), [&] {
        return SentencePieceBpe::load(read_file(cfg.tokenizer_model), cfg.tokenizer_model);
      });
    } else {
      check_utf8(training_text, where, 0, setting("tokenizer", "byte", true).c_str());
      t.subword =
          SentencePieceBpe::train(training_text, cfg.bpe_vocab_size,
                                  setting("vocab_size", std::to_string(cfg.bpe_vocab_size), false));
    }
  }
  return t;
}

}  // namespace gt
