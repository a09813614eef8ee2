// energy/carbon_text.h: text helpers the carbon-intensity parsers share (carbon.cpp's times,
// carbon_read.cpp's CSV and JSON series, carbon_options.cpp's choices). Internal to gt_energy.
#pragma once
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "energy/carbon.h"

namespace gt::energy::carbon_text {

/// s without leading and trailing blanks, tabs, carriage returns and double quotes.
inline std::string_view trim(std::string_view s) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '"' || c == '\r'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

/// s trimmed (trim) and in lower case (ASCII): how names of formats, units and kinds compare.
inline std::string lower(std::string_view s) {
  std::string out(trim(s));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// The factor from `unit` (any case: "g/kWh", "kg/kWh", "lbs/MWh", ...; CarbonReadOptions::unit)
/// to gCO2e/kWh. Throws Error "WHERE: unit 'U' is not known; expected ..." for another unit.
double unit_factor(const std::string& unit, const std::string& where);

/// Unix seconds as UTC wall time with a Z, e.g. "2026-12-06 06:00:00Z".
inline std::string utc_text(std::int64_t unix_s) { return format_wall_time(unix_s, 0) + "Z"; }

/// The time forms the parsers take, for their error messages.
inline constexpr const char* kTimeForm =
    "'YYYY-MM-DD HH:MM[:SS]', naive or with its offset (Z, +02:00, -0500, +01)";

/// CarbonCsv::implausible_warning for the `n` values of `c` outside the plausible range
/// (plausible_intensity), the first of them `first` (gCO2e/kWh) at `where` ("file.csv:2"): the
/// file, how many, the likely unit mistake and how `o`'s unit option corrects it.
std::string implausible_series_warning(const CarbonCsv& c, std::size_t n, double first,
                                       const std::string& where, const CarbonReadOptions& o);

}  // namespace gt::energy::carbon_text
