// sched/spank/daemon_link.cpp: see daemon_link.h.
#include "daemon_link.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "energy/daemon_client.h"

namespace ed = gt::energy::daemon;
using nlohmann::json;

struct gt_daemon {
  std::unique_ptr<ed::DaemonClient> client;
  ed::Sample sample;
  json on_behalf_of;  // null, or {uid, gid}
};

namespace {

int fail(char* why, size_t n, const std::string& what) {
  if (why && n) std::snprintf(why, n, "%s", what.c_str());
  return -1;
}

}  // namespace

extern "C" {

gt_daemon* gt_daemon_open(const char* socket, char* why, size_t n) {
  std::string err;
  auto c = ed::DaemonClient::connect(socket ? socket : "", &err);
  if (!c) {
    fail(why, n, err);
    return nullptr;
  }
  auto* d = new gt_daemon;
  d->client = std::move(c);
  return d;
}

int gt_daemon_refresh(gt_daemon* d, char* why, size_t n) {
  try {
    d->sample = ed::sample_from_json(d->client->call({{"op", "read"}, {"fresh", true}}));
    return 0;
  } catch (const std::exception& e) {
    return fail(why, n, e.what());
  }
}

int gt_daemon_gpu_energy_j(gt_daemon* d, unsigned nvml_index, double* joules) {
  const std::string name = fmt::format("nvml:{}", nvml_index);
  for (const auto& r : d->sample.readings)
    if (r.sensor == name) {
      *joules = r.energy_j;
      return 0;
    }
  return -1;
}

int gt_daemon_attributed_j(gt_daemon* d, double* joules, char* why, size_t n) {
  try {
    *joules = d->client->call({{"op", "attribution"}, {"scope", "self"}}).value("total_j", 0.0);
    return 0;
  } catch (const std::exception& e) {
    return fail(why, n, e.what());
  }
}

void gt_daemon_on_behalf_of(gt_daemon* d, unsigned uid, unsigned gid) {
  d->on_behalf_of = {{"uid", uid}, {"gid", gid}};
}

int gt_daemon_set_gpu_limit(gt_daemon* d, unsigned nvml_index, double watts, double* set_w,
                            double* previous_w, double* applied_w, char* why, size_t n) {
  const std::string id = fmt::format("nvml:{}", nvml_index);
  try {
    // the daemon clamps to the user's range: the job user's rules when on behalf of them
    json req = {{"op", "set_power_limit"}, {"device", id}, {"limit_w", watts}, {"clamp", true}};
    if (!d->on_behalf_of.is_null()) req["on_behalf_of"] = d->on_behalf_of;
    json r = d->client->call(req);
    *set_w = r.value("limit_w", watts);
    *previous_w = r.value("previous_w", 0.0);
    *applied_w =
        r.contains("applied_w") && r["applied_w"].is_number() ? r["applied_w"].get<double>() : -1;
    return 0;
  } catch (const std::exception& e) {
    return fail(why, n, e.what());
  }
}

int gt_daemon_release_gpu_limit(gt_daemon* d, unsigned nvml_index, char* why, size_t n) {
  try {
    d->client->call(
        {{"op", "release_power_limit"}, {"device", fmt::format("nvml:{}", nvml_index)}});
    return 0;
  } catch (const std::exception& e) {
    return fail(why, n, e.what());
  }
}

void gt_daemon_close(gt_daemon* d) { delete d; }

}  // extern "C"
