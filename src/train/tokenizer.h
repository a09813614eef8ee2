// train/tokenizer.h: the tokenizer of a run. Kinds: "char" (one id per Unicode code point of
// the training text), "byte" (ids 0..255), "bpe" (SentencePiece BPE with byte fallback,
// train/tokenizer_sp.h), "gpt2" (GPT-2's byte-level BPE from vocab.json and merges.txt,
// train/tokenizer_gpt2.h) and "ids" (pre-tokenized data: no text). A checkpoint stores it in
// state.json and, for bpe and gpt2, in the files of files() beside it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/subword.h"

namespace gt {

struct TrainConfig;

/// Maps text to token ids and back. Copies share the subword model (immutable).
struct Tokenizer {
  std::string kind = "byte";
  std::vector<std::string> vocab;               ///< char: the UTF-8 string of each id
  int ids_vocab_size = 0;                       ///< vocabulary of "ids" data
  std::shared_ptr<const SubwordModel> subword;  ///< bpe and gpt2

  int vocab_size() const;
  /// Throws gt::Error naming the first character not in a char vocabulary, or the first
  /// invalid UTF-8 byte for bpe and gpt2 (which encode any valid UTF-8). bpe and gpt2 encode
  /// long texts in pieces on all cores (cut where SubwordModel::can_cut_before allows, so the
  /// ids are those of the whole text).
  std::vector<int32_t> encode(const std::string& text) const;
  /// The bytes of the ids, concatenated; an id without text ("ids" kind, or outside the
  /// vocabulary) is written "<id>".
  std::string decode(const int32_t* ids, size_t n) const;
  /// The number of bytes of text id stands for; -1 where unknown ("ids" kind, id outside).
  int64_t token_byte_count(int32_t id) const;
  /// The files a checkpoint stores beside state.json, name -> content (none for char, byte, ids).
  std::map<std::string, std::string> files() const;
  /// FNV-1a 64-bit (Fowler, Noll, Vo) over the kind, the vocabulary and the files, in hex: two
  /// tokenizers with the same fingerprint map text to the same ids.
  std::string fingerprint() const;
  /// {"kind", "vocab_size", "fingerprint"} and, per kind, "vocab" (char) or "files" (bpe, gpt2).
  nlohmann::json to_json() const;
  /// Reads what to_json() wrote; bpe and gpt2 read their files from `dir`. Throws gt::Error
  /// (naming `where`, the state.json) when the JSON does not describe a tokenizer, a file is
  /// missing, or the files' fingerprint differs from the recorded one.
  static Tokenizer from_json(const nlohmann::json& j, const std::string& where,
                             const std::string& dir = "");
  /// Character vocabulary of `text` (UTF-8; throws gt::Error at the first invalid byte).
  static Tokenizer build_char(const std::string& text, const std::string& where);
  /// The tokenizer cfg asks for (data.tokenizer, data.vocab_size, data.tokenizer_model,
  /// data.tokenizer_path); char and bpe without a model are built from `training_text`
  /// (`where` names it). Throws gt::Error naming the setting and its value where a file cannot
  /// be read (the model, GPT-2's folder), the text is not UTF-8 or the vocabulary size does not
  /// fit the text. `option_prefix` says how messages name the settings: "data." (a
  /// configuration's keys: data.vocab_size = 300) or "--" (a command's options, as `greentrain
  /// prepare` takes them: --vocab-size 300, '-' for '_').
  static Tokenizer from_config(const TrainConfig& cfg, const std::string& training_text,
                               const std::string& where,
                               const std::string& option_prefix = "data.");
};

/// Throws gt::Error naming `where` and the byte offset (plus `base`, where s starts in its
/// file) of the first invalid UTF-8 sequence (overlong forms, surrogates and code points above
/// U+10FFFF are invalid, RFC 3629), and `use_byte`, the setting that reads any bytes.
void check_utf8(std::string_view s, const std::string& where, size_t base = 0,
                const char* use_byte = "data.tokenizer = \"byte\"");

/// The offsets at which `text` is cut into pieces of about `piece_bytes` for `model` (each a
/// place where model.can_cut_before holds), ascending, without 0 and text.size().
std::vector<size_t> cut_points(const SubwordModel& model, std::string_view text,
                               size_t piece_bytes);

}  // namespace gt
