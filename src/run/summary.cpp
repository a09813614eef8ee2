// run/summary.cpp: see summary.h.
#include "run/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/bytes_json.h"
#include "core/error.h"
#include "run/fields.h"

namespace gt::run {

std::string path_in(const std::string& dir, const char* name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

const Problem* Summary::problem_with(std::string_view key) const {
  for (const auto& p : problems)
    if (p.key == key) return &p;
  return nullptr;
}

bool Summary::run_energy_estimated() const {
  if (run_totals && run_totals->energy_estimated) return *run_totals->energy_estimated;
  return energy_estimated.value_or(false);
}

namespace {

RunTotals read_totals(detail::Fields f) {
  RunTotals t;
  t.sessions = f.integer(key::sessions);
  t.first_step = f.integer(key::first_step);
  t.tokens = f.integer(key::tokens);
  t.duration_s = f.number(key::duration_s);
  t.wall_s = f.number(key::wall_s);
  t.energy_j = f.number(key::energy_j);
  t.g_co2e = f.number(key::g_co2e);
  t.energy_estimated = f.boolean(key::energy_estimated);
  t.unknown_reason = f.text(key::unknown_reason);
  return t;
}

Interruption read_interruption(detail::Fields f) {
  Interruption in;
  in.checkpoint_write_s = f.number(key::checkpoint_write_s);
  in.restart_s = f.number(key::restart_s);
  in.restart_resumed = f.boolean(key::restart_resumed);
  in.seconds_unknown_reason = f.text(key::seconds_unknown_reason);
  return in;
}

Target read_target(const nlohmann::json& j, detail::Fields f) {
  Target t;
  t.raw = j;
  t.target_loss = f.number(key::target_loss);
  t.reached = f.boolean(key::reached);
  t.step = f.integer(key::step);
  t.tokens = f.integer(key::tokens);
  t.seconds = f.number(key::seconds);
  t.energy_j = f.number(key::energy_j);
  t.g_co2e = f.number(key::g_co2e);
  t.val_loss = f.number(key::val_loss);
  t.energy_estimated = f.boolean(key::energy_estimated);
  t.stopped_at_target = f.boolean(key::stopped_at_target);
  t.reason = f.text(key::reason);
  t.energy_unknown_reason = f.text(key::energy_unknown_reason);
  return t;
}

}  // namespace

std::optional<Summary> read_summary(std::string_view text, std::string* why) {
  const std::optional<nlohmann::json> parsed = detail::parse_object(text, why);
  if (!parsed) return std::nullopt;
  const nlohmann::json& j = *parsed;
  Summary s;
  detail::Fields f(j, "", s.problems);
  if (j.contains(key::schema_version)) {
    const auto v = f.integer(key::schema_version, 1);
    if (v && *v > kSchemaVersion)
      s.problems.push_back(
          {key::schema_version,
           fmt::format("schema_version is {}; this greentrain reads version {} (the keys it "
                       "knows are read, others are left out)",
                       *v, kSchemaVersion)});
    s.schema_version = v ? static_cast<int>(std::min<int64_t>(*v, 1 << 30)) : kSchemaVersion;
  }
  s.step = f.integer(key::step);
  s.max_steps = f.integer(key::max_steps);
  s.tokens = f.integer(key::tokens);
  s.session_start_step = f.integer(key::session_start_step);
  s.interrupted_by_signal = f.integer(key::interrupted_by_signal);
  s.last_loss = f.number(key::last_loss);
  s.val_loss = f.number(key::val_loss);
  s.duration_s = f.number(key::duration_s);
  s.wall_s = f.number(key::wall_s);
  s.tokens_per_s = f.number(key::tokens_per_s);
  s.memory_planned_bytes = f.count(key::memory_planned_bytes);
  s.memory_runtime_bytes = f.count(key::memory_runtime_bytes);
  s.memory_peak_rss_bytes = f.count(key::memory_peak_rss_bytes);
  s.energy_j = f.number(key::energy_j);
  s.joules_per_token = f.number(key::joules_per_token);
  s.g_co2e = f.number(key::g_co2e);
  s.tokens_per_joule = f.number(key::tokens_per_joule);
  s.energy_estimated = f.boolean(key::energy_estimated);
  s.energy_unknown = f.boolean(key::energy_unknown);
  s.energy_unknown_reason = f.text(key::energy_unknown_reason);
  s.energy_method = f.text(key::energy_method);
  if (const auto* e = f.object(key::energy))
    s.energy_flags =
        detail::Fields(*e, std::string(key::energy) + ".", s.problems).texts(key::flags);
  if (const auto* t = f.object(key::run_totals))
    s.run_totals = read_totals(detail::Fields(*t, std::string(key::run_totals) + ".", s.problems));
  if (const auto* in = f.object(key::interruption))
    s.interruption =
        read_interruption(detail::Fields(*in, std::string(key::interruption) + ".", s.problems));
  if (const auto* t = f.object(key::target))
    s.target = read_target(*t, detail::Fields(*t, std::string(key::target) + ".", s.problems));
  if (const auto* p = f.object(key::products)) {
    detail::Fields pf(*p, std::string(key::products) + ".", s.problems);
    s.products_emulated = pf.boolean(key::emulated);
    s.products_emulated_reason = pf.text(key::emulated_reason);
  }
  return s;
}

Summary load_summary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(
        fmt::format("{}: cannot open; expected the summary.json of a finished greentrain "
                    "run",
                    shown_bytes(path)));
  std::stringstream text;
  text << in.rdbuf();
  std::string why;
  auto s = read_summary(text.str(), &why);
  if (!s)
    throw Error(fmt::format("{}: {}; expected a greentrain summary.json", shown_bytes(path), why));
  return std::move(*s);
}

}  // namespace gt::run
