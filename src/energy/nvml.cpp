// energy/nvml.cpp: see nvml.h.
#include "energy/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "core/parse.h"

namespace gt::energy::nvml {

struct Library::Fns {
  Return (*init)() = nullptr;
  Return (*shutdown)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*count)(unsigned*) = nullptr;
  Return (*by_index)(unsigned, Device*) = nullptr;
  Return (*by_uuid)(const char*, Device*) = nullptr;
  Return (*uuid)(Device, char*, unsigned) = nullptr;
  Return (*name)(Device, char*, unsigned) = nullptr;
  Return (*energy)(Device, unsigned long long*) = nullptr;
  Return (*power)(Device, unsigned*) = nullptr;
  Return (*limit)(Device, unsigned*) = nullptr;
  Return (*constraints)(Device, unsigned*, unsigned*) = nullptr;
  Return (*set_limit)(Device, unsigned) = nullptr;
  Return (*mig_parent)(Device, Device*) = nullptr;
  Return (*mig_max)(Device, unsigned*) = nullptr;
  Return (*mig_by_index)(Device, unsigned, Device*) = nullptr;
  Return (*mig_mode)(Device, unsigned*, unsigned*) = nullptr;
  Return (*gi_id)(Device, unsigned*) = nullptr;
  Return (*ci_id)(Device, unsigned*) = nullptr;
  Return (*attributes)(Device, DeviceAttributes*) = nullptr;
  Return (*compute_procs)(Device, unsigned*, ProcessInfo*) = nullptr;
  Return (*proc_util)(Device, ProcessUtilizationSample*, unsigned*, unsigned long long) = nullptr;
};

std::string Library::library_name() {
  if (const char* e = std::getenv("GT_NVML_LIBRARY"); e && *e) return e;
  return "libnvidia-ml.so.1";
}

