// `fabricsim run --trace FILE|PREFIX --topology NAME` end to end: every command docs/workloads.md shows in
// "Running other tools' workloads" runs (positive step, never shorter than the longest compute op the file
// states), a Chakra trace with known compute times and one collective gives the hand-computed step, two
// independent chains overlap, and a cycle is a one-line error naming the node ids and the file.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "../workloads/chakra_et_encode.hpp"

namespace {

namespace cli_test = fabricsim::cli_test;
namespace fs = std::filesystem;
using cli_test::Run;

const std::string kSrc = FABRICSIM_SOURCE_DIR;

fs::path scratch() {
  static const fs::path d = cli_test::scratch_dir("import_cli");
  return d;
}

// Runs `fabricsim <args>` from the repository root (the documented paths are relative to it); stdout and
// stderr go to the scratch directory, never into the source tree.
Run run_root(const std::string& args) { return cli_test::run_from_source(scratch(), args); }

double step_s(const std::string& args) {
  const fs::path out = scratch() / "r.json";
  fs::remove(out);
  Run r = run_root(args + " -q --json " + cli_test::quoted(out.string()));
  REQUIRE_MESSAGE(r.rc == 0, args << "\n" << r.err);
  auto j = nlohmann::json::parse(cli_test::slurp(out));
  return j.at("iteration_s").get<double>();
}

void write(const fs::path& p, const std::string& text) { cli_test::write_file(p, text); }

// The longest compute op a workload file states, in seconds (Chakra: microseconds; text: ns columns 2, 5, 8).
double longest_compute_s(const std::string& cmd) {
  std::smatch m;
  REQUIRE(std::regex_search(cmd, m, std::regex("--trace (\\S+)")));
  const std::string path = kSrc + "/" + m[1].str();
  double best = 0;
  if (path.size() > 4 && path.substr(path.size() - 4) == ".txt") {
    std::ifstream f(path);
    std::string line;
    int n = 0;
    while (std::getline(f, line))
      if (++n > 2) {
        std::istringstream ls(line);
        std::vector<std::string> t;
        std::string s;
        while (ls >> s) t.push_back(s);
        for (std::size_t k : {2, 5, 8})
          if (t.size() > k) best = std::max(best, std::atof(t[k].c_str()) * 1e-9);
      }
    // MICRO workloads run only their collectives (ASTRA-sim 1.0 iterate_micro_benchmark).
    std::ifstream g(path);
    std::getline(g, line);
    if (line.rfind("MICRO", 0) == 0) best = 0;
    return best;
  }
  // Chakra JSON rank files: "runtime" in microseconds (the .et files' durations are checked in
  // tests/workloads: the longest PyTorch op is milliseconds long).
  for (const auto& p : {path, path + ".0.json"})
    if (fs::is_regular_file(p) && p.size() > 5 && p.substr(p.size() - 5) == ".json") {
      std::ifstream f(p);
      std::stringstream ss;
      ss << f.rdbuf();
      const std::string text = ss.str();
      if (text.find("workload_graph") == std::string::npos) continue;
      auto j = nlohmann::json::parse(text);
      for (const auto& n : j["workload_graph"])
        if (n.contains("runtime")) best = std::max(best, n["runtime"].get<double>() * 1e-6);
    }
  return best;
}

}  // namespace

TEST_CASE("every import command in docs/workloads.md runs and gives a positive step no shorter than its longest op") {
  std::ifstream doc(kSrc + "/docs/workloads.md");
  REQUIRE(doc.good());
  std::string line;
  std::vector<std::pair<std::string, double>> cmds;  // command, step time the docs state (ms; 0 = none)
  const std::regex inline_cmd("`fabricsim (run --trace [^`]*)`( \\| ([0-9.]+) ms \\|)?");
  while (std::getline(doc, line)) {
    if (line.rfind("fabricsim run --trace ", 0) == 0) cmds.push_back({line.substr(10), 0});
    for (std::sregex_iterator it(line.begin(), line.end(), inline_cmd), end; it != end; ++it)
      cmds.push_back({(*it)[1].str(), (*it)[3].matched ? std::stod((*it)[3].str()) : 0.0});
  }
  CHECK(cmds.size() >= 20);
  int stated = 0;
  for (const auto& [c, doc_ms] : cmds) {
    CAPTURE(c);
    const double s = step_s(c);
    CHECK(s > 0);
    CHECK(std::isfinite(s));
    CHECK(s >= longest_compute_s(c));
    if (doc_ms > 0) {  // the table's figure is this command's output, rounded to 3 significant digits
      ++stated;
      CHECK(s * 1e3 == doctest::Approx(doc_ms).epsilon(0.01));
    }
  }
  CHECK(stated >= 18);
}

