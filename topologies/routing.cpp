// Routing: lazy, cached, deterministic shortest-path routes with hashed ECMP.
//
// Route construction for a pair (src, dst), in order of preference:
//  1. src == dst: empty route.
//  2. Both GPUs in the same NVLink domain and an NVLink-only path exists whose intermediate nodes are all
//     NVSwitches: shortest such path (GPUs never forward traffic; NVLink pairs without a direct or switched
//     NVLink path, as in the DGX-1 hybrid cube-mesh, fall through to PCIe).
//  3. Both on the same host: shortest path through that host's non-GPU nodes (PCIe switches, CPUs, ...).
//  4. GPUs on different hosts that both have a rail NIC: three segments, each shortest:
//       src GPU -> egress NIC (inside the source host; with PXN first over NVLink to the peer GPU whose rail
//       NIC is on the destination's rail), egress NIC -> ingress NIC through fabric switches only, and
//       ingress NIC -> dst GPU (inside the destination host). The ingress NIC is the destination GPU's rail
//       NIC.
//  5. Anything else (non-GPU endpoints, hand-written graphs without NICs): one shortest path over the whole
//     graph where GPUs never forward and host-local nodes only forward for the src/dst hosts. Its search
//     (general()) visits only the nodes that may forward (fabric nodes, the two hosts' nodes) and stops once
//     it reaches the source, so a GPU <-> switch route (SHARP's, NVLS's) costs the few nodes near both ends,
//     not a scan of every port of a switch that thousands of hosts share.
// The fabric segment uses per-target-switch hop-distance fields over the switch subgraph only (S switches:
// S*S*2 bytes at most, built lazily); GPU<->rail-NIC segments are cached per GPU and NVLink segments per
// pair. A route across a 16,384-GPU superpod thus costs a walk over a few switch adjacency lists, not a
// BFS over the whole graph (docs/performance.md, "Topology").
// Multipath: at each hop the candidates are the links to neighbours one hop closer; among them those with the
// highest bandwidth are kept. Inside the switch fabric (NIC -> NIC) the choice is the topology's
// (Topology::routing(), unless RoutingOptions::fabric names one): InfiniBand's (and the default) is D-mod-k:
// fabric endpoints (nodes attached to a fabric switch that are not switches, i.e. NICs) are numbered in
// switch order (grouped by the switch's rail, -1 first) then adjacency (port) order, so the NICs of one
// leaf, and the leaves of one rail, get consecutive indices; the k-th hop
// that has m_k > 1 candidates takes candidate (floor(idx / (m_1 * ... * m_{k-1})) + rail) mod m_k, with idx
// the ingress NIC's number and rail the rail of its leaf (0 outside rail-optimised fabrics). The rail term
// staggers the rails: without it, the leaves of one pod (one per rail, numbered rail-major) would all map
// to the same core of each group, and with leaf-order numbering instead the leaves of one rail would. In a fat tree only up-going hops have several candidates, so this is the classic
// destination-mod-k rule: the destinations under one leaf use every up-port equally, and a permutation or
// all-to-all pattern loads every up and down link equally. With FabricRouting::Hash (Ethernet-class fabrics
// that pin a flow to the path of its 5-tuple's hash: RoCE, TCPX/TCPXO, plain Ethernet), and everywhere
// outside the fabric (in-host paths, which are almost always unique), one candidate is chosen by a hash of
// (src, dst, hop index).
#include "topologies/routing.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "sim/base/error.hpp"

