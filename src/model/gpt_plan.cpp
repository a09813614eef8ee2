// model/gpt_plan.cpp: the GPT's memory, planned before the first step: its parameters
// (gpt_param_specs, parameter_views), the activations of each block from one table (kActs:
// name, shape, type, the recompute policies under which it is one shared buffer), the scratch
// tensors of the backward, the backend's workspace, and the plans and batch sizes the trainer
// asks for (plan_memory, largest_batch_that_fits). gpt.cpp is the forward and backward.
#include "model/gpt_plan.h"

#include <fmt/format.h>

#include <string>

#include "core/error.h"

namespace gt {
namespace {
// How an activation's shape and dtype follow from the model and the micro-batch B.
enum ActShape {
  kBTC,   // (B, T, C)
  kBT,    // (B, T)
  kBT3C,  // (B, T, 3C)
  kBT4C,  // (B, T, 4C)
  kAtt,   // (B, NH, T, T); fused: (B, NH, T), the log-sum-exp per row only
};
enum class ActType {
  f32,
  product_input,  // a matrix product's input: bf16 under bf16 activations
  qkv,            // bf16 where the backend's fused attention takes it (qkv_bf16())
  dgelu,          // bf16 under precision bf16
};

// The recompute policies under which an activation is one buffer shared by all layers
// (rewritten when needed, as the policy recomputes it) rather than one per layer: a set of
// bits 1 << Recompute.
constexpr unsigned policy(Recompute r) { return 1u << static_cast<unsigned>(r); }
constexpr unsigned kUnderBlock = policy(Recompute::block);
constexpr unsigned kUnderGeluLn = policy(Recompute::gelu_ln) | kUnderBlock;
constexpr unsigned kUnderGelu = policy(Recompute::gelu) | kUnderGeluLn;

// One block activation: its name in the arena ("h.{l}.{name}", or "shared.{name}"), its view
// in LayerActivations (typed, or always f32), shape, dtype, and the policies under which it is
// shared (`shared_fused` with fusion on). fused_only: planned with fusion on only.
struct ActSpec {
  const char* name;
  DevPtr LayerActivations::*typed;
  float* LayerActivations::*f32;
  ActShape shape;
  ActType type;
  unsigned shared, shared_fused;
  bool fused_only;
  constexpr ActSpec(const char* n, DevPtr LayerActivations::*v, ActShape s, ActType t, unsigned sh,
                    unsigned sh_fused, bool only_fused = false)
      : name(n),
        typed(v),
        f32(nullptr),
        shape(s),
        type(t),
        shared(sh),
        shared_fused(sh_fused),
        fused_only(only_fused) {}
  constexpr ActSpec(const char* n, float* LayerActivations::*v, ActShape s, unsigned sh,
                    unsigned sh_fused)
      : name(n),
        typed(nullptr),
        f32(v),
        shape(s),
        type(ActType::f32),
        shared(sh),
        shared_fused(sh_fused),
        fused_only(false) {}
};

// The activations of a block, in the order they are planned. Adding one: a LayerActivations
// view and a row here.
using LA = LayerActivations;
const ActSpec kActs[] = {
    {"ln1", &LA::ln1, kBTC, ActType::product_input, kUnderGeluLn, kUnderGeluLn},
    {"ln1_mean", &LA::ln1_mean, kBT, kUnderBlock, kUnderBlock},
    {"ln1_rstd", &LA::ln1_rstd, kBT, kUnderBlock, kUnderBlock},
    {"qkv", &LA::qkv, kBT3C, ActType::qkv, kUnderBlock, kUnderBlock},
    {"atty", &LA::atty, kBTC, ActType::product_input, kUnderBlock, kUnderBlock},
    {"att", &LA::att, kAtt, kUnderBlock, kUnderBlock},
    {"res2", &LA::res2, kBTC, kUnderBlock, kUnderBlock},
    {"ln2", &LA::ln2, kBTC, ActType::product_input, kUnderGeluLn, kUnderGeluLn},
    {"ln2_mean", &LA::ln2_mean, kBT, kUnderBlock, kUnderBlock},
    {"ln2_rstd", &LA::ln2_rstd, kBT, kUnderBlock, kUnderBlock},
    // fused under none: the backward reads fch_dgelu instead; gelu and gelu+ln recompute from it
    {"fch", &LA::fch, kBT4C, kUnderBlock, policy(Recompute::none) | kUnderBlock},
    {"fch_gelu", &LA::fch_gelu, kBT4C, ActType::product_input, kUnderGelu, kUnderGelu},
    // gelu'(fch), for the fused backward of mlp.c_proj
    {"fch_dgelu", &LA::fch_dgelu, kBT4C, ActType::dgelu, kUnderGelu, kUnderGelu,
     /*only_fused=*/true},
};
constexpr size_t kNumActs = std::size(kActs);

bool is_shared(const ActSpec& a, Recompute rc, bool fused) {
  return ((fused ? a.shared_fused : a.shared) & policy(rc)) != 0;
}

Shape act_shape(const ActSpec& a, const GPTConfig& c, int B, bool fused) {
  const int64_t T = c.block_size, C = c.n_embd;
  switch (a.shape) {
    case kBTC:
      return {B, T, C};
    case kBT:
      return {B, T};
    case kBT3C:
      return {B, T, 3 * C};
    case kBT4C:
      return {B, T, 4 * C};
    case kAtt:
      return fused ? Shape{B, c.n_head, T} : Shape{B, c.n_head, T, T};
  }
  return {};
}
}  // namespace

namespace gpt_plan {
void validate(const GPTConfig& c, int B) {
  auto pos = [](const char* key, int v) {
    check(v > 0, fmt::format("{} = {}: expected a positive integer", key, v));
  };
  pos("model.n_layer", c.n_layer);
  pos("model.n_head", c.n_head);
  pos("model.n_embd", c.n_embd);
  pos("model.block_size", c.block_size);
  pos("model.vocab_size", c.vocab_size);
  pos("train.batch_size", B);
  check(c.n_embd % c.n_head == 0,
        fmt::format("model.n_embd = {} is not divisible by model.n_head = {}", c.n_embd, c.n_head));
}

// act16: product inputs stored as bf16; dgelu16: fch_dgelu stored as bf16 (under bf16);
// qkv16: qkv stored as bf16 (the qkv product's output, read so by the fused attention);
// gelu_input: the fc product's epilogue writes the GELU's input into fch_dgelu, so no f32 fch.
Plans plan_arenas(const GPTConfig& c, int B, Recompute rc, bool fused, bool act16, bool dgelu16,
                  bool qkv16, bool gelu_input, const std::vector<ParamSpec>& specs, Arena& params,
                  Arena& grads, Arena& acts, Arena& scratch) {
  for (auto& s : specs) {
    params.plan(s.name, s.shape);
    grads.plan(s.name, s.shape);
  }
  Plans p;
  int64_t T = c.block_size, C = c.n_embd, V = c.vocab_size;
  const DType in_type = act16 ? DType::bf16 : DType::f32;
  auto type = [&](const ActSpec& a) {
    switch (a.type) {
      case ActType::product_input:
        return in_type;
      case ActType::qkv:
        return qkv16 ? DType::bf16 : DType::f32;
      case ActType::dgelu:
        return dgelu16 ? DType::bf16 : DType::f32;
      case ActType::f32:
        break;
    }
    return DType::f32;
  };
  auto plan = [&](const ActSpec& a, const std::string& name) {
    return acts.plan(name, act_shape(a, c, B, fused), type(a));
  };
  auto used = [&](const ActSpec& a) {
    return (fused || !a.fused_only) && !(gelu_input && a.f32 == &LA::fch);
  };
  std::vector<size_t> shared_idx(kNumActs, SIZE_MAX);
  for (size_t k = 0; k < kNumActs; ++k)
    if (used(kActs[k]) && is_shared(kActs[k], rc, fused))
      shared_idx[k] = plan(kActs[k], fmt::format("shared.{}", kActs[k].name));
  for (int l = 0; l <= c.n_layer; ++l)
    p.resid_idx.push_back(acts.plan(fmt::format("resid.{}", l), {B, T, C}));
  for (int l = 0; l < c.n_layer; ++l) {
    std::vector<size_t> idx(kNumActs);
    for (size_t k = 0; k < kNumActs; ++k)
      idx[k] = !used(kActs[k]) ? SIZE_MAX
               : shared_idx[k] != SIZE_MAX
                   ? shared_idx[k]
                   : plan(kActs[k], fmt::format("h.{}.{}", l, kActs[k].name));
    p.layer_idx.push_back(idx);
  }
  p.lnf = acts.plan("ln_f", {B, T, C}, in_type);
  p.lnf_mean = acts.plan("ln_f_mean", {B, T});
  p.lnf_rstd = acts.plan("ln_f_rstd", {B, T});
  // bf16 logits under bf16 activations with the fused classifier: the product writes them in
  // bf16 and the fused loss its bf16 gradient in place, which the classifier's backward product
  // takes as it is (as PyTorch autocast's and llm.c's); unfused, softmax and its backward stay f32
  p.logits = acts.plan("logits", {B, T, V}, act16 && fused ? DType::bf16 : DType::f32);
  p.probs = fused ? SIZE_MAX : acts.plan("probs", {B, T, V});
  p.losses = acts.plan("losses", {B, T});
  p.inputs = acts.plan("inputs", {B, T}, DType::i32);
  p.targets = acts.plan("targets", {B, T}, DType::i32);
  p.dres = scratch.plan("d_resid", {B, T, C});
  p.dC = scratch.plan("d_C", {B, T, C});
  // the gradients handed to a product: bf16 tensors under bf16 activations (attention's
  // dqkv; the GELU-fused dinp of mlp.c_proj, or unfused, gelu_backward's bf16 output beside
  // the f32 product output it reads)
  p.dqkv = scratch.plan("d_qkv", {B, T, 3 * C}, in_type);
  p.d4C = scratch.plan("d_4C", {B, T, 4 * C}, fused ? in_type : DType::f32);
  p.d4C16 = act16 && !fused ? scratch.plan("d_4C_bf16", {B, T, 4 * C}, DType::bf16) : SIZE_MAX;
  p.dlogits = fused ? SIZE_MAX : scratch.plan("d_logits", {B, T, V});
  p.tmpC = scratch.plan("proj_out", {B, T, C});
  return p;
}

// The named views of block l's activations in the allocated `acts`: row k of kActs is tensor
// p.layer_idx[l][k] (SIZE_MAX: not planned, null view); x and out are residual streams l, l+1.
LayerActivations layer_views(Arena& acts, const Plans& p, int l) {
  LayerActivations v;
  for (size_t k = 0; k < kNumActs; ++k) {
    const size_t i = p.layer_idx[l][k];
    if (i == SIZE_MAX) continue;
    if (kActs[k].typed)
      v.*kActs[k].typed = DevPtr(acts.at(i));
    else
      v.*kActs[k].f32 = acts.at(i).f32();
  }
  v.x = acts.at(p.resid_idx[l]).f32();
  v.out = acts.at(p.resid_idx[l + 1]).f32();
  return v;
}

// Whether qkv is a bf16 tensor: under bf16 activations with fusion on, where the backend's fused
// attention takes one (Backend::bf16_qkv).
bool qkv_bf16(const GPTConfig& c, bool fused, bool act16, const Backend& be) {
  return act16 && fused && be.bf16_qkv(c.n_embd, c.n_head);
}
// Whether the fused MLP keeps fch itself in fch_dgelu (the backend's saves_gelu_input(): the
// products apply GELU and gelu' in their epilogues) rather than gelu'(fch): only where no
// policy recomputes the MLP (the recomputation's GELU pass writes gelu'). No f32 fch then.
bool gelu_input_saved(Recompute rc, bool fused, const Backend& be) {
  return fused && rc == Recompute::none && be.saves_gelu_input();
}
}  // namespace gpt_plan

using gpt_plan::gelu_input_saved;
using gpt_plan::plan_arenas;
using gpt_plan::qkv_bf16;
using gpt_plan::validate;

std::vector<ParamSpec> gpt_param_specs(const GPTConfig& c) {
  int64_t C = c.n_embd;
  std::vector<ParamSpec> s;
  s.push_back({"wte.weight", {c.vocab_size, C}, true});
  s.push_back({"wpe.weight", {c.block_size, C}, true});
  for (int l = 0; l < c.n_layer; ++l) {
    auto n = [&](const char* x) { return fmt::format("h.{}.{}", l, x); };
    s.push_back({n("ln_1.weight"), {C}, false});
    s.push_back({n("ln_1.bias"), {C}, false});
    s.push_back({n("attn.c_attn.weight"), {C, 3 * C}, true});
    s.push_back({n("attn.c_attn.bias"), {3 * C}, false});
    s.push_back({n("attn.c_proj.weight"), {C, C}, true});
    s.push_back({n("attn.c_proj.bias"), {C}, false});
    s.push_back({n("ln_2.weight"), {C}, false});
    s.push_back({n("ln_2.bias"), {C}, false});
    s.push_back({n("mlp.c_fc.weight"), {C, 4 * C}, true});
    s.push_back({n("mlp.c_fc.bias"), {4 * C}, false});
    s.push_back({n("mlp.c_proj.weight"), {4 * C, C}, true});
    s.push_back({n("mlp.c_proj.bias"), {C}, false});
  }
  s.push_back({"ln_f.weight", {C}, false});
  s.push_back({"ln_f.bias", {C}, false});
  return s;
}

int64_t gpt_num_params(const GPTConfig& c) {
  int64_t n = 0;
  for (auto& s : gpt_param_specs(c)) n += s.shape.numel();
  return n;
}

double gpt_flops_per_token(const GPTConfig& c, int T) {
  return 6.0 * (double)gpt_num_params(c) + 6.0 * c.n_layer * (double)c.n_embd * T;
}

WorkspaceQuery workspace_query(const GPTConfig& c, int B, Precision p, bool fused,
                               bool bf16_activations) {
  const int64_t C = c.n_embd;
  WorkspaceQuery q;
  q.N = (int64_t)B * c.block_size;
  q.T = c.block_size;
  q.C = c.n_embd;
  q.NH = c.n_head;
  q.V = c.vocab_size;
  q.hidden = 4 * c.n_embd;
  // the matrix weights: wte (the classifier) and each block's c_attn, attn.c_proj, c_fc, mlp.c_proj
  q.weight_elems =
      (int64_t)c.vocab_size * C + c.n_layer * (3 * C * C + C * C + 4 * C * C + 4 * C * C);
  q.precision = p;
  q.fused = fused;
  q.bf16_activations = bf16_activations && p == Precision::bf16;
  return q;
}

int largest_batch_that_fits(const GPTConfig& c, Recompute rc, bool fused, Precision p,
                            size_t budget_bytes, const Backend& be) {
  auto fits = [&](int B) { return plan_memory(c, B, rc, fused, p, be).total() <= budget_bytes; };
  if (!fits(1)) return 0;
  int lo = 1, hi = 65536;
  if (fits(hi)) return hi;
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

MemoryPlan plan_memory(const GPTConfig& c, int B, Recompute rc, bool fused, Precision prec,
                       const Backend& be) {
  validate(c, B);
  Arena p("parameters"), g("gradients"), a("activations"), s("scratch");
  auto specs = gpt_param_specs(c);
  const bool bf16 = prec == Precision::bf16;
  plan_arenas(c, B, rc, fused, bf16, bf16, qkv_bf16(c, fused, bf16, be),
              gelu_input_saved(rc, fused, be), specs, p, g, a, s);
  MemoryPlan m;
  m.params_bytes = p.bytes();
  m.grads_bytes = g.bytes();
  m.optimizer_bytes = 2 * p.bytes();
  m.activations_bytes = a.bytes();
  m.scratch_bytes = s.bytes();
  m.workspace_bytes = be.workspace_bytes(workspace_query(c, B, prec, fused));
  return m;
}

std::vector<Op> gpt_ops(bool fused) {
  std::vector<Op> ops = {
      Op::embedding_forward, Op::embedding_backward, Op::layernorm_forward, Op::layernorm_backward,
      Op::matmul_forward,    Op::matmul_backward,    Op::sum_squares,       Op::scale};
  const std::vector<Op> unfused = {Op::attention_forward,
                                   Op::attention_backward,
                                   Op::gelu_forward,
                                   Op::gelu_backward,
                                   Op::residual_forward,
                                   Op::softmax_crossentropy_forward,
                                   Op::softmax_crossentropy_backward,
                                   Op::adamw_update};
  const std::vector<Op> fused_ops = {
      Op::attention_forward_fused,    Op::attention_backward_fused,   Op::gelu_forward_fused,
      Op::matmul_backward_gelu,       Op::matmul_gelu_forward,        Op::residual_forward,
      Op::residual_layernorm_forward, Op::softmax_crossentropy_fused, Op::adamw_fused};
  for (Op op : fused ? fused_ops : unfused) ops.push_back(op);
  return ops;
}

ParameterTensors parameter_views(Arena& a, const GPTConfig& c) {
  check(
      a.allocated() && a.size() == gpt_param_specs(c).size(),
      fmt::format("parameter_views: arena '{}' is not an allocated GPT parameter arena", a.name()));
  size_t i = 0;
  auto next = [&] { return a.at(i++).f32(); };  // gpt_param_specs order
  ParameterTensors t;
  t.wte = next();
  t.wpe = next();
  t.h.resize(c.n_layer);
  for (LayerParams& L : t.h) {
    L.ln1_w = next();
    L.ln1_b = next();
    L.qkv_w = next();
    L.qkv_b = next();
    L.attproj_w = next();
    L.attproj_b = next();
    L.ln2_w = next();
    L.ln2_b = next();
    L.fc_w = next();
    L.fc_b = next();
    L.fcproj_w = next();
    L.fcproj_b = next();
  }
  t.lnf_w = next();
  t.lnf_b = next();
  return t;
}

}  // namespace gt
