#pragma once
// Shared by the tests in tests/workloads.
#include <functional>
#include <string>

#include "sim/base/error.hpp"

// The message of the InputError `f` throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fabricsim::InputError& e) {
    return e.what();
  }
  return "";
}
