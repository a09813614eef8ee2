// train/config.h: the run configuration. Every key has a TOML section and a --set name
// ("model.n_layer"); unknown keys and values of the wrong type are errors that name the
// file and key. The resolved configuration is written into every run folder.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/gpt.h"

namespace gt {

/// The most CPU threads train.threads and `prepare --threads` take: more than the largest
/// machines have (8 sockets x 240 threads); OpenMP starts every thread it is asked for.
inline constexpr int kMaxThreads = 4096;

struct TrainConfig {
  GPTConfig model;
  // train.*
  int batch_size = 12;       ///< micro-batch B (sequences)
  int grad_accum_steps = 1;  ///< micro-batches per optimizer step
  int max_steps = 2000;      ///< optimizer steps
  double learning_rate = 1e-3;
  double min_lr = 1e-4;    ///< cosine decay floor
  int warmup_steps = 100;  ///< linear warm-up steps
  int lr_decay_steps = 0;  ///< cosine decay length (0: max_steps)
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double eps = 1e-8;
  double grad_clip = 1.0;         ///< global L2 norm; 0 disables
  int eval_interval = 250;        ///< steps between validation passes (0: only at the end)
  int eval_steps = 20;            ///< batches per validation pass
  int checkpoint_interval = 500;  ///< steps between checkpoints (0: only at the end)
  int log_interval = 10;          ///< steps between progress lines
  int64_t seed = 1337;
  int threads = 0;  ///< CPU threads of the backend (0: all cores), at most kMaxThreads
  /// train.thread_policy: adaptive | fixed. adaptive (the default) shrinks the CPU backend's
  /// team while other work takes its cores and grows it back when they are free
  /// (backend/cpu/thread_team.h); fixed always uses train.threads (bitwise the same
  /// products on a busy machine as on an idle one).
  std::string thread_policy = "adaptive";
  /// train.device: a backend the registry knows, "name" or "name:N" for an indexed one (device
  /// index N; devices_with() lists them, make_backend() makes it); by default
  /// "cpu", or "ref" in a build without the CPU backend (default_device()).
  std::string device = default_device();
  Precision precision = Precision::fp32;  ///< train.precision: fp32 | bf16 | fp16 | fp8
  Recompute recompute = Recompute::none;  ///< train.recompute: none | gelu | gelu+ln | block
  bool fusion = false;                    ///< train.fusion: on | off
  /// train.cuda_graph (on | off): on a device that captures graphs (cuda, cuda-emu), with one
  /// process and fusion on, each step after the first is captured and launched as one CUDA
  /// graph (Backend::begin_graph); elsewhere it changes nothing.
  bool cuda_graph = true;
  /// train.attention: own | cudnn, the kernels of the fused attention (train.fusion = on) on
  /// train.device = cuda: the own flash kernels (backend/cuda/kernels_attention.cu) or cuDNN's
  /// fused attention (backend/cuda/cudnn_attention.h; 16-bit precisions, cuDNN 9 loaded at
  /// run time). Other devices take own only.
  std::string attention = "own";
  /// train.stochastic_rounding (on | off): bf16 weight copies rounded stochastically (Gupta et
  /// al. 2015) instead of to nearest.
  bool stochastic_rounding = false;
  /// train.memory_budget (bytes): when > 0, the micro-batch becomes the largest that fits
  /// (parameters + gradients + AdamW + activations + scratch + workspace, from plan_memory)
  int64_t memory_budget = 0;
  /// train.target_loss: validation loss whose first reaching is recorded (step, tokens, s, J,
  /// gCO2e to target, as MLPerf Training's time/energy to train); 0: no target.
  double target_loss = 0;
  /// train.stop_at_target: end the run (checkpoint written) when target_loss is reached.
  bool stop_at_target = false;
  /// train.init_from: a Hugging Face GPT-2 folder to start from (train/hf_gpt2.h): its shapes,
  /// tokenizer and weights replace model.*, data.tokenizer and the random initialization
  std::string init_from;
  // data.*
  std::string data_path;
  std::string data_val_path;  ///< optional separate validation file
  /// data.tokenizer: char | byte | bpe | gpt2 (train/tokenizer.h); for llmc and nanogpt data
  /// byte, bpe (with tokenizer_model) and gpt2 are used, to encode prompts and decode samples
  std::string tokenizer = "char";
  int bpe_vocab_size = 8192;    ///< data.vocab_size: ids of a bpe vocabulary trained on the text
  std::string tokenizer_model;  ///< data.tokenizer_model: a SentencePiece .model to use for bpe
  std::string tokenizer_path;   ///< data.tokenizer_path: folder of vocab.json + merges.txt (gpt2)
  std::string data_format = "text";  ///< text | llmc | nanogpt
  double val_fraction = 0.1;
  // energy.*
  double energy_interval_ms = 100;  ///< energy.interval_ms: sampling period, in [1, 3600000] ms
  /// energy.carbon_intensity, gCO2e/kWh (>= 0; 0 is a zero-carbon supply). Unset (absent from
  /// every file and --set): the meter's default, kWorldAverageGCo2ePerKwh, reported as such.
  std::optional<double> carbon_intensity;
  std::string carbon_csv;  ///< energy.carbon_csv: series (energy/carbon.h); excludes the above
  double carbon_utc_offset_h = 0;  ///< time zone of carbon_csv's naive times (hours east of UTC)
  /// energy.carbon_format, carbon_column, carbon_time_column, carbon_unit, carbon_value: how
  /// carbon_csv is read (energy::CarbonReadOptions; empty: detected / the format's).
  std::string carbon_format, carbon_column, carbon_time_column, carbon_unit, carbon_value;
  /// energy.carbon_region: an ISO 3166-1 alpha-3 country code: its annual average intensity
  /// (energy/carbon_regions.h) when neither carbon_intensity nor carbon_csv is set, and the
  /// country of the figures (emissions.csv's country columns) in every case.
  std::string carbon_region;
  double cpu_tdp_w = 0;      ///< 0: from the CPU model table
  double power_limit_w = 0;  ///< train.power_limit (W) for the run; 0 leaves the limit alone
  /// train.power_limit_device: which devices train.power_limit caps: "auto" (default: the
  /// node's NVIDIA GPUs through NVML if it has any, else its CPU packages through RAPL), "gpu"
  /// (NVML only) or "cpu" (RAPL only, even on a node with GPUs: what `greentrain schedule`
  /// passes for a job with cap_device = "cpu").
  std::string power_limit_device = "auto";
  /// train.power_limit_required: a train.power_limit that cannot be applied (no writable RAPL
  /// zone or NVML limit, as for a job not run as root) stops the run before any step; false
  /// (default): the run goes on uncapped, says so, and summary.json's power_limit record
  /// gives the reason.
  bool power_limit_required = false;
  // data parallelism (dist/, used when launched as several MPI ranks)
  /// train.zero: 0 keeps the whole AdamW state on every rank; 1 shards it across the ranks
  /// (ZeRO stage 1: reduce-scatter the gradients, update the shard, all-gather the weights).
  int zero = 0;
  /// train.grad_comm: fp32 | bf16, the type gradients travel in between ranks (bf16: half the
  /// bytes; the sums are taken in fp32).
  std::string grad_comm = "fp32";
  /// dist.timeout_s: a collective that does not complete within this many seconds (another
  /// rank died or hangs) stops the job with an error; in (0, 604800] s.
  double dist_timeout_s = 300;

