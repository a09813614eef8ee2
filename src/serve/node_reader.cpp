// serve/node_reader.cpp: see node_reader.h.
#include "serve/node_reader.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "serve/clocks.h"

namespace gt::serve {

namespace ed = energy::daemon;

namespace {

// NVML keeps a per-process sample about every 1/6 s: asking more often gives nothing new.
constexpr double kUtilPeriodS = 0.15;

std::string make_instance() {
  std::random_device rd;
  return fmt::format("{}-{:08x}{:08x}", ::getpid(), rd(), rd());
}

}  // namespace

NodeReader::NodeReader(energy::SensorList sensors, double interval_s,
                       energy::CarbonIntensity carbon, std::unique_ptr<UtilizationSource> util,
                       const std::string& lock_role)
    : interval_s_(interval_s),
      carbon_(std::move(carbon)),
      util_(std::move(util)),
      instance_(make_instance()) {
  const std::string dir = energy::lock_dir();
  for (auto& s : sensors) {
    Slot slot;
    energy::SensorInfo info = s->info();
    slot.sensor = std::move(s);
    slot.active = info.available && info.counted;
    slot.gpu = info.domain == "gpu";
    if (slot.active && !info.device_key.empty()) {
      std::string holder;
      slot.lock = energy::DeviceLock::try_acquire(dir, info.device_key, &holder, lock_role);
      if (!slot.lock)  // it reads anyway: it is the node's reader; the other goes on as it was
        notes_.push_back(fmt::format("{}: {}; the daemon reads it too", info.name, holder));
    }
    if (slot.active) slot.acc = std::make_unique<energy::Accumulator>(info.kind, info.wrap_j);
    slot.cum.sensor = info.name;
    if (!slot.active) {
      slot.cum.ok = false;
      slot.cum.error = info.reason.empty() ? "not read" : info.reason;
    }
    infos_.push_back(info);
    slots_.push_back(std::move(slot));
  }
  take_sample_locked_out();  // the first sample primes the accumulators
}

NodeReader::~NodeReader() { stop(); }

void NodeReader::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NodeReader::set_sample_page(energy::SamplePageWriter* page) {
  page_ = page;
  if (page_) page_->publish(latest()->json, latest()->sample.t_mono_s);
}

void NodeReader::start(std::function<void()> on_sample) {
  on_sample_ = std::move(on_sample);
  thread_ = std::thread([this] { thread_main(); });
}

void NodeReader::sample_now() { take_sample_locked_out(); }

std::shared_ptr<const Published> NodeReader::latest() const {
  std::lock_guard<std::mutex> g(mu_);
  return latest_;
}

std::uint64_t NodeReader::samples() const {
  std::lock_guard<std::mutex> g(mu_);
  return latest_ ? latest_->sample.seq : 0;
}

std::uint64_t NodeReader::request_fresh() {
  std::uint64_t need;
  {
    std::lock_guard<std::mutex> g(mu_);
    need = started_ + 1;  // the next sample to begin begins after this call
    fresh_wanted_ = true;
  }
  cv_.notify_all();
  return need;
}

void NodeReader::thread_main() {
  double next = mono_now() + interval_s_;
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    cv_.wait_for(lk, std::chrono::duration<double>(std::max(0.0, next - mono_now())),
                 [this, next] { return stop_ || fresh_wanted_ || mono_now() >= next; });
    if (stop_) break;
    lk.unlock();
    take_sample_locked_out();
    if (on_sample_) on_sample_();
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    thread_cpu_s_ = static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    const double now = mono_now();
    while (next <= now) next += interval_s_;
    lk.lock();
  }
}

void NodeReader::take_sample_locked_out() {
  std::uint64_t seq;
  {
    std::lock_guard<std::mutex> g(mu_);
    seq = ++started_;
    fresh_wanted_ = false;
  }
  auto pub = std::make_shared<Published>();
  ed::Sample& s = pub->sample;
  s.seq = seq;
  s.t_mono_s = mono_now();
  s.t_unix_s = unix_now();
  s.instance = instance_;
  for (auto& slot : slots_) {
    if (slot.active) {
      const energy::Reading r = slot.sensor->read(s.t_mono_s);
      const auto iv = slot.acc->add(s.t_mono_s, r);
      ed::SensorReading& c = slot.cum;
      c.ok = r.ok;
      c.error = r.ok ? "" : r.error;
      if (!r.ok && !c.failing_since_unix_s) c.failing_since_unix_s = s.t_unix_s;
      if (r.ok) c.failing_since_unix_s.reset();
      if (iv) {
        c.energy_j += iv->energy_j;
        c.power_w = iv->power_w;
        const double dt = iv->t1_s - iv->t0_s;
        if (!iv->trusted) {
          c.untrusted_s += dt;
          c.note = iv->note;
        }
        if (iv->unknown) c.unknown_s += dt;
        if (slot.gpu) {
          if (s.t_mono_s - slot.util_t >= std::min(interval_s_, kUtilPeriodS)) {
            slot.util_t = s.t_mono_s;
            slot.util.clear();
            slot.util_error = util_ ? "" : "NVML's per-process utilization is not available";
            if (util_) {
              if (auto u = util_->sample(c.sensor, &slot.util_error)) slot.util = std::move(*u);
            }
          }
          attribution_.add(c.sensor, iv->energy_j, slot.util, slot.util_error, s.t_unix_s);
        }
      }
    }
    s.readings.push_back(slot.cum);
  }
  s.carbon_g_per_kwh = carbon_.at(s.t_unix_s);
  pub->json = ed::sample_to_json(s).dump();
  if (page_) page_->publish(pub->json, s.t_mono_s);
  std::lock_guard<std::mutex> g(mu_);
  if (!latest_ || latest_->sample.seq < seq) latest_ = std::move(pub);
}

}  // namespace gt::serve
