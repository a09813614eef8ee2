// sched/slurm.h: submits a plan to Slurm with sbatch. Each contiguous job becomes one
// `sbatch --begin=START --deadline=DEADLINE --time=LENGTH+MARGIN --time-min=LENGTH` (the margin:
// time_margin_s, 10 % of the planned length, at least 5 min; Slurm reckons --deadline with
// --time-min); an interruptible job becomes one sbatch per run,
// each `--begin` at its run, with `--time` the run's length plus the signal's 60 s lead (the
// signal comes when the run's planned work is done; the last run also gets the job's margin and
// `--time-min`, its length), `--signal=B:TERM@60 --requeue`
// (greentrain train checkpoints on SIGTERM and exits 143), `--open-mode=append` (a requeued
// run's log is added to, not truncated) and `--dependency=afterany:PREV` so
// the runs follow each other and each resumes the last; its `--wrap` command is exec'd, so the
// trainer itself is the batch shell that B:TERM signals (a job of several tasks gets
// --signal=TERM@60 instead: see sbatch_calls). Times are wall clock in the zone sbatch
// reads them in: the local time zone of the host that runs sbatch (sbatch(1), --begin: "the
// time is in the local time zone"), or the zone given as --cluster-tz; never the CSV's zone.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sched/jobs.h"
#include "sched/planner.h"

namespace gt::sched {

/// The time zone --begin and --deadline are written in.
class SlurmZone {
 public:
  /// This host's local zone as the C library sees it ($TZ, else /etc/localtime): where sbatch
  /// runs, it is the zone sbatch reads times in.
  static SlurmZone local();
  /// A fixed offset, seconds east of UTC.
  static SlurmZone fixed(std::int64_t utc_offset_s);
  /// A given zone (fixed offset or named).
  static SlurmZone of(const TimeZone& zone);
  /// "local", or what TimeZone::parse takes: an offset ("0", "+01:00", "-5") or an IANA zone
  /// name ("Europe/Berlin", daylight saving included). Throws gt::Error naming --cluster-tz and
  /// the value for an unknown zone.
  static SlurmZone parse(std::string_view text);
  /// `t` (UTC Unix seconds) as "YYYY-MM-DDTHH:MM:SS" wall clock in this zone, at the offset in
  /// force at t (in a zone's repeated hour the wall clock is the same for both occurrences, as
  /// Slurm's own reading of it is).
  std::string wall_time(UnixTimeS t) const;
  /// True when wall_time(t) also names another instant (the hour repeated when the clocks go
  /// back): Slurm reads such a time at an offset of its own choosing (its parse_time calls
  /// mktime with tm_isdst = -1), so sbatch_calls does not write it as a wall clock.
  bool ambiguous(UnixTimeS t) const;
  /// e.g. "the local zone of this host (TZ unset: /etc/localtime)", "UTC+02:00",
  /// "Europe/Berlin".
  std::string describe() const;

