// ablate/table.h: the ablation's table. Each line is one TableRow whose figures (tokens/s,
// J/token, tokens/J, memory, the factors against the row before and the baseline, the claimed
// factors) are computed once, in make_table(); the printed text, ablation.csv and
// ablation.json are three forms of those same fields, so they cannot disagree. The power-limit
// row is shown as not measured (with the reason: whether this machine has a writable limit).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ablate/plan.h"
#include "ablate/runner.h"

namespace gt::ablate {

/// One line of the table.
struct TableRow {
  RowPlan plan;                     ///< name, precision, fusion, recompute, micro-batch
  Measured m;                       ///< the row's measurements (unset for a row not measured)
  bool measured = true;             ///< false: the power-limit row, not run
  std::string not_measured_reason;  ///< why, when not measured
  double speedup_vs_prev = 1;       ///< tokens/s over the row before's (NaN: that one is 0)
  double speedup_vs_baseline = 1;   ///< tokens/s over the baseline's
  std::optional<double> factor_vs_prev, factor_vs_baseline;  ///< tokens/J ratios; empty: unknown
  double claimed = 1;                      ///< the claimed factor of this row's technique
  double claimed_cumulative = 1;           ///< the product of the claimed factors up to this row
  std::optional<double> joules_to_target;  ///< J to train.target_loss; empty: not reached/unknown

  /// The printed line (with its newline); "unknown" for a figure that is not known.
  std::string to_text() const;
  /// The ablation.csv line (with its newline), columns as csv_header(); empty for unknown.
  std::string to_csv() const;
  /// The ablation.json object of the row; null for unknown.
  nlohmann::ordered_json to_json() const;
  /// The printed table's header line (with a blank line before it).
  static std::string text_header();
  /// ablation.csv's header line.
  static std::string csv_header();
};

/// The whole table and what is said beside it.
struct Table {
  std::vector<TableRow> rows;  ///< the measured rows, then the power-limit row
  std::string config;          ///< the configuration file (any bytes)
  int steps = 0;
  size_t budget_bytes = 0;
  std::vector<std::string> order;
  bool has_target = false;
  double target_loss = 0;
  bool energy_estimated = false;          ///< some row's energy is an estimate
  double combined_speedup = 0;            ///< last measured row's tokens/s over the baseline's
  std::optional<double> combined_factor;  ///< the same of tokens/J; empty when either is unknown
  /// Every measured row's tokens/J is known (ablation.json gives combined_factor only then).
  bool all_energy_known = false;
  double claimed_combined = 1;  ///< every claimed factor, the power limit's included

  /// The measured rows' indices by joules to the target: fewest first, then reached with
  /// unknown energy, then not reached. Empty without a target.
  std::vector<size_t> ranking() const;
  /// What greentrain ablate prints after the runs: the table, the combined factors, notes on
  /// estimated or unknown energy, and the ranking by joules to the target.
  std::string text() const;
  /// The ranking's lines (after a blank line), with the joules to the target of each row.
  std::string ranking_text() const;
  /// ablation.csv's content.
  std::string csv() const;
  /// ablation.json's content.
  nlohmann::ordered_json json() const;
};

/// The table of a plan's rows and what they measured (same order, same count). can_cap: this
/// machine has a writable power limit (the power-limit row's reason says so).
Table make_table(const Options& opt, const Plan& plan, const std::vector<Measured>& measured,
                 bool can_cap);

/// Writes <out>/ablation.csv and <out>/ablation.json atomically (core/atomic_file.h). Throws
/// gt::Error naming the file that could not be written.
void write_table(const Table& t, const std::string& out);

/// Whether a RAPL power limit is writable here: intel-rapl:0's constraint_0_power_limit_uw
/// under the powercap root (energy::powercap_root(root): root, else $GT_POWERCAP_ROOT, else
/// /sys/class/powercap). Never throws.
bool power_limit_writable(const std::string& root = "");

}  // namespace gt::ablate
