// python/src/bind_energy.cpp: the energy module in Python: Meter (begin_window/end_window),
// Measurement (to_dict, CodeCarbon rows), the sensor list. The GIL is released while the meter
// reads sensors, so the sampling thread and the training loop never wait on Python.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "common.h"
#include "energy/meter.h"
#include "energy/node_lock.h"
#include "energy/nvml.h"
#include "energy/rapl.h"
#include "energy/report.h"

namespace gt::python {

using namespace gt::energy;

namespace {

nb::dict info_to_py(const SensorInfo& s) {
  nb::dict d;
  d["name"] = s.name;
  d["domain"] = s.domain;
  d["device"] = s.device;
  d["kind"] = to_string(s.kind);
  d["unit"] = s.unit;
  d["available"] = s.available;
  d["counted"] = s.counted;
  d["method"] = s.method;
  d["reason"] = s.reason;
  d["refresh_period_s"] = s.refresh_period_s;
  d["wrap_j"] = s.wrap_j ? nb::object(nb::float_(*s.wrap_j)) : nb::none();
  return d;
}

nb::list infos_to_py(const std::vector<SensorInfo>& v) {
  nb::list l;
  for (const auto& s : v) l.append(info_to_py(s));
  return l;
}

RunInfo run_info(const nb::dict& d) {
  RunInfo r;
  auto get = [&d](const char* k, std::string& out) {
    if (d.contains(k) && !d[k].is_none()) out = nb::cast<std::string>(nb::str(d[k]));
  };
  get("project_name", r.project_name);
  get("run_id", r.run_id);
  get("experiment_id", r.experiment_id);
  get("country_name", r.country_name);
  get("country_iso_code", r.country_iso_code);
  get("region", r.region);
  get("tracking_mode", r.tracking_mode);
  if (d.contains("pue")) r.pue = nb::cast<double>(d["pue"]);
  return r;
}

}  // namespace

void bind_energy(nb::module_& m) {
  nb::class_<Measurement>(m, "Measurement", "One measured window (C++ gt::energy::Measurement)")
      .def(
          "to_dict", [](const Measurement& x) { return to_py(to_json(x)); },
          "The measurement as energy/report.h's to_json writes it (J, W, s, gCO2e).")
      .def(
          "codecarbon_row",
          [](const Measurement& x, const nb::dict& run) {
            return codecarbon_row(x, run_info(run));
          },
          nb::arg("run"), "One CodeCarbon emissions.csv row (no newline).")
      .def(
          "append_codecarbon_csv",
          [](const Measurement& x, const std::string& path, const nb::dict& run) {
            append_codecarbon_csv(path, x, run_info(run));
          },
          nb::arg("path"), nb::arg("run"),
          "Appends the row to the CSV at path (header if new), written atomically.")
      .def(
          "summary_line",
          [](const Measurement& x, std::optional<double> tokens) {
            return summary_line(x, tokens);
          },
          nb::arg("tokens") = nb::none());

  m.def("codecarbon_columns", &codecarbon_columns, "CodeCarbon's emissions.csv columns.");

  nb::class_<Meter>(m, "Meter", "C++ gt::energy::Meter")
      .def("begin_window", &Meter::begin_window, nb::arg("name"),
           nb::call_guard<nb::gil_scoped_release>())
      .def("end_window", &Meter::end_window, nb::arg("name"),
           nb::call_guard<nb::gil_scoped_release>())
      .def("has_window", &Meter::has_window, nb::arg("name"))
      .def("sample_now", &Meter::sample_now, nb::call_guard<nb::gil_scoped_release>())
      .def("sensors", [](const Meter& x) { return infos_to_py(x.sensors()); })
      .def("estimated", &Meter::estimated)
      .def("not_reader", &Meter::not_reader)
      .def("sampler_overhead", &Meter::sampler_overhead)
      .def("interval_s", &Meter::interval_s)
      .def("carbon_source", [](const Meter& x) { return x.carbon().describe(); });

  m.def(
      "make_meter",
      [](std::optional<std::vector<int>> gpus, bool cpu, double interval_s,
         std::optional<double> carbon_g_per_kwh, const std::string& carbon_csv,
         double carbon_utc_offset_h, const std::string& carbon_region,
         std::optional<double> carbon_replay_start_unix_s, std::optional<double> cpu_tdp_w, int pid,
         const std::string& powercap_root, const std::string& lock_dir) {
        MeterOptions o;
        o.interval_s = interval_s;
        if (gpus && gpus->empty()) {
          o.use_nvml = o.use_rocm_smi = false;
        } else {
          o.gpus = gpus;
        }
        o.use_rapl = o.use_estimate = cpu;
        if (!carbon_csv.empty())
          o.carbon = CarbonIntensity::from_csv(carbon_csv, carbon_utc_offset_h, carbon_region);
        else if (carbon_g_per_kwh)
          o.carbon = CarbonIntensity::constant(*carbon_g_per_kwh, carbon_region);
        o.carbon_replay_start_unix_s = carbon_replay_start_unix_s;
        o.cpu_tdp_w = cpu_tdp_w;
        o.pid = pid;
        o.powercap_root = powercap_root;
        o.lock_dir = lock_dir;
        nb::gil_scoped_release r;
        return Meter::create(o);
      },
      nb::arg("gpus").none(), nb::arg("cpu"), nb::arg("interval_s"),
      nb::arg("carbon_g_per_kwh").none(), nb::arg("carbon_csv"), nb::arg("carbon_utc_offset_h"),
      nb::arg("carbon_region"), nb::arg("carbon_replay_start_unix_s").none(),
      nb::arg("cpu_tdp_w").none(), nb::arg("pid"), nb::arg("powercap_root"), nb::arg("lock_dir"),
      "Meter::create with these options (see greentrain.Meter).");

  m.def(
      "sensors",
      [](const std::string& powercap_root) {
        MeterOptions o;
        o.interval_s = 0;  // look, do not sample (as `greentrain sensors`)
        o.powercap_root = powercap_root;
        std::vector<SensorInfo> v;
        {
          nb::gil_scoped_release r;
          v = Meter::create(o)->sensors();
        }
        return infos_to_py(v);
      },
      nb::arg("powercap_root") = "");
  m.def("sources", [] {
    nb::dict d;
    d["nvml_library"] = nvml::Library::library_name();
    d["powercap_root"] = powercap_root();
    d["lock_dir"] = lock_dir();
    return d;
  });
}

}  // namespace gt::python
