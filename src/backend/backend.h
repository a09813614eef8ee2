// backend/backend.h: one table of ops per device, each with forward and backward, and the
// memory of that device. The model calls only these; a device (ref/, cpu/, later cuda/)
// implements them and is made by make_backend() from train.device.
//
// Conventions (as in llm.c): shapes are row-major; B batch, T time, C channels,
// NH heads, V vocabulary, N = B*T rows. Gradients of parameters are ACCUMULATED
// (+=), so micro-batches add up; gradients of activations are ASSIGNED (=) unless
// the comment says "+=". Linear weights use the Hugging Face GPT-2 (Conv1D)
// layout (C, OC): out = inp @ w + bias.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/memory.h"

namespace gt {

/// Numeric precision of the compute (DESIGN.md, "precision policy").
/// fp32: everything in float32. bf16/fp16: mixed precision with fp32 master weights
/// (fp16 with dynamic loss scaling). fp8: CUDA on Hopper only.
enum class Precision { fp32, bf16, fp16, fp8 };

/// Which activations the backward pass recomputes instead of storing (DESIGN.md).
enum class Recompute { none, gelu, gelu_ln, block };

/// Parses "fp32"/"bf16"/"fp16"/"fp8"; throws gt::Error naming the value otherwise.
Precision parse_precision(const std::string& s);
std::string to_string(Precision p);
/// Parses "none"/"gelu"/"gelu+ln"/"block"; throws gt::Error naming the value otherwise.
Recompute parse_recompute(const std::string& s);
std::string to_string(Recompute r);

/// A device pointer that carries the type of its elements: f32, or bf16 for the 16-bit
/// tensors of bf16 mixed precision (the products' inputs and the gradients handed to them,
/// as the model plans them). From a float*, an f32 pointer; from a Tensor, the tensor's type.
/// A backend throws gt::Error for a type it cannot take in an argument (bf16 outside bf16).
struct DevPtr {
  void* data = nullptr;
  DType dtype = DType::f32;
  DevPtr() = default;
  DevPtr(std::nullptr_t) {}
  DevPtr(float* p) : data(p) {}
  DevPtr(void* p, DType t) : data(p), dtype(t) {}
  explicit DevPtr(const Tensor& t) : data(t.data), dtype(t.dtype) {}
  bool bf16() const { return dtype == DType::bf16; }
  float* f32() const { return static_cast<float*>(data); }
  uint16_t* u16() const { return static_cast<uint16_t*>(data); }
  explicit operator bool() const { return data != nullptr; }
};
/// The read-only DevPtr.
struct ConstDevPtr {
  const void* data = nullptr;
  DType dtype = DType::f32;
  ConstDevPtr() = default;
  ConstDevPtr(const float* p) : data(p) {}
  ConstDevPtr(DevPtr p) : data(p.data), dtype(p.dtype) {}
  ConstDevPtr(const void* p, DType t) : data(p), dtype(t) {}
  bool bf16() const { return dtype == DType::bf16; }
  const float* f32() const { return static_cast<const float*>(data); }
  const uint16_t* u16() const { return static_cast<const uint16_t*>(data); }
  explicit operator bool() const { return data != nullptr; }
};

/// What the MLP saves of its GELU for the backward (Backend::matmul_backward_gelu): its
/// derivative gelu'(pre), or its input pre (the pre-activation).
enum class GeluSaved { derivative, input };

/// The list of ops: every op of the table once, in declaration order. The Op enum, op_name(),
/// all_ops() and kOpCount come from it, so naming a new op is one line here (its virtual below
/// is overridden by every backend and by ForwardingBackend, backend/forwarding.h; its case goes
/// in tests/backend/op_cases.cpp, whose test checks that every op here has one).
#define GT_BACKEND_OPS(X)          \
  X(embedding_forward)             \
  X(embedding_backward)            \
  X(layernorm_forward)             \
  X(layernorm_backward)            \
  X(matmul_forward)                \
  X(matmul_gelu_forward)           \
  X(matmul_backward)               \
  X(matmul_backward_gelu)          \
  X(attention_forward)             \
  X(attention_backward)            \
  X(attention_forward_fused)       \
  X(attention_backward_fused)      \
  X(gelu_forward)                  \
  X(gelu_backward)                 \
  X(gelu_forward_fused)            \
  X(residual_forward)              \
  X(residual_layernorm_forward)    \
  X(softmax_crossentropy_forward)  \
  X(softmax_crossentropy_backward) \
  X(softmax_crossentropy_fused)    \
  X(adamw_update)                  \
  X(adamw_fused)                   \
  X(sum_squares)                   \
  X(scale)

/// The ops of the table, for Backend::supports() and the op test (GT_BACKEND_OPS).
enum class Op {
#define GT_OP_ENUM(name) name,
  GT_BACKEND_OPS(GT_OP_ENUM)
#undef GT_OP_ENUM
};
/// How many ops GT_BACKEND_OPS lists.
inline constexpr int kOpCount = 0
#define GT_OP_COUNT(name) +1
    GT_BACKEND_OPS(GT_OP_COUNT)
#undef GT_OP_COUNT
    ;
/// Every Op, in declaration order.
const std::vector<Op>& all_ops();
/// "matmul_forward" etc.: the op's name in GT_BACKEND_OPS.
std::string_view op_name(Op op);

/// The sizes of a transformer's ops at one micro-batch, for Backend::workspace_bytes().
struct WorkspaceQuery {
  int64_t N = 0;             ///< rows, B*T
  int T = 0;                 ///< context length
  int C = 0;                 ///< channels
  int NH = 1;                ///< attention heads
  int V = 0;                 ///< vocabulary (classifier width)
  int hidden = 0;            ///< MLP hidden width (4C for GPT-2)
  int64_t weight_elems = 0;  ///< elements of all matrix weights the products read
  Precision precision = Precision::fp32;
  bool fused = false;             ///< the fused forms (train.fusion=on)
  bool bf16_activations = false;  ///< product inputs stored as bf16 (bf16 DevPtr arguments)
};

/// One step's update on the device (Backend::adamw_step): AdamW over every tensor, as
/// adamw_fused, with the gradient multiplier computed from the global norm where the
/// gradients are, so the host need not read the norm first.
struct AdamStep {
  float* const* p = nullptr;        ///< tensor i: parameters (n[i] floats)
  const float* const* g = nullptr;  ///< its gradients, inside `grads`
  float* const* m = nullptr;        ///< its first moments
  float* const* v = nullptr;        ///< its second moments
  const int64_t* n = nullptr;
  const float* wd = nullptr;  ///< weight decay per tensor
  int count = 0;
  const float* grads = nullptr;  ///< the flat buffer holding every g[i] (for the norm)
  int64_t grads_n = 0;
  double loss_scale = 1.0;  ///< the gradients hold loss_scale times the true ones
  double clip = 0.0;        ///< the global norm is clipped to this (<= 0: no clipping)
  float lr = 0, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  int64_t t = 1;  ///< AdamW's step, from 1
};
/// What adamw_step() found: host memory the backend owns, valid after the next synchronize().
struct AdamStepResult {
  /// The sum of squares of the gradients as they were (loss_scale times the true ones); when
  /// it is not finite nothing was changed.
  double norm_sq = 0;
  /// 1 when an updated weight or moment is inf or NaN, 0 when none is; -1 when this backend
  /// does not check (the caller checks the states itself).
  int32_t nonfinite_state = -1;
};

/// How a backend sizes its CPU threads (train.thread_policy; backend/cpu/thread_team.h), for
/// the progress line, metrics.jsonl and summary.json.
struct ThreadPolicy {
  std::string policy;         ///< "adaptive" or "fixed"
  int team = 0;               ///< threads the run was given (train.threads, or every core)
  int threads = 0;            ///< threads working now
  int64_t steps = 0;          ///< steps seen
  int64_t smaller_steps = 0;  ///< of those, steps run with fewer than `team` threads
  int changes = 0;            ///< times the team's size or its wait changed
  bool yielding = false;      ///< the team's waits sleep now (libgomp's passive wait)
  int64_t yield_steps = 0;    ///< steps run with the waits sleeping
  std::string yield_unavailable_reason;  ///< why sleeping waits are not tried (empty: they are)
  /// The last window's fraction of the team's time spent ready to run but waiting for a CPU;
  /// null where not measured (the fixed policy, the first window, no schedstat).
  std::optional<double> runqueue_wait;
  std::string runqueue_wait_unknown_reason;  ///< why runqueue_wait is null; empty when it is not
};

/// The threads a backend works with now and the team it was given (a backend without CPU
/// threads of its own: both 0). Read after every step: no allocation.
struct ThreadCount {
  int threads = 0, team = 0;
  bool yielding = false;  ///< the threads' waits sleep instead of spinning
};

/// What runs a backend's matrix products under the precision set last (set_precision), for
/// the run's header and summary.json ("products"): where the CPU (or oneDNN) has no product
/// with instructions of the precision, its products are emulated (operands rounded, then
/// multiplied in f32) and take about fp32's time, which a user choosing bf16 to save energy
/// must be told (AMD Zen 3 and other CPUs without AVX-512, Intel Skylake to Ice Lake).
struct ProductPath {
  std::string precision;  ///< "fp32", "bf16", "fp16"
  std::string kernel;     ///< what runs them: "own AVX512_BF16", "own AMX", "oneDNN"
  /// The own kernel's share of the layers' product FLOPs so far (it takes those whose shared
  /// dimension is a multiple of 32 and whose B has at most 2^23 elements, without a GELU
  /// post-op; the rest go to oneDNN); null before any product, or where `kernel` is oneDNN.
  std::optional<double> own_share;
  std::string isa;              ///< oneDNN's instruction set here ("avx512_core_bf16", "avx2", ...)
  bool emulated = false;        ///< no product with instructions of that precision: f32 products of
                                ///< the rounded operands
  std::string emulated_reason;  ///< why, where emulated (empty otherwise)
};

// The ops' default bodies name their parameters for the documentation and use none.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
/// The op table and the memory of one device. All pointers the ops take are device memory
/// of this backend (from allocate(), usually through an Arena); host memory enters and
/// leaves only through copy_to_device / copy_to_host.
class Backend : public DeviceMemory {
 public:
  virtual ~Backend() = default;
  /// The device's name as train.device spells it, e.g. "cpu", "ref", "cuda:0".
  virtual std::string name() const = 0;
  /// Whether this backend runs op under precision p. A model checks every op it will call
  /// when it is built (check_supports), so a partial backend refuses before the first step.
  /// The ops below have a default body that throws gt::Error naming the backend and the op
  /// (unsupported()): a backend overrides the ops it implements, and says which through
  /// supports(); a model checks them all before its first step (check_supports).
  virtual bool supports(Op op, Precision p) const = 0;
  /// Bytes of the backend's own buffers (not the model's arenas) for ops of these sizes:
  /// scratch, low-precision operand copies and the like. Part of the memory plan.
  virtual size_t workspace_bytes(const WorkspaceQuery& q) const = 0;
  /// Throws gt::Error: "<name()>: op <op> is not implemented by this backend".
  [[noreturn]] void unsupported(Op op) const;

