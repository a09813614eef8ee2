// energy/replay.h: a sensor that plays back a recorded trace, for tests and offline analysis.
// CSV with a header naming `time_s` and either `power_w` (a gauge; linear between rows) or
// `energy_j` (a cumulative counter). Trace time 0 is mapped to the meter time of the first read.
#pragma once
#include <string>
#include <vector>

#include "energy/sensor.h"

namespace gt::energy {

class ReplaySensor : public Sensor {
 public:
  /// Loads `path`; throws Error naming the file, line and column on bad input.
  /// `domain` is "cpu", "gpu", "ram" or "psys".
  ReplaySensor(const std::string& path, const std::string& name = "replay",
               const std::string& domain = "gpu");
  const SensorInfo& info() const override { return info_; }
  /// Value at trace time (now_s - first now_s) + first row's time; held past the last row.
  Reading read(double now_s) override;
  /// Exact integral (J) of the trace between trace times t0_s and t1_s (trapezoid rule between
  /// rows for power, counter difference, interpolated, for energy).
  double integral_j(double t0_s, double t1_s) const;
  double start_s() const { return t_.front(); }  ///< first row's time (s)
  double end_s() const { return t_.back(); }     ///< last row's time (s)

 private:
  double value_at(double t) const;
  double cumulative_at(double t) const;  // J from the start to t
  SensorInfo info_;
  bool energy_ = false;
  std::vector<double> t_, v_, cum_j_;
  bool started_ = false;
  double offset_s_ = 0;
};

}  // namespace gt::energy
