// serve/prometheus.cpp: see prometheus.h.
#include "serve/prometheus.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <chrono>

#include "core/error.h"

namespace gt::serve {

namespace {

// A label value as the exposition format wants it: \\, \" and \n escaped.
std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\' || c == '"')
      o += '\\', o += c;
    else if (c == '\n')
      o += "\\n";
    else
      o += c;
  }
  return o;
}

std::string num(double v) { return fmt::format("{:.17g}", v); }

const char* method_label(energy::SensorKind k) {
  switch (k) {
    case energy::SensorKind::kEnergyCounter:
      return "counter";
    case energy::SensorKind::kPowerGauge:
      return "integrated";
    case energy::SensorKind::kEstimate:
      return "estimate";
  }
  return "?";
}

void head(std::string& o, const char* name, const char* type, const char* help) {
  o += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

std::string prometheus_text(const NodeReader& reader, const Leases* leases,
                            const ServerStats* stats, bool per_process) {
  const auto pub = reader.latest();
  const auto& s = pub->sample;
  const auto& infos = reader.sensors();
  std::string o;
  auto labels = [&](std::size_t i) {
    return fmt::format("sensor=\"{}\",domain=\"{}\",method=\"{}\"", esc(infos[i].name),
                       esc(infos[i].domain), method_label(infos[i].kind));
  };
  head(o, "greentrain_energy_joules_total", "counter",
       "Energy per sensor since the daemon started (J); method=\"estimate\" is a model.");
  for (std::size_t i = 0; i < infos.size() && i < s.readings.size(); ++i)
    if (infos[i].available && infos[i].counted)
      o += fmt::format("greentrain_energy_joules_total{{{}}} {}\n", labels(i),
                       num(s.readings[i].energy_j));
  head(o, "greentrain_power_watts", "gauge", "Power over the last sampling interval (W).");
  for (std::size_t i = 0; i < infos.size() && i < s.readings.size(); ++i)
    if (infos[i].available && infos[i].counted && s.readings[i].power_w)
      o += fmt::format("greentrain_power_watts{{{}}} {}\n", labels(i), num(*s.readings[i].power_w));
  head(o, "greentrain_sensor_up", "gauge", "1 when the sensor's last read succeeded, else 0.");
  for (std::size_t i = 0; i < infos.size() && i < s.readings.size(); ++i)
    o += fmt::format("greentrain_sensor_up{{sensor=\"{}\"}} {}\n", esc(infos[i].name),
                     s.readings[i].ok ? 1 : 0);
  head(o, "greentrain_sensor_untrusted_seconds_total", "counter",
       "Seconds whose energy was filled with the last trusted power, not read (s).");
  for (std::size_t i = 0; i < infos.size() && i < s.readings.size(); ++i)
    if (infos[i].available && infos[i].counted)
      o += fmt::format("greentrain_sensor_untrusted_seconds_total{{sensor=\"{}\"}} {}\n",
                       esc(infos[i].name), num(s.readings[i].untrusted_s));
  if (s.carbon_g_per_kwh) {
    head(o, "greentrain_carbon_intensity_grams_per_kwh", "gauge",
         "Grid carbon intensity in force (gCO2e/kWh).");
    o += fmt::format("greentrain_carbon_intensity_grams_per_kwh{{origin=\"{}\"}} {}\n",
                     energy::to_string(reader.carbon().origin()), num(*s.carbon_g_per_kwh));
  }
  const auto gpus = reader.attribution().gpus();
  if (!gpus.empty()) {
    head(o, "greentrain_gpu_attributed_energy_joules_total", "counter",
         "GPU energy attributed to processes by NVML per-process SM utilization (J); an "
         "attribution, not a measurement.");
    for (const auto& g : gpus)
      o += fmt::format("greentrain_gpu_attributed_energy_joules_total{{gpu=\"{}\"}} {}\n",
                       esc(g.gpu), num(g.attributed_j));
    head(o, "greentrain_gpu_unattributed_energy_joules_total", "counter",
         "GPU energy attributed to no process (idle power and unseen work) (J).");
    for (const auto& g : gpus)
      o += fmt::format("greentrain_gpu_unattributed_energy_joules_total{{gpu=\"{}\"}} {}\n",
                       esc(g.gpu), num(g.unattributed_j));
    bool mig = false;
    for (const auto& g : gpus) mig = mig || !g.mig_instances.empty();
    if (mig) {
      head(o, "greentrain_mig_instance_energy_joules_total", "counter",
           "A MIG instance's share of its GPU's energy, by its compute slices over all "
           "instances' slices (J); an attribution (NVML counts energy per physical GPU).");
      for (const auto& g : gpus)
        for (const auto& [name, e] : g.mig_instances)
          o += fmt::format(
              "greentrain_mig_instance_energy_joules_total{{gpu=\"{}\",instance=\"{}\"}} {}\n",
              esc(g.gpu), esc(name), num(e.energy_j));
    }
  }
  if (per_process) {
    head(o, "greentrain_process_gpu_energy_joules_total", "counter",
         "GPU energy attributed to one process since the daemon first saw it (J); an "
         "attribution.");
    for (const auto& p : reader.attribution().processes())
      o += fmt::format(
          "greentrain_process_gpu_energy_joules_total{{gpu=\"{}\",pid=\"{}\",user=\"{}\","
          "comm=\"{}\"}} {}\n",
          esc(p.gpu), p.info.pid, esc(p.info.user), esc(p.info.comm), num(p.energy_j));
  }
  if (leases) {
    head(o, "greentrain_power_limit_watts", "gauge", "Power limit in force (W).");
    for (const auto& [id, w, leased] : leases->limits())
      if (w)
        o += fmt::format("greentrain_power_limit_watts{{device=\"{}\",leased=\"{}\"}} {}\n",
                         esc(id), leased ? "true" : "false", num(*w));
  }
  if (stats) {
    head(o, "greentrain_clients", "gauge", "Connected clients.");
    o += fmt::format("greentrain_clients {}\n", stats->clients.load());
    head(o, "greentrain_requests_total", "counter", "Requests answered.");
    o += fmt::format("greentrain_requests_total {}\n", stats->requests.load());
  }
  head(o, "greentrain_sampler_cpu_seconds_total", "counter",
       "CPU time of the daemon's sampling thread (s).");
  o += fmt::format("greentrain_sampler_cpu_seconds_total {}\n", num(reader.thread_cpu_s()));
  return o;
}

PrometheusEndpoint::PrometheusEndpoint(int port, std::function<std::string()> body)
    : http_(std::make_unique<httplib::Server>()) {
  // cpp-httplib's default sets SO_REUSEPORT: a second daemon on the same port then bound too and
  // the kernel split the scrapes between the two. SO_REUSEADDR alone lets a restart bind past
  // TIME_WAIT and refuses a port another socket listens on.
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http_->Get("/metrics", [body](const httplib::Request&, httplib::Response& res) {
    res.set_content(body(), "text/plain; version=0.0.4; charset=utf-8");
  });
  http_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("greentrain serve: metrics at /metrics\n", "text/plain");
  });
  if (port == 0) {
    port_ = http_->bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw Error("prometheus: cannot bind any port on 127.0.0.1");
  } else {
    if (!http_->bind_to_port("127.0.0.1", port))
      throw Error(fmt::format(
          "prometheus_port {}: cannot bind 127.0.0.1:{} (in use? another greentrain serve or "
          "another program may listen there)",
          port, port));
    port_ = port;
  }
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  // cpp-httplib's stop() does nothing before the thread listens (it would then listen for ever
  // and the destructor's join hang): wait until it does (it starts at once)
  for (int i = 0; i < 5000 && !http_->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

PrometheusEndpoint::~PrometheusEndpoint() {
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gt::serve
