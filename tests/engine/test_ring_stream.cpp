// The streamed step-level ring (models::build_ring_stream + sim::run_ring_stream) against the materialised
// step-level schedule on sim::run_schedule: same makespan, with and without period skipping, on uniform
// superpods and with one degraded network link; and the degraded ring on our engine against SimGrid.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "bench/bench_util.hpp"
#include "models/collectives.hpp"
#include "models/system.hpp"
#include "models/ring_stream.hpp"
#include "sim/engine/ring_bounds.hpp"
#include "sim/engine/ring_stream.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

using namespace fabricsim;

namespace {
models::System superpod(int nodes) {
  return models::System(models::system_spec("superpod", {{"nodes", std::to_string(nodes)}}, "default"));
}

// The same system with its first NIC uplink at 50 % (an already built topology: System's second constructor).
models::System degraded(const models::System& base) {
  return models::System(bench::with_link_scaled(base.topology(), bench::first_nic_uplink(base.topology()), 0.5),
                        base.calibration(), base.calibration_ref());
}

models::CollectiveSpec ring_spec(const topo::Topology& t, models::Op op, std::uint64_t bytes) {
  models::CollectiveSpec spec;
  spec.op = op;
  spec.bytes = bytes;
  spec.communicator = t.gpus();
  spec.algorithm = models::Algorithm::Ring;
  spec.protocol = models::Protocol::Simple;
  spec.fidelity = models::Fidelity::Step;
  return spec;
}

// Streamed (skipping on and off) and materialised makespans of the same spec; returns the skipping run.
sim::RingStreamResult check_stream(const models::System& sys, const models::CollectiveSpec& spec) {
  const topo::Topology& t = sys.topology();
  topo::Routing& routing = sys.routing();
  const models::Calibration& calib = sys.calibration();
  const models::Schedule s = models::build_schedule(spec, t, routing, calib);
  const auto rs = models::build_ring_stream(spec, t, routing, calib);
  REQUIRE(rs.has_value());
  // The materialised ring has one transfer per step and hop, two when steps are pipelined (depth > 1: the
  // send and the receiver's delay).
  const std::size_t per = rs->depth > 1 ? 2 : 1;
  CHECK(per * rs->transfers() == s.transfers.size());
  const double full = sim::run_schedule(s, t, routing, calib).makespan_s;
  sim::RingStreamOptions plain;
  plain.skip_periods = false;
  const auto a = sim::run_ring_stream(*rs, t, routing, calib, plain);
  const auto b = sim::run_ring_stream(*rs, t, routing, calib);
  CHECK(a.skipped_steps == 0);
  CHECK(per * a.simulated == s.transfers.size());
  CHECK(per * (b.simulated + b.skipped_steps * (rs->transfers() / rs->nsteps)) == s.transfers.size());
  // The same engine, the same transfers: equal up to floating-point rounding (observed: equal to all 9
  // printed digits, bench_collectives); skipping adds (skipped periods) x period to the clock.
  CHECK(a.makespan_s == doctest::Approx(full).epsilon(1e-12));
  CHECK(b.makespan_s == doctest::Approx(full).epsilon(1e-9));
  return b;
}
}  // namespace

TEST_CASE("ring stream: all_reduce, all_gather, reduce_scatter as the materialised step-level ring") {
  const models::System sys = superpod(8);  // 64 GPUs
  const topo::Topology& t = sys.topology();
  const auto r = check_stream(sys, ring_spec(t, models::Op::AllReduce, std::uint64_t{64} << 20));
  // 126 steps: the state repeats early and most steps are skipped.
  CHECK(r.skipped_steps > 60);
  CHECK(r.period_s > 0);
  check_stream(sys, ring_spec(t, models::Op::AllGather, std::uint64_t{64} << 20));
  check_stream(sys, ring_spec(t, models::Op::ReduceScatter, std::uint64_t{64} << 20));
}

