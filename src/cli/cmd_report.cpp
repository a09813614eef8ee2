// greentrain report: writes one self-contained HTML report (report/report.h) of run folders
// and ablate folders, to compare runs by loss, time and energy.
#include <fmt/format.h>

#include <filesystem>

#include "cli/command.h"
#include "report/report.h"

namespace fs = std::filesystem;

// the command's own names, apart from the other command files' in a unity batch
namespace gt_cmd_report {
namespace {

struct Args {
  std::vector<std::string> dirs;
  std::string out;
};

int run_report(const Args& a) {
  std::string out = a.out;
  if (out.empty())  // one folder: its report.html; several: report.html here
    out = a.dirs.size() == 1 ? (fs::path(a.dirs[0]) / "report.html").string() : "report.html";
  const auto r = gt::report::write_report(a.dirs, out);
  for (const auto& p : r.problems) std::printf("note: %s\n", p.c_str());
  if (!r.charts)
    std::printf(
        "note: Chart.js was not found (install Debian's libjs-chart.js or set GT_CHARTJS): the "
        "report holds the tables only\n");
  std::printf("wrote %s\n", r.path.c_str());
  return 0;
}

void setup(CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "report", "Write an HTML report (loss, power, energy, carbon, energy to target) of runs");
  sub->add_option("run_dir", args->dirs, "Run folders or `greentrain ablate` output folders")
      ->required();
  sub->add_option("-o,--out", args->out,
                  "Output file (default: RUN_DIR/report.html for one folder, else ./report.html)");
  sub->callback([args] { gt::cli::exit_code() = run_report(*args); });
}

gt::cli::Registrar reg(70, "report", setup);

}  // namespace
}  // namespace gt_cmd_report
