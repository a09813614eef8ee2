// Named time zones (Europe/Berlin, daylight saving included) through the scheduler: conversions
// both ways on the 2020 change days (2020-03-29: 02:00 CET -> 03:00 CEST at 01:00Z; 2020-10-25:
// 03:00 CEST -> 02:00 CET at 01:00Z), a local-time carbon CSV across a change, job times, the
// deadline rules on the wall clock, and the times given to sbatch.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "error_of.h"
#include "sched/jobs.h"
#include "sched/planner.h"
#include "sched/slurm.h"
#include "sched/timezone.h"
#include "test_util.h"

using namespace gt::sched;
using gt::sched::test::TempDir;

namespace {

// A UTC instant (or, read as local seconds, a wall-clock time) in 2020.
UnixTimeS at(int month, int day, int hour, int minute = 0, int second = 0) {
  return civil_to_unix_s(2020, month, day, hour, minute, second, 0);
}

using gt::test::error_of;

bool has_tzdata() { return std::filesystem::exists("/usr/share/zoneinfo/Europe/Berlin"); }

#define NEED_TZDATA() \
  if (!has_tzdata()) GTEST_SKIP() << "no /usr/share/zoneinfo (Debian package tzdata)"

}  // namespace

TEST(SchedTimeZone, ParsesOffsetsUtcAndNames) {
  NEED_TZDATA();
  EXPECT_TRUE(TimeZone::parse("0").is_fixed());
  EXPECT_EQ(TimeZone::parse("0").fixed_offset_s(), 0);
  EXPECT_EQ(TimeZone::parse("+01:00").fixed_offset_s(), 3600);
  EXPECT_EQ(TimeZone::parse("5.5").fixed_offset_s(), 19800);
  EXPECT_EQ(TimeZone::parse("-5").describe(), "UTC-05:00");
  EXPECT_TRUE(TimeZone::parse("UTC").is_fixed());
  EXPECT_EQ(TimeZone::parse("UTC").fixed_offset_s(), 0);
  const TimeZone berlin = TimeZone::parse("Europe/Berlin");
  EXPECT_FALSE(berlin.is_fixed());
  EXPECT_EQ(berlin.describe(), "Europe/Berlin");
  EXPECT_EQ(berlin.offset_at(at(1, 15, 12)), 3600);
  EXPECT_EQ(berlin.offset_at(at(7, 15, 12)), 7200);
}

TEST(SchedTimeZone, UnknownZoneIsAnErrorNamingOptionAndValue) {
  NEED_TZDATA();
  const std::string e = error_of([] { TimeZone::parse("Mars/Olympus_Mons", "--utc-offset"); });
  EXPECT_NE(e.find("--utc-offset 'Mars/Olympus_Mons'"), std::string::npos) << e;
  EXPECT_NE(e.find("Europe/Berlin"), std::string::npos) << e;  // what was expected
  const std::string c = error_of([] { SlurmZone::parse("Europe/Atlantis"); });
  EXPECT_NE(c.find("--cluster-tz 'Europe/Atlantis'"), std::string::npos) << c;
  EXPECT_NE(error_of([] { TimeZone::parse("../../etc/passwd"); }), "");
  EXPECT_NE(error_of([] { TimeZone::parse("+25"); }), "");
  EXPECT_NE(error_of([] { TimeZone::parse(""); }), "");
}

