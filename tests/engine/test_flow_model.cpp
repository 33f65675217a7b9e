// Max-min fair sharing over abstract resources, against closed-form allocations.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "sim/engine/event_queue.hpp"
#include "sim/engine/flow_model.hpp"

using fabricsim::sim::EventQueue;
using fabricsim::sim::EventTarget;
using fabricsim::sim::FlowModel;

namespace {
std::vector<std::uint32_t> R(std::initializer_list<std::uint32_t> l) { return l; }
}  // namespace

TEST_CASE("event queue orders by time, then by scheduling order") {
  EventQueue q;
  std::vector<int> seen;
  q.schedule(2.0, [&] { seen.push_back(3); });
  q.schedule(1.0, [&] { seen.push_back(1); });
  q.schedule(1.0, [&] {
    seen.push_back(2);
    q.schedule(1.0, [&] { seen.push_back(25); });  // same time, scheduled later: runs after
  });
  struct T final : EventTarget {
    std::vector<int>* out;
    void on_event(EventQueue& qq, std::uint64_t tag) override { out->push_back(static_cast<int>(tag) + 100 * (qq.now() == 3.0)); }
  } target;
  target.out = &seen;
  q.schedule(3.0, &target, 7);
  q.run();
  CHECK(seen == std::vector<int>{1, 2, 25, 3, 107});
  CHECK(q.now() == 3.0);
  CHECK(q.processed() == 5);
  CHECK_THROWS(q.schedule(1.0, [] {}));
}

TEST_CASE("one flow alone gets the full capacity") {
  FlowModel m({10.0, 5.0});
  const auto r = R({0});
  m.add(0, r, 100, 1, 0, 42);
  m.solve(0);
  CHECK(m.rate(0) == doctest::Approx(10.0));
  CHECK(m.next_finish() == doctest::Approx(10.0));
  std::vector<std::uint64_t> done;
  CHECK(m.complete(10.0, 0, done) == 1);
  CHECK(done == std::vector<std::uint64_t>{42});
  CHECK(m.active_flows() == 0);
}

TEST_CASE("max-min with a bottleneck: flows on the bottleneck split it, the rest take what is left") {
  // A (cap 10): f0, f1; B (cap 4): f1, f2. Max-min: B saturates first at 2 per flow; f0 gets 10 - 2 = 8.
  FlowModel m({10.0, 4.0});
  const auto a = R({0}), ab = R({0, 1}), b = R({1});
  const auto f0 = m.add(0, a, 1e9, 1, 0, 0);
  const auto f1 = m.add(0, ab, 1e9, 1, 0, 1);
  const auto f2 = m.add(0, b, 1e9, 1, 0, 2);
  m.solve(0);
  CHECK(m.rate(f0) == doctest::Approx(8.0));
  CHECK(m.rate(f1) == doctest::Approx(2.0));
  CHECK(m.rate(f2) == doctest::Approx(2.0));
}

TEST_CASE("a rate cap freezes a flow below its fair share and the others share the rest") {
  FlowModel m({10.0});
  const auto a = R({0});
  const auto f0 = m.add(0, a, 1e9, 1, 1.5, 0);
  const auto f1 = m.add(0, a, 1e9, 1, 0, 1);
  const auto f2 = m.add(0, a, 1e9, 1, 0, 2);
  m.solve(0);
  CHECK(m.rate(f0) == doctest::Approx(1.5));
  CHECK(m.rate(f1) == doctest::Approx(4.25));
  CHECK(m.rate(f2) == doctest::Approx(4.25));
  // A cap above the fair share does not bind.
  FlowModel m2({10.0});
  const auto g0 = m2.add(0, a, 1e9, 1, 7.0, 0);
  const auto g1 = m2.add(0, a, 1e9, 1, 0, 1);
  m2.solve(0);
  CHECK(m2.rate(g0) == doctest::Approx(5.0));
  CHECK(m2.rate(g1) == doctest::Approx(5.0));
}

