// run/resume.h: what a resumed `greentrain train` reads back from its own run folder, as pure
// functions of the files' text (so that the fuzz targets reach them): the previous session's totals
// from summary.json, and the metrics.jsonl lines a resumed run keeps. Everything read back is
// checked as any input is (whole numbers in range, finite figures); a damaged file is never
// trusted, and never undefined behaviour.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace gt::run {

/// The session a resumed run continues, from the text of the summary.json its previous session
/// left, when that session ended at step `start`: {"step", "run_totals": {sessions (>= 1),
/// first_step (0..start), tokens (>= 0) (these three null where unknown), duration_s, wall_s,
/// energy_j, g_co2e (>= 0 or null: unknown), energy_estimated (true or false; absent where not
/// recorded), unknown_reason (a string, where recorded)}, "target" (when well
/// formed)}; a summary without run_totals (written before them) gives its own figures as the
/// totals, and run_totals without energy_estimated (written before that key) the session's
/// energy_estimated. Empty when it records another step, or (with *why set to the reason,
/// naming the key) when it is not valid JSON or a figure is out of range or of another type.
std::optional<nlohmann::json> previous_session(const std::string& text, int64_t start,
                                               std::string* why);

/// What came before a session of a run, decided as it starts: previous_session()'s shape,
/// {"step": start, "run_totals": {...}, "target"?}. The totals are the summary.json's when the
/// session that wrote it ended at `start` and no other session began after it; otherwise an
/// earlier session is not accounted for, and duration_s, wall_s, energy_j and g_co2e are null
/// with run_totals.unknown_reason (also set in *note) naming it. Then sessions, first_step and
/// tokens come from the checkpoint's "run" record ({"session", "first_step", "tokens"}, the
/// session that wrote it and the run's tokens up to its step; null where not recorded) and
/// open_text (session_open.json's, the session that began and did not end), null where neither
/// says.
/// summary_text: RUN_DIR/summary.json's text (empty: none); open_text: RUN_DIR/
/// session_open.json's (empty: none); checkpoint_run: the checkpoint's "run" record (null: an
/// older checkpoint without it). Never throws: a damaged file makes the totals unknown.
nlohmann::json prior_sessions(const std::optional<std::string>& summary_text,
                              const std::optional<std::string>& open_text, int64_t start,
                              const nlohmann::json& checkpoint_run, std::string* note);

/// The lines of a metrics.jsonl (text) that a run resumed at `step` keeps: those whose "step" is
/// a whole number <= step (a line without one is kept: a note), each with its line break. A line
/// that is not JSON (cut by a crash) or whose step is not a whole number >= 0 is dropped.
std::string metrics_lines_up_to(const std::string& text, int64_t step);

}  // namespace gt::run
