// tests/energy/measure_orphans_test.cpp: `greentrain measure` adopts the orphans of the
// command's process tree. A process that the command double-forks (a daemonizing child) used
// to be reparented to init and leave the tree: `--process` counted none of its CPU time. measure
// is now a child subreaper: the orphan stays in the tree, is counted, and is reaped; one still
// running when the command ends is named in a note.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "test_util.h"

namespace gt::energy {
using namespace test;

namespace {

// The file at `p` (named apart from measure_cli_test.cpp's slurp: a unity build compiles both as
// one)
std::string orphan_test_read(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs greentrain with `args`, its stderr in err_path; returns its exit code.
int run_greentrain(const std::vector<std::string>& args, const std::string& err_path) {
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* e = freopen(err_path.c_str(), "w", stderr);
    (void)e;
    std::vector<char*> argv{const_cast<char*>(GT_PROGRAM)};
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(GT_PROGRAM, argv.data());
    _exit(126);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct OrphanEnv {
  TempDir d;
  EnvGuard locks{"GT_ENERGY_LOCK_DIR", d.path};
  EnvGuard nvml{"GT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"};
  EnvGuard no_daemon{"GT_DAEMON_SOCKET", d / "no-daemon.sock"};
  EnvGuard no_rapl{"GT_POWERCAP_ROOT", d / "no-powercap"};

  // The CPU estimate's energy (J) of `measure --process -- sh -c script`.
  double cpu_j(const std::string& script, const std::string& name) {
    const std::string json = d / (name + ".json"), err = d / (name + ".err");
    const int code = run_greentrain(
        {"measure", "--process", "--tdp", "100", "--json", json, "--", "sh", "-c", script}, err);
    EXPECT_EQ(code, 0) << orphan_test_read(err);
    const auto j = nlohmann::json::parse(orphan_test_read(json));
    for (const auto& dom : j["domains"])
      if (dom["sensor"] == "cpu-estimate") return dom["energy_j"].get<double>();
    ADD_FAILURE() << "no cpu-estimate domain: " << j.dump(2) << orphan_test_read(err);
    return 0;
  }
};

}  // namespace

// The busy loop runs about 1 s, until the command makes the file `stop`; the command's own
// shell only sleeps. Run as a child of the command, and double-forked (its parent exits at
// once, so it is an orphan from its start): both count the same CPU time, within a half.
TEST(MeasureOrphans, ADoubleForkedBusyChildIsCountedInTheProcessTree) {
  OrphanEnv e;
  const std::string stop = e.d / "stop";
  const std::string busy = "while [ ! -e " + stop + " ]; do :; done";
  const double direct =
      e.cpu_j("sh -c '" + busy + "' & sleep 1; touch " + stop + "; wait", "direct");
  std::remove(stop.c_str());
  const std::string orphan = "(sh -c '" + busy + "' &); sleep 1; touch " + stop + "; sleep 0.3";
  const double adopted = e.cpu_j(orphan, "orphan");
  ASSERT_GT(direct, 0.0);
  // Not counted, the adopted run reads about 0 J; two busy seconds on a shared, loaded machine
  // can differ by 2x, so the band is wide.
  EXPECT_GT(adopted, 0.25 * direct) << "the double-forked child's CPU time is not counted";
  EXPECT_LT(adopted, 4 * direct);
}

// An adopted process still running when the command ends is named, not waited for.
TEST(MeasureOrphans, AnOrphanLeftRunningIsNamedInANote) {
  OrphanEnv e;
  const int code =
      run_greentrain({"measure", "--", "sh", "-c", "(sleep 10 &); exit 0"}, e.d / "err");
  const std::string err = orphan_test_read(e.d / "err");
  EXPECT_EQ(code, 0) << err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      err, m,
      std::regex("note: the command left 1 process running \\(([0-9]+)\\), measured until it "
                 "ended and not after")))
      << err;
  ::kill(std::stoi(m[1].str()), SIGKILL);  // the sleep, now init's
}

}  // namespace gt::energy