TEST_CASE("a weighted flow equals w separate flows (randomised)") {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 30; ++trial) {
    const int nres = 2 + static_cast<int>(rng() % 5);
    std::vector<double> cap(nres);
    for (auto& c : cap) c = 1.0 + static_cast<double>(rng() % 100);
    FlowModel weighted(cap), expanded(cap);
    const int nflows = 1 + static_cast<int>(rng() % 6);
    std::vector<FlowModel::FlowId> wid;
    std::vector<std::vector<FlowModel::FlowId>> eid(nflows);
    for (int f = 0; f < nflows; ++f) {
      std::vector<std::uint32_t> res;
      for (int r = 0; r < nres; ++r)
        if (rng() % 2) res.push_back(r);
      if (res.empty()) res.push_back(static_cast<std::uint32_t>(rng() % nres));
      const int w = 1 + static_cast<int>(rng() % 4);
      const double cap_rate = (rng() % 3 == 0) ? 0.5 + static_cast<double>(rng() % 20) : 0.0;
      wid.push_back(weighted.add(0, res, 1000, w, cap_rate, f));
      for (int k = 0; k < w; ++k) eid[f].push_back(expanded.add(0, res, 1000, 1, cap_rate, f));
    }
    weighted.solve(0);
    expanded.solve(0);
    for (int f = 0; f < nflows; ++f)
      for (auto e : eid[f]) CHECK(weighted.rate(wid[f]) == doctest::Approx(expanded.rate(e)).epsilon(1e-12));
  }
}

TEST_CASE("max-min allocation is feasible and every flow has a saturated bottleneck (randomised)") {
  std::mt19937_64 rng(777);
  for (int trial = 0; trial < 50; ++trial) {
    const int nres = 1 + static_cast<int>(rng() % 8);
    std::vector<double> cap(nres);
    for (auto& c : cap) c = 1.0 + static_cast<double>(rng() % 50);
    FlowModel m(cap);
    const int nflows = 1 + static_cast<int>(rng() % 12);
    std::vector<std::vector<std::uint32_t>> routes;
    std::vector<double> w, capr;
    for (int f = 0; f < nflows; ++f) {
      std::vector<std::uint32_t> res;
      for (int r = 0; r < nres; ++r)
        if (rng() % 3 == 0) res.push_back(r);
      if (res.empty()) res.push_back(static_cast<std::uint32_t>(rng() % nres));
      routes.push_back(res);
      w.push_back(1.0 + static_cast<double>(rng() % 3));
      capr.push_back(rng() % 4 == 0 ? 0.25 + static_cast<double>(rng() % 10) : 0.0);
      m.add(0, res, 100, w.back(), capr.back(), f);
    }
    m.solve(0);
    std::vector<double> load(nres, 0);
    for (int f = 0; f < nflows; ++f)
      for (auto r : routes[f]) load[r] += w[f] * m.rate(f);
    for (int r = 0; r < nres; ++r) CHECK(load[r] <= cap[r] * (1 + 1e-12));
    // Bottleneck property: each flow is at its cap, or crosses a saturated resource where its per-instance
    // rate is the largest among the flows there.
    for (int f = 0; f < nflows; ++f) {
      if (capr[f] > 0 && m.rate(f) >= capr[f] * (1 - 1e-12)) {
        CHECK(m.rate(f) <= capr[f] * (1 + 1e-12));
        continue;
      }
      bool has_bottleneck = false;
      for (auto r : routes[f]) {
        if (load[r] < cap[r] * (1 - 1e-9)) continue;
        bool is_max = true;
        for (int g = 0; g < nflows; ++g)
          for (auto rg : routes[g])
            if (rg == r && m.rate(g) > m.rate(f) * (1 + 1e-9)) is_max = false;
        if (is_max) has_bottleneck = true;
      }
      CHECK(has_bottleneck);
    }
  }
}