  /// Called by the trainer after every optimizer step, which took step_s seconds (wall): a
  /// backend adapts to the machine here (the CPU backend sizes its thread team,
  /// cpu/thread_team.h). Default: nothing.
  virtual void end_step(double step_s) { (void)step_s; }
  /// The backend's thread policy; null for a backend without CPU threads of its own.
  virtual std::optional<ThreadPolicy> thread_policy() const { return std::nullopt; }
  /// thread_policy()'s thread and team counts alone, for every step's log line.
  virtual ThreadCount thread_count() const { return {}; }
  /// What runs the matrix products under the current precision (ProductPath); null where the
  /// backend does not say (the reference and CUDA backends).
  virtual std::optional<ProductPath> product_path() const { return std::nullopt; }

  /// out(B,T,C) = wte[inp[b,t], :] + wpe[t, :]. inp (B,T) int32 in [0, V).
  virtual void embedding_forward(float* out, const int32_t* inp, const float* wte, const float* wpe,
                                 int B, int T, int C) {
    unsupported(Op::embedding_forward);
  }
  /// dwte(V,C) += scatter of dout by token, dwpe(T,C) += sum over b of dout.
  virtual void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp,
                                  int B, int T, int C) {
    unsupported(Op::embedding_backward);
  }

  /// LayerNorm over the last dim (eps 1e-5, biased variance, as torch.nn.LayerNorm).
  /// inp, out (N,C); mean, rstd (N) saved for backward; w, b (C). out: f32 or bf16.
  virtual void layernorm_forward(DevPtr out, float* mean, float* rstd, const float* inp,
                                 const float* w, const float* b, int64_t N, int C) {
    unsupported(Op::layernorm_forward);
  }
  /// dinp(N,C) += ..., dw(C) += ..., db(C) += ...
  virtual void layernorm_backward(float* dinp, float* dw, float* db, const float* dout,
                                  const float* inp, const float* w, const float* mean,
                                  const float* rstd, int64_t N, int C) {
    unsupported(Op::layernorm_backward);
  }

