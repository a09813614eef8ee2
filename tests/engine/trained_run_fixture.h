// tests/engine/trained_run_fixture.h: a fixture that trains a tiny model (2 layers, 16 wide) for
// 3 steps on a sample text, so that a test can read, rewrite or damage the run's checkpoint.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "test_helpers.h"
#include "train/config.h"
#include "train/trainer.h"

namespace gt::test {

/// The run folder `run` (in the temporary folder `d`) of a 3-step training with `cfg`;
/// `trained` is the trainer's configuration (the model's vocabulary size filled in).
struct TrainedRun : ::testing::Test {
  TempDir d;
  std::string run;
  TrainConfig cfg;
  TrainConfig trained;
  void SetUp() override {
    write_file(d.file("t.txt"), sample_text(6000));
    cfg.model = {2, 2, 16, 8, 0};
    cfg.batch_size = 4;
    cfg.max_steps = 3;
    cfg.warmup_steps = 1;
    cfg.eval_interval = 0;
    cfg.eval_steps = 2;
    cfg.threads = 2;
    cfg.data_path = d.file("t.txt");
    run = d.file("run");
    Trainer tr(cfg, run, false, nullptr);
    tr.run();
    trained = tr.config();
  }
};

}  // namespace gt::test
