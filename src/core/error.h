// core/error.h: the one exception type greentrain throws for bad input or a failed
// operation. Messages name the file, key or value at fault and what was expected.
#pragma once
#include <stdexcept>
#include <string>

namespace gt {

/// Error with a message meant for the user: "<where>: <what was wrong>; expected <what>".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

/// A command line that cannot be used as it is: a missing argument, a --set without key=value, a
/// value that is not a number, out of its range or not one of the choices, an option without
/// the one it needs. The program exits 2, as for an unknown option. What a file, the data or the
/// machine has wrong (a file that does not exist, a bad configuration key) is a plain Error:
/// exit 1.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& msg) : Error(msg) {}
};

/// Throws gt::Error(msg) when cond is false.
inline void check(bool cond, const std::string& msg) {
  if (!cond) throw Error(msg);
}

}  // namespace gt
