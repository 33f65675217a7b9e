// Back-to-back calls (models::back_to_back) on the engines: a chain of zero-byte hops pipelines with the
// period launch + one hop, not the single call's launch + two hops; and SimGrid gives the same transfer times
// for a back-to-back ring broadcast on a 4-node superpod.
#include <doctest/doctest.h>

#include <cmath>

#include "models/benchmark_loop.hpp"
#include "models/collectives.hpp"
#include "models/system.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

using namespace fabricsim;

TEST_CASE("back-to-back chain: the root's calls are spaced by launch + one hop, the single call takes two hops") {
  const models::System sys(models::system_spec("dgx-a100", {}, "default"));
  const topo::Topology& t = sys.topology();
  topo::Routing& routing = sys.routing();
  const auto& g = t.gpus();
  models::Schedule s;
  s.op = "broadcast";
  s.algorithm = "ring";
  s.protocol = "ll";
  const double launch = 5e-6;
  s.fixed_latency_s = launch;
  models::Transfer a;
  a.src = g[0];
  a.dst = g[1];
  a.step_latency_s = 1e-6;
  a.latency_includes_route = true;
  models::Transfer b = a;
  b.src = g[1];
  b.dst = g[2];
  b.deps = {0};
  s.transfers = {a, b};
  const auto single = sim::run_schedule(s, t, routing, sys.calibration());
  const double hop = single.transfers[0].finish_s - single.transfers[0].start_s;
  CHECK(hop >= 1e-6);
  CHECK(single.makespan_s == doctest::Approx(launch + 2 * hop));

  const models::BackToBack loop = models::back_to_back(s, 4, t);
  const auto r = sim::run_schedule(loop.schedule, t, routing, sys.calibration());
  std::vector<double> f;
  for (const auto& x : r.transfers) f.push_back(x.finish_s);
  const auto root = models::copy_finish_s(loop, f, g[0]);
  for (std::size_t c = 0; c < root.size(); ++c) CHECK(root[c] == doctest::Approx((c + 1) * (launch + hop)));
  CHECK(models::steady_period_s(loop, f) == doctest::Approx(launch + hop));
  CHECK(models::loop_time_per_call_s(root, models::steady_period_s(loop, f), 100) == doctest::Approx(launch + hop));
}

#ifdef FABRICSIM_HAVE_SIMGRID
TEST_CASE("cross-check against SimGrid: back-to-back ring broadcast on a 4-node superpod") {
  const models::System sys(models::system_spec("superpod", {{"nodes", "4"}}, "default"));
  const topo::Topology& t = sys.topology();
  topo::Routing& routing = sys.routing();
  const models::Calibration& calib = sys.calibration();
  for (std::uint64_t bytes : {std::uint64_t{4096}, std::uint64_t{4} << 20}) {
    CAPTURE(bytes);
    models::CollectiveSpec spec;
    spec.op = models::Op::Broadcast;
    spec.bytes = bytes;
    spec.communicator = t.gpus();
    spec.algorithm = models::Algorithm::Ring;
    spec.protocol = models::Protocol::Simple;
    spec.fidelity = models::Fidelity::Step;
    models::BackToBack loop = models::back_to_back(models::build_schedule(spec, t, routing, calib), 3, t);
    for (auto& tr : loop.schedule.transfers) tr.bytes = std::round(tr.bytes);
    sim::RunOptions oracle;
    oracle.engine = "simgrid";
    const auto x = sim::run_schedule(loop.schedule, t, routing, calib);
    const auto y = sim::run_schedule(loop.schedule, t, routing, calib, oracle);
    REQUIRE(x.transfers.size() == y.transfers.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < x.transfers.size(); ++i)
      if (std::abs(x.transfers[i].finish_s - y.transfers[i].finish_s) > 1e-3 * y.transfers[i].finish_s) ++bad;
    CHECK(bad == 0);
    CHECK(x.makespan_s == doctest::Approx(y.makespan_s).epsilon(1e-3));
  }
}
#endif
