// Planner, issue 17.3: power limits chosen with the starts under a power budget, the energy and
// weighted objectives, and interruption costs, each against brute force on small random cases.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "core/error.h"
#include "sched/planner.h"
#include "test_util.h"

using namespace gt::sched;

namespace {

constexpr std::int64_t kSlot = 900;

using test::random_series;

Job job(std::string name, UnixTimeS earliest, UnixTimeS deadline, std::vector<CapOption> caps) {
  Job j;
  j.name = std::move(name);
  j.command = "true";
  j.earliest_start_s = earliest;
  j.deadline_s = deadline;
  j.caps = std::move(caps);
  j.duration_s = j.caps.front().duration_s;
  j.power_w = j.caps.front().power_w;
  return j;
}

// The objective's value of g gCO2e and e_j J, as planner.h defines it.
double objective(Objective o, double lambda, double g, double e_j) {
  const double kwh = e_j / kJoulesPerKwh;
  return o == Objective::carbon ? g : o == Objective::energy ? kwh : g + lambda * kwh;
}

PlanOptions opts(Strategy s, double budget_w, Objective o, double lambda) {
  PlanOptions p;
  p.strategy = s;
  p.power_budget_w = budget_w;
  p.objective = o;
  if (o == Objective::weighted) p.energy_weight_g_per_kwh = lambda;
  return p;
}

// Random jobs whose lower limits are slower and cheaper per step, as a tuned GPU is; durations
// in whole seconds.
std::vector<Job> random_capped_jobs(std::mt19937_64& rng, const CarbonSeries& s, int n) {
  std::vector<Job> jobs;
  std::uniform_int_distribution<int> len(600, 2400), at(0, 5), slack(0, 6);
  for (int k = 0; k < n; ++k) {
    const double d = len(rng);
    const UnixTimeS e = s.start_s + at(rng) * kSlot;
    const UnixTimeS dl = std::min(
        s.end_s(), e + static_cast<UnixTimeS>(std::ceil(d * 1.5 / kSlot) + slack(rng)) * kSlot);
    jobs.push_back(
        job(fmt::format("j{}", k), e, dl,
            {{300, d, 300}, {250, std::round(d * 1.2), 230}, {200, std::round(d * 1.5), 170}}));
  }
  return jobs;
}

struct Option {
  std::size_t cap;
  UnixTimeS t;
};

// The lowest objective over every (limit, start on a slot boundary) of every job under the
// budget (each job occupies every slot it touches); infinity when no combination fits.
double brute_force(const std::vector<Job>& jobs, const CarbonSeries& s, double budget, Objective o,
                   double lambda, bool highest_only = false) {
  std::vector<std::vector<Option>> opt(jobs.size());
  for (std::size_t k = 0; k < jobs.size(); ++k)
    for (std::size_t c = 0; c < (highest_only ? 1 : jobs[k].caps.size()); ++c)
      for (UnixTimeS t = jobs[k].earliest_start_s; t < s.end_s(); t += kSlot) {
        const auto end = t + static_cast<UnixTimeS>(jobs[k].caps[c].duration_s);
        if (end <= jobs[k].deadline_s && end <= s.end_s()) opt[k].push_back({c, t});
      }
  double best = std::numeric_limits<double>::infinity();
  std::vector<Option> cur(jobs.size());
  auto rec = [&](auto&& self, std::size_t k) -> void {
    if (k == jobs.size()) {
      for (UnixTimeS slot = s.start_s; slot < s.end_s(); slot += kSlot) {
        double w = 0;
        for (std::size_t q = 0; q < jobs.size(); ++q) {
          const CapOption& c = jobs[q].caps[cur[q].cap];
          if (cur[q].t < slot + kSlot && cur[q].t + static_cast<UnixTimeS>(c.duration_s) > slot)
            w += c.power_w;
        }
        if (budget > 0 && w > budget + 1e-9) return;
      }
      double v = 0;
      for (std::size_t q = 0; q < jobs.size(); ++q) {
        const CapOption& c = jobs[q].caps[cur[q].cap];
        const auto end = cur[q].t + static_cast<UnixTimeS>(c.duration_s);
        v += objective(o, lambda, s.g_co2e(cur[q].t, end, c.power_w), c.power_w * c.duration_s);
      }
      best = std::min(best, v);
      return;
    }
    for (const Option& x : opt[k]) {
      cur[k] = x;
      self(self, k + 1);
    }
  };
  rec(rec, 0);
  return best;
}

void expect_valid(const Plan& p, const std::vector<Job>& jobs, double budget) {
  EXPECT_LE(peak_power_w(p, jobs), budget + 1e-9);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const JobPlan& jp = p.jobs[i];
    if (!jp.scheduled) continue;
    ASSERT_EQ(jp.runs.size(), 1u);
    EXPECT_GE(jp.runs[0].start_s, jobs[i].earliest_start_s);
    EXPECT_LE(jp.runs[0].end_s, jobs[i].deadline_s);
    const auto c = std::find_if(jobs[i].caps.begin(), jobs[i].caps.end(),
                                [&](const CapOption& o) { return o.limit_w == jp.cap_limit_w; });
    ASSERT_NE(c, jobs[i].caps.end()) << jp.cap_limit_w;
    EXPECT_EQ(jp.runs[0].end_s - jp.runs[0].start_s, static_cast<UnixTimeS>(c->duration_s));
    EXPECT_DOUBLE_EQ(jp.planned_power_w, c->power_w);
    EXPECT_DOUBLE_EQ(jp.energy_j, c->power_w * c->duration_s);
  }
}

}  // namespace

