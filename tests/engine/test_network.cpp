// The fabricsim engine on small topologies, against closed forms.
#include <doctest/doctest.h>

#include <memory>

#include "engine_test_util.hpp"
#include "sim/base/error.hpp"
#include "sim/engine/network.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "topologies/routing.hpp"

using namespace fabricsim;
using fabricsim::test::star;
using fabricsim::test::xfer;

namespace {
constexpr double kBw = 25e9;     // bytes/s per direction
constexpr double kLat = 1e-6;    // per link, seconds
constexpr double kMiB = 1048576;

models::Calibration calib_ib(double hop_lat_s = 0.5e-6, double eff = 0.8) {
  models::Calibration c;
  c.of(topo::LinkKind::InfiniBand) = models::LinkKindParams{hop_lat_s, eff};
  return c;
}

sim::ScheduleResult run(const models::Schedule& s, const topo::Topology& t, const models::Calibration& c,
                        sim::RunOptions o = {}) {
  topo::Routing r(t);
  return sim::run_schedule(s, t, r, c, o);
}
}  // namespace

TEST_CASE("single flow: route latency + bytes / effective bandwidth") {
  const auto t = star(3, kBw, kLat);
  const auto c = calib_ib();
  models::Schedule s;
  s.transfers.push_back(xfer(0, 1, 64 * kMiB));
  const auto res = run(s, t, c);
  // two hops: 2 * (link latency + per-hop calibration latency); bandwidth = 0.8 * 25 GB/s
  const double expect = 2 * (kLat + 0.5e-6) + 64 * kMiB / (0.8 * kBw);
  CHECK(res.transfers[0].start_s == 0);
  CHECK(res.transfers[0].finish_s == doctest::Approx(expect).epsilon(1e-12));
  CHECK(res.makespan_s == doctest::Approx(expect).epsilon(1e-12));
}

TEST_CASE("two flows into the same link direction share it; opposite directions do not") {
  const auto t = star(3, kBw, kLat);
  const auto c = calib_ib(0, 1.0);
  const double S = 32 * kMiB;
  models::Schedule same;
  same.transfers = {xfer(0, 2, S), xfer(1, 2, S)};  // both cross sw->g2
  const auto r1 = run(same, t, c);
  CHECK(r1.transfers[0].finish_s == doctest::Approx(2 * kLat + 2 * S / kBw).epsilon(1e-12));
  CHECK(r1.transfers[1].finish_s == doctest::Approx(2 * kLat + 2 * S / kBw).epsilon(1e-12));
  models::Schedule opposite;
  opposite.transfers = {xfer(0, 1, S), xfer(1, 0, S)};  // full duplex: each direction its own resource
  const auto r2 = run(opposite, t, c);
  CHECK(r2.transfers[0].finish_s == doctest::Approx(2 * kLat + S / kBw).epsilon(1e-12));
  CHECK(r2.transfers[1].finish_s == doctest::Approx(2 * kLat + S / kBw).epsilon(1e-12));
}

TEST_CASE("a short flow finishing frees bandwidth for the long one (piecewise rates)") {
  const auto t = star(3, kBw, 0);
  const auto c = calib_ib(0, 1.0);
  models::Schedule s;
  s.transfers = {xfer(0, 2, 10 * kMiB), xfer(1, 2, 30 * kMiB)};
  const auto r = run(s, t, c);
  // Both at B/2 until the short one is done at 20 MiB/B; the long one has 20 MiB left, alone at B.
  CHECK(r.transfers[0].finish_s == doctest::Approx(20 * kMiB / kBw).epsilon(1e-12));
  CHECK(r.transfers[1].finish_s == doctest::Approx(40 * kMiB / kBw).epsilon(1e-12));
}

