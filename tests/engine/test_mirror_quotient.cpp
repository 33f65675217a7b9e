// Mirror quotient on the shared network (docs/engine.md, "Mirror quotient on the shared network"): a schedule of
// k co-located mirror groups runs as one representative block while that is exact, and is expanded into every
// block's flows, with block 0's state, the moment another flow would load its links unequally. Every check
// compares each transfer's start and finish with the run that simulates every block (mirror_groups = 1).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>

#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/network.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

#include "engine_test_util.hpp"

using namespace fabricsim;
using fabricsim::test::mirrored;

namespace {

topo::Topology superpod(std::map<std::string, std::string> p) {
  p["node"] = "dgx-h100";
  return models::merge_nvswitch_planes(topo::build_preset("superpod", p));
}

// The same topology with one link at `factor` of its bandwidth: the first NIC-to-leaf link of GPU `gpu_index`.
topo::Topology degrade_nic_link(const topo::Topology& t0, std::size_t gpu_index, double factor) {
  topo::TopologyBuilder b(t0.name());
  for (topo::NodeId i = 0; i < t0.num_nodes(); ++i) b.add_node(t0.node(i));
  // The NIC the GPU's traffic leaves through: its rail NIC (same host, local index = the GPU's).
  const topo::Node& g = t0.node(t0.gpus()[gpu_index]);
  bool done = false;
  for (topo::LinkId l = 0; l < t0.num_links(); ++l) {
    const topo::Link& k = t0.link(l);
    double bw = k.bandwidth_Bps;
    for (topo::NodeId x : {k.a, k.b}) {
      const topo::Node& n = t0.node(x);
      const topo::NodeId other = x == k.a ? k.b : k.a;
      const auto ok = t0.node(other).kind;
      if (!done && n.kind == topo::NodeKind::Nic && n.host == g.host && n.local_index == g.local_index &&
          (ok == topo::NodeKind::IbSwitch || ok == topo::NodeKind::EthSwitch)) {
        bw *= factor;
        done = true;
      }
    }
    b.add_link(k.a, k.b, k.kind, bw, k.latency_s, k.count);
  }
  REQUIRE(done);
  return std::move(b).build(t0.name() + ", one degraded NIC link");
}

struct Outcome {
  sim::ScheduleRun main, other;
  std::size_t quotient_runs = 0, expanded = 0, flows_visited = 0;
  std::map<std::string, std::size_t> fallbacks;
  std::vector<sim::LinkDirStats> links;
};

// Runs `s` (with `groups` blocks when quotient is on) and, when given, a message `other` started at `other_at_s`.
// `s` starts at main_at_s.
Outcome run(const topo::Topology& t, topo::Routing& routing, const models::Calibration& c,
            std::shared_ptr<const models::Schedule> s, std::uint32_t groups,
            std::shared_ptr<const models::Schedule> other = nullptr, double other_at_s = 0, double main_at_s = 0) {
  sim::EventQueue q;
  sim::Network net(q, t, routing, c);
  Outcome out;
  q.schedule(main_at_s, [&] {
    net.start_schedule(s, s->fixed_latency_s, [&](sim::ScheduleRun& r) { out.main = std::move(r); }, false, groups);
  });
  if (other)
    q.schedule(other_at_s, [&] { net.start_schedule(other, [&](sim::ScheduleRun& r) { out.other = std::move(r); }); });
  q.run();
  out.quotient_runs = net.mirror_quotient_runs();
  out.expanded = net.mirror_expanded();
  out.fallbacks = net.mirror_fallbacks();
  out.flows_visited = net.model().solved_flow_visits();
  out.links = net.link_stats();
  return out;
}

double rel(double a, double b) { return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-12}); }

void check_same(const Outcome& a, const Outcome& b) {
  REQUIRE(a.main.transfers.size() == b.main.transfers.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.main.transfers.size(); ++i) {
    worst = std::max(worst, rel(a.main.transfers[i].start_s, b.main.transfers[i].start_s));
    worst = std::max(worst, rel(a.main.transfers[i].finish_s, b.main.transfers[i].finish_s));
  }
  CHECK(worst <= 1e-9);
  CHECK(rel(a.main.finish_s, b.main.finish_s) <= 1e-9);
  REQUIRE(a.other.transfers.size() == b.other.transfers.size());
  for (std::size_t i = 0; i < a.other.transfers.size(); ++i)
    CHECK(rel(a.other.transfers[i].finish_s, b.other.transfers[i].finish_s) <= 1e-9);
  // Link statistics: the mirrored links get the figures their orbit's first link had.
  REQUIRE(a.links.size() == b.links.size());
  double wb = 0, wu = 0, wp = 0;
  for (std::size_t d = 0; d < a.links.size(); ++d) {
    wb = std::max(wb, rel(a.links[d].bytes, b.links[d].bytes));
    wu = std::max(wu, rel(a.links[d].busy_s, b.links[d].busy_s));
    wp = std::max(wp, rel(a.links[d].peak_util, b.links[d].peak_util));
  }
  CHECK(wb <= 1e-9);
  CHECK(wu <= 1e-9);
  CHECK(wp <= 1e-9);
}

