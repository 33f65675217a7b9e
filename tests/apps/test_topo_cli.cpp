// `fabricsim topo` end to end through the built binary: exit codes, one-line errors, outputs.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "cli_test_util.hpp"

namespace {

namespace cli_test = fabricsim::cli_test;

using cli_test::Run;
using cli_test::slurp;

// One scratch directory for this test program (exports written by one call are read by the next).
std::filesystem::path scratch() {
  static const std::filesystem::path d = cli_test::scratch_dir("topo_cli");
  return d;
}

Run run(const std::string& args) { return cli_test::run_in(scratch(), cli_test::fabricsim("topo " + args)); }

std::string data(const std::string& f) { return std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/topologies/" + f; }

std::string q(const std::string& s) { return cli_test::quoted(s); }

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("fabricsim topo dgx-h100 prints the summary") {
  Run r = run("dgx-h100");
  CHECK(r.rc == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("topology: dgx-h100") != std::string::npos);
  CHECK(r.out.find("GPUs: 8 on 1 host(s)") != std::string::npos);
  CHECK(r.out.find("nvlink 32 = 144 physical") != std::string::npos);
  CHECK(r.out.find("per-GPU NVLink bandwidth: 450.00 GB/s") != std::string::npos);
  CHECK(r.out.find("per-GPU network (NIC) bandwidth: 50.00 GB/s") != std::string::npos);
  CHECK(r.out.find("bisection bandwidth: 1.86 TB/s") != std::string::npos);
  CHECK(r.out.find("diameter: 2 hops") != std::string::npos);
  // --topology is accepted as well and gives identical output.
  Run t = run("--topology dgx-h100");
  CHECK(t.rc == 0);
  CHECK(t.out == r.out);
}

TEST_CASE("fabricsim topo superpod of dgx-a100 with parameters") {
  Run r = run("superpod --param nodes=32 --param node=dgx-a100");
  CHECK(r.rc == 0);
  CHECK(r.out.find("GPUs: 256 on 32 host(s)") != std::string::npos);
  CHECK(r.out.find("bisection bandwidth: 3.20 TB/s") != std::string::npos);
}

TEST_CASE("fabricsim topo --list and --help") {
  Run r = run("--list");
  CHECK(r.rc == 0);
  for (const char* p : {"dgx-a100", "dgx-h100", "dgx-b200", "dgx1-v100", "pcie-server", "gb200-nvl72",
                        "nvlink-switch-system", "superpod", "oversubscription", "radix"})
    CHECK(r.out.find(p) != std::string::npos);
  Run h = run("--help");
  CHECK(h.rc == 0);
  CHECK(h.out.find("--export") != std::string::npos);
}

TEST_CASE("export, DOT and JSON summary; the export re-imports to the same summary") {
  auto dir = scratch();
  std::string exp = (dir / "pod.json").string(), dot = (dir / "pod.dot").string(), sj = (dir / "sum.json").string();
  Run r = run("superpod --param nodes=2 --export \"" + exp + "\" --dot \"" + dot + "\" --json \"" + sj + "\"");
  REQUIRE(r.rc == 0);
  CHECK(slurp(dot).rfind("graph \"superpod\"", 0) == 0);
  CHECK(slurp(sj).find("\"bisection_Bps\"") != std::string::npos);
  Run back = run("\"" + exp + "\"");
  CHECK(back.rc == 0);
  CHECK(back.out == r.out);
}

TEST_CASE("bad inputs: exit 2, one line on stderr naming the problem, no output file") {
  auto dir = scratch();
  std::string exp = (dir / "never.json").string();
  std::filesystem::remove(exp);
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {q(data("bad_syntax.json")), "bad_syntax.json:5:"},
      {q(data("bad_unknown_key.json")), "/links/2/colour"},
      {q(data("bad_dangling_link.json")), "/links/6/b"},
      {q(data("bad_disconnected_gpu.json")), "/nodes/7"},
      {q(data("bad_zero_bandwidth.json")), "/links/4/bandwidth"},
      {"dgx-h100 --param nodes=4", "--param nodes"},
      {"superpod --param tiers=5", "--param tiers"},
      {"no-such-topology", "a preset name"},
      {"dgx-h100 --frobnicate", "--frobnicate"},
  };
  // An --dot into a missing directory fails before the --export is written.
  {
    Run r = run("dgx-h100 --dot /nonexistent-dir/x.dot --export \"" + exp + "\"");
    CHECK(r.rc == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find("--dot") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(exp));
  }
  for (const auto& c : cases) {
    CAPTURE(c.args);
    Run r = run(c.args + " --export \"" + exp + "\"");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(lines(r.err) == 1);
    CHECK(r.err.rfind("fabricsim topo: error: ", 0) == 0);
    CHECK(r.err.find(c.expect) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(exp));
  }
}
