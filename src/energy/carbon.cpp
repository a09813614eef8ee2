// energy/carbon.cpp: see carbon.h.
#include "energy/carbon.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/name_table.h"
#include "energy/carbon_regions.h"
#include "energy/carbon_text.h"

namespace gt::energy {

namespace {
namespace chr = std::chrono;
using carbon_text::kTimeForm;
using carbon_text::trim;
using carbon_text::utc_text;

// All of `s` is decimal digits; its value in `out`.
bool digits(std::string_view s, int& out) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  return std::from_chars(s.data(), s.data() + s.size(), out).ec == std::errc();
}

std::string offset_text(std::int64_t s) {
  const std::int64_t a = s < 0 ? -s : s;
  return fmt::format("{}{:02}:{:02}", s < 0 ? '-' : '+', a / 3600, (a / 60) % 60);
}

constexpr std::int64_t kMaxOffsetS = 14 * 3600;

// The likely unit mistake behind an implausible intensity `g` (gCO2e/kWh as read) and how to
// correct it: `fix_low` below the plausible range, `fix_high` above it. Empty when plausible.
std::string unit_mistake_hint(double g, const std::string& fix_low, const std::string& fix_high) {
  if (plausible_intensity(g)) return "";
  if (g == 0)
    return "0 is no grid's intensity: a zero standing for a missing value? (an empty cell or "
           "null is read as no value)";
  if (g < kPlausibleMinGCo2ePerKwh)
    return fmt::format(
        "below {:g} it looks like kg/kWh (= t/MWh) taken for g/kWh, 1000x too low: {}",
        kPlausibleMinGCo2ePerKwh, fix_low);
  return fmt::format(
      "above {:g} it looks like g/MWh taken for g/kWh (1000x too high) or lbs/MWh (2.2x too "
      "high): {}",
      kPlausibleMaxGCo2ePerKwh, fix_high);
}

}  // namespace

std::optional<ParsedTime> parse_time(std::string_view text, std::int64_t naive_utc_offset_s,
                                     std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<ParsedTime> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  const std::string_view s = trim(text);
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
  if (s.size() < 10 || s[4] != '-' || s[7] != '-' || !digits(s.substr(0, 4), y) ||
      !digits(s.substr(5, 2), mo) || !digits(s.substr(8, 2), d))
    return fail("no date YYYY-MM-DD at its start");
  if (s.size() < 16 || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' ||
      !digits(s.substr(11, 2), h) || !digits(s.substr(14, 2), mi))
    return fail("no time HH:MM after the date");
  std::size_t pos = 16;
  if (s.size() > 16 && s[16] == ':') {
    if (s.size() < 19 || !digits(s.substr(17, 2), se)) return fail("seconds are not :SS");
    pos = 19;
  }
  if (pos < s.size() && s[pos] == '.') return fail("fractional seconds are not supported");
  std::optional<std::int64_t> offset;
  if (std::string_view z = s.substr(pos); !z.empty()) {
    if (z == "Z" || z == "z") {
      offset = 0;
    } else if (z[0] == '+' || z[0] == '-') {
      const std::string_view r = z.substr(1);
      int oh = 0, om = 0;
      const bool ok =
          (r.size() == 2 && digits(r, oh)) ||
          (r.size() == 4 && digits(r.substr(0, 2), oh) && digits(r.substr(2), om)) ||
          (r.size() == 5 && r[2] == ':' && digits(r.substr(0, 2), oh) && digits(r.substr(3), om));
      if (!ok) return fail(fmt::format("offset '{}' is not Z, +HH:MM, +HHMM or +HH", z));
      const std::int64_t a = oh * 3600 + om * 60;
      if (om > 59 || a > kMaxOffsetS) return fail(fmt::format("offset '{}' is beyond 14 hours", z));
      offset = z[0] == '-' ? -a : a;
    } else {
      return fail(fmt::format("'{}' after the time is not an offset such as Z or +02:00", z));
    }
  }
  if (h > 23 || mi > 59 || se > 59) return fail("hour must be 00-23, minute and second 00-59");
  const chr::year_month_day ymd{chr::year{y}, chr::month{static_cast<unsigned>(mo)},
                                chr::day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) return fail(fmt::format("{:04}-{:02}-{:02} is not a calendar date", y, mo, d));
  const chr::sys_seconds local =
      chr::sys_days{ymd} + chr::hours{h} + chr::minutes{mi} + chr::seconds{se};
  return ParsedTime{local.time_since_epoch().count() - offset.value_or(naive_utc_offset_s),
                    offset.has_value()};
}

ParsedTime parse_time_or_throw(std::string_view text, std::int64_t naive_utc_offset_s,
                               std::string_view where) {
  std::string why;
  auto t = parse_time(text, naive_utc_offset_s, &why);
  if (!t)
    throw Error(fmt::format("{}: time '{}' is not valid ({}); expected {}", where,
                            quote_line(text, 60), why, kTimeForm));
  return *t;
}

