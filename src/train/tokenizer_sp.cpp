#include "train/tokenizer_sp.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdio>
#include <regex>
#include <thread>
#include <unordered_map>

#include "core/error.h"

// Exported by libsentencepiece (src/common.h), not declared in its public headers: the level
// below which its log lines are dropped (0 info, 1 warning, 2 error).
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
}

namespace gt {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// SentencePiece's trainer drops a sentence longer than max_sentence_length bytes (with a
// warning that names an option greentrain does not have): a text of long lines (minified, one
// paragraph per line) would be trained on its short lines alone. So lines are cut into pieces of
// at most kMaxPieceBytes, at the last space before the limit (else at a character boundary).
constexpr size_t kMaxSentenceBytes = 16384, kMaxPieceBytes = 8192;

// The training text's lines, as SentencePiece's trainer reads sentences; long ones in pieces.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::string& text) : text_(text) { advance(); }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void advance() {
    while (pos_ < text_.size()) {
      size_t nl = text_.find('\n', pos_);
      if (nl == std::string::npos) nl = text_.size();
      size_t end = nl;
      if (end - pos_ > kMaxPieceBytes) {
        end = pos_ + kMaxPieceBytes;
        while (end > pos_ && (static_cast<unsigned char>(text_[end]) & 0xC0) == 0x80) --end;
        const size_t space = text_.rfind(' ', end - 1);
        if (space != std::string::npos && space > pos_ + kMaxPieceBytes / 2) end = space + 1;
        line_.assign(text_, pos_, end - pos_);
        pos_ = end;
      } else {
        line_.assign(text_, pos_, end - pos_);
        pos_ = nl + 1;
      }
      if (!line_.empty()) return;
    }
    done_ = true;
  }
  const std::string& text_;
  std::string line_;
  size_t pos_ = 0;
  bool done_ = false;
};

// SentencePiece's refusals of a vocabulary size (trainer_interface.cc, 0.1.97) in greentrain's
// words: the bound for this text; any other refusal as SentencePiece words it.
std::string training_error(const std::string& sp) {
  std::smatch m;
  // "Vocabulary size is smaller than required_chars. 260 vs 316. Increase vocab_size or ..."
  if (std::regex_search(sp, m, std::regex(R"(smaller than required_chars\. (\d+) vs (\d+))"))) {
    const int need = std::stoi(m[2].str());
    return fmt::format(
        "too small for this text: it needs at least {} ids (an unknown id, 256 bytes and the {} "
        "characters that make up 99.95% of it); expected {} or more",
        need, need - 257, need);
  }
  // "Vocabulary size too high (5000). Please set it to a value <= 1234."
  if (std::regex_search(sp, m,
                        std::regex(R"(too high \((\d+)\)\. Please set it to a value <= (\d+))")))
    return fmt::format(
        "too large for this text: it holds pieces for at most {} ids; expected {} "
        "or less",
        m[2].str(), m[2].str());
  return "SentencePiece could not train a BPE vocabulary: " + sp;
}

}  // namespace

SentencePieceBpe::SentencePieceBpe()
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
}

SentencePieceBpe::~SentencePieceBpe() = default;

std::shared_ptr<SentencePieceBpe> SentencePieceBpe::train(const std::string& text, int vocab_size,
                                                          const std::string& setting) {
  sentencepiece::logging::SetMinLogLevel(1);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  // Options of SentencePiece's trainer (src/sentencepiece_model.proto, TrainerSpec and
  // NormalizerSpec): BPE with byte fallback; the identity normalization, no dummy prefix and
  // whitespace kept as it is, so that the ids decode to the text's own bytes.
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "false"},
      {"max_sentence_length", std::to_string(kMaxSentenceBytes)},  // no piece is longer
      {"input_sentence_size", "2000000"},
      {"shuffle_input_sentence", "true"},
      {"unk_id", "0"},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"pad_id", "-1"},
      {"num_threads", std::to_string(threads)},
  };
  LineIterator lines(text);
  if (lines.done())  // SentencePiece says "[!sentences_.empty()]"
    throw Error(
        fmt::format("{}: no text to train a BPE vocabulary on (only empty lines)", setting));
  std::string model;
  auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &model);
  if (!status.ok()) throw Error(fmt::format("{}: {}", setting, training_error(status.ToString())));
  return load(model, "the trained SentencePiece model");
}

