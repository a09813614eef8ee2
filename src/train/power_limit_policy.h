// train/power_limit_policy.h: the train.power_limit policy of a run. The limit is set once per node
// (by its local rank 0) through the tune module's devices (tune/power_limit.h) of the kind
// train.power_limit_device names (auto: GPUs if any, else CPUs; gpu: NVML; cpu: RAPL) and restored
// when the run ends, however it ends. A limit that cannot be set stops the start when
// train.power_limit_required; otherwise the run goes on uncapped and says why, in its log and in
// summary.json's "power_limit" record. A build without the tune module sets no limit (and says
// so the same way).
#pragma once
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "train/config.h"

namespace gt {

class RunPowerLimit {
 public:
  /// Applies cfg.power_limit_w (W, > 0) to the devices cfg.power_limit_device names ("auto":
  /// NVML GPUs if any, else RAPL CPU packages; "gpu": NVML; "cpu": RAPL) when node_leader; does
  /// nothing for 0 W or on other ranks. log: the "  power    limit ..." line (nullptr: silent).
  /// Throws gt::Error naming the limit and the reason when it cannot be applied and
  /// cfg.power_limit_required.
  RunPowerLimit(const TrainConfig& cfg, bool node_leader, std::FILE* log);
  ~RunPowerLimit();  ///< restores the limits in force before
  RunPowerLimit(const RunPowerLimit&) = delete;
  RunPowerLimit& operator=(const RunPowerLimit&) = delete;

  /// summary.json's "power_limit": {requested_w, applied, reason (when not applied)}; null when
  /// this process set no limit.
  const nlohmann::json& record() const { return record_; }

 private:
  nlohmann::json record_;
  std::shared_ptr<void> guard_;  // tune::PowerLimitGuard: restores when destroyed or at exit
};

}  // namespace gt
