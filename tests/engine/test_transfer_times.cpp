// NetworkOptions::transfer_times = false (the shared comm model's setting): a bundle's members start and finish as
// one update and ScheduleRun::transfers stays empty; every schedule's finish and every link figure must be the
// same as with per-transfer times.
#include <doctest/doctest.h>

#include <memory>

#include "bench/bench_util.hpp"
#include "models/collectives.hpp"
#include "models/system.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/network.hpp"
#include "engine_test_util.hpp"
#include "mixed_schedules.hpp"

using namespace fabricsim;

TEST_CASE("Network without transfer times: same schedule finishes and link statistics, bundles split alike") {
  // 4 DGX H100 nodes: a skewed all_to_allv (bundles that split), a ring all_reduce with dependencies sharing the
  // NICs, and a uniform all_to_all started while both run.
  const test::MixedSchedules mix;
  const models::System& sys = mix.sys;
  const topo::Topology& t = sys.topology();
  const models::Calibration& calib = sys.calibration();
  struct Out {
    std::vector<sim::ScheduleRun> runs = std::vector<sim::ScheduleRun>(4);
    std::vector<sim::LinkDirStats> links;
    std::size_t bundles = 0, splits = 0;
  };
  auto run = [&](bool times) {
    sim::EventQueue q;
    sim::NetworkOptions opt;
    opt.bundle_flows = true;
    opt.transfer_times = times;
    sim::Network net(q, t, sys.routing(false), calib, opt);
    net.set_alternate_routing(sys.routing(true));
    Out o;
    mix.start(net, q, o.runs);  // the three, and the skewed one again from its cached plan while the ring runs
    q.run();
    o.links = net.link_stats();
    o.bundles = net.bundles_added();
    o.splits = net.bundles_split();
    return o;
  };
  const Out a = run(true), b = run(false);
  INFO("bundles " << a.bundles << ", split " << a.splits);
  CHECK(a.bundles > 0);
  CHECK(a.splits > 0);
  CHECK(b.bundles == a.bundles);
  CHECK(b.splits == a.splits);
  for (int k = 0; k < 4; ++k) {
    CHECK(a.runs[k].transfers.size() > 0);
    CHECK(b.runs[k].transfers.empty());
    CHECK(b.runs[k].start_s == a.runs[k].start_s);
    CHECK(b.runs[k].finish_s == a.runs[k].finish_s);
  }
  REQUIRE(a.links.size() == b.links.size());
  CHECK(test::busy_links(a.links) > 0);
  CHECK(test::differing_links(a.links, b.links) == 0);
}