TEST_CASE("a Chakra trace with known compute times and one collective gives the hand-computed step") {
  const fs::path d = scratch();
  // Minimal example: 100 us + all-reduce + 50 us; the 80 us op with no deps overlaps.
  const double full = step_s("run --trace examples/imports/minimal --topology dgx-h100");
  // The same all-reduce alone.
  for (int r = 0; r < 2; ++r)
    write(d / ("ar." + std::to_string(r) + ".json"),
          R"({"workload_graph":[{"Id":2,"Name":"grad_allreduce","NodeType":7,"comm_type":0,"comm_size":1048576}]})");
  const double ar = step_s("run --trace " + cli_test::quoted((d / "ar").string()) + " --topology dgx-h100");
  CHECK(ar > 0);
  CHECK(full == doctest::Approx(100e-6 + ar + 50e-6).epsilon(1e-9));
  // Two streams: independent chains of 100 + 20 us and 90 us, joined by a 10 us op: 130 us, not 220 us.
  for (int r = 0; r < 1; ++r)
    write(d / "two.0.json", R"({"workload_graph":[
      {"Id":1,"Name":"a1","NodeType":4,"runtime":100},{"Id":2,"Name":"a2","NodeType":4,"runtime":20,"data_deps":[1]},
      {"Id":3,"Name":"b1","NodeType":4,"runtime":90},
      {"Id":4,"Name":"join","NodeType":4,"runtime":10,"data_deps":[2],"ctrl_deps":[3]}]})");
  CHECK(step_s("run --trace " + cli_test::quoted((d / "two").string()) + " --topology dgx-h100") ==
        doctest::Approx(130e-6).epsilon(1e-12));
}

TEST_CASE("one rank's file of a Chakra rank-file set is refused with the prefix to give, not run as a one-rank job") {
  // ASTRA-sim's 4-rank all-to-all: all_to_all.0.et ... all_to_all.3.et. Given the rank 0 file alone, the import
  // once ran a one-rank job whose all-to-all took no time (step 0.000 ms, exit 0).
  const std::string dir = "tests/data/foreign-workloads/chakra-et/astra-sim-microbench-all_to_all-4npus_1MB/";
  Run r = run_root("run --trace " + dir + "all_to_all.0.et --topology dgx-h100 -q");
  CHECK(r.rc == 2);
  CHECK(r.err.find(dir + "all_to_all.0.et: one of the 4 rank files all_to_all.0.et ... all_to_all.3.et beside it: give "
                   "their prefix " + dir + "all_to_all to run all 4 ranks") != std::string::npos);
  CHECK(r.err.find('\n') == r.err.size() - 1);  // one line
  r = run_root("run --trace " + dir + "all_to_all.2.et --topology dgx-h100 -q");
  CHECK(r.rc == 2);
  CHECK(r.err.find("give their prefix " + dir + "all_to_all to run all 4 ranks") != std::string::npos);
  // The prefix runs the 4 ranks: a positive step. npus says the one file is meant to run on that many ranks.
  const double all = step_s("run --trace " + dir + "all_to_all --topology dgx-h100");
  CHECK(all > 0);
  CHECK(step_s("run --trace " + dir + "all_to_all.0.et --topology dgx-h100 --param npus=4") > 0);
  // A lone rank file (no rank 1 beside it) still runs as it is.
  const fs::path d = scratch() / "lone";
  fs::create_directories(d);
  write(d / "solo.0.json", R"({"workload_graph":[{"Id":1,"Name":"g","NodeType":4,"runtime":7}]})");
  CHECK(step_s("run --trace " + cli_test::quoted((d / "solo.0.json").string()) + " --topology dgx-h100") ==
        doctest::Approx(7e-6).epsilon(1e-9));
}

