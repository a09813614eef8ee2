// train/data.h: data loading and seeded, resumable batch sampling (tokenizers are in
// train/tokenizer.h). Formats: plain UTF-8 text (any tokenizer), llm.c token shards
// (256 x int32 header: magic 20240520, version 1, token count; then uint16 tokens) and
// nanoGPT's raw uint16 .bin files.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "train/config.h"
#include "train/tokenizer.h"

namespace gt {

/// Train and validation token streams with their tokenizer.
struct TokenData {
  Tokenizer tokenizer;
  std::vector<int32_t> train;
  std::vector<int32_t> val;  ///< empty when there is no validation split
};

/// Loads cfg.data_path (and cfg.data_val_path if set) in cfg.data_format, splitting off the
/// last cfg.val_fraction as validation unless a validation file is given. When `tokenizer`
/// is not null it is used (from a checkpoint) instead of building one (Tokenizer::from_config;
/// a bpe vocabulary is trained on the text before the validation split). For llmc and nanogpt
/// files, data.path (and data.val_path) may be a glob pattern ("dir/train_*.bin"): the shards
/// are read in name order; their tokenizer is `tokenizer` when given and not "ids", else the
/// byte, gpt2 or bpe (with data.tokenizer_model) one the configuration names (so that samples
/// decode to text and bits per byte are known), else "ids". Throws gt::Error for a
/// missing or empty file, a bad header, a size that disagrees with the token count, a token
/// outside the vocabulary, or a split shorter than block_size + 1 tokens.
TokenData load_data(const TrainConfig& cfg, const Tokenizer* tokenizer);

/// The validation tokens of cfg with a checkpoint's `tokenizer`, what eval scores: all of
/// data.val_path when it is set (data.path is not read; `train` stays empty), else load_data's
/// split of data.path. Throws as load_data, and when the validation tokens are fewer than
/// block_size + 1.
TokenData load_validation_data(const TrainConfig& cfg, const Tokenizer& tokenizer);

/// The files a data path names in `format` (data.format): for llmc and nanogpt a glob pattern's
/// matches in name order (the order load_data reads them), else the path itself. Throws
/// gt::Error naming a pattern that matches nothing.
std::vector<std::string> data_files(const std::string& path, const std::string& format);

/// What a run is trained on, as its checkpoint records it: {"path", "bytes", "val_path",
/// "val_bytes" (absolute paths; bytes of the files, -1 where unreadable), "format",
/// "tokenizer" (its kind), "vocab_size", "tokenizer_fingerprint" (Tokenizer::fingerprint()),
/// "train_tokens", "val_tokens", "tokens_fnv1a64" (FNV-1a, 64-bit, over the train then the
/// validation token ids as 32-bit words, in hex: the content, the tokenizer and the split all
/// change it)}.
nlohmann::json data_identity(const TrainConfig& cfg, const TokenData& d);
/// Whether two data identities name the same tokens (hash, counts, tokenizer, vocabulary, and
/// the tokenizer's fingerprint where both record one; the paths may differ: a moved file is
/// the same data).
bool same_data(const nlohmann::json& a, const nlohmann::json& b);
/// A data identity in words: "PATH (N bytes, char tokenizer of V tokens, T tokens, hash H)".
std::string describe_data(const nlohmann::json& id);

/// Bytes of text per target token over exactly the windows that `eval_steps` calls of
/// eval_batch(tokens, B, T, i) read, the denominator of bits per byte; 0 when the tokenizer
/// does not know the bytes of its ids ("ids" data: pre-tokenized shards without a tokenizer).
double eval_bytes_per_token(const Tokenizer& tok, const std::vector<int32_t>& tokens, int B, int T,
                            int eval_steps);
/// Validation loss in bits per byte: loss_nats / ln 2 / bytes_per_token (bits per token over
/// bytes per token; comparable across tokenizers, as in Gao et al. 2020, The Pile, sec. 3);
/// nullopt when bytes_per_token is 0 (unknown).
std::optional<double> bits_per_byte(double loss_nats, double bytes_per_token);

/// Reads a whole file; throws gt::Error naming it when it is missing or unreadable.
std::string read_file(const std::string& path);

/// Training batches: each epoch cuts the stream into windows of T+1 tokens at a random
/// offset and visits them in a seeded random order; B windows per batch. The state
/// (epoch, cursor) resumes the exact sequence.
class BatchSampler {
 public:
  BatchSampler(const std::vector<int32_t>& tokens, int B, int T, uint64_t seed);
  /// Fills inputs (B,T) and targets (B,T) (targets are inputs shifted by one).
  void next(int32_t* inputs, int32_t* targets);
  /// Passes over `windows` windows (> = 0) as next() would draw them, without copying: the
  /// windows other ranks of a data-parallel job draw (each rank keeps the whole position).
  void skip(int64_t windows);
  int64_t epoch() const { return epoch_; }
  int64_t cursor() const { return cursor_; }
  /// Restores a position saved from epoch() and cursor().
  void restore(int64_t epoch, int64_t cursor);

 private:
  void start_epoch(int64_t e);
  const std::vector<int32_t>& tokens_;
  int B_, T_;
  uint64_t seed_;
  int64_t epoch_ = 0, cursor_ = 0, offset_ = 0;
  std::vector<int64_t> order_;
};

/// Validation batch i: windows i*B .. i*B+B-1 of T+1 tokens from the start of the stream,
/// wrapping around; the same for every call.
void eval_batch(const std::vector<int32_t>& tokens, int B, int T, int64_t i, int32_t* inputs,
                int32_t* targets);

}  // namespace gt
