// greentrain ablate: the co-design ablation of DESIGN.md (the ablate module: ablate/plan.h,
// runner.h, table.h). Runs the baseline (fp32, unfused, no recomputation), then the techniques
// of --order switched on one by one (cumulative), each row a `greentrain train` child process,
// and prints the table: tokens/s, J/token, tokens/J, peak memory, batch, loss, validation loss,
// and the factors against the row before and the baseline beside the survey's claimed factors.
// This file parses the options and prints; it writes ablation.csv, ablation.json and the
// report into --out.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ablate/plan.h"
#include "ablate/runner.h"
#include "ablate/table.h"
#include "cli/command.h"
#include "core/arena.h"
#include "core/bytes_json.h"
#ifdef GT_HAVE_REPORT
#include "report/report.h"
#endif

namespace fs = std::filesystem;

// the command's own names, apart from the other command files' in a unity batch
namespace gt_cmd_ablate {
namespace {

struct Args {
  gt::ablate::Options opt;
  std::string json;  ///< --json PATH ("-": standard output)
};

// The report of the ablation folder (when the report module is built); a failure is said.
void write_report(FILE* out, const std::string& folder) {
#ifdef GT_HAVE_REPORT
  try {
    const auto rep =
        gt::report::write_report({folder}, (fs::path(folder) / "report.html").string());
    std::fprintf(out, "wrote %s\n", rep.path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(out, "report not written: %s\n", e.what());
  }
#else
  (void)out;
  (void)folder;
#endif
}

// Plans, runs and reads the rows, prints the table to `out` (the human-readable lines: standard
// error when the JSON goes to standard output) and writes it. Throws gt::Error.
int run_ablate(const Args& args, FILE* out) {
  namespace ab = gt::ablate;
  const ab::Options& a = args.opt;
  // the options alone, before any file is read: refused, they are usage errors (exit 2)
  gt::cli::as_usage([&] {
    ab::check_options(a);
    (void)ab::parse_order(a.order);
  });
  const ab::Plan plan = ab::make_plan(a);
  ab::prepare_out_folder(a);
  std::fprintf(out, "greentrain ablate: %s, %d steps per row, memory budget %s (%s)\n",
               a.config.c_str(), a.steps, gt::format_bytes(plan.budget_bytes).c_str(),
               a.memory_budget > 0 ? "--memory-budget" : "the baseline's plan");
  const std::vector<ab::Measured> measured = ab::run_rows(a, plan, out);
  const ab::Table table = ab::make_table(a, plan, measured, ab::power_limit_writable());
  std::fputs(table.text().c_str(), out);
  ab::write_table(table, a.out);
  if (!args.json.empty()) {
    nlohmann::json j = nlohmann::json::parse(gt::dump_json(table.json()));
    j["schema"] = "greentrain.ablate/1";
    j["out"] = gt::bytes_to_json(a.out);
    gt::cli::write_json_output(args.json, j);
  }
  std::fprintf(out, "wrote %s and %s\n", (fs::path(a.out) / "ablation.csv").c_str(),
               (fs::path(a.out) / "ablation.json").c_str());
  write_report(out, a.out);
  return 0;
}

void setup(CLI::App& app) {
  auto args = std::make_shared<Args>();
  gt::ablate::Options& o = args->opt;
  auto* sub = app.add_subcommand(
      "ablate", "Measure what bf16, kernel fusion and recomputation give (co-design ablation)");
  sub->add_option("config", o.config, "TOML configuration (configs/*.toml)")->required();
  sub->add_option("--data", o.data, "Data file (overrides data.path)");
  sub->add_option("--steps", o.steps, "Optimizer steps per row, 2 to 2147483647 (default 200)")
      ->check(gt::cli::int_range(2, std::numeric_limits<int>::max()));
  sub->add_option("--rounds", o.rounds,
                  "Interleave the rows in R rounds of steps/R steps each, every row resuming its "
                  "checkpoint, so the machine's drift hits all rows alike (default 1: one row "
                  "after another)")
      ->check(gt::cli::int_range(1, std::numeric_limits<int>::max(), "1 to steps / 2"));
  sub->add_option("--memory-budget", o.memory_budget,
                  "Bytes the plan may take (default: the baseline's plan at train.batch_size)")
      ->check(gt::cli::int_range(0, std::numeric_limits<std::int64_t>::max(),
                                 "0 (the baseline's plan) or more bytes"));
  sub->add_option("--out", o.out,
                  "Folder for the rows' runs, ablation.csv and .json (default runs/ablate; a "
                  "folder that is not empty is refused without --overwrite)");
  sub->add_flag("--overwrite", o.overwrite,
                "--out may hold an earlier ablation: its rows, table and report are replaced");
  sub->add_option("--order", o.order,
                  "Techniques in the order they are switched on: bf16, fusion, recompute, fp8 "
                  "(fp8: train.device = cuda or cuda-emu; default bf16,fusion,recompute)");
  sub->add_option("--recompute", o.recompute,
                  "Policy of the recompute row: gelu, gelu+ln or block (default block)");
  sub->add_option("--set", o.sets, "Override a key for every row (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  gt::cli::add_json_option(sub, args->json, "the ablation table (ablation.json's content)");
  sub->callback(
      [args] { gt::cli::exit_code() = run_ablate(*args, gt::cli::human_out(args->json)); });
}

gt::cli::Registrar reg(45, "ablate", setup);

}  // namespace
}  // namespace gt_cmd_ablate
