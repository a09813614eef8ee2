// train/power_search.h: `greentrain tune CONFIG`: the power-limit search (tune/optimizer.h)
// over real training steps of a configuration. The trainer's own steps (Trainer::train_step)
// are marked begin/end for the optimizer, measured by a meter made with the configuration's
// energy.* settings (interval, carbon, CPU TDP), as `greentrain train` measures. Built only
// with the tune module.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "train/config.h"
#include "tune/power_limit.h"
#include "tune/tuner.h"

namespace gt {

/// Runs the search on devices with cfg's training steps (cfg validated; the trainer starts a
/// fresh run in run_dir, which is made) and returns its result; the limits in force before
/// are back when it returns or throws. Refuses before making the run folder (gt::Error saying
/// why) a step that gives too many candidates, and an objective that compares energies when
/// no sensor of this machine counts energy a power limit can change. warn: the warnings (part
/// of the energy is an estimate; the configuration's carbon intensity lies outside the
/// plausible range, energy::CarbonIntensity::warnings); log: a line per limit (nullptr: silent).
tune::TuneResult tune_training(const TrainConfig& cfg, const std::string& run_dir,
                               const std::vector<tune::DevicePtr>& devices,
                               const tune::TuneOptions& opt, std::FILE* log, std::FILE* warn);

}  // namespace gt
