// energy/carbon_read.cpp: the one reader of carbon-intensity series (carbon.h), in the formats
// grids and services publish them. Each format's reader turns the file into raw rows (a time
// text and a value text or null, with the row's place for messages); one common step parses the
// times, converts the unit, leaves out nulls and finds the series' step and gaps.
//
// Shapes read (detected unless CarbonReadOptions::format names one):
//  greentrain           CSV `Time,Carbon Intensity` (shared/data/carbon/)
//  electricitymaps      CSV export `Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity
//                       gCO₂eq/kWh (direct),Carbon Intensity gCO₂eq/kWh (LCA),...`; API JSON
//                       {"history"|"forecast"|"data": [{"datetime", "carbonIntensity"}]}
//  uk-carbon-intensity  api.carbonintensity.org.uk JSON {"data": [{"from", "to", "intensity":
//                       {"forecast", "actual", "index"}}]}, national or one region's
//                       {"data": {"regionid", "data": [...]}} / {"data": [{"regionid", ...}]}
//  watttime             MOER in lbs/MWh: JSON v3 {"data": [{"point_time", "value"}], "meta":
//                       {"units"}} or v2 [{"point_time", "value"}]; CSV point_time,value or
//                       timestamp,MOER
//  entsoe               ENTSO-E Transparency-style CSV: `MTU (CET/CEST)` (or (UTC), (CET))
//                       with "01.01.2023 00:00 - 01.01.2023 01:00" time ranges
//  csv                  any CSV with a time column and a value column
// The readers (carbon_raw.h): JSON in carbon_read_json.cpp, CSV in carbon_read_csv.cpp; here
// the format's choice between them, the common step and the public functions (carbon.h).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "energy/carbon.h"
#include "energy/carbon_raw.h"
#include "energy/carbon_text.h"

