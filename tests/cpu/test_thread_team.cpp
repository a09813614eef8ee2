// The CPU backend's adaptive team (backend/cpu/thread_team.h): the decision on synthetic
// run-queue readings, the reading itself, and what the backend reports.
#include <dirent.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/onednn_matmul.h"
#include "backend/cpu/thread_team.h"

namespace gt::cpu {
namespace {

// A machine model: with k threads the team waits wait(k) of its time for a CPU and a step
// takes step(k) seconds; with sleeping waits (a full team), yield_step(k) seconds, or step(k)
// where the model has none. The clock advances by each step.
struct Machine {
  std::function<double(int)> wait, step;
  std::function<double(int)> yield_step = nullptr;
  double step_of(const ThreadTeam& t) const {
    return t.yielding() && yield_step ? yield_step(t.threads()) : step(t.threads());
  }
};
struct Clock {
  double now = 100.0, wait = 3.0;
  int reads = 0;
  ThreadTeam::WaitReader reader() {
    return [this]() -> std::optional<double> {
      ++reads;
      return wait;
    };
  }
  int step(ThreadTeam& t, double fraction, double step_s) {
    wait += fraction * step_s * t.threads();
    now += step_s;
    return t.end_step(now, step_s);
  }
  /// Steps of step_s at half the time waiting (the full team beside one busy process per
  /// core) through the spinning window and the round's window of sleeping waits, to the step
  /// that starts the smaller team's trial; returns its team size.
  int to_smaller_trial(ThreadTeam& t, double step_s) {
    int k = 2;
    while (k == 2) k = step(t, 0.5, step_s);
    return k;
  }
  int run(ThreadTeam& t, const Machine& m, double seconds) {
    const double end = now + seconds;
    while (now < end) step(t, m.wait(t.threads()), m.step_of(t));
    return t.threads();
  }
};
const Machine kIdle{[](int) { return 0.01; }, [](int k) { return 0.02 / k; }};
// beside one busy process per core (2 cores): spinning barriers collapse the full team
const Machine kCollapse{[](int k) { return k == 2 ? 0.5 : 1.0 / 3; },
                        [](int k) { return k == 2 ? 0.060 : 0.030; }};
// beside the same load, as measured on the 2-vCPU EPYC: the full spinning team is the faster
// (one thread 33 ms; sleeping waits 1.17x the spinning team, as passive's 37.1 against 31.7
// ms in call A of docs/benchmarks.md)
const Machine kShare{[](int k) { return k == 2 ? 0.5 : 1.0 / 3; },
                     [](int k) { return k == 2 ? 0.028 : 0.033; }, [](int) { return 0.033; }};
// the same, but sleeping waits only 3.5 % slower than the spinning team
const Machine kNearEqual{kShare.wait, kShare.step, [](int) { return 0.029; }};
// beside the same load, as measured on the AMX Xeon one evening: the full team's spinning
// waits collapse (53 ms), one thread is faster (41 ms), sleeping waits faster still (27 ms)
const Machine kSleepWins{[](int k) { return k == 2 ? 0.5 : 1.0 / 3; },
                         [](int k) { return k == 2 ? 0.053 : 0.041; }, [](int) { return 0.027; }};

TEST(ThreadTeam, AnIdleMachineKeepsTheFullTeam) {
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  EXPECT_EQ(c.run(t, kIdle, 20), 2);
  EXPECT_LE(c.reads, 20 / 0.5 + 1) << "read the run-queue wait more than once a window";
  const ThreadPolicy p = t.policy();
  EXPECT_EQ(p.policy, "adaptive");
  EXPECT_EQ(p.changes, 0);
  EXPECT_EQ(p.smaller_steps, 0);
  ASSERT_TRUE(p.runqueue_wait.has_value());
  EXPECT_NEAR(*p.runqueue_wait, 0.01, 1e-9);
}

TEST(ThreadTeam, KeepsASmallerTeamOnlyWhereItsStepsAreFaster) {
  {
    Clock c;
    ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
    EXPECT_EQ(c.run(t, kCollapse, 5), 1);
    EXPECT_FALSE(t.yielding()) << "sleeping waits are no faster on this machine";
    EXPECT_EQ(t.policy().changes, 4);  // sleeping waits, one thread, again each (one kept)
  }
  {
    // where sleeping waits cannot be had, the smaller team against the spinning one
    Clock c;
    ThreadTeam::Options o;
    o.try_yield = false;
    ThreadTeam t(2, true, o, c.reader());
    EXPECT_EQ(c.run(t, kShare, 5), 2);  // tried one thread, lost, went back
    EXPECT_FALSE(t.yielding());
    EXPECT_EQ(t.policy().changes, 2);
    EXPECT_EQ(c.run(t, kShare, 3), 2);  // 8 s in all: within the probe interval of the loss
    EXPECT_EQ(t.policy().changes, 2) << "a lost trial was repeated within the probe interval";
    c.run(t, kShare, 30);
    const ThreadPolicy p = t.policy();
    EXPECT_LT(p.smaller_steps, p.steps / 10) << "trials took more than a tenth of the steps";
  }
  {
    // 5 % faster with one thread: within a noisy machine's spread, not worth a change
    Clock c;
    ThreadTeam::Options o;
    o.try_yield = false;
    ThreadTeam t(2, true, o, c.reader());
    EXPECT_EQ(c.run(t, Machine{kShare.wait, [](int k) { return k == 2 ? 0.030 : 0.0285; }}, 5), 2);
  }
}

TEST(ThreadTeam, UnderContentionSleepingWaitsAreTheDefault) {
  // the spinning team 3.5 % faster than sleeping waits: the waits sleep (the spinning team is
  // not kept beside other work; never slower than OMP_WAIT_POLICY=passive)
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  EXPECT_EQ(c.run(t, kNearEqual, 5), 2);
  EXPECT_TRUE(t.yielding());
  // one thread 5 % faster than sleeping waits: the same
  Clock c2;
  ThreadTeam t2(2, true, ThreadTeam::Options{}, c2.reader());
  c2.run(t2,
         Machine{kShare.wait, [](int k) { return k == 2 ? 0.040 : 0.0285; },
                 [](int) { return 0.030; }},
         5);
  EXPECT_EQ(t2.threads(), 2);
  EXPECT_TRUE(t2.yielding());
}

TEST(ThreadTeam, BesideOtherWorkTheSpinningTeamIsNotKept) {
  // even where its window was faster (the EPYC's measurement): the next one can collapse
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  c.run(t, kShare, 30);
  EXPECT_TRUE(t.yielding());
  const ThreadPolicy p = t.policy();
  // the first step (it starts the first window), then that window's 0.5 s
  EXPECT_EQ(p.steps - p.yield_steps - p.smaller_steps, 1 + std::ceil(0.5 / 0.028))
      << "the spinning team ran beyond the window that found the contention";
}

TEST(ThreadTeam, OtherRunnableWorkEndsTheSpinningWindowEarly) {
  // the run queue holds more runnable tasks than CPUs at every step: the spinning team's first
  // window ends after 0.1 s (and 2 steps) instead of 0.5 s, and the round starts there
  int runnable = 4, reads = 0;
  auto reader = [&]() -> std::optional<int> {
    ++reads;
    return runnable;
  };
  {
    Clock c;
    ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader(), reader, 2);
    c.run(t, kShare, 30);
    EXPECT_TRUE(t.yielding());
    const ThreadPolicy p = t.policy();
    EXPECT_EQ(p.steps - p.yield_steps - p.smaller_steps, 1 + std::ceil(0.1 / 0.028))
        << "the spinning team ran its whole window beside other runnable work";
    EXPECT_LE(reads, 1 + std::ceil(0.1 / 0.028)) << "read the run queue outside spinning windows";
  }
  {
    // one step saw the CPUs free (a competitor between bursts): the whole window
    Clock c;
    runnable = 2;
    ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader(), reader, 2);
    c.step(t, 0.5, 0.028);
    c.step(t, 0.5, 0.028);
    runnable = 4;
    c.run(t, kShare, 30);
    const ThreadPolicy p = t.policy();
    EXPECT_EQ(p.steps - p.yield_steps - p.smaller_steps, 1 + std::ceil(0.5 / 0.028));
  }
  {
    // runnable tasks elsewhere on the machine but no wait for this run's threads (another
    // job's cores): windows end early, and nothing changes
    Clock c;
    runnable = 64;
    ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader(), reader, 2);
    EXPECT_EQ(c.run(t, kIdle, 20), 2);
    EXPECT_FALSE(t.yielding());
    EXPECT_EQ(t.policy().changes, 0);
  }
}

