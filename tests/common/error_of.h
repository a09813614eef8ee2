// tests/common/error_of.h: the message of the gt::Error a call throws, for the tests of every
// folder that check what an error says (tests/CMakeLists.txt puts tests/common on the include
// path).
#pragma once
#include <string>

#include "core/error.h"

namespace gt::test {

/// The what() of the gt::Error that f() throws; "" when it throws none. Other exceptions pass
/// through (the test fails on them).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace gt::test
