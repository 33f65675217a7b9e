// The exact quotient of a symmetric all-to-all (sim/engine/quotient_flows.hpp) against the full flow
// simulation (sim::run_schedule) and SimGrid, and its fallback when the fabric or the sizes break the symmetry.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>

#include "coll_test_util.hpp"
#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "models/system.hpp"
#include "sim/engine/collective_time.hpp"
#include "sim/engine/quotient_flows.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

using namespace fabricsim;
using namespace fabricsim::models;

namespace {
using test::a2a;
using test::rel;
topo::Topology superpod(const std::string& nodes) {
  return merge_nvswitch_planes(topo::build_preset("superpod", {{"nodes", nodes}, {"node", "dgx-h100"}}));
}

// Runs the spec both ways; checks that the quotient applied and that every transfer of the full run finishes
// when its class does (and the makespans agree). Returns the quotient's result.
sim::QuotientResult check_equal(const topo::Topology& t, topo::Routing& r, const CollectiveSpec& spec,
                                double tol_s = 0) {
  const Calibration c = default_calibration();
  sim::QuotientOptions qo;
  qo.keep_flow_classes = true;
  qo.batch_tolerance_s = tol_s;
  const sim::QuotientResult q = sim::run_collective_quotient(spec, t, r, c, qo);
  CAPTURE(q.reason);
  REQUIRE(q.applied);
  const Schedule s = build_schedule(spec, t, r, c);
  sim::RunOptions ro;
  ro.batch_tolerance_s = tol_s;
  const sim::ScheduleResult full = sim::run_schedule(s, t, r, c, ro);
  REQUIRE(q.flow_class.size() == s.transfers.size());
  CHECK(q.flows == s.transfers.size());
  CHECK(rel(q.makespan_s, full.makespan_s) < 1e-12);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < s.transfers.size(); ++i)
    if (rel(q.classes[q.flow_class[i]].finish_s, full.transfers[i].finish_s) > 1e-12) ++bad;
  CHECK(bad == 0);
  return q;
}
}  // namespace

TEST_CASE("all_to_all quotient: every transfer finishes when the full flow simulation says (aggregated and per pair)") {
  topo::Topology t = superpod("4");  // 32 GPUs, one leaf per rail
  topo::Routing pxn(t, topo::RoutingOptions{true});
  topo::Routing plain(t);
  const std::uint64_t S = 64ull << 20;
  const auto agg = check_equal(t, pxn, a2a(t, S, Fidelity::Phase));
  CHECK(agg.classes.size() < 10);
  check_equal(t, pxn, a2a(t, S, Fidelity::Step));
  check_equal(t, plain, a2a(t, S, Fidelity::Step));
  // Small blocks (latency-bound, classes start their bandwidth phases at different times) and batching.
  check_equal(t, pxn, a2a(t, 32ull << 10, Fidelity::Step));
  check_equal(t, pxn, a2a(t, S, Fidelity::Phase), 1e-6);
}

TEST_CASE("all_to_all quotient: several leaves per rail, 2 and 3 tiers, D-mod-k and hashed ECMP") {
  // 128 GPUs on 16 DGX H100 with radix-16 switches (2 leaves per rail, spines) and radix-8 switches in 3 tiers
  // (4 leaves per rail, pods, cores): same-leaf, cross-spine and cross-core flow classes.
  for (const char* radix : {"16", "8"}) {
    CAPTURE(std::string(radix));
    std::map<std::string, std::string> p{{"nodes", "16"}, {"node", "dgx-h100"}, {"radix", radix}};
    if (std::string(radix) == "8") p["tiers"] = "3";
    topo::Topology t = merge_nvswitch_planes(topo::build_preset("superpod", p));
    topo::Routing pxn(t, topo::RoutingOptions{true});
    const auto q = check_equal(t, pxn, a2a(t, 64ull << 20, Fidelity::Phase));
    CHECK(q.classes.size() >= 3);
    // Hashed ECMP spreads flows unevenly over the spines: the check must refuse (and say where), not guess.
    topo::RoutingOptions ho;
    ho.pxn = true;
    ho.fabric = topo::FabricRouting::Hash;
    topo::Routing hashed(t, ho);
    const auto h = sim::run_collective_quotient(a2a(t, 64ull << 20, Fidelity::Phase), t, hashed, default_calibration());
    CAPTURE(h.reason);
    CHECK_FALSE(h.applied);
    CHECK(h.reason.find("not symmetric") != std::string::npos);
  }
}

