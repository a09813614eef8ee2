// bench/gpu_mlp_bench.cpp: the MLP's GELU through the CUDA backend (gt_gpu_kernel_bench's rows
// that go through the Backend: host C++20, which the kernel benchmark's nvcc build does not
// compile). Under bf16, both forms the model can save for the backward: gelu' (an f32 product,
// then the fused GELU pass; mlp.c_proj's input gradient an f32 product with a multiply pass)
// and the GELU's input (cuBLASLt's GELU_AUX_BIAS and DGELU epilogues: Backend::saves_gelu_input,
// the CUDA backend's choice). The backward rows include the dW product and the bias sums.
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"

struct MlpRow {
  std::string kernel;
  double ms, bytes, flops;
};

/// The four rows at (B, T, C): median milliseconds of 20 calls after 3 warm-ups, timed on the
/// host around a synchronization; bytes each form moves at least as written (inputs and
/// outputs once), FLOPs of its products.
std::vector<MlpRow> bench_mlp_gelu(int B, int T, int C) {
  auto be = gt::make_backend("cuda");
  be->set_precision(gt::Precision::bf16);
  const int64_t N = int64_t(B) * T, H = 4 * int64_t(C);
  std::vector<void*> bufs;
  auto get = [&](int64_t bytes, float value) {
    void* p = be->allocate(bytes);
    bufs.push_back(p);
    if (value != 0.f) {
      const std::vector<float> h(bytes / 4, value);
      be->copy_to_device(p, h.data(), h.size() * 4);
    } else {
      be->zero(p, bytes);
    }
    return p;
  };
  auto f32 = [&](int64_t n, float value) { return static_cast<float*>(get(n * 4, value)); };
  auto b16 = [&](int64_t n) { return gt::DevPtr(get(n * 2, 0.f), gt::DType::bf16); };
  const gt::DevPtr ln2 = b16(N * C), gelu = b16(N * H), saved = b16(N * H), dinp = b16(N * H);
  float *fch = f32(N * H, 0.f), *w = f32(C * H, 0.01f), *b = f32(H, 0.01f), *w2 = f32(C * H, 0.01f),
        *dw = f32(C * H, 0.f), *db = f32(C, 0.f), *dout = f32(N * C, 0.01f);
  auto host_ms = [&](const std::function<void()>& f) {
    for (int i = 0; i < 3; ++i) f();
    be->synchronize();
    std::vector<double> ms;
    for (int i = 0; i < 20; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      be->synchronize();
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  const double fwd = 2.0 * N * C * H, bwd = 4.0 * N * C * H;
  std::vector<MlpRow> rows;
  rows.push_back({"mlp c_fc + gelu forward (gelu' saved: f32 product, fused gelu pass)",
                  host_ms([&] {
                    be->matmul_forward(fch, ln2, w, b, N, C, H);
                    be->gelu_forward_fused(gelu, saved, fch, N * H);
                  }),
                  N * C * 2.0 + N * H * (4.0 + 4 + 2 + 2), fwd});
  rows.push_back({"mlp c_fc + gelu forward (input saved: GELU_AUX_BIAS epilogue)",
                  host_ms([&] { be->matmul_gelu_forward(gelu, saved, ln2, w, b, N, C, H); }),
                  N * C * 2.0 + N * H * 4.0, fwd});
  rows.push_back({"mlp c_proj backward (gelu' saved: f32 product, multiply pass)", host_ms([&] {
                    be->matmul_backward_gelu(dinp, dw, db, dout, gelu, w2, saved,
                                             gt::GeluSaved::derivative, N, H, C);
                  }),
                  N * C * 4.0 + N * H * (2.0 + 4 + 4 + 2 + 2), bwd});
  rows.push_back({"mlp c_proj backward (input saved: DGELU epilogue)", host_ms([&] {
                    be->matmul_backward_gelu(dinp, dw, db, dout, gelu, w2, saved,
                                             gt::GeluSaved::input, N, H, C);
                  }),
                  N * C * 4.0 + N * H * (2.0 + 2 + 2), bwd});
  be->synchronize();
  for (void* p : bufs) be->deallocate(p);
  return rows;
}
