// ablate/runner.h: runs the rows of an ablation plan, each as a `greentrain train` child process
// (so its peak memory is its own) in its own run folder, and reads back what each measured.
// With several rounds every row runs its steps in segments, each resuming the row's checkpoint
// (bit for bit), so the rounds interleave the rows and the machine's drift hits them alike.
#pragma once
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ablate/plan.h"
#include "run/summary.h"

namespace gt::ablate {

/// What one row measured, read from its run folder.
struct Measured {
  /// median step speed without each segment's first step; NaN: no step's speed is known
  double tokens_per_s = NAN;
  double loss = NAN;  ///< the last training loss; NaN: unknown (summary.json has none)
  std::optional<double> joules_per_token, tokens_per_joule;  ///< empty: energy unknown
  double val_loss = NAN;                                     ///< NaN: no validation
  bool estimated = true;                                     ///< some session's energy estimated
  std::string energy = "unknown";                            ///< measured | estimated | unknown
  std::string energy_unknown_reason;                         ///< why, when energy is unknown
  /// What the energy covers: "training intervals", or the whole run when those could not be
  /// used (then it also holds the final validation pass, and the table says so).
  std::string energy_basis;
  std::string flags;          ///< the meter's flags (a sensor missing, untrusted samples), "; "
  size_t peak_rss_bytes = 0;  ///< the first segment's peak resident memory
  size_t planned_bytes = 0;   ///< the plan's arenas plus the runtime's bytes before them
  std::optional<run::Target> target;  ///< summary.json's "target" (none without train.target_loss)
  /// Whether the row's matrix products ran emulated (summary.json's "products": no product with
  /// instructions of its precision here, so they take about fp32's time); empty where the
  /// summary does not say (the reference and CUDA backends, older summaries).
  std::optional<bool> products_emulated;
  std::string products_emulated_reason;  ///< why, where emulated
};

/// The median of v; 0 when v is empty.
double median(std::vector<double> v);

/// The step of the last line of a run's metrics.jsonl; -1 when it has none yet (or the last
/// line is being written).
long long last_logged_step(const std::filesystem::path& metrics);

/// Reads a finished row's run folder (summary.json, summary.first.json when resumed,
/// metrics.jsonl). starts: the first step of each segment; these steps create the kernels and
/// are left out of tokens/s, as are the logged energy intervals holding them. Damaged metrics
/// lines are left out. Throws gt::Error naming the file (and the key) when summary.json is
/// missing, unreadable, or holds a key the row needs with another type than train writes.
Measured read_row(const std::filesystem::path& dir, const std::vector<int>& starts);

/// The run folder of row i of the plan: <out>/<i>_<name>; its log is that path plus ".log".
std::filesystem::path row_folder(const Options& opt, const Plan& plan, size_t i);

/// Creates opt.out and, with opt.overwrite, removes the row folders and logs of an earlier
/// ablation in it. Without opt.overwrite a folder that is not empty is refused: throws gt::Error
/// naming --out, what the folder holds and --overwrite, before anything is written. Throws
/// std::filesystem::filesystem_error when the folder cannot be made or cleaned.
void prepare_out_folder(const Options& opt);

/// Runs every row of the plan (rounds of segments), writing progress lines to `log` (on a
/// terminal one line rewritten about every second). Returns each row's measurements, in the
/// plan's order. Throws gt::Error naming the row and its log when a row fails or is
/// interrupted (SIGINT and SIGTERM reach the running row, which saves a checkpoint).
std::vector<Measured> run_rows(const Options& opt, const Plan& plan, FILE* log);

}  // namespace gt::ablate
