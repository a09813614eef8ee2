// bench/alternate.h: what the side-by-side benchmarks share: their command line
// ([precision] [batch] [reps] [threads]) and the timing of two forms of the same work run
// alternately in one process, so that the machine's drift hits both alike (medians).
#pragma once
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "backend/backend.h"
#include "core/parse.h"

namespace gt::bench {

struct Args {
  Precision precision;
  int batch, reps, threads;
};

/// argv: [precision=bf16] [batch=8] [reps=default_reps] [threads=2]; sets OpenMP's threads.
/// Throws gt::Error for an unknown precision or a count that is not a whole number (naming
/// the argument and its value).
inline Args parse_args(int argc, char** argv, int default_reps) {
  auto count = [&](int i, const char* what, int dflt) {
    return argc > i ? parse_number<int>(argv[i], what, "a whole number") : dflt;
  };
  Args a{parse_precision(argc > 1 ? argv[1] : "bf16"), count(2, "argument 2 (batch)", 8),
         count(3, "argument 3 (reps)", default_reps), count(4, "argument 4 (threads)", 2)};
  omp_set_num_threads(a.threads);
  return a;
}

/// Runs run(r, k) for form k = 0 then k = 1, in rounds r = 0..reps, timing each call (s) and
/// then calling after(r, k) untimed; round 0 warms up (oneDNN creates its primitives) and is
/// not counted. Returns each form's median seconds.
template <typename Run, typename After>
std::array<double, 2> alternate(int reps, Run run, After after) {
  std::array<std::vector<double>, 2> t;
  for (int r = 0; r <= reps; ++r)
    for (int k = 0; k < 2; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      run(r, k);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      after(r, k);
      if (r > 0) t[k].push_back(s);
    }
  std::array<double, 2> med;
  for (int k = 0; k < 2; ++k) {
    std::sort(t[k].begin(), t[k].end());
    med[k] = t[k][t[k].size() / 2];
  }
  return med;
}

}  // namespace gt::bench