TEST(ThreadTeam, AKeptCandidateIsMeasuredAgainLessOftenWhileItStaysTheChoice) {
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  ASSERT_EQ(c.run(t, kSleepWins, 4), 2);
  ASSERT_TRUE(t.yielding());
  const ThreadPolicy before = t.policy();
  // a round (sleeping, one thread, sleeping again: 2 changes) at 8, 8 + 16, 8 + 16 + 32 s ...
  c.run(t, kSleepWins, 120);
  const ThreadPolicy p = t.policy();
  const int64_t steps = p.steps - before.steps, yielding = p.yield_steps - before.yield_steps;
  EXPECT_LE(p.changes - before.changes, 2 * 4) << "more than four rounds";
  EXPECT_GE(p.changes - before.changes, 2 * 3) << "fewer than three rounds";
  EXPECT_GT(yielding, steps * 98 / 100) << "trials took more than 2 % of the steps";
  EXPECT_TRUE(t.yielding());
}

TEST(ThreadTeam, AKeptCandidateGivesWayToAFasterOne) {
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  ASSERT_EQ(c.run(t, kSleepWins, 4), 2);
  ASSERT_TRUE(t.yielding());
  // the competitor changes: now one thread is twice as fast as the team, whose waits spin or
  // sleep (kCollapse)
  // (sleeping waits now step at 60 ms against 27 when they won: their slowdown calls the round)
  EXPECT_EQ(c.run(t, kCollapse, 12), 1) << "no round of trials after the slowdown";
  EXPECT_FALSE(t.yielding());
}