  /// out(N,OC) = inp(N,C) @ W + bias(OC) (bias may be null). W is (C,OC), or (OC,C) when
  /// w_transposed (the tied classifier uses wte (V,C)). inp: f32, or bf16 (the operand itself).
  /// out: f32, or bf16 (the f32 result rounded to nearest-even, as the classifier's logits
  /// under bf16: written once in half the bytes, as PyTorch autocast's and llm.c's).
  virtual void matmul_forward(DevPtr out, ConstDevPtr inp, const float* w, const float* bias,
                              int64_t N, int C, int OC, bool w_transposed = false) {
    unsupported(Op::matmul_forward);
  }
  /// out(N,OC) = gelu(inp(N,C) @ W(C,OC) + bias(OC)) as ONE matrix product, the GELU (tanh
  /// form) applied to its output as a oneDNN eltwise post-op, so the pre-activation is never
  /// written. For forward-only passes (evaluation, sampling): no backward can follow, since
  /// gelu_backward needs the pre-activation. Equals matmul_forward then gelu_forward within
  /// the precision's rounding (the post-op's GELU is oneDNN's, not gelu_forward's). out and
  /// inp: f32 or bf16 (a bf16 out is the f32 result rounded to nearest-even).
  ///
  /// pre, when not null, also receives the pre-activation inp @ W + bias (N,OC; f32, or bf16
  /// rounded to nearest-even), for training: matmul_backward_gelu then takes it with
  /// GeluSaved::input (llm.c's pre_gelu; on CUDA cuBLASLt's GELU_AUX_BIAS epilogue writes it
  /// beside out in the same product). out is the GELU of the unrounded pre-activation.
  virtual void matmul_gelu_forward(DevPtr out, DevPtr pre, ConstDevPtr inp, const float* w,
                                   const float* bias, int64_t N, int C, int OC) {
    unsupported(Op::matmul_gelu_forward);
  }
  /// The forward-only form: no pre-activation written.
  void matmul_gelu_forward(DevPtr out, ConstDevPtr inp, const float* w, const float* bias,
                           int64_t N, int C, int OC) {
    matmul_gelu_forward(out, nullptr, inp, w, bias, N, C, OC);
  }
  /// dinp(N,C) = dout @ W^T (assigned), dw += inp^T @ dout (or its transpose), dbias(OC) +=
  /// column sums of dout (dbias may be null; under bf16 the sums, in f32, are of the
  /// bf16-rounded dout the products use, as in PyTorch's autocast). dout and inp: f32 or bf16
  /// (a bf16 dout is the gradient an earlier op handed on as bf16, used as it is).
  virtual void matmul_backward(float* dinp, float* dw, float* dbias, ConstDevPtr dout,
                               ConstDevPtr inp, const float* w, int64_t N, int C, int OC,
                               bool w_transposed = false) {
    unsupported(Op::matmul_backward);
  }

