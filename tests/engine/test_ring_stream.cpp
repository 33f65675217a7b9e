// The streamed step-level ring (models::build_ring_stream + sim::run_ring_stream) against the materialised
// step-level schedule on sim::run_schedule: same makespan, with and without period skipping, on uniform
// superpods and with one degraded network link; and the degraded ring on our engine against SimGrid.
#include <doctest/doctest.h>

#include <cmath>

#include "bench/bench_util.hpp"
#include "models/collectives.hpp"
#include "models/ring_stream.hpp"
#include "sim/engine/ring_stream.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

using namespace fabricsim;

namespace {
topo::Topology superpod(int nodes) {
  return models::merge_nvswitch_planes(topo::build_preset("superpod", {{"nodes", std::to_string(nodes)}}));
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
sim::RingStreamResult check_stream(const topo::Topology& t, const models::CollectiveSpec& spec) {
  topo::Routing routing(t);
  const auto calib = models::default_calibration();
  const models::Schedule s = models::build_schedule(spec, t, routing, calib);
  const auto rs = models::build_ring_stream(spec, t, routing, calib);
  REQUIRE(rs.has_value());
  CHECK(rs->transfers() == s.transfers.size());
  const double full = sim::run_schedule(s, t, routing, calib).makespan_s;
  sim::RingStreamOptions plain;
  plain.skip_periods = false;
  const auto a = sim::run_ring_stream(*rs, t, routing, calib, plain);
  const auto b = sim::run_ring_stream(*rs, t, routing, calib);
  CHECK(a.skipped_steps == 0);
  CHECK(a.simulated == s.transfers.size());
  CHECK(b.simulated + b.skipped_steps * (rs->transfers() / rs->nsteps) == s.transfers.size());
  // The same engine, the same transfers: equal up to floating-point rounding (observed: equal to all 9
  // printed digits, bench_collectives); skipping adds (skipped periods) x period to the clock.
  CHECK(a.makespan_s == doctest::Approx(full).epsilon(1e-12));
  CHECK(b.makespan_s == doctest::Approx(full).epsilon(1e-9));
  return b;
}
}  // namespace

TEST_CASE("ring stream: all_reduce, all_gather, reduce_scatter as the materialised step-level ring") {
  const topo::Topology t = superpod(8);  // 64 GPUs
  const auto r = check_stream(t, ring_spec(t, models::Op::AllReduce, std::uint64_t{64} << 20));
  // 126 steps: the state repeats early and most steps are skipped.
  CHECK(r.skipped_steps > 60);
  CHECK(r.period_s > 0);
  check_stream(t, ring_spec(t, models::Op::AllGather, std::uint64_t{64} << 20));
  check_stream(t, ring_spec(t, models::Op::ReduceScatter, std::uint64_t{64} << 20));
}

TEST_CASE("ring stream: ring_outstanding_steps > 1 and a single host") {
  const topo::Topology t = superpod(4);
  topo::Routing routing(t);
  auto calib = models::default_calibration();
  calib.extra["ring_outstanding_steps"] = 3;
  const auto spec = ring_spec(t, models::Op::AllReduce, std::uint64_t{16} << 20);
  const models::Schedule s = models::build_schedule(spec, t, routing, calib);
  const auto rs = models::build_ring_stream(spec, t, routing, calib);
  REQUIRE(rs.has_value());
  CHECK(rs->window == 3);
  CHECK(sim::run_ring_stream(*rs, t, routing, calib).makespan_s ==
        doctest::Approx(sim::run_schedule(s, t, routing, calib).makespan_s).epsilon(1e-9));
  const topo::Topology one = superpod(1);
  check_stream(one, ring_spec(one, models::Op::AllReduce, std::uint64_t{8} << 20));
}

TEST_CASE("ring stream: one network link at 50 % (no repetition: every step simulated)") {
  const topo::Topology base = superpod(2);
  const topo::Topology t = bench::with_link_scaled(base, bench::first_nic_uplink(base), 0.5);
  const auto r = check_stream(t, ring_spec(t, models::Op::AllReduce, std::uint64_t{64} << 20));
  // The slowed channel's ring and the others run at incommensurate paces.
  CHECK(r.skipped_steps == 0);
  // The degraded link makes the collective slower.
  topo::Routing rb(base), rt(t);
  const auto calib = models::default_calibration();
  const auto spec_b = ring_spec(base, models::Op::AllReduce, std::uint64_t{64} << 20);
  const auto spec_t = ring_spec(t, models::Op::AllReduce, std::uint64_t{64} << 20);
  CHECK(sim::run_ring_stream(*models::build_ring_stream(spec_t, t, rt, calib), t, rt, calib).makespan_s >
        1.2 * sim::run_ring_stream(*models::build_ring_stream(spec_b, base, rb, calib), base, rb, calib).makespan_s);
}

TEST_CASE("ring stream: only plain step-level rings have a compact form") {
  const topo::Topology t = superpod(2);
  topo::Routing routing(t);
  const auto calib = models::default_calibration();
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

#ifdef FABRICSIM_HAVE_SIMGRID
TEST_CASE("cross-check against SimGrid: step-level ring all_reduce with one network link at 50 %") {
  const topo::Topology base = superpod(2);  // 16 GPUs, 3840 step-level transfers
  const topo::Topology t = bench::with_link_scaled(base, bench::first_nic_uplink(base), 0.5);
  topo::Routing routing(t);
  const auto calib = models::default_calibration();
  models::Schedule s = models::build_schedule(ring_spec(t, models::Op::AllReduce, std::uint64_t{64} << 20), t, routing, calib);
  for (auto& tr : s.transfers) tr.bytes = std::round(tr.bytes);  // SimGrid comm sizes are whole bytes
  sim::RunOptions oracle;
  oracle.engine = "simgrid";
  const auto a = sim::run_schedule(s, t, routing, calib);
  const auto b = sim::run_schedule(s, t, routing, calib, oracle);
  REQUIRE(a.transfers.size() == b.transfers.size());
  CHECK(a.makespan_s == doctest::Approx(b.makespan_s).epsilon(1e-3));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < a.transfers.size(); ++i)
    if (std::abs(a.transfers[i].finish_s - b.transfers[i].finish_s) > 1e-3 * b.transfers[i].finish_s) ++bad;
  CHECK(bad == 0);
}
#endif