// A kept smaller team that steps slower than when it won (the scheduler placed its thread
// beside a busy process where it had had a core to itself): two windows slower by more than
// the margin and its round comes at once, where sleeping waits now win; a smaller slowdown keeps
// it until the probe interval.
TEST(ThreadTeam, AKeptSmallerTeamThatSlowsDownIsMeasuredAgainAtOnce) {
  for (const double later : {0.045, 0.032}) {
    SCOPED_TRACE(later);
    double one = 0.030;  // one thread's step (s); sleeping waits 40 ms, spinning 60 ms
    const Machine m{kCollapse.wait, [&](int k) { return k == 2 ? 0.060 : one; },
                    [](int) { return 0.040; }};
    Clock c;
    ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
    ASSERT_EQ(c.run(t, m, 5), 1) << "one thread won its round";
    const int changes = t.policy().changes;
    one = later;
    c.run(t, m, 3);  // two slow windows, then a round: sleeping waits, one thread (lost)
    if (later > 0.030 * 1.1) {
      EXPECT_EQ(t.threads(), 2);
      EXPECT_TRUE(t.yielding()) << "the round's winner";
      EXPECT_EQ(t.policy().changes, changes + 3);
      c.run(t, m, 4);  // within the probe interval: no round
      EXPECT_EQ(t.policy().changes, changes + 3);
    } else {
      EXPECT_EQ(t.threads(), 1) << "a slowdown within the margin";
      EXPECT_EQ(t.policy().changes, changes);
    }
  }
}

