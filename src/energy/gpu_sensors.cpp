// energy/gpu_sensors.cpp: see gpu_sensors.h.
#include "energy/gpu_sensors.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>

#include "energy/nvml.h"

namespace gt::energy {

// ---------------------------------------------------------------- NVML
namespace {

class NvmlSensor : public Sensor {
 public:
  NvmlSensor(std::shared_ptr<nvml::Library> lib, nvml::Device dev, SensorInfo info)
      : lib_(std::move(lib)), dev_(dev), info_(std::move(info)) {}
  const SensorInfo& info() const override { return info_; }
  Reading read(double) override {
    Reading r;
    if (info_.kind == SensorKind::kEnergyCounter) {
      auto e = lib_->total_energy_mj(dev_);
      if (!e.ok()) {
        r.error = "nvmlDeviceGetTotalEnergyConsumption: " + lib_->error_string(e.rc);
        return r;
      }
      r.ok = true;
      r.energy_j = static_cast<double>(e.value) * 1e-3;  // mJ -> J
    } else {
      auto p = lib_->power_mw(dev_);
      if (!p.ok()) {
        r.error = "nvmlDeviceGetPowerUsage: " + lib_->error_string(p.rc);
        return r;
      }
      r.ok = true;
      r.power_w = static_cast<double>(p.value) * 1e-3;  // mW -> W
    }
    return r;
  }

