// backend/cpu/thread_team.h: the size of the CPU backend's OpenMP team and how its threads
// wait, adapted to the machine without a setting (train.thread_policy = adaptive, the default).
//
// Why: GNU OpenMP's threads wait for each other at the end of every parallel region (a step
// has about 100). Idle, a full team that spins there is the fastest choice. When other
// processes want the same cores, a thread of the team is often preempted and every other
// thread waits for it at the next barrier: a step of the quickstart model took 13-16x its
// idle time beside a compiler (docs/benchmarks.md), where a smaller team that fits the cores
// left free, or a team whose waits sleep instead of spinning (OMP_WAIT_POLICY=passive, which
// costs 2.7x idle), can lose less than the share of the CPU it gives up.
//
// How: the kernel counts, per thread, the time it was ready to run but waited for a CPU
// (/proc/<pid>/task/<tid>/schedstat, field 2: "time spent waiting on a runqueue", ns; Linux
// Documentation/scheduler/sched-stats.rst). Over a window of steps (at least 0.5 s), that
// wait divided by (window x team size) is the fraction of the team's time lost to other work:
// near 0 when the run has its cores, about 0.5 for a full team beside one busy process per
// core. Neither remedy is always faster: a smaller team gives up its share of the contended
// cores to spare its barriers the wait, and sleeping waits pay a wake-up per region. So the
// choice is measured, with sleeping waits as the default under contention: they are what
// OMP_WAIT_POLICY=passive gives, the safe choice on a busy machine. A spinning team is not
// kept beside other work: its steps can look fine for a window after a change and collapse
// 4x in the next, as the scheduler's fairness catches up with it (a trace, docs/benchmarks.md),
// and the windows of a contended virtual machine vary 1.5-4x anyway. Above 0.2 a round of
// trials starts: a window with sleeping waits (ParkedThreads below), then one with the size
// of the CPU the team was getting, round(team x (1 - fraction)) threads (at least 1), then
// the two again: the smaller team is kept only when its steps are at least 10 % faster than
// the sleeping waits' window just before it, in each of its two windows (side by side, so
// that the drift of the machine's speed cancels); otherwise sleeping waits are kept. The full,
// spinning team returns when the wait falls below 0.05; while it stays above, a round is made
// afresh after 8 s, then after twice as long each time the round keeps the same candidate
// (up to 64 s). A kept candidate whose windows step more than 10 % slower than when it won,
// two windows in a row (the scheduler placed its threads worse, or the load changed: one
// thread's steps beside a busy process per core were seen to take 26 or 55 ms by where the
// scheduler put them, and sleeping waits' 30 or 72-76 ms), has its round at once, and the
// probe interval starts afresh; each time such a round keeps the same choice, the slowdown
// that calls the next one doubles (20 %, 40 %, up to 80 %, while the choice holds; back to
// 10 % when the choice changes or the cores are free), so that a noisy machine's windows do
// not call rounds back to back. Where sleeping
// waits cannot be had, that rule is off, each round starts with a window of the spinning team,
// which the smaller team must beat by 10 % in each of its two windows; when it does not, the
// spinning team stays and no round is made again for 8 s. Where schedstat cannot be read the
// full team is used and the reason is reported.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "backend/backend.h"

