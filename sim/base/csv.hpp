#pragma once
// CSV output helpers shared by every CSV writer (RFC 4180 quoting).
#include <string>

namespace fabricsim {

// `s` as one CSV field: unchanged unless it contains a comma, a double quote, CR or LF; then quoted, with
// inner double quotes doubled.
inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string o(1, '"');
  for (char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  o += '"';
  return o;
}

}  // namespace fabricsim
