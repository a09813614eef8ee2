// bench/gpu_roofline.cpp: the roofline model of one GPT-2 training step on the CUDA backend
// (bf16, fusion on), op by op: the FLOPs each op must do, the bytes it must move at least (each
// input read once, each output written once, activations in bf16, as llm.c moves them) and the
// bytes the backend's kernels and products move as they are written today (kernels_*.cu,
// cuda_backend_impl.h), and from those the time each takes against a GPU's ceilings: its copy
// bandwidth and its matrix-product rate (the H200's measured figures by default: ~4.3 TB/s,
// ~780 TFLOP/s bf16 through cuBLASLt; the flash attention at 45 % of the datasheet's 989, as
// FlashAttention-2's mma.sync kernels reach on Hopper). Prints the table, the predicted step
// time and MFU (llm.c's: 6 N + 6 L T C FLOPs per token over the datasheet peak), and each op's
// time over its roofline time.
//
//   gt_gpu_roofline [124m|350m|xl] [--bw GB/s] [--tflops T] [--json]
//
// A prediction, not a measurement: bench/gpu-check.sh's kernel benchmark measures the same ops
// on a GPU, and its step stage the step.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Shape {
  std::string name;
  double B, T, C, NH, L, V;
};
struct Op {
  std::string name;
  double count;       ///< calls per step
  double flops;       ///< per call
  double bytes_min;   ///< per call, the least it must move
  double bytes_impl;  ///< per call, what the implementation moves
  bool product;       ///< cuBLASLt (runs at the product rate)
  bool tensor_attention = false;
};

