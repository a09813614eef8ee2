// train/checkpoint_state.cpp: a checkpoint's state.json read from text (train/checkpoint.h). It is
// apart from checkpoint.cpp so that it builds without the model and backends (the fuzz targets
// under fuzz/ link it alone).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/checkpoint.h"

namespace gt {

CheckpointState parse_checkpoint_state(const std::string& text, const std::string& path) {
  CheckpointState st;
  try {
    auto j = nlohmann::json::parse(text);
    st.step = j.at("step").get<int64_t>();
    st.data_epoch = j.at("data").at("epoch").get<int64_t>();
    st.data_cursor = j.at("data").at("cursor").get<int64_t>();
    st.last_loss = j.value("last_loss", 0.0);
    if (j.contains("grad_scaler")) {
      const auto& gs = j.at("grad_scaler");
      st.loss_scale = gs.value("scale", 1.0);
      st.scaler_clean_steps = gs.value("clean_steps", int64_t(0));
      st.skipped_steps = gs.value("skipped_steps", int64_t(0));
    }
    st.config_toml = j.at("config_toml").get<std::string>();
    st.tokenizer = Tokenizer::from_json(j.at("tokenizer"), path);
    if (j.contains("data_identity")) st.data = j.at("data_identity");
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: invalid checkpoint state: {}", path, e.what()));
  }
  return st;
}

}  // namespace gt