TEST_CASE("only the touched component is re-solved, and rates elsewhere stay") {
  FlowModel m({10.0, 10.0});
  const auto a = R({0}), b = R({1});
  m.add(0, a, 100, 1, 0, 0);
  m.add(0, b, 100, 1, 0, 1);
  m.solve(0);
  const auto visits = m.solved_flow_visits();
  CHECK(visits == 2);
  m.add(1, a, 100, 1, 0, 2);  // touches resource 0 only
  m.solve(1);
  CHECK(m.solved_flow_visits() - visits == 2);  // flows 0 and 2, not flow 1
  CHECK(m.rate(0) == doctest::Approx(5.0));
  CHECK(m.rate(1) == doctest::Approx(10.0));
  // Flow 0 had 90 bytes left at t=1 at rate 5: finishes at 19. Flow 1 finishes at 10.
  CHECK(m.next_finish() == doctest::Approx(10.0));
  std::vector<std::uint64_t> done;
  m.complete(10.0, 0, done);
  CHECK(done == std::vector<std::uint64_t>{1});
  m.solve(10.0);
  CHECK(m.next_finish() == doctest::Approx(19.0));
}

TEST_CASE("link statistics: bytes, busy time and peak utilisation") {
  FlowModel m({10.0, 4.0});
  const auto ab = R({0, 1});
  m.add(0, ab, 40, 2, 0, 0);  // weight 2: per-instance rate 2, load 4 on both resources, 10 s
  m.solve(0);
  CHECK(m.next_finish() == doctest::Approx(20.0));
  std::vector<std::uint64_t> done;
  m.complete(20.0, 0, done);
  m.solve(20.0);
  m.settle_stats(30.0);
  CHECK(m.stats()[0].bytes == doctest::Approx(80.0));  // weight * bytes
  CHECK(m.stats()[1].bytes == doctest::Approx(80.0));
  CHECK(m.stats()[0].busy_s == doctest::Approx(20.0));
  CHECK(m.stats()[0].peak_util == doctest::Approx(0.4));
  CHECK(m.stats()[1].peak_util == doctest::Approx(1.0));
}

TEST_CASE("flows added and completed over time: reserve() changes nothing, shares stay max-min (randomised)") {
  // Completions remove flows from the middle of resource lists (swap with the last entry); the survivors
  // must keep exact max-min shares, and a model that reserved room up front must give identical results.
  std::mt19937_64 rng(4242);
  for (int trial = 0; trial < 20; ++trial) {
    const int nres = 2 + static_cast<int>(rng() % 10);
    std::vector<double> cap(nres);
    for (auto& c : cap) c = 1.0 + static_cast<double>(rng() % 50);
    FlowModel a(cap), b(cap);
    b.reserve(64);
    std::vector<std::vector<std::uint32_t>> routes;
    std::vector<double> w;
    std::vector<FlowModel::FlowId> ida, idb;
    std::vector<bool> live;
    double now = 0;
    std::size_t completions = 0;
    for (int round = 0; round < 30; ++round) {
      const int add = static_cast<int>(rng() % 4);
      if (add > 0 && round % 7 == 3) b.reserve(static_cast<std::size_t>(add));
      for (int i = 0; i < add; ++i) {
        std::vector<std::uint32_t> res;
        for (int r = 0; r < nres; ++r)
          if (rng() % 3 == 0) res.push_back(static_cast<std::uint32_t>(r));
        if (res.empty()) res.push_back(static_cast<std::uint32_t>(rng() % nres));
        const double wt = 1.0 + static_cast<double>(rng() % 3), bytes = 10.0 + static_cast<double>(rng() % 90);
        const auto tag = static_cast<std::uint64_t>(routes.size());
        routes.push_back(res);
        w.push_back(wt);
        live.push_back(true);
        ida.push_back(a.add(now, res, bytes, wt, 0, tag));
        idb.push_back(b.add(now, res, bytes, wt, 0, tag));
      }
      a.solve(now);
      b.solve(now);
      const double t = a.next_finish();
      REQUIRE(t == b.next_finish());
      if (t == FlowModel::kInf) continue;
      std::vector<std::uint64_t> da, db;
      a.complete(t, 0, da);
      b.complete(t, 0, db);
      REQUIRE(da == db);
      completions += da.size();
      for (auto tag : da) live[tag] = false;
      now = t;
      a.solve(now);
      b.solve(now);
      std::vector<double> load(nres, 0);
      for (std::size_t f = 0; f < routes.size(); ++f)
        if (live[f]) {
          CHECK(a.rate(ida[f]) == b.rate(idb[f]));
          for (auto r : routes[f]) load[r] += w[f] * a.rate(ida[f]);
        }
      for (int r = 0; r < nres; ++r) CHECK(load[r] <= cap[r] * (1 + 1e-12));
      for (std::size_t f = 0; f < routes.size(); ++f) {
        if (!live[f]) continue;
        bool has_bottleneck = false;
        for (auto r : routes[f]) {
          if (load[r] < cap[r] * (1 - 1e-9)) continue;
          bool is_max = true;
          for (std::size_t g = 0; g < routes.size(); ++g)
            if (live[g])
              for (auto rg : routes[g])
                if (rg == r && a.rate(ida[g]) > a.rate(ida[f]) * (1 + 1e-9)) is_max = false;
          if (is_max) has_bottleneck = true;
        }
        CHECK(has_bottleneck);
      }
    }
    CHECK(a.active_flows() == b.active_flows());
    CHECK(completions > 0);
  }
}