namespace fabricsim::topo {

namespace {

constexpr std::uint32_t kInf = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint16_t kInf16 = std::numeric_limits<std::uint16_t>::max();

std::uint64_t mix64(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool is_switch(NodeKind k) { return k == NodeKind::IbSwitch || k == NodeKind::EthSwitch; }

}  // namespace

struct Routing::Impl {
  const Topology& t;
  RoutingOptions opt;
  std::vector<NodeId> rail_nic;  // per node (only GPUs set)
  std::vector<std::uint32_t> switch_index;  // node -> compact switch index or kInf
  std::vector<NodeId> switches;
  std::vector<std::uint32_t> endpoint_index;  // node -> D-mod-k destination index (fabric endpoints only)
  std::vector<std::uint32_t> endpoint_rail;   // node -> rail of its fabric switch (0 if none): D-mod-k stagger
  std::vector<std::vector<std::pair<LinkId, std::uint32_t>>> sw_adj;  // switch idx -> (link, switch idx)
  std::vector<std::unique_ptr<std::vector<std::uint16_t>>> fields;  // target switch idx -> hop distances
  std::vector<const std::vector<std::uint16_t>*> targets;
  std::vector<std::unique_ptr<std::vector<LinkDir>>> up_seg, down_seg;  // per GPU: to / from its rail NIC
  std::unordered_map<std::uint64_t, std::vector<LinkDir>> cache;
  std::unordered_map<std::uint64_t, std::vector<LinkDir>> segments;  // in-host segment cache
  std::unordered_map<std::uint64_t, std::pair<std::size_t, std::uint32_t>> fabric_cache;  // (switch, NIC) -> pool
  std::vector<LinkDir> fabric_pool;
  // BFS scratch with generation stamps so that a BFS touching few nodes costs only what it touches.
  std::vector<std::uint32_t> stamp, dist;
  std::uint32_t gen = 0;
  std::vector<NodeId> queue;
  std::vector<std::pair<LinkId, NodeId>> cand;
  // general(): per node, its neighbours that are fabric nodes (not a GPU, no host); per host, (neighbour, node)
  // for each link of each of its nodes that is not a GPU, sorted; per link end, the link's position in that
  // end's adjacency list (2 l for end a, 2 l + 1 for b).
  std::vector<std::vector<NodeId>> fabric_adj;
  std::vector<std::vector<std::pair<NodeId, NodeId>>> host_att;
  std::vector<std::uint32_t> adj_pos;
  std::vector<NodeId> src_adj;           // general() scratch: a GPU source's neighbours, sorted
  std::vector<std::size_t> level_begin;  // general() scratch: queue offset of each distance

  Impl(const Topology& topo, RoutingOptions o) : t(topo), opt(o) {
    if (!opt.fabric) opt.fabric = t.routing();
    const std::size_t n = t.num_nodes();
    stamp.assign(n, 0);
    dist.assign(n, kInf);
    switch_index.assign(n, kInf);
    for (NodeId v = 0; v < n; ++v) {
      if (is_switch(t.node(v).kind)) {
        switch_index[v] = static_cast<std::uint32_t>(switches.size());
        switches.push_back(v);
      }
    }
    sw_adj.resize(switches.size());
    for (std::uint32_t si = 0; si < switches.size(); ++si)
      for (auto [l, w] : t.adjacent(switches[si]))
        if (switch_index[w] != kInf) sw_adj[si].emplace_back(l, switch_index[w]);
    fields.resize(switches.size());
    // Fabric endpoints in switch order (switches of rail-optimised fabrics grouped by rail first, so the
    // leaves of one rail are numbered consecutively), then port (adjacency) order: the NICs of one leaf are
    // consecutive, and so are the leaves of one rail, which keeps rail-local (PXN) traffic balanced at the
    // upper tiers too.
    endpoint_index.assign(n, kInf);
    endpoint_rail.assign(n, 0);
    std::uint32_t next_ep = 0;
    std::vector<NodeId> by_rail = switches;
    std::stable_sort(by_rail.begin(), by_rail.end(), [&](NodeId a, NodeId b) { return t.node(a).rail < t.node(b).rail; });
    for (NodeId sw : by_rail)
      for (auto [l, w] : t.adjacent(sw))
        if (switch_index[w] == kInf && endpoint_index[w] == kInf) {
          endpoint_index[w] = next_ep++;
          endpoint_rail[w] = static_cast<std::uint32_t>(std::max(0, t.node(sw).rail));
        }
    fabric_adj.resize(n);
    adj_pos.assign(2 * t.num_links(), kInf);
    for (NodeId v = 0; v < n; ++v) {
      const auto& adj = t.adjacent(v);
      for (std::size_t k = 0; k < adj.size(); ++k) {
        const auto [l, w] = adj[k];
        const Node& nw = t.node(w);
        if (nw.kind != NodeKind::Gpu && nw.host < 0) fabric_adj[v].push_back(w);
        adj_pos[2 * static_cast<std::size_t>(l) + (t.link(l).a == v ? 0 : 1)] = static_cast<std::uint32_t>(k);
      }
      const Node& nv = t.node(v);
      if (nv.kind != NodeKind::Gpu && nv.host >= 0) {
        const auto hi = static_cast<std::size_t>(nv.host);
        if (host_att.size() <= hi) host_att.resize(hi + 1);
        for (auto [l, w] : adj) host_att[hi].emplace_back(w, v);
      }
    }
    for (auto& ha : host_att) std::sort(ha.begin(), ha.end());
    up_seg.resize(n);
    down_seg.resize(n);
    rail_nic.assign(n, kNoNode);
    for (NodeId g : t.gpus()) rail_nic[g] = find_rail_nic(g);
  }

