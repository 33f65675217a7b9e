// `fabricsim topo` end to end through the built binary: exit codes, one-line errors, outputs.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace {

struct Run {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::filesystem::path scratch() {
  auto d = std::filesystem::temp_directory_path() / ("fabricsim_topo_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

Run run(const std::string& args) {
  auto dir = scratch();
  std::string out = (dir / "stdout.txt").string(), err = (dir / "stderr.txt").string();
  std::string cmd = std::string("\"") + FABRICSIM_BINARY + "\" topo " + args + " >\"" + out + "\" 2>\"" + err + "\"";
  int status = std::system(cmd.c_str());
  Run r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string data(const std::string& f) { return std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/topologies/" + f; }

// "\"<s>\"" (built with append: GCC 12 warns falsely on literal + string temporaries).
std::string q(const std::string& s) {
  std::string r = "\"";
  r += s;
  r += '"';
  return r;
}

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