// Kept sleeping waits that step slower than when they won (seen beside one busy process per
// core: 30 ms, then 72-76 ms for seconds, where one thread stepped at 36-38 ms): two windows
// slower by more than the margin and their round comes at once, where one thread now wins; a
// smaller slowdown keeps them until the probe interval.
TEST(ThreadTeam, KeptSleepingWaitsThatSlowDownAreMeasuredAgainAtOnce) {
  for (const double later : {0.074, 0.032}) {
    SCOPED_TRACE(later);
    double sleeping = 0.030;  // sleeping waits' step (s); one thread 37 ms, spinning 60 ms
    const Machine m{kCollapse.wait, [](int k) { return k == 2 ? 0.060 : 0.037; },
                    [&](int) { return sleeping; }};
    Clock c;
    ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
    ASSERT_EQ(c.run(t, m, 5), 2);
    ASSERT_TRUE(t.yielding()) << "sleeping waits won their round";
    const int changes = t.policy().changes;
    sleeping = later;
    c.run(t, m, 4);  // two slow windows, then a round: sleeping waits, one thread (won), twice
    if (later > 0.030 * 1.1) {
      EXPECT_EQ(t.threads(), 1) << "the round's winner";
      EXPECT_FALSE(t.yielding());
      EXPECT_EQ(t.policy().changes, changes + 3);
      c.run(t, m, 4);  // within the probe interval: no round
      EXPECT_EQ(t.policy().changes, changes + 3);
    } else {
      EXPECT_TRUE(t.yielding()) << "a slowdown within the margin";
      EXPECT_EQ(t.policy().changes, changes);
    }
  }
}

// Runs `seconds` of m with sleeping waits' step (`sleeping`, read by m) drawn again every half
// second, a window's worth of steps at one speed: 30 or 37 ms (rng() & 1, whose sequence the
// standard fixes).
void run_noisy_sleeping_waits(Clock& c, ThreadTeam& t, const Machine& m, double& sleeping,
                              std::mt19937& rng, double seconds) {
  const double end = c.now + seconds;
  for (double next = c.now; c.now < end;) {
    if (c.now >= next) {
      sleeping = (rng() & 1) ? 0.037 : 0.030;
      next = c.now + 0.5;
    }
    c.step(t, m.wait(t.threads()), m.step_of(t));
  }
}

// Kept sleeping waits whose windows scatter by 23 % (30 or 37 ms, at random; one thread 40
// ms): a round that their slowdown called and that keeps them doubles the slowdown that calls
// the next, so rounds do not come back to back.
TEST(ThreadTeam, NoisyWindowsDoNotCallRoundsBackToBack) {
  std::mt19937 rng(7);
  double sleeping = 0.030;
  const Machine m{kCollapse.wait, [](int k) { return k == 2 ? 0.060 : 0.040; },
                  [&](int) { return sleeping; }};
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  run_noisy_sleeping_waits(c, t, m, sleeping, rng, 240);
  const ThreadPolicy p = t.policy();
  // the first round, the probe interval's (8 s, doubled while the choice holds, afresh after
  // a round the slowdown called) and at most two the slowdown called (10 %, then 20 %; the
  // windows differ by at most 23 %): 19-23 changes in 240 s (seeds 1-7); without the
  // doubling, 41-65
  EXPECT_LE(p.changes, 30) << "rounds came back to back";
  EXPECT_GT(p.yield_steps, p.steps * 9 / 10);
}

// The doubled slowdown lasts while the choice holds: when another choice wins, a slowdown
// of 10 % calls its round at once again.
TEST(ThreadTeam, ANewChoiceIsMeasuredAgainAtTheMarginAgain) {
  std::mt19937 rng(7);
  double sleeping = 0.030, one = 0.040;  // one thread's step (s)
  const Machine m{kCollapse.wait, [&](int k) { return k == 2 ? 0.060 : one; },
                  [&](int) { return sleeping; }};
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  run_noisy_sleeping_waits(c, t, m, sleeping, rng, 60);  // the slowdown doubled, at least once
  ASSERT_TRUE(t.yielding());
  sleeping = 0.060;  // sleeping waits slow down for good, one thread now wins (25 ms)
  one = 0.025;
  c.run(t, m, 4);
  ASSERT_EQ(t.threads(), 1) << "one thread won the round the slowdown called";
  const int changes = t.policy().changes;
  one = 0.029;  // 16 % slower than when it won: above the margin, below a doubled one
  c.run(t, m, 3);
  EXPECT_GT(t.policy().changes, changes) << "no round within 3 s (the probe interval is 8 s)";
}

