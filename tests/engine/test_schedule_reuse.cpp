// A schedule object started again on the same Network reuses what the first start checked and built (its
// dependency index: pending counts, successor lists, per-transfer latency phases; network.hpp) and a finished
// run's storage. Every start of a fresh copy builds its own: both must give the same times and link figures.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "engine_test_util.hpp"
#include "mixed_schedules.hpp"
#include "sim/base/error.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/network.hpp"

using namespace fabricsim;

namespace {
struct Out {
  std::vector<sim::ScheduleRun> runs;
  std::vector<sim::LinkDirStats> links;
  std::size_t mirror_runs = 0;
};

// Starts: a ring all_reduce (dependencies) three times, two overlapping; the 8 co-located rings of
// test::mirrored as a mirror quotient twice; a skewed all_to_allv (bundle plan) twice; a single message five
// times. `copy`: every start gets a fresh copy of its schedule (nothing reused).
Out run_mix(const test::MixedSchedules& mix, const std::shared_ptr<const models::Schedule>& mirrored, bool copy,
            bool times) {
  const models::System& sys = mix.sys;
  const topo::Topology& t = sys.topology();
  sim::EventQueue q;
  sim::NetworkOptions opt;
  opt.bundle_flows = true;
  opt.transfer_times = times;
  sim::Network net(q, t, sys.routing(false), sys.calibration(), opt);
  net.set_alternate_routing(sys.routing(true));
  auto msg = std::make_shared<models::Schedule>();
  msg->transfers = {test::xfer(t.gpus()[0], t.gpus()[9], 4u << 20)};
  const std::shared_ptr<const models::Schedule> message = msg;
  Out o;
  o.runs.resize(12);
  auto start = [&](int k, const std::shared_ptr<const models::Schedule>& s, bool alt, std::uint32_t groups) {
    auto sp = copy ? std::make_shared<const models::Schedule>(*s) : s;
    net.start_schedule(sp, sp->fixed_latency_s, [&o, k](sim::ScheduleRun& r) { o.runs[k] = std::move(r); }, alt,
                       groups);
  };
  start(0, mix.ring, false, 1);
  start(1, mirrored, false, 8);
  start(2, message, false, 1);
  q.schedule(1e-4, [&] { start(3, mix.ring, false, 1); });
  q.schedule(2e-4, [&] { start(4, message, false, 1); });
  q.schedule(3e-4, [&] { start(5, mix.skewed, true, 1); });
  q.schedule(6e-3, [&] { start(6, mix.ring, false, 1); });
  q.schedule(6e-3, [&] { start(7, mirrored, false, 8); });
  q.schedule(6.5e-3, [&] { start(8, mix.skewed, true, 1); });
  for (int k = 9; k < 12; ++k) q.schedule(1e-2 + k * 1e-4, [&, k] { start(k, message, false, 1); });
  q.run();
  o.links = net.link_stats();
  o.mirror_runs = net.mirror_quotient_runs();
  return o;
}

// The 8 co-located rings (all_gather 16 MiB) of test::mirrored on the mixed traffic's system.
std::shared_ptr<const models::Schedule> mirrored_rings(const test::MixedSchedules& mix) {
  return test::mirrored(mix.sys.topology(), mix.sys.routing(false), mix.sys.calibration(), models::Op::AllGather,
                        models::Algorithm::Ring, models::Fidelity::Step, std::uint64_t{16} << 20, 8);
}
}  // namespace

TEST_CASE("Network: a schedule started again reuses its checked dependencies and latencies (same as fresh copies)") {
  const test::MixedSchedules mix;
  const std::shared_ptr<const models::Schedule> mirrored = mirrored_rings(mix);
  for (bool times : {true, false}) {
    CAPTURE(times);
    const Out reused = run_mix(mix, mirrored, false, times), fresh = run_mix(mix, mirrored, true, times);
    CHECK(reused.mirror_runs > 0);  // the mirror quotient path is exercised
    CHECK(reused.mirror_runs == fresh.mirror_runs);
    for (std::size_t k = 0; k < reused.runs.size(); ++k) {
      CAPTURE(k);
      CHECK(reused.runs[k].finish_s > reused.runs[k].start_s);
      CHECK(reused.runs[k].start_s == fresh.runs[k].start_s);
      CHECK(reused.runs[k].finish_s == fresh.runs[k].finish_s);
      REQUIRE(reused.runs[k].transfers.size() == fresh.runs[k].transfers.size());
      CHECK(reused.runs[k].transfers.empty() == !times);
      CHECK(test::differing_transfers(reused.runs[k], fresh.runs[k]) == 0);
    }
    // the overlapping ring starts contend: the second ends later than the first alone would
    CHECK(reused.runs[3].finish_s - reused.runs[3].start_s > reused.runs[6].finish_s - reused.runs[6].start_s);
    REQUIRE(reused.links.size() == fresh.links.size());
    CHECK(test::differing_links(reused.links, fresh.links) == 0);
  }
}

