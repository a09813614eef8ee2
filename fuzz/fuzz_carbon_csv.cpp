// fuzz/fuzz_carbon_csv.cpp: carbon-intensity CSV files and times on any bytes: the energy
// module's reader (energy/carbon.h: BOM, CRLF, quotes, naive and offset times, gaps), its
// intensity series and integrals, and the scheduler's resampling onto a slot grid
// (sched/carbon_grid.h), at a fixed offset and in Europe/Berlin (a local-time series across
// daylight-saving changes). The first byte picks the naive times' UTC offset, the slot length and
// the slot value rule.
#include "energy/carbon.h"
#include "fuzz/fuzz_util.h"
#include "sched/carbon_grid.h"

namespace {
// Europe/Berlin, or UTC+1 where there is no zoneinfo.
const gt::sched::TimeZone& berlin() {
  static const gt::sched::TimeZone z = [] {
    try {
      return gt::sched::TimeZone::parse("Europe/Berlin");
    } catch (const gt::Error&) {
      return gt::sched::TimeZone(3600);
    }
  }();
  return z;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gt;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const uint8_t o = fuzz::take_byte(in);
  const std::int64_t offset_s = (static_cast<int>(o & 7) - 3) * 3600;
  const std::string path = fuzz::write_file("carbon.csv", in);
  fuzz::expect_errors([&] {
    auto ci = energy::CarbonIntensity::from_csv(path, static_cast<double>(offset_s) / 3600);
    (void)ci.at(0);
    (void)ci.integrate_g(ci.series_start_unix_s(), ci.series_end_unix_s() + 3600, 100);
  });
  fuzz::expect_errors([&] {
    sched::SlotGrid grid;
    grid.slot_s = (o & 8) ? 900 * (1 + (o >> 5)) : 0;
    grid.value_at_start = o & 16;
    sched::CarbonSeries s = sched::load_carbon_csv(path, offset_s, grid);
    (void)sched::gap_warnings(s);
    (void)s.mean_g_co2e_per_kwh();
    (void)s.g_co2e(s.start_s, s.end_s(), 100);
    sched::CarbonSeries z = sched::load_carbon_csv(path, berlin(), grid);
    (void)z.g_co2e(z.start_s, z.end_s(), 100);
  });
  // the first line as a time and as a UTC offset (command-line values)
  const std::string_view line = in.substr(0, std::min(in.find('\n'), in.size()));
  fuzz::expect_errors([&] { (void)energy::parse_time_or_throw(line, offset_s, "time"); });
  fuzz::expect_errors([&] { (void)sched::parse_utc_offset_s(line); });
  fuzz::expect_errors([&] { (void)sched::TimeZone::parse(line).describe(); });
  return 0;
}
