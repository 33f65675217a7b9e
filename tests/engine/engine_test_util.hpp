#pragma once
// Helpers shared by the engine tests: small hand-built topologies and schedules.
#include <memory>
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "models/schedule.hpp"
#include "sim/engine/network.hpp"
#include "topologies/routing.hpp"
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

// The data-parallel call of a replay with mirrors (replay/engine_comm_model.cpp merges a communicator's
// mirrors so): group k = GPU k of every host (k < groups), blocks in order.
inline std::shared_ptr<models::Schedule> mirrored(const topo::Topology& t, topo::Routing& routing, const models::Calibration& c,
                                           models::Op op, models::Algorithm algo, models::Fidelity f,
                                           std::uint64_t bytes, int groups) {
  const auto& gpus = t.gpus();
  auto out = std::make_shared<models::Schedule>();
  for (int k = 0; k < groups; ++k) {
    models::CollectiveSpec spec;
    spec.op = op;
    spec.bytes = bytes;
    spec.algorithm = algo;
    spec.protocol = models::Protocol::Simple;
    spec.fidelity = f;
    for (std::size_t g = static_cast<std::size_t>(k); g < gpus.size(); g += 8) spec.communicator.push_back(gpus[g]);
    const models::Schedule s = models::build_schedule(spec, t, routing, c);
    if (k == 0) {
      out->op = s.op;
      out->algorithm = s.algorithm;
      out->fixed_latency_s = s.fixed_latency_s;
    }
    const auto off = static_cast<std::uint32_t>(out->transfers.size());
    for (auto tr : s.transfers) {
      for (auto& d : tr.deps) d += off;
      out->transfers.push_back(std::move(tr));
    }
  }
  return out;
}

// How many link directions differ between two runs' statistics (bytes, busy time or peak utilisation, compared
// exactly); the caller checks the sizes first.
inline std::size_t differing_links(const std::vector<sim::LinkDirStats>& a, const std::vector<sim::LinkDirStats>& b) {
  std::size_t differ = 0;
  for (std::size_t d = 0; d < a.size(); ++d)
    differ += a[d].bytes != b[d].bytes || a[d].busy_s != b[d].busy_s || a[d].peak_util != b[d].peak_util;
  return differ;
}
// How many link directions carried traffic (busy time > 0).
inline std::size_t busy_links(const std::vector<sim::LinkDirStats>& links) {
  std::size_t busy = 0;
  for (const auto& l : links) busy += l.busy_s > 0;
  return busy;
}
// How many transfers of two runs of one schedule differ in start or finish time (exactly); sizes checked first.
inline std::size_t differing_transfers(const sim::ScheduleRun& a, const sim::ScheduleRun& b) {
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.transfers.size(); ++i)
    differ += a.transfers[i].start_s != b.transfers[i].start_s || a.transfers[i].finish_s != b.transfers[i].finish_s;
  return differ;
}

}  // namespace fabricsim::test
