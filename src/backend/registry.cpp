// backend/registry.cpp: the backends this build has, the one factory that train.device goes
// through, the op names, and the host memory of the CPU and reference backends. A new device
// is one folder under backend/ and one entry in kKnown (with its factory, or null where the
// build leaves it out).
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
#include "backend/adam_math.h"
#include "backend/cuda/cuda_backend.h"
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

// A factory, or null where this build leaves the backend out (the registry still knows it,
// so naming it says why it is missing).
#ifdef GT_HAVE_ONEDNN
constexpr BackendFactory kCpuFactory = make_cpu_backend;
#else
constexpr BackendFactory kCpuFactory = nullptr;
#endif
#ifdef GT_HAVE_CUDA
constexpr BackendFactory kCudaFactory = make_cuda_backend;
#else
constexpr BackendFactory kCudaFactory = nullptr;
#endif

// The registry: "ref" first (the definition every other backend is tested against). A
// device's traits are all the rest of the program knows of it (DeviceTraits).
const BackendEntry kKnown[] = {
    {"ref", make_ref_backend, {}},
    {"cpu", kCpuFactory, {.missing_hint = "it was configured with GT_ONEDNN=OFF: no oneDNN"}},
    {"cuda",
     kCudaFactory,
     {.title = "CUDA",
      .indexed = true,
      .one_per_local_rank = true,
      .gpu_energy = true,
      .fp8 = "an Ada or Hopper GPU",
      .cudnn = true,
      .missing_hint = "build with the CUDA toolkit: nvcc found, or -DGT_CUDA=ON"}},
    {"cuda-emu", make_cuda_emulation_backend, {.fp8 = "which runs the same code on the CPU"}},
};

std::string known_devices() {
  std::string s;
  for (auto& e : registered_backends()) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

// "name", or "name or name:N" for an indexed device.
std::string spelled(const BackendEntry& e) {
  return e.traits.indexed ? fmt::format("{} or {}:N", e.name, e.name) : std::string(e.name);
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

void Backend::begin_graph() {
  throw Error(name() + ": this device does not capture graphs (supports_graphs() is false)");
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

const std::vector<BackendEntry>& registered_backends() {
  static const std::vector<BackendEntry> built = [] {
    std::vector<BackendEntry> v;
    for (auto& e : kKnown)
      if (e.make) v.push_back(e);
    return v;
  }();
  return built;
}
const std::vector<BackendEntry>& known_backends() {
  static const std::vector<BackendEntry> all(std::begin(kKnown), std::end(kKnown));
  return all;
}

const BackendEntry* find_backend(std::string_view name) {
  for (auto& e : kKnown)
    if (name == e.name) return &e;
  return nullptr;
}

DeviceTraits device_traits(const std::string& device) {
  const BackendEntry* e = find_backend(std::string_view(device).substr(0, device.find(':')));
  return e ? e->traits : DeviceTraits{};
}

std::string devices_with(bool (*has)(const DeviceTraits&)) {
  std::string s;
  for (auto& e : kKnown)
    if (!has || has(e.traits)) s += (s.empty() ? "" : ", ") + spelled(e);
  return s;
}

std::string device_for_local_rank(const std::string& device, int local_rank) {
  if (device.find(':') != std::string::npos || !device_traits(device).one_per_local_rank)
    return device;
  return fmt::format("{}:{}", device, local_rank);
}

bool DeviceName::gpu_energy() const { return device_traits(name).gpu_energy; }

const char* default_device() {
  for (auto& e : registered_backends())
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
  const BackendEntry* e = find_backend(name);
  if (e && e->make) {
    if (index != 0 && !e->traits.indexed)
      throw Error(fmt::format("train.device = '{}': {} has no device index; expected '{}'", device,
                              name, name));
    return e->make(index, opt);
  }
  if (e)
    throw Error(fmt::format("train.device = '{}': this build has no {} backend ({}); it has {}",
                            device, e->traits.title ? e->traits.title : e->name,
                            e->traits.missing_hint ? e->traits.missing_hint : "not built",
                            known_devices()));
  std::string have, missing;  // an unbuilt device is named too, with why it is missing
  for (auto& k : kKnown) {
    std::string& list = k.make ? have : missing;
    list += (list.empty() ? "" : ", ") + spelled(k);
  }
  throw Error(fmt::format("train.device = '{}' is unknown; expected {}{}", device, have,
                          missing.empty() ? "" : "; this build leaves out " + missing));
}

const AdamStepResult* Backend::adamw_step(const AdamStep& s) {
  step_result_.norm_sq = sum_squares(s.grads, s.grads_n);
  step_result_.nonfinite_state = -1;  // not checked here: the caller checks the states
  if (!std::isfinite(step_result_.norm_sq)) return &step_result_;
  const float mult = static_cast<float>(adam_grad_mult(step_result_.norm_sq, s.loss_scale, s.clip));
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
