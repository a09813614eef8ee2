// sched/slurm.cpp: sbatch command lines for a plan, and running them.
#include "sched/slurm.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "core/atomic_file.h"
#include "core/bytes_json.h"
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

bool SlurmZone::ambiguous(UnixTimeS t) const {
  if (!local_) {
    const TimeZone::Local r = zone_.resolve(zone_.to_local(t));
    return r.kind == TimeZone::Local::Kind::ambiguous;
  }
  // the host's zone through the C library: the same wall clock read as summer and as winter
  // time gives two instants that both show it
  ::tzset();
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  if (!::localtime_r(&tt, &tm)) return false;
  for (int dst : {0, 1}) {
    std::tm other = tm;
    other.tm_isdst = dst;
    const std::time_t u = std::mktime(&other);
    if (u == static_cast<std::time_t>(-1) || u == tt) continue;
    std::tm back{};
    if (::localtime_r(&u, &back) && back.tm_hour == tm.tm_hour && back.tm_min == tm.tm_min &&
        back.tm_sec == tm.tm_sec && back.tm_mday == tm.tm_mday)
      return true;
  }
  return false;
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

// Seconds as Slurm's --time minutes, rounded up.
std::int64_t minutes_up(std::int64_t s) { return (s + 59) / 60; }
}  // namespace

