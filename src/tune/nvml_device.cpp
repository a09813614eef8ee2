// tune/nvml_device.cpp: NVIDIA GPU power limits through the energy module's NVML wrapper.
#include "tune/nvml_device.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace gt::tune {
namespace nv = energy::nvml;

NvmlDevice::NvmlDevice(std::shared_ptr<nv::Library> lib, unsigned index)
    : lib_(std::move(lib)), index_(index) {
  auto d = lib_->device_by_index(index);
  check(d.ok(), fmt::format("nvml:{}: cannot open the GPU ({}); expected a valid NVML index", index,
                            lib_->error_string(d.rc)));
  dev_ = d.value;
  auto n = lib_->name(dev_);
  auto u = lib_->uuid(dev_);
  name_ = fmt::format("nvml:{} ({}{}{})", index, n.ok() ? n.value : "GPU", u.ok() ? ", " : "",
                      u.ok() ? u.value : "");
  auto c = lib_->power_limit_constraints_mw(dev_);
  check(c.ok(), fmt::format("{}: cannot read the power-limit constraints ({}); expected a GPU "
                            "with power management",
                            name_, lib_->error_string(c.rc)));
  min_w_ = c.value.first * 1e-3;
  max_w_ = c.value.second * 1e-3;
}

double NvmlDevice::limit_w() const {
  auto l = lib_->power_limit_mw(dev_);
  check(l.ok(),
        fmt::format("{}: cannot read the power limit ({})", name_, lib_->error_string(l.rc)));
  return l.value * 1e-3;
}

void NvmlDevice::set_limit_w(double limit_w) {
  const auto mw = static_cast<unsigned>(std::llround(limit_w * 1e3));
  nv::Return rc = lib_->set_power_limit_mw(dev_, mw);
  if (rc != nv::kSuccess)
    throw Error(fmt::format(
        "{}: cannot set the power limit to {} W ({}){}", name_, limit_w, lib_->error_string(rc),
        rc == nv::kErrorNoPermission ? "; setting GPU power limits needs root" : ""));
}

std::string NvmlDevice::permission_problem() const {
  auto l = lib_->power_limit_mw(dev_);
  if (!l.ok()) return fmt::format("cannot read the power limit ({})", lib_->error_string(l.rc));
  const double now_w = l.value * 1e-3;
  // A limit outside the allowed range cannot be set again (NVML: Invalid Argument), so it could
  // not be restored after the search. That is not a permission problem.
  if (now_w < min_w_ - 1e-6 || now_w > max_w_ + 1e-6)
    return fmt::format(
        "its current power limit {} W lies {} its allowed range [{}, {}] W, so it could not be "
        "restored after a change (NVML refuses to set a limit outside the range); expected a "
        "limit in the range: set one first, e.g. `sudo nvidia-smi -i {} -pl {}`",
        now_w, now_w < min_w_ ? "below" : "above", min_w_, max_w_, index_,
        now_w < min_w_ ? min_w_ : max_w_);
  nv::Return rc = lib_->set_power_limit_mw(dev_, l.value);
  if (rc == nv::kSuccess) return "";
  if (rc == nv::kErrorNoPermission)
    return "NVML refuses to set the power limit without root: run as root (e.g. sudo), or set "
           "the limit with `sudo nvidia-smi -pl W`";
  if (rc == nv::kErrorNotSupported) return "this GPU does not support setting its power limit";
  return fmt::format("setting the power limit failed ({})", lib_->error_string(rc));
}

std::vector<DevicePtr> open_nvml_devices(std::string* note) {
  std::string err;
  std::shared_ptr<nv::Library> lib(nv::Library::load(&err).release());
  if (!lib) {
    if (note) *note = err;
    return {};
  }
  std::vector<std::string> notes;
  auto visible = nv::resolve_visible(*lib, std::getenv("CUDA_VISIBLE_DEVICES"), &notes);
  std::vector<DevicePtr> out;
  for (const auto& g : visible) out.push_back(std::make_shared<NvmlDevice>(lib, g.nvml_index));
  if (out.empty() && note) {
    *note = "NVML found no visible GPU";
    for (const auto& n : notes) *note += "; " + n;
  }
  return out;
}

}  // namespace gt::tune
