// Engine link statistics -> LinkRecords: ids, endpoints, kinds and tiers come from the topology.
#include <doctest/doctest.h>

#include "sim/replay/outputs.hpp"
#include "sim/replay/outputs_links.hpp"
#include "topologies/io.hpp"

using namespace fabricsim;

TEST_CASE("link_records: only links with traffic, tiers from the fabric") {
  topo::Topology t = topo::build_preset("superpod", {{"nodes", "2"}, {"node", "dgx-h100"}});
  // Find one in-host link and one NIC-leaf link.
  topo::LinkId in_host = 0, to_leaf = 0;
  bool have_host = false, have_leaf = false;
  for (topo::LinkId l = 0; l < t.num_links(); ++l) {
    const auto& k = t.link(l);
    auto ka = t.node(k.a).kind, kb = t.node(k.b).kind;
    bool sw = ka == topo::NodeKind::IbSwitch || kb == topo::NodeKind::IbSwitch;
    bool nic = ka == topo::NodeKind::Nic || kb == topo::NodeKind::Nic;
    if (!sw && !have_host && k.kind == topo::LinkKind::NVLink) in_host = l, have_host = true;
    if (sw && nic && !have_leaf) to_leaf = l, have_leaf = true;
  }
  REQUIRE(have_host);
  REQUIRE(have_leaf);
  std::vector<sim::LinkDirStats> dirs(2 * t.num_links());
  dirs[2 * in_host].bytes = 1e9;
  dirs[2 * in_host].busy_s = 0.01;
  dirs[2 * in_host].peak_util = 0.5;
  dirs[2 * to_leaf + 1].bytes = 2e8;
  dirs[2 * to_leaf + 1].busy_s = 0.02;
  auto recs = sim::link_records(t, dirs);
  REQUIRE(recs.size() == 2);
  const auto& a = recs[0].link == in_host ? recs[0] : recs[1];
  const auto& b = recs[0].link == in_host ? recs[1] : recs[0];
  CHECK(a.kind == "nvlink");
  CHECK(a.tier == 0);
  CHECK(a.bytes[0] == 1e9);
  CHECK(a.bytes[1] == 0);
  CHECK(a.peak_util[0] == 0.5);
  CHECK(a.capacity_Bps == t.link(in_host).bandwidth_Bps);
  CHECK(a.a == t.node(t.link(in_host).a).id);
  CHECK(b.kind == "infiniband");
  CHECK(b.tier == 1);
  CHECK(b.bytes[1] == 2e8);
  CHECK(recs[0].link < recs[1].link);
  auto capped = sim::link_records(t, dirs, [](topo::LinkDir) { return 7.0; });
  CHECK(capped[0].capacity_Bps == 7.0);
}
