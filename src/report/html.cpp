// report/html.cpp: the report page. Tables are written here as HTML (readable without
// JavaScript); the charts are drawn in the browser by the inlined Chart.js from the series of
// report/series.h, by report.js (compiled in from src/report/report.js).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/atomic_file.h"
#include "core/bytes_json.h"
#include "core/error.h"
#include "report/report.h"
#include "report/series.h"
#include "run/schema.h"

namespace fs = std::filesystem;

namespace gt::report {

const char* report_js();  // report_js.cpp, generated from report.js

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

// A number of a JSON object, formatted, or `unknown` (never 0 for a missing figure).
std::string fnum(const nlohmann::json& j, const char* key, const char* spec) {
  if (j.contains(key) && j[key].is_number())
    return fmt::format(fmt::runtime(spec), j[key].get<double>());
  return "<span class=unknown>unknown</span>";
}

// A recorded path of a JSON object (core/bytes_json.h: a string, or {"bytes_hex", "shown"} for
// one that is not UTF-8) as readable text; "" when it is missing or neither form.
std::string shown_path(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return "";
  const auto& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("shown") && v["shown"].is_string())
    return v["shown"].get<std::string>();
  return "";
}

// JSON inlined in a <script> element: every '<', '>' and '&' (only inside its strings) is
// written as its \u escape, which JSON reads back as the character. Escaping "</" alone is not
// enough: "<!--<script>" (a run folder or a domain named so) puts HTML's script parser in its
// double-escaped state, where "</script>" no longer ends the element and the page's own
// scripts become part of the data (no chart drawn, no error shown).
std::string json_script_safe(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '<')
      out += "\\u003c";
    else if (c == '>')
      out += "\\u003e";
    else if (c == '&')
      out += "\\u0026";
    else
      out += c;
  }
  return out;
}

// JavaScript inlined in a <script> element must not hold "</script" (HTML ends the element
// there). Chart.js and report.js do not; refuse rather than rewrite code.
const std::string& js_script_safe(const std::string& js, const char* what) {
  std::string lower = js;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("</script") != std::string::npos)
    throw Error(fmt::format("{} holds \"</script\": it cannot be inlined into the report", what));
  return js;
}

// A figure, formatted, or `unknown` (never 0 for a missing figure).
std::string fnum(std::optional<double> v, const char* spec) {
  if (v) return fmt::format(fmt::runtime(spec), *v);
  return "<span class=unknown>unknown</span>";
}
std::string fnum(std::optional<int64_t> v, const char* spec) {
  return fnum(v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt, spec);
}

// The bases of the two tables' tokens/s and J/token, in their headers: the Runs table's are the
// whole run's, the Ablation table's the steady training steps' (ablate/read_row.cpp), so the same
// run shows two figures of each.
constexpr const char* kRunTokensPerS = "tokens/s<br><small>tokens / training s, all steps</small>";
constexpr const char* kRunJPerToken =
    "J/token<br><small>whole run's J (evaluations, checkpoints included) / tokens</small>";
constexpr const char* kAblationTokensPerS =
    "tokens/s<br><small>median step, without each segment's first</small>";
constexpr const char* kAblationJPerToken =
    "J/token<br><small>logged training intervals, without those of the first steps</small>";

// The steps column: the last step, and under it how the last session ended when a signal
// stopped it before train.max_steps (a report of an interrupted run must not read as finished).
std::string steps_cell(const run::Summary& s) {
  std::string h = fnum(s.step, "{:.0f}");
  if (const int64_t sig = s.interrupted_by_signal.value_or(0); sig > 0) {
    const char* abbrev = sig < NSIG ? ::sigabbrev_np(static_cast<int>(sig)) : nullptr;
    h += fmt::format("<br><small class=unknown>stopped by {}signal {}{}{}</small>",
                     abbrev ? fmt::format("SIG{} (", abbrev) : "", sig, abbrev ? ")" : "",
                     s.max_steps ? fmt::format(" before step {}", *s.max_steps) : "");
  }
  return h;
}

// A run's carbon flags (summary.json's energy.flags that begin "carbon:"): its measured time
// outside the intensity series, or over a hole in it, where a held value made its gCO2e.
std::vector<std::string> carbon_flags(const RunData& r) {
  std::vector<std::string> out;
  if (r.summary && r.summary->energy_flags)
    for (const auto& f : *r.summary->energy_flags)
      if (f.rfind("carbon:", 0) == 0) out.push_back(f);
  return out;
}

