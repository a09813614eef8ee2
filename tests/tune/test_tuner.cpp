// The power-limit search on simulated devices: candidates, the known optimum of the simulated
// curve for each objective, permission refusal, all-or-nothing application, profile reuse.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tune/simulated.h"
#include "tune/tuner.h"

using namespace gt::tune;

namespace {

// The model's energy and time per step, written out independently of SimulatedModel.
double energy_at(double L) {
  const double r = std::min(1.0, (L - 90.0) / (350.0 - 90.0));
  return std::min(L, 350.0) * 0.25 / std::pow(r, 0.4);
}
double time_at(double L) {
  const double r = std::min(1.0, (L - 90.0) / (350.0 - 90.0));
  return 0.25 / std::pow(r, 0.4);
}

std::shared_ptr<SimulatedDevice> sim(std::string name = "sim:0") {
  return std::make_shared<SimulatedDevice>(SimulatedModel{}, name);
}

double brute_force(double (*key)(double)) {
  double best = 0, best_v = 1e300;
  for (double L = 100; L <= 400; L += 25)  // ascending, so ties go to the lower limit
    if (key(L) < best_v - 1e-12) best_v = key(L), best = L;
  return best;
}

}  // namespace

TEST(TuneCandidates, FromMaxDownToMinClamped) {
  auto c = candidate_limits_w(100, 400, 25);
  ASSERT_EQ(c.size(), 13u);
  EXPECT_EQ(c.front(), 400);
  EXPECT_EQ(c.back(), 100);
  auto d = candidate_limits_w(100, 410, 25);
  EXPECT_EQ(d.front(), 410);
  EXPECT_EQ(d[d.size() - 2], 110);
  EXPECT_EQ(d.back(), 100);  // the minimum is always a candidate
  for (double v : d) EXPECT_TRUE(v >= 100 && v <= 410);
  EXPECT_EQ(candidate_limits_w(150, 150, 25), std::vector<double>{150});
  EXPECT_THROW(candidate_limits_w(100, 400, 0), gt::Error);
  EXPECT_THROW(candidate_limits_w(300, 200, 25), gt::Error);
}

// Issue 12, part 8: `tune --simulate --step 1e-7` died with std::bad_alloc (billions of
// candidates). The count is bounded, and the error says why and which step would do.
TEST(TuneCandidates, TinyStepIsRefusedWithTheReason) {
  try {
    candidate_limits_w(100, 400, 1e-7);
    FAIL();
  } catch (const gt::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("power-limit step 1e-07 W over the allowed range [100, 400] W gives about "
                     "3e+09 candidate limits; at most 1000 are profiled"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("expected a step of at least 0.301 W"), std::string::npos) << m;
  }
  EXPECT_EQ(candidate_limits_w(100, 400, 0.301).size(), 998u);
  EXPECT_EQ(candidate_limits_w(100, 100, 1e-7).size(), 1u);
}

TEST(TuneSearch, FindsTheKnownOptimumForEachObjective) {
  // Energy per step is lowest at L = idle / (1 - exponent) = 90 / 0.6 = 150 W, on the grid.
  EXPECT_EQ(brute_force(energy_at), 150);
  EXPECT_LT(energy_at(150), energy_at(125));
  EXPECT_LT(energy_at(150), energy_at(175));
  for (Objective o : {Objective::energy, Objective::time, Objective::cost, Objective::slowdown}) {
    auto d = sim();
    TuneOptions opt;
    opt.objective = o;
    TuneResult r = tune_power_limit({d}, simulated_profile({d}), opt);
    ASSERT_EQ(r.points.size(), 13u);
    EXPECT_DOUBLE_EQ(r.p_max_w, 400);
    double expected = 0;
    switch (o) {
      case Objective::energy:
        expected = 150;
        break;
      case Objective::time:
        expected = brute_force(time_at);
        break;  // 350: lowest uncapped
      case Objective::cost: {
        double best = 1e300;
        for (double L = 100; L <= 400; L += 25) {
          const double c = 0.5 * energy_at(L) + 0.5 * 400 * time_at(L);
          if (c < best - 1e-12) best = c, expected = L;
        }
        break;
      }
      case Objective::slowdown:
        for (double L = 400; L >= 100; L -= 25)
          if (time_at(L) <= 1.1 * time_at(400)) expected = L;
        break;
    }
    EXPECT_EQ(r.chosen_limit_w, expected) << objective_name(o);
    for (const auto& p : r.points) {
      EXPECT_NEAR(p.energy_per_step_j, energy_at(p.limit_w), 1e-9);
      EXPECT_NEAR(p.time_per_step_s, time_at(p.limit_w), 1e-12);
    }
    // Restored after a normal return.
    EXPECT_EQ(d->limit_w(), 400);
    EXPECT_EQ(d->set_log_w.back(), 400);
  }
}

