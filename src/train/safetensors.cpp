#include "train/safetensors.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_number.h"
#include "train/data.h"

namespace gt {

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json hdr;
  if (!metadata.empty()) hdr["__metadata__"] = metadata;
  size_t off = 0;
  for (auto& t : tensors) {
    size_t n = static_cast<size_t>(t.shape.numel()) * sizeof(float);
    hdr[t.name] = {{"dtype", "F32"}, {"shape", t.shape.dims}, {"data_offsets", {off, off + n}}};
    off += n;
  }
  std::string h = hdr.dump();
  while ((8 + h.size()) % 8 != 0) h += ' ';
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(fmt::format("{}: cannot open for writing", path));
  uint64_t hl = h.size();
  f.write(reinterpret_cast<const char*>(&hl), 8);
  f.write(h.data(), h.size());
  for (auto& t : tensors)
    f.write(reinterpret_cast<const char*>(t.data), t.shape.numel() * sizeof(float));
  f.flush();
  if (!f) throw Error(fmt::format("{}: write failed (disk full?)", path));
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  bytes_ = read_file(path);
  if (bytes_.size() < 8)
    throw Error(
        fmt::format("{}: {} bytes is too short for a safetensors file", path, bytes_.size()));
  uint64_t hl;
  std::memcpy(&hl, bytes_.data(), 8);
  if (hl > bytes_.size() - 8)
    throw Error(fmt::format("{}: header length {} exceeds the file size {}; the file is truncated",
                            path, hl, bytes_.size()));
  data_start_ = 8 + hl;
  nlohmann::json hdr;
  try {
    hdr = nlohmann::json::parse(bytes_.substr(8, hl));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: header is not valid JSON: {}", path, e.what()));
  }
  size_t data_bytes = bytes_.size() - data_start_;
  for (auto& [name, v] : hdr.items()) {
    if (name == "__metadata__") {
      for (auto& [k, mv] : v.items())
        if (mv.is_string()) metadata_[k] = mv.get<std::string>();
      continue;
    }
    Entry e;
    try {
      e.dtype = v.at("dtype").get<std::string>();
      // whole numbers only: a float such as 1e300 is not converted (that is undefined)
      const auto& shape = v.at("shape");
      if (!shape.is_array()) throw Error("shape must be an array of sizes");
      for (const auto& d : shape)
        e.shape.dims.push_back(json_integer_or_throw<int64_t>(d, "shape", 0));
      const auto& offs = v.at("data_offsets");
      if (!offs.is_array() || offs.size() != 2) throw Error("data_offsets must have two entries");
      e.begin = json_integer_or_throw<size_t>(offs[0], "data_offsets");
      e.end = json_integer_or_throw<size_t>(offs[1], "data_offsets");
    } catch (const std::exception& ex) {
      throw Error(
          fmt::format("{}: tensor '{}' has an invalid header entry: {}", path, name, ex.what()));
    }
    if (e.end < e.begin || e.end > data_bytes)
      throw Error(
          fmt::format("{}: tensor '{}' ends at byte {} but the file holds {} data bytes; "
                      "the file is truncated",
                      path, name, e.end, data_bytes));
    index_[name] = e;
  }
}

void SafetensorsFile::read(const std::string& name, const Shape& expected, float* dst) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error(fmt::format("{}: tensor '{}' is missing", path_, name));
  const Entry& e = it->second;
  if (e.dtype != "F32")
    throw Error(fmt::format("{}: tensor '{}' has dtype {}; expected F32", path_, name, e.dtype));
  if (!(e.shape == expected))
    throw Error(fmt::format("{}: tensor '{}' has shape {}; expected {}", path_, name, e.shape.str(),
                            expected.str()));
  size_t n = static_cast<size_t>(expected.numel()) * sizeof(float);
  if (e.end - e.begin != n)
    throw Error(fmt::format("{}: tensor '{}' holds {} bytes; expected {}", path_, name,
                            e.end - e.begin, n));
  std::memcpy(dst, bytes_.data() + data_start_ + e.begin, n);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> n;
  for (auto& [k, v] : index_) n.push_back(k);
  return n;
}

}  // namespace gt
