// energy/emissions_csv.h: CodeCarbon-compatible `emissions.csv` rows. The columns are CodeCarbon
// 3.x's 38 (codecarbon/output_methods/emissions_data.py: duration s, emissions kg CO2e,
// emissions_rate kg/s, powers W, energies kWh, water_consumed L, ram_total_size GB, pue, wue)
// then four of greentrain's (energy_method and energy_flags, so an estimate is marked wherever it
// is written; carbon_intensity in gCO2e/kWh and carbon_source, the intensity behind `emissions`
// and its origin).
//
// Appending is safe with many writers (Slurm job arrays, MPI ranks, Python workers): the file is
// opened with O_APPEND and each row is written under an exclusive lock (flock), so no row is
// lost. A file is never moved or overwritten: a file with another header (CodeCarbon 2.x's,
// greentrain's older one, any column order) gets the row under its own header (the columns both
// have; the file's other columns empty), and a file that is not an emissions CSV is refused with
// the reason.
#pragma once
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
  std::string country_name, country_iso_code;
  /// CodeCarbon's region: the province, state or cloud region the figures are for, as the user
  /// named it; empty when none was (not the intensity's label, e.g. "world average").
  std::string region;
  /// The Python interpreter's version (platform.python_version()) when the row is written from
  /// Python, as CodeCarbon writes it; empty from the program.
  std::string python_version;
  /// Power usage effectiveness, in [1, 10]. It multiplies every energy column and the emissions
  /// as CodeCarbon's does (EmissionsTracker multiplies each device's energy by its pue before
  /// adding it up); the power columns stay the devices' own.
  double pue = 1.0;
  /// Water usage effectiveness, L/kWh in [0, 100] (The Green Grid's WUE): water_consumed is
  /// energy_consumed x wue. Empty: the water is unknown (its column and wue are empty, never 0).
  std::optional<double> wue;
  std::string tracking_mode = "machine";  ///< "machine" or "process"
};

/// Throws Error naming pue or wue when it is out of its range (above) or not finite.
void check_run_info(const RunInfo& run);

/// CodeCarbon 3.x's emissions.csv column names, in its order, then energy_method, energy_flags,
/// carbon_intensity (gCO2e/kWh, Measurement::carbon_g_per_kwh; empty when unknown) and
/// carbon_source (Measurement::carbon_source).
const std::vector<std::string>& codecarbon_columns();

/// The row's fields for `m`, one per codecarbon_columns() entry, unquoted. When the energy is
/// unknown its energy, power, water and emissions fields are empty (never 0) and energy_flags
/// starts with "energy unknown: <reason>". cpu_power, gpu_power and ram_power (W) are the sum of
/// their domains' avg_power_w: empty when one of them has none (window shorter than the
/// sensor's refresh period, said in energy_flags), 0 when the machine has no such domain
/// (CodeCarbon's 0 W for no GPU). gpu_power and gpu_energy are empty when GPUs were asked for
/// and not measured (the meter's kGpusNotMeasured flag, in energy_flags). energy_method is
/// "measured; <method>", "estimated; <method>", or "none" when no sensor counted. The
/// utilization and ram_used_gb columns are empty (greentrain does not sample them). Throws
/// Error from check_run_info.
std::vector<std::string> codecarbon_fields(const Measurement& m, const RunInfo& run);

/// One CSV row (no newline) of codecarbon_fields; fields with commas, quotes or line breaks are
/// quoted.
std::string codecarbon_row(const Measurement& m, const RunInfo& run);

/// What append_codecarbon_csv did.
struct CsvAppend {
  bool created = false;                 ///< the file was new or empty: the header was written
  std::vector<std::string> left_out;    ///< our columns the file's header lacks (not written)
  std::vector<std::string> left_empty;  ///< the file's columns we have no value for (empty)
};

/// Appends one row to the CSV at `path` (created with the header when missing or empty), under
/// an exclusive lock, with O_APPEND: concurrent writers in any processes never lose a row. A
/// file with another header gets the row under that header, in its order (CsvAppend says which
/// columns were left out). Throws Error naming the path: the file cannot be opened or
/// written (a failed write is cut back, so no half row is left), or its first line is not an
/// emissions.csv header (no `timestamp` and `energy_consumed` columns): it is left as it was.
CsvAppend append_codecarbon_csv(const std::string& path, const Measurement& m, const RunInfo& run);

/// Throws Error naming `path` when a row could not be appended there (the folder is
/// missing or read-only, the path is a folder, the file is not writable, or its header is not
/// an emissions.csv header); writes nothing. For commands that check their outputs before they run.
void check_codecarbon_csv_writable(const std::string& path);

/// A random UUID4 string (CodeCarbon's run_id form).
std::string make_run_id();

}  // namespace gt::energy