TEST(TuneSearch, CostUsesPmaxOfAllDevicesAndEta) {
  auto a = sim("sim:0"), b = sim("sim:1");
  TuneOptions opt;
  opt.eta = 0.8;
  TuneResult r = tune_power_limit({a, b}, simulated_profile({a, b}), opt);
  EXPECT_DOUBLE_EQ(r.p_max_w, 800);
  double expected = 0, best = 1e300;
  for (double L = 100; L <= 400; L += 25) {
    const double c = 0.8 * 2 * energy_at(L) + 0.2 * 800 * time_at(L);
    if (c < best - 1e-12) best = c, expected = L;
  }
  EXPECT_EQ(r.chosen_limit_w, expected);
  EXPECT_DOUBLE_EQ(zeus_cost_j(10, 2, 0.25, 100), 0.25 * 10 + 0.75 * 100 * 2);
}

TEST(TuneSearch, RestoresAfterAnException) {
  auto d = sim();
  int calls = 0;
  ProfileFn boom = [&](int steps) -> StepMeasurement {
    if (++calls == 5) throw std::runtime_error("trainer failed");
    return simulated_profile({d})(steps);
  };
  EXPECT_THROW(tune_power_limit({d}, boom, TuneOptions{}), std::runtime_error);
  EXPECT_EQ(d->limit_w(), 400);
  EXPECT_EQ(d->set_log_w.back(), 400);
}

TEST(TuneSearch, RefusesWithoutPermissionAndChangesNothing) {
  auto a = sim("sim:0"), b = sim("sim:1");
  b->permission_problem_ = "needs root";
  try {
    tune_power_limit({a, b}, simulated_profile({a, b}), TuneOptions{});
    FAIL();
  } catch (const gt::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("sim:1: needs root"), std::string::npos) << m;
    EXPECT_NE(m.find("nothing was changed"), std::string::npos) << m;
  }
  EXPECT_TRUE(a->set_log_w.empty());
  EXPECT_TRUE(b->set_log_w.empty());
}

TEST(TuneGuard, ApplyIsAllOrNothing) {
  auto a = sim("sim:0"), b = sim("sim:1");
  b->fail_set_at_w = 250;
  PowerLimitGuard g({a, b}, false);
  g.apply_w(300);
  EXPECT_EQ(a->limit_w(), 300);
  EXPECT_THROW(g.apply_w(250), gt::Error);
  // a was set to 250, then put back to its saved limit (400), as b failed.
  EXPECT_EQ(a->limit_w(), 400);
  EXPECT_EQ(b->limit_w(), 300);
  EXPECT_THROW(g.apply_w(50), gt::Error);  // out of range: refused before any set
  EXPECT_EQ(a->set_log_w.size(), 3u);
  g.restore();
  EXPECT_EQ(b->limit_w(), 400);
}

TEST(TuneSearch, ProfileIsSavedAndReused) {
  const auto path = (std::filesystem::temp_directory_path() /
                     ("gt_tune_profile_" + std::to_string(::getpid()) + ".json"))
                        .string();
  std::filesystem::remove(path);
  auto d = sim();
  TuneOptions opt;
  opt.profile_path = path;
  TuneResult first = tune_power_limit({d}, simulated_profile({d}), opt);
  EXPECT_FALSE(first.reused_profile);
  ASSERT_TRUE(std::filesystem::exists(path));
  const std::size_t sets = d->set_log_w.size();
  ProfileFn never = [](int) -> StepMeasurement {
    ADD_FAILURE() << "profiled although a profile exists";
    StepMeasurement m;
    m.energy_j = m.time_s = 1;
    return m;
  };
  TuneResult again = tune_power_limit({d}, never, opt);
  EXPECT_TRUE(again.reused_profile);
  EXPECT_EQ(again.chosen_limit_w, first.chosen_limit_w);
  EXPECT_EQ(d->set_log_w.size(), sets);  // nothing set
  opt.objective = Objective::energy;     // a new choice from the same profile
  EXPECT_EQ(tune_power_limit({d}, never, opt).chosen_limit_w, 150);
  // Other devices: profiled again.
  auto other = sim("sim:other");
  TuneResult fresh = tune_power_limit({other}, simulated_profile({other}), opt);
  EXPECT_FALSE(fresh.reused_profile);
  std::ofstream(path) << "not json";
  EXPECT_THROW(tune_power_limit({d}, never, opt), gt::Error);
  std::filesystem::remove(path);
}