std::int64_t time_margin_s(std::int64_t planned_s) {
  return std::max(kTimeMarginMinS, static_cast<std::int64_t>(std::ceil(
                                       kTimeMarginShare * std::max<std::int64_t>(planned_s, 0))));
}

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
    std::int64_t planned_s = 0;  // the job's planned run time, all its runs
    for (const Run& run : jp.runs) planned_s += run.end_s - run.start_s;
    for (std::size_t r = 0; r < jp.runs.size(); ++r) {
      SbatchCall c;
      c.job_name = j.name;
      c.run_index = r;
      c.args.push_back("--parsable");
      c.args.push_back("--job-name=" + j.name);
      // a wall clock that names two instants (the repeated hour in autumn) would be read by
      // Slurm at an offset of its choosing: such an instant is written relative to the call
      auto when = [&](const char* option, UnixTimeS t) {
        if (!zone.ambiguous(t)) return std::string(option) + zone.wall_time(t);
        c.notes.push_back(fmt::format(
            "{}{} is ambiguous in {} (the hour repeated when the clocks go back): written as "
            "now+N seconds, counted from the sbatch call, so that Slurm reads the planned "
            "instant {} UTC",
            option, zone.wall_time(t), zone.describe(), format_wall_time(t, TimeZone::fixed(0))));
        return fmt::format("{}{{now+{}}}", option, t);
      };
      c.args.push_back(when("--begin=", jp.runs[r].start_s));
      c.args.push_back(when("--deadline=", j.deadline_s));
      // Every run has a time limit: without one Slurm applies the partition's DefaultTime,
      // which may end it before its planned end. An interruptible job's signal comes
      // kSignalLeadS before the limit: the limit is the run's length plus that lead, so the
      // planned work is done when it comes (the run then checkpoints within the lead). The
      // job's last run (its only one when not interruptible) has no run after it to finish
      // the work: it also gets the margin (time_margin_s) for a duration estimated short.
      // --time-min, its length: Slurm cancels a job that cannot end by --deadline, reckoned
      // with --time-min when given (sbatch(1), --deadline), so a run planned to end at the
      // deadline is not cancelled for its lead or margin. The price: Slurm's backfill may start
      // the run with any limit down to --time-min, margin and lead gone (docs/commands.md says
      // what the user sees and how to avoid it).
      const std::int64_t len = jp.runs[r].end_s - jp.runs[r].start_s;
      const bool last = r + 1 == jp.runs.size();
      c.args.push_back(fmt::format("--time={}", minutes_up(len + (pieces ? kSignalLeadS : 0) +
                                                           (last ? time_margin_s(planned_s) : 0))));
      if (last) c.args.push_back(fmt::format("--time-min={}", minutes_up(len)));
      if (pieces) {
        // one task: SIGTERM to the batch shell (B:), which exec made the trainer. Under srun:
        // SIGTERM to the job's steps, i.e. to the ranks themselves, not to the batch shell,
        // because srun answers a SIGTERM by killing its tasks with SIGKILL (srun's signal
        // handling: "forcing job termination"), so no checkpoint would be written
        const bool under_srun = j.ntasks > 1 && j.script.empty() && !j.command.empty();
        c.args.push_back(fmt::format("--signal={}TERM@{}", under_srun ? "" : "B:", kSignalLeadS));
        c.args.push_back("--requeue");
        // a requeued job's output file is opened anew, truncated unless the cluster sets
        // JobFileAppend=1 (sbatch(1), --open-mode): append, so that the log of the run that
        // checkpointed on SIGTERM is kept beside the resumed run's
        c.args.push_back("--open-mode=append");
        if (r > 0) c.args.push_back("--dependency=afterany:{prev}");
      }
      c.args.push_back(
          fmt::format("--comment=greentrain planned_power_w={:.0f}", jp.planned_power_w));
      if (j.ntasks > 1 || j.nodes > 1) {
        c.args.push_back(fmt::format("--ntasks={}", j.ntasks));
        c.args.push_back(fmt::format("--nodes={}", j.nodes));
      }
      // A planned power limit is applied, not only noted: on GPUs by the SPANK plugin's
      // --gpu-power-limit, on CPUs by the trainer's train.power_limit, on the CPU packages
      // (train.power_limit_device = cpu: RAPL, even on a node with GPUs, which the trainer's
      // default, auto, would cap instead).
      std::string command = j.command;
      if (jp.cap_limit_w > 0) {
        const long w = std::lround(jp.cap_limit_w);
        if (j.cap_device == CapDevice::gpu) {
          c.args.push_back(fmt::format("--gpu-power-limit={}", w));
        } else {
          check(is_greentrain_train(command),
                fmt::format("job '{}': its planned CPU power limit ({} W) is applied as `--set "
                            "train.power_limit=W --set train.power_limit_device=cpu` on a "
                            "`greentrain train` command; expected command = \"greentrain train "
                            "...\" (greentrain by name or path)",
                            j.name, w));
          command +=
              fmt::format(" --set train.power_limit={} --set train.power_limit_device=cpu", w);
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
    if (auto p = a.find("{now+"); p != std::string::npos && a.back() == '}') {
      // the seconds from when the line is run to the instant
      const std::string t = a.substr(p + 5, a.size() - p - 6);
      line += " " + shell_quote(a.substr(0, p) + "now+") + "\"$((" + t + " - $(date +%s)))\"";
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

std::string submission_key(const SbatchCall& call) {
  std::string k = fmt::format("{}#{}", call.job_name, call.run_index);
  for (const auto& a : call.planned_args.empty() ? call.args : call.planned_args) k += "\x1f" + a;
  return k;
}

namespace {

// Why a record of greentrain-submitted-1 is refused, and what to do: its keys hold the sbatch
// arguments of the greentrain that wrote it (--time without the margin, no --time-min), which no
// call of this one has, so a retry would take every run for new and submit the queued ones
// again. Names the runs it records (j["submitted"], an array) and their Slurm job ids, for
// squeue.
std::string old_record_message(const std::string& path, const nlohmann::json& j) {
  std::string runs, ids;
  std::size_t n = 0;
  for (const auto& e : j["submitted"]) {
    const std::string id = e.is_object() && e.contains("job_id") && e["job_id"].is_string()
                               ? e["job_id"].get<std::string>()
                               : "?";
    if (id != "?") ids += (ids.empty() ? "" : ",") + id;
    if (++n > 8) continue;  // the ids all go to squeue; the runs named are the first 8
    if (!e.is_object()) continue;
    const std::string job =
        e.contains("job") && e["job"].is_string() ? e["job"].get<std::string>() : "?";
    const std::string run = e.contains("run") && e["run"].is_number_unsigned()
                                ? std::to_string(e["run"].get<std::uint64_t>())
                                : "?";
    runs += fmt::format("{}job '{}' run {}: Slurm job {}", runs.empty() ? "" : "; ", job, run, id);
  }
  return fmt::format(
      "{}: a submission record written by an earlier greentrain (format {}); its runs are "
      "keyed by the sbatch arguments of then, and this greentrain writes other time limits "
      "(--time with a margin, --time-min), so it cannot tell which runs of the plan Slurm "
      "has: a retry would submit every run again, those already queued twice. Nothing was "
      "submitted. The record names {} run(s): {}. Check them with `squeue -j {}` (`sacct -j` for "
      "those that ended); scancel the ones to submit anew, then remove {} and run the command "
      "again: it submits the whole plan (to keep the queued ones, remove the record and "
      "submit the other runs from the lines --dry-run prints)",
      path, kOldSubmissionRecordFormat, n, runs + (n > 8 ? "; ..." : ""), ids.empty() ? "ID" : ids,
      path);
}

}  // namespace

std::map<std::string, std::string> read_submission_record(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream f(path, std::ios::binary);
  if (!f) return out;
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error(
        fmt::format("{}: not a submission record ({}); expected what `greentrain "
                    "schedule --submit` wrote (remove it to submit everything again)",
                    path, e.what()));
  }
  // the format is compared only when it is a string: value() would throw nlohmann's type_error
  // on {"format": [...]}, which no caller expects (bench/fuzz.sh found it)
  const bool old_format = j.is_object() && j.contains("format") && j["format"].is_string() &&
                          j["format"].get<std::string>() == kOldSubmissionRecordFormat &&
                          j.contains("submitted") && j["submitted"].is_array();
  if (old_format && j["submitted"].empty()) return out;  // no run recorded: Slurm has none
  if (old_format) throw Error(old_record_message(path, j));
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string() ||
      j["format"].get<std::string>() != kSubmissionRecordFormat || !j.contains("submitted") ||
      !j["submitted"].is_array())
    throw Error(
        fmt::format("{}: not a submission record; expected format {} with a "
                    "'submitted' list",
                    path, kSubmissionRecordFormat));
  for (const auto& e : j["submitted"]) {
    if (!e.is_object() || !e.contains("key") || !e.contains("job_id") || !e["job_id"].is_string() ||
        e["job_id"].get<std::string>().empty())
      throw Error(
          fmt::format("{}: an entry of 'submitted' is not {{\"key\": ..., \"job_id\": "
                      "...}}: {}",
                      path, dump_json(e).substr(0, 80)));
    out[bytes_from_json(e["key"], path + ": submitted[].key")] = e["job_id"].get<std::string>();
  }
  return out;
}

namespace {

void write_submission_record(const std::string& path, const std::vector<SbatchCall>& calls,
                             const std::map<std::string, std::string>& ids) {
  nlohmann::json j;
  j["format"] = kSubmissionRecordFormat;
  j["submitted"] = nlohmann::json::array();
  for (const auto& c : calls) {
    const std::string k = submission_key(c);
    if (auto it = ids.find(k); it != ids.end())
      j["submitted"].push_back({{"job", bytes_to_json(c.job_name)},
                                {"run", c.run_index},
                                {"job_id", it->second},
                                {"key", bytes_to_json(k)}});
  }
  write_file_atomic(path, dump_json(j, 2) + "\n");
}

// "{now+T}" -> "now+N": the seconds from this call to T (0 when T has come).
std::string substitute_now(std::string a) {
  if (auto p = a.find("{now+"); p != std::string::npos && a.back() == '}') {
    const long long t = std::atoll(a.c_str() + p + 5);
    const long long n = std::max<long long>(0, t - static_cast<long long>(std::time(nullptr)));
    a = a.substr(0, p) + fmt::format("now+{}", n);
  }
  return a;
}

std::string run_sbatch(const SbatchCall& c, const std::string& sbatch, const std::string& prev,
                       std::size_t done) {
  std::vector<std::string> args = {sbatch};
  for (std::string a : c.args) {
    if (auto p = a.find("{prev}"); p != std::string::npos) a.replace(p, 6, prev);
    args.push_back(substitute_now(a));
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
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(
        fmt::format("job '{}' run {}: {} failed (status {}); expected exit 0 (set "
                    "GT_SBATCH to the sbatch program)",
                    c.job_name, c.run_index, sbatch, WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  (void)done;
  // --parsable prints "jobid[;cluster]".
  std::string id = out.substr(0, out.find_first_of(";\n"));
  check(!id.empty(), fmt::format("job '{}': {} printed no job id; expected `--parsable` output",
                                 c.job_name, sbatch));
  return id;
}

}  // namespace

std::vector<std::string> submit_sbatch(const std::vector<SbatchCall>& calls,
                                       const std::string& sbatch, const std::string& record_path,
                                       const std::function<void(const std::string&)>& say) {
  std::map<std::string, std::string> record;
  std::string record_file = record_path;
  if (!record_file.empty()) {
    record = read_submission_record(record_file);
    const std::size_t slash = record_file.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : record_file.substr(0, slash + 1);
    if (::access(dir.c_str(), W_OK | X_OK) != 0 ||
        (::access(record_file.c_str(), F_OK) == 0 && ::access(record_file.c_str(), W_OK) != 0)) {
      if (say)
        say(
            fmt::format("note: {} cannot be written ({}): the submissions are not recorded, so "
                        "a rerun after a failure would submit them again",
                        record_file, std::strerror(errno)));
      record_file.clear();
    }
  }
  std::vector<std::string> ids;
  std::string prev, prev_job;
  std::vector<std::string> submitted_now;
  for (const SbatchCall& c : calls) {
    if (c.job_name != prev_job) prev.clear();
    prev_job = c.job_name;
    const std::string key = submission_key(c);
    if (auto it = record.find(key); it != record.end()) {
      if (say)
        say(
            fmt::format("job '{}' run {}: already submitted as Slurm job {} ({}); not submitted "
                        "again",
                        c.job_name, c.run_index, it->second, record_file));
      ids.push_back(it->second);
      prev = it->second;
      continue;
    }
    std::string id;
    try {
      id = run_sbatch(c, sbatch, prev, ids.size());
    } catch (const Error& e) {
      std::string done;
      for (const auto& s : submitted_now) done += "\n  " + s;
      throw Error(fmt::format(
          "{}\n{} call(s) of this submission were made before it and stay queued in Slurm{}{}",
          e.what(), submitted_now.size(), done.empty() ? "" : ":" + done,
          record_file.empty()
              ? std::string()
              : fmt::format("\nthey are recorded in {}: running the same command again submits "
                            "only the rest",
                            record_file)));
    }
    ids.push_back(id);
    prev = id;
    submitted_now.push_back(
        fmt::format("job '{}' run {}: Slurm job {}", c.job_name, c.run_index, id));
    if (!record_file.empty()) {
      record[key] = id;
      write_submission_record(record_file, calls, record);  // at once: a crash loses none
    }
  }
  return ids;
}

Plan plan_for_submission(const Plan& plan, const std::vector<Job>& jobs, UnixTimeS now_s,
                         bool shift_to_now, std::vector<std::string>* notes,
                         const std::set<RunId>& submitted) {
  const TimeZone utc = TimeZone::fixed(0);
  Plan out = plan;
  for (std::size_t i = 0; i < out.jobs.size() && i < jobs.size(); ++i) {
    JobPlan& jp = out.jobs[i];
    const Job& j = jobs[i];
    if (!jp.scheduled || jp.runs.empty()) continue;
    // Slurm has these runs already (an earlier submission of this plan): they are not checked
    // or moved, whatever their start; a job Slurm has whole is left as it is
    auto in_slurm = [&](std::size_t r) { return submitted.count(RunId{j.name, r}) > 0; };
    bool all_in_slurm = true;
    for (std::size_t k = 0; k < jp.runs.size(); ++k) all_in_slurm = all_in_slurm && in_slurm(k);
    if (all_in_slurm) continue;
    const std::string now_text = format_iso_time(now_s, utc);
    check(j.deadline_s > now_s,
          fmt::format("job '{}': its deadline {} has passed (now {}); expected a deadline in the "
                      "future: give the job new times and plan again",
                      j.name, format_iso_time(j.deadline_s, utc), now_text));
    UnixTimeS earliest = std::numeric_limits<UnixTimeS>::min();  // the previous run's end
    bool shifted = false;
    for (std::size_t k = 0; k < jp.runs.size(); ++k) {
      Run& r = jp.runs[k];
      if (in_slurm(k)) {
        earliest = r.end_s;
        continue;
      }
      const UnixTimeS start = std::max(r.start_s, earliest);
      if (r.start_s < now_s - kPastGraceS && !shift_to_now)
        throw Error(fmt::format(
            "job '{}': its planned start {} is in the past (now {}): the plan was made on a "
            "carbon series of another time, or long ago; expected a plan for the coming "
            "hours: plan again with a current series, or give --shift-to-now to start such "
            "runs now",
            j.name, format_iso_time(r.start_s, utc), now_text));
      if (r.start_s < now_s - kPastGraceS || start != r.start_s) {
        const UnixTimeS len = r.end_s - r.start_s;
        if (!shifted)
          notes->push_back(fmt::format(
              "job '{}': planned to start at {}, in the past: shifted to start now ({}); its "
              "emissions are those of the hours it now runs in, not the plan's",
              j.name, format_iso_time(r.start_s, utc), now_text));
        shifted = true;
        r.start_s = r.start_s < now_s - kPastGraceS ? std::max(start, now_s) : start;
        r.end_s = r.start_s + len;
      }
      earliest = r.end_s;
    }
    check(jp.runs.back().end_s <= j.deadline_s,
          fmt::format("job '{}': started now it would end at {}, after its deadline {}; "
                      "expected a deadline it can still meet: give the job new times and plan "
                      "again",
                      j.name, format_iso_time(jp.runs.back().end_s, utc),
                      format_iso_time(j.deadline_s, utc)));
  }
  return out;
}

std::vector<SbatchCall> submission_calls(const Plan& plan, const std::vector<Job>& jobs,
                                         const SlurmZone& zone, UnixTimeS now_s, bool shift_to_now,
                                         const std::map<std::string, std::string>& record,
                                         std::vector<std::string>* notes) {
  // the calls as planned: their keys find what an earlier submission of this plan recorded
  const std::vector<SbatchCall> planned = sbatch_calls(plan, jobs, zone);
  std::set<RunId> submitted;
  for (const SbatchCall& c : planned)
    if (record.count(submission_key(c))) submitted.insert({c.job_name, c.run_index});
  std::vector<SbatchCall> calls = sbatch_calls(
      plan_for_submission(plan, jobs, now_s, shift_to_now, notes, submitted), jobs, zone);
  check(calls.size() == planned.size(),
        fmt::format("submission: {} sbatch calls after moving starts to now, {} as planned; "
                    "expected the same runs",
                    calls.size(), planned.size()));
  for (std::size_t i = 0; i < calls.size(); ++i) calls[i].planned_args = planned[i].args;
  return calls;
}

}  // namespace gt::sched