// One message from GPU `gpu_index` to the same rail's GPU on the next host (crosses that mirror's NIC links).
std::shared_ptr<models::Schedule> message(const topo::Topology& t, std::size_t gpu_index, double bytes) {
  auto s = std::make_shared<models::Schedule>();
  s->op = "send";
  models::Transfer tr;
  tr.src = t.gpus()[gpu_index];
  tr.dst = t.gpus()[gpu_index + 8];
  tr.bytes = bytes;
  s->transfers.push_back(tr);
  return s;
}

}  // namespace

TEST_CASE("mirror quotient: 2 and 4 ring mirror groups on a rail fabric give every transfer its full-run times") {
  const topo::Topology t = superpod({{"nodes", "4"}});
  topo::Routing routing(t);
  const models::Calibration c = models::default_calibration();
  for (int groups : {2, 4}) {
    for (models::Op op : {models::Op::ReduceScatter, models::Op::AllReduce}) {
      CAPTURE(groups);
      CAPTURE(models::to_string(op));
      auto s = mirrored(t, routing, c, op, models::Algorithm::Ring, models::Fidelity::Step, 16ull << 20, groups);
      const Outcome full = run(t, routing, c, s, 1);
      const Outcome quot = run(t, routing, c, s, static_cast<std::uint32_t>(groups));
      CHECK(full.quotient_runs == 0);
      CHECK(quot.quotient_runs == 1);
      CHECK(quot.expanded == 0);
      CHECK(quot.fallbacks.empty());
      check_same(full, quot);
      CHECK(quot.flows_visited * groups <= full.flows_visited + 16);  // one block's flows instead of `groups`
    }
  }
}

TEST_CASE("mirror quotient: PAT mirrors in a 3-tier fat tree; ring mirrors sharing NICs (multiplicities)") {
  // 16 DGX H100 on radix-8 switches in 3 tiers (the 8 groups' routes are link-disjoint there); 4 servers with 4
  // NICs for 8 GPUs, where GPUs k and k + 4 share a NIC: groups k and k + 4 cross the same NIC links, whose orbit
  // the representative loads with multiplicity 2.
  const models::Calibration c = models::default_calibration();
  for (bool shared_nics : {false, true}) {
  CAPTURE(shared_nics);
  const topo::Topology t = shared_nics ? superpod({{"nodes", "4"}, {"nics_per_node", "4"}})
                                       : superpod({{"nodes", "16"}, {"radix", "8"}, {"tiers", "3"}});
  topo::Routing routing(t);
  auto s = shared_nics ? mirrored(t, routing, c, models::Op::AllReduce, models::Algorithm::Ring,
                                  models::Fidelity::Step, 16ull << 20, 8)
                       : mirrored(t, routing, c, models::Op::AllGather, models::Algorithm::Pat,
                                  models::Fidelity::Step, 16ull << 20, 8);
  // Some orbit holds fewer link directions than there are groups: links several groups' copies cross.
  const sim::MirrorQuotient mq = sim::mirror_quotient(
      *s, 8, [&](topo::NodeId a, topo::NodeId b, std::vector<topo::LinkDir>& out) { routing.compute_route(a, b, out); },
      sim::link_capacities(t, c), [&] {
        std::vector<double> lat(2 * t.num_links());
        for (topo::LinkDir d = 0; d < lat.size(); ++d) {
          const topo::Link& l = t.link(topo::Topology::link_of(d));
          lat[d] = l.latency_s + c.of(l.kind).latency_s;
        }
        return lat;
      }());
  CAPTURE(mq.reason);
  REQUIRE(mq.ok);
  CHECK(std::any_of(mq.orbits.begin(), mq.orbits.end(), [](const auto& o) { return o.size() < 8; }) == shared_nics);
  CHECK(std::any_of(mq.mult.begin(), mq.mult.end(), [](std::uint32_t m) { return m > 1; }) == shared_nics);
  const Outcome full = run(t, routing, c, s, 1);
  const Outcome quot = run(t, routing, c, s, 8);
  CAPTURE(quot.fallbacks.empty() ? std::string() : quot.fallbacks.begin()->first);
  CHECK(quot.quotient_runs == 1);
  check_same(full, quot);
  }
}

