// backend/cuda/cudnn_attention.cpp: cudnn_attention.h over the cuDNN frontend's graph API
// (cudnn_frontend::graph::Graph::sdpa and sdpa_backward; the frontend's samples
// samples/cpp/sdpa/fp16_fwd.cpp and fp16_bwd.cpp show the same calls). The frontend is
// compiled with NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING: every cuDNN call goes through
// cudnn_frontend::cudnn_dlhandle, which this file sets by loading libcudnn.so.9.
#include "backend/cuda/cudnn_attention.h"

#include <fmt/format.h>

#include "core/error.h"

#if defined(GT_HAVE_CUDNN_FRONTEND)
#include <cuda_runtime_api.h>
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;  // the frontend's handle on libcudnn (cudnn_frontend_shim.h)
}

namespace gt {
namespace fe = cudnn_frontend;
namespace {

/// libcudnn.so.9, loaded once per process (a cuDNN before 9 is refused: its graph API lacks
/// the fused attention). The frontend loads the CUDA runtime itself, trying libcudart.so.12
/// before .13; it is pointed at the one this program was built with
/// (CUDNN_FRONTEND_CUDART_LIB_NAME, cudnn_frontend_shim.h) unless the user chose one.
void load_cudnn() {
  static std::once_flag once;
  static std::string why;
  std::call_once(once, [] {
    const std::string cudart = fmt::format("libcudart.so.{}", CUDART_VERSION / 1000);
    setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cudart.c_str(), 0);
    dlerror();
    void* h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      const char* e = dlerror();
      why = e ? e : "unknown reason";
      return;
    }
    fe::cudnn_dlhandle = h;
    const size_t v = fe::detail::get_backend_version();
    if (v < 90000) {
      why = fmt::format("it reports version {}, before 9.0", v);
      fe::cudnn_dlhandle = nullptr;
    }
  });
  if (!fe::cudnn_dlhandle)
    throw Error(fmt::format(
        "train.attention = 'cudnn': cannot load cuDNN 9 (libcudnn.so.9: {}); install it (pip "
        "install nvidia-cudnn-cu13, or NVIDIA's cudnn9-cuda-13 package) and put the folder of "
        "libcudnn.so.9 on LD_LIBRARY_PATH, or use train.attention = own",
        why));
}

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

}  // namespace

struct CudnnAttention::Impl {
  cudaStream_t stream = nullptr;
  cudnnHandle_t handle = nullptr;
  struct Plan {
    std::shared_ptr<fe::graph::Graph> graph;
    int64_t workspace = 0;
  };
  /// (B, T, C, NH, f16, backward)
  std::map<std::tuple<int, int, int, int, bool, bool>, Plan> plans;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  bool warned_nondeterministic = false;

