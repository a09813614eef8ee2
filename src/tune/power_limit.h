// tune/power_limit.h: devices whose power limit can be read and set (NVIDIA GPUs through NVML,
// CPU packages through Linux powercap RAPL, a simulated device for tests), and PowerLimitGuard,
// which applies a limit and restores the limit that was in force before on every exit path it
// can see: destructor (normal end, exception), std::exit (atexit), and SIGINT/SIGTERM (a
// handler that restores, then hands the signal on). Only the process that made the guard
// restores: a forked child (a multiprocessing or DataLoader worker, a plain os.fork) that exits
// or is killed leaves the limits its parent chose. SIGKILL cannot be caught: after `kill -9`
// the lowered limit stays until reset (`nvidia-smi -pl`, or writing the RAPL file) or reboot.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace gt::tune {

/// A device with a settable power limit, in W.
class PowerLimitDevice {
 public:
  virtual ~PowerLimitDevice() = default;
  /// e.g. "nvml:0 (NVIDIA H100, GPU-...)" or "rapl:intel-rapl:0 (package-0)".
  virtual std::string name() const = 0;
  virtual double limit_w() const = 0;      ///< the limit in force now, W
  virtual double min_limit_w() const = 0;  ///< lowest settable limit, W
  virtual double max_limit_w() const = 0;  ///< highest settable limit, W
  /// Sets the limit, W. Throws gt::Error naming the device and the value on failure.
  virtual void set_limit_w(double limit_w) = 0;
  /// Empty when this process may set the limit; else what is needed (e.g. "root"). Changes
  /// nothing.
  virtual std::string permission_problem() const = 0;
  /// Sets the limit using only async-signal-safe calls where the device allows; returns false
  /// on failure. Called from the SIGINT/SIGTERM handler. Default: set_limit_w, catching errors.
  virtual bool restore_limit_w_from_signal(double limit_w) noexcept;
};

using DevicePtr = std::shared_ptr<PowerLimitDevice>;

/// Saves the limits of its devices when made and restores them when destroyed, on std::exit,
/// or on SIGINT/SIGTERM (when handle_signals). Not copyable or movable.
class PowerLimitGuard {
 public:
  /// Refuses (throws gt::Error listing each device and what is needed) unless every device
  /// may be set; then records each device's current limit. Changes nothing.
  /// handle_signals: install SIGINT/SIGTERM handlers that restore the limits and then run the
  /// previous handler (or the default action: the process ends by that signal). Programs with
  /// their own graceful SIGTERM handling (the trainer) may pass false and rely on the destructor
  /// and atexit.
  explicit PowerLimitGuard(std::vector<DevicePtr> devices, bool handle_signals = true);
  ~PowerLimitGuard();  ///< restore()
  PowerLimitGuard(const PowerLimitGuard&) = delete;
  PowerLimitGuard& operator=(const PowerLimitGuard&) = delete;

  /// Sets every device to limit_w, W (must lie in each device's [min, max]; else gt::Error
  /// before any change). All or nothing: if one set fails, the devices already set are put
  /// back to their saved limits and gt::Error is thrown.
  void apply_w(double limit_w);
  /// Puts every device back to the limit saved at construction (idempotent); errors are
  /// printed to stderr, not thrown. Does nothing in a forked child (another pid than the one
  /// that made the guard): the limits are its parent's.
  void restore() noexcept;
  /// The process that made the guard (the only one that restores).
  int owner_pid() const { return owner_pid_; }
  /// The limits saved at construction, W (one per device).
  const std::vector<double>& saved_limits_w() const { return saved_w_; }
  const std::vector<DevicePtr>& devices() const { return devices_; }

 private:
  std::vector<DevicePtr> devices_;
  std::vector<double> saved_w_;
  bool handle_signals_;
  int owner_pid_ = 0;
};

/// Opens the devices of one kind through the node daemon (`greentrain serve`, daemon_device.h)
/// when one answers with such devices (and powercap_root is empty), else directly: "nvml" (GPUs
/// visible to this process, CUDA_VISIBLE_DEVICES honoured; library from $GT_NVML_LIBRARY or
/// libnvidia-ml.so.1), "rapl" (package zones under powercap_root, default $GT_POWERCAP_ROOT or
/// /sys/class/powercap), or "auto" (NVML GPUs if any, else RAPL). Throws gt::Error saying what was
/// looked for when none is found.
std::vector<DevicePtr> open_power_limit_devices(const std::string& kind = "auto",
                                                const std::string& powercap_root = "");

/// For `greentrain train --set train.power_limit=W`: opens the devices (as above), checks
/// permission, sets limit_w on each (clamping is not done: out-of-range is a gt::Error) and
/// returns the guard that restores the previous limits when destroyed or at std::exit (e.g. the
/// trainer's exit 143 after SIGTERM). Signals are left to the trainer (handle_signals=false).
std::unique_ptr<PowerLimitGuard> apply_power_limit(double limit_w,
                                                   const std::string& kind = "auto");

}  // namespace gt::tune
