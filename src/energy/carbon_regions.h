// energy/carbon_regions.h: a country's annual average grid carbon intensity, by its ISO 3166-1
// alpha-3 code ("DEU", "FRA", "USA"), for `--carbon-region DEU`, `energy.carbon_region` and
// Python's Meter(carbon="DEU"), as CodeCarbon does when it has no live data.
//
// Source: CodeCarbon's table codecarbon/data/private_infra/global_energy_mix.json (repository
// mlco2/codecarbon, commit 0963f175), field carbon_intensity (gCO2/kWh of electricity
// generation, life-cycle), every entry of year 2021; CodeCarbon compiles it from Our World in
// Data's energy data set, which takes its electricity figures from Ember (Yearly Electricity
// Data) and the Energy Institute's Statistical Review of World Energy. A country's average
// over a year: use a series (--carbon-csv) where the hour matters.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gt::energy {

/// One country of the table.
struct CountryIntensity {
  const char* iso_code;   ///< ISO 3166-1 alpha-3, upper case, e.g. "DEU"
  const char* name;       ///< as CodeCarbon writes it in emissions.csv's country_name
  double g_co2e_per_kwh;  ///< annual average of generation, gCO2e/kWh
};

/// The year of every figure in the table (2021) and its source, in words, for messages.
inline constexpr int kCountryIntensityYear = 2021;
inline constexpr const char* kCountryIntensitySource =
    "CodeCarbon's global_energy_mix.json (Our World in Data / Ember), year 2021";

/// The whole table, sorted by iso_code (205 countries and territories).
const std::vector<CountryIntensity>& country_intensities();

/// The entry of `code` (ISO alpha-3, any case, surrounding spaces ignored); nullopt if none.
std::optional<CountryIntensity> find_country(std::string_view code);

/// The entry of `code`, or Error "<set_by>: unknown country code 'XXX'; expected an ISO
/// 3166-1 alpha-3 code such as DEU, FRA, USA (near matches: DNK (Denmark), ...)": the codes
/// within one edit of it, codes of countries whose name starts with it, or alpha-2 look-alikes
/// ("DE" -> DEU, DNK, ...).
CountryIntensity country_or_throw(std::string_view code, std::string_view set_by);

}  // namespace gt::energy
