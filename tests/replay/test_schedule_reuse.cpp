// EngineCommOptions::shared_schedule_reuse: calls of different communicators with the same shape (ranks, mirrors,
// stand-ins, all_to_allv matrix, op, bytes, algorithm: each MoE layer's own dispatch / combine communicator under
// a uniform router) run one schedule object on the shared network. The replay must be the same as with one
// schedule per communicator: every op's end, the step, every link figure and the all-to-all class totals equal.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "../engine/engine_test_util.hpp"
#include "models/system.hpp"
#include "replay/engine_comm_model.hpp"
#include "replay/executor.hpp"
#include "replay/run_scenario.hpp"
#include "workloads/scenario.hpp"

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
