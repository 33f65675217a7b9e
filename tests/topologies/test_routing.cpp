// Routing: NVLink inside a domain, rail NICs across hosts, deterministic and spreading ECMP, PXN.
#include <doctest/doctest.h>

#include <set>

#include "sim/base/error.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

using namespace fabricsim;
using namespace fabricsim::topo;

namespace {
NodeId id(const Topology& t, const std::string& s) {
  NodeId n = t.find(s);
  REQUIRE(n != kNoNode);
  return n;
}
// "n<host>.gpu<idx>" (built with append: GCC 12 warns falsely on literal + to_string temporaries).
std::string gpu_id(int host, int idx) {
  std::string s = "n";
  s += std::to_string(host);
  s += ".gpu";
  s += std::to_string(idx);
  return s;
}
std::vector<NodeId> hops(const Topology& t, const std::vector<LinkDir>& r) {
  std::vector<NodeId> v;
  for (LinkDir d : r) v.push_back(t.dir_dst(d));
  return v;
}
}  // namespace

TEST_CASE("intra-node GPU traffic stays on NVLink/NVSwitch") {
  Topology t = build_preset("dgx-h100", {});
  Routing r(t);
  for (NodeId a : t.gpus())
    for (NodeId b : t.gpus()) {
      const auto& p = r.route(a, b);
      if (a == b) {
        CHECK(p.empty());
        continue;
      }
      REQUIRE(p.size() == 2);
      CHECK(t.dir_src(p[0]) == a);
      CHECK(t.dir_dst(p[1]) == b);
      for (LinkDir d : p) CHECK(t.link(Topology::link_of(d)).kind == LinkKind::NVLink);
      CHECK(t.node(t.dir_dst(p[0])).kind == NodeKind::NvSwitch);
    }
  // Ties broken toward higher bandwidth: the 5-link NVSwitches (0 and 3) carry 125 GB/s.
  CHECK(r.bottleneck_bandwidth(t.gpus()[0], t.gpus()[1]) == doctest::Approx(125e9));
  CHECK(r.latency(t.gpus()[0], t.gpus()[1]) == doctest::Approx(2 * 150e-9));
}

TEST_CASE("dgx1-v100: direct NVLink where present, PCIe otherwise") {
  Topology t = build_preset("dgx1-v100", {});
  Routing r(t);
  const auto& p01 = r.route(id(t, "n0.gpu0"), id(t, "n0.gpu1"));
  REQUIRE(p01.size() == 1);
  CHECK(t.link(Topology::link_of(p01[0])).kind == LinkKind::NVLink);
  const auto& p06 = r.route(id(t, "n0.gpu0"), id(t, "n0.gpu6"));  // no NVLink between 0 and 6
  REQUIRE_FALSE(p06.empty());
  for (LinkDir d : p06) CHECK(t.link(Topology::link_of(d)).kind == LinkKind::PCIe);
  for (NodeId v : hops(t, p06)) CHECK((v == id(t, "n0.gpu6") || t.node(v).kind != NodeKind::Gpu));
}

TEST_CASE("inter-node traffic leaves through the GPU's rail NIC") {
  Topology t = build_preset("superpod", {{"nodes", "32"}, {"node", "dgx-a100"}});
  Routing r(t);
  for (int g = 0; g < 8; ++g) {
    NodeId src = id(t, "n0.gpu" + std::to_string(g));
    NodeId dst = id(t, "n25.gpu" + std::to_string((g + 3) % 8));
    CHECK(r.rail_nic(src) == id(t, "n0.nic" + std::to_string(g)));
    const auto& p = r.route(src, dst);
    auto v = hops(t, p);
    // gpu -> pcie -> nic(g) -> leaf(rail g) -> ... -> leaf(rail of dst) -> nic -> pcie -> gpu
    REQUIRE(v.size() >= 7);
    CHECK(v[1] == r.rail_nic(src));
    CHECK(t.node(v[2]).rail == g);
    CHECK(t.node(v[2]).tier == 1);
    CHECK(v[v.size() - 3] == r.rail_nic(dst));
    CHECK(v.back() == dst);
    for (NodeId x : v) CHECK((x == dst || t.node(x).kind != NodeKind::Gpu));
    for (NodeId x : v) CHECK((t.node(x).host < 0 || t.node(x).host == 0 || t.node(x).host == 25));
    CHECK(r.bottleneck_bandwidth(src, dst) == doctest::Approx(25e9));
  }
  // Same rail, hosts under the same leaf: leaf turn-around, no spine.
  const auto& same = r.route(id(t, "n0.gpu2"), id(t, "n1.gpu2"));
  CHECK(same.size() == 6);
  // Different hosts within one NVLink-less path count: all routes shortest in hops = 8 for cross-leaf.
  CHECK(r.route(id(t, "n0.gpu0"), id(t, "n31.gpu0")).size() == 8);
}

