// energy/carbon_read_json.cpp: the JSON series readers (carbon_raw.h): the UK Carbon
// Intensity API's national and regional shapes, Electricity Maps' API history and forecast,
// WattTime's MOER (v2 and v3).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "energy/carbon.h"
#include "energy/carbon_raw.h"

namespace gt::energy::carbon_raw {

namespace {
using carbon_text::lower;
using nlohmann::json;

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

}  // namespace

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

}  // namespace gt::energy::carbon_raw
