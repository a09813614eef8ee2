// energy/carbon.h: grid carbon intensity (gCO2e/kWh), constant or a time series, and its
// integral against power over time: g = sum over intervals of E_kWh x intensity(t).
//
// This is greentrain's one reader of carbon-intensity series and its one place of calendar
// arithmetic (std::chrono year_month_day / sys_days): the meter, `measure`, `train` and the
// scheduler (sched/carbon_grid.h) all read series and times through it, with the same rules:
//  - the formats grids publish (CarbonReadOptions::format; detected from the file's shape):
//    greentrain's `Time,Carbon Intensity` CSV, Electricity Maps' CSV export and API JSON, the
//    UK National Grid Carbon Intensity API's JSON (forecast and actual), WattTime MOER (CSV or
//    JSON, lbs/MWh), ENTSO-E-style CSVs (MTU time ranges), and any CSV with a time and a value
//    column (named by option, in g/kWh, kg/MWh or lbs/MWh);
//  - an empty or null value ("", null, NaN, n/e) is no value: the row is left out, counted in
//    CarbonCsv::null_rows, and the hole it leaves is a gap like any other;
//  - error messages quote at most one line of the file (cut to 120 characters);
//  - a UTF-8 byte order mark and CRLF line ends are accepted;
//  - a time that states its offset ("2020-06-08T00:00:00+02:00", "...Z") is converted to UTC
//    with that offset; a naive time ("2020-06-08 00:00:00") is read at the UTC offset the
//    caller states (never guessed); a file mixing both is refused;
//  - a hole (two consecutive rows further apart than the series' own step, the median spacing)
//    is recorded in CarbonCsv::gaps and flagged wherever a measured span touches it.
// All instants are seconds since 1970-01-01 00:00 UTC ("unix seconds"); UTC offsets are
// seconds (or hours, where named so) east of UTC.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gt::energy {

/// Default intensity when none is given: 475 gCO2e/kWh, the IEA world average that CodeCarbon
/// also uses as its global fallback (IEA, Global Energy & CO2 Status Report 2019).
constexpr double kWorldAverageGCo2ePerKwh = 475.0;

/// The plausible range of a grid's carbon intensity, gCO2e/kWh. Yearly averages of national
/// grids run from about 10-30 (hydro and nuclear grids: Iceland, Norway, Sweden) to about
/// 900-1100 (coal-heavy grids) in Ember's yearly electricity data and Electricity Maps' yearly
/// figures; single hours and marginal signals (WattTime's MOER) go beyond both ends, so the
/// band is generous: a value outside it is a unit mistake far more often than a grid (kg/kWh
/// read as g/kWh is 1000x too low, g/MWh 1000x too high).
inline constexpr double kPlausibleMinGCo2ePerKwh = 1;
inline constexpr double kPlausibleMaxGCo2ePerKwh = 2000;

/// Whether `g_co2e_per_kwh` lies in [kPlausibleMinGCo2ePerKwh, kPlausibleMaxGCo2ePerKwh].
inline bool plausible_intensity(double g_co2e_per_kwh) {
  return g_co2e_per_kwh >= kPlausibleMinGCo2ePerKwh && g_co2e_per_kwh <= kPlausibleMaxGCo2ePerKwh;
}

/// A time read from text.
struct ParsedTime {
  std::int64_t unix_s = 0;       ///< the instant, seconds since 1970 UTC
  bool explicit_offset = false;  ///< the text stated its offset (Z, +HH:MM, ...); else naive
};

/// Parses "YYYY-MM-DD HH:MM[:SS]" ('T' may replace the space), optionally followed by "Z",
/// "+HH:MM", "+HHMM" or "+HH" (or '-'). A stated offset is honoured; a naive time is read at
/// `naive_utc_offset_s` seconds east of UTC. Dates are checked on the calendar (2021-02-29 is
/// refused); hours 00-23, minutes and seconds 00-59, offsets up to 14 h. Returns nullopt when
/// malformed and then sets *why (if given) to the reason.
std::optional<ParsedTime> parse_time(std::string_view text, std::int64_t naive_utc_offset_s,
                                     std::string* why = nullptr);

/// parse_time that throws Error "<where>: time '<text>' is not valid (<reason>);
/// expected ..." on malformed text.
ParsedTime parse_time_or_throw(std::string_view text, std::int64_t naive_utc_offset_s,
                               std::string_view where);

