// Issue 15, part 3: a checkpoint is exactly what it says. A tensor the model does not have (an
// untied lm_head.weight) is an error naming it; names with a prefix other tools write
// (_orig_mod., module., transformer.) load, and any other prefix is named in the error.
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "test_helpers.h"
#include "train/checkpoint.h"
#include "train/safetensors.h"
#include "train/trainer.h"
#include "trained_run_fixture.h"

namespace gt {
namespace {

namespace fs = std::filesystem;

struct CheckpointNames : test::TrainedRun {
  std::vector<ParamSpec> specs;
  std::map<std::string, std::vector<float>> tensors;  // model.safetensors as written
  void SetUp() override {
    TrainedRun::SetUp();
    specs = gpt_param_specs(trained.model);
    SafetensorsFile f(model_file());
    for (auto& s : specs) {
      std::vector<float> v(s.shape.numel());
      f.read(s.name, s.shape, v.data());
      tensors[s.name] = std::move(v);
    }
  }
  std::string model_file() const { return checkpoint_dir(run) + "/model.safetensors"; }
  // Rewrites model.safetensors with every name prefixed and `extra` tensors added.
  void rewrite(const std::string& prefix, const std::vector<NamedTensor>& extra = {}) {
    std::vector<NamedTensor> out;
    for (auto& s : specs) out.push_back({prefix + s.name, s.shape, tensors[s.name].data()});
    out.insert(out.end(), extra.begin(), extra.end());
    write_safetensors(model_file(), out, {{"format", "pt"}});
    test::drop_checkpoint_checksums(run);  // a file made elsewhere, on purpose
  }
  std::string load_error() {
    try {
      load_model(run);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(CheckpointNames, AnUntiedLmHeadIsAnErrorNamingIt) {
  const Shape wte_shape = specs[0].shape;
  std::vector<float> zeros(wte_shape.numel(), 0.0f);
  rewrite("", {{"lm_head.weight", wte_shape, zeros.data()}});
  std::string err = load_error();
  EXPECT_NE(err.find("1 tensor that this model does not have: 'lm_head.weight'"), std::string::npos)
      << err;
  // an unknown tensor of any name, and in the optimizer's file too (on resume)
  std::vector<float> one(3, 1.0f);
  rewrite("", {{"h.0.attn.bias", Shape{3}, one.data()}});
  err = load_error();
  EXPECT_NE(err.find("'h.0.attn.bias'"), std::string::npos) << err;
  rewrite("");
  EXPECT_EQ(load_error(), "");
  SafetensorsFile of(checkpoint_dir(run) + "/optimizer.safetensors");
  std::vector<std::vector<float>> keep;
  std::vector<NamedTensor> moments;
  for (auto& n : of.names()) {
    const std::string name = n.substr(n.find('.') + 1);
    const auto& s =
        *std::find_if(specs.begin(), specs.end(), [&](auto& x) { return x.name == name; });
    keep.emplace_back(s.shape.numel());
    of.read(n, s.shape, keep.back().data());
    moments.push_back({n, s.shape, keep.back().data()});
  }
  moments.push_back({"step", Shape{1}, one.data()});
  write_safetensors(checkpoint_dir(run) + "/optimizer.safetensors", moments);
  test::drop_checkpoint_checksums(run);
  try {
    Trainer tr(cfg, run, true, nullptr);
    ADD_FAILURE() << "an extra tensor in optimizer.safetensors was ignored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.safetensors: 1 tensor that this model does "
                                         "not have: 'step'"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CheckpointNames, ATiedLmHeadEqualToWteIsAccepted) {
  rewrite("", {{"lm_head.weight", specs[0].shape, tensors["wte.weight"].data()}});
  EXPECT_EQ(load_error(), "");
}

TEST_F(CheckpointNames, PrefixesOfOtherToolsLoadTheSameWeights) {
  for (std::string prefix : {"_orig_mod.", "module.", "transformer.", "module._orig_mod."}) {
    rewrite(prefix);
    LoadedModel lm = load_model(run);
    std::vector<float> host(lm.model->params().bytes() / sizeof(float));
    lm.backend->copy_to_host(host.data(), lm.model->params().base(), lm.model->params().bytes());
    for (size_t i = 0; i < specs.size(); ++i) {
      const Tensor& t = lm.model->params().at(i);
      const float* at = host.data() + (static_cast<const char*>(t.data) -
                                       static_cast<const char*>(lm.model->params().base())) /
                                          sizeof(float);
      ASSERT_TRUE(std::equal(at, at + t.numel(), tensors[specs[i].name].begin()))
          << prefix << specs[i].name;
    }
  }
  rewrite("encoder.");
  std::string err = load_error();
  EXPECT_NE(err.find("tensor 'wte.weight' is missing; the file has 'encoder.wte.weight', whose "
                     "prefix 'encoder.' is not one that greentrain knows"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace gt
