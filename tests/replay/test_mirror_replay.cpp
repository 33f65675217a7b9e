// The mirror quotient in replays on the shared network (docs/engine.md, "Mirror quotient on the shared network"):
// every op's end and every link's figures with EngineCommOptions::shared_mirror_quotient on equal those with it
// off (every block's flows) to 1e-9.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "replay/run_scenario.hpp"
#include "replay_test_util.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

const std::string kSweeps = std::string(FABRICSIM_SOURCE_DIR) + "/examples/sweeps/";

double metric(const sim::RunResult& r, const std::string& k) {
  auto it = r.metrics.find(k);
  return it == r.metrics.end() ? 0.0 : it->second;
}

double rel(double a, double b) { return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-300}); }

// Runs `s` on the shared model with the mirror quotient on and off; checks the two replays agree.
void check_same_replay(const Scenario& s, bool isolation_shortcut, double min_quotient_calls) {
  sim::ScenarioRunOptions with, without;
  with.comm_model = without.comm_model = "shared";
  with.replay.record_ops = without.replay.record_ops = true;
  with.engine.shared_isolation_shortcut = without.engine.shared_isolation_shortcut = isolation_shortcut;
  without.engine.shared_mirror_quotient = false;
  const sim::RunResult a = sim::run_scenario(s, with).result, b = sim::run_scenario(s, without).result;
  MESSAGE("quotient calls ", metric(a, "replay.shared.mirror_quotient_calls"), " expanded ",
          metric(a, "replay.shared.mirror_quotient_expanded"), " of ", metric(a, "replay.shared.network_calls"),
          " network calls; solver flow visits ", metric(a, "replay.shared.network_solver_flow_visits"), " vs ",
          metric(b, "replay.shared.network_solver_flow_visits"));
  CHECK(metric(a, "replay.shared.mirror_quotient_calls") >= min_quotient_calls);
  CHECK(metric(b, "replay.shared.mirror_quotient_calls") == 0);
  CHECK(a.iteration_s == doctest::Approx(b.iteration_s).epsilon(1e-9));
  CHECK(replay_test::max_op_end_gap(a, b) < 1e-9);
  REQUIRE(a.links.size() == b.links.size());
  double worst = 0;
  for (std::size_t l = 0; l < a.links.size(); ++l) {
    CHECK(a.links[l].link == b.links[l].link);
    for (int d = 0; d < 2; ++d) {
      worst = std::max(worst, rel(a.links[l].bytes[d], b.links[l].bytes[d]));
      worst = std::max(worst, rel(a.links[l].busy_s[d], b.links[l].busy_s[d]));
      worst = std::max(worst, rel(a.links[l].peak_util[d], b.links[l].peak_util[d]));
    }
  }
  CHECK(worst < 1e-9);
}

}  // namespace

TEST_CASE("mirror quotient replay: data-parallel mirrors beside pipeline sends give the same replay") {
  // TP 4, PP 2, DP 2 on two DGX A100, every call on the network: each data-parallel ring runs with its 3
  // co-located mirrors (the other TP positions) as one block while no pipeline send is on their NICs, and is
  // expanded when one arrives.
  Scenario s = scenario_from_json(Json::parse(R"({"topology":{"preset":"superpod","params":{"nodes":2,"node":"dgx-a100"}},
      "workload":{"generator":"gpt","params":{"num_layers":8,"hidden_size":2048,"num_attention_heads":16,
      "seq_length":1024,"micro_batch_size":2,"global_batch_size":32,"tensor_model_parallel_size":4,
      "pipeline_model_parallel_size":2,"overlap_grad_reduce":true}}})"),
                                  "sc.json");
  check_same_replay(s, false, 1);
}

TEST_CASE("mirror quotient replay: a ring's NCCL channels as blocks beside MoE all_to_allv and pipeline sends") {
  // EP 16 over two DGX (x 2 stages) with the flex dispatcher and a Zipf router, PP 2 (as the flow-bundle test):
  // the data-parallel rings have no mirrors; their channels (each host's ranks rotated per channel) are the blocks.
  Json j = load_json_file(kSweeps + "moe_small.json");
  auto& p = j["workload"]["params"];
  p["expert_model_parallel_size"] = 16, p["moe_token_dispatcher_type"] = "flex", p["moe_load"] = "zipf";
  p["moe_load_skew"] = 1.2, p["pipeline_model_parallel_size"] = 2;
  check_same_replay(scenario_from_json(j, kSweeps + "moe_small.json"), true, 1);
}
