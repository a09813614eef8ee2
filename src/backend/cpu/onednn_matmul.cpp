#include "backend/cpu/onednn_matmul.h"

#include <fmt/format.h>
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"

namespace gt::cpu {
namespace {

using dt = dnnl::memory::data_type;
// the product's shape, types and post-ops, and the OpenMP team it was made for: oneDNN divides
// the work among the threads when the primitive is made (the team may shrink: thread_team.h)
using Key =
    std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, bool, int, bool, int, bool, int>;

struct Ctx {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  std::mutex mu;
};

Ctx& ctx() {
  static Ctx c;
  return c;
}

dt to_dt(MmType t) {
  switch (t) {
    case MmType::bf16:
      return dt::bf16;
    case MmType::f16:
      return dt::f16;
    default:
      return dt::f32;
  }
}

const char* type_name(MmType t) {
  return t == MmType::bf16 ? "bf16" : t == MmType::f16 ? "f16" : "f32";
}

dnnl::memory::desc md_2d(int64_t rows, int64_t cols, bool transposed, dt type) {
  // logical (rows, cols); stored row-major as (rows, cols) or as (cols, rows)
  dnnl::memory::dims strides =
      transposed ? dnnl::memory::dims{1, rows} : dnnl::memory::dims{cols, 1};
  return dnnl::memory::desc({rows, cols}, type, strides);
}

}  // namespace

void onednn_matmul(void* c, const void* a, const void* b, const float* bias, int64_t M, int64_t N,
                   int64_t K, bool trans_a, bool trans_b, bool accumulate, MmType type,
                   const MmPost& post) {
  if (accumulate && post.mul)
    throw Error("onednn_matmul: accumulate with an element-wise multiply would scale C too");
  Ctx& cx = ctx();
  const int mul = post.mul ? (post.mul_bf16 ? 2 : 1) : 0;
  Key key{M,
          N,
          K,
          trans_a,
          trans_b,
          accumulate,
          bias != nullptr,
          static_cast<int>(type),
          post.gelu,
          mul,
          post.c_bf16,
          omp_get_max_threads()};
  // per primitive: its memory descriptors, and per thread the memory objects and argument
  // map, made once; each call only points them at its buffers (making them every call cost
  // several microseconds, against a few tens for the products of a small model)
  struct Entry {
    dnnl::matmul prim;
    dnnl::memory::desc a_md, b_md, c_md, mul_md, bias_md;
  };
  struct Bound {
    dnnl::memory a, b, c, mul, bias;
    std::unordered_map<int, dnnl::memory> args;
  };
  static thread_local std::unordered_map<const Entry*, Bound> bound;
  const Entry* e;
  {
    static std::map<Key, Entry> prims;
    std::lock_guard<std::mutex> lock(cx.mu);
    auto it = prims.find(key);
    if (it == prims.end()) {
      Entry n;
      n.a_md = md_2d(M, K, trans_a, to_dt(type));
      n.b_md = md_2d(K, N, trans_b, to_dt(type));
      n.c_md = md_2d(M, N, false, post.c_bf16 ? dt::bf16 : dt::f32);
      n.mul_md = md_2d(M, N, false, post.mul_bf16 ? dt::bf16 : dt::f32);
      n.bias_md = dnnl::memory::desc({1, N}, dt::f32, dnnl::memory::dims{N, 1});
      dnnl::primitive_attr attr;
      dnnl::post_ops po;
      if (accumulate) po.append_sum(1.0f);
      if (post.gelu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
      if (post.mul) po.append_binary(dnnl::algorithm::binary_mul, n.mul_md);
      if (accumulate || post.gelu || post.mul) attr.set_post_ops(po);
      try {
        auto desc = bias ? dnnl::matmul::desc(n.a_md, n.b_md, n.bias_md, n.c_md)
                         : dnnl::matmul::desc(n.a_md, n.b_md, n.c_md);
        dnnl::matmul::primitive_desc pd(desc, attr, cx.eng);
        n.prim = dnnl::matmul(pd);
      } catch (const dnnl::error& err) {
        throw Error(fmt::format(
            "oneDNN has no {} matrix product ({}x{}x{}{}{}{}{}) on this CPU: {}", type_name(type),
            M, N, K, accumulate ? ", accumulate" : "", post.gelu ? ", GELU post-op" : "",
            post.mul ? ", multiply post-op" : "", post.c_bf16 ? ", bf16 output" : "", err.what()));
      }
      it = prims.emplace(key, std::move(n)).first;
    }
    e = &it->second;  // std::map: entries never move
  }
  auto [bit, fresh] = bound.try_emplace(e);
  Bound& m = bit->second;
  if (fresh) {
    m.a = dnnl::memory(e->a_md, cx.eng, const_cast<void*>(a));
    m.b = dnnl::memory(e->b_md, cx.eng, const_cast<void*>(b));
    m.c = dnnl::memory(e->c_md, cx.eng, c);
    m.args = {{DNNL_ARG_SRC, m.a}, {DNNL_ARG_WEIGHTS, m.b}, {DNNL_ARG_DST, m.c}};
    if (bias) {
      m.bias = dnnl::memory(e->bias_md, cx.eng, const_cast<float*>(bias));
      m.args.emplace(DNNL_ARG_BIAS, m.bias);
    }
    if (post.mul) {
      // the binary post-op's index counts the post-ops before it (sum, GELU)
      const int idx = (accumulate ? 1 : 0) + (post.gelu ? 1 : 0);
      m.mul = dnnl::memory(e->mul_md, cx.eng, const_cast<void*>(post.mul));
      m.args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx) | DNNL_ARG_SRC_1, m.mul);
    }
  } else {
    m.a.set_data_handle(const_cast<void*>(a));
    m.b.set_data_handle(const_cast<void*>(b));
    m.c.set_data_handle(c);
    if (bias) m.bias.set_data_handle(const_cast<float*>(bias));
    if (post.mul) m.mul.set_data_handle(const_cast<void*>(post.mul));
  }
  static thread_local dnnl::stream strm(cx.eng);
  e->prim.execute(strm, m.args);
  strm.wait();
}

