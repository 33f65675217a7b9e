// Link statistics of training runs (engine comm model) and its fidelity policy for large communicators.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "models/system.hpp"
#include "models/collectives.hpp"
#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "replay/engine_comm_model.hpp"
#include "replay/executor.hpp"
#include "replay/outputs.hpp"
#include "replay/outputs_links.hpp"
#include "replay/run_scenario.hpp"
#include "topologies/io.hpp"
#include "workloads/scenario.hpp"
#include "workloads/trace.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

models::ComputeModel cm() {
  models::ComputeModel m;
  m.gpu = models::gpu_spec("a100-80gb");
  return m;
}

// `calls` ring all_reduces of `bytes` over ranks [0, n) of a `world`-GPU trace in which ranks listed in
// `simulated` are replayed.
Trace ring_trace(int world, int n, const std::vector<int>& simulated, int calls, std::uint64_t bytes) {
  std::string comm_ranks;
  for (int r = 0; r < n; ++r) {
    if (r) comm_ranks += ',';
    comm_ranks += std::to_string(r);
  }
  std::string ranks;
  for (std::size_t i = 0; i < simulated.size(); ++i) {
    std::string ops;
    for (int c = 0; c < calls; ++c)
      ops += std::string(c ? "," : "") + R"({"type":"collective","op":"all_reduce","comm":"g","algorithm":"ring","bytes":)" +
             std::to_string(bytes) + "}";
    ranks += std::string(i ? "," : "") + R"({"rank":)" + std::to_string(simulated[i]) + R"(,"ops":[)" + ops + "]}";
  }
  std::string js = R"({"format":"fabricsim-trace","version":1,"world_size":)" + std::to_string(world) +
                   R"(,"communicators":[{"name":"g","ranks":[)" + comm_ranks + R"(],"category":"tp"}],"ranks":[)" +
                   ranks + "]}";
  return trace_from_json(Json::parse(js), "ring.json");
}

// The direction GPU -> its (merged) NVSwitch of GPU `g`.
topo::LinkDir gpu_uplink(const topo::Topology& t, topo::NodeId g) {
  for (const auto& [l, nb] : t.adjacent(g))
    if (t.node(nb).kind == topo::NodeKind::NvSwitch) return t.dir_from(l, g);
  FAIL("GPU without an NVSwitch link");
  return 0;
}

}  // namespace

TEST_CASE("engine comm model link statistics: ring all_reduce moves 2(n-1)/n x S per GPU per call") {
  const models::System sys(models::system_spec("dgx-a100", {}, "default"));
  const topo::Topology& t = sys.topology();
  const models::Calibration& calib = sys.calibration();
  const int n = 8, calls = 3;
  const std::uint64_t S = 256ull << 20;  // 256 MiB: Simple protocol, a whole number of 2-byte elements per rank
  Trace tr = ring_trace(n, n, {0, 1, 2, 3, 4, 5, 6, 7}, calls, S);
  sim::EngineCommModel comm(t, calib);
  comm.set_symmetry(tr.world_size, {0, 1, 2, 3, 4, 5, 6, 7});
  auto r = sim::replay(tr, t, cm(), comm);
  CHECK(comm.schedules_run() == 1);  // one distinct collective, priced once, counted three times
  const auto& dirs = comm.link_dirs();
  REQUIRE(dirs.size() == 2 * static_cast<std::size_t>(t.num_links()));
  const double per_gpu = 2.0 * (n - 1) / n * static_cast<double>(S) * calls;
  for (int g = 0; g < n; ++g) {
    auto d = gpu_uplink(t, t.gpus()[g]);
    CHECK(dirs[d].bytes == doctest::Approx(per_gpu).epsilon(1e-9));
    CHECK(dirs[d ^ 1u].bytes == doctest::Approx(per_gpu).epsilon(1e-9));  // switch -> GPU carries the same
    CHECK(dirs[d].busy_s > 0);
    CHECK(dirs[d].busy_s <= r.iteration_s * (1 + 1e-9));  // the three calls run one after another
  }
  // Only NVLink carries traffic inside one DGX; the tier totals equal the per-direction sum.
  auto tiers = comm.link_totals_by_tier();
  REQUIRE(tiers.priced.count(0));
  CHECK(tiers.priced.size() == 1);
  CHECK(tiers.priced[0] == doctest::Approx(2 * n * per_gpu).epsilon(1e-9));
  CHECK(tiers.cluster[0] == doctest::Approx(tiers.priced[0]));  // every rank simulated: factor 1
}

TEST_CASE("engine comm model: cluster totals scale groups formed by stand-in ranks") {
  // 16 GPUs (2 DGX), a ring of 8 on host 0 with only rank 0 simulated: the other host holds one more copy
  // of the group (factor (16 / 1) x 1 / 8 = 2); the per-link figures stay those of the priced group.
  const models::System sys(models::system_spec("superpod", {{"nodes", "2"}, {"node", "dgx-a100"}}, "default"));
  const topo::Topology& t = sys.topology();
  const models::Calibration& calib = sys.calibration();
  const std::uint64_t S = 64ull << 20;
  Trace tr = ring_trace(16, 8, {0}, 2, S);
  sim::EngineCommModel comm(t, calib);
  comm.set_symmetry(tr.world_size, {0});
  sim::replay(tr, t, cm(), comm);
  auto tiers = comm.link_totals_by_tier();
  REQUIRE(tiers.priced.count(0));
  CHECK(tiers.priced[0] == doctest::Approx(2 * 8 * 2.0 * 7 / 8 * S * 2).epsilon(1e-9));
  CHECK(tiers.cluster[0] == doctest::Approx(2 * tiers.priced[0]));
}