  static std::uint64_t key(NodeId a, NodeId b) { return (std::uint64_t(a) << 32) | b; }

  std::uint32_t d(NodeId v) const { return stamp[v] == gen ? dist[v] : kInf; }

  // Breadth-first search from `root`; a node other than the root is expanded only if `transit(v)`;
  // a link is followed only if `link_ok(l)`. Distances readable through d() until the next BFS.
  template <class Transit, class LinkOk>
  void bfs(NodeId root, Transit transit, LinkOk link_ok) {
    if (++gen == 0) {  // wrapped: reset stamps
      std::fill(stamp.begin(), stamp.end(), 0);
      gen = 1;
    }
    queue.clear();
    queue.push_back(root);
    stamp[root] = gen;
    dist[root] = 0;
    for (std::size_t qi = 0; qi < queue.size(); ++qi) {
      NodeId v = queue[qi];
      if (v != root && !transit(v)) continue;
      for (auto [l, w] : t.adjacent(v)) {
        if (stamp[w] == gen || !link_ok(l)) continue;
        stamp[w] = gen;
        dist[w] = dist[v] + 1;
        queue.push_back(w);
      }
    }
  }

  // Keeps only the highest-bandwidth candidates (in order); returns how many remain.
  std::size_t keep_widest() {
    double best = 0;
    for (auto& c : cand) best = std::max(best, t.link(c.first).bandwidth_Bps);
    std::size_t m = 0;
    for (auto& c : cand)
      if (t.link(c.first).bandwidth_Bps == best) cand[m++] = c;
    cand.resize(m);
    return m;
  }

  // Picks among `cand` (non-empty): highest bandwidth first, then hash.
  std::pair<LinkId, NodeId> pick(std::uint64_t h, std::size_t hop) {
    const std::size_t m = keep_widest();
    if (m == 1) return cand[0];
    return cand[mix64(h ^ (0x632be59bd9b4e019ull * (hop + 1))) % m];
  }

  // The links from v (at distance dv) to neighbours one hop closer to dst that may take the route (dst itself,
  // or a transit node), in v's adjacency order, into `cand`.
  template <class Transit, class LinkOk>
  void closer_links(NodeId v, std::uint32_t dv, NodeId dst, Transit transit, LinkOk link_ok) {
    for (auto [l, w] : t.adjacent(v)) {
      if (!link_ok(l) || d(w) != dv - 1) continue;
      if (w != dst && !transit(w)) continue;
      cand.emplace_back(l, w);
    }
  }

  // Walks from src to dst along decreasing d(); `candidates(v, dv)` fills `cand` at each hop.
  template <class Candidates>
  bool walk_with(NodeId src, NodeId dst, std::uint64_t h, std::size_t hop0, Candidates candidates,
                 std::vector<LinkDir>& out) {
    if (d(src) == kInf) return false;
    NodeId v = src;
    std::size_t hop = hop0;
    while (v != dst) {
      cand.clear();
      candidates(v, d(v));
      if (cand.empty()) return false;
      auto [l, w] = pick(h, hop++);
      out.push_back(t.dir_from(l, v));
      v = w;
    }
    return true;
  }

