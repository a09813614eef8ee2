// energy/carbon_raw.h: the rows of a carbon-intensity series as its format's reader gives them,
// before their times and values are checked (carbon_read.cpp's common step), and the two
// readers: JSON (carbon_read_json.cpp) and CSV (carbon_read_csv.cpp). Internal to gt_energy.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "energy/carbon.h"
#include "energy/carbon_text.h"

namespace gt::energy::carbon_raw {

/// One data row before its time and value are checked.
struct RawRow {
  std::string where;             // "file.csv:12" or "file.json data[3]"
  std::string time;              // the time as text
  std::string value;             // the value as text (CSV) ...
  std::optional<double> number;  // ... or as a JSON number
  bool null = false;             // no value (empty, null, NaN, n/e)
  bool cet_cest = false;         // a naive time in Central European time (ENTSO-E MTU (CET/CEST))
};

/// A file's rows, with what its reader found: the format, the value column, its unit and a
/// note on the choice (empty: none).
struct Raw {
  std::string format, value_column, unit = "g/kWh", note;
  std::vector<RawRow> rows;
};

/// True when s starts with p; true when s contains p.
inline bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
inline bool contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

/// True for the texts that mean "no value": empty, null, NaN, n/e, n/a, na, -, none.
inline bool null_text(std::string_view v) {
  const std::string l = carbon_text::lower(v);
  return l.empty() || l == "null" || l == "nan" || l == "n/e" || l == "n/a" || l == "na" ||
         l == "-" || l == "none";
}

/// Which values a series with both forecasts and actual values is read for: "actual" or
/// "forecast", the one o.value_kind asks for, else o.preferred_value_kind where the file has
/// values of it, else the other. Throws gt::Error naming the option when o.value_kind is
/// neither, or naming `path` when the file has none of the kind asked for.
std::string choose_kind(const CarbonReadOptions& o, bool has_forecast, bool has_actual,
                        const std::string& path);

/// The rows of a JSON series (UK Carbon Intensity API, Electricity Maps, WattTime), `text` the
/// whole file at `path`. Throws gt::Error naming the file (and the entry) when it is not valid
/// JSON, not a known shape, or not the format o.format names.
Raw read_json(const std::string& text, const std::string& path, const CarbonReadOptions& o);

/// The rows of a CSV series (greentrain, Electricity Maps export, WattTime, ENTSO-E, any CSV),
/// `rest` the file's text after its byte order mark. Throws gt::Error naming file:line when the
/// header has no time or value column, a row is wider than the header, or o names a column or
/// format the file does not have.
Raw read_table(std::string_view rest, const std::string& path, const CarbonReadOptions& o);

}  // namespace gt::energy::carbon_raw
