// train/run_summary.h: writes summary.json into a run folder at the end of training and
// prints the closing lines (validation loss, time, tokens/s, memory).
#pragma once
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

 private:
  Trainer& trainer_;
  std::function<void(nlohmann::json&)> observer_hook_;
  std::string dir_;
};

}  // namespace gt
