#include "backend/cpu/onednn_matmul.h"

#include <dnnl.hpp>
#include <map>
#include <mutex>
#include <tuple>

namespace gt::cpu {
namespace {

using dt = dnnl::memory::data_type;
using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, bool>;

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

dnnl::memory::desc md_2d(int64_t rows, int64_t cols, bool transposed) {
  // logical (rows, cols); stored row-major as (rows, cols) or as (cols, rows)
  dnnl::memory::dims strides =
      transposed ? dnnl::memory::dims{1, rows} : dnnl::memory::dims{cols, 1};
  return dnnl::memory::desc({rows, cols}, dt::f32, strides);
}

}  // namespace

void onednn_matmul(float* c, const float* a, const float* b, const float* bias, int64_t M,
                   int64_t N, int64_t K, bool trans_a, bool trans_b, bool accumulate) {
  Ctx& cx = ctx();
  Key key{M, N, K, trans_a, trans_b, accumulate, bias != nullptr};
  auto a_md = md_2d(M, K, trans_a);
  auto b_md = md_2d(K, N, trans_b);
  auto c_md = md_2d(M, N, false);
  auto bias_md = dnnl::memory::desc({1, N}, dt::f32, dnnl::memory::dims{N, 1});
  dnnl::matmul* prim;
  {
    std::lock_guard<std::mutex> lock(cx.mu);
    auto it = cx.prims.find(key);
    if (it == cx.prims.end()) {
      dnnl::primitive_attr attr;
      if (accumulate) {
        dnnl::post_ops po;
        po.append_sum(1.0f);
        attr.set_post_ops(po);
      }
      auto desc = bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                       : dnnl::matmul::desc(a_md, b_md, c_md);
      dnnl::matmul::primitive_desc pd(desc, attr, cx.eng);
      it = cx.prims.emplace(key, dnnl::matmul(pd)).first;
    }
    prim = &it->second;
  }
  dnnl::memory am(a_md, cx.eng, const_cast<float*>(a));
  dnnl::memory bm(b_md, cx.eng, const_cast<float*>(b));
  dnnl::memory cm(c_md, cx.eng, c);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md, cx.eng, const_cast<float*>(bias)));
  prim->execute(cx.strm, args);
  cx.strm.wait();
}

}  // namespace gt::cpu
