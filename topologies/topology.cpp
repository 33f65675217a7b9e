// Topology / TopologyBuilder: storage, validation and sealing of the cluster graph.
#include "topologies/topology.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "sim/base/error.hpp"

namespace fabricsim::topo {

const char* to_string(NodeKind k) {
  switch (k) {
    case NodeKind::Gpu: return "gpu";
    case NodeKind::NvSwitch: return "nvswitch";
    case NodeKind::PcieSwitch: return "pcie_switch";
    case NodeKind::Cpu: return "cpu";
    case NodeKind::Nic: return "nic";
    case NodeKind::IbSwitch: return "ib_switch";
    case NodeKind::EthSwitch: return "eth_switch";
  }
  return "?";
}

const char* to_string(LinkKind k) {
  switch (k) {
    case LinkKind::NVLink: return "nvlink";
    case LinkKind::PCIe: return "pcie";
    case LinkKind::InfiniBand: return "infiniband";
    case LinkKind::Ethernet: return "ethernet";
  }
  return "?";
}

bool parse_node_kind(const std::string& s, NodeKind& out) {
  for (NodeKind k : {NodeKind::Gpu, NodeKind::NvSwitch, NodeKind::PcieSwitch, NodeKind::Cpu, NodeKind::Nic,
                     NodeKind::IbSwitch, NodeKind::EthSwitch}) {
    if (s == to_string(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

bool parse_link_kind(const std::string& s, LinkKind& out) {
  for (LinkKind k : {LinkKind::NVLink, LinkKind::PCIe, LinkKind::InfiniBand, LinkKind::Ethernet}) {
    if (s == to_string(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

const char* to_string(FabricRouting r) { return r == FabricRouting::Hash ? "hash" : "dmodk"; }

bool parse_fabric_routing(const std::string& s, FabricRouting& out) {
  for (FabricRouting r : {FabricRouting::DModK, FabricRouting::Hash}) {
    if (s == to_string(r)) {
      out = r;
      return true;
    }
  }
  return false;
}

NodeId Topology::find(const std::string& id) const {
  auto it = index_.find(id);
  return it == index_.end() ? kNoNode : it->second;
}

TopologyBuilder::TopologyBuilder(std::string name) { t_.name_ = std::move(name); }

NodeId TopologyBuilder::add_node(Node n) {
  // Duplicate ids are reported by build() so that loaders can name the offending element; here we only
  // record the first occurrence in the index.
  NodeId id = static_cast<NodeId>(t_.nodes_.size());
  t_.index_.emplace(n.id, id);
  t_.nodes_.push_back(std::move(n));
  return id;
}

LinkId TopologyBuilder::add_link(NodeId a, NodeId b, LinkKind kind, double bandwidth_Bps, double latency_s,
                                 int count) {
  LinkId id = static_cast<LinkId>(t_.links_.size());
  Link l;
  l.a = a;
  l.b = b;
  l.kind = kind;
  l.bandwidth_Bps = bandwidth_Bps;
  l.latency_s = latency_s;
  l.count = count;
  t_.links_.push_back(l);
  return id;
}

TopologyBuilder& TopologyBuilder::param(const std::string& k, const std::string& v) {
  t_.params_[k] = v;
  return *this;
}

TopologyBuilder& TopologyBuilder::routing(FabricRouting r) {
  t_.routing_ = r;
  return *this;
}

TopologyBuilder& TopologyBuilder::properties_of(const Topology& t) {
  for (const auto& [k, v] : t.params()) param(k, v);
  return routing(t.routing());
}

Topology TopologyBuilder::build(const std::string& where) && {
  Topology& t = t_;
  const std::size_t n = t.nodes_.size();
  // Node validation: non-empty, unique ids.
  std::map<std::string, std::size_t> first;
  for (std::size_t i = 0; i < n; ++i) {
    const Node& nd = t.nodes_[i];
    if (nd.id.empty()) throw InputError(where + ": node " + std::to_string(i), "a non-empty node id");
    if (!(nd.memory_bytes >= 0) || !std::isfinite(nd.memory_bytes) || (nd.memory_bytes > 0 && nd.kind != NodeKind::Cpu))
      throw InputError(where + ": node '" + nd.id + "' memory", "a finite host memory >= 0 bytes, on a cpu node only");
    auto [it, fresh] = first.emplace(nd.id, i);
    if (!fresh)
      throw InputError(where + ": node " + std::to_string(i) + " '" + nd.id + "'",
                       "a unique node id (already used by node " + std::to_string(it->second) + ")");
  }
  // Link validation.
  for (std::size_t l = 0; l < t.links_.size(); ++l) {
    const Link& lk = t.links_[l];
    auto link_name = [&]() {
      std::string s = where + ": link " + std::to_string(l);
      if (lk.a < n && lk.b < n) s += " (" + t.nodes_[lk.a].id + " - " + t.nodes_[lk.b].id + ")";
      return s;
    };
    if (lk.a >= n || lk.b >= n)
      throw InputError(where + ": link " + std::to_string(l),
                       "both endpoints to be existing nodes (endpoint index " +
                           std::to_string(lk.a >= n ? lk.a : lk.b) + " does not exist)");
    if (lk.a == lk.b) throw InputError(link_name(), "two distinct endpoints (a self-loop was given)");
    if (!(lk.bandwidth_Bps > 0) || !std::isfinite(lk.bandwidth_Bps))
      throw InputError(link_name(), "a positive, finite bandwidth in bytes/s (got " +
                                        std::to_string(lk.bandwidth_Bps) + ")");
    if (!(lk.latency_s >= 0) || !std::isfinite(lk.latency_s))
      throw InputError(link_name(), "a non-negative, finite latency in seconds (got " +
                                        std::to_string(lk.latency_s) + ")");
    if (lk.count < 1)
      throw InputError(link_name(), "a link count >= 1 (got " + std::to_string(lk.count) + ")");
  }
  // Adjacency and graph.
  t.adj_.assign(n, {});
  t.graph_ = Topology::Graph(n);
  for (std::size_t l = 0; l < t.links_.size(); ++l) {
    const Link& lk = t.links_[l];
    t.adj_[lk.a].emplace_back(static_cast<LinkId>(l), lk.b);
    t.adj_[lk.b].emplace_back(static_cast<LinkId>(l), lk.a);
    boost::add_edge(lk.a, lk.b, static_cast<LinkId>(l), t.graph_);
  }
  // GPUs: each must be connected; rank order host-major then local index (then insertion order).
  t.gpus_.clear();
  int max_host = -1;
  for (std::size_t i = 0; i < n; ++i) {
    const Node& nd = t.nodes_[i];
    max_host = std::max(max_host, nd.host);
    if (nd.kind != NodeKind::Gpu) continue;
    if (t.adj_[i].empty())
      throw InputError(where + ": node '" + nd.id + "'", "a GPU connected to at least one link (it has none)");
    t.gpus_.push_back(static_cast<NodeId>(i));
  }
  std::stable_sort(t.gpus_.begin(), t.gpus_.end(), [&](NodeId x, NodeId y) {
    const Node& a = t.nodes_[x];
    const Node& b = t.nodes_[y];
    return std::tie(a.host, a.local_index) < std::tie(b.host, b.local_index);
  });
  t.num_hosts_ = max_host + 1;
  t.index_.clear();
  for (std::size_t i = 0; i < n; ++i) t.index_.emplace(t.nodes_[i].id, static_cast<NodeId>(i));
  return std::move(t_);
}

double Topology::host_memory_bytes(int host) const {
  double sum = 0;
  bool cpu = false;
  for (const Node& nd : nodes_) {
    if (nd.host != host || nd.kind != NodeKind::Cpu) continue;
    if (!(nd.memory_bytes > 0)) return 0;
    cpu = true;
    sum += nd.memory_bytes;
  }
  return cpu ? sum : 0;
}

}  // namespace fabricsim::topo