/// The ops of one step, their sizes per call.
std::vector<Op> step_ops(const Shape& s) {
  const double N = s.B * s.T, C = s.C, H = 4 * C, V = s.V, L = s.L, f = 4, h = 2;
  const double causal = s.T * (s.T + 1) / 2, hs = C / s.NH;
  const double attn_fwd = 4 * s.B * s.NH * causal * hs;
  const double params = V * C + s.T * C + L * (12 * C * C + 13 * C) + 2 * C;
  std::vector<Op> v;
  auto product = [&](const std::string& name, double m, double n, double k, double count,
                     double out_bytes_impl, double in_bytes_impl) {
    // min: bf16 A and B read once, bf16 D written once
    v.push_back({name, count, 2 * m * n * k, h * (m * k + k * n + m * n),
                 in_bytes_impl + h * k * n + out_bytes_impl * m * n, true});
  };
  // ---- forward (per layer) ----
  v.push_back({"residual+layernorm forward", L, 0, N * C * (2 * h + h) + 8 * N,
               N * C * (3 * f + h) + 8 * N, false});
  // qkv in bf16: the product writes it so, the flash kernels read it as it is
  product("qkv product", N, 3 * C, C, L, h, h * N * C);
  v.push_back({"attention forward (flash)", L, attn_fwd, N * 3 * C * h + N * C * h,
               N * 3 * C * h + N * C * h, false, true});
  product("attention projection", N, C, C, L, f, h * N * C);
  v.push_back({"residual+layernorm forward", L, 0, N * C * 3 * h + 8 * N,
               N * C * (3 * f + h) + 8 * N, false});
  // c_fc with cuBLASLt's GELU_AUX_BIAS epilogue: the product writes the bf16 GELU output and
  // the bf16 pre-activation for the backward (no f32 pre-activation, no GELU pass)
  product("fc product (gelu epilogue)", N, H, C, L, h, h * N * C);
  v.push_back({"gelu input saved (the epilogue's aux)", L, 0, N * H * h, N * H * h, false});
  product("fc projection", N, C, H, L, f, h * N * H);
  // ---- the head ----
  v.push_back({"layernorm forward (final)", 1, 0, N * C * 2 * h, N * C * (f + h), false});
  // bf16 logits: the product writes them in bf16, the fused loss reads them (twice: the
  // log-sum-exp, then the gradient) and writes the bf16 gradient in place, which the backward
  // products take as it is (no operand copy)
  product("lm head product", N, V, C, 1, h, h * N * C);
  v.push_back(
      {"softmax cross-entropy (fused, in place)", 1, 0, 2 * N * V * h, 3 * N * V * h, false});
  product("lm head dX product", N, C, V, 1, f, h * N * V);
  product("lm head dW product", V, C, N, 1, f, h * N * V + h * N * C);
  // ---- backward (per layer) ----
  v.push_back({"gradient operand copies to bf16", L, 0, 0, N * C * (f + h) * 2, false});
  // c_proj's dX with cuBLASLt's DGELU epilogue: times gelu' of the saved input, written bf16
  product("fc projection dX (dgelu epilogue)", N, H, C, L, h, h * N * C);
  product("fc projection dW", H, C, N, L, f, h * (N * C + N * H));
  v.push_back({"gelu input read (the epilogue's aux)", L, 0, N * H * h, N * H * h, false});
  product("fc dX", N, C, H, L, f, h * N * H);
  product("fc dW", C, H, N, L, f, h * (N * H + N * C));
  // the bias gradients: cuBLASLt's BGRADA epilogue in the dW products (qkv, attention
  // projection, fc, fc projection) sums the dout the product reads anyway, into f32 scratch,
  // which a small kernel adds to dbias (scratch and dbias read, dbias written): no pass over
  // dout of its own
  const double bias_elems = H + 3 * C + 2 * C;
  v.push_back(
      {"bias gradients (dW epilogue, added)", L, 0, bias_elems * 2 * f, bias_elems * 4 * f, false});
  v.push_back({"layernorm backward", 2 * L, 0, N * C * 3 * h, N * C * 4 * f, false});
  product("attention projection dX", N, C, C, L, f, h * N * C);
  product("attention projection dW", C, C, N, L, f, h * 2 * N * C);
  v.push_back({"attention backward (flash)", L, 2.5 * attn_fwd, N * C * (3 + 1 + 1 + 3) * h,
               N * C * (3 * h + f + h) + N * 3 * C * h, false, true});
  product("qkv dX", N, C, 3 * C, L, f, h * N * 3 * C);
  product("qkv dW", 3 * C, C, N, L, f, h * (N * 3 * C + N * C));
  v.push_back({"residual gradient adds", L, 0, N * C * 3 * h, N * C * 3 * f, false});
  v.push_back({"embedding backward", 1, 0, N * C * f, N * C * f * 2, false});
  // ---- the update ----
  v.push_back({"bf16 weight copies", 1, 0, 0, params * (f + h), false});
  v.push_back({"gradient norm", 1, 0, params * f, params * f, false});
  v.push_back({"adamw (fused)", 1, 0, params * 7 * f, params * 7 * f, false});
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "124m";
  double bw = 4300, tf = 780, dense = 989, attn_eff = 0.45;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--bw" && i + 1 < argc)
      bw = std::atof(argv[++i]);
    else if (a == "--tflops" && i + 1 < argc)
      tf = std::atof(argv[++i]);
    else if (a == "--json")
      json = true;
    else if (a == "124m" || a == "350m" || a == "xl")
      which = a;
    else {
      std::fprintf(stderr,
                   "gt_gpu_roofline: unknown argument '%s'; expected 124m|350m|xl, --bw GB/s, "
                   "--tflops T, --json\n",
                   a.c_str());
      return 2;
    }
  }
  const Shape s = which == "xl"     ? Shape{"GPT-2 XL", 8, 1024, 1600, 25, 48, 50304}
                  : which == "350m" ? Shape{"GPT-2 350M", 32, 1024, 1024, 16, 24, 50304}
                                    : Shape{"GPT-2 124M", 32, 1024, 768, 12, 12, 50304};
  const auto ops = step_ops(s);
  const double B = bw * 1e9, P = tf * 1e12, A = attn_eff * dense * 1e12;
  double t_impl = 0, t_min = 0, worst = 0;
  std::string worst_op;
  if (!json)
    fmt::print(
        "{} bf16 step, B {} T {}: copy {:.0f} GB/s, products {:.0f} TFLOP/s, flash attention "
        "{:.0f} TFLOP/s\n{:<44} {:>6} {:>10} {:>10} {:>9} {:>9} {:>6}\n",
        s.name, s.B, s.T, bw, tf, A / 1e12, "op", "calls", "GB/call", "GB min", "ms", "ms min",
        "ratio");
  for (const Op& o : ops) {
    const double rate = o.product ? P : o.tensor_attention ? A : 1e30;
    const double ti = std::max(o.bytes_impl / B, o.flops / rate) * o.count;
    const double tm = std::max(o.bytes_min / B,
                               o.flops / (o.product || o.tensor_attention ? dense * 1e12 : 1e30)) *
                      o.count;
    t_impl += ti;
    t_min += tm;
    const double ratio = tm > 0 ? ti / tm : 1;
    if (ratio > worst && tm > 0) worst = ratio, worst_op = o.name;
    if (!json)
      fmt::print("{:<44} {:>6.0f} {:>10.3f} {:>10.3f} {:>9.3f} {:>9.3f} {:>6.2f}\n", o.name,
                 o.count, o.bytes_impl / 1e9, o.bytes_min / 1e9, ti * 1e3, tm * 1e3, ratio);
  }
  const double params = s.V * s.C + s.T * s.C + s.L * (12 * s.C * s.C + 13 * s.C) + 2 * s.C;
  const double flops_per_token = 6 * params + 6 * s.L * s.C * s.T;
  const double tokens = s.B * s.T;
  const double mfu = flops_per_token * tokens / t_impl / (dense * 1e12);
  const double mfu_min = flops_per_token * tokens / t_min / (dense * 1e12);
  if (json) {
    fmt::print(
        "{{\"model\": \"{}\", \"step_ms\": {:.2f}, \"roofline_step_ms\": {:.2f}, \"mfu\": {:.4f}, "
        "\"roofline_mfu\": {:.4f}, \"tokens_per_s\": {:.0f}, \"worst_op\": \"{}\", "
        "\"worst_ratio\": {:.2f}}}\n",
        s.name, t_impl * 1e3, t_min * 1e3, mfu, mfu_min, tokens / t_impl, worst_op, worst);
  } else {
    fmt::print(
        "\npredicted step {:.1f} ms ({:.0f} tokens/s), MFU {:.1f} % of {:.0f} TFLOP/s; at the "
        "roofline {:.1f} ms, MFU {:.1f} %\nworst op against its roofline: {} ({:.2f}x)\n",
        t_impl * 1e3, tokens / t_impl, 100 * mfu, dense, t_min * 1e3, 100 * mfu_min, worst_op,
        worst);
  }
  return 0;
}
