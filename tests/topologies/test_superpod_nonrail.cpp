// superpod rail_optimized=false (host-based leaves: all NICs of a server on one leaf) against hand-computed
// switch and link counts, and the superpod parameter bounds (oversubscription, nic_bandwidth, rail_optimized).
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "sim/base/error.hpp"
#include "topologies/io.hpp"
#include "topologies/presets_internal.hpp"
#include "topologies/routing.hpp"

#include "presets_test_util.hpp"

using namespace fabricsim;
using namespace fabricsim::topo;
using presets_test::count;

namespace {
// host -> the leaves its NICs connect to; leaf -> NIC links and uplinks (physical).
struct Leaves {
  std::map<int, std::set<NodeId>> host_leaves;
  std::map<NodeId, int> nic_links, up_links;
};
Leaves leaves_of(const Topology& t) {
  Leaves out;
  for (LinkId l = 0; l < t.num_links(); ++l) {
    const Link& k = t.link(l);
    for (auto [a, b] : {std::pair{k.a, k.b}, std::pair{k.b, k.a}}) {
      const Node& sw = t.node(b);
      if (sw.kind != NodeKind::IbSwitch || sw.tier != 1) continue;
      if (t.node(a).kind == NodeKind::Nic) {
        out.host_leaves[t.node(a).host].insert(b);
        out.nic_links[b] += k.count;
      } else if (t.node(a).kind == NodeKind::IbSwitch) {
        out.up_links[b] += k.count;
      }
    }
  }
  return out;
}
}  // namespace

TEST_CASE("superpod rail_optimized=false: every server's NICs on one leaf, the rail tree's switch count at 1:1") {
  // 64 DGX H100, radix 64, 1:1: a leaf takes 4 whole servers (32 NICs) and has 32 uplinks: 16 leaves, 8 spines
  // with 4-link bundles, as the rail-optimised tree (2 leaves per rail x 8 rails).
  const Topology t = build_preset("superpod", {{"nodes", "64"}, {"rail_optimized", "false"}});
  const Topology rail = build_preset("superpod", {{"nodes", "64"}});
  CHECK(t.params().at("rail_optimized") == "false");
  CHECK(rail.params().at("rail_optimized") == "true");
  const TopologySummary s = summarize(t, SummaryOptions{true, false});
  const TopologySummary sr = summarize(rail, SummaryOptions{true, false});
  CHECK(count(s.node_counts, "ib_switch") == 16 + 8);
  CHECK(count(sr.node_counts, "ib_switch") == 16 + 8);
  CHECK(count(s.link_counts, "infiniband") == 512 + 16 * 8);
  CHECK(count(s.physical_link_counts, "infiniband") == 512 + 16 * 32);
  CHECK(count(s.physical_link_counts, "infiniband") == count(sr.physical_link_counts, "infiniband"));
  // Non-blocking either way: the cut between servers 0-31 and 32-63 is half the NICs.
  CHECK(s.bisection_Bps == doctest::Approx(256 * 50e9));
  CHECK(sr.bisection_Bps == doctest::Approx(256 * 50e9));
  const Leaves L = leaves_of(t);
  REQUIRE(L.host_leaves.size() == 64);
  for (const auto& [h, ls] : L.host_leaves) {
    CAPTURE(h);
    REQUIRE(ls.size() == 1);  // all 8 NICs of the server on one leaf
    const Node& leaf = t.node(*ls.begin());
    CHECK(leaf.rail == -1);
    CHECK(leaf.local_index == h / 4);  // consecutive servers
    CHECK(leaf.id == "leaf." + std::to_string(h / 4));
  }
  for (const auto& [leaf, n] : L.nic_links) CHECK(n == 32);
  for (const auto& [leaf, n] : L.up_links) CHECK(n == 32);
  // The rail-optimised tree puts a server's 8 NICs on 8 leaves.
  for (const auto& [h, ls] : leaves_of(rail).host_leaves) CHECK(ls.size() == 8);
}

TEST_CASE("superpod rail_optimized=false at 2:1: whole servers per leaf, uplinks at down/2") {
  // radix 64 at 2:1: round(64*2/3) = 43 ports down, rounded down to whole servers: 40 (5 DGX), 20 up; 13 leaves
  // (the last holds 4 servers); 13 x 20 uplinks need 5 spines (5 divides 20) with 4-link bundles.
  const Topology t = build_preset("superpod", {{"nodes", "64"}, {"rail_optimized", "false"}, {"oversubscription", "2"}});
  const TopologySummary s = summarize(t);
  CHECK(count(s.node_counts, "ib_switch") == 13 + 5);
  CHECK(count(s.physical_link_counts, "infiniband") == 512 + 13 * 20);
  const Leaves L = leaves_of(t);
  for (const auto& [h, ls] : L.host_leaves) {
    REQUIRE(ls.size() == 1);
    CHECK(t.node(*ls.begin()).local_index == h / 5);
  }
  for (const auto& [leaf, n] : L.up_links) CHECK(n == 20);
  int full = 0;
  for (const auto& [leaf, n] : L.nic_links) full += n == 40;
  CHECK(full == 12);
  // The shape: plan_fat_tree with 8 endpoints per host.
  const FatTreeShape f = plan_fat_tree(512, 1, 64, 2.0, 0, 8);
  CHECK(f.down == 40);
  CHECK(f.up == 20);
  CHECK_FALSE(f.rail_optimized);
  // The rail-optimised tree at 2:1 keeps 43 down / 21 up.
  const FatTreeShape fr = plan_fat_tree(64, 8, 64, 2.0, 0);
  CHECK(fr.down == 43);
  CHECK(fr.up == 21);
}

