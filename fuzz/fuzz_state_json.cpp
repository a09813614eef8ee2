// fuzz/fuzz_state_json.cpp: a checkpoint's state.json (train/checkpoint.h) on any bytes, then what
// a resume does with it: the data identity in words and compared, the saved configuration read
// back as TOML.
#include "fuzz/fuzz_util.h"
#include "train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gt;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_errors([&] {
    CheckpointState st = parse_checkpoint_state(text, "state.json");
    if (!st.data.is_null()) {
      (void)describe_data(st.data);
      (void)same_data(st.data, st.data);
    }
    (void)st.tokenizer.vocab_size();
    TrainConfig cfg;
    load_config_string(st.config_toml, "state.json: config_toml", cfg);
  });
  return 0;
}