 private:
  std::shared_ptr<nvml::Library> lib_;
  nvml::Device dev_;
  SensorInfo info_;
};

}  // namespace

SensorList detect_nvml() {
  SensorList out;
  SensorInfo base;
  base.name = "nvml";
  base.domain = "gpu";
  base.kind = SensorKind::kEnergyCounter;
  base.unit = "mJ";
  std::string err;
  std::shared_ptr<nvml::Library> lib(nvml::Library::load(&err).release());
  if (!lib) {
    base.reason = err;
    out.push_back(std::make_unique<UnavailableSensor>(base));
    return out;
  }
  std::vector<std::string> notes;
  auto gpus = nvml::resolve_visible(*lib, std::getenv("CUDA_VISIBLE_DEVICES"), &notes);
  std::string note_text;
  for (auto& n : notes) {
    if (!note_text.empty()) note_text += "; ";
    note_text += n;
  }
  if (gpus.empty()) {
    base.reason =
        note_text.empty() ? "no NVIDIA GPU visible" : "no NVIDIA GPU visible: " + note_text;
    out.push_back(std::make_unique<UnavailableSensor>(base));
    return out;
  }
  for (std::size_t pos = 0; pos < gpus.size(); ++pos) {
    const auto& g = gpus[pos];
    SensorInfo i = base;
    i.name = fmt::format("nvml:{}", g.nvml_index);
    i.index = static_cast<int>(pos);  // CUDA's number (nvml_index is the driver's)
    auto d = lib->device_by_index(g.nvml_index);
    i.device = fmt::format("{} {}", d.ok() ? lib->name(d.value).value : "?", g.uuid);
    if (!g.requested.empty()) i.device += " (CUDA_VISIBLE_DEVICES " + g.requested + ")";
    i.device_key = "nvml-" + g.uuid;
    if (!d.ok()) {
      i.reason = "nvmlDeviceGetHandleByIndex_v2: " + lib->error_string(d.rc);
      out.push_back(std::make_unique<UnavailableSensor>(i));
      continue;
    }
    auto e = lib->total_energy_mj(d.value);
    if (e.ok()) {
      i.available = true;
      i.refresh_period_s = 0.1;  // not published by NVIDIA; about 100 ms observed (Zeus docs)
      i.method = "NVML total-energy counter (mJ) differences";
    } else {
      auto p = lib->power_mw(d.value);
      i.kind = SensorKind::kPowerGauge;
      i.unit = "mW";
      if (p.ok()) {
        i.available = true;
        i.refresh_period_s = 1.0;  // nvmlDeviceGetPowerUsage is a 1 s average on Ampere+
        i.method = "NVML power (mW) sampled and integrated (trapezoid)";
        i.reason = "no energy counter (" + lib->error_string(e.rc) + "): power is integrated";
      } else {
        i.reason = fmt::format("neither energy ({}) nor power ({}) readable",
                               lib->error_string(e.rc), lib->error_string(p.rc));
      }
    }
    if (i.available)
      out.push_back(std::make_unique<NvmlSensor>(lib, d.value, i));
    else
      out.push_back(std::make_unique<UnavailableSensor>(i));
  }
  return out;
}

// ---------------------------------------------------------------- ROCm SMI
namespace {

// The few ROCm SMI functions used (rocm_smi/rocm_smi.h, ROCm SMI 5.x ABI).
struct RocmFns {
  void* handle = nullptr;
  int (*init)(uint64_t) = nullptr;
  int (*shut_down)() = nullptr;
  int (*num_devices)(uint32_t*) = nullptr;
  int (*energy)(uint32_t, uint64_t*, float*, uint64_t*) = nullptr;  // ticks, uJ/tick, ns
  int (*power_ave)(uint32_t, uint32_t, uint64_t*) = nullptr;        // uW
  int (*status_string)(int, const char**) = nullptr;
  int (*unique_id)(uint32_t, uint64_t*) = nullptr;  // optional
  // rsmi_dev_unique_id_get of GPU i; nullopt where the library has none or it fails
  std::optional<uint64_t> unique_id_of(uint32_t i) const {
    uint64_t id = 0;
    if (unique_id && unique_id(i, &id) == 0) return id;
    return std::nullopt;
  }
  std::string err(int rc) const {
    const char* s = nullptr;
    if (status_string && status_string(rc, &s) == 0 && s) return s;
    return fmt::format("rsmi status {}", rc);
  }
  ~RocmFns() {
    if (shut_down) shut_down();
    if (handle) dlclose(handle);
  }
};

class RocmSensor : public Sensor {
 public:
  RocmSensor(std::shared_ptr<RocmFns> f, uint32_t idx, SensorInfo info)
      : f_(std::move(f)), idx_(idx), info_(std::move(info)) {}
  const SensorInfo& info() const override { return info_; }
  Reading read(double) override {
    Reading r;
    if (info_.kind == SensorKind::kEnergyCounter) {
      uint64_t ticks = 0, ts = 0;
      float res = 0;
      int rc = f_->energy(idx_, &ticks, &res, &ts);
      if (rc != 0) {
        r.error = "rsmi_dev_energy_count_get: " + f_->err(rc);
        return r;
      }
      r.ok = true;
      r.energy_j = static_cast<double>(ticks) * res * 1e-6;  // ticks x uJ/tick -> J
    } else {
      uint64_t uw = 0;
      int rc = f_->power_ave(idx_, 0, &uw);
      if (rc != 0) {
        r.error = "rsmi_dev_power_ave_get: " + f_->err(rc);
        return r;
      }
      r.ok = true;
      r.power_w = static_cast<double>(uw) * 1e-6;  // uW -> W
    }
    return r;
  }

 private:
  std::shared_ptr<RocmFns> f_;
  uint32_t idx_;
  SensorInfo info_;
};

// ROCm SMI loaded ($GT_ROCM_SMI_LIBRARY, else librocm_smi64.so) and initialized, or nullptr
// with *why naming the library and what failed.
std::shared_ptr<RocmFns> load_rocm_smi(std::string* why) {
  const char* env = std::getenv("GT_ROCM_SMI_LIBRARY");
  const std::string lib = env && *env ? env : "librocm_smi64.so";
  auto f = std::make_shared<RocmFns>();
  f->handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!f->handle) {
    const char* e = dlerror();
    *why = fmt::format("{}: cannot load ({}); no ROCm on this machine?", lib, e ? e : "");
    return nullptr;
  }
  auto sym = [&](auto& fp, const char* n) {
    fp = reinterpret_cast<std::decay_t<decltype(fp)>>(dlsym(f->handle, n));
  };
  sym(f->init, "rsmi_init");
  sym(f->num_devices, "rsmi_num_monitor_devices");
  sym(f->energy, "rsmi_dev_energy_count_get");
  sym(f->power_ave, "rsmi_dev_power_ave_get");
  sym(f->status_string, "rsmi_status_string");
  if (!f->init || !f->num_devices || (!f->energy && !f->power_ave)) {
    *why = lib + ": lacks rsmi_init, rsmi_num_monitor_devices or energy/power functions";
    return nullptr;
  }
  if (int rc = f->init(0); rc != 0) {
    *why = lib + ": rsmi_init failed: " + f->err(rc);
    return nullptr;
  }
  sym(f->shut_down, "rsmi_shut_down");
  sym(f->unique_id, "rsmi_dev_unique_id_get");
  return f;
}

}  // namespace