TEST_CASE("mirror quotient: another call on one mirror's links expands the blocks with block 0's state") {
  const topo::Topology t = superpod({{"nodes", "4"}});
  topo::Routing routing(t);
  const models::Calibration c = models::default_calibration();
  auto s = mirrored(t, routing, c, models::Op::AllReduce, models::Algorithm::Ring, models::Fidelity::Step,
                    16ull << 20, 4);
  const Outcome alone = run(t, routing, c, s, 1);
  const double T = alone.main.finish_s;
  // A 4 MiB message on mirror 1's rail, started together with the call (it loads the links once its latency
  // phase is over, while the blocks are in theirs), mid-way (expansion during the run) and after the end (no
  // effect); and the call started while the message is moving (no quotient from the start).
  auto m = message(t, 1, 4 << 20);
  for (double at : {0.0, 0.37 * T, 2 * T}) {
    CAPTURE(at);
    const Outcome full = run(t, routing, c, s, 1, m, at);
    const Outcome quot = run(t, routing, c, s, 4, m, at);
    check_same(full, quot);
    if (at < T) {
      CHECK(quot.quotient_runs == 1);
      CHECK(quot.expanded == 1);
      CHECK(full.main.finish_s > T * (1 + 1e-6));  // the message did slow mirror 1 down
    } else {
      CHECK(quot.quotient_runs == 1);
      CHECK(quot.expanded == 0);
    }
  }
  const Outcome full = run(t, routing, c, s, 1, m, 0, 20e-6);
  const Outcome quot = run(t, routing, c, s, 4, m, 0, 20e-6);
  check_same(full, quot);
  CHECK(quot.quotient_runs == 0);
  CHECK(quot.fallbacks.at("another call on its links") == 1);
}

TEST_CASE("mirror quotient: PAT at phase fidelity keeps its lockstep waves") {
  const topo::Topology t = superpod({{"nodes", "16"}, {"radix", "8"}, {"tiers", "3"}});
  topo::Routing routing(t);
  const models::Calibration c = models::default_calibration();
  auto s = mirrored(t, routing, c, models::Op::ReduceScatter, models::Algorithm::Pat, models::Fidelity::Phase,
                    16ull << 20, 8);
  const Outcome full = run(t, routing, c, s, 1);
  const Outcome quot = run(t, routing, c, s, 8);
  CHECK(quot.quotient_runs == 0);
  CHECK(quot.fallbacks.at("lockstep waves") == 1);
  CHECK(quot.flows_visited == full.flows_visited);
  check_same(full, quot);
}

TEST_CASE("mirror quotient: a degraded link on one mirror falls back to every block's flows") {
  const topo::Topology t = degrade_nic_link(superpod({{"nodes", "4"}}), 2, 0.5);
  topo::Routing routing(t);
  const models::Calibration c = models::default_calibration();
  auto s = mirrored(t, routing, c, models::Op::ReduceScatter, models::Algorithm::Ring, models::Fidelity::Step,
                    16ull << 20, 4);
  const Outcome full = run(t, routing, c, s, 1);
  const Outcome quot = run(t, routing, c, s, 4);
  CHECK(quot.quotient_runs == 0);
  CHECK(quot.fallbacks.at("unequal links") == 1);
  check_same(full, quot);
}

TEST_CASE("mirror quotient: two overlapping calls of the same mirror groups share their orbits") {
  const topo::Topology t = superpod({{"nodes", "4"}});
  topo::Routing routing(t);
  const models::Calibration c = models::default_calibration();
  auto a = mirrored(t, routing, c, models::Op::ReduceScatter, models::Algorithm::Ring, models::Fidelity::Step,
                    16ull << 20, 4);
  auto b = mirrored(t, routing, c, models::Op::AllGather, models::Algorithm::Ring, models::Fidelity::Step,
                    8ull << 20, 4);
  // With a message on mirror 2's rail at `msg_at_s` (0: none): it expands both calls.
  auto both = [&](std::uint32_t groups, double msg_at_s) {
    sim::EventQueue q;
    sim::Network net(q, t, routing, c);
    Outcome out;
    sim::ScheduleRun msg;
    net.start_schedule(a, a->fixed_latency_s, [&](sim::ScheduleRun& r) { out.main = std::move(r); }, false, groups);
    q.schedule(20e-6, [&] {
      net.start_schedule(b, b->fixed_latency_s, [&](sim::ScheduleRun& r) { out.other = std::move(r); }, false, groups);
    });
    if (msg_at_s > 0) q.schedule(msg_at_s, [&] { net.start_schedule(message(t, 2, 1 << 20), [&](sim::ScheduleRun& r) { msg = r; }); });
    q.run();
    out.quotient_runs = net.mirror_quotient_runs();
    out.expanded = net.mirror_expanded();
    out.links = net.link_stats();
    if (msg_at_s > 0) out.main.transfers.push_back(msg.transfers.front());  // compared with the rest
    return out;
  };
  for (double msg_at : {0.0, 60e-6}) {
    CAPTURE(msg_at);
    const Outcome full = both(1, msg_at), quot = both(4, msg_at);
    CHECK(quot.quotient_runs == 2);
    CHECK(quot.expanded == (msg_at > 0 ? 2u : 0u));
    REQUIRE(full.other.transfers.size() == quot.other.transfers.size());
    for (std::size_t i = 0; i < full.other.transfers.size(); ++i) {
      CHECK(rel(full.other.transfers[i].start_s, quot.other.transfers[i].start_s) <= 1e-9);
      CHECK(rel(full.other.transfers[i].finish_s, quot.other.transfers[i].finish_s) <= 1e-9);
    }
    check_same(full, quot);
  }
}
