// Helpers shared by the sched tests: temporary folders and files.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gt::sched::test {

/// A fresh temporary folder, removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "gt_sched_XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

}  // namespace gt::sched::test
