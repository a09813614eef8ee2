// sched/jobs.cpp: job list loading (TOML) and run-summary durations.
#include "sched/jobs.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "sched/slurm.h"

namespace gt::sched {
namespace fs = std::filesystem;

RunFigures run_figures_from_summary(const std::string& path) {
  fs::path p(path);
  if (fs::is_directory(p)) p /= "summary.json";
  std::ifstream in(p);
  check(in.good(), fmt::format("{}: cannot open run summary; expected a greentrain run folder or "
                               "its summary.json",
                               p.string()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({}); expected a greentrain summary.json",
                            p.string(), e.what()));
  }
  // run_totals adds up the sessions of a resumed run; the top level is the last session's.
  const nlohmann::json* t = j.is_object() && j.contains("run_totals") && j["run_totals"].is_object()
                                ? &j["run_totals"]
                                : &j;
  check(t->is_object() && t->contains("wall_s") && (*t)["wall_s"].is_number(),
        fmt::format("{}: no numeric 'wall_s' in run_totals (the whole run's wall time); expected "
                    "a summary.json written by this greentrain, or give duration_s in the job "
                    "list ('duration_s' of a summary counts optimizer steps only)",
                    p.string()));
  RunFigures f;
  f.wall_s = (*t)["wall_s"].get<double>();
  check(
      f.wall_s > 0 && std::isfinite(f.wall_s),
      fmt::format("{}: wall_s = {}; expected a positive number of seconds", p.string(), f.wall_s));
  const bool unknown = j.is_object() && j.value("energy_unknown", false);
  if (!unknown && t->contains("energy_j") && (*t)["energy_j"].is_number()) {
    const double e = (*t)["energy_j"].get<double>();
    if (e > 0 && std::isfinite(e)) f.energy_j = e;
  }
  return f;
}

double duration_from_summary_s(const std::string& path) {
  return run_figures_from_summary(path).wall_s;
}

namespace {

UnixTimeS node_time(const toml::node& n, std::int64_t utc_offset_s, const std::string& where) {
  if (auto dt = n.as_date_time()) {
    const toml::date_time& v = dt->get();
    std::int64_t off = v.offset ? static_cast<std::int64_t>(v.offset->minutes) * 60 : utc_offset_s;
    return civil_to_unix_s(v.date.year, v.date.month, v.date.day, v.time.hour, v.time.minute,
                           v.time.second, off);
  }
  if (auto s = n.as_string()) return parse_wall_time(s->get(), utc_offset_s, where);
  throw Error(
      fmt::format("{}: expected a date-time such as 2020-06-01T18:00:00 (in the "
                  "--utc-offset zone) or 2020-06-01T18:00:00+02:00",
                  where));
}

double node_number(const toml::node& n, const std::string& where, const char* unit) {
  std::optional<double> v = n.value<double>();
  if (!v || !std::isfinite(*v) || *v <= 0) {
    std::ostringstream shown;  // the value as the file has it, so the message names it
    n.visit([&](auto&& x) { shown << x; });
    throw Error(fmt::format("{}: {} is not valid; expected a positive number ({})", where,
                            shown.str(), unit));
  }
  return *v;
}

std::string node_string(const toml::node& n, const std::string& where) {
  auto s = n.as_string();
  if (!s || s->get().empty()) throw Error(fmt::format("{}: expected a non-empty string", where));
  return s->get();
}

}  // namespace

