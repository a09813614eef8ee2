// train/subword.h: the interface of a subword vocabulary (SentencePiece BPE in
// tokenizer_sp.h, GPT-2's byte-level BPE in tokenizer_gpt2.h). A model encodes UTF-8 text
// to ids and decodes each id to the exact bytes it stands for, so decoding the ids of a text
// gives back its bytes.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gt {

class SubwordModel {
 public:
  virtual ~SubwordModel() = default;
  /// Number of ids (V); every id encode() returns is in [0, V).
  virtual int vocab_size() const = 0;
  /// Appends the ids of `text` (valid UTF-8; the caller checks) to `out`. Thread-safe.
  virtual void encode(std::string_view text, std::vector<int32_t>& out) const = 0;
  /// The bytes id stands for ("" for a control id such as <unk>); throws gt::Error for an id
  /// outside [0, V).
  virtual std::string token_bytes(int32_t id) const = 0;
  /// The files that describe the vocabulary, name -> content, as stored in a checkpoint
  /// ("tokenizer.model"; or "vocab.json" and "merges.txt").
  virtual std::map<std::string, std::string> files() const = 0;
  /// Where `text` may be cut so that encoding the two parts gives the ids of the whole: true
  /// when a cut just before byte `pos` (0 < pos < text.size()) is such a place.
  virtual bool can_cut_before(std::string_view text, size_t pos) const = 0;
};

}  // namespace gt
