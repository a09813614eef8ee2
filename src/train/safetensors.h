// train/safetensors.h: the safetensors format (Hugging Face): an 8-byte little-endian
// header length, a JSON header {"name": {"dtype", "shape", "data_offsets": [begin, end]}},
// then the raw little-endian data. Only F32 tensors are written and read here.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace gt {

/// One f32 tensor to write.
struct NamedTensor {
  std::string name;
  Shape shape;
  const float* data;
};

/// Writes tensors (in the given order) and string metadata to `path` directly; callers that
/// need atomicity write into a temporary folder. Throws gt::Error when the file can't be written.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// A safetensors file read into memory, with its header checked against its size.
class SafetensorsFile {
 public:
  /// Throws gt::Error naming the file when it is missing, truncated or its header is invalid.
  explicit SafetensorsFile(const std::string& path);
  bool has(const std::string& name) const { return index_.count(name) > 0; }
  /// Copies tensor `name` into dst after checking dtype F32 and the expected shape; throws
  /// gt::Error naming the file and tensor when it is missing or differs.
  void read(const std::string& name, const Shape& expected, float* dst) const;
  std::vector<std::string> names() const;
  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Entry {
    std::string dtype;
    Shape shape;
    size_t begin, end;
  };
  std::string path_;
  std::string bytes_;
  size_t data_start_ = 0;
  std::map<std::string, Entry> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace gt