TEST_CASE("ring stream: depth 3 and a single host") {
  const models::System sys = superpod(4);
  const topo::Topology& t = sys.topology();
  topo::Routing& routing = sys.routing();
  auto calib = sys.calibration();
  calib.factors.ring_credit_steps = 3;
  // 1 GiB on 32 GPUs and 8 channels: 4 MiB per step and channel, two NCCL chunks of 2 MiB, so NCCL's depth
  // is 4 and the calibration's 3 applies.
  const auto spec = ring_spec(t, models::Op::AllReduce, std::uint64_t{1} << 30);
  const models::Schedule s = models::build_schedule(spec, t, routing, calib);
  const auto rs = models::build_ring_stream(spec, t, routing, calib);
  REQUIRE(rs.has_value());
  CHECK(rs->depth == 3);
  CHECK(sim::run_ring_stream(*rs, t, routing, calib).makespan_s ==
        doctest::Approx(sim::run_schedule(s, t, routing, calib).makespan_s).epsilon(1e-9));
  const models::System one = superpod(1);
  check_stream(one, ring_spec(one.topology(), models::Op::AllReduce, std::uint64_t{8} << 20));
}

TEST_CASE("ring stream: pipelined steps (ring_credit_steps 8) as the materialised ring, faster across hosts") {
  // 4 DGX H100: the network hop is the ring's slowest. Serialised (depth 1) every step pays its latency plus
  // bandwidth; pipelined the latency of a step overlaps the next steps. 256 MiB on 32 GPUs and 8 channels is
  // 1 MiB per step and channel, one NCCL chunk: depth 2; 2 GiB is 4 chunks: depth 8 (models::ring_depth).
  const models::System sys = superpod(4);
  const topo::Topology& t = sys.topology();
  topo::Routing& routing = sys.routing();
  auto calib = sys.calibration();
  calib.factors.ring_credit_steps = 8;
  for (auto op : {models::Op::AllReduce, models::Op::AllGather}) {
    for (auto [bytes, depth] : {std::pair{std::uint64_t{256} << 20, 2u}, std::pair{std::uint64_t{2} << 30, 8u}}) {
      CAPTURE(bytes);
      const auto spec = ring_spec(t, op, bytes);
      const models::Schedule s = models::build_schedule(spec, t, routing, calib);
      const auto rs = models::build_ring_stream(spec, t, routing, calib);
      REQUIRE(rs.has_value());
      CHECK(rs->depth == depth);
      CHECK(s.transfers.size() == 2 * rs->transfers());
      const double full = sim::run_schedule(s, t, routing, calib).makespan_s;
      const auto a = sim::run_ring_stream(*rs, t, routing, calib);
      CHECK(a.makespan_s == doctest::Approx(full).epsilon(1e-9));
      const sim::RingBounds b = sim::bound_ring_stream(*rs, t, routing, calib);
      CHECK(b.lower_s <= a.makespan_s * (1 + 1e-9));
      CHECK(b.upper_s >= a.makespan_s * (1 - 1e-9));
      const auto serial = models::build_ring_stream(spec, t, routing, sys.calibration());
      const double before = sim::run_ring_stream(*serial, t, routing, sys.calibration()).makespan_s;
      MESSAGE(std::string(models::to_string(op)) << " " << bytes << " B: serialised " << before * 1e3 << " ms, depth " << depth
                                    << " " << a.makespan_s * 1e3 << " ms");
      CHECK(a.makespan_s < 0.95 * before);
    }
  }
}

