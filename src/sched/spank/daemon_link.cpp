// sched/spank/daemon_link.cpp: see daemon_link.h.
#include "daemon_link.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "energy/daemon_client.h"

namespace ed = gt::energy::daemon;
using nlohmann::json;

struct gt_daemon {
  std::unique_ptr<ed::DaemonClient> client;
  ed::Sample sample;
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

int gt_daemon_set_gpu_limit(gt_daemon* d, unsigned nvml_index, double watts, double* set_w,
                            double* previous_w, char* why, size_t n) {
  const std::string id = fmt::format("nvml:{}", nvml_index);
  try {
    double lo = 0, hi = 1e9;
    bool found = false;
    for (const auto& g : d->client->hello()["may"]["power_limit"])
      if (g.value("device", std::string()) == id) {
        lo = g.value("min_w", lo);
        hi = g.value("max_w", hi);
        found = true;
      }
    if (!found)
      return fail(why, n,
                  fmt::format("the daemon's policy does not let this user ({}) set {}",
                              d->client->hello()["you"].value("user", std::string("?")), id));
    const double w = std::clamp(watts, lo, hi);
    json r = d->client->call({{"op", "set_power_limit"}, {"device", id}, {"limit_w", w}});
    *set_w = w;
    *previous_w = r.value("previous_w", 0.0);
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
