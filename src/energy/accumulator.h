// energy/accumulator.h: turns a sensor's successive readings into per-interval joules.
// Counters: difference of successive values, corrected once for a wrap at the sensor's range
// (RAPL max_energy_range_uj) when the corrected power is plausible; a counter that goes
// backwards for another reason (driver reload, unknown range) or a failed reading gives an
// *untrusted* interval whose energy is filled with the last trusted power x time (never 0,
// never negative). A counter that dips and comes back: when the first reading after a
// backwards step that is not itself a step back lies at or above the value before the dip, that
// value stays the base (the dip was a glitch) and the fill already given is subtracted, so the
// total is exactly the counter's rise; otherwise the dipped value is the new base (a reset).
// The rule holds for every counter sensor (NVML mJ, ROCm SMI ticks, RAPL uJ): they all come
// here. Gauges and estimates: trapezoid rule on power; an estimate whose reading carries a
// cumulative energy_j (the CPU estimate, a daemon's integrated gauge) is differenced like a
// counter, and a reading that says part of its energy is a fill (Reading::untrusted) gives an
// untrusted interval with that reason.
#pragma once
#include <optional>
#include <string>

#include "energy/sensor.h"

namespace gt::energy {

/// The energy of one sensor between two successive readings.
struct Interval {
  double t0_s = 0, t1_s = 0;      ///< meter clock (s)
  double energy_j = 0;            ///< >= 0 always (J)
  std::optional<double> power_w;  ///< energy_j / (t1_s - t0_s); nullopt when the interval is 0 s
  bool trusted = true;            ///< false: energy_j is a fill (last power x time) or unknown
  bool unknown = false;           ///< true: no trusted power existed to fill with; energy_j = 0
  bool wrapped = false;           ///< the counter wrapped inside this interval (corrected)
  /// The reading at t1_s said that what is measured is gone (Reading::gone): energy_j = 0 and
  /// unknown, never filled (a process that has ended draws nothing from its last power on).
  bool gone = false;
  std::string note;  ///< why untrusted
};

/// Per-sensor state of the meter. Not thread-safe; the meter serializes calls.
class Accumulator {
 public:
  /// max_plausible_power_w: a wrap-corrected delta implying more than this is treated as a
  /// counter reset rather than a wrap (default 10 kW per domain, above any single device).
  Accumulator(SensorKind kind, std::optional<double> wrap_j, double max_plausible_power_w = 1e4);
  /// Feeds the reading taken at t_s; returns the interval since the previous call (none for the
  /// first call).
  std::optional<Interval> add(double t_s, const Reading& r);
  /// Last trusted power (W), if any.
  std::optional<double> last_power_w() const { return last_power_w_; }

 private:
  Interval fill(double t0, double t1, std::string note);
  SensorKind kind_;
  std::optional<double> wrap_j_;
  double max_w_;
  std::optional<double> prev_t_;
  std::optional<double> prev_energy_j_;
  std::optional<double> prev_power_w_;
  std::optional<double> last_power_w_;
  // After a backwards step: the counter value before it (J), when it was read (s), and the
  // energy filled since (J).
  std::optional<double> dip_base_j_;
  double dip_t0_s_ = 0, dip_fill_j_ = 0;
};

}  // namespace gt::energy
