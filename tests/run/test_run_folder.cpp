// The run folder's schema, writer and readers (src/run): round trips writer -> reader, keys of
// other types named, unknown figures, old summaries without schema_version.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "run/metrics_jsonl.h"
#include "run/resume.h"
#include "run/schema.h"
#include "run/summary.h"
#include "run/writer.h"

namespace fs = std::filesystem;

namespace gt::run {
namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("gt_run_test_" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string dir() const { return path.string(); }
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A summary as train/run_summary.cpp and train/energy_hook.cpp build it (with the keys of
// run/schema.h), a reached target and a resumed run's totals.
nlohmann::ordered_json train_like_summary() {
  nlohmann::ordered_json s;
  s[key::run_dir] = "runs/a";
  s[key::step] = 40;
  s[key::max_steps] = 40;
  s[key::last_loss] = 2.5;
  s[key::val_loss] = 2.75;
  s[key::tokens] = 5120;
  s[key::duration_s] = 1.5;
  s[key::wall_s] = 2.25;
  s[key::tokens_per_s] = 3413.0;
  s[key::memory_planned_bytes] = 1000;
  s[key::memory_runtime_bytes] = 24;
  s[key::memory_peak_rss_bytes] = 1100;
  s[key::session_start_step] = 20;
  s[key::interruption] = {{key::checkpoint_write_s, 0.125},
                          {key::restart_s, 0.5},
                          {key::restart_resumed, true},
                          {key::checkpoint_write_j, nullptr}};
  s[key::run_totals] = {{key::sessions, 2},     {key::first_step, 0}, {key::tokens, 10240},
                        {key::duration_s, 3.0}, {key::wall_s, 4.5},   {key::energy_j, 99.5},
                        {key::g_co2e, nullptr}};
  s[key::target] = {{key::target_loss, 2.8},
                    {key::reached, true},
                    {key::step, 30},
                    {key::tokens, 3840},
                    {key::seconds, 1.25},
                    {key::energy_j, 42.0},
                    {key::g_co2e, nullptr},
                    {key::val_loss, 2.75},
                    {key::energy_estimated, false},
                    {key::stopped_at_target, false}};
  s[key::products] = {{key::precision, "bf16"},
                      {key::kernel, "oneDNN"},
                      {key::isa, "avx2"},
                      {key::emulated, true},
                      {key::emulated_reason, "no bf16 product here"}};
  s[key::energy_unknown] = false;
  s[key::energy_j] = 50.25;
  s[key::joules_per_token] = 50.25 / 5120;
  s[key::g_co2e] = nullptr;
  s[key::energy_estimated] = true;
  s[key::tokens_per_joule] = 5120 / 50.25;
  s[key::energy_method] = "CPU estimate";
  s[key::energy] = {{key::flags, {"rapl: not readable"}}};
  return s;
}

TEST(RunFolder, ASummaryWrittenIsReadBackAsWritten) {
  TempDir d;
  write_summary(d.dir(), train_like_summary());
  const std::string text = slurp(d.path / file::summary);
  EXPECT_EQ(text.rfind("{\n  \"schema_version\": 1,\n  \"run_dir\": \"runs/a\",", 0), 0u)
      << "schema_version first, then the keys in the writer's order:\n"
      << text;
  EXPECT_EQ(text.back(), '\n');
  const Summary s = load_summary((d.path / file::summary).string());
  EXPECT_TRUE(s.problems.empty()) << s.problems[0].text;
  EXPECT_EQ(s.schema_version, kSchemaVersion);
  EXPECT_EQ(s.step, 40);
  EXPECT_EQ(s.max_steps, 40);
  EXPECT_EQ(s.tokens, 5120);
  EXPECT_EQ(s.last_loss, 2.5);
  EXPECT_EQ(s.val_loss, 2.75);
  EXPECT_EQ(s.duration_s, 1.5);
  EXPECT_EQ(s.wall_s, 2.25);
  EXPECT_EQ(s.memory_planned_bytes, 1000u);
  EXPECT_EQ(s.memory_runtime_bytes, 24u);
  EXPECT_EQ(s.memory_peak_rss_bytes, 1100u);
  EXPECT_EQ(s.session_start_step, 20);
  EXPECT_EQ(s.energy_j, 50.25);
  EXPECT_FALSE(s.g_co2e) << "null reads as unknown";
  EXPECT_EQ(s.energy_estimated, true);
  EXPECT_EQ(s.energy_unknown, false);
  EXPECT_EQ(s.energy_method, "CPU estimate");
  ASSERT_TRUE(s.energy_flags);
  EXPECT_EQ(*s.energy_flags, std::vector<std::string>{"rapl: not readable"});
  ASSERT_TRUE(s.interruption);
  EXPECT_EQ(s.interruption->checkpoint_write_s, 0.125);
  EXPECT_EQ(s.interruption->restart_s, 0.5);
  EXPECT_EQ(s.interruption->restart_resumed, true);
  ASSERT_TRUE(s.run_totals);
  EXPECT_EQ(s.run_totals->sessions, 2);
  EXPECT_EQ(s.run_totals->first_step, 0);
  EXPECT_EQ(s.run_totals->tokens, 10240);
  EXPECT_EQ(s.run_totals->wall_s, 4.5);
  EXPECT_EQ(s.run_totals->energy_j, 99.5);
  EXPECT_FALSE(s.run_totals->g_co2e);
  ASSERT_TRUE(s.target);
  EXPECT_EQ(s.target->target_loss, 2.8);
  EXPECT_EQ(s.target->reached, true);
  EXPECT_EQ(s.target->step, 30);
  EXPECT_EQ(s.target->tokens, 3840);
  EXPECT_EQ(s.target->seconds, 1.25);
  EXPECT_EQ(s.target->energy_j, 42.0);
  EXPECT_EQ(s.target->energy_estimated, false);
  EXPECT_EQ(s.target->raw, nlohmann::json(train_like_summary()[key::target]));
  EXPECT_EQ(s.products_emulated, true);
  EXPECT_EQ(s.products_emulated_reason, "no bf16 product here");
  // written again: the same bytes (one schema_version, the writer's order)
  nlohmann::ordered_json again = nlohmann::ordered_json::parse(text);
  write_summary(d.dir(), again);
  EXPECT_EQ(slurp(d.path / file::summary), text);
  // nothing but the summary is left in the folder (the temporary file was renamed)
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path), fs::directory_iterator()), 1);
}

