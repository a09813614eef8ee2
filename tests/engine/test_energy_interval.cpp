// The logged energy intervals of a training run span at least ten refresh periods of the
// counters that measure: NVML's energy counter moves about every 100 ms, so a 120 ms step saw
// one or two of its updates and reported 430 or 960 W on a 700 W H200. Shorter intervals are
// merged into the next; the run's totals are unchanged (tests/energy for the meter itself). Also
// the lines train prints about its meter.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "energy/node_lock.h"
#include "test_helpers.h"
#include "train/energy_hook.h"

namespace gt {
namespace {

energy::SensorInfo sensor(const std::string& name, energy::SensorKind kind, double refresh_s,
                          bool available = true) {
  energy::SensorInfo s;
  s.name = name;
  s.kind = kind;
  s.refresh_period_s = refresh_s;
  s.available = available;
  return s;
}

TEST(EnergyInterval, TenRefreshPeriodsOfTheCountersThatMeasure) {
  using K = energy::SensorKind;
  EXPECT_DOUBLE_EQ(min_log_interval_s({sensor("nvml:0", K::kEnergyCounter, 0.1),
                                       sensor("cpu-estimate", K::kEstimate, 2.0)}),
                   1.0);
  EXPECT_DOUBLE_EQ(min_log_interval_s({sensor("rapl:package-0", K::kEnergyCounter, 0.001)}), 0.01);
  // estimates and sensors that cannot be read set no minimum
  EXPECT_DOUBLE_EQ(min_log_interval_s({sensor("cpu-estimate", K::kEstimate, 2.0),
                                       sensor("nvml:0", K::kEnergyCounter, 0.1, false)}),
                   0.0);
}

// A fake RAPL zone (refresh 1 ms: intervals of at least 10 ms, widened to 0.2 s here): steps
// logged every step but ending within the minimum of the interval's start merge into the next
// logged one, and the run's last step closes its interval whatever its length.
TEST(EnergyInterval, ShortIntervalsMergeIntoTheNext) {
  test::TempDir d;
  const auto zone = d.path / "powercap" / "intel-rapl:0";
  std::filesystem::create_directories(zone);
  test::write_file((zone / "name").string(), "package-0\n");
  test::write_file((zone / "energy_uj").string(), "1000000\n");
  test::write_file((zone / "max_energy_range_uj").string(), "262143328850\n");
  TrainConfig cfg;
  cfg.device = "cpu";
  cfg.log_interval = 1;
  cfg.eval_interval = 0;
  cfg.max_steps = 4;
  energy::MeterOptions opt = meter_options(cfg);
  opt.powercap_root = (d.path / "powercap").string();
  opt.interval_s = 0;                          // no sampling thread: readings at window boundaries
  opt.lock_dir = (d.path / "locks").string();  // not the machine's: the fake zone is read here
  EnergyHook hook(cfg, d.path.string(), nullptr, opt);
  EXPECT_DOUBLE_EQ(hook.min_interval_s(), 0.01);  // 10 x RAPL's 1 ms
  hook.set_min_interval_s(0.2);  // wide margins for a loaded machine: step 1 ends within 0.2 s
  hook.set_last_step(3);         // as `--stop-at 3`

  nlohmann::json r1, r2, r4;
  hook.begin_step(1);
  EXPECT_EQ(hook.end_step(1, 100, 0, r1), "");  // microseconds after the start: merged
  EXPECT_FALSE(r1.contains("energy_interval_tokens")) << r1.dump();
  hook.begin_step(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_NE(hook.end_step(2, 100, 0, r2), "");
  EXPECT_EQ(r2["energy_interval_tokens"], 200) << r2.dump();  // steps 1 and 2
  // the run's last step (stop_at, not max_steps) ends its interval however short
  hook.begin_step(3);
  EXPECT_NE(hook.end_step(3, 100, 0, r4), "");
  EXPECT_EQ(r4["energy_interval_tokens"], 100) << r4.dump();
  nlohmann::json summary;
  hook.finish(summary);
}

// The meter reads the GPU of the device it is given (the trainer's, "cuda:<local rank>" on rank
// 1 of a node), not the one of options made earlier from the configuration ("cuda": GPU 0):
// every rank metered GPU 0. No GPU is readable here, so the run's flags name the GPU asked for.
TEST(EnergyInterval, TheMeterReadsTheGpuOfTheRanksDevice) {
  test::TempDir d;
  TrainConfig cfg;
  cfg.device = "cuda";
  energy::MeterOptions opt = meter_options(cfg);  // before the trainer: GPU 0
  ASSERT_EQ(opt.gpus, std::vector<int>{0});
  opt.interval_s = 0;
  opt.lock_dir = (d.path / "locks").string();
  opt.powercap_root = (d.path / "no-powercap").string();
  cfg.device = "cuda:1";  // as the trainer makes it for local rank 1
  EnergyHook hook(cfg, d.path.string(), nullptr, opt);
  nlohmann::json summary;
  hook.finish(summary);
  const std::string flags = summary.value("energy_flags", nlohmann::json::array()).dump();
  EXPECT_NE(flags.find("gpus [1]"), std::string::npos) << flags;
  EXPECT_EQ(flags.find("gpus [0]"), std::string::npos) << flags;
}

// Energy that is unknown is said so at the end of the run with its reason (summary.json's
// energy_unknown_reason), which need not be "no sensor": a counter another process reads.
TEST(EnergyInterval, UnknownEnergyIsPrintedWithItsReason) {
  test::TempDir d;
  TrainConfig cfg;
  cfg.device = "cpu";
  energy::MeterOptions opt = meter_options(cfg);
  opt.interval_s = 0;
  opt.lock_dir = (d.path / "locks").string();
  opt.powercap_root = (d.path / "no-powercap").string();
  opt.use_nvml = opt.use_rocm_smi = opt.use_estimate = opt.use_daemon = false;
  const std::string log_path = (d.path / "log.txt").string();
  FILE* log = std::fopen(log_path.c_str(), "w");
  ASSERT_NE(log, nullptr);
  nlohmann::json summary;
  {
    EnergyHook hook(cfg, d.path.string(), log, opt);
    hook.finish(summary);
  }
  std::fclose(log);
  ASSERT_TRUE(summary["energy_j"].is_null()) << summary.dump();
  const std::string reason = summary["energy_unknown_reason"].get<std::string>();
  EXPECT_NE(test::read_bytes(log_path).find("energy unknown: " + reason), std::string::npos)
      << test::read_bytes(log_path);
}

// `train` under `measure`: measure reads the machine's CPU and memory estimates, so the run
// counts nothing. Its header said "energy   no sensor" then "energy   cpu-estimate" and
// "energy   ram-estimate", which read as if the estimates were counted; it says plainly that
// nothing is measured, why, and that the energy will be unknown (and offers no --process,
// which train does not have).
TEST(EnergyInterval, HeaderSaysNothingIsMeasuredWhenAnotherProcessReadsTheSensors) {
  test::TempDir d;
  const std::string locks = (d.path / "locks").string();
  int ready[2], stop[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(stop), 0);
  const pid_t child = fork();
  if (child == 0) {
    std::string who;
    auto a = energy::DeviceLock::try_acquire(locks, "cpu-estimate-machine", &who);
    auto b = energy::DeviceLock::try_acquire(locks, "ram-estimate-machine", &who);
    char c = a && b ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    (void)!read(stop[0], &c, 1);
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  TrainConfig cfg;
  cfg.device = "cpu";
  energy::MeterOptions opt = meter_options(cfg);
  opt.interval_s = 0;
  opt.lock_dir = locks;
  opt.powercap_root = (d.path / "no-powercap").string();
  opt.use_nvml = opt.use_rocm_smi = opt.use_daemon = false;
  std::string header;
  {
    auto meter = energy::Meter::create(opt);
    header = energy_header(*meter);
  }
  (void)!write(stop[1], "x", 1);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(header.rfind("  energy   none measured: another process reads this machine's "
                         "sensors; the run's energy will be unknown (null), not 0\n",
                         0),
            0u)
      << header;
  for (const char* s : {"cpu-estimate", "ram-estimate"}) {
    EXPECT_NE(header.find(fmt::format("  energy   {} not read by this run: not the reader: "
                                      "process {}",
                                      s, child)),
              std::string::npos)
        << header;
    EXPECT_EQ(header.find(fmt::format("  energy   {}\n", s)), std::string::npos) << header;
  }
  EXPECT_EQ(header.find("--process"), std::string::npos) << header;
  EXPECT_NE(header.find("start `greentrain serve`"), std::string::npos) << header;
}

}  // namespace
}  // namespace gt