  // Walks from src to dst along decreasing d() (after bfs rooted at dst with the same predicates).
  template <class Transit, class LinkOk>
  bool walk(NodeId src, NodeId dst, std::uint64_t h, std::size_t hop0, Transit transit, LinkOk link_ok,
            std::vector<LinkDir>& out) {
    return walk_with(
        src, dst, h, hop0, [&](NodeId v, std::uint32_t dv) { closer_links(v, dv, dst, transit, link_ok); }, out);
  }

  template <class Transit, class LinkOk>
  bool shortest(NodeId src, NodeId dst, std::uint64_t h, std::size_t hop0, Transit transit, LinkOk link_ok,
                std::vector<LinkDir>& out) {
    if (src == dst) return true;
    bfs(dst, transit, link_ok);
    return walk(src, dst, h, hop0, transit, link_ok, out);
  }

  bool nvlink_path(NodeId a, NodeId b, std::uint64_t h, std::size_t hop0, std::vector<LinkDir>& out) {
    auto transit = [&](NodeId v) { return t.node(v).kind == NodeKind::NvSwitch; };
    auto link_ok = [&](LinkId l) { return t.link(l).kind == LinkKind::NVLink; };
    return shortest(a, b, h, hop0, transit, link_ok, out);
  }

  bool host_path(NodeId a, NodeId b, int host, std::uint64_t h, std::size_t hop0, std::vector<LinkDir>& out) {
    auto transit = [&](NodeId v) {
      const Node& nd = t.node(v);
      return nd.host == host && nd.kind != NodeKind::Gpu;
    };
    auto link_ok = [](LinkId) { return true; };
    return shortest(a, b, h, hop0, transit, link_ok, out);
  }

  NodeId find_rail_nic(NodeId g) {
    const Node& gn = t.node(g);
    if (gn.host < 0) return kNoNode;
    auto transit = [&](NodeId v) {
      const Node& nd = t.node(v);
      return nd.host == gn.host && nd.kind != NodeKind::Gpu && nd.kind != NodeKind::Nic;
    };
    bfs(g, transit, [](LinkId) { return true; });
    // Closest NIC of the same host; ties prefer local_index == gpu local_index mod (NICs in host), then
    // the lowest local index.
    NodeId best = kNoNode;
    std::uint32_t best_d = kInf;
    int nics = 0;
    for (NodeId v : queue)
      if (t.node(v).kind == NodeKind::Nic && t.node(v).host == gn.host) ++nics;
    for (NodeId v : queue) {
      const Node& nd = t.node(v);
      if (nd.kind != NodeKind::Nic || nd.host != gn.host) continue;
      std::uint32_t dv = d(v);
      bool pref = nics > 0 && gn.local_index >= 0 && nd.local_index == gn.local_index % nics;
      bool best_pref = best != kNoNode && nics > 0 && gn.local_index >= 0 &&
                       t.node(best).local_index == gn.local_index % nics;
      if (dv < best_d || (dv == best_d && ((pref && !best_pref) ||
                                           (pref == best_pref && nd.local_index < t.node(best).local_index)))) {
        best = v;
        best_d = dv;
      }
    }
    return best;
  }

  int rail_of(NodeId nic) const {
    const Node& n = t.node(nic);
    return n.rail >= 0 ? n.rail : n.local_index;
  }

  const std::vector<std::uint16_t>& field(std::uint32_t sidx) {
    if (fields[sidx]) return *fields[sidx];
    auto f = std::make_unique<std::vector<std::uint16_t>>(switches.size(), kInf16);
    // BFS over the switch subgraph only.
    queue.clear();
    queue.push_back(sidx);
    (*f)[sidx] = 0;
    for (std::size_t qi = 0; qi < queue.size(); ++qi) {
      std::uint32_t v = queue[qi];
      for (auto [l, w] : sw_adj[v]) {
        if ((*f)[w] != kInf16) continue;
        (*f)[w] = static_cast<std::uint16_t>((*f)[v] + 1);
        queue.push_back(w);
      }
    }
    fields[sidx] = std::move(f);
    return *fields[sidx];
  }

