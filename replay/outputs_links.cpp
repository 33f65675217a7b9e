#include "replay/outputs_links.hpp"

#include <algorithm>

namespace fabricsim::sim {

int link_tier(const topo::Topology& t, topo::LinkId l) {
  const topo::Link& k = t.link(l);
  int tier = 0;
  for (topo::NodeId n : {k.a, k.b}) {
    const topo::Node& node = t.node(n);
    bool fabric_switch = node.kind == topo::NodeKind::IbSwitch || node.kind == topo::NodeKind::EthSwitch;
    if (fabric_switch) tier = std::max(tier, std::max(1, node.tier));
  }
  return tier;
}

std::vector<LinkRecord> link_records(const topo::Topology& t, const std::vector<LinkDirStats>& dirs,
                                     const std::function<double(topo::LinkDir)>& capacity_Bps) {
  std::vector<LinkRecord> out;
  for (topo::LinkId l = 0; l < t.num_links(); ++l) {
    std::size_t d0 = 2 * static_cast<std::size_t>(l);
    if (d0 >= dirs.size()) break;
    double b0 = d0 < dirs.size() ? dirs[d0].bytes : 0, b1 = d0 + 1 < dirs.size() ? dirs[d0 + 1].bytes : 0;
    if (b0 <= 0 && b1 <= 0) continue;
    const topo::Link& k = t.link(l);
    LinkRecord r;
    r.link = l;
    r.a = t.node(k.a).id;
    r.b = t.node(k.b).id;
    r.kind = topo::to_string(k.kind);
    r.tier = link_tier(t, l);
    r.capacity_Bps = capacity_Bps ? capacity_Bps(static_cast<topo::LinkDir>(d0)) : k.bandwidth_Bps;
    for (int d = 0; d < 2; ++d) {
      if (d0 + d >= dirs.size()) continue;
      r.bytes[d] = dirs[d0 + d].bytes;
      r.busy_s[d] = dirs[d0 + d].busy_s;
      r.peak_util[d] = dirs[d0 + d].peak_util;
    }
    out.push_back(std::move(r));
  }
  return out;
}

RunResult collective_run_result(const topo::Topology& t, const models::Schedule& s, const ScheduleResult& res,
                                const CollectiveRunInfo& info) {
  RunResult r;
  r.topology = info.topology;
  r.topology_params = info.topology_params;
  r.workload = "collective " + info.op;
  r.workload_params = {{"op", info.op},
                       {"bytes", std::to_string(static_cast<unsigned long long>(info.bytes))},
                       {"algorithm", s.algorithm},
                       {"protocol", s.protocol},
                       {"fidelity", s.fidelity}};
  r.gpus = static_cast<int>(info.communicator.size());
  r.iteration_s = res.makespan_s;
  r.breakdown.exposed_comm_s[info.op] = res.makespan_s;
  std::map<topo::NodeId, int> rank_of;
  for (std::size_t i = 0; i < t.gpus().size(); ++i) rank_of[t.gpus()[i]] = static_cast<int>(i);
  auto gpu_rank = [&](topo::NodeId n) {
    auto it = rank_of.find(n);
    return it == rank_of.end() ? -1 : it->second;
  };
  for (topo::NodeId g : info.communicator) {
    OpRecord o;
    o.rank = gpu_rank(g);
    o.host = t.node(g).host;
    o.stream = "comm";
    o.name = info.op;
    o.kind = "collective";
    o.category = info.op;
    o.start_s = 0;
    o.end_s = res.makespan_s;
    o.bytes = info.bytes;
    o.algorithm = s.algorithm;
    o.protocol = s.protocol;
    r.ops.push_back(std::move(o));
  }
  const std::size_t shown = models::counted_transfers(s);  // joins are at switches: on no GPU's timeline
  if (shown <= info.max_transfer_ops && res.transfers.size() == s.transfers.size()) {
    for (std::size_t i = 0; i < s.transfers.size(); ++i) {
      const models::Transfer& x = s.transfers[i];
      int src = gpu_rank(x.src), dst = gpu_rank(x.dst);
      bool from_gpu = src >= 0;
      int rank = from_gpu ? src : dst;
      if (rank < 0) continue;  // switch to switch: not on any GPU's timeline
      OpRecord o;
      o.rank = rank;
      o.host = t.node(from_gpu ? x.src : x.dst).host;
      o.stream = "xfer.ch" + std::to_string(x.channel);
      o.kind = from_gpu ? "send" : "recv";
      o.category = info.op;
      o.name = "step " + std::to_string(x.step) + (from_gpu ? " -> " + t.node(x.dst).id : " <- " + t.node(x.src).id);
      o.start_s = res.transfers[i].start_s;
      o.end_s = res.transfers[i].finish_s;
      o.bytes = x.bytes * x.steps * x.weight;
      r.ops.push_back(std::move(o));
    }
  } else {
    r.notes.push_back("timeline: the schedule's " + std::to_string(shown) +
                      " transfers are not shown (more than " + std::to_string(info.max_transfer_ops) + ")");
  }
  r.links = link_records(t, res.link_dirs);
  if (res.link_dirs.empty())
    r.notes.push_back("no link statistics: run the schedule with RunOptions::collect_link_stats");
  r.notes.push_back("link utilisation is relative to nominal link bandwidth (before calibration efficiency)");
  if (s.fidelity == "symmetry")
    r.notes.push_back("symmetry fidelity: link statistics count one of each set of symmetric replicas");
  return r;
}

}  // namespace fabricsim::sim