namespace gt::cpu {

/// The total time the threads of this process have spent ready to run but waiting for a CPU
/// since they started, in seconds (the sum of field 2 of /proc/self/task/*/schedstat). Null
/// when the kernel does not provide it (no CONFIG_SCHED_INFO, or /proc not mounted).
std::optional<double> process_runqueue_wait_s();

/// The machine's runnable tasks now, every process's (the numerator of /proc/loadavg's fourth
/// field: "the number of currently runnable kernel scheduling entities", proc(5)), this
/// process's own running and waiting threads among them. Null where it cannot be read.
std::optional<int> system_runnable_tasks();

/// The decision above, fed with clock readings so that it can be tested without a machine.
/// A window of the spinning team ends early, after early_steps steps and early_s seconds,
/// where the machine's run queue held more runnable tasks than it has CPUs at the end of each
/// of its steps (other work appeared: the "measured from the run queue"); the
/// decision is still the run-queue wait's, over the shorter window. Beside a load present from
/// the start, the spinning team runs 0.1 s instead of 0.5 s. Both counts are the machine's
/// (the run queue has no per-cpuset count): a run confined to some of the cores (a Slurm job's
/// cpuset, taskset) sees the early end rarely where its own cores are contended, and other
/// jobs' work elsewhere ends its windows early, where the wait then decides as before.
class ThreadTeam {
 public:
  /// Thresholds and times of the policy (the defaults are the ones documented above).
  struct Options {
    double window_s = 0.5;      ///< the shortest time the wait is averaged over (s)
    double high = 0.2;          ///< above this fraction of waiting, a round of trials starts
    double low = 0.05;          ///< below it, a kept candidate returns to the full spinning team
    double probe_s = 8.0;       ///< a kept candidate is measured again after this long (s)
    double max_probe_s = 64.0;  ///< ... doubled each time a round keeps it, up to this (s)
    double margin = 0.10;       ///< a candidate must be this much faster (fraction of a step)
    int trial_windows = 2;      ///< ... in each of this many windows (the smaller team); a
                                ///< kept one this many windows slower has its round at once
    bool try_yield = true;      ///< whether sleeping waits are a candidate
    double early_s = 0.1;       ///< a spinning window's shortest time where other work runs (s)
    int early_steps = 2;        ///< ... and its fewest steps
  };
  /// Reads the process's run-queue wait total (s; null: unknown, and the full team is kept).
  using WaitReader = std::function<std::optional<double>()>;
  /// Reads the machine's runnable tasks (system_runnable_tasks; null: unknown, no early end).
  using RunnableReader = std::function<std::optional<int>()>;
  /// team: the threads the run was given (>= 1). adaptive: false keeps the full team always.
  /// read_wait: called at the start and end of each window only (a few file reads).
  /// read_runnable and cpus (the machine's online CPUs): a spinning window's early end, read
  /// once a step in such windows only (none where read_runnable is empty).
  ThreadTeam(int team, bool adaptive, Options opt, WaitReader read_wait,
             RunnableReader read_runnable = nullptr, int cpus = 0);
  /// The run's team, reading this machine (schedstat, /proc/loadavg, the online CPUs).
  ThreadTeam(int team, bool adaptive);

  /// One step of step_s seconds has ended at now_s (a monotonic clock, s). Returns the team
  /// size for the next step.
  int end_step(double now_s, double step_s);

  /// Whether end_step() uses the run-queue wait (adaptive, a team of 2 or more, schedstat
  /// readable so far): the caller reads it only then.
  bool measuring() const { return adaptive_ && team_ > 1 && !unavailable_; }
  /// Threads the run was given: the most the team ever has.
  int team() const { return team_; }
  /// Threads the team has now.
  int threads() const { return threads_; }
  /// Whether the team's waits should sleep now (the caller parks threads: ParkedThreads).
  bool yielding() const { return yield_; }
  /// Sleeping waits cannot be had here (ParkedThreads::start failed: the reason): they are
  /// not tried again in this run; a round in progress, or a choice of them, gives way to a
  /// window of the spinning team and then a round of the smaller team against it.
  void disable_yield(std::string reason);
  /// The policy in force, for the progress line and summary.json.
  ThreadPolicy policy() const;

 private:
  enum class State { full, trial, chosen, probe };
  enum Candidate { kSmaller = 0, kYield = 1 };
  void decide(double now_s, double fraction, double mean_step_s);
  void start_trial(Candidate c);
  void start_round();  // a round of trials (full_step_s_: the last spinning window's step)
  int share_of(double fraction) const;  // round(team x (1 - fraction)), 1 to team - 1
  void end_round(double now_s);         // the choice among those that won
  void to_full();   // the spinning team, chosen afresh (probe interval reset, nothing kept)
  void to_probe();  // a window of the spinning team, the smaller team's reference
  // a round of trials from a window of the spinning team: the smaller team's size from the
  // window's wait fraction, its step time (s) the reference where sleeping waits cannot be had
  void round_from_spinning(double fraction, double step_s);
  void set_config(int n, bool yield);
  void set_threads(int n) { set_config(n, false); }
  // a window of the full spinning team (the states full and probe): one that may end early
  bool spinning_window() const {
    return (state_ == State::full || state_ == State::probe) && !yield_ && threads_ == team_;
  }