TEST(RunFolder, MetricsLinesAppendedAreReadBackAndCutOnResume) {
  TempDir d;
  {
    MetricsLog log(d.dir());
    for (int step = 1; step <= 4; ++step) {
      nlohmann::ordered_json rec;
      rec[key::step] = step;
      rec[key::loss] = 5.0 - step;
      rec[key::lr] = 1e-3;
      rec[key::step_time_s] = 0.25;
      rec[key::tokens_per_s] = 512.0;
      if (step % 2 == 0) {
        rec[key::energy_j] = step == 2 ? nlohmann::ordered_json() : nlohmann::ordered_json(7.5);
        rec[key::energy_estimated] = false;
        rec[key::energy_interval_tokens] = 256;
        rec[key::power_w_by_domain] = {{"cpu", 30.0}, {"gpu", nullptr}};
      }
      if (step == 4) rec[key::target_reached] = 2.0;
      log.append(rec);
    }
  }
  const std::string text = slurp(d.path / file::metrics);
  const Metrics m = read_metrics(text);
  ASSERT_EQ(m.rows.size(), 4u);
  EXPECT_EQ(m.lines, 4);
  EXPECT_EQ(m.unreadable, 0);
  EXPECT_EQ(m.rows[0].step, 1);
  EXPECT_EQ(m.rows[0].loss, 4.0);
  EXPECT_FALSE(m.rows[0].energy_interval_tokens) << "a step inside an interval";
  EXPECT_EQ(m.rows[1].energy_interval_tokens, 256.0);
  EXPECT_FALSE(m.rows[1].energy_j) << "an unknown interval";
  EXPECT_EQ(m.rows[3].energy_j, 7.5);
  ASSERT_TRUE(m.rows[3].power_w_by_domain);
  EXPECT_EQ(m.rows[3].power_w_by_domain->at("cpu"), 30.0);
  EXPECT_FALSE(m.rows[3].power_w_by_domain->at("gpu"));
  EXPECT_EQ(m.rows[3].target_reached, 2.0);
  EXPECT_EQ(last_logged_step(text), 4);
  // a resumed run at step 2 keeps the lines up to it, rewritten whole
  keep_metrics_up_to(d.dir(), 2);
  EXPECT_EQ(read_metrics(slurp(d.path / file::metrics)).rows.size(), 2u);
  remove_metrics(d.dir());
  EXPECT_FALSE(fs::exists(d.path / file::metrics));
}

