// train/run_summary.h: writes summary.json into a run folder at the end of training and
// prints the closing lines (validation loss, time, tokens/s, memory).
#pragma once
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "train/trainer.h"

namespace gt {

class RunSummaryWriter {
 public:
  RunSummaryWriter(Trainer& trainer, std::string run_dir)
      : trainer_(trainer), dir_(std::move(run_dir)) {}
  /// Prints the closing lines and writes RUN_DIR/summary.json (temporary name, then rename),
  /// then removes RUN_DIR/session_open.json (run/writer.h open_session: the session is
  /// accounted for).
  void finish(const RunResult& r);
  /// Adds fields (e.g. energy totals) to summary.json.
  void set_extra(std::function<void(nlohmann::json&)> f) { observer_hook_ = std::move(f); }
  /// When this session began (default: when the writer was made); summary.json's wall_s is the
  /// wall time from then to finish(), s: loading, steps, evaluations and checkpoints.
  void set_session_start(std::chrono::steady_clock::time_point t) { session_start_ = t; }
  /// The run's sessions before this one (run/resume.h prior_sessions(); empty: a fresh run):
  /// run_totals adds this session to them (unknown there: unknown here, with their
  /// unknown_reason), and a target they reached stands.
  /// Without this call, a session that began after step 0 reads them from RUN_DIR/summary.json
  /// and the checkpoint's "run" record at finish().
  void set_prior(std::optional<nlohmann::json> prior) {
    prior_ = std::move(prior);
    prior_set_ = true;
  }

 private:
  Trainer& trainer_;
  std::chrono::steady_clock::time_point session_start_ = std::chrono::steady_clock::now();
  // summary.json's run_totals: this session's figures in `s` added to prior_'s (start: the
  // step this session began at)
  nlohmann::ordered_json run_totals(const nlohmann::ordered_json& s, int64_t start) const;
  std::function<void(nlohmann::json&)> observer_hook_;
  std::string dir_;
  std::optional<nlohmann::json> prior_;
  bool prior_set_ = false;
};

}  // namespace gt
