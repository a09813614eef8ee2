// tests/sched/jobs_test_util.h: helpers of the job-list tests (test_jobs.cpp, test_job_runs.cpp):
// a job list's error, a job list of one job.
#pragma once
#include <cstdint>
#include <string>

#include "core/error.h"
#include "sched/jobs.h"
#include "test_util.h"

namespace gt::sched::test {

/// The message of the gt::Error that load_jobs_toml(path, off) throws; "" when it loads.
inline std::string error_of(const std::string& path, std::int64_t off = 0) {
  try {
    load_jobs_toml(path, off);
  } catch (const gt::Error& e) {
    return e.what();
  }
  return "";
}

/// A job list of one job, `file` in d: the TOML lines `keys` (name and command among them), then
/// its window, earliest_start to deadline (TOML date-times). Returns the file's path.
inline std::string write_job(const TempDir& d, const std::string& file, const std::string& keys,
                             const std::string& earliest_start = "2020-06-01T18:00:00",
                             const std::string& deadline = "2020-06-02T08:00:00") {
  return d.write(file, "[[job]]\n" + keys + "\nearliest_start = " + earliest_start +
                           "\ndeadline = " + deadline + "\n");
}

}  // namespace gt::sched::test