TEST_CASE("incremental re-solve equals a from-scratch solve after every event (randomised)") {
  // Two models see the same adds and completions; `full` re-solves whole components, `inc` only the flows at
  // or above the threshold. Caps, weights and routes vary; some flows sit on resources that others saturate,
  // so both kept and re-solved flows occur. Rates must agree to rounding after every solve, and the
  // completions (tags and times) must be identical.
  std::mt19937_64 rng(9001);
  std::size_t kept = 0, inc_visits = 0, full_visits = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int nres = 3 + static_cast<int>(rng() % 14);
    std::vector<double> cap(nres);
    for (auto& c : cap) c = 1.0 + static_cast<double>(rng() % 50);
    FlowModel inc(cap), full(cap);
    full.set_incremental(false);
    std::vector<FlowModel::FlowId> idi, idf;
    std::vector<bool> live;
    double now = 0;
    for (int round = 0; round < 60; ++round) {
      const int add = round < 5 ? 3 + static_cast<int>(rng() % 6) : static_cast<int>(rng() % 3);
      for (int i = 0; i < add; ++i) {
        std::vector<std::uint32_t> res;
        const int hops = 1 + static_cast<int>(rng() % 4);
        for (int h = 0; h < hops; ++h) {
          const auto r = static_cast<std::uint32_t>(rng() % nres);
          if (std::find(res.begin(), res.end(), r) == res.end()) res.push_back(r);
        }
        const double wt = 1.0 + static_cast<double>(rng() % 3);
        const double bytes = 5.0 + static_cast<double>(rng() % 200);
        const double capr = rng() % 5 == 0 ? 0.5 + static_cast<double>(rng() % 20) : 0.0;
        const auto tag = static_cast<std::uint64_t>(live.size());
        live.push_back(true);
        idi.push_back(inc.add(now, res, bytes, wt, capr, tag));
        idf.push_back(full.add(now, res, bytes, wt, capr, tag));
      }
      inc.solve(now);
      full.solve(now);
      for (std::size_t f = 0; f < live.size(); ++f)
        if (live[f]) REQUIRE(inc.rate(idi[f]) == doctest::Approx(full.rate(idf[f])).epsilon(1e-12));
      const double t = full.next_finish();
      REQUIRE(inc.next_finish() == doctest::Approx(t).epsilon(1e-12));
      if (t == FlowModel::kInf) continue;
      std::vector<std::uint64_t> di, df;
      inc.complete(t, 1e-9 * t, di);
      full.complete(t, 1e-9 * t, df);
      REQUIRE(di == df);
      for (auto tag : df) live[tag] = false;
      now = t;
      inc.solve(now);
      full.solve(now);
      for (std::size_t f = 0; f < live.size(); ++f)
        if (live[f]) {
          REQUIRE(inc.rate(idi[f]) == doctest::Approx(full.rate(idf[f])).epsilon(1e-12));
          REQUIRE(inc.remaining(idi[f], now) == doctest::Approx(full.remaining(idf[f], now)).epsilon(1e-9));
        }
    }
    kept += inc.kept_flow_visits();
    inc_visits += inc.solved_flow_visits();
    full_visits += full.solved_flow_visits();
  }
  CHECK(kept > 0);                     // the threshold did keep flows
  CHECK(inc_visits < full_visits);     // and the incremental model re-solved fewer
}

