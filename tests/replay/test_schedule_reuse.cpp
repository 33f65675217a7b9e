// EngineCommOptions::shared_schedule_reuse: calls of different communicators with the same shape (ranks, mirrors,
// stand-ins, all_to_allv matrix, collnet_enable, op, bytes, algorithm: each MoE layer's own dispatch / combine
// communicator under a uniform router) run one schedule object on the shared network. The replay must be the same
// as with one schedule per communicator: every op's end, the step, every link figure and the all-to-all class
// totals equal.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "../engine/engine_test_util.hpp"
#include "models/collectives.hpp"
#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "models/system.hpp"
#include "models/tuner.hpp"
#include "replay/engine_comm_model.hpp"
#include "replay/executor.hpp"
#include "replay/run_scenario.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"
#include "workloads/scenario.hpp"
#include "workloads/trace.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {
struct Out {
  sim::RunResult r;
  std::vector<sim::LinkDirStats> links;
  sim::EngineCommBase::ClassTotals a2a;
  std::size_t entries = 0, reused = 0;
};
}  // namespace

TEST_CASE("shared model: calls of the same shape on different communicators reuse one schedule, same replay") {
  // EP 16 over two DGX (x 2 pipeline stages), flex dispatcher, uniform router: every MoE layer's dispatch and
  // combine communicators of a stage have the same ranks and matrix.
  const std::string f = std::string(FABRICSIM_SOURCE_DIR) + "/examples/sweeps/moe_small.json";
  Json j = load_json_file(f);
  auto& p = j["workload"]["params"];
  p["expert_model_parallel_size"] = 16, p["moe_token_dispatcher_type"] = "flex", p["pipeline_model_parallel_size"] = 2;
  const Scenario s = scenario_from_json(j, f);
  const models::System sys = sim::scenario_system(s);
  const topo::Topology& topo = sys.topology();
  const models::ComputeModel cm = scenario_compute_model(s, topo, sys.calibration().named_factors());
  const Trace trace = build_workload(s, topo, cm);
  auto run = [&](bool reuse) {
    sim::EngineCommOptions o;
    o.shared_schedule_reuse = reuse;
    sim::SharedNetworkCommModel comm(topo, sys.calibration(), o);
    std::vector<std::int32_t> simulated;
    for (const auto& rt : trace.ranks) simulated.push_back(rt.rank);
    comm.set_symmetry(trace.world_size, simulated);
    sim::ReplayOptions ro;
    ro.record_ops = true;
    Out out;
    out.r = sim::replay(trace, topo, cm, comm, ro);
    comm.finalize_link_stats();
    out.links = comm.link_dirs();
    out.a2a = comm.all_to_all_by_class();
    out.entries = comm.collective_entries();
    out.reused = comm.schedules_reused();
    return out;
  };
  const Out a = run(true), b = run(false);
  MESSAGE("distinct collective calls ", a.entries, ", of which reuse an earlier schedule ", a.reused);
  CHECK(a.entries == b.entries);
  CHECK(a.reused > 0);
  CHECK(b.reused == 0);
  CHECK(a.r.iteration_s == b.r.iteration_s);
  REQUIRE(a.r.ops.size() == b.r.ops.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.r.ops.size(); ++i) differ += a.r.ops[i].end_s != b.r.ops[i].end_s;
  CHECK(differ == 0);
  REQUIRE(a.links.size() == b.links.size());
  CHECK(test::busy_links(a.links) > 0);
  CHECK(test::differing_links(a.links, b.links) == 0);
  CHECK(a.a2a.bytes == b.a2a.bytes);
  CHECK(a.a2a.time_s == b.a2a.time_s);
  CHECK(!a.a2a.bytes.empty());
  CHECK(a.r.metrics == b.r.metrics);
}