// Issue 31 §5: a profile read back is checked like any input: a time per step of 0 (it printed
// "time per step -nan %" and chose a limit) or a negative energy is refused, naming the file,
// the point and the key.
TEST(TuneSearch, ProfileWithFiguresOutOfRangeIsRefused) {
  const auto path = (std::filesystem::temp_directory_path() /
                     ("gt_tune_bad_profile_" + std::to_string(::getpid()) + ".json"))
                        .string();
  auto d = sim();
  TuneOptions opt;
  opt.profile_path = path;
  tune_power_limit({d}, simulated_profile({d}), opt);
  std::ifstream in(path);
  const nlohmann::json good = nlohmann::json::parse(in);
  in.close();
  ProfileFn never = [](int) -> StepMeasurement {
    ADD_FAILURE() << "profiled although a profile exists";
    StepMeasurement m;
    m.energy_j = m.time_s = 1;
    return m;
  };
  const std::pair<const char*, nlohmann::json> cases[] = {{"time_per_step_s", 0.0},
                                                          {"time_per_step_s", -1.0},
                                                          {"energy_per_step_j", -5.0},
                                                          {"limit_w", "300"},
                                                          {"time_per_step_s", nullptr}};
  for (const auto& [key, value] : cases) {
    nlohmann::json bad = good;
    bad["points"][1][key] = value;
    std::ofstream(path) << bad.dump();
    try {
      tune_power_limit({d}, never, opt);
      ADD_FAILURE() << key << " = " << value.dump() << " was accepted";
    } catch (const gt::Error& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find(path), std::string::npos) << w;
      EXPECT_NE(w.find(std::string("points[1].") + key), std::string::npos) << w;
    }
  }
  std::filesystem::remove(path);
}

// Issue 12, part 3: a search that compares energies refuses energy it could not measure (no
// sensor, 0 J, an estimate blind to the limit) instead of picking the lowest limit from a row
// of zeros; it restores the limits; a time objective still runs and keeps the meter's flags.
TEST(TuneSearch, RefusesAnEnergyObjectiveOnUnmeasuredEnergy) {
  struct Case {
    StepMeasurement m;
    const char* says;
  };
  StepMeasurement unknown{0, 0.5, false, false, {"no sensor counted: energy is unknown, not 0"}};
  StepMeasurement zero{0, 0.5, true, false, {"cpu: read 0 J (0 W) over the whole window"}};
  StepMeasurement estimate{40, 0.5, true, true, {}};
  for (const Case& c : {Case{unknown, "could not measure the energy"}, Case{zero, "read 0 J"},
                        Case{estimate, "only an estimate"}}) {
    for (Objective o : {Objective::energy, Objective::cost}) {
      auto d = sim();
      const double before = d->limit_w();
      TuneOptions opt;
      opt.objective = o;
      opt.warmup_steps = 0;
      try {
        tune_power_limit(
            {d}, [&](int) { return c.m; }, opt);
        ADD_FAILURE() << "accepted: " << c.says;
      } catch (const gt::Error& e) {
        EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
      }
      EXPECT_EQ(d->limit_w(), before);
    }
  }
  auto d = sim();
  TuneOptions opt;
  opt.objective = Objective::time;
  opt.warmup_steps = 0;
  TuneResult r = tune_power_limit(
      {d}, [&](int) { return unknown; }, opt);
  ASSERT_FALSE(r.points.empty());
  EXPECT_TRUE(std::isnan(r.points[0].energy_per_step_j));
  EXPECT_EQ(r.points[0].flags, unknown.flags);
  EXPECT_TRUE(tune_result_to_json(r, opt)["points"][0]["energy_per_step_j"].is_null());
}
