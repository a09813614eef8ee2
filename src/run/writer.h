// run/writer.h: the one writer of a run folder's files (run/schema.h), used by `greentrain
// train`. Whole files (summary.json, config.toml, a metrics.jsonl cut back on resume) are written
// to a temporary name and renamed (core/atomic_file.h); metrics.jsonl grows by whole lines, each
// appended and flushed as it is logged (a crash leaves at most one cut line, which the readers
// leave out). energy.csv is appended by energy/emissions_csv.h (CodeCarbon's columns, under a
// lock, shared with other writers).
#pragma once
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace gt::run {

/// Writes DIR/summary.json (temporary name, then rename): {"schema_version": kSchemaVersion,
/// then the keys of `summary` in their order}, pretty-printed (2 spaces) with a final newline.
/// Throws gt::Error from write_file_atomic.
void write_summary(const std::string& dir, const nlohmann::ordered_json& summary);

/// Writes DIR/config.toml, the run's resolved configuration (temporary name, then rename).
void write_config(const std::string& dir, const std::string& toml);

/// metrics.jsonl, opened for appending (created when missing).
class MetricsLog {
 public:
  /// Opens DIR/metrics.jsonl for appending.
  explicit MetricsLog(const std::string& dir);
  /// Appends `line` as one compact JSON line and flushes it.
  void append(const nlohmann::ordered_json& line);

 private:
  std::ofstream out_;
};

/// Cuts DIR/metrics.jsonl back to the lines of steps <= step (run/resume.h's
/// metrics_lines_up_to), rewritten atomically; nothing when the file does not exist.
void keep_metrics_up_to(const std::string& dir, int64_t step);

/// Removes DIR/metrics.jsonl (a fresh run's), if any.
void remove_metrics(const std::string& dir);

/// The run's sessions before one that starts at `start` (run/resume.h prior_sessions(), from
/// DIR/summary.json and DIR/session_open.json as they are now; checkpoint_run: the checkpoint's
/// "run" record). *note: set when an earlier session is not accounted for.
nlohmann::json read_prior_sessions(const std::string& dir, int64_t start,
                                   const nlohmann::json& checkpoint_run, std::string* note);

/// Writes DIR/session_open.json, {"session" (null: unknown), "session_start_step", "pid"}: a
/// session is training. Throws gt::Error from write_file_atomic.
void open_session(const std::string& dir, std::optional<int64_t> session, int64_t start);

/// Removes DIR/session_open.json (the session's summary.json is written), if any.
void close_session(const std::string& dir);

}  // namespace gt::run
