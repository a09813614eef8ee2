// python/src/module.cpp: the extension module greentrain._core. It binds the C++ energy and
// tune libraries; the Python package (python/greentrain) adds the Python-side API on top. One
// exception type, greentrain._core.Error (a RuntimeError), carries the libraries' messages.
#include <nanobind/nanobind.h>

#include "common.h"
#include "core/error.h"

namespace gt::python {

nb::object to_py(const nlohmann::json& j) {
  using nlohmann::json;
  switch (j.type()) {
    case json::value_t::null:
      return nb::none();
    case json::value_t::boolean:
      return nb::bool_(j.get<bool>());
    case json::value_t::number_integer:
      return nb::int_(j.get<long long>());
    case json::value_t::number_unsigned:
      return nb::int_(j.get<unsigned long long>());
    case json::value_t::number_float:
      return nb::float_(j.get<double>());
    case json::value_t::string:
      return nb::str(j.get_ref<const std::string&>().c_str());
    case json::value_t::array: {
      nb::list l;
      for (const auto& x : j) l.append(to_py(x));
      return l;
    }
    case json::value_t::object: {
      nb::dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d[it.key().c_str()] = to_py(it.value());
      return d;
    }
    default:
      return nb::none();
  }
}

}  // namespace gt::python

NB_MODULE(_core, m) {
  namespace nb = nanobind;
  m.doc() = "greentrain's C++ energy meter and power-limit search (use the greentrain package)";
  static nb::exception<gt::Error> error(m, "Error", PyExc_RuntimeError);
  gt::python::bind_energy(m);
  gt::python::bind_tune(m);
}
