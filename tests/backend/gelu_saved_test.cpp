// The MLP's GELU saved as its input (Backend::saves_gelu_input, GeluSaved::input): the c_fc
// product writes gelu(x) and x itself, x = inp @ W + bias (on CUDA cuBLASLt's GELU_AUX_BIAS
// epilogue, on cuda-emu its emulation), and mlp.c_proj's backward multiplies its input
// gradient by gelu'(x) (cuBLASLt's DGELU epilogue), as llm.c's forward and backward. On every
// backend and precision, against float64 computed from the same operand values; on cuda-emu
// under bf16 also that the two epilogue products are the ones issued, and that the fallbacks
// (fp32: the own bias+GELU and multiply kernels) give the same results. And the form that
// saves gelu' instead (matmul_gelu_forward_fused), bitwise its two-call default.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/lt_emulation.h"
#include "core/dtype.h"
#include "op_harness.h"    // test::normal
#include "test_helpers.h"  // test::has_backend, test::DeviceVectors (tests/engine)

namespace gt {
namespace {

double gelu64(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
double gelu_grad64(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 0.134145 * x * x);
}

/// The sizes of one check: c_fc (N,C) -> (N,H), c_proj (N,H) -> (N,C2).
struct MlpShape {
  int64_t N;
  int C, H, C2;
};

class GeluSavedAsInput : public ::testing::TestWithParam<std::tuple<std::string, Precision>> {
 protected:
  void check(const MlpShape& shape);
};

// Small sizes, then sizes with K a multiple of 32 (where an AMX CPU runs the CPU's bf16
// products on the own kernel under the fallbacks) and partial blocks of rows and columns
TEST_P(GeluSavedAsInput, ForwardWritesThePreActivationAndTheBackwardTakesIt) {
  check({6, 16, 32, 24});
}
TEST_P(GeluSavedAsInput, AtSizesTheAmxProductTakes) { check({40, 64, 80, 32}); }

void GeluSavedAsInput::check(const MlpShape& shape) {
  const auto& [name, prec] = GetParam();
  if (!test::has_backend(name)) GTEST_SKIP() << name << " is not in this build";
  if (name == "ref" && prec != Precision::fp32) GTEST_SKIP() << "ref computes in fp32 only";
  auto be = make_backend(name);
  be->set_precision(prec);
  const bool b16 = prec == Precision::bf16;
  const DType t = b16 ? DType::bf16 : DType::f32;
  // operands as the products see them: bf16-rounded under bf16
  auto op = [&](float f) { return b16 ? bf16_to_float(float_to_bf16(f)) : f; };
  // one bf16 rounding of an f32 result is 2^-9 relative; f32's sums 1e-5
  const double rel = b16 ? 0x1p-7 : 2e-5, abs = b16 ? 1e-3 : 1e-6;
  const int64_t N = shape.N;
  const int C = shape.C, H = shape.H, C2 = shape.C2;
  const auto inp = test::normal(N * C, 1), w = test::normal(int64_t(C) * H, 2, 0.5f),
             bias = test::normal(H, 3, 0.5f), w2 = test::normal(int64_t(H) * C2, 4, 0.3f),
             dout = test::normal(N * C2, 5);
  if (name == "cuda-emu") cuda_lt::record_products(true);

  test::DeviceVectors dv(*be);
  const float *d_inp = dv.up(inp), *d_w = dv.up(w), *d_b = dv.up(bias), *d_w2 = dv.up(w2),
              *d_dout = dv.up(dout);
  // f32 buffers, used as bf16 (half of each) under bf16
  float* d_out = dv.up(std::vector<float>(N * H, NAN));
  float* d_pre = dv.up(std::vector<float>(N * H, NAN));
  float* d_dinp = dv.up(std::vector<float>(N * H, NAN));
  float* d_dw = dv.up(std::vector<float>(int64_t(H) * C2, 0.f));
  float* d_db = dv.up(std::vector<float>(C2, 0.f));
  auto down = [&](const float* p, int64_t n) {
    if (!b16) return dv.down(p, n);
    std::vector<uint16_t> h(n);
    be->copy_to_host(h.data(), p, n * sizeof(uint16_t));
    std::vector<float> f(n);
    for (int64_t i = 0; i < n; ++i) f[i] = bf16_to_float(h[i]);
    return f;
  };

  be->matmul_gelu_forward(DevPtr(d_out, t), DevPtr(d_pre, t), ConstDevPtr(d_inp), d_w, d_b, N, C,
                          H);
  const std::vector<float> out = down(d_out, N * H), pre = down(d_pre, N * H);
  for (int64_t i = 0; i < N; ++i)
    for (int h = 0; h < H; ++h) {
      double x = 0;
      for (int c = 0; c < C; ++c) x += double(op(inp[i * C + c])) * op(w[int64_t(c) * H + h]);
      // the bias: f32, or with the bf16 output bf16 too (cuBLASLt's bias has D's type)
      const double xb = x + bias[h];
      const double tol = rel * (std::fabs(x) + std::fabs(bias[h])) + abs;
      ASSERT_NEAR(pre[i * H + h], xb, tol) << "pre " << i << ", " << h;
      ASSERT_NEAR(out[i * H + h], gelu64(xb), tol) << "gelu " << i << ", " << h;
    }

  // c_proj's backward: dinp (N,H) = (dout @ w2^T) * gelu'(pre), dw2 += out^T dout, db += sums
  be->matmul_backward_gelu(DevPtr(d_dinp, t), d_dw, d_db, ConstDevPtr(d_dout),
                           ConstDevPtr(d_out, t), d_w2, ConstDevPtr(d_pre, t), GeluSaved::input, N,
                           H, C2);
  const std::vector<float> dinp = down(d_dinp, N * H), dw = dv.down(d_dw, int64_t(H) * C2),
                           db = dv.down(d_db, C2);
  for (int64_t i = 0; i < N; ++i)
    for (int h = 0; h < H; ++h) {
      double s = 0, mag = 0;
      for (int o = 0; o < C2; ++o) {
        s += double(op(dout[i * C2 + o])) * op(w2[int64_t(h) * C2 + o]);
        mag += std::fabs(double(op(dout[i * C2 + o])) * op(w2[int64_t(h) * C2 + o]));
      }
      const double g = gelu_grad64(pre[i * H + h]);  // of the values saved
      // (and gelu' itself to tanh's f32 approximation, 2e-6)
      ASSERT_NEAR(dinp[i * H + h], s * g, rel * mag * std::fabs(g) * 2 + 4e-6 * mag + abs)
          << i << ", " << h;
    }
  for (int h = 0; h < H; ++h)
    for (int o = 0; o < C2; ++o) {
      double s = 0, mag = 0;
      for (int64_t i = 0; i < N; ++i) {
        s += double(out[i * H + h]) * op(dout[i * C2 + o]);
        mag += std::fabs(double(out[i * H + h]) * op(dout[i * C2 + o]));
      }
      ASSERT_NEAR(dw[int64_t(h) * C2 + o], s, rel * mag + abs) << "dw " << h << ", " << o;
    }
  for (int o = 0; o < C2; ++o) {
    double s = 0, mag = 0;
    for (int64_t i = 0; i < N; ++i) s += op(dout[i * C2 + o]), mag += std::fabs(dout[i * C2 + o]);
    ASSERT_NEAR(db[o], s, rel * mag + abs) << "db " << o;
  }

  if (name == "cuda-emu") {
    cuda_lt::record_products(false);
    std::string log;
    for (const std::string& p : cuda_lt::recorded_products()) log += p + "\n";
    // under bf16 the epilogues are cuBLASLt's; under fp32 the own kernels apply them
    const bool epilogues = b16;
    const std::string ld = "(aux ld " + std::to_string(H) + ")";
    EXPECT_EQ(log.find("epilogue gelu_aux+bias " + ld) != std::string::npos, epilogues) << log;
    EXPECT_EQ(log.find("epilogue dgelu " + ld) != std::string::npos, epilogues) << log;
  }
}

std::string param_name(const ::testing::TestParamInfo<GeluSavedAsInput::ParamType>& i) {
  std::string n = std::get<0>(i.param) + "_" + to_string(std::get<1>(i.param));
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Backends, GeluSavedAsInput,
                         ::testing::Combine(::testing::Values("ref", "cpu", "cuda-emu"),
                                            ::testing::Values(Precision::fp32, Precision::bf16)),
                         param_name);

// The fused MLP's training product with gelu' saved (Backend::matmul_gelu_forward_fused): out
// and dgelu bitwise what matmul_forward then gelu_forward_fused give, on every backend and
// precision: on the CPU under bf16 from the own kernel's epilogue where it takes the product
// (K a multiple of 32, on a CPU with AMX or AVX512_BF16), else from those two calls.
class GeluFusedProduct : public GeluSavedAsInput {};

TEST_P(GeluFusedProduct, IsBitwiseTheProductThenTheGeluPass) {
  const auto& [name, prec] = GetParam();
  if (!test::has_backend(name)) GTEST_SKIP() << name << " is not in this build";
  if (name == "ref" && prec != Precision::fp32) GTEST_SKIP() << "ref computes in fp32 only";
  auto be = make_backend(name);
  be->set_precision(prec);
  const DType t = prec == Precision::bf16 ? DType::bf16 : DType::f32;
  // the CPU preset's c_fc, a partial block of rows and columns, and K = 24 (no own kernel)
  for (const MlpShape& sh : {MlpShape{768, 128, 512, 0}, {70, 96, 80, 0}, {33, 24, 40, 0}}) {
    SCOPED_TRACE(::testing::Message() << "N " << sh.N << " C " << sh.C << " H " << sh.H);
    const int64_t N = sh.N, n = N * sh.H;
    test::DeviceVectors dv(*be);
    const float* d_inp = dv.up(test::normal(N * sh.C, 11));
    const float* d_w = dv.up(test::normal(int64_t(sh.C) * sh.H, 12, 0.2f));
    const float* d_b = dv.up(test::normal(sh.H, 13, 0.5f));
    float* out[2] = {dv.up(std::vector<float>(n, NAN)), dv.up(std::vector<float>(n, NAN))};
    float* dg[2] = {dv.up(std::vector<float>(n, NAN)), dv.up(std::vector<float>(n, NAN))};
    float* pre[2] = {dv.up(std::vector<float>(n, NAN)), dv.up(std::vector<float>(n, NAN))};
    be->matmul_gelu_forward_fused(DevPtr(out[0], t), DevPtr(dg[0], t), pre[0], ConstDevPtr(d_inp),
                                  d_w, d_b, N, sh.C, sh.H);
    be->matmul_forward(DevPtr(pre[1]), ConstDevPtr(d_inp), d_w, d_b, N, sh.C, sh.H);
    be->gelu_forward_fused(DevPtr(out[1], t), DevPtr(dg[1], t), pre[1], n);
    be->synchronize();
    const size_t bytes = n * (t == DType::bf16 ? 2 : 4);
    for (float** v : {out, dg}) {
      std::vector<unsigned char> h0(bytes), h1(bytes);
      be->copy_to_host(h0.data(), v[0], bytes);
      be->copy_to_host(h1.data(), v[1], bytes);
      ASSERT_EQ(h0, h1) << (v == out ? "gelu" : "gelu'");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, GeluFusedProduct,
                         ::testing::Combine(::testing::Values("ref", "cpu", "cuda-emu"),
                                            ::testing::Values(Precision::fp32, Precision::bf16)),
                         param_name);

// The model asks for it where the products apply the GELU (CUDA), not on the CPU.
TEST(GeluSavedAsInput, OnlyTheCudaBackendSavesTheInput) {
  if (test::has_backend("cpu")) {
    EXPECT_FALSE(make_backend("cpu")->saves_gelu_input());
  }
  if (test::has_backend("cuda-emu")) {
    EXPECT_TRUE(make_backend("cuda-emu")->saves_gelu_input());
  }
}

}  // namespace
}  // namespace gt
