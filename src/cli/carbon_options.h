// cli/carbon_options.h: the options that say how a carbon-intensity file is read, shared by
// `measure` and `schedule` (train has the same as energy.carbon_* keys): --carbon-format,
// --carbon-column, --carbon-time-column, --carbon-unit, --carbon-value (energy/carbon.h).
#pragma once
#include <CLI/CLI.hpp>

#include "energy/carbon.h"

namespace gt::cli {

/// A check of a carbon reading option's value against its choices (`what`: "format", "unit" or
/// "value"; energy::carbon_choice_error) while the command line is read: another value is a
/// usage error (exit 2), "--carbon-unit: 'g' is not known; expected g/kWh ...", before the
/// file is opened.
inline CLI::Validator carbon_choice(const char* what) {
  return CLI::Validator(
      [what](std::string& value) { return energy::carbon_choice_error(what, value); }, "",
      std::string("carbon ") + what);
}

/// Adds the reading options of a carbon-intensity file to `c`, filling `o`. A format, unit or
/// value that is not one of the choices is refused while the command line is read (exit 2).
inline void add_carbon_read_options(CLI::App* c, energy::CarbonReadOptions& o) {
  c->add_option("--carbon-format", o.format,
                std::string("format of the carbon file (default: detected): ") +
                    energy::carbon_formats_text())
      ->check(carbon_choice("format"));
  c->add_option("--carbon-column", o.value_column,
                "the carbon file's intensity column, by name or a unique part of it (e.g. LCA or "
                "direct for an Electricity Maps export); default: the format's");
  c->add_option("--carbon-time-column", o.time_column,
                "the carbon file's time column (default: the format's, or the one named time, "
                "datetime, timestamp, date, from, point_time)");
  c->add_option("--carbon-unit", o.unit,
                "unit of the carbon file's values: g/kWh (= gCO2e/kWh = kg/MWh), kg/MWh, kg/kWh "
                "(= t/MWh) or lbs/MWh (default: the format's; WattTime: lbs/MWh)")
      ->check(carbon_choice("unit"));
  c->add_option("--carbon-value", o.value_kind,
                "sources with forecast and actual values (UK API, CSVs with both columns): actual "
                "or forecast (default: actual where the file has actual values)")
      ->check(carbon_choice("value"));
}

}  // namespace gt::cli
