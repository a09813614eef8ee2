// The power-limit search driven step by step (PowerLimitOptimizer) on simulated devices, a
// clock the test moves and an energy counter fed by the simulated power: its states, the same
// choice and figures as tune_power_limit, epoch ends, profile reuse, and the limits restored on
// every exit path (close, destructor after an exception, a set that fails).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "core/error.h"
#include "energy/meter.h"
#include "tune/optimizer.h"
#include "tune/simulated.h"
#include "tune/tuner.h"

using namespace gt::tune;
using State = PowerLimitOptimizer::State;

namespace {

// An energy counter (J) that the simulated loop below fills.
class CounterSensor : public gt::energy::Sensor {
 public:
  explicit CounterSensor(std::shared_ptr<double> j) : j_(std::move(j)) {
    info_.name = "sim-counter";
    info_.domain = "gpu";
    info_.kind = gt::energy::SensorKind::kEnergyCounter;
    info_.unit = "J";
    info_.available = true;
    info_.method = "the simulated devices' power x time";
  }
  const gt::energy::SensorInfo& info() const override { return info_; }
  gt::energy::Reading read(double) override { return {true, "", *j_, std::nullopt, {}, false}; }

 private:
  gt::energy::SensorInfo info_;
  std::shared_ptr<double> j_;
};

// A training loop over simulated devices in lock-step: a step takes the slowest device's time at
// its limit (the clock moves by it) and each device's power for that time (the counter grows).
struct SimLoop {
  std::vector<std::shared_ptr<SimulatedDevice>> sims;
  std::vector<DevicePtr> devices;
  double mono_s = 1000, unix_s = 1.6e9;
  std::shared_ptr<double> energy_j = std::make_shared<double>(0);
  std::unique_ptr<gt::energy::Meter> meter;

  explicit SimLoop(int n = 1, double initial_w = 250) {
    for (int i = 0; i < n; ++i) {
      SimulatedModel m;
      m.initial_w = initial_w;
      sims.push_back(std::make_shared<SimulatedDevice>(m, "sim:" + std::to_string(i)));
      devices.push_back(sims.back());
    }
    gt::energy::SensorList s;
    s.push_back(std::make_unique<CounterSensor>(energy_j));
    gt::energy::MeterOptions o;
    o.interval_s = 0;  // no sampling thread: the windows read the counter at their ends
    o.lock_dir = ::testing::TempDir();
    meter = std::make_unique<gt::energy::Meter>(
        std::move(s), o,
        gt::energy::MeterClock{[this] { return mono_s; }, [this] { return unix_s; }});
  }
  void step() {
    double t = 0;
    for (const auto& d : sims) t = std::max(t, d->model().step_s(d->limit_w()));
    for (const auto& d : sims) *energy_j += d->model().power_w(d->limit_w()) * t;
    mono_s += t;
    unix_s += t;
  }
  // Runs marked steps until the optimizer is done (at most max_steps); returns how many ran.
  int run(PowerLimitOptimizer& plo, int max_steps = 1000) {
    int n = 0;
    while (!plo.done() && n < max_steps) {
      plo.begin_step();
      if (plo.done()) break;
      step();
      ++n;
      plo.end_step();
    }
    return n;
  }
};

TuneOptions options(Objective o = Objective::energy, int warmup = 1, int profile = 2) {
  TuneOptions opt;
  opt.objective = o;
  opt.warmup_steps = warmup;
  opt.profile_steps = profile;
  return opt;
}

}  // namespace