// The exact search over (start, limit) under a power budget finds the brute-force optimum of
// each objective; the greedy placement (the exact search turned off) keeps the budget and the
// windows and is never better than the optimum; shifting alone is the optimum at the highest
// limit.
TEST(SchedPlannerCaps, StartAndCapUnderBudgetEqualBruteForcePerObjective) {
  std::mt19937_64 rng(1703);
  const double lambda = 150;
  int cases = 0;
  for (Objective o : {Objective::carbon, Objective::energy, Objective::weighted}) {
    for (int trial = 0; trial < 25; ++trial) {
      const CarbonSeries s = random_series(rng, 12);
      const std::vector<Job> jobs = random_capped_jobs(rng, s, 3);
      const double budget = std::vector<double>{450, 500, 600}[trial % 3];
      const double best = brute_force(jobs, s, budget, o, lambda);
      Plan p = make_plan(jobs, s, opts(Strategy::shift, budget, o, lambda));
      EXPECT_EQ(p.method, "exact");
      EXPECT_EQ(p.objective, o);
      PlanOptions g = opts(Strategy::shift, budget, o, lambda);
      g.exact_search_limit = 0;
      Plan greedy = make_plan(jobs, s, g);
      EXPECT_EQ(greedy.method, "greedy");
      expect_valid(greedy, jobs, budget);
      if (std::isinf(best)) {
        EXPECT_GT(p.unscheduled(), 0u);
        continue;
      }
      ++cases;
      ASSERT_EQ(p.unscheduled(), 0u) << objective_name(o) << " trial " << trial;
      EXPECT_NEAR(p.objective_value(p.planned_g_co2e, p.planned_energy_j), best, 1e-9 * best)
          << objective_name(o) << " trial " << trial << "\n"
          << plan_table(p, 0);
      expect_valid(p, jobs, budget);
      if (greedy.unscheduled() == 0) {
        EXPECT_GE(greedy.objective_value(greedy.planned_g_co2e, greedy.planned_energy_j),
                  best - 1e-9 * best);
      }
      // shifting alone (the highest limit): its own optimum, when every job fits so
      const double shift = brute_force(jobs, s, budget, o, lambda, /*highest_only=*/true);
      if (!std::isinf(shift) && p.compared == jobs.size()) {
        ASSERT_TRUE(p.shift_only_saving_pct && p.cap_only_saving_pct && p.objective_saving_pct());
        const double base = p.objective_value(p.baseline_g_co2e, p.baseline_energy_j);
        EXPECT_NEAR(*p.shift_only_saving_pct, 100 * (1 - shift / base), 1e-6);
        EXPECT_GE(*p.objective_saving_pct(), *p.shift_only_saving_pct - 1e-9);
      }
    }
  }
  EXPECT_GT(cases, 30);
}

