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
  // null: unknown (a run with a session not accounted for), carried as null
  const nlohmann::json sessions_v = pt.value(key::sessions, nlohmann::json(1));
  const nlohmann::json first_v =
      pt.value(key::first_step, pt.value(key::session_start_step, nlohmann::json(0)));
  const auto sessions = json_integer<int64_t>(sessions_v, 1, int64_t(1) << 40);
  const auto first = json_integer<int64_t>(first_v, 0, start);
  if ((!sessions && !sessions_v.is_null()) || (!first && !first_v.is_null())) {
    *why = "run_totals.sessions or first_step is not a whole number in range";
    return std::nullopt;
  }
  t[key::sessions] = sessions ? nlohmann::json(*sessions) : nlohmann::json();
  t[key::first_step] = first ? nlohmann::json(*first) : nlohmann::json();
  if (pt.contains(key::tokens)) {
    const auto tokens = json_integer<int64_t>(pt[key::tokens], 0, int64_t(1) << 60);
    if (!tokens && !pt[key::tokens].is_null()) {
      *why = "run_totals.tokens is not a whole number >= 0";
      return std::nullopt;
    }
    t[key::tokens] = tokens ? nlohmann::json(*tokens) : nlohmann::json();
  }
  if (&pt != &prev && pt.contains(key::unknown_reason)) {
    if (!pt[key::unknown_reason].is_string()) {
      *why = "run_totals.unknown_reason is not a string";
      return std::nullopt;
    }
    t[key::unknown_reason] = pt[key::unknown_reason];
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

namespace {

// A whole number of `rec`'s `k` in lo..hi, else empty (absent, null, of another type).
std::optional<int64_t> integer_of(const nlohmann::json& rec, const char* k, int64_t lo,
                                  int64_t hi) {
  if (!rec.is_object() || !rec.contains(k)) return std::nullopt;
  return json_integer<int64_t>(rec[k], lo, hi);
}

// How a session can end without writing its summary.json.
constexpr const char* kLost =
    "(killed by SIGKILL, out of memory or a lost node, or stopped by an error?)";

// Why the summary.json found (`found`: there is one; `why`: previous_session()'s reason it
// cannot be read) does not continue a run resumed at `start`.
std::string not_continued(bool found, const std::string& why, int64_t start) {
  if (!found)
    return fmt::format(
        "there is no {}: the session that wrote the checkpoint of step {} ended "
        "without it {}",
        file::summary, start, kLost);
  if (!why.empty()) return fmt::format("{} cannot be continued: {}", file::summary, why);
  return fmt::format(
      "{} is not of step {}, the checkpoint's: the session that wrote the "
      "checkpoint ended without its summary {}",
      file::summary, start, kLost);
}

}  // namespace

nlohmann::json prior_sessions(const std::optional<std::string>& summary_text,
                              const std::optional<std::string>& open_text, int64_t start,
                              const nlohmann::json& checkpoint_run, std::string* note) {
  std::string why;
  std::optional<nlohmann::json> prev;
  if (summary_text) prev = previous_session(*summary_text, start, &why);
  if (prev && !open_text) return *prev;  // every session so far ended with its summary
  // An earlier session is not accounted for: what the checkpoint and the record of the session
  // that did not end say is kept, the figures summed over sessions are unknown.
  std::optional<nlohmann::json> open;
  if (open_text) {
    std::string open_why;
    open = detail::parse_object(*open_text, &open_why);
  }
  const int64_t big = int64_t(1) << 40;
  const auto open_session = open ? integer_of(*open, key::session, 1, big) : std::nullopt;
  const auto open_start = open ? integer_of(*open, key::session_start_step, 0, big) : std::nullopt;
  const auto ck_session = integer_of(checkpoint_run, key::session, 1, big);
  const auto ck_first = integer_of(checkpoint_run, key::first_step, 0, start);
  const auto ck_tokens = integer_of(checkpoint_run, key::tokens, 0, int64_t(1) << 60);
  const nlohmann::json null;
  nlohmann::json t = nlohmann::json::object();
  // the session that did not end is the last before this one; else the checkpoint's writer
  std::optional<int64_t> sessions = open_text ? open_session : ck_session;
  if (open_text && open_session && ck_session) sessions = std::max(*open_session, *ck_session);
  t[key::sessions] = sessions ? nlohmann::json(*sessions) : null;
  std::optional<int64_t> first = ck_first;
  if (!first && prev) first = integer_of((*prev)[key::run_totals], key::first_step, 0, start);
  t[key::first_step] = first ? nlohmann::json(*first) : null;
  std::optional<int64_t> tokens = ck_tokens;
  if (!tokens && prev) tokens = integer_of((*prev)[key::run_totals], key::tokens, 0, 1LL << 60);
  t[key::tokens] = tokens ? nlohmann::json(*tokens) : null;
  for (const char* k : {key::duration_s, key::wall_s, key::energy_j, key::g_co2e}) t[k] = null;
  // an estimate recorded in the sessions that are accounted for still marks the run's energy
  if (prev && (*prev)[key::run_totals].value(key::energy_estimated, false))
    t[key::energy_estimated] = true;
  const std::string who = open_text
                              ? fmt::format("session {}{} ended without writing {} {}",
                                            open_session ? fmt::format("{} ", *open_session) : "? ",
                                            open_start ? fmt::format("(from step {})", *open_start)
                                                       : std::string("(its record is damaged)"),
                                            file::summary, kLost)
                              : not_continued(summary_text.has_value(), why, start);
  const std::string reason =
      who + "; the time, energy and carbon of that session are unknown, so the run's are" +
      (tokens ? " (its tokens are counted up to the checkpoint's step)" : "");
  t[key::unknown_reason] = reason;
  if (note) *note = reason;
  nlohmann::json out = {{key::step, start}, {key::run_totals, t}};
  // a target reached in a session that is accounted for stands
  if (prev && prev->contains(key::target)) out[key::target] = (*prev)[key::target];
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
