// Regression tests for what the fuzz targets (fuzz/) found in the training module's parsers of
// outside input: state.json, safetensors headers, tokenizer records. Each input here is the
// finding, reduced; before the fix each one crashed, was undefined behaviour or was accepted
// with a wrong value.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "core/bytes_json.h"
#include "core/error.h"
#include "error_of.h"
#include "test_helpers.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/data.h"
#include "train/safetensors.h"

using namespace gt;

namespace {

std::string state_json(const std::string& step, const std::string& tokenizer,
                       const std::string& data_identity = "") {
  return "{\"step\": " + step + ", \"data\": {\"epoch\": 0, \"cursor\": 1}, " +
         "\"tokenizer\": " + tokenizer + ", \"config_toml\": \"\"" +
         (data_identity.empty() ? "" : ", \"data_identity\": " + data_identity) + "}";
}

using gt::test::error_of;

std::string safetensors_bytes(const std::string& header, size_t data_bytes) {
  std::string b(8, '\0');
  uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  return b + header + std::string(data_bytes, '\0');
}

}  // namespace

// fuzz_state_json (173 s): a data identity whose fields have other types than written made the
// resume's description of it throw nlohmann's type_error (an abort in the fuzzer; a message
// naming neither file nor key in the program).
TEST(ParserFindings, DataIdentityOfOtherTypesIsDescribedNotThrown) {
  CheckpointState st = parse_checkpoint_state(
      state_json("4", R"({"kind": "byte"})",
                 R"({"path": 7, "bytes": "100", "tokenizer": 100, "vocab_size": [1]})"),
      "state.json");
  std::string d;
  EXPECT_NO_THROW(d = describe_data(st.data));
  EXPECT_NE(d.find("7 (100 bytes"), std::string::npos) << d;
  EXPECT_NE(d.find("100 tokenizer of [1] tokens"), std::string::npos) << d;
  EXPECT_EQ(describe_data(nlohmann::json::array()),
            "? (? bytes, ? tokenizer of ? tokens, ? + ? tokens, hash ?)");
  // not an object at all: named
  std::string e = error_of([] {
    parse_checkpoint_state(state_json("4", R"({"kind": "byte"})", "[1, 2]"), "state.json");
  });
  EXPECT_NE(e.find("state.json: data_identity is array"), std::string::npos) << e;
}

// Found writing fuzz_state_json (the float needs a dictionary: 10 minutes without one did not
// reach it): a float where state.json has a count was converted to an integer type (1e300:
// undefined behaviour), and an integer out of int's range wrapped (vocab_size 2^32 + 1 became 1).
TEST(ParserFindings, StateJsonCountsAreWholeNumbersInRange) {
  struct Case {
    std::string json, key;
  } cases[] = {
      {state_json("1e300", R"({"kind": "byte"})"), "state.json: step"},
      {state_json("4.0", R"({"kind": "byte"})"), "state.json: step"},
      {state_json("-1", R"({"kind": "byte"})"), "state.json: step"},
      {state_json("4", R"({"kind": "ids", "vocab_size": 4294967297})"),
       "state.json: tokenizer.vocab_size"},
      {state_json("4", R"({"kind": "ids", "vocab_size": 1e20})"),
       "state.json: tokenizer.vocab_size"},
      {state_json("4", R"({"kind": "ids", "vocab_size": 0})"), "state.json: tokenizer.vocab_size"},
  };
  for (const auto& c : cases) {
    std::string e = error_of([&] { parse_checkpoint_state(c.json, "state.json"); });
    EXPECT_NE(e.find(c.key + ": "), std::string::npos) << c.json << "\n -> '" << e << "'";
    EXPECT_NE(e.find("expected an integer in"), std::string::npos) << e;
  }
  CheckpointState ok = parse_checkpoint_state(
      state_json("4", R"({"kind": "ids", "vocab_size": 50257})"), "state.json");
  EXPECT_EQ(ok.step, 4);
  EXPECT_EQ(ok.tokenizer.vocab_size(), 50257);
}

// Issue 31 §5: a negative fp16 loss scale in state.json resumed with exit 0 (negative gradient
// norms, clipping never applied, wrong losses). Every scalar read back is checked as the
// configuration is: finite, in range, named with its file and key.
TEST(ParserFindings, StateJsonScalarsAreCheckedLikeTheConfiguration) {
  auto with = [](const std::string& extra) {
    std::string j = state_json("4", R"({"kind": "byte"})");
    return j.substr(0, j.size() - 1) + ", " + extra + "}";
  };
  const std::pair<std::string, std::string> cases[] = {
      {R"("grad_scaler": {"scale": -1})", "state.json: grad_scaler.scale = -1"},
      {R"("grad_scaler": {"scale": -65536})", "state.json: grad_scaler.scale = -65536"},
      {R"("grad_scaler": {"scale": 0})", "state.json: grad_scaler.scale = 0"},
      {R"("grad_scaler": {"scale": 1e300})", "state.json: grad_scaler.scale = 1e+300"},
      {R"("grad_scaler": {"scale": "65536"})", "state.json: grad_scaler.scale = \"65536\""},
      {R"("last_loss": -3.5)", "state.json: last_loss = -3.5"},
      {R"("last_loss": "low")", "state.json: last_loss = \"low\""},
  };
  for (const auto& [extra, needle] : cases) {
    std::string e = error_of([&] { parse_checkpoint_state(with(extra), "state.json"); });
    EXPECT_NE(e.find(needle), std::string::npos) << extra << "\n -> '" << e << "'";
  }
  auto ok = parse_checkpoint_state(with(R"("grad_scaler": {"scale": 0.5}, "last_loss": null)"),
                                   "state.json");
  EXPECT_EQ(ok.loss_scale, 0.5);
  EXPECT_EQ(ok.last_loss, 0);
}