  /// Where the keys read from a configuration file got their values: key -> "FILE:LINE"
  /// (load_config_file and load_config_string fill it; set() drops the key it sets, whose value
  /// then comes from elsewhere, and so must code that assigns a field read from a file).
  /// validate() names it in its errors.
  std::map<std::string, std::string> key_sources;

  /// Sets one key from its string form (as given to --set). `where` names the source for
  /// errors. Throws gt::Error for an unknown key or a value that does not parse.
  void set(const std::string& key, const std::string& value, const std::string& where);
  /// Checks ranges and names (positive sizes, known formats); throws gt::Error naming the key,
  /// its value and what was expected, after the file and line it was read from where a
  /// configuration file set it (key_sources): "run.toml:3: train.learning_rate = 1e+39:
  /// expected a value in (0, 1] ...".
  void validate() const;
  /// The configuration as TOML text (all keys, resolved).
  std::string to_toml() const;
  /// All key names, for error messages and --help.
  static std::vector<std::string> keys();
};

/// What a backend is made for: a training run, or inference (sampling and evaluation of a loaded
/// model), which runs the own attention kernels whatever train.attention says (cuDNN would
/// build a plan for each new sequence length, and sampling grows it by one token at a time).
enum class BackendUse { training, inference };

/// The backend's options from the run configuration: train.threads, train.thread_policy,
/// train.attention (for training only; see BackendUse).
BackendOptions backend_options(const TrainConfig& cfg, BackendUse use = BackendUse::training);

/// Reads a TOML file into cfg (keys absent from the file keep their values).
/// Throws gt::Error naming the file, line and key on a parse error or unknown key.
void load_config_file(const std::string& path, TrainConfig& cfg);
/// Parses TOML text (e.g. from a checkpoint); `where` names the source in errors.
void load_config_string(const std::string& text, const std::string& where, TrainConfig& cfg);
/// Applies "key=value" overrides in order; throws gt::Error naming the bad override.
void apply_overrides(const std::vector<std::string>& sets, TrainConfig& cfg);

}  // namespace gt
