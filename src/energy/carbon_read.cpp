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
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "energy/carbon.h"
#include "energy/carbon_text.h"

namespace gt::energy {

namespace {
namespace chr = std::chrono;
using carbon_text::implausible_series_warning;
using carbon_text::kTimeForm;
using carbon_text::lower;
using carbon_text::trim;
using carbon_text::utc_text;
using nlohmann::json;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

// One CSV line split at `sep`, double-quoted fields may hold `sep` ("" is a quote).
std::vector<std::string> split_csv(std::string_view line, char sep) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == sep) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  for (auto& f : out) f = std::string(trim(f));
  return out;
}

// One data row before its time and value are checked.
struct RawRow {
  std::string where;             // "file.csv:12" or "file.json data[3]"
  std::string time;              // the time as text
  std::string value;             // the value as text (CSV) ...
  std::optional<double> number;  // ... or as a JSON number
  bool null = false;             // no value (empty, null, NaN, n/e)
  bool cet_cest = false;         // a naive time in Central European time (ENTSO-E MTU (CET/CEST))
};

struct Raw {
  std::string format, value_column, unit = "g/kWh", note;
  std::vector<RawRow> rows;
};

bool null_text(std::string_view v) {
  const std::string l = lower(v);
  return l.empty() || l == "null" || l == "nan" || l == "n/e" || l == "n/a" || l == "na" ||
         l == "-" || l == "none";
}

// --- JSON -----------------------------------------------------------------------------------

// The text of a JSON time field, or empty.
std::string json_text(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void json_value(RawRow& r, const json* v, const std::string& what) {
  if (!v || v->is_null()) {
    r.null = true;
  } else if (v->is_number()) {
    r.number = v->get<double>();
  } else if (v->is_string()) {
    r.value = v->get<std::string>();
    r.null = null_text(r.value);
  } else {
    throw Error(fmt::format("{}: {} is {}; expected a number (or null)", r.where, what,
                            quote_line(v->dump(), 60)));
  }
}

// "actual" or "forecast": the one asked for, else the preferred one where the file has values
// of it, else the other.
std::string choose_kind(const CarbonReadOptions& o, bool has_forecast, bool has_actual,
                        const std::string& path) {
  const std::string kind = lower(o.value_kind);
  o.check_choices();  // a value_kind other than actual or forecast
  if (kind == "actual" && !has_actual)
    throw Error(
        fmt::format("{}: no actual values (a forecast, or a regional series); "
                    "expected {} forecast for this file",
                    path, o.option_name("value")));
  if (kind == "forecast" && !has_forecast)
    throw Error(fmt::format("{}: no forecast values; expected {} actual for this file", path,
                            o.option_name("value")));
  if (!kind.empty()) return kind;
  const std::string pref = lower(o.preferred_value_kind) == "forecast" ? "forecast" : "actual";
  const bool has_pref = pref == "forecast" ? has_forecast : has_actual;
  return has_pref ? pref : (pref == "forecast" ? "actual" : "forecast");
}

// The UK API's entries: {"from", "to", "intensity": {"forecast", "actual", "index"}}.
Raw read_uk_api(const json& entries, const std::string& path, const CarbonReadOptions& o) {
  Raw raw;
  raw.format = "uk-carbon-intensity";
  auto any = [&entries](const char* k) {
    for (const json& e : entries)
      if (e.is_object() && e.contains("intensity") && e["intensity"].is_object() &&
          e["intensity"].contains(k) && !e["intensity"][k].is_null())
        return true;
    return false;
  };
  const std::string kind = choose_kind(o, any("forecast"), any("actual"), path);
  raw.value_column = "intensity." + kind;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const json& e = entries[i];
    RawRow r;
    r.where = fmt::format("{} data[{}]", path, i);
    if (!e.is_object() || !e.contains("from") || !e.contains("intensity") ||
        !e["intensity"].is_object())
      throw Error(
          fmt::format("{}: {} has no \"from\" and \"intensity\"; expected "
                      "{{\"from\": ..., \"intensity\": {{\"{}\": ...}}}}",
                      r.where, quote_line(e.dump(), 80), kind));
    r.time = json_text(e, "from");
    const json& in = e["intensity"];
    json_value(r, in.contains(kind) ? &in[kind] : nullptr, "intensity." + kind);
    raw.rows.push_back(std::move(r));
  }
  return raw;
}

