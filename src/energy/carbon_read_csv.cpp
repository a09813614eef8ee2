// energy/carbon_read_csv.cpp: the CSV series reader (carbon_raw.h): format detection from the
// header (greentrain, Electricity Maps export, WattTime, ENTSO-E's MTU, any time and value
// columns), the columns chosen, and each row's time and value text.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "energy/carbon.h"
#include "energy/carbon_raw.h"

namespace gt::energy::carbon_raw {

namespace {
using carbon_text::lower;
using carbon_text::trim;

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

}  // namespace

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

}  // namespace gt::energy::carbon_raw