TEST(SchedTimeZone, BerlinSpringForward2020BothWays) {
  NEED_TZDATA();
  const TimeZone berlin = TimeZone::parse("Europe/Berlin");
  // local -> UTC
  EXPECT_EQ(berlin.to_utc(at(3, 29, 1, 59, 59), "t"), at(3, 29, 0, 59, 59));
  EXPECT_EQ(berlin.to_utc(at(3, 29, 3, 0), "t"), at(3, 29, 1, 0));
  EXPECT_EQ(civil_to_unix_s(2020, 3, 28, 12, 0, 0, berlin), at(3, 28, 11));
  EXPECT_EQ(civil_to_unix_s(2020, 3, 30, 12, 0, 0, berlin), at(3, 30, 10));
  // UTC -> local, with the offset in force
  EXPECT_EQ(berlin.offset_at(at(3, 29, 0, 59, 59)), 3600);
  EXPECT_EQ(berlin.offset_at(at(3, 29, 1, 0)), 7200);
  EXPECT_EQ(format_iso_time(at(3, 29, 0, 59, 59), berlin), "2020-03-29T01:59:59+01:00");
  EXPECT_EQ(format_iso_time(at(3, 29, 1, 0), berlin), "2020-03-29T03:00:00+02:00");
  EXPECT_EQ(format_wall_time(at(3, 29, 1, 0), berlin), "2020-03-29T03:00:00");
  // 02:30 does not exist that day
  const TimeZone::Local gap = berlin.resolve(at(3, 29, 2, 30));
  EXPECT_EQ(gap.kind, TimeZone::Local::Kind::nonexistent);
  EXPECT_EQ(gap.first_offset_s, 3600);
  EXPECT_EQ(gap.second_offset_s, 7200);
  EXPECT_EQ(gap.change_s, at(3, 29, 1, 0));
  EXPECT_EQ(berlin.to_utc_earliest(at(3, 29, 2, 30)), at(3, 29, 1, 0));
  const std::string e = error_of([&] { berlin.to_utc(at(3, 29, 2, 30), "jobs.toml: job 'x'"); });
  EXPECT_NE(e.find("jobs.toml: job 'x': 2020-03-29T02:30:00 does not exist in Europe/Berlin"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("+01:00"), std::string::npos) << e;
  EXPECT_NE(e.find("+02:00"), std::string::npos) << e;
}

TEST(SchedTimeZone, BerlinFallBack2020BothWays) {
  NEED_TZDATA();
  const TimeZone berlin = TimeZone::parse("Europe/Berlin");
  EXPECT_EQ(berlin.to_utc(at(10, 25, 1, 59), "t"), at(10, 24, 23, 59));
  EXPECT_EQ(berlin.to_utc(at(10, 25, 3, 0), "t"), at(10, 25, 2, 0));
  EXPECT_EQ(format_iso_time(at(10, 25, 0, 30), berlin), "2020-10-25T02:30:00+02:00");
  EXPECT_EQ(format_iso_time(at(10, 25, 1, 30), berlin), "2020-10-25T02:30:00+01:00");
  EXPECT_EQ(format_iso_time(at(10, 25, 0, 59, 59), berlin), "2020-10-25T02:59:59+02:00");
  EXPECT_EQ(format_iso_time(at(10, 25, 1, 0), berlin), "2020-10-25T02:00:00+01:00");
  // 02:30 happens twice: at +02:00 (00:30Z) and at +01:00 (01:30Z)
  const TimeZone::Local twice = berlin.resolve(at(10, 25, 2, 30));
  EXPECT_EQ(twice.kind, TimeZone::Local::Kind::ambiguous);
  EXPECT_EQ(twice.first_s, at(10, 25, 0, 30));
  EXPECT_EQ(twice.second_s, at(10, 25, 1, 30));
  EXPECT_EQ(berlin.to_utc_earliest(at(10, 25, 2, 30)), at(10, 25, 0, 30));
  const std::string e = error_of([&] { berlin.to_utc(at(10, 25, 2, 30), "here"); });
  EXPECT_NE(e.find("here: 2020-10-25T02:30:00 happens twice in Europe/Berlin"), std::string::npos)
      << e;
  EXPECT_NE(e.find("at +02:00 it is 2020-10-25T00:30:00Z"), std::string::npos) << e;
  EXPECT_NE(e.find("at +01:00 it is 2020-10-25T01:30:00Z"), std::string::npos) << e;
  // A stated offset decides.
  EXPECT_EQ(parse_wall_time("2020-10-25T02:30:00+01:00", berlin, "t"), at(10, 25, 1, 30));
  EXPECT_EQ(parse_wall_time("2020-10-25 01:30", berlin, "t"), at(10, 24, 23, 30));
}

TEST(SchedTimeZone, LocalCarbonCsvAcrossTheOctoberChangeIsMonotonicInUtc) {
  NEED_TZDATA();
  TempDir d;
  const std::string p = d.write("berlin.csv",
                                "Time,Carbon Intensity\n"
                                "2020-10-25 01:00:00,100\n"
                                "2020-10-25 01:30:00,110\n"
                                "2020-10-25 02:00:00,120\n"  // first 02:00, CEST: 00:00Z
                                "2020-10-25 02:30:00,130\n"
                                "2020-10-25 02:00:00,140\n"  // second 02:00, CET: 01:00Z
                                "2020-10-25 02:30:00,150\n"
                                "2020-10-25 03:00:00,160\n"
                                "2020-10-25 03:30:00,170\n");
  const CarbonSeries s = load_carbon_csv(p, TimeZone::parse("Europe/Berlin"));
  EXPECT_EQ(s.start_s, at(10, 24, 23, 0));
  EXPECT_EQ(s.slot_s, 1800);
  ASSERT_EQ(s.g_co2e_per_kwh.size(), 8u);  // no duplicate, no hole
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(s.g_co2e_per_kwh[i], 100 + 10 * i) << i;
  EXPECT_TRUE(s.gaps.empty());
  EXPECT_EQ(s.end_s(), at(10, 25, 3, 0));
  // The same rows at a fixed offset go back in time: refused, as before.
  EXPECT_NE(error_of([&] { load_carbon_csv(p, 7200); }).find("is not after the previous row"),
            std::string::npos);
}

TEST(SchedTimeZone, LocalCarbonCsvAcrossTheMarchChangeHasNoHole) {
  NEED_TZDATA();
  TempDir d;
  const std::string p = d.write("spring.csv",
                                "Time,Carbon Intensity\n"
                                "2020-03-29 01:00:00,100\n"
                                "2020-03-29 01:30:00,110\n"
                                "2020-03-29 03:00:00,120\n"  // 02:00-03:00 does not exist
                                "2020-03-29 03:30:00,130\n");
  const CarbonSeries s = load_carbon_csv(p, TimeZone::parse("Europe/Berlin"));
  EXPECT_EQ(s.start_s, at(3, 29, 0, 0));
  ASSERT_EQ(s.g_co2e_per_kwh.size(), 4u);
  EXPECT_DOUBLE_EQ(s.g_co2e_per_kwh[2], 120);
  EXPECT_TRUE(s.gaps.empty());
  const std::string bad = d.write("gap.csv",
                                  "Time,Carbon Intensity\n"
                                  "2020-03-29 01:30:00,100\n"
                                  "2020-03-29 02:30:00,110\n");
  const std::string e = error_of([&] { load_carbon_csv(bad, TimeZone::parse("Europe/Berlin")); });
  EXPECT_NE(e.find("gap.csv:3"), std::string::npos) << e;
  EXPECT_NE(e.find("does not exist in Europe/Berlin"), std::string::npos) << e;
}

TEST(SchedTimeZone, JobTimesReadOnTheZonesWallClockOnBothSidesOfAChange) {
  NEED_TZDATA();
  TempDir d;
  const std::string p = d.write("jobs.toml", R"(
[[job]]
name = "autumn"
command = "sleep 1"
duration_s = 3600
power_w = 100
earliest_start = 2020-10-24T20:00:00
deadline = "2020-10-25 20:00"

[[job]]
name = "spring"
command = "sleep 1"
duration_s = 3600
power_w = 100
earliest_start = 2020-03-28T20:00:00
deadline = 2020-03-29T20:00:00

[[job]]
name = "stated"
command = "sleep 1"
duration_s = 600
power_w = 100
earliest_start = 2020-10-25T02:30:00+01:00
deadline = 2020-10-25T05:00:00
)");
  const auto jobs = load_jobs_toml(p, TimeZone::parse("Europe/Berlin"));
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[0].earliest_start_s, at(10, 24, 18));  // CEST, +02:00
  EXPECT_EQ(jobs[0].deadline_s, at(10, 25, 19));        // CET, +01:00
  EXPECT_EQ(jobs[1].earliest_start_s, at(3, 28, 19));   // CET
  EXPECT_EQ(jobs[1].deadline_s, at(3, 29, 18));         // CEST
  EXPECT_EQ(jobs[2].earliest_start_s, at(10, 25, 1, 30));
  EXPECT_EQ(jobs[2].deadline_s, at(10, 25, 4));
}