  // Picks among `cand` (non-empty) inside the fabric: highest bandwidth first, then D-mod-k on the ingress
  // endpoint's index (`div` is the product of the candidate counts of the earlier multi-choice hops) or,
  // with FabricRouting::Hash, the pair hash.
  std::pair<LinkId, NodeId> pick_fabric(std::uint64_t h, std::size_t hop, std::uint32_t dst_idx, std::uint32_t dst_rail,
                                        std::uint64_t& div) {
    if (opt.fabric == FabricRouting::Hash || dst_idx == kInf) return pick(h, hop);
    const std::size_t m = keep_widest();
    if (m == 1) return cand[0];
    const std::size_t k = static_cast<std::size_t>((dst_idx / div + dst_rail) % m);
    if (div < (std::uint64_t(1) << 40)) div *= m;
    return cand[k];
  }

  // NIC -> NIC through fabric switches only.
  bool fabric_path(NodeId e, NodeId i, std::uint64_t h, std::size_t hop0, std::vector<LinkDir>& out) {
    if (e == i) return true;
    const std::uint32_t dst_idx = endpoint_index[i];
    const std::uint32_t dst_rail = endpoint_rail[i];
    std::uint64_t div = 1;
    // Targets: distance fields of the switches adjacent to the ingress NIC.
    targets.clear();
    for (auto [l, w] : t.adjacent(i)) {
      if (w == e) {  // back-to-back NICs
        cand.clear();
        for (auto [l2, w2] : t.adjacent(e))
          if (w2 == i) cand.emplace_back(l2, w2);
        auto [lc, wc] = pick(h, hop0);
        out.push_back(t.dir_from(lc, e));
        return true;
      }
      if (switch_index[w] != kInf) {
        const auto* f = &field(switch_index[w]);
        if (std::find(targets.begin(), targets.end(), f) == targets.end()) targets.push_back(f);
      }
    }
    if (targets.empty()) return false;
    auto D = [&](std::uint32_t s) -> std::uint32_t {  // hops from switch index s to the ingress NIC
      std::uint32_t best = kInf;
      for (const auto* f : targets) {
        std::uint16_t x = (*f)[s];
        if (x != kInf16) best = std::min<std::uint32_t>(best, x + 1u);
      }
      return best;
    };
    // First hop: switch neighbours of e with minimal D.
    std::uint32_t best = kInf;
    for (auto [l, w] : t.adjacent(e))
      if (switch_index[w] != kInf) best = std::min(best, D(switch_index[w]));
    if (best == kInf) return false;
    std::size_t hop = hop0;
    cand.clear();
    for (auto [l, w] : t.adjacent(e))
      if (switch_index[w] != kInf && D(switch_index[w]) == best) cand.emplace_back(l, w);
    auto [l0, v] = pick_fabric(h, hop++, dst_idx, dst_rail, div);
    out.push_back(t.dir_from(l0, e));
    // With D-mod-k the rest of the route depends only on (first switch, ingress NIC) when the first hop had
    // no choice (div still 1): it is cached per such pair in a flat pool (a leaf's routes to the NICs it
    // reaches; far fewer pairs than GPU pairs).
    const bool cacheable = opt.fabric == FabricRouting::DModK && dst_idx != kInf && div == 1;
    const std::uint64_t ck = key(v, i);
    if (cacheable) {
      auto it = fabric_cache.find(ck);
      if (it != fabric_cache.end()) {
        out.insert(out.end(), fabric_pool.begin() + it->second.first,
                   fabric_pool.begin() + it->second.first + it->second.second);
        return true;
      }
    }
    const std::size_t mark = out.size();
    if (!fabric_walk(v, i, h, hop, dst_idx, dst_rail, div, D, out)) return false;
    if (cacheable) {
      fabric_cache.emplace(ck, std::make_pair(fabric_pool.size(), static_cast<std::uint32_t>(out.size() - mark)));
      fabric_pool.insert(fabric_pool.end(), out.begin() + mark, out.end());
    }
    return true;
  }

