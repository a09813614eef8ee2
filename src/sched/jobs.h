// sched/jobs.h: the job list a user asks greentrain to schedule (a TOML file of [[job]] tables).
//
//   [[job]]
//   name = "gpt-small"
//   command = "greentrain train configs/small.toml --out runs/a"   # or script = "a.sbatch"
//   duration_s = 7200            # or summary = "runs/a" (a run folder or its summary.json):
//                                # the whole run's wall time and joules, over all sessions
//   power_w = 300                # average power while running, W (also its power cap);
//                                # with summary, optional: its joules over its wall time
//   earliest_start = 2020-06-01T18:00:00   # TOML date-time; without offset: --utc-offset zone
//   deadline = 2020-06-02T08:00:00
//   interruptible = true         # checkpoints on SIGTERM and resumes (default false)
#pragma once
#include <cstdint>
#include <optional>
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
                                   ///< (planned energy: power_w x duration_s, J)
  UnixTimeS earliest_start_s = 0;  ///< UTC, s
  UnixTimeS deadline_s = 0;        ///< UTC, s: the job must have finished by then
  bool interruptible = false;      ///< may be stopped (SIGTERM -> checkpoint) and resumed
};

/// What a finished greentrain run tells a job list (its summary.json's run_totals, which add up
/// every session of a resumed run).
struct RunFigures {
  double wall_s = 0;               ///< the whole run's wall time, s (run_totals.wall_s: loading,
                                   ///< steps, evaluations, checkpoints; not duration_s, steps only)
  std::optional<double> energy_j;  ///< the whole run's energy, J (run_totals.energy_j); empty when
                                   ///< the run's energy is unknown (energy_unknown or no number)
};

/// Reads RunFigures from a greentrain run's summary.json (or a run folder holding one). Throws
/// gt::Error naming the file when it is unreadable or has no whole-run wall time (a summary
/// written before wall_s existed: give duration_s instead).
RunFigures run_figures_from_summary(const std::string& path);

/// run_figures_from_summary(path).wall_s, s.
double duration_from_summary_s(const std::string& path);

/// Loads and validates a job list. Date-times without an offset, and strings
/// "YYYY-MM-DD HH:MM[:SS]", are read at utc_offset_s; relative paths in `summary` and `script`
/// are resolved against the TOML file's folder. Throws gt::Error naming the file, job and key
/// (unknown key, missing key, bad value, deadline not after earliest_start, duplicate name).
std::vector<Job> load_jobs_toml(const std::string& path, std::int64_t utc_offset_s);

}  // namespace gt::sched
