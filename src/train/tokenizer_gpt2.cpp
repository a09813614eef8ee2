#include "train/tokenizer_gpt2.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include <climits>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "train/data.h"

namespace gt {
namespace {

// GPT-2's pre-tokenization pattern, as in openai/gpt-2 src/encoder.py and Hugging Face's
// ByteLevel pre-tokenizer: contractions, letters, numbers, other symbols (each with an optional
// leading space), then whitespace not followed by a non-space, then any other whitespace.
constexpr const char* kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kEot = "<|endoftext|>";

std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// bytes_to_unicode() of openai/gpt-2 src/encoder.py: the printable bytes ('!'..'~', '¡'..'¬',
// '®'..'ÿ') stand for themselves; the other 68 map in order to U+0100, U+0101, ...
void bytes_to_unicode(std::string (&out)[256]) {
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  int n = 0;
  for (int b = 0; b < 256; ++b) out[b] = utf8_of(printable(b) ? b : 256 + n++);
}

// Splits a bytes_to_unicode string into its characters (UTF-8, 1 or 2 bytes each).
std::vector<std::string> chars_of(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t len = (static_cast<unsigned char>(s[i]) & 0xE0) == 0xC0   ? 2
                 : (static_cast<unsigned char>(s[i]) & 0xF0) == 0xE0 ? 3
                 : (static_cast<unsigned char>(s[i]) & 0xF8) == 0xF0 ? 4
                                                                     : 1;
    out.emplace_back(s, i, len);
    i += len;
  }
  return out;
}

bool ascii_graphic(char c) { return c > ' ' && c < 0x7F; }

}  // namespace

std::shared_ptr<Gpt2Bpe> Gpt2Bpe::from_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::string vocab = (fs::path(dir) / "vocab.json").string();
  std::string merges = (fs::path(dir) / "merges.txt").string();
  for (const auto& f : {vocab, merges})
    if (!fs::is_regular_file(f))
      throw Error(fmt::format(
          "{}: no such file; a GPT-2 tokenizer is read from a folder with vocab.json and "
          "merges.txt (a Hugging Face GPT-2 folder has them)",
          f));
  return from_text(read_file(vocab), read_file(merges), dir);
}

std::shared_ptr<Gpt2Bpe> Gpt2Bpe::from_text(const std::string& vocab_json,
                                            const std::string& merges_txt,
                                            const std::string& where) {
  std::shared_ptr<Gpt2Bpe> t(new Gpt2Bpe());
  t->vocab_json_ = vocab_json;
  t->merges_txt_ = merges_txt;
  bytes_to_unicode(t->byte_char_);
  std::unordered_map<std::string, unsigned char> char_byte;
  for (int b = 0; b < 256; ++b) char_byte[t->byte_char_[b]] = static_cast<unsigned char>(b);
  const std::string vpath = where + "/vocab.json", mpath = where + "/merges.txt";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(vocab_json);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: invalid JSON: {}", vpath, e.what()));
  }
  if (!j.is_object() || j.empty())
    throw Error(fmt::format("{}: expected an object of token -> id", vpath));
  t->id_bytes_.assign(j.size(), std::string());
  std::vector<bool> seen(j.size(), false);
  for (auto& [tok, idv] : j.items()) {
    if (!idv.is_number_integer())
      throw Error(
          fmt::format("{}: token '{}' has id {}; expected an integer", vpath, tok, idv.dump()));
    int64_t id = idv.get<int64_t>();
    if (id < 0 || id >= (int64_t)j.size() || seen[id])
      throw Error(fmt::format(
          "{}: token '{}' has id {}; expected the ids 0..{} once each (a vocabulary without gaps)",
          vpath, tok, id, j.size() - 1));
    seen[id] = true;
    t->vocab_[tok] = static_cast<int32_t>(id);
    std::string bytes;
    for (auto& ch : chars_of(tok)) {
      auto it = char_byte.find(ch);
      bytes += it == char_byte.end() ? ch : std::string(1, static_cast<char>(it->second));
    }
    t->id_bytes_[id] = std::move(bytes);
  }
  if (auto it = t->vocab_.find(kEot); it != t->vocab_.end()) {
    t->eot_id_ = it->second;
    t->id_bytes_[it->second] = kEot;
  }
  std::istringstream ms(merges_txt);
  std::string line;
  int rank = 0, lineno = 0;
  while (std::getline(ms, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (lineno == 1 && line.rfind("#version", 0) == 0)) continue;
    auto sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string::npos)
      throw Error(fmt::format("{}:{}: '{}'; expected two tokens separated by one space", mpath,
                              lineno, line));
    std::string a = line.substr(0, sp), b = line.substr(sp + 1);
    if (!t->vocab_.count(a) || !t->vocab_.count(b) || !t->vocab_.count(a + b))
      throw Error(fmt::format(
          "{}:{}: the merge '{}' joins tokens that are not all in vocab.json ('{}', '{}', '{}')",
          mpath, lineno, line, a, b, a + b));
    t->ranks_.emplace(line, rank++);
  }
  for (int b = 0; b < 256; ++b)
    if (!t->vocab_.count(t->byte_char_[b]))
      throw Error(fmt::format(
          "{}: byte 0x{:02X} ('{}') has no token; a byte-level BPE vocabulary holds all 256 "
          "bytes",
          vpath, b, t->byte_char_[b]));
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (!re) throw Error(fmt::format("PCRE2 could not compile GPT-2's pattern (error {})", err));
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  // without JIT the interpreter matches the same
  t->regex_ = re;
  return t;
}

