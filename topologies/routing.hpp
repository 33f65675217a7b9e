#pragma once
// Routes between nodes: shortest paths (hop count, ties broken toward higher bandwidth). Among equal-cost
// next hops inside the switch fabric the default is destination-based static routing (D-mod-k, as the
// InfiniBand subnet manager's fat-tree engines compute it): the k-th multi-choice hop takes candidate
// floor(dst_index / (m_1*...*m_{k-1})) mod m_k, where dst_index is the ingress NIC's position among fabric
// endpoints in leaf order, so destinations spread evenly over up-ports and shift/all-to-all patterns are
// balanced. FabricRouting::Hash selects per-pair hashed ECMP instead (hash of (src, dst, hop)), as Ethernet
// switches pick a next hop by a hash of the flow's 5-tuple; the topology says which (Topology::routing()). GPU->GPU inside an NVLink domain stays on NVLink/NVSwitch. GPU traffic that
// leaves its host goes through the GPU's rail NIC (the closest NIC of its host by hop count through
// PCIe switches/CPUs, as NCCL picks the closest NIC; ties go to the NIC whose local index equals the GPU's
// local index modulo the host's NIC count, then to the lowest local index). With `pxn` enabled a GPU whose rail differs from the destination's first
// moves the data over NVLink to the peer GPU on the destination's rail (NCCL's PXN), so traffic stays on
// one rail of the fabric, when an NVLink path that passes no other GPU joins them (else it uses its own NIC). Paths are computed on demand and cached per pair; thread-compatible (one
// Routing per thread, or external locking).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "topologies/topology.hpp"

namespace fabricsim::topo {

struct RoutingOptions {
  bool pxn = false;  // PXN-style forwarding over NVLink to the rail-matching GPU
  // Choice among equal-cost next hops in the switch fabric; unset: what the topology says (Topology::routing(),
  // set by the superpod preset from its fabric or by a topology file's "routing").
  std::optional<FabricRouting> fabric;
};

class Routing {
 public:
  explicit Routing(const Topology& t, RoutingOptions opt = {});
  ~Routing();
  Routing(Routing&&) noexcept;

  // Sequence of link directions from src to dst (empty when src == dst). Throws InputError if
  // unreachable. The reference stays valid for the lifetime of the Routing.
  const std::vector<LinkDir>& route(NodeId src, NodeId dst);
  // Sum of link latencies along the route, seconds.
  double latency(NodeId src, NodeId dst);
  // Minimum per-direction bandwidth along the route, bytes/s.
  double bottleneck_bandwidth(NodeId src, NodeId dst);
  // The NIC a GPU uses to leave its host (kNoNode if none).
  NodeId rail_nic(NodeId gpu) const;
  const Topology& topology() const { return t_; }
  RoutingOptions options() const;  // `fabric` always set: the option given, else the topology's
  std::size_t cached_routes() const;
  // The route route(src, dst) cached, or nullptr when that pair was not routed through route() yet; never
  // computes nor caches (a caller with its own bounded cache reuses what the Routing holds already).
  const std::vector<LinkDir>* cached_route(NodeId src, NodeId dst) const;
  // Computes the route into `out` without caching it (for sweeps over many pairs, e.g. benchmarks).
  // Same result as route(src, dst).
  void compute_route(NodeId src, NodeId dst, std::vector<LinkDir>& out);
  // Drops all cached pair routes (references returned by route() become invalid).
  void clear_cache();

 private:
  struct Impl;
  const Topology& t_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fabricsim::topo
