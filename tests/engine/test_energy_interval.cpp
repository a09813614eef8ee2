// The logged energy intervals of a training run span at least ten refresh periods of the
// counters that measure: NVML's energy counter moves about every 100 ms, so a 120 ms step saw
// one or two of its updates and reported 430 or 960 W on a 700 W H200. Shorter intervals are
// merged into the next; the run's totals are unchanged (tests/energy for the meter itself). Also
// the lines train prints about its meter.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <thread>

#include "test_helpers.h"
#include "test_util.h"
#include "train/energy_hook.h"
#include "train/run_log.h"

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

// The meter options of `cfg` as these tests give them to the hook: no sampling thread
// (readings at window boundaries), node locks in `d`/locks (not the machine's), RAPL zones under
// `d`/`powercap` (none there unless the test writes them).
energy::MeterOptions local_meter_options(const TrainConfig& cfg, const test::TempDir& d,
                                         const std::string& powercap = "no-powercap") {
  energy::MeterOptions opt = meter_options(cfg);
  opt.interval_s = 0;
  opt.lock_dir = d.file("locks");
  opt.powercap_root = d.file(powercap);
  return opt;
}

// A stand-in RAPL package zone under `d`/powercap at 1 J.
void package_zone(const test::TempDir& d) {
  energy::test::fake_rapl_zone(d.file("powercap"), "intel-rapl:0", "package-0", 1000000);
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
  package_zone(d);
  TrainConfig cfg;
  cfg.device = "cpu";
  cfg.log_interval = 1;
  cfg.eval_interval = 0;
  cfg.max_steps = 4;
  energy::MeterOptions opt = local_meter_options(cfg, d, "powercap");  // the fake zone alone
  EnergyHook hook(cfg, d.path.string(), nullptr, opt);
  EXPECT_DOUBLE_EQ(hook.min_interval_s(), 0.01);  // 10 x RAPL's 1 ms
  hook.set_min_interval_s(0.2);  // wide margins for a loaded machine: step 1 ends within 0.2 s
  hook.set_last_step(3);         // as `--stop-at 3`

  nlohmann::json r1, r2, r4;
  hook.begin_step(1);
  EXPECT_EQ(hook.end_step(1, 100, 0, r1).text, "");  // microseconds after the start: merged
  EXPECT_FALSE(r1.contains("energy_interval_tokens")) << r1.dump();
  hook.begin_step(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_NE(hook.end_step(2, 100, 0, r2).text, "");
  EXPECT_EQ(r2["energy_interval_tokens"], 200) << r2.dump();  // steps 1 and 2
  // the run's last step (stop_at, not max_steps) ends its interval however short
  hook.begin_step(3);
  EXPECT_NE(hook.end_step(3, 100, 0, r4).text, "");
  EXPECT_EQ(r4["energy_interval_tokens"], 100) << r4.dump();
  nlohmann::json summary;
  hook.finish(summary);
}

// The hook's note for the progress line carries the window its W and J/token cover: the
// interval's meter seconds, tokens and steps, also in metrics.jsonl (energy_interval_s), so
// that power_w / (tokens / seconds) = joules_per_token.
TEST(EnergyInterval, TheNoteCarriesTheIntervalItsFiguresCover) {
  test::TempDir d;
  package_zone(d);
  TrainConfig cfg;
  cfg.device = "cpu";
  cfg.log_interval = 2;
  cfg.eval_interval = 0;
  cfg.max_steps = 4;
  energy::MeterOptions opt = local_meter_options(cfg, d, "powercap");
  opt.use_nvml = opt.use_rocm_smi = opt.use_estimate = opt.use_daemon = false;  // the zone alone
  EnergyHook hook(cfg, d.path.string(), nullptr, opt);
  hook.set_min_interval_s(0);
  nlohmann::json r1, r2;
  hook.begin_step(1);
  EXPECT_EQ(hook.end_step(1, 100, 0, r1).window_steps, 0);  // not a logged step
  hook.begin_step(2);
  energy::test::set_rapl_uj(d.file("powercap"), "intel-rapl:0", 3000000);  // 2 J in the interval
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const StepNote note = hook.end_step(2, 100, 0, r2);
  EXPECT_EQ(note.window_steps, 2);
  EXPECT_EQ(note.window_tokens, 200);
  ASSERT_GT(note.window_s, 0.04);
  EXPECT_DOUBLE_EQ(r2["energy_interval_s"].get<double>(), note.window_s) << r2.dump();
  ASSERT_TRUE(r2["power_w"].is_number()) << r2.dump();
  EXPECT_NEAR(r2["power_w"].get<double>() / (note.window_tokens / note.window_s),
              r2["joules_per_token"].get<double>(), 1e-12)
      << r2.dump();
  nlohmann::json summary;
  hook.finish(summary);
}

// The progress line's rates describe one window: on a line with energy figures, tokens/s and
// ms/step are the energy interval's (not the last 20 steps' mean, nor the step's own time), so
// J/token = W / (tokens/s) on the line; on other lines, the steps since the last line kept.
TEST(EnergyInterval, ProgressLineRatesCoverTheEnergyInterval) {
  test::TempDir d;
  const std::string log_path = d.file("log.txt");
  FILE* log = std::fopen(log_path.c_str(), "w");
  ASSERT_NE(log, nullptr);
  {
    RunLog runlog(d.path.string(), log, false);
    StepReport s;
    s.max_steps = s.last = 3;
    s.tokens = 100;
    s.step = 1;  // a slow first step, a kept line without energy figures: its own window
    s.step_time_s = 1.0;
    s.final_line = true;
    runlog.step(s);
    s.step = 2;  // not kept (merged interval): the window since step 1's line
    s.step_time_s = 0.1;
    s.final_line = false;
    runlog.step(s);
    s.step = 3;  // the energy interval of steps 2 and 3: 200 tokens over 0.4 meter seconds
    s.step_time_s = 0.1;
    s.final_line = true;
    s.energy.text = "50.0 W, 0.1 J/token";
    s.energy.window_s = 0.4;
    s.energy.window_tokens = 200;
    s.energy.window_steps = 2;
    runlog.step(s);
  }
  std::fclose(log);
  std::istringstream lines(test::read_bytes(log_path));
  std::string first, last;
  std::getline(lines, first);
  std::getline(lines, last);
  EXPECT_NE(first.find("| 100 tok/s | 1000 ms/step |"), std::string::npos) << first;
  // 200 tokens / 0.4 s = 500 tok/s, 0.4 s / 2 steps = 200 ms/step; 50 W / 500 tok/s = 0.1 J/token
  EXPECT_NE(last.find("| 500 tok/s | 200 ms/step | 50.0 W, 0.1 J/token |"), std::string::npos)
      << last;
}

// End to end, what a user checks: on every progress line with W and J/token, J/token equals
// W / (tokens/s) within the printed digits. Checkpoints written at every step lie inside the
// energy intervals (their joules count), so a tokens/s over the steps' own times disagreed.
// A line prints W only when its interval is at least the estimate's resolution (5 ticks, 50 ms):
// 80 steps of this model take about 160 ms on a fast machine (20 steps, 40 ms, printed "power
// undefined" on every line of a CI run, and nothing was checked).
TEST(EnergyInterval, ProgressLinesAgreeWithThemselves) {
  GT_NEEDS_CPU_BACKEND();
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(5000));
  const std::string cfg = d.file("tiny.toml");
  test::write_file(cfg,
                   "[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 8\n"
                   "[train]\nbatch_size = 4\nmax_steps = 240\nwarmup_steps = 1\n"
                   "eval_interval = 0\neval_steps = 1\ncheckpoint_interval = 1\nthreads = 2\n"
                   "log_interval = 80\n[data]\npath = \"" +
                       d.file("t.txt") + "\"\n");
  auto r = test::run_cmd("GT_ENERGY_LOCK_DIR=" + d.file("locks") + " " + GT_BINARY + " train " +
                         cfg + " --out " + d.file("run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex figures(
      R"(\| ([0-9.]+) tok/s \| [0-9.]+ ms/step(?: \| [^|]*)? \| ([0-9.]+) W, ([0-9.e+-]+) J/token)");
  int checked = 0;
  std::istringstream out(r.output);
  for (std::string line; std::getline(out, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, figures)) continue;
    const double tok_s = std::stod(m[1]), w = std::stod(m[2]), j_tok = std::stod(m[3]);
    EXPECT_NEAR(w / tok_s / j_tok, 1.0, 0.02) << line;
    ++checked;
  }
  EXPECT_GT(checked, 0) << r.output;
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
  opt = local_meter_options(cfg, d);
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
  energy::MeterOptions opt = local_meter_options(cfg, d);
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
  energy::test::OtherReader other(
      locks, std::vector<std::string>{"cpu-estimate-machine", "ram-estimate-machine"});
  ASSERT_TRUE(other.held);
  const pid_t child = other.pid;
  TrainConfig cfg;
  cfg.device = "cpu";
  energy::MeterOptions opt = local_meter_options(cfg, d);  // its locks: `locks`
  opt.use_nvml = opt.use_rocm_smi = opt.use_daemon = false;
  std::string header;
  {
    auto meter = energy::Meter::create(opt);
    header = energy_header(*meter);
  }
  other.release();
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
