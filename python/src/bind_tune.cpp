// python/src/bind_tune.cpp: the tune module in Python: power-limit devices and the search
// driven step by step from a training loop (tune/optimizer.h, PowerLimitOptimizer).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.h"
#include "core/error.h"
#include "energy/meter.h"
#include "tune/optimizer.h"
#include "tune/power_limit.h"
#include "tune/tuner.h"

namespace gt::python {

void bind_tune(nb::module_& m) {
  using namespace gt::tune;
  nb::class_<PowerLimitDevice>(m, "PowerLimitDevice", "A device whose power limit can be set (W)")
      .def_prop_ro("name", &PowerLimitDevice::name)
      .def_prop_ro("limit_w", &PowerLimitDevice::limit_w)
      .def_prop_ro("min_limit_w", &PowerLimitDevice::min_limit_w)
      .def_prop_ro("max_limit_w", &PowerLimitDevice::max_limit_w)
      .def("permission_problem", &PowerLimitDevice::permission_problem);

  m.def("open_power_limit_devices", &open_power_limit_devices, nb::arg("kind") = "auto",
        nb::arg("powercap_root") = "");
  m.def(
      "check_objective",
      [](const std::string& name) {
        try {
          (void)parse_objective(name);
        } catch (const gt::Error& e) {
          throw nb::value_error(e.what());  // a bad argument: Python's ValueError
        }
      },
      nb::arg("name"), "Raises ValueError unless name is an objective of `greentrain tune`.");
  m.def("candidate_limits_w", &candidate_limits_w, nb::arg("min_w"), nb::arg("max_w"),
        nb::arg("step_w"));

  nb::class_<PowerLimitOptimizer>(m, "PowerLimitOptimizer",
                                  "The power-limit search driven by the loop's steps")
      .def(
          "__init__",
          [](PowerLimitOptimizer* self, std::vector<DevicePtr> devices, energy::Meter* meter,
             const std::string& objective, double eta, double max_slowdown, double step_w,
             int warmup_steps, int profile_steps, const std::string& profile_path, bool apply_best,
             bool verbose) {
            TuneOptions o;
            o.objective = parse_objective(objective);
            o.eta = eta;
            o.max_slowdown = max_slowdown;
            o.step_w = step_w;
            o.warmup_steps = warmup_steps;
            o.profile_steps = profile_steps;
            o.profile_path = profile_path;
            new (self) PowerLimitOptimizer(std::move(devices), *meter, o, apply_best,
                                           verbose ? stderr : nullptr);
          },
          nb::arg("devices"), nb::arg("meter"), nb::arg("objective"), nb::arg("eta"),
          nb::arg("max_slowdown"), nb::arg("step_w"), nb::arg("warmup_steps"),
          nb::arg("profile_steps"), nb::arg("profile_path"), nb::arg("apply_best"),
          nb::arg("verbose"), nb::keep_alive<1, 3>())
      .def("check_permission", &PowerLimitOptimizer::check_permission,
           "Raises greentrain.Error listing each device that may not be set; changes nothing.")
      .def("begin_step", &PowerLimitOptimizer::begin_step)
      .def("end_step", &PowerLimitOptimizer::end_step)
      .def("epoch_end", &PowerLimitOptimizer::epoch_end)
      .def("close", &PowerLimitOptimizer::close)
      .def_prop_ro("state",
                   [](const PowerLimitOptimizer& o) {
                     // warm-up is part of profiling for Python (the names it always had)
                     const auto s = o.state();
                     return std::string(
                         PowerLimitOptimizer::state_name(s == PowerLimitOptimizer::State::warmup
                                                             ? PowerLimitOptimizer::State::profiling
                                                             : s));
                   })
      .def_prop_ro("chosen_limit_w", &PowerLimitOptimizer::chosen_limit_w)
      .def_prop_ro("devices", &PowerLimitOptimizer::devices)
      .def("result", [](const PowerLimitOptimizer& o) { return to_py(o.result_json()); })
      .def_prop_ro("error", &PowerLimitOptimizer::error);
}

}  // namespace gt::python
