// energy/sensor.h: one Sensor reads one domain (a GPU, a CPU package, DRAM, the whole platform)
// and says what it is: an energy counter, a power gauge or an estimate. Sensors only read; the
// Meter (meter.h) turns readings into joules with wrap protection (accumulator.h).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gt::energy {

/// What a sensor's number is.
enum class SensorKind {
  kEnergyCounter,  ///< cumulative energy counter (RAPL uJ, NVML mJ, ROCm SMI ticks)
  kPowerGauge,     ///< instantaneous or short-average power (NVML mW, ROCm SMI uW)
  kEstimate,       ///< modelled power (TDP x utilization, W per GB); always labelled "estimated"
};

/// How a joule figure was obtained.
enum class Method {
  kCounter,     ///< difference of an energy counter
  kIntegrated,  ///< power samples integrated over time (trapezoid rule)
  kEstimate,    ///< modelled power integrated over time
};

const char* to_string(SensorKind k);  ///< "energy counter", "power gauge", "estimate"
const char* to_string(Method m);      ///< "counter", "integrated samples", "estimate"

/// Description of a sensor, shown by `greentrain sensors` and kept in every Measurement.
struct SensorInfo {
  std::string name;    ///< unique, e.g. "rapl:package-0", "nvml:0", "cpu-estimate"
  std::string domain;  ///< "cpu", "gpu", "ram" or "psys" (CodeCarbon's cpu/gpu/ram split)
  /// The device's number within its domain, as users number them: a GPU's position among the
  /// visible GPUs of its vendor (CUDA's numbering after CUDA_VISIBLE_DEVICES, as Zeus's
  /// gpu_energy[i]), a RAPL zone's package (intel-rapl:N -> N, its dram sub-zone too), 0 for a
  /// machine-wide sensor (the CPU and memory estimates, psys).
  int index = 0;
  std::string device;      ///< human description, e.g. GPU name and UUID, powercap path
  std::string device_key;  ///< node-wide lock key (one reader per device); empty: no lock needed
  SensorKind kind = SensorKind::kEstimate;
  std::string unit;              ///< native unit of the raw value: "uJ", "mJ", "mW", "W"
  bool available = false;        ///< false: cannot be read; `reason` says why
  bool counted = true;           ///< false: readable but left out to avoid double counting
  std::string reason;            ///< why unavailable or not counted (empty otherwise)
  std::string method;            ///< how the number is produced, in words
  double refresh_period_s = 0;   ///< the hardware updates its value this often (s)
  std::optional<double> wrap_j;  ///< a counter wraps to 0 after this many J (RAPL range)
  /// An estimate left out (counted = false) because a counter measures its domain, kept in
  /// reserve: the Meter counts it instead when, after taking the device locks, no counter of
  /// its domain can be read by this process (another process is their reader).
  bool standby = false;
};

/// One raw reading. A counter fills energy_j (cumulative, may wrap); a gauge or an estimate
/// fills power_w. ok=false means the reading failed (error says why) and must not be trusted.
struct Reading {
  bool ok = false;
  std::string error;
  std::optional<double> energy_j;  ///< cumulative counter value (J)
  std::optional<double> power_w;   ///< power at or averaged up to this reading (W)
  /// A source that integrates for us (the daemon, daemon_client.h) may say that part of the
  /// energy since its previous reading is a fill, not a measurement: why (empty: all measured),
  /// and whether some of it had no trusted power at all (the energy is then a lower bound).
  std::string untrusted;
  bool incomplete = false;
  /// With !ok: what is measured is no longer there (the root of a measured process tree has
  /// ended), so nothing is to be filled in: the meter makes the energy of every window open
  /// then unknown, with the reason in `error`.
  bool gone = false;
};

/// A source of readings for one domain. read() is called from one thread at a time.
class Sensor {
 public:
  virtual ~Sensor() = default;
  virtual const SensorInfo& info() const = 0;
  /// Reads now. `now_s` is the meter's clock (s, monotonic); only replay sensors use it.
  virtual Reading read(double now_s) = 0;
};

/// A placeholder for a sensor that was looked for and not found, so that the reason is shown.
class UnavailableSensor : public Sensor {
 public:
  explicit UnavailableSensor(SensorInfo info) : info_(std::move(info)) { info_.available = false; }
  const SensorInfo& info() const override { return info_; }
  Reading read(double) override { return Reading{false, info_.reason, {}, {}, {}, false}; }

 private:
  SensorInfo info_;
};

using SensorList = std::vector<std::unique_ptr<Sensor>>;

/// Sensors read together in one operation (those of the daemon: one request a tick). A Meter
/// calls refresh() once before it reads its sensors at each tick. `boundary`: a window begins or
/// ends now, so the source should read afresh rather than hand back its latest sample. Returns
/// the CLOCK_MONOTONIC time (s) the readings were taken at, when known (the meter then times
/// the tick by it, so a window's seconds and joules span the same readings).
class SensorBatch {
 public:
  virtual ~SensorBatch() = default;
  virtual std::optional<double> refresh(bool boundary) = 0;
};

}  // namespace gt::energy