TEST_CASE("ECMP is deterministic per pair and spreads pairs over spines") {
  Topology t = build_preset("superpod", {{"nodes", "32"}, {"node", "dgx-a100"}});
  Routing r1(t), r2(t);
  std::set<NodeId> spines;
  int pairs = 0;
  for (int a = 0; a < 20; ++a)
    for (int b = 20; b < 32; ++b) {
      NodeId src = id(t, gpu_id(a, 0));
      NodeId dst = id(t, gpu_id(b, 0));
      const auto& p1 = r1.route(src, dst);
      CHECK(p1 == r2.route(src, dst));
      std::vector<LinkDir> p3;
      r1.compute_route(src, dst, p3);
      CHECK(p3 == p1);
      for (NodeId v : hops(t, p1))
        if (t.node(v).tier == 2) spines.insert(v);
      ++pairs;
    }
  CHECK(r1.cached_routes() == static_cast<std::size_t>(pairs));
  // 240 pairs over 10 spines: all of them are used.
  CHECK(spines.size() == 10);
  r1.clear_cache();
  CHECK(r1.cached_routes() == 0);
}

TEST_CASE("PXN keeps traffic on the destination's rail") {
  Topology t = build_preset("superpod", {{"nodes", "2"}});
  Routing plain(t), pxn(t, RoutingOptions{true});
  NodeId src = id(t, "n0.gpu0"), dst = id(t, "n1.gpu3");
  auto vp = hops(t, plain.route(src, dst));
  auto vx = hops(t, pxn.route(src, dst));
  // Plain: nic0 -> rail-0 leaf -> spine -> rail-3 leaf.
  bool plain_spine = false;
  for (NodeId v : vp) plain_spine |= t.node(v).tier == 2;
  CHECK(plain_spine);
  // PXN: NVLink to n0.gpu3 first, then its NIC (rail 3), one rail-3 leaf, no spine.
  REQUIRE(vx.size() >= 4);
  CHECK(t.node(vx[0]).kind == NodeKind::NvSwitch);
  CHECK(vx[1] == id(t, "n0.gpu3"));
  bool pxn_spine = false;
  for (NodeId v : vx) {
    pxn_spine |= t.node(v).kind == NodeKind::IbSwitch && t.node(v).tier == 2;
    if (t.node(v).kind == NodeKind::IbSwitch && t.node(v).tier == 1) CHECK(t.node(v).rail == 3);
  }
  CHECK_FALSE(pxn_spine);
  CHECK(vx.back() == dst);
}

TEST_CASE("PXN on DGX-1 servers: only through the NIC's first GPU, and only over a direct NVLink (NCCL's PATH_NVL)") {
  // NCCL v2.26.2-1 (src/graph/search.cc ncclTopoGetNetDev, P2P_PXN_LEVEL 2; src/graph/topo.cc ncclTopoGetLocalGpu):
  // the proxy for the destination's rail is that NIC's local GPU, GPU 2k of NIC k on a DGX-1, and it is used only
  // when it has PATH_NVL to the sender; otherwise the sender leaves through its own NIC.
  Topology t = build_preset("superpod", {{"nodes", "2"}, {"node", "dgx1-v100"}});
  Routing pxn(t, RoutingOptions{true});
  REQUIRE(pxn.rail_nic(id(t, "n0.gpu5")) == id(t, "n0.nic2"));
  auto first_hop = [&](const std::string& a, const std::string& b) { return hops(t, pxn.route(id(t, a), id(t, b))).at(0); };
  auto leaves_through = [&](const std::string& a, const std::string& b) {
    for (NodeId v : hops(t, pxn.route(id(t, a), id(t, b))))
      if (t.node(v).kind == NodeKind::Nic) return v;
    return kNoNode;
  };
  // GPU 5 -> rail 0: GPU 0 (rail 0's proxy) has no NVLink to GPU 5; GPU 1 (NVLink to 5, same NIC) is not tried.
  CHECK(leaves_through("n0.gpu5", "n1.gpu0") == id(t, "n0.nic2"));
  CHECK(first_hop("n0.gpu5", "n1.gpu0") != id(t, "n0.gpu1"));
  // GPU 0 -> rail 3: GPU 6 is two NVLinks away (through GPU 2 or 4), PATH_NVB: its own NIC.
  CHECK(leaves_through("n0.gpu0", "n1.gpu6") == id(t, "n0.nic0"));
  // GPU 5 -> rail 3: GPU 6 has a direct NVLink to GPU 5, so PXN through it.
  CHECK(first_hop("n0.gpu5", "n1.gpu7") == id(t, "n0.gpu6"));
  CHECK(leaves_through("n0.gpu5", "n1.gpu7") == id(t, "n0.nic3"));
  // GPU 1 -> rail 1: GPU 2, direct NVLink.
  CHECK(first_hop("n0.gpu1", "n1.gpu3") == id(t, "n0.gpu2"));
}