TEST_CASE("flows at the threshold with an untouched saturated bottleneck keep their rate: skewed all-to-all vs from scratch") {
  // n senders x n receivers, flow i->j over out_i, an optional shared core link, in_j; the bytes depend on the
  // destination (a skewed all_to_allv), so the flows to one receiver finish together and the others, all at
  // the same fair share of their receiver's link, are pinned there. Receiver-bound (fat out links) and mixed
  // cases; rates and finishes must match the whole-component reference after every event.
  std::mt19937_64 rng(4242);
  std::size_t pinned = 0, inc_visits = 0, full_visits = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const std::uint32_t n = 4 + static_cast<std::uint32_t>(rng() % 6);
    const bool core = trial % 3 == 2;
    std::vector<double> cap(2 * n + 1);
    for (std::uint32_t i = 0; i < n; ++i) cap[i] = (trial % 2 ? 10.0 : 1.5) * n;  // out_i
    for (std::uint32_t j = 0; j < n; ++j) cap[n + j] = 1.0 * n;                   // in_j
    cap[2 * n] = 0.7 * n * n;                                                       // core
    FlowModel inc(cap), full(cap);
    full.set_incremental(false);
    std::vector<FlowModel::FlowId> idi, idf;
    std::vector<double> share(n);
    for (auto& s : share) s = 1.0 + static_cast<double>(rng() % 40);
    for (std::uint32_t i = 0; i < n; ++i)
      for (std::uint32_t j = 0; j < n; ++j) {
        if (i == j) continue;
        std::vector<std::uint32_t> res{i, n + j};
        if (core && (i + j) % 2) res.push_back(2 * n);
        const auto tag = static_cast<std::uint64_t>(idi.size());
        idi.push_back(inc.add(0, res, share[j], 1.0, 0, tag));
        idf.push_back(full.add(0, res, share[j], 1.0, 0, tag));
      }
    std::vector<bool> live(idi.size(), true);
    double now = 0;
    for (;;) {
      inc.solve(now);
      full.solve(now);
      for (std::size_t f = 0; f < live.size(); ++f)
        if (live[f]) {
          REQUIRE(inc.rate(idi[f]) == doctest::Approx(full.rate(idf[f])).epsilon(1e-12));
          REQUIRE(inc.remaining(idi[f], now) == doctest::Approx(full.remaining(idf[f], now)).epsilon(1e-9));
        }
      const double t = full.next_finish();
      if (t == FlowModel::kInf) {
        REQUIRE(inc.next_finish() == FlowModel::kInf);
        break;
      }
      REQUIRE(inc.next_finish() == doctest::Approx(t).epsilon(1e-12));
      std::vector<std::uint64_t> di, df;
      inc.complete(t, 1e-9 * t, di);
      full.complete(t, 1e-9 * t, df);
      REQUIRE(di == df);
      for (auto tag : df) live[tag] = false;
      now = t;
    }
    pinned += inc.pinned_flow_visits();
    inc_visits += inc.solved_flow_visits();
    full_visits += full.solved_flow_visits();
  }
  CHECK(pinned > 0);                        // flows at the threshold were kept by their receiver's link
  CHECK(inc_visits * 2 < full_visits);      // and the re-solves are less than half as large
}

