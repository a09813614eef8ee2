// The logged energy intervals of a training run span at least ten refresh periods of the
// counters that measure: NVML's energy counter moves about every 100 ms, so a 120 ms step saw
// one or two of its updates and reported 430 or 960 W on a 700 W H200. Shorter intervals are
// merged into the next; the run's totals are unchanged (tests/energy for the meter itself).
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

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

}  // namespace
}  // namespace gt
