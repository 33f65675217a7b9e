#pragma once
// Errors raised for bad user input. Every message names where the problem is (file and JSON path or
// command-line flag) and what was expected, so the CLI can print it as one line and exit non-zero.
#include <cstddef>
#include <stdexcept>
#include <string>

namespace fabricsim {

// The message as one printable line of at most kMaxErrorChars characters: control characters that a
// hostile input can smuggle in through a key or value (newline, carriage return, escape) are shown escaped,
// and an overlong message is cut with "...". Parsers quote short excerpts themselves (json_excerpt,
// text_excerpt); this is the guarantee behind them.
constexpr std::size_t kMaxErrorChars = 1500;
inline std::string one_line_message(const std::string& s) {
  std::string o;
  o.reserve(s.size() < kMaxErrorChars ? s.size() : kMaxErrorChars + 3);
  for (char c : s) {
    if (o.size() >= kMaxErrorChars) {
      o += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') o += "\\n";
    else if (c == '\r') o += "\\r";
    else if (u < 0x20 || u == 0x7f) o += '?';
    else o += c;
  }
  return o;
}

class InputError : public std::runtime_error {
 public:
  // `where` is e.g. "topo.json: /links/3/bandwidth" or "--param nodes"; `what` is what was expected.
  InputError(const std::string& where, const std::string& what)
      : std::runtime_error(one_line_message(where.empty() ? what : where + ": " + what)) {}
  explicit InputError(const std::string& msg) : std::runtime_error(one_line_message(msg)) {}
};

// A well-formed configuration that needs more GPU memory than the GPU has: an input error for `run`, and an
// answer ("does not fit", not a failure) for `sweep` and `plan`, which explore layouts.
class DoesNotFitError : public InputError {
 public:
  using InputError::InputError;
};

}  // namespace fabricsim
