#include "backend/cpu/thread_team.h"

#include <dirent.h>
#include <fmt/format.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <system_error>
#include <utility>

namespace gt::cpu {

std::optional<double> process_runqueue_wait_s() {
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return std::nullopt;
  double total_ns = 0;
  int read = 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string path = std::string("/proc/self/task/") + e->d_name + "/schedstat";
    FILE* f = std::fopen(path.c_str(), "r");
    if (!f) continue;  // a thread that ended since the listing
    unsigned long long run_ns = 0, wait_ns = 0;
    if (std::fscanf(f, "%llu %llu", &run_ns, &wait_ns) == 2) {
      total_ns += static_cast<double>(wait_ns);
      ++read;
    }
    std::fclose(f);
  }
  ::closedir(d);
  if (read == 0) return std::nullopt;
  return total_ns * 1e-9;
}

std::optional<int> system_runnable_tasks() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return std::nullopt;
  double l1 = 0, l5 = 0, l15 = 0;
  int running = 0, total = 0;
  const int got = std::fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total);
  std::fclose(f);
  if (got != 5 || running < 0) return std::nullopt;
  return running;
}

ThreadTeam::ThreadTeam(int team, bool adaptive, Options opt, WaitReader read_wait,
                       RunnableReader read_runnable, int cpus)
    : team_(std::max(1, team)),
      adaptive_(adaptive),
      opt_(opt),
      read_wait_(std::move(read_wait)),
      read_runnable_(std::move(read_runnable)),
      cpus_(cpus),
      threads_(team_),
      slow_margin_(opt.margin) {}

ThreadTeam::ThreadTeam(int team, bool adaptive)
    : ThreadTeam(team, adaptive, Options{}, process_runqueue_wait_s, system_runnable_tasks,
                 static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)))) {}

int ThreadTeam::end_step(double now_s, double step_s) {
  ++steps_;
  if (threads_ < team_) ++smaller_steps_;
  if (yield_) ++yield_steps_;
  if (!measuring()) return threads_;
  const bool new_window = !started_ || changed_;
  if (!new_window) {
    window_step_s_ += step_s;
    ++window_steps_;
    // a spinning window ends early where every one of its steps ended beside more runnable
    // tasks than the machine has CPUs (its own threads counted among them: at most team_)
    if (crowded_ && spinning_window() && read_runnable_) {
      const std::optional<int> r = read_runnable_();
      crowded_ = r && *r > cpus_;
    }
    const bool early = crowded_ && spinning_window() && read_runnable_ &&
                       window_steps_ >= opt_.early_steps && now_s - t0_ >= opt_.early_s;
    if (now_s - t0_ < opt_.window_s && !early) return threads_;
  }
  const std::optional<double> wait_s = read_wait_();
  if (!wait_s) {  // no schedstat here: the full team, and the reason in the summary
    unavailable_ = true;
    set_threads(team_);
    return threads_;
  }
  if (new_window) {   // the step after a change of size is left out of the window (oneDNN
    started_ = true;  // makes its products for the new team size there)
    changed_ = false;
    t0_ = now_s;
    w0_ = *wait_s;
    window_step_s_ = 0;  // (a change from outside a decision, disable_yield, comes mid-window)
    window_steps_ = 0;
    crowded_ = true;
    return threads_;
  }
  const double dt = now_s - t0_;
  const double fraction = std::max(0.0, *wait_s - w0_) / (dt * threads_);
  const double mean_step_s = window_step_s_ / window_steps_;
  t0_ = now_s;
  w0_ = *wait_s;
  window_step_s_ = 0;
  window_steps_ = 0;
  crowded_ = true;
  const int before = threads_;
  decide(now_s, fraction, mean_step_s);
  if (changed_ && threads_ == before) changed_ = false;  // only the waits changed: no
  return threads_;  // products to make for the next step, so the next window starts now
}

void ThreadTeam::set_config(int n, bool yield) {
  if (n == threads_ && yield == yield_) return;
  ++changes_;
  changed_ = true;
  threads_ = n;
  yield_ = yield;
}

void ThreadTeam::start_trial(Candidate c) {
  cand_ = c;
  state_ = State::trial;
  if (c == kSmaller)
    set_config(smaller_n_, false);
  else
    set_config(team_, true);
}

int ThreadTeam::share_of(double fraction) const {
  return std::clamp(static_cast<int>(std::lround(team_ * (1.0 - fraction))), 1, team_ - 1);
}

