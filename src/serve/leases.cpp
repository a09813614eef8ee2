// serve/leases.cpp: see leases.h.
#include "serve/leases.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "energy/daemon_protocol.h"
#include "serve/clocks.h"

namespace gt::serve {

using energy::daemon::ProtocolError;
using nlohmann::json;

namespace {

// "GPU-..." or "MIG-..." inside a device's name, if any.
std::string uuid_in(const std::string& name) {
  for (const char* p : {"GPU-", "MIG-"}) {
    auto a = name.find(p);
    if (a == std::string::npos) continue;
    auto b = name.find_first_of(",) ", a);
    return name.substr(a, b == std::string::npos ? std::string::npos : b - a);
  }
  return "";
}

}  // namespace

std::string device_id(const tune::PowerLimitDevice& d) {
  const std::string n = d.name();
  return n.substr(0, n.find(" ("));
}

Leases::Leases(std::vector<tune::DevicePtr> devices, std::string state_file)
    : devices_(std::move(devices)), state_file_(std::move(state_file)) {}

tune::PowerLimitDevice* Leases::find(const std::string& id) const {
  for (const auto& d : devices_)
    if (device_id(*d) == id) return d.get();
  return nullptr;
}

void Leases::save_locked() const {
  if (state_file_.empty()) return;
  json l = json::array();
  for (const auto& [id, x] : leases_)
    l.push_back({{"device", id},
                 {"previous_w", x.previous_w},
                 {"limit_w", x.limit_w},
                 {"uid", x.uid},
                 {"pid", x.pid},
                 {"user", x.user},
                 {"since_unix_s", x.since_unix_s}});
  const json j = {{"version", 1}, {"leases", l}};
  const std::string text = j.dump(2) + "\n";
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(state_file_).parent_path(), ec);
  write_file_atomic(state_file_, text, 0600);  // only the daemon's user reads the leases
}

std::vector<std::string> Leases::recover() {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<std::string> log;
  if (state_file_.empty()) return log;
  std::ifstream f(state_file_);
  if (!f) return log;  // no state: nothing was leased
  std::stringstream ss;
  ss << f.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("leases") || !j["leases"].is_array())
    throw Error(
        fmt::format("{}: not a lease state file (expected JSON with \"leases\": [...]); "
                    "look at it, then remove it to start",
                    state_file_));
  for (const auto& l : j["leases"]) {
    const std::string id = l.value("device", std::string());
    const double prev = l.value("previous_w", 0.0);
    auto* d = find(id);
    if (!d) {
      log.push_back(fmt::format("lease of {} recorded, but no such device now: not restored", id));
      continue;
    }
    try {
      d->set_limit_w(prev);
      log.push_back(
          fmt::format("{}: power limit restored to {} W (leased to {} by a run of the "
                      "daemon that ended without restoring it)",
                      id, prev, l.value("user", std::string("?"))));
    } catch (const std::exception& e) {
      log.push_back(
          fmt::format("{}: could not restore the power limit to {} W: {}", id, prev, e.what()));
    }
  }
  leases_.clear();
  save_locked();
  return log;
}

json Leases::list() const {
  std::lock_guard<std::mutex> g(mu_);
  json out = json::array();
  for (const auto& d : devices_) {
    const std::string id = device_id(*d);
    json x = {{"device", id},
              {"name", d->name()},
              {"uuid", uuid_in(d->name())},
              {"min_w", d->min_limit_w()},
              {"max_w", d->max_limit_w()},
              {"leased_by", nullptr}};
    try {
      x["limit_w"] = d->limit_w();
    } catch (const std::exception& e) {
      x["limit_w"] = nullptr;
      x["limit_error"] = e.what();
    }
    if (auto it = leases_.find(id); it != leases_.end())
      x["leased_by"] = {{"uid", it->second.uid},
                        {"pid", it->second.pid},
                        {"user", it->second.user},
                        {"previous_w", it->second.previous_w}};
    out.push_back(std::move(x));
  }
  return out;
}

json Leases::grants(const Peer& peer, const Policy& policy) const {
  json out = json::array();
  for (const auto& d : devices_) {
    const auto g =
        policy.power_limit_grant(peer, device_id(*d), d->min_limit_w(), d->max_limit_w());
    if (g.allowed)
      out.push_back({{"device", device_id(*d)}, {"min_w", g.min_w}, {"max_w", g.max_w}});
  }
  return out;
}

