#pragma once
// Helpers shared by the engine tests: small hand-built topologies and schedules.
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "models/schedule.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::test {

inline topo::Node gpu_node(const std::string& id, int host) {
  topo::Node n;
  n.id = id;
  n.kind = topo::NodeKind::Gpu;
  n.host = host;
  n.local_index = 0;
  return n;
}

inline topo::Node switch_node(const std::string& id) {
  topo::Node n;
  n.id = id;
  n.kind = topo::NodeKind::IbSwitch;
  n.tier = 1;
  return n;
}

// k GPUs (nodes 0..k-1), each on its own host, all linked to one switch (node k).
inline topo::Topology star(int k, double bw_Bps, double lat_s, topo::LinkKind kind = topo::LinkKind::InfiniBand) {
  topo::TopologyBuilder b("star");
  for (int i = 0; i < k; ++i) b.add_node(gpu_node("g" + std::to_string(i), i));
  const topo::NodeId sw = b.add_node(switch_node("sw"));
  for (int i = 0; i < k; ++i) b.add_link(static_cast<topo::NodeId>(i), sw, kind, bw_Bps, lat_s);
  return std::move(b).build();
}

inline models::Transfer xfer(topo::NodeId s, topo::NodeId d, double bytes, std::vector<std::uint32_t> deps = {}) {
  models::Transfer t;
  t.src = s;
  t.dst = d;
  t.bytes = bytes;
  t.payload_bytes = bytes;
  t.deps = std::move(deps);
  return t;
}

}  // namespace fabricsim::test