// Keys of another type than train writes (a hand-edited file, another tool's): unknown, and
// named with their path and type; nothing throws (json.value would throw type_error here).
TEST(RunFolder, KeysOfAnotherTypeAreNamedNotThrown) {
  const char* text = R"({"energy_estimated": "x", "energy_unknown": "no", "step": 2.5,
      "tokens": -3, "energy_j": "many", "memory_peak_rss_bytes": [1],
      "energy": {"flags": [1, 2]}, "run_totals": {"wall_s": "5"}, "interruption": [],
      "target": {"reached": "yes", "reason": 1, "energy_j": 3.0},
      "products": {"emulated": "yes", "emulated_reason": 2}})";
  std::string why;
  std::optional<Summary> s;
  ASSERT_NO_THROW(s = read_summary(text, &why));
  ASSERT_TRUE(s) << why;
  EXPECT_FALSE(s->energy_estimated);
  EXPECT_FALSE(s->energy_unknown);
  EXPECT_FALSE(s->step);
  EXPECT_FALSE(s->tokens);
  EXPECT_FALSE(s->energy_j);
  EXPECT_FALSE(s->memory_peak_rss_bytes);
  EXPECT_FALSE(s->energy_flags);
  ASSERT_TRUE(s->run_totals);
  EXPECT_FALSE(s->run_totals->wall_s);
  EXPECT_FALSE(s->interruption);
  ASSERT_TRUE(s->target);
  EXPECT_FALSE(s->target->reached);
  EXPECT_EQ(s->target->energy_j, 3.0) << "the record's other keys are read";
  std::map<std::string, std::string> named;
  for (const auto& p : s->problems) named[p.key] = p.text;
  EXPECT_EQ(named["energy_estimated"], "energy_estimated is string; expected true or false");
  EXPECT_EQ(named["energy_unknown"], "energy_unknown is string; expected true or false");
  EXPECT_EQ(named["step"], "step is number; expected a whole number >= 0");
  EXPECT_EQ(named["tokens"], "tokens is number; expected a whole number >= 0");
  EXPECT_EQ(named["energy_j"], "energy_j is string; expected a number or null");
  EXPECT_EQ(named["memory_peak_rss_bytes"],
            "memory_peak_rss_bytes is array; expected a whole number >= 0");
  EXPECT_EQ(named["energy.flags"], "energy.flags is array; expected an array of strings");
  EXPECT_EQ(named["run_totals.wall_s"], "run_totals.wall_s is string; expected a number or null");
  EXPECT_FALSE(s->products_emulated);
  EXPECT_EQ(named["products.emulated"], "products.emulated is string; expected true or false");
  EXPECT_FALSE(s->products_emulated_reason);
  EXPECT_EQ(named["products.emulated_reason"],
            "products.emulated_reason is number; expected a string");
  EXPECT_EQ(named["interruption"], "interruption is array; expected an object");
  EXPECT_EQ(named["target.reached"], "target.reached is string; expected true or false");
  EXPECT_EQ(named["target.reason"], "target.reason is number; expected a string");
  EXPECT_EQ(s->problems.size(), 13u);
  ASSERT_NE(s->problem_with("energy_unknown"), nullptr);
  EXPECT_EQ(s->problem_with("energy_method"), nullptr);

  // a metrics line: its mistyped keys named; the file's reader leaves such a line out
  const std::string lines =
      "{\"step\": 1, \"loss\": \"x\", \"energy_estimated\": 1}\n"
      "{\"step\": 2, \"power_w_by_domain\": {\"gpu\": \"hot\"}}\n"
      "{\"step\": 3, \"loss\": 1.5}\n";
  ASSERT_NO_THROW((void)read_metrics(lines));
  const auto row =
      read_metrics_line("{\"step\": 1, \"loss\": \"x\", \"energy_estimated\": 1}", &why);
  ASSERT_TRUE(row) << why;
  ASSERT_EQ(row->problems.size(), 2u);
  EXPECT_EQ(row->problems[0].text, "loss is string; expected a number or null");
  EXPECT_EQ(row->problems[1].text, "energy_estimated is number; expected true or false");
  const Metrics m = read_metrics(lines);
  ASSERT_EQ(m.rows.size(), 1u);
  EXPECT_EQ(m.rows[0].step, 3);
  EXPECT_EQ(m.unreadable, 2);
  EXPECT_EQ(m.first_unreadable, 1);
}

