// sched/timezone.h: the time zone a user states for wall-clock times (a carbon CSV's naive
// times, a job list's times without an offset, the plan's output, Slurm's --begin): a fixed
// offset east of UTC, or an IANA zone ("Europe/Berlin") read from the system's zoneinfo
// (/usr/share/zoneinfo, Debian package tzdata) through Howard Hinnant's date library (tz.h built
// with USE_OS_TZDB=1; GCC 12 has no std::chrono tzdb), daylight-saving changes included.
//
// "Local seconds" below are a wall-clock date and time counted as if it were UTC: seconds from
// 1970-01-01T00:00:00 on the zone's wall clock (date::local_seconds).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace date {
class time_zone;
}

namespace gt::sched {

/// A fixed UTC offset or a named zone with its daylight-saving rules.
class TimeZone {
 public:
  /// A fixed offset, seconds east of UTC (implicit, so that callers stating an offset in seconds,
  /// as every one did before zones had names, keep their meaning exactly).
  TimeZone(std::int64_t utc_offset_s = 0);  // NOLINT(google-explicit-constructor)
  /// A fixed offset, seconds east of UTC.
  static TimeZone fixed(std::int64_t utc_offset_s) { return TimeZone(utc_offset_s); }
  /// Parses what a user types: hours east of UTC ("0", "2", "-5", "5.5", "+01:00", as
  /// parse_utc_offset_s), "UTC" or "Z" (offset 0), or an IANA zone name ("Europe/Berlin").
  /// Throws gt::Error naming `option` (e.g. "--utc-offset") and the value when it is neither a
  /// valid offset nor a zone of the system's zoneinfo.
  static TimeZone parse(std::string_view text, std::string_view option = "--utc-offset");

  /// True for a fixed offset (no daylight saving).
  bool is_fixed() const { return zone_ == nullptr; }
  /// The fixed offset, s east of UTC (0 for a named zone: use offset_at).
  std::int64_t fixed_offset_s() const { return offset_s_; }
  /// The offset in force at the instant `utc_s` (UTC Unix seconds), s east of UTC.
  std::int64_t offset_at(std::int64_t utc_s) const;
  /// The wall clock at `utc_s`, as local seconds (utc_s + offset_at(utc_s)).
  std::int64_t to_local(std::int64_t utc_s) const { return utc_s + offset_at(utc_s); }

  /// How a wall-clock time maps to UTC: once, never (it lies in the hour skipped when the clocks
  /// go forward), or twice (the hour repeated when they go back).
  struct Local {
    enum class Kind { unique, nonexistent, ambiguous } kind = Kind::unique;
    /// unique: the instant (UTC Unix s). ambiguous: the first occurrence (the earlier instant,
    /// read at the offset before the change). nonexistent: the time read at the offset before
    /// the change (an instant after the change).
    std::int64_t first_s = 0;
    std::int64_t second_s = 0;  ///< ambiguous: the second occurrence; nonexistent: the time read
                                ///< at the offset after the change; unique: first_s
    std::int64_t first_offset_s = 0;   ///< offset of first_s, s east of UTC
    std::int64_t second_offset_s = 0;  ///< offset of second_s, s east of UTC
    std::int64_t change_s = 0;         ///< ambiguous/nonexistent: the instant of the change (UTC s)
  };
  /// Where local seconds `local_s` fall in this zone (always unique for a fixed offset).
  Local resolve(std::int64_t local_s) const;

  /// UTC Unix seconds of the wall-clock time `local_s`. Throws gt::Error naming `where` (file,
  /// job, key), the time and both candidate offsets when it is ambiguous or nonexistent: a single
  /// time there must state its offset ("2020-10-25T02:30:00+01:00").
  std::int64_t to_utc(std::int64_t local_s, std::string_view where) const;
  /// UTC Unix seconds of `local_s` never failing, for computed wall-clock times (deadline rules):
  /// an ambiguous time is read at its first occurrence, a nonexistent one becomes the instant of
  /// the change (date::choose::earliest; std::chrono::zoned_time does the same).
  std::int64_t to_utc_earliest(std::int64_t local_s) const;

  /// "UTC+02:00" for a fixed offset, the name ("Europe/Berlin") for a named zone.
  std::string describe() const;

 private:
  std::int64_t offset_s_ = 0;
  const date::time_zone* zone_ = nullptr;  // owned by the date library's tz database
};

/// Parses a UTC offset in hours ("2", "-5", "5.5", "+01:00") into seconds east of UTC (-14 h to
/// +14 h). Throws gt::Error naming `option` and the value otherwise.
std::int64_t parse_utc_offset_s(std::string_view text, std::string_view option = "--utc-offset");

/// `utc_s` as wall-clock "YYYY-MM-DDTHH:MM:SS" in `zone` (no zone suffix; Slurm's form).
std::string format_wall_time(std::int64_t utc_s, const TimeZone& zone);

/// `utc_s` as ISO 8601 with the offset in force at that instant, e.g.
/// "2020-06-01T18:00:00+02:00" (Europe/Berlin in summer), "2020-12-01T18:00:00+01:00" (winter).
std::string format_iso_time(std::int64_t utc_s, const TimeZone& zone);

}  // namespace gt::sched
