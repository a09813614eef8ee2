// The greentrain program names what it did and what went wrong: a figure no step produced is
// null with its reason, errors name the argument, file or key the user gave, and --help says
// what docs/commands.md says.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_helpers.h"

namespace gt {
namespace {

namespace fs = std::filesystem;
using test::run_cmd;

const std::string kBin = GT_BINARY;

struct CliNames : ::testing::Test {
  test::TempDir d;
  std::string cfg;
  void SetUp() override {
    test::write_file(d.file("t.txt"), test::sample_text(5000));
    cfg = d.file("tiny.toml");
    test::write_file(cfg,
                     "[model]\nn_layer = 2\nn_head = 2\nn_embd = 16\nblock_size = 8\n"
                     "[train]\nbatch_size = 4\nmax_steps = 2\nwarmup_steps = 1\n"
                     "eval_interval = 0\neval_steps = 2\ncheckpoint_interval = 0\nthreads = 2\n"
                     "[data]\npath = \"" +
                         d.file("t.txt") + "\"\n");
  }
  std::string train(const std::string& extra = "") {
    const std::string run = d.file("run");
    auto r = run_cmd(kBin + " train " + cfg + " --out " + run + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return run;
  }
};

// summary.json said last_loss 0.0 for a session without a step (a loss no step produced).
TEST_F(CliNames, LastLossOfASessionWithoutAStepIsNullWithItsReason) {
  const std::string run = train(" --set train.max_steps=0");
  auto s = nlohmann::json::parse(test::read_bytes(run + "/summary.json"));
  EXPECT_TRUE(s["last_loss"].is_null()) << s.dump();
  EXPECT_EQ(s.value("last_loss_unknown_reason", ""), "no step ran in this session") << s.dump();
  auto st = nlohmann::json::parse(test::read_bytes(run + "/checkpoint/state.json"));
  EXPECT_TRUE(st["last_loss"].is_null()) << st.dump();
  const std::string run2 = d.file("run2");
  ASSERT_EQ(run_cmd(kBin + " train " + cfg + " --out " + run2).exit_code, 0);
  auto s2 = nlohmann::json::parse(test::read_bytes(run2 + "/summary.json"));
  EXPECT_GT(s2["last_loss"].get<double>(), 0) << s2.dump();
  EXPECT_FALSE(s2.contains("last_loss_unknown_reason")) << s2.dump();
}

}  // namespace
}  // namespace gt