TEST_CASE("Network: a malformed schedule is refused at every start, not only the first") {
  const auto t = test::star(3, 25e9, 1e-6);
  models::Calibration c;
  c.of(topo::LinkKind::InfiniBand) = models::LinkKindParams{0.5e-6, 0.8};
  topo::Routing r(t);
  sim::EventQueue q;
  sim::Network net(q, t, r, c);
  auto cyc = std::make_shared<models::Schedule>();
  cyc->transfers = {test::xfer(0, 1, 100, {1}), test::xfer(1, 2, 100, {0})};
  CHECK_THROWS_AS(net.start_schedule(cyc, nullptr), InputError);
  CHECK_THROWS_AS(net.start_schedule(cyc, nullptr), InputError);
  auto ok = std::make_shared<models::Schedule>();
  ok->transfers = {test::xfer(0, 1, 100), test::xfer(1, 2, 100, {0})};
  double f1 = -1, f2 = -1;
  net.start_schedule(ok, [&](sim::ScheduleRun& run) { f1 = run.finish_s; });
  q.run();
  net.start_schedule(ok, [&](sim::ScheduleRun& run) { f2 = run.finish_s - run.start_s; });
  q.run();
  CHECK(f1 > 0);
  CHECK(f2 == doctest::Approx(f1).epsilon(1e-12));
}

TEST_CASE("Network: delayed roots walked from one heap entry give the same events as one entry per root") {
  // The mixed traffic above (ring, mirror quotient, bundles, messages: all started with their fixed latency as
  // root delay), with batch_root_delays on and off.
  const test::MixedSchedules mix;
  const topo::Topology& t = mix.sys.topology();
  const std::shared_ptr<const models::Schedule> mirrored = mirrored_rings(mix);
  // every start below delays its roots (else both settings would run the same code and the test could not fail)
  for (const auto& s : {mix.ring, mirrored, mix.skewed, mix.uniform}) REQUIRE(s->fixed_latency_s > 0);
  auto run = [&](bool batch) {
    sim::EventQueue q;
    sim::NetworkOptions opt;
    opt.bundle_flows = true;
    opt.batch_root_delays = batch;
    sim::Network net(q, t, mix.sys.routing(false), mix.sys.calibration(), opt);
    net.set_alternate_routing(mix.sys.routing(true));
    std::vector<sim::ScheduleRun> runs(5);
    auto start = [&](int k, const std::shared_ptr<const models::Schedule>& s, bool alt, std::uint32_t groups) {
      net.start_schedule(s, s->fixed_latency_s, [&runs, k](sim::ScheduleRun& r) { runs[k] = std::move(r); }, alt,
                         groups);
    };
    start(0, mix.ring, false, 1);
    start(1, mirrored, false, 8);
    start(2, mix.skewed, true, 1);
    q.schedule(1e-4, [&] { start(3, mix.ring, false, 1); });
    q.schedule(1e-4, [&] { start(4, mix.uniform, true, 1); });
    q.run();
    return std::make_pair(runs, net.link_stats());
  };
  const auto a = run(true), b = run(false);
  for (std::size_t k = 0; k < a.first.size(); ++k) {
    CAPTURE(k);
    CHECK(a.first[k].finish_s > a.first[k].start_s);
    CHECK(a.first[k].finish_s == b.first[k].finish_s);
    REQUIRE(a.first[k].transfers.size() == b.first[k].transfers.size());
    CHECK(test::differing_transfers(a.first[k], b.first[k]) == 0);
  }
  REQUIRE(a.second.size() == b.second.size());
  CHECK(test::differing_links(a.second, b.second) == 0);
}