  static void ok(fe::error_t e, const char* what, const SdpaShape& s) {
    if (e.is_bad())
      throw Error(fmt::format(
          "cuDNN attention ({} sequences of {} tokens, {} heads of {}, {}): {} failed: {}", s.B,
          s.T, s.NH, s.C / s.NH, s.f16 ? "fp16" : "bf16", what, e.get_message()));
  }
  std::shared_ptr<fe::graph::Graph> new_graph(const SdpaShape& s) const {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(s.f16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return g;
  }
  /// A (B, NH, T, hs) view of a (B, T, width) tensor's column block: strides in elements.
  static std::shared_ptr<fe::graph::Tensor_attributes> view(fe::graph::Graph& g, const char* name,
                                                            int64_t uid, const SdpaShape& s,
                                                            int64_t width) {
    const int64_t hs = s.C / s.NH;
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({s.B, s.NH, s.T, hs})
                        .set_stride({int64_t(s.T) * width, hs, width, 1}));
  }
  static void as_output(const std::shared_ptr<fe::graph::Tensor_attributes>& t, const char* name,
                        int64_t uid, const SdpaShape& s, int64_t width) {
    const int64_t hs = s.C / s.NH;
    t->set_output(true)
        .set_name(name)
        .set_uid(uid)
        .set_dim({s.B, s.NH, s.T, hs})
        .set_stride({int64_t(s.T) * width, hs, width, 1});
  }
  static void stats_tensor(const std::shared_ptr<fe::graph::Tensor_attributes>& t,
                           const SdpaShape& s) {
    t->set_name("stats")
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({s.B, s.NH, s.T, 1})
        .set_stride({int64_t(s.NH) * s.T, s.T, 1, 1});
  }
  /// f() with what the frontend throws itself (std::exception: no implementation for the
  /// shape, a CUDA runtime it cannot load) turned into gt::Error naming the shape.
  template <class F>
  static auto guarded(const char* what, const SdpaShape& s, F f) -> decltype(f()) {
    try {
      return f();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      ok(fe::error_t(fe::error_code_t::GRAPH_NOT_SUPPORTED, e.what()), what, s);
      throw;  // not reached
    }
  }
  /// validate, lower, choose (heuristics A, then the fallback list), check, build.
  void finish(fe::graph::Graph& g, const SdpaShape& s) {
    ok(g.validate(), "validating the graph", s);
    ok(g.build_operation_graph(handle), "building the operation graph", s);
    ok(g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}),
       "creating execution plans", s);
    ok(g.check_support(handle), "checking support", s);
    ok(g.build_plans(handle), "building the plan", s);
  }
  Plan forward_plan(const SdpaShape& s) {
    Plan p;
    p.graph = new_graph(s);
    auto& g = *p.graph;
    const int64_t w = 3 * int64_t(s.C);
    auto q = view(g, "Q", kQ, s, w), k = view(g, "K", kK, s, w), v = view(g, "V", kV, s, w);
    auto opt = fe::graph::SDPA_attributes()
                   .set_name("sdpa")
                   .set_generate_stats(true)
                   .set_causal_mask(true)
                   .set_attn_scale(1.0f / std::sqrt(float(s.C / s.NH)));
    auto [o, stats] = g.sdpa(q, k, v, opt);
    as_output(o, "O", kO, s, s.C);
    stats_tensor(stats, s);
    stats->set_output(true);
    finish(g, s);
    ok(g.get_workspace_size(p.workspace), "querying the workspace", s);
    return p;
  }
  Plan backward_plan(const SdpaShape& s, bool deterministic) {
    Plan p;
    p.graph = new_graph(s);
    auto& g = *p.graph;
    const int64_t w = 3 * int64_t(s.C);
    auto q = view(g, "Q", kQ, s, w), k = view(g, "K", kK, s, w), v = view(g, "V", kV, s, w);
    auto o = view(g, "O", kO, s, s.C), d_o = view(g, "dO", kDO, s, s.C);
    auto stats = g.tensor(fe::graph::Tensor_attributes());
    stats_tensor(stats, s);
    auto opt = fe::graph::SDPA_backward_attributes()
                   .set_name("sdpa_backward")
                   .set_causal_mask(true)
                   .set_attn_scale(1.0f / std::sqrt(float(s.C / s.NH)))
                   .set_deterministic_algorithm(deterministic);
    auto [dq, dk, dv] = g.sdpa_backward(q, k, v, o, d_o, stats, opt);
    as_output(dq, "dQ", kDQ, s, w);
    as_output(dk, "dK", kDK, s, w);
    as_output(dv, "dV", kDV, s, w);
    finish(g, s);
    ok(g.get_workspace_size(p.workspace), "querying the workspace", s);
    return p;
  }
  Plan& plan(const SdpaShape& s, bool backward) {
    const auto key = std::make_tuple(s.B, s.T, s.C, s.NH, s.f16, backward);
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    if (!backward)
      return plans.emplace(key, guarded("the forward", s, [&] { return forward_plan(s); }))
          .first->second;
    try {
      return plans.emplace(key, guarded("the backward", s, [&] { return backward_plan(s, true); }))
          .first->second;
    } catch (const Error& e) {
      if (!warned_nondeterministic)
        std::fprintf(stderr,
                     "greentrain: cuDNN has no deterministic attention backward for this shape "
                     "(%s); using its default algorithm, whose dQ sums may differ run to run\n",
                     e.what());
      warned_nondeterministic = true;
      return plans.emplace(key, guarded("the backward", s, [&] { return backward_plan(s, false); }))
          .first->second;
    }
  }
  void* workspace_for(int64_t bytes) {
    if (bytes > 0 && size_t(bytes) > workspace_bytes) {
      if (workspace) {
        cudaStreamSynchronize(stream);
        cudaFree(workspace);
      }
      workspace = nullptr;
      workspace_bytes = 0;
      const cudaError_t e = cudaMalloc(&workspace, size_t(bytes));
      if (e != cudaSuccess)
        throw Error(fmt::format("cuDNN attention: cannot allocate its {} bytes of workspace: {}",
                                bytes, cudaGetErrorString(e)));
      workspace_bytes = size_t(bytes);
    }
    return workspace;
  }
  void run(Plan& p, std::unordered_map<int64_t, void*>& pack, const SdpaShape& s) {
    void* ws = workspace_for(p.workspace);
    guarded("executing", s, [&] { ok(p.graph->execute(handle, pack, ws), "executing", s); });
  }
};