std::optional<double> parse_local_time(const std::string& s, double utc_offset_h) {
  if (!(std::abs(utc_offset_h) <= 14)) return std::nullopt;
  auto t = parse_time(s, std::llround(utc_offset_h * 3600));
  if (!t) return std::nullopt;
  return static_cast<double>(t->unix_s);
}

std::int64_t civil_to_unix_s(int year, int month, int day, int hour, int minute, int second,
                             std::int64_t utc_offset_s) {
  const chr::year_month_day ymd{chr::year{year}, chr::month{static_cast<unsigned>(month)},
                                chr::day{static_cast<unsigned>(day)}};
  if (!ymd.ok())
    throw Error(
        fmt::format("{:04}-{:02}-{:02}: not a calendar date; expected a valid "
                    "year, month 1-12 and a day of that month",
                    year, month, day));
  const chr::sys_seconds t =
      chr::sys_days{ymd} + chr::hours{hour} + chr::minutes{minute} + chr::seconds{second};
  return t.time_since_epoch().count() - utc_offset_s;
}

std::string format_wall_time(std::int64_t unix_s, std::int64_t utc_offset_s) {
  const chr::sys_seconds t{chr::seconds{unix_s + utc_offset_s}};
  const auto day = chr::floor<chr::days>(t);
  const chr::year_month_day ymd{day};
  const chr::hh_mm_ss hms{t - day};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                     hms.hours().count(), hms.minutes().count(), hms.seconds().count());
}

std::string format_iso_time(std::int64_t unix_s, std::int64_t utc_offset_s) {
  return format_wall_time(unix_s, utc_offset_s) + offset_text(utc_offset_s);
}

std::string format_span_s(std::int64_t s) {
  if (s < 0) return fmt::format("-{}", format_span_s(-s));
  if (s < 60) return fmt::format("{} s", s);
  if (s % 60) return fmt::format("{} min {} s", s / 60, s % 60);
  const std::int64_t m = s / 60;
  if (m < 60) return fmt::format("{} min", m);
  const std::int64_t h = m / 60;
  if (h < 24) return m % 60 ? fmt::format("{} h {} min", h, m % 60) : fmt::format("{} h", h);
  return h % 24 || m % 60 ? fmt::format("{} d {} h{}", h / 24, h % 24,
                                        m % 60 ? fmt::format(" {} min", m % 60) : "")
                          : fmt::format("{} d", h / 24);
}

std::string carbon_text::implausible_series_warning(const CarbonCsv& c, std::size_t n, double v,
                                                    const std::string& where,
                                                    const CarbonReadOptions& o) {
  // "--carbon-unit kg/kWh" on the command line, "energy.carbon_unit = 'kg/kWh'" in a file
  auto set_unit = [&o](const char* u) {
    return o.option_prefix.rfind("--", 0) == 0
               ? fmt::format("set {} {}", o.option_name("unit"), u)
               : fmt::format("set {} = '{}'", o.option_name("unit"), u);
  };
  return fmt::format(
      "carbon series {}: {} of {} values lie outside {:g}..{:g} gCO2e/kWh, the plausible range "
      "of a grid's intensity (the first: {:g} gCO2e/kWh at {}{}); {}; the values are used as read",
      c.path, n, c.t_s.size(), kPlausibleMinGCo2ePerKwh, kPlausibleMaxGCo2ePerKwh, v, where,
      c.unit == "g/kWh" ? "" : ", read in " + c.unit,
      unit_mistake_hint(v, set_unit("kg/kWh"),
                        set_unit("lbs/MWh") + " for pounds, or give g/MWh in g/kWh (/ 1000)"));
}

std::string CarbonCsv::describe() const {
  std::string what = format;
  if (!value_column.empty()) what += (what.empty() ? "" : " ") + value_column;
  if (!unit.empty() && unit != "g/kWh") what += " in " + unit;
  if (!note.empty()) what += ", " + note;
  return fmt::format(
      "{}{}, {} rows, step {}{}{}", what.empty() ? "" : what + ", ", zone_text(), t_s.size(),
      format_span_s(step_s), gaps.empty() ? "" : fmt::format(", {} gap(s)", gaps.size()),
      null_rows ? fmt::format(", {} null value(s) left out as gaps", null_rows) : "");
}

std::string CarbonCsv::zone_text() const {
  if (explicit_offsets) return "times with their own UTC offsets";
  if (!naive_zone.empty()) return "naive times in " + naive_zone;
  return fmt::format("naive times at UTC{}",
                     naive_utc_offset_s == 0 ? "+0" : offset_text(naive_utc_offset_s));
}

