// greentrain schedule: plans a job list against a carbon-intensity series under an optional
// power budget, prints the plan against the run-at-arrival baseline, and optionally submits it
// to Slurm. The planning lives in src/sched.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "core/error.h"
#include "sched/carbon.h"
#include "sched/jobs.h"
#include "sched/planner.h"
#include "sched/slurm.h"

namespace {

struct ScheduleArgs {
  std::string jobs_toml;
  std::string carbon_csv;
  std::string utc_offset;
  std::string cluster_tz = "local";
  double power_budget_w = 0;
  std::string strategy = "best";
  double forecast_error_pct = 0;
  std::uint64_t seed = 1;
  std::string json_path;
  std::string submit;
  bool dry_run = false;
};

void run_schedule(const ScheduleArgs& a) {
  using namespace gt::sched;
  const std::int64_t off = parse_utc_offset_s(a.utc_offset);
  const SlurmZone cluster_zone = SlurmZone::parse(a.cluster_tz);
  PlanOptions opt;
  opt.strategy = parse_strategy(a.strategy);
  opt.power_budget_w = a.power_budget_w;
  opt.forecast_error_pct = a.forecast_error_pct;
  opt.seed = a.seed;
  const CarbonSeries series = load_carbon_csv(a.carbon_csv, off);
  const std::vector<Job> jobs = load_jobs_toml(a.jobs_toml, off);
  const Plan plan = make_plan(jobs, series, opt);
  // A hole in the series is bridged with the value before it: say so, in every output.
  const std::vector<std::string> gaps = gap_warnings(series);
  for (const auto& g : gaps) std::printf("warning: %s\n", g.c_str());
  std::fputs(plan_table(plan, off).c_str(), stdout);
  if (!a.json_path.empty()) {
    nlohmann::json j = plan_to_json(plan, off);
    j["carbon_csv"] = a.carbon_csv;
    j["carbon_warnings"] = gaps;
    j["jobs_toml"] = a.jobs_toml;
    write_file_atomic(a.json_path, j.dump(2) + "\n");
    std::printf("plan written to %s\n", a.json_path.c_str());
  }
  if (!a.submit.empty()) {
    gt::check(a.submit == "slurm",
              fmt::format("--submit '{}' is not known; expected slurm", a.submit));
    const std::string sbatch = sbatch_program();
    const auto calls = sbatch_calls(plan, jobs, cluster_zone);
    if (a.dry_run) {
      std::printf("# dry run: %zu sbatch call(s); --begin/--deadline are wall clock in %s\n",
                  calls.size(), cluster_zone.describe().c_str());
      for (const auto& c : calls) {
        if (c.run_index > 0)
          std::printf("# run %zu of %s: PREV_JOBID is the id the previous line printed\n",
                      c.run_index, c.job_name.c_str());
        std::printf("%s\n", sbatch_command_line(sbatch, c).c_str());
      }
    } else {
      const auto ids = submit_sbatch(calls, sbatch);
      for (std::size_t i = 0; i < calls.size(); ++i)
        std::printf("submitted %s run %zu as Slurm job %s\n", calls[i].job_name.c_str(),
                    calls[i].run_index, ids[i].c_str());
    }
  }
  // Exit 2 when a job could not be scheduled, so scripts notice.
  gt::cli::exit_code() = plan.unscheduled() > 0 ? 2 : 0;
}

void setup(CLI::App& root) {
  auto a = std::make_shared<ScheduleArgs>();
  CLI::App* c = root.add_subcommand(
      "schedule",
      "Plan jobs under a power budget and a carbon-intensity series; submit them to Slurm "
      "(exit 2 when a job cannot be scheduled)");
  c->add_option("jobs", a->jobs_toml, "job list (TOML, [[job]] tables)")->required();
  c->add_option("--carbon-csv", a->carbon_csv,
                "carbon-intensity series (CSV with columns Time, Carbon Intensity in gCO2e/kWh)")
      ->required();
  c->add_option("--utc-offset", a->utc_offset,
                "hours east of UTC of the CSV's times and of job times without an offset "
                "(e.g. 0, 1, -5, 5.5); never guessed")
      ->required();
  c->add_option("--cluster-tz", a->cluster_tz,
                "zone of the times given to sbatch (--begin, --deadline), which Slurm reads in "
                "the local zone of the host running sbatch: local (default: this host's), an "
                "offset (+01:00) or a zone name (Europe/Berlin)");
  c->add_option("--power-budget", a->power_budget_w,
                "cluster power budget, W: running jobs' power never exceeds it");
  c->add_option("--strategy", a->strategy, "arrival | shift | interrupt | best (default best)");
  c->add_option("--forecast-error", a->forecast_error_pct,
                "plan on a forecast with Gaussian noise, % of the series mean; evaluate on the "
                "true series");
  c->add_option("--seed", a->seed, "seed of the forecast noise (default 1)");
  c->add_option("--json", a->json_path, "also write the plan as JSON to this file");
  c->add_option("--submit", a->submit, "submit the plan: slurm (sbatch; $GT_SBATCH overrides)");
  c->add_flag("--dry-run", a->dry_run, "with --submit: print the sbatch lines, submit nothing");
  c->callback([a]() { run_schedule(*a); });
}

gt::cli::Registrar reg(70, "schedule", setup);

}  // namespace