  // Rest of a fabric route from switch v to the ingress NIC i (helper of fabric_path).
  template <class Dist>
  bool fabric_walk(NodeId v, NodeId i, std::uint64_t h, std::size_t hop, std::uint32_t dst_idx,
                   std::uint32_t dst_rail, std::uint64_t div, Dist& D, std::vector<LinkDir>& out) {
    while (true) {
      const std::uint32_t sv = switch_index[v];
      const std::uint32_t dv = D(sv);
      cand.clear();
      if (dv == 1) {
        for (auto [l, w] : t.adjacent(i))
          if (w == v) cand.emplace_back(l, i);
      } else {
        for (auto [l, ws] : sw_adj[sv])
          if (D(ws) == dv - 1) cand.emplace_back(l, switches[ws]);
      }
      if (cand.empty()) return false;
      auto [l, w] = pick_fabric(h, hop++, dst_idx, dst_rail, div);
      out.push_back(t.dir_from(l, v));
      v = w;
      if (v == i) return true;
    }
  }

  // GPU <-> rail NIC segments, cached per GPU (computed on first use).
  bool rail_segment(NodeId gpu, bool up, std::vector<LinkDir>& out) {
    auto& slot = up ? up_seg[gpu] : down_seg[gpu];
    if (!slot) {
      std::vector<LinkDir> p;
      NodeId nic = rail_nic[gpu];
      bool ok = up ? host_path(gpu, nic, t.node(gpu).host, mix64(key(gpu, nic)), 0, p)
                   : host_path(nic, gpu, t.node(gpu).host, mix64(key(nic, gpu)), 0, p);
      if (!ok) p.assign(1, kNoNode);
      slot = std::make_unique<std::vector<LinkDir>>(std::move(p));
    }
    if (slot->size() == 1 && (*slot)[0] == kNoNode) return false;
    out.insert(out.end(), slot->begin(), slot->end());
    return true;
  }

  // Cached in-host segment (GPU <-> NIC, GPU -> GPU over NVLink). Segments are not ECMP-hashed on the
  // full pair; their own endpoints seed the hash (in-host paths are almost always unique).
  bool segment(NodeId a, NodeId b, bool nvlink_only, std::vector<LinkDir>& out) {
    std::uint64_t k = key(a, b) ^ (nvlink_only ? 0x8000000000000000ull : 0);
    auto it = segments.find(k);
    if (it == segments.end()) {
      std::vector<LinkDir> p;
      bool ok = nvlink_only ? nvlink_path(a, b, mix64(key(a, b)), 0, p)
                            : host_path(a, b, t.node(a).host, mix64(key(a, b)), 0, p);
      if (!ok) p.assign(1, kNoNode);  // marks "no path"
      it = segments.emplace(k, std::move(p)).first;
    }
    if (it->second.size() == 1 && it->second[0] == kNoNode) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }

