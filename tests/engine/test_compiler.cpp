// The compiler with the project's flags: GCC 12 with AVX-512 (-march=native) built constant
// initializer lists wrong (CMakeLists.txt turns its SLP vectorizer off); a regression here
// would silently change configurations, tables and test expectations everywhere.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

namespace gt {
namespace {

// noinline: the constants must be built in the function, as in real code
__attribute__((noinline)) std::vector<int64_t> longs() { return {1, 1, 0, 0}; }
__attribute__((noinline)) std::vector<int> ints() { return {1, 1, 1, 1, 0, 0, 0, 0}; }
__attribute__((noinline)) std::vector<double> doubles() { return {1.0, 1.0, 0.0, 0.0}; }
__attribute__((noinline)) std::vector<size_t> sizes() { return {1, 1, 0, 0}; }

TEST(Compiler, ConstantInitializerListsAreBuiltAsWritten) {
  const std::vector<int64_t> l = longs();
  EXPECT_EQ(l[2], 0);
  EXPECT_EQ(l[3], 0);
  const std::vector<int> i = ints();
  for (int k = 4; k < 8; ++k) EXPECT_EQ(i[k], 0) << k;
  const std::vector<double> d = doubles();
  EXPECT_EQ(d[2], 0.0);
  EXPECT_EQ(sizes()[3], 0u);
}

}  // namespace
}  // namespace gt
