// energy/meter.cpp: see meter.h.
#include "energy/meter.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "core/error.h"
#include "energy/cpu_estimate.h"
#include "energy/daemon_client.h"
#include "energy/gpu_sensors.h"
#include "energy/rapl.h"

namespace gt::energy {

const char* const kMachineWideReason =
    "machine-wide: it measures every process of the package, not the measured process tree "
    "(MeterOptions::pid, --process), whose CPU and memory estimates are counted instead";

namespace {

// A sensor shown and counted under another description (counted, reason, standby): the
// same readings.
class RelabelledSensor : public Sensor {
 public:
  RelabelledSensor(std::unique_ptr<Sensor> inner, SensorInfo info)
      : inner_(std::move(inner)), info_(std::move(info)) {}
  const SensorInfo& info() const override { return info_; }
  Reading read(double now_s) override { return inner_->read(now_s); }

 private:
  std::unique_ptr<Sensor> inner_;
  SensorInfo info_;
};

std::unique_ptr<Sensor> relabel(std::unique_ptr<Sensor> s, bool counted, const std::string& reason,
                                bool standby) {
  SensorInfo i = s->info();
  i.counted = counted;
  i.reason = reason;
  i.standby = standby;
  return std::make_unique<RelabelledSensor>(std::move(s), std::move(i));
}

// The domains a counted, readable counter measures (psys: cpu and ram too); GPUs apart.
std::set<std::string> covered_domains(const std::vector<const SensorInfo*>& counted) {
  std::set<std::string> covered;
  for (const SensorInfo* i : counted)
    if (i->domain != "gpu") {
      covered.insert(i->domain);
      if (i->domain == "psys") covered.insert({"cpu", "ram"});
    }
  return covered;
}

}  // namespace

void check_interval_s(double interval_s, const std::string& what) {
  if (interval_s == 0 || (interval_s >= kMinIntervalS && interval_s <= kMaxIntervalS)) return;
  throw Error(fmt::format("{} {} s: expected 0 (no sampling thread) or a period in [{}, {}] s",
                          what, interval_s, kMinIntervalS, kMaxIntervalS));
}

SensorList detect_sensors(const MeterOptions& opt, std::vector<std::string>* flags) {
  std::vector<VendorGpus> vendors;
  if (opt.use_nvml) vendors.push_back({"NVIDIA", detect_nvml()});
  if (opt.use_rocm_smi) vendors.push_back({"AMD", detect_rocm_smi()});
  std::vector<std::string> meter_flags;
  SensorList all = choose_gpus(std::move(vendors), opt, &meter_flags);
  if (opt.use_rapl) {
    for (auto& s : detect_rapl(opt.powercap_root)) {
      // A process tree's figures are its CPU/memory estimates: RAPL measures every process of
      // the package, so it is listed and neither counted nor locked.
      const SensorInfo& i = s->info();
      if (opt.pid != 0 && i.available && i.counted)
        s = relabel(std::move(s), false, kMachineWideReason, false);
      all.push_back(std::move(s));
    }
  }
  if (opt.use_estimate) {
    std::vector<const SensorInfo*> counted;
    for (auto& s : all)
      if (s->info().available && s->info().counted) counted.push_back(&s->info());
    const std::set<std::string> covered = covered_domains(counted);
    CpuEstimateOptions eo;
    eo.tdp_w = opt.cpu_tdp_w;
    eo.ram_w_per_gb = opt.ram_w_per_gb;
    eo.pid = opt.pid;
    eo.adopter_pid = opt.adopter_pid;
    for (auto& s : make_cpu_estimate(eo)) {
      // kept in reserve: counted when the counter turns out to be another process's (Meter)
      if (covered.count(s->info().domain) && s->info().available)
        s = relabel(std::move(s), false,
                    "a RAPL counter measures this domain (this estimate is counted instead if "
                    "another process is the counter's reader)",
                    true);
      all.push_back(std::move(s));
    }
  }
  if (flags) *flags = std::move(meter_flags);
  return all;
}

std::unique_ptr<Meter> Meter::create(const MeterOptions& opt) {
  if (opt.cpu_tdp_w)
    check_cpu_tdp_w(*opt.cpu_tdp_w, "MeterOptions::cpu_tdp_w", "none (the CPU model's table)");
  check_process_pid(opt.pid, "MeterOptions::pid");
  std::string why;
  bool present = false;
  if (opt.use_daemon) {
    if (auto d = daemon::daemon_sensors(opt, &why, &present)) {
      MeterOptions o = opt;
      if (o.carbon.origin() == CarbonOrigin::kDefault && d->carbon) o.carbon = *d->carbon;
      auto m = std::make_unique<Meter>(std::move(d->sensors), o, MeterClock{}, std::move(d->flags),
                                       d->batch);
      m->source_ = d->source;
      return m;
    }
  }
  std::vector<std::string> meter_flags;
  SensorList all = detect_sensors(opt, &meter_flags);
  auto m = std::make_unique<Meter>(std::move(all), opt, MeterClock{}, std::move(meter_flags));
  if (present)  // a daemon is there but could not be used: say why where it matters
    for (auto& s : m->slots_)
      if (s.not_reader) s.info.reason += "; the daemon could not be used: " + why;
  return m;
}

Meter::Meter(SensorList sensors, const MeterOptions& opt, MeterClock clock,
             std::vector<std::string> meter_flags, std::shared_ptr<SensorBatch> batch)
    : opt_(opt),
      clock_(std::move(clock)),
      batch_(std::move(batch)),
      meter_flags_(std::move(meter_flags)),
      owner_pid_(::getpid()) {
  own_clock_ = !clock_.mono_s;
  if (!clock_.mono_s)
    clock_.mono_s = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  if (!clock_.unix_s)
    clock_.unix_s = [] {
      return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  check_interval_s(opt_.interval_s, "meter interval");
  const std::string dir = lock_dir(opt_.lock_dir);
  for (auto& s : sensors) {
    Slot slot;
    slot.info = s->info();
    slot.sensor = std::move(s);
    if (opt_.node_devices_elsewhere && slot.info.domain != "gpu" && slot.info.available &&
        slot.info.counted) {
      slot.not_reader = true;  // local rank 0 of the job on this node counts it
      slot.info.available = false;
      slot.info.reason =
          "not the reader: local rank 0 of this job on this node counts it for the job";
    } else if (slot.info.available && slot.info.counted && !slot.info.device_key.empty()) {
      // through the daemon, a key is a node-wide device's share lock (daemon::node_share_key)
      std::string holder, daemon_at;
      slot.lock = DeviceLock::try_acquire(dir, slot.info.device_key, &holder,
                                          batch_ ? daemon::kNodeShareRole : "", &daemon_at);
      if (!slot.lock) {
        slot.not_reader = true;
        slot.info.available = false;
        if (batch_) {
          slot.info.reason =
              "not the reader: " + holder + "; its energy is in that process's figures";
        } else if (!daemon_at.empty()) {  // a daemon runs, on a socket this meter did not try
          daemon_elsewhere_ = daemon_at;
          slot.info.reason = fmt::format(
              "not the reader: {}; it serves at {}, {}: set GT_DAEMON_SOCKET={} to read "
              "through it",
              holder, daemon_at,
              opt_.use_daemon
                  ? "this process looked for it at " + daemon::socket_path(opt_.daemon_socket)
                  : "this meter was told not to read through a daemon",
              daemon_at);
        } else {
          slot.info.reason =
              "not the reader: " + holder +
              "; to measure beside it, start `greentrain serve` (every process then reads "
              "through it)" +
              (opt_.pid_hint.empty() ? std::string()
                                     : ", or use " + opt_.pid_hint +
                                           " (an estimate of this process tree's CPU share)");
        }
      }
    }
    slot.active = slot.info.available && slot.info.counted;
    slots_.push_back(std::move(slot));
  }
  // What is counted is decided now that the locks are taken: an estimate in reserve counts for
  // a domain whose counters another process reads.
  std::vector<const SensorInfo*> counted;
  for (const Slot& s : slots_)
    if (s.active) counted.push_back(&s.info);
  const std::set<std::string> covered = covered_domains(counted);
  std::set<std::string> replaced;  // domains an estimate in reserve now measures
  const bool node_shared = opt_.node_devices_shared || opt_.node_devices_elsewhere;
  for (Slot& s : slots_) {
    if (node_shared || !s.info.standby || !s.info.available || s.active ||
        covered.count(s.info.domain))
      continue;
    s.active = s.info.counted = true;
    s.info.standby = false;
    s.info.reason.clear();
    replaced.insert(s.info.domain);
    std::string who;
    for (const Slot& o : slots_)
      if (o.not_reader && (o.info.domain == s.info.domain || o.info.domain == "psys"))
        who += (who.empty() ? "" : ", ") + o.info.name;
    meter_flags_.push_back(fmt::format(
        "{} counted (estimated): the counter of its domain ({}) is read by another process",
        s.info.name, who.empty() ? "none readable" : who));
  }
  // A counter this process cannot read and nothing else measures: the total would leave its
  // domain out, so every window's energy is unknown (end_window), never a partial sum.
  for (const Slot& s : slots_) {
    if (!s.not_reader) continue;
    if (node_shared && s.info.domain != "gpu") continue;  // another rank's
    const bool instead = s.info.domain == "psys"
                             ? replaced.count("cpu") && replaced.count("ram")
                             : s.info.domain != "gpu" && replaced.count(s.info.domain);
    if (!instead) missing_.push_back(s.info.name);
  }
  for (Slot& s : slots_)
    if (s.active)
      s.acc = std::make_unique<Accumulator>(s.info.kind, s.info.wrap_j, opt_.max_plausible_power_w);
  start_mono_s_ = clock_.mono_s();
  start_unix_s_ = clock_.unix_s();
  {
    std::lock_guard<std::mutex> g(mu_);
    tick_locked(true);  // prime the counters
  }
  period_s_ = opt_.interval_s;
  for (const Slot& slot : slots_)
    if (slot.active && slot.info.wrap_j && *slot.info.wrap_j > 0 && period_s_ > 0)
      period_s_ = std::min(period_s_, 0.5 * *slot.info.wrap_j / opt_.max_plausible_power_w);
  if (period_s_ > 0) thread_ = std::make_unique<std::thread>([this] { thread_main(); });
}

Meter::~Meter() {
  if (::getpid() != owner_pid_) {
    // A forked child (multiprocessing, os.fork): the sampling thread is the parent's. Joining a
    // thread that does not exist here, or taking a mutex it may have held at the fork, would
    // hang (so would destroying the condition variable it waited on); the parent's meter goes
    // on unchanged. The device locks were closed at the fork.
    (void)thread_.release();
    (void)cv_.release();
    return;
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_->notify_all();
  if (thread_ && thread_->joinable()) thread_->join();
}

void Meter::check_owner() const {
  if (::getpid() != owner_pid_)
    throw Error(fmt::format(
        "this Meter was made by process {} and this is process {} (a forked child): its "
        "sampling thread and device locks stay with the parent; expected a Meter made in this "
        "process",
        owner_pid_, ::getpid()));
}

void Meter::thread_main() {
  const double w0 = clock_.mono_s();
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    cv_->wait_for(lk, std::chrono::duration<double>(period_s_), [this] { return stop_; });
    if (stop_) break;
    tick_locked(false);
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    thread_cpu_s_ = static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    thread_wall_s_ = clock_.mono_s() - w0;
  }
}

double Meter::sampler_overhead() const {
  const double w = thread_wall_s_.load();
  return w > 0 ? thread_cpu_s_.load() / w : 0;
}

double Meter::carbon_time(double mono_s, double unix_s) const {
  if (opt_.carbon_replay_start_unix_s)
    return *opt_.carbon_replay_start_unix_s + (mono_s - start_mono_s_);
  return unix_s;
}

void Meter::tick_locked(bool boundary) {
  double t = clock_.mono_s();
  if (batch_) {
    const auto bt = batch_->refresh(boundary);
    // The readings' own time, so that a window's seconds span the same readings as its joules
    // (never before the last tick: a sample handed out twice makes a 0 s interval).
    if (bt && own_clock_) t = primed_ ? std::max(*bt, last_t_) : *bt;
  }
  const double unix_now = clock_.unix_s();
  const double dt = primed_ ? t - last_t_ : 0;
  std::vector<std::optional<Interval>> ivs(slots_.size());
  double tick_j = 0, tick_w = 0;
  bool peak_ok = primed_ && dt > 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (!s.active) continue;
    ivs[i] = s.acc->add(t, s.sensor->read(t));
    add_timeline_point(s, ivs[i], t, unix_now);
    if (!ivs[i]) continue;
    tick_j += ivs[i]->energy_j;
    if (ivs[i]->power_w) tick_w += *ivs[i]->power_w;
    if (dt < s.info.refresh_period_s) peak_ok = false;
  }
  if (primed_ && !windows_.empty()) {
    const double carbon_t1 = carbon_time(t, unix_now);
    const double g = opt_.carbon.energy_g(carbon_t1 - dt, carbon_t1, tick_j);
    std::vector<double> slot_g(slots_.size(), 0.0);  // carbon per domain, same integral
    for (size_t i = 0; i < slots_.size(); ++i)
      if (ivs[i]) slot_g[i] = opt_.carbon.energy_g(carbon_t1 - dt, carbon_t1, ivs[i]->energy_j);
    for (auto& [name, w] : windows_) {
      w.g += g;
      if (peak_ok) w.peak_w = std::max(w.peak_w, tick_w);
      for (size_t i = 0; i < slots_.size(); ++i) {
        if (!ivs[i]) continue;
        const Interval& iv = *ivs[i];
        DomainAcc& a = w.acc[i];
        a.energy_j += iv.energy_j;
        a.g += slot_g[i];
        if (iv.wrapped) ++a.wraps;
        if (iv.power_w && iv.t1_s - iv.t0_s >= slots_[i].info.refresh_period_s && iv.t1_s > iv.t0_s)
          a.peak_w = std::max(a.peak_w, *iv.power_w);
        if (!iv.trusted) {
          a.untrusted_s += iv.t1_s - iv.t0_s;
          if (iv.unknown) a.incomplete = true;
          if (iv.gone && a.gone.empty()) a.gone = iv.note;
          if (std::find(a.notes.begin(), a.notes.end(), iv.note) == a.notes.end())
            a.notes.push_back(iv.note);
        }
      }
    }
  }
  last_t_ = t;
  primed_ = true;
}

void Meter::add_timeline_point(Slot& s, const std::optional<Interval>& iv, double t,
                               double unix_now) {
  if (opt_.timeline_points == 0) return;
  if (!iv || !iv->trusted) {  // a hole: the span so far is dropped, the next one starts here
    s.pend_open = true;
    s.pend_j = 0;
    s.pend_t0 = t;
    s.pend_unix0 = unix_now;
    return;
  }
  if (!s.pend_open) {
    s.pend_open = true;
    s.pend_j = 0;
    s.pend_t0 = iv->t0_s;
    s.pend_unix0 = unix_now - (t - iv->t0_s);
  }
  s.pend_j += iv->energy_j;
  const double span = t - s.pend_t0;
  if (span <= 0 || span < s.info.refresh_period_s) return;
  const PowerPoint p{s.pend_unix0, unix_now, s.pend_j / span};
  if (s.timeline.size() < opt_.timeline_points) {
    s.timeline.push_back(p);
  } else {
    s.timeline[s.timeline_next] = p;
    s.timeline_next = (s.timeline_next + 1) % s.timeline.size();
  }
  s.pend_j = 0;
  s.pend_t0 = t;
  s.pend_unix0 = unix_now;
}

std::vector<PowerPoint> Meter::ring_in_order(const Slot& s) {
  std::vector<PowerPoint> out(s.timeline.begin() + static_cast<std::ptrdiff_t>(s.timeline_next),
                              s.timeline.end());
  out.insert(out.end(), s.timeline.begin(),
             s.timeline.begin() + static_cast<std::ptrdiff_t>(s.timeline_next));
  return out;
}

std::vector<PowerPoint> Meter::power_timeline(const std::string& sensor, double t0_unix_s,
                                              double t1_unix_s) const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<PowerPoint> out;
  for (const Slot& s : slots_) {
    if (s.info.name != sensor) continue;
    for (const PowerPoint& p : ring_in_order(s))
      if (p.t1_unix_s > t0_unix_s && p.t1_unix_s <= t1_unix_s) out.push_back(p);
  }
  return out;
}

