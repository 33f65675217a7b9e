// MNNVL: NCCL (>= 2.20) treats the GPUs of one NVLink domain spanning several hosts (an NVL72 rack of 18 trays) as
// one node; `mnnvl=false` (NCCL_MNNVL_ENABLE=0) keeps the trays as nodes. Topology::nccl_node, the tuner's node
// count and latencies, the channel and NVLS-head caps that only bind on such a node.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "models/system.hpp"
#include "models/tuner.hpp"
#include "sim/base/error.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

using namespace fabricsim;
using namespace fabricsim::models;

namespace {

doctest::Approx approx(double v) { return doctest::Approx(v).epsilon(1e-12).scale(1e-300); }

topo::Topology preset(const std::string& name, std::map<std::string, std::string> p = {}) {
  return System(system_spec(name, std::move(p), "default")).topology();
}

CollectiveSpec all_gpus(const topo::Topology& t, Op op, std::uint64_t bytes) {
  CollectiveSpec s;
  s.op = op;
  s.bytes = bytes;
  s.communicator = t.gpus();
  return s;
}

int nodes_of(const topo::Topology& t) {
  std::set<int> n;
  for (auto g : t.gpus()) n.insert(t.nccl_node(g));
  return static_cast<int>(n.size());
}

const Candidate& candidate(const TunerChoice& c, Algorithm a, Protocol p) {
  for (const auto& x : c.candidates)
    if (x.algorithm == a && x.protocol == p) return x;
  FAIL("no candidate " << to_string(a) << "/" << to_string(p));
  return c.candidates.front();
}

}  // namespace

TEST_CASE("nccl_node: an NVL72 rack is one NCCL node under MNNVL, its trays without; servers stay hosts") {
  const topo::Topology rack = preset("gb200-nvl72");
  CHECK(rack.mnnvl());
  CHECK(nodes_of(rack) == 1);
  const topo::Topology trays = preset("gb200-nvl72", {{"mnnvl", "false"}});
  CHECK_FALSE(trays.mnnvl());
  CHECK(nodes_of(trays) == 18);
  for (auto g : trays.gpus()) CHECK(trays.nccl_node(g) == trays.node(g).host);
  CHECK(nodes_of(preset("gb300-nvl72")) == 1);
  CHECK(nodes_of(preset("superpod", {{"nodes", "2"}, {"node", "gb200-nvl72"}})) == 2);
  CHECK(nodes_of(preset("superpod", {{"nodes", "2"}, {"node", "gb200-nvl72"}, {"mnnvl", "false"}})) == 36);
  CHECK(nodes_of(preset("nvlink-switch-system", {{"nodes", "4"}})) == 1);
  // Servers whose NVLink domain is the server: nothing changes.
  const topo::Topology dgx = preset("superpod", {{"nodes", "4"}});
  CHECK_FALSE(dgx.mnnvl());
  for (auto g : dgx.gpus()) CHECK(dgx.nccl_node(g) == dgx.node(g).host);
  // Bad values: one clear error.
  CHECK_THROWS_WITH_AS(topo::build_preset("gb200-nvl72", {{"mnnvl", "maybe"}}), doctest::Contains("true, false"),
                       InputError);
  CHECK_THROWS_WITH_AS(topo::build_preset("superpod", {{"mnnvl", "true"}}), doctest::Contains("node=dgx-h100"),
                       InputError);
}

