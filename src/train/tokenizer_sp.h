// train/tokenizer_sp.h: a BPE vocabulary with byte fallback, trained and applied by
// SentencePiece (Kudo and Richardson 2018; Debian's libsentencepiece). Trained with the
// identity normalization, no dummy prefix and no whitespace removal, so that decoding the ids
// of any UTF-8 text gives back its bytes: characters outside the vocabulary become their
// UTF-8 bytes (<0x..> pieces), never an unknown token.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "train/subword.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace gt {

class SentencePieceBpe : public SubwordModel {
 public:
  /// Trains a BPE vocabulary of `vocab_size` ids (1 unknown + 256 bytes + the learned pieces)
  /// on `text`, one sentence per line (lines longer than 16384 bytes are left out of training;
  /// at most 2,000,000 lines, sampled). Throws gt::Error beginning with `setting`, the setting
  /// and its value (e.g. "data.vocab_size = 300" or "--vocab-size 300"), for a text without a
  /// line, a size below what the text needs (the unknown id, the bytes and the characters that
  /// make up 99.95% of it: the bound is named) or above what it supports, or another refusal.
  static std::shared_ptr<SentencePieceBpe> train(const std::string& text, int vocab_size,
                                                 const std::string& setting);
  /// Loads a serialized SentencePiece model (the bytes of a .model file); `where` names it in
  /// errors. A model without byte fallback is accepted with a note on stderr: text outside
  /// its vocabulary then becomes its unknown id and does not decode to the same bytes.
  static std::shared_ptr<SentencePieceBpe> load(const std::string& model_bytes,
                                                const std::string& where);
  ~SentencePieceBpe() override;

  int vocab_size() const override { return static_cast<int>(bytes_.size()); }
  /// SentencePiece's ids, except that U+2581 (SentencePiece's own mark for a space) in the
  /// text is written as its three byte ids, so that it does not decode to a space.
  void encode(std::string_view text, std::vector<int32_t>& out) const override;
  std::string token_bytes(int32_t id) const override;
  /// {"tokenizer.model": the serialized model}.
  std::map<std::string, std::string> files() const override;
  /// After a newline: SentencePiece trains on lines, so no piece holds one.
  bool can_cut_before(std::string_view text, size_t pos) const override;
  /// Whether characters outside the vocabulary become byte ids.
  bool byte_fallback() const { return byte_ids_[0xE2] >= 0; }

 private:
  SentencePieceBpe();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string model_;
  std::vector<std::string> bytes_;  ///< id -> the bytes it stands for
  int32_t byte_ids_[256];           ///< byte -> its <0x..> id, -1 without byte fallback
};

}  // namespace gt
