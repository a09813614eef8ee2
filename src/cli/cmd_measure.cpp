// cli/cmd_measure.cpp: `greentrain measure [options] -- CMD ARGS...`: runs a command and
// reports its time, energy per domain, average and peak power and carbon, with the method of
// each, like `perf stat` does for cycles. Every signal a user or a scheduler can send to
// greentrain (all catchable ones: SIGINT, SIGTERM, SIGHUP, SIGUSR1 as Slurm's --signal=USR1@N
// sends it, SIGUSR2, SIGALRM, SIGPIPE, SIGCONT, SIGWINCH, the real-time ones...) is forwarded to
// the command; a stop (SIGTSTP) stops both. The records (--csv, --json) are written whatever
// ends the command, and their outputs are checked before it starts. The command's exit code is
// returned (128+N if it was killed by signal N; 126 if it is not executable and 127 if it is not
// found, as the shell does). The report goes to stderr, and with `--json -` (the JSON on stdout)
// the command's own stdout too, so that `measure --json - -- CMD | jq` reads the JSON alone.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/carbon_options.h"
#include "cli/command.h"
#include "core/bytes_json.h"
#include "core/error.h"
#include "core/process.h"
#include "energy/carbon.h"
#include "energy/cpu_estimate.h"
#include "energy/measurement_output.h"
#include "energy/meter.h"