TEST_CASE("long churn: after the hop store is compacted, removals and rates stay those of a fresh model (randomised)") {
  // Thousands of flows start and finish on 60 resources, so the hop store (compacted once more than half of
  // its entries are dead and it holds over 4,096) is compacted several times and every resource's flow list is
  // swap-removed from at every position. Periodically the live flows are re-added to a fresh model: the rates
  // must be the same, so each list still names exactly the flows on its resource with their own hop entries.
  std::mt19937_64 rng(31337);
  const std::uint32_t nres = 60;
  std::vector<double> cap(nres);
  for (auto& c : cap) c = 5.0 + static_cast<double>(rng() % 40);
  FlowModel m(cap);
  struct Live {
    FlowModel::FlowId id;
    std::vector<std::uint32_t> res, mult;
    std::uint32_t members;
    double w, capr;
    std::uint64_t tag;
  };
  std::vector<Live> live;
  std::size_t added_hops = 0, checks = 0;
  double now = 0;
  auto add_one = [&] {
    Live l;
    const int hops = 2 + static_cast<int>(rng() % 7);
    for (int h = 0; h < hops; ++h) {
      const auto r = static_cast<std::uint32_t>(rng() % nres);
      if (std::find(l.res.begin(), l.res.end(), r) == l.res.end()) l.res.push_back(r);
    }
    l.members = rng() % 4 == 0 ? 2 + static_cast<std::uint32_t>(rng() % 3) : 1;
    for (std::size_t k = 0; k < l.res.size(); ++k) l.mult.push_back(1 + static_cast<std::uint32_t>(rng() % l.members));
    l.w = 1.0 + static_cast<double>(rng() % 3);
    l.capr = rng() % 6 == 0 ? 0.5 + static_cast<double>(rng() % 10) : 0.0;
    const double bytes = 1.0 + static_cast<double>(rng() % 100);
    l.tag = added_hops;  // unique: grows with every flow
    l.id = l.members == 1 ? m.add(now, l.res, bytes, l.w, l.capr, l.tag)
                          : m.add_symmetric(now, l.res, l.mult, l.members, bytes, l.w, l.capr, l.tag);
    added_hops += l.res.size();
    live.push_back(std::move(l));
  };
  for (int i = 0; i < 150; ++i) add_one();
  for (int round = 0; round < 3000; ++round) {
    m.solve(now);
    if (round % 100 == 0) {
      FlowModel fresh(cap);
      std::vector<FlowModel::FlowId> fid;
      for (const Live& l : live)
        fid.push_back(l.members == 1 ? fresh.add(now, l.res, 1.0, l.w, l.capr, 0)
                                     : fresh.add_symmetric(now, l.res, l.mult, l.members, 1.0, l.w, l.capr, 0));
      fresh.solve(now);
      for (std::size_t i = 0; i < live.size(); ++i)
        REQUIRE(m.rate(live[i].id) == doctest::Approx(fresh.rate(fid[i])).epsilon(1e-12));
      for (std::uint32_t r = 0; r < nres; ++r) {
        std::size_t on = 0;
        for (const Live& l : live) on += std::count(l.res.begin(), l.res.end(), r);
        REQUIRE(m.flows_on(r) == on);
      }
      ++checks;
    }
    // Finish random live flows (cancel: any position in their resources' lists), or the earliest ones.
    if (rng() % 2) {
      for (int n = 1 + static_cast<int>(rng() % 4); n > 0; --n) {
        const std::size_t i = rng() % live.size();
        m.cancel(live[i].id, now);
        live[i] = std::move(live.back());
        live.pop_back();
      }
    } else {
      const double t = m.next_finish();
      std::vector<std::uint64_t> done;
      m.complete(t, 1e-9 * t, done);
      now = t;
      REQUIRE(!done.empty());
      std::vector<Live> keep;
      for (Live& l : live)
        if (std::find(done.begin(), done.end(), l.tag) == done.end()) keep.push_back(std::move(l));
      REQUIRE(keep.size() + done.size() == live.size());
      live = std::move(keep);
    }
    while (live.size() < 150) add_one();
  }
  CHECK(checks == 30);
  CHECK(added_hops > 5 * 4096);  // ~7 times the store's size at compaction (4,096 + the live ~750): compacted repeatedly
}