struct ThreadMatmul::Impl {
  dnnl::memory::desc a_md, b_md, c_md;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  size_t scratch = 0;
};

ThreadMatmul::ThreadMatmul(int64_t M, int64_t N, int64_t K, int64_t lda, bool trans_a, int64_t ldb,
                           bool trans_b, int64_t ldc, float alpha, MmType type, bool accumulate)
    : impl_(new Impl) {
  Ctx& cx = ctx();
  impl_->a_md = dnnl::memory::desc(
      {M, K}, to_dt(type), trans_a ? dnnl::memory::dims{1, lda} : dnnl::memory::dims{lda, 1});
  impl_->b_md = dnnl::memory::desc(
      {K, N}, to_dt(type), trans_b ? dnnl::memory::dims{1, ldb} : dnnl::memory::dims{ldb, 1});
  impl_->c_md = dnnl::memory::desc({M, N}, dt::f32, dnnl::memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  try {
    impl_->pd = dnnl::matmul::primitive_desc(
        dnnl::matmul::desc(impl_->a_md, impl_->b_md, impl_->c_md), attr, cx.eng);
    impl_->prim = dnnl::matmul(impl_->pd);
  } catch (const dnnl::error& e) {
    delete impl_;
    throw Error(fmt::format("oneDNN has no {} matrix product ({}x{}x{}) on this CPU: {}",
                            type_name(type), M, N, K, e.what()));
  }
  impl_->scratch = impl_->pd.scratchpad_desc().get_size();
}

ThreadMatmul::~ThreadMatmul() { delete impl_; }

size_t ThreadMatmul::scratchpad_bytes() const { return impl_->scratch; }

void ThreadMatmul::run(float* c, const void* a, const void* b, void* scratchpad) const {
  // per thread and product: the memory objects and argument map, made once; each call only
  // points them at this call's buffers (creating them was a third of a small product's time)
  struct Bound {
    dnnl::memory a, b, c, s;
    std::unordered_map<int, dnnl::memory> args;
  };
  static thread_local dnnl::stream strm(ctx().eng);
  static thread_local std::unordered_map<const Impl*, Bound> bound;
  auto [it, fresh] = bound.try_emplace(impl_);
  Bound& m = it->second;
  if (fresh) {
    const auto& eng = ctx().eng;
    m.a = dnnl::memory(impl_->a_md, eng, const_cast<void*>(a));
    m.b = dnnl::memory(impl_->b_md, eng, const_cast<void*>(b));
    m.c = dnnl::memory(impl_->c_md, eng, c);
    m.args = {{DNNL_ARG_SRC, m.a}, {DNNL_ARG_WEIGHTS, m.b}, {DNNL_ARG_DST, m.c}};
    if (impl_->scratch) {
      m.s = dnnl::memory(impl_->pd.scratchpad_desc(), eng, scratchpad);
      m.args.emplace(DNNL_ARG_SCRATCHPAD, m.s);
    }
  } else {
    m.a.set_data_handle(const_cast<void*>(a));
    m.b.set_data_handle(const_cast<void*>(b));
    m.c.set_data_handle(c);
    if (impl_->scratch) m.s.set_data_handle(scratchpad);
  }
  impl_->prim.execute(strm, m.args);
  strm.wait();
}

const ThreadMatmul& thread_matmul(int64_t M, int64_t N, int64_t K, int64_t lda, bool trans_a,
                                  int64_t ldb, bool trans_b, int64_t ldc, float alpha, MmType type,
                                  bool accumulate) {
  static std::map<std::vector<int64_t>, std::unique_ptr<ThreadMatmul>> cache;
  int32_t abits;
  std::memcpy(&abits, &alpha, 4);
  std::vector<int64_t> key{M,       N,   K,     lda,           trans_a,   ldb,
                           trans_b, ldc, abits, (int64_t)type, accumulate};
  std::lock_guard<std::mutex> lock(ctx().mu);
  auto& p = cache[key];
  if (!p)
    p = std::make_unique<ThreadMatmul>(M, N, K, lda, trans_a, ldb, trans_b, ldc, alpha, type,
                                       accumulate);
  return *p;
}

namespace {
std::atomic<bool>& lowp_emulation() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("GT_CPU_EMULATE_LOWP");
    return e && std::string(e) == "1";
  }()};
  return on;
}

