// sched/jobs.h: the job list a user asks greentrain to schedule (a TOML file of [[job]] tables).
//
//   [[job]]
//   name = "gpt-small"
//   command = "greentrain train configs/small.toml --out runs/a"   # or script = "a.sbatch"
//   duration_s = 7200            # or summary = "runs/a" (a run folder or its summary.json)
//   power_w = 300                # average power while running, W (also its power cap)
//   earliest_start = 2020-06-01T18:00:00   # TOML date-time; without offset: --utc-offset zone
//   deadline = 2020-06-02T08:00:00
//   interruptible = true         # checkpoints on SIGTERM and resumes (default false)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sched/carbon.h"

namespace gt::sched {

/// One job to place in time.
struct Job {
  std::string name;
  std::string command;             ///< shell command (submitted with sbatch --wrap); or empty
  std::string script;              ///< batch script path; or empty (exactly one of the two is set)
  double duration_s = 0;           ///< expected run time, s
  double power_w = 0;              ///< average power while running, W; also the job's power cap
  UnixTimeS earliest_start_s = 0;  ///< UTC, s
  UnixTimeS deadline_s = 0;        ///< UTC, s: the job must have finished by then
  bool interruptible = false;      ///< may be stopped (SIGTERM -> checkpoint) and resumed
};

/// Reads `duration_s` (s) from a greentrain run's summary.json (or a run folder holding one).
double duration_from_summary_s(const std::string& path);

/// Loads and validates a job list. Date-times without an offset, and strings
/// "YYYY-MM-DD HH:MM[:SS]", are read at utc_offset_s; relative paths in `summary` and `script`
/// are resolved against the TOML file's folder. Throws gt::Error naming the file, job and key
/// (unknown key, missing key, bad value, deadline not after earliest_start, duplicate name).
std::vector<Job> load_jobs_toml(const std::string& path, std::int64_t utc_offset_s);

}  // namespace gt::sched
