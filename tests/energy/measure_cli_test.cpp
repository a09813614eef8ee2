// tests/energy/measure_cli_test.cpp: `greentrain measure` and `greentrain sensors` end to end:
// time, exit codes, signal forwarding, CSV and JSON outputs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "test_util.h"

namespace gt::energy {
using namespace test;

namespace {

struct Run {
  int code = -1;
  std::string err;
  std::string out;  ///< standard output, when run_out() captured it
};

// out_path: where the program's stdout goes (empty: the test's own)
pid_t spawn(const std::vector<std::string>& args, const std::string& err_path,
            const std::string& out_path = "") {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* e = freopen(err_path.c_str(), "w", stderr);
    (void)e;
    if (!out_path.empty()) {
      FILE* o = freopen(out_path.c_str(), "w", stdout);
      (void)o;
    }
    std::vector<char*> argv{const_cast<char*>(GT_PROGRAM)};
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(GT_PROGRAM, argv.data());
    _exit(126);
  }
  return pid;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Run finish(pid_t pid, const std::string& err_path) {
  int st = 0;
  waitpid(pid, &st, 0);
  Run r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.err = slurp(err_path);
  return r;
}

struct CliEnv {
  TempDir d;
  EnvGuard locks{"GT_ENERGY_LOCK_DIR", d.path};
  EnvGuard nvml{"GT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"};
  Run run(const std::vector<std::string>& args) {
    return finish(spawn(args, d / "stderr.txt"), d / "stderr.txt");
  }
  // run() with the program's stdout captured in Run::out
  Run run_out(const std::vector<std::string>& args) {
    Run r = finish(spawn(args, d / "stderr.txt", d / "stdout.txt"), d / "stderr.txt");
    r.out = slurp(d / "stdout.txt");
    return r;
  }
};

}  // namespace

TEST(MeasureCli, SleepOneSecondIsTimedFromStartToExitAndJson) {
  CliEnv e;
  auto r = e.run(
      {"measure", "--json", e.d / "m.json", "--csv", e.d / "emissions.csv", "--", "sleep", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("time"), std::string::npos);
  EXPECT_NE(r.err.find("estimated"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gCO2e"), std::string::npos);
  EXPECT_NE(r.err.find("overhead"), std::string::npos);
  auto j = nlohmann::json::parse(slurp(e.d / "m.json"));
  // the command's time: never below its sleep; above it by the process start, which took
  // 20-40 ms on a machine loaded by two builds besides the tests (2 vCPU), so 0.2 s of slack
  EXPECT_GE(j["duration_s"].get<double>(), 0.999);
  EXPECT_LT(j["duration_s"].get<double>(), 1.2);
  EXPECT_GE(j["energy_j"].get<double>(), 0.0);
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_TRUE(j["estimated"].get<bool>());
  const std::string csv = slurp(e.d / "emissions.csv");
  EXPECT_EQ(csv.rfind("timestamp,project_name,run_id,experiment_id,duration,emissions,", 0), 0u);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 2);
}

TEST(MeasureCli, ShortCommandAndExitCodeForwarded) {
  CliEnv e;
  auto r = e.run({"measure", "--", "sh", "-c", "sleep 0.3; exit 3"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("exit code +3\n"))) << r.err;
}

TEST(MeasureCli, MissingCommandIs127) {
  CliEnv e;
  auto r = e.run({"measure", "--", "/nonexistent/command"});
  EXPECT_EQ(r.code, 127) << r.err;
}

// Issue 31 §4: a command that is there but not executable is 126, as the shell says.
TEST(MeasureCli, CommandThatIsNotExecutableIs126) {
  CliEnv e;
  write_file(e.d / "script.sh", "#!/bin/sh\nexit 0\n");  // mode 0644
  auto r = e.run({"measure", "--", e.d / "script.sh"});
  EXPECT_EQ(r.code, 126) << r.err;
}

// Issue 31 §4: every signal a user or scheduler sends is forwarded to the command (Slurm's
// --signal=USR1@N, which PyTorch Lightning's auto-requeue waits for, USR2, ALRM, PIPE, HUP,
// QUIT, a real-time one), measure lives on, and its records are written whatever ends the
// command: the command's own exit after the signal, or the signal itself.
TEST(MeasureCli, EverySignalIsForwardedAndTheRecordsWritten) {
  const int rt = SIGRTMIN + 3;
  const std::pair<int, bool> cases[] = {// signal, trapped by the command
                                        {SIGUSR1, true},  {SIGUSR1, false}, {SIGUSR2, false},
                                        {SIGALRM, false}, {SIGPIPE, true},  {SIGPIPE, false},
                                        {SIGHUP, true},   {rt, false}};
  for (auto [sig, trapped] : cases) {
    CliEnv e;
    const std::string ready = e.d / "ready";
    const std::string trap = trapped ? "trap 'exit 42' " + std::to_string(sig) + "; " : "";
    pid_t pid =
        spawn({"measure", "--json", e.d / "m.json", "--csv", e.d / "e.csv", "--", "sh", "-c",
               trap + "echo $$ > '" + ready + ".tmp'; mv '" + ready + ".tmp' '" + ready +
                   "'; while :; do sleep 0.05; done"},
              e.d / "stderr.txt");
    for (int i = 0; i < 600 && !std::filesystem::exists(ready); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(std::filesystem::exists(ready)) << "the child did not start in 30 s";
    const pid_t command = std::stoi(slurp(ready));
    kill(pid, sig);
    auto r = finish(pid, e.d / "stderr.txt");
    kill(command, SIGKILL);  // gone already unless the signal never reached it
    const int want = trapped ? 42 : 128 + sig;
    EXPECT_EQ(r.code, want) << strsignal(sig) << (trapped ? " trapped" : "") << "\n" << r.err;
    ASSERT_TRUE(std::filesystem::exists(e.d / "m.json")) << strsignal(sig) << r.err;
    EXPECT_EQ(nlohmann::json::parse(slurp(e.d / "m.json"))["exit_code"], want);
    const std::string csv = slurp(e.d / "e.csv");
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 2) << strsignal(sig);
  }
}

// Issue 31 §4: an unwritable --json is refused before the command runs; one that fails after
// it (the folder removed meanwhile) does not hide the command's exit status.
TEST(MeasureCli, UnwritableJsonNeverHidesTheExitStatus) {
  CliEnv e;
  auto r = e.run({"measure", "--json", e.d / "no-such-folder/m.json", "--", "touch", e.d / "ran"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("no-such-folder/m.json"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(e.d / "ran")) << "refused before the command ran";
  std::filesystem::create_directories(e.d / "gone");
  r = e.run({"measure", "--json", e.d / "gone/m.json", "--", "sh", "-c",
             "rm -r '" + e.d / "gone" + "'; exit 3"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("--json not written"), std::string::npos) << r.err;
  std::filesystem::create_directories(e.d / "gone");
  r = e.run({"measure", "--json", e.d / "gone/m.json", "--", "rm", "-r", e.d / "gone"});
  EXPECT_EQ(r.code, 1) << "the command's 0, but the record failed: " << r.err;
}

// `measure --json - -- CMD | jq .energy_j` (docs/cli-json.md): with the JSON on stdout the
// command's own stdout goes to stderr, beside the report; stdout holds the JSON alone. (The
// command's output went to the same stdout as the JSON, and jq failed.)
TEST(MeasureCli, JsonToStdoutGetsTheCommandsOutputOnStderr) {
  CliEnv e;
  auto r = e.run_out(
      {"measure", "--json", "-", "--", "sh", "-c", "echo said-on-stdout; echo said-on-stderr >&2"});
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << "stdout: " << r.out;
  EXPECT_EQ(j["schema"], "greentrain.measure/1");
  EXPECT_NE(r.err.find("said-on-stdout"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("said-on-stderr"), std::string::npos) << r.err;
  // with the JSON in a file, the command keeps its stdout
  r = e.run_out({"measure", "--json", e.d / "m.json", "--", "echo", "said-on-stdout"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "said-on-stdout\n");
  // sensors --json -: the JSON alone on stdout too
  r = e.run_out({"sensors", "--json", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NO_THROW((void)nlohmann::json::parse(r.out)) << r.out;
}

// docs/commands.md: "--csv and --json are checked before the command runs". A folder given as
// either passed the check (access() only) and the record was lost after the run ("Is a
// directory"); it is refused, naming the option and the folder, before the command runs.
TEST(MeasureCli, FolderAsCsvOrJsonIsRefusedBeforeTheCommandRuns) {
  CliEnv e;
  std::filesystem::create_directories(e.d / "out");
  for (const char* opt : {"--csv", "--json"}) {
    auto r = e.run({"measure", opt, e.d / "out", "--", "touch", e.d / "ran"});
    EXPECT_EQ(r.code, 1) << opt << ": " << r.err;
    EXPECT_NE(r.err.find(std::string(opt) + " " + e.d / "out" + ": is a folder"), std::string::npos)
        << r.err;
    EXPECT_FALSE(std::filesystem::exists(e.d / "ran")) << opt << ": refused before the run";
  }
}

// Options that only the CSV row or a series file uses were silently ignored without it
// (`measure --wue 5` wrote no water anywhere): each is refused, naming what it needs.
TEST(MeasureCli, OptionsForTheCsvRowOrASeriesAreRefusedWithoutIt) {
  CliEnv e;
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--wue", "5"}, "--wue 5: applies to the --csv row"},
      {{"--pue", "1.5"}, "--pue 1.5: applies to the --csv row"},
      {{"--carbon-unit", "lbs/MWh", "--carbon-intensity", "300"},
       "--carbon-unit lbs/MWh: says how a series file is read; expected --carbon-csv FILE"},
      {{"--carbon-column", "LCA"}, "--carbon-column LCA: says how a series file is read"},
      {{"--carbon-utc-offset", "3"}, "--carbon-utc-offset 3: the time zone of a series' times"}};
  for (const auto& [opts, message] : cases) {
    std::vector<std::string> args = {"measure"};
    args.insert(args.end(), opts.begin(), opts.end());
    args.insert(args.end(), {"--", "touch", e.d / "ran"});
    auto r = e.run(args);
    EXPECT_EQ(r.code, 2) << opts[0] << ": " << r.err;  // a usage error
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(e.d / "ran")) << opts[0];
  }
  auto r = e.run({"measure", "--wue", "5", "--csv", e.d / "e.csv", "--", "true"});
  EXPECT_EQ(r.code, 0) << r.err;
}

// Issue 31 §6: an interval out of its documented range is refused before anything runs.
TEST(MeasureCli, IntervalOutOfRangeIsRefused) {
  CliEnv e;
  for (const char* v : {"1e300", "0.5", "0", "-1"}) {
    auto r = e.run({"measure", "--interval", v, "--", "touch", e.d / "ran"});
    EXPECT_EQ(r.code, 2) << v << r.err;  // a usage error
    EXPECT_NE(r.err.find("--interval"), std::string::npos) << v << r.err;
    EXPECT_FALSE(std::filesystem::exists(e.d / "ran"));
  }
}

// --tdp is a TDP per socket in [1, 2000] W: -1 fell back to the table and 1e9 was taken.
TEST(MeasureCli, TdpOutOfRangeIsRefused) {
  CliEnv e;
  for (const char* v : {"-1", "0", "1e9"}) {  // nan: refused as not finite, naming --tdp
    auto r = e.run({"measure", "--tdp", v, "--", "touch", e.d / "ran"});
    EXPECT_EQ(r.code, 2) << v << r.err;  // a usage error
    EXPECT_NE(r.err.find("--tdp"), std::string::npos) << v << r.err;
    EXPECT_NE(r.err.find("[1, 2000] W"), std::string::npos) << v << r.err;
    EXPECT_FALSE(std::filesystem::exists(e.d / "ran"));
  }
  auto r = e.run({"measure", "--tdp", "150", "--json", e.d / "m.json", "--", "true"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(slurp(e.d / "m.json").find("150 W"), std::string::npos) << "the TDP given is used";
}

// --process with a readable RAPL: the process tree's estimates are counted, not the package's
// counter (which the command makes jump by 9 kJ), and emissions.csv says tracking_mode process.
TEST(MeasureCli, ProcessCountsTheTreesEstimatesNotRapl) {
  CliEnv e;
  EnvGuard no_daemon("GT_DAEMON_SOCKET", e.d / "no-daemon.sock");
  fake_rapl_zone(e.d / "powercap", "intel-rapl:0", "package-0", 1000000, std::nullopt);
  EnvGuard root("GT_POWERCAP_ROOT", e.d / "powercap");
  const std::string bump =
      "sleep 0.2; echo 9000001000000 > " + e.d / "powercap/intel-rapl:0/energy_uj";
  auto r = e.run({"measure", "--process", "--json", e.d / "m.json", "--csv", e.d / "e.csv", "--",
                  "sh", "-c", bump});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(slurp(e.d / "m.json"));
  for (auto& d : j["domains"])
    EXPECT_EQ(d["sensor"].get<std::string>().rfind("rapl", 0), std::string::npos) << d;
  ASSERT_TRUE(j["energy_j"].is_number()) << j;
  EXPECT_LT(j["energy_j"].get<double>(), 1000.0);
  EXPECT_TRUE(j["estimated"].get<bool>());
  const std::string csv = slurp(e.d / "e.csv");
  EXPECT_NE(csv.find(",process,"), std::string::npos) << csv;
  // the whole machine: the package's counter is counted
  r = e.run({"measure", "--json", e.d / "w.json", "--", "sh", "-c",
             "echo 9000002000000 > " + e.d / "powercap/intel-rapl:0/energy_uj"});
  ASSERT_EQ(r.code, 0) << r.err;
  bool rapl = false;
  const auto w = nlohmann::json::parse(slurp(e.d / "w.json"));
  for (auto& d : w["domains"]) rapl = rapl || d["sensor"] == "rapl:package-0";
  EXPECT_TRUE(rapl) << w.dump(2);
}

TEST(MeasureCli, SigintReachesTheChild) {
  CliEnv e;
  // the child says when its trap is set (a fixed wait lost the race on a loaded machine)
  const std::string ready = e.d / "ready";
  pid_t pid = spawn({"measure", "--", "sh", "-c",
                     "trap 'exit 42' INT; touch '" + ready + "'; while :; do sleep 0.05; done"},
                    e.d / "stderr.txt");
  for (int i = 0; i < 600 && !std::filesystem::exists(ready); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(std::filesystem::exists(ready)) << "the child did not start in 30 s";
  kill(pid, SIGINT);
  auto r = finish(pid, e.d / "stderr.txt");
  EXPECT_EQ(r.code, 42) << r.err;
}

// Issue 31 §2: `measure --csv F` run 8 at once keep all their rows (report_test.cpp appends from
// 12 processes at once through the library, on a new and an existing file).
TEST(MeasureCli, ConcurrentCsvAppendsKeepEveryRow) {
  CliEnv e;
  const std::string csv = e.d / "emissions.csv";
  std::vector<pid_t> kids;
  for (int k = 0; k < 8; ++k)
    kids.push_back(spawn({"measure", "--interval", "50", "--csv", csv, "--", "true"},
                         e.d / ("err" + std::to_string(k))));
  for (int k = 0; k < 8; ++k) {
    auto r = finish(kids[k], e.d / ("err" + std::to_string(k)));
    EXPECT_EQ(r.code, 0) << r.err;
  }
  const std::string t = slurp(csv);
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 1 + 8);
}

// Issue 31 §2: a CodeCarbon emissions.csv is neither moved nor overwritten: the row goes under
// its header; a file that is not an emissions CSV is refused before the command runs.
TEST(MeasureCli, CodeCarbonCsvKeptAndForeignCsvRefusedBeforeTheCommandRuns) {
  CliEnv e;
  const std::string theirs =
      "timestamp,project_name,run_id,duration,emissions,energy_consumed,pue\n"
      "2024-01-01T00:00:00,codecarbon,run-a,10,0.1,0.2,1.0\n";
  write_file(e.d / "cc.csv", theirs);
  auto r = e.run({"measure", "--csv", e.d / "cc.csv", "--", "true"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(e.d / "cc.csv.bak"));
  const std::string t = slurp(e.d / "cc.csv");
  EXPECT_EQ(t.rfind(theirs, 0), 0u) << t;
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 3);
  EXPECT_NE(r.err.find("written without"), std::string::npos) << r.err;
  write_file(e.d / "other.csv", "a,b\n1,2\n");
  r = e.run({"measure", "--csv", e.d / "other.csv", "--", "touch", e.d / "ran"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("other.csv"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(e.d / "ran")) << "refused before the command ran";
  EXPECT_EQ(slurp(e.d / "other.csv"), "a,b\n1,2\n");
}

TEST(MeasureCli, CarbonSeriesReplay) {
  CliEnv e;
  write_file(e.d / "ci.csv",
             "Time,Carbon Intensity\n2020-01-01 00:00:00,100\n2020-01-01 01:00:00,200\n");
  auto r = e.run({"measure", "--carbon-csv", e.d / "ci.csv", "--carbon-start",
                  "2020-01-01 00:30:00", "--json", e.d / "m.json", "--", "true"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(slurp(e.d / "m.json"));
  const double kwh = j["energy_j"].get<double>() / 3.6e6;
  EXPECT_NEAR(j["g_co2e"].get<double>(), kwh * 100, 1e-9 + kwh * 1e-6);
}

TEST(MeasureCli, BadOptionsAreErrors) {
  CliEnv e;
  EXPECT_NE(e.run({"measure", "--carbon-intensity", "100", "--carbon-csv", "x", "--", "true"}).code,
            0);
  auto r = e.run({"measure", "--carbon-csv", e.d / "missing.csv", "--", "true"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("missing.csv"), std::string::npos) << r.err;
}

// The measured command runs in the user's environment, unchanged: greentrain's own OpenMP
// spin setting (cli/main.cpp) must not leak into it (it once printed GOMP_SPINCOUNT=10000).
std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> own_environment() {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) out.push_back(*e);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(MeasureCli, CommandGetsTheUsersEnvironmentUnchanged) {
  CliEnv e;
  for (const char* user_spin : {static_cast<const char*>(nullptr), "77"}) {
    std::optional<EnvGuard> spin;
    if (user_spin)
      spin.emplace("GOMP_SPINCOUNT", user_spin);
    else
      unsetenv("GOMP_SPINCOUNT");
    unsetenv("OMP_WAIT_POLICY");
    const std::string out = e.d / "env.txt";
    auto r = e.run({"measure", "--", "sh", "-c", "env > " + out});
    ASSERT_EQ(r.code, 0) << r.err;
    auto child = sorted_lines(slurp(out));
    // sh itself may add PWD, SHLVL and _; compare everything else.
    auto drop_shell = [](std::vector<std::string> v) {
      std::erase_if(v, [](const std::string& l) {
        return l.rfind("PWD=", 0) == 0 || l.rfind("OLDPWD=", 0) == 0 || l.rfind("SHLVL=", 0) == 0 ||
               l.rfind("_=", 0) == 0;
      });
      return v;
    };
    EXPECT_EQ(drop_shell(child), drop_shell(own_environment()))
        << "with GOMP_SPINCOUNT " << (user_spin ? user_spin : "unset");
  }
}

// Issue 12, part 8 (the same kind): CLI11 turned "inf", "nan" and "1e999" into doubles without
// a word (--tdp inf gave a NaN power). Every floating-point option goes through the checked
// parser and names the option and the value.
TEST(MeasureCli, NonFiniteNumberOptionIsNamed) {
  CliEnv e;
  auto r = e.run({"measure", "--tdp", "inf", "--", "true"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--tdp: 'inf' is not finite; expected a finite number"), std::string::npos)
      << r.err;
  r = e.run({"measure", "--carbon-intensity", "1e999", "--", "true"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--carbon-intensity: '1e999' is out of range"), std::string::npos) << r.err;
  EXPECT_EQ(e.run({"measure", "--tdp", "35.5", "--", "true"}).code, 0);
}

// Issue 12.6: 0 gCO2e/kWh is 0, a negative one an error (it silently became 475); the report,
// the JSON and the CSV name the intensity and where it came from.
TEST(MeasureCli, CarbonIntensityZeroIsUsedAndNamed) {
  CliEnv e;
  auto r = e.run({"measure", "--carbon-intensity", "0", "--json", e.d / "m.json", "--csv",
                  e.d / "e.csv", "--", "sleep", "0.3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("0 gCO2e/kWh, constant from --carbon-intensity"), std::string::npos)
      << r.err;
  auto j = nlohmann::json::parse(slurp(e.d / "m.json"));
  EXPECT_EQ(j["g_co2e"].get<double>(), 0.0);
  EXPECT_EQ(j["carbon_g_per_kwh"].get<double>(), 0.0);
  EXPECT_EQ(j["carbon_origin"], "constant");
  const std::string csv = slurp(e.d / "e.csv");
  EXPECT_NE(csv.find("energy_flags,carbon_intensity,carbon_source\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",0,\"0 gCO2e/kWh, constant from --carbon-intensity\"\n"), std::string::npos)
      << csv;

  auto d = e.run({"measure", "--json", e.d / "d.json", "--", "sleep", "0.3"});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_NE(d.err.find("475 gCO2e/kWh, default"), std::string::npos) << d.err;
  auto dj = nlohmann::json::parse(slurp(e.d / "d.json"));
  EXPECT_EQ(dj["carbon_origin"], "default");
  EXPECT_EQ(dj["carbon_g_per_kwh"].get<double>(), 475.0);

  auto n = e.run({"measure", "--carbon-intensity", "-1", "--", "true"});
  EXPECT_NE(n.code, 0) << n.err;
  EXPECT_NE(n.err.find("--carbon-intensity"), std::string::npos) << n.err;
}

// A series with a byte order mark, CRLF line ends and rows with their own offset is read, and
// --carbon-start may state its offset too: 00:30 UTC is the row of 02:00+02:00, 900 gCO2e/kWh.
TEST(MeasureCli, SeriesWithBomCrlfAndOffsetsIsRead) {
  CliEnv e;
  write_file(e.d / "ci.csv",
             "\xEF\xBB\xBFTime,Carbon Intensity\r\n"
             "2020-06-08T00:00:00+02:00,100\r\n"
             "2020-06-08T01:00:00+02:00,500\r\n"
             "2020-06-08T02:00:00+02:00,900\r\n"
             "2020-06-08T03:00:00+02:00,300\r\n");
  auto r = e.run({"measure", "--carbon-csv", e.d / "ci.csv", "--carbon-start",
                  "2020-06-08T00:30:00Z", "--json", e.d / "m.json", "--", "sleep", "0.3"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(slurp(e.d / "m.json"));
  ASSERT_GT(j["energy_j"].get<double>(), 0.0);
  EXPECT_NEAR(j["carbon_g_per_kwh"].get<double>(), 900, 1e-9);
  EXPECT_EQ(j["carbon_origin"], "csv");
  EXPECT_NE(j["carbon_source"].get<std::string>().find(e.d / "ci.csv"), std::string::npos);
  // --carbon-start without a series is an error, not ignored
  EXPECT_NE(e.run({"measure", "--carbon-start", "2020-06-08 00:30", "--", "true"}).code, 0);
}

// A series that ended before the command ran: its last value is held, and the flag naming the
// measured interval and the series' last row reaches the report on stderr, the JSON and the
// CodeCarbon row's energy_flags.
TEST(MeasureCli, SeriesThatEndedIsFlaggedInEveryOutput) {
  CliEnv e;
  write_file(e.d / "old.csv",
             "Time,Carbon Intensity\n2020-01-01 00:00:00,100\n2020-01-01 01:00:00,200\n");
  auto r = e.run({"measure", "--carbon-csv", e.d / "old.csv", "--json", e.d / "m.json", "--csv",
                  e.d / "e.csv", "--", "sleep", "0.3"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string last =
      "whose rows run from 2020-01-01T00:00:00Z to its last row at "
      "2020-01-01T01:00:00Z (step 1 h: it covers up to 2020-01-01T02:00:00Z)";
  EXPECT_NE(r.err.find("flag: carbon: the measured interval "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(last), std::string::npos) << r.err;
  auto j = nlohmann::json::parse(slurp(e.d / "m.json"));
  std::string flag;
  for (const auto& f : j["flags"])
    if (f.get<std::string>().find("carbon: the measured interval ") == 0)
      flag = f.get<std::string>();
  EXPECT_NE(flag.find(last), std::string::npos) << j["flags"].dump();
  EXPECT_NE(flag.find("its last value, 200 gCO2e/kWh, was used"), std::string::npos) << flag;
  EXPECT_NEAR(j["carbon_g_per_kwh"].get<double>(), 200, 1e-9);  // the last row, held
  EXPECT_NE(slurp(e.d / "e.csv").find(last), std::string::npos);
}

// An intensity in another unit than gCO2e/kWh is said once on stderr before the command runs,
// naming the option or file, the value and the likely unit; the measurement goes on.
TEST(MeasureCli, ImplausibleIntensityIsWarnedOnce) {
  CliEnv e;
  auto c = e.run({"measure", "--carbon-intensity", "0.4", "--", "true"});
  ASSERT_EQ(c.code, 0) << c.err;
  const std::string w =
      "greentrain measure: warning: --carbon-intensity: carbon intensity 0.4 "
      "gCO2e/kWh lies outside 1..2000 gCO2e/kWh";
  EXPECT_NE(c.err.find(w), std::string::npos) << c.err;
  EXPECT_EQ(c.err.find("warning:"), c.err.rfind("warning:")) << c.err;
  EXPECT_NE(c.err.find("kg/kWh"), std::string::npos) << c.err;
  write_file(e.d / "kg.csv",
             "Time,Carbon Intensity\n2020-01-01 00:00:00,0.4\n2020-01-01 01:00:00,0.5\n"
             "2020-01-01 02:00:00,0.45\n");
  auto s = e.run({"measure", "--carbon-csv", e.d / "kg.csv", "--", "true"});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.err.find("greentrain measure: warning: carbon series " + e.d / "kg.csv" +
                       ": 3 of 3 values lie outside"),
            std::string::npos)
      << s.err;
  EXPECT_EQ(s.err.find("warning:"), s.err.rfind("warning:")) << s.err;
  EXPECT_NE(s.err.find("set --carbon-unit kg/kWh"), std::string::npos) << s.err;
  // read in its unit, nothing is said
  auto k =
      e.run({"measure", "--carbon-csv", e.d / "kg.csv", "--carbon-unit", "kg/kWh", "--", "true"});
  ASSERT_EQ(k.code, 0) << k.err;
  EXPECT_EQ(k.err.find("warning:"), std::string::npos) << k.err;
}

namespace {
// `greentrain sensors` with this process's environment, its standard output to `out`: its wait
// status and that output.
std::pair<int, std::string> run_sensors(const std::string& out) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* o = freopen(out.c_str(), "w", stdout);
    (void)o;
    execl(GT_PROGRAM, GT_PROGRAM, "sensors", static_cast<char*>(nullptr));
    _exit(126);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return {st, slurp(out)};
}
}  // namespace

TEST(SensorsCli, ListsSensorsAndReasons) {
  CliEnv e;
  const auto [st, text] = run_sensors(e.d / "out.txt");
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_NE(text.find("cpu-estimate"), std::string::npos) << text;
  EXPECT_NE(text.find("nvml"), std::string::npos);
  EXPECT_NE(text.find("reason: "), std::string::npos);
}

// Issue 12, part 8: CUDA_VISIBLE_DEVICES=99999999999999999999 was "greentrain: error: stoul"
// (exit 1) in sensors, measure and train. It is an unmatched entry with a message.
TEST(SensorsCli, CudaVisibleDevicesIndexTooLargeIsAMessageNotAnError) {
  CliEnv e;
  EnvGuard lib("GT_NVML_LIBRARY", GT_FAKE_NVML);
  EnvGuard cvd("CUDA_VISIBLE_DEVICES", "99999999999999999999");
  const auto [st, text] = run_sensors(e.d / "out.txt");
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_NE(text.find("CUDA_VISIBLE_DEVICES entry '99999999999999999999' matches no NVML device"),
            std::string::npos)
      << text;
  auto r = e.run({"measure", "--", "true"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("stoul"), std::string::npos) << r.err;
}

}  // namespace gt::energy
