// Shared by the report tests: a tiny training configuration and reading JSON files.
#pragma once
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_helpers.h"

namespace gt::test {

const std::string kBin = GT_BINARY;

/// A GPT small enough to train 6 steps in a second, validating every 3 steps.
inline std::string tiny_toml(const std::string& data) {
  return "[model]\nn_layer = 2\nn_head = 2\nn_embd = 16\nblock_size = 8\n"
         "[train]\nbatch_size = 4\nmax_steps = 6\nwarmup_steps = 2\neval_interval = 3\n"
         "eval_steps = 2\ncheckpoint_interval = 0\nthreads = 2\nlog_interval = 1\n"
         "[energy]\ninterval_ms = 10\n"
         "[data]\npath = \"" +
         data + "\"\n";
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream f(path);
  std::vector<nlohmann::json> v;
  std::string line;
  while (std::getline(f, line)) v.push_back(nlohmann::json::parse(line));
  return v;
}

/// A folder with tiny.toml and its text, for runs.
struct TinyRun {
  TempDir d;
  std::string cfg;
  TinyRun() {
    write_file(d.file("t.txt"), sample_text(5000));
    cfg = d.file("tiny.toml");
    write_file(cfg, tiny_toml(d.file("t.txt")));
  }
  /// `greentrain` with this test's own energy lock folder, so that the runs of other processes
  /// on the machine do not leave its energy unknown (one reader per device, energy/node_lock.h).
  std::string bin() const { return "GT_ENERGY_LOCK_DIR=" + d.file("locks") + " " + kBin; }
  /// Runs `greentrain train tiny.toml --out RUN <extra>`.
  CmdResult train(const std::string& run, const std::string& extra = "") const {
    return run_cmd(bin() + " train " + cfg + " --out " + d.file(run) + " " + extra);
  }
};

}  // namespace gt::test
