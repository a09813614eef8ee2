// core/xxhash64.h against the reference implementation's published values, and the streaming
// form against the one-shot one for every split of inputs around the 32-byte stripe.
#include "core/xxhash64.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace gt {
namespace {

uint64_t of(const std::string& s, uint64_t seed = 0) { return xxh64(s.data(), s.size(), seed); }

TEST(Xxh64, MatchesTheReferenceValues) {
  // XXH64(input, len, 0) of xxHash 0.8 (also python-xxhash's xxh64().hexdigest())
  EXPECT_EQ(of(""), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(of("a"), 0xD24EC4F1A98C6E5Bull);
  EXPECT_EQ(of("abc"), 0x44BC2CF5AD770999ull);
  EXPECT_EQ(of("Nobody inspects the spammish repetition"), 0xFBCEA83C8A378BF1ull);  // > 32 bytes
  EXPECT_EQ(xxh64_hex(0xEF46DB3751D8E999ull), "ef46db3751d8e999");
  EXPECT_EQ(xxh64_hex(1), "0000000000000001");
}

TEST(Xxh64, PiecesGiveTheSameHashAsTheWhole) {
  std::string s;
  for (int i = 0; i < 300; ++i) s.push_back(static_cast<char>(i * 37 + 11));
  for (size_t len : {0, 1, 3, 4, 7, 8, 31, 32, 33, 63, 64, 65, 100, 300})
    for (size_t cut = 0; cut <= len; cut += 1 + len / 7) {
      const std::string w = s.substr(0, len);
      Xxh64 h(5);
      h.update(w.data(), cut);
      h.update(w.data() + cut, len - cut);
      EXPECT_EQ(h.digest(), of(w, 5)) << len << " " << cut;
    }
  EXPECT_NE(of(s), of(s, 1));  // the seed changes it
  std::string t = s;
  t[150] ^= 1;
  EXPECT_NE(of(s), of(t));  // so does one bit
}

TEST(Xxh64, FilesAreHashedWholeAndNamedWhenUnreadable) {
  const auto path = std::filesystem::temp_directory_path() / "gt-xxh64-test.bin";
  std::string s(3 * (1 << 20) + 17, 'x');  // more than one read
  s[123456] = 'y';
  std::ofstream(path, std::ios::binary) << s;
  uint64_t bytes = 0;
  EXPECT_EQ(xxh64_file(path.string(), &bytes), of(s));
  EXPECT_EQ(bytes, s.size());
  std::filesystem::remove(path);
  try {
    xxh64_file(path.string());
    ADD_FAILURE() << "a missing file was hashed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gt-xxh64-test.bin: cannot read"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gt
