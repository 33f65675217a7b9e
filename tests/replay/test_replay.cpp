#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "sim/base/error.hpp"
#include "replay/comm_model.hpp"
#include "replay/executor.hpp"
#include "replay/run_scenario.hpp"
#include "topologies/io.hpp"
#include "workloads/scenario.hpp"
#include "workloads/trace.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

// A comm model with fixed, known costs, so the executor's semantics can be checked exactly.
class FixedComm final : public sim::CommModel {
 public:
  double coll_s = 1e-3, p2p_s = 5e-4;
  int calls = 0;
  sim::CommTiming collective(const Communicator&, CollOp, double, const std::string&) override {
    ++calls;
    return {coll_s, "fixed", "simple"};
  }
  sim::CommTiming p2p(std::int32_t, std::int32_t, double) override { return {p2p_s, "p2p", "simple"}; }
  std::string describe() const override { return "fixed"; }
};

topo::Topology dgx() { return topo::load_topology("dgx-a100", {}); }

models::ComputeModel cm() {
  models::ComputeModel m;
  m.gpu = models::gpu_spec("a100-80gb");
  return m;
}

Trace parse(const std::string& s) { return trace_from_json(Json::parse(s), "t.json"); }

}  // namespace

TEST_CASE("replay: stream order, deps, collective rendezvous, send/recv") {
  // rank 0: compute 2 ms, then all_reduce; rank 1: compute 1 ms, then all_reduce (waits for rank 0 at 2 ms),
  // then rank 0 sends to rank 1 (0.5 ms) and rank 1 computes 1 ms after the recv.
  Trace t = parse(R"({"format":"fabricsim-trace","version":1,"world_size":2,
    "communicators":[{"name":"w","ranks":[0,1],"category":"dp"}],
    "ranks":[
      {"rank":0,"streams":["compute","comm"],"ops":[
        {"type":"compute","duration_ns":2000000},
        {"type":"collective","op":"all_reduce","comm":"w","bytes":1000,"stream":"comm","deps":[0]},
        {"type":"send","peer":1,"tag":1,"bytes":10,"stream":"comm","category":"pp"}]},
      {"rank":1,"streams":["compute","comm"],"ops":[
        {"type":"compute","duration_ns":1000000},
        {"type":"collective","op":"all_reduce","comm":"w","bytes":1000,"stream":"comm","deps":[0]},
        {"type":"recv","peer":0,"tag":1,"bytes":10,"stream":"comm","category":"pp"},
        {"type":"compute","duration_ns":1000000,"deps":[2]}]}]})");
  auto topo = dgx();
  FixedComm comm;
  auto r = sim::replay(t, topo, cm(), comm);
  CHECK(r.iteration_s == doctest::Approx(2e-3 + 1e-3 + 5e-4 + 1e-3));
  REQUIRE(r.ops.size() == 7);
  CHECK(r.ops[1].start_s == doctest::Approx(2e-3));  // rank 0's all_reduce
  CHECK(r.ops[4].start_s == doctest::Approx(2e-3));  // rank 1's all_reduce waited for rank 0
  CHECK(r.ops[4].end_s == doctest::Approx(3e-3));
  CHECK(r.ops[6].start_s == doctest::Approx(3.5e-3));
  CHECK(comm.calls == 1);  // one collective instance, priced once
  // Breakdown adds up to the iteration time per rank.
  double sum = r.breakdown.compute_s + r.breakdown.bubble_s + r.breakdown.idle_s;
  for (const auto& [k, v] : r.breakdown.exposed_comm_s) sum += v;
  CHECK(sum == doctest::Approx(r.iteration_s));
  CHECK(r.breakdown.compute_s == doctest::Approx((2e-3 + 2e-3) / 2));
}

TEST_CASE("replay: roofline compute ops use the compute model") {
  Trace t = parse(R"({"format":"fabricsim-trace","version":1,"world_size":1,"ranks":[{"rank":0,"ops":[
      {"type":"compute","flops":312e12,"class":"gemm"}]}]})");
  auto topo = dgx();
  FixedComm comm;
  auto m = cm();
  m.eff.flops_efficiency[0] = 0.5;
  m.eff.kernel_overhead_s = 0;
  CHECK(sim::replay(t, topo, m, comm).iteration_s == doctest::Approx(2.0));
}

TEST_CASE("replay: deadlock is reported with the ops involved, never a hang") {
  // Each rank receives before it sends: classic p2p deadlock.
  Trace t = parse(R"({"format":"fabricsim-trace","version":1,"world_size":2,"ranks":[
      {"rank":0,"ops":[{"type":"recv","peer":1,"tag":0,"bytes":8,"name":"r0"},{"type":"send","peer":1,"tag":0,"bytes":8}]},
      {"rank":1,"ops":[{"type":"recv","peer":0,"tag":0,"bytes":8,"name":"r1"},{"type":"send","peer":0,"tag":0,"bytes":8}]}]})");
  auto topo = dgx();
  FixedComm comm;
  std::string msg;
  try {
    sim::replay(t, topo, cm(), comm);
  } catch (const sim::ReplayDeadlock& e) {
    msg = e.what();
  }
  CHECK(msg.find("deadlock") != std::string::npos);
  CHECK(msg.find("'r0'") != std::string::npos);
  CHECK(msg.find("no matching send") != std::string::npos);

  // A collective that one member only reaches after a recv whose send is behind that same collective.
  Trace c = parse(R"({"format":"fabricsim-trace","version":1,"world_size":2,
    "communicators":[{"name":"w","ranks":[0,1]}],
    "ranks":[
      {"rank":0,"ops":[{"type":"collective","op":"all_reduce","comm":"w","bytes":8,"name":"ar"},
                       {"type":"send","peer":1,"tag":0,"bytes":8}]},
      {"rank":1,"ops":[{"type":"recv","peer":0,"tag":0,"bytes":8},
                       {"type":"collective","op":"all_reduce","comm":"w","bytes":8}]}]})");
  msg.clear();
  try {
    sim::replay(c, topo, cm(), comm);
  } catch (const sim::ReplayDeadlock& e) {
    msg = e.what();
  }
  CHECK(msg.find("collective all_reduce #0 on 'w' reached by rank 0 op 0 'ar' but not by rank(s) 1") != std::string::npos);
}