// Rows of [{time_key, value_key}] (Electricity Maps' history, WattTime's data).
void read_pairs(const json& entries, const std::string& path, const char* time_key,
                const char* value_key, Raw& raw) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const json& e = entries[i];
    RawRow r;
    r.where = fmt::format("{} [{}]", path, i);
    if (!e.is_object() || !e.contains(time_key))
      throw Error(fmt::format("{}: {} has no \"{}\"; expected {{\"{}\": ..., \"{}\": ...}}",
                              r.where, quote_line(e.dump(), 80), time_key, time_key, value_key));
    r.time = json_text(e, time_key);
    json_value(r, e.contains(value_key) ? &e[value_key] : nullptr, value_key);
    raw.rows.push_back(std::move(r));
  }
}

bool array_of(const json& a, const char* key) {
  return a.is_array() && !a.empty() && a[0].is_object() && a[0].contains(key);
}

Raw read_json(const std::string& text, const std::string& path, const CarbonReadOptions& o) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number past
                                        // a double's range (406): both are bad input
    throw Error(
        fmt::format("{}: not valid JSON ({}); expected a series such as the UK "
                    "Carbon Intensity API's, Electricity Maps' or WattTime's",
                    path, quote_line(e.what(), 160)));
  }
  const std::string want = lower(o.format);
  auto wants = [&want](const char* f) { return want.empty() || want == "auto" || want == f; };
  // UK Carbon Intensity API: national {"data": [entries]}, regional {"data": {"data": [...]}}
  // or {"data": [{"regionid", "data": [...]}]} (one region).
  if (j.is_object() && j.contains("data") && wants("uk-carbon-intensity")) {
    const json* d = &j["data"];
    if (d->is_object() && d->contains("data")) d = &(*d)["data"];
    if (d->is_array() && d->size() == 1 && (*d)[0].is_object() && (*d)[0].contains("regionid") &&
        (*d)[0].contains("data"))
      d = &(*d)[0]["data"];
    if (array_of(*d, "from") || (want == "uk-carbon-intensity" && d->is_array()))
      return read_uk_api(*d, path, o);
    if (d->is_array() && d->size() > 1 && (*d)[0].is_object() && (*d)[0].contains("regionid"))
      throw Error(
          fmt::format("{}: {} regions in one file; expected one region's series (the API's "
                      "/regional/intensity/{{from}}/{{to}}/regionid/{{id}})",
                      path, d->size()));
  }
  // WattTime: v3 {"data": [{"point_time", "value"}], "meta": {"units"}}, v2 [{...}].
  const json* wt = array_of(j, "point_time") ? &j
                   : (j.is_object() && j.contains("data") && array_of(j["data"], "point_time"))
                       ? &j["data"]
                       : nullptr;
  if (wt && wants("watttime")) {
    Raw raw;
    raw.format = "watttime";
    raw.value_column = "value";
    raw.unit = "lbs/MWh";
    raw.note = "marginal (WattTime MOER), CO2 only";
    if (j.is_object() && j.contains("meta") && j["meta"].is_object()) {
      const std::string units = json_text(j["meta"], "units");
      if (!units.empty()) raw.unit = units;
      const std::string signal = json_text(j["meta"], "signal_type");
      if (!signal.empty() && signal != "co2_moer")
        throw Error(
            fmt::format("{}: signal_type '{}'; expected co2_moer (an emission rate, "
                        "not an index or percentile)",
                        path, quote_line(signal, 40)));
    }
    read_pairs(*wt, path, "point_time", "value", raw);
    return raw;
  }
  // Electricity Maps: {"history"|"forecast"|"data": [{"datetime", "carbonIntensity"}]}, or one
  // {"datetime", "carbonIntensity"}.
  if (wants("electricitymaps")) {
    for (const char* key : {"history", "forecast", "data"}) {
      if (j.is_object() && j.contains(key) && array_of(j[key], "carbonIntensity")) {
        Raw raw;
        raw.format = "electricitymaps";
        raw.value_column = std::string(key) + "[].carbonIntensity";
        read_pairs(j[key], path, "datetime", "carbonIntensity", raw);
        return raw;
      }
    }
    if (j.is_object() && j.contains("carbonIntensity") && j.contains("datetime")) {
      Raw raw;
      raw.format = "electricitymaps";
      raw.value_column = "carbonIntensity";
      read_pairs(json::array({j}), path, "datetime", "carbonIntensity", raw);
      return raw;
    }
  }
  std::string keys;
  if (j.is_object())
    for (auto it = j.begin(); it != j.end() && keys.size() < 80; ++it)
      keys += (keys.empty() ? "" : ", ") + it.key();
  throw Error(fmt::format(
      "{}: JSON {} is no carbon series this reader knows{}; expected the UK Carbon Intensity "
      "API's {{\"data\": [{{\"from\", \"intensity\"}}]}}, Electricity Maps' {{\"history\": "
      "[{{\"datetime\", \"carbonIntensity\"}}]}} or WattTime's {{\"data\": [{{\"point_time\", "
      "\"value\"}}]}}",
      path,
      j.is_object()  ? "object"
      : j.is_array() ? "array"
                     : "value",
      keys.empty() ? "" : " (keys: " + quote_line(keys, 80) + ")"));
}

