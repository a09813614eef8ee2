// train/checkpoint_state.cpp: a checkpoint's state.json read from text (train/checkpoint.h). It is
// apart from checkpoint.cpp so that it builds without the model and backends (the fuzz targets
// under fuzz/ link it alone).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_number.h"
#include "train/checkpoint.h"

namespace gt {

CheckpointState parse_checkpoint_state(const std::string& text, const std::string& path,
                                       const std::string& dir) {
  CheckpointState st;
  // counts are whole numbers >= 0 (a float such as 1e300 is not converted: that is undefined)
  auto count = [&](const nlohmann::json& v, const char* key) {
    return json_integer_or_throw<int64_t>(v, fmt::format("{}: {}", path, key), 0);
  };
  try {
    auto j = nlohmann::json::parse(text);
    st.step = count(j.at("step"), "step");
    st.data_epoch = count(j.at("data").at("epoch"), "data.epoch");
    st.data_cursor = count(j.at("data").at("cursor"), "data.cursor");
    st.last_loss = j.value("last_loss", 0.0);
    if (j.contains("grad_scaler")) {
      const auto& gs = j.at("grad_scaler");
      st.loss_scale = gs.value("scale", 1.0);
      if (gs.contains("clean_steps"))
        st.scaler_clean_steps = count(gs.at("clean_steps"), "grad_scaler.clean_steps");
      if (gs.contains("skipped_steps"))
        st.skipped_steps = count(gs.at("skipped_steps"), "grad_scaler.skipped_steps");
    }
    if (j.contains("world_size"))
      st.world_size = json_integer_or_throw<int>(j.at("world_size"),
                                                 fmt::format("{}: world_size (ranks)", path), 1);
    st.config_toml = j.at("config_toml").get<std::string>();
    st.tokenizer = Tokenizer::from_json(j.at("tokenizer"), path, dir);
    if (j.contains("data_identity")) {
      st.data = j.at("data_identity");
      if (!st.data.is_object())
        throw Error(
            fmt::format("{}: data_identity is {}; expected an object (what the run was "
                        "trained on)",
                        path, st.data.type_name()));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: invalid checkpoint state: {}", path, e.what()));
  }
  return st;
}

}  // namespace gt