Gpt2Bpe::~Gpt2Bpe() {
  if (regex_) pcre2_code_free(static_cast<pcre2_code*>(regex_));
}

// The merges of GPT-2's bpe() on one pre-token: start from its bytes' characters, merge the
// adjacent pair of lowest rank (every occurrence, left to right) until no pair has a rank.
void Gpt2Bpe::bpe(std::string_view piece, std::vector<int32_t>& out) const {
  std::vector<std::string> word;
  word.reserve(piece.size());
  for (unsigned char c : piece) word.push_back(byte_char_[c]);
  std::string key;
  while (word.size() > 1) {
    int best = INT_MAX;
    size_t best_i = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      key.assign(word[i]).append(" ").append(word[i + 1]);
      auto it = ranks_.find(key);
      if (it != ranks_.end() && it->second < best) best = it->second, best_i = i;
    }
    if (best == INT_MAX) break;
    const std::string first = word[best_i], second = word[best_i + 1];
    std::vector<std::string> merged;
    merged.reserve(word.size());
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        merged.push_back(first + second);
        i += 2;
      } else {
        merged.push_back(std::move(word[i++]));
      }
    }
    word = std::move(merged);
  }
  for (const auto& w : word) out.push_back(vocab_.at(w));  // bytes and merges are all in vocab_
}

void Gpt2Bpe::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
  auto* re = static_cast<pcre2_code*>(regex_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
  const auto* s = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(re, s, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (rc < 0 || ov[1] <= pos) {  // cannot happen: \s+ and the symbol class cover every char
      pcre2_match_data_free(md);
      throw Error(fmt::format("GPT-2 pre-tokenizer: no match at byte {} (PCRE2 code {})", pos, rc));
    }
    if (ov[0] > pos) bpe(text.substr(pos, ov[0] - pos), out);
    bpe(text.substr(ov[0], ov[1] - ov[0]), out);
    pos = ov[1];
  }
  pcre2_match_data_free(md);
}

void Gpt2Bpe::encode(std::string_view text, std::vector<int32_t>& out) const {
  if (eot_id_ < 0) return encode_ordinary(text, out);
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t next = text.find(kEot, pos);
    if (next == std::string_view::npos) next = text.size();
    encode_ordinary(text.substr(pos, next - pos), out);
    if (next == text.size()) break;
    out.push_back(eot_id_);
    pos = next + std::char_traits<char>::length(kEot);
  }
}

std::string Gpt2Bpe::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    throw Error(
        fmt::format("token id {} is outside the GPT-2 vocabulary of {} tokens", id, vocab_size()));
  return id_bytes_[id];
}

std::map<std::string, std::string> Gpt2Bpe::files() const {
  return {{"vocab.json", vocab_json_}, {"merges.txt", merges_txt_}};
}

bool Gpt2Bpe::can_cut_before(std::string_view text, size_t pos) const {
  return pos >= 2 && pos < text.size() && text[pos - 1] == '\n' && ascii_graphic(text[pos - 2]) &&
         ascii_graphic(text[pos]);
}

}  // namespace gt