TEST_CASE("tuner on one NVL72 rack under MNNVL: one node, NVLink latencies, NVLS without network latency") {
  const Calibration cal = default_calibration();
  const topo::Topology rack = preset("gb200-nvl72");
  const topo::Topology trays = preset("gb200-nvl72", {{"mnnvl", "false"}});
  topo::Routing rr(rack), rt(trays);
  const CollectiveSpec s = all_gpus(rack, Op::AllReduce, 1ull << 20);
  const CommBandwidths b = comm_bandwidths(s, rack, rr, cal);
  CHECK(b.hosts == 1);
  CHECK(b.max_per_host == 72);
  CHECK(comm_bandwidths(s, trays, rt, cal).hosts == 18);
  CHECK(default_channels(s, rack, rr) == 1);  // one node: one ring, as on one DGX
  const TunerChoice one = tune(s, rack, rr, cal);
  const TunerChoice per_tray = tune(s, trays, rt, cal);
  // [NCCL-T] NVLS on one node: hwLatencies[NVLINK][NVLS][Simple] = 25 us and nothing else; with the trays as
  // nodes NCCL's model would add the network's NVLS latency (the old result).
  CHECK(candidate(one, Algorithm::Nvls, Protocol::Simple).latency_s == approx(25e-6));
  const double ln = cal.of(Algorithm::Nvls, Protocol::Simple).net_step_latency_s;
  REQUIRE(ln > 0);
  CHECK(candidate(per_tray, Algorithm::Nvls, Protocol::Simple).latency_s == approx(25e-6 + ln));
  // Ring: 2(n-1) NVLink steps at the intra-node step latency, no network steps, no per-step net overhead and no
  // multi-node plateau factor.
  const auto& ap = cal.of(Algorithm::Ring, Protocol::LL);
  CHECK(candidate(one, Algorithm::Ring, Protocol::LL).latency_s ==
        approx(ap.base_latency_s + 2 * 71 * ap.step_latency_s));
  CHECK(candidate(per_tray, Algorithm::Ring, Protocol::LL).latency_s >
        candidate(one, Algorithm::Ring, Protocol::LL).latency_s);
  // Tree: a chain of 72 inside the node (NCCL: 2 ((nRanks/nNodes - 1) intraLat + log2(nNodes) interLat)).
  const auto& tp = cal.of(Algorithm::Tree, Protocol::LL);
  CHECK(candidate(one, Algorithm::Tree, Protocol::LL).latency_s == approx(tp.base_latency_s + 2 * 71 * tp.step_latency_s));
  // NVLS_TREE is NCCL's only across nodes: rejected on the rack, a candidate per tray.
  bool nvls_tree_rejected = false;
  for (const auto& r : one.rejected) nvls_tree_rejected |= r.rfind("nvls_tree:", 0) == 0;
  CHECK(nvls_tree_rejected);
  CHECK(one.algorithm == Algorithm::Nvls);
  // LL's busBw ceiling is the one-node value (282 GB/s on Blackwell), 70 GB/s across >= 4 trays.
  CHECK(b.ll_max_Bps == approx(282e9));
  CHECK(comm_bandwidths(s, trays, rt, cal).ll_max_Bps == approx(70e9));
  // p2p inside the clique is not over the network: LL up to 16 KiB per peer.
  CollectiveSpec p = all_gpus(rack, Op::SendRecv, 8192);
  CHECK(tune(p, rack, rr, cal).protocol == Protocol::LL);
  CHECK(tune(p, trays, rt, cal).protocol == Protocol::Simple);
}

TEST_CASE("two NVL72 racks under MNNVL: two nodes of 72, 32 ring channels, at most 32 NVLS_TREE heads") {
  const Calibration cal = default_calibration();
  const topo::Topology t = preset("superpod", {{"nodes", "2"}, {"node", "gb200-nvl72"}});
  topo::Routing r(t);
  CollectiveSpec s = all_gpus(t, Op::AllReduce, 1ull << 30);
  const CommBandwidths b = comm_bandwidths(s, t, r, cal);
  CHECK(b.hosts == 2);
  CHECK(b.max_per_host == 72);
  // NCCL's ring search stops at MAXCHANNELS/2 = 32 channels; a rack has 72 rail NICs.
  CHECK(default_channels(s, t, r) == 32);
  // Two racks with the trays as nodes: 4 NICs per tray, 4 channels (unchanged).
  const topo::Topology trays = preset("superpod", {{"nodes", "2"}, {"node", "gb200-nvl72"}, {"mnnvl", "false"}});
  topo::Routing rt(trays);
  CHECK(default_channels(all_gpus(trays, Op::AllReduce, 1ull << 30), trays, rt) == 4);
  // NVLS_TREE: latency 25 us + 2 log2(2) x interLat; bandwidth the slower of NVLS in the rack and a head's shard
  // through its NIC, with 32 heads (NCCL_MAX_NVLS_ARITY), not 72.
  s.algorithm = Algorithm::NvlsTree;
  s.protocol = Protocol::Simple;
  const TunerChoice c = tune(s, t, r, cal);
  REQUIRE(c.candidates.size() == 1);
  const double S = static_cast<double>(s.bytes);
  const auto& ap = cal.of(Algorithm::NvlsTree, Protocol::Simple);
  CHECK(c.candidates[0].latency_s == approx(25e-6 + 2 * ap.net_step_latency_s));
  const double intra = S / (b.nvlink_Bps * ap.bw_efficiency * cal.factor("nvls_efficiency"));
  const double inter = S / 32 / (b.nic_Bps * ap.bw_efficiency);
  CHECK(c.candidates[0].predicted_s - c.candidates[0].latency_s == approx(std::max(intra, inter)));
  // CollNet Direct takes at most 8 local ranks (NCCL): not on a 72-GPU node, even with SHARP.
  const topo::Topology sh = preset("superpod", {{"nodes", "2"}, {"node", "gb200-nvl72"}, {"sharp", "true"}});
  topo::Routing rs(sh);
  CHECK(why_not_applicable(all_gpus(sh, Op::AllReduce, 1ull << 30), Algorithm::CollNet, sh, rs).find("at most 8") !=
        std::string::npos);
}
