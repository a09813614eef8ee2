// energy/report.h: writing measurements. CodeCarbon-compatible `emissions.csv` rows (same column
// names and units as CodeCarbon 2.x: duration s, emissions kg CO2e, emissions_rate kg/s, powers
// W, energies kWh, ram_total_size GB) plus four greentrain columns at the end (energy_method,
// energy_flags, so an estimate is marked wherever it is written; carbon_intensity in gCO2e/kWh
// and carbon_source, so the intensity behind `emissions` and its origin are written with it);
// JSON; one-line summaries.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "energy/meter.h"

namespace gt::energy {

/// Fields of a CodeCarbon row that do not come from the measurement.
struct RunInfo {
  std::string project_name = "greentrain";
  std::string run_id;  ///< empty: a random UUID4 is generated
  std::string experiment_id;
  std::string country_name, country_iso_code, region;  ///< region: carbon region label
  double pue = 1.0;                       ///< power usage effectiveness (written, not applied)
  std::string tracking_mode = "machine";  ///< "machine" or "process"
};

/// CodeCarbon's emissions.csv column names, in order, then energy_method, energy_flags,
/// carbon_intensity (gCO2e/kWh, Measurement::carbon_g_per_kwh; empty when unknown) and
/// carbon_source (Measurement::carbon_source).
const std::vector<std::string>& codecarbon_columns();

/// One CSV row (no newline) for `m`; fields with commas or quotes are quoted. When the energy
/// is unknown its energy, power and emissions fields are empty (never 0) and energy_flags
/// starts with "energy unknown: <reason>".
std::string codecarbon_row(const Measurement& m, const RunInfo& run);

/// Appends one row to the CSV at `path`, writing the header if the file is new. The file is
/// written to "<path>.tmp.<pid>" and renamed, so readers never see half a file. A file with
/// another header is kept as "<path>.bak" and a new one started (as CodeCarbon does).
/// Throws EnergyError naming the path on I/O failure.
void append_codecarbon_csv(const std::string& path, const Measurement& m, const RunInfo& run);

/// `<run_dir>/energy.csv` (DESIGN.md: every run folder's energy.csv is CodeCarbon-compatible).
inline void append_run_energy_csv(const std::string& run_dir, const Measurement& m,
                                  const RunInfo& run) {
  append_codecarbon_csv(run_dir + "/energy.csv", m, run);
}

/// The measurement as JSON: name, duration_s, energy_j, avg_power_w (null if undefined),
/// peak_power_w, g_co2e, carbon_source, carbon_origin, carbon_g_per_kwh (null if unknown),
/// estimated, method, flags, domains[...] (sensor, domain, index, method, estimated, energy_j,
/// g_co2e, avg_power_w, peak_power_w, wraps, untrusted_s, incomplete, flags). When no sensor
/// counted, energy_j, peak_power_w and g_co2e are null and energy_unknown_reason says why.
nlohmann::json to_json(const Measurement& m);

/// Writes `j` to `path` atomically (temp file then rename), pretty-printed.
void write_json_file(const std::string& path, const nlohmann::json& j);

/// One line: "12.3 W, 0.45 J/token (estimated)"; the J/token part only when tokens > 0,
/// "power undefined" when the window was too short, "energy unknown" when no sensor counted.
std::string summary_line(const Measurement& m, std::optional<double> tokens = std::nullopt);

/// Short carbon text for progress lines: "0.012 gCO2e (475 gCO2e/kWh, default)", the origin
/// being Measurement::carbon_origin (default | constant | csv).
std::string carbon_short(const Measurement& m);

/// A random UUID4 string (CodeCarbon's run_id form).
std::string make_run_id();

}  // namespace gt::energy
