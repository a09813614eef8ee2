// python/src/step_tuner.cpp: the power-limit search driven by a loop's step boundaries.
#include "step_tuner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "core/error.h"

namespace gt::python {

StepTuner::StepTuner(std::vector<tune::DevicePtr> devices, energy::Meter* meter,
                     tune::TuneOptions opt, bool apply_best, bool verbose)
    : devices_(std::move(devices)),
      meter_(meter),
      opt_(std::move(opt)),
      apply_best_(apply_best),
      verbose_(verbose),
      window_(fmt::format("greentrain.tune@{}", static_cast<const void*>(this))),
      owner_pid_(::getpid()) {}

StepTuner::~StepTuner() { close(); }

void StepTuner::wait_boundary(std::unique_lock<std::mutex>& lk) {
  cv_->wait(lk, [this] { return abort_ || boundary_ > acked_; });
  if (abort_) throw Aborted{};
}

void StepTuner::ack(std::unique_lock<std::mutex>& lk) {
  acked_ = boundary_;
  cv_->notify_all();
}

tune::StepMeasurement StepTuner::profile(int steps) {
  std::unique_lock<std::mutex> lk(mu_);
  const int warmup = opt_.warmup_steps;
  int since_break = 0;  // steps since the last epoch end (or the start) at this limit
  bool broken = false;  // an epoch end cut this limit's warm-up and profile short before
  try {
    wait_boundary(lk);  // the loop waits at a step boundary: the limit is in force from here
    epoch_break_ = false;
    for (;;) {
      // `warmup` steps, then `steps` measured ones. After an epoch end both start again, as
      // Zeus's optimizer warms up again: the first steps of an epoch (a data loader starting,
      // caches cold) are slower and are not what a limit is judged by.
      bool cut = false;
      for (int done = 0; done < warmup + steps; ++done) {
        if (done == warmup) meter_->begin_window(window_);  // exactly at this boundary
        ack(lk);
        wait_boundary(lk);  // one more step has run (the last of its epoch, on a break)
        ++since_break;
        if (epoch_break_) {
          cut = true;
          break;
        }
      }
      if (!cut) {
        // the loop still waits at this boundary: the search sets the next limit
        return tune::step_measurement(meter_->end_window(window_));
      }
      if (meter_->has_window(window_)) meter_->end_window(window_);
      epoch_break_ = false;
      if (broken && since_break < warmup + steps)
        throw Error(fmt::format(
            "an epoch of {} step(s) ended before the {} warm-up and {} profiled step(s) at one "
            "limit were done: with epochs this short the search would never finish; expected "
            "fewer warmup_steps and profile_steps, or on_epoch_end() only when an epoch ends",
            since_break, warmup, steps));
      broken = true;
      since_break = 0;
    }
  } catch (...) {
    try {
      if (meter_->has_window(window_)) meter_->end_window(window_);
    } catch (...) {
    }
    throw;
  }
}

void StepTuner::thread_main() {
  try {
    tune::ProfileFn f = [this](int n) { return profile(n); };
    // profile() runs each limit's warm-up itself, so that it can run it again after an epoch
    // end; the search is told there is none
    tune::TuneOptions search = opt_;
    search.warmup_steps = 0;
    tune::TuneResult r = tune::tune_power_limit(devices_, f, search, verbose_ ? stderr : nullptr);
    if (apply_best_) {
      auto g = std::make_unique<tune::PowerLimitGuard>(devices_, /*handle_signals=*/true);
      g->apply_w(r.chosen_limit_w);
      if (verbose_)
        std::fprintf(stderr, "greentrain: power limit %.1f W applied until the optimizer closes\n",
                     r.chosen_limit_w);
      std::lock_guard<std::mutex> lk(mu_);
      best_guard_ = std::move(g);
    }
    std::lock_guard<std::mutex> lk(mu_);
    result_ = std::move(r);
    state_ = State::done;
    acked_ = boundary_;
    cv_->notify_all();
  } catch (const Aborted&) {
    std::lock_guard<std::mutex> lk(mu_);
    state_ = State::closed;
    cv_->notify_all();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lk(mu_);
    error_ = e.what();
    state_ = State::failed;
    cv_->notify_all();
  }
}

void StepTuner::step() {
  if (::getpid() != owner_pid_)
    throw Error(fmt::format(
        "this PowerLimitOptimizer was made by process {} and this is process {} (a forked "
        "child): the search and the limits are the parent's; expected the training loop's own "
        "process to call on_step_begin()",
        owner_pid_, ::getpid()));
  std::unique_lock<std::mutex> lk(mu_);
  if (state_ == State::idle) {
    { tune::PowerLimitGuard probe(devices_, false); }  // refuses without permission; no change
    state_ = State::profiling;
    boundary_ = 1;
    thread_ = std::thread([this] { thread_main(); });
  } else if (state_ == State::profiling) {
    ++boundary_;
    cv_->notify_all();
  }
  cv_->wait(lk, [this] { return acked_ >= boundary_ || state_ != State::profiling; });
  if (state_ == State::failed && !error_raised_) {
    error_raised_ = true;
    throw Error("power-limit search failed (the limits in force before were restored): " + error_);
  }
}

void StepTuner::epoch_end() {
  std::lock_guard<std::mutex> lk(mu_);
  epoch_break_ = true;
}

void StepTuner::close() noexcept {
  if (::getpid() != owner_pid_) {
    // A forked child (multiprocessing, os.fork): the search thread, its condition variable and
    // the limits are the parent's. Joining a thread that is not here hangs (one that was ending
    // at the fork never ends here), and so does destroying a condition variable it waited on:
    // both are leaked. The guard's copy goes: in a child it restores nothing.
    if (thread_.joinable()) new std::thread(std::move(thread_));  // never joined, never freed
    best_guard_.reset();
    (void)cv_.release();
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    abort_ = true;
    cv_->notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::unique_ptr<tune::PowerLimitGuard> g;
  {
    std::lock_guard<std::mutex> lk(mu_);
    g = std::move(best_guard_);
    if (state_ != State::failed) state_ = State::closed;
  }
  g.reset();  // restores the limits in force before the chosen one was applied
}

StepTuner::State StepTuner::state() const {
  std::lock_guard<std::mutex> lk(mu_);
  return state_;
}

std::string StepTuner::state_name() const {
  switch (state()) {
    case State::idle:
      return "idle";
    case State::profiling:
      return "profiling";
    case State::done:
      return "done";
    case State::closed:
      return "closed";
    case State::failed:
      return "failed";
  }
  return "?";
}

std::optional<double> StepTuner::chosen_limit_w() const {
  std::lock_guard<std::mutex> lk(mu_);
  if (!result_) return std::nullopt;
  return result_->chosen_limit_w;
}

nlohmann::json StepTuner::result_json() const {
  std::lock_guard<std::mutex> lk(mu_);
  return result_ ? tune::tune_result_to_json(*result_, opt_) : nlohmann::json(nullptr);
}

std::string StepTuner::error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

}  // namespace gt::python
