// The own AMX bf16 product (cpu/amx_matmul.h) against a float64 reference of the same bf16
// operands and against oneDNN's product, with every epilogue (bias, element-wise multiply in
// f32 or bf16, bf16 C, accumulate; A's column sums), both layouts of A and of B, and sizes with
// partial blocks in M and N;
// its result must not depend on the team size. On AMX tiles (skipped where the CPU has no AMX)
// and on the vector unit (skipped without AVX512_BF16).
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <utility>
#include <vector>

#include "backend/cpu/amx_matmul.h"
#include "backend/cpu/dpbf16_block.h"
#include "backend/cpu/fast_math.h"
#include "backend/cpu/gelu.h"
#include "backend/cpu/onednn_matmul.h"

namespace gt {
namespace cpu {
/// The kernel's name in gtest's messages (instead of its bytes).
void PrintTo(Bf16Kernel k, std::ostream* os) { *os << bf16_kernel_name(k); }
}  // namespace cpu
namespace {

std::vector<uint16_t> rand16(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = cpu::to_bf16(d(g));
  return v;
}

float f(uint16_t h) { return cpu::bf16_to_float(h); }

struct Case {
  int64_t M, N, K;
  bool trans_b;
  bool trans_a = false;
};

/// float64 (A B + bias) * mul + c0 over the bf16 values
std::vector<double> reference(const Case& s, const std::vector<uint16_t>& a,
                              const std::vector<uint16_t>& b, const std::vector<float>* bias,
                              const std::vector<float>* mul, const std::vector<float>* c0) {
  std::vector<double> r(s.M * s.N);
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t j = 0; j < s.N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < s.K; ++k)
        acc += double(f(s.trans_a ? a[k * s.M + i] : a[i * s.K + k])) *
               f(s.trans_b ? b[j * s.K + k] : b[k * s.N + j]);
      if (bias) acc += (*bias)[j];
      if (mul) acc *= (*mul)[i * s.N + j];
      if (c0) acc += (*c0)[i * s.N + j];
      r[i * s.N + j] = acc;
    }
  return r;
}

/// Each test on each kernel this CPU has: AMX tiles, and the vector unit (VDPBF16PS), which
/// AMX CPUs have too.
class AmxMatmul : public ::testing::TestWithParam<cpu::Bf16Kernel> {
 protected:
  void SetUp() override {
    if (GetParam() == cpu::Bf16Kernel::amx && !cpu::amx_available())
      GTEST_SKIP() << "this CPU has no AMX-BF16";
    if (GetParam() == cpu::Bf16Kernel::avx512_bf16 && !cpu::dpbf16_available())
      GTEST_SKIP() << "this CPU has no AVX512_BF16";
    prefer_before_ = cpu::vector_bf16_kernel_preferred();
    cpu::set_own_amx_matmul(true);
    cpu::prefer_vector_bf16_kernel(GetParam() == cpu::Bf16Kernel::avx512_bf16);
    ASSERT_EQ(cpu::own_bf16_kernel(), GetParam());
  }
  void TearDown() override { cpu::prefer_vector_bf16_kernel(prefer_before_); }
  bool prefer_before_ = false;
};

INSTANTIATE_TEST_SUITE_P(Kernels, AmxMatmul,
                         ::testing::Values(cpu::Bf16Kernel::amx, cpu::Bf16Kernel::avx512_bf16),
                         [](const auto& info) {
                           return info.param == cpu::Bf16Kernel::amx ? "Amx" : "Avx512Bf16";
                         });

const Case kCases[] = {{64, 64, 64, true},
                       {64, 64, 64, false},
                       {37, 45, 96, true},
                       {37, 45, 96, false},
                       {300, 129, 128, true},
                       {300, 129, 128, false},
                       {16, 1, 32, true},
                       {520, 96, 384, false},
                       {64, 64, 64, false, true},
                       {37, 45, 96, false, true},
                       {300, 129, 128, true, true},
                       {1, 33, 64, false, true},
                       // fewer block rows than block columns: each thread takes a range of columns
                       {40, 200, 96, false, true},
                       {64, 300, 128, true},
                       {70, 230, 64, false}};

