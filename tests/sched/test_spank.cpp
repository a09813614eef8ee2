// The SPANK plugin outside Slurm: this program provides the few Slurm functions the plugin
// calls (exported, as slurmstepd does), loads greentrain_spank.so and the stand-in NVML, and
// checks --gpu-power-limit (set, then restored) and the recorded GPU energy.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <slurm/spank.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {
std::vector<std::string> g_log;
spank_option* g_option = nullptr;
uint32_t g_job_uid = ::getuid(), g_job_gid = ::getgid();  // the job's user (S_JOB_UID, S_JOB_GID)
void log_v(const char* level, const char* fmt, va_list ap) {
  char buf[1024];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  g_log.push_back(std::string(level) + ": " + buf);
}
}  // namespace

// Stand-ins for slurmstepd's functions.
extern "C" {
int spank_remote(spank_t) { return 1; }
spank_err_t spank_getenv(spank_t, const char* var, char* buf, int len) {
  const char* v = std::getenv(var);
  if (!v) return ESPANK_ENV_NOEXIST;
  std::snprintf(buf, static_cast<std::size_t>(len), "%s", v);
  return static_cast<spank_err_t>(ESPANK_SUCCESS);
}
spank_err_t spank_get_item(spank_t, spank_item_t item, ...) {
  va_list ap;
  va_start(ap, item);
  uint32_t* p = va_arg(ap, uint32_t*);
  va_end(ap);
  if (item == S_JOB_ID)
    *p = 42;
  else if (item == S_JOB_STEPID)
    *p = 7;
  else if (item == S_JOB_UID)
    *p = g_job_uid;
  else if (item == S_JOB_GID)
    *p = g_job_gid;
  else
    return ESPANK_BAD_ARG;
  return static_cast<spank_err_t>(ESPANK_SUCCESS);
}
spank_err_t spank_option_register(spank_t, struct spank_option* opt) {
  g_option = opt;
  return static_cast<spank_err_t>(ESPANK_SUCCESS);
}
void slurm_info(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_v("info", fmt, ap);
  va_end(ap);
}
void slurm_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_v("error", fmt, ap);
  va_end(ap);
}
void slurm_debug(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_v("debug", fmt, ap);
  va_end(ap);
}
}

namespace fs = std::filesystem;

// Each test's plugin: a fresh folder (its energy_dir=), the stand-in NVML named in the
// environment, and greentrain_spank.so loaded with its three hooks, which init(), post() and
// fini() call with the plugstack.conf arguments (energy_dir=, and daemon_socket= after
// use_daemon()). A test sets the rest of its environment with set_env() before the first hook.
// TearDown, which runs after the test's own objects (a daemon) are gone, unloads the plugin,
// unsets what was set, gives the job user back and removes the folder.
class SchedSpank : public ::testing::Test {
 protected:
  using hook = int (*)(spank_t, int, char**);

