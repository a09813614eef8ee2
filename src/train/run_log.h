// train/run_log.h: what a run says about each step: its record in the run folder's
// metrics.jsonl (run/schema.h's keys; rank 0 only) and its progress line (rewritten in place
// on a terminal, every train.log_interval steps otherwise), with the tokens/s and the time
// left over the last 20 steps.
#pragma once
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "run/writer.h"

namespace gt {

/// One step as the run log records it.
struct StepReport {
  int64_t step = 0;       ///< the step just done (from 1)
  int64_t max_steps = 0;  ///< train.max_steps
  int64_t last = 0;       ///< the step this run ends at (for the time left)
  double loss = 0;        ///< mean training loss of the step
  double lr = 0;          ///< its learning rate
  double grad_norm = 0;   ///< global gradient norm before clipping
  double step_time_s = 0;
  double tokens = 0;  ///< tokens of the step, all ranks together
  /// fp16 only: the loss scale after the step, whether it was skipped, skips so far
  std::optional<double> loss_scale;
  bool skipped = false;
  int64_t skipped_steps = 0;
  ThreadCount threads;      ///< the CPU team the step ran with (team 0: none)
  nlohmann::json extra;     ///< fields the step observer added (energy)
  std::string energy_text;  ///< the observer's text for the line ("41 W, 0.012 J/tok")
  bool evaluated = false;   ///< a validation loss was computed after this step
  std::optional<double> val_loss, val_bits_per_byte;
  /// train.target_loss when this step's evaluation first reached it; with the wall seconds of
  /// the run to there and the energy to there (J; null when unknown) and whether estimated
  std::optional<double> target_loss;
  double target_s = 0;
  std::optional<double> target_energy_j;
  bool target_energy_estimated = false;
  bool final_line = false;  ///< the line stays (a new line follows), on a terminal too
};

class RunLog {
 public:
  /// log: where progress lines go (nullptr: silent); writes_folder: append to
  /// run_dir/metrics.jsonl (rank 0 of a job).
  RunLog(const std::string& run_dir, FILE* log, bool writes_folder);
  /// Appends the step's record and prints its progress line.
  void step(const StepReport& s);
  /// The record of a step as metrics.jsonl holds it.
  static nlohmann::ordered_json record(const StepReport& s);
  /// "1h02m", "3m05s", "42s"; "?" when not a finite time >= 0.
  static std::string format_duration(double s);

 private:
  void print(const std::string& line, bool final_line);
  std::optional<run::MetricsLog> metrics_;
  FILE* log_;
  std::vector<double> recent_;  ///< step times of the last 20 steps (s)
};

}  // namespace gt
