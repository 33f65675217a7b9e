#pragma once
// Shared by the validation tests in tests/replay: the published tables in tests/data as rows of
// column -> cell, and the median of the errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "replay/result.hpp"

namespace fabricsim::replay_test {

// Two runs of the same scenario with recorded ops (ScenarioRunOptions.replay.record_ops) that must agree:
// the largest gap between their ops' end times, relative to b's iteration time.
inline double max_op_end_gap(const sim::RunResult& a, const sim::RunResult& b) {
  REQUIRE(a.ops.size() == b.ops.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.ops.size(); ++i)
    worst = std::max(worst, std::abs(a.ops[i].end_s - b.ops[i].end_s) / std::max(1e-12, b.iteration_s));
  return worst;
}

// The data rows of a CSV file (header row first), cells unquoted; quoted cells may hold commas and line
// breaks. Empty lines are skipped.
inline std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  auto split = [](const std::string& rec) {
    std::vector<std::string> out;
    std::string cur;
    bool q = false;
    for (char ch : rec) {
      if (ch == '"') q = !q;
      else if (ch == ',' && !q) out.push_back(cur), cur.clear();
      else cur += ch;
    }
    out.push_back(cur);
    return out;
  };
  auto record = [&](std::string& rec) {  // one whole record: lines are joined while a quote is open
    rec.clear();
    std::string line;
    while (std::getline(in, line)) {
      if (rec.empty() && line.empty()) continue;
      rec += (rec.empty() ? "" : "\n") + line;
      if (std::count(rec.begin(), rec.end(), '"') % 2 == 0) return true;
    }
    return !rec.empty();
  };
  std::string rec;
  std::vector<std::map<std::string, std::string>> rows;
  if (!record(rec)) return rows;
  const auto header = split(rec);
  while (record(rec)) {
    const auto f = split(rec);
    std::map<std::string, std::string> r;
    for (std::size_t i = 0; i < header.size() && i < f.size(); ++i) r[header[i]] = f[i];
    rows.push_back(std::move(r));
  }
  return rows;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace fabricsim::replay_test