namespace gt::energy {

namespace {
namespace chr = std::chrono;
using carbon_raw::Raw;
using carbon_raw::RawRow;
using carbon_text::implausible_series_warning;
using carbon_text::kTimeForm;
using carbon_text::lower;
using carbon_text::trim;
using carbon_text::utc_text;

// Drops fractional seconds ("00:00:00.000Z" -> "00:00:00Z"): grid series are whole seconds.
std::string drop_fraction(const std::string& t) {
  if (t.size() > 19 && t[19] == '.') {
    std::size_t e = 20;
    while (e < t.size() && std::isdigit(static_cast<unsigned char>(t[e]))) ++e;
    return t.substr(0, 19) + t.substr(e);
  }
  return t;
}

// The common step: times, values, nulls, order, step and gaps.
CarbonCsv finish(Raw raw, const std::string& path, std::int64_t naive_utc_offset_s,
                 const NaiveTimeResolver* resolve, const std::string& zone_name,
                 const CarbonReadOptions& o) {
  CarbonCsv c;
  c.path = path;
  c.format = raw.format;
  c.value_column = raw.value_column;
  c.unit = o.unit.empty() ? raw.unit : o.unit;
  c.note = raw.note;
  c.naive_utc_offset_s = naive_utc_offset_s;
  c.naive_zone = zone_name;
  const double factor =
      carbon_text::unit_factor(c.unit, o.unit.empty() ? path : o.option_name("unit"));
  std::string first_where;
  std::vector<std::int64_t> all_t;  // every row's time, null rows included: the series' step
  std::size_t implausible = 0;      // values outside the plausible range (carbon.h)
  double first_implausible = 0;     // the first of them (gCO2e/kWh) and its row
  std::string first_implausible_where;
  for (RawRow& r : raw.rows) {
    std::string why;
    const std::string tt = drop_fraction(r.time);
    auto t = parse_time(tt, (resolve || r.cet_cest) ? 0 : naive_utc_offset_s, &why);
    if (!t)
      throw Error(fmt::format("{}: time '{}' is not valid ({}); expected {}", r.where,
                              quote_line(r.time, 60), why, kTimeForm));
    const std::optional<std::int64_t> prev =
        c.t_s.empty() ? std::nullopt : std::optional<std::int64_t>(c.t_s.back());
    if (r.cet_cest && !t->explicit_offset) {
      t->unix_s = cet_cest_to_utc(t->unix_s, prev, r.where + " (MTU in CET/CEST)");
      t->explicit_offset = true;                  // the file states its zone
    } else if (resolve && !t->explicit_offset) {  // t->unix_s holds the wall clock as local seconds
      t->unix_s = (*resolve)(t->unix_s, prev, r.where + " time");
    }
    all_t.push_back(t->unix_s);
    if (r.null) {
      ++c.null_rows;
      continue;
    }
    double g = -1;
    if (r.number) {
      g = *r.number;
    } else {
      const std::string_view v = trim(r.value);
      const auto res = std::from_chars(v.data(), v.data() + v.size(), g);
      if (res.ec != std::errc() || res.ptr != v.data() + v.size()) g = -1;
    }
    if (!std::isfinite(g) || g < 0)
      throw Error(fmt::format(
          "{}: {} '{}' is not valid; expected a number >= 0 ({}), or an empty cell or null for "
          "no value",
          r.where, c.value_column,
          r.number ? fmt::format("{:g}", *r.number) : quote_line(r.value, 60), c.unit));
    if (c.t_s.empty()) {
      c.explicit_offsets = t->explicit_offset;
      first_where = r.where;
    } else if (t->explicit_offset != c.explicit_offsets) {
      throw Error(
          fmt::format("{}: time '{}' {} UTC offset but {} {}; expected every row with its offset "
                      "(e.g. +02:00 or Z) or none",
                      r.where, quote_line(r.time, 60), t->explicit_offset ? "has a" : "has no",
                      first_where, c.explicit_offsets ? "has one" : "has none"));
    }
    if (!c.t_s.empty() && t->unix_s <= c.t_s.back())
      throw Error(fmt::format(
          "{}: time '{}' ({}) is not after the previous row ({}); expected increasing times "
          "(a local-time series repeats an hour where daylight saving ends: give each row its "
          "offset, e.g. 2020-10-25 02:30:00+01:00)",
          r.where, quote_line(r.time, 60), utc_text(t->unix_s), utc_text(c.t_s.back())));
    c.t_s.push_back(t->unix_s);
    c.g_co2e_per_kwh.push_back(g * factor);
    if (!plausible_intensity(g * factor) && implausible++ == 0) {
      first_implausible = g * factor;
      first_implausible_where = r.where;
    }
  }
  if (c.t_s.empty())
    throw Error(
        fmt::format("{}: no values ({} row(s), {} of them null); expected at least one row with a "
                    "carbon intensity",
                    path, raw.rows.size(), c.null_rows));
  if (implausible > 0)
    c.implausible_warning =
        implausible_series_warning(c, implausible, first_implausible, first_implausible_where, o);
  if (c.t_s.size() > 1) {
    // the step is the median spacing of all rows (a null row still has its time); a hole is
    // a spacing of the rows with values longer than that
    std::vector<std::int64_t> steps, sorted;
    for (std::size_t i = 1; i < c.t_s.size(); ++i) steps.push_back(c.t_s[i] - c.t_s[i - 1]);
    for (std::size_t i = 1; i < all_t.size(); ++i)
      if (all_t[i] > all_t[i - 1]) sorted.push_back(all_t[i] - all_t[i - 1]);
    std::nth_element(sorted.begin(),
                     sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
    c.step_s = sorted[sorted.size() / 2];
    for (std::size_t i = 0; i < steps.size(); ++i)
      if (steps[i] > c.step_s) c.gaps.push_back({c.t_s[i], c.t_s[i + 1]});
  }
  return c;
}

CarbonCsv read_series(const std::string& path, std::int64_t naive_utc_offset_s,
                      const NaiveTimeResolver* resolve, const std::string& zone_name,
                      const CarbonReadOptions& o) {
  // a format, unit or value that is not one of the choices, before the file is opened: a JSON
  // file read with an unknown format said only that it was no series this reader knows
  o.check_choices();
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(
        fmt::format("{}: cannot open the carbon-intensity file; expected a readable file ({})",
                    path, carbon_formats_text()));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string_view rest(text);
  if (rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);  // UTF-8 byte order mark
  const std::size_t first = rest.find_first_not_of(" \t\r\n");
  const bool is_json =
      first != std::string_view::npos && (rest[first] == '{' || rest[first] == '[');
  const std::string f = lower(o.format);
  if (is_json && (f == "greentrain" || f == "entsoe" || f == "csv"))
    throw Error(
        fmt::format("{}: a JSON file; expected a CSV for {} {}", path, o.option_name("format"), f));
  Raw raw = is_json ? carbon_raw::read_json(std::string(rest), path, o)
                    : carbon_raw::read_table(rest, path, o);
  return finish(std::move(raw), path, naive_utc_offset_s, resolve, zone_name, o);
}

}  // namespace

std::string quote_line(std::string_view text, std::size_t max_chars) {
  std::string_view s = text.substr(0, text.find('\n'));
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  const bool more_lines = s.size() < text.size() && text.find('\n') + 1 < text.size();
  std::string out;
  std::size_t i = 0;
  for (; i < s.size() && out.size() < max_chars; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (s.substr(i, 3) == "\xEF\xBB\xBF") {
      out += "\\ufeff";
      i += 2;
    } else if (s.substr(i, 2) == "\xC2\xA0") {
      out += "\\u00a0";
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i < s.size() || more_lines) out += "...";
  return out;
}

std::int64_t cet_cest_to_utc(std::int64_t local_s, std::optional<std::int64_t> prev_unix_s,
                             const std::string& where) {
  const chr::sys_seconds local{chr::seconds{local_s}};
  const chr::year y = chr::year_month_day{chr::floor<chr::days>(local)}.year();
  // 01:00 UTC on the last Sunday of month m of year y, unix seconds
  auto change = [y](chr::month m) -> std::int64_t {
    const chr::sys_days d{chr::year_month_weekday_last{y, m, chr::weekday_last{chr::Sunday}}};
    return chr::sys_seconds{d + chr::hours{1}}.time_since_epoch().count();
  };
  const std::int64_t start = change(chr::March), end = change(chr::October);
  const std::int64_t as_cet = local_s - 3600, as_cest = local_s - 7200;
  const bool cet_ok = as_cet < start || as_cet >= end;
  const bool cest_ok = as_cest >= start && as_cest < end;
  if (cet_ok && cest_ok) return !prev_unix_s || as_cest > *prev_unix_s ? as_cest : as_cet;
  if (cest_ok) return as_cest;
  if (cet_ok) return as_cet;
  throw Error(fmt::format(
      "{}: {} does not exist in Central European time (the clocks go from 02:00 to 03:00 "
      "that night); expected a time outside the skipped hour",
      where, format_wall_time(local_s, 0)));
}

CarbonCsv read_carbon_csv(const std::string& path, std::int64_t naive_utc_offset_s,
                          const CarbonReadOptions& opt) {
  return read_series(path, naive_utc_offset_s, nullptr, "", opt);
}

CarbonCsv read_carbon_csv(const std::string& path, const NaiveTimeResolver& resolve,
                          const std::string& zone_name, const CarbonReadOptions& opt) {
  return read_series(path, 0, &resolve, zone_name, opt);
}

}  // namespace gt::energy