// The carbon flags of every run, under the runs table: their gCO2e used values the series did
// not give for the time measured. Empty when no run has one.
std::string carbon_notes(const std::vector<RunData>& runs) {
  std::string items;
  for (const auto& r : runs) {
    const bool sessions =
        r.summary && r.summary->run_totals && r.summary->run_totals->sessions.value_or(1) > 1;
    for (const auto& f : carbon_flags(r))
      items += "<li><b>" + esc(r.name) + "</b>" + (sessions ? " (last session)" : "") + ": " +
               esc(f) + "</li>\n";
  }
  if (items.empty()) return "";
  return "<div class=problems id=gt-carbon-flags><b>Carbon intensity held</b>: these runs' gCO2e "
         "used a value the carbon series did not give for the time measured<ul>\n" +
         items + "</ul></div>\n";
}

std::string summary_table(const std::vector<RunData>& runs) {
  std::string h = fmt::format(
      "<table><tr><th>run</th><th>steps</th><th>tokens</th><th>training s</th><th>{}</th>"
      "<th>energy (J)</th><th>energy (kWh)</th><th>{}</th><th>gCO2e</th><th>val loss</th>"
      "<th>energy method</th></tr>\n",
      kRunTokensPerS, kRunJPerToken);
  for (const auto& r : runs) {
    h += "<tr><td>" + esc(r.name) + "</td>";
    if (!r.summary) {
      h += "<td colspan=10 class=unknown>summary.json missing: totals unknown</td></tr>\n";
      continue;
    }
    const run::Summary& s = *r.summary;
    // A resumed run's figures are the whole run's (run_totals, every session added up; unknown
    // in one session: unknown); a summary without run_totals has its session's only, said so.
    std::optional<double> tokens =
        s.tokens ? std::optional<double>(double(*s.tokens)) : std::nullopt;
    std::optional<double> seconds = s.duration_s, energy = s.energy_j, g = s.g_co2e;
    std::optional<double> per_s = s.tokens_per_s, per_token = s.joules_per_token;
    std::string scope;
    if (s.run_totals) {
      const run::RunTotals& t = *s.run_totals;
      tokens = t.tokens ? std::optional<double>(double(*t.tokens)) : std::nullopt;
      seconds = t.duration_s;
      energy = t.energy_j;
      g = t.g_co2e;
      per_s = tokens && seconds && *seconds > 0 ? std::optional<double>(*tokens / *seconds)
                                                : std::nullopt;
      per_token =
          tokens && energy && *tokens > 0 ? std::optional<double>(*energy / *tokens) : std::nullopt;
      if (t.sessions.value_or(1) > 1)
        scope = fmt::format("<br><small>whole run: {} sessions</small>", *t.sessions);
      else if (!t.sessions && t.unknown_reason)
        scope = "<br><small>whole run: sessions unknown</small>";
      // an earlier session not accounted for (killed without its summary): why the time,
      // energy and carbon are unknown
      if (t.unknown_reason)
        scope +=
            "<br><small class=unknown>time, energy and carbon unknown: " + esc(*t.unknown_reason) +
            "</small>";
    } else if (s.session_start_step.value_or(0) > 0) {
      scope = "<br><small>last session only (no run_totals)</small>";
    }
    // the figures are the whole run's: an estimate in any of its sessions marks them
    const bool est = s.run_energy_estimated();
    const bool earlier_est = est && !s.energy_estimated.value_or(false);  // not the last session's
    std::string method = s.energy_j
                             ? (est ? "<b>ESTIMATED</b>" : "measured")
                             : "<span class=unknown>unknown</span><br><small class=unknown>" +
                                   esc(s.energy_unknown_reason.value_or("no sensor")) + "</small>";
    if (earlier_est && s.energy_j)
      method += "<br><small>in an earlier session; the last session's was measured</small>";
    if (s.energy_method)
      method += "<br><small>" + std::string(earlier_est ? "last session: " : "") +
                esc(*s.energy_method) + "</small>";
    // kWh, the unit of CodeCarbon's emissions.csv and of electricity bills (1 kWh = 3.6e6 J)
    const std::string kwh =
        fnum(energy ? std::optional<double>(*energy / 3.6e6) : std::nullopt, "{:.4g}");
    // the estimate's label on every figure made from the estimated joules
    const char* e = est && energy ? " (est.)" : "";
    // a value held where the series had none: said under the figure, the flags below the table
    const std::string held =
        carbon_flags(r).empty() ? "" : "<br><small class=unknown>carbon held: see below</small>";
    h.insert(h.size() - 5, scope);  // under the run's name
    h += fmt::format(
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td><td>{}{}</td><td>{}{}</td>"
        "<td>{}{}{}</td><td>{}</td><td>{}</td></tr>\n",
        steps_cell(s), fnum(tokens, "{:.0f}"), fnum(seconds, "{:.1f}"), fnum(per_s, "{:.0f}"),
        fnum(energy, "{:.4g}"), e, kwh, e, fnum(per_token, "{:.3g}"), per_token ? e : "",
        fnum(g, "{:.3g}"), g ? e : "", held, fnum(s.val_loss, "{:.4f}"), method);
  }
  return h + "</table>\n";
}

