// `fabricsim plan`: the printed configurations are the cheapest (fewest GPUs, then fastest) among the
// candidates it simulated that meet the target, checked against its own per-candidate CSV; the search stops
// at the first cluster size that yields enough configurations.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli_test_util.hpp"

namespace fs = std::filesystem;

namespace {

namespace cli_test = fabricsim::cli_test;
using cli_test::slurp;
using Proc = cli_test::Run;

Proc sh(const std::string& cmd, const fs::path& dir) { return cli_test::run_in(dir, cmd); }

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> f;
  std::string cell;
  std::stringstream ss(line);
  while (std::getline(ss, cell, sep)) f.push_back(cell);
  return f;
}

}  // namespace

TEST_CASE("fabricsim plan picks the cheapest configurations that meet the target") {
  const fs::path dir = cli_test::scratch_dir("plan_test");
  std::ofstream(dir / "base.json") << R"({
  "topology": {"preset": "superpod", "params": {"nodes": 1, "node": "dgx-h100"}},
  "workload": {"generator": "gpt", "params": {
    "num_layers": 4, "hidden_size": 1024, "num_attention_heads": 16, "seq_length": 1024,
    "padded_vocab_size": 51200, "micro_batch_size": 1, "global_batch_size": 64,
    "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1}}
})";
  const std::string bin = cli_test::quoted(FABRICSIM_BINARY);
  // First: every candidate at every size, to know the ground truth.
  Proc all = sh(bin + " plan base.json --nodes 1,2,4 --tp 1,2,8 --pp 1,2 --target-step-time 1000s --top 100 -o all.csv -q", dir);
  REQUIRE_MESSAGE(all.rc == 0, all.err);
  struct Row {
    int nodes, tp, pp, gpus;
    double step;
  };
  std::vector<Row> rows;
  {
    std::istringstream in(slurp(dir / "all.csv"));
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      auto f = split(line, ',');
      if (f[5] != "ok") continue;
      rows.push_back({std::stoi(f[1]), std::stoi(f[2]), std::stoi(f[3]), std::stoi(f[7]), std::stod(f[8])});
    }
  }
  REQUIRE(rows.size() >= 10);
  // A target between the fastest one-node and the fastest two-node step: one node cannot meet it.
  double best1 = 1e9, best2 = 1e9;
  for (const auto& r : rows) {
    if (r.nodes == 1) best1 = std::min(best1, r.step);
    if (r.nodes == 2) best2 = std::min(best2, r.step);
  }
  REQUIRE(best2 < best1);
  double target = (best1 + best2) / 2;
  std::vector<Row> meet;
  for (const auto& r : rows)
    if (r.step <= target) meet.push_back(r);
  std::sort(meet.begin(), meet.end(), [](const Row& a, const Row& b) {
    return std::tie(a.gpus, a.step) < std::tie(b.gpus, b.step);
  });
  REQUIRE(!meet.empty());
  CHECK(meet[0].nodes == 2);
  int at_two = static_cast<int>(std::count_if(meet.begin(), meet.end(), [](const Row& r) { return r.nodes == 2; }));
  REQUIRE(at_two >= 1);

  char t[64];
  std::snprintf(t, sizeof t, "%.9f", target);
  Proc plan = sh(bin + " plan base.json --nodes 1,2,4 --tp 1,2,8 --pp 1,2 --target-step-time " + t + " --top " +
                     std::to_string(at_two) + " -o some.csv -q",
                 dir);
  REQUIRE_MESSAGE(plan.rc == 0, plan.err);
  // Printed rows: "#  nodes GPUs TP PP DP MBS step ..." after the header line.
  std::istringstream out(plan.out);
  std::string line;
  std::vector<std::vector<std::string>> printed;
  bool table = false;
  while (std::getline(out, line)) {
    std::istringstream ls(line);
    std::vector<std::string> f;
    std::string w;
    while (ls >> w) f.push_back(w);
    if (!f.empty() && f[0] == "#") {
      table = true;
      continue;
    }
    if (table && !f.empty()) printed.push_back(f);
  }
  REQUIRE(static_cast<int>(printed.size()) == at_two);
  for (std::size_t i = 0; i < printed.size(); ++i) {
    CHECK(std::stoi(printed[i][1]) == meet[i].nodes);
    CHECK(std::stoi(printed[i][3]) == meet[i].tp);
    CHECK(std::stoi(printed[i][4]) == meet[i].pp);
  }
  // It stopped after two nodes: no four-node candidate was simulated.
  std::string some = slurp(dir / "some.csv");
  CHECK(some.find("\n12,4,") == std::string::npos);
  CHECK(some.find("\n6,2,") != std::string::npos);

  Proc none = sh(bin + " plan base.json --nodes 1 --tp 1 --pp 1 --target-step-time 1us -q", dir);
  CHECK(none.rc == 1);
  CHECK(none.out.find("no configuration meets the target") != std::string::npos);
  Proc bad = sh(bin + " plan base.json --target-step-time 1s --target-tokens-per-day 5", dir);
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("exactly one of") != std::string::npos);
  fs::remove_all(dir);
}
