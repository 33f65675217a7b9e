#include "sim/replay/outputs_links.hpp"

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

}  // namespace fabricsim::sim