TEST(StepOptimizer, MovesThroughWarmupAndProfilingToTheChosenLimit) {
  SimLoop loop;
  PowerLimitOptimizer plo(loop.devices, *loop.meter, options());
  EXPECT_EQ(plo.state(), State::idle);
  EXPECT_TRUE(loop.sims[0]->set_log_w.empty());  // nothing before the first step
  // the first candidate: one warm-up step, then two profiled ones, all at 400 W
  const State expected[] = {State::warmup, State::profiling, State::profiling, State::warmup};
  const double limit_w[] = {400, 400, 400, 375};
  for (int i = 0; i < 4; ++i) {
    plo.begin_step();
    EXPECT_EQ(plo.state(), expected[i]) << "step " << i;
    EXPECT_EQ(plo.current_limit_w(), limit_w[i]) << "step " << i;
    EXPECT_EQ(loop.sims[0]->limit_w(), limit_w[i]) << "step " << i;
    loop.step();
    plo.end_step();
  }
  EXPECT_EQ(loop.run(plo) + 4, 13 * 3);  // 13 candidates x (1 warm-up + 2 profiled)
  ASSERT_TRUE(plo.done());
  // the chosen limit (the simulated curve's optimum, 150 W) stays in force until close()
  EXPECT_EQ(plo.chosen_limit_w(), 150);
  EXPECT_EQ(loop.sims[0]->limit_w(), 150);
  const auto& log = loop.sims[0]->set_log_w;
  ASSERT_EQ(log.size(), 13u + 2);
  EXPECT_EQ(log[12], 100);  // the last candidate
  EXPECT_EQ(log[13], 250);  // the search restored the limit in force before
  plo.begin_step();         // no-ops once done
  plo.end_step();
  EXPECT_EQ(log.size(), 15u);
  plo.close();
  EXPECT_EQ(plo.state(), State::closed);
  EXPECT_EQ(loop.sims[0]->limit_w(), 250);
}

TEST(StepOptimizer, ChoosesAndMeasuresAsTheSearchOverAProfileFunction) {
  for (Objective o : {Objective::energy, Objective::time, Objective::cost, Objective::slowdown}) {
    SimLoop loop(2);
    PowerLimitOptimizer plo(loop.devices, *loop.meter, options(o), /*apply_best=*/false);
    loop.run(plo);
    ASSERT_TRUE(plo.done()) << objective_name(o);
    auto a = std::make_shared<SimulatedDevice>(SimulatedModel{}, "sim:0");
    auto b = std::make_shared<SimulatedDevice>(SimulatedModel{}, "sim:1");
    const TuneResult want = tune_power_limit({a, b}, simulated_profile({a, b}), options(o));
    const TuneResult& got = *plo.result();
    EXPECT_EQ(got.chosen_limit_w, want.chosen_limit_w) << objective_name(o);
    EXPECT_DOUBLE_EQ(got.p_max_w, want.p_max_w);
    ASSERT_EQ(got.points.size(), want.points.size());
    for (std::size_t i = 0; i < got.points.size(); ++i) {
      EXPECT_EQ(got.points[i].limit_w, want.points[i].limit_w);
      EXPECT_NEAR(got.points[i].energy_per_step_j, want.points[i].energy_per_step_j, 1e-6);
      EXPECT_NEAR(got.points[i].time_per_step_s, want.points[i].time_per_step_s, 1e-9);
    }
    EXPECT_EQ(got.original_limits_w, (std::vector<double>{250, 250}));
    for (const auto& d : loop.sims) EXPECT_EQ(d->limit_w(), 250);  // apply_best = false
  }
}

TEST(StepOptimizer, BeginningsAloneMeasureFromOneBeginningToTheNext) {
  SimLoop loop;
  TuneOptions opt = options(Objective::time, 0, 2);
  opt.step_w = 100;  // 400, 300, 200, 100
  PowerLimitOptimizer plo(loop.devices, *loop.meter, opt);
  int n = 0;
  while (!plo.done() && n < 50) {
    plo.begin_step();  // ends the step before
    ++n;
    loop.step();
  }
  EXPECT_EQ(n, 9);  // 4 candidates x 2 profiled steps; the 9th beginning ends the last profile
  ASSERT_EQ(plo.result()->points.size(), 4u);
  EXPECT_NEAR(plo.result()->points[0].time_per_step_s, loop.sims[0]->model().step_s(400), 1e-9);
}

TEST(StepOptimizer, RestoresTheLimitWhenAnExceptionLeavesTheLoop) {
  for (bool after_the_search : {false, true}) {
    SimLoop loop;
    try {
      PowerLimitOptimizer plo(loop.devices, *loop.meter, options());
      if (after_the_search) loop.run(plo);
      for (int i = 0; i < 5; ++i) {
        plo.begin_step();
        loop.step();
        plo.end_step();
      }
      EXPECT_NE(loop.sims[0]->limit_w(), 250);  // a candidate, or the chosen 150 W
      throw std::runtime_error("loss diverged");
    } catch (const std::runtime_error&) {
    }
    EXPECT_EQ(loop.sims[0]->limit_w(), 250) << after_the_search;
    EXPECT_EQ(loop.sims[0]->set_log_w.back(), 250);
  }
}