void ThreadTeam::start_round() {
  by_slowdown_ = false;  // (the caller sets it where a slowdown called the round)
  won_[kSmaller].reset();
  won_[kYield].reset();
  trial_wins_ = 0;
  trial_sum_s_ = 0;
  yield_sum_s_ = 0;
  yield_windows_ = 0;
  start_trial(opt_.try_yield ? kYield : kSmaller);
}

void ThreadTeam::to_full() {
  set_config(team_, false);
  state_ = State::full;
  probe_interval_s_ = opt_.probe_s;
  slow_margin_ = opt_.margin;
  by_slowdown_ = false;
  kept_.reset();
}

void ThreadTeam::round_from_spinning(double fraction, double step_s) {
  smaller_n_ = share_of(fraction);
  full_step_s_ = step_s;
  start_round();
}

void ThreadTeam::end_round(double now_s) {
  if (yield_windows_ > 0) won_[kYield] = yield_sum_s_ / yield_windows_;
  // the faster of sleeping waits (measured) and the smaller team (if it won its trial); where
  // sleeping waits cannot be had and the smaller team lost, the spinning team
  std::optional<Candidate> best;
  for (Candidate c : {kYield, kSmaller})
    if (won_[c] && (!best || *won_[c] < *won_[*best])) best = c;
  if (!best) {
    trial_lost_at_ = now_s;
    return to_full();
  }
  const int n = *best == kSmaller ? smaller_n_ : team_;
  const bool yield = *best == kYield;
  // the same choice as the round before: measured again after twice as long. A round that the
  // kept choice's slowdown called: the probe interval afresh, and where it kept the same
  // choice, the next such slowdown must be twice as large (noisy windows do not call rounds
  // back to back); a new choice: the margin again
  const bool again = kept_ && kept_->first == n && kept_->second == yield;
  probe_interval_s_ =
      again && !by_slowdown_ ? std::min(2 * probe_interval_s_, opt_.max_probe_s) : opt_.probe_s;
  slow_margin_ = !again         ? opt_.margin
                 : by_slowdown_ ? std::min(2 * slow_margin_, kMaxSlowMargin)
                                : slow_margin_;
  by_slowdown_ = false;
  kept_ = {n, yield};
  slower_windows_ = 0;
  set_config(n, yield);
  state_ = State::chosen;
  chosen_since_ = now_s;
  trial_lost_at_.reset();
}

void ThreadTeam::to_probe() {
  set_config(team_, false);
  state_ = State::probe;
}

void ThreadTeam::disable_yield(std::string reason) {
  opt_.try_yield = false;
  yield_unavailable_ = std::move(reason);
  // in a round, or kept: a window of the spinning team, then a round of the smaller team
  // against it (not the spinning team for the probe interval: it can collapse beside the load)
  if (state_ != State::trial && !yield_) return;
  kept_.reset();
  to_probe();
}

void ThreadTeam::decide(double now_s, double fraction, double mean_step_s) {
  last_fraction_ = fraction;
  switch (state_) {
    case State::full:
      // contended, and no round of trials lost within the probe interval: a round of trials
      // (this window's spinning steps are the smaller team's reference only where sleeping
      // waits cannot be had: a spinning team that keeps up for a window after a change can
      // collapse 4x in the next, as the scheduler's fairness catches up with it)
      if (fraction > opt_.high && (!trial_lost_at_ || now_s - *trial_lost_at_ >= opt_.probe_s))
        round_from_spinning(fraction, mean_step_s);
      break;
    case State::trial:
      if (cand_ == kYield) {  // a window of sleeping waits, then one of the smaller team
        yield_sum_s_ += mean_step_s;
        ++yield_windows_;
        last_yield_s_ = mean_step_s;
        start_trial(kSmaller);
        break;
      }
      // the smaller team must beat the sleeping waits' window just before (or, where they
      // cannot be had, the spinning team) in each of its windows, not on average: one lucky
      // window on a noisy machine would otherwise hold a slower team, and windows side by
      // side cancel the drift of a virtual machine's speed
      if (mean_step_s < (opt_.try_yield ? last_yield_s_ : full_step_s_) * (1.0 - opt_.margin)) {
        trial_sum_s_ += mean_step_s;
        if (++trial_wins_ < opt_.trial_windows) {
          if (opt_.try_yield) start_trial(kYield);
          break;
        }
        won_[kSmaller] = trial_sum_s_ / trial_wins_;
      }
      end_round(now_s);
      break;
    case State::chosen: {
      // a kept candidate that steps slower than when it won, by the margin (doubled each time
      // a round this called kept the same choice), in as many windows in a row as a trial has
      // (the scheduler placed its threads worse, or the load changed): its round comes now,
      // the two side by side again, and the probe interval starts afresh (where sleeping waits
      // cannot be had, at the interval). Kept sleeping waits were seen to step at 30 ms and
      // then, for seconds, at 72-76 ms, where one thread stepped at 36-38 ms
      // (docs/benchmarks.md)
      const std::optional<double>& won = threads_ < team_ ? won_[kSmaller]
                                         : yield_         ? won_[kYield]
                                                          : std::optional<double>();
      const bool slower = opt_.try_yield && won && mean_step_s > *won * (1.0 + slow_margin_);
      slower_windows_ = slower ? slower_windows_ + 1 : 0;
      const bool slowed = slower_windows_ >= opt_.trial_windows;
      if (fraction < opt_.low) {  // the cores are free again
        to_full();
      } else if (slowed || now_s - chosen_since_ >= probe_interval_s_) {
        if (opt_.try_yield) {  // still contended: a round afresh, the spinning team left out
          start_round();       // (the smaller team's size from the last window of the spinning one)
          by_slowdown_ = slowed;
        } else {  // the smaller team's reference: a window of the spinning team first
          to_probe();
        }
      }
      break;
    }
    case State::probe:  // a window of the spinning team: the smaller team's reference
      if (fraction > opt_.high)
        round_from_spinning(fraction, mean_step_s);
      else
        to_full();
      break;
  }
}

