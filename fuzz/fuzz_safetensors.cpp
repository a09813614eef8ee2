// fuzz/fuzz_safetensors.cpp: the safetensors reader (train/safetensors.h) on any bytes: the
// header length, the JSON header, dtypes, shapes and data offsets, then reads of every tensor at
// a few shapes.
#include <vector>

#include "fuzz/fuzz_util.h"
#include "train/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gt;
  const std::string path =
      fuzz::write_file("model.safetensors", {reinterpret_cast<const char*>(data), size});
  fuzz::expect_errors([&] {
    SafetensorsFile f(path);
    std::vector<float> buf(64);
    for (const auto& name : f.names())
      for (const Shape& s : {Shape{1}, Shape{4}, Shape{2, 8}, Shape{64}, Shape{}})
        fuzz::expect_errors([&] { f.read(name, s, buf.data()); });
    for (const auto& [k, v] : f.metadata()) (void)(k.size() + v.size());
  });
  return 0;
}