std::string describe_gap(const CarbonGap& gap, std::int64_t step_s) {
  return fmt::format(
      "no rows from {} to {} ({} between rows, the series' step is {}); the value at {} was held",
      utc_text(gap.last_row_s + step_s), utc_text(gap.next_row_s),
      format_span_s(gap.next_row_s - gap.last_row_s), format_span_s(step_s),
      utc_text(gap.last_row_s));
}

constexpr NameTable<CarbonOrigin, 4> kCarbonOriginNames{{{CarbonOrigin::kDefault, "default"},
                                                         {CarbonOrigin::kConstant, "constant"},
                                                         {CarbonOrigin::kCsv, "csv"},
                                                         {CarbonOrigin::kCountry, "country"}}};
const char* to_string(CarbonOrigin o) { return name_of(kCarbonOriginNames, o).data(); }

CarbonIntensity::CarbonIntensity() = default;

CarbonIntensity CarbonIntensity::world_average(const std::string& how_to_set) {
  CarbonIntensity c;
  c.set_by_ = how_to_set;  // for the default: how to set one
  return c;
}

CarbonIntensity CarbonIntensity::constant(double g, const std::string& region,
                                          const std::string& set_by) {
  if (!(g >= 0) || !std::isfinite(g))
    throw Error(fmt::format("{}carbon intensity {}: expected a number >= 0 gCO2e/kWh",
                            set_by.empty() ? "" : set_by + ": ", g));
  CarbonIntensity c;
  c.constant_ = g;
  c.region_ = region;
  c.set_by_ = set_by;
  c.origin_ = CarbonOrigin::kConstant;
  return c;
}

CarbonIntensity CarbonIntensity::for_country(const std::string& iso_code,
                                             const std::string& set_by) {
  const CountryIntensity e = country_or_throw(iso_code, set_by);
  CarbonIntensity c = constant(e.g_co2e_per_kwh, "", set_by);
  c.origin_ = CarbonOrigin::kCountry;
  c.from_table_ = true;
  c.country_iso_code_ = e.iso_code;
  c.country_name_ = e.name;
  return c;
}

CarbonIntensity CarbonIntensity::with_country(const std::string& iso_code,
                                              const std::string& set_by) const {
  const CountryIntensity e = country_or_throw(iso_code, set_by);
  CarbonIntensity c = *this;
  c.country_iso_code_ = e.iso_code;
  c.country_name_ = e.name;
  return c;
}

CarbonIntensity CarbonIntensity::from_csv(const std::string& path, double utc_offset_h,
                                          const std::string& region, const CarbonReadOptions& opt) {
  if (!(std::abs(utc_offset_h) <= 14))
    throw Error(fmt::format("{}: UTC offset {} h; expected hours east of UTC from -14 to 14", path,
                            utc_offset_h));
  CarbonIntensity c;
  c.csv_ = read_carbon_csv(path, std::llround(utc_offset_h * 3600), opt);
  for (std::size_t i = 0; i < c.csv_->t_s.size(); ++i) {
    c.t_.push_back(static_cast<double>(c.csv_->t_s[i]));
    c.g_.push_back(c.csv_->g_co2e_per_kwh[i]);
  }
  c.step_s_ = static_cast<double>(c.csv_->step_s);
  c.region_ = region;
  c.origin_ = CarbonOrigin::kCsv;
  return c;
}

std::vector<std::string> CarbonIntensity::warnings() const {
  std::vector<std::string> out;
  if (csv_) {
    if (!csv_->implausible_warning.empty()) out.push_back(csv_->implausible_warning);
  } else if (origin_ == CarbonOrigin::kConstant && constant_ != 0 &&
             !plausible_intensity(constant_)) {
    out.push_back(fmt::format(
        "{}carbon intensity {:g} gCO2e/kWh lies outside {:g}..{:g} gCO2e/kWh, the plausible "
        "range of a grid's intensity; {}; it is used as given",
        set_by_.empty() ? "" : set_by_ + ": ", constant_, kPlausibleMinGCo2ePerKwh,
        kPlausibleMaxGCo2ePerKwh,
        unit_mistake_hint(constant_, "give it in gCO2e/kWh (0.4 kg/kWh is 400 gCO2e/kWh)",
                          "give it in gCO2e/kWh (400,000 g/MWh is 400 gCO2e/kWh)")));
  }
  return out;
}

std::optional<double> CarbonIntensity::constant_g_per_kwh() const {
  if (is_series()) return std::nullopt;
  return constant_;
}

double CarbonIntensity::at(double unix_s) const {
  if (t_.empty()) return constant_;
  // A series' last value holds for one more step (its row covers one step).
  if (unix_s < t_.front() || unix_s > t_.back() + step_s_) out_of_range_ = true;
  auto it = std::upper_bound(t_.begin(), t_.end(), unix_s);
  if (it == t_.begin()) return g_.front();
  return g_[static_cast<size_t>(it - t_.begin()) - 1];
}