std::string target_table(const std::vector<RunData>& runs) {
  std::optional<double> least;  // the fewest joules to target among the runs that reached it
  bool any = false;
  for (const auto& r : runs)
    if (r.summary && r.summary->target) {
      any = true;
      const run::Target& t = *r.summary->target;
      if (t.reached.value_or(false) && t.energy_j)
        least = std::min(least.value_or(1e300), *t.energy_j);
    }
  if (!any)
    return "<p>No run set <code>train.target_loss</code>; set it (e.g. <code>--set "
           "train.target_loss=1.95</code>) to measure the energy to reach a validation loss.</p>\n";
  std::string h =
      "<table><tr><th>run</th><th>target val loss</th><th>reached at step</th><th>tokens</th>"
      "<th>seconds</th><th>joules</th><th>gCO2e</th><th>J / least J</th></tr>\n";
  for (const auto& r : runs) {
    h += "<tr><td>" + esc(r.name) + "</td>";
    if (!r.summary || !r.summary->target) {
      h += "<td colspan=7>" +
           std::string(r.summary ? "no target set" : "summary.json missing: unknown") +
           "</td></tr>\n";
      continue;
    }
    const run::Target& t = *r.summary->target;
    h += "<td>" + fnum(t.target_loss, "{:g}") + "</td>";
    if (!t.reached.value_or(false)) {
      h +=
          "<td colspan=6 class=unknown>not reached: " + esc(t.reason.value_or("")) + "</td></tr>\n";
      continue;
    }
    const bool est = t.energy_estimated.value_or(false);
    std::string joules = fnum(t.energy_j, "{:.4g}") + (est ? " <b>(estimated)</b>" : "");
    if (!t.energy_j)
      joules +=
          "<br><small class=unknown>" + esc(t.energy_unknown_reason.value_or("")) + "</small>";
    std::string ratio = least && t.energy_j && *least > 0
                            ? fmt::format("{:.2f}x", *t.energy_j / *least)
                            : "<span class=unknown>unknown</span>";
    h += fmt::format("<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     fnum(t.step, "{:.0f}"), fnum(t.tokens, "{:.0f}"), fnum(t.seconds, "{:.1f}"),
                     joules, fnum(t.g_co2e, "{:.3g}"), ratio);
  }
  return h +
         "</table>\n<p class=note>Seconds and joules to target run from the start of training to "
         "the end of the evaluation that first reached the target (evaluations every "
         "<code>train.eval_interval</code> steps), evaluations included.</p>\n";
}

std::string config_table(const std::vector<RunData>& runs) {
  std::set<std::string> keys;
  for (const auto& r : runs)
    for (auto& [k, v] : r.config) keys.insert(k);
  std::string rows;
  for (const auto& k : keys) {
    std::set<std::string> values;
    for (const auto& r : runs) values.insert(r.config.count(k) ? r.config.at(k) : "(absent)");
    if (runs.size() > 1 && values.size() < 2) continue;
    rows += "<tr><td><code>" + esc(k) + "</code></td>";
    for (const auto& r : runs)
      rows += "<td>" + esc(r.config.count(k) ? r.config.at(k) : "(absent)") + "</td>";
    rows += "</tr>\n";
  }
  std::string head = "<tr><th>key</th>";
  for (const auto& r : runs) head += "<th>" + esc(r.name) + "</th>";
  head += "</tr>\n";
  if (runs.size() > 1 && rows.empty()) return "<p>The runs' configurations do not differ.</p>\n";
  const std::string table = "<table>" + head + rows + "</table>\n";
  if (runs.size() > 1) return table;
  return "<details><summary>configuration of the run (one run: nothing to compare)</summary>" +
         table + "</details>\n";
}

