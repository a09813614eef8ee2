// tune/daemon_device.cpp: see daemon_device.h.
#include "tune/daemon_device.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "energy/nvml.h"

namespace gt::tune {

using nlohmann::json;
namespace ed = energy::daemon;

DaemonDevice::DaemonDevice(std::shared_ptr<ed::DaemonClient> client, const json& device,
                           const json& grant)
    : client_(std::move(client)) {
  id_ = device.value("device", std::string());
  const std::string full = device.value("name", id_);
  name_ = full + " through greentrain serve";
  min_w_ = device.value("min_w", 0.0);
  max_w_ = device.value("max_w", 0.0);
  if (grant.is_object()) {
    min_w_ = grant.value("min_w", min_w_);
    max_w_ = grant.value("max_w", max_w_);
  } else {
    const json& you = client_->hello()["you"];
    problem_ = fmt::format(
        "the greentrain serve daemon's policy does not let user {} set the power limit of {} "
        "(the node's administrator can grant it with an [[allow]] rule: users = [\"{}\"], "
        "power_limit = [\"{}\"])",
        you.value("user", std::string("?")), id_, you.value("user", std::string("?")), id_);
  }
}

double DaemonDevice::limit_w() const {
  json r;
  try {
    r = client_->call({{"op", "power_limits"}});
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: cannot read the power limit: {}", name_, e.what()));
  }
  for (const auto& d : r["devices"])
    if (d.value("device", std::string()) == id_ && d["limit_w"].is_number())
      return d["limit_w"].get<double>();
  throw Error(fmt::format("{}: the daemon no longer reports its power limit", name_));
}

void DaemonDevice::set_limit_w(double limit_w) {
  try {
    if (previous_w_ && std::fabs(limit_w - *previous_w_) < 1e-6) {
      // Back to the limit in force before: end the lease, so the device is free for others.
      client_->call({{"op", "release_power_limit"}, {"device", id_}});
      previous_w_.reset();
      return;
    }
    const json r =
        client_->call({{"op", "set_power_limit"}, {"device", id_}, {"limit_w", limit_w}});
    if (!previous_w_) previous_w_ = r.value("previous_w", limit_w);
  } catch (const std::exception& e) {
    throw Error(
        fmt::format("{}: cannot set the power limit to {} W: {}", name_, limit_w, e.what()));
  }
}

bool DaemonDevice::restore_limit_w_from_signal(double) noexcept {
  client_->abort_connection();
  return true;
}

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// The daemon's GPUs this process may use: CUDA_VISIBLE_DEVICES resolved to UUIDs through NVML
// when this process can load it, else its integer entries taken as NVML indices.
std::vector<json> visible_gpus(const std::vector<json>& gpus) {
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!cvd) return gpus;
  std::vector<json> out;
  std::string err;
  if (auto lib = energy::nvml::Library::load(&err)) {
    std::vector<std::string> notes;
    for (const auto& g : energy::nvml::resolve_visible(*lib, cvd, &notes))
      for (const auto& d : gpus)
        if (d.value("uuid", std::string()) == g.uuid) out.push_back(d);
    return out;
  }
  std::string list = cvd;
  for (std::size_t a = 0; a <= list.size();) {
    std::size_t b = list.find(',', a);
    if (b == std::string::npos) b = list.size();
    const std::string e = list.substr(a, b - a);
    for (const auto& d : gpus)
      if (d.value("device", std::string()) == "nvml:" + e) out.push_back(d);
    a = b + 1;
  }
  return out;
}

}  // namespace

std::vector<DevicePtr> open_daemon_devices(const std::string& kind, std::string* note) {
  std::string why;
  std::shared_ptr<ed::DaemonClient> client(ed::DaemonClient::connect("", &why).release());
  if (!client) {
    if (note) *note = why;
    return {};
  }
  json devices;
  try {
    devices = client->call({{"op", "power_limits"}})["devices"];
  } catch (const std::exception& e) {
    if (note) *note = fmt::format("{}: {}", client->describe(), e.what());
    return {};
  }
  std::vector<json> gpus, packages;
  for (const auto& d : devices) {
    const std::string id = d.value("device", std::string());
    if (starts_with(id, "nvml:")) gpus.push_back(d);
    if (starts_with(id, "rapl:")) packages.push_back(d);
  }
  gpus = visible_gpus(gpus);
  const std::vector<json>& chosen = kind == "nvml"   ? gpus
                                    : kind == "rapl" ? packages
                                                     : (!gpus.empty() ? gpus : packages);
  const json& may = client->hello()["may"]["power_limit"];
  std::vector<DevicePtr> out;
  for (const auto& d : chosen) {
    json grant;
    for (const auto& g : may)
      if (g.value("device", std::string()) == d.value("device", std::string())) grant = g;
    out.push_back(std::make_shared<DaemonDevice>(client, d, grant));
  }
  if (out.empty() && note)
    *note = fmt::format("{} has no {} power-limit device", client->describe(),
                        kind == "auto" ? "" : kind);
  return out;
}

}  // namespace gt::tune