ThreadPolicy ThreadTeam::policy() const {
  ThreadPolicy p;
  p.policy = adaptive_ ? "adaptive" : "fixed";
  p.team = team_;
  p.threads = threads_;
  p.steps = steps_;
  p.smaller_steps = smaller_steps_;
  p.changes = changes_;
  p.yielding = yield_;
  p.yield_steps = yield_steps_;
  p.yield_unavailable_reason = yield_unavailable_;
  p.runqueue_wait = last_fraction_;
  if (last_fraction_)
    p.runqueue_wait_unknown_reason.clear();
  else if (unavailable_)
    p.runqueue_wait_unknown_reason =
        "/proc/self/task/*/schedstat cannot be read (a kernel without CONFIG_SCHED_INFO, or "
        "no /proc): the full team is used";
  else if (!adaptive_)
    p.runqueue_wait_unknown_reason = "not measured under train.thread_policy = fixed";
  else if (team_ < 2)
    p.runqueue_wait_unknown_reason = "not measured with a team of one thread";
  else
    p.runqueue_wait_unknown_reason =
        fmt::format("the run ended within its first window ({:g} s)", opt_.window_s);
  return p;
}

bool ParkedThreads::start(int team) {
  if (parked()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  const int mask = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  // libgomp counts the trainer's team and, of a parked team of n, the n - 1 threads it starts,
  // against the CPUs it found when it was loaded (omp_get_num_procs(), or the mask it had)
  const int cpus = std::max(mask, omp_get_num_procs());
  const int n = std::max(2, cpus - team + 2);
  if (n - 1 > kMaxParked) {
    error_ = fmt::format("{} threads would have to be parked beside a team of {} on {} CPUs", n - 1,
                         team, cpus);
    return false;
  }
  release_ = false;
  in_ = 0;
  want_ = n;
  try {
    helper_ = std::thread([this, n] {
#pragma omp parallel num_threads(n)
      {
        std::unique_lock<std::mutex> lk(mu_);
        ++in_;
        cv_.notify_all();
        cv_.wait(lk, [this] { return release_; });
      }
    });
  } catch (const std::system_error& e) {
    error_ = fmt::format("the helper thread could not start: {}", e.what());
    return false;
  }
  std::unique_lock<std::mutex> lk(mu_);
  const bool ok = cv_.wait_for(lk, std::chrono::seconds(1), [this, n] { return in_ >= n; });
  const int got = in_;
  lk.unlock();
  if (!ok) {
    stop();
    error_ = fmt::format(
        "OpenMP gave {} of the {} threads asked for within 1 s (OMP_THREAD_LIMIT, OMP_DYNAMIC?)",
        got, n);
  }
  return ok;
}

void ParkedThreads::stop() {
  if (!parked()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    release_ = true;
  }
  cv_.notify_all();
  helper_.join();
  in_ = 0;
}

}  // namespace gt::cpu