// A lower limit lets a job fit under the budget where its highest does not, in every strategy.
TEST(SchedPlannerCaps, LowerLimitFitsUnderTheBudgetWhereTheHighestDoesNot) {
  CarbonSeries s;
  s.start_s = 1'600'000'200;
  s.slot_s = kSlot;
  s.g_co2e_per_kwh = {100, 200, 300, 400, 500, 600, 700, 800};
  Job a = job("fixed", s.start_s, s.start_s + 1800, {{300, 1800, 300}});
  a.caps.clear();  // no profile: 300 W in slots 0-1, its whole window
  Job b = job("capped", s.start_s, s.start_s + 2700, {{300, 1800, 300}, {200, 2400, 200}});
  for (bool interruptible : {false, true}) {
    b.interruptible = interruptible;
    for (Strategy st : {Strategy::arrival, Strategy::shift, Strategy::interrupt, Strategy::best})
      for (std::int64_t limit : {std::int64_t{200000}, std::int64_t{0}}) {
        PlanOptions o = opts(st, 500, Objective::carbon, 0);
        o.exact_search_limit = limit;
        const Plan p = make_plan({a, b}, s, o);
        const std::string what =
            fmt::format("{} interruptible={} limit={}", strategy_name(st), interruptible, limit);
        ASSERT_TRUE(p.jobs[0].scheduled) << what << ": " << p.jobs[0].reason;
        ASSERT_TRUE(p.jobs[1].scheduled) << what << ": " << p.jobs[1].reason;
        EXPECT_DOUBLE_EQ(p.jobs[1].cap_limit_w, 200) << what;
        EXPECT_LE(peak_power_w(p, {a, b}), 500 + 1e-9) << what;
        ASSERT_TRUE(p.shift_only_saving_pct.has_value());
      }
  }
  // no limit of its profile fits beside the fixed job: unscheduled, and why
  b.caps = {{300, 1800, 300}, {280, 1900, 280}};
  const Plan p = make_plan({a, b}, s, opts(Strategy::shift, 500, Objective::carbon, 0));
  EXPECT_FALSE(p.jobs[1].scheduled);
  EXPECT_NE(p.jobs[1].reason.find("power budget of 500 W"), std::string::npos) << p.jobs[1].reason;
}

// One interruptible job with limits and interruption costs: the dynamic programme at each limit
// finds the brute-force optimum of each objective over every set of slots; the energy objective
// counts the interruptions' energy, so it avoids them where carbon does not.
TEST(SchedPlannerCaps, CapsAndInterruptionCostsEqualBruteForcePerObjective) {
  std::mt19937_64 rng(1717);
  const double lambda = 80;
  const int n = 9;
  for (Objective o : {Objective::carbon, Objective::energy, Objective::weighted}) {
    for (int trial = 0; trial < 20; ++trial) {
      const CarbonSeries s = random_series(rng, n);
      const double d = std::uniform_int_distribution<int>(1, 3)(rng) * 600.0;
      Job j = job("i", s.start_s, s.end_s(), {{300, d, 300}, {200, std::round(d * 1.4), 190}});
      j.interruptible = true;
      j.interruption_s = std::vector<double>{60, 300, 700}[trial % 3];
      j.max_interruptions = trial % 2 ? 2 : -1;
      double best = std::numeric_limits<double>::infinity();
      for (const CapOption& c : j.caps)
        for (unsigned mask = 1; mask < (1u << n); ++mask) {
          std::vector<int> sel;
          for (int k = 0; k < n; ++k)
            if (mask >> k & 1u) sel.push_back(k);
          std::size_t blocks = 1;
          for (std::size_t q = 1; q < sel.size(); ++q) blocks += sel[q] != sel[q - 1] + 1;
          if (j.max_interruptions >= 0 &&
              blocks > static_cast<std::size_t>(j.max_interruptions) + 1)
            continue;
          const double t = c.duration_s + static_cast<double>(blocks - 1) * j.interruption_s;
          const auto need = static_cast<std::int64_t>(std::ceil(t / kSlot));
          const double rem = t - static_cast<double>(need - 1) * kSlot;
          if (static_cast<std::int64_t>(sel.size()) != need) continue;
          double g = 0;
          for (std::size_t q = 0; q < sel.size(); ++q)
            g += c.power_w / kJoulesPerKwh * (q + 1 < sel.size() ? kSlot : rem) *
                 s.g_co2e_per_kwh[sel[q]];
          best = std::min(best, objective(o, lambda, g, c.power_w * t));
        }
      const Plan p = make_plan({j}, s, opts(Strategy::interrupt, 0, o, lambda));
      ASSERT_TRUE(p.jobs[0].scheduled) << p.jobs[0].reason;
      const JobPlan& jp = p.jobs[0];
      EXPECT_NEAR(p.objective_value(jp.g_co2e, jp.energy_j), best, 1e-9 * best)
          << objective_name(o) << " trial " << trial;
      if (o == Objective::energy) {
        EXPECT_EQ(jp.interruptions, 0u);
      }
    }
  }
}

