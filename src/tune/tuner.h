// tune/tuner.h: power-limit search in the manner of Zeus's GlobalPowerLimitOptimizer (Jie You,
// Jae-Won Chung, Mosharaf Chowdhury, "Zeus: Understanding and Optimizing GPU Energy
// Consumption of DNN Training", NSDI 2023). Every candidate limit, from the devices' allowed
// maximum down to their minimum in steps, is applied to all devices; some warm-up steps are
// run, then some profiled steps are measured (energy J, time s): by the caller's meter while the
// caller marks its steps (PowerLimitOptimizer, tune/optimizer.h: training loops, `greentrain
// tune CONFIG`, the Python package), or by a function that runs the steps (tune_power_limit:
// the simulated devices of `greentrain tune --simulate` and the tests).
// The choice minimises energy, time, Zeus's cost eta*E + (1-eta)*P_max*T (E and T per step;
// P_max = the highest candidate limit times the number of devices, so both terms are joules),
// or takes the lowest limit whose time per step stays within a slowdown factor of the time at
// the highest limit. The profile is saved as JSON and reused when it matches the devices.
// The limits in force before are restored when the search ends, however it ends.
#pragma once
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tune/power_limit.h"

namespace gt::energy {
struct Measurement;
}

namespace gt::tune {

/// What the profiled steps cost: energy over all devices, J; wall time, s; and what the meter
/// said of the energy, so that a search never optimises a figure that was not measured.
struct StepMeasurement {
  double energy_j = 0;             ///< J; a figure only when energy_known
  double time_s = 0;               ///< s
  bool energy_known = true;        ///< false: no sensor counted (the meter's energy is unknown)
  bool estimated_only = false;     ///< every counted domain is a model (TDP x utilization), which
                                   ///< does not see a power limit
  std::vector<std::string> flags;  ///< the meter's flags for the window
};

/// Runs `steps` steps at the power limits now in force and measures them: simulated_profile()
/// (tests, --simulate). Real training steps drive PowerLimitOptimizer instead.
using ProfileFn = std::function<StepMeasurement(int steps)>;

/// A meter window as the search reads it: its energy over the counted domains (J; known only
/// when a sensor counted), duration (s), whether every counted domain is an estimate, and the
/// meter's flags. PowerLimitOptimizer measures every limit's profiled steps through it, so
/// `greentrain tune` and the Python optimizer refuse and flag alike.
StepMeasurement step_measurement(const energy::Measurement& m);

enum class Objective { energy, time, cost, slowdown };
/// "energy", "time", "cost" or "slowdown"; throws gt::Error otherwise.
Objective parse_objective(std::string_view name);
std::string_view objective_name(Objective o);

struct TuneOptions {
  double step_w = 25;     ///< distance between candidate limits, W
  int warmup_steps = 2;   ///< steps run and discarded at each limit
  int profile_steps = 5;  ///< steps measured at each limit
  Objective objective = Objective::cost;
  double eta = 0.5;           ///< Zeus's energy/time weight in [0, 1]
  double max_slowdown = 1.1;  ///< for Objective::slowdown: time factor allowed vs the max limit
  std::string profile_path;   ///< JSON profile to reuse or write ("" = neither)
};

/// One measured limit.
struct ProfilePoint {
  double limit_w = 0;              ///< W (each device)
  double energy_per_step_j = 0;    ///< J per step, all devices
  double time_per_step_s = 0;      ///< s per step
  std::vector<std::string> flags;  ///< the meter's flags at this limit (shown and saved)
  double avg_power_w() const {
    return time_per_step_s > 0 ? energy_per_step_j / time_per_step_s : 0;
  }
};

struct TuneResult {
  std::vector<ProfilePoint> points;       ///< from the highest limit down
  double chosen_limit_w = 0;              ///< W
  double p_max_w = 0;                     ///< highest candidate x devices, W
  bool reused_profile = false;            ///< points came from profile_path, nothing was run
  std::vector<std::string> devices;       ///< device names
  std::vector<double> original_limits_w;  ///< limits before (and after) the search, W
};

/// The most candidate limits one search profiles (each is a profiling run of warm-up and
/// profiled training steps).
constexpr int kMaxCandidateLimits = 1000;

/// Candidates from max_w down to min_w in steps of step_w, W; min_w is added when the steps
/// miss it, and all lie within [min_w, max_w]. Throws gt::Error for step_w <= 0, min > max, or
/// a step that would give more than kMaxCandidateLimits candidates (the error names the
/// smallest step allowed).
std::vector<double> candidate_limits_w(double min_w, double max_w, double step_w);

/// Zeus's cost, J: eta * energy_j + (1 - eta) * p_max_w * time_s (Zeus, NSDI 2023, the cost it
/// minimises).
double zeus_cost_j(double energy_j, double time_s, double eta, double p_max_w);

/// The limit the objective picks among points (W). Ties go to the lower limit.
double choose_limit_w(const std::vector<ProfilePoint>& points, const TuneOptions& opt,
                      double p_max_w);

/// true for the objectives that compare energies (energy, cost).
bool objective_needs_energy(Objective o);

/// The search's steps, shared by tune_power_limit (a ProfileFn runs the steps) and
/// PowerLimitOptimizer (tune/optimizer.h: the caller runs them). begin_search checks opt
/// (gt::Error naming the value), fills r.devices and r.p_max_w (the highest candidate x the
/// number of devices, W) and returns the candidates (W, from the highest down). Changes nothing.
std::vector<double> begin_search(const std::vector<DevicePtr>& devices, const TuneOptions& opt,
                                 TuneResult& r);
/// Fills r from the profile at opt.profile_path when it was made on these devices and
/// candidates (points, original_limits_w = the limits now, chosen_limit_w, reused_profile) and
/// returns true; false when there is no such profile. gt::Error when the file is not a profile.
bool reuse_saved_profile(const std::vector<DevicePtr>& devices, const std::vector<double>& cands,
                         const TuneOptions& opt, TuneResult& r, std::FILE* log);
/// Adds the point of one limit (W) whose opt.profile_steps profiled steps measured m, and logs
/// it. gt::Error when m's time is not > 0, or when the objective compares energies and m's
/// energy is unknown, 0 J or an estimate only.
void add_profile_point(TuneResult& r, double limit_w, const StepMeasurement& m,
                       const TuneOptions& opt, std::FILE* log);
/// Chooses r.chosen_limit_w among r.points and writes the profile to opt.profile_path (if set).
void end_search(TuneResult& r, const TuneOptions& opt);

/// Runs the search on devices (all set to the same limit) with profile(), or reuses the
/// profile at opt.profile_path when it was made on the same devices and candidates. Refuses
/// before changing anything (gt::Error saying what is needed) without permission. An objective
/// that needs energy stops the search (limits restored) with gt::Error when a profiled window's
/// energy is unknown, reads 0 J, or is an estimate only. The previous
/// limits are restored on return, exception, and SIGINT/SIGTERM (PowerLimitGuard). log: where
/// progress lines go (nullptr: silent).
TuneResult tune_power_limit(const std::vector<DevicePtr>& devices, const ProfileFn& profile,
                            const TuneOptions& opt, std::FILE* log = nullptr);

/// The result as JSON (the saved profile): devices, candidates, points, objective, choice.
nlohmann::json tune_result_to_json(const TuneResult& r, const TuneOptions& opt);

}  // namespace gt::tune
