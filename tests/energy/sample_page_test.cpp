// tests/energy/sample_page_test.cpp: the daemon's shared sample page (energy/sample_page.h):
// what is published is read back whole, never torn while a writer keeps publishing, never when
// too old or too large, and the file is the writer's to remove.
#include "energy/sample_page.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "core/error.h"
#include "test_util.h"

namespace gt::energy {
namespace {

using test::TempDir;

TEST(SamplePage, WhatIsPublishedIsReadBackWhileFresh) {
  TempDir d;
  const std::string path = d / "serve.sock.page";
  SamplePageWriter w(path, 0640, static_cast<gid_t>(-1), 64);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  std::string why;
  auto r = SamplePageReader::open(path, &why);
  ASSERT_TRUE(r) << why;
  EXPECT_FALSE(r->read(10)) << "nothing published yet";
  w.publish(R"({"seq":1})", monotonic_s());
  EXPECT_EQ(r->read(10).value_or("none"), R"({"seq":1})");
  w.publish(R"({"seq":2,"x":[1,2]})", monotonic_s() - 5);  // taken 5 s ago
  EXPECT_FALSE(r->read(1)) << "older than max_age_s: ask the daemon";
  EXPECT_EQ(r->read(10).value_or("none"), R"({"seq":2,"x":[1,2]})");
  w.publish(std::string(65, 'x'), monotonic_s());  // over the 64-byte capacity
  EXPECT_FALSE(r->read(10)) << "a sample that does not fit empties the page";
}

TEST(SamplePage, AReaderNeverSeesATornSampleWhileTheWriterPublishes) {
  TempDir d;
  const std::string path = d / "p";
  SamplePageWriter w(path, 0644, static_cast<gid_t>(-1), 8192);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    // each text is one letter repeated a length that depends on the letter
    for (unsigned i = 0; !stop; ++i) {
      const char c = static_cast<char>('a' + i % 26);
      w.publish(std::string(1000 + 97 * (i % 26), c), monotonic_s());
    }
  });
  std::string why;
  auto r = SamplePageReader::open(path, &why);
  ASSERT_TRUE(r) << why;
  int got = 0;
  const double end = monotonic_s() + 1;  // a second of reads racing the writer
  for (long i = 0; monotonic_s() < end; ++i) {
    auto t = r->read(60);
    if (!t) continue;
    ++got;
    const char c = t->empty() ? '?' : (*t)[0];
    const bool whole = c >= 'a' && c <= 'z' && t->size() == 1000u + 97u * unsigned(c - 'a') &&
                       t->find_first_not_of(c) == std::string::npos;
    if (!whole) {  // EXPECT, not ASSERT: the writer thread is joined below either way
      ADD_FAILURE() << "a torn copy at read " << i << ": " << t->size() << " bytes, first '" << c
                    << "'";
      break;
    }
  }
  stop = true;
  writer.join();
  EXPECT_GT(got, 0);
}

TEST(SamplePage, OtherFilesAreRefusedAndTheWriterRemovesOnlyItsOwnFile) {
  TempDir d;
  std::string why;
  EXPECT_FALSE(SamplePageReader::open(d / "missing", &why));
  EXPECT_NE(why.find("missing"), std::string::npos) << why;
  test::write_file(d / "other", std::string(200, 'z'));
  EXPECT_FALSE(SamplePageReader::open(d / "other", &why));
  EXPECT_NE(why.find("not a sample page"), std::string::npos) << why;
  EXPECT_THROW(SamplePageWriter(d / "no/such/folder/p", 0644), Error);

  const std::string path = d / "p";
  {
    SamplePageWriter first(path, 0644);
    first.publish("{}", monotonic_s());
    SamplePageWriter second(path, 0644);  // a new daemon's page replaces the file
    second.publish(R"({"seq":9})", monotonic_s());
    auto old = SamplePageReader::open(path, &why);
    ASSERT_TRUE(old) << why;
    EXPECT_EQ(old->read(10).value_or("none"), R"({"seq":9})");
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "the last writer removes its file";
  {
    auto second = std::make_unique<SamplePageWriter>(path, 0644);
    SamplePageWriter first(d / "q", 0644);
    std::filesystem::rename(d / "q", path);  // someone else's page at the path now
    second.reset();
    EXPECT_TRUE(std::filesystem::exists(path)) << "a writer leaves a file that is not its own";
  }
}

}  // namespace
}  // namespace gt::energy