  // shortest(src, dst, h, 0, transit, any link, out) for the transit rule below, with the same route: its
  // breadth-first search from dst expands only dst and transit nodes, and the walk from src reads only the
  // distances of dst and of transit nodes one hop closer, so this search enumerates just those (a node's fabric
  // neighbours, from fabric_adj; the two hosts' nodes and src, from their own adjacency) and stops when it
  // reaches src: every node closer to dst than src has its distance then (they were all found before the
  // nodes at src's distance were expanded, one of which found src). The walk takes the candidates of a hop
  // from the nodes one hop closer when they have fewer links than the hop's node, ordered as that node lists
  // its links; pick() then sees the same candidates in the same order.
  bool general(NodeId src, NodeId dst, std::uint64_t h, std::vector<LinkDir>& out) {
    const int hs = t.node(src).host, hd = t.node(dst).host;
    auto transit = [&](NodeId v) {
      const Node& nd = t.node(v);
      if (nd.kind == NodeKind::Gpu) return false;
      return nd.host < 0 || nd.host == hs || nd.host == hd;
    };
    // The transit neighbours of v (fabric nodes, the two hosts' non-GPU nodes) and src among them: a GPU src is
    // not transit, and a source that is not a GPU is a fabric node or one of its host's.
    const std::vector<std::pair<NodeId, NodeId>>* hosts[2] = {nullptr, nullptr};
    if (hs >= 0 && static_cast<std::size_t>(hs) < host_att.size()) hosts[0] = &host_att[static_cast<std::size_t>(hs)];
    if (hd >= 0 && hd != hs && static_cast<std::size_t>(hd) < host_att.size())
      hosts[1] = &host_att[static_cast<std::size_t>(hd)];
    src_adj.clear();
    if (!transit(src)) {
      for (auto [l, y] : t.adjacent(src)) src_adj.push_back(y);
      std::sort(src_adj.begin(), src_adj.end());
    }
    if (++gen == 0) {
      std::fill(stamp.begin(), stamp.end(), 0);
      gen = 1;
    }
    queue.clear();
    level_begin.assign(1, 0);
    queue.push_back(dst);
    stamp[dst] = gen;
    dist[dst] = 0;
    bool found = false;
    auto discover = [&](NodeId w, std::uint32_t dw) {
      if (stamp[w] == gen) return;
      stamp[w] = gen;
      dist[w] = dw;
      if (dw >= level_begin.size()) level_begin.push_back(queue.size());
      queue.push_back(w);
      found = found || w == src;
    };
    for (std::size_t qi = 0; qi < queue.size() && !found; ++qi) {
      const NodeId v = queue[qi];
      const std::uint32_t dw = dist[v] + 1;
      if (std::binary_search(src_adj.begin(), src_adj.end(), v)) discover(src, dw);
      for (const auto* ha : hosts) {
        if (!ha) continue;
        auto it = std::lower_bound(ha->begin(), ha->end(), std::make_pair(v, NodeId{0}));
        for (; it != ha->end() && it->first == v && !found; ++it) discover(it->second, dw);
      }
      for (NodeId w : fabric_adj[v]) {
        if (found) break;
        discover(w, dw);
      }
    }
    if (!found) return false;
    level_begin.push_back(queue.size());
    auto candidates = [&](NodeId v, std::uint32_t dv) {
      const std::size_t lb = level_begin[dv - 1], le = level_begin[dv];
      std::size_t their_links = 0;  // of the nodes one hop closer
      for (std::size_t k = lb; k < le && their_links <= t.adjacent(v).size(); ++k)
        their_links += t.adjacent(queue[k]).size();
      if (their_links < t.adjacent(v).size()) {
        std::vector<std::pair<std::uint32_t, std::pair<LinkId, NodeId>>> at;  // (position in v's list, candidate)
        for (std::size_t k = lb; k < le; ++k)
          for (auto [l, x] : t.adjacent(queue[k]))
            if (x == v)
              at.push_back({adj_pos[2 * static_cast<std::size_t>(l) + (t.link(l).a == v ? 0 : 1)], {l, queue[k]}});
        std::sort(at.begin(), at.end());
        for (const auto& [p, c] : at) cand.push_back(c);
      } else {
        closer_links(v, dv, dst, transit, [](LinkId) { return true; });
      }
    };
    return walk_with(src, dst, h, 0, candidates, out);
  }