/// Compatibility form of parse_time: seconds since 1970 UTC of `s`, a naive time being read at
/// `utc_offset_h` hours east of UTC; nullopt if malformed.
std::optional<double> parse_local_time(const std::string& s, double utc_offset_h);

/// Unix seconds of a civil date and time read at `utc_offset_s` seconds east of UTC.
/// Throws Error naming the date when it is not on the calendar (month 13, 30 February).
std::int64_t civil_to_unix_s(int year, int month, int day, int hour, int minute, int second,
                             std::int64_t utc_offset_s);

/// `unix_s` as wall-clock "YYYY-MM-DDTHH:MM:SS" at `utc_offset_s` east of UTC (no zone suffix).
std::string format_wall_time(std::int64_t unix_s, std::int64_t utc_offset_s);

/// `unix_s` as ISO 8601 with its offset, e.g. "2020-06-01T18:00:00+02:00".
std::string format_iso_time(std::int64_t unix_s, std::int64_t utc_offset_s);

/// A span as people read it: "45 s", "15 min", "4 h", "1 h 30 min", "2 d 3 h".
std::string format_span_s(std::int64_t s);

/// Two consecutive rows of a series further apart than its step: no row says what the
/// intensity was from last_row_s + step to next_row_s. Unix seconds.
struct CarbonGap {
  std::int64_t last_row_s = 0;  ///< the row before the hole
  std::int64_t next_row_s = 0;  ///< the row after it
};

/// How a carbon-intensity file is read. Every field is optional: by default the format is
/// detected from the file and each format's own columns, unit and value are used.
struct CarbonReadOptions {
  /// "" or "auto" (detected), "greentrain", "electricitymaps", "uk-carbon-intensity",
  /// "watttime", "entsoe" or "csv" (any CSV: time_column and value_column, or detected names).
  std::string format;
  /// CSV: the column of times; empty: the format's (Time, Datetime (UTC), point_time, MTU...)
  /// or, for "csv", the one column named time, datetime, timestamp, date, from or point_time.
  std::string time_column;
  /// CSV: the column of intensities, by its name or a unique part of it ("LCA", "direct");
  /// empty: the format's (Electricity Maps: the LCA column) or the one column whose name says
  /// carbon intensity, gCO2, CO2, MOER or emission.
  std::string value_column;
  /// Unit of the values: "g/kWh" (= gCO2e/kWh = kg/MWh), "kg/MWh", "kg/kWh" (= t/MWh, x 1000)
  /// or "lbs/MWh" (x 0.45359237, 1 lb = 0.45359237 kg exactly); empty: the format's (WattTime:
  /// lbs/MWh, or its JSON's meta.units; the others g/kWh).
  std::string unit;
  /// Sources with a forecast and an actual value (UK API, a CSV with both columns): "actual"
  /// or "forecast"; empty: preferred_value_kind where the file has such values, else the other
  /// (said in CarbonCsv::value_column).
  std::string value_kind;
  /// The kind read when value_kind is empty: "actual" (measurements: what was burnt) or
  /// "forecast" (the scheduler: what is known ahead of time).
  std::string preferred_value_kind = "actual";
  /// How messages name these options: "--carbon-" (the command line: --carbon-unit),
  /// "carbon_" (Python's keywords: carbon_unit) or "energy.carbon_" (a configuration's keys).
  std::string option_prefix = "--carbon-";
  /// The name of option `what` ("format", "column", "time_column", "unit", "value") for
  /// messages: option_prefix + what, with '-' for '_' after a "--" prefix.
  std::string option_name(std::string what) const {
    if (option_prefix.rfind("--", 0) == 0)
      for (char& c : what) c = c == '_' ? '-' : c;
    return option_prefix + what;
  }
  /// Throws Error when format, unit or value_kind is not one of its choices (any case; empty is
  /// the default), naming the option (option_name), the value and the choices, e.g.
  /// "--carbon-format 'foo' is not known; expected auto, greentrain (...), ...", "--carbon-unit:
  /// unit 'g' is not known; expected ...". Reads no file; the readers call it first.
  void check_choices() const;
  /// Throws Error naming the first option set (format, column, time_column, unit, value) where
  /// there is no series to read (`series` names the option that gives one, "--carbon-csv"):
  /// they say how a file is read, and without one they would be ignored (a constant
  /// intensity is in gCO2e/kWh). Then, if `utc_offset_h` (the series' UTC offset, hours east,
  /// which the readers take as their own argument) is not 0, throws Error naming it as
  /// `utc_offset_option` ("p.toml:3: key 'daemon.carbon_utc_offset_h'"), or where that is
  /// empty as this prefix's name for it ("--carbon-utc-offset", "carbon_utc_offset_h",
  /// "energy.carbon_utc_offset_h"); the value follows a "--" name after a space, others " = ".
  void refuse_without_series(const std::string& series, double utc_offset_h = 0,
                             const std::string& utc_offset_option = "") const;
};