TEST_CASE("shadow hops: long flows give the same rates, times and link statistics bit for bit as without (randomised)") {
  // Long plain flows (>= 64 resources, most of them their own, as a lockstep wave's links) beside short flows
  // that come and go on some of those resources (a shadow becomes shared again, then private): a model with
  // shadow hops and one without see the same adds and completions; rates, completion times and tags, and every
  // resource's statistics (read mid-run with settled_stats and at the end) must be equal, not just close.
  std::mt19937_64 rng(2719);
  std::size_t shadows = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const int nres = 400;
    std::vector<double> cap(nres);
    for (auto& c : cap) c = 1.0 + static_cast<double>(rng() % 6);
    FlowModel sh(cap), ref(cap);
    ref.set_shadow_hops(false);
    std::vector<FlowModel::FlowId> ids, idr;
    std::vector<bool> live;
    double now = 0;
    auto add = [&](const std::vector<std::uint32_t>& res, double bytes, double wt, double capr) {
      const auto tag = static_cast<std::uint64_t>(live.size());
      live.push_back(true);
      ids.push_back(sh.add(now, res, bytes, wt, capr, tag));
      idr.push_back(ref.add(now, res, bytes, wt, capr, tag));
    };
    for (int round = 0; round < 80; ++round) {
      if (round % 20 == 0) {  // a few long flows over disjoint-ish stretches of the resources
        for (int l = 0; l < 3; ++l) {
          std::vector<std::uint32_t> res;
          const auto base = static_cast<std::uint32_t>(rng() % nres);
          const int len = 64 + static_cast<int>(rng() % 100);
          for (int h = 0; h < len; ++h) {
            const auto r = static_cast<std::uint32_t>((base + 2 * h + (rng() % 2)) % nres);
            if (std::find(res.begin(), res.end(), r) == res.end()) res.push_back(r);
          }
          add(res, 200.0 + static_cast<double>(rng() % 400), 1.0 + static_cast<double>(rng() % 2), 0);
        }
      }
      const int nshort = static_cast<int>(rng() % 4);
      for (int i = 0; i < nshort; ++i) {
        std::vector<std::uint32_t> res;
        const int hops = 1 + static_cast<int>(rng() % 4);
        for (int h = 0; h < hops; ++h) {
          const auto r = static_cast<std::uint32_t>(rng() % nres);
          if (std::find(res.begin(), res.end(), r) == res.end()) res.push_back(r);
        }
        const double capr = rng() % 5 == 0 ? 0.5 + static_cast<double>(rng() % 4) : 0.0;
        add(res, 1.0 + static_cast<double>(rng() % 40), 1.0 + static_cast<double>(rng() % 3), capr);
      }
      sh.solve(now);
      ref.solve(now);
      if (round % 9 == 4) {  // statistics read mid-run (as sim::Network's mirror orbits do)
        const auto r = static_cast<std::uint32_t>(rng() % nres);
        const auto a = sh.settled_stats(r, now), b = ref.settled_stats(r, now);
        REQUIRE(a.bytes == b.bytes);
        REQUIRE(a.busy_s == b.busy_s);
        REQUIRE(a.peak_util == b.peak_util);
      }
      for (int r = 0; r < nres; r += 7) REQUIRE(sh.flows_on(r) == ref.flows_on(r));
      if (round % 13 == 6) {  // a flow cancelled (as a bundle to split is), long ones included
        const std::size_t f = rng() % live.size();
        if (live[f]) {
          REQUIRE(sh.cancel(ids[f], now) == ref.cancel(idr[f], now));
          live[f] = false;
          sh.solve(now);
          ref.solve(now);
        }
      }
      const double t = ref.next_finish();
      REQUIRE(sh.next_finish() == t);
      if (t == FlowModel::kInf) continue;
      std::vector<std::uint64_t> ds, dr;
      sh.complete(t, 1e-9 * t, ds);
      ref.complete(t, 1e-9 * t, dr);
      REQUIRE(ds == dr);
      for (auto tag : dr) live[tag] = false;
      now = t;
      sh.solve(now);
      ref.solve(now);
      for (std::size_t f = 0; f < live.size(); ++f)
        if (live[f]) {
          REQUIRE(sh.rate(ids[f]) == ref.rate(idr[f]));
          REQUIRE(sh.remaining(ids[f], now) == ref.remaining(idr[f], now));
        }
    }
    sh.settle_stats(now);
    ref.settle_stats(now);
    for (int r = 0; r < nres; ++r) {
      REQUIRE(sh.stats()[r].bytes == ref.stats()[r].bytes);
      REQUIRE(sh.stats()[r].busy_s == ref.stats()[r].busy_s);
      REQUIRE(sh.stats()[r].peak_util == ref.stats()[r].peak_util);
    }
    CHECK(ref.shadow_hops() == 0);
    shadows += sh.shadow_hops();
  }
  CHECK(shadows > 1000);  // the long flows did get shadow hops
}