std::unique_ptr<Library> Library::load(std::string* error) {
  const std::string lib = library_name();
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    *error = fmt::format("{}: cannot load ({}); no NVIDIA driver on this machine?", lib,
                         e ? e : "unknown error");
    return nullptr;
  }
  std::unique_ptr<Library> L(new Library());
  L->handle_ = h;
  L->fn_ = std::make_unique<Fns>();
  auto sym = [h](auto& f, const char* n) {
    f = reinterpret_cast<std::decay_t<decltype(f)>>(dlsym(h, n));
  };
  Fns& f = *L->fn_;
  sym(f.init, "nvmlInit_v2");
  sym(f.shutdown, "nvmlShutdown");
  sym(f.error_string, "nvmlErrorString");
  sym(f.count, "nvmlDeviceGetCount_v2");
  sym(f.by_index, "nvmlDeviceGetHandleByIndex_v2");
  sym(f.by_uuid, "nvmlDeviceGetHandleByUUID");
  sym(f.uuid, "nvmlDeviceGetUUID");
  sym(f.name, "nvmlDeviceGetName");
  sym(f.energy, "nvmlDeviceGetTotalEnergyConsumption");
  sym(f.power, "nvmlDeviceGetPowerUsage");
  sym(f.limit, "nvmlDeviceGetPowerManagementLimit");
  sym(f.constraints, "nvmlDeviceGetPowerManagementLimitConstraints");
  sym(f.set_limit, "nvmlDeviceSetPowerManagementLimit");
  sym(f.mig_parent, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  sym(f.mig_max, "nvmlDeviceGetMaxMigDeviceCount");
  sym(f.mig_by_index, "nvmlDeviceGetMigDeviceHandleByIndex");
  sym(f.mig_mode, "nvmlDeviceGetMigMode");
  sym(f.gi_id, "nvmlDeviceGetGpuInstanceId");
  sym(f.ci_id, "nvmlDeviceGetComputeInstanceId");
  sym(f.attributes, "nvmlDeviceGetAttributes_v2");
  sym(f.compute_procs, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (!f.compute_procs) sym(f.compute_procs, "nvmlDeviceGetComputeRunningProcesses_v2");
  sym(f.proc_util, "nvmlDeviceGetProcessUtilization");
  if (!f.init || !f.count || !f.by_index || !f.uuid) {
    *error = fmt::format(
        "{}: lacks nvmlInit_v2, nvmlDeviceGetCount_v2, "
        "nvmlDeviceGetHandleByIndex_v2 or nvmlDeviceGetUUID; expected NVML",
        lib);
    dlclose(h);
    L->handle_ = nullptr;
    return nullptr;
  }
  Return rc = f.init();
  if (rc != kSuccess) {
    *error = fmt::format("{}: nvmlInit_v2 failed: {} (code {})", lib, L->error_string(rc), rc);
    f.shutdown = nullptr;  // nothing to shut down
    return nullptr;
  }
  return L;
}

Library::~Library() {
  if (fn_ && fn_->shutdown) fn_->shutdown();
  if (handle_) dlclose(handle_);
}

std::string Library::error_string(Return rc) const {
  if (fn_->error_string) {
    if (const char* s = fn_->error_string(rc)) return s;
  }
  return fmt::format("NVML error {}", rc);
}

Result<unsigned> Library::device_count() const {
  Result<unsigned> r;
  if (fn_->count) r.rc = fn_->count(&r.value);
  return r;
}
Result<Device> Library::device_by_index(unsigned i) const {
  Result<Device> r;
  if (fn_->by_index) r.rc = fn_->by_index(i, &r.value);
  return r;
}
Result<Device> Library::device_by_uuid(const std::string& u) const {
  Result<Device> r;
  if (fn_->by_uuid) r.rc = fn_->by_uuid(u.c_str(), &r.value);
  return r;
}
Result<std::string> Library::uuid(Device d) const {
  Result<std::string> r;
  char buf[96] = {0};  // NVML_DEVICE_UUID_V2_BUFFER_SIZE is 96
  if (fn_->uuid) r.rc = fn_->uuid(d, buf, sizeof buf);
  if (r.ok()) r.value = buf;
  return r;
}
Result<std::string> Library::name(Device d) const {
  Result<std::string> r;
  char buf[96] = {0};  // NVML_DEVICE_NAME_V2_BUFFER_SIZE is 96
  if (fn_->name) r.rc = fn_->name(d, buf, sizeof buf);
  if (r.ok()) r.value = buf;
  return r;
}
Result<unsigned long long> Library::total_energy_mj(Device d) const {
  Result<unsigned long long> r;
  if (fn_->energy) r.rc = fn_->energy(d, &r.value);
  return r;
}
Result<unsigned> Library::power_mw(Device d) const {
  Result<unsigned> r;
  if (fn_->power) r.rc = fn_->power(d, &r.value);
  return r;
}
Result<unsigned> Library::power_limit_mw(Device d) const {
  Result<unsigned> r;
  if (fn_->limit) r.rc = fn_->limit(d, &r.value);
  return r;
}
Result<std::pair<unsigned, unsigned>> Library::power_limit_constraints_mw(Device d) const {
  Result<std::pair<unsigned, unsigned>> r;
  if (fn_->constraints) r.rc = fn_->constraints(d, &r.value.first, &r.value.second);
  return r;
}
Return Library::set_power_limit_mw(Device d, unsigned limit_mw) const {
  return fn_->set_limit ? fn_->set_limit(d, limit_mw) : kErrorFunctionNotFound;
}
Result<Device> Library::parent_of_mig(Device mig) const {
  Result<Device> r;
  if (fn_->mig_parent) r.rc = fn_->mig_parent(mig, &r.value);
  return r;
}
std::vector<Device> Library::mig_devices(Device d) const {
  std::vector<Device> out;
  unsigned n = 0;
  if (!fn_->mig_max || !fn_->mig_by_index || fn_->mig_max(d, &n) != kSuccess) return out;
  for (unsigned i = 0; i < n; ++i) {
    Device m = nullptr;
    if (fn_->mig_by_index(d, i, &m) == kSuccess) out.push_back(m);
  }
  return out;
}

Result<bool> Library::mig_enabled(Device d) const {
  Result<bool> r;
  unsigned current = 0, pending = 0;
  if (fn_->mig_mode) r.rc = fn_->mig_mode(d, &current, &pending);
  r.value = r.ok() && current == 1;  // NVML_DEVICE_MIG_ENABLE
  return r;
}
Result<unsigned> Library::gpu_instance_id(Device mig) const {
  Result<unsigned> r;
  if (fn_->gi_id) r.rc = fn_->gi_id(mig, &r.value);
  return r;
}
Result<unsigned> Library::compute_instance_id(Device mig) const {
  Result<unsigned> r;
  if (fn_->ci_id) r.rc = fn_->ci_id(mig, &r.value);
  return r;
}
Result<DeviceAttributes> Library::attributes(Device mig) const {
  Result<DeviceAttributes> r;
  if (fn_->attributes) r.rc = fn_->attributes(mig, &r.value);
  return r;
}
Result<std::vector<ProcessInfo>> Library::compute_processes(Device d) const {
  Result<std::vector<ProcessInfo>> r;
  if (!fn_->compute_procs) return r;
  // Ask for the count, then fill; the list may grow in between, so retry a few times.
  for (int attempt = 0; attempt < 4; ++attempt) {
    unsigned n = static_cast<unsigned>(r.value.size());
    r.rc = fn_->compute_procs(d, &n, r.value.empty() ? nullptr : r.value.data());
    if (r.rc == kSuccess) {
      r.value.resize(std::min<size_t>(n, r.value.size()));
      return r;
    }
    if (r.rc != kErrorInsufficientSize) return r;
    r.value.assign(n + 4, ProcessInfo{});
  }
  return r;
}

std::vector<VisibleGpu> resolve_visible(const Library& lib, const char* cvd,
                                        std::vector<std::string>* notes) {
  struct Gpu {
    unsigned index;
    std::string uuid;
    std::vector<std::string> mig_uuids;
  };
  std::vector<Gpu> gpus;
  auto cnt = lib.device_count();
  for (unsigned i = 0; cnt.ok() && i < cnt.value; ++i) {
    auto d = lib.device_by_index(i);
    if (!d.ok()) continue;
    Gpu g{i, lib.uuid(d.value).value, {}};
    for (Device m : lib.mig_devices(d.value)) {
      auto u = lib.uuid(m);
      if (u.ok()) g.mig_uuids.push_back(u.value);
    }
    gpus.push_back(std::move(g));
  }
  std::vector<VisibleGpu> out;
  auto add = [&](const Gpu& g, const std::string& req) {
    for (auto& v : out)
      if (v.nvml_index == g.index) return;  // two MIG slices of one GPU: count the GPU once
    out.push_back({g.index, g.uuid, req});
  };
  if (!cvd) {
    for (auto& g : gpus) add(g, "");
    return out;
  }
  for (const std::string& e : visible_entries(cvd)) {
    if (e.empty()) {
      if (notes) notes->push_back("CUDA_VISIBLE_DEVICES has an empty entry: no GPU from here on");
      break;
    }
    const Gpu* hit = nullptr;
    int matches = 0;
    std::string why;  // why an index entry matches nothing
    if (std::all_of(e.begin(), e.end(), ::isdigit)) {
      // An index too large for a number matches no GPU, like any other unmatched entry.
      if (auto k =
              try_parse_number<unsigned>(e, "CUDA_VISIBLE_DEVICES entry", "a GPU index", &why)) {
        why.clear();
        for (auto& g : gpus)
          if (g.index == *k) hit = &g, matches = 1;
      }
    } else {
      // "GPU-..."/"MIG-..." or a prefix; old MIG form "MIG-GPU-<uuid>/gi/ci" names its GPU.
      std::string key = e;
      if (key.rfind("MIG-GPU-", 0) == 0) key = key.substr(4, key.find('/') - 4);
      for (auto& g : gpus) {
        bool m = g.uuid.rfind(key, 0) == 0 || ("GPU-" + g.uuid).rfind(key, 0) == 0;
        for (auto& mu : g.mig_uuids) m = m || mu.rfind(key, 0) == 0;
        if (m) hit = &g, ++matches;
      }
    }
    if (matches != 1) {
      if (notes)
        notes->push_back(fmt::format(
            "CUDA_VISIBLE_DEVICES entry '{}' {}; expected an index below {} or a unique GPU-/MIG- "
            "UUID prefix: no GPU from here on",
            e,
            matches       ? "is ambiguous"
            : why.empty() ? "matches no NVML device"
                          : "matches no NVML device (" + why + ")",
            gpus.size()));
      break;
    }
    add(*hit, e);
  }
  return out;
}

Result<std::vector<ProcessUtilizationSample>> Library::process_utilization(
    Device d, unsigned long long last_seen_us) const {
  Result<std::vector<ProcessUtilizationSample>> r;
  if (!fn_->proc_util) return r;  // kErrorFunctionNotFound
  for (int attempt = 0; attempt < 4; ++attempt) {
    unsigned n = 0;
    r.rc = fn_->proc_util(d, nullptr, &n, last_seen_us);
    if (r.rc == kErrorNotFound) return {kSuccess, {}};
    if (r.rc != kSuccess && r.rc != kErrorInsufficientSize) return r;
    if (n == 0) return {kSuccess, {}};
    r.value.resize(n + 8);  // processes may start between the two calls
    n = static_cast<unsigned>(r.value.size());
    r.rc = fn_->proc_util(d, r.value.data(), &n, last_seen_us);
    if (r.rc == kErrorNotFound) return {kSuccess, {}};
    if (r.rc == kSuccess) {
      r.value.resize(std::min<std::size_t>(n, r.value.size()));
      return r;
    }
    if (r.rc != kErrorInsufficientSize) return r;
  }
  return r;
}

}  // namespace gt::energy::nvml

namespace gt::energy {

std::vector<std::string> visible_entries(const std::string& v) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= v.size()) {
    const size_t comma = v.find(',', pos);
    std::string e = v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? v.size() + 1 : comma + 1;
    e.erase(0, e.find_first_not_of(" \t"));
    e.erase(e.find_last_not_of(" \t") + 1);
    out.push_back(e);
  }
  return out;
}

}  // namespace gt::energy