  void SetUp() override {
    g_log.clear();
    g_option = nullptr;
    std::string t = (fs::temp_directory_path() / "gt_spank_XXXXXX").string();
    ASSERT_NE(::mkdtemp(t.data()), nullptr) << t;
    dir = t;
    args = {"energy_dir=" + dir.string()};
    set_env("GT_NVML_LIBRARY", GT_FAKE_NVML_PATH);
    plugin = dlopen(GT_SPANK_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(plugin, nullptr) << dlerror();
    init_ = reinterpret_cast<hook>(dlsym(plugin, "slurm_spank_init"));
    post_ = reinterpret_cast<hook>(dlsym(plugin, "slurm_spank_init_post_opt"));
    fini_ = reinterpret_cast<hook>(dlsym(plugin, "slurm_spank_exit"));
    ASSERT_TRUE(init_ && post_ && fini_);
  }
  void TearDown() override {
    if (plugin) dlclose(plugin);
    for (const auto& k : env_keys) ::unsetenv(k.c_str());
    g_job_uid = ::getuid();
    g_job_gid = ::getgid();
    if (!dir.empty()) fs::remove_all(dir);
  }

  // Sets an environment variable until the end of the test.
  void set_env(const std::string& key, const std::string& value) {
    ::setenv(key.c_str(), value.c_str(), 1);
    env_keys.push_back(key);
  }
  // Adds daemon_socket=SOCKET to the plugin's arguments.
  void use_daemon(const std::string& socket) { args.push_back("daemon_socket=" + socket); }
  int init() { return call(init_); }
  int post() { return call(post_); }
  int fini() { return call(fini_); }
  // The first line of the plugin's energy record; false when there is none.
  bool first_record(std::string& line) const {
    std::ifstream rec(dir / "greentrain-gpu-energy.jsonl");
    return static_cast<bool>(std::getline(rec, line));
  }
  // Whether the plugin logged a line containing `text` in this test.
  static bool logged(const std::string& text) {
    for (const auto& l : g_log)
      if (l.find(text) != std::string::npos) return true;
    return false;
  }

  fs::path dir;
  void* plugin = nullptr;

 private:
  int call(hook f) {
    std::vector<char*> av;
    for (auto& a : args) av.push_back(a.data());
    return f(nullptr, static_cast<int>(av.size()), av.data());
  }
  hook init_ = nullptr, post_ = nullptr, fini_ = nullptr;
  std::vector<std::string> args, env_keys;
};

TEST_F(SchedSpank, GpuPowerLimitIsSetThenRestoredAndEnergyIsRecorded) {
  set_env("FAKE_NVML_DEVICES", "2");
  set_env("FAKE_NVML_POWER_MW", "100000,100000");
  set_env("FAKE_NVML_SET_LOG", (dir / "set.log").string());
  set_env("FAKE_NVML_LIMIT_FILE", (dir / "limits").string());
  set_env("SLURM_STEP_GPUS", "1");
  EXPECT_STREQ(static_cast<const char*>(dlsym(plugin, "plugin_type")), "spank");
  ASSERT_EQ(init(), 0);
  ASSERT_NE(g_option, nullptr);
  EXPECT_STREQ(g_option->name, "gpu-power-limit");
  EXPECT_EQ(g_option->cb(0, "lots", 0), -1);  // bad value refused
  ASSERT_EQ(g_option->cb(0, "250", 1), 0);
  ASSERT_EQ(post(), 0);
  ::usleep(200000);
  ASSERT_EQ(fini(), 0);
  // Only the step's GPU (NVML index 1) was capped, then restored to the 300-W default.
  std::ifstream log(dir / "set.log");
  std::vector<std::string> sets;
  for (std::string l; std::getline(log, l);) sets.push_back(l);
  EXPECT_EQ(sets, (std::vector<std::string>{"1 250000 0", "1 300000 0"}));
  std::string line;
  ASSERT_TRUE(first_record(line));
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["job_id"], 42);
  EXPECT_EQ(j["step_id"], 7);
  EXPECT_EQ(j["gpus_expected"], 1);
  EXPECT_EQ(j["gpus_counted"], 1);
  EXPECT_EQ(j["gpu_indices"], nlohmann::json::array({1}));
  EXPECT_TRUE(j["energy_unknown_reason"].is_null()) << line;
  EXPECT_EQ(j["power_limit_requested_w"], 250);
  EXPECT_EQ(j["power_limit_w"], 250);  // read back from the GPU
  EXPECT_EQ(j["gpu_power_limits_w"], nlohmann::json::array({250}));
  // The stand-in reports min(limit, draw) = 100 W: about 20 J in 0.2 s.
  EXPECT_GT(j["energy_j"].get<double>(), 10.0);
  EXPECT_LT(j["energy_j"].get<double>(), 200.0);
  EXPECT_TRUE(logged("job 42 step 7: GPU energy"));
}

// A GPU of the step whose counter cannot be read: the record's energy is null with the reason,
// not the other GPUs' sum under "gpus": N; the limit is the one the GPUs hold (clamped to their
// range), beside the one asked for.
TEST_F(SchedSpank, AnUnreadGpuMakesTheEnergyNullAndTheLimitIsTheAppliedOne) {
  set_env("FAKE_NVML_DEVICES", "2");
  set_env("FAKE_NVML_NO_ENERGY", "1");
  set_env("FAKE_NVML_LIMIT_FILE", (dir / "limits").string());
  set_env("SLURM_STEP_GPUS", "0,1");
  ASSERT_EQ(init(), 0);
  ASSERT_EQ(g_option->cb(0, "1000", 1), 0);  // above the stand-in's 400-W maximum
  ASSERT_EQ(post(), 0);
  ::usleep(100000);
  ASSERT_EQ(fini(), 0);
  std::string line;
  ASSERT_TRUE(first_record(line));
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["gpus_expected"], 2) << line;
  EXPECT_EQ(j["gpus_counted"], 1) << line;
  EXPECT_TRUE(j["energy_j"].is_null()) << line;
  ASSERT_TRUE(j["energy_unknown_reason"].is_string()) << line;
  EXPECT_NE(j["energy_unknown_reason"].get<std::string>().find("(GPU 1:"), std::string::npos)
      << line;
  EXPECT_EQ(j["power_limit_requested_w"], 1000) << line;
  EXPECT_EQ(j["power_limit_w"], 400) << line;
  EXPECT_EQ(j["gpu_power_limits_w"], nlohmann::json::array({400, 400})) << line;
  EXPECT_TRUE(logged("job 42 step 7: GPU energy unknown"));
}