TEST_P(AmxMatmul, F32ResultMatchesFloat64AndOneDnn) {
  for (const Case& s : kCases) {
    SCOPED_TRACE(::testing::Message()
                 << "M " << s.M << " N " << s.N << " K " << s.K
                 << (s.trans_a ? " A (K,M)" : " A (M,K)") << (s.trans_b ? " B (N,K)" : " B (K,N)"));
    auto a = rand16(s.M * s.K, 1), b = rand16(s.K * s.N, 2);
    std::vector<float> c(s.M * s.N, -7.0f), ref_dnnl(s.M * s.N);
    cpu::amx_matmul_bf16(c.data(), a.data(), b.data(), s.M, s.N, s.K, s.trans_a, s.trans_b);
    const auto ref = reference(s, a, b, nullptr, nullptr, nullptr);
    cpu::onednn_matmul(ref_dnnl.data(), a.data(), b.data(), nullptr, s.M, s.N, s.K, s.trans_a,
                       s.trans_b, false, cpu::MmType::bf16);
    for (int64_t i = 0; i < s.M * s.N; ++i) {
      // f32 sums of K products of bf16 values (exact in f32): a few ulps of sqrt(K) terms
      const double tol = 1e-6 * std::sqrt(double(s.K)) * 8;
      ASSERT_NEAR(c[i], ref[i], tol) << "at " << i;
      ASSERT_NEAR(c[i], ref_dnnl[i], tol) << "oneDNN, at " << i;
    }
  }
}

TEST_P(AmxMatmul, EpiloguesMatchFloat64) {
  for (const Case& s : kCases) {
    SCOPED_TRACE(::testing::Message() << "M " << s.M << " N " << s.N << " K " << s.K);
    auto a = rand16(s.M * s.K, 3), b = rand16(s.K * s.N, 4);
    auto m16 = rand16(s.M * s.N, 5), b16 = rand16(s.N, 6), c16 = rand16(s.M * s.N, 7);
    std::vector<float> bias(s.N), mul(s.M * s.N), c0(s.M * s.N);
    for (int64_t j = 0; j < s.N; ++j) bias[j] = f(b16[j]);
    for (int64_t i = 0; i < s.M * s.N; ++i) mul[i] = f(m16[i]), c0[i] = f(c16[i]);
    const double tol = 1e-6 * std::sqrt(double(s.K)) * 32;
    {  // bias, f32 multiplier, accumulate into f32 C
      std::vector<float> c = c0;
      cpu::amx_matmul_bf16(c.data(), a.data(), b.data(), s.M, s.N, s.K, s.trans_a, s.trans_b,
                           {.bias = bias.data(), .mul = mul.data(), .accumulate = true});
      const auto ref = reference(s, a, b, &bias, &mul, &c0);
      for (int64_t i = 0; i < s.M * s.N; ++i) ASSERT_NEAR(c[i], ref[i], tol) << "at " << i;
    }
    {  // accumulate alone (a weight gradient: the old C as the tiles' start where blocks are whole)
      std::vector<float> c = c0;
      cpu::amx_matmul_bf16(c.data(), a.data(), b.data(), s.M, s.N, s.K, s.trans_a, s.trans_b,
                           {.accumulate = true});
      const auto ref = reference(s, a, b, nullptr, nullptr, &c0);
      for (int64_t i = 0; i < s.M * s.N; ++i) ASSERT_NEAR(c[i], ref[i], tol) << "at " << i;
    }
    {  // bf16 multiplier, bf16 C: the f32 result rounded to nearest even (one bf16 step of 2^-8)
      std::vector<uint16_t> c(s.M * s.N + 8, 0xABCD);
      cpu::amx_matmul_bf16(c.data(), a.data(), b.data(), s.M, s.N, s.K, s.trans_a, s.trans_b,
                           {.mul = m16.data(), .mul_bf16 = true, .c_bf16 = true});
      const auto ref = reference(s, a, b, nullptr, &mul, nullptr);
      for (int64_t i = 0; i < s.M * s.N; ++i)
        ASSERT_NEAR(f(c[i]), ref[i], std::fabs(ref[i]) * 0.0040 + tol) << "at " << i;
      for (int64_t i = s.M * s.N; i < s.M * s.N + 8; ++i) ASSERT_EQ(c[i], 0xABCD) << "past C";
    }
  }
}