/// The format names CarbonReadOptions::format accepts, for messages and --help.
const char* carbon_formats_text();

/// Why `value` is not one of the choices of CarbonReadOptions' `what` ("format", "unit" or
/// "value"; compared without case and surrounding blanks; empty: the default):
/// "'VALUE' is not known; expected CHOICES"; empty when it is one. Throws Error for another
/// `what`. The command line checks its options with it while it is parsed (a usage error).
std::string carbon_choice_error(std::string_view what, std::string_view value);

/// A carbon-intensity series as read: one entry per data row, times in UTC.
struct CarbonCsv {
  std::string path;
  std::string format;             ///< the format read, e.g. "uk-carbon-intensity"
  std::string value_column;       ///< where the values came from, e.g. "intensity.actual"
  std::string unit;               ///< the file's unit ("g/kWh", "lbs/MWh"); values are gCO2e/kWh
  std::string note;               ///< about the signal, e.g. "marginal (WattTime MOER), CO2 only"
  std::size_t null_rows = 0;      ///< rows with no value (empty, null): left out, so gaps
  std::vector<std::int64_t> t_s;  ///< unix seconds of each row, strictly increasing
  std::vector<double> g_co2e_per_kwh;   ///< each row's intensity, gCO2e/kWh (>= 0)
  std::int64_t step_s = 0;              ///< the series' own step: the median row spacing, s
                                        ///< (the upper one for an even count; 0 with one row)
  std::vector<CarbonGap> gaps;          ///< row spacings longer than step_s, in time order
  bool explicit_offsets = false;        ///< rows stated their offsets (naive offset unused)
  std::int64_t naive_utc_offset_s = 0;  ///< the offset naive times were read at
  std::string naive_zone;               ///< the named zone naive times were read in (a
                                        ///< NaiveTimeResolver's); empty: naive_utc_offset_s
  /// One warning when values lie outside the plausible range (plausible_intensity): names the
  /// file, how many values, the first of them with its row, and the likely unit mistake;
  /// empty when every value is plausible. Callers print it once (stderr) and go on.
  std::string implausible_warning;
  /// "naive times at UTC+2", "naive times in Europe/Berlin" or "times with their own UTC
  /// offsets".
  std::string zone_text() const;
  /// What was read, for plans and measurements: "uk-carbon-intensity intensity.actual, times
  /// with their own UTC offsets, 48 rows, step 30 min, 1 gap(s), 2 null value(s) left out as
  /// gaps".
  std::string describe() const;
};

/// Reads a carbon-intensity series in any of the formats above (`opt`). For the greentrain CSV:
/// columns `Time` (see parse_time) and `Carbon Intensity` (gCO2e/kWh, a number >= 0), in any
/// order, other columns ignored, as in shared/data/carbon/. Naive times are read at
/// `naive_utc_offset_s` seconds east of UTC; a format that states its zone (Electricity Maps'
/// "Datetime (UTC)", ENTSO-E's "MTU (CET/CEST)", JSON times with Z) keeps it. A UTF-8 byte
/// order mark, CRLF line ends, blank lines, quoted fields and ';'-separated CSVs (with a
/// decimal comma) are accepted; fractional seconds are dropped. Throws Error naming the
/// file, line, column and value (at most one line of it) and what was expected: unreadable
/// file, unknown shape or missing column, malformed time or value, times not increasing (e.g. a
/// local-time series repeating an hour at a daylight-saving change: read such a series in its
/// named zone with the NaiveTimeResolver form below, as sched::load_carbon_csv does), rows
/// mixing naive and offset times, no value at all.
CarbonCsv read_carbon_csv(const std::string& path, std::int64_t naive_utc_offset_s,
                          const CarbonReadOptions& opt = {});