TEST(SchedTimeZone, AmbiguousOrNonexistentJobTimeIsAnError) {
  NEED_TZDATA();
  TempDir d;
  const std::string amb = d.write("amb.toml", R"(
[[job]]
name = "amb"
command = "sleep 1"
duration_s = 600
power_w = 100
earliest_start = 2020-10-24T20:00:00
deadline = 2020-10-25T02:30:00
)");
  const TimeZone berlin = TimeZone::parse("Europe/Berlin");
  std::string e = error_of([&] { load_jobs_toml(amb, berlin); });
  EXPECT_NE(e.find("amb.toml: job 'amb' key 'deadline': 2020-10-25T02:30:00 happens twice"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("+02:00"), std::string::npos) << e;
  EXPECT_NE(e.find("+01:00"), std::string::npos) << e;
  EXPECT_NO_THROW(load_jobs_toml(amb, 3600));  // a fixed offset has no such hour
  const std::string gap = d.write("gap.toml", R"(
[[job]]
name = "gap"
command = "sleep 1"
duration_s = 600
power_w = 100
earliest_start = "2020-03-29 02:30"
deadline = 2020-03-29T20:00:00
)");
  e = error_of([&] { load_jobs_toml(gap, berlin); });
  EXPECT_NE(e.find("gap.toml: job 'gap' key 'earliest_start': 2020-03-29T02:30:00 does not exist"),
            std::string::npos)
      << e;
  const std::string csv = d.write("jobs.csv",
                                  "name,nominal_start,duration_s,power_w\n"
                                  "a,2020-10-25 02:15:00,600,100\n");
  e = error_of([&] { load_jobs_csv(csv, berlin, JobCsvOptions{}); });
  EXPECT_NE(e.find("jobs.csv:2 column 'nominal_start': 2020-10-25T02:15:00 happens twice"),
            std::string::npos)
      << e;
}

TEST(SchedTimeZone, DeadlineRulesKeepNineOClockLocalAcrossAChange) {
  NEED_TZDATA();
  const TimeZone berlin = TimeZone::parse("Europe/Berlin");
  const auto nw = DeadlineRule::next_workday, sw = DeadlineRule::semi_weekly;
  // Saturday 2020-10-24 12:00 CEST -> Monday 2020-10-26 09:00 CET (08:00Z, not 07:00Z)
  EXPECT_EQ(rule_deadline_s(nw, at(10, 24, 10), berlin), at(10, 26, 8));
  // Sunday 2020-10-25 03:30 CET (after the change) -> Monday 09:00 CET
  EXPECT_EQ(rule_deadline_s(nw, at(10, 25, 2, 30), berlin), at(10, 26, 8));
  // Friday 2020-10-23 18:00 CEST -> Saturday 09:00 CEST (the paper's quirk; before the change)
  EXPECT_EQ(rule_deadline_s(nw, at(10, 23, 16), berlin), at(10, 24, 7));
  // Saturday 2020-03-28 12:00 CET -> Monday 2020-03-30 09:00 CEST (07:00Z, not 08:00Z)
  EXPECT_EQ(rule_deadline_s(nw, at(3, 28, 11), berlin), at(3, 30, 7));
  EXPECT_EQ(rule_deadline_s(sw, at(10, 24, 10), berlin), at(10, 26, 8));
  EXPECT_EQ(rule_deadline_s(sw, at(3, 28, 11), berlin), at(3, 30, 7));
  // A fixed offset behaves as before.
  EXPECT_EQ(rule_deadline_s(nw, at(10, 24, 10), 7200), at(10, 26, 7));
}

TEST(SchedTimeZone, OutputAndSbatchBeginUseTheOffsetInForce) {
  NEED_TZDATA();
  // Hourly series from 2020-10-24T22:00Z (00:00 CEST), lowest at 05:00Z (06:00 CET).
  CarbonSeries s;
  s.start_s = at(10, 24, 22);
  s.slot_s = 3600;
  s.g_co2e_per_kwh.assign(12, 400.0);
  s.g_co2e_per_kwh[7] = 50;
  s.g_co2e_per_kwh[0] = 100;
  Job late;
  late.name = "late";
  late.script = "/jobs/late.sbatch";
  late.duration_s = 3600;
  late.power_w = 300;
  late.earliest_start_s = at(10, 25, 1);  // after the change
  late.deadline_s = at(10, 25, 10);
  Job early = late;
  early.name = "early";
  early.earliest_start_s = s.start_s;  // before it
  early.deadline_s = at(10, 25, 0);
  const std::vector<Job> jobs = {late, early};
  const Plan p = make_plan(jobs, s, PlanOptions{});
  ASSERT_TRUE(p.jobs[0].scheduled && p.jobs[1].scheduled);
  ASSERT_EQ(p.jobs[0].runs.front().start_s, at(10, 25, 5));
  ASSERT_EQ(p.jobs[1].runs.front().start_s, at(10, 24, 22));
  const SlurmZone berlin = SlurmZone::parse("Europe/Berlin");
  const auto calls = sbatch_calls(p, jobs, berlin);
  auto has = [&](std::size_t i, const std::string& a) {
    for (const auto& c : calls)
      if (c.job_name == jobs[i].name)
        for (const auto& x : c.args)
          if (x == a) return true;
    return false;
  };
  EXPECT_TRUE(has(0, "--begin=2020-10-25T06:00:00"));     // CET
  EXPECT_TRUE(has(0, "--deadline=2020-10-25T11:00:00"));  // CET
  EXPECT_TRUE(has(1, "--begin=2020-10-25T00:00:00"));     // CEST
  // 00:00Z is 02:00 CEST, a wall clock that 01:00Z (02:00 CET) shows too: Slurm would read it
  // at an offset of its own choosing, so it is the exact instant, now+N (issue 31 §5)
  EXPECT_TRUE(has(1, fmt::format("--deadline={{now+{}}}", at(10, 25, 0))));
  EXPECT_EQ(berlin.describe(), "Europe/Berlin");
  // The same through the TimeZone overload.
  const auto via_zone = sbatch_calls(p, jobs, TimeZone::parse("Europe/Berlin"));
  EXPECT_EQ(via_zone.size(), calls.size());
  EXPECT_EQ(via_zone[0].args, calls[0].args);
  // Table and JSON: each time with its own offset.
  const TimeZone bz = TimeZone::parse("Europe/Berlin");
  const std::string table = plan_table(p, bz);
  EXPECT_NE(table.find("2020-10-25T06:00:00+01:00"), std::string::npos) << table;
  EXPECT_NE(table.find("2020-10-25T00:00:00+02:00"), std::string::npos) << table;
  const nlohmann::json j = plan_to_json(p, bz);
  EXPECT_EQ(j["time_zone"], "Europe/Berlin");
  EXPECT_TRUE(j["utc_offset_h"].is_null());
  EXPECT_EQ(j["jobs"][0]["start"], "2020-10-25T06:00:00+01:00");
  EXPECT_EQ(j["jobs"][1]["start"], "2020-10-25T00:00:00+02:00");
}