std::vector<RocmVisible> rocm_visible(uint32_t n,
                                      const std::function<std::optional<uint64_t>(uint32_t)>& uid,
                                      std::vector<std::string>* notes) {
  std::vector<RocmVisible> vis;
  for (uint32_t i = 0; i < n; ++i) vis.push_back({i, ""});
  // narrows `vis` to the entries of variable `var` (indices into vis; with uuids, also
  // GPU-<unique id in hex>), in their order; an entry that matches nothing ends the list there
  auto narrow = [&](const char* var, bool uuids) {
    const char* v = std::getenv(var);
    if (!v) return;
    std::vector<RocmVisible> out;
    for (const std::string& e : visible_entries(v)) {
      std::optional<size_t> hit;
      if (!e.empty() && std::all_of(e.begin(), e.end(), ::isdigit)) {
        if (e.size() < 10 && std::stoul(e) < vis.size()) hit = std::stoul(e);
      } else if (uuids && e.rfind("GPU-", 0) == 0 && uid) {
        uint64_t want = 0;
        const char* hex = e.data() + 4;
        const auto [end, ec] = std::from_chars(hex, e.data() + e.size(), want, 16);
        if (ec == std::errc() && end == e.data() + e.size() && end != hex)
          for (size_t k = 0; k < vis.size(); ++k)
            if (uid(vis[k].rsmi_index) == want) hit = k;
      }
      if (!hit) {
        if (notes)
          notes->push_back(fmt::format(
              "{} entry '{}' matches no visible AMD GPU (expected an index below {}{}): no GPU "
              "from here on",
              var, e, vis.size(), uuids ? " or GPU-<unique id>" : ""));
        break;
      }
      RocmVisible g = vis[*hit];
      g.requested += (g.requested.empty() ? "" : ", ") + fmt::format("{} {}", var, e);
      out.push_back(g);
    }
    vis = std::move(out);
  };
  // ROCr first, then HIP's own list: ROCm documentation, "GPU isolation techniques". (HIP
  // also reads CUDA_VISIBLE_DEVICES where HIP_VISIBLE_DEVICES is unset; it is left out here:
  // set beside ROCR_VISIBLE_DEVICES with the same node-wide numbers, as for NVIDIA GPUs, it
  // would index into the narrowed list and leave no GPU)
  narrow("ROCR_VISIBLE_DEVICES", true);
  narrow("HIP_VISIBLE_DEVICES", false);
  return vis;
}

std::vector<RocmVisible> rocm_visible_here(uint32_t n, std::vector<std::string>* notes) {
  std::shared_ptr<RocmFns> f;
  bool tried = false;
  std::string why;
  auto uid = [&](uint32_t i) -> std::optional<uint64_t> {
    if (!tried) {
      tried = true;
      f = load_rocm_smi(&why);
    }
    return f ? f->unique_id_of(i) : std::nullopt;
  };
  auto vis = rocm_visible(n, uid, notes);
  if (tried && !f && notes)
    notes->push_back("GPU-<unique id> entries cannot be matched here: " + why);
  return vis;
}

