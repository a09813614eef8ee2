#include "train/energy_hook.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "backend/backend.h"
#include "dist/mpi_comm.h"
#include "energy/measurement_output.h"
#include "energy/metrics.h"
#include "run/schema.h"

namespace gt {

namespace {
namespace key = run::key;

// The intensity behind g_co2e and where it came from, in every JSON output of the run.
void add_carbon_fields(const energy::Measurement& m, nlohmann::json& j) {
  j[key::carbon_g_per_kwh] = m.carbon_g_per_kwh ? nlohmann::json(*m.carbon_g_per_kwh) : nullptr;
  j[key::carbon_origin] = m.carbon_origin;
  j[key::carbon_source] = m.carbon_source;
}
}  // namespace

nlohmann::json json_or_null(std::optional<double> v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

void add_energy_fields(const energy::Measurement& m, double tokens, nlohmann::json& record) {
  const auto known = m.known_energy_j();
  record[key::energy_j] = json_or_null(known);
  record[key::power_w] = json_or_null(m.avg_power_w);
  record[key::joules_per_token] =
      known ? json_or_null(energy::joules_per_token(*known, tokens)) : nlohmann::json();
  record[key::g_co2e] = json_or_null(m.known_g_co2e());
  add_carbon_fields(m, record);
  // The GPUs' own share, from their energy counters (NVML, ROCm SMI) only: on a GPU node
  // without RAPL the total includes a CPU estimate, and this figure stays a measurement.
  double gpu_j = 0;
  bool gpu_counted = false;
  for (const auto& d : m.domains)
    if (d.domain == "gpu" && !d.estimated) {
      gpu_j += d.energy_j;
      gpu_counted = true;
    }
  record[key::gpu_energy_j] = gpu_counted ? nlohmann::json(gpu_j) : nlohmann::json();
  record[key::gpu_joules_per_token] =
      gpu_counted ? json_or_null(energy::joules_per_token(gpu_j, tokens)) : nlohmann::json();
  if (!gpu_counted) {
    bool gpu_missing = false;  // the run's GPU was asked for and could not be read
    for (const auto& f : m.flags)
      gpu_missing = gpu_missing || f.find(energy::kGpusNotMeasured) != std::string::npos;
    record[key::gpu_energy_unknown_reason] =
        gpu_missing ? "the GPU of train.device could not be read (energy_flags say why)"
        : known     ? "no GPU energy counter (NVML, ROCm SMI) is read for this run: train.device "
                      "uses no GPU (a CPU run)"
                    : "no sensor could be read (energy_unknown_reason)";
  }
  record[key::energy_estimated] = m.estimated;
  if (!known) record[key::energy_unknown_reason] = m.energy_unknown_reason;
  if (known && !(tokens > 0))
    record[key::efficiency_unknown_reason] =
        "no token was trained in this window: the per-token and per-joule figures are unknown";
  if (!m.flags.empty()) record[key::energy_flags] = m.flags;
}

/// The GPUs a run on train.device uses, as positions among the visible GPUs: a device whose
/// traits say gpu_energy reads the GPU at its index ("cuda:N": GPU N, "cuda": 0); any other
/// device reads none, since GPUs the run does not use are not its energy (a shared node's
/// other jobs may be using them).
std::vector<int> gpus_of_device(const std::string& device) {
  const DeviceName d = parse_device(device);
  return d.gpu_energy() ? std::vector<int>{d.index} : std::vector<int>{};
}

energy::MeterOptions meter_options(const TrainConfig& cfg) {
  energy::MeterOptions o;
  o.interval_s = cfg.energy_interval_ms / 1000.0;
  // Unset is unset (the meter's default, labelled so); a set value, 0 included, is used.
  if (!cfg.carbon_csv.empty()) {
    energy::CarbonReadOptions read;
    read.format = cfg.carbon_format;
    read.value_column = cfg.carbon_column;
    read.time_column = cfg.carbon_time_column;
    read.unit = cfg.carbon_unit;
    read.value_kind = cfg.carbon_value;
    read.option_prefix = "energy.carbon_";  // messages name the configuration's keys
    o.carbon = energy::CarbonIntensity::from_csv(cfg.carbon_csv, cfg.carbon_utc_offset_h, "", read);
  } else if (cfg.carbon_intensity) {
    o.carbon =
        energy::CarbonIntensity::constant(*cfg.carbon_intensity, "", "energy.carbon_intensity");
  } else if (!cfg.carbon_region.empty()) {
    o.carbon = energy::CarbonIntensity::for_country(cfg.carbon_region, "energy.carbon_region");
  }
  if (!cfg.carbon_region.empty() && o.carbon.origin() != energy::CarbonOrigin::kCountry)
    o.carbon = o.carbon.with_country(cfg.carbon_region, "energy.carbon_region");
  if (cfg.cpu_tdp_w > 0) o.cpu_tdp_w = cfg.cpu_tdp_w;
  o.pid_hint.clear();  // a run measures its machine: no process-tree option to offer
  o.gpus = gpus_of_device(cfg.device);
  // A run on a GPU whose sensors cannot be read (no NVML in a container) still trains; every
  // measurement then says the GPU's energy is missing (MeterOptions::gpus_strict).
  o.gpus_strict = false;
  return o;
}

EnergyHook::EnergyHook(const TrainConfig& cfg, std::string run_dir, FILE* log,
                       std::optional<energy::MeterOptions> opt)
    : cfg_(cfg), run_dir_(std::move(run_dir)), log_(log) {
  energy::MeterOptions o = opt ? *opt : meter_options(cfg);
  // the GPUs of this rank's device (the trainer's: one GPU per rank of a node, "cuda:<local
  // rank>"), not those of the configuration the options were made from before the trainer
  // existed, which names the same GPU on every rank
  o.gpus = gpus_of_device(cfg.device);
  meter_ = energy::Meter::create(o);
  min_interval_s_ = min_log_interval_s(meter_->sensors());
  meter_->begin_window("run");
  if (cfg_.target_loss > 0) meter_->begin_window("to_target");
  if (log_) {
    std::fputs(energy_header(*meter_).c_str(), log_);
    std::fprintf(log_, "  carbon   %s\n", meter_->carbon().describe().c_str());
  }
}

std::string energy_header(const energy::Meter& meter) {
  std::string counted, out;
  for (auto& s : meter.sensors())
    if (s.available && s.counted) counted += (counted.empty() ? "" : ", ") + s.name;
  if (counted.empty())
    out = fmt::format(
        "  energy   none measured: {}; the run's energy will be unknown (null), "
        "not 0\n",
        meter.not_reader().empty() ? "no sensor can be read on this machine"
                                   : "another process reads this machine's sensors");
  else
    out = fmt::format("  energy   {}{}\n", counted,
                      meter.estimated() ? " (ESTIMATED: no energy counter readable here)" : "");
  const std::vector<std::string> others = meter.not_reader();
  for (auto& s : meter.sensors())
    if (std::find(others.begin(), others.end(), s.name) != others.end())
      out += fmt::format("  energy   {} not read by this run: {}\n", s.name, s.reason);
  return out;
}

double min_log_interval_s(const std::vector<energy::SensorInfo>& sensors) {
  double refresh = 0;
  for (const auto& s : sensors)
    if (s.available && s.counted && s.kind != energy::SensorKind::kEstimate)
      refresh = std::max(refresh, s.refresh_period_s);
  return kRefreshPeriodsPerInterval * refresh;
}

void EnergyHook::begin_step(int64_t step) {
  if (!interval_open_) {
    meter_->begin_window("interval");
    interval_open_ = true;
  }
}

StepNote EnergyHook::end_step(int64_t step, int64_t tokens, double flops, nlohmann::json& record) {
  ++interval_steps_;
  interval_tokens_ += tokens;
  interval_flops_ += flops;
  run_tokens_ += tokens;
  run_flops_ += flops;
  const bool must = step == cfg_.max_steps || step == last_step_ ||
                    (cfg_.eval_interval > 0 && step % cfg_.eval_interval == 0);
  bool at_log = must || step % cfg_.log_interval == 0;
  // a counter that moves in steps of its refresh period (NVML's, about 100 ms) gives an
  // interval of one 120 ms step one or two updates: 430 or 960 W on a 700 W card (seen on an
  // H200). Shorter intervals are merged into the next (single process only: with several
  // ranks the intervals end where log_interval says, on every rank alike).
  if (at_log && !must && (!comm_ || comm_->size() == 1) && min_interval_s_ > 0 &&
      meter_->window_elapsed_s("interval") < min_interval_s_)
    at_log = false;
  if (!at_log) return {};
  energy::Measurement m = meter_->end_window("interval");
  interval_open_ = false;
  // per-domain average power of the interval (W), for the report's stacked power chart; a
  // domain whose interval was shorter than its sensor's refresh period is null. With several
  // ranks these are this node's (rank 0's) domains; energy and gCO2e are the whole job's.
  const std::vector<energy::DomainMeasurement> node_domains = m.domains;
  if (comm_ && comm_->size() > 1) {
    record[key::energy_nodes] = add_nodes(m);
    record[key::power_scope] = "rank 0's devices (its node's CPU and memory, its own GPU)";
  }
  warn_carbon_outside(m);
  add_energy_fields(m, static_cast<double>(interval_tokens_), record);
  record[key::energy_interval_tokens] = interval_tokens_;
  record[key::energy_interval_s] = m.duration_s;       // power_w x this / tokens = joules_per_token
  std::map<std::string, std::optional<double>> watts;  // unknown in one sensor: unknown
  std::set<std::string> est;
  for (const auto& d : node_domains) {
    auto it = watts.try_emplace(d.domain, 0.0).first;
    if (!d.avg_power_w)
      it->second.reset();
    else if (it->second)
      *it->second += *d.avg_power_w;
    if (d.estimated) est.insert(d.domain);
  }
  nlohmann::json by_domain = nlohmann::json::object();
  for (auto& [dom, w] : watts) by_domain[dom] = json_or_null(w);
  record[key::power_w_by_domain] = by_domain;
  if (!est.empty())
    record[key::power_estimated_domains] = std::vector<std::string>(est.begin(), est.end());
  StepNote note;
  note.text = energy::summary_line(m, static_cast<double>(interval_tokens_)) + ", " +
              energy::carbon_short(m);
  // the line's tokens/s over the meter's seconds of this interval: W / (tokens/s) = J/token
  note.window_s = m.duration_s;
  note.window_tokens = interval_tokens_;
  note.window_steps = interval_steps_;
  interval_tokens_ = interval_steps_ = 0;
  interval_flops_ = 0;
  return note;
}

void EnergyHook::target_reached(int64_t step, nlohmann::json& fields) {
  if (!meter_->has_window("to_target")) return;
  energy::Measurement m = meter_->end_window("to_target");
  if (comm_ && comm_->size() > 1) add_nodes(m);  // the whole job's
  fields[key::energy_j] = json_or_null(m.known_energy_j());
  fields[key::g_co2e] = json_or_null(m.known_g_co2e());
  fields[key::energy_estimated] = m.estimated;
  if (!m.known_energy_j()) fields[key::energy_unknown_reason] = m.energy_unknown_reason;
}

void EnergyHook::finish(nlohmann::json& summary) {
  if (meter_->has_window("to_target")) meter_->end_window("to_target");
  if (interval_open_) {
    meter_->end_window("interval");
    interval_open_ = false;
  }
  energy::Measurement m = meter_->end_window("run");
  warn_carbon_outside(m);
  if (comm_ && comm_->size() > 1) summary[key::energy_nodes] = add_nodes(m);
  summary[key::energy_unknown] = !m.known_energy_j();  // never a silent 0
  add_energy_fields(m, static_cast<double>(run_tokens_), summary);
  const auto known = m.known_energy_j();
  // no step ran: no token and no FLOP per joule to speak of (unknown, not 0)
  const bool trained = run_tokens_ > 0;
  summary[key::tokens_per_joule] = known && trained
                                       ? json_or_null(energy::tokens_per_joule(run_tokens_, *known))
                                       : nlohmann::json();
  summary[key::gflops_per_watt] = known && trained
                                      ? json_or_null(energy::gflops_per_watt(run_flops_, *known))
                                      : nlohmann::json();
  summary[key::energy_method] = m.method;
  summary[key::energy] = energy::to_json(m);
  energy::RunInfo info;
  info.project_name = "greentrain";
  // region stays empty, as in Python's rows: CodeCarbon's column is a province or cloud region
  // (the default intensity's label "world average" is not one)
  info.country_iso_code = m.carbon_country_iso_code;
  info.country_name = m.carbon_country_name;
  if (!comm_ || comm_->rank() == 0) {
    // the run folder's energy.csv: CodeCarbon's columns (DESIGN.md), one row per session
    const std::string path = run::path_in(run_dir_, run::file::energy);
    const auto csv = energy::append_codecarbon_csv(path, m, info);
    if (log_ && !csv.left_out.empty())  // an energy.csv of an older greentrain, kept as it is
      std::fprintf(log_, "note: %s has an older header: written without %zu columns\n",
                   path.c_str(), csv.left_out.size());
  }
  if (log_ && !m.known_energy_j()) {  // why: no sensor, or a counter another process reads
    std::fprintf(log_, "energy unknown: %s\n", m.energy_unknown_reason.c_str());
    for (auto& f : m.flags) std::fprintf(log_, "  flag: %s\n", f.c_str());
  } else if (log_) {
    std::fprintf(log_, "energy %.1f J over %.1f s (%s): %s, %s\n", m.energy_j, m.duration_s,
                 m.estimated ? "ESTIMATED" : "measured",
                 energy::summary_line(m, static_cast<double>(run_tokens_)).c_str(),
                 energy::carbon_short(m).c_str());
    std::fprintf(log_, "  carbon: %s\n", m.carbon_source.c_str());
    std::fprintf(log_, "  method: %s\n", m.method.c_str());
    for (auto& f : m.flags) std::fprintf(log_, "  flag: %s\n", f.c_str());
  }
}

void EnergyHook::warn_carbon_outside(const energy::Measurement& m) {
  if (carbon_warned_ || !log_ || !warn_) return;
  for (const auto& f : m.flags)
    if (f.rfind(energy::kCarbonOutsideFlag, 0) == 0) {
      // on a terminal, over a progress line being rewritten (the next step draws it again)
      std::fprintf(warn_,
                   "%sgreentrain train: warning: %s (said once; metrics.jsonl's and "
                   "summary.json's energy_flags say it for each interval and for the run)\n",
                   isatty(fileno(warn_)) ? "\r\033[K" : "", f.c_str());
      std::fflush(warn_);
      carbon_warned_ = true;
      return;
    }
}

nlohmann::json EnergyHook::add_nodes(energy::Measurement& m) {
  const int n = comm_->size(), me = comm_->rank();
  bool reader = false;  // this rank holds the lock of at least one counted device
  for (auto& s : meter_->sensors()) reader = reader || (s.available && s.counted);
  // reader, known, energy_j, g_co2e; then for each kind of domain: this rank's sensors of it
  // (count), of them estimated (count), J, gCO2e
  constexpr int kKinds = 4, kVals = 4 + 4 * kKinds;
  static constexpr const char* kKind[kKinds] = {"cpu", "gpu", "ram", "psys"};
  std::vector<double> all(kVals * n);
  double mine[kVals] = {reader ? 1.0 : 0.0, m.known_energy_j() ? 1.0 : 0.0,
                        m.known_energy_j().value_or(0.0), m.known_g_co2e().value_or(0.0)};
  for (const auto& d : m.domains)
    for (int k = 0; k < kKinds; ++k)
      if (d.domain == kKind[k]) {
        double* v = mine + 4 + 4 * k;
        v[0] += 1;
        v[1] += d.estimated ? 1 : 0;
        v[2] += d.energy_j;
        v[3] += d.g_co2e;
      }
  std::memcpy(all.data() + kVals * me, mine, sizeof mine);
  comm_->all_gather(all.data() + kVals * me, all.data(), std::vector<size_t>(n, kVals),
                    dist::CommType::f64);
  double est = m.estimated ? 1.0 : 0.0;
  comm_->all_reduce(&est, 1, dist::CommType::f64, dist::ReduceOp::max);
  if (node_names_.empty()) node_names_ = dist::gather_node_names(*comm_);  // once
  struct Node {
    int ranks = 0, readers = 0;
    bool known = true;
    double j = 0, g = 0;
  };
  std::map<std::string, Node> nodes;
  for (int r = 0; r < n; ++r) {
    const double* v = all.data() + kVals * r;
    Node& nd = nodes[node_names_[r]];
    ++nd.ranks;
    if (v[0] > 0) {
      ++nd.readers;
      nd.known = nd.known && v[1] > 0;
      nd.j += v[2];
      nd.g += v[3];
    }
  }
  bool known = true;
  double total_j = 0, total_g = 0;
  nlohmann::json list = nlohmann::json::array();
  for (auto& [name, nd] : nodes) {
    const bool k = nd.readers > 0 && nd.known;
    known = known && k;
    total_j += nd.j;
    total_g += nd.g;
    list.push_back({{key::node, name},
                    {key::ranks, nd.ranks},
                    {key::energy_j, k ? nlohmann::json(nd.j) : nlohmann::json()},
                    {key::estimated, est > 0}});
  }
  m.flags.push_back(
      fmt::format("energy of {} node(s) ({} ranks) added: each node's devices read "
                  "by one rank (node lock)",
                  nodes.size(), n));
  if (!known) {
    m.domains.clear();  // unknown, never a partial sum presented as the whole
    m.energy_unknown_reason = "the energy of at least one node of the job is unknown";
    return list;
  }
  m.energy_j = total_j;
  m.g_co2e = total_g;
  m.estimated = est > 0;
  m.avg_power_w = m.duration_s > 0 ? std::optional<double>(total_j / m.duration_s) : std::nullopt;
  m.peak_power_w.reset();  // the nodes' peaks came at different times: they do not add
  // the job's domains, each the sum over the ranks that read one (this rank's alone would not
  // add up to energy_j, and a GPU's J per token would divide one GPU by every rank's tokens)
  m.domains.clear();
  for (int k = 0; k < kKinds; ++k) {
    energy::DomainMeasurement d;
    d.domain = kKind[k];
    int sensors = 0, estimated = 0;
    for (int r = 0; r < n; ++r) {
      const double* v = all.data() + kVals * r + 4 + 4 * k;
      if (all[kVals * r] <= 0) continue;  // not a reader
      sensors += static_cast<int>(v[0]);
      estimated += static_cast<int>(v[1]);
      d.energy_j += v[2];
      d.g_co2e += v[3];
    }
    if (sensors == 0) continue;
    d.sensor =
        fmt::format("{}: {} sensor(s) of the job's {} node(s)", kKind[k], sensors, nodes.size());
    d.estimated = estimated > 0;
    d.method = d.estimated ? energy::Method::kEstimate : energy::Method::kCounter;
    if (estimated > 0 && estimated < sensors)
      d.flags.push_back(fmt::format("{} of {} sensors estimated", estimated, sensors));
    if (m.duration_s > 0) d.avg_power_w = d.energy_j / m.duration_s;
    m.domains.push_back(std::move(d));
  }
  return list;
}

}  // namespace gt
