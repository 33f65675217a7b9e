// Lockstep waves (models::Transfer::lockstep, docs/engine.md "Lockstep waves"): sim::Network runs the
// link-disjoint transfers of one bulk-synchronous step as one flow. Checked against the per-transfer run.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "engine_test_util.hpp"
#include "models/collectives.hpp"
#include "models/system.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/network.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "topologies/routing.hpp"

using namespace fabricsim;
using fabricsim::test::star;
using fabricsim::test::xfer;

namespace {

struct Ran {
  sim::ScheduleRun run;
  std::size_t solver_flow_visits = 0;
};

Ran run_on_network(std::shared_ptr<const models::Schedule> s, const topo::Topology& t, topo::Routing& routing,
                   const models::Calibration& calib) {
  sim::EventQueue q;
  sim::Network net(q, t, routing, calib);
  Ran out;
  net.start_schedule(s, [&](sim::ScheduleRun& r) { out.run = std::move(r); });
  q.run();
  out.solver_flow_visits = net.model().solved_flow_visits();
  return out;
}

// The data-parallel PAT call of a cluster replay: the 8 co-located groups (one GPU per host each, GPU k of every
// host in group k) in one schedule, as replay/engine_comm_model.cpp merges a communicator's mirrors.
std::shared_ptr<models::Schedule> pat_mirrors(const models::System& sys, models::Op op, models::Fidelity f,
                                              std::uint64_t bytes) {
  return test::mirrored(sys.topology(), sys.routing(), sys.calibration(), op, models::Algorithm::Pat, f, bytes, 8);
}

}  // namespace

TEST_CASE("lockstep waves: PAT at phase fidelity gives the step-level times on a fat tree, one flow per wave") {
  // 48 DGX H100 (384 GPUs) on the 2-tier rail-optimised fat tree: 8 PAT groups of 48 ranks, 6 steps each.
  const models::System sys(models::system_spec("superpod", {{"nodes", "48"}}, "default"));
  for (models::Op op : {models::Op::ReduceScatter, models::Op::AllGather}) {
    const std::uint64_t bytes = std::uint64_t{48} << 21;  // 96 MiB: 2 MiB per rank block
    auto step = pat_mirrors(sys, op, models::Fidelity::Step, bytes);
    auto phase = pat_mirrors(sys, op, models::Fidelity::Phase, bytes);
    REQUIRE(step->transfers.size() == 8u * 48u * 6u);
    REQUIRE(phase->transfers.size() == step->transfers.size());
    CHECK(std::all_of(step->transfers.begin(), step->transfers.end(), [](const auto& x) { return x.lockstep < 0; }));
    CHECK(std::all_of(phase->transfers.begin(), phase->transfers.end(), [](const auto& x) { return x.lockstep >= 0; }));
    const Ran a = run_on_network(step, sys.topology(), sys.routing(), sys.calibration());
    const Ran b = run_on_network(phase, sys.topology(), sys.routing(), sys.calibration());
    REQUIRE(a.run.transfers.size() == b.run.transfers.size());
    double worst = 0;
    for (std::size_t i = 0; i < a.run.transfers.size(); ++i) {
      worst = std::max(worst, std::abs(b.run.transfers[i].finish_s - a.run.transfers[i].finish_s) /
                                  a.run.transfers[i].finish_s);
      worst = std::max(worst, std::abs(b.run.transfers[i].start_s - a.run.transfers[i].start_s) /
                                  std::max(1e-9, a.run.transfers[i].start_s));
    }
    INFO(models::to_string(op) << ": step " << a.run.finish_s << " s, phase " << b.run.finish_s << " s");
    CHECK(worst <= 1e-9);
    CHECK(std::abs(b.run.finish_s - a.run.finish_s) <= 1e-9 * a.run.finish_s);
    // 2,304 flows at step fidelity; one or two waves per step at phase fidelity.
    CHECK(b.solver_flow_visits * 20 < a.solver_flow_visits);
    // No cap on a wave's size: a step's 384 transfers (over 1,000 link directions) run as one or two waves, not
    // the waves that a cap of 256 link directions made of them (8 solver flow visits for the 6 steps; 65 with the cap).
    CHECK(b.solver_flow_visits <= 2u * 6u);
  }
}

