// sched/slurm.cpp: sbatch command lines for a plan, and running them.
#include "sched/slurm.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace gt::sched {

std::vector<SbatchCall> sbatch_calls(const Plan& plan, const std::vector<Job>& jobs,
                                     std::int64_t utc_offset_s) {
  std::vector<SbatchCall> calls;
  for (std::size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobPlan& jp = plan.jobs[i];
    const Job& j = jobs[i];
    if (!jp.scheduled) continue;
    const bool pieces = j.interruptible;
    for (std::size_t r = 0; r < jp.runs.size(); ++r) {
      SbatchCall c;
      c.job_name = j.name;
      c.run_index = r;
      c.args.push_back("--parsable");
      c.args.push_back("--job-name=" + j.name);
      c.args.push_back("--begin=" + format_wall_time(jp.runs[r].start_s, utc_offset_s));
      c.args.push_back("--deadline=" + format_wall_time(j.deadline_s, utc_offset_s));
      if (pieces) {
        const std::int64_t minutes = (jp.runs[r].end_s - jp.runs[r].start_s + 59) / 60;
        c.args.push_back(fmt::format("--time={}", minutes));
        c.args.push_back("--signal=B:TERM@60");
        c.args.push_back("--requeue");
        if (r > 0) c.args.push_back("--dependency=afterany:{prev}");
      }
      c.args.push_back(fmt::format("--comment=greentrain power_cap_w={:.0f}", jp.power_cap_w));
      if (!j.script.empty())
        c.args.push_back(j.script);
      else
        c.args.push_back("--wrap=" + j.command);
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
