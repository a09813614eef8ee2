// python/src/bind_energy.cpp: the energy module in Python: Meter (begin_window/end_window),
// Measurement (to_dict, CodeCarbon rows), the sensor list. The GIL is released while the meter
// reads sensors, so the sampling thread and the training loop never wait on Python.
#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "common.h"
#include "core/error.h"
#include "energy/carbon_regions.h"
#include "energy/cpu_estimate.h"
#include "energy/measurement_output.h"
#include "energy/meter.h"
#include "energy/node_lock.h"
#include "energy/nvml.h"
#include "energy/rapl.h"

namespace gt::python {

using namespace gt::energy;

namespace {

nb::dict info_to_py(const SensorInfo& s) {
  nb::dict d;
  d["name"] = s.name;
  d["domain"] = s.domain;
  d["index"] = s.index;
  d["device"] = s.device;
  d["kind"] = to_string(s.kind);
  d["unit"] = s.unit;
  d["available"] = s.available;
  d["counted"] = s.counted;
  d["method"] = s.method;
  d["reason"] = s.reason;
  // unknown for a sensor that was not found (as `greentrain sensors --json` writes it)
  d["refresh_period_s"] = s.available || s.refresh_period_s > 0
                              ? nb::object(nb::float_(s.refresh_period_s))
                              : nb::none();
  d["wrap_j"] = s.wrap_j ? nb::object(nb::float_(*s.wrap_j)) : nb::none();
  return d;
}

nb::list infos_to_py(const std::vector<SensorInfo>& v) {
  nb::list l;
  for (const auto& s : v) l.append(info_to_py(s));
  return l;
}

// Runs f, turning a gt::Error it throws into Python's ValueError (a bad argument).
template <class F>
void as_value_error(F&& f) {
  try {
    f();
  } catch (const gt::Error& e) {
    throw nb::value_error(e.what());
  }
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
  get("python_version", r.python_version);
  if (d.contains("pue") && !d["pue"].is_none()) r.pue = nb::cast<double>(d["pue"]);
  if (d.contains("wue") && !d["wue"].is_none()) r.wue = nb::cast<double>(d["wue"]);
  return r;
}

// run_info, with the measurement's country (the meter's carbon region) where none is given.
RunInfo run_info(const nb::dict& d, const Measurement& m) {
  RunInfo r = run_info(d);
  if (r.country_iso_code.empty()) r.country_iso_code = m.carbon_country_iso_code;
  if (r.country_name.empty()) r.country_name = m.carbon_country_name;
  return r;
}

}  // namespace

void bind_energy(nb::module_& m) {
  nb::class_<Measurement>(m, "Measurement", "One measured window (C++ gt::energy::Measurement)")
      .def(
          "to_dict", [](const Measurement& x) { return to_py(to_json(x)); },
          "The measurement as energy/measurement_output.h's to_json writes it (J, W, s, gCO2e).")
      .def(
          "codecarbon_row",
          [](const Measurement& x, const nb::dict& run) {
            return codecarbon_row(x, run_info(run, x));
          },
          nb::arg("run"), "One CodeCarbon emissions.csv row (no newline).")
      .def(
          "append_codecarbon_csv",
          [](const Measurement& x, const nb::bytes& path_bytes, const nb::dict& run) {
            // os.fsencode(path): a Linux path is bytes, UTF-8 or not
            const std::string path(path_bytes.c_str(), path_bytes.size());
            const RunInfo info = run_info(run, x);
            CsvAppend r;
            {
              nb::gil_scoped_release free;  // the lock may wait on other writers
              r = append_codecarbon_csv(path, x, info);
            }
            nb::dict d;
            d["created"] = r.created;
            d["left_out"] = r.left_out;
            d["left_empty"] = r.left_empty;
            return d;
          },
          nb::arg("path"), nb::arg("run"),
          "Appends the row to the CSV at path under a lock (header if new; a file with another "
          "header gets the row under its own header); returns created, left_out, left_empty.")
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
      .def("reading_source", &Meter::reading_source)
      .def("sampler_overhead", &Meter::sampler_overhead)
      .def("interval_s", &Meter::interval_s)
      .def("carbon_source", [](const Meter& x) { return x.carbon().describe(); })
      .def("carbon_warnings", [](const Meter& x) { return x.carbon().warnings(); })
      .def("carbon_country",
           [](const Meter& x) {
             return nb::make_tuple(x.carbon().country_iso_code(), x.carbon().country_name());
           })
      .def("meter_flags", &Meter::meter_flags)
      .def(
          "power_timeline",
          [](const Meter& x, const std::string& sensor, double t0, double t1) {
            nb::list l;
            for (const PowerPoint& p : x.power_timeline(sensor, t0, t1))
              l.append(nb::make_tuple(p.t0_unix_s, p.t1_unix_s, p.power_w));
            return l;
          },
          nb::arg("sensor"), nb::arg("t0_unix_s"), nb::arg("t1_unix_s"),
          "[(t0_unix_s, t1_unix_s, W), ...] of one sensor, spans ending in (t0, t1].")
      .def("power_now", [](const Meter& x) {
        nb::dict d;
        for (const auto& [name, p] : x.power_now())
          d[name.c_str()] = nb::make_tuple(p.t0_unix_s, p.t1_unix_s, p.power_w);
        return d;
      });

  m.def(
      "make_meter",
      [](const nb::dict& d) {
        MeterOptions o;
        auto has = [&d](const char* k) { return d.contains(k) && !d[k].is_none(); };
        auto str = [&](const char* k) {
          return has(k) ? nb::cast<std::string>(d[k]) : std::string();
        };
        if (has("interval_s")) o.interval_s = nb::cast<double>(d["interval_s"]);
        if (has("gpus")) {
          auto gpus = nb::cast<std::vector<int>>(d["gpus"]);
          if (gpus.empty())
            o.use_nvml = o.use_rocm_smi = false;
          else
            o.gpus = gpus;
        }
        if (has("gpus_strict")) o.gpus_strict = nb::cast<bool>(d["gpus_strict"]);
        if (has("cpu")) o.use_rapl = o.use_estimate = nb::cast<bool>(d["cpu"]);
        const std::string region = str("carbon_region");
        CarbonReadOptions read;
        read.format = str("carbon_format");
        read.value_column = str("carbon_column");
        read.time_column = str("carbon_time_column");
        read.unit = str("carbon_unit");
        read.value_kind = str("carbon_value");
        read.option_prefix = "carbon_";  // messages name Python's keywords (carbon_unit)
        const double utc_offset_h =
            has("carbon_utc_offset_h") ? nb::cast<double>(d["carbon_utc_offset_h"]) : 0.0;
        if (!has("carbon_csv")) {
          // how a series is read and the time zone of its naive times, without one (a
          // constant, a country, the default): a bad combination of arguments, so Python's
          // ValueError rather than greentrain.Error
          try {
            read.refuse_without_series("carbon=PATH", utc_offset_h);
          } catch (const gt::Error& e) {
            throw nb::value_error(e.what());
          }
        }
        if (has("carbon_csv")) {
          o.carbon = CarbonIntensity::from_csv(str("carbon_csv"), utc_offset_h, region, read);
        } else if (has("carbon_g_per_kwh")) {
          o.carbon = CarbonIntensity::constant(nb::cast<double>(d["carbon_g_per_kwh"]), region);
        } else if (has("carbon_country")) {
          o.carbon = CarbonIntensity::for_country(str("carbon_country"), "carbon");
        }
        if (has("country") && o.carbon.origin() != CarbonOrigin::kCountry) {
          o.carbon = o.carbon.with_country(str("country"), "country");
        } else if (has("country")) {  // carbon="DEU" names the country: another one conflicts
          const CountryIntensity c = country_or_throw(str("country"), "country");
          if (c.iso_code != o.carbon.country_iso_code())
            throw nb::value_error(
                fmt::format("carbon='{}' is the average of {} and country='{}' names {}: "
                            "expected one country (carbon=CODE implies country=CODE)",
                            str("carbon_country"), o.carbon.country_name(), str("country"), c.name)
                    .c_str());
        }
        if (has("carbon_replay_start_unix_s"))
          o.carbon_replay_start_unix_s = nb::cast<double>(d["carbon_replay_start_unix_s"]);
        // the ranges of `measure --tdp` and energy.cpu_tdp_w, and a process that exists, as
        // ValueError naming the argument (Meter::create would name MeterOptions)
        as_value_error([&] {
          if (has("cpu_tdp_w")) {
            o.cpu_tdp_w = nb::cast<double>(d["cpu_tdp_w"]);
            check_cpu_tdp_w(*o.cpu_tdp_w, "cpu_tdp_w", "None or 0 (the CPU model's table)");
          }
          if (has("pid")) o.pid = nb::cast<int>(d["pid"]);
          check_process_pid(o.pid, "pid");
        });
        o.pid_hint = "Meter(pid=os.getpid())";  // Python's words in the meter's advice
        o.powercap_root = str("powercap_root");
        o.lock_dir = str("lock_dir");
        if (has("timeline_points")) o.timeline_points = nb::cast<std::size_t>(d["timeline_points"]);
        nb::gil_scoped_release r;
        return Meter::create(o);
      },
      nb::arg("options"),
      "Meter::create with the options of a dict (keys as MeterOptions; see greentrain.Meter). "
      "Raises ValueError for a series-reading option (carbon_format, carbon_column, "
      "carbon_time_column, carbon_unit, carbon_value, carbon_utc_offset_h) without carbon_csv, "
      "a cpu_tdp_w out of [1, 2000] W, a pid that is not a running process, a country beside "
      "another carbon_country; greentrain.Error for the rest.");

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
