// report/series.h: the chart series of one run, derived from its metrics.jsonl lines.
#pragma once
#include <nlohmann/json.hpp>
#include <set>

#include "report/report.h"

namespace gt::report {

/// The series the page's charts plot, as JSON:
///   name, estimated (any energy figure of the run is an estimate),
///   train / val: [{tokens, s, j, loss}]: loss against cumulative tokens, training seconds (sum
///     of step_time_s) and joules (sum of the logged intervals' energy_j, which leave out
///     validation; null from the first unknown interval on),
///   lines: readable metrics.jsonl lines,
///   power: [{s0, s, <domain>: W}] each logged interval from s0 to s (power_w_by_domain), domains:
///     their names,
///   jpt: [{tokens, jpt}] joules per token of each interval (J/token, null when unknown),
///   carbon: [{s, intensity (gCO2e/kWh = g / (J / 3.6e6)), g_total (cumulative gCO2e)}],
///   targets: the points where train.target_loss was first reached.
nlohmann::json run_series(const RunData& run);

}  // namespace gt::report
