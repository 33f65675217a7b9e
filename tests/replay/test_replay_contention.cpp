// Contention on the shared network, checked against max-min shares computed by hand, and the shared
// model's isolation shortcut checked against running everything on the network.
#include <doctest/doctest.h>

#include <string>

#include "models/calibration.hpp"
#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "replay/engine_comm_model.hpp"
#include "replay/executor.hpp"
#include "replay/run_scenario.hpp"
#include "replay_test_util.hpp"
#include "topologies/io.hpp"
#include "workloads/scenario.hpp"
#include "workloads/trace.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

// Four single-GPU hosts, each GPU -> its NIC over PCIe (100 GB/s, never the bottleneck), every NIC to one
// InfiniBand switch at 200 Gb/s = 25e9 B/s per direction. No latency anywhere.
const topo::Topology& star() {
  static const topo::Topology t = [] {
    std::string nodes, links;
    for (int h = 0; h < 4; ++h) {
      const std::string g = "h" + std::to_string(h) + ".gpu0", n = "h" + std::to_string(h) + ".nic0";
      nodes += R"({"id":")" + g + R"(","kind":"gpu","model":"a100-80gb","host":)" + std::to_string(h) +
               R"(,"local_index":0},{"id":")" + n + R"(","kind":"nic","host":)" + std::to_string(h) +
               R"(,"local_index":0,"rail":0,"port_bandwidth":"200Gbps"},)";
      links += std::string(h ? "," : "") + R"({"a":")" + g + R"(","b":")" + n +
               R"(","kind":"pcie","bandwidth":"100GB/s","latency":"0ns"},{"a":")" + n +
               R"(","b":"sw","kind":"infiniband","bandwidth":"200Gbps","latency":"0ns"})";
    }
    nodes += R"({"id":"sw","kind":"ib_switch","model":"quantum","tier":1,"rail":0})";
    return topo::topology_from_json(Json::parse(R"({"format":"fabricsim-topology","version":1,"name":"star4",
        "nodes":[)" + nodes + R"(],"links":[)" + links + "]}"),
                                    "star4");
  }();
  return t;
}

// Only bytes cost time: no NCCL latencies, every efficiency 1, one pipeline chunk per ring step, so a
// 2-rank ring all_gather of S bytes is one flow of S/2 bytes each way.
models::Calibration bytes_only() {
  models::Calibration c = models::default_calibration();
  for (auto& [k, v] : c.algo) {
    v.base_latency_s = v.step_latency_s = v.net_step_latency_s = 0;
    v.bw_efficiency = 1;
  }
  c.factors.network_efficiency = 1;
  c.factors.max_pipeline_chunks = 1;
  return c;
}

models::ComputeModel cm() {
  models::ComputeModel m;
  m.gpu = models::gpu_spec("a100-80gb");
  return m;
}

