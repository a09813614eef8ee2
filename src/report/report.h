// report/report.h: `greentrain report`: one self-contained HTML file (report.html) from run
// folders. It reads what a run folder holds (metrics.jsonl, summary.json, config.toml; run/
// defines them, `greentrain train` writes them) and an `ablate` output folder
// (ablation.json and its row folders), and draws the charts with Chart.js (Debian's
// libjs-chart.js), inlined into the page so it opens offline. Missing or damaged files do not
// stop the report: it says what is missing. Estimated energy is marked as estimated in the
// charts' own titles and dataset labels.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "run/metrics_jsonl.h"
#include "run/summary.h"

namespace gt::report {

/// What one run folder holds, read leniently through the run folder's readers (run/summary.h,
/// run/metrics_jsonl.h).
struct RunData {
  std::string dir;                       ///< the folder as given
  std::string name;                      ///< short label for charts (the folder's name)
  std::vector<run::MetricsRow> metrics;  ///< metrics.jsonl, one row per readable line
  std::optional<run::Summary> summary;   ///< summary.json, when readable (mistyped keys unknown)
  std::map<std::string, std::string>
      config;                         ///< config.toml flattened: "train.precision" -> "fp32"
  std::vector<std::string> problems;  ///< what is missing or damaged, one sentence each
};

/// An `ablate` output folder: ablation.json and its rows' run folders.
struct AblationData {
  std::string dir;
  nlohmann::json table;  ///< ablation.json (rows with tokens_per_joule, factors, claims)
};

/// Reads a run folder. Never throws for missing or damaged files: each is described in
/// RunData::problems (e.g. "metrics.jsonl line 7 is cut short ...").
RunData read_run(const std::string& dir);

/// Whether `dir` is an `ablate` output folder (holds ablation.json).
bool is_ablation_dir(const std::string& dir);

/// Whether `dir` holds any file of a `greentrain train` run folder (metrics.jsonl, summary.json
/// or config.toml); write_report refuses a folder that holds none of them or ablation.json.
bool is_run_dir(const std::string& dir);

/// Reads an ablate folder's ablation.json and its row folders ("0_baseline", "1_+bf16", ...,
/// in row order). Throws gt::Error naming the file (and the key) when ablation.json cannot be
/// parsed or a key the report reads has another type than `ablate` writes.
AblationData read_ablation(const std::string& dir, std::vector<RunData>& rows);

/// Path of Chart.js to inline: $GT_CHARTJS when set, else Debian's libjs-chart.js
/// (/usr/share/javascript/chart.js/chart.min.js); empty when neither exists.
std::string find_chart_js();

/// The HTML page for `runs` (and an ablation when given). chart_js: the Chart.js source to
/// inline; empty: the page holds the tables and says that the charts need libjs-chart.js.
std::string render_html(const std::vector<RunData>& runs, const AblationData* ablation,
                        const std::string& chart_js);

/// What write_report() did.
struct ReportResult {
  std::string path;                   ///< the file written
  bool charts = false;                ///< Chart.js was found and inlined
  std::vector<std::string> problems;  ///< the runs' problems, prefixed by run name
};

/// Writes the report of `dirs` (run folders or ablate folders) to out_path (temporary name,
/// then rename). Throws gt::Error when no folder exists or the file cannot be written.
ReportResult write_report(const std::vector<std::string>& dirs, const std::string& out_path);

}  // namespace gt::report
