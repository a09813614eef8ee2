// sched/timezone.cpp: fixed offsets and IANA zones (Howard Hinnant's date library, tz.h, on the
// system's zoneinfo).
#include "sched/timezone.h"

#include <date/tz.h>
#include <fmt/format.h>

#include <cmath>
#include <exception>

#include "core/error.h"
#include "energy/carbon.h"

namespace gt::sched {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool parse_int(std::string_view s, int& out) {
  if (s.empty()) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9' || v > 100000) return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

std::string offset_text(std::int64_t s) {
  const std::int64_t a = s < 0 ? -s : s;
  return fmt::format("{}{:02}:{:02}", s < 0 ? '-' : '+', a / 3600, (a / 60) % 60);
}

date::local_seconds local_of(std::int64_t local_s) {
  return date::local_seconds{std::chrono::seconds{local_s}};
}

std::int64_t unix_of(date::sys_seconds t) { return t.time_since_epoch().count(); }

}  // namespace

std::int64_t parse_utc_offset_s(std::string_view text, std::string_view option) {
  std::string_view s = trim(text);
  auto bad = [&]() {
    return Error(fmt::format(
        "{} '{}' is not valid; expected hours east of UTC such as 0, 1, -5, 5.5 or +01:00, or a "
        "time zone name such as Europe/Berlin",
        option, text));
  };
  if (s.empty()) throw bad();
  double hours = 0;
  if (auto c = s.find(':'); c != std::string_view::npos) {
    int sign = s[0] == '-' ? -1 : 1;
    std::string_view hs = s.substr(0, c);
    if (!hs.empty() && (hs[0] == '+' || hs[0] == '-')) hs.remove_prefix(1);
    int h, m;
    if (!parse_int(hs, h) || !parse_int(s.substr(c + 1), m) || m > 59) throw bad();
    hours = sign * (h + m / 60.0);
  } else {
    std::string str(s[0] == '+' ? s.substr(1) : s);
    std::size_t used = 0;
    try {
      hours = std::stod(str, &used);
    } catch (...) {
      throw bad();
    }
    if (used != str.size()) throw bad();
  }
  if (!(hours >= -14 && hours <= 14)) throw bad();
  return static_cast<std::int64_t>(std::llround(hours * 3600));
}

TimeZone::TimeZone(std::int64_t utc_offset_s) : offset_s_(utc_offset_s) {}

TimeZone TimeZone::parse(std::string_view text, std::string_view option) {
  const std::string_view s = trim(text);
  if (s == "UTC" || s == "Z" || s == "utc") return fixed(0);
  if (!s.empty() && (s[0] == '+' || s[0] == '-' || s[0] == '.' || (s[0] >= '0' && s[0] <= '9')))
    return fixed(parse_utc_offset_s(text, option));
  TimeZone z;
  try {
    // With USE_OS_TZDB the database is the list of files under the system's zoneinfo folder; a
    // name that is not one of them ("../../etc/passwd") is not found.
    z.zone_ = date::locate_zone(s);
  } catch (const std::exception& e) {
    throw Error(fmt::format(
        "{} '{}': no such time zone in the system's time zone database ({}); expected hours east "
        "of UTC such as 0, +01:00 or 5.5, or an IANA zone name such as Europe/Berlin (Debian "
        "package tzdata)",
        option, text, e.what()));
  }
  return z;
}

std::int64_t TimeZone::offset_at(std::int64_t utc_s) const {
  if (!zone_) return offset_s_;
  return zone_->get_info(date::sys_seconds{std::chrono::seconds{utc_s}}).offset.count();
}

TimeZone::Local TimeZone::resolve(std::int64_t local_s) const {
  Local r;
  if (!zone_) {
    r.first_s = r.second_s = local_s - offset_s_;
    r.first_offset_s = r.second_offset_s = offset_s_;
    return r;
  }
  const date::local_info i = zone_->get_info(local_of(local_s));
  r.first_offset_s = i.first.offset.count();
  r.first_s = local_s - r.first_offset_s;
  if (i.result == date::local_info::unique) {
    r.second_s = r.first_s;
    r.second_offset_s = r.first_offset_s;
    return r;
  }
  r.kind =
      i.result == date::local_info::ambiguous ? Local::Kind::ambiguous : Local::Kind::nonexistent;
  r.second_offset_s = i.second.offset.count();
  r.second_s = local_s - r.second_offset_s;
  r.change_s = unix_of(i.first.end);
  return r;
}

std::int64_t TimeZone::to_utc(std::int64_t local_s, std::string_view where) const {
  const Local r = resolve(local_s);
  if (r.kind == Local::Kind::unique) return r.first_s;
  const std::string wall = energy::format_wall_time(local_s, 0);
  // the change in local time before and after it, and in UTC; the two readings of `wall`
  const std::string before = energy::format_wall_time(r.change_s, r.first_offset_s),
                    after = energy::format_wall_time(r.change_s, r.second_offset_s),
                    change_utc = energy::format_wall_time(r.change_s, 0),
                    first_utc = energy::format_wall_time(r.first_s, 0),
                    second_utc = energy::format_wall_time(r.second_s, 0),
                    first_off = offset_text(r.first_offset_s),
                    second_off = offset_text(r.second_offset_s);
  if (r.kind == Local::Kind::ambiguous)
    throw Error(fmt::format(
        "{}: {} happens twice in {} (the clocks go back from {} to {} at {}Z): at {} it is {}Z, "
        "at {} it is {}Z; expected the time with its offset, e.g. {}{}",
        where, wall, describe(), before, after, change_utc, first_off, first_utc, second_off,
        second_utc, wall, second_off));
  throw Error(fmt::format(
      "{}: {} does not exist in {} (the clocks go forward from {} to {} at {}Z): at {} it would "
      "be {}Z, at {} {}Z; expected a time outside the skipped hour, or with its offset, e.g. {}{}",
      where, wall, describe(), before, after, change_utc, first_off, first_utc, second_off,
      second_utc, wall, first_off));
}

std::int64_t TimeZone::to_utc_earliest(std::int64_t local_s) const {
  const Local r = resolve(local_s);
  return r.kind == Local::Kind::nonexistent ? r.change_s : r.first_s;
}

std::string TimeZone::describe() const {
  if (zone_) return zone_->name();
  return "UTC" + offset_text(offset_s_);
}

std::string format_wall_time(std::int64_t utc_s, const TimeZone& zone) {
  return energy::format_wall_time(utc_s, zone.offset_at(utc_s));
}

std::string format_iso_time(std::int64_t utc_s, const TimeZone& zone) {
  return energy::format_iso_time(utc_s, zone.offset_at(utc_s));
}

}  // namespace gt::sched
