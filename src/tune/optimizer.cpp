// tune/optimizer.cpp: the power-limit search as a state machine over the caller's steps.
#include "tune/optimizer.h"

#include <fmt/format.h>
#include <unistd.h>

#include "core/error.h"
#include "core/name_table.h"
#include "energy/meter.h"

namespace gt::tune {

PowerLimitOptimizer::PowerLimitOptimizer(std::vector<DevicePtr> devices, energy::Meter& meter,
                                         TuneOptions opt, bool apply_best, std::FILE* log)
    : devices_(std::move(devices)),
      meter_(meter),
      opt_(std::move(opt)),
      apply_best_(apply_best),
      log_(log),
      window_(fmt::format("greentrain.tune@{}", static_cast<const void*>(this))),
      owner_pid_(::getpid()) {}

PowerLimitOptimizer::~PowerLimitOptimizer() { close(); }

void PowerLimitOptimizer::check_permission() const { PowerLimitGuard probe(devices_, false); }

void PowerLimitOptimizer::check_owner() const {
  if (::getpid() != owner_pid_)
    throw Error(fmt::format(
        "this power-limit optimizer was made by process {} and this is process {} (a forked "
        "child): the search and the limits are the parent's; expected the training loop's own "
        "process to mark its steps",
        owner_pid_, ::getpid()));
}

constexpr NameTable<PowerLimitOptimizer::State, 6> kStateNames{
    {{PowerLimitOptimizer::State::idle, "idle"},
     {PowerLimitOptimizer::State::warmup, "warmup"},
     {PowerLimitOptimizer::State::profiling, "profiling"},
     {PowerLimitOptimizer::State::done, "done"},
     {PowerLimitOptimizer::State::closed, "closed"},
     {PowerLimitOptimizer::State::failed, "failed"}}};
std::string_view PowerLimitOptimizer::state_name(State s) { return name_of(kStateNames, s); }

std::optional<double> PowerLimitOptimizer::current_limit_w() const {
  if (state_ != State::warmup && state_ != State::profiling) return std::nullopt;
  return cands_[index_];
}

std::optional<double> PowerLimitOptimizer::chosen_limit_w() const {
  if (!result_) return std::nullopt;
  return result_->chosen_limit_w;
}

nlohmann::json PowerLimitOptimizer::result_json() const {
  return result_ ? tune_result_to_json(*result_, opt_) : nlohmann::json(nullptr);
}

void PowerLimitOptimizer::discard_window() noexcept {
  try {
    if (meter_.has_window(window_)) meter_.end_window(window_);
  } catch (...) {
  }
}

void PowerLimitOptimizer::fail(const std::exception& e) {
  discard_window();
  search_guard_.reset();  // restores the limits in force before the search
  best_guard_.reset();
  in_step_ = false;
  state_ = State::failed;
  error_ = e.what();
  throw Error("power-limit search failed (the limits in force before were restored): " + error_);
}

void PowerLimitOptimizer::apply_limit(std::size_t index) {
  index_ = index;
  steps_ = since_cut_ = 0;
  cut_ = false;
  search_guard_->apply_w(cands_[index_]);
  state_ = opt_.warmup_steps > 0 ? State::warmup : State::profiling;
}

void PowerLimitOptimizer::start() {
  check_permission();  // these errors leave nothing changed and the state idle
  TuneResult r;
  cands_ = begin_search(devices_, opt_, r);
  if (reuse_saved_profile(devices_, cands_, opt_, r, log_)) {
    partial_ = std::move(r);
    try {
      finish();
    } catch (const std::exception& e) {
      fail(e);
    }
    return;
  }
  // Refuses without permission before anything changes; restores on every exit path.
  search_guard_ = std::make_unique<PowerLimitGuard>(devices_, /*handle_signals=*/true);
  r.original_limits_w = search_guard_->saved_limits_w();
  partial_ = std::move(r);
  try {
    apply_limit(0);
  } catch (const std::exception& e) {
    fail(e);
  }
}

void PowerLimitOptimizer::finish() {
  if (search_guard_) {
    search_guard_->restore();
    search_guard_.reset();
  }
  if (!partial_.reused_profile) end_search(partial_, opt_);
  result_ = std::move(partial_);
  state_ = State::done;
  if (!apply_best_) return;
  auto g = std::make_unique<PowerLimitGuard>(devices_, /*handle_signals=*/true);
  g->apply_w(result_->chosen_limit_w);
  best_guard_ = std::move(g);
  if (log_)
    std::fprintf(log_, "greentrain: power limit %.1f W applied until the optimizer closes\n",
                 result_->chosen_limit_w);
}

void PowerLimitOptimizer::begin_step() {
  check_owner();
  if (in_step_) end_step();
  if (state_ == State::idle) start();  // its own errors leave nothing changed
  if (state_ != State::warmup && state_ != State::profiling) return;
  try {
    if (steps_ == opt_.warmup_steps) {
      state_ = State::profiling;
      meter_.begin_window(window_);  // exactly at the beginning of the first profiled step
    }
    in_step_ = true;
  } catch (const std::exception& e) {
    fail(e);
  }
}

void PowerLimitOptimizer::end_step() {
  check_owner();
  if (!in_step_) return;
  in_step_ = false;
  if (state_ != State::warmup && state_ != State::profiling) return;
  ++steps_;
  ++since_cut_;
  if (steps_ < opt_.warmup_steps + opt_.profile_steps) return;
  try {
    add_profile_point(partial_, cands_[index_], step_measurement(meter_.end_window(window_)), opt_,
                      log_);
    if (index_ + 1 < cands_.size())
      apply_limit(index_ + 1);
    else
      finish();
  } catch (const std::exception& e) {
    fail(e);
  }
}

void PowerLimitOptimizer::epoch_end() {
  check_owner();
  if (state_ != State::warmup && state_ != State::profiling) {
    in_step_ = false;
    return;
  }
  if (in_step_) {  // the open step was the last of its epoch
    in_step_ = false;
    ++steps_;
    ++since_cut_;
  }
  if (steps_ == 0) return;  // nothing run at this limit yet
  discard_window();
  if (cut_ && since_cut_ < opt_.warmup_steps + opt_.profile_steps)
    fail(Error(fmt::format(
        "an epoch of {} step(s) ended before the {} warm-up and {} profiled step(s) at one "
        "limit were done: with epochs this short the search would never finish; expected "
        "fewer warmup_steps and profile_steps, or on_epoch_end() only when an epoch ends",
        since_cut_, opt_.warmup_steps, opt_.profile_steps)));
  cut_ = true;
  steps_ = since_cut_ = 0;
  state_ = opt_.warmup_steps > 0 ? State::warmup : State::profiling;
}

void PowerLimitOptimizer::close() noexcept {
  if (::getpid() != owner_pid_) {
    // A forked child: its copies of the guards restore nothing (PowerLimitGuard::restore
    // checks the process), and the meter's window is the parent's.
    search_guard_.reset();
    best_guard_.reset();
    return;
  }
  discard_window();
  in_step_ = false;
  search_guard_.reset();  // restores the limits in force before the search
  best_guard_.reset();    // restores those in force before the chosen limit
  if (state_ != State::failed) state_ = State::closed;
}

}  // namespace gt::tune
