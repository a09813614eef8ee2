// energy/meter.h: the energy module's front door. A Meter finds the sensors of this machine
// (NVML, ROCm SMI, RAPL, else a CPU/memory estimate), samples them in a background thread, and
// measures named windows, Zeus-style:
//
//   auto meter = gt::energy::Meter::create({});           // detect sensors, start sampling
//   meter->begin_window("step");
//   ...work...
//   gt::energy::Measurement m = meter->end_window("step"); // s, J per domain, avg/peak W, gCO2e
//
// Windows nest and overlap freely; each has its own start. Every number says how it was made
// (counter, integrated samples, estimate) and odd cases are flagged in Measurement::flags, never
// hidden: a counter that went backwards, a failed reading, a window shorter than a sensor's
// refresh period (then avg_power_w is empty, never a division by zero), a device read by another
// process (one reader per device per node, node_lock.h). When the node daemon runs (`greentrain
// serve`, daemon_client.h), the meter reads through it and no process is left without figures.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "energy/accumulator.h"
#include "energy/carbon.h"
#include "energy/node_lock.h"
#include "energy/sensor.h"

namespace gt::energy {

/// How a Meter is set up. Defaults measure the whole machine at 10 Hz.
struct MeterOptions {
  double interval_s = 0.1;  ///< background sampling period (s) in [0.001, 3600]; 0: no thread,
                            ///< samples are taken only at window boundaries and by sample_now()
  CarbonIntensity carbon;   ///< gCO2e/kWh, constant or series (default: world average 475,
                            ///< CarbonOrigin::kDefault; a constant 0 is 0, not the default)
  /// With a series: the meter's start is taken to be this time (unix s) in the series, to replay
  /// a measurement against historical data; empty: the wall clock.
  std::optional<double> carbon_replay_start_unix_s;
  std::optional<double> cpu_tdp_w;  ///< per-socket TDP (W) for the CPU estimate, in [1, 2000];
                                    ///< unset: the CPU model's table
  double ram_w_per_gb = 0.375;      ///< W/GiB for the memory estimate (CodeCarbon)
  /// CPU/memory estimate of this process tree (0: the whole machine). With a pid, RAPL (package,
  /// DRAM, psys) is listed as machine-wide and neither counted nor locked: the tree's CPU and
  /// memory are its estimates; GPUs are still read whole. create() refuses a pid that is not a
  /// running process; a window during which the tree's root ends has unknown energy.
  int pid = 0;
  /// With pid: the process the tree's orphans are reparented to, a child subreaper (measure
  /// makes itself one); its other children and its reaped children's time count as the tree's
  /// (CpuEstimateOptions::adopter_pid). 0: none.
  int adopter_pid = 0;
  /// How this front end asks for a process tree's estimate (pid), for the advice a sensor that
  /// another process reads gives: "--process" (measure), "Meter(pid=os.getpid())" (Python);
  /// empty: none is offered (train measures the whole machine).
  std::string pid_hint = "--process";
  /// A rank of a multi-rank training run that is not its node's local rank 0: that rank
  /// counts the node-wide devices (RAPL, the machine-wide estimates) for the job, and this one
  /// leaves them out without taking their locks (listed, not counted, not missing: the window
  /// stays known), so that the job's sum over its ranks counts them once (EnergyHook::add_nodes;
  /// each rank reads its own GPU). Local rank 0 meters as any process does: where another
  /// process (another job) holds a device's lock, its usual rules apply.
  bool node_devices_elsewhere = false;
  /// The same where the launcher gives no local rank (dist::local_rank_if_set: none of
  /// OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID): the first rank to take a
  /// device's lock counts it, and where another process holds it, nothing is counted in its
  /// stead and the window stays known (another job's holding cannot be told from a rank's).
  /// Through the node daemon, which holds the devices' locks, the lock is each device's share
  /// lock (daemon::node_share_key).
  bool node_devices_shared = false;
  bool use_nvml = true, use_rocm_smi = true, use_rapl = true, use_estimate = true;
  /// GPUs to read, as positions among the visible GPUs of each vendor (0-based, CUDA's
  /// numbering after CUDA_VISIBLE_DEVICES); empty optional: all of them. create() throws
  /// Error naming a position that is not a visible GPU.
  std::optional<std::vector<int>> gpus;
  /// What create() does when `gpus` names GPUs and one of them cannot be read (no NVML or ROCm
  /// SMI library, no driver, a device whose counters fail): true: throws Error saying
  /// why (as Zeus raises); false: measures the rest, and every Measurement carries a flag
  /// naming the GPUs left out and why (their energy is missing from the totals, never
  /// silently).
  bool gpus_strict = true;
  /// Points kept per sensor in the power timeline (power_timeline()): 36,000 is one hour at
  /// the default 10 Hz (16 bytes each); older points are dropped. 0: no timeline.
  std::size_t timeline_points = 36000;
  std::string powercap_root;  ///< empty: $GT_POWERCAP_ROOT or /sys/class/powercap
  std::string lock_dir;       ///< empty: $GT_ENERGY_LOCK_DIR or /tmp/greentrain-energy-locks
  double max_plausible_power_w = 1e4;  ///< per domain; above it a wrap is taken for a reset
                                       ///< (and it bounds the sampling period: sampling_period_s)
  /// Read through the node daemon (`greentrain serve`) when one answers at daemon_socket; false:
  /// always read the sensors directly.
  bool use_daemon = true;
  std::string daemon_socket;  ///< empty: $GT_DAEMON_SOCKET or /run/greentrain/serve.sock
};

/// Why a machine-wide counter (RAPL) is not counted when MeterOptions::pid names a process tree.
extern const char* const kMachineWideReason;

/// The GPU sensors of one vendor, in the order this process sees them (a sensor's position is
/// its SensorInfo::index), or the vendor's one placeholder saying why it has none (an
/// unavailable sensor named without ':', e.g. "nvml", "rocm-smi").
struct VendorGpus {
  const char* vendor = "";  ///< "NVIDIA", "AMD": named in errors and flags
  SensorList sensors;
};

/// The GPU sensors a meter keeps of `vendors`, as opt.gpus chooses them: every one when it is
/// empty; otherwise, of each vendor that has GPUs, those at its positions, in its order
/// (placeholders are kept as they are). Throws Error naming a position that is not a visible GPU
/// of such a vendor (or is listed twice). A GPU asked for that cannot be read, or no vendor with
/// a GPU at all, throws Error with opt.gpus_strict; otherwise *flags gets a flag naming them and
/// why (their energy is not in the figures). Used for the sensors read directly
/// (detect_sensors) and for those read through the node daemon (daemon_client.h) alike.
SensorList choose_gpus(std::vector<VendorGpus> vendors, const MeterOptions& opt,
                       std::vector<std::string>* flags);

/// The sensors of this machine a Meter reads directly, as `opt` selects them (NVML, ROCm SMI,
/// RAPL, and the CPU/memory estimate for domains no counter covers; an estimate of a covered
/// domain is kept in reserve, SensorInfo::standby). Throws Error for a
/// GPU position that is not visible (or, with opt.gpus_strict, cannot be read); *flags gets the
/// meter-wide flags otherwise (GPUs asked for and not measured). Used by Meter::create and by
/// the daemon (src/serve).
SensorList detect_sensors(const MeterOptions& opt, std::vector<std::string>* flags = nullptr);

/// The energy of one sensor (one domain) over a window.
struct DomainMeasurement {
  std::string sensor;  ///< SensorInfo::name, e.g. "rapl:package-0"
  std::string domain;  ///< "cpu", "gpu", "ram" or "psys"
  int index = 0;       ///< SensorInfo::index: GPU position, RAPL package, 0 machine-wide
  Method method = Method::kCounter;
  bool estimated = false;  ///< method == kEstimate
  double energy_j = 0;     ///< >= 0 (J); includes filled intervals (see flags)
  double g_co2e = 0;       ///< this domain's carbon (gCO2e), its energy integrated per interval
  std::optional<double> avg_power_w;  ///< energy_j / duration_s; empty if shorter than refresh
  /// highest interval power (W), intervals >= refresh; empty where avg_power_w is, and where
  /// unknown (a job's sum over its nodes: peaks at different times do not add)
  std::optional<double> peak_power_w;
  int wraps = 0;                   ///< counter wraps corrected inside the window
  double untrusted_s = 0;          ///< seconds whose energy is a fill, not a reading
  bool incomplete = false;         ///< some seconds had no trusted power at all (not in J)
  std::vector<std::string> flags;  ///< human-readable, one per odd case
};

/// One measured window. Energies in J, powers in W, carbon in gCO2e.
struct Measurement {
  std::string name;
  double start_unix_s = 0;            ///< wall clock at begin_window (s since 1970 UTC)
  double duration_s = 0;              ///< meter clock (monotonic) seconds
  double energy_j = 0;                ///< total over counted domains (J)
  std::optional<double> avg_power_w;  ///< energy_j / duration_s; empty when undefined
  /// highest total power over sampling intervals (W); empty where avg_power_w is, and where
  /// unknown (a job's sum over its nodes)
  std::optional<double> peak_power_w;
  double g_co2e = 0;                       ///< carbon (gCO2e), integrated per interval
  bool estimated = false;                  ///< any counted figure is an estimate
  std::vector<DomainMeasurement> domains;  ///< counted sensors only
  std::string method;                      ///< e.g. "cpu-estimate: estimated: TDP 85 W x ..."
  std::string carbon_source;               ///< CarbonIntensity::describe(): value and origin
  std::string carbon_origin;  ///< to_string(CarbonOrigin): default|constant|csv|country
  /// The country of the intensity (CarbonIntensity::country_iso_code / country_name), for
  /// CodeCarbon's country_iso_code and country_name columns; empty when none was named.
  std::string carbon_country_iso_code, carbon_country_name;
  /// The intensity used, gCO2e/kWh: the constant, or for a series g_co2e over the window's
  /// energy (energy-weighted mean); empty for a series window with no energy.
  std::optional<double> carbon_g_per_kwh;
  std::vector<std::string> flags;  ///< window-level and per-domain flags, prefixed by sensor
  /// Why the energy is unknown (no sensor counted); empty when it is known.
  std::string energy_unknown_reason;
  /// energy_j when at least one sensor counted; empty (unknown, never 0) when none did.
  std::optional<double> known_energy_j() const {
    return domains.empty() ? std::nullopt : std::optional<double>(energy_j);
  }
  /// g_co2e when the energy is known; empty otherwise (gCO2e).
  std::optional<double> known_g_co2e() const {
    return domains.empty() ? std::nullopt : std::optional<double>(g_co2e);
  }
  /// Sum of energy_j of the counted domains named `domain` ("cpu", "gpu", "ram", "psys").
  double energy_j_of(const std::string& domain) const;
  /// Average power (W) of one domain kind over the window; 0 if duration is 0.
  double power_w_of(const std::string& domain) const;
  /// Sum of g_co2e of the counted domains named `domain` (gCO2e).
  double g_co2e_of(const std::string& domain) const;
};

/// One point of a sensor's power timeline: its average power over [t0_unix_s, t1_unix_s],
/// a span at least as long as the sensor's refresh period (shorter sampling intervals are
/// merged until it is), so that a counter's steps do not show as spikes.
struct PowerPoint {
  double t0_unix_s = 0;  ///< start of the span (s since 1970 UTC)
  double t1_unix_s = 0;  ///< end of the span, the time the point is shown at
  double power_w = 0;    ///< energy over the span / its length (W)
};

/// The words of the meter-wide flag of GPUs asked for by position that cannot be read
/// (gpus_strict = false): "gpus [0] asked for but not measured: <why>; ...". Every Measurement
/// of such a meter carries it; emissions.csv leaves its GPU columns empty (unknown) then.
inline constexpr char kGpusNotMeasured[] = "asked for but not measured";

/// The sampling interval's range: 0 (no thread) or [kMinIntervalS, kMaxIntervalS] s.
inline constexpr double kMinIntervalS = 0.001, kMaxIntervalS = 3600;
/// Throws Error "<what> <s> s: expected 0 (no sampling thread) or a period in
/// [0.001, 3600] s" unless `interval_s` is in that range (NaN and infinities are not).
void check_interval_s(double interval_s, const std::string& what);

/// Clocks, injectable for tests: monotonic seconds and unix seconds.
struct MeterClock {
  std::function<double()> mono_s;
  std::function<double()> unix_s;
};

class Meter {
 public:
  /// Reads through the node daemon when one answers (opt.use_daemon); otherwise detects the
  /// sensors of this machine (detect_sensors) and takes the per-device locks. Starts the
  /// sampling thread. Throws Error for a cpu_tdp_w out of [1, 2000] W (check_cpu_tdp_w) or a
  /// pid that is not a running process (check_process_pid); front ends check their own
  /// argument first, to name it.
  static std::unique_ptr<Meter> create(const MeterOptions& opt);
  /// A meter over given sensors (tests, replay, custom setups). Takes the locks of sensors with
  /// a device_key (shared with the other meters of this process) and starts sampling
  /// (opt.interval_s > 0); then counts each estimate in reserve (SensorInfo::standby) whose
  /// domain no counter it can read measures. A counter another process reads, with nothing in
  /// its stead, makes every window's energy unknown (the reason names it), never a partial sum.
  /// `meter_flags` go into every Measurement. `batch`: the sensors' common
  /// source (refreshed once a tick), if any.
  Meter(SensorList sensors, const MeterOptions& opt, MeterClock clock = {},
        std::vector<std::string> meter_flags = {}, std::shared_ptr<SensorBatch> batch = nullptr);
  /// Stops the sampling thread and releases the locks. In a forked child (another pid than the
  /// one that made it) it does neither: they belong to the parent, which goes on measuring.
  ~Meter();
  Meter(const Meter&) = delete;
  Meter& operator=(const Meter&) = delete;

