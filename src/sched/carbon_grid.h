// sched/carbon_grid.h: grid carbon-intensity series (gCO2e/kWh) on a uniform time grid, and the
// wall-clock <-> UTC conversions the scheduler needs. The CSV is read and times are parsed by
// the energy module's one reader (energy/carbon.h: byte order mark and CRLF accepted, explicit
// offsets honoured, holes recorded); this file resamples the rows onto the planner's grid. A
// series' time zone is always stated by the user, as a UTC offset or a zone name
// (sched/timezone.h), or by each row's own offset; nothing here guesses it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "energy/carbon.h"
#include "sched/timezone.h"

namespace gt::sched {

/// Seconds since the Unix epoch, UTC.
using UnixTimeS = std::int64_t;

/// Joules in one kilowatt-hour (3.6e6 J/kWh).
inline constexpr double kJoulesPerKwh = 3.6e6;

/// Parses wall-clock text "YYYY-MM-DD HH:MM[:SS]" (a 'T' may separate date and time) read in
/// `zone`, or with its own offset ("...Z", "...+02:00"), which wins; returns UTC Unix seconds
/// (energy::parse_time, TimeZone::to_utc). Throws gt::Error naming `where` for malformed text,
/// and for a time a named zone skips or repeats (naming both candidate offsets).
UnixTimeS parse_wall_time(std::string_view text, const TimeZone& zone, std::string_view where);

/// UTC Unix seconds for a civil date/time on the wall clock of `zone` (std::chrono calendar,
/// TimeZone::to_utc). Throws gt::Error for a date not on the calendar, and, naming `where`, for
/// a time `zone` skips or repeats at a daylight-saving change.
UnixTimeS civil_to_unix_s(int year, int month, int day, int hour, int minute, int second,
                          const TimeZone& zone, std::string_view where = "time");

/// A carbon-intensity series on a uniform grid: slot i covers
/// [start_s + i*slot_s, start_s + (i+1)*slot_s) with mean intensity g_co2e_per_kwh[i].
struct CarbonSeries {
  UnixTimeS start_s = 0;               ///< UTC start of slot 0
  std::int64_t slot_s = 0;             ///< slot length, s
  std::vector<double> g_co2e_per_kwh;  ///< mean intensity per slot, gCO2e/kWh
  std::string path;                    ///< the CSV it was read from (empty if built in code)
  std::string source;                  ///< what was read (energy::CarbonCsv::describe())
  std::int64_t row_step_s = 0;         ///< the CSV's own step (median row spacing), s
  /// Holes of the CSV (rows further apart than row_step_s): bridged by holding the value before
  /// them, and flagged by the caller (gap_warnings), never silently.
  std::vector<energy::CarbonGap> gaps;
  /// The CSV's values outside the plausible range of a grid's intensity, said once
  /// (energy::CarbonCsv::implausible_warning); empty when every value is plausible.
  std::string implausible_warning;

  /// UTC end of the last slot, s.
  UnixTimeS end_s() const {
    return start_s + slot_s * static_cast<std::int64_t>(g_co2e_per_kwh.size());
  }
  /// Mean intensity over all slots, gCO2e/kWh.
  double mean_g_co2e_per_kwh() const;
  /// Emissions, gCO2e, of drawing power_w over [t0_s, t1_s): sum over slots of
  /// power_w * overlap_s / 3.6e6 J/kWh * intensity. Throws gt::Error outside the series.
  double g_co2e(UnixTimeS t0_s, UnixTimeS t1_s, double power_w) const;
};

/// How a CSV's rows become the planner's slots.
struct SlotGrid {
  std::int64_t slot_s = 0;  ///< slot length, s; 0 = the CSV's smallest step
  /// false: each slot holds the time-weighted mean of the rows over it (exact for energy);
  /// true: each slot holds the value in force at its start (the row at that instant), as the
  /// "Let's Wait Awhile" simulator reads its 15-minute German series at 30 minutes.
  bool value_at_start = false;
};

/// "mean" or "start"; throws gt::Error naming --slot-value otherwise.
bool parse_slot_value(std::string_view text);

/// The most slots a carbon series' grid may have: 2,000,000 (16 MB of intensities; 3.8 years of
/// 1-minute slots, 57 years of 15-minute ones). Bounds memory and planning time for any CSV.
inline constexpr std::int64_t kMaxCarbonSlots = 2'000'000;
/// The longest slot SlotGrid::slot_s may ask for, s: a year of 366 days.
inline constexpr std::int64_t kMaxSlotS = 366 * 24 * 3600;

/// Loads a carbon-intensity series through energy::read_carbon_csv in any format it reads
/// (`read`: Electricity Maps, UK Carbon Intensity API, WattTime, ENTSO-E, greentrain's CSV with
/// columns `Time` (wall clock "YYYY-MM-DD HH:MM:SS", naive in `zone` or with its own offset) and
/// `Carbon Intensity` (gCO2e/kWh)).
/// In a named zone a local-time series passes a daylight-saving change as the wall clock does:
/// the skipped hour has no rows (a row in it is an error naming the line), and the repeated hour
/// comes twice in order: a repeated time is read at its first occurrence (the offset before the
/// change, e.g. +02:00 in Europe/Berlin in October) unless that is not after the previous row,
/// then at its second (+01:00), so the rows stay increasing in UTC with no hole and no overlap.
/// Each sample holds until the next timestamp (the last one for the median step); the step
/// function is resampled onto a uniform grid of the smallest step (time-weighted mean per slot),
/// so irregular series (GB's 15/30 min) are exact on the grid; `grid` may set a longer slot and
/// the value at each slot's start instead. The grid starts at the first row. Holes are kept in
/// `gaps`. Throws gt::Error naming the file, line and column on bad input, with fewer than 2
/// rows, for a slot length outside [0, kMaxSlotS], or when the grid would have more than
/// kMaxCarbonSlots slots (naming the span and the slot).
CarbonSeries load_carbon_csv(const std::string& path, const TimeZone& zone,
                             const SlotGrid& grid = {}, const energy::CarbonReadOptions& read = {});

/// One warning per hole of the series, for the console and the plan's JSON:
/// "carbon series x.csv: no rows from ... to ... (...); the value at ... was held".
std::vector<std::string> gap_warnings(const CarbonSeries& s);

/// A forecast with error: each slot gets independent Gaussian noise with standard deviation
/// error_pct/100 * (series mean), clamped at 0 gCO2e/kWh; deterministic for a given seed.
CarbonSeries with_forecast_error(const CarbonSeries& truth, double error_pct, std::uint64_t seed);

}  // namespace gt::sched
