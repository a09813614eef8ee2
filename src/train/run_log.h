// train/run_log.h: what a run says about each step: its record in the run folder's
// metrics.jsonl (run/schema.h's keys; rank 0 only) and its progress line (rewritten in place
// on a terminal, every train.log_interval steps otherwise). Every rate on a line covers one
// window, so that J/token = W / (tokens/s) on it: a line with the energy figures (W, J/token)
// gives tokens/s and ms/step over the energy interval those figures measure (the meter's wall
// seconds from the start of the interval's first step to the end of its last); any other line
// over the steps since the last line that stayed (their step times). The time left is
// estimated from the last 20 steps' times.
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

/// What a step observer (the energy hook) says of a step: the text for the progress line and
/// the window its figures cover, so that the line's tokens/s and ms/step cover it too.
struct StepNote {
  std::string text;           ///< e.g. "41.0 W, 0.012 J/token, ..."; empty: nothing this step
  double window_s = 0;        ///< wall seconds the text's figures cover (0: no window)
  int64_t window_tokens = 0;  ///< tokens trained in that window, all ranks together
  int64_t window_steps = 0;   ///< optimizer steps in that window
};

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
  ThreadCount threads;   ///< the CPU team the step ran with (team 0: none)
  nlohmann::json extra;  ///< fields the step observer added (energy)
  /// the observer's text for the line ("41 W, 0.012 J/tok") and the window it covers
  StepNote energy;
  bool evaluated = false;  ///< a validation loss was computed after this step
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
  /// Appends the step's record and prints its progress line: tokens/s and ms/step over
  /// s.energy's window when it has one (window_s > 0, window_steps > 0), else over the steps
  /// since the last line that stayed (final_line), this one included.
  void step(const StepReport& s);
  /// The record of a step as metrics.jsonl holds it.
  static nlohmann::ordered_json record(const StepReport& s);
  /// "1h02m", "3m05s", "42s"; "?" when not a finite time >= 0.
  static std::string format_duration(double s);

 private:
  void print(const std::string& line, bool final_line);
  std::optional<run::MetricsLog> metrics_;
  FILE* log_;
  std::vector<double> recent_;  ///< step times of the last 20 steps (s): the time left
  /// the steps since the last line that stayed, before this one: tokens, step seconds, steps
  double since_tokens_ = 0, since_s_ = 0;
  int64_t since_steps_ = 0;
};

}  // namespace gt
