// serve/server.h: the daemon's Unix socket: one event loop (epoll) over non-blocking connections,
// so a client that never speaks, sends half a message, or reads nothing costs only its own
// connection (it is timed out or dropped, daemon_protocol.h gives the limits) and never delays
// the others. Requests are answered in order per connection; a "fresh" read waits, without
// blocking the loop, for the next sample the reader takes.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "energy/daemon_protocol.h"
#include "serve/leases.h"
#include "serve/node_reader.h"
#include "serve/policy.h"

namespace gt::serve {

struct ServerOptions {
  std::string socket_path;
  unsigned socket_mode = 0666;  ///< who may connect
  std::string socket_group;     ///< the socket's group (empty: the daemon's)
  int max_clients = 1024;
  double first_request_timeout_s = energy::daemon::kFirstRequestTimeoutS;
  double message_timeout_s = energy::daemon::kMessageTimeoutS;
};

/// What the daemon answers with besides its readings.
struct ServeContext {
  NodeReader* reader = nullptr;
  const Policy* policy = nullptr;
  Leases* leases = nullptr;  ///< null: no power-limit device
  double started_unix_s = 0;
  std::string sample_page;  ///< the shared page of the latest sample ("": none), told in hello
  /// The node's AMD GPUs as ROCm SMI counts them (energy::rocm_smi_gpu_count), told in hello's
  /// "node_gpus" so that a client resolves ROCR_VISIBLE_DEVICES against them as a direct reader
  /// does; empty: not counted (no ROCm SMI), hello leaves it out.
  std::optional<std::uint32_t> node_amd_gpus;
  std::function<void(const std::string&)> log;  ///< one line, no newline
};

/// Counters for tests and the Prometheus endpoint.
struct ServerStats {
  std::atomic<std::uint64_t> connections{0}, requests{0}, errors{0}, dropped{0};
  std::atomic<int> clients{0};
};

class Server {
 public:
  Server(ServerOptions opt, ServeContext ctx);
  ~Server();  ///< closes every connection (restoring their leases) and removes the socket
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Creates the socket file (its folder too, mode 0755). Throws gt::Error when a daemon already
  /// answers there, or the path cannot be bound (naming it and why).
  void listen();
  /// Serves until stop(). Call listen() first.
  void run();
  /// Ends run() soon; async-signal-safe.
  void stop();
  /// Wakes the loop to answer requests waiting for a fresh sample (the reader's on_sample).
  void notify_sample();
  const ServerStats& stats() const { return stats_; }
  /// The sample page's path that hello tells clients (energy/sample_page.h); before run().
  void set_sample_page(const std::string& path) { ctx_.sample_page = path; }

 private:
  struct Conn {
    int fd = -1;
    std::uint64_t id = 0;
    Peer peer;
    energy::daemon::FrameReader in{energy::daemon::kMaxRequestBytes};
    std::string out;
    std::size_t out_off = 0;
    double connected_s = 0, msg_start_s = 0, out_since_s = 0;
    bool spoke = false, eof = false, closing = false;
    std::deque<std::string> queue;  // whole requests not yet answered
    std::uint64_t wait_seq = 0;     // waiting for this sample (fresh read)
    nlohmann::json wait_id;
    std::uint32_t events = 0;  // its epoll interest now
  };
  std::uint32_t wanted_events(const Conn& c) const;
  void settle(Conn& c);
  void accept_all(double now);
  void on_readable(Conn& c, double now);
  void process(Conn& c);
  void answer(Conn& c, const std::string& payload);
  void send_text(Conn& c, const std::string& json_text, double now);
  void flush(Conn& c, double now);
  void sweep_timeouts(double now);
  void close_conn(Conn& c, const std::string& why);

  ServerOptions opt_;
  ServeContext ctx_;
  int listen_fd_ = -1, wake_fd_ = -1, epoll_fd_ = -1;
  bool bound_ = false;
  std::atomic<bool> stop_{false};
  std::unordered_map<int, Conn> conns_;
  std::set<int> waiting_;  // connections waiting for a fresh sample
  std::set<int> busy_;     // connections with requests queued and not yet answered
  std::uint64_t next_id_ = 1;
  ServerStats stats_;
};

/// The response to one request that is not a read (hello, power limits, attribution). Throws
/// energy::daemon::ProtocolError for refusals. Exposed for tests.
nlohmann::json handle_request(const ServeContext& ctx, std::uint64_t conn, const Peer& peer,
                              const energy::daemon::Request& req, const std::string& socket_path);
/// The read response text for request id `id` from a published sample (no JSON re-encoding).
std::string read_response(const Published& p, const nlohmann::json& id);

}  // namespace gt::serve