TEST(StepOptimizer, ASetThatFailsLeavesTheSearchFailedAndTheLimitRestored) {
  SimLoop loop;
  loop.sims[0]->fail_set_at_w = 300;
  PowerLimitOptimizer plo(loop.devices, *loop.meter, options());
  try {
    loop.run(plo);
    FAIL() << "the failing set was not reported";
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("power-limit search failed"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(plo.state(), State::failed);
  EXPECT_FALSE(plo.error().empty());
  EXPECT_EQ(loop.sims[0]->limit_w(), 250);
  plo.begin_step();  // thrown once; then nothing happens
  plo.end_step();
  EXPECT_EQ(plo.state(), State::failed);
}

TEST(StepOptimizer, RefusesWithoutPermissionBeforeAnyChange) {
  SimLoop loop;
  loop.sims[0]->permission_problem_ = "root";
  PowerLimitOptimizer plo(loop.devices, *loop.meter, options());
  EXPECT_THROW(plo.check_permission(), gt::Error);
  EXPECT_THROW(plo.begin_step(), gt::Error);
  EXPECT_EQ(plo.state(), State::idle);
  EXPECT_TRUE(loop.sims[0]->set_log_w.empty());
}

TEST(StepOptimizer, AnEpochEndRestartsTheLimitsWarmup) {
  SimLoop loop;
  PowerLimitOptimizer plo(loop.devices, *loop.meter, options(Objective::energy, 1, 2));
  for (int i = 0; i < 2; ++i) {  // warm-up and one profiled step at 400 W
    plo.begin_step();
    loop.step();
    plo.end_step();
  }
  plo.epoch_end();
  EXPECT_EQ(plo.state(), State::warmup);
  EXPECT_EQ(plo.current_limit_w(), 400);
  for (int i = 0; i < 3; ++i) {
    plo.begin_step();
    EXPECT_EQ(loop.sims[0]->limit_w(), 400) << i;  // all three again at 400 W
    loop.step();
    plo.end_step();
  }
  EXPECT_EQ(plo.current_limit_w(), 375);
  // an epoch end with no step at the new limit yet discards nothing
  plo.epoch_end();
  plo.begin_step();
  EXPECT_EQ(plo.state(), State::warmup);
}

TEST(StepOptimizer, EpochsTooShortForAProfileFailSayingSo) {
  SimLoop loop;
  PowerLimitOptimizer plo(loop.devices, *loop.meter, options(Objective::energy, 2, 2));
  try {
    for (int g = 1; g < 100; ++g) {
      plo.begin_step();
      loop.step();
      if (g % 2 == 0) plo.epoch_end();  // ends the open step, the last of its epoch
    }
    FAIL() << "epochs of 2 steps never hold 2 warm-up and 2 profiled steps";
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("an epoch of 2 step(s) ended before"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(plo.state(), State::failed);
  EXPECT_EQ(loop.sims[0]->limit_w(), 250);
}

TEST(StepOptimizer, AMatchingSavedProfileIsReusedWithoutAStep) {
  const std::string path =
      ::testing::TempDir() + "/step_optimizer_profile_" + std::to_string(::getpid()) + ".json";
  TuneOptions opt = options();
  opt.profile_path = path;
  {
    SimLoop loop;
    PowerLimitOptimizer plo(loop.devices, *loop.meter, opt);
    loop.run(plo);
    ASSERT_TRUE(plo.done());
    EXPECT_FALSE(plo.result()->reused_profile);
  }
  SimLoop loop;
  PowerLimitOptimizer plo(loop.devices, *loop.meter, opt);
  EXPECT_EQ(loop.run(plo), 0);
  EXPECT_TRUE(plo.result()->reused_profile);
  EXPECT_EQ(plo.chosen_limit_w(), 150);
  EXPECT_EQ(loop.sims[0]->set_log_w, std::vector<double>{150});  // the chosen limit only
  plo.close();
  EXPECT_EQ(loop.sims[0]->limit_w(), 250);
  std::filesystem::remove(path);
}