std::vector<Job> load_jobs_toml(const std::string& path, std::int64_t utc_offset_s) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw Error(fmt::format("{}:{}:{}: {}; expected a TOML job list of [[job]] tables", path,
                            e.source().begin.line, e.source().begin.column, e.description()));
  }
  const fs::path base = fs::path(path).parent_path();
  auto resolve = [&](const std::string& p) {
    fs::path q(p);
    return (q.is_relative() && !base.empty() ? base / q : q).string();
  };
  for (auto&& [k, v] : root)
    if (k.str() != "job")
      throw Error(fmt::format("{}: unknown top-level key '{}'; expected only [[job]] tables", path,
                              k.str()));
  auto* arr = root["job"].as_array();
  check(arr && !arr->empty(),
        fmt::format("{}: no [[job]] tables; expected at least one job", path));
  static const std::set<std::string> known = {"name",           "command",  "script",
                                              "duration_s",     "summary",  "power_w",
                                              "earliest_start", "deadline", "interruptible"};
  std::vector<Job> jobs;
  std::set<std::string> names;
  for (std::size_t i = 0; i < arr->size(); ++i) {
    auto* t = (*arr)[i].as_table();
    std::string where = fmt::format("{}: job[{}]", path, i);
    check(t != nullptr, where + ": expected a table ([[job]])");
    Job j;
    if (auto n = t->get("name"))
      j.name = node_string(*n, where + " key 'name'");
    else
      throw Error(where + ": missing key 'name'; expected a job name");
    where = fmt::format("{}: job '{}'", path, j.name);
    for (auto&& [k, v] : *t)
      if (!known.count(std::string(k.str())))
        throw Error(
            fmt::format("{}: unknown key '{}'; expected one of name, command, script, "
                        "duration_s, summary, power_w, earliest_start, deadline, "
                        "interruptible",
                        where, k.str()));
    check(names.insert(j.name).second, where + ": duplicate name; expected unique job names");
    auto key = [&](const char* k) { return fmt::format("{} key '{}'", where, k); };
    const toml::node* cmd = t->get("command");
    const toml::node* scr = t->get("script");
    check((cmd != nullptr) != (scr != nullptr),
          where + ": expected exactly one of 'command' or 'script'");
    if (cmd) j.command = node_string(*cmd, key("command"));
    if (scr) j.script = resolve(node_string(*scr, key("script")));
    const toml::node* dur = t->get("duration_s");
    const toml::node* sum = t->get("summary");
    check((dur != nullptr) != (sum != nullptr),
          where +
              ": expected exactly one of 'duration_s' (s) or 'summary' (a run folder or its "
              "summary.json)");
    std::optional<RunFigures> run;
    if (sum) run = run_figures_from_summary(resolve(node_string(*sum, key("summary"))));
    j.duration_s = dur ? node_number(*dur, key("duration_s"), "seconds") : run->wall_s;
    const toml::node* pw = t->get("power_w");
    if (pw)
      j.power_w = node_number(*pw, key("power_w"), "W");
    else if (run && run->energy_j)  // the run's measured joules over its wall time
      j.power_w = *run->energy_j / run->wall_s;
    else
      throw Error(where +
                  ": missing key 'power_w'; expected average power in W (optional only with a "
                  "summary whose run's energy is known)");
    const toml::node* es = t->get("earliest_start");
    check(es != nullptr, where + ": missing key 'earliest_start'; expected a date-time");
    j.earliest_start_s = node_time(*es, utc_offset_s, key("earliest_start"));
    const toml::node* dl = t->get("deadline");
    check(dl != nullptr, where + ": missing key 'deadline'; expected a date-time");
    j.deadline_s = node_time(*dl, utc_offset_s, key("deadline"));
    if (j.deadline_s <= j.earliest_start_s)
      throw Error(
          fmt::format("{}: deadline {} is not after earliest_start {}; expected a deadline "
                      "later than the earliest start",
                      where, format_iso_time(j.deadline_s, utc_offset_s),
                      format_iso_time(j.earliest_start_s, utc_offset_s)));
    if (auto n = t->get("interruptible")) {
      auto b = n->as_boolean();
      check(b != nullptr, key("interruptible") + ": expected true or false");
      j.interruptible = b->get();
    }
    // an interruptible job's command is exec'd so that it receives Slurm's SIGTERM (slurm.h)
    if (j.interruptible && !j.command.empty()) {
      const std::string why = exec_problem(j.command);
      check(why.empty(), fmt::format("{}: job is interruptible, but {}", key("command"), why));
    }
    jobs.push_back(std::move(j));
  }
  return jobs;
}

}  // namespace gt::sched
