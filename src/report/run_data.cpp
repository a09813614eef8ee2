// report/run_data.cpp: reads run folders and ablate folders for the report, leniently: what
// is missing or damaged is described, not fatal.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/bytes_json.h"
#include "core/error.h"
#include "core/json_number.h"
#include "report/report.h"

namespace fs = std::filesystem;

namespace gt::report {
namespace {

void flatten(const toml::table& t, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  for (auto&& [k, v] : t) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const auto* sub = v.as_table()) {
      flatten(*sub, key, out);
    } else if (auto s = v.value<std::string>(); s && v.is_string()) {
      out[key] = *s;
    } else if (v.is_floating_point()) {
      // the shortest text that reads back as the same number: 2.9, never 2.8999999999999999
      out[key] = fmt::format("{}", *v.value<double>());
    } else {
      std::ostringstream os;
      v.visit([&](auto&& node) { os << node; });
      out[key] = os.str();
    }
  }
}

// ablation.json's keys that the report reads have the types `ablate` writes (a hand-edited or
// damaged file: an array, "steps": "x"): gt::Error naming the file and the key, not a JSON
// library error when the page is drawn.
void check_ablation_table(const nlohmann::json& t, const std::string& path) {
  auto bad = [&](const std::string& key, const nlohmann::json& v, const char* expected) {
    std::string shown = dump_json(v);
    if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
    return Error(fmt::format("{}: {} = {}: expected {}", path, key, shown, expected));
  };
  if (!t.is_object()) throw bad("the file", t, "an object as `greentrain ablate` writes");
  if (t.contains("steps")) json_integer_or_throw<int>(t["steps"], path + ": steps", 0);
  if (t.contains("config")) (void)bytes_from_json(t["config"], path + ": config");
  if (t.contains("energy_estimated") && !t["energy_estimated"].is_boolean())
    throw bad("energy_estimated", t["energy_estimated"], "true or false");
  if (!t.contains("rows")) return;
  if (!t["rows"].is_array()) throw bad("rows", t["rows"], "an array of rows");
  for (size_t i = 0; i < t["rows"].size(); ++i) {
    const auto& r = t["rows"][i];
    const std::string at = fmt::format("rows[{}]", i);
    if (!r.is_object()) throw bad(at, r, "an object");
    for (const char* k :
         {"row", "reason", "precision", "fusion", "recompute", "energy", "energy_basis"})
      if (r.contains(k) && !r[k].is_string()) throw bad(at + "." + k, r[k], "a string");
    if (r.contains("measured") && !r["measured"].is_boolean())
      throw bad(at + ".measured", r["measured"], "true or false");
    if (r.contains("target")) {
      const auto& g = r["target"];
      if (!g.is_object()) throw bad(at + ".target", g, "an object");
      if (g.contains("reached") && !g["reached"].is_boolean())
        throw bad(at + ".target.reached", g["reached"], "true or false");
    }
  }
}

}  // namespace

RunData read_run(const std::string& dir) {
  RunData r;
  r.dir = dir;
  r.name = fs::path(dir).lexically_normal().filename().string();
  if (r.name.empty() || r.name == ".")
    r.name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  if (!fs::is_directory(dir)) {
    r.problems.push_back(fmt::format("{}: no such folder", dir));
    return r;
  }
  const fs::path d(dir);
  // metrics.jsonl: one JSON object per line; a crash can leave the last line cut short
  const fs::path metrics = d / run::file::metrics;
  if (std::ifstream f(metrics, std::ios::binary); !f) {
    r.problems.push_back(
        "metrics.jsonl is missing: no loss, power or energy over the run can be shown");
  } else {
    std::stringstream text;
    text << f.rdbuf();
    run::Metrics m = run::read_metrics(text.str());
    r.metrics = std::move(m.rows);
    if (m.unreadable)
      r.problems.push_back(fmt::format(
          "metrics.jsonl: {} of its {} lines could not be read (the first is line {}: cut short "
          "or not JSON, e.g. by a crash while it was written, or a key of another type than "
          "`greentrain train` writes); the charts show the {} readable lines",
          m.unreadable, m.lines, m.first_unreadable, r.metrics.size()));
    else if (r.metrics.empty())
      r.problems.push_back("metrics.jsonl is empty: no step was logged");
  }
  // summary.json: a key of another type than train writes (hand-edited, or another tool's) is
  // shown as unknown and named here; a file that is not a JSON object is not used
  if (std::ifstream f(d / run::file::summary, std::ios::binary); !f) {
    r.problems.push_back(
        "summary.json is missing (the run has not finished, or was killed without saving): "
        "totals, energy and the target are unknown");
  } else {
    std::stringstream text;
    text << f.rdbuf();
    std::string why;
    r.summary = run::read_summary(text.str(), &why);
    if (!r.summary)
      r.problems.push_back(fmt::format("summary.json cannot be read ({}): totals unknown", why));
    else
      for (const auto& p : r.summary->problems)
        r.problems.push_back("summary.json: " + p.text + "; not shown");
  }
  if (!fs::exists(d / run::file::config)) {
    r.problems.push_back("config.toml is missing: the configuration cannot be compared");
  } else {
    try {
      flatten(toml::parse_file((d / run::file::config).string()), "", r.config);
    } catch (const toml::parse_error& e) {
      r.problems.push_back(fmt::format("config.toml cannot be read: {}", e.description()));
    }
  }
  return r;
}

bool is_ablation_dir(const std::string& dir) { return fs::exists(fs::path(dir) / "ablation.json"); }

bool is_run_dir(const std::string& dir) {
  const fs::path d(dir);
  return fs::exists(d / run::file::metrics) || fs::exists(d / run::file::summary) ||
         fs::exists(d / run::file::config);
}

AblationData read_ablation(const std::string& dir, std::vector<RunData>& rows) {
  AblationData a;
  a.dir = dir;
  const fs::path p = fs::path(dir) / "ablation.json";
  std::ifstream f(p);
  try {
    a.table = nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: cannot be read as JSON ({})", p.string(), e.what()));
  }
  check_ablation_table(a.table, p.string());
  // the rows' run folders, "<index>_<row name>", in index order
  const std::regex row_dir(R"(([0-9]{1,9})_(baseline|\+[a-z0-9_]+))");
  std::vector<std::pair<int, fs::path>> found;
  for (auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (e.is_directory() && std::regex_match(name, m, row_dir))
      found.emplace_back(std::stoi(m[1].str()), e.path());
  }
  std::sort(found.begin(), found.end());
  for (auto& [i, path] : found) rows.push_back(read_run(path.string()));
  return a;
}

std::string find_chart_js() {
  if (const char* env = std::getenv("GT_CHARTJS"); env && *env) return fs::exists(env) ? env : "";
  const char* debian = "/usr/share/javascript/chart.js/chart.min.js";
  return fs::exists(debian) ? debian : "";
}

}  // namespace gt::report
