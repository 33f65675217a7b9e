// `fabricsim coll --nccl-tests FILE` writes its sweep as an nccl-tests log; `fabricsim validate` reads it back
// to the same collective, ranks, hosts and times, and re-simulating it on the same topology and calibration
// reproduces those times (issue 23: coll's own output readable by validate).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "validate/nccl_log.hpp"

namespace fs = std::filesystem;
namespace cli_test = fabricsim::cli_test;

namespace {

// size -> time (us) of the rows `fabricsim coll` printed.
std::map<std::uint64_t, double> printed_rows(const std::string& out) {
  std::map<std::uint64_t, double> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::uint64_t size = 0, count = 0;
    std::string type, redop;
    int root = 0;
    double time = 0;
    if (ls >> size >> count >> type >> redop >> root >> time) rows[size] = time;
  }
  return rows;
}

}  // namespace

TEST_CASE("coll --nccl-tests writes a log that validate reads back to the same numbers") {
  const fs::path d = cli_test::scratch_dir("nccl_roundtrip");
  for (const char* op : {"all_reduce", "all_gather"}) {
    CAPTURE(op);
    const std::string base = std::string("coll --topology dgx-h100 --calibration default --op ") + op + " -b 1M -e 64M";
    cli_test::Run c = cli_test::run_in(d, cli_test::fabricsim(base + " --nccl-tests coll.txt"));
    REQUIRE_MESSAGE(c.rc == 0, c.err);
    const auto printed = printed_rows(c.out);
    REQUIRE(printed.size() == 7);
    // The log parses as nccl-tests output with coll's op, ranks, host and printed times.
    const auto ms = fabricsim::validate::parse_nccl_tests_text(cli_test::slurp(d / "coll.txt"), "coll.txt");
    REQUIRE(ms.size() == 1);
    CHECK(ms[0].op == op);
    CHECK(ms[0].nranks == 8);
    CHECK(ms[0].num_nodes == 1);
    REQUIRE(ms[0].rows.size() == printed.size());
    for (const auto& r : ms[0].rows) {
      CAPTURE(r.size_bytes);
      REQUIRE(printed.count(r.size_bytes));
      CHECK(r.oop.time_us == printed.at(r.size_bytes));
      CHECK(r.ip.time_us == printed.at(r.size_bytes));
    }
    // validate on the same topology and calibration reproduces the times, up to the log's 2-decimal rounding.
    cli_test::Run v = cli_test::run_in(d, cli_test::fabricsim("validate --topology dgx-h100 --calibration default --json r.json coll.txt"));
    REQUIRE_MESSAGE(v.rc == 0, v.err);
    const auto j = nlohmann::json::parse(cli_test::slurp(d / "r.json"));
    REQUIRE(j["logs"].size() == 1);
    const auto& pts = j["logs"][0]["points"];
    REQUIRE(pts.size() == printed.size());
    for (const auto& p : pts) {
      const double measured_us = p["measured_time_s"].get<double>() * 1e6;
      CHECK(measured_us == doctest::Approx(printed.at(p["size_bytes"].get<std::uint64_t>())).epsilon(1e-12));
      // A time printed with 2 decimals is within 0.005 us of the simulated one.
      CHECK(std::fabs(p["simulated_time_s"].get<double>() * 1e6 - measured_us) <= 0.005 + 1e-9);
    }
  }
  // What the text layout cannot carry is refused, and nothing is written.
  cli_test::Run a = cli_test::run_in(
      d, cli_test::fabricsim("coll --topology dgx-h100 --op all_reduce -b 1M --algo ring --nccl-tests forced.txt"));
  CHECK(a.rc == 2);
  CHECK(a.err.find("--nccl-tests: an nccl-tests log does not record a forced --algo / --proto") != std::string::npos);
  CHECK(!fs::exists(d / "forced.txt"));
  cli_test::Run b = cli_test::run_in(d, cli_test::fabricsim("coll --topology dgx-h100 --op broadcast -b 1M --nccl-tests b.txt"));
  CHECK(b.rc == 2);
  CHECK(b.err.find("--iters N") != std::string::npos);
  fs::remove_all(d);
}
