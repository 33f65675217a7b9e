// mi300x-node: 8 AMD MI300X fully connected by Infinity Fabric (7 links per GPU, one per pair, no switch),
// against hand-computed counts and bandwidths (sources cited in topologies/presets.cpp and models/gpu.cpp).
#include <doctest/doctest.h>

#include <set>

#include "sim/base/error.hpp"
#include "topologies/io.hpp"
#include "topologies/presets_internal.hpp"
#include "topologies/routing.hpp"

#include "presets_test_util.hpp"

using namespace fabricsim;
using namespace fabricsim::topo;
using presets_test::count;

TEST_CASE("mi300x-node: full Infinity Fabric mesh, 7 x 64 GB/s per GPU, no switch, 8x 400 Gb/s NICs") {
  Topology t = build_preset("mi300x-node", {});
  TopologySummary s = summarize(t);
  CHECK(s.gpus == 8);
  CHECK(count(s.node_counts, "nvswitch") == 0);
  CHECK(count(s.physical_link_counts, "nvlink") == 28);  // 8 x 7 / 2 GPU pairs, one link each
  CHECK(s.gpu_nvlink_Bps == doctest::Approx(7 * 64e9));  // 448 GB/s per direction per GPU
  CHECK(s.gpu_network_Bps == doctest::Approx(50e9));     // one 400 Gb/s NIC per GPU
  // The 4 x 4 GPU pairs across the cut, 64 GB/s each, plus the socket link at PCIe gen5 x16.
  CHECK(s.bisection_Bps == doctest::Approx(16 * 64e9 + 64e9));
  for (NodeId g : t.gpus()) {
    CHECK(t.node(g).model == "mi300x");
    CHECK(t.node(g).nvlink_domain == 0);
    // Every GPU has exactly one direct link to each of the 7 others, 64 GB/s per direction.
    std::set<NodeId> peers;
    for (const auto& [l, nb] : t.adjacent(g)) {
      if (t.link(l).kind != LinkKind::NVLink) continue;
      CHECK(t.node(nb).kind == NodeKind::Gpu);
      CHECK(t.link(l).bandwidth_Bps == doctest::Approx(64e9));
      peers.insert(nb);
    }
    CHECK(peers.size() == 7);
  }
  // A GPU pair's route is its own link: one hop, no GPU forwards.
  Routing r(t);
  const auto& gpus = t.gpus();
  CHECK(r.route(gpus[0], gpus[5]).size() == 1);
  CHECK(r.route(gpus[3], gpus[7]).size() == 1);
  // No in-network reduction anywhere: no NVSwitch with NVLS.
  for (NodeId v = 0; v < t.num_nodes(); ++v) CHECK_FALSE(t.node(v).nvls);
}

TEST_CASE("mi300x-node parameters: fewer GPUs keep a full mesh; the Infinity Fabric total is per GPU") {
  Topology four = build_preset("mi300x-node", {{"gpus_per_node", "4"}});
  CHECK(four.gpus().size() == 4);
  CHECK(count(summarize(four).physical_link_counts, "nvlink") == 6);
  CHECK(summarize(four).gpu_nvlink_Bps == doctest::Approx(3 * 64e9));
  // nvlink_bandwidth is the per-GPU total over its gpus_per_node - 1 links.
  Topology slow = build_preset("mi300x-node", {{"nvlink_bandwidth", "350GB/s"}});
  CHECK(summarize(slow).gpu_nvlink_Bps == doctest::Approx(350e9));
  CHECK_THROWS_AS(build_preset("mi300x-node", {{"gpus_per_node", "9"}}), InputError);  // 7 links per GPU
  CHECK_THROWS_AS(build_preset("mi300x-node", {{"nvlink_bandwidth", "448"}}), InputError);  // unit required
}

TEST_CASE("superpod of mi300x-node servers: one NVLink domain per server, rail-optimised fabric") {
  Topology p = build_preset("superpod", {{"nodes", "4"}, {"node", "mi300x-node"}});
  CHECK(p.gpus().size() == 32);
  CHECK(p.node(p.gpus()[0]).nvlink_domain != p.node(p.gpus()[8]).nvlink_domain);
  CHECK(p.node(p.gpus()[9]).model == "mi300x");
  TopologySummary s = summarize(p, SummaryOptions{false, false});
  CHECK(s.gpu_network_Bps == doctest::Approx(50e9));
  CHECK(count(s.node_counts, "nvswitch") == 0);
}
