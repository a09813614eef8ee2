// The SPANK plugin outside Slurm: this program provides the few Slurm functions the plugin
// calls (exported, as slurmstepd does), loads greentrain_spank.so and the stand-in NVML, and
// checks --gpu-power-limit (set, then restored) and the recorded GPU energy.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <slurm/spank.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {
std::vector<std::string> g_log;
spank_option* g_option = nullptr;
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

TEST(SchedSpank, GpuPowerLimitIsSetThenRestoredAndEnergyIsRecorded) {
  namespace fs = std::filesystem;
  std::string t = (fs::temp_directory_path() / "gt_spank_XXXXXX").string();
  const fs::path dir = ::mkdtemp(t.data());
  ::setenv("GT_NVML_LIBRARY", GT_FAKE_NVML_PATH, 1);
  ::setenv("FAKE_NVML_DEVICES", "2", 1);
  ::setenv("FAKE_NVML_POWER_MW", "100000,100000", 1);
  ::setenv("FAKE_NVML_SET_LOG", (dir / "set.log").c_str(), 1);
  ::setenv("FAKE_NVML_LIMIT_FILE", (dir / "limits").c_str(), 1);
  ::setenv("SLURM_STEP_GPUS", "1", 1);
  void* h = dlopen(GT_SPANK_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  using hook = int (*)(spank_t, int, char**);
  auto init = reinterpret_cast<hook>(dlsym(h, "slurm_spank_init"));
  auto post = reinterpret_cast<hook>(dlsym(h, "slurm_spank_init_post_opt"));
  auto fini = reinterpret_cast<hook>(dlsym(h, "slurm_spank_exit"));
  ASSERT_TRUE(init && post && fini);
  EXPECT_STREQ(static_cast<const char*>(dlsym(h, "plugin_type")), "spank");
  std::string arg = "energy_dir=" + dir.string();
  char* av[] = {arg.data()};
  ASSERT_EQ(init(nullptr, 1, av), 0);
  ASSERT_NE(g_option, nullptr);
  EXPECT_STREQ(g_option->name, "gpu-power-limit");
  EXPECT_EQ(g_option->cb(0, "lots", 0), -1);  // bad value refused
  ASSERT_EQ(g_option->cb(0, "250", 1), 0);
  ASSERT_EQ(post(nullptr, 1, av), 0);
  ::usleep(200000);
  ASSERT_EQ(fini(nullptr, 1, av), 0);
  // Only the step's GPU (NVML index 1) was capped, then restored to the 300-W default.
  std::ifstream log(dir / "set.log");
  std::vector<std::string> sets;
  for (std::string l; std::getline(log, l);) sets.push_back(l);
  EXPECT_EQ(sets, (std::vector<std::string>{"1 250000 0", "1 300000 0"}));
  std::ifstream rec(dir / "greentrain-gpu-energy.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(rec, line));
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["job_id"], 42);
  EXPECT_EQ(j["step_id"], 7);
  EXPECT_EQ(j["gpus"], 1);
  EXPECT_EQ(j["power_limit_w"], 250);
  // The stand-in reports min(limit, draw) = 100 W: about 20 J in 0.2 s.
  EXPECT_GT(j["energy_j"].get<double>(), 10.0);
  EXPECT_LT(j["energy_j"].get<double>(), 200.0);
  bool logged = false;
  for (auto& l : g_log) logged |= l.find("job 42 step 7: GPU energy") != std::string::npos;
  EXPECT_TRUE(logged);
  dlclose(h);
  for (const char* k : {"GT_NVML_LIBRARY", "FAKE_NVML_DEVICES", "FAKE_NVML_POWER_MW",
                        "FAKE_NVML_SET_LOG", "FAKE_NVML_LIMIT_FILE", "SLURM_STEP_GPUS"})
    ::unsetenv(k);
  fs::remove_all(dir);
}
