// sched/slurm.cpp: sbatch command lines for a plan, and running them.
#include "sched/slurm.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>

#include "core/error.h"

namespace gt::sched {

namespace {

std::string local_wall_time(UnixTimeS t) {
  ::tzset();  // localtime_r need not read $TZ itself
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  check(::localtime_r(&tt, &tm) != nullptr,
        fmt::format("time {} cannot be shown in the local time zone", t));
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

}  // namespace

SlurmZone SlurmZone::local() { return SlurmZone{}; }

SlurmZone SlurmZone::of(const TimeZone& zone) {
  SlurmZone z;
  z.local_ = false;
  z.zone_ = zone;
  return z;
}

SlurmZone SlurmZone::fixed(std::int64_t utc_offset_s) { return of(TimeZone::fixed(utc_offset_s)); }

SlurmZone SlurmZone::parse(std::string_view text) {
  if (text == "local") return local();
  return of(TimeZone::parse(text, "--cluster-tz"));
}

std::string SlurmZone::wall_time(UnixTimeS t) const {
  return local_ ? local_wall_time(t) : format_wall_time(t, zone_);
}

std::string SlurmZone::describe() const {
  if (!local_) return zone_.describe();
  const char* tz = std::getenv("TZ");
  return fmt::format("the local zone of this host ({})",
                     tz ? fmt::format("TZ={}", tz) : std::string("TZ unset: /etc/localtime"));
}

namespace {
// `greentrain train ...`, the program given by name or by any path to it
// (/opt/greentrain/bin/greentrain train ...): the command train.power_limit can be added to.
bool is_greentrain_train(const std::string& command) {
  const std::size_t end = command.find(' ');
  if (end == std::string::npos || command.compare(end, 6, " train") != 0 ||
      (command.size() > end + 6 && command[end + 6] != ' '))
    return false;
  const std::string program = command.substr(0, end);
  const std::size_t slash = program.rfind('/');
  return program.substr(slash == std::string::npos ? 0 : slash + 1) == "greentrain";
}
}  // namespace

std::string exec_problem(const std::string& command) {
  const std::size_t bad = command.find_first_of(";&|()`\n");
  if (bad == std::string::npos) return "";
  return fmt::format(
      "its command holds '{}', so it is not one program that `exec` can make the batch shell; "
      "expected one command (put several in a script and give script = ...)",
      command[bad] == '\n' ? std::string("\\n") : std::string(1, command[bad]));
}

std::vector<SbatchCall> sbatch_calls(const Plan& plan, const std::vector<Job>& jobs,
                                     const TimeZone& zone) {
  return sbatch_calls(plan, jobs, SlurmZone::of(zone));
}

std::vector<SbatchCall> sbatch_calls(const Plan& plan, const std::vector<Job>& jobs,
                                     const SlurmZone& zone) {
  std::vector<SbatchCall> calls;
  for (std::size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobPlan& jp = plan.jobs[i];
    const Job& j = jobs[i];
    if (!jp.scheduled) continue;
    check(!j.command.empty() || !j.script.empty(),
          fmt::format("job '{}' has no command or script (a job CSV row without a 'command' "
                      "column can be planned, not submitted); expected one to submit it",
                      j.name));
    const bool pieces = j.interruptible;
    for (std::size_t r = 0; r < jp.runs.size(); ++r) {
      SbatchCall c;
      c.job_name = j.name;
      c.run_index = r;
      c.args.push_back("--parsable");
      c.args.push_back("--job-name=" + j.name);
      c.args.push_back("--begin=" + zone.wall_time(jp.runs[r].start_s));
      c.args.push_back("--deadline=" + zone.wall_time(j.deadline_s));
      if (pieces) {
        const std::int64_t minutes = (jp.runs[r].end_s - jp.runs[r].start_s + 59) / 60;
        c.args.push_back(fmt::format("--time={}", minutes));
        // one task: SIGTERM to the batch shell (B:), which exec made the trainer. Under srun:
        // SIGTERM to the job's steps, i.e. to the ranks themselves, not to the batch shell,
        // because srun answers a SIGTERM by killing its tasks with SIGKILL (srun's signal
        // handling: "forcing job termination"), so no checkpoint would be written
        const bool under_srun = j.ntasks > 1 && j.script.empty() && !j.command.empty();
        c.args.push_back(under_srun ? "--signal=TERM@60" : "--signal=B:TERM@60");
        c.args.push_back("--requeue");
        // a requeued job's output file is opened anew, truncated unless the cluster sets
        // JobFileAppend=1 (sbatch(1), --open-mode): append, so that the log of the run that
        // checkpointed on SIGTERM is kept beside the resumed run's
        c.args.push_back("--open-mode=append");
        if (r > 0) c.args.push_back("--dependency=afterany:{prev}");
      }
      c.args.push_back(fmt::format("--comment=greentrain power_cap_w={:.0f}", jp.power_cap_w));
      if (j.ntasks > 1 || j.nodes > 1) {
        c.args.push_back(fmt::format("--ntasks={}", j.ntasks));
        c.args.push_back(fmt::format("--nodes={}", j.nodes));
      }
      // A planned power limit is applied, not only noted: on GPUs by the SPANK plugin's
      // --gpu-power-limit, on CPUs by the trainer's train.power_limit (RAPL).
      std::string command = j.command;
      if (jp.cap_limit_w > 0) {
        const long w = std::lround(jp.cap_limit_w);
        if (j.cap_device == CapDevice::gpu) {
          c.args.push_back(fmt::format("--gpu-power-limit={}", w));
        } else {
          check(is_greentrain_train(command),
                fmt::format("job '{}': its planned CPU power limit ({} W) is applied as `--set "
                            "train.power_limit=W` on a `greentrain train` command; expected "
                            "command = \"greentrain train ...\" (greentrain by name or path)",
                            j.name, w));
          command += fmt::format(" --set train.power_limit={}", w);
        }
      }
      // several tasks: srun starts them as the ranks of one MPI job (PMIx) and ends the step
      // when one task fails
      const std::string srun =
          j.ntasks > 1 && !command.empty() ? "srun --mpi=pmix --kill-on-bad-exit=1 " : "";
      if (!j.script.empty()) {
        c.args.push_back(j.script);
      } else if (pieces) {
        // --signal=B:TERM reaches the batch shell only: exec makes the command that shell, so
        // the trainer gets SIGTERM and checkpoints (without exec the shell dies, the trainer
        // runs on until Slurm kills it).
        const std::string why = exec_problem(command);
        check(why.empty(), fmt::format("job '{}' is interruptible, but {}", j.name, why));
        c.args.push_back("--wrap=exec " + srun + command);
      } else {
        c.args.push_back("--wrap=" + srun + command);
      }
      calls.push_back(std::move(c));
    }
  }
  return calls;
}

namespace {
std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_=.,/:@+%") == std::string::npos)
    return s;
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}
}  // namespace

std::string sbatch_command_line(const std::string& sbatch, const SbatchCall& call) {
  std::string line = shell_quote(sbatch);
  for (std::string a : call.args) {
    if (auto p = a.find("{prev}"); p != std::string::npos) {
      line += " " + shell_quote(a.substr(0, p)) + "\"$PREV_JOBID\"";
      continue;
    }
    line += " " + shell_quote(a);
  }
  return line;
}

std::string sbatch_program() {
  const char* e = std::getenv("GT_SBATCH");
  return e && *e ? e : "sbatch";
}

std::vector<std::string> submit_sbatch(const std::vector<SbatchCall>& calls,
                                       const std::string& sbatch) {
  std::vector<std::string> ids;
  std::string prev;
  for (const SbatchCall& c : calls) {
    std::vector<std::string> args = {sbatch};
    for (std::string a : c.args) {
      if (auto p = a.find("{prev}"); p != std::string::npos) a.replace(p, 6, prev);
      args.push_back(a);
    }
    int fd[2];
    check(::pipe(fd) == 0,
          fmt::format("job '{}': pipe failed: {}", c.job_name, std::strerror(errno)));
    pid_t pid = ::fork();
    check(pid >= 0, fmt::format("job '{}': fork failed: {}", c.job_name, std::strerror(errno)));
    if (pid == 0) {
      ::dup2(fd[1], 1);
      ::close(fd[0]);
      ::close(fd[1]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "greentrain: cannot run %s: %s\n", argv[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(fd[1]);
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
    ::close(fd[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw Error(
          fmt::format("job '{}' run {}: {} failed (status {}) after {} submission(s); "
                      "expected exit 0 (set GT_SBATCH to the sbatch program)",
                      c.job_name, c.run_index, sbatch, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                      ids.size()));
    // --parsable prints "jobid[;cluster]".
    std::string id = out.substr(0, out.find_first_of(";\n"));
    check(!id.empty(), fmt::format("job '{}': {} printed no job id; expected `--parsable` output",
                                   c.job_name, sbatch));
    ids.push_back(id);
    prev = id;
  }
  return ids;
}

}  // namespace gt::sched