/// Whether oneDNN's instruction set here holds every feature of `of`: its ISA values are unions
/// of feature bits (dnnl_types.h), so every later ISA with those features holds all of its bits.
bool isa_holds(dnnl::cpu_isa of) {
  const auto bits = [](dnnl::cpu_isa i) { return static_cast<unsigned>(i); };
  return (bits(dnnl::get_effective_cpu_isa()) & bits(of)) == bits(of);
}
}  // namespace

void set_lowp_emulation(bool on) { lowp_emulation() = on; }

bool lowp_emulation_forced() { return lowp_emulation(); }

bool onednn_uses_amx() {
  static const bool amx = isa_holds(dnnl::cpu_isa::avx512_core_amx);
  return amx;
}

std::string onednn_isa_name() {
  using isa = dnnl::cpu_isa;
  const isa v = dnnl::get_effective_cpu_isa();
  for (const auto& [i, name] : {std::pair{isa::sse41, "sse41"},
                                {isa::avx, "avx"},
                                {isa::avx2, "avx2"},
                                {isa::avx2_vnni, "avx2_vnni"},
                                {isa::avx512_core, "avx512_core"},
                                {isa::avx512_core_vnni, "avx512_core_vnni"},
                                {isa::avx512_core_bf16, "avx512_core_bf16"},
                                {isa::avx512_core_amx, "avx512_core_amx"}})
    if (v == i) return name;
  return fmt::format("isa {:#x}", static_cast<unsigned>(v));
}

bool onednn_isa_has_bf16() { return isa_holds(dnnl::cpu_isa::avx512_core_bf16); }

bool onednn_supports(MmType type) {
  if (type != MmType::f32 && lowp_emulation()) return false;
  // oneDNN takes bf16 products on avx512_core(_vnni) too, emulating the bf16 dot products with
  // shifts and f32 FMAs inside its kernels, slower than the CPU backend's emulation (f32
  // products of the rounded operands, the same numerics): those count as none (see the header)
  if (type == MmType::bf16 && !onednn_isa_has_bf16()) return false;
  static std::map<MmType, bool> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(type);
  if (it != cache.end()) return it->second;
  bool ok = true;
  try {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    auto a = md_2d(16, 16, false, to_dt(type));
    auto c = md_2d(16, 16, false, dt::f32);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, a, c), eng);
    (void)pd;
  } catch (const dnnl::error&) {
    ok = false;
  }
  cache[type] = ok;
  return ok;
}

}  // namespace gt::cpu
