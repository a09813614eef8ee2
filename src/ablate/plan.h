// ablate/plan.h: the co-design ablation of DESIGN.md. The module runs, on the same data and
// seed, one row after another: the baseline (fp32, unfused, no recomputation), then the
// techniques of the order switched on one by one (cumulative): bf16 mixed precision, kernel
// fusion, activation recomputation with the larger micro-batch it lets fit in the memory
// budget, fp8 on GPUs. plan.h: the options, the claimed factors and the rows with their
// `--set` overrides; runner.h runs and reads the rows; table.h computes and writes the table.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/config.h"

namespace gt::ablate {

// The survey's claimed gains in performance per watt of each technique (factors, 1 = none).
inline constexpr double kClaimedBf16 = 2.0;
inline constexpr double kClaimedFusion = 1.2;
inline constexpr double kClaimedRecompute = 1.5;
inline constexpr double kClaimedPowerLimit = 1.12;
// Not in the survey: Transformer Engine's fp8 over bf16 on billion-parameter GPTs (NVIDIA,
// "Using FP8 with Transformer Engine", 1.3-1.4x); the lower figure.
inline constexpr double kClaimedFp8 = 1.3;

/// The claimed factor of a technique ("bf16", "fusion", "recompute", "power_limit", "fp8");
/// 1.0 for any other name (the baseline).
double claimed_factor(const std::string& technique);

/// What `greentrain ablate` was asked for.
struct Options {
  std::string config;  ///< TOML configuration file
  std::string data;    ///< overrides data.path when not empty
  std::string out = "runs/ablate";
  std::string order = "bf16,fusion,recompute";  ///< techniques, comma-separated
  std::string recompute = "block";              ///< policy of the recompute row
  std::vector<std::string> sets;                ///< KEY=VALUE overrides for every row
  int steps = 200;                              ///< optimizer steps per row
  int rounds = 1;                               ///< interleaved rounds of steps/rounds steps
  int64_t memory_budget = 0;                    ///< bytes; 0: the baseline's plan
  bool overwrite = false;  ///< --overwrite: out may hold an earlier ablation (replaced)
};

/// One row to run: the technique's settings and its micro-batch.
struct RowPlan {
  std::string name;  ///< "baseline" or "+<technique>"
  std::string precision = "fp32", fusion = "off", recompute = "none";
  int batch = 0;  ///< micro-batch (sequences)
  /// The technique switched on in this row; "" for the baseline.
  std::string technique() const { return name == "baseline" ? "" : name.substr(1); }
};

/// The rows and what they share.
struct Plan {
  TrainConfig cfg;                 ///< the configuration with --set and --data applied
  std::vector<std::string> order;  ///< the techniques, in order
  size_t budget_bytes = 0;         ///< the memory budget every row fits
  bool has_target = false;         ///< train.target_loss is set: rows ranked by joules to target
  std::vector<RowPlan> rows;       ///< baseline first, then one row per technique
};

/// Parses --order: a comma-separated list of bf16, fusion, recompute, fp8. Throws gt::Error
/// naming the list when a name is unknown or repeated, or when the list is empty.
std::vector<std::string> parse_order(const std::string& order);

/// Checks the options that need no file: a CONFIG given, --steps (2 or more), --rounds (1 to
/// steps / 2), the keys --set may not set, --memory-budget (0 or more), --recompute. Throws
/// gt::Error naming the option, its value and what was expected. make_plan() calls it.
void check_options(const Options& a);

/// Checks the options (steps, rounds, the keys --set may not set, budget, recompute policy,
/// order), loads the configuration and the data (for the vocabulary) and plans every row's
/// micro-batch. Throws gt::Error naming the option, file or key that is wrong.
Plan make_plan(const Options& a);

/// The `greentrain train` arguments (after the program) of one segment of a row: the first
/// segment starts the run in `dir` with the row's overrides, later ones resume its checkpoint.
/// stop_at: the step the segment ends at (--stop-at when below opt.steps).
std::vector<std::string> train_arguments(const Options& opt, const Plan& plan, const RowPlan& row,
                                         const std::string& dir, int stop_at, bool first);

}  // namespace gt::ablate
