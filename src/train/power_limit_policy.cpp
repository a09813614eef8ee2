// train/power_limit_policy.cpp: train.power_limit, applied once per node and restored at the end.
#include "train/power_limit_policy.h"

#include <fmt/format.h>

#include <string>

#include "core/error.h"
#include "run/schema.h"
#ifdef GT_TRAIN_HAVE_TUNE
#include "tune/power_limit.h"
#endif

namespace gt {

RunPowerLimit::RunPowerLimit(const TrainConfig& cfg, bool node_leader, std::FILE* log) {
  if (!(cfg.power_limit_w > 0) || !node_leader) return;
  std::string why_not, devices;  // devices: the ones capped, by name
#ifdef GT_TRAIN_HAVE_TUNE
  try {
    // the devices train.power_limit_device names (validated: auto, gpu or cpu)
    const std::string kind = cfg.power_limit_device == "gpu"   ? "nvml"
                             : cfg.power_limit_device == "cpu" ? "rapl"
                                                               : "auto";
    auto guard = tune::apply_power_limit(cfg.power_limit_w, kind);
    for (const auto& d : guard->devices()) devices += (devices.empty() ? "" : ", ") + d->name();
    guard_ = std::move(guard);
  } catch (const Error& e) {
    why_not = e.what();
  }
#else
  why_not = "this build leaves out the tune module, which sets power limits";
#endif
  record_ = {{run::key::requested_w, cfg.power_limit_w}, {run::key::applied, why_not.empty()}};
  if (why_not.empty()) {
    if (log)
      std::fprintf(log, "  power    limit %.0f W applied to %s (restored at exit)\n",
                   cfg.power_limit_w, devices.c_str());
    return;
  }
  if (cfg.power_limit_required)
    throw Error(fmt::format("train.power_limit = {} W could not be applied: {}", cfg.power_limit_w,
                            why_not));
  record_[run::key::reason] = why_not;
  if (log)
    std::fprintf(log,
                 "  power    limit %.0f W NOT applied, the run goes on uncapped: %s "
                 "(train.power_limit_required = true makes this an error)\n",
                 cfg.power_limit_w, why_not.c_str());
}

RunPowerLimit::~RunPowerLimit() = default;

}  // namespace gt