TEST_CASE("ring depth: NCCL's size-dependent depth on 2 x 8 H100, between depth 1 and 8") {
  // 16 GPUs, 8 channels (one per NIC). ring_credit_steps 8: up to one NCCL loop (8 channels x 16 ranks x
  // 2 MiB chunks = 256 MiB) a step is one chunk and NCCL's slots allow 2 steps in flight (models::ring_depth).
  const models::System sys = superpod(2);
  const topo::Topology& t = sys.topology();
  topo::Routing& routing = sys.routing();
  const models::Calibration& c1 = sys.calibration();
  REQUIRE(c1.factors.ring_credit_steps == 1);
  models::Calibration c8 = c1;
  c8.factors.ring_credit_steps = 8;
  CHECK(models::ring_depth(c1, models::Protocol::Simple, 8 << 20) == 1);
  CHECK(models::ring_depth(c8, models::Protocol::Simple, 32 << 10) == 2);
  CHECK(models::ring_depth(c8, models::Protocol::Simple, 2 << 20) == 2);
  CHECK(models::ring_depth(c8, models::Protocol::Simple, (2 << 20) + 1) == 4);
  CHECK(models::ring_depth(c8, models::Protocol::Simple, 8 << 20) == 8);
  CHECK(models::ring_depth(c8, models::Protocol::Simple, 64 << 20) == 8);
  CHECK(models::ring_depth(c8, models::Protocol::LL, 4 << 10) == 8);  // one slot per LL chunk
  // Makespan of a ring all_reduce of `bytes`, its depth forced to `force` when > 0.
  auto run = [&](std::uint64_t bytes, const models::Calibration& c, std::uint32_t force) {
    auto rs = models::build_ring_stream(ring_spec(t, models::Op::AllReduce, bytes), t, routing, c);
    REQUIRE(rs.has_value());
    if (force > 0) rs->depth = force;
    return std::make_pair(rs->depth, sim::run_ring_stream(*rs, t, routing, c).makespan_s);
  };
  const auto [d4, sized4] = run(std::uint64_t{4} << 20, c8, 0);
  CHECK(d4 == 2);
  const double deep4 = run(std::uint64_t{4} << 20, c8, 8).second;
  const double serial4 = run(std::uint64_t{4} << 20, c1, 0).second;
  MESSAGE("4 MiB: depth 1 " << serial4 * 1e6 << " us, NCCL's depth 2 " << sized4 * 1e6 << " us, depth 8 "
                            << deep4 * 1e6 << " us");
  CHECK(sized4 > deep4);
  CHECK(sized4 <= serial4);
  // The merged (phase) form prices the same depth: per step max(mean latency, max over hops of (latency +
  // bandwidth) / depth - slowest bandwidth), 1.7 % faster than the step schedule here (232.6 us).
  auto phase = ring_spec(t, models::Op::AllReduce, std::uint64_t{4} << 20);
  phase.fidelity = models::Fidelity::Phase;
  const double phase4 = sim::run_schedule(models::build_schedule(phase, t, routing, c8), t, routing, c8).makespan_s;
  MESSAGE("4 MiB, phase fidelity: " << phase4 * 1e6 << " us");
  CHECK(phase4 == doctest::Approx(sized4).epsilon(0.03));
  // From 4 loops (1 GiB) the depth is NCCL_STEPS: the same ring as depth 8.
  const auto [d1g, sized1g] = run(std::uint64_t{1} << 30, c8, 0);
  CHECK(d1g == 8);
  CHECK(sized1g == run(std::uint64_t{1} << 30, c8, 8).second);
  // At 256 MiB (one loop, depth 2) the steps are bandwidth-bound: the depth moves the time by little.
  const auto [d256, sized256] = run(std::uint64_t{256} << 20, c8, 0);
  CHECK(d256 == 2);
  const double deep256 = run(std::uint64_t{256} << 20, c8, 8).second;
  MESSAGE("256 MiB: NCCL's depth 2 " << sized256 * 1e3 << " ms, depth 8 " << deep256 * 1e3 << " ms");
  CHECK(sized256 >= deep256);
  CHECK(sized256 <= 1.01 * deep256);
}

TEST_CASE("ring stream: one network link at 50 % (no repetition: every step simulated)") {
  const models::System base = superpod(2);
  const models::System slowed = degraded(base);
  const auto r = check_stream(slowed, ring_spec(slowed.topology(), models::Op::AllReduce, std::uint64_t{64} << 20));
  // The slowed channel's ring and the others run at incommensurate paces.
  CHECK(r.skipped_steps == 0);
  // The degraded link makes the collective slower.
  auto makespan = [](const models::System& s) {
    const auto spec = ring_spec(s.topology(), models::Op::AllReduce, std::uint64_t{64} << 20);
    const auto rs = models::build_ring_stream(spec, s.topology(), s.routing(), s.calibration());
    return sim::run_ring_stream(*rs, s.topology(), s.routing(), s.calibration()).makespan_s;
  };
  CHECK(makespan(slowed) > 1.2 * makespan(base));
}