#ifdef GT_PROGRAM
// With `greentrain serve` running, the plugin reads the step's GPU energy through the daemon and
// sets --gpu-power-limit as a lease: restored at the step's end, and also when slurmstepd is
// killed with SIGKILL (which the plugin alone cannot survive). NVML itself refuses this process
// (FAKE_NVML_SET_RC=4), so every set is the daemon's.
namespace {

// `greentrain serve` on the stand-in NVML (2 GPUs at 300 W), in the test's folder; stopped
// when destroyed, before the fixture removes the folder (it may still be writing its state).
struct Daemon {
  fs::path dir;
  pid_t pid = -1;
  std::string socket;
  explicit Daemon(const fs::path& d, const std::string& policy = "")
      : dir(d), socket((d / "serve.sock").string()) {
    std::ofstream(dir / "energy") << "0\n0\n";
    std::ofstream(dir / "limits") << "300000\n300000\n";
    std::vector<std::string> env = {"GT_NVML_LIBRARY=" GT_FAKE_NVML_PATH,
                                    "FAKE_NVML_DEVICES=2",
                                    "FAKE_NVML_ENERGY_FILE=" + (dir / "energy").string(),
                                    "FAKE_NVML_LIMIT_FILE=" + (dir / "limits").string(),
                                    "FAKE_NVML_SET_LOG=" + (dir / "set.log").string(),
                                    "GT_POWERCAP_ROOT=/nonexistent",
                                    "GT_ROCM_SMI_LIBRARY=/nonexistent",
                                    "GT_ENERGY_LOCK_DIR=" + (dir / "locks").string()};
    std::vector<std::string> args = {GT_PROGRAM,
                                     "serve",
                                     "--foreground",
                                     "--socket",
                                     socket,
                                     "--state-file",
                                     (dir / "state.json").string(),
                                     "--interval",
                                     "50"};
    if (!policy.empty()) {
      std::ofstream(dir / "policy.toml") << policy;
      args.push_back("--policy");
      args.push_back((dir / "policy.toml").string());
    }
    pid = ::fork();
    if (pid == 0) {
      std::FILE* log = std::fopen((dir / "daemon.log").c_str(), "w");
      ::dup2(::fileno(log), 2);
      std::vector<char*> a, e;
      for (auto& x : args) a.push_back(x.data());
      a.push_back(nullptr);
      for (auto& x : env) e.push_back(x.data());
      e.push_back(nullptr);
      ::execve(GT_PROGRAM, a.data(), e.data());
      ::_exit(126);
    }
    for (int i = 0; i < 400 && !answers(); ++i) ::usleep(50000);
  }
  bool answers() const {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, socket.c_str(), sizeof a.sun_path - 1);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  }
  ~Daemon() {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
  }
  unsigned limit_mw(int gpu) const {
    std::ifstream f(dir / "limits");
    unsigned v = 0;
    for (int i = 0; i <= gpu; ++i) f >> v;
    return v;
  }
};

}  // namespace

