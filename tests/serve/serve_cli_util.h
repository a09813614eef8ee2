// tests/serve/serve_cli_util.h: a node for end-to-end tests of `greentrain serve`: a temporary
// folder with a stand-in RAPL tree and the stand-in NVML's scripted files, the daemon started
// as the program (as systemd would), clients run with their own environment, Prometheus queried
// through cpp-httplib.
#pragma once
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "energy/daemon_client.h"
#include "test_util.h"

namespace gt::energy::test {
inline std::string read_text(const std::string& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}
}  // namespace gt::energy::test

namespace gt::serve::test {

inline bool wait_until(const std::function<bool()>& ok, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ok();
}

inline bool wait_for_file(const std::string& p, double timeout_s) {
  return wait_until([&] { return ::access(p.c_str(), F_OK) == 0; }, timeout_s);
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// Prometheus's instant query result (data.result), or an empty array.
inline nlohmann::json prometheus_query(int port, const std::string& q) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(1);
  c.set_read_timeout(2);
  auto r = c.Get("/api/v1/query", httplib::Params{{"query", q}}, httplib::Headers{});
  if (!r || r->status != 200) return nlohmann::json::array();
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return nlohmann::json::array();
  return j["data"]["result"];
}

/// A child process whose output goes to a file.
struct Proc {
  pid_t pid = -1;
  std::string out_path;
  int code = -1;
  bool done = false;
  Proc() = default;
  Proc(Proc&& o) noexcept { *this = std::move(o); }
  Proc& operator=(Proc&& o) noexcept {
    pid = o.pid;
    out_path = o.out_path;
    code = o.code;
    done = o.done;
    o.pid = -1;
    o.done = true;
    return *this;
  }
  ~Proc() {
    if (pid > 0 && !done) {
      ::kill(pid, SIGKILL);
      wait();
    }
  }
  int wait() {
    if (done) return code;
    int st = 0;
    ::waitpid(pid, &st, 0);
    done = true;
    code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return code;
  }
  void kill(int sig) {
    ::kill(pid, sig);
    if (sig == SIGKILL) wait();
  }
  /// SIGTERM, then the exit code.
  int stop() {
    ::kill(pid, SIGTERM);
    return wait();
  }
  std::string output() const { return energy::test::read_text(out_path); }
};

/// Runs argv with exactly `env` (plus PATH and HOME), output to out_path. As `uid` when >= 0.
inline Proc spawn_env(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      const std::string& out_path, int uid = -1, int gid = -1) {
  Proc p;
  p.out_path = out_path;
  std::fflush(nullptr);
  p.pid = ::fork();
  if (p.pid == 0) {
    int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, 0);
    if (gid >= 0 && (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(gid)) != 0))
      _exit(125);
    if (uid >= 0 && ::setuid(static_cast<uid_t>(uid)) != 0) _exit(125);
    std::vector<std::string> e = env;
    e.push_back(std::string("PATH=") +
                (std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin"));
    e.push_back("HOME=/tmp");
    std::vector<char*> a, ev;
    for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    for (auto& s : e) ev.push_back(const_cast<char*>(s.c_str()));
    ev.push_back(nullptr);
    ::execve(a[0], a.data(), ev.data());
    _exit(126);
  }
  return p;
}

/// A node: stand-in RAPL tree (one package, 0 J, a settable limit) and stand-in NVML (one GPU,
/// energy from a file, limits in a file shared by every process, every set logged).
struct Node {
  energy::test::TempDir tmp;
  std::string dir, socket, rapl;
  bool scripted_energy = true;  ///< the GPU counter comes from a file (else 250 W capped, live)
  Node() : dir(tmp.path), socket(tmp.path + "/serve.sock"), rapl(tmp.path + "/powercap") {
    ::chmod(dir.c_str(), 0755);  // other users (the authorization test) reach the socket
    const std::string z = rapl + "/intel-rapl:0";
    energy::test::fake_rapl_zone(rapl, "intel-rapl:0", "package-0", 0);
    energy::test::write_file(z + "/constraint_0_power_limit_uw", "95000000\n");
    energy::test::write_file(z + "/constraint_0_max_power_uw", "125000000\n");
    energy::test::write_file(dir + "/nvml_energy", "0\n");
    energy::test::write_file(dir + "/limits", "300000\n");
    energy::test::write_file(dir + "/set.log", "");
    ::chmod((dir + "/limits").c_str(), 0666);
    ::chmod((dir + "/nvml_energy").c_str(), 0666);
    ::chmod((dir + "/set.log").c_str(), 0666);
  }
  std::string file(const std::string& rel) const { return dir + "/" + rel; }
  std::vector<std::string> common_env() const {
    return {"GT_NVML_LIBRARY=" GT_FAKE_NVML, "FAKE_NVML_LIMIT_FILE=" + dir + "/limits",
            "GT_POWERCAP_ROOT=" + rapl,      "GT_ENERGY_LOCK_DIR=" + dir + "/locks",
            "GT_DAEMON_SOCKET=" + socket,    "GT_ROCM_SMI_LIBRARY=/nonexistent"};
  }
  /// The daemon's: it may set limits (the stand-in refuses nothing) and logs each set.
  std::vector<std::string> daemon_env() const {
    auto e = common_env();
    e.push_back("FAKE_NVML_SET_LOG=" + dir + "/set.log");
    if (scripted_energy)
      e.push_back("FAKE_NVML_ENERGY_FILE=" + dir + "/nvml_energy");
    else
      e.push_back("FAKE_NVML_DRAW_MW=250000");  // the power follows the limit (tune sees it)
    return e;
  }
  std::vector<std::string> client_env() const { return common_env(); }
  Proc spawn(const std::vector<std::string>& args, const std::vector<std::string>& env,
             const std::string& tag, int uid = -1, int gid = -1) const {
    std::vector<std::string> argv{GT_PROGRAM};
    argv.insert(argv.end(), args.begin(), args.end());
    return spawn_env(argv, env, dir + "/" + tag + ".out", uid, gid);
  }
  Proc spawn_exec(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                  const std::string& tag) const {
    return spawn_env(argv, env, dir + "/" + tag + ".out");
  }
  /// `greentrain serve --foreground`, answering on its socket before this returns.
  Proc start_daemon(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args{"serve",        "--foreground",      "--socket",   socket,
                                  "--state-file", dir + "/state.json", "--interval", "50"};
    args.insert(args.end(), extra.begin(), extra.end());
    static int n = 0;
    Proc p = spawn(args, daemon_env(), "daemon" + std::to_string(n++));
    const bool up = wait_until(
        [&] {
          std::string why;
          return energy::daemon::DaemonClient::connect(socket, &why, nullptr, 1) != nullptr;
        },
        20);
    EXPECT_TRUE(up) << p.output();
    return p;
  }
  /// Moves the stand-in counters on: the GPU by gpu_j, the CPU package by cpu_j. Each file is
  /// replaced in one step: the daemon's thread reads them meanwhile (a truncated energy_uj read
  /// as '' failed ServeCli.TwoMeasuresSideBySideGetTheSameCounterEnergy about 1 run in 40).
  void add_energy(double gpu_j, double cpu_j) {
    const auto mj = std::stoull(energy::test::read_text(dir + "/nvml_energy"));
    energy::test::write_file_atomic(
        dir + "/nvml_energy",
        std::to_string(mj + static_cast<unsigned long long>(gpu_j * 1e3)) + "\n");
    const auto uj = std::stoull(energy::test::read_text(rapl + "/intel-rapl:0/energy_uj"));
    energy::test::write_file_atomic(
        rapl + "/intel-rapl:0/energy_uj",
        std::to_string(uj + static_cast<unsigned long long>(cpu_j * 1e6)) + "\n");
  }
  /// GPU 0's power limit, mW, as the stand-in driver holds it.
  unsigned limit_mw() const {
    return static_cast<unsigned>(
        std::strtoul(energy::test::read_text(dir + "/limits").c_str(), nullptr, 10));
  }
  /// A process that leases `device` at `w` through the daemon and waits to be killed.
  Proc lease_holder(const std::string& device, double w) const {
    Proc p;
    p.out_path = dir + "/holder.out";
    p.pid = ::fork();
    if (p.pid == 0) {
      std::string why;
      auto c = energy::daemon::DaemonClient::connect(socket, &why);
      std::ofstream o(p.out_path);
      try {
        if (!c) throw std::runtime_error(why);
        c->call({{"op", "set_power_limit"}, {"device", device}, {"limit_w", w}});
        o << "leased\n";
      } catch (const std::exception& e) {
        o << e.what() << "\n";
      }
      o.flush();
      for (;;) ::pause();
    }
    return p;
  }
  /// A tiny model's config (ref backend, one thread, characters of an 8000-byte text): its path.
  std::string tiny_config() const {
    energy::test::write_file(dir + "/t.txt", std::string(4000, 'a') + std::string(4000, 'b'));
    energy::test::write_file(
        dir + "/c.toml",
        "[model]\nn_layer = 1\nn_head = 1\nn_embd = 8\nblock_size = 8\n[train]\nbatch_size = 2\n"
        "threads = 1\ndevice = \"ref\"\neval_steps = 1\n[data]\npath = \"" +
            dir + "/t.txt\"\nformat = \"text\"\ntokenizer = \"char\"\n");
    return dir + "/c.toml";
  }
  /// `tune` on the tiny model through the daemon: every candidate from 400 W down in 100 W
  /// steps, each profiled over `steps` steps.
  std::vector<std::string> tune_args(int steps) const {
    return {"tune",           tiny_config(), "--devices",       "nvml",
            "--objective",    "energy",      "--step",          "100",
            "--warmup-steps", "0",           "--profile-steps", std::to_string(steps),
            "--out",          dir + "/tune"};
  }
};

}  // namespace gt::serve::test
