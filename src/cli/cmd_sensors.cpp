// cli/cmd_sensors.cpp: `greentrain sensors`: the power and energy sensors found on this
// machine, what each can do, and why any is unavailable or not counted.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "energy/daemon_protocol.h"
#include "energy/meter.h"
#include "energy/node_lock.h"
#include "energy/nvml.h"
#include "energy/rapl.h"

// the command's own names, apart from the other command files' in a unity batch
namespace gt_cmd_sensors {
namespace {

void run_sensors(const std::string& json_path) {
  using namespace gt::energy;
  MeterOptions opt;
  opt.interval_s = 0;  // look, do not sample
  auto meter = Meter::create(opt);
  auto infos = meter->sensors();
  if (!json_path.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& s : infos)
      list.push_back({{"name", s.name},
                      {"domain", s.domain},
                      {"index", s.index},
                      {"device", s.device},
                      {"kind", to_string(s.kind)},
                      {"unit", s.unit},
                      {"available", s.available},
                      // a sensor that cannot be read counts nothing
                      {"counted", s.available && s.counted},
                      {"method", s.method},
                      {"reason", s.reason},
                      // a sensor that was not found has no known period: null (reason above)
                      {"refresh_period_s", s.available || s.refresh_period_s > 0
                                               ? nlohmann::json(s.refresh_period_s)
                                               : nlohmann::json(nullptr)},
                      {"wrap_j", s.wrap_j ? nlohmann::json(*s.wrap_j) : nlohmann::json(nullptr)}});
    gt::cli::write_json_output(json_path, {{"schema", "greentrain.sensors/1"},
                                           {"sensors", list},
                                           {"estimated", meter->estimated()},
                                           {"nvml_library", nvml::Library::library_name()},
                                           {"powercap_root", powercap_root()},
                                           {"lock_dir", lock_dir()}});
    if (json_path == "-") return;
  }
  std::printf("%-22s %-5s %-15s %-5s %-13s %s\n", "SENSOR", "DOM", "KIND", "UNIT", "STATUS",
              "DEVICE / METHOD / REASON");
  for (const auto& s : infos) {
    const char* status = !s.available ? "unavailable" : (s.counted ? "counted" : "not counted");
    std::printf("%-22s %-5s %-15s %-5s %-13s %s\n", s.name.c_str(), s.domain.c_str(),
                to_string(s.kind), s.unit.c_str(), status, s.device.c_str());
    if (s.available && !s.method.empty()) std::printf("%63s method: %s\n", "", s.method.c_str());
    if (!s.reason.empty()) std::printf("%63s reason: %s\n", "", s.reason.c_str());
  }
  std::printf("\nNVML library: %s (GT_NVML_LIBRARY)\n", nvml::Library::library_name().c_str());
  std::printf("powercap root: %s (GT_POWERCAP_ROOT)\n", powercap_root().c_str());
  if (meter->reading_source() == "direct")
    std::printf(
        "readings: direct, this process reads the sensors (no daemon at %s: "
        "GT_DAEMON_SOCKET; start `greentrain serve` to share one reader)\n",
        daemon::socket_path().c_str());
  else
    std::printf("readings: through %s (GT_DAEMON_SOCKET)\n", meter->reading_source().c_str());
  std::printf("reader locks: %s (GT_ENERGY_LOCK_DIR); one reader per device per node\n",
              lock_dir().c_str());
  if (meter->estimated())
    std::printf("note: no energy counter covers some domains here: those figures are estimated\n");
}

gt::cli::Registrar reg(50, "sensors", [](CLI::App& root) {
  auto* c = root.add_subcommand("sensors", "list the power and energy sensors of this machine");
  auto json = std::make_shared<std::string>();
  gt::cli::add_json_option(c, *json, "the sensor list");
  c->callback([json] {
    run_sensors(*json);
    gt::cli::exit_code() = 0;
  });
});

}  // namespace
}  // namespace gt_cmd_sensors