// GELU in the epilogue (AmxEpilogue::gelu, dgelu): bitwise the f32 result (A B + bias) then
// gelu.h's pass over it, for a bf16 C with gelu' beside it (the fused MLP's training form), a
// bf16 C alone and an f32 C (evaluation); nothing written past C or dgelu.
TEST_P(AmxMatmul, GeluEpilogueIsTheF32ResultThenTheGeluPass) {
  for (const Case& s : kCases) {
    SCOPED_TRACE(::testing::Message() << "M " << s.M << " N " << s.N << " K " << s.K);
    const int64_t n = s.M * s.N;
    auto a = rand16(s.M * s.K, 21), b = rand16(s.K * s.N, 22), b16 = rand16(s.N, 23);
    std::vector<float> bias(s.N), c32(n);
    for (int64_t j = 0; j < s.N; ++j) bias[j] = f(b16[j]);
    cpu::amx_matmul_bf16(c32.data(), a.data(), b.data(), s.M, s.N, s.K, s.trans_a, s.trans_b,
                         {.bias = bias.data()});
    std::vector<uint16_t> g16(n), d16(n);
    std::vector<float> g32(n);
    cpu::gelu_fused_loop<2, 2>(nullptr, g16.data(), nullptr, d16.data(), c32.data(), n);
    cpu::gelu_fused_loop<0, 0>(g32.data(), nullptr, nullptr, nullptr, c32.data(), n);
    std::vector<uint16_t> c(n + 8, 0xABCD), dg(n + 8, 0xABCD);
    cpu::amx_matmul_bf16(c.data(), a.data(), b.data(), s.M, s.N, s.K, s.trans_a, s.trans_b,
                         {.bias = bias.data(), .c_bf16 = true, .gelu = true, .dgelu = dg.data()});
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(c[i], g16[i]) << "gelu at " << i;
      ASSERT_EQ(dg[i], d16[i]) << "gelu' at " << i;
    }
    for (int64_t i = n; i < n + 8; ++i) ASSERT_TRUE(c[i] == 0xABCD && dg[i] == 0xABCD) << "past";
    std::fill(c.begin(), c.end(), 0xABCD);
    cpu::amx_matmul_bf16(c.data(), a.data(), b.data(), s.M, s.N, s.K, s.trans_a, s.trans_b,
                         {.bias = bias.data(), .c_bf16 = true, .gelu = true});
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(c[i], g16[i]) << "gelu alone at " << i;
    std::vector<float> cf(n);
    cpu::amx_matmul_bf16(cf.data(), a.data(), b.data(), s.M, s.N, s.K, s.trans_a, s.trans_b,
                         {.bias = bias.data(), .gelu = true});
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(cf[i], g32[i]) << "f32 gelu at " << i;
  }
}

// A's column sums (the bias gradient of an input gradient, summed while A is packed): added
// to the old values, against float64; bitwise the same on 1 and 2 threads.
/// Sets the OpenMP team size and the row split (amx_matmul_rows_to_first_thread) back as they
/// were when it goes out of scope, also when an assertion returns early.
struct TeamGuard {
  const int before = omp_get_max_threads();
  ~TeamGuard() {
    omp_set_num_threads(before);
    cpu::amx_matmul_rows_to_first_thread(false);
  }
};

