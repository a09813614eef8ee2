// `greentrain ablate` end to end on a tiny model: every row runs, the table is written as
// CSV and JSON with the claimed factors, and the power-cap row is marked not measured.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/bytes_json.h"
#include "energy/node_lock.h"
#include "test_helpers.h"

namespace gt {
namespace {

/// A folder with `chars` characters of text (t.txt) and a config (c.toml) of `model` and
/// `train` TOML lines; command(args) is the ablate command line on them.
struct AblateSetup {
  test::TempDir d;
  AblateSetup(int chars, const std::string& model, const std::string& train) {
    test::write_file(d.file("t.txt"), test::sample_text(chars));
    test::write_file(d.file("c.toml"), "[model]\n" + model + "[train]\n" + train);
  }
  std::string command(const std::string& args) const {
    return std::string(GT_BINARY) + " ablate " + d.file("c.toml") + " --data " + d.file("t.txt") +
           " " + args;
  }
};

TEST(AblateCli, RunsEveryRowAndWritesTheTable) {
  GT_NEEDS_CPU_BACKEND();
  AblateSetup s(20000, "n_layer = 4\nn_head = 2\nn_embd = 32\nblock_size = 32\n",
                "batch_size = 4\nwarmup_steps = 1\neval_steps = 1\nthreads = 2\n");
  const test::TempDir& d = s.d;
  auto r = test::run_cmd(s.command("--steps 3 --out " + d.file("abl")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("+recompute"), std::string::npos) << r.output;
  std::ifstream jf(d.file("abl") + "/ablation.json");
  auto j = nlohmann::json::parse(jf);
  ASSERT_EQ(j["rows"].size(), 5u);  // baseline, +bf16, +fusion, +recompute, +power_cap
  EXPECT_EQ(j["rows"][0]["precision"], "fp32");
  EXPECT_EQ(j["rows"][1]["precision"], "bf16");
  EXPECT_EQ(j["rows"][2]["fusion"], "on");
  EXPECT_EQ(j["rows"][3]["recompute"], "block");
  EXPECT_GT(j["rows"][3]["micro_batch"].get<int>(), j["rows"][0]["micro_batch"].get<int>());
  EXPECT_EQ(j["rows"][1]["claimed_factor"], 2.0);
  EXPECT_EQ(j["rows"][4]["measured"], false);
  for (int i = 0; i < 4; ++i) EXPECT_GT(j["rows"][i]["tokens_per_s"].get<double>(), 0) << i;
  std::ifstream cf(d.file("abl") + "/ablation.csv");
  std::string line;
  int lines = 0;
  while (std::getline(cf, line)) ++lines;
  EXPECT_EQ(lines, 6);
  // the order can change
  r = test::run_cmd(s.command("--steps 2 --order recompute,bad --out " + d.file("x")));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("bad"), std::string::npos) << r.output;
}

// --rounds interleaves the rows in resumed segments: the same losses as one row after
// another (resume is bit-exact), every step in metrics.jsonl once.
TEST(AblateCli, InterleavedRoundsGiveTheSameLosses) {
  GT_NEEDS_CPU_BACKEND();
  AblateSetup s(8000, "n_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 16\n",
                "batch_size = 2\neval_steps = 1\nthreads = 2\n");
  const test::TempDir& d = s.d;
  const std::string base = s.command("--steps 6 --order bf16 ");
  auto r1 = test::run_cmd(base + "--out " + d.file("a"));
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  auto r3 = test::run_cmd(base + "--rounds 3 --out " + d.file("b"));
  ASSERT_EQ(r3.exit_code, 0) << r3.output;
  std::ifstream fa(d.file("a") + "/ablation.json"), fb(d.file("b") + "/ablation.json");
  auto ja = nlohmann::json::parse(fa), jb = nlohmann::json::parse(fb);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ja["rows"][i]["loss"], jb["rows"][i]["loss"]) << i;
    EXPECT_EQ(ja["rows"][i]["val_loss"], jb["rows"][i]["val_loss"]) << i;
  }
  std::ifstream mf(d.file("b") + "/1_+bf16/metrics.jsonl");
  std::string line;
  int expect = 1;
  while (std::getline(mf, line)) EXPECT_EQ(nlohmann::json::parse(line)["step"], expect++);
  EXPECT_EQ(expect, 7);
  auto bad = test::run_cmd(base + "--rounds 4 --out " + d.file("c"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--rounds 4"), std::string::npos) << bad.output;
}

// A second ablation into the same --out replaced the first one's rows and table without a word.
// A folder that is not empty is refused before any row runs, naming --out and --overwrite, and
// the earlier results are left as they were; --overwrite replaces them.
TEST(AblateCli, AnOutFolderThatIsNotEmptyIsRefusedWithoutOverwrite) {
  GT_NEEDS_CPU_BACKEND();
  AblateSetup s(6000, "n_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 16\n",
                "batch_size = 2\neval_steps = 1\nthreads = 2\n");
  const std::string out = s.d.file("abl");
  const std::string base = s.command("--steps 2 --order bf16 --out " + out);
  auto first = test::run_cmd(base);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string table = test::read_bytes(out + "/ablation.json");
  const std::string metrics = test::read_bytes(out + "/0_baseline/metrics.jsonl");
  auto again = test::run_cmd(base);
  EXPECT_NE(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("--out " + out + ": the folder is not empty"), std::string::npos)
      << again.output;
  EXPECT_NE(again.output.find("--overwrite"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("baseline:"), std::string::npos) << "a row ran: " << again.output;
  EXPECT_EQ(test::read_bytes(out + "/ablation.json"), table);
  EXPECT_EQ(test::read_bytes(out + "/0_baseline/metrics.jsonl"), metrics);
  auto over = test::run_cmd(base + " --overwrite");
  EXPECT_EQ(over.exit_code, 0) << over.output;
  // a new or empty folder needs nothing
  std::filesystem::create_directories(s.d.file("empty"));
  auto empty = test::run_cmd(s.command("--steps 2 --order bf16 --out " + s.d.file("empty")));
  EXPECT_EQ(empty.exit_code, 0) << empty.output;
}

// Issue 12, part 3: with no counting sensor (another process reads the machine-wide estimates)
// the energy is unknown: `null` with the reason in ablation.json and in every metrics.jsonl
// line, "unknown" in the table, never 0 or "nan", and no silent switch to another energy.
TEST(AblateCli, UnknownEnergyIsUnknownEverywhere) {
  GT_NEEDS_CPU_BACKEND();
  AblateSetup s(8000, "n_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 16\n",
                "batch_size = 2\neval_steps = 1\nthreads = 2\nlog_interval = 1\n");
  const std::string locks = s.d.file("locks");
  std::filesystem::create_directories(locks);
  std::string who;
  auto cpu = energy::DeviceLock::try_acquire(locks, "cpu-estimate-machine", &who);
  auto ram = energy::DeviceLock::try_acquire(locks, "ram-estimate-machine", &who);
  ASSERT_TRUE(cpu && ram) << who;
  auto r = test::run_cmd("GT_ENERGY_LOCK_DIR=" + locks +
                         " GT_NVML_LIBRARY=/nonexistent GT_ROCM_SMI_LIBRARY=/nonexistent "
                         "GT_POWERCAP_ROOT=/nonexistent " +
                         s.command("--steps 4 --order bf16 --out " + s.d.file("abl")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("nan"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("energy unknown for row baseline: "), std::string::npos) << r.output;
  std::ifstream jf(s.d.file("abl") + "/ablation.json");
  auto j = nlohmann::json::parse(jf);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(j["rows"][i]["tokens_per_joule"].is_null()) << i;
    EXPECT_TRUE(j["rows"][i]["joules_per_token"].is_null()) << i;
    EXPECT_TRUE(j["rows"][i]["factor_vs_baseline"].is_null()) << i;
    EXPECT_EQ(j["rows"][i]["energy"], "unknown") << i;
    EXPECT_FALSE(j["rows"][i]["energy_unknown_reason"].get<std::string>().empty()) << i;
  }
  EXPECT_TRUE(j["combined_factor"].is_null());
  std::ifstream mf(s.d.file("abl") + "/0_baseline/metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(mf, line); ++lines) {
    auto m = nlohmann::json::parse(line);
    EXPECT_TRUE(m["energy_j"].is_null()) << line;
    EXPECT_TRUE(m["joules_per_token"].is_null()) << line;
    EXPECT_TRUE(m.contains("energy_unknown_reason")) << line;
  }
  EXPECT_GT(lines, 0);
  std::ifstream sf(s.d.file("abl") + "/0_baseline/summary.json");
  auto sj = nlohmann::json::parse(sf);
  EXPECT_TRUE(sj["energy_j"].is_null());
  EXPECT_TRUE(sj["tokens_per_joule"].is_null());
  EXPECT_TRUE(sj["run_totals"]["energy_j"].is_null());
}

TEST(AblateCli, RefusesWhatEachRowSetsAndMalformedFlags) {
  AblateSetup s(5000, "n_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 16\n",
                "batch_size = 2\n");
  const std::string base = s.command("--steps 2 --out " + s.d.file("abl") + " ");
  for (auto [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--set train.memory_budget=1000000", "ablate sets train.memory_budget"},
           {"--set train.precision=bf16", "ablate sets train.precision"},
           {"--order bf16,bf16", "'bf16' appears twice"},
           {"--order bf16,,fusion", "'' is unknown"},
           {"--recompute none", "expected gelu, gelu+ln or block"},
           {"--memory-budget -1", "--memory-budget: '-1' is out of range; expected 0"}}) {
    auto r = test::run_cmd(base + flags);
    EXPECT_NE(r.exit_code, 0) << flags;
    EXPECT_NE(r.output.find(message), std::string::npos) << flags << "\n" << r.output;
  }
}

// Issue 31 §1 (its kind in ablate and eval): a configuration, data and output folder whose names
// are not UTF-8 (Latin-1 é). ablation.json used to throw "invalid UTF-8 byte" after every row
// had trained, and eval --json wrote the paths with the bytes replaced. Each path is recorded so
// that it round-trips (core/bytes_json.h), and the report of the folder still renders.
TEST(AblateCli, PathsThatAreNotUtf8RoundTripThroughAblationJsonAndEval) {
  GT_NEEDS_CPU_BACKEND();
  test::TempDir d;
  const std::string data = d.file("t-\xe9.txt"), cfg = d.file("c-\xe9.toml"),
                    out = d.file("abl-\xe9");
  test::write_file(data, test::sample_text(8000));
  test::write_file(cfg,
                   "[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 16\n"
                   "[train]\nbatch_size = 2\neval_steps = 1\nthreads = 2\n");
  const std::string bin = "GT_ENERGY_LOCK_DIR=" + d.file("locks") + " " + GT_BINARY;
  auto r = test::run_cmd(bin + " ablate '" + cfg + "' --data '" + data + "' --steps 2 " +
                         "--order fusion --out '" + out + "' --json '" + d.file("abl.json") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream jf(out + "/ablation.json");
  const auto j = nlohmann::json::parse(jf);
  ASSERT_TRUE(j["config"].is_object()) << j["config"].dump();
  EXPECT_EQ(bytes_from_json(j["config"], "config"), cfg);
  EXPECT_EQ(j["rows"].size(), 3u);
  std::ifstream of(d.file("abl.json"));
  const auto o = nlohmann::json::parse(of);
  EXPECT_EQ(bytes_from_json(o["out"], "out"), out);
  EXPECT_EQ(bytes_from_json(o["config"], "config"), cfg);
  for (auto& e : std::filesystem::directory_iterator(out))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  std::ifstream hf(out + "/report.html");
  const std::string html((std::istreambuf_iterator<char>(hf)), {});
  EXPECT_NE(html.find("c-\\xe9.toml"), std::string::npos) << r.output;
  // eval --json on a row's run: the run folder and the data as they are
  auto e = test::run_cmd(bin + " eval '" + out + "/0_baseline' --json '" + d.file("ev.json") + "'");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  std::ifstream ef(d.file("ev.json"));
  const auto ev = nlohmann::json::parse(ef);
  EXPECT_EQ(bytes_from_json(ev["run_dir"], "run_dir"), out + "/0_baseline");
  EXPECT_EQ(bytes_from_json(ev["data"], "data"), data);
}

}  // namespace
}  // namespace gt
