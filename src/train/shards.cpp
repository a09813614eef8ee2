#include "train/shards.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/atomic_file.h"
#include "core/error.h"
#include "train/config.h"
#include "train/tokenizer_gpt2.h"

namespace fs = std::filesystem;

namespace gt {
namespace {

// One split's shards: tokens are appended; every shard_tokens a shard is closed (its header
// written, then renamed from its temporary name).
class ShardWriter {
 public:
  ShardWriter(fs::path dir, std::string split, int64_t per_shard, std::vector<std::string>& done)
      : dir_(std::move(dir)), split_(std::move(split)), per_shard_(per_shard), done_(done) {}
  // an error left the open shard incomplete: AtomicFile removes it; the finished ones are kept
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void add(const std::vector<int32_t>& ids) {
    for (int32_t id : ids) {
      if (!f_) open();
      buf_.push_back(static_cast<uint16_t>(id));
      if (++n_ == per_shard_) close();
    }
    if (buf_.size() >= (1u << 20)) flush();
  }
  void close() {
    if (!f_) return;
    flush();
    int32_t hdr[256] = {20240520, 1, static_cast<int32_t>(n_)};  // llm.c's data header
    f_->write_at(std::string_view(reinterpret_cast<const char*>(hdr), sizeof hdr), 0);
    f_->commit();
    f_.reset();
    done_.push_back(final_.string());
    n_ = 0;
  }

 private:
  void open() {
    final_ = dir_ / fmt::format("{}_{:06d}.bin", split_, index_++);
    f_ = std::make_unique<AtomicFile>(final_.string());  // "<name>.bin.tmp.<pid>" until closed
    const int32_t hdr[256] = {};                         // written when the shard is closed
    f_->write(std::string_view(reinterpret_cast<const char*>(hdr), sizeof hdr));
  }
  void flush() {
    if (f_ && !buf_.empty())
      f_->write(std::string_view(reinterpret_cast<const char*>(buf_.data()), 2 * buf_.size()));
    buf_.clear();
  }
  fs::path dir_;
  std::string split_;
  int64_t per_shard_;
  std::vector<std::string>& done_;
  std::unique_ptr<AtomicFile> f_;
  fs::path final_;
  int index_ = 0;
  int64_t n_ = 0;
  std::vector<uint16_t> buf_;
};

struct Piece {
  std::string text;
  std::string path;
  int64_t file_offset = 0;    ///< where text starts in its file (bytes)
  int64_t global_offset = 0;  ///< where text starts in all inputs (bytes)
  bool file_start = false;
  std::vector<int32_t> ids;
};

// Reads the inputs as pieces of about piece_bytes, each ending where the tokenizer may cut.
class PieceReader {
 public:
  PieceReader(const std::vector<std::string>& inputs, const Tokenizer& tok, size_t piece_bytes,
              int64_t split_at)
      : inputs_(inputs), tok_(tok), piece_bytes_(piece_bytes), split_at_(split_at) {}
  bool next(Piece& p) {
    while (true) {
      if (!f_.is_open()) {
        if (file_ == inputs_.size()) return false;
        f_.open(inputs_[file_], std::ios::binary);
        if (!f_) throw Error(fmt::format("{}: cannot open for reading", inputs_[file_]));
        pending_.clear();
        file_offset_ = 0;
        file_start_ = true;
        eof_ = false;
      }
      size_t cut = find_cut();
      while (cut == 0 && !eof_) {  // read until a place to cut, or the end of the file
        std::string block(piece_bytes_, '\0');
        f_.read(block.data(), block.size());
        block.resize(f_.gcount());
        if (block.empty()) eof_ = true;
        pending_ += block;
        cut = find_cut();
      }
      if (eof_ && cut == 0) cut = pending_.size();
      if (cut == 0) {  // an empty file
        f_.close();
        ++file_;
        continue;
      }
      p.text = pending_.substr(0, cut);
      pending_.erase(0, cut);
      p.path = inputs_[file_];
      p.file_offset = file_offset_;
      p.global_offset = global_offset_;
      p.file_start = file_start_;
      file_start_ = false;
      file_offset_ += cut;
      global_offset_ += cut;
      if (eof_ && pending_.empty()) {
        f_.close();
        ++file_;
      }
      return true;
    }
  }

