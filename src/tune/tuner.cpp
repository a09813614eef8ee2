// tune/tuner.cpp: the Zeus-style power-limit search and its JSON profile.
#include "tune/tuner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/bytes_json.h"
#include "core/error.h"
#include "core/name_table.h"
#include "energy/meter.h"

namespace gt::tune {

StepMeasurement step_measurement(const energy::Measurement& m) {
  StepMeasurement out;
  out.energy_j = m.energy_j;
  out.time_s = m.duration_s;
  out.energy_known = m.known_energy_j().has_value();
  out.estimated_only = !m.domains.empty();
  for (const auto& d : m.domains) out.estimated_only = out.estimated_only && d.estimated;
  out.flags = m.flags;
  return out;
}

namespace {
constexpr NameTable<Objective, 4> kObjectiveNames{{{Objective::energy, "energy"},
                                                   {Objective::time, "time"},
                                                   {Objective::cost, "cost"},
                                                   {Objective::slowdown, "slowdown"}}};
}  // namespace

Objective parse_objective(std::string_view name) {
  return parse_name(kObjectiveNames, name, "objective");
}
std::string_view objective_name(Objective o) { return name_of(kObjectiveNames, o); }

std::vector<double> candidate_limits_w(double min_w, double max_w, double step_w) {
  check(step_w > 0, fmt::format("power-limit step {} W is not valid; expected W > 0", step_w));
  check(min_w > 0 && min_w <= max_w,
        fmt::format("allowed power limits [{}, {}] W are not valid; expected 0 < min <= max", min_w,
                    max_w));
  // Each candidate is a profiling run (warm-up and profiled training steps at that limit), so a
  // search over more than kMaxCandidateLimits of them would not end in useful time; counting
  // first also keeps a tiny step from allocating billions of limits.
  const double n = std::floor((max_w - min_w) / step_w + 1e-9) + 2;
  if (n > kMaxCandidateLimits)
    throw Error(fmt::format(
        "power-limit step {} W over the allowed range [{}, {}] W gives about {:.3g} candidate "
        "limits; at most {} are profiled (each runs warm-up and profiled training steps); "
        "expected a step of at least {:.3g} W",
        step_w, min_w, max_w, n, kMaxCandidateLimits, (max_w - min_w) / (kMaxCandidateLimits - 2)));
  std::vector<double> c;
  for (double l = max_w; l >= min_w - 1e-9; l -= step_w) c.push_back(std::max(l, min_w));
  if (c.back() > min_w + 1e-9) c.push_back(min_w);
  return c;
}

double zeus_cost_j(double energy_j, double time_s, double eta, double p_max_w) {
  return eta * energy_j + (1 - eta) * p_max_w * time_s;
}

bool objective_needs_energy(Objective o) { return o == Objective::energy || o == Objective::cost; }

double choose_limit_w(const std::vector<ProfilePoint>& points, const TuneOptions& opt,
                      double p_max_w) {
  check(!points.empty(), "power-limit search: no profiled limits to choose from");
  auto key = [&](const ProfilePoint& p) {
    switch (opt.objective) {
      case Objective::energy:
        return p.energy_per_step_j;
      case Objective::time:
        return p.time_per_step_s;
      case Objective::cost:
        return zeus_cost_j(p.energy_per_step_j, p.time_per_step_s, opt.eta, p_max_w);
      case Objective::slowdown:
        return p.limit_w;
    }
    return 0.0;
  };
  const ProfilePoint* top = &points[0];
  for (const auto& p : points)
    if (p.limit_w > top->limit_w) top = &p;
  const ProfilePoint* best = nullptr;
  for (const auto& p : points) {
    if (opt.objective == Objective::slowdown &&
        p.time_per_step_s > opt.max_slowdown * top->time_per_step_s * (1 + 1e-12))
      continue;
    if (!best || key(p) < key(*best) - 1e-12 ||
        (std::fabs(key(p) - key(*best)) <= 1e-12 && p.limit_w < best->limit_w))
      best = &p;
  }
  return best ? best->limit_w : top->limit_w;
}

nlohmann::json tune_result_to_json(const TuneResult& r, const TuneOptions& opt) {
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : r.points)
    pts.push_back(
        {{"limit_w", p.limit_w},
         {"energy_per_step_j", std::isnan(p.energy_per_step_j)  // unknown
                                   ? nlohmann::json()
                                   : nlohmann::json(p.energy_per_step_j)},
         {"time_per_step_s", p.time_per_step_s},
         {"avg_power_w",
          std::isnan(p.energy_per_step_j) ? nlohmann::json() : nlohmann::json(p.avg_power_w())},
         {"cost_j", std::isnan(p.energy_per_step_j)
                        ? nlohmann::json()
                        : nlohmann::json(zeus_cost_j(p.energy_per_step_j, p.time_per_step_s,
                                                     opt.eta, r.p_max_w))},
         {"flags", p.flags}});
  return {{"format", "greentrain-power-profile-1"},
          {"devices", r.devices},
          {"original_limits_w", r.original_limits_w},
          {"step_w", opt.step_w},
          {"warmup_steps", opt.warmup_steps},
          {"profile_steps", opt.profile_steps},
          {"p_max_w", r.p_max_w},
          {"objective", objective_name(opt.objective)},
          {"eta", opt.eta},
          {"max_slowdown", opt.max_slowdown},
          {"points", pts},
          {"chosen_limit_w", r.chosen_limit_w}};
}

