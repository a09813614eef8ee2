// train/shards.h: `greentrain prepare`: tokenizes text files that may be larger than memory
// into llm.c token shards (a 256 x int32 header: magic 20240520, version 1, token count; then
// uint16 tokens), train_000000.bin, ... and val_000000.bin, ..., on all cores, streaming: only
// a window of pieces (threads x 2 x piece_bytes of text) is in memory at a time. `train` reads
// them with data.format = "llmc" and a glob data.path ("DIR/train_*.bin").
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/tokenizer.h"

namespace gt {

struct PrepareOptions {
  double val_fraction = 0.1;  ///< the last fraction of the bytes of all inputs -> val shards
  int64_t shard_tokens = 100'000'000;  ///< tokens per shard (llm.c's fineweb.py: 1e8)
  size_t piece_bytes = 4u << 20;       ///< text per piece that one thread encodes
  int threads = 0;                     ///< 0: all cores; at most kMaxThreads (train/config.h)
  /// out_dir may hold an earlier prepare's output: its shards and tokenizer files are removed
  /// first (else a folder that is not empty is refused: check_prepare_output).
  bool overwrite = false;
};

/// Throws gt::Error naming the option (`--val-fraction`, `--shard-tokens`, `--threads`), its
/// value and the range expected: val_fraction in [0, 1), shard_tokens in [1, 2^31 - 1] (llm.c's
/// header holds an int32 count), threads in [0, kMaxThreads]. prepare_shards() calls it; call it
/// also before any slow work (training a vocabulary).
void check_prepare_options(const PrepareOptions& opt);

/// A prepare owns its output folder: throws gt::Error naming `out_dir` when it holds anything
/// and `overwrite` is false (an earlier, larger prepare's stale shards would be read by train
/// with the new ones). With overwrite, lists nothing and changes nothing (prepare_shards removes
/// the old shards). Call it before any slow work (training a vocabulary).
void check_prepare_output(const std::string& out_dir, bool overwrite);

/// What prepare_shards() did; also what the progress callback sees as it goes.
struct PrepareProgress {
  int64_t bytes_done = 0, bytes_total = 0;  ///< bytes of text read of all inputs
  int64_t train_tokens = 0, val_tokens = 0;
  double seconds = 0;               ///< wall time so far (s)
  std::vector<std::string> shards;  ///< the files written, in order
};

/// Tokenizes `inputs` (UTF-8 text files, read in order) with `tok` (byte, bpe or gpt2; a
/// gpt2 vocabulary's <|endoftext|> is put before each file, as llm.c's fineweb.py does before
/// each document) into out_dir, which is created; also writes out_dir/tokenizer.json
/// (Tokenizer::to_json) and the tokenizer's files. Each shard is written under a temporary
/// name and renamed when complete. `progress` is called about every 0.25 s and at the end.
/// Throws gt::Error naming the file for a missing input, invalid UTF-8 (with its byte offset),
/// a vocabulary of more than 65536 ids (shards hold uint16), or a write failure; and, before
/// anything is written, when the inputs hold no text at all, or out_dir is not empty and
/// opt.overwrite is false (check_prepare_output).
PrepareProgress prepare_shards(const std::vector<std::string>& inputs, const Tokenizer& tok,
                               const std::string& out_dir, const PrepareOptions& opt,
                               const std::function<void(const PrepareProgress&)>& progress);

/// The first `max_bytes` of the inputs, concatenated, cut after the last newline (what a bpe
/// vocabulary is trained on when prepare has no model). Throws gt::Error naming the file and
/// its own byte offset at the first invalid UTF-8 in what it read of that file.
std::string read_prefix(const std::vector<std::string>& inputs, size_t max_bytes);

}  // namespace gt
