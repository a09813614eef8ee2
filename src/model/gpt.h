// model/gpt.h: a GPT-2 style decoder (Radford et al. 2019): learned positions,
// pre-LayerNorm blocks, GELU MLP, tied input/output embeddings. Forward and backward
// are explicit (llm.c style) so precision, fusion and recomputation are visible per
// layer. Parameter names and layouts are Hugging Face GPT-2's (e.g.
// "h.0.attn.c_attn.weight" of shape (C, 3C)), so model.safetensors loads there too
// (GPT2LMHeadModel.from_pretrained with activation_function "gelu_new" and layer_norm_epsilon
// 1e-5; tested by tests/parity/hf_gpt2_load.py).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"

namespace gt {

/// Sizes of the model. n_embd must be divisible by n_head.
struct GPTConfig {
  int n_layer = 4;
  int n_head = 4;
  int n_embd = 128;
  int block_size = 64;  ///< maximum context T
  int vocab_size = 0;   ///< V
};

/// One parameter tensor: HF name, shape, and whether AdamW decays it (matrices only).
struct ParamSpec {
  std::string name;
  Shape shape;
  bool decay;
};

/// The parameter tensors of a GPT in a fixed order (wte, wpe, h.0..., ln_f).
std::vector<ParamSpec> gpt_param_specs(const GPTConfig& c);
/// Number of parameters (tied embedding counted once).
int64_t gpt_num_params(const GPTConfig& c);
/// Training FLOPs per token, 6N + 6*L*C*T (as llm.c and PaLM's appendix B count them:
/// forward+backward of the matrix products, attention scores counted separately).
double gpt_flops_per_token(const GPTConfig& c, int T);

/// Bytes of each arena for a model and micro-batch, known before any allocation.
struct MemoryPlan {
  size_t params_bytes = 0;
  size_t grads_bytes = 0;
  size_t optimizer_bytes = 0;  ///< AdamW m and v
  size_t activations_bytes = 0;
  size_t scratch_bytes = 0;    ///< activation gradients and recompute buffers
  size_t workspace_bytes = 0;  ///< backend buffers: attention chunks, 16-bit copies (bf16/fp16)
  size_t total() const {
    return params_bytes + grads_bytes + optimizer_bytes + activations_bytes + scratch_bytes +
           workspace_bytes;
  }
};

/// The sizes of the model's ops at micro-batch B, as a backend's workspace_bytes() takes them.
WorkspaceQuery workspace_query(const GPTConfig& c, int B, Precision p, bool fused,
                               bool bf16_activations = true);

/// Plans the memory of a model at micro-batch B and context block_size on backend `be`
/// without allocating. fused: the train.fusion=on layout (no (B,NH,T,T) attention matrix, only
/// its (B,NH,T) log-sum-exp; no probabilities and no separate logits gradient). p == bf16: the
/// matrix products' inputs are planned as bf16 tensors (GPT's bf16 activations). The
/// workspace is what `be` reports for these sizes (Backend::workspace_bytes).
MemoryPlan plan_memory(const GPTConfig& c, int B, Recompute rc, bool fused, Precision p,
                       const Backend& be);

/// The largest micro-batch B in [1, 65536] whose plan_memory(...).total() on `be` fits
/// budget_bytes (the plan grows with B); 0 when not even B = 1 fits.
int largest_batch_that_fits(const GPTConfig& c, Recompute rc, bool fused, Precision p,
                            size_t budget_bytes, const Backend& be);

/// The ops a model calls for a fusion setting (forward, backward and AdamW), for
/// check_supports().
std::vector<Op> gpt_ops(bool fused);

/// Named views of one block's tensors in a parameter (or gradient) arena, as llm.c's
/// ParameterTensors. Shapes use C = n_embd; linear weights are (in, out) (HF Conv1D).
struct LayerParams {
  float* ln1_w;      // (C)
  float* ln1_b;      // (C)
  float* qkv_w;      // (C, 3C)   attn.c_attn.weight
  float* qkv_b;      // (3C)
  float* attproj_w;  // (C, C)    attn.c_proj.weight
  float* attproj_b;  // (C)
  float* ln2_w;      // (C)
  float* ln2_b;      // (C)
  float* fc_w;       // (C, 4C)   mlp.c_fc.weight
  float* fc_b;       // (4C)
  float* fcproj_w;   // (4C, C)   mlp.c_proj.weight
  float* fcproj_b;   // (C)
};
/// Named views of all parameter (or gradient) tensors of a GPT; V = vocab_size,
/// maxT = block_size.
struct ParameterTensors {
  float* wte;                  // (V, C)     token embedding, tied with the classifier
  float* wpe;                  // (maxT, C)  position embedding
  std::vector<LayerParams> h;  // n_layer blocks
  float* lnf_w;                // (C)
  float* lnf_b;                // (C)
};
/// The views of `a`, an allocated arena planned from gpt_param_specs(c) in its order.
ParameterTensors parameter_views(Arena& a, const GPTConfig& c);

/// Named views of one block's activations in the activation arena, as llm.c's
/// ActivationTensors; B = micro-batch, T = block_size, C = n_embd, NH = n_head. DevPtr views
/// carry their dtype: the matrix products' inputs are bf16 under bf16 activations (see GPT's
/// bf16_activations), f32 otherwise; float* views are always f32. Under a recompute policy
/// the recomputed views of every block point at one shared buffer.
struct LayerActivations {
  float* x = nullptr;         // (B, T, C)      block input (residual stream)
  DevPtr ln1;                 // (B, T, C)      ln_1 output; bf16 under bf16 activations
  float* ln1_mean = nullptr;  // (B, T)
  float* ln1_rstd = nullptr;  // (B, T)         1/std
  DevPtr qkv;                 // (B, T, 3C)     c_attn output; bf16 under bf16 activations with
                              //                fusion on where Backend::bf16_qkv
  DevPtr atty;                // (B, T, C)      attention output; bf16 under bf16 activations
  float* att = nullptr;       // (B, NH, T, T)  softmax probabilities; fused: (B, NH, T) log-sum-exp
  float* res2 = nullptr;      // (B, T, C)      x + attn.c_proj output
  DevPtr ln2;                 // (B, T, C)      ln_2 output; bf16 under bf16 activations
  float* ln2_mean = nullptr;  // (B, T)
  float* ln2_rstd = nullptr;  // (B, T)         1/std
  float* fch = nullptr;       // (B, T, 4C)     c_fc output (GELU pre-activation)
  DevPtr fch_gelu;            // (B, T, 4C)     gelu(fch); bf16 under bf16 activations
  DevPtr fch_dgelu;           // (B, T, 4C)     fused only: gelu'(fch), or fch itself where the
                              //                backend saves the GELU's input (CUDA: its products
                              //                apply gelu'); bf16 under precision bf16
  float* out = nullptr;       // (B, T, C)      block output (the next block's x)
};

class GPT {
 public:
  /// Plans and allocates parameters, gradients and activations for micro-batches of up to
  /// max_batch sequences of up to block_size tokens. Throws gt::Error on invalid sizes.
  /// fused: use the backend's fused forms (train.fusion=on); same loss within rounding.
  /// bf16_activations: when the backend runs bf16 at construction, keep the matrix products'
  /// inputs (both LayerNorm outputs, attention output, GELU output, ln_f) and the gradients
  /// handed to the products (d_qkv, d(fch)) as bf16 tensors: bitwise the same training, half
  /// their memory, no rounding again in the backward. Off only to compare (tests); the memory plan
  /// (plan_memory) assumes on.
  GPT(const GPTConfig& cfg, int max_batch, Recompute rc, Backend& be, bool fused = false,
      bool bf16_activations = true);
  ~GPT();