TEST_CASE("rail NIC is the closest NIC: 4 NICs for 8 GPUs (ABCI-like)") {
  Topology t = build_preset("dgx-a100", {{"nics_per_node", "4"}});
  Routing r(t);
  for (int g = 0; g < 8; ++g)
    CHECK(r.rail_nic(id(t, "n0.gpu" + std::to_string(g))) == id(t, "n0.nic" + std::to_string(g / 2)));
  CHECK(r.rail_nic(id(t, "n0.nic0")) == kNoNode);
}

TEST_CASE("hand-written file: routes and unreachable pairs") {
  Topology t = load_topology_file(std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/topologies/two_hosts.json");
  Routing r(t);
  auto v = hops(t, r.route(id(t, "h0.gpu1"), id(t, "h1.gpu0")));
  CHECK(v == std::vector<NodeId>{id(t, "h0.nic0"), id(t, "sw"), id(t, "h1.nic0"), id(t, "h1.gpu0")});
  CHECK(r.latency(id(t, "h0.gpu1"), id(t, "h1.gpu0")) == doctest::Approx(250e-9 + 300e-9 + 0 + 250e-9));
  CHECK(r.route(id(t, "h0.nic0"), id(t, "h1.nic0")).size() == 2);  // non-GPU endpoints: general search

  TopologyBuilder b("split");
  Node g;
  g.kind = NodeKind::Gpu;
  g.id = "a";
  NodeId a = b.add_node(g);
  g.id = "b";
  NodeId c = b.add_node(g);
  Node s;
  s.kind = NodeKind::NvSwitch;
  s.id = "s1";
  NodeId s1 = b.add_node(s);
  s.id = "s2";
  NodeId s2 = b.add_node(s);
  b.add_link(a, s1, LinkKind::NVLink, 1e9, 0);
  b.add_link(c, s2, LinkKind::NVLink, 1e9, 0);
  Topology split = std::move(b).build();
  Routing rs(split);
  CHECK_THROWS_AS(rs.route(a, c), InputError);
  TopologySummary sum = summarize(split);
  CHECK(sum.unreachable_gpu_pairs == 2);
  CHECK(sum.bisection_Bps == 0);
  CHECK(summary_text(split, sum).find("2 ordered GPU pairs have no route") != std::string::npos);
}

TEST_CASE("NVLink domain spanning hosts: gb200-nvl72 and nvlink-switch-system") {
  Topology t = build_preset("gb200-nvl72", {});
  Routing r(t);
  const auto& p = r.route(id(t, "n0.gpu0"), id(t, "n17.gpu3"));
  REQUIRE(p.size() == 2);
  for (LinkDir d : p) CHECK(t.link(Topology::link_of(d)).kind == LinkKind::NVLink);
  Topology n = build_preset("nvlink-switch-system", {{"nodes", "4"}});
  Routing rn(n);
  const auto& q = rn.route(id(n, "n0.gpu0"), id(n, "n3.gpu5"));
  CHECK(q.size() == 4);
  for (LinkDir d : q) CHECK(n.link(Topology::link_of(d)).kind == LinkKind::NVLink);
}

TEST_CASE("3-tier fat tree: cross-pod routes climb to a core, ECMP spreads over cores") {
  // radix 16: 8 nodes per leaf, pods of 8 leaves = 8 nodes x 8 rails; hosts 0-7 are pod 0, 56-63 pod 7.
  Topology t = build_preset("superpod", {{"nodes", "64"}, {"radix", "16"}, {"tiers", "3"}});
  Routing r(t);
  std::set<NodeId> cores;
  for (int a = 0; a < 8; ++a)
    for (int b = 56; b < 64; ++b)
      for (int g = 0; g < 8; ++g) {
        auto v = hops(t, r.route(id(t, gpu_id(a, g)), id(t, gpu_id(b, g))));
        CHECK(v.size() == 10);
        int top = 0;
        for (NodeId x : v)
          if (t.node(x).kind == NodeKind::IbSwitch) {
            top = std::max(top, t.node(x).tier);
            if (t.node(x).tier == 3) cores.insert(x);
          }
        CHECK(top == 3);
      }
  CHECK(cores.size() == 32);  // 512 pairs reach all 32 cores
  // Same pod (hosts 0-7, all rails), different rails: leaf-spine-leaf, no core.
  auto v = hops(t, r.route(id(t, gpu_id(0, 1)), id(t, gpu_id(5, 2))));
  CHECK(v.size() == 8);
  int spines = 0;
  for (NodeId x : v) {
    CHECK(t.node(x).tier != 3);
    spines += t.node(x).kind == NodeKind::IbSwitch && t.node(x).tier == 2;
  }
  CHECK(spines == 1);
}

TEST_CASE("cached_route: nullptr until route() cached the pair; compute_route caches nothing") {
  Topology t = build_preset("superpod", {{"nodes", "4"}});
  Routing r(t);
  const auto& g = t.gpus();
  std::vector<LinkDir> computed;
  r.compute_route(g[0], g[31], computed);
  CHECK(r.cached_route(g[0], g[31]) == nullptr);
  CHECK(r.cached_routes() == 0);
  const std::vector<LinkDir>& routed = r.route(g[0], g[31]);
  REQUIRE(r.cached_route(g[0], g[31]) == &routed);
  CHECK(routed == computed);
  CHECK(r.cached_route(g[31], g[0]) == nullptr);  // per ordered pair
}

namespace {
// Hops from every node to `dst` over paths whose inner nodes may forward for the pair (src, dst) as the general
// search allows (not a GPU; a fabric node or one of the two hosts'), by a plain breadth-first search.
std::vector<std::uint32_t> forwarding_distances(const Topology& t, NodeId src, NodeId dst) {
  const int hs = t.node(src).host, hd = t.node(dst).host;
  std::vector<std::uint32_t> d(t.num_nodes(), ~0u);
  std::vector<NodeId> q{dst};
  d[dst] = 0;
  for (std::size_t i = 0; i < q.size(); ++i) {
    const Node& nv = t.node(q[i]);
    if (q[i] != dst && (nv.kind == NodeKind::Gpu || (nv.host >= 0 && nv.host != hs && nv.host != hd))) continue;
    for (auto [l, w] : t.adjacent(q[i]))
      if (d[w] == ~0u) d[w] = d[q[i]] + 1, q.push_back(w);
  }
  return d;
}
}  // namespace

TEST_CASE("GPU <-> switch routes (general search): shortest paths through forwarding nodes, as a plain search") {
  // 300 one-GPU hosts whose NICs hang off two switches (every third NIC on both, NIC-switch links doubled on
  // every fifth host) joined by three parallel links and a third switch: several shortest paths for many pairs.
  TopologyBuilder b("two-switch star");
  Node sw;
  sw.kind = NodeKind::IbSwitch;
  std::vector<NodeId> s;
  for (const char* name : {"s0", "s1", "s2"}) {
    sw.id = name;
    s.push_back(b.add_node(sw));
  }
  for (int k = 0; k < 3; ++k) b.add_link(s[0], s[1], LinkKind::InfiniBand, 50e9, 0);
  b.add_link(s[0], s[2], LinkKind::InfiniBand, 50e9, 0);
  b.add_link(s[1], s[2], LinkKind::InfiniBand, 50e9, 0);
  std::vector<NodeId> gpus;
  for (int h = 0; h < 300; ++h) {
    Node g;
    g.kind = NodeKind::Gpu;
    g.id = gpu_id(h, 0);
    g.host = h;
    g.local_index = 0;
    gpus.push_back(b.add_node(g));
    Node n;
    n.kind = NodeKind::Nic;
    n.id = g.id + ".nic";
    n.host = h;
    n.local_index = 0;
    const NodeId nic = b.add_node(n);
    b.add_link(gpus.back(), nic, LinkKind::PCIe, 32e9, 0);
    for (int c = 0; c < (h % 5 == 0 ? 2 : 1); ++c) b.add_link(nic, s[h % 2], LinkKind::InfiniBand, 25e9, 0);
    if (h % 3 == 0) b.add_link(nic, s[1 - h % 2], LinkKind::InfiniBand, 25e9, 0);
  }
  const Topology t = std::move(b).build();
  Routing r(t), again(t);
  std::size_t checked = 0;
  for (NodeId g : gpus)
    for (NodeId x : s)
      for (auto [src, dst] : {std::pair{g, x}, std::pair{x, g}}) {
        const auto& route = r.route(src, dst);
        const auto d = forwarding_distances(t, src, dst);
        REQUIRE(route.size() == d[src]);
        NodeId at = src;
        for (LinkDir ld : route) {
          REQUIRE(t.dir_src(ld) == at);
          at = t.dir_dst(ld);
          CHECK(d[at] + 1 == d[t.dir_src(ld)]);  // one hop closer each time
        }
        CHECK(at == dst);
        CHECK(again.route(src, dst) == route);
        ++checked;
      }
  CHECK(checked == 300 * 3 * 2);
}
