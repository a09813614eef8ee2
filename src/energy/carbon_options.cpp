// energy/carbon_options.cpp: the choices of CarbonReadOptions (carbon.h), their one list each
// (formats, units, value kinds), and the checks of the options that read no file: a value that
// is not one of the choices, options that say how a series is read given without one.
#include <fmt/format.h>

#include <optional>

#include "core/error.h"
#include "energy/carbon.h"
#include "energy/carbon_text.h"

namespace gt::energy {

namespace {

using carbon_text::lower;

constexpr double kLbPerKg = 0.45359237;  // 1 lb = 0.45359237 kg (international pound, exact)

constexpr const char* kUnitsText =
    "g/kWh (= gCO2e/kWh = kg/MWh), kg/MWh, kg/kWh (= t/MWh) or lbs/MWh";

// The factor from `unit` to gCO2e/kWh; nullopt for a unit not known.
std::optional<double> known_unit_factor(const std::string& unit) {
  const std::string u = lower(unit);
  if (u == "g/kwh" || u == "gco2/kwh" || u == "gco2e/kwh" || u == "gco2eq/kwh" || u == "kg/mwh" ||
      u == "kg_co2_per_mwh" || u == "g_co2_per_kwh" || u == "kgco2/mwh")
    return 1.0;
  if (u == "kg/kwh" || u == "kgco2/kwh" || u == "kgco2e/kwh" || u == "t/mwh") return 1000.0;
  if (u == "lbs/mwh" || u == "lb/mwh" || u == "lbs_co2_per_mwh" || u == "lbs co2/mwh")
    return kLbPerKg;
  return std::nullopt;
}

bool known_format(const std::string& f) {
  for (const char* k : {"", "auto", "greentrain", "electricitymaps", "uk-carbon-intensity",
                        "watttime", "entsoe", "csv"})
    if (f == k) return true;
  return false;
}

}  // namespace

double carbon_text::unit_factor(const std::string& unit, const std::string& where) {
  if (const auto f = known_unit_factor(unit)) return *f;
  throw Error(fmt::format("{}: unit '{}' is not known; expected {}", where, quote_line(unit, 40),
                          kUnitsText));
}

const char* carbon_formats_text() {
  return "auto, greentrain (Time,Carbon Intensity), electricitymaps (CSV export or API JSON), "
         "uk-carbon-intensity (api.carbonintensity.org.uk JSON), watttime (MOER CSV or JSON), "
         "entsoe (MTU CSV), csv (any time and value columns)";
}

std::string carbon_choice_error(std::string_view what, std::string_view value) {
  const std::string v = lower(value);
  const char* expected = nullptr;
  if (what == "format") {
    if (!known_format(v)) expected = carbon_formats_text();
  } else if (what == "unit") {
    if (!v.empty() && !known_unit_factor(v)) expected = kUnitsText;
  } else if (what == "value") {
    if (!v.empty() && v != "actual" && v != "forecast") expected = "actual or forecast";
  } else {
    throw Error(
        fmt::format("carbon_choice_error: '{}' has no choices; expected format, unit or "
                    "value",
                    what));  // a caller's mistake
  }
  if (!expected) return "";
  return fmt::format("'{}' is not known; expected {}", quote_line(value, 40), expected);
}

void CarbonReadOptions::check_choices() const {
  if (auto e = carbon_choice_error("format", format); !e.empty())
    throw Error(option_name("format") + " " + e);
  if (auto e = carbon_choice_error("unit", unit); !e.empty())
    throw Error(option_name("unit") + ": unit " + e);
  if (auto e = carbon_choice_error("value", value_kind); !e.empty())
    throw Error(option_name("value") + " " + e);
}

void CarbonReadOptions::refuse_without_series(const std::string& series, double utc_offset_h,
                                              const std::string& utc_offset_option) const {
  const bool command_line = option_prefix.rfind("--", 0) == 0;
  for (const auto& [what, value] :
       {std::pair{"format", &format}, std::pair{"column", &value_column},
        std::pair{"time_column", &time_column}, std::pair{"unit", &unit},
        std::pair{"value", &value_kind}})
    if (!value->empty())
      throw Error(fmt::format(
          "{}: says how a series file is read; expected {} with it (a constant intensity is "
          "in gCO2e/kWh)",
          command_line ? option_name(what) + " " + *value
                       : option_name(what) + " = '" + *value + "'",
          series));
  if (utc_offset_h == 0) return;  // 0 is UTC, the default: nothing to ignore
  // the command line's option has no unit suffix (--carbon-utc-offset); keys have (_h)
  const std::string name = !utc_offset_option.empty() ? utc_offset_option
                           : command_line             ? option_name("utc_offset")
                                                      : option_name("utc_offset_h");
  throw Error(fmt::format("{}{}{}: the time zone of a series' times; expected {} with it", name,
                          name.rfind("--", 0) == 0 ? " " : " = ", utc_offset_h, series));
}

}  // namespace gt::energy