TEST_CASE("analytic comm model: NVLink ring inside a DGX, NIC-bound across hosts") {
  auto topo = topo::load_topology("superpod", {{"nodes", "4"}, {"node", "dgx-a100"}});
  sim::AnalyticCommModel m(topo);
  CHECK(m.gpu_nvlink_Bps(0) == doctest::Approx(300e9));
  Communicator tp{"tp", {0, 1, 2, 3, 4, 5, 6, 7}, 0, 1, "tp"};
  double b = 1 << 30;
  // Constants from the built-in calibration (sim::analytic_params): ring/simple latencies 8.4 us base, 3.4 us
  // per NVLink step, 14 us per network step; NVLink 300 GB/s x nvlink_efficiency.a100 0.8 = 240 GB/s, capped
  // at NCCL's A100 ring busBw 235 GB/s; network_efficiency 0.97.
  double t_tp = m.collective(tp, CollOp::AllReduce, b, "").duration_s;
  CHECK(t_tp == doctest::Approx(8.4e-6 + 14 * 3.4e-6 + 2.0 * 7 / 8 * b / 235e9).epsilon(1e-12));
  Communicator dp{"dp", {0, 8, 16, 24}, 7, 1, "dp"};  // one GPU per host, 8 co-located groups share 8 NICs
  double t_dp = m.collective(dp, CollOp::AllReduce, b, "").duration_s;
  // 8 HDR NICs x 25 GB/s per host shared by 8 groups: 25 GB/s each, x 0.97; 6 network steps.
  CHECK(t_dp == doctest::Approx(8.4e-6 + 6 * 14e-6 + 2.0 * 3 / 4 * b / (25e9 * 0.97)).epsilon(1e-12));
}

TEST_CASE("scenario: strict parsing and clear errors") {
  auto err = [](const std::string& s) {
    try {
      scenario_from_json(Json::parse(s), "sc.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(err(R"({"topology":{"preset":"dgx-a100"},"workload":{"generator":"gpt"},"extra":1})").find("extra") != std::string::npos);
  CHECK(err(R"({"topology":{"preset":"dgx-a100"},"workload":{"generator":"bert"}})").find("sc.json: /workload/generator") !=
        std::string::npos);
  CHECK(err(R"({"topology":{},"workload":{"generator":"gpt"}})").find("exactly one of") != std::string::npos);
  // TP that does not divide the GPUs: error names the parameter.
  Scenario s = scenario_from_json(Json::parse(R"({"topology":{"preset":"dgx-a100"},
      "workload":{"generator":"gpt","params":{"num_layers":4,"hidden_size":1024,"num_attention_heads":16,
      "tensor_model_parallel_size":3,"pipeline_model_parallel_size":1,"global_batch_size":8}}})"),
                                  "sc.json");
  std::string e;
  try {
    sim::run_scenario(s);
  } catch (const InputError& x) {
    e = x.what();
  }
  CHECK(e.find("sc.json: /workload/params tensor_model_parallel_size") != std::string::npos);
  CHECK(e.find("must divide world_size 8") != std::string::npos);
}

TEST_CASE("GPT on 2 DGX A100: engine and analytic comm models agree within 10 percent") {
  Scenario s = scenario_from_json(Json::parse(R"({"topology":{"preset":"superpod","params":{"nodes":2,"node":"dgx-a100"}},
      "workload":{"generator":"gpt","params":{"num_layers":8,"hidden_size":2048,"num_attention_heads":16,
      "seq_length":1024,"micro_batch_size":2,"global_batch_size":32,"tensor_model_parallel_size":4,
      "pipeline_model_parallel_size":2}}})"),
                                  "sc.json");
  auto a = sim::run_scenario(s, {"analytic", {}, {}}).result;
  auto b = sim::run_scenario(s, {"engine", {}, {}}).result;
  CHECK(a.iteration_s > 0);
  CHECK(b.iteration_s == doctest::Approx(a.iteration_s).epsilon(0.10));
  CHECK(b.breakdown.exposed_comm_s.count("tp"));
  CHECK(b.breakdown.bubble_s > 0);  // PP 2 has a pipeline bubble
  CHECK(b.samples_per_s == doctest::Approx(32.0 / b.iteration_s));
  // Deterministic: same inputs, same result.
  auto c = sim::run_scenario(s, {"engine", {}, {}}).result;
  CHECK(c.iteration_s == b.iteration_s);
}