namespace {

// Points from a saved profile, if it was made on these devices and candidates.
bool load_profile(const std::string& path, const std::vector<std::string>& devices,
                  const std::vector<double>& cands, std::vector<ProfilePoint>& points,
                  std::FILE* log) {
  std::ifstream in(path);
  if (!in.good()) return false;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
    if (j.at("format") != "greentrain-power-profile-1")
      throw Error("format is not greentrain-power-profile-1");
    if (j.at("devices").get<std::vector<std::string>>() != devices) {
      if (log)
        std::fprintf(log, "profile %s was made on other devices; profiling again\n", path.c_str());
      return false;
    }
    // a profile read back is checked as any input: each figure finite and in its range
    std::vector<ProfilePoint> pts;
    std::size_t k = 0;
    for (const auto& p : j.at("points")) {
      auto figure = [&](const char* key, bool may_be_null) -> double {
        const auto& v = p.at(key);
        if (may_be_null && v.is_null()) return NAN;  // unknown when profiled
        if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0))
          throw Error(fmt::format("points[{}].{} = {}: expected a number > 0{}", k, key,
                                  dump_json(v).substr(0, 40), may_be_null ? " or null" : ""));
        return v.get<double>();
      };
      pts.push_back({figure("limit_w", false),
                     figure("energy_per_step_j", true),
                     figure("time_per_step_s", false),
                     {}});
      ++k;
    }
    if (pts.size() != cands.size()) return false;
    for (std::size_t i = 0; i < pts.size(); ++i)
      if (std::fabs(pts[i].limit_w - cands[i]) > 1e-6) return false;
    points = std::move(pts);
    return true;
  } catch (const std::exception& e) {
    throw Error(
        fmt::format("{}: not a greentrain power profile ({}); expected the JSON that "
                    "`greentrain tune` writes, or remove the file to profile again",
                    path, e.what()));
  }
}

}  // namespace

std::vector<double> begin_search(const std::vector<DevicePtr>& devices, const TuneOptions& opt,
                                 TuneResult& r) {
  check(!devices.empty(), "power-limit search: no devices; expected at least one");
  check(opt.eta >= 0 && opt.eta <= 1,
        fmt::format("eta {} is not valid; expected a weight in [0, 1]", opt.eta));
  check(opt.profile_steps > 0 && opt.warmup_steps >= 0,
        fmt::format("profile_steps {} / warmup_steps {} are not valid; expected > 0 / >= 0",
                    opt.profile_steps, opt.warmup_steps));
  check(opt.max_slowdown >= 1,
        fmt::format("max slowdown {} is not valid; expected a factor >= 1", opt.max_slowdown));
  double lo = 0, hi = 1e300;
  for (const auto& d : devices) {
    r.devices.push_back(d->name());
    lo = std::max(lo, d->min_limit_w());
    hi = std::min(hi, d->max_limit_w());
  }
  std::vector<double> cands = candidate_limits_w(lo, hi, opt.step_w);
  r.p_max_w = cands.front() * static_cast<double>(devices.size());
  return cands;
}

