// The functions of the backend registry (backend/registry.cpp) that the parsers reach:
// TrainConfig's default train.device, and the device traits its validate() checks (fp8,
// cuDNN) and names in messages. The fuzz targets parse configurations and never make a
// backend, so they link this instead of the registry and its backends: it knows no device, so
// a configuration asking for fp8 or cuDNN is refused as on a device without them.
#include <string>
#include <vector>

#include "backend/backend.h"

namespace gt {
const char* default_device() { return "cpu"; }
const std::vector<BackendEntry>& known_backends() {
  static const std::vector<BackendEntry> none;
  return none;
}
const BackendEntry* find_backend(std::string_view) { return nullptr; }
DeviceTraits device_traits(const std::string&) { return {}; }
std::string devices_with(bool (*)(const DeviceTraits&)) { return "no device (the fuzz stub)"; }
}  // namespace gt
