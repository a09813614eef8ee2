// Helpers shared by the sched tests: temporary folders and files.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "sched/carbon_grid.h"

namespace gt::sched::test {

/// A fresh temporary folder, removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "gt_sched_XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

/// n slots of slot_s seconds (from 1,600,000,200 s, a multiple of 900 s) of intensities
/// uniform in [50, 500) gCO2e/kWh from rng.
inline CarbonSeries random_series(std::mt19937_64& rng, std::size_t n, std::int64_t slot_s = 900) {
  CarbonSeries s;
  s.start_s = 1'600'000'200;
  s.slot_s = slot_s;
  std::uniform_real_distribution<double> u(50, 500);
  for (std::size_t i = 0; i < n; ++i) s.g_co2e_per_kwh.push_back(u(rng));
  return s;
}

}  // namespace gt::sched::test