TEST_CASE("superpod rail_optimized=false in 3 tiers: one server per leaf, routes within a leaf stay below the spines") {
  // radix 16: 8 down (one DGX) / 8 up; 16 leaves in 2 pods of 8, 8 spines per pod, 8 core groups of 1 core.
  const Topology t =
      build_preset("superpod", {{"nodes", "16"}, {"radix", "16"}, {"tiers", "3"}, {"rail_optimized", "false"}});
  int tiers[4] = {0, 0, 0, 0};
  for (NodeId v = 0; v < t.num_nodes(); ++v)
    if (t.node(v).kind == NodeKind::IbSwitch) tiers[t.node(v).tier]++;
  CHECK(tiers[1] == 16);
  CHECK(tiers[2] == 16);
  CHECK(tiers[3] == 8);
  Routing r(t);
  auto top_tier = [&](NodeId a, NodeId b) {
    int top = 0;
    for (LinkDir d : r.route(a, b)) top = std::max(top, t.node(t.dir_dst(d)).tier);
    return top;
  };
  const auto& g = t.gpus();
  CHECK(top_tier(g[0], g[8 + 3]) == 2);        // servers 0 and 1: same pod, different leaves
  CHECK(top_tier(g[0], g[8 * 8 + 3]) == 3);    // servers 0 and 8: different pods
  // 2 tiers, 2 servers per leaf (radix 32): GPU 0 -> GPU 5 of the other server of the leaf stays at the leaf,
  // a cross-rail pair that turns at a spine in the rail-optimised tree.
  const Topology t2 = build_preset("superpod", {{"nodes", "4"}, {"radix", "32"}, {"rail_optimized", "false"}});
  const Topology r2 = build_preset("superpod", {{"nodes", "4"}, {"radix", "32"}});
  Routing a(t2), b(r2);
  auto top2 = [](const Topology& tt, Routing& rr, NodeId x, NodeId y) {
    int top = 0;
    for (LinkDir d : rr.route(x, y)) top = std::max(top, tt.node(tt.dir_dst(d)).tier);
    return top;
  };
  CHECK(top2(t2, a, t2.gpus()[0], t2.gpus()[8 + 5]) == 1);
  CHECK(top2(r2, b, r2.gpus()[0], r2.gpus()[8 + 5]) == 2);
  CHECK(top2(t2, a, t2.gpus()[0], t2.gpus()[16 + 5]) == 2);  // server 2 is on the next leaf
}

TEST_CASE("superpod parameter bounds: oversubscription within the radix, a sane NIC speed, rail_optimized true/false") {
  // Before, oversubscription above radix-1 was clamped to (radix-1):1 without a word.
  CHECK_THROWS_WITH_AS(build_preset("superpod", {{"nodes", "128"}, {"oversubscription", "1e9"}}),
                       "--param oversubscription: a number in [1, 63] for switches of radix 64 (got 1e+09)", InputError);
  CHECK_THROWS_WITH_AS(build_preset("superpod", {{"radix", "16"}, {"oversubscription", "15.5"}}),
                       "--param oversubscription: a number in [1, 15] for switches of radix 16 (got 15.5)", InputError);
  CHECK_THROWS_AS(build_preset("superpod", {{"rail_optimized", "false"}, {"oversubscription", "64"}}), InputError);
  const FatTreeShape f = plan_fat_tree(128, 8, 64, 63, 0);
  CHECK(f.down == 63);
  CHECK(f.up == 1);
  CHECK_THROWS_WITH_AS(build_preset("superpod", {{"nic_bandwidth", "400Tbps"}}),
                       "--param nic_bandwidth=400Tbps: at most 100Tbps per NIC (the fastest NIC port today is 800Gbps; "
                       "did you mean Gbps?)",
                       InputError);
  CHECK_THROWS_AS(build_preset("dgx-h100", {{"nic_bandwidth", "20TB/s"}}), InputError);
  CHECK_THROWS_AS(build_preset("gb200-nvl72", {{"nic_bandwidth", "101Tbps"}}), InputError);
  CHECK(summarize(build_preset("dgx-h100", {{"nic_bandwidth", "100Tbps"}}), SummaryOptions{false, false})
            .gpu_network_Bps == doctest::Approx(12.5e12));
  CHECK_THROWS_WITH_AS(build_preset("superpod", {{"rail_optimized", "no"}}),
                       "--param rail_optimized: one of true, false (got 'no')", InputError);
}
