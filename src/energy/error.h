// energy/error.h: the one exception type of the energy module (it depends on nothing else of
// greentrain, so it has its own). Messages name the file, key or value at fault and what was
// expected: "<where>: <what was wrong>; expected <what>".
#pragma once
#include <stdexcept>
#include <string>

namespace gt::energy {

/// Error with a message meant for the user.
class EnergyError : public std::runtime_error {
 public:
  explicit EnergyError(const std::string& msg) : std::runtime_error(msg) {}
};

}  // namespace gt::energy
