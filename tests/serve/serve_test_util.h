// tests/serve/serve_test_util.h: a daemon in this process (reader, server, leases) on a socket
// in a temporary folder, a counter for it that the test moves, and a raw client that speaks the
// protocol byte by byte (with builders of its requests), for the tests of the node daemon.
#pragma once
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "energy/daemon_protocol.h"
#include "energy/sensor.h"
#include "serve/leases.h"
#include "serve/node_reader.h"
#include "serve/policy.h"
#include "serve/server.h"
#include "test_util.h"

namespace gt::serve::test {

using energy::test::TempDir;

/// A counter the test moves while the daemon's thread reads it; `device_key` as the daemon's
/// sensors have one ("nvml-<uuid>", "rocm-<index>", "rapl-<zone>"; empty: none).
class AtomicCounter : public energy::Sensor {
 public:
  AtomicCounter(std::string name, std::string domain, std::string device_key = "") {
    info_.name = std::move(name);
    info_.domain = std::move(domain);
    info_.device_key = std::move(device_key);
    info_.kind = energy::SensorKind::kEnergyCounter;
    info_.unit = "J";
    info_.available = true;
    info_.method = "test counter";
  }
  const energy::SensorInfo& info() const override { return info_; }
  energy::Reading read(double) override {
    energy::Reading r;
    if (failing) {
      r.ok = false;
      r.error = "the sensor stopped answering";
      return r;
    }
    r.ok = true;
    r.energy_j = joules.load();
    return r;
  }
  std::atomic<double> joules{0};
  std::atomic<bool> failing{false};

 private:
  energy::SensorInfo info_;
};

/// A daemon serving `sensors` at <dir>/serve.sock until destroyed; `node_amd_gpus`: the node's
/// AMD GPU count its hello tells (ServeContext::node_amd_gpus; empty: none, as an older daemon).
struct LocalDaemon {
  std::string socket;
  Policy policy;
  std::unique_ptr<energy::SamplePageWriter> page;  // outlives the reader's thread
  std::unique_ptr<NodeReader> reader;
  std::unique_ptr<Leases> leases;
  std::unique_ptr<Server> server;
  std::thread loop;
  std::vector<std::string> log;
  std::mutex log_mu;

  LocalDaemon(const std::string& dir, energy::SensorList sensors, double interval_s = 0.05,
              ServerOptions so = {}, std::vector<tune::DevicePtr> devices = {}, Policy pol = {},
              std::unique_ptr<UtilizationSource> util = nullptr, bool with_page = true,
              std::optional<std::uint32_t> node_amd_gpus = std::nullopt)
      : socket(dir + "/serve.sock"), policy(std::move(pol)) {
    reader = std::make_unique<NodeReader>(std::move(sensors), interval_s, energy::CarbonIntensity{},
                                          std::move(util));
    if (!devices.empty()) leases = std::make_unique<Leases>(devices, dir + "/state.json");
    so.socket_path = socket;
    ServeContext ctx;
    ctx.reader = reader.get();
    ctx.policy = &policy;
    ctx.leases = leases.get();
    ctx.node_amd_gpus = node_amd_gpus;
    ctx.log = [this](const std::string& s) {
      std::lock_guard<std::mutex> g(log_mu);
      log.push_back(s);
    };
    server = std::make_unique<Server>(so, ctx);
    server->listen();
    if (with_page) {  // as serve_here does
      page = std::make_unique<energy::SamplePageWriter>(energy::daemon::sample_page_path(socket),
                                                        0644);
      reader->set_sample_page(page.get());
      server->set_sample_page(page->path());
    }
    reader->start([this] { server->notify_sample(); });
    loop = std::thread([this] { server->run(); });
  }
  ~LocalDaemon() {
    server->stop();
    loop.join();
    reader->stop();
  }
  std::string log_text() {
    std::lock_guard<std::mutex> g(log_mu);
    std::string s;
    for (auto& l : log) s += l + "\n";
    return s;
  }
};

/// A connected raw socket (-1 on failure).
inline int connect_raw(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline void send_all(int fd, const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

/// A request of protocol version 1 for `op`, with `fields` beside "v" and "op", as the raw
/// client sends it.
inline nlohmann::json request(const std::string& op,
                              const nlohmann::json& fields = nlohmann::json::object()) {
  nlohmann::json r = {{"v", 1}, {"op", op}};
  r.update(fields);
  return r;
}

/// A read the daemon answers with a sample taken for it.
inline nlohmann::json fresh_read() { return request("read", {{"fresh", true}}); }

/// A lease of `device`'s power limit at `limit_w` W.
inline nlohmann::json set_limit(const std::string& device, int limit_w) {
  return request("set_power_limit", {{"device", device}, {"limit_w", limit_w}});
}

/// Sends `j` as one frame.
inline void send_json(int fd, const nlohmann::json& j) {
  std::string out;
  energy::daemon::append_frame(out, j.dump());
  send_all(fd, out);
}

/// The next response within timeout_s; a JSON null on timeout or when the daemon closed.
inline nlohmann::json read_json(int fd, double timeout_s = 5) {
  energy::daemon::FrameReader r(energy::daemon::kMaxResponseBytes);
  std::string p;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[65536];
  while (r.next(&p) != energy::daemon::FrameReader::Status::kFrame) {
    const auto left = std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) return nullptr;
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, static_cast<int>(left * 1000) + 1) <= 0) return nullptr;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return nullptr;
    r.feed(buf, static_cast<std::size_t>(n));
  }
  return nlohmann::json::parse(p);
}

/// true when the daemon closed fd within timeout_s.
inline bool closed_by_peer(int fd, double timeout_s) {
  char buf[4096];
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, 50) > 0) {
      ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN)) return true;
    }
  }
  return false;
}

}  // namespace gt::serve::test
