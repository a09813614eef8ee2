// The greentrain program end to end: bad input gives a clear error and a non-zero exit and
// leaves no partial file; train, eval, sample and resume work together.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "test_helpers.h"

namespace gt {
namespace {

namespace fs = std::filesystem;
using test::run_cmd;

const std::string kBin = GT_BINARY;

// 6 steps, validating every 3, a progress line each step.
const test::TinyConfig kTiny{
    .max_steps = 6, .warmup_steps = 2, .eval_interval = 3, .log_interval = 1};

std::string tiny_toml(const std::string& data) { return test::tiny_config_toml(data, kTiny); }

struct Cli : ::testing::Test {
  test::TempDir d;
  std::string cfg;
  void SetUp() override { cfg = test::write_tiny_config(d, kTiny); }
  // Runs train and expects failure with `needle` in the message and no checkpoint left.
  void expect_train_error(const std::string& args, const std::string& needle) {
    std::string out = d.file("bad-run");
    auto r = run_cmd(kBin + " train " + args + " --out " + out);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << "message was: " << r.output;
    EXPECT_FALSE(fs::exists(fs::path(out) / "checkpoint")) << "partial checkpoint left";
    EXPECT_FALSE(fs::exists(out)) << "a failed start left its run folder";
    for (auto& e : fs::directory_iterator(d.path))
      EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
  }
};

TEST_F(Cli, MissingDataFile) {
  expect_train_error(cfg + " --data " + d.file("nope.txt"), "nope.txt: no such file");
}

// A folder given as the data says so; an --out that cannot be made is named, with the reason,
// before the data is loaded (it was a bare filesystem error after loading).
TEST_F(Cli, DataThatIsAFolderAndAnOutThatCannotBeMadeAreNamed) {
  expect_train_error(cfg + " --data " + d.path.string(), ": a folder; expected a data file");
  fs::create_directories(d.file("ro"));
  test::write_file(d.file("ro/file"), "x");  // a file where --out needs a folder
  auto r = run_cmd(kBin + " train " + cfg + " --out " + d.file("ro/file/run"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--out " + d.file("ro/file/run") + ": cannot create the run folder"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("model    GPT"), std::string::npos) << "started before the check";
}

// A resumed run keeps its model's shape: --set model.n_layer on --resume is refused by name
// before anything is loaded (it failed on the checkpoint's tensors), and the run is untouched.
TEST_F(Cli, ResumeRefusesAnotherModelShapeByName) {
  const std::string run = d.file("shape");
  auto r = run_cmd(kBin + " train " + cfg + " --out " + run + " --set train.max_steps=3" +
                   " --set train.checkpoint_interval=3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string before = test::read_bytes((fs::path(run) / "summary.json").string());
  r = run_cmd(kBin + " train --out " + run + " --resume --set model.n_layer=3" +
              " --set train.max_steps=6");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--set model.n_layer=3: a resumed run keeps its model's shape (the "
                          "checkpoint in " +
                          run + " has model.n_layer = 2)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(test::read_bytes((fs::path(run) / "summary.json").string()), before);
}

// Issue 12, part 8: inputs checked only once the trainer exists left a run folder holding only
// config.toml.
TEST_F(Cli, FailedStartLeavesNoRunFolder) {
  expect_train_error(cfg + " --set energy.carbon_csv=" + d.file("no-such.csv"), "no-such.csv");
  fs::create_directories(d.file("empty-powercap"));
  setenv("GT_POWERCAP_ROOT", d.file("empty-powercap").c_str(), 1);     // no RAPL zone,
  setenv("GT_NVML_LIBRARY", d.file("no-libnvidia-ml.so").c_str(), 1);  // no GPU
  expect_train_error(cfg + " --set train.power_limit=60 --set train.power_limit_required=true",
                     "train.power_limit = 60 W could not be applied: power limit: no device found");
  unsetenv("GT_POWERCAP_ROOT");
  unsetenv("GT_NVML_LIBRARY");
}

// Issue 17: a plan's CPU cap reaches `greentrain train` as --set train.power_limit=W; where no
// limit can be written (no RAPL zone, or a job not run as root) the run goes on uncapped, says
// so and records why, instead of failing every capped job at its start.
TEST_F(Cli, PowerLimitThatCannotBeAppliedIsRecordedAndTheRunGoesOn) {
  fs::create_directories(d.file("empty-powercap"));
  const std::string env = "GT_POWERCAP_ROOT=" + d.file("empty-powercap") +
                          " GT_NVML_LIBRARY=" + d.file("no-libnvidia-ml.so") + " ";
  const std::string run = d.file("capped");
  auto r = run_cmd(env + kBin + " train " + cfg + " --out " + run + " --set train.power_limit=60");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("limit 60 W NOT applied, the run goes on uncapped: power limit: no "
                          "device found"),
            std::string::npos)
      << r.output;
  std::ifstream f(fs::path(run) / "summary.json");
  auto s = nlohmann::json::parse(f);
  ASSERT_TRUE(s.contains("power_limit")) << s.dump();
  EXPECT_EQ(s["power_limit"]["requested_w"], 60.0);
  EXPECT_EQ(s["power_limit"]["applied"], false);
  EXPECT_NE(s["power_limit"]["reason"].get<std::string>().find("no device found"),
            std::string::npos);
  EXPECT_EQ(s["step"], 6);
}

TEST_F(Cli, EmptyDataFile) {
  test::write_file(d.file("empty.txt"), "");
  expect_train_error(cfg + " --data " + d.file("empty.txt"), "empty");
}

TEST_F(Cli, TextShorterThanBlockSizePlusOne) {
  test::write_file(d.file("short.txt"), "abcdefgh");  // 8 tokens < 9
  expect_train_error(cfg + " --data " + d.file("short.txt") + " --set data.val_fraction=0",
                     "fewer than model.block_size + 1 = 9");
}

TEST_F(Cli, LlmcWrongMagic) {
  std::string bytes(1024 + 200, '\0');
  int32_t hdr[3] = {12345, 1, 100};
  std::memcpy(bytes.data(), hdr, sizeof(hdr));
  test::write_file(d.file("bad.bin"), bytes);
  expect_train_error(cfg + " --data " + d.file("bad.bin") + " --set data.format=llmc",
                     "magic number 12345");
}

TEST_F(Cli, LlmcTokenCountDisagreesWithSize) {
  std::string bytes(1024 + 2 * 99, '\0');
  int32_t hdr[3] = {20240520, 1, 100};
  std::memcpy(bytes.data(), hdr, sizeof(hdr));
  test::write_file(d.file("trunc.bin"), bytes);
  expect_train_error(cfg + " --data " + d.file("trunc.bin") + " --set data.format=llmc",
                     "header says 100 tokens");
}

TEST_F(Cli, LlmcAndNanoGptShardsTrain) {
  // 600 tokens of a repeating pattern in both formats
  std::string tokens;
  for (int i = 0; i < 600; ++i) {
    uint16_t t = (i * 7) % 50;
    tokens.append(reinterpret_cast<char*>(&t), 2);
  }
  std::string llmc(1024, '\0');
  int32_t hdr[3] = {20240520, 1, 600};
  std::memcpy(llmc.data(), hdr, sizeof(hdr));
  test::write_file(d.file("a.bin"), llmc + tokens);
  test::write_file(d.file("b.bin"), tokens);
  auto r1 = run_cmd(kBin + " train " + cfg + " --data " + d.file("a.bin") +
                    " --set data.format=llmc --set model.vocab_size=50 --out " + d.file("r1"));
  EXPECT_EQ(r1.exit_code, 0) << r1.output;
  auto r2 = run_cmd(kBin + " train " + cfg + " --data " + d.file("b.bin") +
                    " --set data.format=nanogpt --set model.vocab_size=50 --out " + d.file("r2"));
  EXPECT_EQ(r2.exit_code, 0) << r2.output;
  auto bad = run_cmd(kBin + " train " + cfg + " --data " + d.file("b.bin") +
                     " --set data.format=nanogpt --set model.vocab_size=20 --out " + d.file("r3"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("not below model.vocab_size = 20"), std::string::npos) << bad.output;
}

TEST_F(Cli, UnknownKeyInFileAndInSet) {
  test::write_file(d.file("typo.toml"), tiny_toml(d.file("t.txt")) + "[train]\n");
  std::string typo = "[model]\nn_layers = 2\n";
  test::write_file(d.file("typo.toml"), typo);
  expect_train_error(d.file("typo.toml"), "key 'model.n_layers' is unknown");
  expect_train_error(cfg + " --set train.batchsize=3", "unknown key 'train.batchsize'");
  expect_train_error(cfg + " --set train.batch_size=three", "'three' is not an integer");
}

// Issue 12, part 8: numbers from --set and TOML go through the one checked parser: a value out
// of the key's range is named (it used to wrap silently: 4294967298 became 2 layers), and inf
// is not a TDP.
TEST_F(Cli, NumbersOutOfRangeOrNotFiniteAreNamed) {
  expect_train_error(cfg + " --set model.n_layer=4294967298",
                     "model.n_layer: 4294967298 is out of range; expected an integer in "
                     "[-2147483648, 2147483647]");
  test::write_file(d.file("big.toml"),
                   "[model]\nn_layer = 4294967298\n[data]\npath = \"" + d.file("t.txt") + "\"\n");
  expect_train_error(d.file("big.toml"), "key 'model.n_layer': 4294967298 is out of range");
  expect_train_error(cfg + " --set energy.cpu_tdp_w=inf",
                     "energy.cpu_tdp_w: 'inf' is not finite; expected a finite number");
  expect_train_error(cfg + " --set train.batch_size=99999999999999999999",
                     "train.batch_size: '99999999999999999999' is out of range");
}

// Issue 15, part 1: a learning rate of 1e39 is finite but inf as a float, and weight decay inf
// came through --set: both ran to a checkpoint of NaN. Every optimizer value is checked for
// its range, with the key and the value in the error.
TEST_F(Cli, OptimizerValuesOutOfRangeAreNamed) {
  expect_train_error(cfg + " --set train.learning_rate=1e39",
                     "train.learning_rate = 1e+39: expected a value in (0, 1]");
  expect_train_error(cfg + " --set train.learning_rate=inf",
                     "train.learning_rate: 'inf' is not finite");
  expect_train_error(cfg + " --set train.weight_decay=inf",
                     "train.weight_decay: 'inf' is not finite");
  expect_train_error(cfg + " --set train.weight_decay=2000",
                     "train.weight_decay = 2000: expected a value in [0, 1 / train.learning_rate]");
  expect_train_error(cfg + " --set train.min_lr=-1e-4", "train.min_lr = -0.0001");
  expect_train_error(cfg + " --set train.beta1=1", "train.beta1 = 1: expected a value in [0, 1)");
  expect_train_error(cfg + " --set train.beta2=0.9999999999",
                     "train.beta2 = 0.9999999999: expected a value in [0, 1) that stays below 1 "
                     "as a float");
  expect_train_error(cfg + " --set train.eps=0", "train.eps = 0: expected a value in [");
  expect_train_error(cfg + " --set train.eps=1e-45", "train.eps = 1e-45");
  expect_train_error(cfg + " --set train.grad_clip=-1",
                     "train.grad_clip = -1: expected zero or more");
  // 20 h passed here and failed when the series was read, naming the file, not the key
  expect_train_error(cfg + " --set energy.carbon_utc_offset_h=20",
                     "energy.carbon_utc_offset_h = 20: expected hours in [-14, 14]");
  // how a series is read, without a series: it was ignored (a constant of 300 lbs/MWh was
  // taken as 300 gCO2e/kWh)
  expect_train_error(cfg + " --set energy.carbon_intensity=300 --set energy.carbon_unit=lbs/MWh",
                     "energy.carbon_unit = 'lbs/MWh': says how a series file is read; expected "
                     "energy.carbon_csv with it");
  expect_train_error(cfg + " --set energy.carbon_utc_offset_h=3",
                     "energy.carbon_utc_offset_h = 3: the time zone of a series' times; "
                     "expected energy.carbon_csv");
  test::write_file(d.file("inf.toml"),
                   "[train]\nlearning_rate = inf\n[data]\npath = \"" + d.file("t.txt") + "\"\n");
  expect_train_error(d.file("inf.toml"), "key 'train.learning_rate': inf is not finite");
  test::write_file(d.file("nan.toml"),
                   "[train]\nweight_decay = nan\n[data]\npath = \"" + d.file("t.txt") + "\"\n");
  expect_train_error(d.file("nan.toml"), "key 'train.weight_decay': nan is not finite");
}

// A value out of range in the configuration file is named after the file and line that set it,
// as the file's other errors are (the message named the key alone); a value from --set names no
// file, also where --set replaces the file's value.
TEST_F(Cli, RangeErrorsNameTheConfigFileThatSetTheValue) {
  std::string text = tiny_toml(d.file("t.txt"));
  text.replace(text.find("[train]\n"), 8, "[train]\nlearning_rate = 2.0\n");
  const std::string file = d.file("lr.toml");
  test::write_file(file, text);
  expect_train_error(file, file + ":7: train.learning_rate = 2: expected a value in (0, 1]");
  for (const std::string& args :
       {file + " --set train.learning_rate=3", cfg + " --set train.learning_rate=3"}) {
    auto r = run_cmd(kBin + " train " + args + " --out " + d.file("bad-run"));
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("train.learning_rate = 3: expected a value in (0, 1]"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find(".toml:"), std::string::npos) << r.output;
  }
}

// Issue 15, part 1: a run whose loss becomes NaN stops at that step with an error naming it,
// exits non-zero and leaves the last good checkpoint byte for byte.
TEST_F(Cli, NaNLossStopsTheRunAndKeepsTheLastCheckpoint) {
  GT_NEEDS_CPU_BACKEND();
  std::string run = d.file("run");
  auto r = run_cmd(kBin + " train " + cfg + " --out " + run + " --stop-at 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // finite but huge embeddings (a checkpoint from elsewhere): the LayerNorm overflows
  fs::path model = fs::path(run) / "checkpoint" / "model.safetensors";
  std::string bytes = test::read_bytes(model.string());
  uint64_t hl;
  std::memcpy(&hl, bytes.data(), 8);
  auto hdr = nlohmann::json::parse(bytes.substr(8, hl));
  auto offs = hdr["wte.weight"]["data_offsets"];
  const float huge = 3e38f;
  for (size_t at = 8 + hl + offs[0].get<size_t>(); at < 8 + hl + offs[1].get<size_t>(); at += 4)
    std::memcpy(bytes.data() + at, &huge, 4);
  test::write_file(model.string(), bytes);
  test::drop_checkpoint_checksums(run);  // else refused as damaged before it is read
  std::vector<std::string> before;
  for (auto f : {"model.safetensors", "optimizer.safetensors", "state.json"})
    before.push_back(test::read_bytes((fs::path(run) / "checkpoint" / f).string()));
  for (std::string prec : {"fp32", "bf16"}) {
    auto res = run_cmd(kBin + " train --out " + run + " --resume --set train.precision=" + prec);
    EXPECT_NE(res.exit_code, 0) << res.output;
    EXPECT_NE(res.output.find("step 4: the training loss of micro-batch 1 of 1 is NaN"),
              std::string::npos)
        << res.output;
    EXPECT_NE(res.output.find("the checkpoint of step 3"), std::string::npos) << res.output;
    std::vector<std::string> after;
    for (auto f : {"model.safetensors", "optimizer.safetensors", "state.json"})
      after.push_back(test::read_bytes((fs::path(run) / "checkpoint" / f).string()));
    EXPECT_TRUE(after == before) << prec << ": the last good checkpoint changed";
  }
}

// Issue 15, part 2: a resume on other data applied the old permutation's position to the new
// file without a word. The checkpoint records its data; other data or another tokenizer is
// refused naming both, unless --allow-data-change (then the position restarts, with a note
// printed and kept in metrics.jsonl).
TEST_F(Cli, ResumeOnOtherDataIsRefusedUnlessAllowed) {
  std::string run = d.file("run");
  auto r = run_cmd(kBin + " train " + cfg + " --out " + run + " --stop-at 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto st = nlohmann::json::parse(test::read_bytes(run + "/checkpoint/state.json"));
  ASSERT_TRUE(st.contains("data_identity")) << st.dump();
  EXPECT_EQ(st["data_identity"]["bytes"], 5000);
  EXPECT_EQ(st["data_identity"]["tokenizer"], "char");
  EXPECT_EQ(st["data_identity"]["tokens_fnv1a64"].get<std::string>().size(), 16u);
  const auto state_before = test::read_bytes(run + "/checkpoint/state.json");
  // other text with the same characters
  test::write_file(d.file("other.txt"), test::sample_text(5000, 99));
  auto other = run_cmd(kBin + " train --out " + run + " --resume --data " + d.file("other.txt"));
  EXPECT_NE(other.exit_code, 0) << other.output;
  EXPECT_NE(other.output.find("--resume on other data: the checkpoint of step 3 was trained on " +
                              d.file("t.txt") + " (5000 bytes"),
            std::string::npos)
      << other.output;
  EXPECT_NE(other.output.find("this run reads " + d.file("other.txt")), std::string::npos)
      << other.output;
  EXPECT_NE(other.output.find("--allow-data-change"), std::string::npos) << other.output;
  EXPECT_EQ(test::read_bytes(run + "/checkpoint/state.json"), state_before);
  // another tokenizer
  auto tok = run_cmd(kBin + " train --out " + run + " --resume --set data.tokenizer=byte");
  EXPECT_NE(tok.exit_code, 0) << tok.output;
  EXPECT_NE(tok.output.find("data.tokenizer = 'char'; this run has data.format = 'text', "
                            "data.tokenizer = 'byte'"),
            std::string::npos)
      << tok.output;
  EXPECT_EQ(test::read_bytes(run + "/checkpoint/state.json"), state_before);
  // asked for: the position restarts, and the run says so in its output and its metrics
  auto allowed = run_cmd(kBin + " train --out " + run + " --resume --stop-at 4 --data " +
                         d.file("other.txt") + " --allow-data-change");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.output;
  EXPECT_NE(allowed.output.find("note: resuming at step 3 on other data (--allow-data-change)"),
            std::string::npos)
      << allowed.output;
  bool logged = false;
  std::ifstream metrics(run + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("note")) {
      logged = true;
      EXPECT_EQ(j["step"], 3);
      EXPECT_EQ(j["data_now"]["path"], d.file("other.txt"));
      EXPECT_EQ(j["data_was"]["path"], d.file("t.txt"));
    }
  }
  EXPECT_TRUE(logged) << "no note in metrics.jsonl";
  auto now = nlohmann::json::parse(test::read_bytes(run + "/checkpoint/state.json"));
  EXPECT_EQ(now["data_identity"]["path"], d.file("other.txt"));
  // restarted: one step into the new data's first epoch (the checkpoint was three steps in)
  EXPECT_EQ(now["data"]["epoch"], 0);
  EXPECT_EQ(now["data"]["cursor"].get<int64_t>() * 3, st["data"]["cursor"].get<int64_t>());
  // the new checkpoint's data under another name resumes without a word
  fs::copy_file(d.file("other.txt"), d.file("other-moved.txt"));
  auto same = run_cmd(kBin + " train --out " + run + " --resume --stop-at 5 --data " +
                      d.file("other-moved.txt"));
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_EQ(same.output.find("other data"), std::string::npos) << same.output;
}

TEST_F(Cli, ZeroOrNegativeSizes) {
  expect_train_error(cfg + " --set model.n_layer=0",
                     "model.n_layer = 0: expected a positive value");
  expect_train_error(cfg + " --set train.batch_size=-4",
                     "train.batch_size = -4: expected a positive value");
  expect_train_error(cfg + " --set model.n_embd=15", "must be divisible");
}

TEST_F(Cli, PolicyValuesAreCheckedAndNamed) {
  expect_train_error(cfg + " --set train.fusion=maybe",
                     "train.fusion = 'maybe': expected on or off");
  expect_train_error(cfg + " --set train.stochastic_rounding=yes",
                     "train.stochastic_rounding = 'yes': expected on or off");
  expect_train_error(cfg + " --set train.stochastic_rounding=on",
                     "needs train.precision = 'bf16' (got 'fp32')");
  expect_train_error(cfg + " --set train.recompute=all", "train.recompute");
  expect_train_error(cfg + " --stop-at 0", "--stop-at: expected a step number >= 1, got '0'");
  expect_train_error(cfg + " --stop-at 3x", "--stop-at: expected a step number >= 1, got '3x'");
}

// summary.json's figures are the session's; run_totals adds up the sessions of a resumed run
TEST_F(Cli, ResumedSummaryAddsUpTheSessions) {
  std::string run = d.file("run-totals");
  auto read = [&] {
    std::ifstream f(fs::path(run) / "summary.json");
    return nlohmann::json::parse(f);
  };
  // its own lock folder: another greentrain on this machine (a parallel test) would otherwise
  // be the reader of the machine-wide estimate, and this run's energy unknown (null)
  const std::string bin = "GT_ENERGY_LOCK_DIR=" + d.file("locks") + " " + kBin;
  auto r1 = run_cmd(bin + " train " + cfg + " --out " + run + " --stop-at 2");
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  auto s1 = read();
  EXPECT_EQ(s1["session_start_step"], 0);
  EXPECT_EQ(s1["run_totals"]["sessions"], 1);
  EXPECT_EQ(s1["run_totals"]["tokens"], s1["tokens"]);
  // what an interruption costs the run, for `greentrain schedule` (issue 17.3): the last
  // checkpoint write and the start-up (process start to first step); joules unknown, and why
  auto expect_interruption = [](const nlohmann::json& s, bool resumed) {
    ASSERT_TRUE(s.contains("interruption")) << s.dump(2);
    const auto& in = s["interruption"];
    ASSERT_TRUE(in["checkpoint_write_s"].is_number()) << in.dump();
    EXPECT_GT(in["checkpoint_write_s"].get<double>(), 0);
    ASSERT_TRUE(in["restart_s"].is_number()) << in.dump();
    EXPECT_GT(in["restart_s"].get<double>(), 0);
    EXPECT_LT(in["restart_s"].get<double>() + in["checkpoint_write_s"].get<double>(),
              s["wall_s"].get<double>());
    EXPECT_EQ(in["restart_resumed"], resumed);
    EXPECT_TRUE(in["checkpoint_write_j"].is_null());
    EXPECT_TRUE(in["restart_j"].is_null());
    EXPECT_TRUE(in["energy_unknown_reason"].is_string());
  };
  expect_interruption(s1, false);
  auto prev = s1;
  for (int k = 0; k < 2; ++k) {  // twice: the totals carry over from session to session
    auto r = run_cmd(bin + " train --out " + run + " --resume --stop-at " + std::to_string(3 + k));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto s = read();
    // each total is the previous total plus this session's figure (a session this short may
    // have logged no energy interval: 0 J is a valid session figure)
    for (const char* key : {"duration_s", "wall_s", "energy_j", "g_co2e"})
      EXPECT_DOUBLE_EQ(s["run_totals"][key].get<double>(),
                       prev["run_totals"][key].get<double>() + s[key].get<double>())
          << key;
    // wall_s is the session's wall time (loading, steps, evaluation, checkpoint): what a
    // scheduler plans with (issue 17.1); duration_s counts optimizer steps only
    EXPECT_GT(s["wall_s"].get<double>(), s["duration_s"].get<double>());
    expect_interruption(s, true);
    prev = s;
  }
  auto s3 = read();
  EXPECT_EQ(s3["session_start_step"], 3);
  EXPECT_EQ(s3["run_totals"]["sessions"], 3);
  EXPECT_EQ(s3["run_totals"]["first_step"], 0);
  EXPECT_EQ(s3["run_totals"]["tokens"].get<int64_t>(), 2 * s1["tokens"].get<int64_t>());  // 4 steps
  EXPECT_GT(s3["run_totals"]["duration_s"].get<double>(), s3["duration_s"].get<double>());
}

// An interruptible Slurm job runs the same command line every time (sched/slurm.h):
// `train CONFIG --out RUN --resume` starts RUN from CONFIG when it holds no checkpoint yet (it
// was an error, so the job's first run failed), and continues it afterwards (issue 17.1).
TEST_F(Cli, ResumeWithConfigStartsARunThatHasNoCheckpointYet) {
  std::string run = d.file("slurm-run");
  const std::string cmd = kBin + " train " + cfg + " --out " + run + " --resume --stop-at 3";
  auto first = run_cmd(cmd);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("holds no checkpoint yet: starting it from"), std::string::npos)
      << first.output;
  auto second = run_cmd(kBin + " train " + cfg + " --out " + run + " --resume");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed  from step 3"), std::string::npos) << second.output;
  // without a configuration, --resume still needs a checkpoint
  auto none = run_cmd(kBin + " train --out " + d.file("empty-run") + " --resume");
  EXPECT_NE(none.exit_code, 0) << none.output;
}

TEST_F(Cli, TrainEvalSampleResumeAndDamagedCheckpoints) {
  std::string run = d.file("run");
  auto r = run_cmd(kBin + " train " + cfg + " --out " + run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("validation loss ([0-9.]+)"))) << r.output;
  std::string train_val = m[1];
  for (auto f : {"config.toml", "metrics.jsonl", "summary.json", "checkpoint/model.safetensors",
                 "checkpoint/optimizer.safetensors", "checkpoint/state.json"})
    EXPECT_TRUE(fs::exists(fs::path(run) / f)) << f;
  auto e = run_cmd(kBin + " eval " + run);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  ASSERT_TRUE(std::regex_search(e.output, m, std::regex("val loss ([0-9.]+)"))) << e.output;
  EXPECT_EQ(train_val, m[1].str());
  auto s = run_cmd(kBin + " sample " + run + " --tokens 20 --prompt 'the '");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(s.output.rfind("the ", 0), 0u) << s.output;
  // a second train into the same folder must not overwrite it
  auto again = run_cmd(kBin + " train " + cfg + " --out " + run);
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.output.find("--resume"), std::string::npos);
  // resume past the end with a larger max_steps
  auto res = run_cmd(kBin + " train --out " + run + " --resume --set train.max_steps=8");
  ASSERT_EQ(res.exit_code, 0) << res.output;
  EXPECT_NE(res.output.find("resumed  from step 6"), std::string::npos) << res.output;
  // damaged checkpoints: truncated, then missing tensor file
  fs::path model = fs::path(run) / "checkpoint" / "model.safetensors";
  auto size = fs::file_size(model);
  fs::copy_file(model, d.file("model.bak"));
  fs::resize_file(model, size - 100);
  auto t = run_cmd(kBin + " eval " + run);
  EXPECT_NE(t.exit_code, 0);
  EXPECT_NE(t.output.find("truncated"), std::string::npos) << t.output;
  // (past the checkpoint's step 8: at it, train has nothing to do and reads no tensor)
  auto tr = run_cmd(kBin + " train --out " + run + " --resume --set train.max_steps=10");
  EXPECT_NE(tr.exit_code, 0);
  EXPECT_NE(tr.output.find("truncated"), std::string::npos) << tr.output;
  fs::remove(model);
  auto miss = run_cmd(kBin + " sample " + run);
  EXPECT_NE(miss.exit_code, 0);
  EXPECT_NE(miss.output.find("model.safetensors: no such file"), std::string::npos) << miss.output;
}

// Issue 31 §1: Linux paths are bytes. Data and a run folder whose names are not UTF-8 (Latin-1
// é) train to the end, every record is written (state.json, summary.json, config.toml), the
// paths round-trip through them, and --resume finds the checkpoint and the data again.
TEST_F(Cli, PathsThatAreNotUtf8RoundTripThroughTheRun) {
  const std::string data = d.file("shakespeare-\xe9t\xe9.txt");
  test::write_file(data, test::sample_text(5000));
  test::write_file(cfg, tiny_toml(d.file("t.txt")));
  const std::string run = d.file("run-\xe9");
  const std::string bin = "GT_ENERGY_LOCK_DIR=" + d.file("locks") + " " + kBin;
  auto r =
      run_cmd(bin + " train " + cfg + " --data '" + data + "' --out '" + run + "' --stop-at 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"checkpoint/state.json", "summary.json", "config.toml"})
    EXPECT_TRUE(fs::exists(fs::path(run) / f)) << f;
  for (auto& e : fs::directory_iterator(run))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  std::ifstream sf(fs::path(run) / "checkpoint" / "state.json");
  const auto st = nlohmann::json::parse(sf);
  const auto& path = st["data_identity"]["path"];
  ASSERT_TRUE(path.is_object()) << path.dump();
  EXPECT_NE(path["shown"].get<std::string>().find("shakespeare-\\xe9t\\xe9.txt"),
            std::string::npos);
  std::ifstream mf(fs::path(run) / "summary.json");
  EXPECT_TRUE(nlohmann::json::parse(mf)["run_dir"].contains("bytes_hex"));
  auto res = run_cmd(bin + " train --out '" + run + "' --resume --stop-at 3");
  EXPECT_EQ(res.exit_code, 0) << res.output;
  EXPECT_EQ(res.output.find("error"), std::string::npos) << res.output;
}

// Issue 31 §4 (its kind in train): Slurm's --signal=USR1@N warning, SIGHUP and SIGUSR2 end a
// run with a checkpoint, as SIGTERM does, instead of killing it with its steps lost.
TEST_F(Cli, SlurmUsr1WarningSavesACheckpoint) {
  std::string run = d.file("run-usr1");
  auto r = run_cmd("timeout --preserve-status -s USR1 3 " + kBin + " train " + cfg +
                   " --set train.max_steps=1000000 --set train.eval_interval=0 --out " + run);
  EXPECT_EQ(r.exit_code, 128 + SIGUSR1) << r.output;
  EXPECT_TRUE(fs::exists(fs::path(run) / "checkpoint" / "state.json")) << r.output;
}

TEST_F(Cli, SigtermSavesACheckpointAndResumes) {
  std::string run = d.file("run");
  auto r = run_cmd("timeout --preserve-status -s TERM 3 " + kBin + " train " + cfg +
                   " --set train.max_steps=1000000 --set train.eval_interval=0 --out " + run);
  EXPECT_EQ(r.exit_code, 143) << r.output;
  EXPECT_NE(r.output.find("signal 15"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(fs::path(run) / "checkpoint" / "state.json"));
  auto res = run_cmd(kBin + " train --out " + run + " --resume --stop-at 1");
  EXPECT_EQ(res.exit_code, 0) << res.output;
}

}  // namespace
}  // namespace gt