TEST(ThreadTeam, KeepsSleepingWaitsWhereTheyAreTheFastest) {
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  EXPECT_EQ(c.run(t, kSleepWins, 5), 2);
  EXPECT_TRUE(t.yielding()) << "the fastest candidate was not kept";
  ThreadPolicy p = t.policy();
  EXPECT_TRUE(p.yielding);
  EXPECT_GT(p.yield_steps, 0);
  // free cores again: the full team spins
  EXPECT_EQ(c.run(t, kIdle, 1), 2);
  EXPECT_FALSE(t.yielding());
  // and not tried where the options say so: one thread, the faster of the rest
  Clock c2;
  ThreadTeam::Options o;
  o.try_yield = false;
  ThreadTeam t2(2, true, o, c2.reader());
  EXPECT_EQ(c2.run(t2, kSleepWins, 5), 1);
  EXPECT_FALSE(t2.yielding());
}

TEST(ThreadTeam, SleepingWaitsThatCannotBeHadAreNotTriedAgain) {
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  // up to the first window of sleeping waits, where the caller fails to park threads
  for (int i = 0; i < 400 && !t.yielding(); ++i)
    c.step(t, kSleepWins.wait(t.threads()), kSleepWins.step_of(t));
  ASSERT_TRUE(t.yielding());
  t.disable_yield("OpenMP gave 1 of the 2 threads asked for");
  EXPECT_FALSE(t.yielding());
  EXPECT_EQ(t.threads(), 2) << "a window of the spinning team first: the smaller one's reference";
  EXPECT_EQ(t.policy().yield_unavailable_reason, "OpenMP gave 1 of the 2 threads asked for");
  const int64_t yield_steps = t.policy().yield_steps;
  EXPECT_EQ(c.run(t, kSleepWins, 3), 1) << "one thread beats the spinning team here";
  c.run(t, kSleepWins, 30);  // rounds again, each after a window of the spinning team
  EXPECT_FALSE(t.yielding());
  EXPECT_EQ(t.threads(), 1);
  EXPECT_EQ(t.policy().yield_steps, yield_steps) << "sleeping waits tried again";
}

TEST(ThreadTeam, KeptSleepingWaitsThatCannotBeHadGiveWayToARoundNotToSpinning) {
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  ASSERT_EQ(c.run(t, kSleepWins, 4), 2);
  ASSERT_TRUE(t.yielding());
  t.disable_yield("parking failed");  // (as a later ParkedThreads::start might)
  EXPECT_FALSE(t.yielding());
  // a window of the spinning team, then one thread's two windows: not 8 s of spinning
  EXPECT_EQ(c.run(t, kSleepWins, 2.5), 1);
}

TEST(ThreadTeam, KeptSleepingWaitsAreMeasuredAgainAfterTheProbeInterval) {
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  ASSERT_EQ(c.run(t, kSleepWins, 3), 2);
  ASSERT_TRUE(t.yielding());
  const ThreadPolicy before = t.policy();
  const double since = c.now;
  while (c.now < since + 20 && t.yielding()) c.step(t, 0.5, 0.027);
  ASSERT_FALSE(t.yielding()) << "never measured one thread again";
  EXPECT_EQ(t.threads(), 1) << "the round's trial of one thread";
  const ThreadPolicy p = t.policy();
  EXPECT_EQ(p.steps - p.yield_steps - p.smaller_steps,
            before.steps - before.yield_steps - before.smaller_steps)
      << "the spinning team ran beside the load";
  EXPECT_GE(c.now - since, 8.0 - 3.0);
  EXPECT_EQ(c.run(t, kSleepWins, 3), 2);
  EXPECT_TRUE(t.yielding()) << "one thread is still slower: sleeping waits again";
}

TEST(ThreadTeam, TriesTheSizeOfTheCpuItWasGetting) {
  for (auto [team, wait, trial] : {std::tuple{64, 0.25, 48}, {2, 0.5, 1}, {4, 0.9, 1}}) {
    Clock c;
    ThreadTeam t(team, true, ThreadTeam::Options{}, c.reader());
    int k = team;
    for (int i = 0; i < 40 && k == team; ++i) k = c.step(t, wait, 0.05);
    EXPECT_EQ(k, trial) << team << " threads waiting " << wait;
  }
  Clock c;
  ThreadTeam t(8, true, ThreadTeam::Options{}, c.reader());
  EXPECT_EQ(c.run(t, Machine{[](int) { return 0.15; }, [](int) { return 0.05; }}, 5), 8)
      << "below the threshold (0.2) is noise, not contention";
}

