// One CSV reader for the tests that compare with measured tables (tests/data/...): a header line, then one row
// per line as column -> text; commas inside double quotes stay in the field, CR of CRLF files is dropped.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace fabricsim::test {

inline std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char ch : line) {
    if (ch == '"') quoted = !quoted;
    else if (ch == ',' && !quoted) out.push_back(cur), cur.clear();
    else if (ch != '\r') cur += ch;
  }
  out.push_back(cur);
  return out;
}

inline std::vector<std::map<std::string, std::string>> read_csv_rows(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path);
  std::string line;
  std::getline(in, line);
  const auto header = split_csv_line(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    const auto f = split_csv_line(line);
    std::map<std::string, std::string> r;
    for (std::size_t i = 0; i < header.size() && i < f.size(); ++i) r[header[i]] = f[i];
    rows.push_back(r);
  }
  return rows;
}

}  // namespace fabricsim::test
