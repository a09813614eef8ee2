// train/energy_hook.h: the energy window of the training loop. A Meter (energy/meter.h)
// measures each logging interval (watts and joules per token on every logged step) and
// the whole run (summary.json and the CodeCarbon-compatible RUN_DIR/energy.csv).
// Figures from the CPU estimate are marked "estimated" wherever they appear.
#pragma once
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "dist/communicator.h"
#include "energy/meter.h"
#include "train/trainer.h"

namespace gt {

/// Meter options from the energy.* keys: interval_ms, carbon_intensity (gCO2e/kWh; any set
/// value, 0 included, is used; unset leaves the meter's labelled default) or carbon_csv
/// (+ carbon_utc_offset_h), cpu_tdp_w. Throws Error on an unreadable carbon CSV.
energy::MeterOptions meter_options(const TrainConfig& cfg);

/// JSON null for an empty optional, else its value.
nlohmann::json json_or_null(std::optional<double> v);

/// Adds one measurement's energy fields to a metrics.jsonl line or summary.json: energy_j (J),
/// power_w (W), joules_per_token (J/token over `tokens`), g_co2e (gCO2e), energy_estimated, and
/// when they apply energy_unknown_reason and energy_flags; gpu_energy_j and gpu_joules_per_token
/// (GPU counters only) with gpu_energy_unknown_reason when no GPU counter was read; and
/// efficiency_unknown_reason when the energy is known but `tokens` is 0. Unknown or undefined
/// figures are null, never 0, with their reason.
void add_energy_fields(const energy::Measurement& m, double tokens, nlohmann::json& record);

/// Refresh periods a logged energy interval spans at least: a counter that moves once a
/// refresh period is off by up to one period's energy in any interval, so 10 keep the
/// interval's power within about 10 % (Zeus's docs: NVML's counter refreshes about every
/// 100 ms, so measure windows well above that).
inline constexpr double kRefreshPeriodsPerInterval = 10;
/// The shortest logged energy interval (s): kRefreshPeriodsPerInterval times the longest
/// refresh period among the counted sensors that measure (estimates excluded); 0 when none.
double min_log_interval_s(const std::vector<energy::SensorInfo>& sensors);

/// The lines `train` prints about its meter: the sensors counted (or "none measured", why, and
/// that the energy will be unknown), then each sensor another process reads, with its reason.
std::string energy_header(const energy::Meter& meter);

class EnergyHook final : public StepObserver {
 public:
  /// Starts the meter and the whole-run window. log: where the closing energy lines go.
  /// `opt`: the meter's options when the caller made them already (meter_options(cfg), e.g. to
  /// check the carbon file before the data is loaded); empty: made here. Either way the meter
  /// reads the GPUs of cfg.device (pass the trainer's config(): with several ranks on a node
  /// each has its own GPU, which a configuration read before the trainer does not name).
  EnergyHook(const TrainConfig& cfg, std::string run_dir, FILE* log = stdout,
             std::optional<energy::MeterOptions> opt = std::nullopt);
  void set_last_step(int64_t last) override { last_step_ = last; }
  void begin_step(int64_t step) override;
  /// The shortest logged interval (s): min_log_interval_s of the counted sensors, or what
  /// set_min_interval_s set (tests).
  double min_interval_s() const { return min_interval_s_; }
  void set_min_interval_s(double s) { min_interval_s_ = s; }
  /// At a logged step whose interval is long enough (see min_interval_s): ends the interval,
  /// adds its energy fields (add_energy_fields, energy_interval_tokens, energy_interval_s,
  /// power_w_by_domain) to `record` and returns the line's text with the interval as its
  /// window; otherwise returns an empty note.
  StepNote end_step(int64_t step, int64_t tokens, double flops, nlohmann::json& record) override;
  /// Ends the run window, writes energy.csv and adds the energy fields to summary.json:
  /// energy_j, joules_per_token, tokens_per_joule, gflops_per_watt, g_co2e, carbon_g_per_kwh,
  /// carbon_origin, carbon_source (also on every logged metrics line),
  /// energy_estimated, energy_method, energy (the full measurement).
  void finish(nlohmann::json& summary) override;
  /// Ends the "to_target" window (opened with the run's when train.target_loss is set) and adds
  /// its energy_j, g_co2e, energy_estimated (and energy_unknown_reason) to `fields`.
  void target_reached(int64_t step, nlohmann::json& fields) override;
  energy::Meter& meter() { return *meter_; }
  /// Data parallelism: finish() then adds the energy of every node (each node's devices are
  /// read by one rank, the holder of their node lock) into the run's totals, lists the nodes
  /// under "energy_nodes" ([{"node", "ranks", "energy_j" (null when unknown), "estimated"}]),
  /// and every rank must call it; only rank 0 writes energy.csv. Unknown on any node: unknown.
  /// The energy lines of metrics.jsonl (with their own "energy_nodes") and the target record
  /// are the whole job's too; "power_w_by_domain" stays rank 0's node's ("power_scope").
  void set_communicator(dist::Communicator* comm) { comm_ = comm; }
  /// Where warnings go (default stderr; nullptr: none): the first measurement whose time the
  /// carbon series does not cover (energy::kCarbonOutsideFlag) is said there once, by the rank
  /// that logs (a `log` was given).
  void set_warnings(FILE* warn) { warn_ = warn; }

 private:
  // Says m's flag of a span outside the carbon series on warn_, the first time there is one.
  void warn_carbon_outside(const energy::Measurement& m);
  FILE* warn_ = stderr;
  bool carbon_warned_ = false;
  // With several ranks: turns m (this rank's window) into the whole job's, the sum over the
  // ranks that read a node's devices, unknown when any node's is; its domains become one per
  // kind (cpu, gpu, ram, psys), each the sum over the job's sensors of that kind, and its peak
  // power unknown; returns the per-node list ("energy_nodes"). Collective: every rank calls it
  // at the same point of the run.
  nlohmann::json add_nodes(energy::Measurement& m);
  dist::Communicator* comm_ = nullptr;
  std::vector<std::string> node_names_;  // node of each rank, gathered on first use
  TrainConfig cfg_;
  std::string run_dir_;
  FILE* log_;
  std::unique_ptr<energy::Meter> meter_;
  bool interval_open_ = false;
  double min_interval_s_ = 0;  // min_log_interval_s of the sensors
  int64_t last_step_ = -1;     // the run's last step (set_last_step)
  int64_t interval_tokens_ = 0, interval_steps_ = 0, run_tokens_ = 0;
  double interval_flops_ = 0, run_flops_ = 0;
};

}  // namespace gt
