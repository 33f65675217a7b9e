// `fabricsim run` and `fabricsim plan --placements` on cluster scenarios (docs/workloads.md "Cluster
// scenarios"): the commands the docs show, with their printed tables checked against the result JSON.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
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

namespace {
// The CSV's rows as column name -> text.
std::vector<std::map<std::string, std::string>> csv_rows(const std::string& text) {
  std::vector<std::map<std::string, std::string>> rows;
  std::stringstream ss(text);
  std::string line;
  std::vector<std::string> header;
  while (std::getline(ss, line)) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    std::string c;
    while (std::getline(ls, c, ',')) cells.push_back(c);
    if (header.empty()) {
      header = cells;
      continue;
    }
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return rows;
}
}  // namespace

TEST_CASE("fabricsim sweep over the two-job 100k-GPU scenario scaled to 256 GPUs: two placements and one CSV under mpirun") {
  // bench/cluster_100k_sweep.json runs bench/cluster_100k.json at two placements, one independent cluster run per
  // point (docs/performance.md shows it under mpirun, one point per rank). The same sweep file here, over the same
  // scenario with each job 384x smaller (TP 8, PP 8, DP 2: 128 GPUs and 16 sequences, 8 micro-batches per replica
  // as in the bench) on 32 DGX H100 of a 3-tier radix-16 fat tree.
  const std::string bench = std::string(FABRICSIM_SOURCE_DIR) + "/bench/";
  const fs::path dir = cli_test::scratch_dir("cluster_100k_sweep");
  auto s = nlohmann::json::parse(cli_test::slurp(bench + "cluster_100k.json"));
  REQUIRE(s["jobs"].size() == 2);
  s["topology"]["params"]["nodes"] = 32;
  s["topology"]["params"]["radix"] = 16;
  for (auto& j : s["jobs"]) {
    j["workload"]["params"]["world_size"] = 128;
    j["workload"]["params"]["global_batch_size"] = 16;
  }
  std::ofstream(dir / "cluster_100k.json") << s.dump(1);
  fs::copy_file(bench + "cluster_100k_sweep.json", dir / "cluster_100k_sweep.json");
  std::string shared_csv;
  for (const std::string model : {"engine", "shared"}) {
    fs::remove(dir / "cluster_100k.csv");
    auto r = cli_test::run_in(dir, cli_test::fabricsim("sweep cluster_100k_sweep.json --comm-model " + model));
    INFO(model << ": " << r.err);
    REQUIRE(r.rc == 0);
    CHECK(r.err.find("(2 ok, 0 do not fit in GPU memory, 0 failed)") != std::string::npos);
    const std::string text = cli_test::slurp(dir / "cluster_100k.csv");
    const auto rows = csv_rows(text);
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].at("label") == "a-packed-b-spread");
    CHECK(rows[1].at("label") == "both-spread");
    for (const auto& row : rows) {
      CHECK(row.at("gpus") == "256");
      for (const char* job : {"a", "b"}) {
        const double step = std::stod(row.at(std::string("job.") + job + ".iteration_s"));
        CHECK(step > 1.0);  // 8 micro-batches of Llama-3-70B through 8 stages: seconds
        CHECK(step < 10.0);
        if (model == "engine") CHECK(row.at(std::string("job.") + job + ".slowdown") == "1");
      }
    }
    // Packed beside spread keeps the jobs' traffic apart; both spread over the racks, their links meet.
    CHECK(rows[0].at("cluster.shared_link_directions") == "0");
    CHECK(std::stod(rows[1].at("cluster.shared_link_directions")) > 0);
    if (model == "shared") shared_csv = text;
  }
  // MPI: the points dealt to two ranks give the same file.
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    MESSAGE("SKIPPED: mpirun not found; the MPI sweep was not run");
  } else {
    fs::remove(dir / "cluster_100k.csv");
    // Open MPI's own allocations are reported as leaks by LeakSanitizer in the sanitizer build (its plugins'
    // strdup'ed strings); the same sweep without MPI ran above with leak detection on.
    auto mpi = cli_test::run_in(dir, "ASAN_OPTIONS=detect_leaks=0 mpirun --allow-run-as-root --oversubscribe -np 2 " +
                                         cli_test::fabricsim("sweep cluster_100k_sweep.json --comm-model shared"));
    if (mpi.err.find("on 2 process(es)") == std::string::npos) {
      MESSAGE("SKIPPED: fabricsim was built without MPI: " << mpi.err);
    } else {
      CHECK(mpi.rc == 0);
      CHECK(cli_test::slurp(dir / "cluster_100k.csv") == shared_csv);
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("a cluster of jobs that state their samples sums them (not n/a); a job without them keeps n/a") {
  const fs::path dir = cli_test::scratch_dir("cluster_samples");
  auto r = cli_test::run_in(dir, cli_test::fabricsim("run " + cli_test::quoted(kData + "dp_placements.json") + " -q --json r.json"));
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(cli_test::slurp(dir / "r.json"));
  REQUIRE(j.contains("samples_per_s"));
  double sum = 0;
  for (const auto& x : j["jobs"]) sum += x["samples_per_s"].get<double>();
  CHECK(sum > 0);
  CHECK(j["samples_per_s"].get<double>() == doctest::Approx(sum).epsilon(1e-12));
  CHECK(r.out.find("throughput   samples/s n/a") == std::string::npos);
  auto t = cli_test::run_in(dir, cli_test::fabricsim("run " + cli_test::quoted(kData + "two_jobs_2to1.json") + " -q --json t.json"));
  REQUIRE(t.rc == 0);
  CHECK(t.out.find("throughput   samples/s n/a") != std::string::npos);
  CHECK(!nlohmann::json::parse(cli_test::slurp(dir / "t.json")).contains("samples_per_s"));
}