CudnnAttention::CudnnAttention(CUstream_st* stream) : impl_(std::make_unique<Impl>()) {
  load_cudnn();
  impl_->stream = stream;
  if (fe::detail::create_handle(&impl_->handle) != CUDNN_STATUS_SUCCESS)
    throw Error(fmt::format("cuDNN attention: cudnnCreate failed ({})", describe()));
  if (fe::detail::set_stream(impl_->handle, stream) != CUDNN_STATUS_SUCCESS)
    throw Error("cuDNN attention: cudnnSetStream failed");
}

CudnnAttention::~CudnnAttention() {
  if (!impl_) return;
  impl_->plans.clear();
  if (impl_->workspace) {
    cudaStreamSynchronize(impl_->stream);
    cudaFree(impl_->workspace);
  }
  if (impl_->handle) fe::detail::destroy_handle(impl_->handle);
}

std::string CudnnAttention::describe() const {
  const size_t v = fe::detail::get_backend_version();  // 9xyyzz: major 9, minor, patch
  return fmt::format("cuDNN {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

void CudnnAttention::forward(uint16_t* out, float* lse, const uint16_t* qkv, const SdpaShape& s) {
  Impl::Plan& p = impl_->plan(s, false);
  auto* base = const_cast<uint16_t*>(qkv);
  std::unordered_map<int64_t, void*> pack = {
      {kQ, base}, {kK, base + s.C}, {kV, base + 2 * s.C}, {kO, out}, {kStats, lse}};
  impl_->run(p, pack, s);
}

void CudnnAttention::backward(uint16_t* dqkv, const uint16_t* dout, const uint16_t* qkv,
                              const uint16_t* out, const float* lse, const SdpaShape& s) {
  Impl::Plan& p = impl_->plan(s, true);
  auto* base = const_cast<uint16_t*>(qkv);
  std::unordered_map<int64_t, void*> pack = {{kQ, base},
                                             {kK, base + s.C},
                                             {kV, base + 2 * s.C},
                                             {kO, const_cast<uint16_t*>(out)},
                                             {kDO, const_cast<uint16_t*>(dout)},
                                             {kStats, const_cast<float*>(lse)},
                                             {kDQ, dqkv},
                                             {kDK, dqkv + s.C},
                                             {kDV, dqkv + 2 * s.C}};
  impl_->run(p, pack, s);
}

}  // namespace gt

#else  // a build without the cuDNN frontend's headers

namespace gt {
struct CudnnAttention::Impl {};
CudnnAttention::CudnnAttention(CUstream_st*) {
  throw Error(
      "train.attention = 'cudnn': this build has no cuDNN attention (CMake found no cuDNN "
      "frontend headers: GT_CUDNN_FRONTEND_DIR, or the download of nvidia-cudnn-frontend at "
      "configure time); use train.attention = own");
}
CudnnAttention::~CudnnAttention() = default;
std::string CudnnAttention::describe() const { return "cuDNN (not built)"; }
void CudnnAttention::forward(uint16_t*, float*, const uint16_t*, const SdpaShape&) {}
void CudnnAttention::backward(uint16_t*, const uint16_t*, const uint16_t*, const uint16_t*,
                              const float*, const SdpaShape&) {}
}  // namespace gt

#endif