std::map<std::string, PowerPoint> Meter::power_now() const {
  std::lock_guard<std::mutex> g(mu_);
  std::map<std::string, PowerPoint> out;
  for (const Slot& s : slots_) {
    if (s.timeline.empty()) continue;
    const std::size_t newest = (s.timeline_next + s.timeline.size() - 1) % s.timeline.size();
    out[s.info.name] = s.timeline[newest];
  }
  return out;
}

void Meter::sample_now() {
  check_owner();
  std::lock_guard<std::mutex> g(mu_);
  tick_locked(true);
}

void Meter::begin_window(const std::string& name) {
  check_owner();
  std::lock_guard<std::mutex> g(mu_);
  if (windows_.count(name))
    throw Error(fmt::format("energy window '{}' is already open; expected end_window first", name));
  tick_locked(true);
  Window w;
  w.t0_s = last_t_;
  w.unix0_s = clock_.unix_s();
  w.carbon_t0_s = carbon_time(w.t0_s, w.unix0_s);
  w.acc.resize(slots_.size());
  windows_.emplace(name, std::move(w));
}

bool Meter::has_window(const std::string& name) const {
  std::lock_guard<std::mutex> g(mu_);
  return windows_.count(name) > 0;
}

double Meter::window_elapsed_s(const std::string& name) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = windows_.find(name);
  if (it == windows_.end()) throw Error("no window named '" + name + "' is open");
  return clock_.mono_s() - it->second.t0_s;
}

