// Helpers of the dist tests: starting greentrain (under mpirun) in the background with a time
// limit, reading a run's metrics, finding the process of one rank.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace gt::test {

/// mpirun as the CI runs it: as root if need be, more ranks than cores, no core binding.
inline std::string mpirun(int np) {
  return std::string(GT_MPIEXEC) + " --oversubscribe --allow-run-as-root --bind-to none -np " +
         std::to_string(np) + " ";
}

/// A shell command started in the background, output to a file.
struct Proc {
  pid_t pid = -1;
  std::string log;
  /// Starts `sh -c cmd` in its own process group, stdout and stderr to log.
  Proc(const std::string& cmd, std::string log_path) : log(std::move(log_path)) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    const char* argv[] = {"sh", "-c", cmd.c_str(), nullptr};
    posix_spawn(&pid, "/bin/sh", &fa, &at, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
  }
  /// Exit code (128 + signal when killed), or -1 after timeout_s (the group is then killed).
  int wait(double timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(-pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
    return -1;
  }
  std::string output() const {
    std::ifstream f(log);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  ~Proc() {
    if (pid > 0) {
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

/// Runs cmd to completion (at most timeout_s); exit code and output.
inline std::pair<int, std::string> run_to_end(const std::string& cmd, const std::string& log,
                                              double timeout_s = 240) {
  Proc p(cmd, log);
  int rc = p.wait(timeout_s);
  return {rc, p.output()};
}

/// The "loss" of every line of RUN/metrics.jsonl that has one, in order.
inline std::vector<double> losses(const std::string& run) {
  std::vector<double> out;
  std::ifstream f(std::filesystem::path(run) / "metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("loss")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

/// The pid of the process whose environment holds both `tag` (a "NAME=value" the test put in
/// mpirun's environment, which its ranks inherit) and OMPI_COMM_WORLD_RANK=rank; -1 if none.
inline pid_t find_rank(const std::string& tag, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream env(e.path() / "environ");
    std::string var;
    bool has_tag = false, has_rank = false;
    while (std::getline(env, var, '\0')) {
      has_tag = has_tag || var == tag;
      has_rank = has_rank || var == want;
    }
    if (has_tag && has_rank) return std::stoi(name);
  }
  return -1;
}

}  // namespace gt::test
