// bench/gpu_kernel_bench.cu: every own kernel of the CUDA backend timed on the GPU, at GPT-2
// 124M (B 32) and GPT-2 XL (B 8) shapes (T 1024, V 50304), beside the GPU's measured copy
// bandwidth: ms per call (median of 20 after 3 warm-ups, CUDA events), the bytes each call
// must move at least (each input read once, each output written once) and the FLOPs of the
// attention kernels, so GB/s and TFLOP/s read against the ceilings. One JSON object per line
// on stdout; bench/gpu-check.sh stage 8 collects them. Built with plain nvcc (no CMake, no
// project library: the kernels' own sources and fmt's headers):
//
//   nvcc -O3 -std=c++17 -arch=sm_90 --extended-lambda -Isrc -I<fmt include> -DFMT_HEADER_ONLY \
//        bench/gpu_kernel_bench.cu src/backend/cuda/kernels_{elementwise,rows,attention}.cu \
//        -o gt_gpu_kernel_bench
//   gt_gpu_kernel_bench [124m|xl|all]
//
// Inputs are hashed values in [-1, 1) (never zeros: they flatter both time and power).
// Errors go to stderr with exit 1.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cudnn_attention.h"
#include "backend/cuda/kernel_configs.h"
#include "backend/cuda/kernel_math.h"
#include "backend/cuda/kernels.h"

namespace {
using K = gt::cuda_kernels::DeviceKernels;

void fail(const std::string& what) {
  std::fprintf(stderr, "gt_gpu_kernel_bench: %s\n", what.c_str());
  std::exit(1);
}
void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(e));
}

__global__ void fill_kernel(float* p, size_t n, unsigned seed, float scale, float offset) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    p[i] = (float(h >> 8) / 8388608.0f - 1.0f) * scale + offset;
  }
}
__global__ void fill_ids(int32_t* p, size_t n, int V) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = int32_t((i * 2654435761u) % unsigned(V));
}

