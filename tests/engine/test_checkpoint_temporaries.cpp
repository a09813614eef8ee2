// A SIGKILL during a checkpoint write left the writer's temporary folder `checkpoint.tmp-PID`
// in the run folder forever (about a checkpoint's size each time). A train or resume in the
// folder removes those whose PID is not a running process, and says so in one line; a running
// writer's folder is left alone.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "test_helpers.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "trained_run_fixture.h"

namespace gt {
namespace {

namespace fs = std::filesystem;

// The id of a process that has ended (forked, exited, reaped): what a killed writer leaves.
pid_t dead_pid() {
  const pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  ::waitpid(p, nullptr, 0);
  return p;
}

// A temporary checkpoint folder as a writer with pid `pid` leaves it, half written.
std::string left_temporary(const std::string& run, long pid) {
  const std::string tmp = checkpoint_dir(run) + ".tmp-" + std::to_string(pid);
  fs::create_directories(tmp);
  test::write_file(tmp + "/model.safetensors", std::string(100, 'x'));
  return tmp;
}

using CheckpointTemporaries = test::TrainedRun;

TEST_F(CheckpointTemporaries, ADeadWritersFolderIsRemovedARunningWritersIsKept) {
  const pid_t dead = dead_pid();
  const std::string stale = left_temporary(run, dead);
  const std::string live = left_temporary(run, ::getpid());
  const std::string other = checkpoint_dir(run) + ".tmp-abc";  // not a name a writer gives
  fs::create_directories(other);
  EXPECT_EQ(remove_stale_checkpoint_temporaries(run),
            "removed checkpoint.tmp-" + std::to_string(dead) + " in " + run +
                ", left by a checkpoint write that was killed");
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(has_checkpoint(run));                         // the checkpoint itself is untouched
  EXPECT_EQ(remove_stale_checkpoint_temporaries(run), "");  // none left to remove
  EXPECT_EQ(remove_stale_checkpoint_temporaries(d.file("no-such-run")), "");
}

TEST_F(CheckpointTemporaries, AResumeRemovesTheKilledWritersFolderAndSaysSo) {
  const pid_t dead = dead_pid();
  const std::string stale = left_temporary(run, dead);
  char* text = nullptr;
  size_t len = 0;
  FILE* log = ::open_memstream(&text, &len);
  ASSERT_NE(log, nullptr);
  {
    TrainConfig more = cfg;
    more.max_steps = 4;
    Trainer tr(more, run, true, log);
    tr.run();
  }
  std::fclose(log);
  const std::string out(text, len);
  std::free(text);
  EXPECT_FALSE(fs::exists(stale));
  const std::string line = "note: removed checkpoint.tmp-" + std::to_string(dead) + " in " + run +
                           ", left by a checkpoint write that was killed\n";
  EXPECT_NE(out.find(line), std::string::npos) << out;
  EXPECT_EQ(load_checkpoint_state(run).step, 4);
}

}  // namespace
}  // namespace gt
