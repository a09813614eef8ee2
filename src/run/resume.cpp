// run/resume.cpp: see resume.h.
#include "run/resume.h"

#include <fmt/format.h>

#include <cmath>
#include <sstream>

#include "core/bytes_json.h"
#include "core/json_number.h"
#include "run/fields.h"
#include "run/schema.h"

namespace gt::run {

std::optional<nlohmann::json> previous_session(const std::string& text, int64_t start,
                                               std::string* why) {
  const std::optional<nlohmann::json> parsed = detail::parse_object(text, why);
  if (!parsed) return std::nullopt;
  const nlohmann::json& prev = *parsed;
  const auto step = json_integer<int64_t>(prev.value(key::step, nlohmann::json()), 0);
  if (!step || *step != start) {
    if (!step) *why = "its step is not a whole number >= 0";
    return std::nullopt;  // another session's (or a different run's): not continued
  }
  // the totals so far: run_totals, or the session's own figures (summaries before run_totals)
  const nlohmann::json& pt = prev.contains(key::run_totals) ? prev[key::run_totals] : prev;
  if (!pt.is_object()) {
    *why = "run_totals is not an object";
    return std::nullopt;
  }
  nlohmann::json t = nlohmann::json::object();
  const auto sessions = pt.contains(key::sessions)
                            ? json_integer<int64_t>(pt[key::sessions], 1, int64_t(1) << 40)
                            : std::optional<int64_t>(1);
  const auto first = json_integer<int64_t>(
      pt.value(key::first_step, pt.value(key::session_start_step, nlohmann::json(0))), 0, start);
  if (!sessions || !first) {
    *why = "run_totals.sessions or first_step is not a whole number in range";
    return std::nullopt;
  }
  t[key::sessions] = *sessions;
  t[key::first_step] = *first;
  if (pt.contains(key::tokens)) {
    const auto tokens = json_integer<int64_t>(pt[key::tokens], 0, int64_t(1) << 60);
    if (!tokens) {
      *why = "run_totals.tokens is not a whole number >= 0";
      return std::nullopt;
    }
    t[key::tokens] = *tokens;
  }
  for (const char* k : {key::duration_s, key::wall_s, key::energy_j, key::g_co2e}) {
    if (!pt.contains(k)) continue;
    const auto& v = pt[k];
    if (v.is_null()) {
      t[k] = nullptr;  // unknown stays unknown
    } else if (v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0) {
      t[k] = v.get<double>();
    } else {
      *why = fmt::format("run_totals.{} is {}; expected a number >= 0 or null", k,
                         dump_json(v).substr(0, 40));
      return std::nullopt;
    }
  }
  // whether an earlier session's energy was an estimate: run_totals' flag, or, in a summary
  // written before that key (or before run_totals), the session's own (its last session's)
  const bool own_flag = pt.contains(key::energy_estimated);
  const nlohmann::json& est_from = own_flag ? pt : prev;
  if (est_from.contains(key::energy_estimated)) {
    const auto& v = est_from[key::energy_estimated];
    if (!v.is_boolean()) {
      *why = fmt::format("{}energy_estimated is {}; expected true or false",
                         own_flag && &pt != &prev ? "run_totals." : "", dump_json(v).substr(0, 40));
      return std::nullopt;
    }
    t[key::energy_estimated] = v.get<bool>();
  }
  nlohmann::json out = {{key::step, *step}, {key::run_totals, t}};
  // the target record of a session that reached it stands as written, when it is well formed
  if (prev.contains(key::target) && prev[key::target].is_object()) {
    const auto& tg = prev[key::target];
    bool ok = tg.value(key::reached, nlohmann::json()).is_boolean();
    for (const char* k : {key::step, key::tokens, key::seconds, key::energy_j, key::g_co2e})
      ok = ok &&
           (!tg.contains(k) || tg[k].is_null() ||
            (tg[k].is_number() && std::isfinite(tg[k].get<double>()) && tg[k].get<double>() >= 0));
    if (ok) out[key::target] = tg;
  }
  return out;
}

std::string metrics_lines_up_to(const std::string& text, int64_t step) {
  std::istringstream in(text);
  std::string line, kept;
  while (std::getline(in, line)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      continue;  // a line cut by a crash: dropped
    }
    if (!j.is_object()) continue;
    if (!j.contains(key::step)) {
      kept += line + "\n";
      continue;
    }
    const auto s = json_integer<int64_t>(j[key::step], 0);
    if (s && *s <= step) kept += line + "\n";
  }
  return kept;
}

}  // namespace gt::run
