// The one function of the backend registry (backend/registry.cpp) that the parsers reach:
// TrainConfig's default train.device. The fuzz targets parse configurations and never make a
// backend, so they link this instead of the registry and its backends.
#include "backend/backend.h"

namespace gt {
const char* default_device() { return "cpu"; }
}  // namespace gt