TEST_CASE("weights, steps, step latency, rate cap and fixed latency") {
  const auto t = star(4, kBw, kLat);
  const auto c = calib_ib(0, 1.0);
  const double S = 8 * kMiB;
  SUBCASE("weight w takes w shares") {
    models::Schedule s;
    s.transfers = {xfer(0, 3, S), xfer(1, 3, S)};
    s.transfers[0].weight = 3;  // 3 of the 4 shares into g3
    const auto r = run(s, t, c);
    // all instances at B/4 until done: 4*S/B for both
    CHECK(r.transfers[0].finish_s == doctest::Approx(2 * kLat + 4 * S / kBw).epsilon(1e-12));
    CHECK(r.transfers[1].finish_s == doctest::Approx(2 * kLat + 4 * S / kBw).epsilon(1e-12));
  }
  SUBCASE("steps merge k steps: k*bytes and k step latencies") {
    models::Schedule s;
    s.transfers = {xfer(0, 1, S)};
    s.transfers[0].steps = 3;
    s.transfers[0].step_latency_s = 2e-6;
    s.fixed_latency_s = 5e-6;
    const auto r = run(s, t, c);
    const double fin = 2 * kLat + 3 * 2e-6 + 3 * S / kBw;
    CHECK(r.transfers[0].finish_s == doctest::Approx(fin).epsilon(1e-12));
    CHECK(r.makespan_s == doctest::Approx(5e-6 + fin).epsilon(1e-12));
  }
  SUBCASE("latency_includes_route: each step costs max(step latency, route latency), not the sum") {
    models::Schedule s;
    s.transfers = {xfer(0, 1, S), xfer(2, 3, S)};
    for (auto& x : s.transfers) {
      x.steps = 3;
      x.latency_includes_route = true;
    }
    s.transfers[0].step_latency_s = 2 * kLat + 1e-6;  // above the route's 2 * kLat
    s.transfers[1].step_latency_s = 0.5 * kLat;       // below it
    const auto r = run(s, t, c);
    CHECK(r.transfers[0].finish_s == doctest::Approx(3 * (2 * kLat + 1e-6) + 3 * S / kBw).epsilon(1e-12));
    CHECK(r.transfers[1].finish_s == doctest::Approx(3 * (2 * kLat) + 3 * S / kBw).epsilon(1e-12));
  }
  SUBCASE("a rate cap binds below the fair share") {
    models::Schedule s;
    s.transfers = {xfer(0, 3, S), xfer(1, 3, S)};
    s.transfers[0].rate_cap_Bps = kBw / 5;
    const auto r = run(s, t, c);
    // flow 1 gets 4B/5 until done at S/(0.8B); then flow 0 alone but capped at B/5: S/(B/5) total.
    CHECK(r.transfers[1].finish_s == doctest::Approx(2 * kLat + S / (0.8 * kBw)).epsilon(1e-12));
    CHECK(r.transfers[0].finish_s == doctest::Approx(2 * kLat + S / (0.2 * kBw)).epsilon(1e-12));
  }
  SUBCASE("src == dst and zero bytes pay only latency") {
    models::Schedule s;
    s.transfers = {xfer(0, 0, S), xfer(0, 1, 0)};
    s.transfers[0].step_latency_s = 3e-6;
    const auto r = run(s, t, c);
    CHECK(r.transfers[0].finish_s == doctest::Approx(3e-6).epsilon(1e-12));
    CHECK(r.transfers[1].finish_s == doctest::Approx(2 * kLat).epsilon(1e-12));
  }
}

TEST_CASE("DAG dependencies: a transfer starts when all its dependencies finished") {
  const auto t = star(4, kBw, kLat);
  const auto c = calib_ib(0, 1.0);
  const double S = 4 * kMiB;
  models::Schedule s;
  s.transfers = {xfer(0, 1, S), xfer(2, 3, 2 * S), xfer(1, 2, S, {0, 1}), xfer(3, 0, S, {2})};
  const auto r = run(s, t, c);
  const double one = 2 * kLat + S / kBw, two = 2 * kLat + 2 * S / kBw;
  CHECK(r.transfers[2].start_s == doctest::Approx(two).epsilon(1e-12));
  CHECK(r.transfers[2].finish_s == doctest::Approx(two + one).epsilon(1e-12));
  CHECK(r.transfers[3].start_s == doctest::Approx(two + one).epsilon(1e-12));
  CHECK(r.makespan_s == doctest::Approx(two + 2 * one).epsilon(1e-12));
}

TEST_CASE("ring all-reduce closed form on an idle star: 2(n-1)(alpha + S/(nB))") {
  // n GPUs on a star, one ring; each step every GPU sends S/n to the next; step k+1 of GPU i depends on
  // step k of GPU i-1 (the chunk it forwards). Disjoint link directions, so no contention.
  const int n = 8;
  const auto t = star(n, kBw, kLat);
  const auto c = calib_ib(0, 1.0);
  const double S = 64 * kMiB;
  models::Schedule s;
  for (int step = 0; step < 2 * (n - 1); ++step)
    for (int i = 0; i < n; ++i) {
      std::vector<std::uint32_t> deps;
      if (step > 0) deps.push_back(static_cast<std::uint32_t>((step - 1) * n + (i + n - 1) % n));
      s.transfers.push_back(xfer(i, (i + 1) % n, S / n, deps));
    }
  const auto r = run(s, t, c);
  CHECK(r.makespan_s == doctest::Approx(2 * (n - 1) * (2 * kLat + S / n / kBw)).epsilon(1e-12));
}