TEST_CASE("ring stream: only plain step-level rings have a compact form") {
  const models::System sys = superpod(2);
  const topo::Topology& t = sys.topology();
  topo::Routing& routing = sys.routing();
  const models::Calibration& calib = sys.calibration();
  auto spec = ring_spec(t, models::Op::AllReduce, std::uint64_t{64} << 20);
  spec.fidelity = models::Fidelity::Phase;
  CHECK_FALSE(models::build_ring_stream(spec, t, routing, calib).has_value());
  spec.fidelity = models::Fidelity::Step;
  spec.algorithm = models::Algorithm::Tree;
  CHECK_FALSE(models::build_ring_stream(spec, t, routing, calib).has_value());
  spec.algorithm = models::Algorithm::Ring;
  spec.op = models::Op::Broadcast;  // ring broadcast is a pipelined chain, not a ring of steps
  CHECK_FALSE(models::build_ring_stream(spec, t, routing, calib).has_value());
}

namespace {
// The certified sandwich (sim::bound_ring_stream) against the event simulation (sim::run_ring_stream, which
// the tests above tie to the materialised schedule): the bounds bracket the simulated makespan (up to the
// engine's batching floor, 1e-10 relative per event), and when they close they give it to 1e-9.
sim::RingBounds check_bounds(const models::System& sys, const models::CollectiveSpec& spec,
                             const models::Calibration& calib) {
  const topo::Topology& t = sys.topology();
  topo::Routing& routing = sys.routing();
  const auto rs = models::build_ring_stream(spec, t, routing, calib);
  REQUIRE(rs.has_value());
  const sim::RingBounds b = sim::bound_ring_stream(*rs, t, routing, calib);
  const double sim_s = sim::run_ring_stream(*rs, t, routing, calib).makespan_s;
  CHECK(b.lower_s <= sim_s * (1 + 1e-9));
  CHECK(sim_s <= b.upper_s * (1 + 1e-9));
  CHECK(b.cells <= 2 * rs->transfers());
  sim::RingStreamOptions opt;
  opt.certify = true;
  const auto c = sim::run_ring_stream(*rs, t, routing, calib, opt);
  CHECK(c.certified == b.certified);
  CHECK(c.lower_s == b.lower_s);
  CHECK(c.upper_s == b.upper_s);
  if (b.certified) {
    CHECK(b.reason.empty());
    CHECK(c.events == 0);
    CHECK(c.makespan_s == doctest::Approx(sim_s).epsilon(1e-9));
  } else {
    CHECK(!b.reason.empty());
    CHECK(c.certify_reason == b.reason);
    CHECK(c.events > 0);  // fell back to the event simulation
    CHECK(c.makespan_s == sim_s);
  }
  return b;
}

// The first GPU's NVLink link (GPU to NVSwitch).
topo::LinkId first_gpu_nvlink(const topo::Topology& t) {
  for (topo::LinkId i = 0; i < t.num_links(); ++i) {
    const topo::Link& k = t.link(i);
    if (k.kind == topo::LinkKind::NVLink &&
        (t.node(k.a).kind == topo::NodeKind::Gpu || t.node(k.b).kind == topo::NodeKind::Gpu))
      return i;
  }
  FAIL("no NVLink link");
  return 0;
}
}  // namespace

TEST_CASE("ring bounds: the certified sandwich brackets the event simulation and closes on these rings") {
  for (int nodes : {2, 8, 16}) {  // 16, 64, 128 GPUs
    CAPTURE(nodes);
    const models::System base = superpod(nodes);
    const models::System slowed = degraded(base);
    for (const models::System* sys : {&base, &slowed}) {
      const topo::Topology& t = sys->topology();
      const auto b = check_bounds(*sys, ring_spec(t, models::Op::AllReduce, std::uint64_t{1} << 30), sys->calibration());
      // One NIC link at 50 % or none: the bounds meet (the ring's pace is set by its network hops, whose
      // lower and upper rate bounds agree; see docs/engine.md).
      CHECK(b.certified);
      CHECK(b.upper_s - b.lower_s <= 1e-12 * b.upper_s);
    }
  }
  const models::System slowed = degraded(superpod(8));
  const topo::Topology& t = slowed.topology();
  CHECK(check_bounds(slowed, ring_spec(t, models::Op::AllGather, std::uint64_t{64} << 20), slowed.calibration()).certified);
  CHECK(check_bounds(slowed, ring_spec(t, models::Op::ReduceScatter, std::uint64_t{64} << 20), slowed.calibration()).certified);
}