TEST_CASE("all_to_all quotient on a non-rail fat tree (host-based leaves): 2 and 3 tiers, 1:1 and 2:1, PXN on and off") {
  // radix 32: 2 DGX H100 per leaf; radix 16 in 3 tiers: one DGX per leaf, 2 pods. Same-leaf, cross-spine and
  // cross-core classes, with and without PXN (NCCL forwards over NVLink to the destination's NIC index there
  // too: it does not know the fabric).
  struct Case {
    const char *nodes, *radix, *tiers, *over;
  };
  for (const Case& k : {Case{"8", "32", "2", "1"}, Case{"8", "32", "2", "2"}, Case{"16", "16", "3", "1"}}) {
    CAPTURE(std::string(k.radix));
    CAPTURE(std::string(k.over));
    topo::Topology t = merge_nvswitch_planes(topo::build_preset(
        "superpod", {{"nodes", k.nodes}, {"radix", k.radix}, {"tiers", k.tiers}, {"oversubscription", k.over},
                     {"rail_optimized", "false"}}));
    topo::Routing pxn(t, topo::RoutingOptions{true});
    topo::Routing plain(t);
    const auto q = check_equal(t, pxn, a2a(t, 64ull << 20, Fidelity::Phase));
    CHECK(q.classes.size() >= 2);
    check_equal(t, plain, a2a(t, 64ull << 20, Fidelity::Step));
    check_equal(t, plain, a2a(t, 1ull << 20, Fidelity::Step));
  }
}

