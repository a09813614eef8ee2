// fuzz/fuzz_util.h: what the libFuzzer targets share. Each target feeds one input to a parser of
// outside input (most read files, so the input is written to a file first) and accepts only the
// project's own error (gt::Error: a message naming the file and what was expected). Any other
// exception escapes and aborts, as a crash, hang or unbounded allocation does (bench/fuzz.sh runs
// them with -timeout and -rss_limit_mb).
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/error.h"

namespace gt::fuzz {

/// A folder of this process's own for the inputs written as files: /dev/shm (memory) when there
/// is one, else the system's temporary folder; removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path base =
        fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path d = base / ("gt-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d);
    std::atexit([] {
      std::error_code e;
      fs::remove_all(scratch_dir(), e);
    });
    return d;
  }();
  return dir;
}

/// Writes bytes to scratch_dir()/name (creating its folders) and returns the path.
inline std::string write_file(const std::string& name, std::string_view bytes) {
  auto p = scratch_dir() / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return p.string();
}

/// Runs f; the project's errors are the expected outcome of bad input, anything else escapes.
template <class F>
void expect_errors(F&& f) {
  try {
    f();
  } catch (const gt::Error&) {
  }
}

/// Consumes the first byte of the input as a selector (0 when the input is empty).
inline uint8_t take_byte(std::string_view& s) {
  if (s.empty()) return 0;
  uint8_t b = static_cast<uint8_t>(s.front());
  s.remove_prefix(1);
  return b;
}

}  // namespace gt::fuzz