bool reuse_saved_profile(const std::vector<DevicePtr>& devices, const std::vector<double>& cands,
                         const TuneOptions& opt, TuneResult& r, std::FILE* log) {
  if (opt.profile_path.empty() || !load_profile(opt.profile_path, r.devices, cands, r.points, log))
    return false;
  r.reused_profile = true;
  for (const auto& d : devices) r.original_limits_w.push_back(d->limit_w());
  r.chosen_limit_w = choose_limit_w(r.points, opt, r.p_max_w);
  if (log) std::fprintf(log, "reused profile %s\n", opt.profile_path.c_str());
  return true;
}

void add_profile_point(TuneResult& r, double limit, const StepMeasurement& m,
                       const TuneOptions& opt, std::FILE* log) {
  check(m.time_s > 0, fmt::format("power-limit search: the profiling at {} W took {} s; "
                                  "expected time > 0",
                                  limit, m.time_s));
  std::string flags;
  for (const auto& f : m.flags) flags += (flags.empty() ? "" : "; ") + f;
  if (objective_needs_energy(opt.objective))
    check(m.energy_known && m.energy_j > 0 && !m.estimated_only,
          fmt::format("power-limit search: objective '{}' compares energies, but at {} W the "
                      "meter {}{}; use --objective time or slowdown, or a machine whose "
                      "energy counters (RAPL, NVML) can be read",
                      objective_name(opt.objective), limit,
                      !m.energy_known    ? "could not measure the energy"
                      : m.estimated_only ? "has only an estimate, which does not see the limit"
                                         : fmt::format("read {} J", m.energy_j),
                      flags.empty() ? "" : " (" + flags + ")"));
  ProfilePoint p{limit, m.energy_known ? m.energy_j / opt.profile_steps : NAN,
                 m.time_s / opt.profile_steps, m.flags};
  r.points.push_back(p);
  if (!log) return;
  if (m.energy_known)
    std::fprintf(log, "limit %6.1f W: %9.3f J/step %8.4f s/step %7.1f W avg, cost %9.3f J%s\n",
                 limit, p.energy_per_step_j, p.time_per_step_s, p.avg_power_w(),
                 zeus_cost_j(p.energy_per_step_j, p.time_per_step_s, opt.eta, r.p_max_w),
                 m.estimated_only ? " (estimated)" : "");
  else
    std::fprintf(log, "limit %6.1f W: energy unknown %8.4f s/step\n", limit, p.time_per_step_s);
  for (const auto& f : m.flags) std::fprintf(log, "  flag: %s\n", f.c_str());
}

void end_search(TuneResult& r, const TuneOptions& opt) {
  r.chosen_limit_w = choose_limit_w(r.points, opt, r.p_max_w);
  if (!opt.profile_path.empty())
    write_file_atomic(opt.profile_path, dump_json(tune_result_to_json(r, opt), 2) + "\n");
}

TuneResult tune_power_limit(const std::vector<DevicePtr>& devices, const ProfileFn& profile,
                            const TuneOptions& opt, std::FILE* log) {
  TuneResult r;
  const std::vector<double> cands = begin_search(devices, opt, r);
  if (reuse_saved_profile(devices, cands, opt, r, log)) return r;
  // Refuses without permission before anything changes; restores on every exit path.
  PowerLimitGuard guard(devices, /*handle_signals=*/true);
  r.original_limits_w = guard.saved_limits_w();
  for (double limit : cands) {
    guard.apply_w(limit);
    if (opt.warmup_steps > 0) profile(opt.warmup_steps);
    add_profile_point(r, limit, profile(opt.profile_steps), opt, log);
  }
  guard.restore();
  end_search(r, opt);
  return r;
}

}  // namespace gt::tune