  /// Causal multi-head self-attention. qkv (B,T,3C) holds q, k, v; out (B,T,C);
  /// att (B,NH,T,T) receives the softmax probabilities (row t uses columns 0..t).
  /// Scale 1/sqrt(C/NH) (Vaswani et al. 2017). out: f32 or bf16.
  virtual void attention_forward(DevPtr out, float* att, const float* qkv, int B, int T, int C,
                                 int NH) {
    unsupported(Op::attention_forward);
  }
  /// dqkv(B,T,3C) = gradient of out w.r.t. qkv given dout (B,T,C) and saved att. dqkv: f32, or
  /// bf16 (rounded once, for c_attn's matmul_backward).
  virtual void attention_backward(DevPtr dqkv, const float* dout, const float* qkv,
                                  const float* att, int B, int T, int C, int NH) {
    unsupported(Op::attention_backward);
  }

  /// GELU, tanh approximation (Hendrycks & Gimpel 2016), as torch's approximate='tanh'.
  /// out: f32 or bf16.
  virtual void gelu_forward(DevPtr out, const float* inp, int64_t N) {
    unsupported(Op::gelu_forward);
  }
  /// dinp = gelu'(inp) * dout; an f32 dinp may alias dout; a bf16 dinp (for c_fc's
  /// matmul_backward) may not.
  virtual void gelu_backward(DevPtr dinp, const float* inp, const float* dout, int64_t N) {
    unsupported(Op::gelu_backward);
  }

  /// out = a + b, N elements.
  virtual void residual_forward(float* out, const float* a, const float* b, int64_t N) {
    unsupported(Op::residual_forward);
  }

