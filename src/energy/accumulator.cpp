// energy/accumulator.cpp: see accumulator.h.
#include "energy/accumulator.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/name_table.h"

namespace gt::energy {

constexpr NameTable<SensorKind, 3> kSensorKindNames{{{SensorKind::kEnergyCounter, "energy counter"},
                                                     {SensorKind::kPowerGauge, "power gauge"},
                                                     {SensorKind::kEstimate, "estimate"}}};
const char* to_string(SensorKind k) { return name_of(kSensorKindNames, k).data(); }

constexpr NameTable<Method, 3> kMethodNames{{{Method::kCounter, "counter"},
                                             {Method::kIntegrated, "integrated samples"},
                                             {Method::kEstimate, "estimate"}}};
const char* to_string(Method m) { return name_of(kMethodNames, m).data(); }

Accumulator::Accumulator(SensorKind kind, std::optional<double> wrap_j,
                         double max_plausible_power_w)
    : kind_(kind), wrap_j_(wrap_j), max_w_(max_plausible_power_w) {}

Interval Accumulator::fill(double t0, double t1, std::string note) {
  Interval iv;
  iv.t0_s = t0;
  iv.t1_s = t1;
  iv.trusted = false;
  iv.note = std::move(note);
  if (last_power_w_) {
    iv.energy_j = *last_power_w_ * (t1 - t0);
    iv.power_w = *last_power_w_;
  } else {
    iv.unknown = true;
  }
  return iv;
}

std::optional<Interval> Accumulator::add(double t_s, const Reading& r) {
  std::optional<Interval> out;
  const bool first = !prev_t_.has_value();
  const double t0 = first ? t_s : *prev_t_;
  const double dt = t_s - t0;
  if (!r.ok) {
    if (!first && r.gone) {  // nothing to fill: unknown from the last reading on
      Interval iv;
      iv.t0_s = t0;
      iv.t1_s = t_s;
      iv.trusted = false;
      iv.unknown = iv.gone = true;
      iv.note = r.error;
      out = iv;
    } else if (!first) {
      out = fill(t0, t_s, "reading failed: " + r.error);
    }
    prev_t_ = t_s;
    prev_energy_j_.reset();  // re-base on the next good reading
    dip_base_j_.reset();
    prev_power_w_.reset();
    return out;
  }
  // An estimate or a gauge may be read as a counter too: the CPU estimate's cumulative joules,
  // a daemon's integrated energy.
  if (kind_ == SensorKind::kEnergyCounter || r.energy_j) {
    if (!r.energy_j) {
      if (!first) out = fill(t0, t_s, "counter reading without a value");
      prev_t_ = t_s;
      prev_energy_j_.reset();
      dip_base_j_.reset();
      return out;
    }
    const double e = *r.energy_j;
    if (!first && !prev_energy_j_) {
      out = fill(t0, t_s, "counter re-based after a failed reading");
      dip_base_j_.reset();
    } else if (!first) {
      double delta = e - *prev_energy_j_;
      bool wrapped = false;
      bool ok = true;
      std::string note;
      if (delta < 0) {
        if (wrap_j_ && *wrap_j_ > 0) {
          delta += *wrap_j_;
          wrapped = true;
          if (delta < 0 || (dt > 0 && delta / dt > max_w_) || (dt <= 0 && delta > 0)) {
            ok = false;
            note = "counter went backwards (reset or driver reload, not a plausible wrap)";
          }
        } else {
          ok = false;
          note = "counter went backwards and its wrap range is unknown";
        }
      }
      if (ok && dip_base_j_ && !wrapped && e >= *dip_base_j_) {
        // The dip was a glitch: the value before it stays the base. The interval gets the rise
        // since then less what the dipped intervals were filled with.
        const double rise = e - *dip_base_j_;
        Interval iv;
        iv.t0_s = t0;
        iv.t1_s = t_s;
        iv.energy_j = std::max(0.0, rise - dip_fill_j_);
        if (dt > 0) iv.power_w = iv.energy_j / dt;
        if (rise < dip_fill_j_) {
          iv.trusted = false;
          iv.note = fmt::format(
              "counter came back above its value before a dip; the dip's fill was {:.3f} J "
              "too high",
              dip_fill_j_ - rise);
        }
        if (t_s > dip_t0_s_) last_power_w_ = rise / (t_s - dip_t0_s_);
        out = iv;
        dip_base_j_.reset();
      } else if (ok) {
        Interval iv;
        iv.t0_s = t0;
        iv.t1_s = t_s;
        iv.energy_j = delta;
        iv.wrapped = wrapped;
        if (dt > 0) {
          iv.power_w = delta / dt;
          if (r.untrusted.empty()) last_power_w_ = iv.power_w;
        }
        if (!r.untrusted.empty()) {  // the source says part of it is a fill
          iv.trusted = false;
          iv.unknown = r.incomplete;
          iv.note = r.untrusted;
        }
        out = iv;
        dip_base_j_.reset();  // still below the value before the dip: the dip was a reset
      } else {
        out = fill(t0, t_s, note + "; counted from the value before the step if it comes back");
        if (!dip_base_j_) {
          dip_base_j_ = *prev_energy_j_;
          dip_t0_s_ = t0;
          dip_fill_j_ = 0;
        }
        dip_fill_j_ += out->energy_j;
      }
    }
    prev_energy_j_ = e;
    prev_t_ = t_s;
    return out;
  }
  // Gauge or estimate: trapezoid between the previous power and this one.
  if (!r.power_w || !(*r.power_w >= 0)) {
    if (!first) out = fill(t0, t_s, "power reading missing or negative");
    prev_t_ = t_s;
    prev_power_w_.reset();
    return out;
  }
  const double p = *r.power_w;
  if (!first) {
    if (prev_power_w_) {
      Interval iv;
      iv.t0_s = t0;
      iv.t1_s = t_s;
      iv.energy_j = 0.5 * (*prev_power_w_ + p) * dt;
      if (dt > 0) iv.power_w = iv.energy_j / dt;
      out = iv;
    } else {
      // Previous reading failed: the segment's start is unknown, hold this power back to it.
      Interval iv;
      iv.t0_s = t0;
      iv.t1_s = t_s;
      iv.energy_j = p * dt;
      iv.power_w = p;
      iv.trusted = false;
      iv.note = "power held back over a failed reading";
      out = iv;
    }
  }
  last_power_w_ = p;
  prev_power_w_ = p;
  prev_t_ = t_s;
  return out;
}

}  // namespace gt::energy