TEST_P(AmxMatmul, ColumnSumsOfAMatchFloat64AndNotTheTeamSize) {
  for (const Case& s : kCases) {
    if (s.trans_a) continue;
    SCOPED_TRACE(::testing::Message() << "M " << s.M << " N " << s.N << " K " << s.K);
    auto a = rand16(s.M * s.K, 15), b = rand16(s.K * s.N, 16);
    std::vector<float> c(s.M * s.N), sums(s.K, 0.5f), sums1(s.K, 0.5f);
    cpu::amx_matmul_bf16(c.data(), a.data(), b.data(), s.M, s.N, s.K, false, s.trans_b,
                         {.a_col_sums = sums.data()});
    for (int64_t k = 0; k < s.K; ++k) {
      double r = 0.5;
      for (int64_t i = 0; i < s.M; ++i) r += f(a[i * s.K + k]);
      // f32 sums of M values of about 1: a few ulps of sqrt(M) terms
      ASSERT_NEAR(sums[k], r, 1e-6 * std::sqrt(double(s.M)) * 16) << "column " << k;
    }
    const TeamGuard guard;
    omp_set_num_threads(1);
    std::vector<float> c1(c.size());
    cpu::amx_matmul_bf16(c1.data(), a.data(), b.data(), s.M, s.N, s.K, false, s.trans_b,
                         {.a_col_sums = sums1.data()});
    ASSERT_EQ(sums, sums1);
    // three threads, two of which run every block row, taken from the first one's share
    omp_set_num_threads(3);
    cpu::amx_matmul_rows_to_first_thread(true);
    std::vector<float> c3(c.size()), sums3(s.K, 0.5f);
    cpu::amx_matmul_bf16(c3.data(), a.data(), b.data(), s.M, s.N, s.K, false, s.trans_b,
                         {.a_col_sums = sums3.data()});
    ASSERT_EQ(sums, sums3);
    ASSERT_EQ(c1, c3);
  }
}

