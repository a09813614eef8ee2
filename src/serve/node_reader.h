// serve/node_reader.h: the daemon's one reading of the node's sensors. A sampling thread reads
// every sensor once per interval (and at once when a client asks for a fresh sample, several
// such asks answered by one sample), turns readings into joules by the energy module's
// accumulator rule (wraps, dips, failed reads filled and flagged), and publishes the cumulative
// energy of each sensor since the daemon started. Clients difference two such readings, so any
// number of windows are exact and nobody double counts. GPU energy is also attributed to the
// processes running on each GPU (attribution.h).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "energy/accumulator.h"
#include "energy/carbon.h"
#include "energy/daemon_protocol.h"
#include "energy/node_lock.h"
#include "energy/sample_page.h"
#include "energy/sensor.h"
#include "serve/attribution.h"

namespace gt::serve {

/// A published sample and its read response body, serialized once for every client.
struct Published {
  energy::daemon::Sample sample;
  std::string json;  ///< energy::daemon::sample_to_json(sample).dump()
};

class NodeReader {
 public:
  /// sensors: what the node has (energy::detect_sensors). interval_s > 0. `util`: per-process
  /// GPU utilization for the attribution (nullptr: none). `lock_role`: written into the device
  /// locks the reader takes (node_lock.h), so a direct reader knows the daemon holds them.
  NodeReader(energy::SensorList sensors, double interval_s, energy::CarbonIntensity carbon,
             std::unique_ptr<UtilizationSource> util = nullptr,
             const std::string& lock_role = "greentrain serve");
  ~NodeReader();  ///< stops the thread
  NodeReader(const NodeReader&) = delete;
  NodeReader& operator=(const NodeReader&) = delete;

  /// Publishes every sample into `page` too (energy/sample_page.h), before it becomes latest(),
  /// so that a client never finds the page older than a sample the socket gave it; the current
  /// one at once. Before start(); `page` outlives the reader's thread (stop()).
  void set_sample_page(energy::SamplePageWriter* page);
  /// Starts the sampling thread; `on_sample` is called from it after each sample is published.
  void start(std::function<void()> on_sample);
  /// Stops the sampling thread (idempotent; the destructor does it too).
  void stop();
  /// Takes a sample now in the calling thread (tests; only before start()).
  void sample_now();
  /// The latest sample (never null after construction: the first is taken there).
  std::shared_ptr<const Published> latest() const;
  /// Asks the thread for a sample begun after this call; returns the seq that sample will have.
  std::uint64_t request_fresh();

  /// What each sensor is (available or not, with reasons), as clients get it in hello.
  const std::vector<energy::SensorInfo>& sensors() const { return infos_; }
  const Attribution& attribution() const { return attribution_; }
  const energy::CarbonIntensity& carbon() const { return carbon_; }
  double interval_s() const { return interval_s_; }
  /// CPU seconds the sampling thread used, and the samples taken.
  double thread_cpu_s() const { return thread_cpu_s_.load(); }
  std::uint64_t samples() const;
  /// Notes for the log (locks held by others).
  const std::vector<std::string>& notes() const { return notes_; }
  /// The run's id (changes at every start of the daemon).
  const std::string& instance() const { return instance_; }

 private:
  struct Slot {
    std::unique_ptr<energy::Sensor> sensor;
    std::unique_ptr<energy::Accumulator> acc;
    std::shared_ptr<energy::DeviceLock> lock;
    energy::daemon::SensorReading cum;  // cumulative state, published
    bool active = false;
    bool gpu = false;
    // NVML's per-process utilization, asked at most every 0.15 s (NVML itself samples about
    // every 1/6 s); the fresh samples between reuse it.
    std::vector<ProcessUtil> util;
    std::string util_error;
    double util_t = -1e300;
  };
  void take_sample_locked_out();  // reads sensors (no lock held), publishes
  void thread_main();

  std::vector<Slot> slots_;
  std::vector<energy::SensorInfo> infos_;
  double interval_s_;
  energy::CarbonIntensity carbon_;
  std::unique_ptr<UtilizationSource> util_;
  Attribution attribution_;
  std::string instance_;
  std::vector<std::string> notes_;
  std::function<void()> on_sample_;
  energy::SamplePageWriter* page_ = nullptr;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<const Published> latest_;
  std::uint64_t started_ = 0;  // samples begun (the seq of the one in progress or last)
  bool fresh_wanted_ = false, stop_ = false;
  std::thread thread_;
  std::atomic<double> thread_cpu_s_{0};
};

}  // namespace gt::serve
