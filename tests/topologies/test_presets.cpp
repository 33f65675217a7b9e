// Presets: node/link counts, per-GPU bandwidth and bisection bandwidth against hand-computed values.
#include <doctest/doctest.h>

#include "sim/base/error.hpp"
#include "topologies/io.hpp"
#include "topologies/presets_internal.hpp"

#include "presets_test_util.hpp"

using namespace fabricsim;
using namespace fabricsim::topo;
using presets_test::count;

namespace {
TopologySummary sum(const std::string& preset, std::map<std::string, std::string> p = {}) {
  return summarize(build_preset(preset, p));
}
}  // namespace

TEST_CASE("dgx-h100: 8 GPUs, 4 NVSwitches with 5/4/4/5 NVLink4 links, 8 NDR NICs") {
  Topology t = build_preset("dgx-h100", {});
  TopologySummary s = summarize(t);
  CHECK(s.gpus == 8);
  CHECK(s.hosts == 1);
  CHECK(count(s.node_counts, "nvswitch") == 4);
  CHECK(count(s.node_counts, "nic") == 8);
  CHECK(count(s.node_counts, "pcie_switch") == 4);
  CHECK(count(s.node_counts, "cpu") == 2);
  CHECK(count(s.link_counts, "nvlink") == 32);            // 8 GPUs x 4 NVSwitches (bundles)
  CHECK(count(s.physical_link_counts, "nvlink") == 144);  // 8 x 18
  CHECK(count(s.link_counts, "pcie") == 21);              // 8 GPU + 8 NIC + 4 switch uplinks + 1 socket link
  CHECK(s.gpu_nvlink_Bps == doctest::Approx(450e9));      // 18 x 25 GB/s
  CHECK(s.gpu_network_Bps == doctest::Approx(50e9));      // 400 Gb/s per GPU
  // Cut GPUs 0-3 | 4-7: 4 x 450 GB/s over NVLink plus the PCIe path through the socket link (64 GB/s,
  // smaller than the 2 x 64 GB/s PCIe-switch uplinks).
  CHECK(s.bisection_Bps == doctest::Approx(4 * 450e9 + 64e9));
  CHECK(s.diameter_hops == 2);
  // NVSwitch attributes and the 5/4/4/5 split.
  for (NodeId v = 0; v < t.num_nodes(); ++v)
    if (t.node(v).kind == NodeKind::NvSwitch) {
      CHECK(t.node(v).nvls);
      CHECK(t.node(v).tier == 1);
    }
  std::vector<int> split;
  for (auto [l, w] : t.adjacent(t.gpus()[0]))
    if (t.link(l).kind == LinkKind::NVLink) split.push_back(t.link(l).count);
  CHECK(split == std::vector<int>{5, 4, 4, 5});
  for (NodeId g : t.gpus()) {
    CHECK(t.node(g).model == "h100");
    CHECK(t.node(g).nvlink_domain == 0);
  }
}

TEST_CASE("dgx-a100: 6 NVSwitches, 12 NVLink3 links per GPU, no NVLS") {
  Topology t = build_preset("dgx-a100", {});
  TopologySummary s = summarize(t);
  CHECK(s.gpus == 8);
  CHECK(count(s.node_counts, "nvswitch") == 6);
  CHECK(count(s.link_counts, "nvlink") == 48);
  CHECK(count(s.physical_link_counts, "nvlink") == 96);
  CHECK(s.gpu_nvlink_Bps == doctest::Approx(300e9));
  CHECK(s.gpu_network_Bps == doctest::Approx(25e9));
  CHECK(s.bisection_Bps == doctest::Approx(4 * 300e9 + 32e9));
  for (NodeId v = 0; v < t.num_nodes(); ++v)
    if (t.node(v).kind == NodeKind::NvSwitch) CHECK_FALSE(t.node(v).nvls);
  CHECK(t.node(t.gpus()[0]).model == "a100-80gb");
}

TEST_CASE("dgx-b200: 2 NVSwitches, 18 NVLink5 links per GPU") {
  TopologySummary s = sum("dgx-b200");
  CHECK(count(s.node_counts, "nvswitch") == 2);
  CHECK(count(s.link_counts, "nvlink") == 16);
  CHECK(count(s.physical_link_counts, "nvlink") == 144);
  CHECK(s.gpu_nvlink_Bps == doctest::Approx(900e9));
  CHECK(s.gpu_network_Bps == doctest::Approx(50e9));
  CHECK(s.bisection_Bps == doctest::Approx(4 * 900e9 + 64e9));
}

