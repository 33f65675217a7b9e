// `fabricsim run` and `fabricsim plan --placements` on cluster scenarios (docs/workloads.md "Cluster
// scenarios"): the commands the docs show, with their printed tables checked against the result JSON.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"

namespace fs = std::filesystem;
namespace cli_test = fabricsim::cli_test;

namespace {
const std::string kData = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/cluster/";
}

TEST_CASE("fabricsim run on a cluster scenario prints the jobs side by side and writes them to the JSON") {
  const fs::path dir = cli_test::scratch_dir("cluster_run");
  auto r = cli_test::run_in(dir, cli_test::fabricsim("run " + cli_test::quoted(kData + "two_jobs_2to1.json") +
                                                     " --json r.json --report r.html"));
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("jobs (step time together on the shared fabric vs alone on the same GPUs)") != std::string::npos);
  CHECK(r.out.find("leaf.r0.0 -> spine.0") != std::string::npos);
  auto j = nlohmann::json::parse(cli_test::slurp(dir / "r.json"));
  REQUIRE(j["jobs"].size() == 2);
  for (const auto& x : j["jobs"]) {
    CHECK(x["slowdown"].get<double>() > 1.99);
    CHECK(x["slowdown"].get<double>() < 2.01);
  }
  CHECK(j["shared_links"].size() == 4);
  const std::string html = cli_test::slurp(dir / "r.html");
  CHECK(html.find("<h2>Jobs</h2>") != std::string::npos);
  CHECK(html.find("aria-label=\"step time per job, alone and together\"") != std::string::npos);
  // Same inputs, byte-identical result JSON.
  auto r2 = cli_test::run_in(dir, cli_test::fabricsim("run " + cli_test::quoted(kData + "two_jobs_2to1.json") +
                                                      " --json r2.json"));
  REQUIRE(r2.rc == 0);
  CHECK(cli_test::slurp(dir / "r.json") == cli_test::slurp(dir / "r2.json"));
}

TEST_CASE("fabricsim plan --placements ranks placement policies by total throughput") {
  const fs::path dir = cli_test::scratch_dir("cluster_plan");
  auto r = cli_test::run_in(dir, cli_test::fabricsim("plan " + cli_test::quoted(kData + "dp_placements.json") +
                                                     " --placements packed,spread,random\\(3\\) -q"));
  REQUIRE(r.rc == 0);
  std::stringstream ss(r.out);
  std::string line;
  std::vector<double> totals;
  std::vector<std::string> names;
  while (std::getline(ss, line)) {
    std::stringstream ls(line);
    int rank = 0;
    std::string name;
    double total = 0;
    if (ls >> rank >> name >> total) {
      names.push_back(name);
      totals.push_back(total);
    }
  }
  REQUIRE(totals.size() == 3);
  CHECK(totals[0] >= totals[1]);
  CHECK(totals[1] >= totals[2]);
  // Packed keeps each 8-GPU job inside one 2:1 rack; spread sends its all-reduce over the uplinks.
  CHECK(names[0] == "packed");
  CHECK(totals[0] > totals[2]);
  // A bad policy is one clear error line, exit 2.
  auto bad = cli_test::run_in(dir, cli_test::fabricsim("plan " + cli_test::quoted(kData + "dp_placements.json") +
                                                       " --placements tightest"));
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("--placements") != std::string::npos);
}
