// train/run_summary.h: writes summary.json into a run folder at the end of training and
// prints the closing lines (validation loss, time, tokens/s, memory).
#pragma once
#include <chrono>
#include <functional>
#include <string>

#include "train/trainer.h"

namespace gt {

class RunSummaryWriter {
 public:
  RunSummaryWriter(Trainer& trainer, std::string run_dir)
      : trainer_(trainer), dir_(std::move(run_dir)) {}
  /// Prints the closing lines and writes RUN_DIR/summary.json (temporary name, then rename).
  void finish(const RunResult& r);
  /// Adds fields (e.g. energy totals) to summary.json.
  void set_extra(std::function<void(nlohmann::json&)> f) { observer_hook_ = std::move(f); }
  /// When this session began (default: when the writer was made); summary.json's wall_s is the
  /// wall time from then to finish(), s: loading, steps, evaluations and checkpoints.
  void set_session_start(std::chrono::steady_clock::time_point t) { session_start_ = t; }

 private:
  Trainer& trainer_;
  std::chrono::steady_clock::time_point session_start_ = std::chrono::steady_clock::now();
  std::function<void(nlohmann::json&)> observer_hook_;
  std::string dir_;
};

}  // namespace gt