/// Device buffers of this run, freed at the end.
struct Pool {
  std::vector<void*> ptrs;
  template <typename T>
  T* get(size_t n) {
    void* p = nullptr;
    ck(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc");
    ptrs.push_back(p);
    return static_cast<T*>(p);
  }
  float* random(size_t n, unsigned seed, float scale = 1.f, float offset = 0.f) {
    float* p = get<float>(n);
    fill_kernel<<<1024, 256>>>(p, n, seed, scale, offset);
    ck(cudaGetLastError(), "fill");
    return p;
  }
  ~Pool() {
    for (void* p : ptrs) cudaFree(p);
  }
};

/// Median milliseconds of f over 20 timed calls after 3 warm-ups.
double time_ms(cudaStream_t s, const std::function<void()>& f) {
  cudaEvent_t a, b;
  ck(cudaEventCreate(&a), "event");
  ck(cudaEventCreate(&b), "event");
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    ck(cudaEventRecord(a, s), "record");
    f();
    ck(cudaEventRecord(b, s), "record");
    ck(cudaEventSynchronize(b), "sync");
    float t = 0;
    ck(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void report(const char* shape, const char* kernel, double ms, double bytes, double flops) {
  std::printf(
      "{\"shape\": \"%s\", \"kernel\": \"%s\", \"ms\": %.4f, \"bytes\": %.0f, \"gb_s\": %.1f, "
      "\"flops\": %.0f, \"tflop_s\": %s}\n",
      shape, kernel, ms, bytes, bytes / (ms * 1e-3) / 1e9, flops,
      flops > 0 ? std::to_string(flops / (ms * 1e-3) / 1e12).c_str() : "null");
  std::fflush(stdout);
}

void copy_bandwidth(cudaStream_t s) {
  Pool p;
  const size_t n = size_t(1) << 28;  // 1 GiB of floats
  float* a = p.random(n, 1);
  float* b = p.get<float>(n);
  const double ms =
      time_ms(s, [&] { ck(cudaMemcpyAsync(b, a, n * 4, cudaMemcpyDeviceToDevice, s), "copy"); });
  report("1 GiB", "cudaMemcpy device to device (read + write)", ms, 2.0 * n * 4, 0);
}

void bench_shape(cudaStream_t s, const char* name, int B, int T, int C, int NH, int V, int L) {
  Pool p;
  const int64_t N = int64_t(B) * T, H = 4 * int64_t(C);
  const double f4 = 4.0, b2 = 2.0;
  float *x = p.random(N * C, 2), *y = p.random(N * C, 3), *w = p.random(C, 4, 0.1f, 1.f),
        *bias = p.random(C, 5, 0.1f);
  float *mean = p.get<float>(N), *rstd = p.get<float>(N), *res = p.get<float>(N * C);
  uint16_t* o16 = p.get<uint16_t>(N * H);
  float* o32 = p.get<float>(N * H);
  report(name, "residual_layernorm_forward (bf16 out)",
         time_ms(s,
                 [&] {
                   K::residual_layernorm_forward(s, res, nullptr, o16, mean, rstd, x, y, w, bias, N,
                                                 C);
                 }),
         N * C * (3 * f4 + b2) + 8.0 * N, 0);
  report(name, "layernorm_forward (f32 out)",
         time_ms(s, [&] { K::layernorm_forward(s, o32, nullptr, mean, rstd, x, w, bias, N, C); }),
         N * C * 2 * f4 + 8.0 * N, 0);
  float *dw = p.get<float>(C), *db = p.get<float>(C);
  float* partial = p.get<float>(K::layernorm_partial_floats(N, C));
  report(name, "layernorm_backward",
         time_ms(
             s, [&] { K::layernorm_backward(s, res, dw, db, y, x, w, mean, rstd, N, C, partial); }),
         N * C * 4 * f4, 0);
  float* g = p.random(N * H, 6);
  report(name, "gelu_forward_fused (bf16 out, bf16 dgelu)",
         time_ms(s, [&] { K::gelu_forward_fused(s, nullptr, o16, nullptr, o16, g, N * H); }),
         N * H * (f4 + 2 * b2), 0);
  // the classifier on (N, V) f32 logits in place
  float* logits = p.random(N * int64_t(V), 7, 2.f);
  int32_t* tg = p.get<int32_t>(N);
  fill_ids<<<256, 256>>>(tg, N, V);
  float* losses = p.get<float>(N);
  report(name, "softmax_crossentropy_fused (f32 logits)",
         time_ms(s, [&] { K::softmax_ce_fused(s, logits, nullptr, losses, tg, 1.0f / N, N, V); }),
         2.0 * N * V * f4, 0);
  // ... and on bf16 logits (the classifier under bf16: cuBLASLt's bf16 D, its gradient in place)
  uint16_t* logits16 = p.get<uint16_t>(N * int64_t(V));
  K::round16(s, logits16, logits, N * int64_t(V), true);
  report(name, "softmax_crossentropy_fused (bf16 logits)",
         time_ms(s, [&] { K::softmax_ce_fused(s, nullptr, logits16, losses, tg, 1.0f / N, N, V); }),
         2.0 * N * V * b2, 0);
  // attention, flash, bf16: qkv (B,T,3C) f32 in, out bf16, lse
  float* qkv = p.random(N * 3 * C, 8);
  float* lse = p.get<float>(int64_t(B) * NH * T);
  float* delta = p.get<float>(int64_t(B) * NH * T);
  float* dout = p.random(N * C, 9);
  uint16_t* att16 = p.get<uint16_t>(N * C);
  uint16_t* dqkv16 = p.get<uint16_t>(N * 3 * C);
  const int hs = C / NH;
  const double causal = double(T) * (T + 1) / 2;
  const double fwd_flops = 4.0 * B * NH * causal * hs;
  // the flash kernels on an f32 qkv (rounded as they load it), and on the bf16 qkv the qkv
  // product writes under bf16 activations (read in place)
  uint16_t* qkvb = p.get<uint16_t>(N * 3 * C);
  K::round16(s, qkvb, qkv, N * 3 * C, true);
  for (const bool q16 : {false, true}) {
    const float* q32 = q16 ? nullptr : qkv;
    const uint16_t* qb = q16 ? qkvb : nullptr;
    const double qkv_bytes = N * 3 * C * (q16 ? b2 : f4);
    const std::string form = q16 ? "bf16 qkv" : "f32 qkv";
    report(name, ("attention_forward (flash, bf16, " + form + ")").c_str(),
           time_ms(s,
                   [&] {
                     K::attention_forward(s, nullptr, att16, lse, nullptr, q32, qb, B, T, C, NH, 1);
                   }),
           qkv_bytes + N * C * b2, fwd_flops);
    report(name, ("attention_backward (flash, bf16, " + form + ")").c_str(),
           time_ms(s,
                   [&] {
                     K::attention_backward(s, nullptr, dqkv16, dout, q32, qb, nullptr, lse, nullptr,
                                           att16, delta, B, T, C, NH, 1);
                   }),
           qkv_bytes + N * C * (f4 + b2) + N * 3 * C * b2, 2.5 * fwd_flops);
  }
  // cuDNN's fused attention on the same shapes (train.attention = cudnn): bf16 qkv and dout, as
  // the backend rounds them before the call; skipped with the reason where cuDNN cannot load
  try {
    gt::CudnnAttention cu(s);
    uint16_t* qkv16 = p.get<uint16_t>(N * 3 * C);
    uint16_t* dout16 = p.get<uint16_t>(N * C);
    K::round16(s, qkv16, qkv, N * 3 * C, true);
    K::round16(s, dout16, dout, N * C, true);
    const gt::SdpaShape sh{B, T, C, NH, false};
    const std::string fwd_name = "attention_forward (" + cu.describe() + ", bf16)";
    report(name, fwd_name.c_str(), time_ms(s, [&] { cu.forward(att16, lse, qkv16, sh); }),
           (N * 3 * C + N * C) * b2, fwd_flops);
    report(name, "attention_backward (cuDNN, bf16)",
           time_ms(s, [&] { cu.backward(dqkv16, dout16, qkv16, att16, lse, sh); }),
           (N * 3 * C * 2 + N * C * 2) * b2, 2.5 * fwd_flops);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gt_gpu_kernel_bench: cuDNN attention skipped: %s\n", e.what());
  }
  // the optimizer over the model's parameters
  const int64_t params = int64_t(V) * C + int64_t(T) * C + int64_t(L) * 12 * C * C;
  float *pp = p.random(params, 10), *pg = p.random(params, 11, 1e-3f),
        *pm = p.random(params, 12, 1e-4f), *pv = p.random(params, 13, 1e-6f, 1e-6f);
  std::vector<gt::cuda_kernels::AdamChunk> chunks;
  for (int64_t b0 = 0; b0 < params; b0 += 65536)
    chunks.push_back({pp, pg, pm, pv, b0, std::min(params, b0 + 65536), 0.1f});
  auto* dchunks = p.get<gt::cuda_kernels::AdamChunk>(chunks.size());
  ck(cudaMemcpy(dchunks, chunks.data(), chunks.size() * sizeof(chunks[0]), cudaMemcpyHostToDevice),
     "copy");
  report(name, "adamw_fused",
         time_ms(s,
                 [&] {
                   K::adamw_multi(s, dchunks, int64_t(chunks.size()), 1.f, nullptr, 1.0, 0.0, 1e-4f,
                                  0.9f, 0.95f, 1e-8f, 0.5f, 0.7f, nullptr);
                 }),
         params * 7.0 * f4, 0);
  double* sq = p.get<double>(1 + gt::cuda_kernels::configs::kNormBlocks);
  report(name, "sum_squares (gradient norm)",
         time_ms(s, [&] { K::sum_squares(s, sq, pg, params, sq + 1); }), params * f4, 0);
  report(name, "round16 (bf16 weight copies)",
         time_ms(s, [&] { K::round16(s, reinterpret_cast<uint16_t*>(pm), pp, params, true); }),
         params * (f4 + b2), 0);
  float* state = p.get<float>(gt::cuda_math::kFp8StateFloats);
  ck(cudaMemset(state, 0, gt::cuda_math::kFp8StateFloats * 4), "memset");
  auto* q8 = p.get<uint8_t>(N * H);
  report(name, "fp8_quantize (transposed, with amax)",
         time_ms(s, [&] { K::fp8_quantize(s, q8, g, N, H, true, false, state, false); }),
         N * H * (f4 + 1), 0);
  auto* q8t = p.get<uint8_t>(N * H);
  report(name, "fp8_quantize_both (plain and transposed, with amax)",
         time_ms(s, [&] { K::fp8_quantize_both(s, q8, q8t, g, N, H, true, state, false); }),
         N * H * (f4 + 2), 0);
  ck(cudaStreamSynchronize(s), "synchronize");
}

}  // namespace

/// The MLP's GELU rows (bench/gpu_mlp_bench.cpp: C++20, through the backend).
struct MlpRow {
  std::string kernel;
  double ms, bytes, flops;
};
std::vector<MlpRow> bench_mlp_gelu(int B, int T, int C);

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all";
  if (which != "124m" && which != "xl" && which != "all")
    fail("argument '" + which + "': expected 124m, xl or all");
  cudaStream_t s;
  ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  copy_bandwidth(s);
  if (which != "xl") bench_shape(s, "GPT-2 124M B32 T1024", 32, 1024, 768, 12, 50304, 12);
  if (which != "124m") bench_shape(s, "GPT-2 XL B8 T1024", 8, 1024, 1600, 25, 50304, 48);
  for (const auto& [shape, B, C] :
       {std::tuple{"GPT-2 124M B32 T1024", 32, 768}, std::tuple{"GPT-2 XL B8 T1024", 8, 1600}})
    if (which == "all" || (C == 768) == (which == "124m"))
      for (const MlpRow& r : bench_mlp_gelu(B, 1024, C))
        report(shape, r.kernel.c_str(), r.ms, r.bytes, r.flops);
  cudaStreamDestroy(s);
  return 0;
}
