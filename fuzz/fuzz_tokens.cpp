// fuzz/fuzz_tokens.cpp: pre-tokenized data files (train/data.h) on any bytes: llm.c token shards
// (1024-byte header: magic, version, token count; uint16 tokens) and nanoGPT raw uint16 .bin
// files. The first byte picks the format, the block size and the vocabulary bound.
#include "fuzz/fuzz_data_common.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gt;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const uint8_t o = fuzz::take_byte(in);
  TrainConfig cfg;
  cfg.data_format = (o & 1) ? "nanogpt" : "llmc";
  cfg.model.block_size = 1 + ((o >> 1) & 7);
  cfg.model.vocab_size = (o & 16) ? 0 : 1000;  // 0: GPT-2's 50257
  cfg.val_fraction = (o & 32) ? 0.0 : 0.25;
  cfg.data_path = fuzz::write_file("tokens.bin", in);
  fuzz::expect_errors([&] { fuzz::load_and_sample(cfg); });
  return 0;
}