/// Turns a CSV row's naive time into UTC where the zone is not one fixed offset (a named zone
/// with daylight saving: sched/timezone.h). Arguments: the row's wall clock as "local seconds"
/// (its date and time counted as if UTC), the UTC unix seconds of the previous row (nullopt for
/// the first; lets a repeated hour be read as its second occurrence once time would go back),
/// and the row's place ("file.csv:12 column Time") for messages. Returns UTC unix seconds;
/// throws (any std::exception, naming the place) for a time it cannot convert.
using NaiveTimeResolver = std::function<std::int64_t(
    std::int64_t local_s, std::optional<std::int64_t> prev_unix_s, const std::string& where)>;

/// read_carbon_csv whose naive times are converted by `resolve` instead of a fixed offset;
/// `zone_name` is kept in CarbonCsv::naive_zone. Same rules and errors otherwise.
CarbonCsv read_carbon_csv(const std::string& path, const NaiveTimeResolver& resolve,
                          const std::string& zone_name, const CarbonReadOptions& opt = {});

/// Central European time as the EU has kept it since 1996 (Directive 2000/84/EC): UTC+1, and
/// UTC+2 from 01:00 UTC on the last Sunday of March to 01:00 UTC on the last Sunday of
/// October. The repeated hour is read at its first occurrence (+02:00) unless that is not after
/// the previous row; a time in the skipped hour is an error naming `where`. Used for ENTSO-E's
/// "MTU (CET/CEST)" files.
std::int64_t cet_cest_to_utc(std::int64_t local_s, std::optional<std::int64_t> prev_unix_s,
                             const std::string& where);

/// At most one line of `text`, its invisible characters shown (\xNN, \ufeff, \u00a0), cut to
/// `max_chars` with "..." appended: what an error message may quote of an input.
std::string quote_line(std::string_view text, std::size_t max_chars = 120);

/// "no rows from 2020-01-01T02:00:00Z to 2020-01-01T05:00:00Z (4 h between rows, the series'
/// step is 1 h); the value at 2020-01-01T01:00:00Z was held".
std::string describe_gap(const CarbonGap& gap, std::int64_t step_s);

/// How the flag of a measured span outside a series begins (CarbonIntensity::span_flags), for
/// callers that say it once (train's console).
inline constexpr char kCarbonOutsideFlag[] = "carbon: the measured interval ";

/// Where the intensity in use came from.
enum class CarbonOrigin {
  kDefault,   ///< nothing was set: kWorldAverageGCo2ePerKwh
  kConstant,  ///< a constant given by the user (configuration key or command-line option)
  kCsv,       ///< a series read from a file (any format of CarbonReadOptions)
  kCountry,   ///< a country's annual average from the table (carbon_regions.h)
};
/// "default", "constant", "csv" or "country".
const char* to_string(CarbonOrigin o);

class CarbonIntensity {
 public:
  /// A constant intensity `g_co2e_per_kwh` (>= 0; 0 is a zero-carbon supply, not "unset"),
  /// set by `set_by` (the key or option, e.g. "energy.carbon_intensity"), for `region` (a label
  /// shown in reports; may be empty). Throws Error for a negative or non-finite value.
  static CarbonIntensity constant(double g_co2e_per_kwh, const std::string& region,
                                  const std::string& set_by = "");
  /// A series from a file (read_carbon_csv, any format of `opt`) whose naive times are local
  /// at `utc_offset_h` hours east of UTC (0 for UTC; -14..14). The intensity holds from its
  /// row's time to the next row (step function); the last row holds for one step. Throws
  /// Error on bad input.
  static CarbonIntensity from_csv(const std::string& path, double utc_offset_h = 0,
                                  const std::string& region = "",
                                  const CarbonReadOptions& opt = {});
  /// A country's annual average (carbon_regions.h) for its ISO 3166-1 alpha-3 code, set by
  /// `set_by` (e.g. "--carbon-region"). Throws Error for an unknown code, listing near
  /// matches.
  static CarbonIntensity for_country(const std::string& iso_code, const std::string& set_by);
  /// This intensity, said to be of the country `iso_code` (a known code; throws Error
  /// naming `set_by` otherwise): its name and code go into CodeCarbon's country columns.
  CarbonIntensity with_country(const std::string& iso_code, const std::string& set_by) const;
  /// Default: constant kWorldAverageGCo2ePerKwh, region "world average", origin kDefault.
  CarbonIntensity();
  /// The default (origin kDefault, kWorldAverageGCo2ePerKwh) whose describe() tells how to set
  /// an intensity with `how_to_set` (e.g. the daemon's policy keys) in place of the keys and
  /// options of train and measure.
  static CarbonIntensity world_average(const std::string& how_to_set);

