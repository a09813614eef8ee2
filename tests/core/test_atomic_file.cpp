// core/atomic_file.h: a whole file appears at once under its name, with the mode asked for, and
// a file not committed leaves nothing behind (the old file stays as it was).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace fs = std::filesystem;

namespace gt {
namespace {

struct Dir {
  fs::path path = fs::temp_directory_path() / ("gt_atomic_test_" + std::to_string(::getpid()));
  Dir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  size_t entries() const {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator(path), fs::directory_iterator()));
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(AtomicFile, WritesTheWholeFileWithTheModeAskedFor) {
  Dir d;
  const std::string p = (d.path / "state.json").string();
  write_file_atomic(p, "old\n");
  write_file_atomic(p, "new\n", 0600);
  EXPECT_EQ(slurp(p), "new\n");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "a private file stays private (serve's lease state)";
  EXPECT_EQ(d.entries(), 1u) << "no temporary file left";
}

TEST(AtomicFile, AFileNotCommittedLeavesTheOldOneAsItWas) {
  Dir d;
  const std::string p = (d.path / "train_000000.bin").string();
  write_file_atomic(p, "old");
  {
    AtomicFile f(p);
    f.write("0123456789");
    EXPECT_TRUE(fs::exists(f.temp_path()));
    EXPECT_EQ(slurp(p), "old") << "the old file stays whole until commit()";
  }
  EXPECT_EQ(slurp(p), "old");
  EXPECT_EQ(d.entries(), 1u) << "the temporary file was removed";
  {
    AtomicFile f(p);
    f.write("0123456789");
    f.write_at("AB", 0);  // a header written last, as token shards do
    f.commit();
  }
  EXPECT_EQ(slurp(p), "AB23456789");
  EXPECT_EQ(d.entries(), 1u);
}

TEST(AtomicFile, AMissingFolderIsNamed) {
  Dir d;
  const std::string p = (d.path / "none" / "summary.json").string();
  try {
    write_file_atomic(p, "x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gt
