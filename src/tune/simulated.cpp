// tune/simulated.cpp: the simulated power-limited accelerator.
#include "tune/simulated.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace gt::tune {

double SimulatedModel::power_w(double limit_w) const { return std::min(limit_w, draw_w); }

double SimulatedModel::step_s(double limit_w) const {
  const double r = std::min(1.0, (limit_w - idle_w) / (draw_w - idle_w));
  check(r > 0, fmt::format("simulated device: limit {} W is at or below its idle power {} W",
                           limit_w, idle_w));
  return step_time_s / std::pow(r, exponent);
}

SimulatedDevice::SimulatedDevice(SimulatedModel m, std::string name)
    : model_(m), name_(std::move(name)), limit_w_(m.initial_w) {}

void SimulatedDevice::set_limit_w(double limit_w) {
  if (fail_set_at_w >= 0 && std::fabs(limit_w - fail_set_at_w) < 1e-9)
    throw Error(
        fmt::format("{}: cannot set the power limit to {} W (simulated failure)", name_, limit_w));
  if (limit_w < model_.min_w - 1e-9 || limit_w > model_.max_w + 1e-9)
    throw Error(fmt::format("{}: power limit {} W is outside [{}, {}] W", name_, limit_w,
                            model_.min_w, model_.max_w));
  limit_w_ = limit_w;
  set_log_w.push_back(limit_w);
}

bool SimulatedDevice::restore_limit_w_from_signal(double limit_w) noexcept {
  limit_w_ = limit_w;  // no allocation: the log is not touched in a signal handler
  return true;
}

ProfileFn simulated_profile(std::vector<std::shared_ptr<SimulatedDevice>> devices) {
  return [devices](int steps) {
    double step_s = 0;
    for (const auto& d : devices) step_s = std::max(step_s, d->model().step_s(d->limit_w()));
    StepMeasurement m;
    m.time_s = step_s * steps;
    for (const auto& d : devices) m.energy_j += d->model().power_w(d->limit_w()) * m.time_s;
    return m;
  };
}

}  // namespace gt::tune