/// n elements of T ending where an inaccessible page begins: a read or write past the end
/// faults (a std::vector's end is readable, so the other tests would not see one).
template <typename T>
struct Guarded {
  explicit Guarded(size_t n) : n(n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    span = (n * sizeof(T) + page - 1) / page * page + page;
    base = static_cast<char*>(
        mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(base, MAP_FAILED);
    EXPECT_EQ(mprotect(base + span - page, page, PROT_NONE), 0);
    p = reinterpret_cast<T*>(base + span - page - n * sizeof(T));
  }
  ~Guarded() { munmap(base, span); }
  size_t n, span;
  char* base;
  T* p;
};

TEST_P(AmxMatmul, ReadsAndWritesNothingPastItsOperands) {
  // N % 32 in 1..15 leaves the last block's second 16 columns wholly past N (N 65, 1, 45)
  for (const Case& s : {Case{16, 65, 384, true}, Case{16, 1, 32, true}, Case{16, 1, 32, false},
                        Case{16, 45, 96, false}, Case{64, 129, 128, false},
                        Case{37, 45, 96, false, true}, Case{1, 33, 64, true, true}}) {
    SCOPED_TRACE(::testing::Message() << "M " << s.M << " N " << s.N << " K " << s.K);
    Guarded<uint16_t> a(s.M * s.K), b(s.K * s.N), m16(s.M * s.N), c16(s.M * s.N);
    Guarded<float> bias(s.N), c(s.M * s.N);
    const auto va = rand16(s.M * s.K, 10), vb = rand16(s.K * s.N, 11);
    std::copy(va.begin(), va.end(), a.p);
    std::copy(vb.begin(), vb.end(), b.p);
    std::fill(m16.p, m16.p + s.M * s.N, cpu::to_bf16(1.0f));
    std::fill(bias.p, bias.p + s.N, 0.0f);
    std::fill(c.p, c.p + s.M * s.N, 0.0f);
    Guarded<float> sums(s.K);
    std::fill(sums.p, sums.p + s.K, 0.0f);
    cpu::amx_matmul_bf16(
        c.p, a.p, b.p, s.M, s.N, s.K, s.trans_a, s.trans_b,
        {.bias = bias.p, .accumulate = true, .a_col_sums = s.trans_a ? nullptr : sums.p});
    cpu::amx_matmul_bf16(c16.p, a.p, b.p, s.M, s.N, s.K, s.trans_a, s.trans_b,
                         {.mul = m16.p, .mul_bf16 = true, .c_bf16 = true});
    const auto ref = reference(s, va, vb, nullptr, nullptr, nullptr);
    const double tol = 1e-6 * std::sqrt(double(s.K)) * 8;
    for (int64_t i = 0; i < s.M * s.N; ++i) {
      ASSERT_NEAR(c.p[i], ref[i], tol) << "at " << i;
      ASSERT_NEAR(f(c16.p[i]), ref[i], std::fabs(ref[i]) * 0.0040 + tol) << "bf16, at " << i;
    }
  }
}

// Split by rows (M >= N) and by columns (a weight gradient's M < N), on 1, 2 and 3 threads.
TEST_P(AmxMatmul, ResultDoesNotDependOnTheTeamSize) {
  // split by rows (A stored (M,K), then transposed), and by columns (fewer block rows than
  // block columns)
  for (const Case& s : {Case{300, 200, 256, true}, Case{300, 200, 256, false, true},
                        Case{70, 390, 256, false, true}}) {
    auto a = rand16(s.M * s.K, 8), b = rand16(s.K * s.N, 9);
    std::vector<float> bias(s.N, 0.25f), c0(s.M * s.N, 1.0f);
    const TeamGuard guard;
    std::vector<std::vector<float>> c;
    // teams of 1, 2 and 3, then 2 and 3 where every block row is in the first thread's share
    // and the others run them all (split by rows)
    const std::pair<int, bool> teams[] = {{1, false}, {2, false}, {3, false}, {2, true}, {3, true}};
    for (auto [threads, to_first] : teams) {
      omp_set_num_threads(threads);
      cpu::amx_matmul_rows_to_first_thread(to_first);
      c.push_back(c0);
      cpu::amx_matmul_bf16(c.back().data(), a.data(), b.data(), s.M, s.N, s.K, s.trans_a, s.trans_b,
                           {.bias = bias.data(), .accumulate = true});
    }
    for (size_t t = 1; t < c.size(); ++t)
      for (int64_t i = 0; i < s.M * s.N; ++i)
        ASSERT_EQ(c[0][i], c[t][i])
            << s.M << " x " << s.N << ", team " << teams[t].first
            << (teams[t].second ? " (rows taken from the first)" : "") << ", at " << i;
  }
}

TEST_P(AmxMatmul, RefusesWhatItCannotTake) {
  std::vector<uint16_t> a(16 * 40), b(40 * 16);
  std::vector<float> c(16 * 16);
  EXPECT_FALSE(cpu::amx_matmul_takes(16, 16, 40));  // K not a multiple of 32
  EXPECT_THROW(cpu::amx_matmul_bf16(c.data(), a.data(), b.data(), 16, 16, 40, false, true),
               std::exception);
  EXPECT_THROW(cpu::amx_matmul_bf16(c.data(), a.data(), b.data(), 16, 16, 32, false, true,
                                    {.c_bf16 = true, .accumulate = true}),
               std::exception);
  EXPECT_THROW(cpu::amx_matmul_bf16(c.data(), a.data(), b.data(), 16, 16, 32, true, true,
                                    {.a_col_sums = c.data()}),
               std::exception);  // column sums of a transposed A
  EXPECT_THROW(cpu::amx_matmul_bf16(c.data(), a.data(), b.data(), 16, 16, 32, false, true,
                                    {.accumulate = true, .gelu = true}),
               std::exception);  // GELU of C_old + A B
  std::vector<uint16_t> dg(16 * 16);
  EXPECT_THROW(cpu::amx_matmul_bf16(c.data(), a.data(), b.data(), 16, 16, 32, false, true,
                                    {.dgelu = dg.data()}),
               std::exception);  // gelu' without GELU
  cpu::set_own_amx_matmul(false);
  EXPECT_FALSE(cpu::amx_matmul_takes(16, 16, 32));
  cpu::set_own_amx_matmul(true);
  EXPECT_TRUE(cpu::amx_matmul_takes(16, 16, 32));
}

}  // namespace
}  // namespace gt
