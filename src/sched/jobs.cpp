// sched/jobs.cpp: job list loading (TOML) and run-summary durations (summary.json read through
// run/summary.h).
#include "sched/jobs.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "core/error.h"
#include "run/schema.h"
#include "run/summary.h"
#include "sched/slurm.h"

namespace gt::sched {
namespace fs = std::filesystem;

RunFigures run_figures_from_summary(const std::string& path) {
  fs::path p(path);
  if (fs::is_directory(p)) p /= run::file::summary;
  std::ifstream in(p, std::ios::binary);
  check(in.good(), fmt::format("{}: cannot open run summary; expected a greentrain run folder or "
                               "its summary.json",
                               p.string()));
  std::stringstream text;
  text << in.rdbuf();
  std::string why;
  const std::optional<run::Summary> s = run::read_summary(text.str(), &why);
  // (not valid JSON, or not an object: as a summary without the whole run's wall time)
  check(s || why.rfind("not valid JSON", 0) != 0,
        fmt::format("{}: {}; expected a greentrain summary.json", p.string(), why));
  // run_totals adds up the sessions of a resumed run; the top level is the last session's.
  const bool totals = s && s->run_totals;
  std::optional<double> wall_s;
  if (s) wall_s = totals ? s->run_totals->wall_s : s->wall_s;
  // (null when a session of the run ended without its summary: run_totals says which)
  const std::string unknown_why = totals && s->run_totals->unknown_reason
                                      ? " (unknown: " + *s->run_totals->unknown_reason + ")"
                                      : std::string();
  check(wall_s.has_value(),
        fmt::format("{}: no numeric 'wall_s' in run_totals (the whole run's wall time){}; "
                    "expected a summary.json written by this greentrain, or give duration_s in "
                    "the job list ('duration_s' of a summary counts optimizer steps only)",
                    p.string(), unknown_why));
  RunFigures f;
  f.wall_s = *wall_s;
  check(
      f.wall_s > 0 && std::isfinite(f.wall_s),
      fmt::format("{}: wall_s = {}; expected a positive number of seconds", p.string(), f.wall_s));
  // a mistyped energy_unknown is refused with its name (nlohmann's type_error never escapes)
  if (const run::Problem* u = s->problem_with(run::key::energy_unknown))
    throw Error(fmt::format("{}: {}", p.string(), u->text));
  for (const std::string& k :
       {std::string(run::key::energy_estimated),
        std::string(run::key::run_totals) + "." + run::key::energy_estimated})
    if (const run::Problem* u = s->problem_with(k))
      throw Error(fmt::format("{}: {}", p.string(), u->text));
  const bool unknown = s->energy_unknown.value_or(false);
  const std::optional<double> e = totals ? s->run_totals->energy_j : s->energy_j;
  if (!unknown && e && *e > 0 && std::isfinite(*e)) f.energy_j = *e;
  // the whole run's joules: an estimate in any session makes them one (run_totals'
  // energy_estimated; a summary written before that key has the last session's only)
  f.energy_estimated = s->run_energy_estimated();
  f.energy_method = f.energy_estimated && !s->energy_estimated.value_or(false)
                        ? "estimated in an earlier session of the run"
                        : s->energy_method.value_or("");
  // what an interruption cost the run's last session (train/run_summary.cpp)
  if (!s->interruption) {
    f.interruption_unknown_reason =
        "no 'interruption' record in " + p.string() +
        " (written by a greentrain that did not measure checkpoint and restart times)";
    return f;
  }
  const run::Interruption& ir = *s->interruption;
  auto seconds = [&](const char* k, std::optional<double> v) -> std::optional<double> {
    if (v)
      check(*v >= 0 && std::isfinite(*v),
            fmt::format("{}: interruption.{} = {}; expected seconds >= 0", p.string(), k, *v));
    return v;
  };
  f.checkpoint_write_s = seconds(run::key::checkpoint_write_s, ir.checkpoint_write_s);
  f.restart_s = seconds(run::key::restart_s, ir.restart_s);
  f.restart_resumed = ir.restart_resumed.value_or(false);
  if (!f.checkpoint_write_s || !f.restart_s) {
    f.interruption_unknown_reason = fmt::format(
        "{}: interruption.{} is unknown{}", p.string(),
        f.checkpoint_write_s ? run::key::restart_s : run::key::checkpoint_write_s,
        ir.seconds_unknown_reason ? " (" + *ir.seconds_unknown_reason + ")" : std::string());
  }
  return f;
}

namespace {
// The kind of a device as tune/power_limit.h names it ("nvml:0 (NVIDIA H100, ...)",
// "rapl:intel-rapl:0 (package-0)", "sim:0"; through the node daemon the same names): the text
// before its first ':'.
std::string device_kind(const std::string& name) { return name.substr(0, name.find(':')); }

std::string device_kind_words(const std::string& kind) {
  if (kind == "nvml") return "NVIDIA GPUs (NVML)";
  if (kind == "rapl") return "CPU packages (RAPL)";
  if (kind == "sim") return "a simulated device (`greentrain tune --simulate`)";
  return fmt::format("a device of kind '{}'", kind);
}
}  // namespace

std::vector<CapOption> caps_from_profile(const std::string& path, double steps,
                                         std::vector<std::string>* devices) {
  std::ifstream in(path);
  check(in.good(), fmt::format("{}: cannot open power profile; expected the JSON that "
                               "`greentrain tune --profile FILE` writes",
                               path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({}); expected a greentrain power profile", path,
                            e.what()));
  }
  // (a comparison, not value(): a format of another type is "not a profile", not a type_error)
  check(j.is_object() && j.contains("format") && j["format"] == "greentrain-power-profile-1" &&
            j.contains("points") && j["points"].is_array() && !j["points"].empty(),
        fmt::format("{}: not a greentrain power profile; expected format "
                    "greentrain-power-profile-1 with points",
                    path));
  if (devices) {
    devices->clear();
    if (j.contains("devices")) {
      const auto& d = j["devices"];
      check(d.is_array() &&
                std::all_of(d.begin(), d.end(), [](const auto& x) { return x.is_string(); }),
            fmt::format("{}: 'devices' is not a list of device names; expected what `greentrain "
                        "tune` wrote (e.g. [\"rapl:intel-rapl:0 (package-0)\"])",
                        path));
      for (const auto& x : d) devices->push_back(x.get<std::string>());
    }
  }
  std::vector<CapOption> caps;
  for (const auto& p : j["points"]) {
    check(p.is_object() && p.contains("limit_w") && p["limit_w"].is_number() &&
              p.contains("time_per_step_s") && p["time_per_step_s"].is_number(),
          fmt::format("{}: a point without numeric limit_w and time_per_step_s", path));
    const double limit = p["limit_w"].get<double>();
    const double t = p["time_per_step_s"].get<double>();
    check(p.contains("energy_per_step_j") && p["energy_per_step_j"].is_number(),
          fmt::format("{}: energy per step at {} W is unknown (null); expected a profile whose "
                      "energy was measured (the planner does not guess it)",
                      path, limit));
    const double e = p["energy_per_step_j"].get<double>();
    check(limit > 0 && t > 0 && e > 0 && std::isfinite(limit + t + e),
          fmt::format("{}: point at {} W: time {} s and energy {} J per step; expected positive "
                      "numbers",
                      path, limit, t, e));
    caps.push_back({limit, steps * t, e / t});
  }
  std::sort(caps.begin(), caps.end(),
            [](const CapOption& a, const CapOption& b) { return a.limit_w > b.limit_w; });
  return caps;
}