 private:
  bool cuttable(size_t p) const {
    return !tok_.subword || tok_.subword->can_cut_before(pending_, p);
  }
  // Where to end the next piece, 0 for nowhere yet: at the first place at or after split_at_
  // (the validation split's start) when the piece would span it, else at the last place
  // beyond piece_bytes / 2 once piece_bytes are read.
  size_t find_cut() const {
    if (global_offset_ < split_at_ && split_at_ - global_offset_ < (int64_t)pending_.size())
      for (size_t p = std::max<size_t>(split_at_ - global_offset_, 1); p < pending_.size(); ++p)
        if (cuttable(p)) return p;
    if (pending_.size() < piece_bytes_) return 0;
    if (!tok_.subword) return piece_bytes_;  // bytes: anywhere
    for (size_t p = pending_.size() - 1; p > piece_bytes_ / 2; --p)
      if (cuttable(p)) return p;
    return 0;
  }
  const std::vector<std::string>& inputs_;
  const Tokenizer& tok_;
  size_t piece_bytes_;
  int64_t split_at_;
  size_t file_ = 0;
  std::ifstream f_;
  std::string pending_;
  int64_t file_offset_ = 0, global_offset_ = 0;
  bool file_start_ = false, eof_ = false;
};

}  // namespace

void check_prepare_options(const PrepareOptions& opt) {
  if (!(opt.val_fraction >= 0 && opt.val_fraction < 1))
    throw Error(fmt::format("--val-fraction {}: expected [0, 1)", opt.val_fraction));
  if (opt.shard_tokens <= 0 || opt.shard_tokens > INT32_MAX)
    throw Error(fmt::format("--shard-tokens {}: expected 1 to {}", opt.shard_tokens, INT32_MAX));
  // a negative count was taken as "all cores" without a word; 2^31 threads end the process
  if (opt.threads < 0 || opt.threads > kMaxThreads)
    throw Error(
        fmt::format("--threads {}: expected 0 (all cores) to {}", opt.threads, kMaxThreads));
}

namespace {

// Cuts s before an incomplete UTF-8 sequence at its end (where a byte count cut it).
void drop_partial_utf8(std::string& s) {
  size_t i = s.size(), k = 0;
  while (i > 0 && k < 3 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i, ++k;
  if (i == 0) return;
  const unsigned char c = s[i - 1];
  const size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (s.size() - (i - 1) < len) s.resize(i - 1);
}

}  // namespace

std::string read_prefix(const std::vector<std::string>& inputs, size_t max_bytes) {
  std::string text;
  struct Part {
    const std::string* path;
    size_t begin, end;  // the file's first bytes are text[begin, end)
  };
  std::vector<Part> parts;
  for (const auto& path : inputs) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error(fmt::format("{}: cannot open for reading", path));
    const size_t begin = text.size();
    // in blocks of at most 16 MiB: a large max_bytes allocates only what the files hold
    std::string block;
    while (text.size() < max_bytes && f) {
      block.resize(std::min<size_t>(max_bytes - text.size(), 16u << 20));
      f.read(block.data(), static_cast<std::streamsize>(block.size()));
      text.append(block.data(), static_cast<size_t>(f.gcount()));
    }
    parts.push_back({&path, begin, text.size()});
    if (text.size() >= max_bytes) {
      auto nl = text.rfind('\n');
      if (nl != std::string::npos)
        text.resize(nl + 1);
      else
        drop_partial_utf8(text);
      break;
    }
    if (!text.empty() && text.back() != '\n') text += '\n';
  }
  // each file by its own name and offsets, not the joined sample's
  for (const Part& p : parts)
    if (p.begin < std::min(p.end, text.size()))
      check_utf8(std::string_view(text).substr(p.begin, std::min(p.end, text.size()) - p.begin),
                 *p.path, 0, "--tokenizer byte");
  return text;
}

namespace {

// What a prepare writes into its folder: its shards and tokenizer files.
bool prepare_output(const std::string& name) {
  auto shard = [&](const char* split) {
    return name.rfind(split, 0) == 0 && name.size() > 4 &&
           (name.compare(name.size() - 4, 4, ".bin") == 0 ||
            name.find(".bin.tmp") != std::string::npos);
  };
  return shard("train_") || shard("val_") || name == "tokenizer.json" ||
         name == "tokenizer.model" || name == "vocab.json" || name == "merges.txt";
}

}  // namespace

void check_prepare_output(const std::string& out_dir, bool overwrite) {
  std::error_code ec;
  if (!fs::exists(out_dir, ec)) return;
  if (!fs::is_directory(out_dir, ec))
    throw Error(fmt::format("--out {}: not a folder; expected a folder for the shards", out_dir));
  if (overwrite) return;
  std::vector<std::string> held;
  for (const auto& e : fs::directory_iterator(out_dir, ec)) {
    held.push_back(e.path().filename().string());
    if (held.size() == 3) break;
  }
  if (!held.empty())
    throw Error(fmt::format(
        "--out {}: the folder is not empty (it holds {}{}); a prepare owns its output folder, "
        "since train reads every train_*.bin in it: expected an empty or new folder, or "
        "--overwrite to replace an earlier prepare's shards",
        out_dir, fmt::join(held, ", "), held.size() == 3 ? ", ..." : ""));
}

PrepareProgress prepare_shards(const std::vector<std::string>& inputs, const Tokenizer& tok,
                               const std::string& out_dir, const PrepareOptions& opt,
                               const std::function<void(const PrepareProgress&)>& progress) {
  if (inputs.empty()) throw Error("prepare: no input files given");
  if (tok.kind != "byte" && !tok.subword)
    throw Error(fmt::format("prepare: tokenizer '{}'; expected byte, bpe or gpt2", tok.kind));
  if (tok.vocab_size() > 65536)
    throw Error(fmt::format(
        "prepare: the vocabulary has {} ids; llm.c shards hold uint16 tokens (at most 65536)",
        tok.vocab_size()));
  check_prepare_options(opt);
  PrepareProgress pr;
  for (const auto& path : inputs) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) throw Error(fmt::format("{}: no such file", path));
    pr.bytes_total += static_cast<int64_t>(fs::file_size(path));
  }
  if (pr.bytes_total == 0)
    throw Error(
        fmt::format("{}: no text ({} of 0 bytes); expected text to tokenize",
                    inputs.size() == 1 ? inputs[0] : "the inputs",
                    inputs.size() == 1 ? "a file" : fmt::format("{} files", inputs.size())));
  check_prepare_output(out_dir, opt.overwrite);
  if (opt.overwrite) {  // the earlier prepare's shards go: train would read them with ours
    std::error_code ec;
    if (fs::is_directory(out_dir, ec))
      for (const auto& e : fs::directory_iterator(out_dir, ec))
        if (prepare_output(e.path().filename().string())) fs::remove(e.path(), ec);
  }
  fs::create_directories(out_dir);
  const int64_t val_start =
      static_cast<int64_t>(static_cast<double>(pr.bytes_total) * (1 - opt.val_fraction));
  const int threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
  const auto* gpt2 = dynamic_cast<const Gpt2Bpe*>(tok.subword.get());
  const int32_t eot = gpt2 ? gpt2->eot_id() : -1;
  ShardWriter train(out_dir, "train", opt.shard_tokens, pr.shards);
  ShardWriter val(out_dir, "val", opt.shard_tokens, pr.shards);
  PieceReader reader(inputs, tok, opt.piece_bytes, val_start);
  const auto t0 = std::chrono::steady_clock::now();
  auto last_report = t0;
  std::vector<Piece> batch(static_cast<size_t>(threads) * 2);
  while (true) {
    size_t n = 0;
    while (n < batch.size() && reader.next(batch[n])) ++n;
    if (n == 0) break;
    std::string error;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
      Piece& p = batch[i];
      p.ids.clear();
      try {
        if (p.file_start && eot >= 0) p.ids.push_back(eot);
        if (tok.subword) {
          check_utf8(p.text, p.path, static_cast<size_t>(p.file_offset), "--tokenizer byte");
          tok.subword->encode(p.text, p.ids);
        } else {
          for (unsigned char c : p.text) p.ids.push_back(c);
        }
      } catch (const Error& e) {
#pragma omp critical
        if (error.empty()) error = e.what();
      }
    }
    if (!error.empty()) throw Error(error);
    for (size_t i = 0; i < n; ++i) {
      const bool is_val = batch[i].global_offset >= val_start && opt.val_fraction > 0;
      (is_val ? val : train).add(batch[i].ids);
      (is_val ? pr.val_tokens : pr.train_tokens) += static_cast<int64_t>(batch[i].ids.size());
      pr.bytes_done += static_cast<int64_t>(batch[i].text.size());
    }
    const auto now = std::chrono::steady_clock::now();
    pr.seconds = std::chrono::duration<double>(now - t0).count();
    if (progress && now - last_report > std::chrono::milliseconds(250)) {
      progress(pr);
      last_report = now;
    }
  }
  train.close();
  val.close();
  nlohmann::json j = tok.to_json();
  // temporary name, then rename, errors naming the file: train reads tokenizer.json to decode
  // the shards, so a short or missing one (disk full) must fail here, not there
  for (const auto& [name, content] : tok.files())
    write_file_atomic((fs::path(out_dir) / name).string(), content);
  write_file_atomic((fs::path(out_dir) / "tokenizer.json").string(), j.dump(2) + "\n");
  pr.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (progress) progress(pr);
  return pr;
}

}  // namespace gt