std::string ablation_table(const AblationData& a) {
  const auto& t = a.table;
  std::string h = fmt::format(
      "<p>{} steps per row of <code>{}</code>{}.</p>\n<table><tr><th>row</th><th>precision</th>"
      "<th>fusion</th><th>recompute</th><th>micro-batch</th><th>{}</th><th>{}</th>"
      "<th>tokens/J</th><th>tokens/J vs baseline</th><th>claimed (cumulative)</th>"
      "<th>J to target</th><th>energy</th></tr>\n",
      t.value("steps", 0), esc(shown_path(t, "config")), kAblationTokensPerS, kAblationJPerToken,
      t.value("energy_estimated", false) ? "; energy <b>ESTIMATED</b> (no energy counters)" : "");
  if (t.contains("rows"))
    for (const auto& r : t["rows"]) {
      if (!r.value("measured", true)) {
        h += fmt::format(
            "<tr><td>{}</td><td colspan=8 class=unknown>not measured: {}</td>"
            "<td>{}</td><td></td><td></td></tr>\n",
            esc(r.value("row", std::string())), esc(r.value("reason", std::string())),
            fnum(r, "claimed_cumulative", "{:.2f}x"));
        continue;
      }
      // a row whose intervals' energy was unknown has the whole run's J/token: said in its cell
      const std::string basis = r.value("energy_basis", std::string(run::kTrainingIntervalsBasis));
      const std::string other_basis =
          basis == run::kTrainingIntervalsBasis ? "" : "<br><small>" + esc(basis) + "</small>";
      std::string to_target = r.contains("target") ? (r["target"].value("reached", false)
                                                          ? fnum(r["target"], "energy_j", "{:.4g}")
                                                          : std::string("not reached"))
                                                   : "";
      h += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td>"
          "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
          esc(r.value("row", std::string())), esc(r.value("precision", std::string())),
          esc(r.value("fusion", std::string())), esc(r.value("recompute", std::string())),
          fnum(r, "micro_batch", "{:.0f}"), fnum(r, "tokens_per_s", "{:.0f}"),
          fnum(r, "joules_per_token", "{:.4g}"), other_basis, fnum(r, "tokens_per_joule", "{:.1f}"),
          fnum(r, "factor_vs_baseline", "{:.2f}x"), fnum(r, "claimed_cumulative", "{:.2f}x"),
          to_target, esc(r.value("energy", std::string())));
    }
  return h +
         "</table>\n<p class=note>The Runs table gives each run whole: tokens/s over all its "
         "steps, J/token of the whole run's energy, evaluations and checkpoints included. This "
         "table gives the steady training steps: tokens/s of the median step without each "
         "segment's first (it creates the kernels), J/token over the logged training intervals "
         "without those steps' (evaluations lie outside them). The same row's figures differ "
         "between the two tables by these bases.</p>\n";
}