  const GPTConfig& config() const { return cfg_; }
  Recompute recompute() const { return rc_; }
  /// Whether the model runs the fused forms (train.fusion=on).
  bool fused() const { return fused_; }
  int max_batch() const { return max_batch_; }
  /// Parameters and their gradients; tensor i of both is gpt_param_specs()[i].
  Arena& params() { return *params_; }
  Arena& grads() { return *grads_; }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  MemoryPlan memory() const { return plan_; }

  /// GPT-2 initialisation: N(0, 0.02) weights, residual projections (attn.c_proj, mlp.c_proj)
  /// N(0, 0.02/sqrt(2*n_layer)), zero biases, LayerNorm weight 1 (Radford et al. 2019).
  void init_weights(uint64_t seed);

  /// Runs the model on inputs (B,T) int32; with targets (B,T) also computes the mean
  /// cross-entropy loss and returns it (else returns NaN). B <= max_batch, T <= block_size.
  /// for_backward = false (evaluation, sampling): no backward() may follow, so with fusion on
  /// each MLP runs c_fc with its GELU as one product (Backend::matmul_gelu_forward) and
  /// keeps no pre-activation; the loss equals the training forward's within rounding.
  float forward(const int32_t* inputs, const int32_t* targets, int B, int T,
                bool for_backward = true);
  /// The training forward of micro-batch `slot` (0, 1, ...) of a step: as forward() with
  /// targets, without a host synchronization: the tokens go up through the backend's pinned
  /// memory (their host copies registered with Backend::host_tokens), the fused classifier
  /// folds dloss (as backward(dloss) takes it) into the logits' gradient, and the
  /// per-position losses come back asynchronously; step_loss(slot) reads them after the
  /// backend's next synchronize().
  void forward_step(const int32_t* inputs, const int32_t* targets, int B, int T, float dloss,
                    int slot);
  /// The mean loss of forward_step's micro-batch `slot` (valid after synchronize()).
  double step_loss(int slot) const;
  /// Host copy of the logits (B,T,V) of the last forward, copied through the backend (with
  /// fusion on and targets given, this buffer holds the logits' gradient instead: the fused
  /// loss overwrites it in place). Under bf16 activations with fusion on the model keeps them
  /// in bf16: these are their exact f32 values.
  std::vector<float> logits() const;
  /// Host copy of the per-position losses (B,T) of the last forward with targets.
  std::vector<float> losses() const;
  /// Named views of the parameters and of their gradients (device pointers).
  const ParameterTensors& param_views() const { return pv_; }
  const ParameterTensors& grad_views() const { return gv_; }
  /// The backend the model runs on.
  Backend& backend() const { return be_; }