TEST_CASE("dgx1-v100: hybrid cube-mesh with 6 links per GPU and no NVSwitch") {
  Topology t = build_preset("dgx1-v100", {});
  TopologySummary s = summarize(t);
  CHECK(count(s.node_counts, "nvswitch") == 0);
  CHECK(count(s.link_counts, "nvlink") == 16);
  CHECK(count(s.physical_link_counts, "nvlink") == 24);  // 8 x 6 / 2
  for (NodeId g : t.gpus()) {
    double bw = 0;
    for (auto [l, w] : t.adjacent(g))
      if (t.link(l).kind == LinkKind::NVLink) bw += t.link(l).bandwidth_Bps;
    CHECK(bw == doctest::Approx(150e9));  // 6 x 25 GB/s
  }
  CHECK(s.gpu_network_Bps == doctest::Approx(4 * 12.5e9 / 8));
  // Crossing NVLinks 0-4 (2), 1-5 (2), 2-6 (1), 3-7 (1) = 6 x 25 GB/s, plus the 16 GB/s socket link.
  CHECK(s.bisection_Bps == doctest::Approx(150e9 + 16e9));
  CHECK(s.diameter_hops == 5);  // GPU-PCIe-CPU-CPU-PCIe-GPU for pairs without NVLink
}

TEST_CASE("pcie-server: no NVLink") {
  TopologySummary s = sum("pcie-server");
  CHECK(count(s.link_counts, "nvlink") == 0);
  CHECK(count(s.link_counts, "pcie") == 17);
  CHECK(s.gpu_nvlink_Bps == 0);
  CHECK(s.gpu_network_Bps == doctest::Approx(12.5e9));  // 4 HDR NICs for 8 GPUs
  CHECK(s.bisection_Bps == doctest::Approx(32e9));      // the socket link
  CHECK(s.diameter_hops == 5);
  CHECK_THROWS_AS(build_preset("pcie-server", {{"nvlink_bandwidth", "100GB/s"}}), InputError);
}

TEST_CASE("gb200-nvl72: 72 GPUs in one NVLink domain") {
  Topology t = build_preset("gb200-nvl72", {});
  TopologySummary s = summarize(t);
  presets_test::check_nvl72_rack(s);
  CHECK(s.diameter_hops == 2);
  for (NodeId g : t.gpus()) CHECK(t.node(g).nvlink_domain == 0);
}

TEST_CASE("nvlink-switch-system: 256 H100 non-blocking over tier-2 NVSwitches") {
  Topology t = build_preset("nvlink-switch-system", {});
  TopologySummary s = summarize(t);
  CHECK(s.gpus == 256);
  CHECK(count(s.node_counts, "nvswitch") == 32 * 4 + 36);
  CHECK(count(s.physical_link_counts, "nvlink") == 32 * 144 * 2);
  // 128 GPUs x 450 GB/s = 57.6 TB/s, NVIDIA's all-to-all figure (hardware_specs.json).
  CHECK(s.bisection_Bps == doctest::Approx(57.6e12));
  CHECK(s.diameter_hops == 4);
  int tier2 = 0;
  for (NodeId v = 0; v < t.num_nodes(); ++v)
    if (t.node(v).kind == NodeKind::NvSwitch && t.node(v).tier == 2) ++tier2;
  CHECK(tier2 == 36);
  CHECK(summarize(build_preset("nvlink-switch-system", {{"nodes", "2"}})).bisection_Bps == doctest::Approx(8 * 450e9));
  CHECK_THROWS_AS(build_preset("nvlink-switch-system", {{"nodes", "33"}}), InputError);
}

TEST_CASE("superpod of 32 dgx-a100 (HDR, radix 40, 2 tiers)") {
  Topology t = build_preset("superpod", {{"nodes", "32"}, {"node", "dgx-a100"}, {"sharp", "true"}});
  TopologySummary s = summarize(t);
  CHECK(s.gpus == 256);
  CHECK(s.hosts == 32);
  // Leaves: 20 down / 20 up; 2 leaves per rail x 8 rails = 16. Spines: 16 x 20 uplinks / 40 ports = 8,
  // rounded up to a divisor of 20 -> 10 spines with 2-link bundles.
  CHECK(count(s.node_counts, "ib_switch") == 26);
  CHECK(count(s.link_counts, "infiniband") == 256 + 16 * 10);
  CHECK(count(s.physical_link_counts, "infiniband") == 256 + 16 * 20);
  CHECK(s.gpu_nvlink_Bps == doctest::Approx(300e9));
  CHECK(s.gpu_network_Bps == doctest::Approx(25e9));
  CHECK(s.bisection_Bps == doctest::Approx(16 * 8 * 25e9));  // non-blocking: half the NICs
  CHECK(s.diameter_hops == 8);
  int leaves = 0, spines = 0;
  for (NodeId v = 0; v < t.num_nodes(); ++v) {
    const Node& n = t.node(v);
    if (n.kind != NodeKind::IbSwitch) continue;
    CHECK(n.sharp);
    if (n.tier == 1) {
      ++leaves;
      CHECK(n.rail >= 0);
    }
    if (n.tier == 2) ++spines;
  }
  CHECK(leaves == 16);
  CHECK(spines == 10);
}

