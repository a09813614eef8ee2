// Subword tokenizers (train/tokenizer.h): GPT-2's byte-level BPE reproduces the ids that
// Hugging Face's GPT2TokenizerFast gives on a table of texts (whitespace runs, contractions,
// non-Latin scripts, emoji; tests/engine/data/make_gpt2_table.py made it, with a small
// vocabulary trained by HF tokenizers, as GPT-2's own files cannot be downloaded here); a
// SentencePiece BPE vocabulary gives back the bytes of any UTF-8 text (fuzzed).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "test_helpers.h"
#include "train/config.h"
#include "train/data.h"
#include "train/tokenizer.h"
#include "train/tokenizer_gpt2.h"
#include "train/tokenizer_sp.h"

namespace gt {
namespace {

const std::string kTiny = std::string(GT_TEST_DATA) + "/gpt2-tiny";

nlohmann::json encodings() {
  return nlohmann::json::parse(test::read_bytes(kTiny + "/encodings.json"));
}

TEST(Gpt2Bpe, KnownEncodingsOfHuggingFace) {
  auto bpe = Gpt2Bpe::from_dir(kTiny);
  auto table = encodings();
  EXPECT_EQ(bpe->vocab_size(), table["vocab_size"].get<int>());
  ASSERT_GE(table["encodings"].size(), 40u);
  for (const auto& e : table["encodings"]) {
    const std::string text = e["text"];
    std::vector<int32_t> ids;
    bpe->encode(text, ids);
    EXPECT_EQ(ids, e["ids"].get<std::vector<int32_t>>()) << "text: '" << text << "'";
    std::string back;
    for (int32_t id : ids) back += bpe->token_bytes(id);
    EXPECT_EQ(back, text);
  }
}

// Encoding in pieces on all cores (cut where can_cut_before allows) gives the ids of the whole.
TEST(Gpt2Bpe, PiecesGiveTheIdsOfTheWhole) {
  Tokenizer t;
  t.kind = "gpt2";
  auto bpe = Gpt2Bpe::from_dir(kTiny);
  t.subword = bpe;
  std::string text;
  const auto table = encodings();
  for (const auto& e : table["encodings"]) text += e["text"].get<std::string>() + "\n";
  while (text.size() < (3u << 20)) text += text;  // several 1 MiB pieces
  std::vector<int32_t> whole;
  bpe->encode(text, whole);
  const std::vector<int32_t> pieces = t.encode(text);
  ASSERT_EQ(pieces.size(), whole.size());
  auto diff = std::mismatch(pieces.begin(), pieces.end(), whole.begin());
  EXPECT_TRUE(diff.first == pieces.end())
      << "first difference at id " << diff.first - pieces.begin();
  EXPECT_GE(cut_points(*bpe, text, 1 << 20).size(), 2u);
  // every place the rule allows, on the table's texts: the pieces' ids are the whole's
  std::string small;
  for (const auto& e : table["encodings"]) small += e["text"].get<std::string>() + "\n";
  small += small;
  std::vector<int32_t> small_whole, joined;
  bpe->encode(small, small_whole);
  std::vector<size_t> cuts = cut_points(*bpe, small, 1);
  EXPECT_GE(cuts.size(), 20u);
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(small.size());
  for (size_t i = 0; i + 1 < cuts.size(); ++i)
    bpe->encode(std::string_view(small).substr(cuts[i], cuts[i + 1] - cuts[i]), joined);
  EXPECT_EQ(joined, small_whole);
}

TEST(Gpt2Bpe, BadFilesNameTheFile) {
  test::TempDir d;
  try {
    Gpt2Bpe::from_dir(d.path.string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocab.json: no such file"), std::string::npos)
        << e.what();
  }
  std::string vocab = test::read_bytes(kTiny + "/vocab.json");
  EXPECT_THROW(Gpt2Bpe::from_text(vocab, "#version: 0.2\nnot-a-pair\n", "dir"), Error);
  EXPECT_THROW(Gpt2Bpe::from_text("{\"a\": 0, \"b\": 2}", "", "dir"), Error);  // a gap
}

// Random UTF-8 from every part of Unicode that text holds: ASCII with controls and NUL,
// whitespace runs, Latin-1, SentencePiece's own space mark U+2581, CJK, Arabic, emoji with
// joiners, and the supplementary planes.
std::string random_utf8(std::mt19937_64& g) {
  static const std::pair<uint32_t, uint32_t> ranges[] = {
      {0x00, 0x7F},     {0x20, 0x20},     {0x0A, 0x0A},       {0x61, 0x7A},     {0xA0, 0xFF},
      {0x2581, 0x2581}, {0x0400, 0x04FF}, {0x0600, 0x06FF},   {0x4E00, 0x9FFF}, {0x1F300, 0x1F6FF},
      {0x200D, 0x200D}, {0xE000, 0xF8FF}, {0x10000, 0x10FFFF}};
  std::uniform_int_distribution<int> len(0, 64);
  std::string s;
  for (int n = len(g); n > 0; --n) {
    auto [lo, hi] = ranges[g() % std::size(ranges)];
    uint32_t cp = lo + static_cast<uint32_t>(g() % (hi - lo + 1));
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return s;
}

struct SentencePiece : ::testing::Test {
  static std::shared_ptr<SentencePieceBpe> model() {
    static auto m = SentencePieceBpe::train(
        test::sample_text(60000) + "\nÜber café — naïve 日本語 😀\n  indented  text\n", 400,
        "data.vocab_size = 400");
    return m;
  }
};

TEST_F(SentencePiece, FuzzedUtf8RoundTripsToTheSameBytes) {
  auto sp = model();
  ASSERT_TRUE(sp->byte_fallback());
  std::mt19937_64 g(20);
  for (int i = 0; i < 3000; ++i) {
    const std::string text = random_utf8(g);
    std::vector<int32_t> ids;
    sp->encode(text, ids);
    std::string back;
    for (int32_t id : ids) {
      ASSERT_GT(id, 0) << "the unknown id for text " << ::testing::PrintToString(text);
      back += sp->token_bytes(id);
    }
    ASSERT_EQ(back, text) << "case " << i;
  }
}

TEST_F(SentencePiece, LearnsPiecesAndStoresItsModel) {
  auto sp = model();
  EXPECT_EQ(sp->vocab_size(), 400);
  std::vector<int32_t> ids;
  const std::string text = "the king and queen of a land far away";
  sp->encode(text, ids);
  EXPECT_LT(ids.size(), text.size() / 2) << "BPE merged little";
  auto again = SentencePieceBpe::load(sp->files().at("tokenizer.model"), "tokenizer.model");
  std::vector<int32_t> ids2;
  again->encode(text, ids2);
  EXPECT_EQ(ids, ids2);
}

TEST_F(SentencePiece, PiecesGiveTheIdsOfTheWhole) {
  auto sp = model();
  const std::string text = test::sample_text(8000, 3) + "\n\n  naïve\n\tcafé ▁ 日本\n";
  std::vector<int32_t> whole, joined;
  sp->encode(text, whole);
  std::vector<size_t> cuts = cut_points(*sp, text, 1);
  EXPECT_GE(cuts.size(), 20u);
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(text.size());
  for (size_t i = 0; i + 1 < cuts.size(); ++i)
    sp->encode(std::string_view(text).substr(cuts[i], cuts[i + 1] - cuts[i]), joined);
  EXPECT_EQ(joined, whole);
}

// Issue 31 §6: lines over 16 KiB (SentencePiece drops them, pointing at an option greentrain has
// not) are trained on: the vocabulary of a text whose English is in three long lines, beside 20
// short lines of digits, merges English (it learned 1.03 bytes/token from the digits alone).
TEST_F(SentencePiece, LongLinesAreTrainedOnNotDropped) {
  std::string english = test::sample_text(120000, 5);
  for (char& c : english)
    if (c == '\n') c = ' ';
  std::string text;
  for (int i = 0; i < 20; ++i) text += std::to_string(1000003 * (i + 7)) + "\n";
  text += english.substr(0, 40000) + "\n" + english.substr(40000, 40000) + "\n" +
          english.substr(80000) + "\n";
  auto sp = SentencePieceBpe::train(text, 300, "data.vocab_size = 300");
  std::vector<int32_t> ids;
  const std::string probe = test::sample_text(4000, 9);
  sp->encode(probe, ids);
  const double bytes_per_token = static_cast<double>(probe.size()) / ids.size();
  EXPECT_GT(bytes_per_token, 1.3) << "the long lines were not trained on";
}

TEST_F(SentencePiece, TooLargeAVocabularyNamesTheKey) {
  try {
    SentencePieceBpe::train("tiny text\n", 5000, "data.vocab_size = 5000");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.vocab_size = 5000"), std::string::npos) << e.what();
  }
}

// One path builds the tokenizer of a configuration and of `greentrain prepare`: its messages
// name the configuration's keys, or prepare's options (prepare had a copy of from_config for
// that), each with its value.
TEST(TokenizerTest, FromConfigNamesTheSettingsAsItsCallerDoes) {
  test::TempDir d;
  TrainConfig cfg;
  auto error = [&](const std::string& text, const std::string& prefix) -> std::string {
    try {
      Tokenizer::from_config(cfg, text, "t.txt", prefix);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  auto expect = [&](const std::string& text, const std::string& key, const std::string& option) {
    const std::string as_key = error(text, "data."), as_option = error(text, "--");
    EXPECT_NE(as_key.find(key), std::string::npos) << as_key;
    EXPECT_NE(as_option.find(option), std::string::npos) << as_option;
    EXPECT_EQ(as_option.find("data."), std::string::npos) << as_option;
  };
  cfg.tokenizer = "bpe";
  cfg.tokenizer_model = d.file("none.model");
  expect("", "data.tokenizer_model = '" + cfg.tokenizer_model + "': ",
         "--tokenizer-model " + cfg.tokenizer_model + ": ");
  cfg.tokenizer_model.clear();
  cfg.bpe_vocab_size = 5000;
  expect("tiny text\n", "data.vocab_size = 5000: ", "--vocab-size 5000: ");
  expect("ab\x80\n",
         "t.txt: invalid UTF-8 at byte 2; expected UTF-8 text (or use data.tokenizer = 'byte')",
         "t.txt: invalid UTF-8 at byte 2; expected UTF-8 text (or use --tokenizer byte)");
  cfg.tokenizer = "gpt2";
  cfg.tokenizer_path = d.path.string();
  expect("", "data.tokenizer_path = '" + cfg.tokenizer_path + "': " + cfg.tokenizer_path,
         "--tokenizer-path " + cfg.tokenizer_path + ": " + cfg.tokenizer_path);
}

TEST(TokenizerTest, InvalidUtf8IsRefusedWithItsOffset) {
  for (const std::string bad : {"ab\xC0\xAF", "ab\xED\xA0\x80", "ab\xF4\x90\x80\x80", "ab\x80"}) {
    try {
      check_utf8(bad, "f.txt");
      FAIL() << "accepted " << ::testing::PrintToString(bad);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("f.txt: invalid UTF-8 at byte 2"), std::string::npos)
          << e.what();
    }
  }
}

// The data identity of a checkpoint names the vocabulary: the same tokens counted by another
// vocabulary are other data.
TEST(TokenizerTest, DataIdentityHoldsTheTokenizerFingerprint) {
  TrainConfig cfg;
  TokenData a, b;
  a.tokenizer.kind = b.tokenizer.kind = "char";
  a.tokenizer.vocab = {"a", "b"};
  b.tokenizer.vocab = {"a", "c"};
  a.train = b.train = {0, 1, 0, 1};
  auto ia = data_identity(cfg, a), ib = data_identity(cfg, b);
  EXPECT_NE(ia["tokenizer_fingerprint"], ib["tokenizer_fingerprint"]);
  EXPECT_FALSE(same_data(ia, ib));
  EXPECT_TRUE(same_data(ia, data_identity(cfg, a)));
  ib.erase("tokenizer_fingerprint");  // a checkpoint from before fingerprints
  EXPECT_TRUE(same_data(ia, ib));
}

}  // namespace
}  // namespace gt
