// sched/jobs.h: the job list a user asks greentrain to schedule (a TOML file of [[job]] tables).
//
//   [[job]]
//   name = "gpt-small"
//   command = "greentrain train configs/small.toml --out runs/a"   # or script = "a.sbatch"
//   duration_s = 7200            # or summary = "runs/a" (a run folder or its summary.json):
//                                # the whole run's wall time and joules, over all sessions
//   power_w = 300                # average power while running, W (also its power cap);
//                                # with summary, optional: its joules over its wall time
//   nominal_start = 2020-06-01T20:00:00    # when it would run unshifted (the baseline);
//                                          # optional, default earliest_start
//   earliest_start = 2020-06-01T18:00:00   # TOML date-time; without offset: in the --utc-offset
//   zone
//                                          # (an error where a named zone skips or repeats it);
//                                          # may lie before nominal_start (a +-w window)
//   deadline = 2020-06-02T08:00:00
//   interruptible = true         # checkpoints on SIGTERM and resumes (default false)
//   interruption_s = 90          # each resume's checkpoint + restart, s; default: with summary
//                                # and interruptible, the run's own measurements (summary.json's
//                                # "interruption": checkpoint_write_s + restart_s), else 0
//   max_interruptions = 3        # most interruptions (default: no bound)
//   # or, instead of duration_s/summary and power_w, a power-limit profile: the planner then
//   # chooses the cap together with the start (planner.h)
//   power_profile = "tune.json"  # what `greentrain tune --profile tune.json` wrote
//   steps = 5000                 # the job's training steps
//   cap_device = "gpu"           # gpu (sbatch --gpu-power-limit) or cpu (train.power_limit
//                                # on the CPU packages); the profile must have been measured on
//                                # that kind of device (its "devices": nvml for gpu, rapl for
//                                # cpu; a simulated one, sim, is refused for both)
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sched/carbon_grid.h"

