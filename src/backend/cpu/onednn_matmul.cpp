#include "backend/cpu/onednn_matmul.h"

#include <fmt/format.h>

#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/error.h"

namespace gt::cpu {
namespace {

using dt = dnnl::memory::data_type;
using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, bool, int, bool>;

struct Ctx {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::map<Key, dnnl::matmul> prims;
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

void onednn_matmul(float* c, const void* a, const void* b, const float* bias, int64_t M, int64_t N,
                   int64_t K, bool trans_a, bool trans_b, bool accumulate, MmType type, bool gelu) {
  Ctx& cx = ctx();
  Key key{M, N, K, trans_a, trans_b, accumulate, bias != nullptr, static_cast<int>(type), gelu};
  auto a_md = md_2d(M, K, trans_a, to_dt(type));
  auto b_md = md_2d(K, N, trans_b, to_dt(type));
  auto c_md = md_2d(M, N, false, dt::f32);
  auto bias_md = dnnl::memory::desc({1, N}, dt::f32, dnnl::memory::dims{N, 1});
  dnnl::matmul* prim;
  {
    std::lock_guard<std::mutex> lock(cx.mu);
    auto it = cx.prims.find(key);
    if (it == cx.prims.end()) {
      dnnl::primitive_attr attr;
      dnnl::post_ops po;
      if (accumulate) po.append_sum(1.0f);
      if (gelu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
      if (accumulate || gelu) attr.set_post_ops(po);
      try {
        auto desc = bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                         : dnnl::matmul::desc(a_md, b_md, c_md);
        dnnl::matmul::primitive_desc pd(desc, attr, cx.eng);
        it = cx.prims.emplace(key, dnnl::matmul(pd)).first;
      } catch (const dnnl::error& e) {
        throw Error(fmt::format("oneDNN has no {} matrix product ({}x{}x{}) on this CPU: {}",
                                type_name(type), M, N, K, e.what()));
      }
    }
    prim = &it->second;
  }
  dnnl::memory am(a_md, cx.eng, const_cast<void*>(a));
  dnnl::memory bm(b_md, cx.eng, const_cast<void*>(b));
  dnnl::memory cm(c_md, cx.eng, c);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md, cx.eng, const_cast<float*>(bias)));
  prim->execute(cx.strm, args);
  cx.strm.wait();
}

void onednn_batched_matmul(float* c, Strided cs, const void* a, Strided as, const void* b,
                           Strided bs, int64_t D0, int64_t D1, int64_t M, int64_t N, int64_t K,
                           float alpha, MmType type) {
  using BKey = std::vector<int64_t>;
  static std::map<BKey, dnnl::matmul> prims;
  Ctx& cx = ctx();
  const dnnl::memory::desc a_md({D0, D1, M, K}, to_dt(type), {as.s0, as.s1, as.row, as.col});
  const dnnl::memory::desc b_md({D0, D1, K, N}, to_dt(type), {bs.s0, bs.s1, bs.row, bs.col});
  const dnnl::memory::desc c_md({D0, D1, M, N}, dt::f32, {cs.s0, cs.s1, cs.row, cs.col});
  BKey key{D0,    D1,    M,      N,      K,     as.s0, as.s1,  as.row, as.col,
           bs.s0, bs.s1, bs.row, bs.col, cs.s0, cs.s1, cs.row, cs.col, static_cast<int64_t>(type)};
  int32_t abits;
  std::memcpy(&abits, &alpha, 4);
  key.push_back(abits);
  dnnl::matmul* prim;
  {
    std::lock_guard<std::mutex> lock(cx.mu);
    auto it = prims.find(key);
    if (it == prims.end()) {
      dnnl::primitive_attr attr;
      if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
      try {
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, cx.eng);
        it = prims.emplace(key, dnnl::matmul(pd)).first;
      } catch (const dnnl::error& e) {
        throw Error(fmt::format("oneDNN has no {} batched matrix product ({}x{} of {}x{}x{}): {}",
                                type_name(type), D0, D1, M, N, K, e.what()));
      }
    }
    prim = &it->second;
  }
  prim->execute(cx.strm, {{DNNL_ARG_SRC, dnnl::memory(a_md, cx.eng, const_cast<void*>(a))},
                          {DNNL_ARG_WEIGHTS, dnnl::memory(b_md, cx.eng, const_cast<void*>(b))},
                          {DNNL_ARG_DST, dnnl::memory(c_md, cx.eng, c)}});
  cx.strm.wait();
}

bool onednn_supports(MmType type) {
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
