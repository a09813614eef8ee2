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
/// first_step (0..start), tokens (>= 0), duration_s, wall_s, energy_j, g_co2e (>= 0 or null:
/// unknown), energy_estimated (true or false; absent where not recorded)}, "target" (when well
/// formed)}; a summary without run_totals (written before them) gives its own figures as the
/// totals, and run_totals without energy_estimated (written before that key) the session's
/// energy_estimated. Empty when it records another step, or (with *why set to the reason,
/// naming the key) when it is not valid JSON or a figure is out of range or of another type.
std::optional<nlohmann::json> previous_session(const std::string& text, int64_t start,
                                               std::string* why);

/// The lines of a metrics.jsonl (text) that a run resumed at `step` keeps: those whose "step" is
/// a whole number <= step (a line without one is kept: a note), each with its line break. A line
/// that is not JSON (cut by a crash) or whose step is not a whole number >= 0 is dropped.
std::string metrics_lines_up_to(const std::string& text, int64_t step);

}  // namespace gt::run