// --- CSV ------------------------------------------------------------------------------------

// The column named `want` in `header`: exact, then case-insensitive, then a unique part of a name.
int find_column(const std::vector<std::string>& header, const std::string& want) {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == want) return static_cast<int>(i);
  const std::string w = lower(want);
  for (std::size_t i = 0; i < header.size(); ++i)
    if (lower(header[i]) == w) return static_cast<int>(i);
  int found = -1;
  for (std::size_t i = 0; i < header.size(); ++i)
    if (!w.empty() && contains(lower(header[i]), w)) {
      if (found >= 0) return -2;  // ambiguous
      found = static_cast<int>(i);
    }
  return found;
}

std::string header_text(const std::vector<std::string>& h) {
  std::string s;
  for (auto& x : h) s += (s.empty() ? "" : ",") + x;
  return quote_line(s);
}

// "01.01.2023 00:00 - 01.01.2023 01:00" (ENTSO-E's MTU) -> "2023-01-01 00:00", with a
// "(CET)"/"(CEST)" mark turned into its offset.
std::string entsoe_start(std::string_view mtu) {
  std::string_view s = trim(mtu);
  const std::size_t dash = s.find(" - ");
  std::string_view start = dash == std::string_view::npos ? s : s.substr(0, dash);
  std::string suffix;
  if (contains(s, "(CEST)"))
    suffix = "+02:00";
  else if (contains(s, "(CET)"))
    suffix = "+01:00";
  if (start.size() >= 16 && start[2] == '.' && start[5] == '.')
    return fmt::format("{}-{}-{} {}{}", start.substr(6, 4), start.substr(3, 2), start.substr(0, 2),
                       trim(start.substr(10)), suffix);
  return std::string(start) + suffix;
}