  void compute(NodeId src, NodeId dst, std::vector<LinkDir>& out) {
    out.clear();
    if (src == dst) return;
    const std::uint64_t h = mix64(key(src, dst));
    const Node& s = t.node(src);
    const Node& dn = t.node(dst);
    const bool gpus = s.kind == NodeKind::Gpu && dn.kind == NodeKind::Gpu;
    if (gpus && s.nvlink_domain >= 0 && s.nvlink_domain == dn.nvlink_domain) {
      if (segment(src, dst, true, out)) return;
      out.clear();
    }
    if (s.host >= 0 && s.host == dn.host) {
      if (host_path(src, dst, s.host, h, 0, out)) return;
      out.clear();
    }
    if (gpus && s.host != dn.host && rail_nic[src] != kNoNode && rail_nic[dst] != kNoNode) {
      NodeId in = rail_nic[dst];
      NodeId from = src;
      if (opt.pxn) {
        const int r = rail_of(in);
        if (rail_of(rail_nic[src]) != r && s.nvlink_domain >= 0) {
          // Peer GPU on the same host and NVLink domain whose rail NIC is on the destination's rail: the first
          // such GPU (NCCL's proxy is the NIC's local GPU, ncclTopoGetLocalGpu, the lowest-index GPU of that
          // NIC; no other is tried), and only over an NVLink path that passes no other GPU (NCCL's
          // P2P_PXN_LEVEL 2 default needs PATH_NVL between the proxy and the sender, not PATH_NVB; else the
          // sender keeps its own NIC: src/graph/search.cc ncclTopoGetNetDev, src/graph/paths.cc
          // ncclTopoComputePaths, src/graph/topo.cc ncclTopoGetLocalGpu at NVIDIA/nccl v2.26.2-1). On a DGX-1
          // GPU 5 has no NVLink to GPU 0, rail 0's proxy, so it sends to rail 0 through its own NIC (not
          // through GPU 1, which shares GPU 0's NIC).
          for (auto it = std::lower_bound(t.gpus().begin(), t.gpus().end(), src,
                                          [&](NodeId x, NodeId y) { return t.node(x).host < t.node(y).host; });
               it != t.gpus().end() && t.node(*it).host == s.host; ++it) {
            NodeId p = *it;
            if (p != src && t.node(p).nvlink_domain == s.nvlink_domain && rail_nic[p] != kNoNode &&
                rail_of(rail_nic[p]) == r) {
              std::size_t mark = out.size();
              if (segment(src, p, true, out)) {
                bool via_gpu = false;
                for (std::size_t k = mark; k + 1 < out.size(); ++k)
                  via_gpu = via_gpu || t.node(t.dir_dst(out[k])).kind == NodeKind::Gpu;
                if (!via_gpu) {
                  from = p;
                  break;
                }
              }
              out.resize(mark);
              break;
            }
          }
        }
      }
      NodeId e = rail_nic[from];
      if (rail_segment(from, true, out) && fabric_path(e, in, h, out.size(), out) && rail_segment(dst, false, out))
        return;
      out.clear();
    }
    if (general(src, dst, h, out)) return;
    out.clear();
    throw InputError("routing in topology '" + t.name() + "'",
                     "a path from '" + s.id + "' to '" + dn.id + "' (none exists)");
  }
};

Routing::Routing(const Topology& t, RoutingOptions opt) : t_(t), impl_(std::make_unique<Impl>(t, opt)) {}
Routing::~Routing() = default;
Routing::Routing(Routing&&) noexcept = default;

const std::vector<LinkDir>& Routing::route(NodeId src, NodeId dst) {
  if (src >= t_.num_nodes() || dst >= t_.num_nodes())
    throw InputError("routing", "node ids below " + std::to_string(t_.num_nodes()));
  auto k = Impl::key(src, dst);
  auto it = impl_->cache.find(k);
  if (it != impl_->cache.end()) return it->second;
  std::vector<LinkDir> p;
  impl_->compute(src, dst, p);
  return impl_->cache.emplace(k, std::move(p)).first->second;
}

void Routing::compute_route(NodeId src, NodeId dst, std::vector<LinkDir>& out) {
  if (src >= t_.num_nodes() || dst >= t_.num_nodes())
    throw InputError("routing", "node ids below " + std::to_string(t_.num_nodes()));
  impl_->compute(src, dst, out);
}

double Routing::latency(NodeId src, NodeId dst) {
  double s = 0;
  for (LinkDir d : route(src, dst)) s += t_.link(Topology::link_of(d)).latency_s;
  return s;
}

double Routing::bottleneck_bandwidth(NodeId src, NodeId dst) {
  const auto& r = route(src, dst);
  if (r.empty()) return std::numeric_limits<double>::infinity();
  double b = std::numeric_limits<double>::infinity();
  for (LinkDir d : r) b = std::min(b, t_.link(Topology::link_of(d)).bandwidth_Bps);
  return b;
}

NodeId Routing::rail_nic(NodeId gpu) const { return gpu < impl_->rail_nic.size() ? impl_->rail_nic[gpu] : kNoNode; }

std::size_t Routing::cached_routes() const { return impl_->cache.size(); }

const std::vector<LinkDir>* Routing::cached_route(NodeId src, NodeId dst) const {
  auto it = impl_->cache.find(Impl::key(src, dst));
  return it == impl_->cache.end() ? nullptr : &it->second;
}

RoutingOptions Routing::options() const { return impl_->opt; }

void Routing::clear_cache() { impl_->cache.clear(); }

}  // namespace fabricsim::topo