  /// Intensity (gCO2e/kWh) at `unix_s` (seconds since 1970 UTC). Outside a series the nearest
  /// end value is used and out_of_range() becomes true (and stays true).
  double at(double unix_s) const;
  /// gCO2e of `power_w` (constant W) from t0 to t1 (unix s), exact for the step series.
  double integrate_g(double t0_unix_s, double t1_unix_s, double power_w) const;
  /// gCO2e of `energy_j` (J) drawn evenly over [t0, t1] (unix s): each part of the span gets
  /// its share of the joules, so a constant c gives exactly energy_j / 3.6e6 x c (no rounding
  /// from unix-second differences). t1 <= t0: all of it at intensity at(t1).
  double energy_g(double t0_unix_s, double t1_unix_s, double energy_j) const;
  /// Flags for a measured span [t0, t1] (unix s): the part outside the series (one flag, starting
  /// with kCarbonOutsideFlag, naming the span, the series' file, its first and last rows' times
  /// and the end it covers, and the value held before or after it, for how long), and each hole
  /// of the series it touches (describe_gap). Empty for a constant.
  std::vector<std::string> span_flags(double t0_unix_s, double t1_unix_s) const;
  bool is_series() const { return !t_.empty(); }
  double series_start_unix_s() const { return t_.empty() ? 0 : t_.front(); }
  double series_end_unix_s() const { return t_.empty() ? 0 : t_.back(); }
  bool out_of_range() const { return out_of_range_; }
  const std::string& region() const { return region_; }
  /// The country's ISO 3166-1 alpha-3 code and name (for_country or with_country); empty when
  /// no country was named.
  const std::string& country_iso_code() const { return country_iso_code_; }
  const std::string& country_name() const { return country_name_; }
  CarbonOrigin origin() const { return origin_; }
  /// The constant in gCO2e/kWh (default or user's); nullopt for a series.
  std::optional<double> constant_g_per_kwh() const;
  /// The series as read (nullopt for a constant): path, rows, step, gaps.
  const std::optional<CarbonCsv>& csv() const { return csv_; }
  /// Warnings about the intensity's values, for the user (stderr), once: a series' values
  /// outside the plausible range (CarbonCsv::implausible_warning), or a constant set by the
  /// user outside it (0 excepted: a zero-carbon supply is a choice, not a unit mistake),
  /// naming the option that set it, the value and the likely unit mistake. Empty otherwise.
  std::vector<std::string> warnings() const;
  /// The intensity and where it came from, e.g. "475 gCO2e/kWh, default (IEA world average;
  /// set energy.carbon_intensity or energy.carbon_csv)", "0 gCO2e/kWh, constant from
  /// energy.carbon_intensity", "series data/ger_ci.csv (naive times at UTC+0, 37147 rows,
  /// step 15 min)".
  std::string describe() const;

 private:
  double constant_ = kWorldAverageGCo2ePerKwh;
  std::string region_ = "world average";
  std::string set_by_;
  std::string country_iso_code_, country_name_;
  bool from_table_ = false;  // the constant is a country's annual average (for_country)
  CarbonOrigin origin_ = CarbonOrigin::kDefault;
  std::optional<CarbonCsv> csv_;
  std::vector<double> t_, g_;  // the series' rows (unix s, gCO2e/kWh)
  double step_s_ = 0;
  mutable bool out_of_range_ = false;
};

/// grams CO2e of `energy_j` joules at `g_co2e_per_kwh` (1 kWh = 3.6e6 J).
inline double g_co2e(double energy_j, double g_co2e_per_kwh) {
  return energy_j / 3.6e6 * g_co2e_per_kwh;
}

}  // namespace gt::energy
