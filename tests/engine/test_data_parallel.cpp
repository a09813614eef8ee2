// The data-parallel strategy (train/data_parallel.cpp) in one process: a communicator of two
// ranks whose other rank holds the same data as this one, so that the Trainer runs its
// several-rank path (GradSync, the loss and stop-signal agreement) without MPI.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <functional>
#include <vector>

#include "dist/communicator.h"
#include "test_helpers.h"
#include "train/trainer.h"

namespace gt {
namespace {

// Rank 0 of two, the other rank a mirror of this one: a sum over ranks is twice this rank's
// value, a max is this rank's value, and a gathered chunk of the other rank is what this rank
// would have there (the reduced gradients: twice its own chunk).
class MirrorCommunicator final : public dist::Communicator {
 public:
  /// Called at the start of every all_reduce (count elements of type t).
  std::function<void(size_t count, dist::CommType t)> on_all_reduce;

  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string name() const override { return "mirror"; }

  void all_reduce(void* buf, size_t count, dist::CommType t, dist::ReduceOp op) override {
    if (on_all_reduce) on_all_reduce(count, t);
    if (op != dist::ReduceOp::sum) return;  // the max of two equal values
    for (size_t i = 0; i < count; ++i) switch (t) {
        case dist::CommType::f32:
          static_cast<float*>(buf)[i] *= 2;
          break;
        case dist::CommType::f64:
          static_cast<double*>(buf)[i] *= 2;
          break;
        case dist::CommType::i64:
          static_cast<int64_t*>(buf)[i] *= 2;
          break;
        default:
          FAIL() << "all_reduce of " << dist::comm_type_name(t);
      }
  }

  void reduce_scatter(const void* send, dist::CommType send_type, float* recv,
                      const std::vector<size_t>& counts) override {
    size_t total = 0;
    for (size_t c : counts) total += c;
    reduced_.resize(total);  // every rank's chunk, summed over the two ranks
    for (size_t i = 0; i < total; ++i)
      reduced_[i] = 2 * (send_type == dist::CommType::f32
                             ? static_cast<const float*>(send)[i]
                             : bf16_to_float(static_cast<const uint16_t*>(send)[i]));
    std::memcpy(recv, reduced_.data(), counts[0] * sizeof(float));
  }

  void all_gather(const void* send, void* recv, const std::vector<size_t>& counts,
                  dist::CommType t) override {
    const size_t sz = dist::comm_type_size(t);
    char* out = static_cast<char*>(recv);
    std::memmove(out, send, counts[0] * sz);
    size_t total = counts[0];
    for (size_t r = 1; r < counts.size(); ++r) {
      if (t == dist::CommType::f32 && reduced_.size() == counts[0] + counts[r])
        std::memcpy(out + total * sz, reduced_.data() + total, counts[r] * sz);
      else  // (the node names, the summary's numbers)
        std::memcpy(out + total * sz, out, std::min(counts[0], counts[r]) * sz);
      total += counts[r];
    }
  }

  void broadcast(void*, size_t, int) override {}
  void barrier() override {}

 private:
  std::vector<float> reduced_;
};

// Raises `sig` at the start of step `at`.
class SignalAt final : public StepObserver {
 public:
  SignalAt(int64_t at, int sig) : at_(at), sig_(sig) {}
  void begin_step(int64_t step) override {
    if (step == at_) std::raise(sig_);
  }

 private:
  int64_t at_;
  int sig_;
};

TrainConfig tiny(const std::string& data_path) {
  return test::small_train_config(data_path, 16, 8, 10, 2);
}

// Several ranks stop at the end of the step in which a rank got the signal: one that arrives
// while the trainer waits for the step's reduction belongs to that step (the agreement reads
// the signal after the wait, as it did before the trainer split into strategies).
TEST(DataParallel, SignalDuringTheReductionStopsThatStep) {
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(8000));
  MirrorCommunicator comm;
  Trainer tr(tiny(d.file("t.txt")), d.file("run"), false, nullptr, false, &comm);
  ASSERT_EQ(tr.world_size(), 2);
  bool raised = false;
  comm.on_all_reduce = [&](size_t count, dist::CommType t) {  // the step's loss, after the wait
    if (!raised && count == 1 && t == dist::CommType::f64) {
      raised = true;
      std::raise(SIGUSR1);
    }
  };
  const RunResult r = tr.run();
  EXPECT_EQ(r.interrupted_by, SIGUSR1);
  EXPECT_EQ(r.step, 1);
}

// run() again after a stop signal trains on: the agreement of the last run is not carried
// over (as with one process, whose signal run() clears).
TEST(DataParallel, RunAgainAfterAStopSignalTrainsOn) {
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(8000));
  MirrorCommunicator comm;
  Trainer tr(tiny(d.file("t.txt")), d.file("run"), false, nullptr, false, &comm);
  SignalAt obs(2, SIGUSR1);
  tr.set_observer(&obs);
  RunResult r = tr.run();
  EXPECT_EQ(r.interrupted_by, SIGUSR1);
  EXPECT_EQ(r.step, 2);
  tr.set_observer(nullptr);
  r = tr.run(4);
  EXPECT_EQ(r.interrupted_by, 0);
  EXPECT_EQ(r.step, 4);
}

}  // namespace
}  // namespace gt