TEST(ThreadTeam, ReturnsToTheFullTeamWhenTheCoresAreFree) {
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  ASSERT_EQ(c.run(t, kCollapse, 3), 1);
  EXPECT_EQ(c.run(t, kIdle, 1), 2);
}

TEST(ThreadTeam, FreeCoresEndTheChoiceAndOnlyContentionStartsARoundAgain) {
  // after the choice ends, a wait fraction between the two thresholds (0.05, 0.2) is no
  // contention: the full spinning team stays (a choice still held would start a round there
  // after its probe interval)
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  ASSERT_EQ(c.run(t, kCollapse, 3), 1);
  ASSERT_EQ(c.run(t, kIdle, 1), 2);
  const int changes = t.policy().changes;
  const Machine kBetween{[](int) { return 0.1; }, [](int k) { return 0.02 / k; }};
  EXPECT_EQ(c.run(t, kBetween, 30), 2);
  EXPECT_FALSE(t.yielding());
  EXPECT_EQ(t.policy().changes, changes) << "a round started below the contention threshold";
}

TEST(ThreadTeam, AKeptSmallerTeamIsMeasuredAgainAfterTheProbeInterval) {
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  ASSERT_EQ(c.run(t, kCollapse, 3), 1);
  const double since = c.now;
  while (c.now < since + 20 && t.threads() == 1) c.step(t, 1.0 / 3, 0.030);
  ASSERT_EQ(t.threads(), 2) << "never measured the full team again";
  EXPECT_TRUE(t.yielding()) << "the round's window of sleeping waits";
  EXPECT_GE(c.now - since, 8.0 - 3.0);  // not before the probe interval (the trials ended in
                                        // the first 3 s)
  EXPECT_EQ(c.run(t, kCollapse, 3), 1) << "the full team is still slower: one thread again";
}

TEST(ThreadTeam, TheStepAfterAChangeIsLeftOutOfTheTrial) {
  // the first step of a new team size makes oneDNN's products for it: slow once
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  ASSERT_EQ(c.to_smaller_trial(t, 0.060), 1);  // spinning, then a window of sleeping waits
  c.step(t, 1.0 / 3, 0.5);                     // the slow first step
  // (then one thread twice as fast as the full team, whose waits spin or sleep)
  EXPECT_EQ(
      c.run(t, Machine{[](int) { return 1.0 / 3; }, [](int k) { return k == 2 ? 0.060 : 0.030; }},
            3),
      1);
}

TEST(ThreadTeam, AChangeOfTheWaitsAloneLeavesNoStepOut) {
  // the same team size needs no new products: the window of sleeping waits starts at once
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  while (!t.yielding()) c.step(t, 0.5, 0.053);
  int steps = 0;
  while (t.yielding()) {
    c.step(t, 0.5, 0.027);
    ++steps;
  }
  EXPECT_EQ(steps, 19) << "0.5 s of 27 ms steps (the step after the change counted)";
}

TEST(ThreadTeam, ASmallerTeamMustWinEachWindowOfItsTrial) {
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  ASSERT_EQ(c.to_smaller_trial(t, 0.050), 1);  // spinning, then a window of sleeping waits
  c.step(t, 1.0 / 3, 0.050);                   // left out
  for (int i = 0; i < 26; ++i) c.step(t, 1.0 / 3, 0.020);  // a lucky window (0.52 s)
  ASSERT_TRUE(t.yielding()) << "a window of sleeping waits again, side by side";
  while (t.yielding()) c.step(t, 0.5, 0.050);
  ASSERT_EQ(t.threads(), 1);
  for (int i = 0; i < 14 && t.threads() == 1; ++i) c.step(t, 1.0 / 3, 0.060);  // the truth
  EXPECT_EQ(t.threads(), 2) << "one lucky window kept the smaller team";
  EXPECT_TRUE(t.yielding()) << "sleeping waits were the faster";
}

