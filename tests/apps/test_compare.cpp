// fabricsim compare: results side by side, the step-time delta split by breakdown category (adds up to the
// delta) and by link class, on two real runs; sweep CSV rows as columns; bad inputs name the file.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "cli_test_util.hpp"
#include "replay/outputs_compare.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"

using namespace fabricsim;
namespace cli_test = fabricsim::cli_test;
using cli_test::Run;
using cli_test::run_in;
using cli_test::scratch_dir;
using cli_test::slurp;
namespace fs = std::filesystem;

namespace {
std::string scenario(int tp, int pp) { return cli_test::small_gpt_scenario(2, 16, tp, pp); }
std::string ms(double s, const char* f = "%+.3f ms") {
  char b[64];
  std::snprintf(b, sizeof b, f, s * 1e3);
  return b;
}
}  // namespace

TEST_CASE("compare: two runs side by side, the step-time delta split by category and link class") {
  const fs::path d = scratch_dir("compare");
  std::ofstream(d / "tp4pp2.json") << scenario(4, 2);
  std::ofstream(d / "tp8pp1.json") << scenario(8, 1);
  for (const char* s : {"tp4pp2", "tp8pp1"}) {
    const Run r = run_in(d, cli_test::fabricsim(std::string("run ") + s + ".json --quiet --json r_" + s + ".json"));
    REQUIRE_MESSAGE(r.rc == 0, r.err);
  }
  const Run c = run_in(d, cli_test::fabricsim("compare r_tp4pp2.json r_tp8pp1.json"));
  REQUIRE_MESSAGE(c.rc == 0, c.err);
  const Json a = Json::parse(slurp(d / "r_tp4pp2.json")), b = Json::parse(slurp(d / "r_tp8pp1.json"));
  CHECK(c.out.find("[A] r_tp4pp2.json") != std::string::npos);
  CHECK(c.out.find("[B] r_tp8pp1.json") != std::string::npos);
  const double delta = b["iteration_s"].get<double>() - a["iteration_s"].get<double>();
  CHECK_MESSAGE(c.out.find("[B] - [A]: step time " + ms(delta)) != std::string::npos, c.out);
  CHECK(c.out.find("why the same") == std::string::npos);  // only for results that do not differ
  // The category with the largest change comes first, with its delta from the two result JSONs.
  auto cats = [](const Json& j) {
    std::map<std::string, double> m;
    m["compute"] = j["breakdown"]["compute_s"].get<double>();
    for (const auto& [k, v] : j["breakdown"]["exposed_comm_s"].items()) m["exposed " + k] = v.get<double>();
    m["bubble"] = j["breakdown"]["bubble_s"].get<double>();
    m["idle"] = j["breakdown"]["idle_s"].get<double>();
    return m;
  };
  auto ca = cats(a), cb = cats(b);
  std::string top;
  double top_v = -1, sum = 0;
  for (const auto& [k, v] : cb) ca.emplace(k, 0.0);
  for (const auto& [k, v] : ca) {
    double dv = (cb.count(k) ? cb[k] : 0) - v;
    sum += dv;
    if (std::abs(dv) > top_v) {
      top_v = std::abs(dv);
      top = k;
    }
  }
  CHECK(std::abs(sum - delta) < 1e-6);  // the breakdown adds up to the step time, so its deltas add up too
  const std::size_t split = c.out.find("by category (largest first):\n");
  REQUIRE(split != std::string::npos);
  const std::string first = c.out.substr(split + 29, c.out.find('\n', split + 29) - split - 29);
  CHECK_MESSAGE(first.find(top) != std::string::npos, first << " vs " << top);
  CHECK(first.find(ms((cb.count(top) ? cb[top] : 0) - ca[top])) != std::string::npos);
  // TP 8 keeps the tensor-parallel traffic on NVLink; TP 4 x PP 2 sends pipeline traffic over the NICs.
  CHECK(c.out.find("link classes (bytes carried per step, mean utilisation over the run):") != std::string::npos);
  CHECK(c.out.find("  NVLink ") != std::string::npos);
  CHECK(c.out.find("link classes that changed:") != std::string::npos);

  // A sweep CSV: each ok row a column labelled by its inputs; failed rows skipped.
  std::ofstream(d / "s.csv")
      << "point,label,status,error,gpus,iteration_s,samples_per_s,tokens_per_s,tflops_per_gpu,gpu_seconds_per_step,"
         "compute_s,exposed_tp_s,exposed_pp_s,exposed_dp_s,exposed_ep_s,exposed_all_to_all_s,exposed_other_s,"
         "exposed_comm_total_s,bubble_s,idle_s,input_hash\n"
         "0,small,ok,,8,0.010,100,0,50,0.08,0.006,0.002,0,0.001,0,0,0,0.003,0.001,0,0123456789abcdef\n"
         "1,broken,failed,no memory,,,,,,,,,,,,,,,,,0123456789abcdef\n"
         "2,large,ok,,16,0.008,200,0,40,0.128,0.006,0.001,0,0.0005,0,0,0,0.0015,0.0005,0,0123456789abcdef\n";
  const Run s = run_in(d, cli_test::fabricsim("compare s.csv"));
  REQUIRE_MESSAGE(s.rc == 0, s.err);
  CHECK(s.out.find("[A] s.csv: label=small") != std::string::npos);
  CHECK(s.out.find("[B] s.csv: label=large") != std::string::npos);
  CHECK(s.out.find("broken") == std::string::npos);
  CHECK(s.out.find("[B] - [A]: step time -2.000 ms (-20.0 %)") != std::string::npos);
  CHECK(s.out.find("    exposed tp                -1.000 ms") != std::string::npos);  // the largest change

  // Bad inputs: one line naming the file, exit 2.
  std::ofstream(d / "other.json") << R"({"gpus": 8})";
  const Run bad = run_in(d, cli_test::fabricsim("compare r_tp4pp2.json other.json"));
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("other.json") != std::string::npos);
  const Run one = run_in(d, cli_test::fabricsim("compare r_tp4pp2.json"));
  CHECK(one.rc == 2);
  CHECK(one.err.find("only one result") != std::string::npos);
  std::ofstream(d / "bad.csv") << "point,label,status\n0,x\n";
  const Run badcsv = run_in(d, cli_test::fabricsim("compare bad.csv r_tp4pp2.json"));
  CHECK(badcsv.rc == 2);
  CHECK(badcsv.err.find("bad.csv:1") != std::string::npos);
  // A negative figure in a result JSON (fuzzing, 2026-11-29: printed as a step of -1000 ms).
  {
    std::ifstream in(d / "r_tp4pp2.json");
    Json r = Json::parse(in);
    r["iteration_s"] = -1.0;
    std::ofstream(d / "neg.json") << r.dump();
    const Run n = run_in(d, cli_test::fabricsim("compare r_tp4pp2.json neg.json"));
    CHECK(n.rc == 2);
    CHECK_MESSAGE(n.err.find("neg.json: /iteration_s: a number >= 0") != std::string::npos, n.err);
  }
  // Keys compare does not read are still checked against docs/result.schema.json (accepted silently before, as
  // the second fuzzing pass found): an unknown key at any depth, or a value of another type, at its JSON path.
  {
    std::ifstream in(d / "r_tp4pp2.json");
    const Json r = Json::parse(in);
    struct Case {
      const char* pointer;
      Json value;
      std::string message;
    };
    const Case cases[] = {
        // (with the one suggestion an unknown name gets, sim/base/did_you_mean.hpp)
        {"/iteration_ms", 12.5, "unk.json: /iteration_ms: unknown key 'iteration_ms' (did you mean 'iteration_s'?) (known "
                                "keys in docs/result.schema.json: breakdown, calibration, comm_model, gpus,"},
        {"/breakdown/compute_z", 0.0, "unk.json: /breakdown/compute_z: unknown key 'compute_z' (did you mean 'compute_s'?) "
                                      "(known keys in docs/result.schema.json: bubble_s, compute_s, exposed_comm_s, "
                                      "exposed_comm_total_s, idle_s)"},
        {"/links/by_class/0/colour", "red", "unk.json: /links/by_class/0/colour: unknown key 'colour'"},
        {"/topology", 5, "unk.json: /topology: expected a string, found 5 (docs/result.schema.json)"},
        {"/schema_version", 2, "unk.json: /schema_version: expected 1, found 2 (docs/result.schema.json)"},
    };
    for (const auto& c : cases) {
      CAPTURE(c.pointer);
      Json u = r;
      u[Json::json_pointer(c.pointer)] = c.value;
      std::ofstream(d / "unk.json") << u.dump();
      const Run x = run_in(d, cli_test::fabricsim("compare r_tp4pp2.json unk.json"));
      CHECK(x.rc == 2);
      CHECK(x.out.empty());
      CHECK_MESSAGE(x.err.find(c.message) != std::string::npos, x.err);
      CHECK(std::count(x.err.begin(), x.err.end(), '\n') == 1);
    }
  }
  // A figure a sweep never writes (found by fuzzing: nan / inf / negative step times were printed as deltas).
  {
    std::ifstream in(d / "s.csv");
    std::string csv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t row = csv.find("\n2,large,ok,,16,0.008,");
    REQUIRE(row != std::string::npos);
    for (const char* v : {"nan", "inf", "-0.008"}) {
      CAPTURE(v);
      std::string bad_fig = csv;
      bad_fig.replace(row + std::string("\n2,large,ok,,16,").size(), 5, v);
      std::ofstream(d / "fig.csv") << bad_fig;
      const Run r = run_in(d, cli_test::fabricsim("compare fig.csv"));
      CHECK(r.rc == 2);
      CHECK(r.out.empty());
      CHECK_MESSAGE(r.err.find("fig.csv:4: column 'iteration_s': expected a finite number >= 0, got '" + std::string(v) + "'") !=
                        std::string::npos,
                    r.err);
    }
  }
  fs::remove_all(d);
}