TEST_CASE("all_to_all quotient falls back on a degraded link, unequal sizes and non-direct schedules") {
  const Calibration c = default_calibration();
  topo::Topology t0 = superpod("4");
  // One NIC-to-leaf link at half its bandwidth.
  topo::TopologyBuilder b(t0.name());
  topo::LinkId degraded = topo::kNoNode;
  for (topo::NodeId i = 0; i < t0.num_nodes(); ++i) b.add_node(t0.node(i));
  for (topo::LinkId l = 0; l < t0.num_links(); ++l) {
    const topo::Link& k = t0.link(l);
    auto sw = [&](topo::NodeId x) {
      return t0.node(x).kind == topo::NodeKind::IbSwitch || t0.node(x).kind == topo::NodeKind::EthSwitch;
    };
    const bool nic_leaf = (t0.node(k.a).kind == topo::NodeKind::Nic && sw(k.b)) ||
                          (t0.node(k.b).kind == topo::NodeKind::Nic && sw(k.a));
    double bw = k.bandwidth_Bps;
    if (nic_leaf && degraded == topo::kNoNode) {
      degraded = l;
      bw *= 0.5;
    }
    b.add_link(k.a, k.b, k.kind, bw, k.latency_s, k.count);
  }
  REQUIRE(degraded != topo::kNoNode);
  topo::Topology t = std::move(b).build("superpod, one degraded link");
  topo::Routing pxn(t, topo::RoutingOptions{true});
  const CollectiveSpec spec = a2a(t, 64ull << 20, Fidelity::Phase);
  const sim::QuotientResult q = sim::run_collective_quotient(spec, t, pxn, c);
  CHECK_FALSE(q.applied);
  CHECK(q.reason.find("not symmetric") != std::string::npos);
  // Partial symmetry (opt-in): colour refinement splits the classes around the degraded link until the
  // partition is equitable; every transfer then finishes when the full flow simulation says.
  {
    sim::QuotientOptions ro;
    ro.refine = true;
    ro.keep_flow_classes = true;
    const sim::QuotientResult qr = sim::run_collective_quotient(spec, t, pxn, c, ro);
    CAPTURE(qr.reason);
    REQUIRE(qr.applied);
    CHECK(qr.refine_rounds >= 2);
    const Schedule s = build_schedule(spec, t, pxn, c);
    const sim::ScheduleResult full = sim::run_schedule(s, t, pxn, c);
    REQUIRE(qr.flow_class.size() == s.transfers.size());
    CHECK(rel(qr.makespan_s, full.makespan_s) < 1e-12);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < s.transfers.size(); ++i)
      if (rel(qr.classes[qr.flow_class[i]].finish_s, full.transfers[i].finish_s) > 1e-12) ++bad;
    CHECK(bad == 0);
    MESSAGE("refined: " << qr.classes.size() << " flow classes, " << qr.link_classes << " link classes, "
                        << qr.refine_rounds << " rounds");
  }
  // time_collective falls back to the flows and says so; its time is the full simulation's.
  sim::CollectiveCall call;
  call.spec = spec;
  const sim::CollectiveTime ct = sim::time_collective(t, pxn, c, call);
  CHECK(ct.method == "flows");
  CHECK(ct.quotient_reason == q.reason);
  // (2,016 transfers: below time_collective's batching threshold, so both runs are exact)
  CHECK(ct.time_s == sim::run_schedule(build_schedule(spec, t, pxn, c), t, pxn, c).makespan_s);
  // ... while on the intact fabric the same call runs through the quotient with the same time as the flows.
  topo::Routing pxn0(t0, topo::RoutingOptions{true});
  const sim::CollectiveTime c0 = sim::time_collective(t0, pxn0, c, call);
  CHECK(c0.method == "quotient");
  CHECK(rel(c0.time_s, sim::run_schedule(build_schedule(spec, t0, pxn0, c), t0, pxn0, c).makespan_s) < 1e-12);

  // Unequal sizes: an all_to_allv with a random matrix.
  CollectiveSpec v = a2a(t0, 0, Fidelity::Step);
  v.op = Op::AllToAllv;
  const std::size_t n = v.communicator.size();
  std::mt19937_64 rng(7);
  v.matrix.assign(n, std::vector<std::uint64_t>(n, 0));
  for (auto& row : v.matrix)
    for (auto& x : row) x = 4096 * (1 + rng() % 64);
  const auto qv = sim::run_collective_quotient(v, t0, pxn0, c);
  CHECK_FALSE(qv.applied);
  CHECK(qv.reason.find("unequal sizes") != std::string::npos);
  // The same refused by the check itself when handed over as transfers (no matrix shortcut).
  const auto qs = sim::run_quotient(
      [&](const models::TransferSink& sink) { (void)models::stream_direct(v, t0, pxn0, c, sink); }, 0.0, t0, pxn0, c);
  CHECK_FALSE(qs.applied);
  CHECK_FALSE(qs.reason.empty());
  // A uniform matrix is the all_to_all: it runs through the quotient.
  for (auto& row : v.matrix)
    for (auto& x : row) x = 1 << 20;
  check_equal(t0, pxn0, v);
  // Not a direct all-to-all (a ring all_reduce): nothing streamed.
  CollectiveSpec ar = a2a(t0, 1 << 20, Fidelity::Step);
  ar.op = Op::AllReduce;
  ar.algorithm = Algorithm::Ring;
  const auto qa = sim::run_collective_quotient(ar, t0, pxn0, c);
  CHECK_FALSE(qa.applied);
  CHECK(qa.reason == "not a dependency-free direct all_to_all");
}

#ifdef FABRICSIM_HAVE_SIMGRID
TEST_CASE("all_to_all quotient agrees with SimGrid on 32 GPUs") {
  const Calibration c = default_calibration();
  topo::Topology t = superpod("4");
  topo::Routing pxn(t, topo::RoutingOptions{true});
  const CollectiveSpec spec = a2a(t, 16ull << 20, Fidelity::Phase);
  const sim::QuotientResult q = sim::run_collective_quotient(spec, t, pxn, c);
  REQUIRE(q.applied);
  sim::RunOptions so;
  so.engine = "simgrid";
  const double sg = sim::run_schedule(build_schedule(spec, t, pxn, c), t, pxn, c, so).makespan_s;
  CAPTURE(q.makespan_s);
  CAPTURE(sg);
  // The tolerance of the engine-vs-SimGrid cross-checks (docs/validation.md: 1e-4 per transfer).
  CHECK(rel(q.makespan_s, sg) < 1e-4);
}
#endif
