// Fat-tree multipath: destination-based D-mod-k routing (InfiniBand's, the default) balances an all-to-all over
// every leaf-spine and spine-core link direction exactly; hashed ECMP (RoCE's and Ethernet's default) does not.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>

#include "topologies/io.hpp"
#include "topologies/routing.hpp"

using namespace fabricsim;
using namespace fabricsim::topo;

namespace {
// Routes of every pair among `gpus` on different hosts, counted per link direction between two fabric
// switches, grouped by (tier of the sending switch, tier of the receiving switch). Per group: the fewest and
// most routes on one direction, and how many directions are used.
struct Load {
  int min = 0, max = 0;
  std::size_t dirs = 0;
};
std::map<std::pair<int, int>, Load> switch_link_load(const Topology& t, Routing& r, const std::vector<NodeId>& gpus) {
  std::map<LinkDir, int> c;
  std::vector<LinkDir> p;
  for (NodeId a : gpus)
    for (NodeId b : gpus) {
      if (a == b || t.node(a).host == t.node(b).host) continue;
      r.compute_route(a, b, p);
      for (LinkDir d : p) {
        const Link& l = t.link(Topology::link_of(d));
        const auto sw = [&](NodeId v) { return t.node(v).kind == NodeKind::IbSwitch || t.node(v).kind == NodeKind::EthSwitch; };
        if (sw(l.a) && sw(l.b)) ++c[d];
      }
    }
  std::map<std::pair<int, int>, Load> out;
  for (auto& [d, k] : c) {
    const NodeId from = t.dir_src(d), to = t.dir_dst(d);
    Load& g = out[{t.node(from).tier, t.node(to).tier}];
    g.min = g.dirs == 0 ? k : std::min(g.min, k);
    g.max = g.dirs == 0 ? k : std::max(g.max, k);
    ++g.dirs;
  }
  return out;
}
// D-mod-k loads every used leaf -> spine and spine -> leaf direction equally (`dirs` of them per kind) for the
// all-to-all over `gpus`; hashed ECMP on the same pairs does not.
void check_dmodk_even_hash_not(const Topology& t, const std::vector<NodeId>& gpus, unsigned dirs) {
  Routing dmodk(t);
  auto d = switch_link_load(t, dmodk, gpus);
  REQUIRE(d.size() == 2);  // leaf -> spine and spine -> leaf
  for (auto& [k, g] : d) {
    CHECK(g.dirs == dirs);
    CHECK(g.min == g.max);
  }
  Routing hashed(t, RoutingOptions{false, FabricRouting::Hash});
  auto h = switch_link_load(t, hashed, gpus);
  REQUIRE(h.size() == 2);
  CHECK(h.begin()->second.max > h.begin()->second.min);
}

}  // namespace

TEST_CASE("D-mod-k balances an all-to-all over the spines of a 2-tier fat tree; hashed ECMP does not") {
  // 64 DGX H100: 16 leaves (2 per rail), 8 spines, 4-link bundles leaf<->spine.
  Topology t = build_preset("superpod", {{"nodes", "64"}, {"node", "dgx-h100"}});
  std::vector<NodeId> gpus;
  for (NodeId g : t.gpus())
    if (t.node(g).local_index % 4 == 0) gpus.push_back(g);  // rails 0 and 4: cross-rail and same-rail pairs
  CHECK(Routing(t).options().fabric == FabricRouting::DModK);
  check_dmodk_even_hash_not(t, gpus, 4u * 8u);  // 4 leaves x 8 spines, all used
}

