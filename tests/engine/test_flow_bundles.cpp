// Flow bundles (sim/engine/flow_model.hpp, network.hpp): a bundle of flows with equal bytes and start must give
// every member the finish time it has when the members run one by one, splitting itself when the solver finds
// no bottleneck common to all members.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>

#include "bench/bench_util.hpp"
#include "models/collectives.hpp"
#include "models/system.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/flow_model.hpp"
#include "sim/engine/network.hpp"
#include "mixed_schedules.hpp"

using namespace fabricsim;
using sim::FlowModel;

namespace {
struct Member {
  std::vector<std::uint32_t> route;
};
struct Group {
  std::vector<Member> members;
  double bytes = 0, start = 0;
};

// Runs `groups` (each group's members start together with equal bytes) to completion, as bundles or flow by
// flow; returns each member's finish time (group-major order). Bundles without a common bottleneck are split
// into their members at the same time, as sim::Network does.
std::vector<double> run_groups(const std::vector<double>& cap, const std::vector<Group>& groups, bool bundled,
                               std::size_t* splits) {
  FlowModel m(cap);
  std::vector<std::size_t> first(groups.size() + 1, 0);
  for (std::size_t g = 0; g < groups.size(); ++g) first[g + 1] = first[g] + groups[g].members.size();
  std::vector<double> fin(first.back(), -1);
  // user tag: group << 32 | (member + 1), member 0 = the whole bundle
  std::vector<std::size_t> order(groups.size());
  for (std::size_t g = 0; g < order.size(); ++g) order[g] = g;
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return groups[a].start < groups[b].start; });
  std::size_t next = 0;
  double now = 0;
  std::vector<std::uint64_t> done;
  auto add_members = [&](std::size_t g, double bytes) {
    for (std::size_t k = 0; k < groups[g].members.size(); ++k)
      m.add(now, groups[g].members[k].route, bytes, 1, 0, (std::uint64_t{g} << 32) | (k + 1));
  };
  while (true) {
    while (next < order.size() && groups[order[next]].start <= now) {
      const std::size_t g = order[next++];
      const Group& gr = groups[g];
      if (bundled && gr.members.size() > 1) {
        std::map<std::uint32_t, std::uint32_t> count;
        for (const auto& mb : gr.members)
          for (auto r : mb.route) ++count[r];
        std::vector<std::uint32_t> res, mult;
        for (auto [r, c] : count) res.push_back(r), mult.push_back(c);
        m.add_bundle(now, res, mult, static_cast<std::uint32_t>(gr.members.size()), gr.bytes, 1, 0,
                     std::uint64_t{g} << 32);
      } else {
        add_members(g, gr.bytes);
      }
    }
    m.solve(now);
    while (!m.split_requests().empty()) {
      const std::vector<FlowModel::FlowId> sp = m.split_requests();
      for (auto f : sp) {
        const std::size_t g = m.user(f) >> 32;
        add_members(g, m.cancel(f, now));
        ++*splits;
      }
      m.solve(now);
    }
    double t = m.next_finish();
    const double t_start = next < order.size() ? groups[order[next]].start : FlowModel::kInf;
    if (t == FlowModel::kInf && t_start == FlowModel::kInf) break;
    if (t_start < t) {
      now = t_start;
      continue;
    }
    now = t;
    done.clear();
    m.complete(now, 1e-10 * now + 1e-15, done);
    for (auto u : done) {
      const std::size_t g = u >> 32, k = u & 0xffffffffu;
      if (k == 0)
        for (std::size_t j = first[g]; j < first[g + 1]; ++j) fin[j] = now;
      else
        fin[first[g] + k - 1] = now;
    }
  }
  return fin;
}
}  // namespace