TEST_CASE("ring stream and bounds on a non-rail fat tree (host-based leaves), 1:1 and 2:1") {
  // radix 32: 2 DGX H100 per leaf (16 down; at 2:1 16 down / 8 up), 4 leaves: ring hops between leaves
  // cross the spines, which the oversubscribed tree has half as many of.
  for (const char* over : {"1", "2"}) {
    CAPTURE(std::string(over));
    const models::System sys(models::system_spec(
        "superpod", {{"nodes", "8"}, {"radix", "32"}, {"rail_optimized", "false"}, {"oversubscription", over}}, "default"));
    const topo::Topology& t = sys.topology();
    check_stream(sys, ring_spec(t, models::Op::AllReduce, std::uint64_t{64} << 20));
    check_stream(sys, ring_spec(t, models::Op::AllGather, std::uint64_t{64} << 20));
    check_bounds(sys, ring_spec(t, models::Op::AllReduce, std::uint64_t{1} << 30), sys.calibration());
  }
}

TEST_CASE("ring bounds: 512 GPUs uniform, 256 GPUs with a degraded link") {
  const models::System big = superpod(64);  // period skipping makes its event run short
  CHECK(check_bounds(big, ring_spec(big.topology(), models::Op::AllReduce, std::uint64_t{1} << 30), big.calibration())
            .certified);
  // No repetition, every step simulated: an all_gather, half the steps of an all_reduce.
  const models::System slowed = degraded(superpod(32));
  CHECK(check_bounds(slowed, ring_spec(slowed.topology(), models::Op::AllGather, std::uint64_t{1} << 30),
                     slowed.calibration())
            .certified);
}

TEST_CASE("ring bounds: protocols Simple, LL, LL128 at 1 MiB and 1 GiB (rate caps, latency-bound steps)") {
  const models::System one = superpod(1);
  const models::System slowed = degraded(superpod(8));
  for (const models::System* sys : {&one, &slowed})
    for (auto pr : {models::Protocol::Simple, models::Protocol::LL, models::Protocol::LL128})
      for (std::uint64_t bytes : {std::uint64_t{1} << 20, std::uint64_t{1} << 30}) {
        CAPTURE(sys->topology().gpus().size());
        CAPTURE(static_cast<int>(pr));
        CAPTURE(bytes);
        auto spec = ring_spec(sys->topology(), models::Op::AllReduce, bytes);
        spec.protocol = pr;
        CHECK(check_bounds(*sys, spec, sys->calibration()).certified);
      }
}

TEST_CASE("ring bounds: a DGX A100 superpod, uniform and with a degraded link") {
  const models::System base(models::system_spec("superpod", {{"nodes", "4"}, {"node", "dgx-a100"}}, "default"));
  const models::System slowed = degraded(base);
  for (const models::System* sys : {&base, &slowed})
    CHECK(check_bounds(*sys, ring_spec(sys->topology(), models::Op::AllReduce, std::uint64_t{1} << 28), sys->calibration())
              .certified);
}

TEST_CASE("ring bounds: random slowed links, depths and sizes: the bounds always bracket the events") {
  // Soundness, whether or not the bounds close: any link (NVLink, PCIe, NIC, fabric) at 5-100 %, ring_credit_steps 1-8.
  const models::System base = superpod(2);
  const topo::Topology& t0 = base.topology();
  std::mt19937_64 rng(28);
  int closed = 0;
  for (int trial = 0; trial < 48; ++trial) {
    CAPTURE(trial);
    const auto link = static_cast<topo::LinkId>(rng() % t0.num_links());
    const double factor = 0.05 + 0.95 * std::uniform_real_distribution<double>(0, 1)(rng);
    const models::System sys(bench::with_link_scaled(t0, link, factor), base.calibration(), base.calibration_ref());
    auto calib = sys.calibration();
    calib.factors.ring_credit_steps = static_cast<double>(1 + rng() % 8);
    const std::uint64_t bytes = std::uint64_t{1} << (16 + rng() % 14);  // 64 KiB - 512 MiB
    const auto op = trial % 3 == 0 ? models::Op::AllGather : models::Op::AllReduce;
    closed += check_bounds(sys, ring_spec(sys.topology(), op, bytes), calib).certified;
  }
  MESSAGE(closed << " of 48 random cases certified");
}