DomainMeasurement Meter::domain_measurement(const Slot& s, const DomainAcc& a,
                                            double duration_s) const {
  DomainMeasurement d;
  d.sensor = s.info.name;
  d.domain = s.info.domain;
  d.index = s.info.index;
  d.g_co2e = a.g;
  d.method = s.info.kind == SensorKind::kEnergyCounter ? Method::kCounter
             : s.info.kind == SensorKind::kPowerGauge  ? Method::kIntegrated
                                                       : Method::kEstimate;
  d.estimated = d.method == Method::kEstimate;
  d.energy_j = a.energy_j;
  d.peak_power_w = a.peak_w;
  d.wraps = a.wraps;
  d.untrusted_s = a.untrusted_s;
  d.incomplete = a.incomplete;
  if (duration_s > 0 && duration_s >= s.info.refresh_period_s)
    d.avg_power_w = a.energy_j / duration_s;
  else if (duration_s <= 0)
    d.flags.push_back("zero-length window: power undefined");
  else
    d.flags.push_back(fmt::format(
        "window {:.4f} s is shorter than the sensor's refresh period (resolution) {:g} s: "
        "power undefined, energy uncertain",
        duration_s, s.info.refresh_period_s));
  if (!d.avg_power_w)
    d.peak_power_w.reset();
  else if (*d.peak_power_w < *d.avg_power_w)
    d.peak_power_w = *d.avg_power_w;
  // A counted domain that reads nothing over a whole window is more likely a sensor that does
  // not count (an idle estimate that could not resolve the window, a counter the firmware does
  // not update) than a device drawing no power: say so wherever the figure goes.
  if (duration_s > 0 && !(a.energy_j > 0))
    d.flags.push_back(fmt::format(
        "read 0 J (0 W) over the whole {:.4f} s window: the sensor may not be counting, or the "
        "window is below its resolution",
        duration_s));
  if (a.wraps) d.flags.push_back(fmt::format("counter wrapped {} time(s), corrected", a.wraps));
  if (a.untrusted_s > 0 || a.incomplete) {
    std::string n;
    for (auto& x : a.notes) n += (n.empty() ? "" : "; ") + x;
    d.flags.push_back(fmt::format(
        "untrusted: {:.3f} s {} ({})", a.untrusted_s,
        a.incomplete ? "not measured (no trusted power to fill with; energy is a lower bound)"
                     : "filled with the last trusted power",
        n));
  }
  return d;
}