TEST_F(SchedSpank, ThroughTheDaemonTheLimitIsALeaseAndTheEnergyTheDaemons) {
  Daemon d(dir);
  ASSERT_TRUE(d.answers()) << std::ifstream(dir / "daemon.log").rdbuf();
  use_daemon(d.socket);
  set_env("FAKE_NVML_SET_RC", "4");
  set_env("SLURM_STEP_GPUS", "1");
  ASSERT_EQ(init(), 0);
  ASSERT_EQ(g_option->cb(0, "250", 1), 0);
  ASSERT_EQ(post(), 0);
  EXPECT_EQ(d.limit_mw(1), 250000u);
  EXPECT_EQ(d.limit_mw(0), 300000u);
  std::ofstream(dir / "energy") << "0\n1000000\n";  // GPU 1: +1000 J during the step
  ASSERT_EQ(fini(), 0);
  EXPECT_EQ(d.limit_mw(1), 300000u);
  std::string line;
  ASSERT_TRUE(first_record(line));
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["source"], "greentrain serve") << line;
  EXPECT_NEAR(j["energy_j"].get<double>(), 1000, 1e-6) << line;
  EXPECT_EQ(j["gpus_counted"], 1) << line;
  EXPECT_EQ(j["power_limit_w"], 250) << line;  // the daemon's read-back
  EXPECT_EQ(j["power_limit_requested_w"], 250) << line;
  EXPECT_TRUE(j["attributed_energy_j"].is_number()) << line;
  // slurmstepd killed with SIGKILL while the limit is leased: the daemon restores it
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t step = ::fork();
  if (step == 0) {
    init();
    g_option->cb(0, "200", 1);
    post();
    (void)!::write(ready[1], "y", 1);
    for (;;) ::pause();
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_EQ(d.limit_mw(1), 200000u);
  ::kill(step, SIGKILL);
  ::waitpid(step, nullptr, 0);
  for (int i = 0; i < 100 && d.limit_mw(1) != 300000u; ++i) ::usleep(20000);
  EXPECT_EQ(d.limit_mw(1), 300000u);
  ::close(ready[0]);
  ::close(ready[1]);
}

// slurmstepd asks as root, for the job's user: the daemon's [[allow]] range of that user applies
// (root's own grant, the GPU's whole range, let any Slurm user set any limit), and a user no rule
// names gets no limit.
TEST_F(SchedSpank, ThroughTheDaemonTheJobUsersPolicyRangeApplies) {
  if (::getuid() != 0) GTEST_SKIP() << "the plugin asks on the job user's behalf only as root";
  Daemon d(dir,
           "[[allow]]\nusers = [\"4242\"]\npower_limit = [\"nvml:*\"]\nmin_w = 150\nmax_w = 200\n");
  ASSERT_TRUE(d.answers()) << std::ifstream(dir / "daemon.log").rdbuf();
  use_daemon(d.socket);
  set_env("FAKE_NVML_SET_RC", "4");
  set_env("SLURM_STEP_GPUS", "1");
  g_job_uid = g_job_gid = 4242;  // in the policy: 250 W asked, 200 W set
  ASSERT_EQ(init(), 0);
  ASSERT_EQ(g_option->cb(0, "250", 1), 0);
  ASSERT_EQ(post(), 0);
  EXPECT_EQ(d.limit_mw(1), 200000u);
  ASSERT_EQ(fini(), 0);
  EXPECT_EQ(d.limit_mw(1), 300000u);
  g_log.clear();
  g_job_uid = g_job_gid = 4343;  // in no rule: nothing set, and said so
  ASSERT_EQ(init(), 0);
  ASSERT_EQ(g_option->cb(0, "250", 1), 0);
  ASSERT_EQ(post(), 0);
  EXPECT_EQ(d.limit_mw(1), 300000u);
  bool refused = false;
  for (auto& l : g_log)
    refused |=
        l.find("uid 4343") != std::string::npos && l.find("may not set") != std::string::npos;
  EXPECT_TRUE(refused) << ::testing::PrintToString(g_log);
  ASSERT_EQ(fini(), 0);
}

// The daemon gone before the step's end: no final reading, so the energy is null with the reason
// (it was written as 0.000).
TEST_F(SchedSpank, ADaemonThatCannotBeReadAtTheEndLeavesTheEnergyNull) {
  auto d = std::make_unique<Daemon>(dir);
  ASSERT_TRUE(d->answers()) << std::ifstream(dir / "daemon.log").rdbuf();
  use_daemon(d->socket);
  set_env("SLURM_STEP_GPUS", "1");
  ASSERT_EQ(init(), 0);
  ASSERT_EQ(post(), 0);
  d.reset();  // stopped during the step
  ASSERT_EQ(fini(), 0);
  std::string line;
  ASSERT_TRUE(first_record(line));
  auto j = nlohmann::json::parse(line);
  EXPECT_TRUE(j["energy_j"].is_null()) << line;
  EXPECT_EQ(j["gpus_expected"], 1) << line;
  EXPECT_EQ(j["gpus_counted"], 0) << line;
  ASSERT_TRUE(j["energy_unknown_reason"].is_string()) << line;
  EXPECT_NE(j["energy_unknown_reason"].get<std::string>().find("the daemon's reading at the end"),
            std::string::npos)
      << line;
  EXPECT_TRUE(j["power_limit_requested_w"].is_null()) << line;
  EXPECT_TRUE(j["power_limit_w"].is_null()) << line;
}
#endif