TEST_CASE("D-mod-k balances a rail-local all-to-all over spines and cores of a 3-tier fat tree") {
  // 512 DGX H100 (the 4096-GPU benchmark fabric): 128 leaves in 4 pods of 32, 32 spines per pod, 32 core
  // groups of 2 cores. Rail 0 only (the traffic pattern of the PXN all-to-all): 16 leaves over 4 pods.
  Topology t = build_preset("superpod", {{"nodes", "512"}, {"node", "dgx-h100"}});
  std::vector<NodeId> gpus;
  for (NodeId g : t.gpus())
    if (t.node(g).local_index == 0) gpus.push_back(g);
  Routing r(t);
  auto d = switch_link_load(t, r, gpus);
  REQUIRE(d.size() == 4);  // leaf->spine, spine->core, core->spine, spine->leaf
  for (auto& [k, g] : d) {
    CAPTURE(k.first);
    CAPTURE(k.second);
    CHECK(g.min == g.max);
  }
  CHECK(d[{2, 3}].dirs == 4u * 32u * 2u);  // every spine uses both cores of its group
  Routing hashed(t, RoutingOptions{false, FabricRouting::Hash});
  auto h = switch_link_load(t, hashed, gpus);
  CHECK(h[{1, 2}].max > h[{1, 2}].min);
  // Determinism: a second Routing gives the same route for a cross-pod pair; it climbs to a core.
  Routing r2(t);
  const auto& p1 = r.route(gpus.front(), gpus.back());
  CHECK(p1 == r2.route(gpus.front(), gpus.back()));
  bool core = false;
  for (LinkDir ld : p1) core = core || t.node(t.dir_dst(ld)).tier == 3;
  CHECK(core);
}

TEST_CASE("D-mod-k balances an all-to-all over the spines of a non-rail (host-based) fat tree") {
  // 64 DGX H100, rail_optimized=false: 16 leaves of 4 servers, 8 spines, 4-link bundles. Every GPU (a subset of
  // NIC indices would not do: a leaf numbers its ports server by server, so NIC k of every server has the same
  // index mod 8 and D-mod-k sends all traffic to NIC k through spine k, as the SM's tables would); a server's
  // 8 NICs share its leaf, so 60 of the 63 other servers are across a spine.
  Topology t = build_preset("superpod", {{"nodes", "64"}, {"node", "dgx-h100"}, {"rail_optimized", "false"}});
  const std::vector<NodeId>& gpus = t.gpus();
  check_dmodk_even_hash_not(t, gpus, 16u * 8u);  // 16 leaves x 8 spines, all used
}

TEST_CASE("A RoCE superpod routes by hashed ECMP by default: uneven spine links; routing=dmodk balances them") {
  // 64 DGX H100 over RoCE, 1:1 and 2:1: the same fat tree as the InfiniBand one above, Ethernet switches.
  for (const char* over : {"1", "2"}) {
    CAPTURE(std::string(over));
    const std::map<std::string, std::string> p = {
        {"nodes", "64"}, {"node", "dgx-h100"}, {"fabric", "roce"}, {"oversubscription", over}};
    Topology t = build_preset("superpod", p);
    std::vector<NodeId> gpus;
    for (NodeId g : t.gpus())
      if (t.node(g).local_index % 4 == 0) gpus.push_back(g);
    Routing hashed(t);  // no option: the topology's rule
    REQUIRE(hashed.options().fabric == FabricRouting::Hash);
    const auto h = switch_link_load(t, hashed, gpus);
    REQUIRE(h.size() == 2);  // leaf -> spine and spine -> leaf
    auto q = p;
    q["routing"] = "dmodk";
    Topology d = build_preset("superpod", q);
    Routing balanced(d);
    REQUIRE(balanced.options().fabric == FabricRouting::DModK);
    const auto b = switch_link_load(d, balanced, gpus);
    REQUIRE(b.size() == 2);
    for (const auto& [k, g] : h) {
      CAPTURE(k.first);
      CHECK(g.max > g.min);  // hash collisions: some spine links carry more routes than others
      if (std::string(over) == "1") {
        CHECK(b.at(k).min == b.at(k).max);  // D-mod-k: all equal at 1:1
        CHECK(g.max > b.at(k).max);         // so hashing's busiest link carries more than any of D-mod-k's
      } else {
        // 2:1 (up to 43 NICs over 21 uplinks per leaf): D-mod-k is not exactly even either (the destinations do not
        // divide over the up-ports), and its busiest link carries more routes than hashing's (552 and 588 against
        // 544 and 548 up and down): what docs/collectives.md "Multipath" measures as all_to_all at radix 16, 2:1.
        CHECK(b.at(k).max > b.at(k).min);
      }
    }
  }
}
