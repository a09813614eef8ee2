// bench/cuda_matmul_peak.cu: the GPU's measured dense bf16 matrix-product peak, to read MFU
// against beside the datasheet figure (bench/gpu-check.sh stage 5).
//
//   gt_cuda_matmul_peak [N=8192] [RUNS=20] [REPS=10] [DEVICE=0]
//
// D (N x N, bf16) = A^T (N x N, bf16) * B (N x N, bf16) through cuBLASLt, fp32 accumulation
// (CUBLAS_COMPUTE_32F, scale type fp32), the "TN" layout (A transposed), as cuBLASLt's
// documentation recommends for Hopper tensor cores; the first algorithm cuBLASLt's heuristic
// returns, with a 32 MiB workspace. Operands are filled with values in [-1, 1) (a hash of the
// index, so zeros do not flatter the power draw). After 3 untimed warm-up products, RUNS timed
// runs of REPS back-to-back products each, timed with cudaEvents; prints one JSON object with
// the median and the best run in TFLOP/s (2 N^3 floating-point operations per product).
// Errors (bad arguments, no device, a failing CUDA or cuBLASLt call) go to stderr with exit 1.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void fail(const std::string& what) {
  std::fprintf(stderr, "gt_cuda_matmul_peak: %s\n", what.c_str());
  std::exit(1);
}

void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) fail(std::string(call) + ": " + cudaGetErrorString(e));
}

void check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail(std::string(call) + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}

#define CK(x) check((x), #x)

long parse_arg(int argc, char** argv, int i, long def, long lo, long hi, const char* name) {
  if (argc <= i) return def;
  char* end = nullptr;
  long v = std::strtol(argv[i], &end, 10);
  if (*argv[i] == '\0' || *end != '\0' || v < lo || v > hi)
    fail(std::string("argument ") + std::to_string(i) + " (" + name + ") '" + argv[i] +
         "': expected a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return v;
}

// Values in [-1, 1) from a 32-bit integer hash of the index (deterministic, no cuRAND).
__global__ void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    p[i] = __float2bfloat16(static_cast<float>(h >> 8) / 8388608.0f - 1.0f);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long n = parse_arg(argc, argv, 1, 8192, 256, 32768, "N");
  const int runs = static_cast<int>(parse_arg(argc, argv, 2, 20, 1, 1000, "RUNS"));
  const int reps = static_cast<int>(parse_arg(argc, argv, 3, 10, 1, 1000, "REPS"));
  const int dev = static_cast<int>(parse_arg(argc, argv, 4, 0, 0, 1024, "DEVICE"));

  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) fail("no CUDA device");
  if (dev >= count)
    fail("DEVICE " + std::to_string(dev) + ": there are only " + std::to_string(count));
  CK(cudaSetDevice(dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));

  const size_t elems = static_cast<size_t>(n) * n;
  __nv_bfloat16 *a = nullptr, *b = nullptr, *d = nullptr;
  void* workspace = nullptr;
  const size_t ws_bytes = 32u << 20;
  CK(cudaMalloc(&a, elems * sizeof(__nv_bfloat16)));
  CK(cudaMalloc(&b, elems * sizeof(__nv_bfloat16)));
  CK(cudaMalloc(&d, elems * sizeof(__nv_bfloat16)));
  CK(cudaMalloc(&workspace, ws_bytes));
  fill<<<1024, 256>>>(a, elems, 1u);
  fill<<<1024, 256>>>(b, elems, 2u);
  CK(cudaGetLastError());

  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t op;
  CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  // column-major: A is stored k x m (transposed in the product), B k x n, D m x n
  cublasLtMatrixLayout_t la, lb, ld;
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, n, n));
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, n, n));
  CK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, n));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                          sizeof(ws_bytes)));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &heur, &found));
  if (found == 0) fail("cuBLASLt has no algorithm for a bf16 product of this size");

  const float alpha = 1.0f, beta = 0.0f;
  auto product = [&] {
    CK(cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heur.algo, workspace,
                      ws_bytes, nullptr));
  };
  for (int i = 0; i < 3; ++i) product();
  CK(cudaDeviceSynchronize());

  cudaEvent_t start, stop;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  std::vector<double> tflops;
  const double flops = 2.0 * static_cast<double>(n) * n * n * reps;
  for (int r = 0; r < runs; ++r) {
    CK(cudaEventRecord(start));
    for (int i = 0; i < reps; ++i) product();
    CK(cudaEventRecord(stop));
    CK(cudaEventSynchronize(stop));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, start, stop));
    tflops.push_back(flops / (ms * 1e-3) / 1e12);
  }
  std::vector<double> sorted = tflops;
  std::sort(sorted.begin(), sorted.end());
  const double median =
      runs % 2 ? sorted[runs / 2] : 0.5 * (sorted[runs / 2 - 1] + sorted[runs / 2]);

  std::printf(
      "{\"device\": \"%s\", \"compute_capability\": \"%d.%d\", \"m\": %ld, \"n\": %ld, \"k\": %ld, "
      "\"operands\": \"bf16\", \"accumulate\": \"fp32\", \"layout\": \"TN\", \"runs\": %d, "
      "\"products_per_run\": %d, \"median_tflops\": %.1f, \"best_tflops\": %.1f, "
      "\"worst_tflops\": %.1f, \"timing\": \"cudaEvent\", \"library\": \"cuBLASLt %d\"}\n",
      prop.name, prop.major, prop.minor, n, n, n, runs, reps, median, sorted.back(), sorted.front(),
      static_cast<int>(cublasLtGetVersion()));

  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(lt);
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  cudaFree(workspace);
  return 0;
}
