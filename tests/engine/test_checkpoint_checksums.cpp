// A checkpoint whose tensor bytes were damaged (a disk or copy error) loaded without a word and
// trained on garbage (the loss exploded). state.json records each tensor file's size and XXH64
// checksum when it is saved; a file that differs is refused as damaged, naming it with the
// recorded and the found values. A checkpoint written before the checksums loads unchecked.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/xxhash64.h"
#include "error_of.h"
#include "test_helpers.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "trained_run_fixture.h"

namespace gt {
namespace {

namespace fs = std::filesystem;
using test::error_of;

struct CheckpointChecksums : test::TrainedRun {
  std::string file(const char* name) const { return checkpoint_dir(run) + "/" + name; }
  // Overwrites bytes [at, at + n) of a checkpoint file with other bytes, keeping its size.
  void damage(const char* name, size_t at, size_t n) {
    std::string b = test::read_bytes(file(name));
    ASSERT_LT(at + n, b.size());
    for (size_t i = at; i < at + n; ++i) b[i] = static_cast<char>(b[i] ^ 0x5a);
    test::write_file(file(name), b);
  }
  std::string resume_error() {
    TrainConfig more = cfg;
    more.max_steps = 5;
    return error_of([&] { Trainer tr(more, run, true, nullptr); });
  }
};

TEST_F(CheckpointChecksums, StateJsonRecordsEachTensorFile) {
  const auto st = load_checkpoint_state(run);
  ASSERT_EQ(st.files.size(), 2u);
  for (const char* name : {"model.safetensors", "optimizer.safetensors"}) {
    ASSERT_TRUE(st.files.count(name)) << name;
    uint64_t bytes = 0;
    const uint64_t h = xxh64_file(file(name), &bytes);
    EXPECT_EQ(st.files.at(name).bytes, fs::file_size(file(name))) << name;
    EXPECT_EQ(st.files.at(name).bytes, bytes) << name;
    EXPECT_EQ(st.files.at(name).xxh64, xxh64_hex(h)) << name;
  }
  // and it survives a round trip through the record's writer and reader
  const auto again =
      parse_checkpoint_state(checkpoint_state_json(st, "state.json"), "state.json", "");
  EXPECT_EQ(again.files.at("model.safetensors").xxh64, st.files.at("model.safetensors").xxh64);
  EXPECT_EQ(again.files.at("optimizer.safetensors").bytes,
            st.files.at("optimizer.safetensors").bytes);
}

TEST_F(CheckpointChecksums, DamagedWeightsAreRefusedNamingTheFile) {
  const auto st = load_checkpoint_state(run);
  const size_t size = fs::file_size(file("model.safetensors"));
  damage("model.safetensors", size / 2, std::min<size_t>(100, size / 4));
  ASSERT_EQ(fs::file_size(file("model.safetensors")), size);
  const std::string found = xxh64_hex(xxh64_file(file("model.safetensors")));
  for (const std::string& e : {error_of([&] { load_model(run); }), resume_error()}) {
    EXPECT_NE(e.find("model.safetensors: damaged: its XXH64 checksum is " + found),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("recorded " + st.files.at("model.safetensors").xxh64), std::string::npos) << e;
    EXPECT_NE(e.find("state.json"), std::string::npos) << e;
  }
}

TEST_F(CheckpointChecksums, DamagedOptimizerStateIsRefusedOnResume) {
  damage("optimizer.safetensors", 200, 16);
  const std::string e = resume_error();
  EXPECT_NE(e.find("optimizer.safetensors: damaged: its XXH64 checksum is"), std::string::npos)
      << e;
  // eval and sample read the weights only: they still load
  EXPECT_EQ(error_of([&] { load_model(run); }), "");
}

TEST_F(CheckpointChecksums, ASizeThatDiffersIsNamedWithBothSizes) {
  const size_t size = fs::file_size(file("model.safetensors"));
  std::string b = test::read_bytes(file("model.safetensors"));
  test::write_file(file("model.safetensors"), b + "extra");
  std::string e = error_of([&] { load_model(run); });
  EXPECT_NE(e.find(fmt::format("model.safetensors: damaged: it is {} bytes, but", size + 5)),
            std::string::npos)
      << e;
  EXPECT_NE(e.find(fmt::format("recorded {} bytes", size)), std::string::npos) << e;
  EXPECT_NE(e.find("(longer)"), std::string::npos) << e;
}

TEST_F(CheckpointChecksums, ACheckpointWithoutChecksumsStillLoads) {
  test::drop_checkpoint_checksums(run);
  EXPECT_TRUE(load_checkpoint_state(run).files.empty());
  EXPECT_EQ(error_of([&] { load_model(run); }), "");
  EXPECT_EQ(resume_error(), "");
  // the resumed run's next checkpoint records them again (max_steps 5, saved at the end)
  TrainConfig more = cfg;
  more.max_steps = 5;
  Trainer tr(more, run, true, nullptr);
  tr.run();
  EXPECT_EQ(load_checkpoint_state(run).files.size(), 2u);
}

}  // namespace
}  // namespace gt