std::shared_ptr<SentencePieceBpe> SentencePieceBpe::load(const std::string& model_bytes,
                                                         const std::string& where) {
  std::shared_ptr<SentencePieceBpe> t(new SentencePieceBpe());
  auto status = t->sp_->LoadFromSerializedProto(model_bytes);
  if (!status.ok())
    throw Error(fmt::format("{}: not a SentencePiece model: {}", where, status.ToString()));
  t->model_ = model_bytes;
  const int n = t->sp_->GetPieceSize();
  t->bytes_.resize(n);
  for (int id = 0; id < n; ++id) {
    const std::string& piece = t->sp_->IdToPiece(id);
    if (t->sp_->IsByte(id)) {  // "<0xAB>"
      unsigned b = 0;
      if (std::sscanf(piece.c_str(), "<0x%2X>", &b) != 1 || b > 255)
        throw Error(
            fmt::format("{}: byte piece '{}' (id {}); expected <0x00>..<0xFF>", where, piece, id));
      t->bytes_[id] = std::string(1, static_cast<char>(b));
      t->byte_ids_[b] = id;
    } else if (t->sp_->IsControl(id) || t->sp_->IsUnknown(id) || t->sp_->IsUnused(id)) {
      t->bytes_[id] = "";
    } else {
      std::string s = piece;
      for (size_t p; (p = s.find(kSpaceMark)) != std::string::npos;)
        s.replace(p, kSpaceMark.size(), " ");
      t->bytes_[id] = std::move(s);
    }
  }
  if (!t->byte_fallback())
    std::fprintf(stderr,
                 "greentrain: note: %s has no byte fallback: characters outside its vocabulary "
                 "become its unknown id and do not decode to the same text\n",
                 where.c_str());
  return t;
}

void SentencePieceBpe::encode(std::string_view text, std::vector<int32_t>& out) const {
  // line by line (after each newline is a place to cut: can_cut_before): SentencePiece's
  // encoding slows down on long inputs (measured: 0.12 M tokens/s on 4 MiB pieces)
  std::vector<int> ids;
  auto encode_span = [&](std::string_view s, size_t at) {
    if (s.empty()) return;
    auto status = sp_->Encode(s, &ids);
    if (!status.ok())
      throw Error(fmt::format("SentencePiece could not encode the text at byte {}: {}", at,
                              status.ToString()));
    out.insert(out.end(), ids.begin(), ids.end());
  };
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end + 1;
    const std::string_view line = text.substr(pos, end - pos);
    // U+2581 (SentencePiece's space mark) as its three byte ids, so it decodes to itself
    size_t at = 0;
    while (true) {
      size_t mark = byte_fallback() ? line.find(kSpaceMark, at) : std::string_view::npos;
      if (mark == std::string_view::npos) mark = line.size();
      encode_span(line.substr(at, mark - at), pos + at);
      if (mark == line.size()) break;
      for (unsigned char c : kSpaceMark) out.push_back(byte_ids_[c]);
      at = mark + kSpaceMark.size();
    }
    pos = end;
  }
}

std::string SentencePieceBpe::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    throw Error(fmt::format("token id {} is outside the SentencePiece vocabulary of {} tokens", id,
                            vocab_size()));
  return bytes_[id];
}

std::map<std::string, std::string> SentencePieceBpe::files() const {
  return {{"tokenizer.model", model_}};
}

bool SentencePieceBpe::can_cut_before(std::string_view text, size_t pos) const {
  return pos >= 1 && pos < text.size() && text[pos - 1] == '\n';
}

}  // namespace gt
