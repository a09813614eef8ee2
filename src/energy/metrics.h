// energy/metrics.h: training metrics from a Measurement's joules. Each returns an empty
// optional when its denominator is zero or the energy is undefined, never inf or NaN.
#pragma once
#include <optional>

namespace gt::energy {

/// J/token = energy_j / tokens.
inline std::optional<double> joules_per_token(double energy_j, double tokens) {
  if (!(tokens > 0) || !(energy_j >= 0)) return std::nullopt;
  return energy_j / tokens;
}

/// tokens/J = tokens / energy_j.
inline std::optional<double> tokens_per_joule(double tokens, double energy_j) {
  if (!(energy_j > 0) || !(tokens >= 0)) return std::nullopt;
  return tokens / energy_j;
}

/// GFLOP/s per W = (flop / duration_s / 1e9) / (energy_j / duration_s) = flop / energy_j / 1e9,
/// i.e. GFLOP per joule.
inline std::optional<double> gflops_per_watt(double flop, double energy_j) {
  if (!(energy_j > 0) || !(flop >= 0)) return std::nullopt;
  return flop / energy_j / 1e9;
}

}  // namespace gt::energy
