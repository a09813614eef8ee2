// sched/slurm.h: submits a plan to Slurm with sbatch. Each contiguous job becomes one
// `sbatch --begin=START --deadline=DEADLINE`; an interruptible job becomes one sbatch per run,
// each `--begin` at its run, with `--time` the run's length, `--signal=B:TERM@60 --requeue`
// (greentrain train checkpoints on SIGTERM and exits 143) and `--dependency=afterany:PREV` so
// the runs follow each other and each resumes the last. Times are wall clock at the user's
// stated UTC offset: Slurm reads them in the controller's local zone, so the two must agree.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sched/jobs.h"
#include "sched/planner.h"

namespace gt::sched {

/// One sbatch invocation. Arguments may hold the placeholder "{prev}", the Slurm job id of the
/// previous run of the same job.
struct SbatchCall {
  std::string job_name;
  std::size_t run_index = 0;
  std::vector<std::string> args;  ///< without the program name
};

/// The sbatch calls that submit every scheduled job of the plan (unscheduled jobs are skipped).
std::vector<SbatchCall> sbatch_calls(const Plan& plan, const std::vector<Job>& jobs,
                                     std::int64_t utc_offset_s);

/// The call as a shell command line (POSIX-quoted), with "{prev}" shown as $PREV_JOBID.
std::string sbatch_command_line(const std::string& sbatch, const SbatchCall& call);

/// The sbatch program: $GT_SBATCH if set, else "sbatch".
std::string sbatch_program();

/// Runs the calls in order (sbatch --parsable prints the job id), substituting "{prev}".
/// Returns the Slurm job ids. Throws gt::Error naming the job when sbatch fails.
std::vector<std::string> submit_sbatch(const std::vector<SbatchCall>& calls,
                                       const std::string& sbatch);

}  // namespace gt::sched
