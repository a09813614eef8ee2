// fuzz/fuzz_text_data.cpp: text training data (train/data.h) on any bytes: invalid UTF-8, byte
// order marks, CRLF, NUL bytes. The first byte picks the tokenizer (char or byte), the block size
// and whether the part after the first 0xFF byte is a separate validation file. A char
// vocabulary must encode and decode its own text back exactly.
#include <cstdlib>

#include "fuzz/fuzz_data_common.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gt;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const uint8_t o = fuzz::take_byte(in);
  TrainConfig cfg;
  cfg.data_format = "text";
  cfg.tokenizer = (o & 1) ? "byte" : "char";
  cfg.model.block_size = 1 + ((o >> 1) & 7);
  std::string_view train = in, val;
  if (o & 16) {
    const size_t cut = in.find('\xff');
    if (cut != std::string_view::npos) {
      train = in.substr(0, cut);
      val = in.substr(cut + 1);
      cfg.data_val_path = fuzz::write_file("val.txt", val);
    }
  }
  cfg.data_path = fuzz::write_file("train.txt", train);
  fuzz::expect_errors([&] { fuzz::load_and_sample(cfg); });
  fuzz::expect_errors([&] {
    const std::string text(train);
    Tokenizer t = Tokenizer::build_char(text, "train.txt");
    std::vector<int32_t> ids = t.encode(text);
    if (t.decode(ids.data(), ids.size()) != text) std::abort();
    Tokenizer back = Tokenizer::from_json(t.to_json(), "tokenizer");
    if (back.encode(text) != ids) std::abort();
  });
  return 0;
}