Measurement Meter::end_window(const std::string& name) {
  check_owner();
  std::lock_guard<std::mutex> g(mu_);
  auto it = windows_.find(name);
  if (it == windows_.end())
    throw Error(fmt::format("energy window '{}' is not open; expected begin_window('{}') first",
                            name, name));
  tick_locked(true);
  Window w = std::move(it->second);
  windows_.erase(it);

  Measurement m;
  m.name = name;
  m.start_unix_s = w.unix0_s;
  m.duration_s = last_t_ - w.t0_s;
  m.peak_power_w = w.peak_w;
  m.g_co2e = w.g;
  m.carbon_source = opt_.carbon.describe();
  m.carbon_origin = to_string(opt_.carbon.origin());
  m.carbon_country_iso_code = opt_.carbon.country_iso_code();
  m.carbon_country_name = opt_.carbon.country_name();
  for (auto& f : opt_.carbon.span_flags(w.carbon_t0_s, carbon_time(last_t_, clock_.unix_s())))
    m.flags.push_back(f);
  for (auto& f : meter_flags_) m.flags.push_back(f);
  double max_refresh = 0;
  std::vector<std::string> methods;
  std::string gone;  // what a counted sensor measures ended inside the window
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.not_reader) m.flags.push_back(s.info.name + ": " + s.info.reason);
    if (!s.active) continue;
    DomainMeasurement d = domain_measurement(s, w.acc[i], m.duration_s);
    if (gone.empty() && !w.acc[i].gone.empty()) gone = s.info.name + ": " + w.acc[i].gone;
    for (auto& f : d.flags) m.flags.push_back(d.sensor + ": " + f);
    m.energy_j += d.energy_j;
    m.estimated = m.estimated || d.estimated;
    max_refresh = std::max(max_refresh, s.info.refresh_period_s);
    methods.push_back(s.info.name + ": " + s.info.method);
    m.domains.push_back(std::move(d));
  }
  if ((!missing_.empty() || !gone.empty()) && !m.domains.empty()) {
    // unknown, never a partial sum presented as the whole (the domains read are in the flags)
    std::string read, miss;
    for (auto& d : m.domains) read += (read.empty() ? "" : ", ") + d.sensor;
    for (auto& n : missing_) miss += (miss.empty() ? "" : ", ") + n;
    m.energy_unknown_reason =
        !missing_.empty()
            ? fmt::format(
                  "{} cannot be read by this process (another process is the reader) "
                  "and nothing else measures its domain: the {:.6g} J of {} is not the "
                  "whole",
                  miss, m.energy_j, read)
            : fmt::format(
                  "{}, before or during the window: its energy from the last reading "
                  "to its end is not known; the {:.6g} J of {} is a lower bound",
                  gone, m.energy_j, read);
    m.flags.push_back("energy unknown: " + m.energy_unknown_reason);
    m.domains.clear();
    m.energy_j = 0;
    m.g_co2e = 0;
    m.estimated = false;
    methods.clear();
  } else if (m.domains.empty()) {
    std::string why;
    for (const Slot& s : slots_)
      if (!s.active && !s.info.reason.empty())
        why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", s.info.name, s.info.reason);
    m.energy_unknown_reason = why.empty() ? "no energy sensor on this machine"
                                          : "no sensor could be read by this process (" + why + ")";
    m.flags.push_back("no sensor counted: energy is unknown, not 0");
  }
  if (m.duration_s > 0 && m.duration_s >= max_refresh && !m.domains.empty())
    m.avg_power_w = m.energy_j / m.duration_s;
  if (!m.avg_power_w)
    m.peak_power_w.reset();
  else if (*m.peak_power_w < *m.avg_power_w)
    m.peak_power_w = *m.avg_power_w;
  for (auto& x : methods) m.method += (m.method.empty() ? "" : "; ") + x;
  if (auto c = opt_.carbon.constant_g_per_kwh())
    m.carbon_g_per_kwh = *c;
  else if (m.energy_j > 0)
    m.carbon_g_per_kwh = m.g_co2e / (m.energy_j / 3.6e6);
  return m;
}

std::vector<SensorInfo> Meter::sensors() const {
  std::vector<SensorInfo> out;
  for (auto& s : slots_) out.push_back(s.info);
  return out;
}

bool Meter::estimated() const {
  for (auto& s : slots_)
    if (s.active && s.info.kind == SensorKind::kEstimate) return true;
  return false;
}

std::vector<std::string> Meter::not_reader() const {
  std::vector<std::string> out;
  for (auto& s : slots_)
    if (s.not_reader) out.push_back(s.info.name);
  return out;
}

}  // namespace gt::energy