TEST_CASE("ring bounds: when the bounds stay apart (a slow NVLink) the runner simulates the events") {
  const models::System base = superpod(4);
  // A GPU's NVLink at 10 %: the eight channels' hops out of that GPU share it, and the bound on their
  // share (capacity / 8) is far below the share they get while some of them are in their latency phase.
  const models::System nvl(bench::with_link_scaled(base.topology(), first_gpu_nvlink(base.topology()), 0.1),
                           base.calibration(), base.calibration_ref());
  const auto b = check_bounds(nvl, ring_spec(nvl.topology(), models::Op::AllReduce, std::uint64_t{64} << 20),
                              nvl.calibration());
  CHECK_FALSE(b.certified);
  CAPTURE(b.reason);
  CHECK(b.reason.find("nvlink link n0.gpu0") != std::string::npos);
}

#ifdef FABRICSIM_HAVE_SIMGRID
TEST_CASE("cross-check against SimGrid: step-level ring all_reduce with one network link at 50 %") {
  const models::System slowed = degraded(superpod(2));  // 16 GPUs, 3840 step-level transfers
  const topo::Topology& t = slowed.topology();
  topo::Routing& routing = slowed.routing();
  const models::Calibration& calib = slowed.calibration();
  models::Schedule s = models::build_schedule(ring_spec(t, models::Op::AllReduce, std::uint64_t{64} << 20), t, routing, calib);
  for (auto& tr : s.transfers) tr.bytes = std::round(tr.bytes);  // SimGrid comm sizes are whole bytes
  sim::RunOptions oracle;
  oracle.engine = "simgrid";
  const auto a = sim::run_schedule(s, t, routing, calib);
  const auto b = sim::run_schedule(s, t, routing, calib, oracle);
  REQUIRE(a.transfers.size() == b.transfers.size());
  CHECK(a.makespan_s == doctest::Approx(b.makespan_s).epsilon(1e-3));
  // The certified sandwich (no events simulated) on the same case: closed, and SimGrid's answer to 1e-3.
  const auto rs = models::build_ring_stream(ring_spec(t, models::Op::AllReduce, std::uint64_t{64} << 20), t, routing, calib);
  REQUIRE(rs.has_value());
  const sim::RingBounds cb = sim::bound_ring_stream(*rs, t, routing, calib);
  CHECK(cb.certified);
  CHECK(0.5 * (cb.lower_s + cb.upper_s) == doctest::Approx(b.makespan_s).epsilon(1e-3));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < a.transfers.size(); ++i)
    if (std::abs(a.transfers[i].finish_s - b.transfers[i].finish_s) > 1e-3 * b.transfers[i].finish_s) ++bad;
  CHECK(bad == 0);
}
#endif