TEST_CASE("a cycle or an unmatched collective in a Chakra trace is a one-line error with node ids, not a hang") {
  const fs::path d = scratch();
  write(d / "cyc.0.json", R"({"workload_graph":[
    {"Id":11,"Name":"a","NodeType":4,"runtime":1,"data_deps":[13]},
    {"Id":12,"Name":"b","NodeType":4,"runtime":1,"data_deps":[11]},
    {"Id":13,"Name":"c","NodeType":4,"runtime":1,"data_deps":[12]}]})");
  Run r = run_root("run --trace " + cli_test::quoted((d / "cyc").string()) + " --topology dgx-h100 -q");
  CHECK(r.rc == 2);
  CHECK(r.err.find("cyc.0.json") != std::string::npos);
  CHECK(r.err.find("11 -> 12 -> 13 -> 11") != std::string::npos);
  write(d / "un.0.json", R"({"workload_graph":[{"Id":4,"Name":"ar","NodeType":7,"comm_type":0,"comm_size":64}]})");
  write(d / "un.1.json", R"({"workload_graph":[{"Id":4,"Name":"g","NodeType":4,"runtime":1}]})");
  r = run_root("run --trace " + cli_test::quoted((d / "un").string()) + " --topology dgx-h100 -q");
  CHECK(r.rc == 2);
  CHECK(r.err.find("un.0.json: node 4") != std::string::npos);
  // A server preset grows into a superpod for a bigger workload; --trace needs --topology.
  r = run_root("run --trace examples/imports/transformer.txt --topology dgx-h100 --json " +
               cli_test::quoted((scratch() / "t.json").string()));
  CHECK(r.rc == 0);
  CHECK(r.err.find("\"nodes\":2") != std::string::npos);
  CHECK(run_root("run --trace examples/imports/transformer.txt -q").rc == 2);
  // --param also sets the topology's parameters (as for the other imports); too few GPUs names what the topology
  // has and the nodes that fit (16 ranks in transformer.txt's header).
  r = run_root("run --trace examples/imports/transformer.txt --topology superpod --param nodes=1 -q");
  CHECK(r.rc == 2);
  CHECK(r.err == "fabricsim run: error: examples/imports/transformer.txt: the workload has 16 ranks but topology "
                 "superpod (--param nodes=1) has 8 GPUs; --param nodes=2 (8 GPUs per node) fits the 16 ranks\n");
  r = run_root("run --trace examples/imports/transformer.txt --topology superpod --param nodes=2 --param node=dgx-a100 "
               "--json " + cli_test::quoted((scratch() / "t2.json").string()));
  CHECK(r.rc == 0);
  CHECK(r.err.find(R"("params":{"node":"dgx-a100","nodes":2})") != std::string::npos);
  // The same in a scenario file, in its own terms; a rack preset points to the superpod of racks.
  write(scratch() / "small.json", R"({"topology": {"preset": "superpod", "params": {"nodes": 1}},
    "workload": {"astra": ")" + kSrc + R"(/examples/imports/transformer.txt"}})");
  r = run_root("run " + cli_test::quoted((scratch() / "small.json").string()) + " -q");
  CHECK(r.rc == 2);
  CHECK(r.err.find("transformer.txt: workload needs 16 GPUs but topology superpod (nodes 1) has 8 GPUs; \"nodes\": 2 in "
                   "/topology/params (8 GPUs per node) fits the 16 ranks\n") != std::string::npos);
  write(scratch() / "server.json", R"({"topology": {"preset": "dgx-h100"},
    "workload": {"astra": ")" + kSrc + R"(/examples/imports/transformer.txt"}})");
  r = run_root("run " + cli_test::quoted((scratch() / "server.json").string()) + " -q");
  CHECK(r.rc == 2);
  CHECK(r.err.find("transformer.txt: workload needs 16 GPUs but topology dgx-h100 has 8 GPUs; \"topology\": {\"preset\": "
                   "\"superpod\", \"params\": {\"node\": \"dgx-h100\", \"nodes\": 2}} (8 GPUs per node) fits the 16 ranks\n") !=
        std::string::npos);
}

TEST_CASE("a trace that states no samples per step or model FLOPs: n/a in the summary, left out of the result JSON") {
  // An ASTRA-sim text workload gives compute times, not FLOPs, and no batch.
  const std::string json_path = (scratch() / "astra.json").string();
  Run r = run_root("run --trace examples/imports/transformer.txt --topology dgx-h100 -q --json " + cli_test::quoted(json_path));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.out.find("throughput   samples/s n/a (the workload states no samples per step), TFLOP/s per GPU n/a (the "
                   "workload states no model FLOPs and its compute ops carry none)\n") != std::string::npos);
  CHECK(r.out.find("0.0 samples/s") == std::string::npos);
  const auto j = nlohmann::json::parse(cli_test::slurp(json_path));
  CHECK_FALSE(j.contains("samples_per_s"));
  CHECK_FALSE(j.contains("tflops_per_gpu"));
  CHECK(j.contains("tokens_per_s"));
  CHECK(j.at("iteration_s").get<double>() > 0);
  // A generator states both.
  r = run_root("run examples/workloads/gpt3-175b-1024gpu.json -q --json " + cli_test::quoted(json_path));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.out.find(" samples/s, ") != std::string::npos);
  const auto g = nlohmann::json::parse(cli_test::slurp(json_path));
  CHECK(g.at("samples_per_s").get<double>() > 0);
  CHECK(g.at("tflops_per_gpu").get<double>() > 0);
}