namespace gt::sched {

/// One power limit a job may run at, from its `greentrain tune` profile (tune/tuner.h: seconds
/// and joules per step at each limit) and its number of steps.
struct CapOption {
  double limit_w = 0;     ///< the power limit, W (each device; what the profile's limit_w says)
  double duration_s = 0;  ///< steps x time_per_step_s, s
  double power_w = 0;     ///< energy_per_step_j / time_per_step_s, W (all devices)
};

/// Where a planned cap is applied at submission: gpu = sbatch --gpu-power-limit (the SPANK
/// plugin, src/sched/spank), cpu = `--set train.power_limit=W` on the greentrain train command.
enum class CapDevice { gpu, cpu };

/// One job to place in time.
struct Job {
  std::string name;
  std::string command;             ///< shell command (submitted with sbatch --wrap); or empty
  std::string script;              ///< batch script path; or empty (exactly one of the two is set)
  double duration_s = 0;           ///< expected run time, s
  double power_w = 0;              ///< average power while running, W; also the job's power cap
                                   ///< (planned energy: power_w x duration_s, J)
  UnixTimeS earliest_start_s = 0;  ///< UTC, s: the plan may start it from then on
  /// UTC, s: when it runs unshifted (the baseline's start); empty: earliest_start_s.
  /// earliest_start_s <= nominal, and (when given) nominal + duration_s <= deadline_s.
  std::optional<UnixTimeS> nominal_start_s;
  UnixTimeS deadline_s = 0;    ///< UTC, s: the job must have finished by then
  bool interruptible = false;  ///< may be stopped (SIGTERM -> checkpoint) and resumed
  double interruption_s = 0;   ///< extra run time each resume costs (checkpoint at the stop,
                               ///< loading at the restart), s, at power_w; 0 = none
  /// Where interruption_s came from: "stated" (the job list), "measured in RUN (checkpoint write
  /// X s + restart Y s)" (its summary's measurements), or "default 0" with the reason.
  std::string interruption_source = "default 0";
  int max_interruptions = -1;  ///< most interruptions allowed; -1 = no bound
  /// Power limits the planner may choose among (highest first); empty: the job runs at power_w
  /// for duration_s with no limit set. With caps, duration_s and power_w are the highest
  /// limit's (the uncapped reference: shifting alone and the baseline use it).
  std::vector<CapOption> caps;
  CapDevice cap_device = CapDevice::gpu;
  /// Data-parallel tasks (MPI ranks) and nodes the job asks for (sbatch --ntasks, --nodes); with
  /// more than one task the command is launched by `srun --mpi=pmix` inside the allocation.
  /// power_w and duration_s are the whole job's. ntasks >= nodes >= 1.
  int ntasks = 1;
  int nodes = 1;
  /// Why power_w is an estimate (a summary whose run's energy was estimated: CPU TDP x
  /// utilization); empty when it is stated or measured.
  std::string power_estimated_reason;
  /// The nominal start, UTC s (nominal_start_s, else earliest_start_s).
  UnixTimeS nominal_s() const { return nominal_start_s.value_or(earliest_start_s); }
};

/// What a finished greentrain run tells a job list (its summary.json's run_totals, which add up
/// every session of a resumed run).
struct RunFigures {
  double wall_s = 0;               ///< the whole run's wall time, s (run_totals.wall_s: loading,
                                   ///< steps, evaluations, checkpoints; not duration_s, steps only)
  std::optional<double> energy_j;  ///< the whole run's energy, J (run_totals.energy_j); empty when
                                   ///< the run's energy is unknown (energy_unknown or no number)
  /// That energy is an estimate, at least in part: any session's was (run_totals'
  /// energy_estimated; a summary written before that key: its last session's energy_estimated).
  bool energy_estimated = false;
  /// How it was made (summary's energy_method, the last session's; "estimated in an earlier
  /// session of the run" where only an earlier session's was an estimate); may be empty.
  std::string energy_method;
  /// What an interruption cost the run (summary.json's "interruption", written by `greentrain
  /// train`): its last checkpoint write, s, and its session's start-up (process start to first
  /// step: loading the checkpoint and data when it resumed), s. Empty when not recorded, with
  /// the reason in interruption_unknown_reason.
  std::optional<double> checkpoint_write_s, restart_s;
  bool restart_resumed = false;  ///< restart_s was measured on a resumed session (else a fresh one)
  std::string interruption_unknown_reason;
};

/// Reads RunFigures from a greentrain run's summary.json (or a run folder holding one). Throws
/// gt::Error naming the file when it is unreadable or has no whole-run wall time (a summary
/// written before wall_s existed: give duration_s instead).
RunFigures run_figures_from_summary(const std::string& path);

/// Sets j.interruption_s and j.interruption_source from a run's measurements: checkpoint write +
/// restart seconds ("measured in SUMMARY (...)"), or 0 with the reason they are unknown
/// ("default 0: ..."). summary: the path as the job list gives it.
void interruption_from_run(Job& j, const RunFigures& run, const std::string& summary);

/// run_figures_from_summary(path).wall_s, s.
double duration_from_summary_s(const std::string& path);

/// The cap options of a `greentrain tune` profile (JSON, format greentrain-power-profile-1) for a
/// job of `steps` steps, highest limit first. `devices` (when given) gets the profile's
/// "devices", the names of the devices it was measured on ("nvml:0 (...)", "rapl:... (...)",
/// "sim:0"; empty for a profile without that list, one not written by `greentrain tune`).
/// Throws gt::Error naming the file and the limit when it is not such a profile or a point's
/// energy is unknown (null).
std::vector<CapOption> caps_from_profile(const std::string& path, double steps,
                                         std::vector<std::string>* devices = nullptr);

/// Loads and validates a job list. Date-times without an offset, and strings
/// "YYYY-MM-DD HH:MM[:SS]", are read on the wall clock of `zone`; relative paths in `summary`
/// and `script` are resolved against the TOML file's folder. Throws gt::Error naming the file,
/// job and key (unknown key, missing key, bad value, deadline not after earliest_start,
/// a power_profile measured on another kind of device than cap_device caps: the error names the
/// profile and both kinds,
/// duplicate name, a time `zone` skips or repeats at a daylight-saving change: both candidate
/// offsets are named, and the time must then state its offset).
std::vector<Job> load_jobs_toml(const std::string& path, const TimeZone& zone);

/// A deadline rule of "Let's Wait Awhile" (Wiesner et al., Middleware '21, section 5.3), applied
/// to a job's unshifted end (nominal start + duration) on the wall clock of its time zone:
///  - none:         no slack, the deadline is the unshifted end;
///  - next_workday: an end on a Saturday may move to Monday 09:00; on a Sunday or after 17:00 to
///                  09:00 the next day; before 09:00 to 09:00 that day; otherwise no slack
///                  (a Friday-evening end gets Saturday 09:00, as in the paper's code);
///  - semi_weekly:  an end in (Monday 09:00, Thursday 09:00] may move to Thursday 09:00,
///                  otherwise to the next Monday 09:00.
enum class DeadlineRule { none, next_workday, semi_weekly };

/// "none", "next-workday" or "semi-weekly" (underscores accepted); throws gt::Error naming
/// --deadline-rule otherwise.
DeadlineRule parse_deadline_rule(std::string_view name);

/// The latest end the rule allows for an unshifted end at `end_s` (UTC s), on the wall clock of
/// `zone`: in a named zone 09:00 is 09:00 local on either side of a daylight-saving change
/// (a computed time in a skipped or repeated hour: TimeZone::to_utc_earliest); returns UTC s
/// (>= end_s).
UnixTimeS rule_deadline_s(DeadlineRule rule, UnixTimeS end_s, const TimeZone& zone);

/// How a job CSV's rows become jobs where the CSV does not say.
struct JobCsvOptions {
  double window_s = -1;  ///< >= 0: earliest start = nominal - window_s, deadline =
                         ///< nominal + duration + window_s (the paper's +-w); < 0: unused
  DeadlineRule rule = DeadlineRule::none;  ///< deadline when there is no column and no window
  double deadline_grace_s = 0;  ///< added to every rule deadline, s (the paper's simulator lets
                                ///< a job end one 30-min slot after its deadline: 1800)
  double power_w = 0;           ///< power of rows without power_w, W; 0 = the column is required
  bool interruptible = false;   ///< rows without an interruptible column
};

/// Loads a job list from CSV (header required; comma-separated; columns in any order):
///   name or job_id                 job name (unique)
///   nominal_start or arrival_time  wall clock "YYYY-MM-DD HH:MM[:SS]" in `zone` (or with
///                                  its own offset): when the job runs unshifted
///   duration_s or duration_minutes expected run time
///   power_w (optional)             average power, W (else JobCsvOptions::power_w)
///   earliest_start, deadline (optional) date-times; else from the window or the deadline rule
///   interruptible (optional)       true/false/1/0
///   command (optional)             shell command to submit (a job without one can be planned,
///                                  not submitted)
///   arrival_minute (optional)      minutes since the first row's midnight, checked against
///                                  arrival_time when both are given (the paper's
///                                  ml_jobs_seed0.csv has both)
/// Throws gt::Error naming the file, line and column on bad input.
std::vector<Job> load_jobs_csv(const std::string& path, const TimeZone& zone,
                               const JobCsvOptions& opt);

}  // namespace gt::sched
