// run/metrics_jsonl.h: metrics.jsonl's lines read into types (run/schema.h names the keys). A line
// is one logged step of `greentrain train` (train/trainer.cpp): its loss and speed, and when it
// ends a logged energy interval (energy_interval_tokens present) that interval's energy and power
// (train/energy_hook.h). As in summary.h, every figure that can be unknown is an optional and a
// key of another type is named in MetricsRow::problems; reading never throws nlohmann's errors.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "run/schema.h"

namespace gt::run {

/// One line of metrics.jsonl.
struct MetricsRow {
  std::optional<int64_t> step;  ///< empty on a line without one (then it is no step's line)
  std::optional<double> loss, lr, grad_norm, loss_scale, step_time_s, tokens_per_s;  ///< s
  std::optional<bool> skipped;  ///< fp16: the step's update was skipped (inf/NaN gradients)
  std::optional<int64_t> skipped_steps, threads;
  std::optional<double> val_loss, val_bits_per_byte;
  std::optional<double> target_reached;  ///< the target loss, on the line that first reached it
  /// The tokens of the logged energy interval this line ends; empty on lines inside an interval.
  std::optional<double> energy_interval_tokens;
  std::optional<double> energy_j, power_w, joules_per_token, g_co2e;  ///< J, W, J/token, gCO2e
  std::optional<double> gpu_energy_j;                                 ///< J, GPU counters only
  std::optional<bool> energy_estimated;
  std::optional<std::string> energy_unknown_reason;
  /// Average power of the interval per domain ("gpu", "cpu", ...), W; null: unknown.
  std::optional<std::map<std::string, std::optional<double>>> power_w_by_domain;
  std::optional<std::string> note;  ///< a note line's text (a resumed run whose data changed)
  std::vector<Problem> problems;    ///< keys of another type than the schema says
};

/// Reads one line. Empty, with *why set, when it is not a JSON object (a line cut by a crash).
std::optional<MetricsRow> read_metrics_line(std::string_view line, std::string* why);

/// What a whole metrics.jsonl holds.
struct Metrics {
  std::vector<MetricsRow> rows;  ///< the readable lines, in order
  int lines = 0;                 ///< lines in the file, empty ones included
  int unreadable = 0;            ///< lines left out: not a JSON object, no step, or a mistyped key
  int first_unreadable = 0;      ///< the first of them, counted from 1 (0: none)
};

/// Reads metrics.jsonl's text: every non-empty line that read_metrics_line reads, that has a
/// step and no problem, is a row; the others are counted as unreadable.
Metrics read_metrics(std::string_view text);

/// The step of the last non-empty line of metrics.jsonl's text; -1 when there is none, or that
/// line is not readable (being written) or has no step.
int64_t last_logged_step(std::string_view text);

}  // namespace gt::run
