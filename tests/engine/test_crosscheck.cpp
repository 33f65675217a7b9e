// Randomised cross-check: our engine against the SimGrid 3.32 oracle on random small topologies and random
// transfer DAGs (seeded). Every transfer's start and finish must agree within 0.1 %.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>

#include "engine_test_util.hpp"
#include "sim/base/error.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "topologies/routing.hpp"

#ifdef FABRICSIM_HAVE_SIMGRID

using namespace fabricsim;

namespace {

struct Case {
  topo::Topology topo;
  models::Calibration calib;
  models::Schedule sched;
};

// Random switch graph (a random tree plus a few extra links) with GPUs hanging off one or two switches.
Case random_case(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  const int nsw = 1 + pick(4), ngpu = 3 + pick(6);
  const topo::LinkKind kinds[] = {topo::LinkKind::NVLink, topo::LinkKind::PCIe, topo::LinkKind::InfiniBand,
                                  topo::LinkKind::Ethernet};
  topo::TopologyBuilder b("random" + std::to_string(seed));
  std::vector<topo::NodeId> sw, gpu;
  for (int i = 0; i < nsw; ++i) sw.push_back(b.add_node(test::switch_node("s" + std::to_string(i))));
  for (int i = 0; i < ngpu; ++i) gpu.push_back(b.add_node(test::gpu_node("g" + std::to_string(i), i)));
  auto link = [&](topo::NodeId a, topo::NodeId c) {
    b.add_link(a, c, kinds[pick(4)], uni(5e9, 100e9), pick(3) == 0 ? 0.0 : uni(0.1e-6, 3e-6));
  };
  for (int i = 1; i < nsw; ++i) link(sw[i], sw[pick(i)]);
  for (int k = 0; k < nsw / 2; ++k) {
    const int a = pick(nsw), c = pick(nsw);
    if (a != c) link(sw[a], sw[c]);
  }
  for (int i = 0; i < ngpu; ++i) {
    const int a = pick(nsw);
    link(gpu[i], sw[a]);
    if (nsw > 1 && pick(3) == 0) link(gpu[i], sw[(a + 1) % nsw]);
  }
  Case c{std::move(b).build(), {}, {}};
  for (auto& l : c.calib.link) l = models::LinkKindParams{pick(2) ? uni(0, 1e-6) : 0.0, uni(0.5, 1.0)};
  const int nt = 2 + pick(25);
  for (int i = 0; i < nt; ++i) {
    const int s = pick(ngpu);
    int d = pick(ngpu);
    if (d == s && pick(4) != 0) d = (s + 1) % ngpu;
    models::Transfer tr = test::xfer(gpu[s], gpu[d], std::round(std::exp(uni(std::log(1e3), std::log(64e6)))));
    if (pick(5) == 0) tr.bytes = 0;
    tr.weight = 1 + pick(3);
    tr.steps = 1 + pick(3);
    if (pick(3) == 0) tr.step_latency_s = uni(0, 5e-6);
    if (pick(2) == 0) tr.latency_includes_route = true;
    if (pick(4) == 0) tr.rate_cap_Bps = uni(1e9, 50e9);
    for (int k = 0; k < i && k < 3; ++k)
      if (pick(3) == 0) tr.deps.push_back(static_cast<std::uint32_t>(pick(i)));
    std::sort(tr.deps.begin(), tr.deps.end());
    tr.deps.erase(std::unique(tr.deps.begin(), tr.deps.end()), tr.deps.end());
    c.sched.transfers.push_back(tr);
  }
  c.sched.fixed_latency_s = pick(2) ? uni(0, 10e-6) : 0.0;
  return c;
}

void compare(const sim::ScheduleResult& a, const sim::ScheduleResult& b, const std::string& what) {
  INFO(what);
  REQUIRE(a.transfers.size() == b.transfers.size());
  CHECK(a.makespan_s == doctest::Approx(b.makespan_s).epsilon(1e-3));
  for (std::size_t i = 0; i < a.transfers.size(); ++i) {
    INFO("transfer " << i);
    CHECK(a.transfers[i].start_s == doctest::Approx(b.transfers[i].start_s).epsilon(1e-3));
    CHECK(a.transfers[i].finish_s == doctest::Approx(b.transfers[i].finish_s).epsilon(1e-3));
  }
}

}  // namespace

TEST_CASE("cross-check against SimGrid: random topologies and transfer DAGs") {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    Case c = random_case(seed);
    topo::Routing r1(c.topo), r2(c.topo);
    sim::RunOptions ours, oracle;
    oracle.engine = "simgrid";
    const auto a = sim::run_schedule(c.sched, c.topo, r1, c.calib, ours);
    const auto b = sim::run_schedule(c.sched, c.topo, r2, c.calib, oracle);
    compare(a, b, "seed " + std::to_string(seed) + ", " + std::to_string(c.sched.transfers.size()) + " transfers");
  }
}

TEST_CASE("cross-check against SimGrid: many flows contending on one star") {
  const auto t = test::star(6, 20e9, 1e-6);
  models::Calibration calib;
  std::mt19937_64 rng(99);
  models::Schedule s;
  for (int i = 0; i < 40; ++i) {
    const int src = static_cast<int>(rng() % 6), dst = static_cast<int>((src + 1 + rng() % 5) % 6);
    s.transfers.push_back(test::xfer(src, dst, 1e5 * static_cast<double>(1 + rng() % 100)));
  }
  topo::Routing r1(t), r2(t);
  sim::RunOptions oracle;
  oracle.engine = "simgrid";
  compare(sim::run_schedule(s, t, r1, calib), sim::run_schedule(s, t, r2, calib, oracle), "star");
}

TEST_CASE("simgrid engine rejects non-integer weights and can run repeatedly in one process") {
  const auto t = test::star(3, 10e9, 1e-6);
  models::Calibration calib;
  topo::Routing r(t);
  sim::RunOptions oracle;
  oracle.engine = "simgrid";
  models::Schedule s;
  s.transfers = {test::xfer(0, 1, 1e6)};
  const auto x1 = sim::run_schedule(s, t, r, calib, oracle);
  const auto x2 = sim::run_schedule(s, t, r, calib, oracle);
  CHECK(x1.makespan_s == doctest::Approx(2e-6 + 1e6 / 10e9).epsilon(1e-9));
  CHECK(x2.makespan_s == x1.makespan_s);
  s.transfers[0].weight = 1.5;
  CHECK_THROWS_AS(sim::run_schedule(s, t, r, calib, oracle), InputError);
}

#endif
