// backend/registry.cpp: the backends this build has, the one factory that train.device goes
// through, the op names, and the host memory of the CPU and reference backends. A new device
// is one folder under backend/ and one line in kBackends.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "backend/backend.h"
#ifdef GT_HAVE_ONEDNN
#include "backend/cpu/cpu_backend.h"
#endif
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernel_math.h"
#include "backend/ref/ref_backend.h"
#include "core/error.h"

namespace gt {

namespace {
// The op names, in Op's order (both from GT_BACKEND_OPS).
constexpr std::string_view kOpNames[] = {
#define GT_OP_NAME(name) #name,
    GT_BACKEND_OPS(GT_OP_NAME)
#undef GT_OP_NAME
};
static_assert(std::size(kOpNames) == kOpCount);

// The registry: "ref" first (the definition every other backend is tested against).
const std::vector<BackendEntry> kBackends = {
    {"ref", make_ref_backend},
#ifdef GT_HAVE_ONEDNN
    {"cpu", make_cpu_backend},
#endif
#ifdef GT_HAVE_CUDA
    {"cuda", make_cuda_backend},
#endif
    {"cuda-emu", make_cuda_emulation_backend},
};

std::string known_devices() {
  std::string s;
  for (auto& e : kBackends) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}
}  // namespace

const std::vector<Op>& all_ops() {
  static const std::vector<Op> ops = [] {
    std::vector<Op> v;
    for (int i = 0; i < kOpCount; ++i) v.push_back(static_cast<Op>(i));
    return v;
  }();
  return ops;
}

std::string_view op_name(Op op) {
  const auto i = static_cast<size_t>(op);
  return i < std::size(kOpNames) ? kOpNames[i] : "?";
}

void Backend::unsupported(Op op) const {
  throw Error(
      fmt::format("{}: op {} is not implemented by this backend (its supports() should "
                  "say so, and a model then refuses before its first step)",
                  name(), op_name(op)));
}

void check_supports(const Backend& be, const std::vector<Op>& ops, Precision p) {
  for (Op op : ops)
    if (!be.supports(op, p))
      throw Error(fmt::format("train.device = '{}': the {} backend has no {} under precision {}",
                              be.name(), be.name(), op_name(op), to_string(p)));
}

const std::vector<BackendEntry>& registered_backends() { return kBackends; }

const char* default_device() {
  for (auto& e : kBackends)
    if (std::strcmp(e.name, "cpu") == 0) return "cpu";
  return "ref";
}

DeviceName parse_device(const std::string& device) {
  DeviceName d{device, 0};  // "name" or "name:N"
  if (auto colon = device.find(':'); colon != std::string::npos) {
    d.name = device.substr(0, colon);
    const std::string idx = device.substr(colon + 1);
    char* end = nullptr;
    long v = idx.empty() ? -1 : std::strtol(idx.c_str(), &end, 10);
    if (idx.empty() || *end != '\0' || v < 0 || v > 1024)
      throw Error(fmt::format("train.device = '{}': the device index '{}' is not a number >= 0",
                              device, idx));
    d.index = static_cast<int>(v);
  }
  return d;
}

std::unique_ptr<Backend> make_backend(const std::string& device, const BackendOptions& opt) {
  const auto [name, index] = parse_device(device);
  for (auto& e : kBackends)
    if (name == e.name) {
      if (index != 0 && name != "cuda")
        throw Error(fmt::format("train.device = '{}': {} has no device index; expected '{}'",
                                device, name, name));
      return e.make(index, opt);
    }
  if (name == "cpu")
    throw Error(
        fmt::format("train.device = '{}': this build has no cpu backend (it was configured with "
                    "GT_ONEDNN=OFF: no oneDNN); it has {}",
                    device, known_devices()));
  if (name == "cuda")
    throw Error(fmt::format(
        "train.device = '{}': this build has no CUDA backend (it has {}); build with the CUDA "
        "toolkit (nvcc found, or -DGT_CUDA=ON)",
        device, known_devices()));
  throw Error(fmt::format("train.device = '{}' is unknown; expected {}, cuda or cuda:N", device,
                          known_devices()));
}

const AdamStepResult* Backend::adamw_step(const AdamStep& s) {
  step_result_.norm_sq = sum_squares(s.grads, s.grads_n);
  step_result_.nonfinite_state = -1;  // not checked here: the caller checks the states
  if (!std::isfinite(step_result_.norm_sq)) return &step_result_;
  const float mult =
      static_cast<float>(cuda_math::adam_grad_mult(step_result_.norm_sq, s.loss_scale, s.clip));
  adamw_fused(s.p, s.g, s.m, s.v, s.n, s.wd, s.count, mult, s.lr, s.beta1, s.beta2, s.eps, s.t);
  return &step_result_;
}

void* HostMemoryBackend::allocate(size_t bytes) {
  void* p = std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
  if (!p) throw Error(fmt::format("{} backend: cannot allocate {} bytes", name(), bytes));
  return p;
}
void HostMemoryBackend::deallocate(void* p) { std::free(p); }
void HostMemoryBackend::zero(void* p, size_t bytes) { std::memset(p, 0, bytes); }
void HostMemoryBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}
void HostMemoryBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

}  // namespace gt
