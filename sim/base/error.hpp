#pragma once
// Errors raised for bad user input. Every message names where the problem is (file and JSON path or
// command-line flag) and what was expected, so the CLI can print it as one line and exit non-zero.
#include <stdexcept>
#include <string>

namespace fabricsim {

class InputError : public std::runtime_error {
 public:
  // `where` is e.g. "topo.json: /links/3/bandwidth" or "--param nodes"; `what` is what was expected.
  InputError(const std::string& where, const std::string& what)
      : std::runtime_error(where.empty() ? what : where + ": " + what) {}
  explicit InputError(const std::string& msg) : std::runtime_error(msg) {}
};

}  // namespace fabricsim
