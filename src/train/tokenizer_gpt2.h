// train/tokenizer_gpt2.h: GPT-2's byte-level BPE (Radford et al. 2019; openai/gpt-2
// src/encoder.py), read from a Hugging Face folder's vocab.json and merges.txt. Text is split
// by GPT-2's pre-tokenization regular expression (PCRE2 with Unicode properties), each piece's
// bytes are mapped to printable characters (bytes_to_unicode), and the pairs of merges.txt are
// applied lowest rank first. The ids equal those of Hugging Face's GPT2TokenizerFast (tested by
// tests/engine/test_tokenizer.cpp against encodings recorded from it).
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "train/subword.h"

namespace gt {

class Gpt2Bpe : public SubwordModel {
 public:
  /// Reads DIR/vocab.json (token -> id) and DIR/merges.txt (one "a b" pair a line, rank by
  /// line; a first line "#version..." is skipped). Throws gt::Error naming the file for a
  /// missing file, invalid JSON, ids that are not 0..V-1 without gaps, a merges line that is
  /// not two tokens, or a merge whose parts or result are not in the vocabulary.
  static std::shared_ptr<Gpt2Bpe> from_dir(const std::string& dir);
  /// The same from the two files' contents; `where` names their folder in errors.
  static std::shared_ptr<Gpt2Bpe> from_text(const std::string& vocab_json,
                                            const std::string& merges_txt,
                                            const std::string& where);
  ~Gpt2Bpe() override;

  int vocab_size() const override { return static_cast<int>(id_bytes_.size()); }
  /// "<|endoftext|>" in the text, when the vocabulary has it, is that one special id (as
  /// GPT2TokenizerFast does); everything else goes through the regex and the merges.
  void encode(std::string_view text, std::vector<int32_t>& out) const override;
  std::string token_bytes(int32_t id) const override;
  std::map<std::string, std::string> files() const override;
  /// After a newline between two printable ASCII characters: no pre-token spans it and the
  /// regex's look-ahead (\s+(?!\S)) decides the same on both sides.
  bool can_cut_before(std::string_view text, size_t pos) const override;
  /// The id of "<|endoftext|>", -1 when the vocabulary has none.
  int32_t eot_id() const { return eot_id_; }

 private:
  Gpt2Bpe() = default;
  void bpe(std::string_view piece, std::vector<int32_t>& out) const;
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;

  std::string vocab_json_, merges_txt_;
  std::unordered_map<std::string, int32_t> vocab_;  ///< token (bytes_to_unicode form) -> id
  std::unordered_map<std::string, int> ranks_;      ///< "a b" -> merge rank
  std::vector<std::string> id_bytes_;               ///< id -> the bytes it stands for
  std::string byte_char_[256];                      ///< byte -> its printable character (UTF-8)
  int32_t eot_id_ = -1;
  void* regex_ = nullptr;  ///< pcre2_code_8*, compiled once (JIT when available)
};

}  // namespace gt