TEST_CASE("completion batching: error bounded by tolerance times the dependency depth") {
  const auto t = star(6, kBw, kLat);
  const auto c = calib_ib(0, 1.0);
  models::Schedule s;
  // chains of transfers with slightly different sizes sharing links
  for (int k = 0; k < 30; ++k) {
    std::vector<std::uint32_t> deps;
    if (k >= 3) deps.push_back(static_cast<std::uint32_t>(k - 3));
    s.transfers.push_back(xfer(k % 5, 5, (1.0 + 0.01 * k) * kMiB, deps));
  }
  const auto exact = run(s, t, c);
  sim::RunOptions o;
  o.batch_tolerance_s = 1e-6;
  const auto batched = run(s, t, c, o);
  CHECK(batched.events <= exact.events);
  const double depth = 10;
  CHECK(std::abs(batched.makespan_s - exact.makespan_s) <= depth * o.batch_tolerance_s);
  CHECK(batched.makespan_s != exact.makespan_s);  // the tolerance did merge something
}

TEST_CASE("link statistics per direction") {
  const auto t = star(3, kBw, 0);
  const auto c = calib_ib(0, 0.5);
  models::Schedule s;
  s.transfers = {xfer(0, 1, 10 * kMiB)};
  s.transfers[0].weight = 2;
  sim::RunOptions o;
  o.collect_link_stats = true;
  const auto r = run(s, t, c, o);
  REQUIRE(r.link_dirs.size() == 2 * t.num_links());
  topo::Routing rt(t);
  const auto& route = rt.route(0, 1);
  REQUIRE(route.size() == 2);
  for (auto d : route) {
    CHECK(r.link_dirs[d].bytes == doctest::Approx(20 * kMiB).epsilon(1e-9));
    CHECK(r.link_dirs[d].peak_util == doctest::Approx(1.0));
    CHECK(r.link_dirs[d].busy_s == doctest::Approx(r.makespan_s).epsilon(1e-9));
  }
  CHECK(r.link_dirs[route[0] ^ 1].bytes == 0);  // reverse direction idle
}

TEST_CASE("incremental API: a transfer started later contends with a running schedule") {
  const auto t = star(3, kBw, 0);
  const auto c = calib_ib(0, 1.0);
  topo::Routing rt(t);
  sim::EventQueue q;
  sim::Network net(q, t, rt, c);
  const double S = 10 * kMiB;
  auto s = std::make_shared<models::Schedule>();
  s->transfers = {xfer(0, 2, S)};
  double f1 = -1, f2 = -1;
  net.start_schedule(s, [&](sim::ScheduleRun& r) { f1 = r.finish_s; });
  const double t_start = 0.25 * S / kBw;  // a quarter done
  q.schedule(t_start, [&] { net.start_transfer(xfer(1, 2, S), [&](sim::ScheduleRun& r) { f2 = r.finish_s; }); });
  q.run();
  // First: 0.25 S alone, then 0.75 S at B/2 -> finishes at 0.25 + 1.5 = 1.75 S/B. Second: 0.75 S at B/2 by
  // then (1.5 S/B after its start), then 0.25 S alone.
  CHECK(f1 == doctest::Approx(1.75 * S / kBw).epsilon(1e-12));
  CHECK(f2 == doctest::Approx(2.0 * S / kBw).epsilon(1e-12));
  CHECK(net.running_schedules() == 0);
}

TEST_CASE("bad input: unknown engine, bad dependencies, cycles, bad sizes") {
  const auto t = star(3, kBw, kLat);
  const auto c = calib_ib();
  models::Schedule s;
  s.transfers = {xfer(0, 1, 100)};
  sim::RunOptions o;
  o.engine = "ns3";
  CHECK_THROWS_AS(run(s, t, c, o), InputError);
  models::Schedule bad_dep;
  bad_dep.transfers = {xfer(0, 1, 100, {5})};
  CHECK_THROWS_AS(run(bad_dep, t, c), InputError);
  models::Schedule cyc;
  cyc.transfers = {xfer(0, 1, 100, {1}), xfer(1, 2, 100, {0})};
  CHECK_THROWS_AS(run(cyc, t, c), InputError);
  models::Schedule neg;
  neg.transfers = {xfer(0, 1, -1)};
  CHECK_THROWS_AS(run(neg, t, c), InputError);
  models::Schedule badnode;
  badnode.transfers = {xfer(0, 99, 1)};
  CHECK_THROWS_AS(run(badnode, t, c), InputError);
  models::Schedule empty;
  empty.fixed_latency_s = 1e-6;
  CHECK(run(empty, t, c).makespan_s == doctest::Approx(1e-6));
  const auto names = sim::engine_names();
  CHECK(names.front() == "fabricsim");
}