// The checkpoint's "run" record (the run up to its step, read back by a resume after a session
// killed without its summary): round-trips, nulls stay unknown, a damaged one is named.
TEST(ParserFindings, StateJsonRunRecordRoundTripsAndIsChecked) {
  auto with = [](const std::string& extra) {
    std::string j = state_json("4", R"({"kind": "byte"})");
    return j.substr(0, j.size() - 1) + ", " + extra + "}";
  };
  auto st = parse_checkpoint_state(with(R"("run": {"session": 2, "first_step": 0, "tokens": 128})"),
                                   "state.json");
  EXPECT_EQ(st.run["tokens"], 128);
  auto again = parse_checkpoint_state(checkpoint_state_json(st, "state.json"), "state.json");
  EXPECT_EQ(again.run, st.run);
  st = parse_checkpoint_state(with(R"("run": {"session": null, "tokens": null})"), "state.json");
  EXPECT_TRUE(st.run["tokens"].is_null());
  EXPECT_TRUE(parse_checkpoint_state(with(R"("files": {})"), "state.json").run.is_null())
      << "an older checkpoint has no record";
  EXPECT_NE(error_of([&] {
              parse_checkpoint_state(with(R"("run": 5)"), "state.json");
            }).find("state.json: run is number; expected an object"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_checkpoint_state(with(R"("run": {"tokens": -1})"), "state.json");
            }).find("state.json: run.tokens"),
            std::string::npos);
}

// Issue 31 §1: a path that is not UTF-8 is any bytes in JSON and TOML records: it round-trips
// exactly and is shown readably.
TEST(ParserFindings, BytePathsRoundTripThroughJsonAndToml) {
  const std::string latin1 = "data/shakespeare-\xe9t\xe9.txt";
  EXPECT_FALSE(valid_utf8(latin1));
  EXPECT_TRUE(valid_utf8("caf\xc3\xa9"));
  for (const char* bad : {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"})
    EXPECT_FALSE(valid_utf8(bad)) << bad;
  const auto j = bytes_to_json(latin1);
  EXPECT_EQ(j["shown"], "data/shakespeare-\\xe9t\\xe9.txt");
  EXPECT_EQ(bytes_from_json(nlohmann::json::parse(j.dump()), "x"), latin1);
  EXPECT_EQ(bytes_to_json("plain/path.txt"), "plain/path.txt");
  EXPECT_NE(error_of([] {
              bytes_from_json(nlohmann::json{{"bytes_hex", "zz"}}, "f: path");
            }).find("f: path"),
            std::string::npos);
  std::string all;  // every byte value
  for (int c = 1; c < 256; ++c) all += static_cast<char>(c);
  EXPECT_EQ(bytes_from_json(bytes_to_json(all), "x"), all);
  TrainConfig c;
  c.data_path = latin1;
  c.tokenizer_model = "\xff";
  const std::string toml = c.to_toml();
  EXPECT_TRUE(valid_utf8(toml)) << toml;
  TrainConfig back;
  load_config_string(toml, "config.toml", back);
  EXPECT_EQ(back.data_path, latin1);
  EXPECT_EQ(back.tokenizer_model, "\xff");
}

// Same kind in safetensors headers: float shapes and offsets were converted (1e300: undefined
// behaviour; 4.0 accepted as 4). The safetensors format has integers there.
TEST(ParserFindings, SafetensorsShapesAndOffsetsAreWholeNumbers) {
  test::TempDir d;
  const std::string p = d.file("m.safetensors");
  const char* headers[] = {
      R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,1e300]}})",
      R"({"x":{"dtype":"F32","shape":[1e300],"data_offsets":[0,4]}})",
      R"({"x":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4.0]}})",
      R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
      R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[-4,4]}})",
      R"({"x":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})",
  };
  for (const char* h : headers) {
    test::write_file(p, safetensors_bytes(h, 4));
    std::string e = error_of([&] { SafetensorsFile f(p); });
    EXPECT_NE(e.find(p + ": tensor 'x' has an invalid header entry"), std::string::npos)
        << h << "\n -> '" << e << "'";
  }
  test::write_file(
      p, safetensors_bytes(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
  float v = 1;
  SafetensorsFile(p).read("x", Shape{1}, &v);
  EXPECT_EQ(v, 0.0f);
}

// Found reading the UTF-8 decoder while writing fuzz_text_data (its oracle, encode/decode giving
// the text back, cannot see this): overlong forms (C0 80 is NUL), UTF-16 surrogates and code
// points above U+10FFFF were accepted as characters of a char vocabulary. RFC 3629 forbids them.
TEST(ParserFindings, CharTokenizerRefusesInvalidUtf8Forms) {
  for (const char* bad : {"ab\xC0\x80", "ab\xC1\xBF", "ab\xE0\x80\x80", "ab\xED\xA0\x80",
                          "ab\xF0\x80\x80\x80", "ab\xF4\x90\x80\x80", "ab\xF5\x80\x80\x80"}) {
    std::string e = error_of([&] { Tokenizer::build_char(bad, "t.txt"); });
    EXPECT_NE(e.find("t.txt: invalid UTF-8 at byte 2"), std::string::npos) << e;
  }
  // a byte order mark, CRLF, NUL, and 2-, 3- and 4-byte characters at their bounds are text
  const std::string ok =
      "\xEF\xBB\xBFx\r\n" + std::string(1, '\0') +
      "\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xF0\x90\x80\x80\xF4\x8F\xBF\xBF";
  Tokenizer t = Tokenizer::build_char(ok, "t.txt");
  EXPECT_EQ(t.vocab.size(), 12u);
  auto ids = t.encode(ok);
  EXPECT_EQ(t.decode(ids.data(), ids.size()), ok);
}
