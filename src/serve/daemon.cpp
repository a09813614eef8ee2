// serve/daemon.cpp: run_serve (serve.h): wires the reader, the leases, the socket server and the
// Prometheus endpoint together, detaches when asked, and stops cleanly on SIGTERM/SIGINT.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "energy/daemon_protocol.h"
#include "energy/gpu_sensors.h"
#include "energy/meter.h"
#include "energy/sample_page.h"
#include "serve/leases.h"
#include "serve/node_reader.h"
#include "serve/prometheus.h"
#include "serve/serve.h"
#include "serve/server.h"
#include "tune/rapl_device.h"
#ifdef GT_TUNE_HAVE_NVML
#include "tune/nvml_device.h"
#endif

namespace gt::serve {

namespace {

Server* g_server = nullptr;

void on_stop(int) {
  if (g_server) g_server->stop();
}

void log_line(const std::string& s) {
  std::time_t t = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  std::fprintf(stderr, "greentrain serve %s: %s\n", when, s.c_str());
  std::fflush(stderr);
}

Policy load_policy(const ServeOptions& o) {
  if (!o.policy_path.empty()) return Policy::load(o.policy_path);
  if (std::filesystem::exists(kDefaultPolicyPath)) return Policy::load(kDefaultPolicyPath);
  return Policy{};
}

std::vector<tune::DevicePtr> power_limit_devices(const std::string& powercap_root) {
  std::vector<tune::DevicePtr> out;
#ifdef GT_TUNE_HAVE_NVML
  std::string note;
  for (auto& d : tune::open_nvml_devices(&note)) out.push_back(d);
#endif
  try {
    for (auto& d : tune::open_rapl_devices(powercap_root)) out.push_back(d);
  } catch (const std::exception& e) {
    log_line(std::string("RAPL power limits: ") + e.what());
  }
  return out;
}

// The daemon itself, in this process; `ready` (a pipe's write end or -1) gets "ok\n" once it
// serves, or the error.
int serve_here(const ServeOptions& o, int ready) {
  auto tell = [&ready](const std::string& what) {
    if (ready < 0) return;
    (void)!::write(ready, what.data(), what.size());
    ::close(ready);
    ready = -1;
  };
  try {
    Policy policy = load_policy(o);
    if (o.interval_s) policy.interval_s = *o.interval_s;
    if (o.prometheus_port) policy.prometheus_port = *o.prometheus_port;
    if (!o.state_file.empty()) policy.state_file = o.state_file;
    const std::string socket =
        energy::daemon::socket_path(!o.socket.empty() ? o.socket : policy.socket);
    log_line(fmt::format("starting: policy {}, socket {}, state {}, every {:g} ms",
                         policy.path.empty() ? "(built-in: read-only for everyone)" : policy.path,
                         socket, policy.state_file, policy.interval_s * 1000));
    for (const auto& w : policy.warnings()) log_line("warning: " + w);

    // Leases a previous run left: restored before anyone is served.
    auto devices = power_limit_devices(o.powercap_root);
    std::unique_ptr<Leases> leases;
    if (!devices.empty()) {
      leases = std::make_unique<Leases>(devices, policy.state_file);
      for (const auto& l : leases->recover()) log_line(l);
    }
    energy::MeterOptions mo;
    mo.use_daemon = false;
    mo.powercap_root = o.powercap_root;
    // declared before the reader, whose thread publishes into it: it outlives that thread
    std::unique_ptr<energy::SamplePageWriter> page;
    energy::CarbonIntensity carbon = policy.carbon();
    // an intensity in another unit than gCO2e/kWh (kg/kWh read as g/kWh): said once, at start,
    // as train, measure and schedule say it; the daemon serves the values as read
    for (const auto& w : carbon.warnings()) log_line("warning: " + w);
    NodeReader reader(energy::detect_sensors(mo), policy.interval_s, std::move(carbon),
                      nvml_utilization(), "greentrain serve, socket " + socket);
    for (const auto& n : reader.notes()) log_line(n);
    for (const auto& s : reader.sensors())
      log_line(fmt::format("sensor {}: {}{}", s.name,
                           s.available && s.counted ? "read" : "not read",
                           s.reason.empty() ? "" : " (" + s.reason + ")"));

    ServerOptions so;
    so.socket_path = socket;
    so.socket_mode = policy.socket_mode;
    so.socket_group = policy.socket_group;
    so.max_clients = policy.max_clients;
    ServeContext ctx;
    ctx.reader = &reader;
    ctx.policy = &policy;
    ctx.leases = leases.get();
    ctx.started_unix_s =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    ctx.log = log_line;
    if (mo.use_rocm_smi) {  // hello tells clients the node's AMD GPUs (ROCR_VISIBLE_DEVICES)
      std::string why;
      ctx.node_amd_gpus = energy::rocm_smi_gpu_count(&why);
    }
    Server server(so, ctx);
    server.listen();
    // The latest sample in a shared page beside the socket (energy/sample_page.h): readers of
    // the latest sample then cost the daemon nothing. Readable by whoever may connect.
    try {
      struct stat st {};
      const gid_t gid = ::stat(socket.c_str(), &st) == 0 ? st.st_gid : static_cast<gid_t>(-1);
      page = std::make_unique<energy::SamplePageWriter>(energy::daemon::sample_page_path(socket),
                                                        0600 | (policy.socket_mode & 0044), gid);
      reader.set_sample_page(page.get());
      server.set_sample_page(page->path());
    } catch (const std::exception& e) {
      log_line(std::string("no sample page (clients read through the socket): ") + e.what());
    }
    std::unique_ptr<PrometheusEndpoint> prom;
    if (policy.prometheus_port > 0) {
      prom = std::make_unique<PrometheusEndpoint>(policy.prometheus_port, [&] {
        return prometheus_text(reader, leases.get(), &server.stats(),
                               policy.prometheus_per_process);
      });
      log_line(fmt::format("Prometheus metrics at http://127.0.0.1:{}/metrics", prom->port()));
    }
    g_server = &server;
    struct sigaction sa {};
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    reader.start([&server] { server.notify_sample(); });
    log_line(fmt::format("serving at {} (pid {})", socket, ::getpid()));
    tell("ok\n");
    server.run();
    g_server = nullptr;
    reader.stop();
    page.reset();
    log_line("stopping");
    prom.reset();
    if (leases)
      for (const auto& l : leases->release_everything()) log_line(l);
    return 0;
  } catch (const std::exception& e) {
    tell(std::string("error: ") + e.what() + "\n");
    throw;
  }
}

}  // namespace

int run_serve(const ServeOptions& o) {
  if (o.foreground) return serve_here(o, -1);
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw Error(fmt::format("pipe: {}", std::strerror(errno)));
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {  // the daemon: its own session, no terminal, the log as stderr
    ::close(p[0]);
    ::setsid();
    int null = ::open("/dev/null", O_RDWR);
    int log =
        o.log_file.empty() ? null : ::open(o.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0640);
    if (log < 0) log = null;
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(log, 2);
    int code = 1;
    try {
      code = serve_here(o, p[1]);
    } catch (const std::exception& e) {
      log_line(std::string("error: ") + e.what());
    }
    ::_exit(code);
  }
  ::close(p[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    msg.append(buf, static_cast<std::size_t>(n));
  }
  ::close(p[0]);
  if (msg.rfind("ok", 0) != 0) {
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    throw Error(msg.empty() ? "the daemon ended before it served (see its log)"
                            : msg.substr(msg.rfind("error: ", 0) == 0 ? 7 : 0));
  }
  std::printf("greentrain serve: running as pid %d\n", static_cast<int>(pid));
  return 0;
}

}  // namespace gt::serve