TEST_CASE("compare: two results that do not differ say which inputs differ, what is equal and which links carry nothing") {
  // InfiniBand vs RoCE on 4 DGX H100: TP 8 inside the servers, the DP all-reduce over one leaf per rail.
  const fs::path d = scratch_dir("compare_same");
  for (const char* f : {"infiniband", "roce"}) {
    std::ofstream(d / (std::string(f) + ".json")) << R"({
  "topology": {"preset": "superpod", "params": {"nodes": 4, "node": "dgx-h100", "fabric": ")" << f << R"("}},
  "workload": {"generator": "gpt", "params": {"num_layers": 4, "hidden_size": 1024, "num_attention_heads": 16,
    "seq_length": 1024, "padded_vocab_size": 51200, "micro_batch_size": 1, "global_batch_size": 64,
    "tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 1, "recompute_granularity": "none"}}
})";
    const Run r = run_in(d, cli_test::fabricsim(std::string("run ") + f + ".json --quiet --json r_" + f + ".json"));
    REQUIRE_MESSAGE(r.rc == 0, r.err);
  }
  const Json a = Json::parse(slurp(d / "r_infiniband.json")), b = Json::parse(slurp(d / "r_roce.json"));
  REQUIRE(a["iteration_s"].get<double>() == b["iteration_s"].get<double>());
  // Which links carry traffic, from the result itself: none between switches (tier 2 and up).
  bool between_switches = false;
  for (const auto& e : a["links"]["by_class"]) between_switches = between_switches || (e["tier"].get<int>() >= 2 && e["bytes"].get<double>() > 0);
  REQUIRE(!between_switches);
  const Run c = run_in(d, cli_test::fabricsim("compare r_infiniband.json r_roce.json"));
  REQUIRE_MESSAGE(c.rc == 0, c.err);
  CHECK_MESSAGE(c.out.find("[B] - [A]: step time +0.000 ms (+0.0 %); by category (largest first):\n"
                           "  why the same: the inputs differ in topology_params fabric infiniband -> roce, "
                           "topology_params routing (not stated) -> hash and the step times are equal;\n"
                           "    every breakdown category is equal (to 0.001 ms); the links carrying traffic (") != std::string::npos,
                c.out);
  CHECK(c.out.find(") carry the same bytes at the same utilisation; no link between switches carries any\n") != std::string::npos);
  // The same result twice: the same inputs.
  const Run self = run_in(d, cli_test::fabricsim("compare r_roce.json r_roce.json"));
  REQUIRE_MESSAGE(self.rc == 0, self.err);
  CHECK(self.out.find("  why the same: both results state the same inputs and the step times are equal;\n") != std::string::npos);
}