  /// Softmax over V then cross-entropy with targets: probs (N,V), losses (N) = -log p[target].
  /// Throws gt::Error if a target is outside [0, V).
  virtual void softmax_crossentropy_forward(float* probs, float* losses, const float* logits,
                                            const int32_t* targets, int64_t N, int V) {
    unsupported(Op::softmax_crossentropy_forward);
  }
  /// dlogits(N,V) = (probs - onehot(target)) * dloss, with dloss the same for every row
  /// (1 / (N * grad_accum_steps) for a mean loss).
  virtual void softmax_crossentropy_backward(float* dlogits, const float* probs,
                                             const int32_t* targets, float dloss, int64_t N,
                                             int V) {
    unsupported(Op::softmax_crossentropy_backward);
  }

  /// One AdamW step on n parameters (Loshchilov & Hutter 2019, as torch.optim.AdamW):
  /// p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  /// p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps). t counts from 1.
  virtual void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                            float beta1, float beta2, float eps, float weight_decay, int64_t t) {
    unsupported(Op::adamw_update);
  }

  /// Sum of squares of g (n elements), accumulated in double in a fixed order so the result
  /// does not depend on the thread count.
  virtual double sum_squares(const float* g, int64_t n) { unsupported(Op::sum_squares); }
  /// g *= s; g: f32, or bf16 (rounded to nearest-even again).
  virtual void scale(DevPtr g, float s, int64_t n) { unsupported(Op::scale); }

  // ---- precision policy -------------------------------------------------------------
  // The types of the tensors are the model's plan (DevPtr): under bf16 the products' inputs
  // and the gradients handed to a product (gelu_backward's dinp, attention_backward's dqkv,
  // matmul_backward_gelu's dinp) may be bf16 tensors, the exact operands the products use
  // (the bf16 rounding of the f32 result, as the activations PyTorch autocast saves), so the
  // results are bitwise those of f32 tensors rounded at the product, in less memory. bf16
  // tensors under another precision are an error.
  /// Sets the type of the matrix-product operands: fp32 (default); bf16 or fp16 (inputs and
  /// weights rounded to nearest-even into 16-bit copies, products accumulated in f32, f32
  /// outputs except where a bf16 output tensor or a fused op says otherwise). Everything else
  /// stays fp32. Throws gt::Error for a precision this device
  /// cannot run (fp8 on the CPU).
  virtual void set_precision(Precision p) = 0;
  virtual Precision precision() const = 0;
  /// bf16 weight copies with stochastic rounding (on) instead of round-to-nearest-even:
  /// rounds up with probability equal to the cut-off fraction (Gupta et al. 2015), random
  /// bits from a counter-based hash of (seed, tensor, element), so a run is reproducible and
  /// independent of the thread count. The trainer passes a seed per step. Ignored unless bf16.
  virtual void set_stochastic_rounding(bool on, uint64_t seed) = 0;
  /// Marks the 16-bit weight copies stale; call after every write to the parameters (the
  /// optimizer step, initialisation, loading). Copies are refreshed on their next use, except
  /// those adamw_step() just wrote itself (see there).
  virtual void weights_updated() = 0;

  // ---- a step with one host synchronization --------------------------------------------
  /// Registers the host copy of the n token ids the device buffer dev holds (a micro-batch's
  /// inputs or targets, as the model uploaded them, valid until the next call for dev): ops
  /// that need the ids on the host (the embedding backward's index, the targets' check) read
  /// this copy instead of the device. Host backends need nothing.
  virtual void host_tokens(const int32_t* dev, const int32_t* host, int64_t n) {}
  /// The whole update of a step: the global gradient norm, the multiplier (1/loss_scale,
  /// times clip / (norm + 1e-6) when that is below 1, as torch.nn.utils.clip_grad_norm_),
  /// and AdamW (adamw_fused's formula) unless the norm is not finite, in which case nothing
  /// changes. The result is read after synchronize(). A device keeps all of it on the device
  /// (no host synchronization); the default runs sum_squares and adamw_fused. The caller
  /// calls weights_updated() next and writes no parameter in between: a backend may write
  /// its 16-bit weight copies in the same pass (the CPU backend does) and keep them across
  /// that one weights_updated().
  virtual const AdamStepResult* adamw_step(const AdamStep& s);

  // ---- the step as one graph (CUDA graphs: CUDA C++ Programming Guide, "CUDA Graphs") ---
  /// Counts of launch_graph() since the backend was made.
  struct GraphStats {
    int64_t launches = 0;        ///< graphs launched
    int64_t instantiations = 0;  ///< of which instantiated anew (cudaGraphInstantiate)
    int64_t updates = 0;         ///< of which updated in place (cudaGraphExecUpdate)
  };
  /// Whether this device can capture the ops of a step and launch them as one graph.
  virtual bool supports_graphs() const { return false; }
  /// Starts capturing (cudaStreamBeginCapture): the ops that follow are recorded, not run,
  /// until launch_graph() or abandon_graph(). While capturing, an op that would synchronize
  /// with the host, allocate device memory or copy from pageable memory fails the capture
  /// (it throws gt::Error). Errors: gt::Error where supports_graphs() is false.
  virtual void begin_graph();
  /// Ends the capture and launches the graph (asynchronously: read results after
  /// synchronize()); an instantiated graph of the same shape is updated in place. Returns ""
  /// when it was launched, or why not (the capture failed): then nothing of it ran, and the
  /// backend's caches are as if those ops had never been called, so the caller queues them
  /// again without a graph.
  virtual std::string launch_graph() { return "this device does not capture graphs"; }
  /// Ends a capture whose ops threw: nothing of it runs (as launch_graph() that failed).
  virtual void abandon_graph() noexcept {}
  virtual GraphStats graph_stats() const { return {}; }

  // ---- fused forms (train.fusion=on); each equals its unfused chain within rounding ---
  /// res(N,C) = a + b and out/mean/rstd = layernorm(res) in one pass over the rows.
  virtual void residual_layernorm_forward(float* res, DevPtr out, float* mean, float* rstd,
                                          const float* a, const float* b, const float* w,
                                          const float* bias, int64_t N, int C) {
    unsupported(Op::residual_layernorm_forward);
  }
  /// Attention without the (B,NH,T,T) matrix: each row's scores live in a per-thread row
  /// buffer (online softmax); lse (B,NH,T) receives log-sum-exp of the scaled scores. qkv: f32,
  /// or bf16 where bf16_qkv() says so (the qkv product's bf16 output, read as it is).
  virtual void attention_forward_fused(DevPtr out, float* lse, ConstDevPtr qkv, int B, int T, int C,
                                       int NH) {
    unsupported(Op::attention_forward_fused);
  }
  /// Backward of attention_forward_fused: recomputes the probabilities from qkv and lse.
  /// out (B,T,C) is the forward output (for the row sums dout.out). dqkv as
  /// attention_backward's.
  virtual void attention_backward_fused(DevPtr dqkv, const float* dout, ConstDevPtr qkv,
                                        ConstDevPtr out, const float* lse, int B, int T, int C,
                                        int NH) {
    unsupported(Op::attention_backward_fused);
  }
  /// Whether the fused attention ops take a bf16 qkv of C channels in NH heads under precision
  /// bf16 (whatever the precision now): the model then has the qkv product write it in bf16, so
  /// attention reads half the bytes and rounds nothing (its result the same where its kernels
  /// rounded the f32 qkv to bf16 as they loaded it). Default: no.
  virtual bool bf16_qkv(int C, int NH) const {
    (void)C, (void)NH;
    return false;
  }
  /// GELU in one pass that also writes its derivative, for the fused MLP backward:
  /// out = gelu(inp) (as gelu_forward) and dgelu = gelu'(inp), N elements, each f32 or bf16;
  /// dgelu may be null (out only, as when a recompute policy recomputes the derivative
  /// later). The pre-activation inp is then no longer needed.
  virtual void gelu_forward_fused(DevPtr out, DevPtr dgelu, const float* inp, int64_t N) {
    unsupported(Op::gelu_forward_fused);
  }
  /// The fused MLP's first product in training: pre (N,OC) f32 = inp (N,C) @ W (C,OC) + bias,
  /// then out = gelu(pre) and dgelu = gelu'(pre) (N,OC), bitwise as matmul_forward followed by
  /// gelu_forward_fused, which is what this default runs. pre is scratch: a backend may apply
  /// GELU and gelu' in the product's epilogue and never write it (the CPU's own bf16 kernels:
  /// no f32 pass between), so its contents are unspecified afterwards. Not an op of the table:
  /// any backend with those two ops has it.
  virtual void matmul_gelu_forward_fused(DevPtr out, DevPtr dgelu, float* pre, ConstDevPtr inp,
                                         const float* w, const float* bias, int64_t N, int C,
                                         int OC) {
    matmul_forward(pre, inp, w, bias, N, C, OC);
    gelu_forward_fused(out, dgelu, pre, N * OC);
  }
  /// matmul_backward (W in the (C,OC) layout) with the GELU backward of the product's input
  /// fused into the dinp product as a oneDNN binary post-op: dinp(N,C) = (dout @ W^T) * dgelu,
  /// with dgelu (N,C) from gelu_forward_fused. dinp, dout, inp, dgelu: f32 or bf16 (a bf16
  /// dinp is written rounded by the product, for the next matmul_backward).
  ///
  /// saved says what `gelu` holds: GeluSaved::derivative, gelu' of the pre-activation (from
  /// gelu_forward_fused: the multiply is the product's post-op); GeluSaved::input, the
  /// pre-activation itself (from matmul_gelu_forward's pre: dinp = (dout @ W^T) * gelu'(pre),
  /// gelu' computed in f32 from the saved values; on CUDA cuBLASLt's DGELU epilogue, as
  /// llm.c's backward). Which the model saves: saves_gelu_input().
  virtual void matmul_backward_gelu(DevPtr dinp, float* dw, float* dbias, ConstDevPtr dout,
                                    ConstDevPtr inp, const float* w, ConstDevPtr gelu,
                                    GeluSaved saved, int64_t N, int C, int OC) {
    unsupported(Op::matmul_backward_gelu);
  }
  /// The form with gelu' saved (GeluSaved::derivative).
  void matmul_backward_gelu(DevPtr dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                            const float* w, ConstDevPtr dgelu, int64_t N, int C, int OC) {
    matmul_backward_gelu(dinp, dw, dbias, dout, inp, w, dgelu, GeluSaved::derivative, N, C, OC);
  }
  /// Whether the model's MLP should save the GELU's input rather than its derivative for the
  /// backward (matmul_gelu_forward with pre, matmul_backward_gelu with GeluSaved::input): true
  /// where the products apply GELU and its derivative in their epilogues (CUDA: the forward
  /// writes out and pre in one product, no f32 pre-activation and no separate GELU pass;
  /// the backward reads pre in its product), false where a saved gelu' is the cheaper form
  /// (the CPU: oneDNN multiplies by it as a binary post-op, and has no post-op for gelu').
  /// Both forms save one (N,4C) tensor of the activations' type. Default: no.
  virtual bool saves_gelu_input() const { return false; }
  /// Softmax, cross-entropy and its gradient in one pass that never stores probabilities:
  /// losses(N) = -log softmax(logits)[target]; logits(N,V) is overwritten IN PLACE with
  /// (softmax - onehot(target)) * dloss. logits: f32, or bf16 under bf16 (read exactly, the
  /// statistics and the loss in f32, the gradient written rounded to nearest-even: the bf16
  /// gradient the classifier's matmul_backward takes as it is, as llm.c's fused classifier).
  /// Throws gt::Error for a target outside [0, V).
  virtual void softmax_crossentropy_fused(DevPtr logits, float* losses, const int32_t* targets,
                                          float dloss, int64_t N, int V) {
    unsupported(Op::softmax_crossentropy_fused);
  }
  /// One AdamW pass over a whole set of tensors (as adamw_update, same formula), with the
  /// gradients multiplied by grad_mult (clipping and loss-scale undo) as they are read.
  /// Tensor i has n[i] elements at p[i], g[i], m[i], v[i] and weight decay wd[i].
  virtual void adamw_fused(float* const* p, const float* const* g, float* const* m, float* const* v,
                           const int64_t* n, const float* wd, int count, float grad_mult, float lr,
                           float beta1, float beta2, float eps, int64_t t) {
    unsupported(Op::adamw_fused);
  }

 protected:
  AdamStepResult step_result_;  ///< the default adamw_step()'s result
};
#pragma GCC diagnostic pop

