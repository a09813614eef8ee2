// The SIMT runtime (backend/simt) runs CUDA's execution model as CUDA does: kernels written
// against backend/cuda/simt.h, with their indexing, barriers, shared memory, warp collectives
// and atomics, give what the CUDA programming guide says they give, in every mode (fibers or
// OS threads; any order of blocks and threads); and the mistakes a GPU punishes are errors
// here: a thread that skips a barrier, a lane missing from a collective, a write past a shared
// array or a buffer, a host pointer handed to a kernel, a host read without a copy, a call
// from a thread that selected no device. The planted bugs that only a sanitizer sees (a
// missing __syncthreads under TSan, a shared-memory overrun under ASan) run in a child
// process, whose report the test reads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "backend/simt/internal.h"
#include "core/error.h"
// last: they define threadIdx and the other CUDA names
#include "backend/cuda/simt.h"
// (mma.cuh: the tensor-core fragments and ldmatrix, on the runtime)
#include "backend/cuda/mma.cuh"

namespace gt::simt {
namespace {

using LC = LaunchConfig;

// ---- kernels ---------------------------------------------------------------------------------
__global__ void write_ids(unsigned* out) {
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned n = blockDim.x * blockDim.y * blockDim.z;
  out[b * n + t] = (b << 16) | t;
}

/// Reverses each block's slice through shared memory; `barrier` false plants the classic bug.
__global__ void reverse_block(float* x, int barrier) {
  GT_SHARED(float, tile, 256);
  const unsigned t = threadIdx.x, n = blockDim.x;
  float* row = x + blockIdx.x * n;
  tile[t] = row[t];
  if (barrier) __syncthreads();
  row[t] = tile[n - 1 - t];
}

__global__ void warp_ops(float* sum, int* idx, int* up, int* down, unsigned* ballot, int* any,
                         int* all, int* half_sum) {
  const unsigned lane = threadIdx.x % 32, i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = float(i);
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  sum[i] = v;
  idx[i] = __shfl_sync(0xFFFFFFFFu, int(i), 3);
  up[i] = __shfl_up_sync(0xFFFFFFFFu, int(i), 2, 8);
  down[i] = __shfl_down_sync(0xFFFFFFFFu, int(i), 1, 16);
  ballot[i] = __ballot_sync(0xFFFFFFFFu, lane % 3 == 0);
  any[i] = __any_sync(0xFFFFFFFFu, lane == 7);
  all[i] = __all_sync(0xFFFFFFFFu, lane < 31);
  // two half-warps, each its own mask
  const unsigned mask = lane < 16 ? 0x0000FFFFu : 0xFFFF0000u;
  int h = int(lane);
  for (int o = 8; o > 0; o >>= 1) h += __shfl_xor_sync(mask, h, o);
  half_sum[i] = h;
}

__global__ void count_atomics(int* counter, unsigned* mx, float* fsum) {
  atomicAdd(counter, 1);
  atomicMax(mx, blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(fsum, 0.5f);
}

__global__ void dynamic_sum(const float* x, float* out) {
  GT_DYNAMIC_SHARED(float, s);
  const unsigned t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) s[t] += s[t + half];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

/// ldmatrix.x4 and .x4.trans of a 16 x 16 tile held in shared memory with rows of kLdmStride
/// values (as the flash kernels' tiles: 16-byte rows apart by more than 16 bytes), lane l
/// addressing row l % 16 at column 8 (l / 16) (kernels_attention.cu's frag_a, frag_b_cols2);
/// lane l's registers at plain[4l ..], trans[4l ..]. `skew` (in values) moves every address.
constexpr int kLdmStride = 24;
__global__ void ldmatrix_lanes(const uint16_t* in, uint32_t* plain, uint32_t* trans, int skew) {
  GT_SHARED(uint16_t, tile, 16 * kLdmStride + 8);
  const int l = int(threadIdx.x);
  for (int i = l; i < 16 * kLdmStride; i += 32) tile[i] = in[i];
  __syncthreads();
  const uint16_t* p = tile + (l % 16) * kLdmStride + l / 16 * 8 + skew;
  uint32_t r[4];
  cuda_kernels::ldmatrix_x4(r, p);
  for (int i = 0; i < 4; ++i) plain[4 * l + i] = r[i];
  cuda_kernels::ldmatrix_x4_trans(r, p);
  for (int i = 0; i < 4; ++i) trans[4 * l + i] = r[i];
}

// planted bugs
__global__ void shared_overrun(float* out) {
  GT_SHARED(float, a, 32);
  a[threadIdx.x] = 1.0f;  // launched with 33 threads: one past the end
  __syncthreads();
  out[threadIdx.x] = a[threadIdx.x % 32];
}
__global__ void global_overrun(float* out, int n) {
  out[threadIdx.x] = 1.0f;  // launched with n + 1 threads
  (void)n;
}
__global__ void early_return_before_barrier(float* out) {
  if (threadIdx.x == 5) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}
__global__ void lane_missing_from_shuffle(float* out) {
  if (threadIdx.x == 9) return;
  out[threadIdx.x] = __shfl_xor_sync(0xFFFFFFFFu, 1.0f, 1);
}
__global__ void divergent_collectives(float* out) {
  if (threadIdx.x < 16)
    out[threadIdx.x] = __shfl_xor_sync(0xFFFFFFFFu, 1.0f, 1);
  else
    out[threadIdx.x] = float(__ballot_sync(0xFFFFFFFFu, 1));
}
__global__ void caller_outside_mask(float* out) {
  out[threadIdx.x] = __shfl_xor_sync(0x0000FFFFu, 1.0f, 1);
}
__global__ void too_much_static_shared(float* out) {
  GT_SHARED(float, a, 13000);  // 52,000 bytes: above 48 KiB
  a[threadIdx.x] = 0;
  out[0] = a[0];
}
__global__ void read_one(const float* in, float* out) { out[threadIdx.x] = in[threadIdx.x]; }

// ---- a test's device buffers -------------------------------------------------------------------
class Simt : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = config();
    set_device(0);
    s_ = create_stream();
  }
  void TearDown() override {
    destroy_stream(s_);
    for (void* p : bufs_) device_free(p);
    set_config(saved_);
  }
  template <typename T>
  T* dev(size_t n, T fill = T{}) {
    auto* p = static_cast<T*>(device_malloc(n * sizeof(T)));
    bufs_.push_back(p);
    std::vector<T> h(n, fill);
    memcpy_h2d(s_, p, h.data(), n * sizeof(T));
    return p;
  }
  template <typename T>
  std::vector<T> get(const T* p, size_t n) {
    std::vector<T> h(n);
    memcpy_d2h(s_, h.data(), p, n * sizeof(T));
    return h;
  }
  /// The message of the error the stream reports for the work queued so far ("" when none).
  std::string error_of_sync() {
    try {
      stream_synchronize(s_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  Stream* s_ = nullptr;
  Config saved_;
  std::vector<void*> bufs_;
};

/// Every combination of mode and order the runtime has.
std::vector<Config> all_schedules() {
  std::vector<Config> v;
  for (Mode m : {Mode::fibers, Mode::threads})
    for (Order o : {Order::forward, Order::reverse, Order::random}) {
      Config c = config();
      c.mode = m;
      c.order = o;
      c.seed = 7;
      v.push_back(c);
    }
  return v;
}
std::string name(const Config& c) {
  return std::string(c.mode == Mode::fibers ? "fibers" : "threads") + "/" +
         (c.order == Order::forward   ? "forward"
          : c.order == Order::reverse ? "reverse"
                                      : "random");
}

TEST_F(Simt, EveryThreadOfEveryBlockRunsOnceWithItsIndices) {
  for (const Config& c : all_schedules()) {
    set_config(c);
    const LC lc{Dim3(3, 2, 2), Dim3(5, 4, 3)};
    const size_t n = lc.grid.count() * lc.block.count();
    unsigned* out = dev<unsigned>(n, 0xFFFFFFFFu);
    launch(s_, lc, "write_ids", &write_ids, out);
    const auto h = get(out, n);
    for (size_t i = 0; i < n; ++i) {
      const unsigned b = unsigned(i / lc.block.count()), t = unsigned(i % lc.block.count());
      ASSERT_EQ(h[i], (b << 16) | t) << name(c) << " element " << i;
    }
  }
}

TEST_F(Simt, SharedMemoryAndBarriersReverseABlock) {
  for (const Config& c : all_schedules()) {
    set_config(c);
    std::vector<float> x(4 * 256);
    std::iota(x.begin(), x.end(), 0.0f);
    float* d = dev<float>(x.size());
    memcpy_h2d(s_, d, x.data(), x.size() * 4);
    launch(s_, LC{Dim3(4), Dim3(256)}, "reverse_block", &reverse_block, d, 1);
    const auto h = get(d, x.size());
    for (int b = 0; b < 4; ++b)
      for (int t = 0; t < 256; ++t) ASSERT_EQ(h[b * 256 + t], x[b * 256 + 255 - t]) << name(c);
  }
}

// Without the barrier, the reversal reads entries of the shared array that other threads have
// not written yet: poison (NaN) or stale values in some schedule. Under ThreadSanitizer it is
// a data race (MissingBarrierIsADataRaceUnderTsan).
TEST_F(Simt, AMissingBarrierGivesWrongResultsInSomeSchedule) {
  if (detail::tsan()) GTEST_SKIP() << "under TSan the race itself is reported (next test)";
  bool wrong = false;
  for (const Config& c : all_schedules()) {
    if (c.mode == Mode::threads) continue;  // a race: may or may not show
    set_config(c);
    std::vector<float> x(256);
    std::iota(x.begin(), x.end(), 0.0f);
    float* d = dev<float>(x.size());
    memcpy_h2d(s_, d, x.data(), x.size() * 4);
    launch(s_, LC{Dim3(1), Dim3(256)}, "reverse_block", &reverse_block, d, 0);
    const auto h = get(d, x.size());
    for (int t = 0; t < 256; ++t) wrong |= !(h[t] == x[255 - t]);
  }
  EXPECT_TRUE(wrong) << "the planted missing __syncthreads went unnoticed in every schedule";
}

TEST_F(Simt, WarpShufflesAndVotesAreCudas) {
  for (const Config& c : all_schedules()) {
    set_config(c);
    const int n = 64;
    float* sum = dev<float>(n);
    int *idx = dev<int>(n), *up = dev<int>(n), *down = dev<int>(n), *any = dev<int>(n),
        *all = dev<int>(n), *half = dev<int>(n);
    unsigned* ballot = dev<unsigned>(n);
    launch(s_, LC{Dim3(1), Dim3(n)}, "warp_ops", &warp_ops, sum, idx, up, down, ballot, any, all,
           half);
    const auto hs = get(sum, n);
    const auto hi = get(idx, n), hu = get(up, n), hd = get(down, n), ha = get(any, n),
               hl = get(all, n), hh = get(half, n);
    const auto hb = get(ballot, n);
    unsigned want_ballot = 0;
    for (int l = 0; l < 32; l += 3) want_ballot |= 1u << l;
    for (int i = 0; i < n; ++i) {
      const int w = i / 32, lane = i % 32;
      ASSERT_EQ(hs[i], float(32 * 32 * w + 31 * 16)) << name(c) << " lane " << i;
      ASSERT_EQ(hi[i], w * 32 + 3);
      ASSERT_EQ(hu[i], lane % 8 >= 2 ? i - 2 : i) << "up within groups of 8, lane " << i;
      ASSERT_EQ(hd[i], lane % 16 <= 14 ? i + 1 : i) << "down within groups of 16, lane " << i;
      ASSERT_EQ(hb[i], want_ballot);
      ASSERT_EQ(ha[i], 1);
      ASSERT_EQ(hl[i], 0);
      ASSERT_EQ(hh[i], lane < 16 ? 120 : 16 * 16 + 120) << "half-warp sums, lane " << i;
    }
  }
}

TEST_F(Simt, AtomicsAddUpAcrossBlocks) {
  for (const Config& c : all_schedules()) {
    set_config(c);
    int* counter = dev<int>(1);
    unsigned* mx = dev<unsigned>(1);
    float* fs = dev<float>(1);
    launch(s_, LC{Dim3(7), Dim3(96)}, "count_atomics", &count_atomics, counter, mx, fs);
    EXPECT_EQ(get(counter, 1)[0], 7 * 96) << name(c);
    EXPECT_EQ(get(mx, 1)[0], 7u * 96 - 1);
    EXPECT_EQ(get(fs, 1)[0], 7 * 96 * 0.5f);
  }
}

TEST_F(Simt, DynamicSharedMemoryHasTheLaunchsSize) {
  std::vector<float> x(3 * 128);
  std::iota(x.begin(), x.end(), 1.0f);
  float* d = dev<float>(x.size());
  float* out = dev<float>(3);
  memcpy_h2d(s_, d, x.data(), x.size() * 4);
  launch(s_, LC{Dim3(3), Dim3(128), 128 * sizeof(float)}, "dynamic_sum", &dynamic_sum, d, out);
  const auto h = get(out, 3);
  for (int b = 0; b < 3; ++b)
    EXPECT_EQ(h[b], float(128 * (128 * b + 1) + 127 * 128 / 2)) << "block " << b;
}

void expect_contains(const std::string& got, const std::string& want) {
  EXPECT_NE(got.find(want), std::string::npos) << "message: " << got;
}

TEST_F(Simt, BarrierAndCollectiveMisuseAreErrorsThatNameTheThread) {
  for (const Config& c : all_schedules()) {
    if (c.order != Order::forward) continue;
    set_config(c);
    float* out = dev<float>(64);
    launch(s_, LC{Dim3(2), Dim3(64)}, "early_return_before_barrier", &early_return_before_barrier,
           out);
    std::string e = error_of_sync();
    expect_contains(e, "kernel 'early_return_before_barrier', block (0,0,0)");
    expect_contains(e, "__syncthreads");
    launch(s_, LC{Dim3(1), Dim3(32)}, "lane_missing", &lane_missing_from_shuffle, out);
    e = error_of_sync();
    expect_contains(e, "kernel 'lane_missing'");
    expect_contains(e, "__shfl_xor_sync");
    expect_contains(e, "returned");
    launch(s_, LC{Dim3(1), Dim3(32)}, "divergent", &divergent_collectives, out);
    e = error_of_sync();
    expect_contains(e, "__ballot_sync");
    expect_contains(e, "__shfl_xor_sync");
    launch(s_, LC{Dim3(1), Dim3(32)}, "outside_mask", &caller_outside_mask, out);
    expect_contains(error_of_sync(), "not in the mask");
    launch(s_, LC{Dim3(1), Dim3(32)}, "big_static", &too_much_static_shared, out);
    expect_contains(error_of_sync(), "above the 49152 a kernel may declare");
    // the stream works on after an error has been reported
    launch(s_, LC{Dim3(1), Dim3(32)}, "write_ids", &write_ids, reinterpret_cast<unsigned*>(out));
    EXPECT_EQ(error_of_sync(), "") << name(c);
  }
}

// ldmatrix as the PTX ISA defines it ("Warp-level matrix load instruction: ldmatrix"): lane l
// gets row l / 4, columns 2(l % 4) and 2(l % 4) + 1 of matrix i (.trans: column l / 4, rows
// 2(l % 4) and 2(l % 4) + 1), matrix i being the rows lanes 8i .. 8i+7 address. With frag_a's
// addresses that is mma.m16n8k16's A fragment of the tile (mma.cuh), and with .trans the B
// fragments of two n-tiles (B = the tile, k x n). A row address off 16 bytes is an error.
TEST_F(Simt, LdmatrixGivesTheMmaFragments) {
  std::vector<uint16_t> x(16 * kLdmStride);
  for (size_t i = 0; i < x.size(); ++i) x[i] = uint16_t(1000 + 7 * i);  // distinct
  auto at = [&](int r, int c) { return uint32_t(x[r * kLdmStride + c]); };
  for (const Config& c : all_schedules()) {
    set_config(c);
    uint16_t* in = dev<uint16_t>(x.size());
    memcpy_h2d(s_, in, x.data(), x.size() * 2);
    uint32_t *plain = dev<uint32_t>(128), *trans = dev<uint32_t>(128);
    launch(s_, LC{Dim3(1), Dim3(32)}, "ldmatrix_lanes", &ldmatrix_lanes, in, plain, trans, 0);
    const auto hp = get(plain, 128), ht = get(trans, 128);
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      // A (16 x 16): a[0] = A[g][2t..], a[1] = A[g+8][2t..], a[2] = A[g][2t+8..], a[3] =
      // A[g+8][2t+8..]
      const int ar[4] = {g, g + 8, g, g + 8}, ac[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
      // B (k x n): b[0] = B[2t..][g], b[1] = B[2t+8..][g]; n-tile 2: the same at column g + 8
      const int bk[4] = {2 * t, 2 * t + 8, 2 * t, 2 * t + 8}, bn[4] = {g, g, g + 8, g + 8};
      for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(hp[4 * l + i], at(ar[i], ac[i]) | at(ar[i], ac[i] + 1) << 16)
            << name(c) << " ldmatrix.x4, lane " << l << " register " << i;
        ASSERT_EQ(ht[4 * l + i], at(bk[i], bn[i]) | at(bk[i] + 1, bn[i]) << 16)
            << name(c) << " ldmatrix.x4.trans, lane " << l << " register " << i;
      }
    }
    launch(s_, LC{Dim3(1), Dim3(32)}, "ldmatrix_lanes", &ldmatrix_lanes, in, plain, trans, 2);
    expect_contains(error_of_sync(), "row address is not 16-byte aligned");
  }
}

TEST_F(Simt, WritesPastABufferOrASharedArrayAreCaught) {
  if (detail::asan()) GTEST_SKIP() << "under ASan these are ASan reports (the child-process test)";
  float* out = dev<float>(40);
  launch(s_, LC{Dim3(1), Dim3(41)}, "global_overrun", &global_overrun, out, 40);
  const std::string e = error_of_sync();
  expect_contains(e, "kernel 'global_overrun'");
  expect_contains(e, "wrote outside device memory");
  expect_contains(e, "after the end of");
  launch(s_, LC{Dim3(1), Dim3(33)}, "shared_overrun", &shared_overrun, out);
  expect_contains(error_of_sync(), "a write past the end of shared array 'a' (128 bytes)");
}

TEST_F(Simt, LaunchesBeyondTheLimitsOrWithHostPointersAreRefused) {
  float* out = dev<float>(8);
  auto refused = [&](const LC& lc, float* p, const std::string& want) {
    try {
      launch(s_, lc, "write_ids", &write_ids, reinterpret_cast<unsigned*>(p));
      ADD_FAILURE() << "accepted: " << want;
    } catch (const Error& e) {
      expect_contains(e.what(), want);
    }
  };
  refused(LC{Dim3(1), Dim3(1025)}, out, "1025 threads per block");
  refused(LC{Dim3(1), Dim3(1, 1, 65)}, out, "block dimension");
  refused(LC{Dim3(1, 65536), Dim3(1)}, out, "grid dimension");
  refused(LC{Dim3(1), Dim3(32), 228 * 1024}, out, "shared memory");
  std::vector<float> host(8);
  refused(LC{Dim3(1), Dim3(8)}, host.data(), "pointer argument 1");
  refused(LC{Dim3(1), Dim3(8)}, host.data(), "not device memory");
}

TEST_F(Simt, DeviceMemoryIsPoisonedAndCopiesAreCheckedAgainstIt) {
  float* d = static_cast<float*>(device_malloc(16 * sizeof(float)));
  std::vector<float> h(16, 0.f);
  memcpy_d2h(s_, h.data(), d, 16 * sizeof(float));
  for (float v : h) EXPECT_TRUE(std::isnan(v)) << "fresh device memory reads as NaN";
  try {
    memcpy_d2h(s_, h.data(), d, 17 * sizeof(float));
    ADD_FAILURE() << "a copy past the end was accepted";
  } catch (const Error& e) {
    expect_contains(e.what(), "not inside one device allocation");
  }
  device_free(d);
  try {
    device_free(d);
    ADD_FAILURE() << "a double free was accepted";
  } catch (const Error& e) {
    expect_contains(e.what(), "double free");
  }
}

// Deferred streams: nothing queued runs before a synchronization, so a host read of device
// memory straight after a launch (no copy, or an asynchronous copy not yet waited for) sees
// what was there before: here poison, never the result.
TEST_F(Simt, AHostReadWithoutACopyOrASynchronizationSeesNoResult) {
  Config c = config();
  c.stream = StreamMode::deferred;
  set_config(c);
  const std::vector<float> x = {1, 2, 3, 4};
  float* in = dev<float>(4);
  float* out = static_cast<float*>(device_malloc(4 * sizeof(float)));
  bufs_.push_back(out);
  memcpy_h2d(s_, in, x.data(), 16);
  launch(s_, LC{Dim3(1), Dim3(4)}, "read_one", &read_one, in, out);
  EXPECT_TRUE(std::isnan(out[0])) << "a direct host read saw the kernel's result";
  std::vector<float> h(4, 0.f);
  memcpy_d2h_async(s_, h.data(), out, 16);
  EXPECT_TRUE(std::isnan(h[0])) << "an asynchronous copy's data before the synchronization";
  stream_synchronize(s_);
  EXPECT_EQ(h, x);
}

TEST_F(Simt, HostSynchronizationsAreCounted) {
  float* d = dev<float>(4);
  std::vector<float> h(4);
  reset_stats();
  launch(s_, LC{Dim3(1), Dim3(4)}, "read_one", &read_one, d, d);
  memcpy_d2h(s_, h.data(), d, 16);
  stream_synchronize(s_);
  EXPECT_EQ(stats().launches, 1u);
  EXPECT_EQ(stats().host_syncs, 2u);
}

TEST_F(Simt, ACallFromAThreadThatSelectedNoDeviceIsRefused) {
  std::string e;
  std::thread t([&] {
    try {
      device_malloc(16);
    } catch (const Error& x) {
      e = x.what();
    }
  });
  t.join();
  expect_contains(e, "cudaMalloc from a thread that selected no device");
  std::thread t2([&] {
    set_device(0);
    device_free(device_malloc(16));
    e = "ok";
  });
  t2.join();
  EXPECT_EQ(e, "ok");
}

// ---- planted bugs only a sanitizer sees: run in a child process ------------------------------
/// Runs this test binary with GT_SIMT_PLANT=what and returns its output and exit status.
std::pair<std::string, int> run_planted(const std::string& what) {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return {"cannot find the test binary", -1};
  exe[n] = 0;
  const std::string cmd = "GT_SIMT_PLANT=" + what + " " + exe + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  while (size_t k = fread(buf, 1, sizeof buf, p)) out.append(buf, k);
  const int st = pclose(p);
  return {out, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)};
}

TEST(SimtSanitizers, AMissingBarrierIsADataRaceUnderTsan) {
  if (!detail::tsan()) GTEST_SKIP() << "needs a ThreadSanitizer build (GT_TSAN=ON)";
  auto [out, rc] = run_planted("missing-barrier");
  EXPECT_NE(out.find("ThreadSanitizer: data race"), std::string::npos) << out;
  EXPECT_NE(out.find("reverse_block"), std::string::npos) << "the report names the kernel";
  auto [ok, rc2] = run_planted("barrier");
  EXPECT_EQ(ok.find("ThreadSanitizer"), std::string::npos) << "a false report: " << ok;
  EXPECT_EQ(rc2, 0) << ok;
}

TEST(SimtSanitizers, ASharedMemoryOverrunIsAnAsanReport) {
  if (!detail::asan()) GTEST_SKIP() << "needs an AddressSanitizer build (GT_SANITIZE=ON)";
  auto [out, rc] = run_planted("shared-overrun");
  EXPECT_NE(out.find("AddressSanitizer"), std::string::npos) << out;
  EXPECT_NE(out.find("shared_overrun"), std::string::npos) << "the report names the kernel";
  EXPECT_NE(rc, 0);
  auto [out2, rc2] = run_planted("global-overrun");
  EXPECT_NE(out2.find("AddressSanitizer"), std::string::npos) << out2;
  EXPECT_NE(out2.find("global_overrun"), std::string::npos) << out2;
}

/// The child's side: runs one planted kernel and exits.
int planted_main(const std::string& what) {
  set_device(0);
  Stream* s = create_stream();
  auto* d = static_cast<float*>(device_malloc(256 * sizeof(float)));
  std::vector<float> x(256, 1.0f);
  memcpy_h2d(s, d, x.data(), x.size() * 4);
  if (what == "missing-barrier" || what == "barrier")
    launch(s, LC{Dim3(2), Dim3(128)}, "reverse_block", &reverse_block, d, what == "barrier");
  else if (what == "shared-overrun")
    launch(s, LC{Dim3(1), Dim3(33)}, "shared_overrun", &shared_overrun, d);
  else if (what == "global-overrun")
    launch(s, LC{Dim3(1), Dim3(257)}, "global_overrun", &global_overrun, d, 256);
  try {
    stream_synchronize(s);
  } catch (const Error& e) {
    std::printf("error: %s\n", e.what());
    return 3;
  }
  return 0;
}

}  // namespace
}  // namespace gt::simt

int main(int argc, char** argv) {
  if (const char* plant = std::getenv("GT_SIMT_PLANT")) return gt::simt::planted_main(plant);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
