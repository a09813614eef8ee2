// energy/measurement_output.h: writing measurements: JSON, one-line summaries;
// CodeCarbon-compatible `emissions.csv` rows are in emissions_csv.h (included).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "energy/emissions_csv.h"
#include "energy/meter.h"

namespace gt::energy {

/// The measurement as JSON: name, duration_s, energy_j, avg_power_w (null if undefined),
/// peak_power_w (null whenever avg_power_w is: the window is shorter than a sensor's refresh
/// period, and flags say so), g_co2e, carbon_source, carbon_origin, carbon_g_per_kwh (null if
/// unknown), estimated, method, flags, domains[...] (sensor, domain, index, method, estimated,
/// energy_j, g_co2e, avg_power_w, peak_power_w (both null when undefined), wraps, untrusted_s,
/// incomplete, flags). When no sensor counted, energy_j, peak_power_w and g_co2e are null and
/// energy_unknown_reason says why.
nlohmann::json to_json(const Measurement& m);

/// Writes `j` to `path` atomically (temp file then rename), pretty-printed.
void write_json_file(const std::string& path, const nlohmann::json& j);

/// One line: "12.3 W, 0.45 J/token (estimated)"; the J/token part only when tokens > 0,
/// "power undefined" when the window was too short, "energy unknown" when no sensor counted.
std::string summary_line(const Measurement& m, std::optional<double> tokens = std::nullopt);

/// Short carbon text for progress lines: "0.012 gCO2e (475 gCO2e/kWh, default)", the origin
/// being Measurement::carbon_origin (default | constant | csv).
std::string carbon_short(const Measurement& m);

}  // namespace gt::energy