TEST_CASE("the minimal trace as .et and as chakra_jsonizer output gives the Chakra JSON step; two streams overlap in .et") {
  using fabricsim::et_test::EtNode;
  const fs::path d = scratch();
  const double json = step_s("run --trace examples/imports/minimal --topology dgx-h100");
  CHECK(step_s("run --trace examples/imports/et/minimal --topology dgx-h100") == json);
  const std::vector<EtNode> minimal = {{1, "gemm", 4, {}, {}, 100, {}, {}},
                                       {2, "grad_allreduce", 7, {1}, {}, 0, {{"comm_type", 0}, {"comm_size", 1048576}}, {}},
                                       {3, "optimizer", 4, {2}, {}, 50, {}, {}},
                                       {4, "data_loader", 4, {}, {}, 80, {{"is_cpu_op", 1}}, {}}};
  for (int r = 0; r < 2; ++r) fabricsim::et_test::write_jsonizer((d / ("mj." + std::to_string(r) + ".json")).string(), minimal);
  CHECK(step_s("run --trace " + cli_test::quoted((d / "mj").string()) + " --topology dgx-h100") == json);
  // Independent chains of 100 + 20 us and 90 us joined by a 10 us op: 130 us (FIFO in file order would be 220 us).
  fabricsim::et_test::write_et((d / "two.0.et").string(), {{1, "a1", 4, {}, {}, 100, {}, {}},
                                                           {3, "b1", 4, {}, {}, 90, {}, {}},
                                                           {2, "a2", 4, {1}, {}, 20, {}, {}},
                                                           {4, "join", 4, {2}, {3}, 10, {}, {}}});
  CHECK(step_s("run --trace " + cli_test::quoted((d / "two").string()) + " --topology dgx-h100") ==
        doctest::Approx(130e-6).epsilon(1e-12));
}

TEST_CASE("ranks waiting on each other in a Chakra .et, and an ASTRA-sim group that cannot be formed, stop with the file and location") {
  using fabricsim::et_test::EtNode;
  const fs::path d = scratch();
  const std::vector<std::pair<std::string, std::int64_t>> ar = {{"comm_type", 0}, {"comm_size", 4096}};
  fabricsim::et_test::write_et((d / "dl.0.et").string(), {{1, "x", 7, {}, {}, 0, ar, {{"pg_name", "a"}}},
                                                          {2, "y", 7, {1}, {}, 0, ar, {{"pg_name", "b"}}}});
  fabricsim::et_test::write_et((d / "dl.1.et").string(), {{1, "y", 7, {}, {}, 0, ar, {{"pg_name", "b"}}},
                                                          {2, "x", 7, {1}, {}, 0, ar, {{"pg_name", "a"}}}});
  Run r = run_root("run --trace " + cli_test::quoted((d / "dl").string()) + " --topology dgx-h100 -q");
  CHECK(r.rc == 2);
  CHECK(r.err.find("dl.0.et: node 1") != std::string::npos);
  CHECK(r.err.find("dl.1.et: node 1") != std::string::npos);
  write(d / "tp3.txt", "HYBRID_TRANSFORMER model_parallel_NPU_group: 3\n1\nq -1 1 ALLREDUCE 8 1 NONE 0 1 NONE 0 1\n");
  r = run_root("run --trace " + cli_test::quoted((d / "tp3.txt").string()) + " --topology dgx-h100 --param npus=8 -q");
  CHECK(r.rc == 2);
  CHECK(r.err.find("tp3.txt:1") != std::string::npos);
}

TEST_CASE("every workload in tests/data/foreign-workloads/manifest.json has a command in docs/workloads.md (which the first test runs)") {
  const auto manifest = nlohmann::json::parse(cli_test::slurp(kSrc + "/tests/data/foreign-workloads/manifest.json"));
  const std::string doc = cli_test::slurp(kSrc + "/docs/workloads.md");
  int counted = 0;
  for (const auto& w : manifest.at("workloads")) {
    const std::string input = w.at("input").get<std::string>(), fmt = w.at("format").get<std::string>();
    CAPTURE(input);
    if (fmt == "pytorch-et") continue;  // not a Chakra trace (refusal checked below); the manifest does not count it
    ++counted;
    // The docs run the prefix, or the one file when the workload is a single file.
    const std::string base = "--trace tests/data/foreign-workloads/" + input;
    CHECK((doc.find(base + " ") != std::string::npos || doc.find(base + ".0.json ") != std::string::npos));
    // A text workload's rank count (the manifest's, where the file does not state it) is what the command passes.
    const auto pos = doc.find(base);
    if (pos == std::string::npos || fmt.rfind("chakra", 0) == 0) continue;
    const std::string cmd = doc.substr(pos, doc.find('`', pos) - pos);
    const int ranks = w.at("ranks").get<int>();
    if (cmd.find("--param npus=") != std::string::npos)
      CHECK(cmd.find("--param npus=" + std::to_string(ranks)) != std::string::npos);
  }
  CHECK(counted == 18);
  Run r = run_root("run --trace tests/data/foreign-workloads/pytorch-et/chakra-unit-test/1.0.2-chakra.0.0.4.json --topology dgx-h100 -q");
  CHECK(r.rc == 2);
  CHECK(r.err.find("chakra_converter") != std::string::npos);
}