Raw read_table(std::string_view rest, const std::string& path, const CarbonReadOptions& o) {
  auto next_line = [&rest](std::string_view& line) {
    if (rest.empty()) return false;
    const std::size_t nl = rest.find('\n');
    line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF
    return true;
  };
  std::string_view line;
  if (!next_line(line) || trim(line).empty())
    throw Error(fmt::format(
        "{}: empty first line; expected a header with a time column and a carbon-intensity "
        "column (e.g. Time,Carbon Intensity)",
        path));
  const char sep = line.find(',') == std::string_view::npos && contains(line, ";") ? ';' : ',';
  const std::vector<std::string> header = split_csv(line, sep);
  std::vector<std::string> low;
  for (auto& h : header) low.push_back(lower(h));
  auto has = [&low](std::string_view n) {
    return std::find(low.begin(), low.end(), n) != low.end();
  };
  auto has_prefix = [&low](std::string_view p) {
    return std::any_of(low.begin(), low.end(),
                       [p](const std::string& x) { return starts_with(x, p); });
  };
  std::string format = lower(o.format);
  if (format.empty() || format == "auto") {
    if (has_prefix("mtu"))
      format = "entsoe";
    else if (has("datetime (utc)") && has_prefix("carbon intensity gco"))
      format = "electricitymaps";
    else if ((has("point_time") && has("value")) || (has("timestamp") && has("moer")))
      format = "watttime";
    else if (has("time") && has("carbon intensity"))
      format = "greentrain";
    else
      format = "csv";
  }
  Raw raw;
  raw.format = format;
  std::string time_col = o.time_column, value_col = o.value_column;
  bool utc = false, cet_cest = false;
  std::string time_suffix;
  if (format == "greentrain") {
    if (time_col.empty()) time_col = "Time";
    if (value_col.empty()) value_col = "Carbon Intensity";
  } else if (format == "electricitymaps") {
    if (time_col.empty()) time_col = "Datetime (UTC)";
    if (value_col.empty()) value_col = "(LCA)";  // Electricity Maps' default: life-cycle
    utc = lower(time_col) == "datetime (utc)";
  } else if (format == "watttime") {
    if (time_col.empty()) time_col = has("point_time") ? "point_time" : "timestamp";
    if (value_col.empty()) value_col = has("value") ? "value" : "MOER";
    raw.unit = "lbs/MWh";
    raw.note = "marginal (WattTime MOER), CO2 only";
  } else if (format == "entsoe") {
    if (time_col.empty())
      for (auto& h : header)
        if (starts_with(lower(h), "mtu")) time_col = h;
    const std::string z = lower(time_col);
    if (contains(z, "(utc)"))
      utc = true;
    else if (contains(z, "cest"))
      cet_cest = true;
    else if (contains(z, "(cet)"))
      time_suffix = "+01:00";
  } else if (format == "uk-carbon-intensity") {
    if (time_col.empty()) time_col = "from";
  } else if (format != "csv") {
    o.check_choices();  // throws: the format is not one of them
  }
  // A CSV with a forecast and/or an actual column (the UK API's data as a table)
  const int fc = find_column(header, "forecast"), ac = find_column(header, "actual");
  if (value_col.empty() && (fc >= 0 || ac >= 0)) value_col = choose_kind(o, fc >= 0, ac >= 0, path);
  if (time_col.empty()) {
    for (const char* n : {"time", "datetime", "datetime (utc)", "timestamp", "date", "from",
                          "point_time", "period_start", "start"})
      if (has(n)) {
        time_col = n;
        break;
      }
  }
  if (value_col.empty()) {
    int found = -1, count = 0;
    for (std::size_t i = 0; i < low.size(); ++i)
      for (const char* n : {"carbon intensity", "carbon_intensity", "carbonintensity", "gco2",
                            "co2", "moer", "emission", "intensity"})
        if (contains(low[i], n)) {
          if (found != static_cast<int>(i)) ++count;
          found = static_cast<int>(i);
          break;
        }
    if (count == 1)
      value_col = header[static_cast<std::size_t>(found)];
    else if (count > 1)
      throw Error(fmt::format(
          "{}: header '{}' has several carbon-intensity columns; expected {} NAME naming one", path,
          header_text(header), o.option_name("column")));
  }
  const int tcol = time_col.empty() ? -1 : find_column(header, time_col);
  const int vcol = value_col.empty() ? -1 : find_column(header, value_col);
  if (tcol < 0 || vcol < 0) {
    const bool t = tcol < 0;
    const std::string& name = t ? time_col : value_col;
    std::string what;
    if (name.empty())
      what = t ? "has no column 'Time' (nor time, datetime, timestamp, date, from, point_time)"
               : "has no column 'Carbon Intensity' (nor one whose name says carbon intensity, "
                 "gCO2, CO2, MOER or emission)";
    else if ((t ? tcol : vcol) == -2)
      what = fmt::format("has several columns matching '{}'", quote_line(name, 40));
    else
      what = fmt::format("has no column '{}'", quote_line(name, 60));
    throw Error(fmt::format("{}: header '{}' {}; expected {} (or {} to name it; formats: {})", path,
                            header_text(header), what,
                            format == "greentrain" || format == "csv"
                                ? "columns Time and Carbon Intensity (gCO2e/kWh)"
                                : "the " + format + " format's columns",
                            o.option_name(t ? "time_column" : "column"), carbon_formats_text()));
  }
  raw.value_column = header[static_cast<std::size_t>(vcol)];
  const std::size_t need = static_cast<std::size_t>(std::max(tcol, vcol)) + 1;
  std::size_t lineno = 1;
  while (next_line(line)) {
    ++lineno;
    if (trim(line).empty()) continue;
    const auto f = split_csv(line, sep);
    RawRow r;
    r.where = fmt::format("{}:{}", path, lineno);
    if (f.size() < need)
      throw Error(fmt::format("{}: '{}' has {} field(s); expected at least {} ({} and {})", r.where,
                              quote_line(line), f.size(), need,
                              header[static_cast<std::size_t>(tcol)], raw.value_column));
    // a field past the header's last column (a decimal comma in a comma-separated file:
    // "…,100,5" for 100.5; a shifted row): the columns may not be what the header says. Empty
    // trailing fields ("…,100,") are a writer's habit and harmless.
    for (std::size_t i = header.size(); i < f.size(); ++i)
      if (!trim(f[i]).empty())
        throw Error(fmt::format(
            "{}: '{}' has {} fields, the header {}; expected one per header column (a decimal "
            "comma in a comma-separated file? quote the value or separate with ';')",
            r.where, quote_line(line), f.size(), header.size()));
    r.time = f[static_cast<std::size_t>(tcol)];
    if (format == "entsoe") r.time = entsoe_start(r.time);
    if (utc && r.time.find_first_of("Z+") == std::string::npos) r.time += "Z";
    if (!time_suffix.empty() && !contains(r.time, "+")) r.time += time_suffix;
    r.cet_cest = cet_cest && !contains(r.time, "+");
    r.value = f[static_cast<std::size_t>(vcol)];
    if (sep == ';') std::replace(r.value.begin(), r.value.end(), ',', '.');  // decimal comma
    r.null = null_text(r.value);
    raw.rows.push_back(std::move(r));
  }
  return raw;
}

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
  Raw raw = is_json ? read_json(std::string(rest), path, o) : read_table(rest, path, o);
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