const char* kStyle = R"(<style>
body{font-family:sans-serif;margin:1.5em;max-width:1300px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
td:first-child,th:first-child{text-align:left}small{display:inline-block;max-width:40em;text-align:left}.unknown{color:#a33}.note{font-size:.85em;color:#555}
.problems{background:#fff3cd;border:1px solid #d9b44a;padding:.5em 1em}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(600px,1fr));gap:1em}
.chart{position:relative;height:320px;border:1px solid #eee;padding:4px}
.nochart{color:#a33;padding:1em;border:1px dashed #d99}
</style>
)";

}  // namespace

std::string render_html(const std::vector<RunData>& runs, const AblationData* ablation,
                        const std::string& chart_js) {
  std::string h = "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>\n";
  std::string title = runs.size() == 1 ? "greentrain report: " + runs[0].name
                                       : fmt::format("greentrain report: {} runs", runs.size());
  h += "<title>" + esc(title) + "</title>\n" + kStyle + "</head><body>\n";
  h += "<h1>" + esc(title) + "</h1>\n";
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  h += "<p class=note>Written " + std::string(when) + " by <code>greentrain report</code> from ";
  for (size_t i = 0; i < runs.size(); ++i)
    h += (i ? ", " : "") + ("<code>" + esc(runs[i].dir) + "</code>");
  h += ".</p>\n";
  bool any_est = false;
  for (const auto& r : runs) any_est |= r.summary && r.summary->run_energy_estimated();
  if (any_est)
    h += "<p><b>Energy is ESTIMATED</b> for the runs marked so (no energy counter could be read: "
         "CPU utilization &times; TDP and memory size &times; W/GB); the charts mark them "
         "too.</p>\n";
  std::string problems;
  for (const auto& r : runs)
    for (const auto& p : r.problems)
      problems += "<li><b>" + esc(r.name) + "</b>: " + esc(p) + "</li>\n";
  if (!problems.empty())
    h += "<div class=problems id=gt-problems><b>Missing or damaged</b><ul>\n" + problems +
         "</ul></div>\n";
  if (chart_js.empty())
    h += "<p class=nochart id=gt-nocharts>The charts need Chart.js (Debian package "
         "libjs-chart.js), which was not found when this report was written; the tables below "
         "hold the figures.</p>\n";

  h += "<h2>Energy to target</h2>\n" + target_table(runs);
  h += "<h2>Runs</h2>\n" + summary_table(runs) + carbon_notes(runs);
  if (ablation) h += "<h2>Ablation</h2>\n" + ablation_table(*ablation);
  h += "<h2>Configuration differences</h2>\n" + config_table(runs);
  h += "<h2>Charts</h2>\n";
  // shown until report.js has drawn the charts: a page whose script did not run, or failed,
  // says so (with the error, when there is one) instead of showing an empty grid
  if (!chart_js.empty())
    h += "<p class=problems id=gt-script-failed><b>The charts were not drawn</b>: the report's "
         "script did not run or failed<span id=gt-script-error></span>. The tables above hold "
         "the figures.</p>\n";
  h += "<div class=grid id=gt-charts></div>\n";
  h += "<pre id=gt-selfcheck hidden></pre>\n";

  nlohmann::json data;
  data["runs"] = nlohmann::json::array();
  for (const auto& r : runs) data["runs"].push_back(run_series(r));
  data["ablation"] = ablation ? ablation->table : nlohmann::json();
  h += "<script type=\"application/json\" id=gt-data>" + json_script_safe(dump_json(data)) +
       "</script>\n";
  if (!chart_js.empty()) {
    h += "<script>/* Chart.js, inlined from " + esc(find_chart_js()) + " */\n" +
         js_script_safe(chart_js, "Chart.js") + "\n</script>\n";
  }
  h += "<script>\n" + js_script_safe(report_js(), "report.js") + "\n</script>\n</body></html>\n";
  return h;
}

ReportResult write_report(const std::vector<std::string>& dirs, const std::string& out_path) {
  if (dirs.empty()) throw Error("greentrain report: no run folder given");
  std::vector<RunData> runs;
  std::optional<AblationData> ablation;
  for (const auto& d : dirs) {
    if (!fs::is_directory(d)) throw Error(fmt::format("{}: no such run folder", d));
    if (!is_ablation_dir(d) && !is_run_dir(d))
      throw Error(fmt::format(
          "{}: not a run folder: it holds none of {}, {}, {} or ablation.json (expected the --out "
          "folder of `greentrain train` or `greentrain ablate`)",
          d, run::file::metrics, run::file::summary, run::file::config));
    if (is_ablation_dir(d)) {
      std::vector<RunData> rows;
      AblationData a = read_ablation(d, rows);
      if (!ablation) ablation = std::move(a);
      for (auto& r : rows) runs.push_back(std::move(r));
    } else {
      runs.push_back(read_run(d));
    }
  }
  ReportResult res;
  res.path = out_path;
  std::string js;
  if (const std::string p = find_chart_js(); !p.empty()) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    js = ss.str();
  }
  res.charts = !js.empty();
  for (const auto& r : runs)
    for (const auto& p : r.problems) res.problems.push_back(r.name + ": " + p);
  const std::string html = render_html(runs, ablation ? &*ablation : nullptr, js);
  write_file_atomic(out_path, html);
  return res;
}

}  // namespace gt::report
