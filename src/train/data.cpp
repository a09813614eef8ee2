#include "train/data.h"

#include <fmt/format.h>
#include <glob.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

#include "core/bytes_json.h"
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

// The files a glob pattern matches, in name order; throws naming the pattern when none does.
std::vector<std::string> glob_files(const std::string& pattern, const std::string& format) {
  glob_t g{};
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> paths(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
  globfree(&g);
  if (paths.empty())
    throw Error(
        fmt::format("{}: no file matches this pattern; expected {} token shards", pattern, format));
  std::sort(paths.begin(), paths.end());
  return paths;
}

// One token file, or every file a glob pattern matches, in name order (llm.c's shards).
std::vector<int32_t> load_token_files(const std::string& pattern, const std::string& format) {
  if (pattern.find_first_of("*?[") == std::string::npos) return load_tokens_file(pattern, format);
  std::vector<int32_t> all;
  for (const auto& p : glob_files(pattern, format)) {
    auto t = load_tokens_file(p, format);
    all.insert(all.end(), t.begin(), t.end());
  }
  return all;
}

}  // namespace

std::string read_file(const std::string& path) {
  if (path.empty()) throw Error("no data file given; set data.path or pass --data PATH");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(path + (std::filesystem::is_directory(path, ec)
                            ? ": a folder; expected a data file (text, or tokens from "
                              "`greentrain prepare`)"
                            : ": no such file"));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(fmt::format("{}: cannot open for reading", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

namespace {

// A text file's tokens; errors name the file.
std::vector<int32_t> text_tokens(const std::string& path, const std::string& text,
                                 const Tokenizer& tok) {
  try {
    return tok.encode(text);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
}

// The tokenizer of token files: a checkpoint's (`given`), or the one the configuration names
// (byte, gpt2, or bpe with a model: the shards' own, so that they decode to text); else "ids"
// (no text) of the checkpoint's or model.vocab_size's vocabulary.
Tokenizer shard_tokenizer(const TrainConfig& cfg, const Tokenizer* given) {
  if (given && given->kind != "ids") return *given;
  if (!given && (cfg.tokenizer == "gpt2" || cfg.tokenizer == "byte" ||
                 (cfg.tokenizer == "bpe" && !cfg.tokenizer_model.empty())))
    return Tokenizer::from_config(cfg, "", cfg.data_path);
  Tokenizer t;
  t.kind = "ids";
  int v = given ? given->vocab_size() : cfg.model.vocab_size;
  if (v <= 0) v = 50257;  // GPT-2's vocabulary, what llm.c and nanoGPT shards hold
  t.ids_vocab_size = v;
  return t;
}

// Token files' ids, each checked against the tokenizer's vocabulary.
std::vector<int32_t> shard_tokens(const std::string& path, const std::string& format,
                                  const Tokenizer& tok) {
  std::vector<int32_t> t = load_token_files(path, format);
  const int v = tok.vocab_size();
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] >= v)
      throw Error(
          tok.kind == "ids"
              ? fmt::format("{}: token {} at position {} is not below model.vocab_size = {}", path,
                            t[i], i, v)
              : fmt::format("{}: token {} at position {} is not below the {} tokenizer's "
                            "{} ids (data.tokenizer); were the shards made with another "
                            "tokenizer?",
                            path, t[i], i, tok.kind, v));
  return t;
}

void check_val_size(const TrainConfig& cfg, const std::vector<int32_t>& val) {
  const int T = cfg.model.block_size;
  if ((int64_t)val.size() < T + 1)
    throw Error(fmt::format(
        "{}: the validation split has {} tokens, fewer than model.block_size "
        "+ 1 = {}; raise data.val_fraction, give more data, or lower "
        "model.block_size",
        cfg.data_val_path.empty() ? cfg.data_path : cfg.data_val_path, val.size(), T + 1));
}

}  // namespace

TokenData load_data(const TrainConfig& cfg, const Tokenizer* tokenizer) {
  TokenData d;
  const int T = cfg.model.block_size;
  std::vector<int32_t> all;
  if (cfg.data_format == "text") {
    std::string text = read_file(cfg.data_path);
    if (text.empty()) throw Error(fmt::format("{}: the file is empty", cfg.data_path));
    if (tokenizer) {
      d.tokenizer = *tokenizer;
    } else {
      // a trained vocabulary learns from the training part only (the split is in tokens, so
      // this is the text before the validation split up to a fraction of a line)
      std::string_view train_text = text;
      if (cfg.tokenizer == "bpe" && cfg.data_val_path.empty() && cfg.val_fraction > 0) {
        size_t cut = static_cast<size_t>(text.size() * (1 - cfg.val_fraction));
        while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
        train_text = train_text.substr(0, cut);
      }
      d.tokenizer = Tokenizer::from_config(cfg, std::string(train_text), cfg.data_path);
    }
    all = text_tokens(cfg.data_path, text, d.tokenizer);
    if (!cfg.data_val_path.empty())
      d.val = text_tokens(cfg.data_val_path, read_file(cfg.data_val_path), d.tokenizer);
  } else {
    d.tokenizer = shard_tokenizer(cfg, tokenizer);
    all = shard_tokens(cfg.data_path, cfg.data_format, d.tokenizer);
    if (all.empty()) throw Error(fmt::format("{}: holds no tokens", cfg.data_path));
    if (!cfg.data_val_path.empty())
      d.val = shard_tokens(cfg.data_val_path, cfg.data_format, d.tokenizer);
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
  if (!d.val.empty()) check_val_size(cfg, d.val);
  return d;
}

TokenData load_validation_data(const TrainConfig& cfg, const Tokenizer& tokenizer) {
  TokenData d;
  if (cfg.data_val_path.empty()) {
    d = load_data(cfg, &tokenizer);
  } else if (cfg.data_format == "text") {
    d.tokenizer = tokenizer;
    d.val = text_tokens(cfg.data_val_path, read_file(cfg.data_val_path), d.tokenizer);
  } else {
    d.tokenizer = shard_tokenizer(cfg, &tokenizer);
    d.val = shard_tokens(cfg.data_val_path, cfg.data_format, d.tokenizer);
  }
  check_val_size(cfg, d.val);
  return d;
}

std::vector<std::string> data_files(const std::string& path, const std::string& format) {
  if (format == "text" || path.find_first_of("*?[") == std::string::npos) return {path};
  return glob_files(path, format);
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

void BatchSampler::skip(int64_t windows) {
  while (windows > 0) {
    if (cursor_ == (int64_t)order_.size()) start_epoch(epoch_ + 1);
    const int64_t n = std::min<int64_t>(windows, (int64_t)order_.size() - cursor_);
    cursor_ += n;
    windows -= n;
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

double eval_bytes_per_token(const Tokenizer& tok, const std::vector<int32_t>& tokens, int B, int T,
                            int eval_steps) {
  if ((int64_t)tokens.size() < T + 1 || B <= 0 || eval_steps <= 0) return 0;
  std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
  int64_t bytes = 0, count = 0;
  for (int i = 0; i < eval_steps; ++i) {
    eval_batch(tokens, B, T, i, inputs.data(), targets.data());
    for (int32_t id : targets) {
      int64_t b = tok.token_byte_count(id);
      if (b < 0) return 0;
      bytes += b;
      ++count;
    }
  }
  return count > 0 ? static_cast<double>(bytes) / count : 0;
}

std::optional<double> bits_per_byte(double loss_nats, double bytes_per_token) {
  if (!(bytes_per_token > 0)) return std::nullopt;
  return loss_nats / std::log(2.0) / bytes_per_token;
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
  j["path"] = bytes_to_json(path);  // a Linux path is bytes: UTF-8 or not, it round-trips
  j["bytes"] = bytes;
  j["val_path"] = bytes_to_json(val_path);
  j["val_bytes"] = val_bytes;
  j["format"] = cfg.data_format;
  j["tokenizer"] = d.tokenizer.kind;
  j["vocab_size"] = d.tokenizer.vocab_size();
  j["tokenizer_fingerprint"] = d.tokenizer.fingerprint();
  j["train_tokens"] = d.train.size();
  j["val_tokens"] = d.val.size();
  j["tokens_fnv1a64"] = fmt::format("{:016x}", h);
  return j;
}

bool same_data(const nlohmann::json& a, const nlohmann::json& b) {
  for (const char* k : {"tokens_fnv1a64", "train_tokens", "val_tokens", "tokenizer", "vocab_size"})
    if (a.value(k, nlohmann::json()) != b.value(k, nlohmann::json())) return false;
  // recorded since subword tokenizers: compared where both identities have it
  const char* fp = "tokenizer_fingerprint";
  if (a.contains(fp) && b.contains(fp) && a[fp] != b[fp]) return false;
  return true;
}

std::string describe_data(const nlohmann::json& id) {
  // a checkpoint's record as it is: a field of another type than written is shown as JSON
  auto field = [&](const char* key) -> std::string {
    if (!id.is_object() || !id.contains(key)) return "?";
    const auto& v = id.at(key);
    if (v.is_object() && v.contains("shown") && v.at("shown").is_string())
      return v.at("shown").get<std::string>();  // a path that is not UTF-8 (core/bytes_json.h)
    return v.is_string() ? shown_bytes(v.get<std::string>()) : dump_json(v);
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