TEST(RunFolder, MissingOrNullFiguresReadAsUnknownWithoutProblems) {
  std::string why;
  for (const char* text : {"{}", R"({"step": null, "energy_j": null, "energy_estimated": null,
                                     "target": null, "run_totals": null, "interruption": null})"}) {
    const auto s = read_summary(text, &why);
    ASSERT_TRUE(s) << why;
    EXPECT_TRUE(s->problems.empty()) << text << ": " << s->problems[0].text;
    EXPECT_FALSE(s->step);
    EXPECT_FALSE(s->energy_j);
    EXPECT_FALSE(s->energy_estimated);
    EXPECT_FALSE(s->target);
    EXPECT_FALSE(s->run_totals);
    EXPECT_FALSE(s->interruption);
  }
  const auto row = read_metrics_line(R"({"step": 3})", &why);
  ASSERT_TRUE(row);
  EXPECT_TRUE(row->problems.empty());
  EXPECT_FALSE(row->loss);
  EXPECT_FALSE(row->energy_interval_tokens);
  EXPECT_FALSE(row->power_w_by_domain);
  // a line without a step is no step's line: the file's reader leaves it out
  const Metrics m = read_metrics("{\"loss\": 1}\n\n{\"step\": 2}\n{\"step\": 3, \"lo");
  EXPECT_EQ(m.rows.size(), 1u);
  EXPECT_EQ(m.lines, 4);
  EXPECT_EQ(m.unreadable, 2);
  EXPECT_EQ(last_logged_step("{\"step\": 2}\n{\"step\": 3, \"lo"), -1) << "a line being written";
  EXPECT_EQ(last_logged_step("{\"step\": 2}\n\n"), 2);
  EXPECT_EQ(last_logged_step(""), -1);
}

// A summary.json of a greentrain before schema_version (its keys as they were written then)
// reads as version 1; one of a newer version says so and its known keys are still read.
TEST(RunFolder, SummariesWithoutSchemaVersionReadAsVersionOne) {
  const char* old = R"({
  "run_dir": "runs/tiny",
  "step": 5,
  "max_steps": 5,
  "last_loss": 3.9,
  "tokens": 640,
  "duration_s": 0.12,
  "wall_s": 0.5,
  "tokens_per_s": 5333.3,
  "energy_unknown": false,
  "energy_j": 1.5,
  "energy_estimated": true,
  "session_start_step": 0,
  "interruption": {"checkpoint_write_s": 0.01, "restart_s": 0.3, "restart_resumed": false},
  "run_totals": {"sessions": 1, "first_step": 0, "tokens": 640, "duration_s": 0.12,
                 "wall_s": 0.5, "energy_j": 1.5, "g_co2e": null}
})";
  std::string why;
  auto s = read_summary(old, &why);
  ASSERT_TRUE(s) << why;
  EXPECT_EQ(s->schema_version, 1);
  EXPECT_TRUE(s->problems.empty());
  EXPECT_EQ(s->step, 5);
  EXPECT_EQ(s->run_totals->wall_s, 0.5);
  EXPECT_EQ(s->interruption->restart_s, 0.3);
  // the resume's reader takes it as it did (run/resume.h)
  const auto prev = previous_session(old, 5, &why);
  ASSERT_TRUE(prev) << why;
  EXPECT_EQ((*prev)[key::run_totals][key::tokens], 640);

  s = read_summary(R"({"schema_version": 7, "step": 5})", &why);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->schema_version, 7);
  EXPECT_EQ(s->step, 5);
  ASSERT_NE(s->problem_with(key::schema_version), nullptr);
  EXPECT_NE(s->problems[0].text.find("schema_version is 7"), std::string::npos);
}