TEST(ThreadTeam, FixedNeverChangesAndAnUnreadableKernelKeepsTheFullTeam) {
  {
    Clock c;
    ThreadTeam t(2, false, ThreadTeam::Options{}, c.reader());
    EXPECT_EQ(c.run(t, kCollapse, 5), 2);
    EXPECT_EQ(t.policy().policy, "fixed");
    EXPECT_FALSE(t.measuring());
  }
  {
    ThreadTeam t(2, true, ThreadTeam::Options{}, [] { return std::optional<double>(); });
    EXPECT_EQ(t.end_step(1.0, 0.01), 2);
    EXPECT_FALSE(t.measuring());
    EXPECT_NE(t.policy().runqueue_wait_unknown_reason.find("schedstat"), std::string::npos);
  }
  {
    ThreadTeam t(1, true);
    EXPECT_FALSE(t.measuring());  // nothing to shrink
  }
}

TEST(ThreadTeam, TheWaitIsAveragedOverAWindowNotOneStep) {
  Clock c;
  ThreadTeam t(2, true, ThreadTeam::Options{}, c.reader());
  c.step(t, 0.0, 0.05);  // starts the window
  // one 10 ms step that waited entirely, inside a quarter second of idle steps
  EXPECT_EQ(c.step(t, 1.0, 0.01), 2);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.step(t, 0.0, 0.05), 2);
}

int process_threads();

// The total is over the threads alive at each reading: one that ends between two readings
// (an OpenMP thread of an earlier test's team, leaving late on a busy machine) takes its wait
// with it, so the two are compared only when the process had the same threads at both.
TEST(ThreadTeam, TheProcessRunQueueWaitIsReadAndNeverDecreases) {
  if (!process_runqueue_wait_s()) GTEST_SKIP() << "no /proc/self/task/*/schedstat on this kernel";
  int compared = 0;
  for (int attempt = 0; attempt < 20 && compared == 0; ++attempt) {
    const int n0 = process_threads();
    const auto a = process_runqueue_wait_s();
    volatile double x = 0;
    for (int i = 0; i < 1000000; ++i) x = x + i;
    const auto b = process_runqueue_wait_s();
    ASSERT_TRUE(a.has_value() && b.has_value());
    EXPECT_GE(*a, 0.0);
    if (process_threads() != n0) continue;  // a thread started or ended in between
    EXPECT_GE(*b, *a);
    ++compared;
  }
  EXPECT_EQ(compared, 1) << "the process's threads changed in each of 20 attempts";
}

// The machine's runnable tasks: this thread is running while it reads them, so at least one;
// a thread that spins beside it is counted too.
TEST(ThreadTeam, TheMachinesRunnableTasksCountThisThread) {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) GTEST_SKIP() << "no /proc/loadavg";
  std::fclose(f);
  const std::optional<int> n = system_runnable_tasks();
  ASSERT_TRUE(n.has_value());
  EXPECT_GE(*n, 1);
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    while (!stop.load()) {
    }
  });
  int most = 0;
  for (int i = 0; i < 200; ++i) most = std::max(most, system_runnable_tasks().value_or(0));
  stop = true;
  spinner.join();
  EXPECT_GE(most, 2) << "a spinning thread beside this one was never counted";
}

