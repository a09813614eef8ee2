// tune/simulated.h: a simulated accelerator whose power and throughput depend on its power
// limit, for tests and `greentrain tune --simulate`. Model (per device, limit L in W):
//   power_w(L) = min(L, draw_w)                                   (it draws draw_w uncapped)
//   speed(L)   = min(1, (L - idle_w) / (draw_w - idle_w))^exponent (throughput vs uncapped)
//   step time  = step_time_s / speed(L)
// so the energy per step, power_w * time, is lowest at L = idle_w / (1 - exponent) (150 W with
// the defaults: a known optimum for the search to find).
#pragma once
#include <string>
#include <vector>

#include "tune/power_limit.h"
#include "tune/tuner.h"

namespace gt::tune {

struct SimulatedModel {
  double min_w = 100, max_w = 400;  ///< allowed limits, W
  double initial_w = 400;           ///< limit at start, W
  double draw_w = 350;              ///< power drawn uncapped, W
  double idle_w = 90;               ///< power that does no work, W (below min_w)
  double exponent = 0.4;            ///< throughput exponent (dimensionless)
  double step_time_s = 0.25;        ///< time of one step uncapped, s
  /// Power drawn at limit_w, W.
  double power_w(double limit_w) const;
  /// Time of one step at limit_w, s.
  double step_s(double limit_w) const;
};

/// A device following SimulatedModel. Records every set call; can be told to refuse
/// permission or to fail a set (for tests).
class SimulatedDevice : public PowerLimitDevice {
 public:
  explicit SimulatedDevice(SimulatedModel m, std::string name = "sim:0");
  std::string name() const override { return name_; }
  double limit_w() const override { return limit_w_; }
  double min_limit_w() const override { return model_.min_w; }
  double max_limit_w() const override { return model_.max_w; }
  void set_limit_w(double limit_w) override;
  std::string permission_problem() const override { return permission_problem_; }
  bool restore_limit_w_from_signal(double limit_w) noexcept override;

  const SimulatedModel& model() const { return model_; }
  std::vector<double> set_log_w;    ///< every successful set, W
  std::string permission_problem_;  ///< non-empty: refuse (tests)
  double fail_set_at_w = -1;        ///< a set to this value throws (tests)

 private:
  SimulatedModel model_;
  std::string name_;
  double limit_w_;
};

/// A ProfileFn over simulated devices run in lock-step (data parallel): a step takes the
/// slowest device's time; energy is each device's power times that time, summed (J, s).
ProfileFn simulated_profile(std::vector<std::shared_ptr<SimulatedDevice>> devices);

}  // namespace gt::tune
