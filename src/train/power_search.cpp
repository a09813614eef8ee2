// train/power_search.cpp: the trainer's steps driving the power-limit optimizer.
#include "train/power_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "energy/meter.h"
#include "train/energy_hook.h"
#include "train/trainer.h"
#include "tune/optimizer.h"

namespace gt {

namespace {

// Refuses an objective that compares energies when no sensor counts energy that a power limit
// can change; warns when part of the energy is an estimate (blind to the limit).
void check_sensors(const energy::Meter& meter, tune::Objective objective, std::FILE* warn) {
  std::string counters, estimates, missing;
  for (const auto& s : meter.sensors()) {
    std::string& to = !s.available || !s.counted                ? missing
                      : s.kind == energy::SensorKind::kEstimate ? estimates
                                                                : counters;
    to += fmt::format("{}{}{}", to.empty() ? "" : ", ", s.name,
                      s.reason.empty() ? "" : " (" + s.reason + ")");
  }
  if (tune::objective_needs_energy(objective) && counters.empty())
    throw Error(fmt::format(
        "greentrain tune --objective {}: no energy counter that sees a power limit can be read "
        "here ({}{}); the search would compare figures it cannot measure. Use --objective time "
        "or slowdown, or run where RAPL or NVML energy can be read (`greentrain sensors`)",
        tune::objective_name(objective),
        estimates.empty() ? "no sensor counts" : "only estimates: " + estimates,
        missing.empty() ? "" : "; not read: " + missing));
  if (!estimates.empty() && warn)
    std::fprintf(warn,
                 "greentrain tune: warning: part of the energy is an estimate (%s): the estimate "
                 "does not see the power limit, so the search measures time only for those "
                 "domains (`greentrain sensors` lists them)\n",
                 estimates.c_str());
}

}  // namespace

tune::TuneResult tune_training(const TrainConfig& cfg, const std::string& run_dir,
                               const std::vector<tune::DevicePtr>& devices,
                               const tune::TuneOptions& opt, std::FILE* log, std::FILE* warn) {
  // a step that gives too many candidates is refused before the run folder and the trainer exist
  tune::TuneResult probe;
  tune::begin_search(devices, opt, probe);
  energy::MeterOptions meter_opt = meter_options(cfg);
  // an intensity in another unit than gCO2e/kWh (kg/kWh read as g/kWh): said once, before any
  // step, as train says it; the search goes on (it compares joules and seconds, not grams)
  if (warn)
    for (const auto& w : meter_opt.carbon.warnings())
      std::fprintf(warn, "greentrain tune: warning: %s\n", w.c_str());
  std::unique_ptr<energy::Meter> meter = energy::Meter::create(meter_opt);
  check_sensors(*meter, opt.objective, warn);
  std::filesystem::create_directories(run_dir);
  Trainer trainer(cfg, run_dir, /*resume=*/false, nullptr);
  tune::PowerLimitOptimizer plo(devices, *meter, opt, /*apply_best=*/false, log);
  while (!plo.done()) {
    plo.begin_step();
    if (plo.done()) break;  // a saved profile was reused: nothing runs
    trainer.train_step();
    plo.end_step();
  }
  return *plo.result();
}

}  // namespace gt