void interruption_from_run(Job& j, const RunFigures& run, const std::string& summary) {
  if (run.checkpoint_write_s && run.restart_s) {
    j.interruption_s = *run.checkpoint_write_s + *run.restart_s;
    j.interruption_source = fmt::format(
        "measured in {} (checkpoint write {:.3g} s + restart {:.3g} s{})", summary,
        *run.checkpoint_write_s, *run.restart_s,
        run.restart_resumed ? "" : ", the start-up of a fresh session: no resume was measured");
  } else {
    j.interruption_s = 0;
    j.interruption_source = "default 0: " + run.interruption_unknown_reason;
  }
}

double duration_from_summary_s(const std::string& path) {
  return run_figures_from_summary(path).wall_s;
}

namespace {

// power_w: the run's joules over its wall time; marked when those joules are an estimate.
void power_from_run(Job& j, const RunFigures& run, const std::string& summary) {
  j.power_w = *run.energy_j / run.wall_s;
  if (run.energy_estimated)
    j.power_estimated_reason =
        fmt::format("power from {}, whose energy is an estimate{}", summary,
                    run.energy_method.empty() ? std::string() : " (" + run.energy_method + ")");
}

UnixTimeS node_time(const toml::node& n, const TimeZone& zone, const std::string& where) {
  if (auto dt = n.as_date_time()) {
    const toml::date_time& v = dt->get();
    if (v.offset)
      return civil_to_unix_s(v.date.year, v.date.month, v.date.day, v.time.hour, v.time.minute,
                             v.time.second, static_cast<std::int64_t>(v.offset->minutes) * 60,
                             where);
    return civil_to_unix_s(v.date.year, v.date.month, v.date.day, v.time.hour, v.time.minute,
                           v.time.second, zone, where);
  }
  if (auto s = n.as_string()) return parse_wall_time(s->get(), zone, where);
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

// The longest job duration accepted: 10 years in seconds. Beyond it the job's end no longer
// fits the 64-bit seconds the planner works in (the fuzzer found 601e300 minutes overflowing
// the conversion), and no job list means it.
constexpr double kMaxJobDurationS = 10 * 365.25 * 86400;

// s (seconds), or an error naming `where` when it is over kMaxJobDurationS.
double checked_duration(double s, const std::string& where) {
  if (!(s <= kMaxJobDurationS))
    throw Error(
        fmt::format("{}: {} s is not valid; expected a duration of at most {:.0f} s "
                    "(10 years)",
                    where, s, kMaxJobDurationS));
  return s;
}

// nominal_start inside [earliest_start, deadline - duration].
// (The end is checked only for a nominal start given explicitly: a job without one that cannot
// finish in time is reported unscheduled by the planner, not refused here.)
void check_nominal(const Job& j, const std::string& where, const TimeZone& off, bool check_end) {
  if (j.nominal_s() < j.earliest_start_s)
    throw Error(fmt::format(
        "{}: nominal_start {} is before earliest_start {}; expected earliest_start <= "
        "nominal_start (the window opens at or before the unshifted start)",
        where, format_iso_time(j.nominal_s(), off), format_iso_time(j.earliest_start_s, off)));
  if (check_end &&
      static_cast<double>(j.nominal_s()) + j.duration_s > static_cast<double>(j.deadline_s))
    throw Error(fmt::format(
        "{}: nominal_start {} + duration {} s ends after the deadline {}; expected the unshifted "
        "run (the baseline) to meet its deadline",
        where, format_iso_time(j.nominal_s(), off), j.duration_s,
        format_iso_time(j.deadline_s, off)));
}

}  // namespace

std::vector<Job> load_jobs_toml(const std::string& path, const TimeZone& zone) {
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
  static const std::set<std::string> known = {
      "name",          "command",        "script",     "duration_s",     "summary",
      "power_w",       "earliest_start", "deadline",   "interruptible",  "nominal_start",
      "power_profile", "steps",          "cap_device", "interruption_s", "max_interruptions",
      "ntasks",        "nodes"};
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
        throw Error(fmt::format(
            "{}: unknown key '{}'; expected one of name, command, script, "
            "duration_s, summary, power_w, nominal_start, earliest_start, "
            "deadline, interruptible, power_profile, steps, cap_device, interruption_s, "
            "max_interruptions, ntasks, nodes",
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
    std::optional<RunFigures> run;  // the summary's figures
    const toml::node* pw = t->get("power_w");
    if (const toml::node* prof = t->get("power_profile")) {
      check(!dur && !sum && !pw,
            where +
                ": power_profile gives the duration and power at each limit; expected no "
                "duration_s, summary or power_w beside it");
      const toml::node* steps = t->get("steps");
      check(steps != nullptr,
            where + ": power_profile without 'steps'; expected the job's number of steps");
      // 0 or a negative count planned a job of no or negative length; each limit's duration
      // (steps x time per step) is checked as duration_s is
      const double n_steps = node_number(*steps, key("steps"), "steps");
      check(n_steps >= 1 && n_steps <= 1e15 && n_steps == std::floor(n_steps),
            fmt::format("{}: {} is not valid; expected a whole number of steps in [1, 1e15]",
                        key("steps"), n_steps));
      const std::string profile = resolve(node_string(*prof, key("power_profile")));
      std::vector<std::string> devices;
      j.caps = caps_from_profile(profile, n_steps, &devices);
      for (const auto& c : j.caps)
        checked_duration(c.duration_s, key("steps") + " x time per step");
      j.duration_s = j.caps.front().duration_s;
      j.power_w = j.caps.front().power_w;
      const toml::node* dev = t->get("cap_device");
      const std::string d = dev ? node_string(*dev, key("cap_device")) : "gpu";
      check(d == "gpu" || d == "cpu",
            fmt::format("{}: '{}' is not valid; expected gpu or cpu", key("cap_device"), d));
      j.cap_device = d == "gpu" ? CapDevice::gpu : CapDevice::cpu;
      // the profile's times and energies hold for the kind of device it was measured on: a
      // CPU cap planned on a GPU's (or a simulated device's) curve is another job's plan
      const std::string want = j.cap_device == CapDevice::gpu ? "nvml" : "rapl";
      for (const std::string& dev : devices)
        check(device_kind(dev) == want,
              fmt::format("{}: its power_profile {} was measured on {}, {}, and cap_device = "
                          "\"{}\" caps {}; expected a profile that `greentrain tune --devices "
                          "{}` measured on the job's {}{}",
                          where, profile, dev, device_kind_words(device_kind(dev)), d,
                          device_kind_words(want), want, d == "gpu" ? "GPUs" : "CPUs",
                          device_kind(dev) == "nvml" || device_kind(dev) == "rapl"
                              ? fmt::format(", or cap_device = \"{}\" for this one",
                                            d == "gpu" ? "cpu" : "gpu")
                              : std::string()));
    } else {
      check(!t->get("steps") && !t->get("cap_device"),
            where + ": 'steps' and 'cap_device' go with power_profile only");
      check((dur != nullptr) != (sum != nullptr),
            where +
                ": expected exactly one of 'duration_s' (s), 'summary' (a run folder or its "
                "summary.json) or 'power_profile'");
      if (sum) run = run_figures_from_summary(resolve(node_string(*sum, key("summary"))));
      j.duration_s = checked_duration(
          dur ? node_number(*dur, key("duration_s"), "seconds") : run->wall_s, key("duration_s"));
      if (pw)
        j.power_w = node_number(*pw, key("power_w"), "W");
      else if (run && run->energy_j)  // the run's joules over its wall time
        power_from_run(j, *run, node_string(*sum, key("summary")));
      else
        throw Error(where +
                    ": missing key 'power_w'; expected average power in W (optional only with a "
                    "summary whose run's energy is known)");
    }
    const toml::node* es = t->get("earliest_start");
    check(es != nullptr, where + ": missing key 'earliest_start'; expected a date-time");
    j.earliest_start_s = node_time(*es, zone, key("earliest_start"));
    const toml::node* dl = t->get("deadline");
    check(dl != nullptr, where + ": missing key 'deadline'; expected a date-time");
    j.deadline_s = node_time(*dl, zone, key("deadline"));
    if (j.deadline_s <= j.earliest_start_s)
      throw Error(fmt::format(
          "{}: deadline {} is not after earliest_start {}; expected a deadline "
          "later than the earliest start",
          where, format_iso_time(j.deadline_s, zone), format_iso_time(j.earliest_start_s, zone)));
    const toml::node* ns = t->get("nominal_start");
    if (ns) j.nominal_start_s = node_time(*ns, zone, key("nominal_start"));
    check_nominal(j, where, zone, ns != nullptr);
    if (auto n = t->get("interruptible")) {
      auto b = n->as_boolean();
      check(b != nullptr, key("interruptible") + ": expected true or false");
      j.interruptible = b->get();
    }
    if (const toml::node* n = t->get("interruption_s")) {
      const std::optional<double> v = n->value<double>();
      check(v && *v >= 0 && *v <= kMaxJobDurationS,
            fmt::format("{}: expected seconds in [0, {:.0f}] (checkpoint + restart per resume)",
                        key("interruption_s"), kMaxJobDurationS));
      j.interruption_s = *v;
    }
    if (const toml::node* n = t->get("max_interruptions")) {
      const std::optional<std::int64_t> v = n->value<std::int64_t>();
      check(v && *v >= 0 && *v <= 100000,
            key("max_interruptions") + ": expected a whole number in [0, 100000]");
      j.max_interruptions = static_cast<int>(*v);
    }
    if (t->get("interruption_s"))
      j.interruption_source = "stated";
    else if (j.interruptible && run)
      interruption_from_run(j, *run, node_string(*sum, key("summary")));
    for (auto [name, field] : {std::pair{"ntasks", &j.ntasks}, std::pair{"nodes", &j.nodes}})
      if (const toml::node* n = t->get(name)) {
        const std::optional<std::int64_t> v = n->value<std::int64_t>();
        check(v && *v >= 1 && *v <= 1000000,
              key(name) + ": expected a whole number >= 1 (MPI ranks / nodes of the job)");
        *field = static_cast<int>(*v);
      }
    check(j.nodes <= j.ntasks,
          fmt::format("{}: nodes = {} is more than ntasks = {}; expected at least one task per "
                      "node",
                      where, j.nodes, j.ntasks));
    check(j.interruptible || (j.interruption_s == 0 && j.max_interruptions < 0),
          where + ": interruption_s and max_interruptions need interruptible = true");
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

namespace gt::sched {
namespace {

// One CSV line split at commas; a field may be double-quoted ("" is a quote inside it).
std::vector<std::string> split_csv_line(std::string_view line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"')
        out.back() += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        out.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  for (auto& f : out) {
    while (!f.empty() && (f.back() == ' ' || f.back() == '\t')) f.pop_back();
    while (!f.empty() && (f.front() == ' ' || f.front() == '\t')) f.erase(f.begin());
  }
  return out;
}

double csv_number(const std::string& text, const std::string& where, bool positive) {
  double v = 0;
  std::size_t used = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(v) || (positive ? v <= 0 : v < 0))
    throw Error(fmt::format("{}: '{}' is not valid; expected a {} number", where, text,
                            positive ? "positive" : "non-negative"));
  return v;
}

constexpr std::int64_t kDayS = 86400;

}  // namespace

DeadlineRule parse_deadline_rule(std::string_view name) {
  std::string n(name);
  std::replace(n.begin(), n.end(), '_', '-');
  if (n == "none") return DeadlineRule::none;
  if (n == "next-workday") return DeadlineRule::next_workday;
  if (n == "semi-weekly") return DeadlineRule::semi_weekly;
  throw Error(fmt::format(
      "--deadline-rule '{}' is not known; expected none, next-workday or semi-weekly", name));
}

UnixTimeS rule_deadline_s(DeadlineRule rule, UnixTimeS end_s, const TimeZone& zone) {
  if (rule == DeadlineRule::none) return end_s;
  const std::int64_t local = zone.to_local(end_s);  // the wall clock, as local seconds
  const std::int64_t day = local >= 0 ? local / kDayS : -((-local + kDayS - 1) / kDayS);
  const std::int64_t sod = local - day * kDayS;  // seconds of the day
  // Monday = 0 (the paper's weekday()); 1970-01-01 was a Thursday (3).
  const std::int64_t wd = ((day % 7) + 7 + 3) % 7;
  const std::int64_t nine = 9 * 3600;
  auto at_nine = [&](std::int64_t plus_days) {
    return zone.to_utc_earliest((day + plus_days) * kDayS + nine);
  };
  UnixTimeS d = end_s;
  if (rule == DeadlineRule::next_workday) {
    if (wd == 5)
      d = at_nine(2);
    else if (wd == 6 || sod > 17 * 3600)
      d = at_nine(1);
    else if (sod < nine)
      d = at_nine(0);
  } else {  // semi_weekly
    const bool to_thursday =
        (wd == 0 && sod > nine) || wd == 1 || wd == 2 || (wd == 3 && sod <= nine);
    d = to_thursday ? at_nine((7 - wd + 3) % 7) : at_nine((7 - wd) % 7);
  }
  return std::max(d, end_s);
}

std::vector<Job> load_jobs_csv(const std::string& path, const TimeZone& zone,
                               const JobCsvOptions& opt) {
  std::ifstream in(path);
  check(in.good(), fmt::format("{}: cannot open job list; expected a readable CSV file", path));
  std::string line;
  std::size_t line_no = 0;
  std::vector<std::string> header;
  while (header.empty() && std::getline(in, line)) {
    ++line_no;
    if (line_no == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // byte order mark
    if (line.find_first_not_of(" \t\r") != std::string::npos) header = split_csv_line(line);
  }
  check(!header.empty(), fmt::format("{}: empty; expected a header line such as "
                                     "name,nominal_start,duration_s,power_w",
                                     path));
  static const std::set<std::string> known = {"name",          "job_id",         "nominal_start",
                                              "arrival_time",  "duration_s",     "duration_minutes",
                                              "power_w",       "earliest_start", "deadline",
                                              "interruptible", "command",        "arrival_minute"};
  std::map<std::string, std::size_t> col;
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (!known.count(header[i]))
      throw Error(fmt::format(
          "{}:1: unknown column '{}'; expected name|job_id, nominal_start|arrival_time, "
          "duration_s|duration_minutes, power_w, earliest_start, deadline, interruptible, "
          "command, arrival_minute",
          path, header[i]));
    check(col.emplace(header[i], i).second,
          fmt::format("{}:1: column '{}' appears twice", path, header[i]));
  }
  auto pick = [&](const char* a, const char* b) -> std::optional<std::size_t> {
    const bool ha = col.count(a), hb = col.count(b);
    check(!(ha && hb),
          fmt::format("{}:1: columns '{}' and '{}' both given; expected one", path, a, b));
    if (ha) return col[a];
    if (hb) return col[b];
    throw Error(fmt::format("{}:1: no column '{}' (or '{}')", path, a, b));
  };
  const std::size_t c_name = *pick("name", "job_id");
  const std::size_t c_start = *pick("nominal_start", "arrival_time");
  const bool minutes = col.count("duration_minutes") > 0;
  const std::size_t c_dur = *pick("duration_s", "duration_minutes");
  auto opt_col = [&](const char* k) -> std::optional<std::size_t> {
    if (auto it = col.find(k); it != col.end()) return it->second;
    return std::nullopt;
  };
  const auto c_power = opt_col("power_w"), c_es = opt_col("earliest_start"),
             c_dl = opt_col("deadline"), c_int = opt_col("interruptible"),
             c_cmd = opt_col("command"), c_min = opt_col("arrival_minute");
  check(c_power || opt.power_w > 0,
        fmt::format("{}:1: no column 'power_w'; expected one, or --job-power-w W", path));
  check(opt.window_s < 0 || (!c_es && !c_dl),
        fmt::format("{}: --window-h given, but the CSV has earliest_start/deadline columns; "
                    "expected one or the other",
                    path));
  std::vector<Job> jobs;
  std::set<std::string> names;
  std::optional<UnixTimeS> epoch;  // midnight of the first row's day (arrival_minute's zero)
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::vector<std::string> f = split_csv_line(line);
    const std::string at = fmt::format("{}:{}", path, line_no);
    check(f.size() == header.size(),
          fmt::format("{}: {} field(s); expected {} (as the header)", at, f.size(), header.size()));
    auto where = [&](std::size_t c) { return fmt::format("{} column '{}'", at, header[c]); };
    Job j;
    j.name = f[c_name];
    check(!j.name.empty(), where(c_name) + ": empty; expected a job name");
    check(names.insert(j.name).second,
          fmt::format("{}: job '{}' appears twice; expected unique names", at, j.name));
    const UnixTimeS nominal = parse_wall_time(f[c_start], zone, where(c_start));
    j.nominal_start_s = nominal;
    j.duration_s = checked_duration(
        csv_number(f[c_dur], where(c_dur), true) * (minutes ? 60.0 : 1.0), where(c_dur));
    j.power_w = c_power ? csv_number(f[*c_power], where(*c_power), true) : opt.power_w;
    if (c_min) {
      if (!epoch) {
        const std::int64_t local = zone.to_local(nominal);
        epoch = zone.to_utc_earliest(local - (((local % kDayS) + kDayS) % kDayS));
      }
      const double m = csv_number(f[*c_min], where(*c_min), false);
      check(std::llround(m * 60) == nominal - *epoch,
            fmt::format("{}: arrival_minute {} does not match arrival_time {} ({} minutes after "
                        "{}); expected both to name the same time",
                        at, f[*c_min], f[c_start], (nominal - *epoch) / 60,
                        format_wall_time(*epoch, zone)));
    }
    const auto end = static_cast<UnixTimeS>(std::ceil(static_cast<double>(nominal) + j.duration_s));
    if (opt.window_s >= 0) {
      const auto w = static_cast<std::int64_t>(std::llround(opt.window_s));
      j.earliest_start_s = nominal - w;
      j.deadline_s = end + w;
    } else {
      j.earliest_start_s = c_es ? parse_wall_time(f[*c_es], zone, where(*c_es)) : nominal;
      j.deadline_s = c_dl ? parse_wall_time(f[*c_dl], zone, where(*c_dl))
                          : rule_deadline_s(opt.rule, end, zone) +
                                static_cast<std::int64_t>(std::llround(opt.deadline_grace_s));
    }
    check_nominal(j, fmt::format("{}: job '{}'", at, j.name), zone, true);
    j.interruptible = opt.interruptible;
    if (c_int) {
      const std::string& v = f[*c_int];
      if (v == "true" || v == "1" || v == "True")
        j.interruptible = true;
      else if (v == "false" || v == "0" || v == "False")
        j.interruptible = false;
      else
        throw Error(fmt::format("{}: '{}' is not valid; expected true or false", where(*c_int), v));
    }
    if (c_cmd) j.command = f[*c_cmd];
    if (j.interruptible && !j.command.empty()) {
      const std::string why = exec_problem(j.command);
      check(why.empty(), fmt::format("{}: job is interruptible, but {}", where(*c_cmd), why));
    }
    jobs.push_back(std::move(j));
  }
  check(!jobs.empty(), fmt::format("{}: no job rows; expected at least one", path));
  return jobs;
}

}  // namespace gt::sched