  /// Sets every parameter gradient to zero.
  void zero_grad();
  /// Backward of the last forward (which must have had targets and for_backward; else
  /// throws gt::Error); accumulates (+=) into
  /// grads(). dloss is d(objective)/d(loss of one position), 1/(B*T*grad_accum_steps).
  void backward(float dloss);
  /// A group of gradient tensors that backward() finishes together, named by its views: the
  /// elements of grads() from its first tensor's start to its last tensor's end (the zeroed
  /// padding between them included), e.g. block l's MLP half is
  /// [grad_views().h[l].ln2_w, grad_views().h[l].fcproj_b + C).
  struct GradGroup {
    const float* begin = nullptr;
    const float* end = nullptr;
    bool operator==(const GradGroup&) const = default;
  };
  /// Called by backward() each time the gradients of a group are final for this backward: ln_f,
  /// then for each block from n_layer-1 down to 0 its MLP half (ln_2, c_fc, c_proj: two thirds
  /// of its parameters) and then its attention half (ln_1, c_attn, c_proj), then wte and wpe
  /// (wte last: the tied classifier and the embedding both add to it). Half-blocks let the
  /// reduction of block 0's MLP gradients overlap its attention backward, as PyTorch DDP's
  /// small first buckets do. Data-parallel training starts reducing a group's gradients there
  /// (dist/grad_sync.h).
  using GradReadyHook = std::function<void(const GradGroup& group)>;
  /// Sets (or, with an empty function, clears) the hook.
  void set_grad_ready_hook(GradReadyHook hook) { grad_ready_ = std::move(hook); }
  /// The groups in the order backward() finishes them (see GradReadyHook).
  std::vector<GradGroup> grad_groups() const;

