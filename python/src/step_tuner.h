// python/src/step_tuner.h: drives the C++ power-limit search (tune/tuner.h, tune_power_limit)
// from a Python training loop's step boundaries. tune_power_limit calls a ProfileFn that must
// run N steps; here the loop owns the steps, so the search runs in a thread of its own and its
// ProfileFn waits for the loop's step boundaries (step()), measuring the steps between them
// with the caller's Meter. At every boundary the loop waits until the search has done what
// belongs there (apply the next limit, open or close a window), so each step runs at the limit
// the search meant. It is the same search as `greentrain tune`: same candidates, warm-up and
// profiled steps, choice, saved profile, and PowerLimitGuard restoring the limits.
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "energy/meter.h"
#include "tune/power_limit.h"
#include "tune/tuner.h"

namespace gt::python {

class StepTuner {
 public:
  enum class State { idle, profiling, done, closed, failed };
  /// devices: the limits to search (all set alike); meter: measures the profiled steps (J over
  /// all its counted domains, s); apply_best: after the search, set the chosen limit until
  /// close(). Nothing is changed before the first step().
  StepTuner(std::vector<tune::DevicePtr> devices, energy::Meter* meter, tune::TuneOptions opt,
            bool apply_best, bool verbose);
  ~StepTuner();  ///< close()
  StepTuner(const StepTuner&) = delete;
  StepTuner& operator=(const StepTuner&) = delete;

  /// A step begins. The first call checks permission (throws gt::Error before any change) and
  /// starts the search; later calls wait until the search is ready for the next step. Throws
  /// the search's error once if it failed.
  void step();
  /// The steps since the last step() were followed by other work (evaluation, checkpoint): the
  /// window being profiled is discarded, and at the next step() the limit's warm-up starts
  /// again, then its profile (the first steps of an epoch are not measured). When a whole
  /// epoch is too short for warm-up and profile, the search fails with that reason.
  void epoch_end();
  /// Ends the search if it is running (its guard restores the limits), restores the limits
  /// changed for the chosen one, and joins the thread. Idempotent. In a forked child it does
  /// nothing: the search, its thread and the limits are the parent's.
  void close() noexcept;

  State state() const;
  std::string state_name() const;
  /// The chosen limit (W), once the search is done.
  std::optional<double> chosen_limit_w() const;
  /// The search's result as tune_result_to_json writes it; null before it is done.
  nlohmann::json result_json() const;
  std::string error() const;
  const std::vector<tune::DevicePtr>& devices() const { return devices_; }

 private:
  struct Aborted {};
  void thread_main();
  tune::StepMeasurement profile(int steps);
  void wait_boundary(std::unique_lock<std::mutex>& lk);  // tuner thread; throws Aborted
  void ack(std::unique_lock<std::mutex>& lk);            // lets the loop run the step

  std::vector<tune::DevicePtr> devices_;
  energy::Meter* meter_;
  tune::TuneOptions opt_;
  bool apply_best_, verbose_;
  std::string window_;

  mutable std::mutex mu_;
  // on the heap: a forked child leaks it (destroying a condition variable the parent's threads
  // waited on at the fork waits for them forever)
  std::unique_ptr<std::condition_variable> cv_ = std::make_unique<std::condition_variable>();
  State state_ = State::idle;
  long long boundary_ = 0, acked_ = 0;
  bool abort_ = false, epoch_break_ = false, error_raised_ = false;
  std::string error_;
  std::optional<tune::TuneResult> result_;
  std::unique_ptr<tune::PowerLimitGuard> best_guard_;
  std::thread thread_;
  int owner_pid_ = 0;  // the process that made it: close() in a forked child touches nothing
};

}  // namespace gt::python
