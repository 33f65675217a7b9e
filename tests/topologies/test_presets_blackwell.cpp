// Presets added for 2024-2026 systems: dgx-h200, dgx-b300, gb300-nvl72 (and gb200-nvl72's GPU part), against
// hand-computed counts and bandwidths (sources cited in topologies/presets.cpp).
#include <doctest/doctest.h>

#include "sim/base/error.hpp"
#include "topologies/io.hpp"
#include "topologies/presets_internal.hpp"

#include "presets_test_util.hpp"

using namespace fabricsim;
using namespace fabricsim::topo;
using presets_test::count;

TEST_CASE("dgx-h200: the DGX H100 board with H200 GPUs") {
  Topology t = build_preset("dgx-h200", {});
  TopologySummary s = summarize(t);
  CHECK(s.gpus == 8);
  CHECK(count(s.node_counts, "nvswitch") == 4);
  CHECK(count(s.physical_link_counts, "nvlink") == 144);
  CHECK(s.gpu_nvlink_Bps == doctest::Approx(450e9));  // 18 x 25 GB/s per direction
  CHECK(s.gpu_network_Bps == doctest::Approx(50e9));  // 8x 400 Gb/s
  CHECK(s.bisection_Bps == doctest::Approx(4 * 450e9 + 64e9));
  for (NodeId g : t.gpus()) CHECK(t.node(g).model == "h200");
}

TEST_CASE("dgx-b300: NVLink5 board, 8x ConnectX-8 800 Gb/s on PCIe gen6") {
  Topology t = build_preset("dgx-b300", {});
  TopologySummary s = summarize(t);
  CHECK(s.gpus == 8);
  CHECK(count(s.node_counts, "nvswitch") == 2);
  CHECK(count(s.physical_link_counts, "nvlink") == 144);
  CHECK(s.gpu_nvlink_Bps == doctest::Approx(900e9));   // 18 x 50 GB/s
  CHECK(s.gpu_network_Bps == doctest::Approx(100e9));  // 800 Gb/s per GPU
  // 4 x 900 GB/s of NVLink plus the socket link at PCIe gen6 x16 (128 GB/s).
  CHECK(s.bisection_Bps == doctest::Approx(4 * 900e9 + 128e9));
  for (NodeId g : t.gpus()) CHECK(t.node(g).model == "b300");
  int cx8 = 0;
  for (NodeId v = 0; v < t.num_nodes(); ++v) cx8 += t.node(v).kind == NodeKind::Nic && t.node(v).model == "connectx-8";
  CHECK(cx8 == 8);
}

TEST_CASE("gb300-nvl72: 72 Blackwell Ultra GPUs in one NVLink domain, one 800 Gb/s NIC per GPU") {
  Topology t = build_preset("gb300-nvl72", {});
  TopologySummary s = summarize(t);
  presets_test::check_nvl72_rack(s);
  CHECK(s.gpu_network_Bps == doctest::Approx(100e9));
  for (NodeId g : t.gpus()) {
    CHECK(t.node(g).model == "gb300");
    CHECK(t.node(g).nvlink_domain == 0);
  }
  CHECK_THROWS_AS(build_preset("gb300-nvl72", {{"gpu", "b200"}}), InputError);
  // gb200-nvl72 prices the GB200 part by default (every GPU, on the rack and in a superpod of racks) and still
  // accepts the HGX B200 part; gb300 is not a GB200 rack's GPU.
  Topology d = build_preset("gb200-nvl72", {});
  for (NodeId gpu : d.gpus()) CHECK(d.node(gpu).model == "gb200");
  Topology sp = build_preset("superpod", {{"nodes", "2"}, {"node", "gb200-nvl72"}});
  for (NodeId gpu : sp.gpus()) CHECK(sp.node(gpu).model == "gb200");
  Topology b = build_preset("gb200-nvl72", {{"gpu", "b200"}});
  CHECK(b.node(b.gpus()[0]).model == "b200");
  CHECK_THROWS_AS(build_preset("gb200-nvl72", {{"gpu", "gb300"}}), InputError);
}

TEST_CASE("superpod of gb300-nvl72 racks and of dgx-b300 / dgx-h200 servers") {
  Topology r = build_preset("superpod", {{"nodes", "2"}, {"node", "gb300-nvl72"}});
  CHECK(r.gpus().size() == 144);
  CHECK(r.node(r.gpus()[0]).nvlink_domain != r.node(r.gpus()[72]).nvlink_domain);
  CHECK(r.node(r.gpus()[100]).model == "gb300");
  CHECK(summarize(r, SummaryOptions{true, false}).bisection_Bps == doctest::Approx(72 * 100e9));
  Topology b = build_preset("superpod", {{"nodes", "4"}, {"node", "dgx-b300"}});
  CHECK(b.gpus().size() == 32);
  CHECK(summarize(b, SummaryOptions{false, false}).gpu_network_Bps == doctest::Approx(100e9));
  Topology h = build_preset("superpod", {{"nodes", "2"}, {"node", "dgx-h200"}});
  CHECK(h.node(h.gpus()[9]).model == "h200");
  CHECK_THROWS_AS(build_preset("superpod", {{"nodes", "2"}, {"node", "gb300-nvl72"}, {"gpus_per_node", "8"}}), InputError);
}