// run_totals.energy_estimated: whether any session's energy was an estimate (the session's
// energy_estimated is the last session's only). Read, carried by a resumed run's reader, and
// for a summary written before the key, the session's flag in its stead.
TEST(RunFolder, RunTotalsSayWhetherAnySessionsEnergyWasAnEstimate) {
  std::string why;
  const char* earlier = R"({"step": 6, "energy_estimated": false,
    "run_totals": {"sessions": 2, "first_step": 0, "energy_j": 3.0, "energy_estimated": true}})";
  auto s = read_summary(earlier, &why);
  ASSERT_TRUE(s) << why;
  EXPECT_TRUE(s->problems.empty());
  EXPECT_EQ(s->run_totals->energy_estimated, true);
  EXPECT_TRUE(s->run_energy_estimated()) << "the first session's estimate counts";
  auto prev = previous_session(earlier, 6, &why);
  ASSERT_TRUE(prev) << why;
  EXPECT_EQ((*prev)[key::run_totals][key::energy_estimated], true);
  // written before the key: unknown in run_totals, the session's flag in its stead
  for (bool session : {true, false}) {
    const std::string old = std::string(R"({"step": 6, "energy_estimated": )") +
                            (session ? "true" : "false") +
                            R"(, "run_totals": {"sessions": 2, "first_step": 0}})";
    s = read_summary(old, &why);
    ASSERT_TRUE(s) << why;
    EXPECT_FALSE(s->run_totals->energy_estimated);
    EXPECT_EQ(s->run_energy_estimated(), session);
    prev = previous_session(old, 6, &why);
    ASSERT_TRUE(prev) << why;
    EXPECT_EQ((*prev)[key::run_totals][key::energy_estimated], session);
  }
  // no flag anywhere (no meter ran): not an estimate, and none carried
  prev = previous_session(R"({"step": 6, "run_totals": {"sessions": 1}})", 6, &why);
  ASSERT_TRUE(prev) << why;
  EXPECT_FALSE((*prev)[key::run_totals].contains(key::energy_estimated));
  // of another type: a problem, and a resumed run does not trust those totals
  const char* bad = R"({"step": 6, "run_totals": {"sessions": 2, "energy_estimated": "yes"}})";
  s = read_summary(bad, &why);
  ASSERT_TRUE(s);
  ASSERT_NE(s->problem_with("run_totals.energy_estimated"), nullptr);
  EXPECT_FALSE(s->run_energy_estimated());
  EXPECT_FALSE(previous_session(bad, 6, &why));
  EXPECT_EQ(why, "run_totals.energy_estimated is \"yes\"; expected true or false");
}

