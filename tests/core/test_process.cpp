// The child-process runner of measure and ablate (core/process.h): exit codes as the shell
// gives them, the output file, a held child, a forwarded signal, an abandoned child killed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/process.h"

namespace gt {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("gt-process-test-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

int run(const std::vector<std::string>& argv, const ChildOptions& opt = {}) {
  ChildProcess c(argv, opt);
  c.wait_ended();
  return exit_code_of(c.reap());
}

TEST(ChildProcess, GivesTheExitCodeAsTheShellDoes) {
  EXPECT_EQ(run({"sh", "-c", "exit 3"}), 3);
  EXPECT_EQ(run({"true"}), 0);
  EXPECT_EQ(run({"sh", "-c", "kill -KILL $$"}), 128 + SIGKILL);
  EXPECT_EQ(run({"gt-no-such-program-anywhere"}, {.output_path = "/dev/null"}), 127);
  EXPECT_EQ(run({"/"}, {.output_path = "/dev/null"}), 126);
  EXPECT_THROW(ChildProcess({}), Error);
}

TEST(ChildProcess, WritesOrAppendsBothStreamsToTheOutputFile) {
  TempDir d;
  const std::string log = d.file("log");
  EXPECT_EQ(run({"sh", "-c", "echo out; echo err >&2"}, {.output_path = log}), 0);
  EXPECT_EQ(read_all(log), "out\nerr\n");
  EXPECT_EQ(run({"echo", "more"}, {.output_path = log, .append_output = true}), 0);
  EXPECT_EQ(read_all(log), "out\nerr\nmore\n");
  EXPECT_EQ(run({"echo", "new"}, {.output_path = log}), 0);
  EXPECT_EQ(read_all(log), "new\n");
  EXPECT_THROW(ChildProcess({"true"}, {.output_path = d.file("missing/log")}), Error);
}

TEST(ChildProcess, AHeldChildRunsOnlyWhenReleased) {
  TempDir d;
  const std::string f = d.file("ran");
  ChildProcess c({"sh", "-c", "echo yes > " + f}, {.hold = true});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(fs::exists(f));
  c.release();
  EXPECT_EQ(exit_code_of(c.reap()), 0);
  EXPECT_EQ(read_all(f), "yes\n");
}

TEST(ChildProcess, ASignalToTheParentReachesTheChild) {
  TempDir d;
  const std::string ready = d.file("ready");
  ChildProcess c(
      {"sh", "-c", "trap 'exit 7' TERM; echo > " + ready + "; while :; do sleep 0.02; done"},
      {.forward = {SIGTERM}});
  bool sent = false;
  c.wait_ended(
      [&] {
        // once the trap is set, another process sends SIGTERM to this one (the parent): a
        // signal this process sent itself would not be forwarded
        if (sent || !fs::exists(ready)) return;
        sent = true;
        const pid_t parent = ::getpid();
        const pid_t k = ::fork();
        if (k == 0) {
          ::kill(parent, SIGTERM);
          ::_exit(0);
        }
        ::waitpid(k, nullptr, 0);
      },
      0.01);
  EXPECT_EQ(exit_code_of(c.reap()), 7);
}

TEST(ChildProcess, AChildNotReapedIsKilledWhenTheObjectEnds) {
  pid_t pid = 0;
  const auto t0 = std::chrono::steady_clock::now();
  {
    ChildProcess c({"sleep", "30"});
    pid = c.pid();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(::kill(pid, 0), -1);  // gone and reaped
}

}  // namespace
}  // namespace gt