 private:
  /// A layernorm's output that a fused block's last residual feeds (llm.c's fused residual):
  /// the next block's ln_1 or ln_f; out (N, C), mean and rstd (N), weight and bias (C).
  struct LayernormOut {
    DevPtr out;
    float* mean = nullptr;
    float* rstd = nullptr;
    const float* w = nullptr;
    const float* b = nullptr;
  };
  /// The layernorm after block l: block l+1's ln_1, or ln_f after the last.
  LayernormOut layernorm_after(int l);
  void block_forward_unfused(int l, int B, int T);
  /// ln1_ready: the block's ln_1 was written (by the previous block's fused residual); next:
  /// the layernorm its output feeds, written with it; nullptr when the backward recomputes
  /// the block (train.recompute = block): then out alone, and the MLP's saved forms as the
  /// backward wants them.
  void block_forward_fused(int l, int B, int T, bool ln1_ready, const LayernormOut* next);
  void block_backward_unfused(int l, int B, int T);
  void block_backward_fused(int l, int B, int T);
  void mlp_input_backward(int l, DevPtr dfch, int64_t N);
  void attention_input_backward(int l, int64_t N);
  GradGroup mlp_grads(int l) const;        // block l's ln_2, c_fc, c_proj
  GradGroup attention_grads(int l) const;  // block l's ln_1, c_attn, attn c_proj
  GradGroup lnf_grads() const;             // ln_f
  GradGroup embedding_grads() const;       // wte, wpe
  void recompute_for_backward(int l, int B, int T);
  void check_precision() const;
  void mlp_gelu(LayerActivations& L, int64_t n, bool with_dgelu);
  bool saves_gelu_input() const;
  void forward_impl(const int32_t* inputs, const int32_t* targets, int B, int T, bool for_backward,
                    float dloss, int slot);
  /// Pinned host buffers of one forward_step micro-batch slot.
  struct Slot {
    int32_t *inputs = nullptr, *targets = nullptr;
    float* losses = nullptr;
    int64_t cap = 0, n = 0;
  };
  Slot& slot(int k, int64_t n);
  std::vector<Slot> slots_;
  float folded_dloss_ = 1.0f;  // the dloss the last fused classifier folded in

  GPTConfig cfg_;
  int max_batch_;
  Recompute rc_;
  Backend& be_;
  bool fused_ = false;
  bool bf16_acts_ = false;     // product inputs stored as bf16
  bool planned_bf16_ = false;  // planned under bf16: fch_dgelu (and with bf16_acts_ more) bf16
  std::vector<ParamSpec> specs_;
  std::unique_ptr<Arena> params_, grads_, acts_, scratch_;
  std::vector<LayerActivations> layers_;  // named views of acts_, per block
  ParameterTensors pv_, gv_;              // named views of params_ and grads_
  MemoryPlan plan_;
  // top-level activations
  float *x0_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr;
  DevPtr lnf_;     // (B, T, C), bf16 under bf16 activations
  DevPtr logits_;  // (B, T, V), bf16 under bf16 activations with fusion on
  float *probs_ = nullptr, *losses_ = nullptr;
  int32_t *inputs_ = nullptr, *targets_ = nullptr;
  // gradient scratch
  float *dres_ = nullptr, *dC_ = nullptr;
  DevPtr dlogits_;             // fused: logits_ itself
  DevPtr dqkv_, d4C_, d4C16_;  // typed: bf16 where handed to a product under bf16 activations
  float* tmpC_ = nullptr;      // attention/MLP projection output before the residual add
  int lastB_ = 0, lastT_ = 0;
  bool have_targets_ = false;
  bool for_backward_ = true;  // the last forward keeps what backward() needs
  GradReadyHook grad_ready_;
};

}  // namespace gt