TEST_CASE("shared model: communicators that differ only in collnet_enable do not share a schedule") {
  // TP 2 DP 8 on two DGX H100 of a superpod with SHARP: the even ranks' data-parallel group (one mirror, the odd
  // ranks) reduces a 218 MB gradient bucket first on a communicator created with NCCL_COLLNET_ENABLE ("a"), then on
  // the same ranks without it ("b"). NCCL's tuner takes NVLS with CollNet for "a" and NVLS_TREE for "b"
  // (tests/replay/test_gpt_cp_sharp_run.cpp), so the two calls have different schedules although everything else of
  // the call (ranks, mirrors, op, bytes, algorithm) is equal; a schedule shared by shape would give "b" the one of "a".
  const topo::Topology topo = models::merge_nvswitch_planes(
      topo::build_preset("superpod", {{"nodes", "2"}, {"node", "dgx-h100"}, {"sharp", "true"}}));
  const models::Calibration calib = models::default_calibration();
  std::string ranks;
  for (int r = 0; r < 16; r += 2) {
    if (r) ranks += ",";
    ranks += R"({"rank":)" + std::to_string(r) + R"(,"ops":[
        {"type":"collective","op":"all_reduce","comm":"a","bytes":218278400},
        {"type":"collective","op":"all_reduce","comm":"b","bytes":218278400}]})";
  }
  const Trace trace = trace_from_json(Json::parse(R"({"format":"fabricsim-trace","version":1,"world_size":16,
    "communicators":[{"name":"a","ranks":[0,2,4,6,8,10,12,14],"mirrors":1,"mirror_stride":1,"category":"dp"},
                     {"name":"b","ranks":[0,2,4,6,8,10,12,14],"mirrors":1,"mirror_stride":1,"category":"dp",
                      "collnet_enable":false}],
    "ranks":[)" + ranks + "]}"),
                                      "t.json");
  REQUIRE(trace.comms.size() == 2);
  REQUIRE(trace.comms[0].collnet_enable != trace.comms[1].collnet_enable);
  // The tuner's choice for each communicator.
  topo::Routing routing(topo);
  models::CollectiveSpec spec;
  spec.op = models::Op::AllReduce;
  spec.bytes = 218278400;
  spec.elem_bytes = 2;
  for (std::int32_t r : trace.comms[0].ranks) spec.communicator.push_back(topo.gpus()[r]);
  spec.collnet_enable = true;
  const std::string with = models::to_string(models::tune(spec, topo, routing, calib).algorithm);
  spec.collnet_enable = false;
  const std::string without = models::to_string(models::tune(spec, topo, routing, calib).algorithm);
  REQUIRE(with != without);
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec("h100-sxm");
  for (bool shortcut : {true, false}) {
    CAPTURE(shortcut);
    auto run = [&](bool reuse) {
      sim::EngineCommOptions o;
      o.shared_schedule_reuse = reuse;
      o.shared_isolation_shortcut = shortcut;
      sim::SharedNetworkCommModel comm(topo, calib, o);
      Out out;
      out.r = sim::replay(trace, topo, cm, comm);
      out.entries = comm.collective_entries();
      out.reused = comm.schedules_reused();
      return out;
    };
    const Out a = run(true), b = run(false);
    CHECK(a.entries == 2);
    CHECK(a.reused == 0);  // two shapes
    // Each call with its own communicator's algorithm and the time of its own schedule (as without reuse).
    REQUIRE(a.r.ops.size() == b.r.ops.size());
    std::size_t seen = 0;
    std::map<std::int32_t, int> calls;  // per rank: collectives seen so far (its first is on "a")
    for (std::size_t i = 0; i < a.r.ops.size(); ++i) {
      const sim::OpRecord& op = a.r.ops[i];
      if (op.kind != "collective") continue;
      ++seen;
      const bool first = calls[op.rank]++ == 0;
      CHECK(op.algorithm == (first ? with : without));
      CHECK(op.end_s == b.r.ops[i].end_s);
      CHECK(op.start_s == b.r.ops[i].start_s);
    }
    CHECK(seen == 16);
    CHECK(a.r.iteration_s == b.r.iteration_s);
  }
}