// The sessions before a resumed one (prior_sessions): every session accounted for, the
// summary's totals go on; a session that did not end (session_open.json), no summary.json, or
// one of another step leave the summed figures null with the reason, never a partial sum,
// and tokens, sessions and first_step come from the checkpoint's "run" record.
TEST(RunFolder, AnEarlierSessionNotAccountedForMakesTheSummedFiguresUnknown) {
  const std::string at6 = R"({"step": 6, "run_totals": {"sessions": 2, "first_step": 0,
    "tokens": 192, "duration_s": 1.0, "wall_s": 2.0, "energy_j": 30.0, "g_co2e": 0.1}})";
  const nlohmann::json ck = {{key::session, 2}, {key::first_step, 0}, {key::tokens, 192}};
  std::string note;
  auto p = prior_sessions(at6, std::nullopt, 6, ck, &note);
  EXPECT_TRUE(note.empty()) << note;
  EXPECT_EQ(p[key::run_totals][key::energy_j], 30.0);
  EXPECT_FALSE(p[key::run_totals].contains(key::unknown_reason));
  auto expect_unknown = [](const nlohmann::json& t, const std::string& why) {
    for (const char* k : {key::duration_s, key::wall_s, key::energy_j, key::g_co2e})
      EXPECT_TRUE(t[k].is_null()) << k << ": " << t.dump();
    EXPECT_NE(t.value(key::unknown_reason, std::string()).find(why), std::string::npos) << t.dump();
  };
  // session 3 began at step 6 and was killed before a checkpoint
  p = prior_sessions(at6, R"({"session": 3, "session_start_step": 6, "pid": 1})", 6, ck, &note);
  expect_unknown(p[key::run_totals], "session 3 (from step 6) ended without writing summary.json");
  EXPECT_EQ(note, p[key::run_totals][key::unknown_reason]);
  EXPECT_EQ(p[key::run_totals][key::sessions], 3);
  EXPECT_EQ(p[key::run_totals][key::tokens], 192);
  // killed after writing the checkpoint of step 8, summary.json still of step 6
  const nlohmann::json ck8 = {{key::session, 3}, {key::first_step, 0}, {key::tokens, 256}};
  p = prior_sessions(at6, R"({"session": 3, "session_start_step": 6})", 8, ck8, &note);
  expect_unknown(p[key::run_totals], "session 3 (from step 6)");
  EXPECT_EQ(p[key::run_totals][key::tokens], 256);
  EXPECT_EQ(p[key::run_totals][key::first_step], 0);
  // written before session_open.json: the summary of another step says it
  p = prior_sessions(at6, std::nullopt, 8, ck8, &note);
  expect_unknown(p[key::run_totals], "summary.json is not of step 8");
  p = prior_sessions(std::nullopt, std::nullopt, 8, ck8, &note);
  expect_unknown(p[key::run_totals], "there is no summary.json");
  EXPECT_EQ(p[key::run_totals][key::sessions], 3);
  // an older checkpoint without the record: tokens, sessions and first_step unknown too
  p = prior_sessions(std::nullopt, std::nullopt, 8, nlohmann::json(), &note);
  expect_unknown(p[key::run_totals], "there is no summary.json");
  for (const char* k : {key::sessions, key::first_step, key::tokens})
    EXPECT_TRUE(p[key::run_totals][k].is_null()) << k;
  // a damaged record of the open session: still unknown, never trusted
  p = prior_sessions(at6, "{not json", 6, ck, &note);
  expect_unknown(p[key::run_totals], "its record is damaged");
  // the next session reads these nulls and the reason back from the summary it leaves
  std::string why;
  nlohmann::json written = {{key::step, 8}, {key::run_totals, p[key::run_totals]}};
  const auto prev = previous_session(written.dump(), 8, &why);
  ASSERT_TRUE(prev) << why;
  EXPECT_TRUE((*prev)[key::run_totals][key::energy_j].is_null());
  EXPECT_EQ((*prev)[key::run_totals][key::unknown_reason], p[key::run_totals][key::unknown_reason]);
}

// session_open.json is written while a session trains and removed when it ends.
TEST(RunFolder, TheOpenSessionRecordIsWrittenAndRemoved) {
  TempDir d;
  open_session(d.dir(), 4, 12);
  const auto j = nlohmann::json::parse(slurp(d.path / file::session_open));
  EXPECT_EQ(j[key::session], 4);
  EXPECT_EQ(j[key::session_start_step], 12);
  std::string note;
  auto p = read_prior_sessions(d.dir(), 12, nlohmann::json(), &note);
  EXPECT_NE(note.find("session 4 (from step 12)"), std::string::npos) << note;
  close_session(d.dir());
  EXPECT_FALSE(fs::exists(d.path / file::session_open));
  close_session(d.dir());  // none: nothing to do
}

TEST(RunFolder, WhatIsNoSummaryIsRefusedWithTheReason) {
  std::string why;
  EXPECT_FALSE(read_summary("{\"step\": 3", &why));
  EXPECT_EQ(why.rfind("not valid JSON", 0), 0u) << why;
  EXPECT_FALSE(read_summary("[1, 2]", &why));
  EXPECT_EQ(why, "[1,2] is not an object");
  TempDir d;
  const std::string missing = (d.path / "none" / file::summary).string();
  try {
    (void)load_summary(missing);
    FAIL() << "no error for a missing summary.json";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  // the writer names the file it cannot write, and leaves nothing behind
  EXPECT_THROW(write_summary((d.path / "none").string(), train_like_summary()), Error);
  EXPECT_FALSE(fs::exists(d.path / "none"));
}

}  // namespace
}  // namespace gt::run