// the command's own names, apart from the other command files' in a unity batch
namespace gt_cmd_measure {
namespace {

// Throws gt::Error naming `path` when a file could not be written there: the folder is
// missing or read-only, the path is a folder, or the file exists and is not writable. Writes
// nothing.
void check_writable(const std::string& path, const char* option) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw gt::Error(fmt::format("{} {}: is a folder; expected a file name (e.g. {}/measure.json)",
                                option, path, path));
  if (::access(path.c_str(), F_OK) == 0) {
    if (::access(path.c_str(), W_OK) != 0)
      throw gt::Error(fmt::format("{} {}: not writable ({})", option, path, std::strerror(errno)));
    return;
  }
  std::string dir = path.substr(0, path.rfind('/') == std::string::npos ? 0 : path.rfind('/'));
  if (path.rfind('/') == 0) dir = "/";
  if (dir.empty()) dir = ".";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw gt::Error(
        fmt::format("{} {}: cannot be written ({}: {})", option, path, dir, std::strerror(errno)));
}

// "through greentrain serve (pid N) at PATH" or "direct (...)".
std::string reading_source_text(const gt::energy::Meter& m) {
  if (m.reading_source() == "direct") return "direct: this process reads the sensors";
  return "through " + m.reading_source();
}

struct MeasureArgs {
  double interval_ms = 100;
  std::optional<double> carbon_g;  ///< unset: the meter's labelled default; 0 is 0
  std::string carbon_region;
  std::string carbon_csv;
  gt::energy::CarbonReadOptions carbon_read;
  double carbon_utc_offset_h = 0;
  std::string carbon_start;
  std::string csv, json;
  std::optional<double> tdp_w;  ///< per-socket TDP (W); unset: the CPU model table
  std::optional<double> pue;    ///< unset: 1 (no facility overhead)
  std::optional<double> wue;
  bool process = false;
  std::vector<std::string> cmd;
};

// The meter's options from the command line: the sampling period, the carbon intensity (a
// series, a constant or a country's figure), the TDP. Throws gt::Error naming the option:
// gt::UsageError (exit 2) for a value out of its range or an option without the one it needs.
gt::energy::MeterOptions meter_options(const MeasureArgs& a) {
  using namespace gt::energy;
  MeterOptions opt;
  if (!(a.interval_ms >= 1 && a.interval_ms <= kMaxIntervalS * 1000))
    throw gt::UsageError(fmt::format("--interval {}: expected a sampling period in [1, {}] ms",
                                     a.interval_ms, kMaxIntervalS * 1000));
  opt.interval_s = a.interval_ms / 1000.0;
  if (!a.carbon_csv.empty()) {
    opt.carbon = CarbonIntensity::from_csv(a.carbon_csv, a.carbon_utc_offset_h, "", a.carbon_read);
    if (!a.carbon_start.empty())  // read like the series' rows: naive at the offset, or its own
      opt.carbon_replay_start_unix_s = static_cast<double>(
          parse_time_or_throw(a.carbon_start, std::llround(a.carbon_utc_offset_h * 3600),
                              "--carbon-start")
              .unix_s);
  } else if (a.carbon_g) {
    opt.carbon = gt::cli::as_usage(
        [&] { return CarbonIntensity::constant(*a.carbon_g, "", "--carbon-intensity"); });
  } else if (!a.carbon_region.empty()) {
    opt.carbon = gt::cli::as_usage(
        [&] { return CarbonIntensity::for_country(a.carbon_region, "--carbon-region"); });
  }
  if (!a.carbon_start.empty() && a.carbon_csv.empty())
    throw gt::UsageError("--carbon-start: replays a series; expected --carbon-csv with it");
  // how a series is read and its time zone: without one they would be ignored
  if (a.carbon_csv.empty())
    gt::cli::as_usage(
        [&] { a.carbon_read.refuse_without_series("--carbon-csv FILE", a.carbon_utc_offset_h); });
  // with a series or a constant, --carbon-region names the country the figure is for
  if (!a.carbon_region.empty() && opt.carbon.origin() != CarbonOrigin::kCountry)
    opt.carbon = gt::cli::as_usage(
        [&] { return opt.carbon.with_country(a.carbon_region, "--carbon-region"); });
  if (a.tdp_w) {
    // the range every front end takes (energy/cpu_estimate.h), in --tdp's words
    if (!(*a.tdp_w >= kMinCpuTdpW && *a.tdp_w <= kMaxCpuTdpW))
      throw gt::UsageError(fmt::format(
          "--tdp {}: expected a CPU TDP per socket in [{}, {}] W (the CPU estimate's full-load "
          "power is it x the sockets; leave it out to take the CPU model table's)",
          *a.tdp_w, kMinCpuTdpW, kMaxCpuTdpW));
    opt.cpu_tdp_w = *a.tdp_w;
  }
  return opt;
}

// The report measure prints (to stderr): time, exit code, energy per domain, power, carbon,
// the method and the sampler's overhead, then the meter's flags.
std::string report_text(const MeasureArgs& a, const gt::energy::Measurement& m,
                        const gt::energy::Meter& meter, int code, double overhead) {
  using namespace gt::energy;
  const char* est = m.estimated ? " (estimated)" : "";
  std::string cmdline;
  for (auto& s : a.cmd) cmdline += (cmdline.empty() ? "" : " ") + s;
  std::string r = fmt::format("\n greentrain measure: {}\n\n", cmdline);
  r += fmt::format("  {:<14}{:.3f} s\n", "time", m.duration_s);
  r += fmt::format("  {:<14}{}\n", "exit code", code);
  if (m.domains.empty())
    r += fmt::format(
        "  {:<14}unknown ({}; see the flags)\n", "energy",
        meter.not_reader().empty() ? std::string("no sensor could be read by this process")
        : !meter.daemon_elsewhere().empty()
            ? fmt::format("greentrain serve reads this node's sensors at {}: set "
                          "GT_DAEMON_SOCKET={} so that measure reads through it",
                          meter.daemon_elsewhere(), meter.daemon_elsewhere())
            : std::string("another process reads this node's sensors: start `greentrain serve` "
                          "so that both can measure, or use --process"));
  else
    r += fmt::format("  {:<14}{:.3f} J = {:.3g} kWh{}\n", "energy", m.energy_j, m.energy_j / 3.6e6,
                     est);
  for (auto& d : m.domains)
    r += fmt::format("    {:<18}{:<5}{:>12.3f} J   avg {:>9}   peak {:>9}   {}\n", d.sensor,
                     d.domain, d.energy_j,
                     d.avg_power_w ? fmt::format("{:.2f} W", *d.avg_power_w) : "undefined",
                     // no interval as long as the sensor's refresh period: no peak either
                     d.peak_power_w ? fmt::format("{:.2f} W", *d.peak_power_w) : "undefined",
                     to_string(d.method));
  r += fmt::format("  {:<14}{}{}\n", "avg power",
                   m.avg_power_w ? fmt::format("{:.2f} W", *m.avg_power_w)
                                 : std::string("undefined (window shorter than sensor refresh)"),
                   est);
  r += fmt::format("  {:<14}{}{}\n", "peak power",
                   m.peak_power_w ? fmt::format("{:.2f} W", *m.peak_power_w) : "undefined", est);
  r += fmt::format("  {:<14}{}{}\n", "carbon", carbon_short(m), est);
  r += fmt::format("  {:<14}{}\n", "intensity", m.carbon_source);
  r += fmt::format("  {:<14}{}\n", "method", m.method.empty() ? "none" : m.method);
  r += fmt::format("  {:<14}{}\n", "readings", reading_source_text(meter));
  r +=
      fmt::format("  {:<14}{:.3f} % of one core (sampling thread CPU time / wall, every {:g} ms)\n",
                  "overhead", overhead * 100, a.interval_ms);
  for (auto& f : m.flags) r += fmt::format("  flag: {}\n", f);
  return r;
}

// CodeCarbon's tracking_mode from the sensors counted: "process" when a process-tree estimate
// (--process) measures the CPU or memory, "machine" otherwise.
std::string tracking_mode(const MeasureArgs& a, const gt::energy::Meter& meter) {
  if (a.process)
    for (const auto& s : meter.sensors())
      if (s.available && s.counted && s.kind == gt::energy::SensorKind::kEstimate &&
          (s.domain == "cpu" || s.domain == "ram"))
        return "process";
  return "machine";
}

// Checks --csv, --json, --pue and --wue before the command runs; throws gt::Error naming the
// option and the value (gt::UsageError for --pue and --wue: out of range, or without --csv).
void check_outputs(const MeasureArgs& a) {
  using namespace gt::energy;
  RunInfo check;
  check.pue = a.pue.value_or(1.0);
  check.wue = a.wue;
  gt::cli::as_usage([&] { check_run_info(check); });  // --pue, --wue out of their ranges
  // --pue and --wue go into the CSV row only (the JSON has no water): not ignored without it
  for (const auto& [name, value] : {std::pair{"--pue", a.pue}, std::pair{"--wue", a.wue}})
    if (value && a.csv.empty())
      throw gt::UsageError(
          fmt::format("{} {}: applies to the --csv row (emissions.csv's energies, emissions and "
                      "water_consumed); expected --csv FILE with it",
                      name, *value));
  if (!a.csv.empty()) {
    try {
      check_codecarbon_csv_writable(a.csv);
    } catch (const gt::Error& e) {
      throw gt::Error(fmt::format("--csv {}", e.what()));  // the path, named with its option
    }
  }
  if (!a.json.empty() && a.json != "-") check_writable(a.json, "--json");
}

int run_measure(const MeasureArgs& a) {
  using namespace gt::energy;
  if (a.cmd.empty())
    throw gt::Error("measure: no command; expected `greentrain measure [options] -- CMD ARGS...`");
  MeterOptions opt = meter_options(a);
  check_outputs(a);  // before the command runs: a bad output never costs a run
  // an intensity in another unit than gCO2e/kWh (kg/kWh read as g/kWh): said once, before the run
  for (const auto& w : opt.carbon.warnings())
    std::fprintf(stderr, "greentrain measure: warning: %s\n", w.c_str());

  // Start the child held until the meter (which may watch its process tree) is ready; every
  // catchable signal is forwarded to it. measure adopts the orphans of the command's tree (a
  // daemonizing child, a double fork), so that --process still counts them.
  // with --json - the command's output goes to stderr: stdout holds the JSON alone
  gt::ChildProcess child(a.cmd, {.stdout_to_stderr = a.json == "-",
                                 .hold = true,
                                 .who = "greentrain measure",
                                 .adopt_orphans = true});
  if (a.process) {
    opt.pid = child.pid();
    opt.adopter_pid = static_cast<int>(::getpid());
  }
  std::unique_ptr<Meter> meter = Meter::create(opt);  // the child is killed when this throws
  meter->begin_window("measure");
  child.release();  // go

  // Wait for the exit without reaping, so a process-tree estimate can still read its totals.
  child.wait_ended();
  Measurement m = meter->end_window("measure");
  const double overhead = meter->sampler_overhead();
  // from here on a signal is ignored until the records are written
  const int code = gt::exit_code_of(child.reap());

  std::fputs(report_text(a, m, *meter, code, overhead).c_str(), stderr);
  if (const std::vector<pid_t> left = child.adopted_running(); !left.empty())
    std::fprintf(stderr,
                 "  note: the command left %zu process%s running (%s), measured until it ended "
                 "and not after\n",
                 left.size(), left.size() == 1 ? "" : "es",
                 fmt::format("{}", fmt::join(left, ", ")).c_str());

  RunInfo run;
  run.project_name = "greentrain-measure";
  // region stays empty: CodeCarbon's column is a province or cloud region, which measure is not
  // told (the default intensity's label "world average" is not one)
  run.country_iso_code = m.carbon_country_iso_code;
  run.country_name = m.carbon_country_name;
  run.tracking_mode = tracking_mode(a, *meter);
  run.pue = a.pue.value_or(1.0);
  run.wue = a.wue;
  // The records are written whatever the command did; a record that fails is said, and the
  // command's exit status is still returned (1 when it was 0, so the failure is not missed).
  bool record_failed = false;
  auto record = [&](const char* what, auto&& write) {
    try {
      write();
    } catch (const std::exception& e) {
      record_failed = true;
      std::fprintf(stderr, "greentrain measure: error: %s not written: %s\n", what, e.what());
    }
  };
  if (!a.csv.empty())
    record("--csv", [&] {
      const CsvAppend r = append_codecarbon_csv(a.csv, m, run);
      if (!r.left_out.empty())
        std::fprintf(stderr, "  note: %s has its own header: written without %s\n", a.csv.c_str(),
                     fmt::format("{}", fmt::join(r.left_out, ", ")).c_str());
    });
  if (!a.json.empty())
    record("--json", [&] {
      auto j = to_json(m);
      j["command"] = nlohmann::json::array();
      for (const auto& arg : a.cmd) j["command"].push_back(gt::bytes_to_json(arg));  // any bytes
      j["exit_code"] = code;
      j["sampler_overhead_fraction"] = overhead;
      j["interval_s"] = opt.interval_s;
      j["schema"] = "greentrain.measure/1";
      j["reading_source"] = meter->reading_source();
      gt::cli::write_json_output(a.json, j);
    });
  if (record_failed) std::fprintf(stderr, "greentrain measure: the command exited %d\n", code);
  return record_failed && code == 0 ? 1 : code;
}

gt::cli::Registrar reg(40, "measure", [](CLI::App& root) {
  auto* c = root.add_subcommand(
      "measure", "run a command and measure its time, energy, power and carbon (-- CMD ARGS...)");
  auto a = std::make_shared<MeasureArgs>();
  c->add_option("--interval", a->interval_ms,
                "sampling interval in ms, in [1, 3600000] (default 100)");
  auto* ci = c->add_option("--carbon-intensity", a->carbon_g,
                           "constant grid intensity, gCO2e/kWh, >= 0 (unset: 475, the IEA world "
                           "average, reported as the default)");
  auto* cc = c->add_option("--carbon-csv", a->carbon_csv,
                           "intensity series: greentrain's CSV (Time, Carbon Intensity in "
                           "gCO2e/kWh), an Electricity Maps export, UK Carbon Intensity API JSON, "
                           "WattTime MOER, an ENTSO-E-style CSV (detected, or --carbon-format)");
  ci->excludes(cc);
  gt::cli::add_carbon_read_options(c, a->carbon_read);
  c->add_option("--carbon-utc-offset", a->carbon_utc_offset_h,
                "hours east of UTC of the series' naive times (default 0); rows with their "
                "own offset (Z, +02:00) keep it");
  c->add_option("--carbon-start", a->carbon_start,
                "replay: take the start to be this series time, 'YYYY-MM-DD HH:MM:SS' (at "
                "--carbon-utc-offset) or with its offset, e.g. 2020-06-08T00:30:00Z");
  c->add_option("--carbon-region", a->carbon_region,
                "country (ISO 3166-1 alpha-3, e.g. DEU): its annual average intensity (Our World "
                "in Data / Ember 2021, as CodeCarbon), or with --carbon-csv/--carbon-intensity the "
                "country those figures are for; fills emissions.csv's country columns");
  c->add_option("--csv", a->csv, "append a CodeCarbon emissions.csv row to this file");
  // one value (a PATH, or - for standard output): with an optional value CLI11 2.1 reads a
  // following `-- CMD -ARG` as options (`measure --json m.json -- sh -c ...` was refused);
  // `--json` alone before `--` or another option is given "-" by main.cpp (bare_json_to_stdout)
  gt::cli::add_json_option(c, a->json, "the measurement")->expected(1);
  c->add_option("--pue", a->pue,
                "power usage effectiveness in [1, 10] for the --csv row (needs --csv): "
                "multiplies its energies and emissions as CodeCarbon's does (default 1)");
  c->add_option("--wue", a->wue,
                "water usage effectiveness, L/kWh in [0, 100], for the --csv row's "
                "water_consumed (needs --csv; unset: water unknown, left empty)");
  c->add_option("--tdp", a->tdp_w,
                "CPU TDP per socket in W, in [1, 2000], for the CPU estimate (default: the CPU "
                "model table)");
  c->add_flag("--process", a->process,
              "measure the command's process tree: CPU and memory are its estimates (RAPL, "
              "machine-wide, is listed and not counted); GPUs are read whole");
  c->add_option("cmd", a->cmd, "the command and its arguments, after --")->required();
  c->callback([a] { gt::cli::exit_code() = run_measure(*a); });
});

}  // namespace
}  // namespace gt_cmd_measure