TEST_CASE("ring LL across EFA: the fabric's latency in flight, NCCL_STEPS deep; InfiniBand's steps unchanged") {
  // 2 x 8 H100 over EFA (topologies/fabrics.cpp: 10 us per NIC link, 20 us per network hop, above NCCL's
  // 2.7 us Ring LL network step latency) and the same over InfiniBand NDR (1.6 us per network hop, below it).
  auto pod = [](const std::string& fabric) {
    return models::System(models::system_spec(
        "superpod", {{"nodes", "2"}, {"node", "dgx-h100"}, {"fabric", fabric}, {"nics_per_node", "8"}, {"nic_bandwidth", "400Gbps"}},
        "default"));
  };
  auto ll = [](const topo::Topology& t, std::uint64_t bytes) {
    models::CollectiveSpec spec = ring_spec(t, models::Op::AllReduce, bytes);
    spec.protocol = models::Protocol::LL;
    return spec;
  };
  const models::System efa = pod("efa");
  const topo::Topology& t = efa.topology();
  topo::Routing& routing = efa.routing();
  const models::Calibration& calib = efa.calibration();
  const auto spec = ll(t, 256 << 10);
  const auto rs = models::build_ring_stream(spec, t, routing, calib);
  REQUIRE(rs.has_value());
  CHECK(rs->depth == 8);  // NCCL_STEPS, whatever ring_credit_steps (1 here) says
  // Only the network hops hold their step latency alone; the chain of data dependencies pays every hop's whole
  // latency: over 2(n-1) = 30 steps on a ring of m = 16 hops with 2 network hops, at least the mean hop
  // latency per step (the data goes round the ring once per m steps).
  std::size_t deferred = 0;
  double mean_lat = 0, net_lat = 0;
  const auto& hops = rs->rings.front().hops;
  for (const auto& h : hops) {
    std::vector<topo::LinkDir> route;
    routing.compute_route(h.src, h.dst, route);
    const double rl = models::route_latency_s(t, calib, route);
    models::Transfer whole = h;
    whole.latency_deferred = false;
    const double lat = models::transfer_latency_s(whole, rl);
    mean_lat += lat / hops.size();
    if (h.latency_deferred) {
      ++deferred;
      net_lat = lat;
      const models::RingStepLatency split = models::ring_step_latency(h, rl);
      CHECK(split.pre_s == doctest::Approx(h.step_latency_s));  // held: NCCL's per-step network latency
      CHECK(split.pre_s + split.post_s == doctest::Approx(lat));
    }
  }
  CHECK(deferred == 2);
  CHECK(net_lat > 20e-6);
  const double chain = rs->fixed_latency_s + rs->nsteps * mean_lat;
  const double serial = rs->fixed_latency_s + rs->nsteps * net_lat;  // every step waiting out EFA's latency
  // The same spec materialised (send + in-flight delay per step), streamed, bounded, and on SimGrid.
  const models::Schedule s = models::build_schedule(spec, t, routing, calib);
  CHECK(s.transfers.size() == 2 * rs->transfers());
  const double full = sim::run_schedule(s, t, routing, calib).makespan_s;
  const double streamed = sim::run_ring_stream(*rs, t, routing, calib).makespan_s;
  CHECK(streamed == doctest::Approx(full).epsilon(1e-9));
  const sim::RingBounds b = sim::bound_ring_stream(*rs, t, routing, calib);
  CHECK(b.lower_s <= streamed * (1 + 1e-9));
  CHECK(b.upper_s >= streamed * (1 - 1e-9));
  MESSAGE("EFA 256 KiB Ring LL: " << streamed * 1e6 << " us; data-chain floor " << chain * 1e6 << " us, every step "
                                  << "at EFA's latency " << serial * 1e6 << " us (the AWS p5 log measures 104.7 us)");
  CHECK(streamed >= chain);
  CHECK(streamed < 0.3 * serial);
#ifdef FABRICSIM_HAVE_SIMGRID
  models::Schedule whole_bytes = s;
  for (auto& tr : whole_bytes.transfers) tr.bytes = std::round(tr.bytes);  // SimGrid comm sizes are whole bytes
  sim::RunOptions oracle;
  oracle.engine = "simgrid";
  CHECK(sim::run_schedule(whole_bytes, t, routing, calib, oracle).makespan_s == doctest::Approx(full).epsilon(1e-3));
#endif
  // InfiniBand: NCCL's step latency covers the fabric's; no hop is deferred and the depth is the calibration's.
  const models::System ib = pod("infiniband-ndr");
  const auto rs_ib = models::build_ring_stream(ll(ib.topology(), 256 << 10), ib.topology(), ib.routing(), ib.calibration());
  REQUIRE(rs_ib.has_value());
  CHECK(rs_ib->depth == 1);
  for (const auto& h : rs_ib->rings.front().hops) CHECK_FALSE(h.latency_deferred);
}
