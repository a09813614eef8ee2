// cli/cmd_serve.cpp: `greentrain serve`: the node daemon (src/serve), and `greentrain serve
// --status`, which asks a running daemon what it reads, which limits are leased, and what the
// asking user may do.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "core/error.h"
#include "energy/daemon_client.h"
#include "serve/serve.h"

// the command's own names, apart from the other command files' in a unity batch
namespace gt_cmd_serve {
namespace {

void print_status(const std::string& socket) {
  namespace ed = gt::energy::daemon;
  std::string why;
  auto c = ed::DaemonClient::connect(socket, &why);
  if (!c) throw gt::Error("greentrain serve --status: " + why);
  const auto& h = c->hello();
  std::printf("%s\n", c->describe().c_str());
  std::printf("  sampling every %g ms; carbon %s\n", h.value("interval_s", 0.0) * 1000,
              h["carbon"].value("source", std::string("?")).c_str());
  for (const auto& s : h["sensors"]) {
    const bool read = s.value("available", false) && s.value("counted", true);
    std::printf("  sensor %-22s %-4s %s%s\n", s.value("name", std::string()).c_str(),
                s.value("domain", std::string()).c_str(), read ? "read" : "not read",
                s.value("reason", std::string()).empty()
                    ? ""
                    : (" (" + s.value("reason", std::string()) + ")").c_str());
  }
  const auto pl = c->call({{"op", "power_limits"}});
  for (const auto& d : pl["devices"]) {
    std::string lease = "not leased";
    if (!d["leased_by"].is_null())
      lease = fmt::format("leased by {} (pid {}), was {} W", d["leased_by"].value("user", "?"),
                          d["leased_by"].value("pid", 0), d["leased_by"].value("previous_w", 0.0));
    std::printf("  power limit %-20s %s W, range [%g, %g] W, %s\n",
                d.value("device", std::string()).c_str(),
                d["limit_w"].is_number() ? fmt::format("{:g}", d["limit_w"].get<double>()).c_str()
                                         : "unknown",
                d.value("min_w", 0.0), d.value("max_w", 0.0), lease.c_str());
  }
  const auto& you = h["you"];
  std::string may;
  for (const auto& g : h["may"]["power_limit"])
    may += fmt::format("{}{} in [{:g}, {:g}] W", may.empty() ? "" : ", ", g.value("device", "?"),
                       g.value("min_w", 0.0), g.value("max_w", 0.0));
  std::printf("  you: user %s (uid %d): read; set power limits: %s; other users' processes: %s\n",
              you.value("user", std::string("?")).c_str(), you.value("uid", -1),
              may.empty() ? "none" : may.c_str(),
              h["may"].value("read_all_processes", false) ? "yes" : "no");
}

gt::cli::Registrar reg(55, "serve", [](CLI::App& root) {
  auto* c = root.add_subcommand(
      "serve",
      "the node daemon: the one reader of this node's sensors, serving every local process over "
      "a Unix socket; power limits under a policy; per-process GPU energy; Prometheus metrics");
  auto o = std::make_shared<gt::serve::ServeOptions>();
  auto status = std::make_shared<bool>(false);
  auto interval_ms = std::make_shared<double>(0);
  auto port = std::make_shared<int>(-1);
  c->add_option("--policy", o->policy_path,
                "policy file (TOML; default /etc/greentrain/serve.toml when it exists, else "
                "read-only for everyone)");
  c->add_option("--socket", o->socket,
                "socket path (default: $GT_DAEMON_SOCKET, the policy's, or "
                "/run/greentrain/serve.sock)");
  c->add_option("--state-file", o->state_file,
                "lease state file (default: the policy's, /var/lib/greentrain/serve-state.json)");
  c->add_option("--interval", *interval_ms, "sampling period in ms (default: the policy's, 100)");
  c->add_option("--prometheus-port", *port,
                "serve Prometheus metrics on 127.0.0.1:PORT (0: off; default: the policy's)")
      ->check(gt::cli::int_range(0, 65535));
  c->add_flag("--foreground", o->foreground,
              "stay in the foreground, log to stderr (systemd, containers, tests)");
  c->add_option("--log", o->log_file, "when detached: append the log to this file");
  c->add_option("--powercap-root", o->powercap_root,
                "RAPL's powercap folder (default $GT_POWERCAP_ROOT or /sys/class/powercap)");
  c->add_flag("--status", *status,
              "ask the running daemon what it reads, which limits are leased, what you may do");
  c->callback([o, status, interval_ms, port] {
    if (*status) {
      print_status(o->socket);
      gt::cli::exit_code() = 0;
      return;
    }
    if (*interval_ms != 0) {
      if (!(*interval_ms >= 1 && *interval_ms <= 60000))  // a usage error: exit 2
        throw gt::UsageError(fmt::format("--interval {}: expected 1 to 60000 ms", *interval_ms));
      o->interval_s = *interval_ms / 1000.0;
    }
    if (*port >= 0) o->prometheus_port = *port;  // int_range checked it
    gt::cli::exit_code() = gt::serve::run_serve(*o);
  });
});

}  // namespace
}  // namespace gt_cmd_serve
