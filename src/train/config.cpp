#include "train/config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <variant>

#include "backend/backend.h"
#include "core/bytes_json.h"
#include "core/error.h"
#include "core/parse.h"
#include "energy/carbon.h"
#include "energy/carbon_regions.h"
#include "energy/cpu_estimate.h"

namespace gt {
namespace {

/// An on/off switch (TOML and --set spell it "on" or "off").
struct OnOff {
  bool* v;
};
// std::optional<double>: a key that may be unset (absent from config.toml when unset).
// bool*: a true/false key; OnOff: an on/off key; Precision*, Recompute*: enums by name.
using Ptr = std::variant<int*, int64_t*, double*, bool*, std::optional<double>*, std::string*,
                         Precision*, Recompute*, OnOff>;
struct Key {
  const char* name;
  Ptr ptr;
};

std::vector<Key> key_table(TrainConfig& c) {
  return {
      {"model.n_layer", &c.model.n_layer},
      {"model.n_head", &c.model.n_head},
      {"model.n_embd", &c.model.n_embd},
      {"model.block_size", &c.model.block_size},
      {"model.vocab_size", &c.model.vocab_size},
      {"train.batch_size", &c.batch_size},
      {"train.grad_accum_steps", &c.grad_accum_steps},
      {"train.max_steps", &c.max_steps},
      {"train.learning_rate", &c.learning_rate},
      {"train.min_lr", &c.min_lr},
      {"train.warmup_steps", &c.warmup_steps},
      {"train.lr_decay_steps", &c.lr_decay_steps},
      {"train.weight_decay", &c.weight_decay},
      {"train.beta1", &c.beta1},
      {"train.beta2", &c.beta2},
      {"train.eps", &c.eps},
      {"train.grad_clip", &c.grad_clip},
      {"train.eval_interval", &c.eval_interval},
      {"train.eval_steps", &c.eval_steps},
      {"train.checkpoint_interval", &c.checkpoint_interval},
      {"train.log_interval", &c.log_interval},
      {"train.seed", &c.seed},
      {"train.threads", &c.threads},
      {"train.thread_policy", &c.thread_policy},
      {"train.device", &c.device},
      {"train.precision", &c.precision},
      {"train.recompute", &c.recompute},
      {"train.fusion", OnOff{&c.fusion}},
      {"train.cuda_graph", OnOff{&c.cuda_graph}},
      {"train.attention", &c.attention},
      {"train.stochastic_rounding", OnOff{&c.stochastic_rounding}},
      {"train.memory_budget", &c.memory_budget},
      {"train.target_loss", &c.target_loss},
      {"train.stop_at_target", &c.stop_at_target},
      {"train.power_limit_required", &c.power_limit_required},
      {"train.init_from", &c.init_from},
      {"data.path", &c.data_path},
      {"data.val_path", &c.data_val_path},
      {"data.tokenizer", &c.tokenizer},
      {"data.vocab_size", &c.bpe_vocab_size},
      {"data.tokenizer_model", &c.tokenizer_model},
      {"data.tokenizer_path", &c.tokenizer_path},
      {"data.format", &c.data_format},
      {"data.val_fraction", &c.val_fraction},
      {"energy.interval_ms", &c.energy_interval_ms},
      {"energy.carbon_intensity", &c.carbon_intensity},
      {"energy.carbon_csv", &c.carbon_csv},
      {"energy.carbon_utc_offset_h", &c.carbon_utc_offset_h},
      {"energy.carbon_format", &c.carbon_format},
      {"energy.carbon_column", &c.carbon_column},
      {"energy.carbon_time_column", &c.carbon_time_column},
      {"energy.carbon_unit", &c.carbon_unit},
      {"energy.carbon_value", &c.carbon_value},
      {"energy.carbon_region", &c.carbon_region},
      {"energy.cpu_tdp_w", &c.cpu_tdp_w},
      {"train.power_limit", &c.power_limit_w},
      {"train.power_limit_device", &c.power_limit_device},
      {"train.zero", &c.zero},
      {"train.grad_comm", &c.grad_comm},
      {"dist.timeout_s", &c.dist_timeout_s},
  };
}

Key* find_key(std::vector<Key>& table, const std::string& key) {
  for (auto& k : table)
    if (key == k.name) return &k;
  return nullptr;
}

std::string known_keys_msg() {
  std::string s;
  for (auto& k : TrainConfig::keys()) s += (s.empty() ? "" : ", ") + k;
  return s;
}

// --set values go through the one checked parser (core/parse.h); its error names the key,
// the value and what was expected.
int64_t parse_int(const std::string& v, const std::string& what) {
  std::string err;
  if (auto x = try_parse_number<long long>(v, what, "an integer", &err)) return *x;
  throw Error(err);
}

double parse_double(const std::string& v, const std::string& what) {
  std::string err;
  if (auto x = try_parse_number<double>(v, what, "a finite number", &err)) return *x;
  throw Error(err);
}

// An integer for a key of type T (int for most keys): out of T's range is an error, not a
// silent wrap.
template <class T>
T narrow(int64_t x, const std::string& what) {
  static_assert(sizeof(T) <= sizeof(int64_t) && std::numeric_limits<T>::is_signed);
  if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      x > static_cast<int64_t>(std::numeric_limits<T>::max()))
    throw Error(fmt::format("{}: {} is out of range; expected an integer in [{}, {}]", what, x,
                            std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  return static_cast<T>(x);
}

/// Sets an enum-valued key from its name; `at` names the source and key in errors.
void set_named(Ptr ptr, const std::string& key, const std::string& value, const std::string& at) {
  auto named = [&](auto parse) {
    try {
      return parse();
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", at, e.what()));
    }
  };
  if (auto* p = std::get_if<Precision*>(&ptr))
    **p = named([&] { return parse_precision(value); });
  else if (auto* r = std::get_if<Recompute*>(&ptr))
    **r = named([&] { return parse_recompute(value); });
  else if (auto* o = std::get_if<OnOff>(&ptr)) {
    if (value != "on" && value != "off")
      throw Error(fmt::format("{}: {} = '{}': expected on or off", at, key, value));
    *o->v = value == "on";
  }
}

void load_table(const toml::table& tbl, const std::string& where, TrainConfig& cfg) {
  auto table = key_table(cfg);
  for (auto&& [section, node] : tbl) {
    const auto* sub = node.as_table();
    if (!sub)
      throw Error(
          fmt::format("{}: top-level key '{}' is not a section; expected [model], "
                      "[train], [data], [energy] or [dist]",
                      where, section.str()));
    for (auto&& entry : *sub) {
      // not a structured binding: clang before 16 cannot capture one in the lambda below
      const auto& name = entry.first;
      const auto& val = entry.second;
      std::string key = std::string(section.str()) + "." + std::string(name.str());
      Key* k = find_key(table, key);
      std::string at = fmt::format("{}:{}: key '{}'", where, val.source().begin.line, key);
      if (!k) throw Error(fmt::format("{} is unknown; known keys are {}", at, known_keys_msg()));
      cfg.key_sources[key] = fmt::format("{}:{}", where, val.source().begin.line);
      std::visit(
          [&](auto p) {
            using T = std::conditional_t<std::is_same_v<decltype(p), OnOff> ||
                                             std::is_same_v<decltype(p), Precision*> ||
                                             std::is_same_v<decltype(p), Recompute*>,
                                         decltype(p), std::remove_pointer_t<decltype(p)>>;
            if constexpr (std::is_same_v<T, OnOff> || std::is_same_v<T, Precision*> ||
                          std::is_same_v<T, Recompute*>) {
              auto s = val.template value<std::string>();
              if (!s) throw Error(at + ": expected a string");
              set_named(p, key, *s, at);
            } else if constexpr (std::is_same_v<T, std::string>) {
              // a path that is not UTF-8 was written as { bytes_hex = "...", shown = "..." }
              if (const auto* t = val.as_table(); t && t->contains("bytes_hex")) {
                auto hex = (*t)["bytes_hex"].template value<std::string>();
                if (!hex) throw Error(at + ": bytes_hex: expected a string of hex digits");
                *p = bytes_from_json(nlohmann::json{{"bytes_hex", *hex}}, at);
                return;
              }
              auto s = val.template value<std::string>();
              if (!s) throw Error(at + ": expected a string");
              *p = *s;
            } else if constexpr (std::is_same_v<T, double> ||
                                 std::is_same_v<T, std::optional<double>>) {
              auto d = val.template value<double>();
              if (!d) throw Error(at + ": expected a number");
              if (!std::isfinite(*d))
                throw Error(fmt::format("{}: {} is not finite; expected a finite number", at, *d));
              *p = *d;
            } else if constexpr (std::is_same_v<T, bool>) {
              if (!val.is_boolean()) throw Error(at + ": expected true or false");
              *p = *val.template value<bool>();
            } else {
              if (!val.is_integer()) throw Error(at + ": expected an integer");
              *p = narrow<T>(*val.template value<int64_t>(), at);
            }
          },
          k->ptr);
    }
  }
}

}  // namespace

std::vector<std::string> TrainConfig::keys() {
  TrainConfig c;
  std::vector<std::string> out;
  for (auto& k : key_table(c)) out.push_back(k.name);
  return out;
}

void TrainConfig::set(const std::string& key, const std::string& value, const std::string& where) {
  auto table = key_table(*this);
  Key* k = find_key(table, key);
  if (!k)
    throw Error(
        fmt::format("{}: unknown key '{}'; known keys are {}", where, key, known_keys_msg()));
  std::string what = fmt::format("{}: {}", where, key);
  key_sources.erase(key);  // its value no longer comes from a file
  std::visit(
      [&](auto p) {
        using P = decltype(p);
        if constexpr (std::is_same_v<P, OnOff> || std::is_same_v<P, Precision*> ||
                      std::is_same_v<P, Recompute*>)
          set_named(p, key, value, what);
        else if constexpr (std::is_same_v<std::remove_pointer_t<P>, std::string>)
          *p = value;
        else if constexpr (std::is_same_v<std::remove_pointer_t<P>, double> ||
                           std::is_same_v<std::remove_pointer_t<P>, std::optional<double>>)
          *p = parse_double(value, what);
        else if constexpr (std::is_same_v<std::remove_pointer_t<P>, bool>) {
          if (value != "true" && value != "false")
            throw Error(fmt::format("{}: '{}' is not true or false", what, value));
          *p = value == "true";
        } else
          *p = narrow<std::remove_pointer_t<P>>(parse_int(value, what), what);
      },
      k->ptr);
}

// A function-try-block: each check below names its key first ("train.eps = 0: expected ..."),
// and the handler puts the file and line that set that key before it (key_sources), as the
// loaders' own errors are named.
void TrainConfig::validate() const try {
  // a TrainConfig built in code never passed the parsers: inf and NaN are refused here too
  auto finite = [](const char* key, double v) {
    if (!std::isfinite(v)) throw Error(fmt::format("{} = {}: expected a finite number", key, v));
  };
  auto positive = [&](const char* key, double v) {
    finite(key, v);
    if (!(v > 0)) throw Error(fmt::format("{} = {}: expected a positive value", key, v));
  };
  auto non_negative = [&](const char* key, double v) {
    finite(key, v);
    if (!(v >= 0)) throw Error(fmt::format("{} = {}: expected zero or more", key, v));
  };
  positive("model.n_layer", model.n_layer);
  positive("model.n_head", model.n_head);
  positive("model.n_embd", model.n_embd);
  positive("model.block_size", model.block_size);
  non_negative("model.vocab_size", model.vocab_size);
  if (model.n_embd % model.n_head != 0)
    throw Error(fmt::format("model.n_embd = {} must be divisible by model.n_head = {}",
                            model.n_embd, model.n_head));
  positive("train.batch_size", batch_size);
  positive("train.grad_accum_steps", grad_accum_steps);
  non_negative("train.max_steps", max_steps);
  // AdamW runs in fp32 and moves each weight by about the learning rate per step: a rate above 1
  // destroys any model (and 1e39 is inf as a float), so the optimizer's values are checked as
  // the float they become.
  if (!(learning_rate > 0 && learning_rate <= 1))
    throw Error(fmt::format(
        "train.learning_rate = {}: expected a value in (0, 1] (AdamW moves each weight by about "
        "the learning rate per step; typical values are 1e-4 to 1e-2)",
        learning_rate));
  if (!(min_lr >= 0 && min_lr <= 1))
    throw Error(fmt::format("train.min_lr = {}: expected a value in [0, 1]", min_lr));
  non_negative("train.warmup_steps", warmup_steps);
  non_negative("train.lr_decay_steps", lr_decay_steps);
  // decoupled decay multiplies each matrix by 1 - lr * weight_decay every step (Loshchilov and
  // Hutter 2019): above 1/lr the weights flip sign and grow without bound
  if (!(weight_decay >= 0 && weight_decay * std::max(learning_rate, min_lr) <= 1))
    throw Error(fmt::format(
        "train.weight_decay = {}: expected a value in [0, 1 / train.learning_rate] = [0, {:g}] "
        "(AdamW multiplies the weights by 1 - learning_rate * weight_decay each step)",
        weight_decay, 1 / std::max(learning_rate, min_lr)));
  // betas and eps as the floats the update uses: 0.9999999999 rounds to 1.0f, whose bias
  // correction 1 - beta^t is 0; eps below the smallest normal float is 0 and divides 0 by 0
  for (auto [key, b] : {std::pair{"train.beta1", beta1}, std::pair{"train.beta2", beta2}})
    if (!(b >= 0 && static_cast<float>(b) < 1.0f))
      throw Error(fmt::format(
          "{} = {}: expected a value in [0, 1) that stays below 1 as a float (AdamW's bias "
          "correction divides by 1 - beta^t)",
          key, b));
  if (!(eps >= std::numeric_limits<float>::min() && eps <= 1))
    throw Error(fmt::format(
        "train.eps = {}: expected a value in [{:g}, 1] (the smallest normal float; AdamW "
        "divides by sqrt(v) + eps in fp32)",
        eps, std::numeric_limits<float>::min()));
  non_negative("train.grad_clip", grad_clip);
  non_negative("train.eval_interval", eval_interval);
  positive("train.eval_steps", eval_steps);
  non_negative("train.checkpoint_interval", checkpoint_interval);
  positive("train.log_interval", log_interval);
  // 0: all cores; OpenMP tries to start every thread asked for (2^31 of them end the process)
  if (!(threads >= 0 && threads <= kMaxThreads))
    throw Error(fmt::format("train.threads = {}: expected 0 (all cores) to {} threads", threads,
                            kMaxThreads));
  if (thread_policy != "adaptive" && thread_policy != "fixed")
    throw Error(fmt::format(
        "train.thread_policy = '{}': expected adaptive (the team shrinks to the cores other "
        "work leaves free) or fixed (always train.threads)",
        thread_policy));
  // precision, recompute and the switches were parsed into enums by set() and the loaders
  if (precision == Precision::fp8 && !device_traits(device).fp8) {
    std::string fp8_devices;  // "cuda (an Ada or Hopper GPU) or cuda-emu (...)"
    for (auto& e : known_backends())
      if (e.traits.fp8)
        fp8_devices +=
            fmt::format("{}{} ({})", fp8_devices.empty() ? "" : " or ", e.name, e.traits.fp8);
    throw Error(fmt::format(
        "train.precision = 'fp8' needs train.device = {}, not '{}'; on the CPU use fp32, bf16 "
        "or fp16",
        fp8_devices, device));
  }
  if (device.empty()) throw Error("train.device = '': expected " + devices_with());
  const auto cudnn = [](const DeviceTraits& t) { return t.cudnn; };
  if (attention != "own" && attention != "cudnn")
    throw Error(fmt::format(
        "train.attention = '{}': expected own (greentrain's flash attention kernels) or cudnn "
        "(cuDNN's fused attention, on train.device = {})",
        attention, devices_with(cudnn)));
  if (attention == "cudnn") {
    // the index itself is checked where the backend is made
    if (!device_traits(device).cudnn)
      throw Error(fmt::format(
          "train.attention = 'cudnn' runs cuDNN on an NVIDIA GPU; it needs train.device = {}, "
          "not '{}' (use train.attention = own)",
          devices_with(cudnn), device));
    if (precision == Precision::fp32)
      throw Error(
          "train.attention = 'cudnn' needs train.precision bf16, fp16 or fp8 (cuDNN's fused "
          "attention takes 16-bit operands); got fp32");
    if (!fusion)
      throw Error(
          "train.attention = 'cudnn' replaces the fused attention; it needs train.fusion = on");
  }
  if (stochastic_rounding && precision != Precision::bf16)
    throw Error(
        fmt::format("train.stochastic_rounding = 'on' rounds the bf16 weight copies; it needs "
                    "train.precision = 'bf16' (got '{}')",
                    to_string(precision)));
  if (tokenizer != "char" && tokenizer != "byte" && tokenizer != "bpe" && tokenizer != "gpt2")
    throw Error(fmt::format("data.tokenizer = '{}': expected char, byte, bpe or gpt2", tokenizer));
  if (tokenizer == "gpt2" && tokenizer_path.empty())
    throw Error(
        "data.tokenizer = 'gpt2' needs data.tokenizer_path: a folder with GPT-2's vocab.json and "
        "merges.txt (a Hugging Face GPT-2 checkpoint folder has them)");
  if (!tokenizer_model.empty() && tokenizer != "bpe")
    throw Error(fmt::format(
        "data.tokenizer_model = '{}' is a SentencePiece model; it needs data.tokenizer = 'bpe' "
        "(got '{}')",
        tokenizer_model, tokenizer));
  // 1 unknown id and 256 byte ids come first; SentencePiece itself refuses a vocabulary larger
  // than the text supports
  if (bpe_vocab_size < 260 || bpe_vocab_size > (1 << 20))
    throw Error(fmt::format(
        "data.vocab_size = {}: expected 260 to 1048576 (a bpe vocabulary holds an unknown id "
        "and the 256 bytes before its learned pieces)",
        bpe_vocab_size));
  if (data_format != "text" && data_format != "llmc" && data_format != "nanogpt")
    throw Error(fmt::format("data.format = '{}': expected text, llmc or nanogpt", data_format));
  if (!(val_fraction >= 0 && val_fraction < 1))
    throw Error(fmt::format("data.val_fraction = {}: expected [0, 1)", val_fraction));
  // a sampling period of 1e300 ms would make the meter's thread wait forever (and spin on the
  // overflowed deadline); its documented range: 1 ms to 1 h
  if (!(energy_interval_ms >= 1 && energy_interval_ms <= 3.6e6))
    throw Error(
        fmt::format("energy.interval_ms = {}: expected a sampling period in [1, 3600000] ms",
                    energy_interval_ms));
  if (carbon_intensity) non_negative("energy.carbon_intensity", *carbon_intensity);
  if (carbon_intensity && !carbon_csv.empty())
    throw Error(fmt::format(
        "energy.carbon_intensity = {} and energy.carbon_csv = '{}' are both set; expected one "
        "of them (a constant intensity or a series)",
        *carbon_intensity, carbon_csv));
  if (!carbon_region.empty()) energy::country_or_throw(carbon_region, "energy.carbon_region");
  // the series reader takes offsets of real time zones only (UTC-12 to UTC+14): 20 passed here
  // and failed when the series was read, naming the file and not the key
  if (!(carbon_utc_offset_h >= -14 && carbon_utc_offset_h <= 14))
    throw Error(fmt::format("energy.carbon_utc_offset_h = {}: expected hours in [-14, 14]",
                            carbon_utc_offset_h));
  if (carbon_csv.empty()) {  // how a series is read and its zone: without one they'd be ignored
    energy::CarbonReadOptions r;
    r.format = carbon_format;
    r.value_column = carbon_column;
    r.time_column = carbon_time_column;
    r.unit = carbon_unit;
    r.value_kind = carbon_value;
    r.option_prefix = "energy.carbon_";
    r.refuse_without_series("energy.carbon_csv", carbon_utc_offset_h);
  }
  // 0: unset (the CPU model table); else a TDP per socket as `measure --tdp` takes it
  if (cpu_tdp_w != 0)
    energy::check_cpu_tdp_w(cpu_tdp_w, "energy.cpu_tdp_w", "0 (the CPU model's table)");
  non_negative("train.power_limit", power_limit_w);
  if (power_limit_device != "auto" && power_limit_device != "gpu" && power_limit_device != "cpu")
    throw Error(
        fmt::format("train.power_limit_device = '{}': expected auto (NVIDIA GPUs if any, else CPU "
                    "packages), gpu (NVML) or cpu (RAPL)",
                    power_limit_device));
  non_negative("train.memory_budget", memory_budget);
  non_negative("train.target_loss", target_loss);
  if (zero != 0 && zero != 1)
    throw Error(
        fmt::format("train.zero = {}: expected 0 (AdamW state on every rank) or 1 "
                    "(sharded across the ranks)",
                    zero));
  if (grad_comm != "fp32" && grad_comm != "bf16")
    throw Error(fmt::format("train.grad_comm = '{}': expected fp32 or bf16", grad_comm));
  // a collective's deadline is its start plus this: 1e300 s overflows the clock; up to a week
  if (!(dist_timeout_s > 0 && dist_timeout_s <= 604800))
    throw Error(fmt::format("dist.timeout_s = {}: expected seconds in (0, 604800] (a week)",
                            dist_timeout_s));
  if (stop_at_target && !(target_loss > 0))
    throw Error("train.stop_at_target = true needs train.target_loss (a validation loss > 0)");
} catch (const Error& e) {
  const std::string_view msg = e.what();
  for (const auto& [key, source] : key_sources)
    if (msg.substr(0, key.size()) == key && msg.size() > key.size() &&
        (msg[key.size()] == ' ' || msg[key.size()] == ':'))
      throw Error(fmt::format("{}: {}", source, msg));
  throw;  // a key from --set, a flag or the defaults
}

BackendOptions backend_options(const TrainConfig& cfg, BackendUse use) {
  const bool cudnn = cfg.attention == "cudnn" && use == BackendUse::training;
  return {.threads = cfg.threads,
          .adaptive_threads = cfg.thread_policy == "adaptive",
          .attention = cudnn ? AttentionImpl::cudnn : AttentionImpl::own};
}

std::string TrainConfig::to_toml() const {
  TrainConfig copy = *this;
  auto table = key_table(copy);
  toml::table root;
  for (auto& k : table) {
    std::string name = k.name;
    auto dot = name.find('.');
    std::string sec = name.substr(0, dot), key = name.substr(dot + 1);
    if (!root.contains(sec)) root.insert(sec, toml::table{});
    toml::table* t = root[sec].as_table();
    std::visit(
        [&](auto p) {
          using P = decltype(p);
          if constexpr (std::is_same_v<P, OnOff>)
            t->insert(key, std::string(*p.v ? "on" : "off"));
          else if constexpr (std::is_same_v<P, Precision*> || std::is_same_v<P, Recompute*>)
            t->insert(key, to_string(*p));
          else if constexpr (std::is_same_v<P, int*>)
            t->insert(key, static_cast<int64_t>(*p));
          else if constexpr (std::is_same_v<P, std::optional<double>*>) {
            if (*p) t->insert(key, **p);  // unset stays unset: no key
          } else if constexpr (std::is_same_v<P, std::string*>) {
            // TOML strings are UTF-8; a Linux path need not be: such a one is written as its
            // bytes in hex, and shown (core/bytes_json.h), and read back by load_table
            if (valid_utf8(*p)) {
              t->insert(key, *p);
            } else {
              const nlohmann::json j = bytes_to_json(*p);
              t->insert(key, toml::table{{"bytes_hex", j["bytes_hex"].get<std::string>()},
                                         {"shown", j["shown"].get<std::string>()}});
            }
          } else
            t->insert(key, *p);
        },
        k.ptr);
  }
  std::ostringstream os;
  os << root << "\n";
  // toml++ writes every float with 17 significant digits (2.8999999999999999 for 2.9); write
  // each as the shortest text that reads back as the same double, as a person would
  static const std::regex float_line(
      R"(^(\s*[A-Za-z0-9_.]+ = )(-?[0-9]+\.[0-9]+(e[+-]?[0-9]+)?)$)");
  std::string out, line;
  std::istringstream in(os.str());
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, float_line)) {
      std::string v = fmt::format("{}", std::stod(m[2].str()));
      if (v.find_first_of(".e") == std::string::npos) v += ".0";
      line = m[1].str() + v;
    }
    out += line + "\n";
  }
  return out;
}

void load_config_string(const std::string& text, const std::string& where, TrainConfig& cfg) {
  toml::table tbl;
  try {
    tbl = toml::parse(text, where);
  } catch (const toml::parse_error& e) {
    throw Error(fmt::format("{}:{}:{}: {}", where, e.source().begin.line, e.source().begin.column,
                            e.description()));
  }
  load_table(tbl, where, cfg);
}

void load_config_file(const std::string& path, TrainConfig& cfg) {
  std::ifstream f(path);
  if (!f) throw Error(fmt::format("{}: cannot open the configuration file", path));
  std::stringstream ss;
  ss << f.rdbuf();
  load_config_string(ss.str(), path, cfg);
}

void apply_overrides(const std::vector<std::string>& sets, TrainConfig& cfg) {
  for (auto& s : sets) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError(fmt::format("--set '{}': expected key=value, e.g. train.max_steps=100", s));
    cfg.set(s.substr(0, eq), s.substr(eq + 1), "--set");
  }
}

}  // namespace gt
