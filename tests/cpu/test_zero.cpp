// The CPU backend's zero(): spans of 256 KiB and more are split among the OpenMP team in 64-byte
// lines; every byte of the span must be zero and no byte around it touched, for any team size,
// length (a last partial line) and start address (not 64-byte aligned).
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace gt {
namespace {

/// Restores the team size when a test ends (even by a failed assertion).
struct ZeroTeamGuard {
  const int before = omp_get_max_threads();
  ~ZeroTeamGuard() { omp_set_num_threads(before); }
};

TEST(CpuZero, ZeroesTheSpanAndNothingAroundItOnAnyTeam) {
  auto be = make_backend("cpu");
  const ZeroTeamGuard guard;
  constexpr size_t kGuard = 192;  // bytes checked on either side of the span
  constexpr uint8_t kFill = 0xA5;
  const size_t k256 = size_t{256} << 10;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, k256 - 1, k256, k256 + 7,
                         size_t{1} << 20, (size_t{1} << 20) + 13, 3 * k256 + 65}) {
      for (size_t offset : {size_t{0}, size_t{1}, size_t{60}}) {
        SCOPED_TRACE(::testing::Message()
                     << threads << " threads, " << bytes << " bytes at offset " << offset);
        std::vector<uint8_t> buf(bytes + offset + 2 * kGuard, kFill);
        uint8_t* span = buf.data() + kGuard + offset;
        be->zero(span, bytes);
        size_t nonzero = 0, touched = 0;
        for (size_t i = 0; i < buf.size(); ++i) {
          const uint8_t* at = buf.data() + i;
          const bool inside = at >= span && at < span + bytes;
          if (inside && *at != 0) ++nonzero;
          if (!inside && *at != kFill) ++touched;
        }
        EXPECT_EQ(nonzero, 0u) << "bytes of the span left non-zero";
        EXPECT_EQ(touched, 0u) << "bytes outside the span changed";
      }
    }
  }
}

}  // namespace
}  // namespace gt
