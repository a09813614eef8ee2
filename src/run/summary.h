// run/summary.h: summary.json read into types (run/schema.h names its keys). Every figure that
// can be unknown is an optional: empty when the key is missing, null (unknown, its reason beside
// it), or of another type than the schema says; a key of another type is also named in
// Summary::problems, so each reader decides whether that is an error (sched, ablate) or a note
// on the page (report). Reading never throws nlohmann's errors.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "run/schema.h"

namespace gt::run {

/// "run_totals": every session of a resumed run added up (train/run_summary.cpp).
struct RunTotals {
  std::optional<int64_t> sessions, first_step, tokens;
  std::optional<double> duration_s, wall_s, energy_j, g_co2e;  ///< s, s, J, gCO2e
  /// Any session's energy was an estimate, so energy_j (and g_co2e) is, at least in part.
  /// Empty: not recorded (a summary written before the key; Summary::run_energy_estimated
  /// falls back to the session's flag) or of another type (a problem).
  std::optional<bool> energy_estimated;
  /// Why the figures summed over sessions are null: an earlier session is not accounted for
  /// (killed without its summary.json); empty when every session is.
  std::optional<std::string> unknown_reason;
};

/// "interruption": what an interruption costs the run's last session.
struct Interruption {
  std::optional<double> checkpoint_write_s, restart_s;  ///< s
  std::optional<bool> restart_resumed;  ///< restart_s was measured on a resumed session
  std::optional<std::string> seconds_unknown_reason;
};

/// "target": what it took to first reach train.target_loss, or why it was not reached.
struct Target {
  std::optional<double> target_loss;
  std::optional<bool> reached;
  std::optional<int64_t> step, tokens;
  std::optional<double> seconds, energy_j, g_co2e, val_loss;  ///< s, J, gCO2e
  std::optional<bool> energy_estimated, stopped_at_target;
  std::optional<std::string> reason, energy_unknown_reason;
  nlohmann::json raw;  ///< the record as written (ablate copies it into ablation.json)
};

/// summary.json of one session.
struct Summary {
  /// schema_version; 1 for a file written before the key existed (run/schema.h).
  int schema_version = 1;
  std::optional<int64_t> step, max_steps, tokens, session_start_step;
  /// interrupted_by_signal: the signal (SIGINT 2, SIGTERM 15, ...) that stopped the last session
  /// before max_steps, 0 when it ran to its end; empty: not recorded (an older summary)
  std::optional<int64_t> interrupted_by_signal;
  std::optional<double> last_loss, val_loss, duration_s, wall_s, tokens_per_s;  ///< s, tokens/s
  std::optional<uint64_t> memory_planned_bytes, memory_runtime_bytes, memory_peak_rss_bytes;
  std::optional<double> energy_j, joules_per_token, g_co2e, tokens_per_joule;  ///< J, J/token
  std::optional<bool> energy_estimated, energy_unknown;
  std::optional<std::string> energy_unknown_reason, energy_method;
  std::optional<std::vector<std::string>> energy_flags;  ///< "energy": {"flags": [...]}
  std::optional<RunTotals> run_totals;                   ///< empty: a summary before run_totals
  std::optional<Interruption> interruption;
  std::optional<Target> target;  ///< empty: no train.target_loss (or not an object: a problem)
  /// "products": {"emulated", "emulated_reason"}: the matrix products ran emulated (f32 products
  /// of rounded operands: no instructions of the precision on that CPU); empty: not recorded
  std::optional<bool> products_emulated;
  std::optional<std::string> products_emulated_reason;
  std::vector<Problem> problems;  ///< keys of another type than the schema says

  /// The problem of `key` (its path, e.g. "energy_unknown"), or nullptr.
  const Problem* problem_with(std::string_view key) const;
  /// Whether the whole run's energy (run_totals.energy_j; the session's where there are no
  /// run_totals) is an estimate, at least in part: run_totals.energy_estimated, else (no
  /// run_totals, or run_totals written before that key) the session's energy_estimated, which
  /// for a resumed run of such an older summary covers its last session only; false when
  /// neither is recorded (or either is of another type: see problems).
  bool run_energy_estimated() const;
};

/// Reads summary.json's text. Empty, with *why set ("not valid JSON (...)", "[1,2] is not an
/// object"), when the text is not a JSON object; keys of other types are in Summary::problems.
std::optional<Summary> read_summary(std::string_view text, std::string* why);

/// Reads `path` (a summary.json). Throws gt::Error naming the path when it cannot be opened or
/// read_summary refuses it; `problems` are left to the caller.
Summary load_summary(const std::string& path);

}  // namespace gt::run