std::optional<uint32_t> rocm_smi_gpu_count(std::string* why) {
  std::string err;
  auto f = load_rocm_smi(&err);
  if (!f) {
    if (why) *why = err;
    return std::nullopt;
  }
  uint32_t n = 0;
  if (int rc = f->num_devices(&n); rc != 0) {
    if (why) *why = "rsmi_num_monitor_devices: " + f->err(rc);
    return std::nullopt;
  }
  return n;
}

SensorList detect_rocm_smi(double check_s) {
  SensorList out;
  SensorInfo base;
  base.name = "rocm-smi";
  base.domain = "gpu";
  base.kind = SensorKind::kEnergyCounter;
  base.unit = "uJ";
  std::string why;
  auto f = load_rocm_smi(&why);
  if (!f) {
    base.reason = why;
    out.push_back(std::make_unique<UnavailableSensor>(base));
    return out;
  }
  uint32_t n = 0;
  if (int rc = f->num_devices(&n); rc != 0 || n == 0) {
    base.reason = rc ? "rsmi_num_monitor_devices: " + f->err(rc) : "no AMD GPU found";
    out.push_back(std::make_unique<UnavailableSensor>(base));
    return out;
  }
  // the GPUs this process's HIP programs see (ROCm SMI lists every GPU of the node, other
  // jobs' too), in their order: a sensor's index is its position among them, as with NVML
  std::vector<std::string> notes;
  const auto visible = rocm_visible(
      n, [&f](uint32_t i) { return f->unique_id_of(i); }, &notes);
  if (visible.empty()) {
    base.reason = "no AMD GPU visible";
    for (const auto& note : notes) base.reason += ": " + note;
    out.push_back(std::make_unique<UnavailableSensor>(base));
    return out;
  }
  for (size_t pos = 0; pos < visible.size(); ++pos) {
    const uint32_t i = visible[pos].rsmi_index;
    SensorInfo info = base;
    info.name = fmt::format("rocm:{}", i);
    info.index = static_cast<int>(pos);  // HIP's number (i is ROCm SMI's)
    info.device = fmt::format("AMD GPU {}", i);
    if (!visible[pos].requested.empty()) info.device += " (" + visible[pos].requested + ")";
    info.device_key = fmt::format("rocm-{}", i);
    info.available = true;
    // Check the counter against power x time: counter J over check_s vs average power.
    bool counter_ok = false;
    std::string why;
    uint64_t t0 = 0, t1 = 0, ts = 0, p0 = 0, p1 = 0;
    float res = 0;
    if (f->energy && f->energy(i, &t0, &res, &ts) == 0 && res > 0) {
      f->power_ave && f->power_ave(i, 0, &p0);
      auto a = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(std::chrono::duration<double>(check_s));
      f->energy(i, &t1, &res, &ts);
      f->power_ave && f->power_ave(i, 0, &p1);
      double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
      double counter_w = (static_cast<double>(t1) - static_cast<double>(t0)) * res * 1e-6 / dt;
      double power_w = 0.5 * static_cast<double>(p0 + p1) * 1e-6;
      counter_ok = t1 >= t0 && (!f->power_ave || power_w < 5 ||
                                (counter_w > 0.5 * power_w && counter_w < 2 * power_w));
      if (!counter_ok)
        why = fmt::format("energy counter implausible ({:.1f} W vs power {:.1f} W): ", counter_w,
                          power_w);
    } else {
      why = "no energy counter: ";
    }
    if (counter_ok) {
      info.refresh_period_s = 0.001;
      info.method = "ROCm SMI energy counter (ticks x resolution uJ) differences";
    } else if (f->power_ave) {
      info.kind = SensorKind::kPowerGauge;
      info.unit = "uW";
      info.refresh_period_s = 0.001;
      info.method = "ROCm SMI average power (uW) sampled and integrated (trapezoid)";
      info.reason = why + "power is integrated";
    } else {
      info.available = false;
      info.reason = why + "and no power function";
    }
    if (info.available)
      out.push_back(std::make_unique<RocmSensor>(f, i, info));
    else
      out.push_back(std::make_unique<UnavailableSensor>(info));
  }
  return out;
}

}  // namespace gt::energy
