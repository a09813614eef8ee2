// fuzz/fuzz_config_toml.cpp: the training configuration (train/config.h) on any text: TOML
// parsing, key types and ranges (validate), and the resolved configuration written and read back
// (what a checkpoint stores and a resume reads) giving the same configuration. Lines of the form
// key=value are also applied as --set overrides.
#include <cstdlib>
#include <sstream>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "train/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gt;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_errors([&] {
    TrainConfig cfg;
    load_config_string(text, "fuzz.toml", cfg);
    cfg.validate();
    // a valid configuration survives its own TOML form unchanged
    const std::string toml = cfg.to_toml();
    TrainConfig back;
    load_config_string(toml, "to_toml()", back);
    if (back.to_toml() != toml) std::abort();
  });
  std::vector<std::string> sets;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.find('=') != std::string::npos) sets.push_back(line);
  fuzz::expect_errors([&] {
    TrainConfig cfg;
    apply_overrides(sets, cfg);
    cfg.validate();
  });
  return 0;
}
