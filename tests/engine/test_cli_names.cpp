// The greentrain program names what it did and what went wrong: a figure no step produced is
// null with its reason, errors name the argument, file or key the user gave, and --help says
// what docs/commands.md says.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_helpers.h"
#include "train/model_memory.h"

namespace gt {
namespace {

namespace fs = std::filesystem;
using test::run_cmd;

const std::string kBin = GT_BINARY;

struct CliNames : ::testing::Test {
  test::TempDir d;
  std::string cfg;
  void SetUp() override { cfg = test::write_tiny_config(d, {.max_steps = 2, .warmup_steps = 1}); }
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

// `sample RUN/checkpoint` (a folder that looks like a Hugging Face one) said "--init-from
// RUN/checkpoint", an option sample does not have.
TEST_F(CliNames, AFolderWithoutATokenizerIsNamedAsTheUserGaveIt) {
  const std::string run = train();
  auto r = run_cmd(kBin + " sample " + run + "/checkpoint --tokens 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.find("--init-from"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(run + "/checkpoint: the folder has no tokenizer"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("or the run folder " + run + " "), std::string::npos) << r.output;
  // train names its own option
  auto t = run_cmd(kBin + " train " + cfg + " --out " + d.file("r2") + " --init-from " + run +
                   "/checkpoint");
  EXPECT_NE(t.output.find("--init-from " + run + "/checkpoint: the folder has no tokenizer"),
            std::string::npos)
      << t.output;
}

// config.json's n_embd = -64 was reported as "model.n_embd = -64", a key of no file the user has.
TEST_F(CliNames, AHuggingFaceConfigValueIsNamedWithItsFile) {
  const std::string run = train();
  const std::string hf = d.file("hf");
  fs::create_directories(hf);
  fs::copy_file(run + "/checkpoint/model.safetensors", hf + "/model.safetensors");
  auto c = nlohmann::json::parse(test::read_bytes(run + "/checkpoint/config.json"));
  c["n_embd"] = -64;
  test::write_file(hf + "/config.json", c.dump());
  auto r = run_cmd(kBin + " sample " + hf + " --tokens 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(hf + "/config.json: n_embd = -64; expected a positive integer"),
            std::string::npos)
      << r.output;
}

// "Arena 'activations': cannot allocate 7721275200000 bytes" named no key and no memory size.
// The memory a message names: the machine's, its cgroup's limit (a CI container's) or ulimit -v.
bool names_the_memory(const std::string& out) {
  return out.find("this machine has ") != std::string::npos ||
         out.find("its cgroup (") != std::string::npos ||
         out.find("its address space is limited") != std::string::npos;
}

TEST_F(CliNames, ActivationsTooLargeForMemoryNameTheirKeysAndTheMemory) {
  test::write_file(d.file("long.txt"), test::sample_text(310000));
  auto t = run_cmd(kBin + " train " + cfg + " --out " + d.file("big") + " --data " +
                   d.file("long.txt") + " --set model.block_size=300000 --set data.val_fraction=0");
  EXPECT_EQ(t.exit_code, 1) << t.output;
  EXPECT_NE(t.output.find("model.block_size = 300000"), std::string::npos) << t.output;
  EXPECT_TRUE(names_the_memory(t.output)) << t.output;
  EXPECT_EQ(t.output.find("Arena"), std::string::npos) << t.output;
  EXPECT_FALSE(fs::exists(d.file("big")));

  const std::string run = train();
  auto e = run_cmd(kBin + " eval " + run + " --set train.batch_size=100000000");
  EXPECT_EQ(e.exit_code, 1) << e.output;
  EXPECT_NE(e.output.find("train.batch_size = 100000000: the activations of 100000000 "
                          "sequences of model.block_size = 8 tokens need "),
            std::string::npos)
      << e.output;
  EXPECT_TRUE(names_the_memory(e.output)) << e.output;
  EXPECT_NE(e.output.find("; at most train.batch_size = "), std::string::npos) << e.output;
}

// sample --help said "Run folder written by greentrain train" though it reads a Hugging Face
// folder as eval does.
TEST_F(CliNames, SampleAndEvalHelpNameTheFoldersTheyRead) {
  const std::string docs = test::read_bytes(std::string(GT_SOURCE_DIR) + "/docs/commands.md");
  for (const char* cmd : {"sample", "eval"}) {
    auto h = run_cmd(kBin + " " + cmd + " --help");
    EXPECT_EQ(h.exit_code, 0) << h.output;
    EXPECT_NE(h.output.find("Hugging Face GPT-2 folder"), std::string::npos) << cmd << h.output;
    EXPECT_NE(docs.find(std::string("greentrain ") + cmd + " RUN_DIR|HF_DIR"), std::string::npos)
        << cmd;
  }
  auto e = run_cmd(kBin + " eval --help");
  for (const char* opt : {"--data", "--val-data", "--set", "--json"})
    EXPECT_NE(e.output.find(opt), std::string::npos) << opt;
}

}  // namespace
}  // namespace gt

namespace gt {
namespace {
namespace fs = std::filesystem;
// A Slurm job's --mem (cgroup v2's memory.max of the job's cgroup or an ancestor) below the
// machine's memory was not seen: the model passed the check and was killed by the OOM killer.
TEST(HostMemoryLimit, IsTheLeastOfTheMachineAndItsCgroups) {
  test::TempDir d;
  auto put = [](const std::string& path, const std::string& bytes) {
    fs::create_directories(fs::path(path).parent_path());
    test::write_file(path, bytes);
  };
  const size_t phys = host_memory_bytes();
  ASSERT_GT(phys, size_t{1} << 30);
  put(d.file("proc/self/cgroup"), "0::/slurm/job_7/step_0\n");
  put(d.file("cg/slurm/memory.max"), "max\n");
  put(d.file("cg/slurm/job_7/memory.max"), std::to_string(size_t{1} << 30) + "\n");
  put(d.file("cg/slurm/job_7/step_0/memory.max"), "max\n");
  MemoryLimit m = host_memory_limit(d.file("proc"), d.file("cg"));
  EXPECT_EQ(m.bytes, size_t{1} << 30);
  EXPECT_NE(m.what.find("its cgroup (a Slurm job's --mem"), std::string::npos) << m.what;
  EXPECT_NE(m.what.find("1.00 GiB"), std::string::npos) << m.what;
  // cgroup v1's memory controller, and no limit (v1's "unlimited" is near 2^63)
  put(d.file("proc/self/cgroup"), "4:memory:/job\n1:cpu:/job\n");
  put(d.file("cg/memory/job/memory.limit_in_bytes"), "536870912\n");
  EXPECT_EQ(host_memory_limit(d.file("proc"), d.file("cg")).bytes, size_t{512} << 20);
  put(d.file("cg/memory/job/memory.limit_in_bytes"), "9223372036854771712\n");
  m = host_memory_limit(d.file("proc"), d.file("cg"));
  if (m.what.find("ulimit") == std::string::npos) {
    EXPECT_EQ(m.bytes, phys);
    EXPECT_NE(m.what.find("this machine has "), std::string::npos) << m.what;
  }
}
}  // namespace
}  // namespace gt
