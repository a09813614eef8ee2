// serve/prometheus.h: the daemon's figures in Prometheus's text exposition format (version
// 0.0.4), served on the loopback address by cpp-httplib when the policy gives a port:
//   greentrain_energy_joules_total{sensor,domain,method}   counter, J since the daemon started
//   greentrain_power_watts{sensor,domain,method}           gauge, W over the last interval
//   greentrain_sensor_up{sensor}                           1: the last read succeeded
//   greentrain_sensor_untrusted_seconds_total{sensor}      s whose energy is a fill
//   greentrain_carbon_intensity_grams_per_kwh              gCO2e/kWh in force
//   greentrain_gpu_attributed_energy_joules_total{gpu}     J attributed to processes
//   greentrain_gpu_unattributed_energy_joules_total{gpu}   J left unattributed (idle)
//   greentrain_process_gpu_energy_joules_total{gpu,pid,user,comm}   per process (only when the
//                                                          policy sets prometheus_per_process)
//   greentrain_power_limit_watts{device,leased}            W, the limit in force
//   greentrain_clients, greentrain_requests_total, greentrain_sampler_cpu_seconds_total
// method is "counter", "integrated" or "estimate": estimates are labelled as such.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "serve/leases.h"
#include "serve/node_reader.h"
#include "serve/server.h"

namespace httplib {
class Server;
}

namespace gt::serve {

/// The exposition text. leases and stats may be null.
std::string prometheus_text(const NodeReader& reader, const Leases* leases,
                            const ServerStats* stats, bool per_process);

/// An HTTP server on 127.0.0.1:port answering GET /metrics with body() (in its own threads).
class PrometheusEndpoint {
 public:
  /// port 0: any free port (port() says which). Throws gt::Error when the port cannot be bound,
  /// also when another socket listens on it (SO_REUSEADDR only: no second daemon shares it).
  /// Returns once the server listens.
  PrometheusEndpoint(int port, std::function<std::string()> body);
  ~PrometheusEndpoint();  ///< stops the server
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace gt::serve