  /// Starts window `name` now. Throws Error if a window of that name is open.
  void begin_window(const std::string& name);
  /// Ends window `name` and returns its measurement. Throws Error if none is open.
  Measurement end_window(const std::string& name);
  bool has_window(const std::string& name) const;
  /// Seconds since window `name` began, on the meter's clock. Throws Error if none is
  /// open.
  double window_elapsed_s(const std::string& name) const;
  /// Reads every sensor now (also done by the thread every interval_s).
  void sample_now();

  /// Every sensor looked for: available or not (with reason), counted or not, and the ones
  /// whose device another process reads (available=false, reason says who).
  std::vector<SensorInfo> sensors() const;
  /// true when any counted figure is an estimate.
  bool estimated() const;
  /// Names of sensors this meter does not read because another process is their reader.
  std::vector<std::string> not_reader() const;
  /// The socket of a node daemon that reads devices this meter then could not, because the
  /// meter looked for a daemon elsewhere (GT_DAEMON_SOCKET unset or another path); "" if none.
  const std::string& daemon_elsewhere() const { return daemon_elsewhere_; }
  /// The power timeline of sensor `sensor` (SensorInfo::name): the points whose span ends in
  /// (t0_unix_s, t1_unix_s], oldest first, at most MeterOptions::timeline_points of them
  /// (the newest). Spans with an untrusted reading are left out (a hole in the timeline).
  /// Empty for a sensor this meter does not count. Zeus's PowerMonitor.get_power_timeline.
  std::vector<PowerPoint> power_timeline(const std::string& sensor, double t0_unix_s,
                                         double t1_unix_s) const;
  /// The newest point of each counted sensor's timeline (its power now, W, as of the last
  /// sample); a sensor with no point yet is absent. Zeus's PowerMonitor.get_power.
  std::map<std::string, PowerPoint> power_now() const;
  /// Flags this meter puts into every Measurement (e.g. GPUs asked for that cannot be read,
  /// with gpus_strict = false).
  const std::vector<std::string>& meter_flags() const { return meter_flags_; }
  /// Sampling-thread CPU time over wall time since it started (fraction of one core; 0.001 =
  /// 0.1 %). 0 when there is no thread.
  double sampler_overhead() const;
  double interval_s() const { return opt_.interval_s; }
  /// The sampling thread's period (s): interval_s, or shorter where a counted energy counter
  /// wraps (RAPL: 2^32 energy units, 65.5 kJ on AMD Zen, 262 kJ on many Intel parts): at most
  /// half its range at max_plausible_power_w, so that every wrap is seen between two readings
  /// and a counter that went backwards by a little is never taken for one. 0: no thread.
  double sampling_period_s() const { return period_s_; }
  /// Where the readings come from: "direct" or e.g. "greentrain serve (pid 12) at
  /// /run/greentrain/serve.sock".
  const std::string& reading_source() const { return source_; }
  const CarbonIntensity& carbon() const { return opt_.carbon; }

