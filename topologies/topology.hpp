#pragma once
// The cluster as an immutable graph of typed nodes and full-duplex links (Boost.Graph underneath).
// Built once by a TopologyBuilder (presets or the JSON loader), then shared read-only by routing, the
// engines and the reports. Each direction of a link is its own resource: LinkDir id = 2*link + dir, where
// dir 0 is a->b and dir 1 is b->a.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

namespace fabricsim::topo {

using NodeId = std::uint32_t;
using LinkId = std::uint32_t;
using LinkDir = std::uint32_t;  // 2*link + (0: a->b, 1: b->a)
constexpr NodeId kNoNode = 0xffffffffu;

enum class NodeKind { Gpu, NvSwitch, PcieSwitch, Cpu, Nic, IbSwitch, EthSwitch };
enum class LinkKind { NVLink, PCIe, InfiniBand, Ethernet };
// How the switch fabric chooses among equal-cost next hops (topologies/routing.hpp applies it; the superpod
// preset sets it from its fabric, topologies/fabrics.cpp says why per fabric).
enum class FabricRouting {
  DModK,  // destination-based static routing (InfiniBand subnet manager ftree / D-mod-k style): default
  Hash,   // per-(src, dst) hashed ECMP (Ethernet switches: a hash of the 5-tuple)
};

const char* to_string(NodeKind k);
const char* to_string(LinkKind k);
bool parse_node_kind(const std::string& s, NodeKind& out);  // "gpu", "nvswitch", "pcie_switch", "cpu", "nic", "ib_switch", "eth_switch"
bool parse_link_kind(const std::string& s, LinkKind& out);  // "nvlink", "pcie", "infiniband", "ethernet"
const char* to_string(FabricRouting r);
bool parse_fabric_routing(const std::string& s, FabricRouting& out);  // "dmodk", "hash"

struct Node {
  std::string id;          // unique name, e.g. "n0.gpu3", "leaf.r2.s0"
  NodeKind kind = NodeKind::Gpu;
  std::string model;       // GPU model ("h100", "a100-80gb", ...) or switch/NIC model; may be empty
  int host = -1;           // server index (GPUs, NICs, NVSwitches, PCIe switches, CPUs); -1 for fabric switches
  int local_index = -1;    // index within the host among nodes of the same kind (GPU 0..7, NIC 0..7)
  int rail = -1;           // NICs and leaf switches of a rail-optimised fabric: rail index
  int tier = -1;           // fabric switches: 1 = leaf, 2 = spine, 3 = core; NVSwitch: 1 or 2
  bool nvls = false;       // NVSwitch with in-network reduction (NVLink SHARP), H100 and later
  bool sharp = false;      // IB switch with SHARP in-network reduction
  int nvlink_domain = -1;  // GPUs that can reach each other over NVLink share a domain id
  double port_Bps = 0;     // NICs: line rate per direction in bytes/s (0 = not given)
  double memory_bytes = 0; // CPUs: the host memory (DRAM / LPDDR) attached to this CPU, bytes (0 = not given)
};

struct Link {
  NodeId a = 0, b = 0;
  LinkKind kind = LinkKind::NVLink;
  double bandwidth_Bps = 0;  // per direction, all `count` lanes together
  double latency_s = 0;
  int count = 1;             // number of physical links bundled (e.g. 2 NVLinks GPU->NVSwitch), informative
};

class Topology {
 public:
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, boost::no_property,
                                      boost::property<boost::edge_index_t, LinkId>>;

  const std::string& name() const { return name_; }
  std::size_t num_nodes() const { return nodes_.size(); }
  std::size_t num_links() const { return links_.size(); }
  const Node& node(NodeId n) const { return nodes_[n]; }
  const Link& link(LinkId l) const { return links_[l]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Link>& links() const { return links_; }
  const Graph& graph() const { return graph_; }

  // GPUs in rank order (host-major, then local index). Rank r of the whole cluster is gpus()[r].
  const std::vector<NodeId>& gpus() const { return gpus_; }
  int num_hosts() const { return num_hosts_; }
  // Host memory of server `host`: the sum of its CPUs' memory_bytes; 0 when a CPU of it does not give its
  // memory or it has no CPU (not known).
  double host_memory_bytes(int host) const;
  NodeId find(const std::string& id) const;  // kNoNode if absent
  // Links incident to a node, as (link id, neighbour).
  const std::vector<std::pair<LinkId, NodeId>>& adjacent(NodeId n) const { return adj_[n]; }

  // Direction helpers.
  static LinkId link_of(LinkDir d) { return d >> 1; }
  LinkDir dir_from(LinkId l, NodeId from) const { return 2 * l + (links_[l].a == from ? 0 : 1); }
  NodeId dir_src(LinkDir d) const { return (d & 1) ? links_[d >> 1].b : links_[d >> 1].a; }
  NodeId dir_dst(LinkDir d) const { return (d & 1) ? links_[d >> 1].a : links_[d >> 1].b; }

  // Free-form description of how it was made (preset name and parameters), kept in exports.
  const std::map<std::string, std::string>& params() const { return params_; }
  // The fabric's multipath rule: what a Routing built without an explicit choice uses.
  FabricRouting routing() const { return routing_; }

 private:
  friend class TopologyBuilder;
  std::string name_;
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<NodeId> gpus_;
  std::vector<std::vector<std::pair<LinkId, NodeId>>> adj_;
  std::map<std::string, NodeId> index_;
  std::map<std::string, std::string> params_;
  Graph graph_;
  int num_hosts_ = 0;
  FabricRouting routing_ = FabricRouting::DModK;
};

// Chained construction; build() validates (duplicate ids, dangling links, non-positive bandwidth,
// disconnected GPUs) and seals the graph. Errors are InputError with `where` naming the element.
class TopologyBuilder {
 public:
  explicit TopologyBuilder(std::string name);
  NodeId add_node(Node n);
  LinkId add_link(NodeId a, NodeId b, LinkKind kind, double bandwidth_Bps, double latency_s, int count = 1);
  TopologyBuilder& param(const std::string& k, const std::string& v);
  TopologyBuilder& routing(FabricRouting r);
  // Takes over `t`'s parameters and fabric routing (everything but nodes and links): for modified copies.
  TopologyBuilder& properties_of(const Topology& t);
  std::size_t num_nodes() const { return t_.nodes_.size(); }
  const Node& node(NodeId n) const { return t_.nodes_[n]; }
  Topology build(const std::string& where = "topology") &&;

 private:
  Topology t_;
};

}  // namespace fabricsim::topo