/// Throws gt::Error naming the backend, the op and the precision when `be` does not support
/// one of `ops` under p.
void check_supports(const Backend& be, const std::vector<Op>& ops, Precision p);

/// Options every backend factory takes.
/// The kernels of the fused attention ops (train.attention): the backend's own, or cuDNN's
/// fused attention (the cuda backend only; backend/cuda/cudnn_attention.h).
enum class AttentionImpl { own, cudnn };
struct BackendOptions {
  int threads = 0;  ///< CPU threads (OpenMP) for backends that use them; 0: all cores
  /// Size the team to the cores other work leaves free (cpu/thread_team.h); false: always
  /// `threads` (train.thread_policy = fixed).
  bool adaptive_threads = true;
  /// train.attention; a backend without cuDNN throws gt::Error at construction for cudnn.
  AttentionImpl attention = AttentionImpl::own;
};
/// A backend factory, as registered under a device name.
using BackendFactory = std::unique_ptr<Backend> (*)(int index, const BackendOptions& opt);
/// What the rest of the program knows of a device, from its registry line (registry.cpp)
/// alone: no code outside the device's own folder tests its name. All false / null for a name
/// the registry does not know.
struct DeviceTraits {
  /// The name messages use for its backend ("CUDA" in "this build has no CUDA backend");
  /// null: its registry name.
  const char* title = nullptr;
  /// Takes a device index, "name:N" (N = 0 ... 1024): a GPU, of which a machine may have
  /// several or none; otherwise only "name" (or "name:0").
  bool indexed = false;
  /// Each rank of a node takes its own device: "name" becomes "name:<local rank>" in a run
  /// with several ranks (device_for_local_rank()).
  bool one_per_local_rank = false;
  /// Its energy is read by the meter's GPU sensors (NVML, ROCm SMI) as the GPU at its device
  /// index among the visible GPUs (energy::MeterOptions::gpus).
  bool gpu_energy = false;
  /// Runs train.precision = fp8: what it is that does, for messages (an Ada or Hopper GPU);
  /// null: no fp8.
  const char* fp8 = nullptr;
  /// Runs train.attention = cudnn (cuDNN's fused attention).
  bool cudnn = false;
  /// Why a build lacks it and how to get it, for the error that names it in such a build.
  const char* missing_hint = nullptr;
};
/// One backend the registry knows: the name train.device uses, its factory (null where this
/// build leaves it out) and its traits.
struct BackendEntry {
  const char* name;
  BackendFactory make;
  DeviceTraits traits;
};
/// Every backend this build has (a factory), in the order the op test runs them ("ref" first).
const std::vector<BackendEntry>& registered_backends();
/// The registry's entry for a backend name ("cuda", not "cuda:1"), built or not (make is null
/// where this build leaves it out); null for a name the registry does not know.
const BackendEntry* find_backend(std::string_view name);
/// Every backend the registry knows, built or not (make is null where this build leaves it
/// out), in registry order.
const std::vector<BackendEntry>& known_backends();
/// The traits of the backend a train.device value names ("cuda:1": those of "cuda"); the
/// index is not checked here (make_backend() does that). All false / null for an unknown name.
DeviceTraits device_traits(const std::string& device);
/// The train.device values of the known backends whose traits pass `has` (all when null), as
/// a message lists them: "ref, cpu, cuda or cuda:N, cuda-emu" (an indexed one as "X or X:N").
std::string devices_with(bool (*has)(const DeviceTraits&) = nullptr);
/// The device a rank with this local rank (its index among the ranks of its node) takes:
/// "name:<local_rank>" for a device without an index whose traits say one_per_local_rank
/// ("cuda" -> "cuda:3"), otherwise `device` unchanged ("cpu", "cuda:1").
std::string device_for_local_rank(const std::string& device, int local_rank);
/// The device train.device means where a configuration names none: "cpu" where this build has
/// the CPU backend (oneDNN), else "ref" (a build with GT_ONEDNN=OFF).
const char* default_device();
/// A train.device value split into backend name and device index: "cuda:1" -> {"cuda", 1},
/// "cpu" -> {"cpu", 0}. Throws gt::Error naming train.device when the index after ':' is not a
/// whole number in [0, 1024]. The name is not checked (make_backend() does that).
struct DeviceName {
  std::string name;
  int index = 0;
  /// Whether the meter reads its energy as the GPU at `index` (DeviceTraits::gpu_energy:
  /// "cuda"; not "cuda-emu").
  bool gpu_energy() const;
};
DeviceName parse_device(const std::string& device);
/// Makes the backend train.device names: a name the registry knows, with ":N" (device index N)
/// where its traits say indexed (devices_with() lists them).
/// Throws gt::Error naming the value and the devices this build has otherwise (a device the
/// registry knows but this build leaves out says why, from its traits' missing_hint).
std::unique_ptr<Backend> make_backend(const std::string& device, const BackendOptions& opt = {});

/// A backend whose device memory is host memory, 64-byte aligned (the CPU and reference
/// backends): allocation, zeroing and copies are the C library's. Errors: gt::Error naming
/// the backend and the byte count when out of memory.
class HostMemoryBackend : public Backend {
 public:
  Device device() const override { return Device::cpu; }
  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void zero(void* p, size_t bytes) override;
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void synchronize() override {}  // every op returns when its work is done
};

}  // namespace gt
