// serve/clocks.h: the node daemon's two clocks, shared by its files. Internal to gt_serve.
#pragma once
#include <time.h>

#include <chrono>

namespace gt::serve {

/// CLOCK_MONOTONIC in seconds: intervals (sampling periods, lease timeouts).
inline double mono_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Wall-clock Unix time in seconds: times written for other processes and people.
inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace gt::serve