 private:
  struct DomainAcc {
    double energy_j = 0, peak_w = 0, untrusted_s = 0, g = 0;
    int wraps = 0;
    bool incomplete = false;
    std::string gone;  // why what the sensor measures ended inside the window (Interval::gone)
    std::vector<std::string> notes;
  };
  struct Window {
    double t0_s = 0, unix0_s = 0, peak_w = 0, g = 0;
    double carbon_t0_s = 0;      // the window's start on the carbon series' clock (unix s)
    std::vector<DomainAcc> acc;  // per slot
  };
  struct Slot {
    std::unique_ptr<Sensor> sensor;
    SensorInfo info;
    std::unique_ptr<Accumulator> acc;
    std::shared_ptr<DeviceLock> lock;
    bool active = false;  // available, counted and we are its reader
    bool not_reader = false;
    std::vector<PowerPoint> timeline;  // ring of opt_.timeline_points points
    std::size_t timeline_next = 0;     // where the next point goes once the ring is full
    double pend_j = 0, pend_t0 = 0, pend_unix0 = 0;  // the span not yet a point
    bool pend_open = false;
  };
  void add_timeline_point(Slot& s, const std::optional<Interval>& iv, double t, double unix_now);
  /// One counted sensor's figures over a window of duration_s seconds, its flags included.
  DomainMeasurement domain_measurement(const Slot& s, const DomainAcc& a, double duration_s) const;
  void tick_locked(bool boundary);
  static std::vector<PowerPoint> ring_in_order(const Slot& s);
  void check_owner() const;  ///< Error in a forked child (see ~Meter)
  double carbon_time(double mono_s, double unix_s) const;
  void thread_main();

  MeterOptions opt_;
  MeterClock clock_;
  bool own_clock_ = false;  // the clock is CLOCK_MONOTONIC (not injected): batch times apply
  std::shared_ptr<SensorBatch> batch_;
  std::string source_ = "direct";
  std::string daemon_elsewhere_;  // daemon_elsewhere()
  std::vector<Slot> slots_;
  std::vector<std::string> meter_flags_;
  std::vector<std::string> missing_;  // counters another process reads, nothing in their stead
  std::map<std::string, Window> windows_;
  mutable std::mutex mu_;
  double last_t_ = 0, start_mono_s_ = 0, start_unix_s_ = 0;
  bool primed_ = false;
  std::unique_ptr<std::thread> thread_;
  double period_s_ = 0;  // sampling_period_s()
  int owner_pid_ = 0;    // the process that made the meter (fork-safe destructor)
  // on the heap: a forked child must not destroy it (pthread_cond_destroy waits for the
  // sampling thread that waited on it at the fork, which is not in the child)
  std::unique_ptr<std::condition_variable> cv_ = std::make_unique<std::condition_variable>();
  bool stop_ = false;
  std::atomic<double> thread_cpu_s_{0}, thread_wall_s_{0};
};

}  // namespace gt::energy