// Threads of this process (/proc/self/task entries); -1 without /proc.
int process_threads() {
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

// Polls process_threads() for up to 2 s until it equals want.
int threads_settle_at(int want) {
  int n = process_threads();
  for (int i = 0; i < 200 && n != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    n = process_threads();
  }
  return n;
}

TEST(ParkedThreads, ParksMoreThreadsThanTheCpusBesideTheTeamAndReleasesThem) {
  const int base = process_threads();
  if (base < 0) GTEST_SKIP() << "no /proc/self/task";
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int cpus = CPU_COUNT(&set);
  ParkedThreads p;
  EXPECT_FALSE(p.parked());
  ASSERT_TRUE(p.start(2));
  EXPECT_TRUE(p.parked());
  // libgomp then counts the team (2) and the parked team's own threads (count - 1)
  EXPECT_GT(2 + p.count() - 1, cpus);
  EXPECT_EQ(threads_settle_at(base + p.count()), base + p.count())
      << "the helper and its OpenMP threads";
  EXPECT_TRUE(p.start(2)) << "a second start is a no-op";
  p.stop();
  EXPECT_FALSE(p.parked());
  EXPECT_EQ(threads_settle_at(base), base) << "the parked threads did not leave";
  p.stop();  // twice: nothing
  // and again, as the adaptive policy switches back and forth
  ASSERT_TRUE(p.start(1));
  EXPECT_GT(1 + p.count() - 1, cpus);
  p.stop();
  EXPECT_EQ(threads_settle_at(base), base);
}

TEST(ThreadTeam, TheCpuBackendReportsItsPolicy) {
  const auto adaptive = make_backend("cpu", {.threads = 2, .adaptive_threads = true});
  auto p = adaptive->thread_policy();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->policy, "adaptive");
  EXPECT_EQ(p->team, 2);
  EXPECT_EQ(p->threads, 2);
  EXPECT_FALSE(p->yielding) << "an idle start spins";
  EXPECT_EQ(p->yield_steps, 0);
  EXPECT_FALSE(adaptive->thread_count().yielding);
  const auto fixed = make_backend("cpu", {.threads = 3, .adaptive_threads = false});
  p = fixed->thread_policy();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->policy, "fixed");
  EXPECT_EQ(p->team, 3);
  EXPECT_FALSE(make_backend("ref")->thread_policy().has_value());
}

// A run whose team shrinks on a busy machine trains bitwise as on an idle one where oneDNN
// divides a product's work among the threads without splitting its sums: so at the shapes of
// the presets and tests (a resumed run is compared bitwise with an uninterrupted one, and the
// two may run at different team sizes). Shapes (M, N, K) of the quickstart's and
// shakespeare-char's products, forward and backward; fp32 and bf16.
TEST(ThreadTeam, TheProductsOfOneAndTwoThreadsAgree) {
  const int saved = omp_get_max_threads();
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (MmType type : {MmType::f32, MmType::bf16}) {
    if (!onednn_supports(type)) continue;
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{768, 384, 128},
                           {768, 128, 512},
                           {768, 65, 128},
                           {2048, 1152, 384},
                           {2048, 384, 1536},
                           {384, 1536, 2048},
                           {64, 24, 16}}) {
      const size_t es = type == MmType::f32 ? 4 : 2;
      std::vector<float> af(M * K), bf(K * N);
      for (auto& x : af) x = nd(rng);
      for (auto& x : bf) x = nd(rng);
      std::vector<unsigned char> a(M * K * es), b(K * N * es);
      if (type == MmType::f32) {
        std::memcpy(a.data(), af.data(), a.size());
        std::memcpy(b.data(), bf.data(), b.size());
      } else {  // bf16: the high half of each float
        for (int64_t i = 0; i < M * K; ++i) std::memcpy(&a[2 * i], (char*)&af[i] + 2, 2);
        for (int64_t i = 0; i < K * N; ++i) std::memcpy(&b[2 * i], (char*)&bf[i] + 2, 2);
      }
      std::vector<float> c1(M * N), c2(M * N);
      omp_set_num_threads(1);
      onednn_matmul(c1.data(), a.data(), b.data(), nullptr, M, N, K, false, false, false, type);
      omp_set_num_threads(2);
      onednn_matmul(c2.data(), a.data(), b.data(), nullptr, M, N, K, false, false, false, type);
      const std::string what =
          fmt::format("{} {}x{}x{}", type == MmType::f32 ? "f32" : "bf16", M, N, K);
      if (type == MmType::bf16 && onednn_uses_amx()) {
        // AMX bf16 products may reduce K in parallel (onednn_uses_amx): the same to fp32
        // rounding, not bit for bit (docs/configuration.md, train.thread_policy)
        double d = 0, n = 0;
        for (size_t i = 0; i < c1.size(); ++i) {
          d += double(c1[i] - c2[i]) * (c1[i] - c2[i]);
          n += double(c1[i]) * c1[i];
        }
        EXPECT_LE(std::sqrt(d / n), 1e-6) << what;
      } else {
        EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * 4), 0) << what;
      }
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace gt::cpu
