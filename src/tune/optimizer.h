// tune/optimizer.h: the power-limit search driven step by step by its caller, as Zeus's
// GlobalPowerLimitOptimizer is (on_step_begin / on_step_end from the training loop). The
// caller marks each step's begin and end; the optimizer moves through the candidate limits of
// tune/tuner.h, from the highest down: at each, warmup_steps steps run unmeasured, then
// profile_steps steps are measured as one window of the caller's energy::Meter (J over its
// counted domains, s on the meter's clock). After the last candidate it chooses a limit
// (choose_limit_w, the same decision as `greentrain tune`), and keeps it in force until close()
// when apply_best. States: idle -> warmup -> profiling -> (next limit) ... -> done; closed after
// close(); failed after an error. The limits in force before are restored on every exit path:
// close(), the destructor (so an exception that unwinds the caller's loop), an error inside the
// search, std::exit and SIGINT/SIGTERM (PowerLimitGuard). Not thread-safe: one loop drives it.
#pragma once
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tune/power_limit.h"
#include "tune/tuner.h"

namespace gt::energy {
class Meter;
}

namespace gt::tune {

class PowerLimitOptimizer {
 public:
  enum class State { idle, warmup, profiling, done, closed, failed };

  /// devices: the limits to search (all set alike); meter: measures the profiled steps and must
  /// outlive the optimizer; opt: candidates, steps, objective, saved profile (checked at the
  /// first begin_step); apply_best: after the search, set the chosen limit until close(); log:
  /// a line per limit (nullptr: silent). Changes nothing before the first begin_step().
  PowerLimitOptimizer(std::vector<DevicePtr> devices, energy::Meter& meter, TuneOptions opt,
                      bool apply_best = true, std::FILE* log = nullptr);
  ~PowerLimitOptimizer();  ///< close()
  PowerLimitOptimizer(const PowerLimitOptimizer&) = delete;
  PowerLimitOptimizer& operator=(const PowerLimitOptimizer&) = delete;

  /// Throws gt::Error listing each device this process may not set; changes nothing.
  void check_permission() const;

  /// A step begins. The first call checks the options and permission (gt::Error before any
  /// change), reuses a matching saved profile (then the search is done at once) or applies the
  /// highest candidate. A step still open is ended first (end_step), so a caller that marks
  /// only beginnings measures from one beginning to the next. The window of a limit's profile
  /// opens here. Does nothing once done, closed or failed. An error inside the search (a limit
  /// that cannot be set, a measurement an objective cannot use) restores the limits, leaves
  /// the state failed and is thrown once as gt::Error ("power-limit search failed ...").
  /// Throws gt::Error in a forked child (the search and the limits are the parent's).
  void begin_step();
  /// The step begun last has ended. After a limit's last profiled step: closes its window,
  /// records its point and applies the next candidate; after the last candidate: restores the
  /// limits, chooses, saves the profile, and applies the chosen limit (apply_best). Does
  /// nothing without an open step. Errors as begin_step.
  void end_step();
  /// An epoch ended (evaluation or a checkpoint follow): the steps run at this limit so far
  /// (the open step included) are discarded and its warm-up starts again at the next step, as
  /// Zeus does. When an epoch is too short for warm-up and profile (a second cut before
  /// warmup_steps + profile_steps steps ran since the first), the search fails saying so.
  void epoch_end();
  /// Ends the search if it runs and restores the limits in force before it (also after the
  /// chosen limit was applied). Idempotent; never throws. In a forked child it restores
  /// nothing: the limits are the parent's.
  void close() noexcept;

  State state() const { return state_; }
  /// "idle", "warmup", "profiling", "done", "closed" or "failed".
  static std::string_view state_name(State s);
  bool done() const { return state_ == State::done; }
  /// The limit in force for the step now (W) during warm-up and profiling; empty otherwise.
  std::optional<double> current_limit_w() const;
  /// The chosen limit (W), once done.
  std::optional<double> chosen_limit_w() const;
  /// The search's result (points from the highest limit down, the choice), once done.
  const std::optional<TuneResult>& result() const { return result_; }
  /// The result as tune_result_to_json writes it; null before the search is done.
  nlohmann::json result_json() const;
  /// Why the search failed (empty unless failed).
  const std::string& error() const { return error_; }
  const std::vector<DevicePtr>& devices() const { return devices_; }
  const TuneOptions& options() const { return opt_; }

 private:
  void start();
  void apply_limit(std::size_t index);
  void finish();
  void discard_window() noexcept;
  [[noreturn]] void fail(const std::exception& e);
  void check_owner() const;

  std::vector<DevicePtr> devices_;
  energy::Meter& meter_;
  TuneOptions opt_;
  bool apply_best_;
  std::FILE* log_;
  std::string window_;  // the meter window of the profiled steps (unique per optimizer)
  State state_ = State::idle;
  TuneResult partial_;  // points so far
  std::optional<TuneResult> result_;
  std::vector<double> cands_;
  std::size_t index_ = 0;  // candidate in force
  int steps_ = 0;          // steps ended at this limit since its warm-up (re)started
  int since_cut_ = 0;      // steps ended at this limit since its last epoch end (or start)
  bool cut_ = false;       // an epoch end cut this limit's steps short before
  bool in_step_ = false;
  std::string error_;
  std::unique_ptr<PowerLimitGuard> search_guard_, best_guard_;
  int owner_pid_ = 0;  // the process that made it
};

}  // namespace gt::tune
