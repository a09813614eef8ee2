// The command line as people use it (issue 29, section 5): usage errors exit 2, a misspelled
// command gets the nearest one, --set may come before CONFIG, `--json -` (or `--json` alone)
// writes JSON to standard output (and only JSON there) for eval, sensors, measure, schedule,
// tune and ablate, an unreadable sensor is `counted: false`, small J/token keep significant
// digits, train checks the carbon file before the data, and the carbon options (a country, the
// formats grids publish) reach `measure` and `train`; report.html writes values as written and
// has a kWh column.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "test_helpers.h"

namespace gt {
namespace {

namespace fs = std::filesystem;
using test::run_cmd;

const std::string kBin = GT_BINARY;
// No GPU and no RAPL here, whatever the machine has: the figures are the CPU estimate's.
const std::string kNoSensors = "GT_NVML_LIBRARY=/nonexistent/libnvidia-ml.so GT_POWERCAP_ROOT=";

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct CliUsage : ::testing::Test {
  test::TempDir d;
  std::string cfg;
  void SetUp() override {
    // the estimate's reader lock of this test alone: a test beside it (ctest -j) or a process an
    // earlier test left behind would otherwise be the node's reader, and energy here unknown
    setenv("GT_ENERGY_LOCK_DIR", d.file("locks").c_str(), 1);
    test::write_file(d.file("t.txt"), test::sample_text(5000));
    cfg = d.file("tiny.toml");
    test::write_file(cfg,
                     "[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 8\n"
                     "[train]\nbatch_size = 4\nmax_steps = 4\nwarmup_steps = 1\neval_interval = 2\n"
                     "eval_steps = 1\ncheckpoint_interval = 0\nthreads = 2\nlog_interval = 1\n"
                     "[data]\npath = \"" +
                         d.file("t.txt") + "\"\n");
  }
  void TearDown() override { unsetenv("GT_ENERGY_LOCK_DIR"); }
  // stdout alone (stderr to a file), and the exit code
  test::CmdResult stdout_of(const std::string& cmd) {
    return run_cmd("(" + cmd + " 2>" + d.file("stderr.txt") + ")");
  }
};

TEST_F(CliUsage, UsageErrorsExitTwo) {
  for (const std::string args : {"", "--no-such-flag", "train --no-such-flag", "measure",
                                 "sensors --bogus", "schedule", "eval"}) {
    auto r = run_cmd(kBin + " " + args);
    EXPECT_EQ(r.exit_code, 2) << "greentrain " << args << ": " << r.output;
  }
  // greentrain's own checks of the command line's form: no CONFIG, a --set without '=', --resume
  // without --out (a value read and refused exits 1: CliUsage.TrainChecksTheCarbonFile...)
  for (const std::string args : {std::string("train"), "train " + cfg + " --set train.max_steps",
                                 "train " + cfg + " --resume"}) {
    auto r = run_cmd(kBin + " " + args);
    EXPECT_EQ(r.exit_code, 2) << "greentrain " << args << ": " << r.output;
  }
  EXPECT_EQ(run_cmd(kBin + " --help").exit_code, 0);
  EXPECT_EQ(run_cmd(kBin + " train --help").exit_code, 0);
  EXPECT_EQ(run_cmd(kBin + " --version").exit_code, 0);
}

TEST_F(CliUsage, MisspelledCommandSuggestsTheNearest) {
  auto r = run_cmd(kBin + " trian " + cfg);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown command 'trian'; did you mean 'train'?"), std::string::npos)
      << r.output;
  r = run_cmd(kBin + " sensor");
  EXPECT_NE(r.output.find("did you mean 'sensors'?"), std::string::npos) << r.output;
  r = run_cmd(kBin + " zzzzzzzz");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output.find("did you mean"), std::string::npos) << r.output;
}

TEST_F(CliUsage, SetBeforeConfigWorksAsAfterIt) {
  GT_NEEDS_CPU_BACKEND();
  const std::string a = d.file("a"), b = d.file("b");
  auto r1 = run_cmd(kBin + " train --set train.max_steps=2 " + cfg + " --out " + a);
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  auto r2 = run_cmd(kBin + " train " + cfg + " --set train.max_steps=2 --out " + b);
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  for (const auto& run : {a, b}) {
    auto s = nlohmann::json::parse(slurp(run + "/summary.json"));
    EXPECT_EQ(s["step"], 2) << run;
  }
  // a float key is written as written, not as 17 digits
  auto r3 = run_cmd(kBin + " train " + cfg +
                    " --set train.grad_clip=2.9 --set train.max_steps=1 "
                    "--out " +
                    d.file("c"));
  ASSERT_EQ(r3.exit_code, 0) << r3.output;
  const std::string toml = slurp(d.file("c") + "/config.toml");
  EXPECT_NE(toml.find("grad_clip = 2.9\n"), std::string::npos) << toml;
  EXPECT_EQ(toml.find("2.8999999"), std::string::npos) << toml;
  const std::string html = slurp(d.file("c") + "/report.html");
  EXPECT_NE(html.find("<td>2.9</td>"), std::string::npos);
  EXPECT_NE(html.find("energy (kWh)"), std::string::npos);
}

TEST_F(CliUsage, JsonToStandardOutput) {
  // sensors: `--json` alone and `--json -`; an unreadable sensor counts nothing
  for (const std::string flag : {"--json", "--json -"}) {
    auto r = stdout_of(kNoSensors + d.file("none") + " " + kBin + " sensors " + flag);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto j = nlohmann::json::parse(r.output);
    EXPECT_EQ(j["schema"], "greentrain.sensors/1");
    bool saw_nvml = false;
    for (auto& s : j["sensors"]) {
      if (!s["available"].get<bool>()) {
        EXPECT_FALSE(s["counted"].get<bool>()) << s.dump();
      }
      saw_nvml = saw_nvml || s["name"] == "nvml";
    }
    EXPECT_TRUE(saw_nvml) << r.output;
  }
  // measure: the report goes to stderr, the JSON alone to stdout
  auto m = stdout_of(kBin + " measure --json - -- true");
  ASSERT_EQ(m.exit_code, 0) << m.output;
  auto mj = nlohmann::json::parse(m.output);
  EXPECT_EQ(mj["schema"], "greentrain.measure/1");
  EXPECT_EQ(mj["exit_code"], 0);
  EXPECT_NE(slurp(d.file("stderr.txt")).find("greentrain measure: true"), std::string::npos);
  // `--json` alone right before `--` (review of the docs, item 1): standard output, as at the
  // end; it wrote a file named "--". The other commands' --json before `--` alike.
  for (const std::string args : {" measure --json -- sh -c 'exit 3'", " sensors --json --"}) {
    auto bare = stdout_of("cd " + d.path.string() + " && " + kBin + args);
    EXPECT_FALSE(fs::exists(d.file("--"))) << args << ": wrote a file named --";
    EXPECT_EQ(bare.exit_code, args.find("exit 3") != std::string::npos ? 3 : 0) << bare.output;
    EXPECT_NO_THROW((void)nlohmann::json::parse(bare.output)) << args << ": " << bare.output;
  }
  // tune (simulated devices)
  auto t =
      stdout_of(kBin + " tune --simulate --step 50 --warmup-steps 0 --profile-steps 1 --json -");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  auto tj = nlohmann::json::parse(t.output);
  EXPECT_EQ(tj["schema"], "greentrain.tune/1");
  EXPECT_GT(tj["chosen_limit_w"].get<double>(), 0);
  EXPECT_GE(tj["points"].size(), 2u);
  // schedule: the table goes to stderr
  test::write_file(d.file("ci.csv"),
                   "Time,Carbon Intensity\n2020-01-01 00:00:00,300\n2020-01-01 01:00:00,100\n"
                   "2020-01-01 02:00:00,200\n2020-01-01 03:00:00,400\n");
  test::write_file(d.file("jobs.toml"),
                   "[[job]]\nname = \"a\"\ncommand = \"true\"\nduration_s = 3600\npower_w = 100\n"
                   "earliest_start = 2020-01-01T00:00:00\ndeadline = 2020-01-01T04:00:00\n");
  auto s = stdout_of(kBin + " schedule " + d.file("jobs.toml") + " --carbon-csv " +
                     d.file("ci.csv") + " --utc-offset 0 --json -");
  ASSERT_EQ(s.exit_code, 0) << s.output << slurp(d.file("stderr.txt"));
  auto sj = nlohmann::json::parse(s.output);
  EXPECT_EQ(sj["schema"], "greentrain.schedule/2");
  EXPECT_NE(sj["carbon_series"].get<std::string>().find("greentrain"), std::string::npos);
}

// A bare `--json` followed by another option is standard output too, as right before `--`:
// `measure --json --interval 50 -- CMD` was refused with CLI11's unclear message (exit 2, no
// word of --json taking no value there). No file named after the option is written.
TEST_F(CliUsage, BareJsonBeforeAnotherOptionIsStandardOutput) {
  for (const std::string args :
       {" measure --json --interval 50 -- sh -c 'exit 3'",
        " tune --simulate --json --step 50 --warmup-steps 0 --profile-steps 1"}) {
    auto r = stdout_of("cd " + d.path.string() + " && " + kBin + args);
    EXPECT_EQ(r.exit_code, args.find("exit 3") != std::string::npos ? 3 : 0)
        << args << ": " << r.output << slurp(d.file("stderr.txt"));
    EXPECT_NO_THROW((void)nlohmann::json::parse(r.output)) << args << ": " << r.output;
    for (const char* name : {"--interval", "--step", "-"})
      EXPECT_FALSE(fs::exists(d.file(name))) << args << ": wrote a file named " << name;
  }
  // an option that is not known is still refused, naming it (not --json)
  auto bad = run_cmd(kBin + " measure --json --bogus -- true");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--bogus"), std::string::npos) << bad.output;
}

// `tune --devices foo` exited 1 when the devices were opened: a value that is not one of the
// choices is a usage error (exit 2), refused while the command line is read, naming the value
// and the choices.
TEST_F(CliUsage, TuneDevicesNotAChoiceIsAUsageError) {
  auto r = run_cmd(kBin + " tune " + cfg + " --devices foo --out " + d.file("tune"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--devices: 'foo' is not known; expected auto, nvml or rapl"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(d.file("tune")));  // nothing was made
}

TEST_F(CliUsage, EvalJsonToStandardOutput) {
  GT_NEEDS_CPU_BACKEND();
  auto r = run_cmd(kBin + " train " + cfg + " --out " + d.file("run") +
                   " --set train.checkpoint_interval=4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto e = stdout_of(kBin + " eval " + d.file("run") + " --json -");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  auto j = nlohmann::json::parse(e.output);
  EXPECT_EQ(j["schema"], "greentrain.eval/1");
  EXPECT_GT(j["val_loss"].get<double>(), 0);
  EXPECT_NEAR(j["perplexity"].get<double>(), std::exp(j["val_loss"].get<double>()), 1e-9);
}

// The carbon file is read before the data: a bad carbon file is reported although the data
// path does not exist either (before, the data was loaded first and named).
// Issue 31 §6: every duration, interval and count has a range, and a value outside it is an
// error naming the option, the value and the range, before any work. These took a negative
// value as "not given" or "all" (--threads, --top-k, --window-h), allocated a 1e300 MiB sample
// (--train-mib) or rounded 1e300 s into an int64 deadline (--deadline-grace-s, --slot-s).
TEST_F(CliUsage, CountsAndDurationsOutsideTheirRangeNameTheOptionAndTheRange) {
  test::write_file(d.file("ci.csv"),
                   "Time,Carbon Intensity\n2020-06-01T00:00:00,100\n2020-06-01T01:00:00,200\n");
  test::write_file(d.file("jobs.csv"), "name,nominal_start,duration_s,power_w\n");
  const std::string prep = kBin + " prepare " + d.file("t.txt") + " --tokenizer byte --out " +
                           d.file("p") + " ",
                    sched = kBin + " schedule " + d.file("jobs.csv") + " --carbon-csv " +
                            d.file("ci.csv") + " --utc-offset 0 ";
  struct Case {
    std::string cmd, needle;
    int exit_code;  // 2: the command line's value (a usage error); 1: a configuration key's
  };
  const Case cases[] = {
      {prep + "--threads -1", "--threads: '-1' is out of range; expected 0 (all cores) to 4096", 2},
      {prep + "--threads 100000", "--threads: '100000' is out of range; expected 0 (all cores)", 2},
      {prep + "--train-mib 1e300", "--train-mib 1e+300: expected (0, 65536] MiB", 2},
      {prep + "--train-mib 0", "--train-mib 0: expected (0, 65536] MiB", 2},
      {prep + "--val-fraction 1", "--val-fraction 1: expected [0, 1)", 2},
      {kBin + " prepare " + d.file("t.txt") + " --tokenizer bpe --vocab-size 70000 --out " +
           d.file("p"),
       "--vocab-size: '70000' is out of range; expected 260 to 65536", 2},
      {kBin + " prepare " + d.file("t.txt") + " --tokenizer bpe --vocab-size 100 --out " +
           d.file("p"),
       "--vocab-size: '100' is out of range; expected 260 to 65536", 2},  // (was data.vocab_size)
      {kBin + " prepare " + d.file("t.txt") + " --out " + d.file("p"),
       "--tokenizer gpt2 (the default) needs --tokenizer-path", 2},
      {kBin + " sample " + d.file("none") + " --top-k -1",
       "--top-k: '-1' is out of range; expected 0 (all tokens)", 2},
      {sched + "--window-h -5", "--window-h: '-5' is out of range; expected hours in [0, 8784]", 2},
      {sched + "--window-h 9000", "--window-h: '9000' is out of range; expected hours in [0, 8784]",
       2},
      {sched + "--deadline-rule next-workday --deadline-grace-s 1e300",
       "--deadline-grace-s: '1e+300' is out of range; expected seconds in [0, 31622400]", 2},
      {sched + "--slot-s 1000000000000",
       "--slot-s: '1000000000000' is out of range; expected seconds in [1, 31622400]", 2},
      {sched + "--slot-s -1", "--slot-s: '-1' is out of range; expected seconds in [1, 31622400]",
       2},
      {kBin + " train " + cfg + " --out " + d.file("r") + " --set train.threads=-1",
       "train.threads = -1: expected 0 (all cores) to 4096 threads", 1},
      {kBin + " train " + cfg + " --out " + d.file("r") + " --set train.power_limit_device=fpga",
       "train.power_limit_device = 'fpga': expected auto (NVIDIA GPUs if any, else CPU packages), "
       "gpu (NVML) or cpu (RAPL)",
       1},
      {kBin + " train " + cfg + " --out " + d.file("r") + " --set energy.cpu_tdp_w=1e9",
       "energy.cpu_tdp_w = 1000000000: expected 0 (the CPU model's table) or a TDP per socket in "
       "[1, 2000] W",
       1},
  };
  for (const auto& c : cases) {
    auto r = run_cmd(c.cmd);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.cmd << ": " << r.output;
    EXPECT_NE(r.output.find(c.needle), std::string::npos) << c.cmd << ": " << r.output;
  }
  EXPECT_FALSE(fs::exists(d.file("p"))) << "prepare wrote its folder before refusing";
  EXPECT_FALSE(fs::exists(d.file("r"))) << "train wrote its run folder before refusing";
  // tune said "power-limit step 0 W is not valid" and "eta 2 is not valid", naming no option,
  // after it had set up (and printed) its devices
  const std::string tune = kBin + " tune --simulate ";
  const std::pair<std::string, std::string> tune_cases[] = {
      {tune + "--step 0", "--step 0 W is not valid; expected W > 0"},
      {tune + "--step -25", "--step -25 W is not valid; expected W > 0"},
      {tune + "--eta 2", "--eta 2 is not valid; expected an energy weight in [0, 1]"},
      {tune + "--eta -0.5", "--eta -0.5 is not valid; expected an energy weight in [0, 1]"},
      {tune + "--objective slowdown --max-slowdown 0.9",
       "--max-slowdown 0.9 is not valid; expected a time factor"},
      {tune + "--warmup-steps -1", "--warmup-steps: '-1' is out of range; expected 0 to"},
      {tune + "--profile-steps 0", "--profile-steps: '0' is out of range; expected 1 to"},
      {tune + "--objective money", "money"},
  };
  for (const auto& [cmd, needle] : tune_cases) {
    auto r = run_cmd(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << ": " << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << cmd << ": " << r.output;
    EXPECT_EQ(r.output.find("simulated device(s)"), std::string::npos)
        << cmd << ": set up first: " << r.output;
  }
}

// docs/commands.md's rule (review of the docs, items 4 and 8): a value the command line gives
// that is refused (not a number, out of range, an option without the one it needs) exits 2, on
// every command, and names the option and its range readably; what a file holds exits 1. These
// exited 1 (schedule --window-h with a TOML, measure --pue without --csv, --carbon-region XX),
// printed the range as "0 to 1.797e+308" (--energy-weight) or said "Could not convert" with no
// range (a value its int could not hold).
TEST_F(CliUsage, ACommandLineValueRefusedExitsTwoAndNamesTheRange) {
  test::write_file(d.file("ci.csv"),
                   "Time,Carbon Intensity\n2020-06-01T00:00:00,100\n2020-06-01T01:00:00,200\n");
  test::write_file(d.file("jobs.toml"),
                   "[[job]]\nname = \"a\"\ncommand = \"true\"\nduration_s = 3600\npower_w = 100\n"
                   "earliest_start = 2020-06-01T00:00:00\ndeadline = 2020-06-01T02:00:00\n");
  const std::string sched = kBin + " schedule " + d.file("jobs.toml") + " --carbon-csv " +
                            d.file("ci.csv") + " --utc-offset 0 ";
  const std::pair<std::string, std::string> usage[] = {
      {kBin + " sample " + d.file("none") + " --tokens 2147483648",
       "--tokens: '2147483648' is out of range; expected 0 to 2147483647"},
      {kBin + " ablate " + cfg + " --steps 2147483648",
       "--steps: '2147483648' is out of range; expected 2 to 2147483647"},
      {kBin + " tune --simulate --profile-steps 2147483648",
       "--profile-steps: '2147483648' is out of range; expected 1 to 2147483647"},
      // (--status at a socket of its own: a program that took -5 must not start a daemon here)
      {kBin + " serve --status --socket " + d.file("none.sock") + " --prometheus-port -5",
       "--prometheus-port: '-5' is out of range"},
      {kBin + " train " + cfg + " --stop-at 0", "--stop-at: expected a step number >= 1"},
      {sched + "--seeds 0", "--seeds: '0' is out of range; expected 1 to 1000000"},
      {sched + "--objective weighted --energy-weight -1",
       "--energy-weight: '-1' is out of range; expected gCO2e per kWh, 0 or more"},
      {sched + "--power-budget -1", "--power-budget: '-1' is out of range; expected 0 or more"},
      {sched + "--forecast-error nan", "--forecast-error: 'nan' is not finite"},
      {sched + "--strategy fastest", "fastest"},
      {sched + "--window-h 2", "apply to job CSVs only"},
      {kBin + " measure --interval 0 -- true", "--interval 0: expected a sampling period"},
      {kBin + " measure --pue 1.5 -- true", "--pue 1.5: applies to the --csv row"},
      {kBin + " measure --carbon-region XX -- true", "unknown country code 'XX'"},
      {kBin + " ablate " + cfg + " --rounds 3 --steps 4", "--rounds 3: expected 1 to 2"},
  };
  for (const auto& [cmd, needle] : usage) {
    auto r = run_cmd(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << ": " << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << cmd << ": " << r.output;
    EXPECT_EQ(r.output.find("1.797"), std::string::npos) << cmd << ": " << r.output;
    EXPECT_EQ(r.output.find("Could not convert"), std::string::npos) << cmd << ": " << r.output;
  }
  // what a file holds (or lacks) is not the command line's: exit 1
  test::write_file(d.file("bad.csv"), "Time,Carbon Intensity\n2020-06-01T00:00:00,lots\n");
  const std::string files[] = {
      kBin + " schedule " + d.file("no-jobs.toml") + " --carbon-csv " + d.file("ci.csv") +
          " --utc-offset 0",
      kBin + " measure --carbon-csv " + d.file("bad.csv") + " -- true",
      kBin + " ablate " + d.file("no-config.toml"),
  };
  for (const auto& cmd : files) {
    auto r = run_cmd(cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd << ": " << r.output;
  }
}

// An fp8 row on a device without fp8 failed after the baseline and bf16 rows had run; it is
// refused before any row, naming the devices that have fp8.
TEST_F(CliUsage, AblateRefusesAnFp8RowOnADeviceWithoutFp8BeforeAnyRow) {
  auto r = run_cmd(kBin + " ablate " + cfg + " --steps 2 --order bf16,fp8 --out " + d.file("ab"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("fp8 needs train.device = cuda or cuda-emu"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(d.file("ab"))) << "a row ran, or its folder was made: " << r.output;
}

// Options a simulated search would ignore are usage errors naming them (review of `schedule`,
// item 5): `tune CONFIG --simulate` searched the simulated devices and said nothing of CONFIG.
TEST_F(CliUsage, TuneRefusesOptionsASimulatedSearchWouldIgnore) {
  const std::pair<std::string, std::string> cases[] = {
      {" tune " + cfg + " --simulate",
       "--simulate searches on simulated devices and trains nothing, so CONFIG " + cfg +
           " would be ignored"},
      {" tune --simulate --set train.max_steps=3 --out " + d.file("o"),
       "so --set and --out would be ignored"},
      {" tune --simulate --devices rapl", "so --devices would be ignored"},
      {" tune " + cfg + " --sim-devices 2", "--sim-devices applies to --simulate only"},
  };
  for (const auto& [args, needle] : cases) {
    auto r = run_cmd(kBin + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << args << ": " << r.output;
    EXPECT_EQ(r.output.find("device "), std::string::npos)
        << args << ": opened first: " << r.output;
  }
  EXPECT_FALSE(fs::exists(d.file("o")));
  EXPECT_EQ(run_cmd(kBin + " tune --simulate --sim-devices 2 --step 100 --warmup-steps 0 "
                           "--profile-steps 1")
                .exit_code,
            0);
}

// --eta and --max-slowdown were taken with every objective although only cost reads --eta and
// only slowdown --max-slowdown (tune/tuner.cpp's choose_limit_w): `--objective energy --eta 0.2`
// chose as without it, and `--max-slowdown 1.3` beside the default cost did nothing. Each is a
// usage error naming the option and the objective it applies to, before any device is set up.
TEST_F(CliUsage, TuneRefusesEtaAndMaxSlowdownWithAnObjectiveThatDoesNotReadThem) {
  const std::string tune = kBin + " tune --simulate --step 100 --warmup-steps 0 --profile-steps 1 ";
  const std::pair<std::string, std::string> refused[] = {
      {"--objective energy --eta 0.2", "--eta applies to --objective cost only"},
      {"--objective time --eta 0.2", "--objective time does not choose by it"},
      {"--objective slowdown --eta 0.2", "--eta applies to --objective cost only"},
      {"--max-slowdown 1.3", "--max-slowdown applies to --objective slowdown only"},
      {"--objective energy --max-slowdown 1.3", "--objective energy does not read it"},
      {"--objective cost --max-slowdown 1.3", "--max-slowdown applies to --objective slowdown"},
  };
  for (const auto& [args, needle] : refused) {
    auto r = run_cmd(tune + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << args << ": " << r.output;
    EXPECT_EQ(r.output.find("simulated device(s)"), std::string::npos)
        << args << ": set up first: " << r.output;
  }
  // where they are read, the chosen line names them (and no other objective's option)
  const std::pair<std::string, std::string> taken[] = {
      {"--eta 0.2", "(objective cost, eta 0.2, P_max"},
      {"--objective cost --eta 0.9", "(objective cost, eta 0.9, P_max"},
      {"--objective slowdown --max-slowdown 1.3", "(objective slowdown, max slowdown 1.3, P_max"},
      {"--objective energy", "(objective energy, P_max"},
  };
  for (const auto& [args, needle] : taken) {
    auto r = run_cmd(tune + args);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << args << ": " << r.output;
  }
}

// docs/commands.md named tune's objectives "energy, time, eta-cost or max-slowdown"; the command
// takes energy|time|cost|slowdown (review of `schedule`, item 6). The names the docs give in the
// sentence on --objective are the ones the command runs.
TEST_F(CliUsage, TuneObjectivesInTheDocsAreTheCommands) {
  const std::string docs = slurp(std::string(GT_SOURCE_DIR) + "/docs/commands.md");
  const auto section = docs.find("## `greentrain tune`");
  ASSERT_NE(section, std::string::npos);
  const auto at = docs.find("`--objective`", section);
  ASSERT_NE(at, std::string::npos) << "the tune section does not describe --objective";
  const std::string sentence = docs.substr(at, docs.find(". ", at) - at);
  std::set<std::string> named;
  const std::regex name("`([a-z]+)`");
  for (std::sregex_iterator i(sentence.begin(), sentence.end(), name), e; i != e; ++i)
    named.insert((*i)[1]);
  EXPECT_EQ(named, (std::set<std::string>{"energy", "time", "cost", "slowdown"})) << sentence;
  for (const auto& o : named) {
    auto r = run_cmd(kBin + " tune --simulate --step 100 --warmup-steps 0 --profile-steps 1 " +
                     "--objective " + o);
    EXPECT_EQ(r.exit_code, 0) << o << ": " << r.output;
  }
}

// schedule --submit gives every job --time-min (its planned length) beside --time (plus a
// margin), and with --time-min Slurm's backfill may start a job with any limit down to it, the
// margin gone: the docs said only why --time-min is there (review of `schedule`, left item 3).
// While sbatch gets --time-min, the schedule section says what backfill may do with it, what the
// user sees, and how to keep the margin.
TEST_F(CliUsage, ScheduleDocsSayBackfillMayDropTheMarginToTimeMin) {
  test::write_file(d.file("ci.csv"),
                   "Time,Carbon Intensity\n2020-06-01 00:00:00,400\n2020-06-01 01:00:00,100\n"
                   "2020-06-01 02:00:00,400\n");
  test::write_file(d.file("j.toml"),
                   "[[job]]\nname = \"j\"\nscript = \"j.sbatch\"\nduration_s = 3600\n"
                   "power_w = 100\nearliest_start = 2020-06-01T00:00:00\n"
                   "deadline = 2020-06-01T03:00:00\n");
  auto r = run_cmd("GT_SCHEDULE_NOW=2020-01-01T00:00:00Z " + kBin + " schedule " +
                   d.file("j.toml") + " --carbon-csv " + d.file("ci.csv") +
                   " --utc-offset 0 --cluster-tz 0 --submit slurm --dry-run");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_NE(r.output.find("--time=66 --time-min=60"), std::string::npos) << r.output;
  const std::string docs = slurp(std::string(GT_SOURCE_DIR) + "/docs/commands.md");
  const auto section = docs.find("## `greentrain schedule`");
  ASSERT_NE(section, std::string::npos);
  const auto at = docs.find("- `--time-min` also lets Slurm take the margin away", section);
  ASSERT_NE(at, std::string::npos) << "the schedule section does not say what backfill may do";
  const std::string para = docs.substr(at, docs.find('\n', at) - at);
  for (const char* want : {"backfill", "`TimeLimit`", "`TimeMin`", "`TIMEOUT`", "`--dry-run`",
                           "without `--time-min`", "no option"})
    EXPECT_NE(para.find(want), std::string::npos) << want << " not in: " << para;
}

TEST_F(CliUsage, TrainChecksTheCarbonFileBeforeLoadingData) {
  test::write_file(d.file("bad.csv"), "Time,Carbon Intensity\n2020-01-01 00:00:00,lots\n");
  auto r = run_cmd(kBin + " train " + cfg + " --data " + d.file("no-data.txt") +
                   " --set energy.carbon_csv=" + d.file("bad.csv") + " --out " + d.file("x"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("bad.csv:2"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("no-data.txt"), std::string::npos) << r.output;
  r = run_cmd(kBin + " train " + cfg + " --set energy.carbon_region=DEX --out " + d.file("y"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("near matches: DEU (Germany)"), std::string::npos) << r.output;
}

// --carbon-region: a country's annual average, and emissions.csv's country columns.
TEST_F(CliUsage, MeasureWithACountryAndWithPublishedFormats) {
  auto r = stdout_of(kBin + " measure --carbon-region FRA --csv " + d.file("e.csv") +
                     " --json - -- sleep 0.2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["carbon_g_per_kwh"], 67.39);
  EXPECT_EQ(j["carbon_origin"], "country");
  const std::string csv = slurp(d.file("e.csv"));
  EXPECT_NE(csv.find(",France,FRA,"), std::string::npos) << csv;
  auto bad = run_cmd(kBin + " measure --carbon-region XX -- true");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;  // a value of the command line
  EXPECT_NE(bad.output.find("unknown country code 'XX'"), std::string::npos) << bad.output;
  // the UK API's JSON, its nulls flagged as gaps; replayed at a time inside the series
  test::write_file(
      d.file("uk.json"),
      R"({"data":[{"from":"2018-01-20T12:00Z","to":"2018-01-20T12:30Z","intensity":{"forecast":266,"actual":263,"index":"moderate"}},
{"from":"2018-01-20T12:30Z","to":"2018-01-20T13:00Z","intensity":{"forecast":270,"actual":null,"index":"moderate"}},
{"from":"2018-01-20T13:00Z","to":"2018-01-20T13:30Z","intensity":{"forecast":250,"actual":255,"index":"moderate"}}]})");
  auto u = stdout_of(kBin + " measure --carbon-csv " + d.file("uk.json") +
                     " --carbon-start 2018-01-20T12:40:00Z --json - -- sleep 0.2");
  ASSERT_EQ(u.exit_code, 0) << u.output << slurp(d.file("stderr.txt"));
  auto uj = nlohmann::json::parse(u.output);
  EXPECT_NE(uj["carbon_source"].get<std::string>().find("uk-carbon-intensity intensity.actual"),
            std::string::npos)
      << uj.dump();
  bool gap = false;
  for (auto& f : uj["flags"])
    gap = gap || f.get<std::string>().find("no rows from") != std::string::npos;
  EXPECT_TRUE(gap) << uj["flags"].dump();
  auto f =
      stdout_of(kBin + " measure --carbon-csv " + d.file("uk.json") +
                " --carbon-value forecast --carbon-start 2018-01-20T12:40:00Z --json - -- true");
  ASSERT_EQ(f.exit_code, 0) << f.output;
  auto fj = nlohmann::json::parse(f.output);
  if (!fj["carbon_g_per_kwh"].is_null()) {
    EXPECT_DOUBLE_EQ(fj["carbon_g_per_kwh"].get<double>(), 270);
  }
}

}  // namespace
}  // namespace gt

namespace gt {
namespace {

// ablate: a progress line while a row runs (standard error with --json -), the table's J/token
// to 4 significant digits (it was "{:.4f}": 0.0000 for a small figure), the JSON on stdout.
TEST_F(CliUsage, AblateShowsProgressAndSignificantDigits) {
  GT_NEEDS_CPU_BACKEND();
  test::write_file(d.file("t.txt"), test::sample_text(40000));
  test::write_file(d.file("a.toml"),
                   "[model]\nn_layer = 2\nn_head = 2\nn_embd = 64\nblock_size = 64\n"
                   "[train]\nbatch_size = 8\nwarmup_steps = 1\neval_steps = 1\nthreads = 2\n"
                   "[data]\npath = \"" +
                       d.file("t.txt") + "\"\n");
  auto r = stdout_of(kBin + " ablate " + d.file("a.toml") + " --steps 60 --order fusion --out " +
                     d.file("abl") + " --json -");
  const std::string err = slurp(d.file("stderr.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.output << err;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["schema"], "greentrain.ablate/1");
  EXPECT_TRUE(std::regex_search(err, std::regex(R"(    baseline: step [0-9]+ of 60, [0-9]+ s)")))
      << err;
  std::smatch row;
  ASSERT_TRUE(std::regex_search(err, row, std::regex(R"(\nbaseline +[0-9]+ +[0-9]+ +(\S+))")))
      << err;
  ASSERT_TRUE(j["rows"][0]["joules_per_token"].is_number()) << j.dump();
  const double jpt = j["rows"][0]["joules_per_token"].get<double>();
  EXPECT_NEAR(std::stod(row[1].str()), jpt, jpt * 5e-4) << row[1].str();
}

}  // namespace
}  // namespace gt
