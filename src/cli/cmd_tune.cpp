// greentrain tune: searches the power limit with the lowest energy-time cost (Zeus,
// NSDI 2023), on the GPUs (NVML) or CPU packages (RAPL) of this machine while real training
// steps run, or on a simulated device (--simulate). The search lives in src/tune, its drive by
// the trainer's steps in train/power_search.h.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/option_messages.h"
#include "core/error.h"
#include "train/config.h"
#include "train/power_search.h"
#include "tune/power_limit.h"
#include "tune/simulated.h"
#include "tune/tuner.h"

// the command's own names, apart from the other command files' in a unity batch
namespace gt_cmd_tune {
namespace {

struct TuneArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string out = "runs/tune";
  bool simulate = false;
  int sim_devices = 1;
  std::string devices = "auto";
  double step_w = 25;
  int warmup_steps = 2;
  int profile_steps = 5;
  std::string objective = "cost";
  double eta = 0.5;
  double max_slowdown = 1.1;
  std::string profile;
  std::string json;
  bool out_given = false, devices_given = false, sim_devices_given = false;
  bool eta_given = false, max_slowdown_given = false;
};

// The options of a search on this machine's devices, which a simulated search would ignore,
// --sim-devices without --simulate, and --eta / --max-slowdown beside an objective that does not
// choose by them, are refused (gt::UsageError naming them) before anything is read or opened.
// (Not CLI11's needs()/excludes(): "--sim-devices requires --simulate" names one option at a
// time and not what to give instead.)
void refuse_options_that_would_be_ignored(const TuneArgs& a) {
  // --eta weighs energy against time in the cost only (choose_limit_w); with another objective
  // it would change no more than the cost column of the log and the JSON
  if (a.eta_given && a.objective != "cost")
    throw gt::UsageError(fmt::format(
        "--eta applies to --objective cost only (the energy weight of Zeus's cost); --objective "
        "{} does not choose by it; expected --objective cost with it, or no --eta",
        a.objective));
  // --max-slowdown bounds the slowdown objective's time per step only
  if (a.max_slowdown_given && a.objective != "slowdown")
    throw gt::UsageError(fmt::format(
        "--max-slowdown applies to --objective slowdown only (the time factor it allows); "
        "--objective {} does not read it; expected --objective slowdown with it",
        a.objective));
  if (a.simulate) {
    std::vector<std::string> unused;
    if (!a.config.empty()) unused.push_back("CONFIG " + a.config);
    if (!a.overrides.empty()) unused.push_back("--set");
    if (a.out_given) unused.push_back("--out");
    if (a.devices_given) unused.push_back("--devices");
    if (!unused.empty())
      throw gt::UsageError(fmt::format(
          "--simulate searches on simulated devices and trains nothing, so {} would be "
          "ignored; expected either a training CONFIG (a search on this machine's devices, "
          "with --set, --out, --devices) or --simulate",
          gt::cli::and_list(unused)));
  } else if (a.sim_devices_given) {
    throw gt::UsageError(
        gt::cli::only_with_message({"--sim-devices"}, "--simulate", "", "--simulate") +
        ", or --devices for this machine's devices");
  }
}

// The numeric options' ranges (docs/commands.md), checked before any device is opened or any
// line printed; each error names the option, the value and the range. run_tune makes them
// usage errors (exit 2).
void check_ranges(const TuneArgs& a) {
  gt::check(a.step_w > 0, fmt::format("--step {} W is not valid; expected W > 0 (giving at most "
                                      "{} candidate limits over the devices' allowed range)",
                                      a.step_w, gt::tune::kMaxCandidateLimits));
  gt::check(a.eta >= 0 && a.eta <= 1,
            fmt::format("--eta {} is not valid; expected an energy weight in [0, 1]", a.eta));
  gt::check(a.max_slowdown >= 1,
            fmt::format("--max-slowdown {} is not valid; expected a time factor of 1 or more",
                        a.max_slowdown));
  gt::check(a.warmup_steps >= 0,
            fmt::format("--warmup-steps {} is not valid; expected 0 or more", a.warmup_steps));
  gt::check(a.profile_steps >= 1,
            fmt::format("--profile-steps {} is not valid; expected 1 or more", a.profile_steps));
  gt::check(a.sim_devices >= 1 && a.sim_devices <= 64,
            fmt::format("--sim-devices {} is not valid; expected 1..64", a.sim_devices));
}

// The option the objective chose by, for the "chosen power limit" line: ", eta E" for cost,
// ", max slowdown F" for slowdown, nothing for energy and time (which read neither).
std::string chosen_by(const gt::tune::TuneOptions& opt) {
  if (opt.objective == gt::tune::Objective::cost) return fmt::format(", eta {}", opt.eta);
  if (opt.objective == gt::tune::Objective::slowdown)
    return fmt::format(", max slowdown {}", opt.max_slowdown);
  return "";
}

void run_tune(const TuneArgs& a) {
  using namespace gt::tune;
  refuse_options_that_would_be_ignored(a);
  gt::cli::as_usage([&] { check_ranges(a); });
  FILE* out = gt::cli::human_out(a.json);
  TuneOptions opt;
  opt.step_w = a.step_w;
  opt.warmup_steps = a.warmup_steps;
  opt.profile_steps = a.profile_steps;
  opt.objective = gt::cli::as_usage([&] { return parse_objective(a.objective); });
  opt.eta = a.eta;
  opt.max_slowdown = a.max_slowdown;
  opt.profile_path = a.profile;
  std::vector<DevicePtr> devices;
  ProfileFn profile;
  gt::TrainConfig cfg;
  if (a.simulate) {
    std::vector<std::shared_ptr<SimulatedDevice>> sims;
    for (int i = 0; i < a.sim_devices; ++i) {
      sims.push_back(std::make_shared<SimulatedDevice>(SimulatedModel{}, fmt::format("sim:{}", i)));
      devices.push_back(sims.back());
    }
    const SimulatedModel m;
    std::fprintf(out,
                 "simulated device(s): limits [%g, %g] W, draw %g W uncapped, idle %g W, "
                 "throughput ((L-idle)/(draw-idle))^%g, %g s/step uncapped\n",
                 m.min_w, m.max_w, m.draw_w, m.idle_w, m.exponent, m.step_time_s);
    profile = simulated_profile(sims);
  } else {
    gt::check(!a.config.empty(),
              "greentrain tune: expected a training CONFIG (TOML), or --simulate");
    gt::load_config_file(a.config, cfg);
    gt::apply_overrides(a.overrides, cfg);
    cfg.validate();
    devices = open_power_limit_devices(a.devices);
  }
  for (const auto& d : devices)
    std::fprintf(out, "device %s: limit %g W, allowed [%g, %g] W\n", d->name().c_str(),
                 d->limit_w(), d->min_limit_w(), d->max_limit_w());
  const TuneResult r = a.simulate ? tune_power_limit(devices, profile, opt, out)
                                  : gt::tune_training(cfg, a.out, devices, opt, out, stderr);
  if (r.reused_profile)
    std::fprintf(out, "(profile reused from %s; nothing was run)\n", a.profile.c_str());
  const ProfilePoint* top = &r.points.front();
  const ProfilePoint* best = top;
  for (const auto& p : r.points)
    if (p.limit_w == r.chosen_limit_w) best = &p;
  std::fprintf(out,
               "chosen power limit: %g W (objective %s%s, P_max %g W)\n"
               "  vs %g W: energy per step %.1f %%, time per step %+.1f %%\n",
               r.chosen_limit_w, std::string(objective_name(opt.objective)).c_str(),
               chosen_by(opt).c_str(), r.p_max_w, top->limit_w,
               100.0 * (best->energy_per_step_j - top->energy_per_step_j) / top->energy_per_step_j,
               100.0 * (best->time_per_step_s - top->time_per_step_s) / top->time_per_step_s);
  std::fprintf(out, "limits restored to:");
  for (std::size_t i = 0; i < devices.size(); ++i)
    std::fprintf(out, " %s=%g W", devices[i]->name().c_str(), devices[i]->limit_w());
  std::fprintf(out, "\napply it with: greentrain train CONFIG --set train.power_limit=%g\n",
               r.chosen_limit_w);
  if (!a.profile.empty() && !r.reused_profile)
    std::fprintf(out, "profile written to %s\n", a.profile.c_str());
  if (!a.json.empty()) {
    nlohmann::json pts = nlohmann::json::array();
    for (const auto& p : r.points)
      pts.push_back(
          {{"limit_w", p.limit_w},
           {"energy_per_step_j", p.energy_per_step_j},
           {"time_per_step_s", p.time_per_step_s},
           {"avg_power_w", p.avg_power_w()},
           {"zeus_cost_j", zeus_cost_j(p.energy_per_step_j, p.time_per_step_s, opt.eta, r.p_max_w)},
           {"flags", p.flags}});
    gt::cli::write_json_output(a.json, {{"schema", "greentrain.tune/1"},
                                        {"chosen_limit_w", r.chosen_limit_w},
                                        {"objective", objective_name(opt.objective)},
                                        {"eta", opt.eta},
                                        {"p_max_w", r.p_max_w},
                                        {"devices", r.devices},
                                        {"original_limits_w", r.original_limits_w},
                                        {"reused_profile", r.reused_profile},
                                        {"simulated", a.simulate},
                                        {"points", pts}});
  }
}

void setup(CLI::App& root) {
  auto a = std::make_shared<TuneArgs>();
  CLI::App* c = root.add_subcommand(
      "tune", "Search the power limit with the lowest energy-time cost (Zeus-style)");
  c->add_option("config", a->config, "training configuration (TOML) whose steps are profiled");
  c->add_option("--set", a->overrides, "override a configuration key: key=value (repeatable)")
      ->allow_extra_args(false);
  CLI::Option* out =
      c->add_option("--out", a->out, "run folder for the profiled training (default runs/tune)");
  c->add_flag("--simulate", a->simulate,
              "search on simulated devices whose power and speed depend on the limit (no CONFIG, "
              "--set, --out or --devices: nothing is trained)");
  CLI::Option* sim_devices = c->add_option("--sim-devices", a->sim_devices,
                                           "with --simulate: number of simulated devices, 1 to 64 "
                                           "(default 1)")
                                 ->check(gt::cli::int_range(1, 64));
  CLI::Option* devices =
      c->add_option("--devices", a->devices, "auto | nvml | rapl (default auto: GPUs, else CPUs)")
          ->check(gt::cli::one_of({"auto", "nvml", "rapl"}));
  c->add_option("--step", a->step_w,
                "W between candidate limits, > 0, giving at most 1000 limits (default 25)");
  c->add_option("--warmup-steps", a->warmup_steps, "steps discarded at each limit (default 2)")
      ->check(gt::cli::int_range(0, std::numeric_limits<int>::max()));
  c->add_option("--profile-steps", a->profile_steps, "steps measured at each limit (default 5)")
      ->check(gt::cli::int_range(1, std::numeric_limits<int>::max()));
  c->add_option("--objective", a->objective,
                "energy | time | cost (eta*E + (1-eta)*P_max*T) | slowdown (default cost)");
  CLI::Option* eta = c->add_option(
      "--eta", a->eta, "for --objective cost: energy weight of the cost, 0..1 (default 0.5)");
  CLI::Option* max_slowdown = c->add_option(
      "--max-slowdown", a->max_slowdown,
      "for --objective slowdown: time factor allowed vs the highest limit (default 1.1)");
  c->add_option("--profile", a->profile, "JSON profile: reused when it matches, else written");
  gt::cli::add_json_option(c, a->json,
                           "the search's result (every limit's profile, the chosen one)");
  c->callback([a, out, sim_devices, devices, eta, max_slowdown]() {
    a->out_given = out->count() > 0;
    a->eta_given = eta->count() > 0;
    a->max_slowdown_given = max_slowdown->count() > 0;
    a->devices_given = devices->count() > 0;
    a->sim_devices_given = sim_devices->count() > 0;
    run_tune(*a);
  });
}

gt::cli::Registrar reg(60, "tune", setup);

}  // namespace
}  // namespace gt_cmd_tune
