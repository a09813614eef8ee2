// tune/power_limit.cpp: PowerLimitGuard and its exit-path restoration (destructor, atexit,
// SIGINT/SIGTERM), only in the process that set the limits, and opening the devices of this
// machine.
#include "tune/power_limit.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "core/error.h"
#include "tune/daemon_device.h"
#include "tune/rapl_device.h"
#ifdef GT_TUNE_HAVE_NVML
#include "tune/nvml_device.h"
#endif

namespace gt::tune {

bool PowerLimitDevice::restore_limit_w_from_signal(double limit_w) noexcept {
  try {
    set_limit_w(limit_w);
    return true;
  } catch (...) {
    return false;
  }
}

namespace {

// Active guards, read by the signal handler without locks.
constexpr int kMaxGuards = 32;
std::array<std::atomic<PowerLimitGuard*>, kMaxGuards> g_active{};
std::mutex g_mutex;  // serialises registration and handler installation (not used in handlers)
int g_signal_users = 0;
struct sigaction g_old_int, g_old_term;
bool g_atexit_registered = false;

// Restores the guards of this process; returns how many. A forked child inherits the handler
// and the guards but not the limits: they are its parent's, which still trains with them.
int restore_all_from_signal() noexcept {
  int n = 0;
  const pid_t me = ::getpid();  // async-signal-safe
  for (auto& slot : g_active) {
    PowerLimitGuard* g = slot.load();
    if (!g || g->owner_pid() != me) continue;
    if (!slot.compare_exchange_strong(g, nullptr)) continue;
    const auto& devs = g->devices();
    const auto& saved = g->saved_limits_w();
    for (std::size_t i = 0; i < devs.size(); ++i) devs[i]->restore_limit_w_from_signal(saved[i]);
    ++n;
  }
  return n;
}

void on_signal(int sig, siginfo_t* info, void* ctx) {
  if (restore_all_from_signal() > 0) {
    static const char msg[] = "greentrain: power limits restored after signal\n";
    ssize_t ignored = ::write(2, msg, sizeof msg - 1);
    (void)ignored;
  }
  const struct sigaction& old = sig == SIGINT ? g_old_int : g_old_term;
  if (old.sa_flags & SA_SIGINFO) {
    if (old.sa_sigaction) old.sa_sigaction(sig, info, ctx);
    return;
  }
  if (old.sa_handler == SIG_IGN) return;
  if (old.sa_handler == SIG_DFL) {
    // The default action: end the process by this signal (it is delivered on return).
    ::sigaction(sig, &old, nullptr);
    ::raise(sig);
    return;
  }
  old.sa_handler(sig);
}

void restore_all_at_exit() {
  for (auto& slot : g_active)
    if (PowerLimitGuard* g = slot.load()) g->restore();
}

void install_handlers() {
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
}

void uninstall_handlers() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
}

}  // namespace

PowerLimitGuard::PowerLimitGuard(std::vector<DevicePtr> devices, bool handle_signals)
    : devices_(std::move(devices)), handle_signals_(handle_signals) {
  check(!devices_.empty(), "power limit: no devices; expected at least one device to limit");
  std::string problems;
  for (const auto& d : devices_)
    if (std::string p = d->permission_problem(); !p.empty())
      problems += fmt::format("\n  {}: {}", d->name(), p);
  if (!problems.empty())
    throw Error("power limit: cannot set the power limit of:" + problems + "\nnothing was changed");
  for (const auto& d : devices_) saved_w_.push_back(d->limit_w());
  owner_pid_ = ::getpid();
  std::lock_guard lock(g_mutex);
  bool registered = false;
  for (auto& slot : g_active) {
    PowerLimitGuard* expected = nullptr;
    if (slot.compare_exchange_strong(expected, this)) {
      registered = true;
      break;
    }
  }
  check(registered, fmt::format("power limit: more than {} guards at once", kMaxGuards));
  if (!g_atexit_registered) {
    std::atexit(restore_all_at_exit);
    g_atexit_registered = true;
  }
  if (handle_signals_ && g_signal_users++ == 0) install_handlers();
}

PowerLimitGuard::~PowerLimitGuard() {
  restore();
  std::lock_guard lock(g_mutex);
  for (auto& slot : g_active) {
    PowerLimitGuard* expected = this;
    slot.compare_exchange_strong(expected, nullptr);
  }
  if (handle_signals_ && --g_signal_users == 0) uninstall_handlers();
}

void PowerLimitGuard::apply_w(double limit_w) {
  for (const auto& d : devices_)
    if (!(limit_w >= d->min_limit_w() - 1e-6 && limit_w <= d->max_limit_w() + 1e-6))
      throw Error(
          fmt::format("power limit {} W is outside the allowed range [{}, {}] W of {}; "
                      "nothing was changed",
                      limit_w, d->min_limit_w(), d->max_limit_w(), d->name()));
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    try {
      devices_[i]->set_limit_w(limit_w);
    } catch (const std::exception& e) {
      for (std::size_t k = 0; k < i; ++k) {
        try {
          devices_[k]->set_limit_w(saved_w_[k]);
        } catch (const std::exception& e2) {
          std::fprintf(stderr, "greentrain: could not restore %s to %g W: %s\n",
                       devices_[k]->name().c_str(), saved_w_[k], e2.what());
        }
      }
      throw Error(fmt::format("{}; the {} device(s) already set were put back", e.what(), i));
    }
  }
}

void PowerLimitGuard::restore() noexcept {
  if (::getpid() != owner_pid_) return;  // a forked child: the limits are the parent's
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    try {
      if (std::fabs(devices_[i]->limit_w() - saved_w_[i]) > 1e-3)
        devices_[i]->set_limit_w(saved_w_[i]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "greentrain: could not restore the power limit of %s to %g W: %s\n",
                   devices_[i]->name().c_str(), saved_w_[i], e.what());
    }
  }
}

std::vector<DevicePtr> open_power_limit_devices(const std::string& kind,
                                                const std::string& powercap_root) {
  check(
      kind == "auto" || kind == "nvml" || kind == "rapl",
      fmt::format("power-limit device kind '{}' is not known; expected auto, nvml or rapl", kind));
  // Through the node daemon when one answers with such devices: limits under its policy, no
  // root needed, restored by the daemon however this process ends.
  std::string daemon_note;
  if (powercap_root.empty()) {
    auto d = open_daemon_devices(kind, &daemon_note);
    if (!d.empty()) return d;
  }
  std::string nvml_note = "NVML support was not built (no energy module)";
#ifdef GT_TUNE_HAVE_NVML
  if (kind == "auto" || kind == "nvml") {
    auto d = open_nvml_devices(&nvml_note);
    if (!d.empty()) return d;
    if (kind == "nvml")
      throw Error("power limit: no NVIDIA GPU found through NVML (" + nvml_note +
                  "); expected a driver and a visible GPU");
  }
#else
  if (kind == "nvml") throw Error("power limit: " + nvml_note);
#endif
  auto r = open_rapl_devices(powercap_root);
  if (r.empty())
    throw Error(fmt::format(
        "power limit: no device found: NVML: {}; RAPL: no package zone with "
        "constraint_0_power_limit_uw under {}",
        nvml_note,
        powercap_root.empty() ? "$GT_POWERCAP_ROOT or /sys/class/powercap" : powercap_root));
  return r;
}

std::unique_ptr<PowerLimitGuard> apply_power_limit(double limit_w, const std::string& kind) {
  auto guard = std::make_unique<PowerLimitGuard>(open_power_limit_devices(kind), false);
  guard->apply_w(limit_w);
  return guard;
}

}  // namespace gt::tune