TEST_CASE("ABCI-like superpod: dgx-a100 with 4 HDR NICs per 8 GPUs") {
  Topology t = build_preset("superpod", {{"nodes", "4"}, {"node", "dgx-a100"}, {"nics_per_node", "4"},
                                         {"nic_bandwidth", "200Gbps"}, {"gpu", "a100-40gb"}});
  TopologySummary s = summarize(t);
  CHECK(s.gpus == 32);
  CHECK(count(s.node_counts, "nic") == 16);
  CHECK(s.gpu_network_Bps == doctest::Approx(4 * 25e9 / 8));
  // 4 rails with one leaf each; spines: 4 x 20 / 40 = 2 with 10-link bundles.
  CHECK(count(s.node_counts, "ib_switch") == 6);
  CHECK(count(s.physical_link_counts, "infiniband") == 16 + 4 * 20);
  CHECK(s.bisection_Bps == doctest::Approx(8 * 25e9));
  CHECK(t.node(t.gpus()[0]).model == "a100-40gb");
}

TEST_CASE("superpod 3 tiers and oversubscription") {
  // radix 16: leaves 8 down / 8 up, 8 leaves per rail, 64 leaves in 8 pods of 8, 8 spines per pod;
  // spines send 8 links up to 4 cores per group (2-link bundles), 8 groups = 32 cores.
  Topology t = build_preset("superpod", {{"nodes", "64"}, {"radix", "16"}, {"tiers", "3"}});
  TopologySummary s = summarize(t, SummaryOptions{true, false});
  int tiers[4] = {0, 0, 0, 0};
  for (NodeId v = 0; v < t.num_nodes(); ++v)
    if (t.node(v).kind == NodeKind::IbSwitch) tiers[t.node(v).tier]++;
  CHECK(tiers[1] == 64);
  CHECK(tiers[2] == 64);
  CHECK(tiers[3] == 32);
  CHECK(s.bisection_Bps == doctest::Approx(32 * 8 * 50e9));
  // Oversubscription 3 at the leaf: radix 16 -> 12 down / 4 up; 24 nodes -> 2 leaves per rail, 2 tiers.
  // Hosts 0-11 fill the first leaf of each rail, so the cut is their 8 leaves' uplinks: 8 x 4 x 50 GB/s.
  Topology o = build_preset("superpod", {{"nodes", "24"}, {"radix", "16"}, {"oversubscription", "3"}});
  CHECK(o.params().at("tiers") == "2");
  CHECK(summarize(o, SummaryOptions{true, false}).bisection_Bps == doctest::Approx(8 * 4 * 50e9));
  // A 2-tier tree cannot hold it with radix 8.
  CHECK_THROWS_AS(build_preset("superpod", {{"nodes", "64"}, {"radix", "8"}, {"tiers", "2"}}), InputError);
}

TEST_CASE("superpod on an Ethernet fabric and of gb200-nvl72 racks") {
  Topology e = build_preset("superpod", {{"nodes", "4"}, {"fabric", "ethernet"}, {"nic_bandwidth", "200Gbps"}});
  TopologySummary s = summarize(e);
  CHECK(count(s.link_counts, "infiniband") == 0);
  CHECK(count(s.node_counts, "eth_switch") > 0);
  CHECK(s.gpu_network_Bps == doctest::Approx(25e9));
  for (NodeId v = 0; v < e.num_nodes(); ++v)
    if (e.node(v).kind == NodeKind::EthSwitch) CHECK_FALSE(e.node(v).sharp);
  Topology r = build_preset("superpod", {{"nodes", "2"}, {"node", "gb200-nvl72"}});
  CHECK(r.gpus().size() == 144);
  CHECK(r.node(r.gpus()[0]).nvlink_domain != r.node(r.gpus()[72]).nvlink_domain);
  CHECK(summarize(r, SummaryOptions{true, false}).bisection_Bps == doctest::Approx(72 * 50e9));
}

TEST_CASE("preset parameters: overrides and errors") {
  Topology t = build_preset("dgx-h100", {{"nvlink_bandwidth", "900GB/s"}, {"gpu", "h200"}, {"nics_per_node", "4"}});
  CHECK(summarize(t, SummaryOptions{false, false}).gpu_nvlink_Bps == doctest::Approx(900e9));
  CHECK(t.node(t.gpus()[0]).model == "h200");
  try {
    build_preset("dgx-h100", {{"nodes", "2"}});
    FAIL("expected an error");
  } catch (const InputError& e) {
    std::string m = e.what();
    CHECK(m.find("--param nodes") != std::string::npos);
    CHECK(m.find("gpus_per_node") != std::string::npos);  // lists valid parameters
  }
  CHECK_THROWS_AS(build_preset("superpod", {{"node", "dgx-z"}}), InputError);
  CHECK_THROWS_AS(build_preset("superpod", {{"gpu", "k80"}}), InputError);
  CHECK_THROWS_AS(build_preset("superpod", {{"nodes", "0"}}), InputError);
  CHECK_THROWS_AS(build_preset("superpod", {{"nic_bandwidth", "-1Gbps"}}), InputError);
  CHECK_THROWS_AS(build_preset("superpod", {{"oversubscription", "0.5"}}), InputError);
  CHECK_THROWS_AS(build_preset("no-such-preset", {}), InputError);
  CHECK(presets().size() == 12);  // + dgx-h200, dgx-b300, gb300-nvl72, mi300x-node
}
