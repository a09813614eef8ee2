// python/src/common.h: shared pieces of the greentrain._core bindings.
#pragma once
#include <nanobind/nanobind.h>

#include <nlohmann/json.hpp>

namespace gt::python {

namespace nb = nanobind;

/// A JSON value as Python objects: null -> None, objects -> dict, arrays -> list.
nb::object to_py(const nlohmann::json& j);

void bind_energy(nb::module_& m);
void bind_tune(nb::module_& m);

}  // namespace gt::python