  int team_;
  bool adaptive_;
  Options opt_;
  WaitReader read_wait_;
  RunnableReader read_runnable_;
  int cpus_;
  bool crowded_ = true;  // every step of this spinning window saw more runnable tasks than CPUs
  int threads_;
  bool started_ = false;
  bool changed_ = false;  // the team changed at the last decision
  bool unavailable_ = false;
  double t0_ = 0, w0_ = 0;    // the window's start: clock and wait total
  double window_step_s_ = 0;  // the window's steps: seconds and count
  int64_t window_steps_ = 0;
  bool yield_ = false;
  std::string yield_unavailable_;  // why sleeping waits are not tried (empty: they are)
  State state_ = State::full;
  Candidate cand_ = kSmaller;                 // the candidate on trial
  int trial_wins_ = 0;                        // windows of this round the smaller team won
  double trial_sum_s_ = 0;                    // the sum of their mean steps (s)
  std::optional<double> won_[2];              // each candidate's mean step when it won (s)
  int smaller_n_ = 1;                         // the smaller team's size in this round of trials
  double full_step_s_ = 0;                    // the full team's mean step before a trial (s)
  double chosen_since_ = 0;                   // when the kept candidate won or was kept again (s)
  std::optional<std::pair<int, bool>> kept_;  // the last round's choice: threads, sleeping
  int slower_windows_ = 0;    // a kept candidate's windows in a row slower than when it won
  double slow_margin_;        // ... by more than this (opt_.margin, doubled: end_round)
  bool by_slowdown_ = false;  // the round in progress was called by such a slowdown
  static constexpr double kMaxSlowMargin = 0.8;
  double probe_interval_s_ = 0;  // from a choice to its next round (s): probe_s, doubled
                                 // each time a round keeps the same choice, up to max_probe_s
  double yield_sum_s_ = 0;       // the round's windows of sleeping waits: their sum
  int yield_windows_ = 0;        // ... and count
  double last_yield_s_ = 0;      // the last of them (s)
  std::optional<double> trial_lost_at_;  // when every candidate last lost (s)
  std::optional<double> last_fraction_;
  int64_t steps_ = 0, smaller_steps_ = 0, yield_steps_ = 0;
  int changes_ = 0;
};

/// GNU OpenMP's passive wait, switched on and off at run time. libgomp reads its spin count
/// once, when it is loaded, but while it manages more OpenMP threads than the CPUs the
/// process may run on, its waits spin only 100 times (1000 under OMP_WAIT_POLICY=active)
/// before they sleep (libgomp manual, "GOMP_SPINCOUNT"). start() parks that many more threads
/// asleep inside a parallel region of their own, on a helper thread; stop() lets them leave
/// it (threads of a team that has left its region do not count: measured, docs/benchmarks.md).
/// Idle, the trainer's 2-thread steps took 37.5 ms with them, as under
/// OMP_WAIT_POLICY=passive, against 13.1-13.9 ms without. Not thread-safe: one caller.
class ParkedThreads {
 public:
  ParkedThreads() = default;
  ParkedThreads(const ParkedThreads&) = delete;
  ParkedThreads& operator=(const ParkedThreads&) = delete;
  ~ParkedThreads() { stop(); }
  /// Parks enough threads that libgomp manages more than the available CPUs (the larger of
  /// the calling thread's affinity mask and omp_get_num_procs()) beside a team of `team`
  /// threads; returns once they are parked (true). False, with nothing parked and the reason
  /// in error(): more than kMaxParked would be needed, the helper thread could not start, or
  /// OpenMP gave fewer threads within 1 s (OMP_THREAD_LIMIT, OMP_DYNAMIC).
  bool start(int team);
  /// The most threads start() parks (a large machine with a small team needs many; libgomp
  /// ends the process when it cannot create one).
  static constexpr int kMaxParked = 64;
  /// Why the last start() returned false.
  const std::string& error() const { return error_; }
  /// Releases the parked threads and joins the helper (nothing when none are parked).
  void stop();
  /// Whether threads are parked now.
  bool parked() const { return helper_.joinable(); }
  /// The threads parked now (0: none).
  int count() const { return parked() ? want_ : 0; }

 private:
  std::thread helper_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool release_ = false;
  int in_ = 0, want_ = 0;
  std::string error_;
};

}  // namespace gt::cpu
