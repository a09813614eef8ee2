// train/checkpoint_state.cpp: a checkpoint's state.json read from text and written as text
// (train/checkpoint.h). It is apart from checkpoint.cpp so that it builds without the model and
// backends (the fuzz targets under fuzz/ link it alone).
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/bytes_json.h"
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
  // a number read back is checked as the configuration is: finite and in its range
  auto number = [&](const nlohmann::json& v, const char* key, double lo, double hi,
                    const char* expected) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo ||
        v.get<double>() > hi)
      throw Error(
          fmt::format("{}: {} = {}: expected {}", path, key, dump_json(v).substr(0, 40), expected));
    return v.get<double>();
  };
  try {
    auto j = nlohmann::json::parse(text);
    st.step = count(j.at("step"), "step");
    st.data_epoch = count(j.at("data").at("epoch"), "data.epoch");
    st.data_cursor = count(j.at("data").at("cursor"), "data.cursor");
    if (j.contains("last_loss") && !j.at("last_loss").is_null())  // a cross-entropy: >= 0
      st.last_loss = number(j.at("last_loss"), "last_loss", 0, 1e30, "a loss >= 0");
    if (j.contains("grad_scaler")) {
      const auto& gs = j.at("grad_scaler");
      // fp16's loss scale multiplies the loss and divides the gradients: a negative one turns
      // every update around; as the float it becomes it is a normal number, 2^-126 to 2^127
      if (gs.contains("scale"))
        st.loss_scale = number(gs.at("scale"), "grad_scaler.scale", 0x1p-126, 0x1p127,
                               "a loss scale > 0 (a normal float, 2^-126 to 2^127)");
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
    if (j.contains("files")) {  // written by save_checkpoint since checksums were recorded
      const auto& files = j.at("files");
      if (!files.is_object())
        throw Error(fmt::format("{}: files is {}; expected an object of file names", path,
                                files.type_name()));
      for (const auto& [name, rec] : files.items()) {
        const std::string key = "files." + name;
        FileChecksum c;
        c.bytes = json_integer_or_throw<uint64_t>(rec.at("bytes"),
                                                  fmt::format("{}: {}.bytes", path, key), 0);
        const auto& h = rec.at("xxh64");
        if (!h.is_string() || h.get<std::string>().size() != 16 ||
            h.get<std::string>().find_first_not_of("0123456789abcdef") != std::string::npos)
          throw Error(fmt::format("{}: {}.xxh64 = {}: expected 16 lower-case hex digits", path, key,
                                  dump_json(h).substr(0, 40)));
        c.xxh64 = h.get<std::string>();
        st.files[name] = c;
      }
    }
    if (j.contains("data_identity")) {
      st.data = j.at("data_identity");
      if (!st.data.is_object())
        throw Error(
            fmt::format("{}: data_identity is {}; expected an object (what the run was "
                        "trained on)",
                        path, st.data.type_name()));
    }
    if (j.contains("run")) {  // the run up to this step (since sessions were counted)
      const auto& run = j.at("run");
      if (!run.is_object())
        throw Error(fmt::format("{}: run is {}; expected an object (session, first_step, tokens)",
                                path, run.type_name()));
      for (const char* k : {"session", "first_step", "tokens"})
        if (run.contains(k) && !run.at(k).is_null())
          (void)count(run.at(k), fmt::format("run.{}", k).c_str());
      st.run = run;
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: invalid checkpoint state: {}", path, e.what()));
  }
  return st;
}

// the writer beside the reader: what fuzz/fuzz_run_folder reads back, it also writes again
std::string checkpoint_state_json(const CheckpointState& st, const std::string& path) {
  nlohmann::ordered_json j;
  j["format"] = "greentrain-checkpoint-1";
  j["step"] = st.step;
  j["data"] = {{"epoch", st.data_epoch}, {"cursor", st.data_cursor}};
  // at step 0 no step has a loss: unknown (null), not 0
  j["last_loss"] = st.step > 0 ? nlohmann::ordered_json(st.last_loss) : nlohmann::ordered_json();
  j["grad_scaler"] = {{"scale", st.loss_scale},
                      {"clean_steps", st.scaler_clean_steps},
                      {"skipped_steps", st.skipped_steps}};
  j["world_size"] = st.world_size;
  j["tokenizer"] = st.tokenizer.to_json();
  if (!st.data.is_null()) j["data_identity"] = st.data;
  if (!st.run.is_null()) j["run"] = st.run;
  for (const auto& [name, c] : st.files)
    j["files"][name] = {{"bytes", c.bytes}, {"xxh64", c.xxh64}};
  j["config_toml"] = st.config_toml;
  try {
    return j.dump(2) + "\n";  // strict: a record that does not round-trip is an error, named
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: cannot be written: {}", shown_bytes(path), e.what()));
  }
}

}  // namespace gt