TEST_CASE("engine comm model: send/recv link bytes equal the message on every hop of its route") {
  const models::System sys(models::system_spec("superpod", {{"nodes", "2"}, {"node", "dgx-a100"}}, "default"));
  const topo::Topology& t = sys.topology();
  const models::Calibration& calib = sys.calibration();
  sim::EngineCommModel comm(t, calib);
  const double S = 3.0 * (1 << 20);
  comm.p2p(0, 8, S);
  comm.p2p(0, 8, S);  // cached, counted again
  CHECK(comm.schedules_run() == 1);
  int hops = 0, network_hops = 0;
  for (std::size_t d = 0; d < comm.link_dirs().size(); ++d) {
    const auto& st = comm.link_dirs()[d];
    if (st.bytes <= 0) continue;
    ++hops;
    CHECK(st.bytes == doctest::Approx(2 * S).epsilon(1e-9));
    network_hops += sim::link_tier(t, static_cast<topo::LinkId>(d / 2)) > 0 ? 1 : 0;
  }
  CHECK(hops >= 3);  // GPU -> NIC path -> leaf -> NIC path -> GPU
  CHECK(network_hops >= 2);
}

TEST_CASE("fabricsim run on a GPT scenario fills RunResult::links and the --link-stats file") {
  Scenario s = scenario_from_json(Json::parse(R"({"topology":{"preset":"superpod","params":{"nodes":2,"node":"dgx-a100"}},
      "workload":{"generator":"gpt","params":{"num_layers":8,"hidden_size":2048,"num_attention_heads":16,
      "seq_length":1024,"micro_batch_size":2,"global_batch_size":32,"tensor_model_parallel_size":4,
      "pipeline_model_parallel_size":2}}})"),
                                  "sc.json");
  auto r = sim::run_scenario(s).result;
  REQUIRE_FALSE(r.links.empty());
  bool nvlink = false, network = false;
  double total = 0;
  for (const auto& l : r.links) {
    nvlink = nvlink || l.kind == "nvlink";
    network = network || l.tier > 0;
    total += l.bytes[0] + l.bytes[1];
    CHECK(l.capacity_Bps > 0);
    for (int d = 0; d < 2; ++d) CHECK((l.bytes[d] > 0) == (l.busy_s[d] > 0));
  }
  CHECK(nvlink);   // tensor- and data-parallel collectives inside a DGX
  CHECK(network);  // pipeline sends and the embedding all-reduce between the two DGX
  CHECK(r.metrics.at("link_bytes.cluster_estimate.tier0") >= r.metrics.at("link_bytes.priced_groups.tier0"));
  double tiers = 0;
  for (const auto& [k, v] : r.metrics)
    if (k.rfind("link_bytes.priced_groups.tier", 0) == 0) tiers += v;
  CHECK(tiers == doctest::Approx(total).epsilon(1e-9));
  // The pipeline: 8 micro-batches per data-parallel replica (32 / (2 x 2)), each sending b s h x 2 bytes / TP 4
  // = 2 MiB forward (stage 0 -> 1) and the same backward; rank 0 -> rank 8 crosses the network. Every network
  // link direction on that route carries at least those 8 x 2 MiB (plus the embedding all-reduce).
  double max_net = 0;
  for (const auto& l : r.links)
    if (l.tier > 0) max_net = std::max({max_net, l.bytes[0], l.bytes[1]});
  CHECK(max_net >= 8.0 * 2 * (1 << 20) * (1 - 1e-9));

  const std::string path = "test_replay_links_stats.csv";  // in the test's working directory
  sim::OutputOptions o;
  o.quiet = true;
  o.link_stats_path = path;
  sim::write_outputs(r, o);
  std::ifstream in(path);
  REQUIRE(in.good());
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) ++rows;
  CHECK(rows >= 2);  // header + at least one link direction
  std::remove(path.c_str());
}

TEST_CASE("replay keeps the note that TFLOP/s came from the trace's op FLOPs, after the trace's notes") {
  Trace tr = trace_from_json(Json::parse(R"({"format":"fabricsim-trace","version":1,"world_size":1,
      "notes":["from the trace"],
      "ranks":[{"rank":0,"ops":[{"type":"compute","duration_ns":1000000,"flops":2e12}]}]})"),
                             "t.json");
  topo::Topology t = topo::load_topology("dgx-a100", {});
  struct NoComm final : sim::CommModel {
    sim::CommTiming collective(const Communicator&, CollOp, double, const std::string&) override { return {}; }
    sim::CommTiming p2p(std::int32_t, std::int32_t, double) override { return {}; }
    std::string describe() const override { return "none"; }
  } comm;
  auto r = sim::replay(tr, t, cm(), comm);
  CHECK(r.tflops_per_gpu == doctest::Approx(2e12 / 1e-3 / 1e12));
  bool estimated = false, trace_note = false;
  for (const auto& n : r.notes) {
    estimated = estimated || n.find("tflops_per_gpu from the trace's compute-op FLOPs") != std::string::npos;
    trace_note = trace_note || n == "from the trace";
  }
  CHECK(estimated);
  CHECK(trace_note);
  REQUIRE_FALSE(r.notes.empty());
  CHECK(r.notes.front() == "from the trace");
}