// all_gather A (1e9 bytes) on ranks {0,1} and B (2e9 bytes) on {0, b1}, forced to ring, each on its own
// stream of rank 0 (so they overlap) unless `sequential`.
Trace two_all_gathers(int b1, bool sequential) {
  auto coll = [](const char* comm, const char* bytes, const char* stream) {
    return std::string(R"({"type":"collective","op":"all_gather","comm":")") + comm + R"(","bytes":)" + bytes +
           R"(,"algorithm":"ring","stream":")" + stream + R"("})";
  };
  const std::string a = coll("A", "1000000000", "a"), b = coll("B", "2000000000", sequential ? "a" : "b");
  const int b0 = b1 == 2 ? 0 : 2;  // B = {0, 2} shares rank 0's NIC links with A; {2, 3} shares nothing
  std::string ranks;
  for (int r = 0; r < 4; ++r) {
    std::string ops;
    if (r == 0 || r == 1) ops += a;
    if (r == b0 || r == b1) ops += (ops.empty() ? "" : ",") + b;
    ranks += std::string(r ? "," : "") + R"({"rank":)" + std::to_string(r) + R"(,"streams":["a","b"],"ops":[)" +
             ops + "]}";
  }
  return trace_from_json(Json::parse(R"({"format":"fabricsim-trace","version":1,"world_size":4,
    "communicators":[{"name":"A","ranks":[0,1],"category":"dp"},{"name":"B","ranks":[)" +
                                     std::to_string(b0) + "," + std::to_string(b1) + R"(],"category":"dp"}],
    "ranks":[)" + ranks + "]}"),
                         "t.json");
}

struct Ends {
  double a, b;  // end of A and of B (their ops on rank 0 / on B's first rank)
  sim::RunResult r;
};
Ends run(const Trace& t, const std::string& model, bool shortcut = true) {
  static const models::Calibration calib = bytes_only();
  sim::EngineCommOptions o;
  o.shared_isolation_shortcut = shortcut;
  Ends e{};
  if (model == "shared") {
    sim::SharedNetworkCommModel comm(star(), calib, o);
    e.r = sim::replay(t, star(), cm(), comm);
  } else {
    sim::EngineCommModel comm(star(), calib, o);
    e.r = sim::replay(t, star(), cm(), comm);
  }
  for (const auto& op : e.r.ops) {
    if (op.kind != "collective") continue;
    (op.bytes < 1.5e9 ? e.a : e.b) = op.end_s;
  }
  return e;
}

}  // namespace

TEST_CASE("contention, by hand: two overlapping all_gathers that share a NIC link take their max-min times") {
  // A = {0,1} moves 0.5e9 B each way, B = {0,2} 1e9 B each way; both cross h0.nic0<->sw (both directions)
  // at C = 25e9 B/s. Alone: A 0.5e9/C = 0.02 s, B 1e9/C = 0.04 s.
  const Trace t = two_all_gathers(2, false);
  const Ends idle = run(t, "engine");
  CHECK(idle.a == doctest::Approx(0.02).epsilon(1e-9));
  CHECK(idle.b == doctest::Approx(0.04).epsilon(1e-9));
  CHECK(idle.r.comm_model == "engine");
  // Together: each flow gets C/2 on the shared directions until A is done at 0.5e9 / 12.5e9 = 0.04 s; B then
  // has 1e9 - 0.5e9 left at the full C: 0.04 + 0.5e9 / 25e9 = 0.06 s.
  for (bool shortcut : {true, false}) {
    CAPTURE(shortcut);
    const Ends sh = run(t, "shared", shortcut);
    CHECK(sh.a == doctest::Approx(0.04).epsilon(1e-9));
    CHECK(sh.b == doctest::Approx(0.06).epsilon(1e-9));
    CHECK(sh.r.iteration_s == doctest::Approx(0.06).epsilon(1e-9));
    CHECK(sh.r.comm_model == "shared");
  }
  // One after the other on rank 0's stream: no overlap, the idle times add up: 0.02 + 0.04.
  const Ends seq = run(two_all_gathers(2, true), "shared");
  CHECK(seq.a == doctest::Approx(0.02).epsilon(1e-9));
  CHECK(seq.b == doctest::Approx(0.06).epsilon(1e-9));
}

TEST_CASE("contention, by hand: two overlapping all_gathers on disjoint links do not slow each other") {
  // A = {0,1}, B = {2,3}: no link in common, so each takes its alone time on the shared network too.
  const Trace t = two_all_gathers(3, false);
  for (bool shortcut : {true, false}) {
    CAPTURE(shortcut);
    const Ends sh = run(t, "shared", shortcut);
    CHECK(sh.a == doctest::Approx(0.02).epsilon(1e-9));
    CHECK(sh.b == doctest::Approx(0.04).epsilon(1e-9));
  }
  // With the shortcut both communicators are isolated (priced on an idle fabric, nothing on the network).
  static const models::Calibration calib = bytes_only();
  sim::SharedNetworkCommModel comm(star(), calib);
  sim::replay(t, star(), cm(), comm);
  CHECK(comm.isolated_calls() == 2);
  CHECK(comm.network_calls() == 0);
  CHECK(comm.shared_owners() == 0);
  sim::SharedNetworkCommModel all_on_net(star(), calib, sim::EngineCommOptions{true, 0, false});
  sim::replay(t, star(), cm(), all_on_net);
  CHECK(all_on_net.isolated_calls() == 0);
  CHECK(all_on_net.network_calls() == 2);
}

TEST_CASE("shared model: the isolation shortcut gives the same replay as everything on the network (GPT, TP 8, PP 2)") {
  Scenario s = scenario_from_json(Json::parse(R"({"topology":{"preset":"superpod","params":{"nodes":2,"node":"dgx-a100"}},
      "workload":{"generator":"gpt","params":{"num_layers":8,"hidden_size":2048,"num_attention_heads":16,
      "seq_length":1024,"micro_batch_size":2,"global_batch_size":32,"tensor_model_parallel_size":8,
      "pipeline_model_parallel_size":2}}})"),
                                  "sc.json");
  sim::ScenarioRunOptions with, without;
  with.comm_model = without.comm_model = "shared";
  without.engine.shared_isolation_shortcut = false;
  const sim::RunResult a = sim::run_scenario(s, with).result, b = sim::run_scenario(s, without).result;
  CHECK(a.metrics.at("replay.shared.isolated_calls") > 0);  // the tensor-parallel groups' NVLinks
  CHECK(b.metrics.at("replay.shared.isolated_calls") == 0);
  CHECK(a.iteration_s == doctest::Approx(b.iteration_s).epsilon(1e-9));
  CHECK(replay_test::max_op_end_gap(a, b) < 1e-9);
  CHECK(a.links.size() == b.links.size());
}

TEST_CASE("shared model: idle-window pricing of sharing communicators gives the same replay as everything on the network") {
  // TP 4, PP 2, DP 2 on two DGX A100: the data-parallel rings (overlapped with the backward pass) and the
  // pipeline sends share the NICs, so their owners share links; calls that find their links free are
  // priced on an idle window, the ones that meet another call mid-way are rerun on the network.
  Scenario s = scenario_from_json(Json::parse(R"({"topology":{"preset":"superpod","params":{"nodes":2,"node":"dgx-a100"}},
      "workload":{"generator":"gpt","params":{"num_layers":8,"hidden_size":2048,"num_attention_heads":16,
      "seq_length":1024,"micro_batch_size":2,"global_batch_size":32,"tensor_model_parallel_size":4,
      "pipeline_model_parallel_size":2,"overlap_grad_reduce":true}}})"),
                                  "sc.json");
  sim::ScenarioRunOptions with, without;
  with.comm_model = without.comm_model = "shared";
  with.replay.record_ops = without.replay.record_ops = true;
  without.engine.shared_isolation_shortcut = false;
  const sim::RunResult a = sim::run_scenario(s, with).result, b = sim::run_scenario(s, without).result;
  CHECK(a.metrics.at("replay.shared.sharing_owners") > 0);
  CHECK(a.metrics.at("replay.shared.idle_window_calls") > 0);
  CHECK(b.metrics.at("replay.shared.idle_window_calls") == 0);
  MESSAGE("window calls ", a.metrics.at("replay.shared.idle_window_calls"), " network calls ",
          a.metrics.at("replay.shared.network_calls"), " reruns ", a.metrics.at("replay.shared.idle_window_reruns"));
  CHECK(a.iteration_s == doctest::Approx(b.iteration_s).epsilon(1e-9));
  CHECK(replay_test::max_op_end_gap(a, b) < 1e-9);
}
