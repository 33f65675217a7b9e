#pragma once
// Dotted key paths of the config-file importers (workloads/nemo_config.cpp, workloads/torchtitan_config.cpp):
// "model.optim.name" <-> {"model", "optim", "name"}, and case folding for their enumerated values.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace fabricsim::workloads {

using ConfigPath = std::vector<std::string>;

inline std::string dotted(const ConfigPath& p) {
  std::string s;
  for (const auto& x : p) s += (s.empty() ? "" : ".") + x;
  return s;
}

// The pieces of `s` between `sep` characters (empty pieces kept).
inline std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) out.push_back(cur), cur.clear();
    else cur += c;
  }
  out.push_back(cur);
  return out;
}

inline ConfigPath split_dots(const std::string& s) { return split_on(s, '.'); }

inline std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace fabricsim::workloads