// Energy and gCO2e of plan and baseline in every output, with the objective named; the energy
// objective runs the job at its most efficient limit, where carbon may not.
TEST(SchedPlannerCaps, OutputsNameTheObjectiveAndReportEnergyAndCarbon) {
  CarbonSeries s;
  s.start_s = 1'600'000'200;
  s.slot_s = kSlot;
  s.g_co2e_per_kwh = {500, 500, 50, 500, 500, 500};
  // 300 W fits the clean slot exactly; 200 W takes longer but less energy (0.1 vs 0.075 kWh)
  Job j = job("j", s.start_s, s.end_s(), {{300, 900, 400}, {200, 1800, 150}});
  const Plan c = make_plan({j}, s, opts(Strategy::shift, 0, Objective::carbon, 0));
  const Plan e = make_plan({j}, s, opts(Strategy::shift, 0, Objective::energy, 0));
  EXPECT_DOUBLE_EQ(c.jobs[0].cap_limit_w, 300);
  EXPECT_DOUBLE_EQ(e.jobs[0].cap_limit_w, 200);
  EXPECT_LT(c.planned_g_co2e, e.planned_g_co2e);
  EXPECT_LT(e.planned_energy_j, c.planned_energy_j);
  const auto js = plan_to_json(e, 0);
  EXPECT_EQ(js["objective"], "energy");
  EXPECT_EQ(js["objective_unit"], "kWh");
  EXPECT_TRUE(js["energy_weight_g_per_kwh"].is_null());
  const auto& vs = js["total"]["vs_baseline"];
  EXPECT_DOUBLE_EQ(vs["energy_j"].get<double>(), 150 * 1800);
  EXPECT_DOUBLE_EQ(vs["baseline_energy_j"].get<double>(), 400 * 900);
  EXPECT_NEAR(vs["objective_saving_pct"].get<double>(), 25, 1e-9);
  EXPECT_NEAR(vs["energy_saving_pct"].get<double>(), 25, 1e-9);
  EXPECT_TRUE(vs["g_co2e"].is_number() && vs["baseline_g_co2e"].is_number());
  EXPECT_DOUBLE_EQ(js["jobs"][0]["baseline"]["energy_j"].get<double>(), 400 * 900);
  EXPECT_EQ(js["jobs"][0]["interruption_source"], "default 0");
  const std::string t = plan_table(e, 0);
  EXPECT_NE(t.find("objective energy"), std::string::npos) << t;
  EXPECT_NE(t.find("kWh vs"), std::string::npos) << t;
  // weighted: lambda defaults to the series' mean intensity, and is reported
  PlanOptions w = opts(Strategy::shift, 0, Objective::weighted, 0);
  w.energy_weight_g_per_kwh.reset();
  const Plan pw = make_plan({j}, s, w);
  EXPECT_DOUBLE_EQ(pw.energy_weight_g_per_kwh, s.mean_g_co2e_per_kwh());
  EXPECT_DOUBLE_EQ(plan_to_json(pw, 0)["energy_weight_g_per_kwh"].get<double>(),
                   s.mean_g_co2e_per_kwh());
  // bad input is named
  EXPECT_THROW(parse_objective("money"), gt::Error);
  PlanOptions bad = opts(Strategy::shift, 0, Objective::weighted, -1);
  EXPECT_THROW(make_plan({j}, s, bad), gt::Error);
  PlanOptions stray = opts(Strategy::shift, 0, Objective::carbon, 0);
  stray.energy_weight_g_per_kwh = 10;
  EXPECT_THROW(make_plan({j}, s, stray), gt::Error);
}

// The interruption figure's source reaches the plan's outputs, and the saving is net of it.
TEST(SchedPlannerCaps, InterruptionSourceInThePlan) {
  CarbonSeries s;
  s.start_s = 1'600'000'200;
  s.slot_s = kSlot;
  s.g_co2e_per_kwh = {50, 900, 60, 900, 900, 900};
  Job j;
  j.name = "i";
  j.command = "true";
  j.duration_s = 1800;
  j.power_w = 1000;
  j.earliest_start_s = s.start_s;
  j.deadline_s = s.end_s();
  j.interruptible = true;
  j.interruption_s = 300;
  j.interruption_source = "measured in runs/a (checkpoint write 100 s + restart 200 s)";
  const Plan p = make_plan({j}, s, opts(Strategy::interrupt, 0, Objective::carbon, 0));
  ASSERT_EQ(p.jobs[0].interruptions, 1u);  // slot 0, then slot 2 and 300 s of slot 3
  EXPECT_DOUBLE_EQ(p.jobs[0].energy_j, 1000 * (1800 + 300));
  EXPECT_NEAR(p.jobs[0].g_co2e, (900 * 50 + 900 * 60 + 300 * 900) / kJoulesPerKwh * 1000, 1e-9);
  const auto js = plan_to_json(p, 0);
  EXPECT_EQ(js["jobs"][0]["interruption_source"], j.interruption_source);
  EXPECT_DOUBLE_EQ(js["jobs"][0]["interruption_s"].get<double>(), 300);
  EXPECT_NE(plan_table(p, 0).find("measured in runs/a"), std::string::npos);
}