TEST_CASE("Network: the walk over delayed roots yields to a latency phase that ends at the same time") {
  // At t = 1e4 s a route latency of 2e-13 s is below half an ulp: each root's latency phase ends when it starts,
  // at the roots' own time, and its entry comes before the next root's (a latency entry sorts before a ready one).
  const auto t = test::star(4, 25e9, 1e-13);
  models::Calibration c;
  c.of(topo::LinkKind::InfiniBand) = models::LinkKindParams{0, 0.8};
  topo::Routing routing(t);
  auto s = std::make_shared<models::Schedule>();
  s->transfers = {test::xfer(0, 1, 1e6), test::xfer(1, 2, 1e6), test::xfer(2, 3, 1e6), test::xfer(3, 0, 1e6),
                  test::xfer(0, 2, 1e6, {0, 1})};
  auto run = [&](bool batch) {
    sim::EventQueue q;
    sim::NetworkOptions opt;
    opt.batch_root_delays = batch;
    sim::Network net(q, t, routing, c, opt);
    sim::ScheduleRun out;
    q.schedule(1e4, [&] { net.start_schedule(s, 1e-3, [&](sim::ScheduleRun& r) { out = std::move(r); }); });
    q.run();
    return out;
  };
  const sim::ScheduleRun a = run(true), b = run(false);
  REQUIRE(a.transfers.size() == 5);
  CHECK(a.transfers[0].start_s == 1e4 + 1e-3);
  CHECK(a.finish_s > a.transfers[0].start_s);
  CHECK(a.finish_s == b.finish_s);
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(a.transfers[i].start_s == b.transfers[i].start_s);
    CHECK(a.transfers[i].finish_s == b.transfers[i].finish_s);
  }
}

TEST_CASE("Network: what it keeps for a schedule nobody else holds is dropped when the schedule's run ends") {
  // start_transfer makes a fresh one-transfer schedule per call; a caller may likewise start fresh copies. Such a
  // schedule can never be started again, so its dependency index or bundle plan must not outlive its run (the
  // 2^24-transfer cap alone would keep millions of them, hundreds of bytes each). Schedules the caller holds stay.
  const auto t = test::star(20, 25e9, 1e-6);
  models::Calibration c;
  c.of(topo::LinkKind::InfiniBand) = models::LinkKindParams{0.5e-6, 0.8};
  topo::Routing r(t);
  sim::EventQueue q;
  sim::NetworkOptions opt;
  opt.bundle_flows = true;
  sim::Network net(q, t, r, c, opt);
  auto a2a = std::make_shared<models::Schedule>();  // 20 x 19 transfers without dependencies: a bundle plan
  for (topo::NodeId s = 0; s < 20; ++s)
    for (topo::NodeId d = 0; d < 20; ++d)
      if (s != d) a2a->transfers.push_back(test::xfer(s, d, 1e5));
  auto chain = std::make_shared<models::Schedule>();
  chain->transfers = {test::xfer(0, 1, 1e5), test::xfer(1, 2, 1e5, {0})};
  std::size_t done = 0;
  auto count = [&done](sim::ScheduleRun&) { ++done; };
  for (int k = 0; k < 50; ++k)
    q.schedule(k * 1e-3, [&] {
      net.start_transfer(test::xfer(0, 1, 1e5), count);
      net.start_schedule(std::make_shared<const models::Schedule>(*chain), count);
      net.start_schedule(std::make_shared<const models::Schedule>(*a2a), count);
    });
  q.run();
  CHECK(done == 150);
  CHECK(net.dependency_indexes_cached() == 0);
  CHECK(net.bundle_plans_cached() == 0);
  // held by the caller: kept, and reused by the next start
  const std::shared_ptr<const models::Schedule> held_chain = chain, held_a2a = a2a;
  for (int k = 0; k < 2; ++k) {
    net.start_schedule(held_chain, count);
    net.start_schedule(held_a2a, count);
    q.run();
    CHECK(net.dependency_indexes_cached() == 1);
    CHECK(net.bundle_plans_cached() == 1);
  }
  CHECK(done == 154);
}
