#include "train/data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/json_number.h"

namespace gt {
namespace {

// splitmix64 (Steele et al. 2014): a tiny, well-mixed generator with 64-bit state.
uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Splits UTF-8 into code points (as strings); throws at the first invalid sequence.
std::vector<std::string> utf8_chars(const std::string& s, const std::string& where) {
  std::vector<std::string> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 2;
    if (ok && len > 1) {
      // RFC 3629: no overlong forms, no UTF-16 surrogates (U+D800..U+DFFF), nothing above U+10FFFF
      uint32_t cp = c & (0x7f >> len);
      for (size_t k = 1; k < len; ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
      static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMin[len] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
    }
    if (!ok)
      throw Error(
          fmt::format("{}: invalid UTF-8 at byte {}; expected UTF-8 text (or use "
                      "data.tokenizer = \"byte\")",
                      where, i));
    out.emplace_back(s, i, len);
    i += len;
  }
  return out;
}

std::vector<int32_t> load_u16(const std::string& bytes, size_t offset, size_t n) {
  std::vector<int32_t> t(n);
  const unsigned char* p = reinterpret_cast<const unsigned char*>(bytes.data()) + offset;
  for (size_t i = 0; i < n; ++i) t[i] = p[2 * i] | (p[2 * i + 1] << 8);
  return t;
}

std::vector<int32_t> load_tokens_file(const std::string& path, const std::string& format) {
  std::string bytes = read_file(path);
  if (format == "llmc") {
    if (bytes.size() < 1024)
      throw Error(
          fmt::format("{}: {} bytes is shorter than llm.c's 1024-byte header", path, bytes.size()));
    int32_t hdr[256];
    std::memcpy(hdr, bytes.data(), sizeof(hdr));
    if (hdr[0] != 20240520)
      throw Error(
          fmt::format("{}: magic number {} is not llm.c's 20240520; is this a nanoGPT "
                      "raw .bin? then set data.format = \"nanogpt\"",
                      path, hdr[0]));
    if (hdr[1] != 1)
      throw Error(
          fmt::format("{}: llm.c token file version {}; expected 1 (uint16 tokens)", path, hdr[1]));
    size_t n = static_cast<uint32_t>(hdr[2]);
    if (bytes.size() != 1024 + 2 * n)
      throw Error(
          fmt::format("{}: header says {} tokens ({} bytes) but the file has {} bytes "
                      "of tokens; the file is truncated or corrupt",
                      path, n, 2 * n, bytes.size() - 1024));
    return load_u16(bytes, 1024, n);
  }
  if (bytes.size() % 2 != 0)
    throw Error(
        fmt::format("{}: {} bytes is odd; a nanoGPT .bin holds uint16 tokens", path, bytes.size()));
  return load_u16(bytes, 0, bytes.size() / 2);
}

}  // namespace

std::string read_file(const std::string& path) {
  if (path.empty()) throw Error("no data file given; set data.path or pass --data PATH");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(fmt::format("{}: no such file", path));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(fmt::format("{}: cannot open for reading", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int Tokenizer::vocab_size() const {
  if (kind == "char") return static_cast<int>(vocab.size());
  if (kind == "byte") return 256;
  return ids_vocab_size;
}

std::vector<int32_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids;
  if (kind == "byte") {
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  if (kind != "char") throw Error("this run's data is pre-tokenized (ids): text cannot be encoded");
  std::map<std::string, int32_t> index;
  for (size_t i = 0; i < vocab.size(); ++i) index[vocab[i]] = static_cast<int32_t>(i);
  for (auto& ch : utf8_chars(text, "text")) {
    auto it = index.find(ch);
    if (it == index.end())
      throw Error(fmt::format("character '{}' is not in the model's vocabulary of {} characters",
                              ch, vocab.size()));
    ids.push_back(it->second);
  }
  return ids;
}

std::string Tokenizer::decode(const int32_t* ids, size_t n) const {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (kind == "char" && ids[i] >= 0 && ids[i] < (int32_t)vocab.size())
      s += vocab[ids[i]];
    else if (kind == "byte")
      s += static_cast<char>(ids[i]);
    else
      s += fmt::format("<{}>", ids[i]);
  }
  return s;
}

nlohmann::json Tokenizer::to_json() const {
  nlohmann::json j;
  j["kind"] = kind;
  if (kind == "char") j["vocab"] = vocab;
  if (kind == "ids") j["vocab_size"] = ids_vocab_size;
  return j;
}

Tokenizer Tokenizer::from_json(const nlohmann::json& j, const std::string& where) {
  Tokenizer t;
  try {
    t.kind = j.at("kind").get<std::string>();
    if (t.kind == "char")
      t.vocab = j.at("vocab").get<std::vector<std::string>>();
    else if (t.kind == "ids")
      t.ids_vocab_size = json_integer_or_throw<int>(
          j.at("vocab_size"), fmt::format("{}: tokenizer.vocab_size", where), 1);
    else if (t.kind != "byte")
      throw Error(
          fmt::format("{}: tokenizer kind '{}'; expected char, byte or ids", where, t.kind));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: tokenizer: {}", where, e.what()));
  }
  return t;
}

Tokenizer Tokenizer::build_char(const std::string& text, const std::string& where) {
  auto chars = utf8_chars(text, where);
  std::sort(chars.begin(), chars.end());
  chars.erase(std::unique(chars.begin(), chars.end()), chars.end());
  Tokenizer t;
  t.kind = "char";
  t.vocab = std::move(chars);
  return t;
}

TokenData load_data(const TrainConfig& cfg, const Tokenizer* tokenizer) {
  TokenData d;
  const int T = cfg.model.block_size;
  std::vector<int32_t> all;
  if (cfg.data_format == "text") {
    std::string text = read_file(cfg.data_path);
    if (text.empty()) throw Error(fmt::format("{}: the file is empty", cfg.data_path));
    if (tokenizer)
      d.tokenizer = *tokenizer;
    else if (cfg.tokenizer == "char")
      d.tokenizer = Tokenizer::build_char(text, cfg.data_path);
    else
      d.tokenizer.kind = "byte";
    try {
      all = d.tokenizer.encode(text);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", cfg.data_path, e.what()));
    }
    if (!cfg.data_val_path.empty()) {
      std::string vt = read_file(cfg.data_val_path);
      try {
        d.val = d.tokenizer.encode(vt);
      } catch (const Error& e) {
        throw Error(fmt::format("{}: {}", cfg.data_val_path, e.what()));
      }
    }
  } else {
    all = load_tokens_file(cfg.data_path, cfg.data_format);
    if (all.empty()) throw Error(fmt::format("{}: holds no tokens", cfg.data_path));
    if (!cfg.data_val_path.empty()) d.val = load_tokens_file(cfg.data_val_path, cfg.data_format);
    d.tokenizer.kind = "ids";
    int v = tokenizer ? tokenizer->vocab_size() : cfg.model.vocab_size;
    if (v <= 0) v = 50257;  // GPT-2's vocabulary, what llm.c and nanoGPT shards hold
    d.tokenizer.ids_vocab_size = v;
    auto check_range = [&](const std::vector<int32_t>& t, const std::string& path) {
      for (size_t i = 0; i < t.size(); ++i)
        if (t[i] >= v)
          throw Error(fmt::format("{}: token {} at position {} is not below model.vocab_size = {}",
                                  path, t[i], i, v));
    };
    check_range(all, cfg.data_path);
    check_range(d.val, cfg.data_val_path);
  }
  if (cfg.data_val_path.empty() && cfg.val_fraction > 0) {
    size_t n_val = static_cast<size_t>(all.size() * cfg.val_fraction);
    d.val.assign(all.end() - n_val, all.end());
    all.resize(all.size() - n_val);
  }
  d.train = std::move(all);
  if ((int64_t)d.train.size() < T + 1)
    throw Error(
        fmt::format("{}: the training split has {} tokens, fewer than model.block_size + "
                    "1 = {}; give more data or a smaller model.block_size",
                    cfg.data_path, d.train.size(), T + 1));
  if (!d.val.empty() && (int64_t)d.val.size() < T + 1)
    throw Error(fmt::format(
        "{}: the validation split has {} tokens, fewer than model.block_size "
        "+ 1 = {}; raise data.val_fraction, give more data, or lower "
        "model.block_size",
        cfg.data_val_path.empty() ? cfg.data_path : cfg.data_val_path, d.val.size(), T + 1));
  return d;
}

BatchSampler::BatchSampler(const std::vector<int32_t>& tokens, int B, int T, uint64_t seed)
    : tokens_(tokens), B_(B), T_(T), seed_(seed) {
  check((int64_t)tokens.size() >= T + 1, "BatchSampler: fewer than T+1 tokens");
  start_epoch(0);
}

void BatchSampler::start_epoch(int64_t e) {
  epoch_ = e;
  cursor_ = 0;
  uint64_t s = seed_ * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(e) + 1;
  const int64_t N = tokens_.size();
  int64_t max_off = std::min<int64_t>(T_ - 1, N - 1 - T_);
  offset_ = max_off > 0 ? static_cast<int64_t>(splitmix64(s) % (max_off + 1)) : 0;
  int64_t n = (N - 1 - offset_) / T_;
  order_.resize(n);
  for (int64_t i = 0; i < n; ++i) order_[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(order_[i], order_[splitmix64(s) % (i + 1)]);
}

void BatchSampler::next(int32_t* inputs, int32_t* targets) {
  for (int b = 0; b < B_; ++b) {
    if (cursor_ == (int64_t)order_.size()) start_epoch(epoch_ + 1);
    const int32_t* w = tokens_.data() + offset_ + order_[cursor_++] * T_;
    std::memcpy(inputs + (int64_t)b * T_, w, sizeof(int32_t) * T_);
    std::memcpy(targets + (int64_t)b * T_, w + 1, sizeof(int32_t) * T_);
  }
}

void BatchSampler::restore(int64_t epoch, int64_t cursor) {
  start_epoch(epoch);
  check(cursor >= 0 && cursor <= (int64_t)order_.size(),
        fmt::format("data position {} is outside epoch {} of {} windows; was the data file "
                    "changed since the checkpoint?",
                    cursor, epoch, order_.size()));
  cursor_ = cursor;
}

void eval_batch(const std::vector<int32_t>& tokens, int B, int T, int64_t i, int32_t* inputs,
                int32_t* targets) {
  int64_t n = ((int64_t)tokens.size() - 1) / T;
  for (int b = 0; b < B; ++b) {
    int64_t k = (i * B + b) % n;
    const int32_t* w = tokens.data() + k * T;
    std::memcpy(inputs + (int64_t)b * T, w, sizeof(int32_t) * T);
    std::memcpy(targets + (int64_t)b * T, w + 1, sizeof(int32_t) * T);
  }
}

nlohmann::json data_identity(const TrainConfig& cfg, const TokenData& d) {
  auto file = [](const std::string& path) -> std::pair<std::string, int64_t> {
    if (path.empty()) return {"", -1};
    std::error_code ec;
    auto abs = std::filesystem::absolute(path, ec);
    auto bytes = std::filesystem::file_size(path, ec);
    return {ec ? path : abs.lexically_normal().string(), ec ? -1 : static_cast<int64_t>(bytes)};
  };
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a offset basis and prime (Fowler, Noll, Vo)
  for (const auto* stream : {&d.train, &d.val})
    for (int32_t t : *stream) {
      h ^= static_cast<uint32_t>(t);
      h *= 0x100000001b3ull;
    }
  auto [path, bytes] = file(cfg.data_path);
  auto [val_path, val_bytes] = file(cfg.data_val_path);
  nlohmann::ordered_json j;
  j["path"] = path;
  j["bytes"] = bytes;
  j["val_path"] = val_path;
  j["val_bytes"] = val_bytes;
  j["format"] = cfg.data_format;
  j["tokenizer"] = d.tokenizer.kind;
  j["vocab_size"] = d.tokenizer.vocab_size();
  j["train_tokens"] = d.train.size();
  j["val_tokens"] = d.val.size();
  j["tokens_fnv1a64"] = fmt::format("{:016x}", h);
  return j;
}

bool same_data(const nlohmann::json& a, const nlohmann::json& b) {
  for (const char* k : {"tokens_fnv1a64", "train_tokens", "val_tokens", "tokenizer", "vocab_size"})
    if (a.value(k, nlohmann::json()) != b.value(k, nlohmann::json())) return false;
  return true;
}

std::string describe_data(const nlohmann::json& id) {
  // a checkpoint's record as it is: a field of another type than written is shown as JSON
  auto field = [&](const char* key) -> std::string {
    if (!id.is_object() || !id.contains(key)) return "?";
    const auto& v = id.at(key);
    return v.is_string() ? v.get<std::string>()
                         : v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  std::string s = fmt::format("{} ({} bytes", field("path"), field("bytes"));
  if (id.is_object() && id.contains("val_path") && id.at("val_path") != "")
    s += fmt::format(", validation {}", field("val_path"));
  s += fmt::format(", {} tokenizer of {} tokens, {} + {} tokens, hash {})", field("tokenizer"),
                   field("vocab_size"), field("train_tokens"), field("val_tokens"),
                   field("tokens_fnv1a64"));
  return s;
}

}  // namespace gt
