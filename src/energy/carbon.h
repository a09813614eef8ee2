// energy/carbon.h: grid carbon intensity (gCO2e/kWh), constant or a time series, and its
// integral against power over time: g = sum over intervals of E_kWh x intensity(t).
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace gt::energy {

/// Default intensity when none is given: 475 gCO2e/kWh, the IEA world average that CodeCarbon
/// also uses as its global fallback (IEA, Global Energy & CO2 Status Report 2019).
constexpr double kWorldAverageGCo2ePerKwh = 475.0;

class CarbonIntensity {
 public:
  /// A constant intensity (gCO2e/kWh) for `region` (a label shown in reports).
  static CarbonIntensity constant(double g_co2e_per_kwh, const std::string& region);
  /// A series from a CSV with columns `Time` ("YYYY-MM-DD HH:MM:SS", naive) and
  /// `Carbon Intensity` (gCO2e/kWh), as in shared/data/carbon/. The naive times are local at
  /// `utc_offset_h` hours east of UTC (0 for UTC). The intensity holds from its row's time to
  /// the next row (step function). Throws EnergyError naming file, line and value on bad input.
  static CarbonIntensity from_csv(const std::string& path, double utc_offset_h = 0,
                                  const std::string& region = "");
  /// Default: constant kWorldAverageGCo2ePerKwh, region "world average".
  CarbonIntensity();

  /// Intensity (gCO2e/kWh) at `unix_s` (seconds since 1970 UTC). Outside a series the nearest
  /// end value is used and out_of_range() becomes true.
  double at(double unix_s) const;
  /// gCO2e of `power_w` (constant W) from t0 to t1 (unix s), exact for the step series.
  double integrate_g(double t0_unix_s, double t1_unix_s, double power_w) const;
  bool is_series() const { return !t_.empty(); }
  double series_start_unix_s() const { return t_.empty() ? 0 : t_.front(); }
  double series_end_unix_s() const { return t_.empty() ? 0 : t_.back(); }
  bool out_of_range() const { return out_of_range_; }
  const std::string& region() const { return region_; }
  /// e.g. "constant 475 gCO2e/kWh (world average)" or "series ger_ci.csv (UTC+0), 37147 rows".
  std::string describe() const;

 private:
  double constant_ = kWorldAverageGCo2ePerKwh;
  std::string region_ = "world average";
  std::string source_;
  std::vector<double> t_, g_;
  mutable bool out_of_range_ = false;
};

/// Seconds since 1970 UTC of a naive "YYYY-MM-DD HH:MM:SS" (or "YYYY-MM-DDTHH:MM:SS") local
/// time `utc_offset_h` hours east of UTC; nullopt if malformed.
std::optional<double> parse_local_time(const std::string& s, double utc_offset_h);

/// grams CO2e of `energy_j` joules at `g_co2e_per_kwh` (1 kWh = 3.6e6 J).
inline double g_co2e(double energy_j, double g_co2e_per_kwh) {
  return energy_j / 3.6e6 * g_co2e_per_kwh;
}

}  // namespace gt::energy
