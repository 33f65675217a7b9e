// Engine link statistics -> LinkRecords: ids, endpoints, kinds and tiers come from the topology.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "replay/outputs.hpp"
#include "replay/outputs_links.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

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

TEST_CASE("collective_run_result: a ring all-reduce on the engine becomes ops and link records") {
  topo::Topology t = topo::build_preset("superpod", {{"nodes", "2"}, {"node", "dgx-h100"}});
  topo::Routing routing(t);
  models::Calibration calib = models::default_calibration();
  models::CollectiveSpec spec;
  spec.op = models::Op::AllReduce;
  spec.bytes = 64ull << 20;
  spec.communicator.assign(t.gpus().begin(), t.gpus().end());
  spec.algorithm = models::Algorithm::Ring;
  spec.protocol = models::Protocol::Simple;
  models::Schedule s = models::build_schedule(spec, t, routing, calib);
  sim::RunOptions o;
  o.collect_link_stats = true;
  sim::ScheduleResult res = sim::run_schedule(s, t, routing, calib, o);
  sim::CollectiveRunInfo info;
  info.topology = "superpod";
  info.op = "all_reduce";
  info.bytes = static_cast<double>(spec.bytes);
  info.communicator = spec.communicator;
  sim::RunResult r = sim::collective_run_result(t, s, res, info);
  CHECK(r.gpus == 16);
  CHECK(r.iteration_s == res.makespan_s);
  REQUIRE(r.ops.size() == 16 + s.transfers.size());
  int collectives = 0;
  double latest = 0;
  for (const auto& op : r.ops) {
    if (op.kind == "collective") ++collectives;
    CHECK(op.rank >= 0);
    CHECK(op.end_s >= op.start_s);
    latest = std::max(latest, op.end_s);
  }
  CHECK(collectives == 16);
  CHECK(latest <= res.makespan_s + 1e-12);
  // Both NVLink and InfiniBand carried the ring; bytes on links add up to at least the ring's traffic
  // leaving one host: 2 (n-1)/n x 64 MiB crosses the host boundary in each direction on some rail.
  REQUIRE(!r.links.empty());
  std::set<std::string> kinds;
  double ib_bytes = 0;
  for (const auto& l : r.links) {
    kinds.insert(l.kind);
    if (l.kind == "infiniband" && l.tier == 1) ib_bytes += l.bytes[0] + l.bytes[1];
  }
  CHECK(kinds.count("nvlink"));
  CHECK(kinds.count("infiniband"));
  CHECK(ib_bytes > 0);
  // The writers accept it: timeline slices = ops.
  Json tl = Json::parse(sim::timeline_json(r, 4));
  std::size_t x = 0;
  for (const auto& e : tl["traceEvents"]) x += e["ph"] == "X";
  CHECK(x == r.ops.size());
}