TEST_CASE("lockstep waves: a wave starts when its last member is ready; members on a shared link stay apart") {
  const double bw = 25e9, lat = 1e-6, mib = 1048576;
  const auto t = star(8, bw, lat);
  models::Calibration c;
  c.of(topo::LinkKind::InfiniBand) = models::LinkKindParams{0, 1.0};
  topo::Routing routing(t);
  // X (0->1, 4 MiB) and Y (2->3, 1 MiB) run alone; A (4->5) waits for X, B (6->7) for Y, both 2 MiB in wave 1.
  auto s = std::make_shared<models::Schedule>();
  s->transfers = {xfer(0, 1, 4 * mib), xfer(2, 3, 1 * mib), xfer(4, 5, 2 * mib, {0}), xfer(6, 7, 2 * mib, {1})};
  s->transfers[2].lockstep = s->transfers[3].lockstep = 1;
  const Ran r = run_on_network(s, t, routing, c);
  const double x_end = 2 * lat + 4 * mib / bw, y_end = 2 * lat + 1 * mib / bw;
  CHECK(r.run.transfers[0].finish_s == doctest::Approx(x_end).epsilon(1e-12));
  CHECK(r.run.transfers[1].finish_s == doctest::Approx(y_end).epsilon(1e-12));
  CHECK(r.run.transfers[3].start_s == doctest::Approx(y_end).epsilon(1e-12));  // B is ready at Y's end ...
  const double wave_end = x_end + 2 * lat + 2 * mib / bw;                        // ... but moves with A
  CHECK(r.run.transfers[2].finish_s == doctest::Approx(wave_end).epsilon(1e-12));
  CHECK(r.run.transfers[3].finish_s == doctest::Approx(wave_end).epsilon(1e-12));
  {  // the same schedule started again on the same network reuses its wave plan: the same times, shifted
    sim::EventQueue q;
    sim::Network net(q, t, routing, c);
    sim::ScheduleRun second;
    net.start_schedule(s, [&](sim::ScheduleRun& first) {
      net.start_schedule(s, [&](sim::ScheduleRun& again) { second = std::move(again); });
    });
    q.run();
    REQUIRE(second.transfers.size() == 4u);
    CHECK(second.start_s == doctest::Approx(wave_end).epsilon(1e-12));
    for (std::size_t i = 0; i < 4; ++i)
      CHECK(second.transfers[i].finish_s - second.start_s ==
            doctest::Approx(r.run.transfers[i].finish_s).epsilon(1e-9));
  }

  // 0->2 and 1->2 share the switch's link into GPU 2: they are not merged (each gets half of it). 3->4 joins
  // the first of them and moves at its rate: the approximation where members would not run alike (alone it
  // would finish at 2 lat + 2 MiB / bw).
  auto u = std::make_shared<models::Schedule>();
  u->transfers = {xfer(0, 2, 2 * mib), xfer(1, 2, 2 * mib), xfer(3, 4, 2 * mib)};
  for (auto& x : u->transfers) x.lockstep = 0;
  const Ran v = run_on_network(u, t, routing, c);
  CHECK(v.run.transfers[0].finish_s == doctest::Approx(2 * lat + 4 * mib / bw).epsilon(1e-12));
  CHECK(v.run.transfers[1].finish_s == doctest::Approx(2 * lat + 4 * mib / bw).epsilon(1e-12));
  CHECK(v.run.transfers[2].finish_s == doctest::Approx(2 * lat + 4 * mib / bw).epsilon(1e-12));
}

TEST_CASE("network routes: pairs the Routing cached are read from it, the same run bit for bit") {
  // sim::Network::route_of takes a pair's route from Routing::cached_route when the Routing holds it (the replay's
  // comm models route every call for its link bytes first), else computes it: the same routes, the same run.
  const models::System sys(models::system_spec("superpod", {{"nodes", "16"}}, "default"));
  auto s = pat_mirrors(sys, models::Op::ReduceScatter, models::Fidelity::Phase, std::uint64_t{16} << 21);
  topo::Routing fresh(sys.topology()), warm(sys.topology());
  std::set<std::pair<topo::NodeId, topo::NodeId>> seen;
  for (const auto& x : s->transfers) {
    if (x.src == x.dst || !seen.insert({x.src, x.dst}).second) continue;
    CHECK(warm.cached_route(x.src, x.dst) == nullptr);  // not routed through route() yet
    const std::vector<topo::LinkDir> r = warm.route(x.src, x.dst);
    REQUIRE(warm.cached_route(x.src, x.dst) != nullptr);
    CHECK(*warm.cached_route(x.src, x.dst) == r);
  }
  const std::size_t cached = warm.cached_routes();
  CHECK(cached > 100);
  const Ran a = run_on_network(s, sys.topology(), fresh, sys.calibration());
  const Ran b = run_on_network(s, sys.topology(), warm, sys.calibration());
  CHECK(fresh.cached_routes() == 0);  // the Network computes without filling the Routing's cache
  CHECK(warm.cached_routes() == cached);
  REQUIRE(a.run.transfers.size() == b.run.transfers.size());
  for (std::size_t i = 0; i < a.run.transfers.size(); ++i) {
    CHECK(a.run.transfers[i].start_s == b.run.transfers[i].start_s);
    CHECK(a.run.transfers[i].finish_s == b.run.transfers[i].finish_s);
  }
  CHECK(a.solver_flow_visits == b.solver_flow_visits);
}