TEST_CASE("flow bundles: every member finishes when it does flow by flow (randomised, with and without splits)") {
  std::mt19937_64 rng(2026);
  std::size_t total_splits = 0, kept_bundles = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int nres = 4 + static_cast<int>(rng() % 8);
    std::vector<double> cap(nres);
    for (auto& c : cap) c = 1.0 + static_cast<double>(rng() % 40);
    std::vector<Group> groups(2 + rng() % 6);
    for (auto& g : groups) {
      g.bytes = 10.0 + static_cast<double>(rng() % 200);
      g.start = (rng() % 3 == 0) ? static_cast<double>(rng() % 10) : 0.0;
      // members share one resource (the destination's link, as an all-to-all bundle) and each crosses a few others
      const std::uint32_t common = static_cast<std::uint32_t>(rng() % nres);
      const int members = 1 + static_cast<int>(rng() % 5);
      for (int k = 0; k < members; ++k) {
        Member mb;
        mb.route.push_back(common);
        for (int r = 0; r < nres; ++r)
          if (r != static_cast<int>(common) && rng() % 4 == 0) mb.route.push_back(static_cast<std::uint32_t>(r));
        g.members.push_back(mb);
      }
    }
    std::size_t splits = 0, none = 0;
    const auto a = run_groups(cap, groups, true, &splits);
    const auto b = run_groups(cap, groups, false, &none);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-9));
    total_splits += splits;
    for (const auto& g : groups) kept_bundles += g.members.size() > 1;
  }
  // Both paths were exercised: some bundles split, most did not.
  CHECK(total_splits > 0);
  CHECK(total_splits < kept_bundles);
}

TEST_CASE("flow bundles: add_bundle checks its multiplicities") {
  FlowModel m({10.0, 10.0});
  const std::vector<std::uint32_t> res{0, 1}, ok{2, 1}, zero{2, 0}, over{3, 1};
  CHECK_THROWS(m.add_bundle(0, res, zero, 2, 1, 1, 0, 0));
  CHECK_THROWS(m.add_bundle(0, res, over, 2, 1, 1, 0, 0));
  const auto f = m.add_bundle(0, res, ok, 2, 100, 1, 0, 0);
  m.solve(0);
  // two members on resource 0 (10 B/s): 5 B/s each; resource 1 carries one member
  CHECK(m.rate(f) == doctest::Approx(5.0));
  CHECK(m.split_requests().empty());
}

TEST_CASE("Network flow bundles: skewed MoE all_to_allv beside a ring and a uniform all_to_all, same times as flow by flow") {
  // 4 DGX H100 nodes (32 GPUs): a Zipf(1.2) all_to_allv with PXN, an all_reduce ring on the default routes that
  // shares the NICs, and a uniform all_to_all started while both run. Bundling must not move any transfer.
  const test::MixedSchedules mix;
  const models::System& sys = mix.sys;
  const topo::Topology& t = sys.topology();
  const models::Calibration& calib = sys.calibration();
  REQUIRE(mix.skewed->transfers.size() == 32u * 31u);
  auto run = [&](bool bundle, std::size_t* bundles, std::size_t* splits) {
    sim::EventQueue q;
    sim::Network net(q, t, sys.routing(false), calib, sim::NetworkOptions{0, bundle});
    net.set_alternate_routing(sys.routing(true));
    std::vector<sim::ScheduleRun> out(3);
    mix.start(net, q, out);
    q.run();
    *bundles = net.bundles_added();
    *splits = net.bundles_split();
    return out;
  };
  std::size_t bundles = 0, splits = 0, b0 = 0, s0 = 0;
  const auto a = run(true, &bundles, &splits);
  const auto b = run(false, &b0, &s0);
  INFO("bundles " << bundles << ", split " << splits);
  CHECK(bundles > 0);
  CHECK(b0 == 0);
  std::size_t bad = 0, n = 0;
  for (int k = 0; k < 3; ++k) {
    REQUIRE(a[k].transfers.size() == b[k].transfers.size());
    CHECK(a[k].finish_s == doctest::Approx(b[k].finish_s).epsilon(1e-9));
    for (std::size_t i = 0; i < a[k].transfers.size(); ++i, ++n) {
      if (std::abs(a[k].transfers[i].finish_s - b[k].transfers[i].finish_s) > 1e-9 * b[k].transfers[i].finish_s) ++bad;
      if (std::abs(a[k].transfers[i].start_s - b[k].transfers[i].start_s) > 1e-9 * b[k].transfers[i].finish_s) ++bad;
    }
  }
  CHECK(n > 2000);
  CHECK(bad == 0);
}
