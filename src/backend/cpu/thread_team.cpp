#include "backend/cpu/thread_team.h"

#include <dirent.h>
#include <fmt/format.h>
#include <omp.h>
#include <sched.h>

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

ThreadTeam::ThreadTeam(int team, bool adaptive, Options opt, WaitReader read_wait)
    : team_(std::max(1, team)),
      adaptive_(adaptive),
      opt_(opt),
      read_wait_(std::move(read_wait)),
      threads_(team_) {}

int ThreadTeam::end_step(double now_s, double step_s) {
  ++steps_;
  if (threads_ < team_) ++smaller_steps_;
  if (yield_) ++yield_steps_;
  if (!measuring()) return threads_;
  const bool new_window = !started_ || changed_;
  if (!new_window) {
    window_step_s_ += step_s;
    ++window_steps_;
    if (now_s - t0_ < opt_.window_s) return threads_;
  }
  const std::optional<double> wait_s = read_wait_();
  if (!wait_s) {  // no schedstat here: the full team, and the reason in the summary
    unavailable_ = true;
    set_threads(team_);
    return threads_;
  }
  if (new_window) {   // the step after a change is left out of the window (oneDNN makes
    started_ = true;  // its products for the new team size there)
    changed_ = false;
    t0_ = now_s;
    w0_ = *wait_s;
    return threads_;
  }
  const double dt = now_s - t0_;
  const double fraction = std::max(0.0, *wait_s - w0_) / (dt * threads_);
  const double mean_step_s = window_step_s_ / window_steps_;
  t0_ = now_s;
  w0_ = *wait_s;
  window_step_s_ = 0;
  window_steps_ = 0;
  decide(now_s, fraction, mean_step_s);
  return threads_;
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
  trial_wins_ = 0;
  trial_sum_s_ = 0;
  state_ = State::trial;
  if (c == kSmaller)
    set_config(smaller_n_, false);
  else
    set_config(team_, true);
}

void ThreadTeam::end_trial(double now_s) {
  if (cand_ == kSmaller && opt_.try_yield) return start_trial(kYield);
  // the faster of the candidates that won (the smaller team on a tie: no parked threads)
  std::optional<Candidate> best;
  for (Candidate c : {kSmaller, kYield})
    if (won_[c] && (!best || *won_[c] < *won_[*best])) best = c;
  if (!best) {
    trial_lost_at_ = now_s;
    set_config(team_, false);
    state_ = State::full;
    return;
  }
  set_config(*best == kSmaller ? smaller_n_ : team_, *best == kYield);
  state_ = State::chosen;
  chosen_since_ = now_s;
  trial_lost_at_.reset();
}

void ThreadTeam::disable_yield(double now_s, std::string reason) {
  opt_.try_yield = false;
  yield_unavailable_ = std::move(reason);
  if (!yield_) return;
  won_[kYield].reset();
  if (state_ == State::trial) return end_trial(now_s);  // the choice among the others
  trial_lost_at_ = now_s;  // a kept choice of them (parking is first tried in their trial)
  set_config(team_, false);
  state_ = State::full;
}

void ThreadTeam::decide(double now_s, double fraction, double mean_step_s) {
  last_fraction_ = fraction;
  switch (state_) {
    case State::full:
      // contended, and no round of trials lost within the probe interval: try the team the
      // CPU it was getting would make (in threads), then sleeping waits, against this
      // window's steps
      if (fraction > opt_.high && (!trial_lost_at_ || now_s - *trial_lost_at_ >= opt_.probe_s)) {
        full_step_s_ = mean_step_s;
        won_[kSmaller].reset();
        won_[kYield].reset();
        smaller_n_ =
            std::clamp(static_cast<int>(std::lround(team_ * (1.0 - fraction))), 1, team_ - 1);
        start_trial(kSmaller);
      }
      break;
    case State::trial:
      // a candidate must be faster in each of its trial windows, not on average: one lucky
      // window on a noisy machine would otherwise hold a slower team for probe_s
      if (mean_step_s < full_step_s_ * (1.0 - opt_.margin)) {
        trial_sum_s_ += mean_step_s;
        if (++trial_wins_ < opt_.trial_windows) break;
        won_[cand_] = trial_sum_s_ / trial_wins_;
      }
      end_trial(now_s);
      break;
    case State::chosen:
      // the cores are free again, or time to measure the full team afresh
      if (fraction < opt_.low || now_s - chosen_since_ >= opt_.probe_s) {
        set_config(team_, false);
        state_ = State::full;
      }
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
