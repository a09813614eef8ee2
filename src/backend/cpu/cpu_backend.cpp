// backend/cpu/cpu_backend.cpp: the fp32 reference kernels on the CPU (llm.c's
// train_gpt2.c forms, parallelised with OpenMP so that every result is independent of
// the thread count: no atomics, reductions in a fixed order). Matrix products go to
// oneDNN. This is the reference that faster forms (fused, bf16, CUDA) are tested against.
#include "backend/cpu/cpu_backend.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/adam_math.h"
#include "backend/backend.h"
#include "backend/cpu/aligned_vector.h"
#include "backend/cpu/amx_matmul.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/classifier.h"
#include "backend/cpu/fast_math.h"
#include "backend/cpu/gelu.h"
#include "backend/cpu/lowp_operands.h"
#include "backend/cpu/onednn_matmul.h"
#include "backend/cpu/thread_team.h"
#include "core/error.h"

namespace gt {
namespace {

constexpr float kLnEps = 1e-5f;
/// Rows per block of layernorm_backward's partial parameter-gradient sums.
constexpr int64_t kLnRows = 64;

/// Throws gt::Error naming the first target outside the vocabulary [0, V).
void check_targets(const int32_t* targets, int64_t N, int V) {
  for (int64_t i = 0; i < N; ++i)
    if (targets[i] < 0 || targets[i] >= V)
      throw Error(fmt::format("target token {} at row {} is outside the vocabulary [0, {})",
                              targets[i], i, V));
}

/// Splits [0, n) into contiguous chunks, one per thread, and calls f(begin, end).
template <typename F>
void parallel_chunks(int64_t n, F f) {
#pragma omp parallel
  {
    int nt = omp_get_num_threads(), id = omp_get_thread_num();
    int64_t per = (n + nt - 1) / nt;
    int64_t b = std::min<int64_t>(n, per * id), e = std::min<int64_t>(n, b + per);
    if (b < e) f(b, e);
  }
}

/// One LayerNorm row (eps kLnEps, biased variance): o = (x - mean) rstd w + b, and its bf16
/// copy into o16 when not null; o may be null (bf16 activations: o16 only).
inline void layernorm_row(float* o, uint16_t* o16, float* mean, float* rstd, const float* x,
                          const float* w, const float* b, int C) {
  float m = 0.f;
  for (int c = 0; c < C; ++c) m += x[c];
  m /= C;
  float v = 0.f;
  for (int c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
  v /= C;
  const float s = 1.0f / std::sqrt(v + kLnEps);
  if (o) {
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * s * w[c] + b[c];
    if (o16) cpu::store_bf16(o16, o, C);
  } else {  // 64 at a time through a float row, so the rounding is store_bf16's
    float t[64];
    for (int c0 = 0; c0 < C; c0 += 64) {
      const int n = std::min(64, C - c0);
#pragma omp simd
      for (int c = 0; c < n; ++c) t[c] = (x[c0 + c] - m) * s * w[c0 + c] + b[c0 + c];
      cpu::store_bf16(o16 + c0, t, n);
    }
  }
  *mean = m;
  *rstd = s;
}

/// The attention products' operand type under a precision policy (Attention emulates bf16 and
/// f16 where oneDNN lacks them: attn_type_on_this_cpu).
cpu::AttnType attention_type(Precision p) {
  switch (p) {
    case Precision::bf16:
      return cpu::AttnType::bf16;
    case Precision::fp16:
      return cpu::AttnType::f16;
    default:
      return cpu::AttnType::f32;
  }
}

cpu::LowpFormat lowp_format(Precision p) {
  return p == Precision::fp16 ? cpu::LowpFormat::f16 : cpu::LowpFormat::bf16;
}

class CpuBackend final : public HostMemoryBackend {
 public:
  explicit CpuBackend(const BackendOptions& opt)
      : team_(opt.threads > 0 ? opt.threads : omp_get_max_threads(), opt.adaptive_threads) {
    omp_set_num_threads(team_.threads());
  }
  std::string name() const override { return "cpu"; }

  /// The team for the next step (cpu/thread_team.h). OpenMP's team size is a setting of the
  /// calling thread: the trainer's, which runs every op.
  void end_step(double step_s) override {
    const double now =
        std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    const int before = team_.threads();
    const int n = team_.end_step(now, step_s);
    if (n != before) omp_set_num_threads(n);
    if (team_.yielding() && !parked_.parked() && !parked_.start(n)) {
      team_.disable_yield(parked_.error());  // not tried again in this run
      if (team_.threads() != n) omp_set_num_threads(team_.threads());
    }
    if (!team_.yielding()) parked_.stop();
  }
  std::optional<ThreadPolicy> thread_policy() const override { return team_.policy(); }
  ThreadCount thread_count() const override {
    return {team_.threads(), team_.team(), team_.yielding()};
  }

  /// fp32: oneDNN's. bf16: the own kernel where there is one (AMX tiles, or AVX512_BF16
  /// without AMX) for the products it takes, oneDNN's for the rest; emulated (f32 products of
  /// the rounded operands: lowp_operands.h) where oneDNN has no bf16 product with bf16
  /// instructions here (onednn_supports), or where forced. fp16: oneDNN's, or emulated where it
  /// has none (Debian 12's oneDNN 2.6.3 has none on the CPUs seen here). own_share: the own
  /// kernel's share of the linear layers' product FLOPs so far (the attention's products are the
  /// attention's).
  std::optional<ProductPath> product_path() const override {
    ProductPath p;
    p.precision = to_string(prec_);
    p.isa = cpu::onednn_isa_name();
    p.kernel = "oneDNN";
    if (prec_ == Precision::fp32) return p;
    if (lowp_.emulated()) {
      p.emulated = true;
      // bf16: oneDNN has bf16 products on every AVX-512 CPU, but emulates their dot products
      // where its instruction set has no bf16 instructions (onednn_supports)
      const std::string why =
          cpu::lowp_emulation_forced()
              ? std::string("forced by GT_CPU_EMULATE_LOWP=1 or set_lowp_emulation")
              : fmt::format("oneDNN has no {} product{} here (its instruction set: {})",
                            p.precision, prec_ == Precision::bf16 ? " with bf16 instructions" : "",
                            p.isa);
      p.emulated_reason =
          fmt::format("{}: f32 products of {}-rounded operands, which take about fp32's time", why,
                      p.precision);
    } else if (prec_ == Precision::bf16 && cpu::own_bf16_kernel() != cpu::Bf16Kernel::none) {
      p.kernel = cpu::bf16_kernel_name(cpu::own_bf16_kernel());
      if (product_flop_ > 0) p.own_share = own_flop_ / product_flop_;
    }
    return p;
  }

  // memory: host memory (HostMemoryBackend, backend.h)

  /// fp32, bf16 and fp16 on every x86-64 CPU (bf16 and fp16 emulated where oneDNN has no such
  /// product: cpu/lowp_operands.h); fp8 nowhere.
  bool supports(Op op, Precision p) const override {
    (void)op;
    return p != Precision::fp8;
  }
  /// The attention buffers (cpu/attention.h, per thread), LayerNorm's partial sums; for
  /// bf16/fp16 also 16-bit copies of every matrix weight plus the operand buffer
  /// (N*max(hidden,V) elements) and, unless the product inputs are stored in bf16, the
  /// backward's buffer for the rounded product inputs (N*hidden). Emulated products (oneDNN
  /// without a 16-bit product here) keep rounded values as floats (x2), widen bf16 inputs
  /// into the second buffer too, and compute bf16 outputs into an f32 buffer (N*hidden).
  size_t workspace_bytes(const WorkspaceQuery& q) const override {
    const size_t fixed =
        cpu::attention_workspace_bytes(q.T, q.C, q.NH, attention_type(q.precision), q.fused,
                                       team_.team()) +
        static_cast<size_t>((q.N + kLnRows - 1) / kLnRows) * 2 * q.C * sizeof(float);
    if (q.precision == Precision::fp32) return fixed;
    const cpu::LowpFormat f = lowp_format(q.precision);
    const bool emulated = cpu::LowpOperands::emulated_here(f);
    const bool act16 = q.bf16_activations && q.precision == Precision::bf16;
    const int64_t hidden = q.N * q.hidden;
    // bf16 logits (fused, bf16 activations): the classifier's gradient is bf16 already, so
    // the widest rounded operand is a block's; emulated, the logits come through the result
    // buffer
    const bool logits16 = act16 && q.fused;
    const int64_t a_elems = q.N * std::max<int64_t>(q.hidden, logits16 ? 3 * q.C : q.V);
    const int64_t result = !(act16 && emulated) ? 0
                           : logits16           ? q.N * std::max<int64_t>(q.hidden, q.V)
                                                : hidden;
    return fixed +
           cpu::LowpOperands::workspace_bytes(f, q.weight_elems, a_elems,
                                              act16 && !emulated ? 0 : hidden, result) +
           (q.precision == Precision::bf16 && !emulated ? amx_bytes(q) : 0);
  }
  /// The own bf16 products' buffers (cpu/amx_matmul.h: AMX, or AVX512_BF16) at the block's and the
  /// classifier's products that it takes: forward (N, out, in), input gradient (N, in, out) and
  /// weight gradient (in, out, N), or (out, in, N) for the classifier's transposed weights.
  size_t amx_bytes(const WorkspaceQuery& q) const {
    const int64_t C = q.C, H = q.hidden, V = q.V, N = q.N;
    int64_t max_m = 0, max_nk = 0, max_k = 0;
    for (auto [m, n, k] : {std::tuple{N, 3 * C, C},
                           {N, C, C},
                           {N, H, C},
                           {N, C, H},
                           {N, V, C},
                           {N, C, 3 * C},
                           {N, C, V},
                           {C, 3 * C, N},
                           {C, C, N},
                           {C, H, N},
                           {H, C, N},
                           {V, C, N}})
      if (cpu::amx_matmul_takes(m, n, k)) {
        max_m = std::max(max_m, m);
        max_nk = std::max(max_nk, n * k);
        max_k = std::max(max_k, k);
      }
    return cpu::amx_matmul_workspace_bytes(max_m, max_nk, max_k, team_.team());
  }

  void embedding_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B,
                         int T, int C) override {
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        float* o = out + ((int64_t)b * T + t) * C;
        const float* we = wte + (int64_t)inp[(int64_t)b * T + t] * C;
        const float* wp = wpe + (int64_t)t * C;
        for (int c = 0; c < C; ++c) o[c] = we[c] + wp[c];
      }
  }

  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                          int T, int C) override {
    // split the channels among threads: each thread owns a slice of every row
    parallel_chunks(C, [&](int64_t c0, int64_t c1) {
      for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t) {
          const float* d = dout + ((int64_t)b * T + t) * C;
          float* we = dwte + (int64_t)inp[(int64_t)b * T + t] * C;
          float* wp = dwpe + (int64_t)t * C;
          for (int64_t c = c0; c < c1; ++c) {
            we[c] += d[c];
            wp[c] += d[c];
          }
        }
    });
  }

  void layernorm_forward(DevPtr out, float* mean, float* rstd, const float* inp, const float* w,
                         const float* b, int64_t N, int C) override {
    uint16_t* o16 = as16(out);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; ++i)
      layernorm_row(o16 ? nullptr : out.f32() + i * C, o16 ? o16 + i * C : nullptr, mean + i,
                    rstd + i, inp + i * C, w, b, C);
  }

  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                          const float* w, const float* mean, const float* rstd, int64_t N,
                          int C) override {
    // One pass over the rows: each block of kLnRows rows also sums its share of dw and db
    // into its own partial row (the rows are read once, not again for the parameter
    // gradients); the partials are then added in block order, so the sums do not depend on
    // the thread count.
    const int64_t nb = (N + kLnRows - 1) / kLnRows;
    if ((int64_t)ln_partial_.size() < nb * 2 * C) ln_partial_.assign(nb * 2 * C, 0.0f);
    float* part = ln_partial_.data();
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < nb; ++blk) {
      float* pdw = part + blk * 2 * C;
      float* pdb = pdw + C;
      std::fill(pdw, pdw + 2 * C, 0.0f);
      for (int64_t i = blk * kLnRows; i < std::min(N, (blk + 1) * kLnRows); ++i) {
        const float* d = dout + i * C;
        const float* x = inp + i * C;
        float m = mean[i], s = rstd[i];
        float dnorm_mean = 0.f, dnorm_norm_mean = 0.f;
        for (int c = 0; c < C; ++c) {
          float dn = w[c] * d[c];
          dnorm_mean += dn;
          dnorm_norm_mean += dn * (x[c] - m) * s;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        float* di = dinp + i * C;
#pragma omp simd
        for (int c = 0; c < C; ++c) {
          float norm = (x[c] - m) * s;
          di[c] += (w[c] * d[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
          pdb[c] += d[c];
          pdw[c] += norm * d[c];
        }
      }
    }
    parallel_chunks(C, [&](int64_t c0, int64_t c1) {
      for (int64_t blk = 0; blk < nb; ++blk) {
        const float* pdw = part + blk * 2 * C;
        for (int64_t c = c0; c < c1; ++c) {
          dw[c] += pdw[c];
          db[c] += pdw[C + c];
        }
      }
    });
  }

  void matmul_forward(DevPtr out, ConstDevPtr inp, const float* w, const float* bias, int64_t N,
                      int C, int OC, bool w_transposed) override {
    forward_product(out.data, inp, w, bias, N, C, OC, w_transposed,
                    {.c_bf16 = as16(out) != nullptr});
  }
  /// With pre (the training form, which the model asks only of backends whose
  /// saves_gelu_input() is true, not of this one): the product and its bias into an f32
  /// buffer allocated per call, then its GELU into out and its copy (rounded when bf16) into
  /// pre. Correct, not fast: here gelu' is the form to save (a oneDNN binary post-op).
  void matmul_gelu_forward(DevPtr out, DevPtr pre, ConstDevPtr inp, const float* w,
                           const float* bias, int64_t N, int C, int OC) override {
    if (!pre)
      return forward_product(out.data, inp, w, bias, N, C, OC, false,
                             {.gelu = true, .c_bf16 = as16(out) != nullptr});
    std::vector<float> t(static_cast<size_t>(N * OC));
    forward_product(t.data(), inp, w, bias, N, C, OC, false, {});
    gelu_forward(out, t.data(), N * OC);
    if (uint16_t* p16 = as16(pre))
      cpu::store_bf16(p16, t.data(), N * OC);
    else
      std::memcpy(pre.f32(), t.data(), t.size() * sizeof(float));
  }
  /// With the own bf16 kernel (bf16 out and dgelu, a product it takes): GELU and gelu' in the
  /// product's epilogue, pre never written (an f32 (N,OC) written and read again, and a pass,
  /// fewer per layer); otherwise the default, matmul_forward then gelu_forward_fused. The
  /// same bits either way (AmxEpilogue::gelu).
  void matmul_gelu_forward_fused(DevPtr out, DevPtr dgelu, float* pre, ConstDevPtr inp,
                                 const float* w, const float* bias, int64_t N, int C,
                                 int OC) override {
    uint16_t* o16 = as16(out);
    uint16_t* g16 = as16(dgelu);
    if (!o16 || !g16 || prec_ == Precision::fp32 || !own_product(N, OC, C))
      return Backend::matmul_gelu_forward_fused(out, dgelu, pre, inp, w, bias, N, C, OC);
    const void* a = operand(cpu::LowpOperands::kA, inp, N * C);
    const void* b = lowp_.weight(w, (int64_t)C * OC);
    product(o16, a, b, bias, N, OC, C, false, false, {.gelu = true, .c_bf16 = true}, nullptr, false,
            g16);
  }
  /// Whether product() runs an (M,K) x (K,N) product on the own bf16 kernel (AMX tiles, or
  /// AVX512_BF16 without AMX): native bf16 operands and a shape amx_matmul_takes().
  bool own_product(int64_t M, int64_t N, int64_t K) const {
    return !lowp_.emulated() && lowp_.mm_type() == cpu::MmType::bf16 &&
           cpu::amx_matmul_takes(M, N, K);
  }
  /// out = inp @ W + bias with `post` applied, the operands in the current precision.
  void forward_product(void* out, ConstDevPtr inp, const float* w, const float* bias, int64_t N,
                       int C, int OC, bool w_transposed, const cpu::MmPost& post) {
    if (prec_ == Precision::fp32) {
      cpu::onednn_matmul(out, f32(inp), w, bias, N, OC, C, false, w_transposed, false,
                         cpu::MmType::f32, post);
      return;
    }
    const void* a = operand(cpu::LowpOperands::kA, inp, N * C);
    const void* b = lowp_.weight(w, (int64_t)C * OC);
    product(out, a, b, bias, N, OC, C, false, w_transposed, post);
  }
  /// A 16-bit product (onednn_matmul's arguments). Emulated products with a bf16 output or a
  /// bf16 multiplier: oneDNN 2.6's f32 products have no bf16 output on such CPUs and take a
  /// bf16 post-op operand only in its reference kernel, so the product goes into an f32
  /// buffer and the multiply and the rounding (nearest even, as oneDNN's) are done here.
  /// a_col_sums (K f32, or null, A not transposed): where the product runs on the own bf16
  /// kernel (AMX or AVX512_BF16), A's column sums are added into it while A is packed
  /// (AmxEpilogue::a_col_sums) and true is returned; false: not summed (the caller sums).
  /// accumulate: C += the product (an f32 C with no post-op: a weight gradient). dgelu (M,N)
  /// bf16, with post.gelu, where own_product(): gelu' beside C (AmxEpilogue::dgelu).
  bool product(void* c, const void* a, const void* b, const float* bias, int64_t M, int64_t N,
               int64_t K, bool trans_a, bool trans_b, const cpu::MmPost& post,
               float* a_col_sums = nullptr, bool accumulate = false, uint16_t* dgelu = nullptr) {
    const double flop = 2.0 * static_cast<double>(M) * static_cast<double>(N) * K;
    product_flop_ += flop;
    // every native bf16 product the own kernel (AMX tiles, or AVX512_BF16 without AMX) takes:
    // forward, input and weight gradients
    // (inside the steps, on AMX, the latter took 0.81-0.89x oneDNN's time; on an EPYC 9004's
    // vector unit all of them about 0.95x, docs/benchmarks.md)
    if (own_product(M, N, K)) {
      own_flop_ += flop;
      cpu::amx_matmul_bf16(c, static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), M,
                           N, K, trans_a, trans_b,
                           {.bias = bias,
                            .mul = post.mul,
                            .mul_bf16 = post.mul_bf16,
                            .c_bf16 = post.c_bf16,
                            .accumulate = accumulate,
                            .a_col_sums = a_col_sums,
                            .gelu = post.gelu,
                            .dgelu = dgelu});
      return a_col_sums != nullptr;
    }
    if (dgelu) throw Error("cpu backend: gelu' beside a product needs the own bf16 kernel");
    if (!lowp_.emulated() || (!post.c_bf16 && !post.mul_bf16)) {
      cpu::onednn_matmul(c, a, b, bias, M, N, K, trans_a, trans_b, accumulate, lowp_.mm_type(),
                         post);
      return false;
    }
    float* t = lowp_.result_buffer(M * N);
    cpu::onednn_matmul(t, a, b, bias, M, N, K, trans_a, trans_b, false, cpu::MmType::f32,
                       {.gelu = post.gelu});
    parallel_chunks(M * N, [&](int64_t i0, int64_t i1) {
      if (post.mul) {
        if (post.mul_bf16) {
          const uint16_t* m = static_cast<const uint16_t*>(post.mul);
#pragma omp simd
          for (int64_t i = i0; i < i1; ++i) t[i] *= cpu::bf16_to_float(m[i]);
        } else {
          const float* m = static_cast<const float*>(post.mul);
#pragma omp simd
          for (int64_t i = i0; i < i1; ++i) t[i] *= m[i];
        }
      }
      if (post.c_bf16)
        cpu::store_bf16(static_cast<uint16_t*>(c) + i0, t + i0, i1 - i0);
      else
        std::memcpy(static_cast<float*>(c) + i0, t + i0, (i1 - i0) * sizeof(float));
    });
    return false;
  }

  void matmul_backward(float* dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                       const float* w, int64_t N, int C, int OC, bool w_transposed) override {
    matmul_backward_impl(dinp, dw, dbias, dout, inp, w, nullptr, N, C, OC, w_transposed);
  }
  /// GeluSaved::input (not what the model saves here: saves_gelu_input() is false): gelu' of
  /// the saved pre-activation into an f32 buffer allocated per call, then as with gelu' saved.
  void matmul_backward_gelu(DevPtr dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                            const float* w, ConstDevPtr gelu, GeluSaved saved, int64_t N, int C,
                            int OC) override {
    if (saved == GeluSaved::derivative)
      return matmul_backward_impl(dinp, dw, dbias, dout, inp, w, gelu, N, C, OC, false);
    std::vector<float> dg(static_cast<size_t>(N * C));
    const uint16_t* g16 = as16(gelu);
    parallel_chunks(N * C, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        dg[i] = cpu::gelu_grad(g16 ? cpu::bf16_to_float(g16[i]) : gelu.f32()[i]);
    });
    matmul_backward_impl(dinp, dw, dbias, dout, inp, w, ConstDevPtr(dg.data()), N, C, OC, false);
  }
  /// dgelu: when set, dinp = (dout @ W^T) * dgelu (binary post-op, f32 or bf16); a bf16 dinp
  /// is written rounded by the product.
  void matmul_backward_impl(DevPtr dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                            const float* w, ConstDevPtr dgelu, int64_t N, int C, int OC,
                            bool w_transposed) {
    // bf16: the bias gradient sums the rounded operand (bf16, or f32 where emulated)
    const void* dbias_src = nullptr;
    const cpu::MmPost post{
        .mul = dgelu.data, .mul_bf16 = as16(dgelu) != nullptr, .c_bf16 = as16(dinp) != nullptr};
    if (prec_ == Precision::fp32) {
      if (dinp)
        cpu::onednn_matmul(dinp.data, f32(dout), w, nullptr, N, C, OC, false, !w_transposed, false,
                           cpu::MmType::f32, post);
      if (!w_transposed)
        cpu::onednn_matmul(dw, f32(inp), f32(dout), nullptr, C, OC, N, true, false, true);
      else
        cpu::onednn_matmul(dw, f32(dout), f32(inp), nullptr, OC, C, N, true, false, true);
    } else {
      // dout and inp in 16 bits (rounded here unless they are bf16 tensors already); both
      // products accumulate in f32
      const void* d = operand(cpu::LowpOperands::kA, dout, N * OC);
      if (prec_ == Precision::bf16) dbias_src = d;
      const void* x = operand(cpu::LowpOperands::kB, inp, N * C);
      // the bias gradient (dout's column sums) summed by the own bf16 product as it reads dout
      // (it runs only for native bf16 products; elsewhere product() returns false)
      if (dinp && product(dinp.data, d, lowp_.weight(w, (int64_t)C * OC), nullptr, N, C, OC, false,
                          !w_transposed, post, dbias))
        dbias = nullptr;
      // dW += X^T dY, or dY^T X for weights stored transposed (the classifier's)
      if (!w_transposed)
        product(dw, x, d, nullptr, C, OC, N, true, false, {}, nullptr, true);
      else
        product(dw, d, x, nullptr, OC, C, N, true, false, {}, nullptr, true);
    }
    if (dbias && dbias_src && !lowp_.emulated()) {  // half the bytes of the f32 dout
      const uint16_t* dout16 = static_cast<const uint16_t*>(dbias_src);
      parallel_chunks(OC, [&](int64_t o0, int64_t o1) {
        for (int64_t i = 0; i < N; ++i) {
          const uint16_t* d = dout16 + i * OC;
#pragma omp simd
          for (int64_t o = o0; o < o1; ++o) dbias[o] += cpu::bf16_to_float(d[o]);
        }
      });
    } else if (dbias) {  // the sums stay f32, in the same order as above
      const float* d0 = dbias_src ? static_cast<const float*>(dbias_src) : f32(dout);
      parallel_chunks(OC, [&](int64_t o0, int64_t o1) {
        for (int64_t i = 0; i < N; ++i) {
          const float* d = d0 + i * OC;
          for (int64_t o = o0; o < o1; ++o) dbias[o] += d[o];
        }
      });
    }
  }

  void attention_forward(DevPtr out, float* att, const float* qkv, int B, int T, int C,
                         int NH) override {
    if (uint16_t* o16 = as16(out))
      return attn_.forward(nullptr, att, nullptr, qkv, B, T, C, NH, o16);
    attn_.forward(out.f32(), att, nullptr, qkv, B, T, C, NH, nullptr);
  }

  void attention_backward(DevPtr dqkv, const float* dout, const float* qkv, const float* att, int B,
                          int T, int C, int NH) override {
    uint16_t* d16 = as16(dqkv);
    attn_.backward(d16 ? nullptr : dqkv.f32(), dout, qkv, att, nullptr, B, T, C, NH, d16);
  }

  // every GELU pass goes through gelu_fused_loop, so they agree bitwise
  void gelu_forward(DevPtr out, const float* inp, int64_t N) override {
    if (uint16_t* o16 = as16(out))
      return cpu::gelu_fused_loop<2, 0>(nullptr, o16, nullptr, nullptr, inp, N);
    cpu::gelu_fused_loop<0, 0>(out.f32(), nullptr, nullptr, nullptr, inp, N);
  }

  void gelu_backward(DevPtr dinp, const float* inp, const float* dout, int64_t N) override {
    if (uint16_t* d16 = as16(dinp))
      return cpu::gelu_fused_loop<0, 4>(nullptr, nullptr, nullptr, d16, inp, N, dout);
    cpu::gelu_fused_loop<0, 3>(nullptr, nullptr, dinp.f32(), nullptr, inp, N, dout);
  }

  void gelu_forward_fused(DevPtr out, DevPtr dgelu, const float* inp, int64_t N) override {
    uint16_t* o16 = as16(out);
    const int g = !dgelu ? 0 : as16(dgelu) ? 2 : 1;
    if (o16) return cpu::gelu_fused<2>(g, nullptr, o16, dgelu.f32(), inp, N);
    cpu::gelu_fused<0>(g, out.f32(), nullptr, dgelu.f32(), inp, N);
  }

  void residual_forward(float* out, const float* a, const float* b, int64_t N) override {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; ++i) out[i] = a[i] + b[i];
  }

  void softmax_crossentropy_forward(float* probs, float* losses, const float* logits,
                                    const int32_t* targets, int64_t N, int V) override {
    check_targets(targets, N, V);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; ++i) {
      const float* l = logits + i * V;
      float* p = probs + i * V;
      float maxv = cpu::row_max(l, V);
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < V; ++j) {
        p[j] = cpu::exp_approx(l[j] - maxv);
        sum += p[j];
      }
      float inv = 1.0f / sum;
      for (int j = 0; j < V; ++j) p[j] *= inv;
      losses[i] = std::log(sum) + maxv - l[targets[i]];
    }
  }

  void softmax_crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets,
                                     float dloss, int64_t N, int V) override {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; ++i) {
      const float* p = probs + i * V;
      float* d = dlogits + i * V;
      for (int j = 0; j < V; ++j) d[j] = p[j] * dloss;
      d[targets[i]] -= dloss;
    }
  }

  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                    float beta2, float eps, float weight_decay, int64_t t) override {
    const float bc1 = 1.0f - std::pow(beta1, (float)t);
    const float bc2_sqrt = std::sqrt(1.0f - std::pow(beta2, (float)t));
    const float step_size = lr / bc1;
    const float decay = 1.0f - lr * weight_decay;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float gi = g[i];
      float mi = beta1 * m[i] + (1.0f - beta1) * gi;
      float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      float denom = std::sqrt(vi) / bc2_sqrt + eps;
      p[i] = p[i] * decay - step_size * mi / denom;
    }
  }

  double sum_squares(const float* g, int64_t n) override {
    constexpr int64_t kChunk = 1 << 16;
    int64_t nchunks = (n + kChunk - 1) / kChunk;
    std::vector<double> part(nchunks, 0.0);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nchunks; ++c) {
      double s = 0.0;
      int64_t e = std::min(n, (c + 1) * kChunk);
      for (int64_t i = c * kChunk; i < e; ++i) s += (double)g[i] * g[i];
      part[c] = s;
    }
    double s = 0.0;
    for (double x : part) s += x;
    return s;
  }

  /// Zeroes `bytes` bytes at p (host memory): a span of at least 256 KiB split among the team
  /// in 64-byte lines. The gradients are zeroed before each step, and the trainer's thread alone
  /// took 65-73 us per call for the CPU preset's 3.1 MiB while the other threads spun, 6.6 ms
  /// for nanoGPT's 42 MiB; split, 37-44 us and 2.5 ms (EPYC 9004, 2 threads, alternating steps).
  void zero(void* p, size_t bytes) override {
    constexpr size_t kLine = 64, kSerialBytes = size_t{256} << 10;
    if (bytes < kSerialBytes || omp_get_max_threads() == 1)
      return HostMemoryBackend::zero(p, bytes);
    char* c = static_cast<char*>(p);
    parallel_chunks(static_cast<int64_t>((bytes + kLine - 1) / kLine), [&](int64_t b, int64_t e) {
      const size_t from = static_cast<size_t>(b) * kLine;
      std::memset(c + from, 0, std::min(bytes, static_cast<size_t>(e) * kLine) - from);
    });
  }

  void scale(DevPtr g, float s, int64_t n) override {
    if (uint16_t* g16 = as16(g)) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) g16[i] = cpu::to_bf16(cpu::bf16_to_float(g16[i]) * s);
      return;
    }
    float* g32 = g.f32();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) g32[i] *= s;
  }

  void set_precision(Precision p) override {
    if (p == Precision::fp8)
      throw Error(
          "train.precision = 'fp8': fp8 matrix products need the CUDA backend on a Hopper GPU; "
          "the CPU backend runs fp32, bf16 or fp16");
    // Where oneDNN has no product of the 16-bit type on this CPU (f16 in oneDNN 2.6, Debian
    // 12's; bf16 without bf16 instructions: onednn_supports), the operands are rounded to it
    // (so range, overflow and rounding are those of the type) and multiplied in f32, which is
    // exact for products of two such values with f32 accumulation (cpu/lowp_operands.h).
    prec_ = p;
    lowp_.set_format(lowp_format(p));
    attn_.set_type(attention_type(p));
  }
  Precision precision() const override { return prec_; }
  void set_stochastic_rounding(bool on, uint64_t seed) override {
    lowp_.set_stochastic_rounding(on, seed);
  }
  void weights_updated() override { lowp_.weights_updated(); }

  void residual_layernorm_forward(float* res, DevPtr out, float* mean, float* rstd, const float* a,
                                  const float* b, const float* w, const float* bias, int64_t N,
                                  int C) override {
    uint16_t* o16 = as16(out);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; ++i) {
      const float* x1 = a + i * C;
      const float* x2 = b + i * C;
      float* r = res + i * C;
      for (int c = 0; c < C; ++c) r[c] = x1[c] + x2[c];
      layernorm_row(o16 ? nullptr : out.f32() + i * C, o16 ? o16 + i * C : nullptr, mean + i,
                    rstd + i, r, w, bias, C);
    }
  }

  void attention_forward_fused(DevPtr out, float* lse, ConstDevPtr qkv, int B, int T, int C,
                               int NH) override {
    if (uint16_t* o16 = as16(out))
      return attn_.forward(nullptr, nullptr, lse, qkv_rows(qkv), B, T, C, NH, o16);
    attn_.forward(out.f32(), nullptr, lse, qkv_rows(qkv), B, T, C, NH, nullptr);
  }
  /// A bf16 qkv is read in place, by the own kernels and oneDNN's products alike, with the
  /// results of the f32 qkv it rounds (cpu::Attention::takes_bf16_qkv): the qkv product writes
  /// half the bytes and attention reads half.
  bool bf16_qkv(int C, int NH) const override { return cpu::Attention::takes_bf16_qkv(C, NH); }
  /// The fused attention's qkv argument: f32, or bf16 (under precision bf16, as as16).
  cpu::QkvRows qkv_rows(ConstDevPtr qkv) const {
    if (const uint16_t* q16 = as16(qkv)) return q16;
    return qkv.f32();
  }

  void attention_backward_fused(DevPtr dqkv, const float* dout, ConstDevPtr qkv, ConstDevPtr out,
                                const float* lse, int B, int T, int C, int NH) override {
    (void)out;  // the row sums dout.out are taken as sum(P dP), equal in exact arithmetic
    uint16_t* d16 = as16(dqkv);
    attn_.backward(d16 ? nullptr : dqkv.f32(), dout, qkv_rows(qkv), nullptr, lse, B, T, C, NH, d16);
  }

  void softmax_crossentropy_fused(DevPtr logits, float* losses, const int32_t* targets, float dloss,
                                  int64_t N, int V) override {
    check_targets(targets, N, V);
    uint16_t* l16 = as16(logits);
    cpu::softmax_crossentropy_fused_rows(l16 ? nullptr : logits.f32(), l16, losses, targets, dloss,
                                         N, V);
  }

  void adamw_fused(float* const* p, const float* const* g, float* const* m, float* const* v,
                   const int64_t* n, const float* wd, int count, float grad_mult, float lr,
                   float beta1, float beta2, float eps, int64_t t) override {
    adamw_chunks(p, g, m, v, n, wd, count, grad_mult, lr, beta1, beta2, eps, t, nullptr);
  }
  /// The update as the CUDA backend does it: the gradients' norm (one pass over the flat
  /// gradient buffer), the clip multiplier, and AdamW, which also finds inf or NaN in the
  /// moments and weights it writes (an OR over the values in registers), so the trainer needs
  /// no pass over them afterwards (two passes over the AdamW state, 2.3 % of a
  /// shakespeare-char bf16 step on an Intel Xeon with 2 threads, GT_PROFILE). Where the bf16 or
  /// fp16 products are native (not emulated) and round to nearest, it also writes the 16-bit
  /// copies of the weights they take (the caller calls weights_updated() next), so that the
  /// next products do not round them again in passes of their own (17 fewer parallel regions
  /// per step of the CPU preset).
  const AdamStepResult* adamw_step(const AdamStep& s) override {
    step_result_.norm_sq = sum_squares(s.grads, s.grads_n);
    step_result_.nonfinite_state = 0;
    if (!std::isfinite(step_result_.norm_sq)) return &step_result_;  // nothing changes
    const float mult =
        static_cast<float>(adam_grad_mult(step_result_.norm_sq, s.loss_scale, s.clip));
    const std::vector<cpu::LowpOperands::CopyTarget>* targets =
        prec_ == Precision::fp32 ? nullptr : &lowp_.update_targets();
    step_result_.nonfinite_state = adamw_chunks(s.p, s.g, s.m, s.v, s.n, s.wd, s.count, mult, s.lr,
                                                s.beta1, s.beta2, s.eps, s.t, targets)
                                       ? 1
                                       : 0;
    return &step_result_;
  }

 private:
  /// A piece of AdamW's work: elements [b, e) of tensor i, and where their 16-bit weight copy
  /// goes (null: none).
  struct AdamChunk {
    int i;
    int64_t b, e;
    uint16_t* copy;
  };
  /// Cuts tensor i (n elements at p) into chunks of at most kChunk elements that each lie
  /// inside or outside every copy target (sorted by address), appended to work; adds each
  /// target's elements covered to covered[k].
  static void adam_chunks_of(int i, const float* p, int64_t n,
                             const std::vector<cpu::LowpOperands::CopyTarget>* targets,
                             std::vector<int64_t>& covered, std::vector<AdamChunk>& work) {
    constexpr int64_t kChunk = 1 << 14;
    // the cuts: the tensor's ends and the ends of the copies that overlap it (as addresses:
    // the copies' weights may lie in other allocations)
    const auto at = [](const float* x) { return reinterpret_cast<std::uintptr_t>(x); };
    const auto elems = [&](const float* a, const float* b) {  // b - a in floats, either way
      return static_cast<int64_t>(at(b) - at(a)) / static_cast<int64_t>(sizeof(float));
    };
    std::vector<int64_t> cut = {0, n};
    int first = -1, last = -1;  // the copies that overlap the tensor: targets[first..last]
    if (targets)
      for (size_t k = 0; k < targets->size(); ++k) {
        const auto& c = (*targets)[k];
        if (at(c.w) >= at(p + n) || at(c.w + c.n) <= at(p)) continue;
        if (first < 0) first = static_cast<int>(k);
        last = static_cast<int>(k);
        cut.push_back(std::clamp<int64_t>(elems(p, c.w), 0, n));
        cut.push_back(std::clamp<int64_t>(elems(p, c.w + c.n), 0, n));
      }
    std::sort(cut.begin(), cut.end());
    cut.erase(std::unique(cut.begin(), cut.end()), cut.end());
    for (size_t j = 0; j + 1 < cut.size(); ++j) {
      const int64_t lo = cut[j], hi = cut[j + 1];
      uint16_t* copy = nullptr;  // the copy holding [lo, hi), if one does
      for (int k = first; k >= 0 && k <= last; ++k) {
        const auto& c = (*targets)[k];
        if (at(c.w) <= at(p + lo) && at(p + hi) <= at(c.w + c.n)) {
          copy = c.out + elems(c.w, p + lo);
          covered[k] += hi - lo;
          break;
        }
      }
      for (int64_t b = lo; b < hi; b += kChunk)
        work.push_back({i, b, std::min(hi, b + kChunk), copy ? copy + (b - lo) : nullptr});
    }
  }

  /// AdamW over every tensor in one parallel loop of chunks; true when a written moment or
  /// weight is inf or NaN (exponent bits all ones: a test that vectorizes). With targets (the
  /// 16-bit weight copies, sorted), each chunk's new weights are rounded into their copy while
  /// they are in cache, and the copies written whole are marked current for the next
  /// weights_updated().
  bool adamw_chunks(float* const* p, const float* const* g, float* const* m, float* const* v,
                    const int64_t* n, const float* wd, int count, float grad_mult, float lr,
                    float beta1, float beta2, float eps, int64_t t,
                    const std::vector<cpu::LowpOperands::CopyTarget>* targets) {
    const float bc1 = 1.0f - std::pow(beta1, (float)t);
    const float bc2_sqrt = std::sqrt(1.0f - std::pow(beta2, (float)t));
    const float step_size = lr / bc1;
    // work list of chunks, so one parallel loop covers every tensor
    std::vector<AdamChunk> work;
    std::vector<int64_t> covered(targets ? targets->size() : 0, 0);
    for (int i = 0; i < count; ++i) adam_chunks_of(i, p[i], n[i], targets, covered, work);
    auto nonfinite = [](float x) {
      uint32_t u;
      std::memcpy(&u, &x, sizeof u);
      return static_cast<int>((u & 0x7F800000u) == 0x7F800000u);
    };
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (size_t w = 0; w < work.size(); ++w) {
      const int i = work[w].i;
      const int64_t b = work[w].b, e = work[w].e;
      float* pp = p[i];
      const float* gg = g[i];
      float* mm = m[i];
      float* vv = v[i];
      const float decay = 1.0f - lr * wd[i];
      int bad_chunk = 0;
#pragma omp simd reduction(| : bad_chunk)
      for (int64_t j = b; j < e; ++j) {
        float gi = gg[j] * grad_mult;
        float mi = beta1 * mm[j] + (1.0f - beta1) * gi;
        float vi = beta2 * vv[j] + (1.0f - beta2) * gi * gi;
        mm[j] = mi;
        vv[j] = vi;
        const float pj = pp[j] * decay - step_size * mi / (std::sqrt(vi) / bc2_sqrt + eps);
        pp[j] = pj;
        bad_chunk |= nonfinite(mi) | nonfinite(vi) | nonfinite(pj);
      }
      if (work[w].copy) lowp_.round_span(work[w].copy, pp + b, e - b);
      bad |= bad_chunk;
    }
    for (size_t k = 0; k < covered.size(); ++k)
      if (covered[k] == (*targets)[k].n) lowp_.rewritten((*targets)[k].w);
    return bad != 0;
  }

  /// The bf16 elements of a tensor argument, or null for an f32 one; a bf16 tensor needs
  /// precision bf16 (gt::Error otherwise).
  uint16_t* as16(DevPtr p) const {
    if (!p.bf16()) return nullptr;
    if (prec_ != Precision::bf16)  // the message made only when it is needed: a hot path
      throw Error(fmt::format(
          "cpu backend: a bf16 tensor argument under precision {}; bf16 tensors belong to "
          "precision bf16",
          to_string(prec_)));
    return p.u16();
  }
  const uint16_t* as16(ConstDevPtr p) const {
    return as16(DevPtr(const_cast<void*>(p.data), p.dtype));
  }
  /// The f32 elements of a tensor argument (gt::Error for a bf16 one: an f32-only argument).
  static const float* f32(ConstDevPtr p) {
    check(!p.bf16(), "cpu backend: a bf16 tensor where this op under this precision takes f32");
    return p.f32();
  }
  /// The 16-bit operand of a product: a bf16 tensor as it is (widened where emulated), else x
  /// rounded into slot s.
  const void* operand(cpu::LowpOperands::Slot s, ConstDevPtr x, int64_t n) {
    if (const uint16_t* x16 = as16(x)) return lowp_.bf16(s, x16, n);
    return lowp_.round(s, x.f32(), n);
  }

  cpu::AlignedVector<float> ln_partial_;    // layernorm_backward's per-block dw, db
  double product_flop_ = 0, own_flop_ = 0;  // product()'s FLOPs, and the own kernel's of them
  Precision prec_ = Precision::fp32;
  cpu::LowpOperands lowp_;  // the 16-bit operands of bf16 and fp16 products
  cpu::Attention attn_;
  cpu::ThreadTeam team_;       // the OpenMP team's size and wait (train.thread_policy)
  cpu::ParkedThreads parked_;  // parked while team_.yielding()
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int index, const BackendOptions& opt) {
  check(index == 0, "cpu backend: there is one CPU device (index 0)");
  return std::make_unique<CpuBackend>(opt);
}

}  // namespace gt
