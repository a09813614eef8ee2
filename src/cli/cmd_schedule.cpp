// greentrain schedule: plans a job list against a carbon-intensity series under an optional
// power budget, prints the plan against the run-at-arrival baseline, and optionally submits it
// to Slurm. The planning lives in src/sched.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <memory>

#include "cli/carbon_options.h"
#include "cli/command.h"
#include "cli/option_messages.h"
#include "core/bytes_json.h"
#include "core/error.h"
#include "sched/carbon_grid.h"
#include "sched/jobs.h"
#include "sched/planner.h"
#include "sched/slurm.h"

// the command's own names, apart from the other command files' in a unity batch
namespace gt_cmd_schedule {
namespace {

struct ScheduleArgs {
  std::string jobs_toml;
  std::string carbon_csv;
  gt::energy::CarbonReadOptions carbon_read;
  std::string utc_offset;
  std::string cluster_tz;  // empty: not given (local)
  double power_budget_w = 0;
  std::string strategy = "best";
  std::string objective = "carbon";
  double energy_weight = -1;  // < 0: not given
  double forecast_error_pct = 0;
  std::uint64_t seed = 1;
  bool seed_given = false;
  int seeds = 1;
  std::string json_path;
  std::string submit;
  bool dry_run = false;
  bool shift_to_now = false;
  // the carbon series' grid
  std::int64_t slot_s = 0;
  std::string slot_value = "mean";
  // job CSVs only
  // NaN: not given (a given --window-h is a finite number: check_numbers refuses nan)
  double window_h = std::numeric_limits<double>::quiet_NaN();
  std::string deadline_rule;
  double deadline_grace_s = 0;
  double job_power_w = 0;
  bool interruptible = false;
};

// Exit status when some job could not be scheduled (no start fits its window, deadline and the
// power budget): the scheduled ones are printed (and submitted with --submit) all the same. Not
// 1 (an error: nothing done) nor 2 (kUsageExit), so a script or a Slurm operator can tell it
// from both; docs/commands.md lists schedule's statuses.
constexpr int kUnschedulableExit = 3;

// The longest --window-h and --deadline-grace-s, s: a year of 366 days.
constexpr std::int64_t kMaxWindowS = 366 * 24 * 3600;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<gt::sched::Job> load_jobs(const ScheduleArgs& a, const gt::sched::TimeZone& zone) {
  using namespace gt::sched;
  if (!ends_with(a.jobs_toml, ".csv")) {
    gt::cli::check_usage(
        std::isnan(a.window_h) && a.deadline_rule.empty() && a.deadline_grace_s == 0 &&
            a.job_power_w == 0 && !a.interruptible,
        fmt::format("{}: --window-h, --deadline-rule, --deadline-grace-s, --job-power-w and "
                    "--interruptible apply to job CSVs only; expected them in the TOML's "
                    "[[job]] tables",
                    a.jobs_toml));
    return load_jobs_toml(a.jobs_toml, zone);
  }
  JobCsvOptions o;
  const bool window = !std::isnan(a.window_h);
  gt::cli::check_usage(!window || a.deadline_rule.empty(),
                       "--window-h and --deadline-rule both given; expected one of them");
  // (--window-h and --deadline-grace-s are in their ranges: number_range in setup)
  o.window_s = window ? a.window_h * 3600 : -1;
  if (!a.deadline_rule.empty())
    o.rule = gt::cli::as_usage([&] { return parse_deadline_rule(a.deadline_rule); });
  o.deadline_grace_s = a.deadline_grace_s;
  o.power_w = a.job_power_w;
  o.interruptible = a.interruptible;
  return load_jobs_csv(a.jobs_toml, zone, o);
}

// Options that act only beside another one are refused without it, before anything is read: they
// would be ignored. Throws gt::UsageError (exit 2) naming them. (Not CLI11's Option::needs():
// its "--dry-run requires --submit" names one option at a time and neither why nor the value
// expected, and the --seeds and --energy-weight conditions are on values.)
void refuse_options_that_would_be_ignored(const ScheduleArgs& a) {
  using gt::cli::only_with_message;
  if (a.submit.empty()) {
    std::vector<std::string> unused;
    if (a.dry_run) unused.push_back("--dry-run");
    if (!a.cluster_tz.empty()) unused.push_back("--cluster-tz");
    if (a.shift_to_now) unused.push_back("--shift-to-now");
    if (!unused.empty())
      throw gt::UsageError(only_with_message(
          unused, "--submit", "without it the plan is printed and nothing is submitted",
          "--submit slurm"));
  }
  // (make_plan refuses it too, for callers of the library: a plain gt::Error there)
  if (a.energy_weight >= 0 && a.objective != "weighted")
    throw gt::UsageError(
        only_with_message({"--energy-weight"}, "--objective weighted", "", "--objective weighted"));
  if (!(a.forecast_error_pct > 0)) {
    std::vector<std::string> unused;
    if (a.seed_given) unused.push_back("--seed");
    if (a.seeds > 1) unused.push_back(fmt::format("--seeds {}", a.seeds));
    if (!unused.empty())
      throw gt::UsageError(
          only_with_message(unused, "--forecast-error",
                            "the noise's seeds: without noise every seed makes the same plan",
                            "--forecast-error PCT"));
  }
}

void run_schedule(const ScheduleArgs& a) {
  using namespace gt::sched;
  refuse_options_that_would_be_ignored(a);
  FILE* out = gt::cli::human_out(a.json_path);
  // the option values read here are the command line's: refused, they are usage errors (exit 2)
  const TimeZone zone =
      gt::cli::as_usage([&] { return TimeZone::parse(a.utc_offset, "--utc-offset"); });
  const SlurmZone cluster_zone = gt::cli::as_usage(
      [&] { return SlurmZone::parse(a.cluster_tz.empty() ? "local" : a.cluster_tz); });
  PlanOptions opt;
  opt.strategy = gt::cli::as_usage([&] { return parse_strategy(a.strategy); });
  opt.objective = gt::cli::as_usage([&] { return parse_objective(a.objective); });
  if (a.energy_weight >= 0) opt.energy_weight_g_per_kwh = a.energy_weight;
  opt.power_budget_w = a.power_budget_w;
  opt.forecast_error_pct = a.forecast_error_pct;
  opt.seed = a.seed;
  SlotGrid grid;
  grid.slot_s = a.slot_s;
  grid.value_at_start = gt::cli::as_usage([&] { return parse_slot_value(a.slot_value); });
  gt::energy::CarbonReadOptions read = a.carbon_read;
  read.preferred_value_kind = "forecast";  // a plan is made ahead of time: on the forecast
  const CarbonSeries series = load_carbon_csv(a.carbon_csv, zone, grid, read);
  std::fprintf(out, "carbon series %s: %s\n", a.carbon_csv.c_str(), series.source.c_str());
  // values in another unit than gCO2e/kWh (kg/kWh read as g/kWh): said once, the plan goes on
  if (!series.implausible_warning.empty())
    std::fprintf(stderr, "greentrain schedule: warning: %s\n", series.implausible_warning.c_str());
  const std::vector<Job> jobs = load_jobs(a, zone);
  const auto t0 = std::chrono::steady_clock::now();
  const Plan plan = make_plan(jobs, series, opt);
  const double planning_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // A hole in the series is bridged with the value before it: say so, in every output (on
  // standard error, as the other warnings, apart from the plan; and in the JSON)
  const std::vector<std::string> gaps = gap_warnings(series);
  for (const auto& g : gaps) std::fprintf(stderr, "greentrain schedule: warning: %s\n", g.c_str());
  std::fputs(plan_table(plan, zone).c_str(), out);
  std::fprintf(out, "planned in %.4f s (%zu job(s), %zu slot(s))\n", planning_s, jobs.size(),
               series.g_co2e_per_kwh.size());
  if (!a.json_path.empty()) {
    nlohmann::json j = plan_to_json(plan, zone);
    j["carbon_csv"] = a.carbon_csv;
    j["carbon_series"] = series.source;
    j["carbon_warnings"] = gaps;
    if (!series.implausible_warning.empty())
      j["carbon_warnings"].push_back(series.implausible_warning);
    j["jobs_toml"] = a.jobs_toml;
    j["planning_s"] = planning_s;
    j["schema"] = "greentrain.schedule/2";
    gt::cli::write_json_output(a.json_path, j);
    if (a.json_path != "-") std::fprintf(out, "plan written to %s\n", a.json_path.c_str());
  }
  if (!a.submit.empty()) {
    gt::cli::check_usage(a.seeds == 1,
                         "--submit with --seeds > 1: expected one plan to submit (one seed)");
    gt::cli::check_usage(a.submit == "slurm",
                         fmt::format("--submit '{}' is not known; expected slurm", a.submit));
    const std::string sbatch = sbatch_program();
    // a plan in the past (an old carbon series) is refused, or shifted to now when asked
    std::vector<std::string> notes;
    // $GT_SCHEDULE_NOW (ISO 8601 with its offset) replays a submission at another time
    const char* now_env = std::getenv("GT_SCHEDULE_NOW");
    const UnixTimeS now = now_env && *now_env
                              ? parse_wall_time(now_env, TimeZone::fixed(0), "GT_SCHEDULE_NOW")
                              : static_cast<UnixTimeS>(std::time(nullptr));
    // what was submitted is recorded as it goes: a rerun after a failed sbatch submits only
    // the rest (the runs Slurm has already are neither refused for a start now past nor
    // shifted again)
    const std::string record = a.jobs_toml + ".submitted.json";
    const auto before = read_submission_record(record);
    const auto calls =
        submission_calls(plan, jobs, cluster_zone, now, a.shift_to_now, before, &notes);
    for (const auto& c : calls) notes.insert(notes.end(), c.notes.begin(), c.notes.end());
    for (const auto& n : notes) std::fprintf(out, "note: %s\n", n.c_str());
    if (a.dry_run) {
      std::fprintf(out, "# dry run: %zu sbatch call(s); --begin/--deadline are wall clock in %s\n",
                   calls.size(), cluster_zone.describe().c_str());
      std::string prev_recorded;  // the previous run's Slurm job id, when recorded
      for (const auto& c : calls) {
        if (auto it = before.find(submission_key(c)); it != before.end()) {
          std::fprintf(out, "# job '%s' run %zu: already submitted as Slurm job %s (%s)\n",
                       c.job_name.c_str(), c.run_index, it->second.c_str(), record.c_str());
          prev_recorded = it->second;
          continue;
        }
        if (c.run_index > 0 && !prev_recorded.empty())
          std::fprintf(out, "# run %zu of %s: PREV_JOBID is %s\n", c.run_index, c.job_name.c_str(),
                       prev_recorded.c_str());
        else if (c.run_index > 0)
          std::fprintf(out, "# run %zu of %s: PREV_JOBID is the id the previous line printed\n",
                       c.run_index, c.job_name.c_str());
        prev_recorded.clear();
        std::fprintf(out, "%s\n", sbatch_command_line(sbatch, c).c_str());
      }
    } else {
      const auto ids = submit_sbatch(calls, sbatch, record, [out](const std::string& s) {
        std::fprintf(out, "%s\n", s.c_str());
      });
      for (std::size_t i = 0; i < calls.size(); ++i)
        if (!before.count(submission_key(calls[i])))
          std::fprintf(out, "submitted %s run %zu as Slurm job %s\n", calls[i].job_name.c_str(),
                       calls[i].run_index, ids[i].c_str());
    }
  }
  // More seeds of the forecast noise: one line each (the table above is the first seed's).
  if (a.seeds > 1) {
    double sum = 0;
    int known = 0;
    for (int k = 0; k < a.seeds; ++k) {
      PlanOptions o = opt;
      o.seed = opt.seed + static_cast<std::uint64_t>(k);
      const auto t1 = std::chrono::steady_clock::now();
      const Plan p = k == 0 ? plan : make_plan(jobs, series, o);
      const double s1 =
          k == 0 ? planning_s
                 : std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
      const std::optional<double> saved = p.saving_pct();
      if (saved) {
        sum += *saved;
        ++known;
      }
      std::fprintf(
          out,
          "seed %llu: %.6f gCO2e for %zu scheduled job(s), baseline %.6f gCO2e (%zu compared): "
          "%s saved; planned in %.4f s\n",
          static_cast<unsigned long long>(o.seed), p.planned_g_co2e,
          p.jobs.size() - p.unscheduled(), p.baseline_g_co2e, p.compared,
          saved ? fmt::format("{:.4f} %", *saved).c_str() : "unknown", s1);
    }
    if (known == a.seeds)
      std::fprintf(out, "mean over %d seeds: %.4f %% saved\n", a.seeds, sum / a.seeds);
    else if (known > 0)
      std::fprintf(out, "mean over the %d of %d seeds whose saving is known: %.4f %% saved\n",
                   known, a.seeds, sum / known);
    else
      std::fprintf(out, "mean over %d seeds: unknown (no seed's saving is known)\n", a.seeds);
  }
  // a job that could not be scheduled has its own status, so scripts notice (and can tell it
  // from a usage error)
  gt::cli::exit_code() = plan.unscheduled() > 0 ? kUnschedulableExit : 0;
}

void setup(CLI::App& root) {
  auto a = std::make_shared<ScheduleArgs>();
  CLI::App* c = root.add_subcommand(
      "schedule",
      "Plan jobs under a power budget and a carbon-intensity series; submit them to Slurm "
      "(exit 3 when a job cannot be scheduled, 2 on a usage error, 1 on an error)");
  c->add_option(
       "jobs", a->jobs_toml,
       "job list: TOML ([[job]] tables) or CSV (*.csv: name|job_id, "
       "nominal_start|arrival_time, duration_s|duration_minutes, ...; see docs/commands.md)")
      ->required();
  c->add_option("--carbon-csv", a->carbon_csv,
                "carbon-intensity series: greentrain's CSV (Time, Carbon Intensity in gCO2e/kWh), "
                "an Electricity Maps export, UK Carbon Intensity API JSON, WattTime MOER, an "
                "ENTSO-E-style CSV (--carbon-format; a source with forecast and actual values is "
                "read at its forecast unless --carbon-value actual)")
      ->required();
  gt::cli::add_carbon_read_options(c, a->carbon_read);
  c->add_option("--utc-offset,--tz", a->utc_offset,
                "time zone of the CSV's times and of job times without an offset, and of the "
                "plan's output: hours east of UTC (0, 1, -5, 5.5, +01:00), UTC, or an IANA zone "
                "name (Europe/Berlin: daylight saving included; a carbon CSV's repeated hour is "
                "read in order, a job time in a skipped or repeated hour is an error asking for "
                "its offset); never guessed")
      ->required();
  c->add_option("--cluster-tz", a->cluster_tz,
                "with --submit: zone of the times given to sbatch (--begin, --deadline), which "
                "Slurm reads in the local zone of the host running sbatch: local (default: this "
                "host's), an offset (+01:00) or a zone name (Europe/Berlin)");
  c->add_option("--slot-s", a->slot_s,
                "slot length of the plan, s, 1 to 31622400 (default: the CSV's smallest step)")
      ->check(gt::cli::int_range(0, kMaxWindowS,
                                 "seconds in [1, 31622400] (a year), or 0 for the CSV's smallest "
                                 "step"));
  c->add_option("--slot-value", a->slot_value,
                "mean (default: time-weighted mean of the rows over each slot) | start (the "
                "value at each slot's start, as the Let's Wait Awhile simulator)");
  c->add_option("--window-h", a->window_h,
                "job CSV: each job may start from nominal - H hours and must end by its "
                "nominal end + H hours (the paper's +-H window), H in [0, 8784]")
      // a negative window was taken as "not given" without a word; a window of more than a
      // year (of 366 days) is a mistyped one
      ->check(gt::cli::number_range(0, kMaxWindowS / 3600, "hours in [0, 8784]"));
  c->add_option("--deadline-rule", a->deadline_rule,
                "job CSV without a deadline column: none | next-workday | semi-weekly "
                "(Let's Wait Awhile's rules on the unshifted end)");
  c->add_option("--deadline-grace-s", a->deadline_grace_s,
                "job CSV: seconds added to each rule deadline, 0 to 31622400 (the paper's "
                "simulator: 1800)")
      // 1e300 s rounded to an int64 deadline: undefined behaviour, in practice a deadline in 1677
      ->check(gt::cli::number_range(0, kMaxWindowS, "seconds in [0, 31622400] (a year)"));
  c->add_option("--job-power-w", a->job_power_w,
                "job CSV without a power_w column: every job's power, W");
  c->add_flag("--interruptible", a->interruptible,
              "job CSV without an interruptible column: every job may be interrupted");
  c->add_option("--power-budget", a->power_budget_w,
                "cluster power budget, W: running jobs' power never exceeds it (0, the default: "
                "none; null in the JSON)")
      ->check(gt::cli::number_range(0));
  c->add_option("--strategy", a->strategy, "arrival | shift | interrupt | best (default best)");
  c->add_option("--objective", a->objective,
                "what the plan minimises: carbon (gCO2e, default) | energy (kWh) | weighted "
                "(gCO2e + LAMBDA x kWh, LAMBDA from --energy-weight)");
  c->add_option("--energy-weight", a->energy_weight,
                "--objective weighted: LAMBDA, gCO2e charged per kWh on top of the grid's "
                "(default: the carbon series' mean intensity); 0 or more")
      ->check(gt::cli::number_range(0, std::numeric_limits<double>::infinity(),
                                    "gCO2e per kWh, 0 or more"));
  c->add_option("--forecast-error", a->forecast_error_pct,
                "plan on a forecast with Gaussian noise, % of the series mean; evaluate on the "
                "true series; 0 or more (0, the default: none)")
      ->check(gt::cli::number_range(0));
  CLI::Option* seed =
      c->add_option("--seed", a->seed, "with --forecast-error: seed of the noise (default 1)");
  c->add_option("--seeds", a->seeds,
                "with --forecast-error: plan N times, with seeds --seed .. --seed+N-1, and print "
                "each plan's totals and the mean saving (the table and --json are the first "
                "seed's); N from 1 to 1000000")
      ->check(gt::cli::int_range(1, 1000000));
  gt::cli::add_json_option(c, a->json_path, "the plan");
  c->add_option("--submit", a->submit, "submit the plan: slurm (sbatch; $GT_SBATCH overrides)");
  c->add_flag("--dry-run", a->dry_run, "with --submit: print the sbatch lines, submit nothing");
  c->add_flag("--shift-to-now", a->shift_to_now,
              "with --submit: start planned runs that lie in the past now (default: refuse "
              "such a plan); a passed deadline is refused always");
  c->callback([a, seed]() {
    a->seed_given = seed->count() > 0;
    run_schedule(*a);
  });
}

gt::cli::Registrar reg(70, "schedule", setup);

}  // namespace
}  // namespace gt_cmd_schedule
