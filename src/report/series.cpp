// report/series.cpp: the series the report's charts plot, derived from metrics.jsonl's rows
// (run/metrics_jsonl.h).
#include "report/series.h"

#include <cmath>

namespace gt::report {
namespace {

nlohmann::json opt(std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

}  // namespace

nlohmann::json run_series(const RunData& run) {
  nlohmann::json train = nlohmann::json::array(), val = nlohmann::json::array(),
                 power = nlohmann::json::array(), jpt = nlohmann::json::array(),
                 carbon = nlohmann::json::array(), targets = nlohmann::json::array();
  double tokens = 0, seconds = 0, joules = 0, grams = 0, interval_start_s = 0;
  bool joules_known = true, grams_known = true, estimated = false;
  std::set<std::string> domains;
  for (const run::MetricsRow& m : run.metrics) {
    const auto tps = m.tokens_per_s, dt = m.step_time_s;
    if (tps && dt) tokens += std::round(*tps * *dt);
    if (dt) seconds += *dt;
    std::optional<double> at_j;
    if (m.energy_interval_tokens) {  // the line ends a logged energy interval
      const auto e = m.energy_j, g = m.g_co2e;
      if (!e) joules_known = false;
      if (!g) grams_known = false;
      if (e) joules += *e;
      if (g) grams += *g;
      if (joules_known) at_j = joules;
      estimated |= m.energy_estimated.value_or(false);
      nlohmann::json p = {{"s0", interval_start_s}, {"s", seconds}};
      interval_start_s = seconds;
      if (m.power_w_by_domain)
        for (const auto& [dom, w] : *m.power_w_by_domain) {
          p[dom] = opt(w);
          domains.insert(dom);
        }
      else if (m.power_w)  // a run from before the per-domain figures
        p["total"] = *m.power_w, domains.insert("total");
      power.push_back(p);
      jpt.push_back({{"tokens", tokens}, {"jpt", opt(m.joules_per_token)}});
      // gCO2e/kWh of the interval = g / (J / 3.6e6 J/kWh)
      std::optional<double> ci;
      if (e && g && *e > 0) ci = *g / (*e / 3.6e6);
      carbon.push_back({{"s", seconds},
                        {"intensity", opt(ci)},
                        {"g_total", grams_known ? nlohmann::json(grams) : nlohmann::json()}});
    }
    nlohmann::json pt = {{"tokens", tokens}, {"s", seconds}, {"j", opt(at_j)}};
    if (m.loss) {
      pt["loss"] = *m.loss;
      train.push_back(pt);
    }
    if (m.val_loss) {
      pt["loss"] = *m.val_loss;
      val.push_back(pt);
    }
    if (m.target_reached) targets.push_back(pt);
  }
  // the series span every session of a resumed run: an estimate in any marks them
  if (run.summary) estimated |= run.summary->run_energy_estimated();
  return {{"name", run.name},
          {"lines", run.metrics.size()},
          {"estimated", estimated},
          {"train", train},
          {"val", val},
          {"power", power},
          {"domains", std::vector<std::string>(domains.begin(), domains.end())},
          {"jpt", jpt},
          {"carbon", carbon},
          {"targets", targets}};
}

}  // namespace gt::report