json Leases::set(std::uint64_t conn, const Peer& peer, const Policy& policy, const std::string& id,
                 double limit_w, bool clamp) {
  std::lock_guard<std::mutex> g(mu_);
  auto* d = find(id);
  if (!d) {
    std::string known;
    for (const auto& x : devices_) known += (known.empty() ? "" : ", ") + device_id(*x);
    throw ProtocolError(
        "no_such_device",
        fmt::format("no power-limit device \"{}\" on this node; expected one of: {}",
                    id.substr(0, 64), known.empty() ? "(none)" : known));
  }
  const auto grant = policy.power_limit_grant(peer, id, d->min_limit_w(), d->max_limit_w());
  if (!grant.allowed) throw ProtocolError("not_permitted", grant.why);
  if (clamp && std::isfinite(limit_w)) limit_w = std::clamp(limit_w, grant.min_w, grant.max_w);
  if (!(limit_w >= grant.min_w - 1e-6 && limit_w <= grant.max_w + 1e-6))
    throw ProtocolError(
        "out_of_range",
        fmt::format("{} W for {}: user {} may set it within [{}, {}] W{}{}", limit_w, id, peer.user,
                    grant.min_w, grant.max_w,
                    peer.uid == 0 ? " (the device's range)" : " (the policy's range)",
                    peer.via.empty() ? "" : " (asked on their behalf by " + peer.via + ")"));
  auto it = leases_.find(id);
  if (it != leases_.end() && it->second.conn != conn)
    throw ProtocolError("busy", fmt::format("{} is leased by user {} (pid {}) since {:.0f} s ago; "
                                            "the limit is theirs until their connection ends",
                                            id, it->second.user, it->second.pid,
                                            unix_now() - it->second.since_unix_s));
  double previous = 0;
  try {
    previous = it != leases_.end() ? it->second.previous_w : d->limit_w();
  } catch (const std::exception& e) {
    throw ProtocolError("failed", e.what());
  }
  const bool fresh_lease = it == leases_.end();
  Lease l = fresh_lease ? Lease{conn, peer.uid, peer.pid, peer.user, previous, 0, unix_now()}
                        : it->second;
  l.limit_w = limit_w;
  leases_[id] = l;
  save_locked();  // recorded before the device changes: a crash in between restores `previous`
  try {
    d->set_limit_w(limit_w);
  } catch (const std::exception& e) {
    if (fresh_lease) leases_.erase(id);
    save_locked();
    throw ProtocolError("failed", e.what());
  }
  json applied = nullptr;  // what the device holds now: it may round or refuse silently
  try {
    applied = d->limit_w();
  } catch (const std::exception&) {
  }
  return {{"device", id}, {"limit_w", limit_w}, {"previous_w", previous}, {"applied_w", applied}};
}

std::string Leases::restore_locked(const std::string& id, const Lease& l) {
  auto* d = find(id);
  if (!d) return fmt::format("{}: device gone; limit not restored", id);
  try {
    d->set_limit_w(l.previous_w);
    return fmt::format("{}: power limit restored to {} W (lease of user {}, pid {}, ended)", id,
                       l.previous_w, l.user, l.pid);
  } catch (const std::exception& e) {
    return fmt::format("{}: could not restore the power limit to {} W: {}", id, l.previous_w,
                       e.what());
  }
}

json Leases::release(std::uint64_t conn, const std::string& id) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = leases_.find(id);
  if (it == leases_.end() || it->second.conn != conn)
    throw ProtocolError(find(id) ? "not_permitted" : "no_such_device",
                        fmt::format("this connection holds no lease on \"{}\"", id.substr(0, 64)));
  const Lease l = it->second;
  const std::string line = restore_locked(id, l);
  leases_.erase(it);
  save_locked();
  return {{"device", id}, {"limit_w", l.previous_w}, {"log", line}};
}

std::vector<std::string> Leases::release_all(std::uint64_t conn) {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<std::string> log;
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.conn == conn) {
      log.push_back(restore_locked(it->first, it->second));
      it = leases_.erase(it);
    } else {
      ++it;
    }
  }
  if (!log.empty()) save_locked();
  return log;
}

std::vector<std::string> Leases::release_everything() {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<std::string> log;
  for (const auto& [id, l] : leases_) log.push_back(restore_locked(id, l));
  leases_.clear();
  save_locked();
  return log;
}

std::vector<std::tuple<std::string, std::optional<double>, bool>> Leases::limits() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<std::tuple<std::string, std::optional<double>, bool>> out;
  for (const auto& d : devices_) {
    std::optional<double> w;
    try {
      w = d->limit_w();
    } catch (const std::exception&) {
    }
    const std::string id = device_id(*d);
    out.emplace_back(id, w, leases_.count(id) > 0);
  }
  return out;
}

}  // namespace gt::serve