double CarbonIntensity::integrate_g(double t0, double t1, double power_w) const {
  if (t1 <= t0) return 0;
  if (t_.empty()) return g_co2e(power_w * (t1 - t0), constant_);
  double g = 0, t = t0;
  while (t < t1) {
    auto it = std::upper_bound(t_.begin(), t_.end(), t);
    double next = it == t_.end() ? t1 : std::min(t1, *it);
    g += g_co2e(power_w * (next - t), at(t));
    t = next;
  }
  return g;
}

double CarbonIntensity::energy_g(double t0, double t1, double energy_j) const {
  if (t_.empty() || !(t1 > t0)) return g_co2e(energy_j, at(t1));
  const double span = t1 - t0;
  double g = 0, t = t0;
  while (t < t1) {
    auto it = std::upper_bound(t_.begin(), t_.end(), t);
    const double next = it == t_.end() ? t1 : std::min(t1, *it);
    g += g_co2e(energy_j * ((next - t) / span), at(t));
    t = next;
  }
  return g;
}

std::vector<std::string> CarbonIntensity::span_flags(double t0, double t1) const {
  std::vector<std::string> out;
  if (!csv_) return out;
  const double end = t_.back() + step_s_;  // the last row holds for one step
  if (t0 < t_.front() || t1 > end) {
    // the measured interval, the series' first and last rows by their timestamps, and which
    // value was used for how long at either end
    const std::int64_t a = std::llround(std::floor(t0)), b = std::llround(std::ceil(t1));
    const std::int64_t last = csv_->t_s.back(), covered = last + csv_->step_s;
    std::string used;
    if (t0 < t_.front())
      used = fmt::format("before {} its first value, {:g} gCO2e/kWh, was used ({})",
                         utc_text(csv_->t_s.front()), g_.front(),
                         format_span_s(std::llround(std::min(t1, t_.front()) - t0)));
    if (t1 > end)
      used += fmt::format("{}after {} its last value, {:g} gCO2e/kWh, was used ({})",
                          used.empty() ? "" : "; ", utc_text(covered), g_.back(),
                          format_span_s(std::llround(t1 - std::max(t0, end))));
    out.push_back(fmt::format(
        "{}{} .. {} lies {}outside the intensity series {}, whose rows run from {} to its last "
        "row at {} (step {}: it covers up to {}); {}",
        kCarbonOutsideFlag, utc_text(a), utc_text(b),
        t0 >= end || t1 <= t_.front() ? "" : "partly ", csv_->path, utc_text(csv_->t_s.front()),
        utc_text(last), format_span_s(csv_->step_s), utc_text(covered), used));
  }
  for (const CarbonGap& gap : csv_->gaps) {
    const double hole0 = static_cast<double>(gap.last_row_s + csv_->step_s);
    const double hole1 = static_cast<double>(gap.next_row_s);
    if (t1 > hole0 && t0 < hole1) out.push_back("carbon: " + describe_gap(gap, csv_->step_s));
  }
  return out;
}

std::string CarbonIntensity::describe() const {
  const std::string in_region = region_.empty() ? "" : fmt::format(" ({})", region_);
  switch (origin_) {
    case CarbonOrigin::kDefault:
      if (!set_by_.empty())
        return fmt::format(
            "{:g} gCO2e/kWh, default (IEA world average; no intensity was set: set {})", constant_,
            set_by_);
      return fmt::format(
          "{:g} gCO2e/kWh, default (IEA world average; no intensity was set: set "
          "energy.carbon_region, energy.carbon_intensity or energy.carbon_csv, or for "
          "`greentrain measure` --carbon-region, --carbon-intensity or --carbon-csv)",
          constant_);
    case CarbonOrigin::kConstant:
      return fmt::format("{:g} gCO2e/kWh, constant{}{}{}", constant_,
                         set_by_.empty() ? "" : " from " + set_by_, in_region,
                         country_iso_code_.empty() ? "" : " for " + country_iso_code_);
    case CarbonOrigin::kCsv:
      return fmt::format("series {} ({}{}{})", csv_->path, region_.empty() ? "" : region_ + "; ",
                         country_iso_code_.empty() ? "" : country_iso_code_ + "; ",
                         csv_->describe());
    case CarbonOrigin::kCountry:
      return fmt::format("{:g} gCO2e/kWh, {} ({}) annual average of {}{}", constant_,
                         country_iso_code_, country_name_, kCountryIntensitySource,
                         set_by_.empty() ? "" : " from " + set_by_);
  }
  return "";
}

}  // namespace gt::energy