 private:
  bool local_ = true;
  TimeZone zone_;  // when not local_
};

/// One sbatch invocation. Arguments may hold the placeholder "{prev}", the Slurm job id of the
/// previous run of the same job, and "{now+T}" (T: UTC Unix seconds), an instant whose wall
/// clock is ambiguous in the cluster's zone: it becomes Slurm's relative form "now+N" (N = T -
/// the time of the sbatch call, s), which names the instant exactly.
struct SbatchCall {
  std::string job_name;
  std::size_t run_index = 0;
  std::vector<std::string> args;   ///< without the program name
  std::vector<std::string> notes;  ///< what the user should know about this call (in words)
  /// The arguments as the plan made them, before plan_for_submission moved the run's start to
  /// now (empty: the same as args). The submission record keys a call by these, so that a rerun
  /// with --shift-to-now, whose --begin is a later now, finds the runs it submitted before.
  std::vector<std::string> planned_args;
};

/// A run of a job: its name and the index of the run (0 for a job in one piece).
using RunId = std::pair<std::string, std::size_t>;

/// The plan's scheduled runs made submittable at `now_s` (UTC Unix s). A run that starts more
/// than kPastGraceS before now (a plan made on an old carbon series, a plan file kept too long)
/// is refused with gt::Error naming the job, its start and now, unless `shift_to_now`: then it
/// starts now, its length kept (the later runs of the job after it, if they would overlap), said
/// in `notes`. A job whose deadline has passed, or would be missed after the shift, is refused
/// always. Runs within the grace are submitted as planned (Slurm starts them at once).
/// Runs in `submitted` (Slurm has them already: the submission record) are left as planned,
/// neither refused for a start in the past nor shifted; a job all of whose runs are there is
/// not checked at all (its deadline included).
Plan plan_for_submission(const Plan& plan, const std::vector<Job>& jobs, UnixTimeS now_s,
                         bool shift_to_now, std::vector<std::string>* notes,
                         const std::set<RunId>& submitted = {});
inline constexpr UnixTimeS kPastGraceS = 600;

/// What `schedule --submit` submits at `now_s`: the sbatch calls (sbatch_calls, in `zone`) of
/// the plan made submittable (plan_for_submission), each with planned_args, its arguments as
/// planned. The runs whose planned call is in `record` (read_submission_record: submitted by an
/// earlier, partly failed run of the same command) are passed to plan_for_submission as
/// submitted, so a retry is not refused for their start having passed, and submit_sbatch skips
/// them. Throws gt::Error as plan_for_submission and sbatch_calls do.
std::vector<SbatchCall> submission_calls(const Plan& plan, const std::vector<Job>& jobs,
                                         const SlurmZone& zone, UnixTimeS now_s, bool shift_to_now,
                                         const std::map<std::string, std::string>& record,
                                         std::vector<std::string>* notes);

/// How long before a run's time limit Slurm signals an interruptible job (--signal=B:TERM@60,
/// or --signal=TERM@60 under srun), s: the time it has to checkpoint and exit.
inline constexpr std::int64_t kSignalLeadS = 60;

/// The margin a job's end gets in its --time beyond the planned length, so that a duration
/// estimated a little short is not killed at the limit: kTimeMarginShare of the job's planned
/// run time (all its runs), at least kTimeMarginMinS; returns s. It goes to the job's last run
/// (its only one when not interruptible): an earlier run of an interruptible job is meant to be
/// stopped at its planned end, the next run going on with the work. The plan and its power
/// budget count the planned length only: a job that runs into its margin draws power the plan
/// did not place there.
std::int64_t time_margin_s(std::int64_t planned_s);
inline constexpr double kTimeMarginShare = 0.10;
inline constexpr std::int64_t kTimeMarginMinS = 300;

/// The sbatch calls that submit every scheduled job of the plan (unscheduled jobs are skipped),
/// with --begin and --deadline in `zone`; a job whose plan chose a power limit gets
/// --gpu-power-limit=W (CapDevice::gpu; the SPANK plugin) or `--set train.power_limit=W --set
/// train.power_limit_device=cpu` appended to its greentrain train command (CapDevice::cpu: the
/// CPU packages, through RAPL, also on a node with GPUs). A job of ntasks > 1 gets
/// --ntasks/--nodes and its command runs under `srun --mpi=pmix --kill-on-bad-exit=1`; when
/// interruptible, its signal is --signal=TERM@60, which Slurm sends to the ranks themselves
/// (srun answers a SIGTERM of its own by killing its tasks with SIGKILL). Throws gt::Error for an
/// interruptible job whose command is not one simple command (it could not be exec'd to receive
/// SIGTERM), or for a job with neither command nor script (a job CSV row without a command), or for
/// a CPU job with a planned limit whose command is not `greentrain train ...`.
std::vector<SbatchCall> sbatch_calls(const Plan& plan, const std::vector<Job>& jobs,
                                     const SlurmZone& zone);
/// The same with times in `zone` (a fixed offset or a named zone).
std::vector<SbatchCall> sbatch_calls(const Plan& plan, const std::vector<Job>& jobs,
                                     const TimeZone& zone);

/// Empty when `command` is one simple shell command that `exec` can replace the batch shell
/// with; otherwise why not (it holds ; & | && || ( ) ` or a newline).
std::string exec_problem(const std::string& command);

/// The call as a shell command line (POSIX-quoted), with "{prev}" shown as $PREV_JOBID.
std::string sbatch_command_line(const std::string& sbatch, const SbatchCall& call);

/// The sbatch program: $GT_SBATCH if set, else "sbatch".
std::string sbatch_program();

/// Runs the calls in order (sbatch --parsable prints the job id), substituting "{prev}" and
/// "{now+T}". Returns the Slurm job ids. Throws gt::Error naming the job when sbatch fails, and
/// the calls already submitted with their ids (they stay queued).
///
/// With `record_path` (the schedule command gives "<jobs file>.submitted.json"), each id is
/// added to that file as soon as sbatch returns it, and a call found there (same job, run and
/// arguments as planned: submission_key) is not submitted again: its recorded id is used, and
/// `say` is told. So a rerun after a partial submission submits only what Slurm does not have
/// yet (build the calls with submission_calls, so that the rerun is not refused first).
std::vector<std::string> submit_sbatch(const std::vector<SbatchCall>& calls,
                                       const std::string& sbatch,
                                       const std::string& record_path = "",
                                       const std::function<void(const std::string&)>& say = {});

/// The submission record's format: "greentrain-submitted-2", whose keys (submission_key) hold
/// the sbatch arguments with the time limits of now (--time with its margin, --time-min).
inline constexpr char kSubmissionRecordFormat[] = "greentrain-submitted-2";
/// The format before it, whose keys hold the arguments of then: none matches a call of now.
inline constexpr char kOldSubmissionRecordFormat[] = "greentrain-submitted-1";

/// The submission record at `path`: call key -> Slurm job id (empty when there is no file).
/// Throws gt::Error naming the file when it is not such a record, and when it is one of
/// kOldSubmissionRecordFormat: no key of it can match, so a retry would submit the runs Slurm
/// has again; the error names its runs and Slurm job ids and says to check squeue, then remove
/// the record (an old record that names no run is read as empty).
std::map<std::string, std::string> read_submission_record(const std::string& path);
/// The key of a call in the record: its job, run and arguments as planned (planned_args, else
/// args; placeholders as written). A start shifted to now is not part of it: a rerun with
/// --shift-to-now finds what the first run submitted. The planned start is: a plan made anew on
/// another series (or from an edited job list) has other keys and is submitted, not taken for
/// the one Slurm has.
std::string submission_key(const SbatchCall& call);

}  // namespace gt::sched
