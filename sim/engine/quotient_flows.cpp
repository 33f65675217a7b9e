#include "sim/engine/quotient_flows.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "sim/base/error.hpp"
#include "sim/engine/network.hpp"

namespace fabricsim::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::uint32_t kNoRes = 0xffffffffu;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct LinkKey {
  double cap, lat;
  int kind, tail_kind, tail_tier, head_kind, head_tier;
  bool operator==(const LinkKey&) const = default;
  bool operator<(const LinkKey& o) const {
    return std::tie(cap, lat, kind, tail_kind, tail_tier, head_kind, head_tier) <
           std::tie(o.cap, o.lat, o.kind, o.tail_kind, o.tail_tier, o.head_kind, o.head_tier);
  }
};

// A flow class: the multiset of link classes on the route (two independent additive 64-bit hashes of it
// and the hop count: a multiset is identified by its sum of per-element random values, and two different
// multisets collide with probability about 2^-128) and the transfer's timing attributes.
struct FlowKey {
  std::uint64_t h1 = 0, h2 = 0;
  std::uint32_t hops = 0, steps = 1;
  double bytes = 0, weight = 1, step_latency_s = 0, rate_cap_Bps = 0;
  bool includes_route = false, deferred = false;
  bool operator==(const FlowKey&) const = default;
};
struct FlowKeyHash {
  std::size_t operator()(const FlowKey& k) const {
    std::uint64_t h = k.h1 ^ splitmix64(k.h2 + k.hops);
    auto mix = [&](double d) {
      std::uint64_t u;
      static_assert(sizeof u == sizeof d);
      std::memcpy(&u, &d, sizeof u);
      h = splitmix64(h ^ u);
    };
    mix(k.bytes);
    mix(k.weight);
    mix(k.step_latency_s);
    mix(k.rate_cap_Bps);
    return static_cast<std::size_t>(h ^ (std::uint64_t{k.steps} << 1) ^ k.includes_route ^ (std::uint64_t{k.deferred} << 63));
  }
};

// A transfer's class key: its timing attributes and the multiset of link colours `lc` on its route (computed
// into `route`), hashed with the per-colour random values rnd1/rnd2.
FlowKey flow_key(const models::Transfer& tr, topo::Routing& routing, std::vector<topo::LinkDir>& route,
                 const std::vector<std::uint32_t>& lc, const std::vector<std::uint64_t>& rnd1,
                 const std::vector<std::uint64_t>& rnd2) {
  FlowKey k;
  k.steps = tr.steps;
  k.bytes = tr.bytes;
  k.weight = tr.weight;
  k.step_latency_s = tr.step_latency_s;
  k.rate_cap_Bps = tr.rate_cap_Bps;
  k.includes_route = tr.latency_includes_route;
  k.deferred = tr.latency_deferred;
  models::transfer_route(routing, tr, route);
  for (topo::LinkDir d : route) {
    k.h1 += rnd1[lc[d]];
    k.h2 += rnd2[lc[d]];
  }
  k.hops = static_cast<std::uint32_t>(route.size());
  return k;
}

struct ClassAcc {
  QuotientFlowClass info;
  models::Transfer rep;  // the first transfer (timing attributes)
  double route_s = 0;    // its route latency
  std::vector<std::uint32_t> count;  // per link direction: flows of this class crossing it
};

struct Abort {
  std::string reason;
};

// A new flow class represented by its first transfer `tr`, whose route is `route` (per-direction latencies latd).
ClassAcc new_class(const models::Transfer& tr, const std::vector<topo::LinkDir>& route, const std::vector<double>& latd) {
  ClassAcc a;
  a.info.src = tr.src;
  a.info.dst = tr.dst;
  a.info.weight = tr.weight;
  a.info.bytes = tr.bytes * tr.steps;
  a.rep = tr;
  a.rep.deps.clear();
  for (topo::LinkDir d : route) a.route_s += latd[d];
  return a;
}

// The weighted fluid simulation over class representatives (the timing rules of sim::Network and the
// progressive filling of sim::FlowModel, with multiplicities).
struct QClass {
  double w = 1, bytes = 0, cap = 0, start = 0;
  std::vector<std::pair<std::uint32_t, double>> res;  // (quotient resource, flows of the class per link)
  int state = 0;  // 0 latency phase, 1 bandwidth phase, 2 finished
  double rem = 0, tupd = 0, rate = 0, finish = kInf, new_rate = 0;
  bool frozen = false;
  std::uint32_t mark = 0;
};

struct QuotientSim {
  std::vector<QClass> cls;
  std::vector<double> cap;                         // per quotient resource
  std::vector<std::vector<std::uint32_t>> users;   // resource -> classes crossing it
  double tol_floor = 0;
  std::size_t events = 0;

  std::vector<std::uint32_t> dirty_cls, dirty_res, res_mark;
  std::uint32_t epoch = 0;
  std::vector<double> free_, W_;
  std::vector<std::uint32_t> unf_;

  void solve(double now) {
    if (dirty_cls.empty() && dirty_res.empty()) return;
    ++epoch;
    std::vector<std::uint32_t> comp_c, comp_r, stack_c, stack_r;
    auto visit_c = [&](std::uint32_t c) {
      if (cls[c].state != 1 || cls[c].mark == epoch) return;
      cls[c].mark = epoch;
      stack_c.push_back(c);
    };
    auto visit_r = [&](std::uint32_t r) {
      if (res_mark[r] == epoch) return;
      res_mark[r] = epoch;
      stack_r.push_back(r);
    };
    for (std::uint32_t c : dirty_cls) visit_c(c);
    for (std::uint32_t r : dirty_res) visit_r(r);
    dirty_cls.clear();
    dirty_res.clear();
    while (!stack_c.empty() || !stack_r.empty()) {
      if (!stack_c.empty()) {
        const std::uint32_t c = stack_c.back();
        stack_c.pop_back();
        comp_c.push_back(c);
        for (const auto& [r, m] : cls[c].res) visit_r(r);
      } else {
        const std::uint32_t r = stack_r.back();
        stack_r.pop_back();
        comp_r.push_back(r);
        for (std::uint32_t c : users[r]) visit_c(c);
      }
    }
    // Components (flows sharing links, transitively) are solved separately, as FlowModel does: this keeps
    // the rates of untouched classes bit-identical. Walk each connected piece of comp_c on its own.
    std::sort(comp_c.begin(), comp_c.end());
    std::vector<std::uint8_t> done(cls.size(), 0);
    for (std::uint32_t seed : comp_c) {
      if (done[seed]) continue;
      std::vector<std::uint32_t> cc, rr, st{seed};
      done[seed] = 1;
      ++epoch;
      while (!st.empty()) {
        const std::uint32_t c = st.back();
        st.pop_back();
        cc.push_back(c);
        for (const auto& [r, m] : cls[c].res) {
          if (res_mark[r] == epoch) continue;
          res_mark[r] = epoch;
          rr.push_back(r);
          for (std::uint32_t c2 : users[r])
            if (cls[c2].state == 1 && !done[c2]) {
              done[c2] = 1;
              st.push_back(c2);
            }
        }
      }
      std::sort(cc.begin(), cc.end());
      solve_component(now, cc, rr);
    }
  }

  void solve_component(double now, const std::vector<std::uint32_t>& cc, const std::vector<std::uint32_t>& rr) {
    for (std::uint32_t r : rr) {
      free_[r] = cap[r];
      W_[r] = 0;
      unf_[r] = 0;
    }
    std::vector<std::pair<double, std::uint32_t>> capped;
    for (std::uint32_t c : cc) {
      QClass& q = cls[c];
      q.rem -= q.rate * (now - q.tupd);
      if (q.rem < 0) q.rem = 0;
      q.tupd = now;
      q.frozen = false;
      for (const auto& [r, m] : q.res) {
        W_[r] += m * q.w;
        ++unf_[r];
      }
      if (q.cap > 0) capped.emplace_back(q.cap, c);
    }
    std::sort(capped.begin(), capped.end());
    auto freeze = [&](std::uint32_t c, double x) {
      QClass& q = cls[c];
      q.frozen = true;
      q.new_rate = x;
      for (const auto& [r, m] : q.res) {
        free_[r] -= m * q.w * x;
        W_[r] -= m * q.w;
        --unf_[r];
      }
    };
    double level = 0;
    std::size_t remaining = cc.size(), ci = 0;
    while (remaining > 0) {
      double rl = kInf;
      std::uint32_t rmin = 0;
      for (std::uint32_t r : rr) {
        if (unf_[r] == 0) continue;
        double k = free_[r] / W_[r];
        if (!(k >= level)) k = level;  // rounding: levels never drop below the current level (FlowModel)
        if (k < rl) {
          rl = k;
          rmin = r;
        }
      }
      while (ci < capped.size() && cls[capped[ci].second].frozen) ++ci;
      const double cl = ci < capped.size() ? capped[ci].first : kInf;
      if (cl <= rl) {
        if (cl == kInf) throw std::logic_error("run_quotient: unconstrained flow class");
        level = std::max(level, cl);
        freeze(capped[ci].second, cl);
        ++ci;
        --remaining;
      } else {
        level = std::max(level, rl);
        for (std::uint32_t c : users[rmin])
          if (cls[c].state == 1 && !cls[c].frozen) {
            freeze(c, level);
            --remaining;
          }
        unf_[rmin] = 0;
      }
    }
    for (std::uint32_t c : cc) {
      QClass& q = cls[c];
      if (q.new_rate == q.rate && q.finish != kInf) continue;  // unchanged: keeps its projected finish
      q.rate = q.new_rate;
      q.finish = q.rate > 0 ? now + q.rem / q.rate : kInf;
    }
  }

  // Runs every class from time 0; returns the last finish (classes' finish times in `finish_out`).
  double run(double batch_tolerance_s, std::vector<double>& finish_out) {
    const std::size_t R = cap.size();
    free_.assign(R, 0);
    W_.assign(R, 0);
    unf_.assign(R, 0);
    res_mark.assign(R, 0);
    finish_out.assign(cls.size(), 0);
    std::vector<std::uint32_t> order(cls.size());
    for (std::uint32_t c = 0; c < cls.size(); ++c) order[c] = c;
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return cls[a].start < cls[b].start; });
    std::size_t next_start = 0, left = cls.size();
    double now = 0, last = 0;
    auto begin_bw = [&](std::uint32_t c) {
      QClass& q = cls[c];
      if (q.res.empty()) {  // no bandwidth phase (src == dst or 0 bytes): finishes at its start
        q.state = 2;
        finish_out[c] = now;
        last = std::max(last, now);
        --left;
        return;
      }
      q.state = 1;
      q.rem = q.bytes;
      q.tupd = now;
      q.rate = 0;
      q.finish = kInf;
      dirty_cls.push_back(c);
    };
    // Time 0: classes without a latency phase start their bandwidth phase at once (Network::ready).
    while (next_start < order.size() && cls[order[next_start]].start <= 0) begin_bw(order[next_start++]);
    solve(now);
    while (left > 0) {
      double next = next_start < order.size() ? cls[order[next_start]].start : kInf;
      for (const QClass& q : cls)
        if (q.state == 1) next = std::min(next, q.finish);
      if (next == kInf) throw std::logic_error("run_quotient: no progress");
      now = next;
      ++events;
      while (next_start < order.size() && cls[order[next_start]].start <= now) begin_bw(order[next_start++]);
      const double tl = std::max(batch_tolerance_s, 1e-10 * now + 1e-15);  // Network::tol
      double first = kInf;
      for (const QClass& q : cls)
        if (q.state == 1) first = std::min(first, q.finish);
      if (first <= now + tl) {
        for (std::uint32_t c = 0; c < cls.size(); ++c) {
          QClass& q = cls[c];
          if (q.state != 1 || !(q.finish <= now + tl)) continue;
          q.state = 2;
          finish_out[c] = now;
          last = std::max(last, now);
          --left;
          for (const auto& [r, m] : q.res) dirty_res.push_back(r);
        }
      }
      solve(now);
    }
    return last;
  }
};

void check_transfer(const models::Transfer& tr, std::size_t i, const topo::Topology& t) {
  check_transfer_fields(tr, "quotient", i, t);
  if (!tr.deps.empty())
    throw InputError("quotient: transfers[" + std::to_string(i) + "].deps",
                     "the quotient runs dependency-free transfer sets only");
}

// The quotient's fluid simulation, from the flow classes and their multiplicities per link class.
QuotientResult simulate(std::vector<ClassAcc>& acc, const std::vector<std::vector<std::pair<std::uint32_t, double>>>& mult,
                        std::size_t nlinkclasses, const std::function<double(std::uint32_t)>& cap_of, std::size_t seen,
                        double fixed_latency_s, const QuotientOptions& opt, QuotientResult out) {
  QuotientSim sim;
  std::vector<std::uint32_t> res_of(nlinkclasses, kNoRes);
  for (std::uint32_t c = 0; c < acc.size(); ++c)
    for (const auto& [L, m] : mult[c])
      if (res_of[L] == kNoRes) {
        res_of[L] = static_cast<std::uint32_t>(sim.cap.size());
        sim.cap.push_back(cap_of(L));
      }
  sim.users.resize(sim.cap.size());
  sim.cls.resize(acc.size());
  for (std::uint32_t c = 0; c < acc.size(); ++c) {
    QClass& q = sim.cls[c];
    const models::Transfer& tr = acc[c].rep;
    q.w = tr.weight;
    q.bytes = tr.bytes * tr.steps;
    q.cap = tr.rate_cap_Bps;
    q.start = models::transfer_latency_s(tr, tr.src == tr.dst ? 0.0 : acc[c].route_s);
    if (tr.src != tr.dst && q.bytes > 0)
      for (const auto& [L, m] : mult[c]) {
        q.res.emplace_back(res_of[L], m);
        sim.users[res_of[L]].push_back(c);
      }
    acc[c].info.start_bw_s = q.start;
  }
  std::vector<double> finish;
  const double tol = opt.tolerance_for_flows ? opt.tolerance_for_flows(seen) : opt.batch_tolerance_s;
  if (!(tol >= 0) || !std::isfinite(tol)) throw InputError("batch tolerance", "expected a time >= 0 seconds");
  const double last = sim.run(tol, finish);
  out.applied = true;
  out.makespan_s = fixed_latency_s + last;
  out.link_classes = sim.cap.size();
  out.events = sim.events;
  out.classes.clear();
  out.classes.reserve(acc.size());
  for (std::uint32_t c = 0; c < acc.size(); ++c) {
    acc[c].info.finish_s = finish[c];
    out.classes.push_back(acc[c].info);
  }
  return out;
}

// Partial symmetry: the coarsest equitable partition that refines the structural link classes, found by
// colour refinement on the flow-link incidence (each round re-streams the transfers): flows are classed by
// the multiset of their links' colours, then every link direction is re-coloured by (its colour, the
// multiset of flow classes crossing it, as two additive 64-bit hashes), until the number of link colours
// stops growing. The partition is then equitable (links of a colour see the same multiset of flow classes),
// so the quotient is exact as in the one-pass case, with more classes.
QuotientResult refine(const TransferProducer& produce, double fixed_latency_s, const topo::Topology& t,
                      topo::Routing& routing, const std::vector<double>& capd, const std::vector<double>& latd,
                      std::vector<std::uint32_t> lc, std::size_t nl, const QuotientOptions& opt, QuotientResult out) {
  const std::size_t ndirs = lc.size();
  std::vector<std::uint64_t> sig1(ndirs), sig2(ndirs);
  std::vector<topo::LinkDir> route;
  for (int round = 1; round <= opt.max_refine_rounds; ++round) {
    std::vector<std::uint64_t> rnd1(nl), rnd2(nl);
    for (std::size_t k = 0; k < nl; ++k) {
      rnd1[k] = splitmix64(2 * k + 1);
      rnd2[k] = splitmix64(~(2 * k + 1));
    }
    // Representative link direction per colour: the first; flows crossing it give c(L, F).
    std::vector<topo::LinkDir> rep_of(nl, 0xffffffffu);
    std::vector<std::uint32_t> rep_idx(ndirs, 0xffffffffu);
    for (topo::LinkDir d = 0; d < ndirs; ++d)
      if (rep_of[lc[d]] == 0xffffffffu) {
        rep_of[lc[d]] = d;
        rep_idx[d] = lc[d];
      }
    std::fill(sig1.begin(), sig1.end(), 0);
    std::fill(sig2.begin(), sig2.end(), 0);
    std::vector<ClassAcc> acc;
    std::unordered_map<FlowKey, std::uint32_t, FlowKeyHash> index;
    std::unordered_map<std::uint64_t, std::uint32_t> rep_count;  // (class << 32 | colour) -> flows on the rep
    std::vector<std::uint64_t> crnd1, crnd2;
    std::size_t seen = 0;
    out.flow_class.clear();
    try {
      produce([&](const models::Transfer& tr) {
        const FlowKey k = flow_key(tr, routing, route, lc, rnd1, rnd2);
        auto it = index.find(k);
        std::uint32_t c;
        if (it == index.end()) {
          if (acc.size() >= opt.max_flow_classes)
            throw Abort{"partial symmetry: more than " + std::to_string(opt.max_flow_classes) + " flow classes"};
          c = static_cast<std::uint32_t>(acc.size());
          index.emplace(k, c);
          acc.push_back(new_class(tr, route, latd));
          crnd1.push_back(splitmix64(0x51ed270b27a5f3c1ull ^ (2 * c + 1)));
          crnd2.push_back(splitmix64(0x2545f4914f6cdd1dull + (2 * c + 1)));
        } else {
          c = it->second;
        }
        ++acc[c].info.flows;
        if (tr.bytes * tr.steps > 0)
          for (topo::LinkDir d : route) {
            sig1[d] += crnd1[c];
            sig2[d] += crnd2[c];
            if (rep_idx[d] != 0xffffffffu) ++rep_count[(std::uint64_t{c} << 32) | rep_idx[d]];
          }
        if (opt.keep_flow_classes) out.flow_class.push_back(c);
        ++seen;
      });
    } catch (const Abort& a) {
      out.reason += "; " + a.reason;
      out.flow_class.clear();
      return out;
    }
    // Re-colour the link directions.
    std::vector<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t, topo::LinkDir>> keys(ndirs);
    for (topo::LinkDir d = 0; d < ndirs; ++d) keys[d] = {lc[d], sig1[d], sig2[d], d};
    std::sort(keys.begin(), keys.end());
    std::vector<std::uint32_t> nlc(ndirs);
    std::size_t nn = 0;
    for (std::size_t i = 0; i < ndirs; ++i) {
      if (i == 0 || std::get<0>(keys[i]) != std::get<0>(keys[i - 1]) || std::get<1>(keys[i]) != std::get<1>(keys[i - 1]) ||
          std::get<2>(keys[i]) != std::get<2>(keys[i - 1]))
        ++nn;
      nlc[std::get<3>(keys[i])] = static_cast<std::uint32_t>(nn - 1);
    }
    if (nn == nl) {  // stable: equitable
      std::vector<std::vector<std::pair<std::uint32_t, double>>> mult(acc.size());
      std::vector<std::pair<std::uint64_t, std::uint32_t>> rc(rep_count.begin(), rep_count.end());
      std::sort(rc.begin(), rc.end());
      for (const auto& [key, n] : rc) mult[key >> 32].emplace_back(static_cast<std::uint32_t>(key & 0xffffffffu), n);
      out.flows = seen;
      out.refine_rounds = round;
      out.reason.clear();
      return simulate(acc, mult, nl, [&](std::uint32_t L) { return capd[rep_of[L]]; }, seen, fixed_latency_s, opt,
                      std::move(out));
    }
    lc = std::move(nlc);
    nl = nn;
  }
  out.reason += "; partial symmetry: not stable after " + std::to_string(opt.max_refine_rounds) + " rounds";
  out.flow_class.clear();
  return out;
}

}  // namespace

QuotientResult run_quotient(const TransferProducer& produce, double fixed_latency_s, const topo::Topology& t,
                            topo::Routing& routing, const models::Calibration& calib, const QuotientOptions& opt) {
  if (!(fixed_latency_s >= 0)) throw InputError("schedule: fixed_latency_s", "expected a time >= 0 seconds");
  if (!(opt.batch_tolerance_s >= 0) || !std::isfinite(opt.batch_tolerance_s))
    throw InputError("batch tolerance", "expected a time >= 0 seconds");
  QuotientResult out;
  // Link classes.
  const std::size_t ndirs = 2 * static_cast<std::size_t>(t.num_links());
  const std::vector<double> capd = link_capacities(t, calib);
  std::vector<double> latd(ndirs);
  std::vector<std::uint32_t> lc(ndirs);
  std::vector<LinkKey> lkeys;
  {
    std::vector<std::pair<LinkKey, std::uint32_t>> keys(ndirs);
    for (topo::LinkDir d = 0; d < ndirs; ++d) {
      const topo::Link& link = t.link(topo::Topology::link_of(d));
      latd[d] = link.latency_s + calib.of(link.kind).latency_s;  // Network::route_latency_s, per hop
      const topo::Node& a = t.node(t.dir_src(d));
      const topo::Node& b = t.node(t.dir_dst(d));
      keys[d] = {LinkKey{capd[d], latd[d], static_cast<int>(link.kind), static_cast<int>(a.kind), a.tier,
                         static_cast<int>(b.kind), b.tier},
                 d};
    }
    std::sort(keys.begin(), keys.end(), [](const auto& x, const auto& y) {
      return x.first < y.first || (x.first == y.first && x.second < y.second);
    });
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (i == 0 || !(keys[i].first == keys[i - 1].first)) lkeys.push_back(keys[i].first);
      lc[keys[i].second] = static_cast<std::uint32_t>(lkeys.size() - 1);
    }
  }
  std::vector<std::uint64_t> rnd1(lkeys.size()), rnd2(lkeys.size());
  for (std::size_t k = 0; k < lkeys.size(); ++k) {
    rnd1[k] = splitmix64(2 * k + 1);
    rnd2[k] = splitmix64(~(2 * k + 1));
  }

  // One pass over the transfers: route, class, per-link counts.
  std::vector<ClassAcc> acc;
  std::unordered_map<FlowKey, std::uint32_t, FlowKeyHash> index;
  std::vector<topo::LinkDir> route;
  FlowKey last_key;
  std::uint32_t last_class = 0;
  bool have_last = false;
  std::size_t seen = 0;
  const std::size_t max_classes =
      std::min(opt.max_flow_classes, std::max<std::size_t>(1, (std::size_t{64} << 20) / (4 * std::max<std::size_t>(ndirs, 1))));
  try {
    produce([&](const models::Transfer& tr) {
      check_transfer(tr, seen, t);
      const FlowKey k = flow_key(tr, routing, route, lc, rnd1, rnd2);
      std::uint32_t c;
      if (have_last && k == last_key) {
        c = last_class;
      } else {
        auto it = index.find(k);
        if (it == index.end()) {
          if (acc.size() >= max_classes) throw Abort{"more than " + std::to_string(max_classes) + " flow classes"};
          c = static_cast<std::uint32_t>(acc.size());
          index.emplace(k, c);
          acc.push_back(new_class(tr, route, latd));
          acc.back().count.assign(ndirs, 0);
        } else {
          c = it->second;
        }
        last_key = k;
        last_class = c;
        have_last = true;
      }
      ClassAcc& a = acc[c];
      ++a.info.flows;
      // Transfers without a bandwidth phase load no link.
      if (tr.bytes * tr.steps > 0)
        for (topo::LinkDir d : route) ++a.count[d];
      if (opt.keep_flow_classes) out.flow_class.push_back(c);
      ++seen;
    });
  } catch (const Abort& a) {
    out.reason = a.reason;
    out.flows = seen;
    out.flow_class.clear();
    return out;
  }
  out.flows = seen;

  // The check: per flow class, equal counts on every link direction of a link class.
  std::vector<std::int64_t> per(lkeys.size());
  std::vector<topo::LinkDir> where(lkeys.size());
  std::vector<std::vector<std::pair<std::uint32_t, double>>> mult(acc.size());
  for (std::uint32_t c = 0; c < acc.size(); ++c) {
    std::fill(per.begin(), per.end(), -1);
    const auto& cnt = acc[c].count;
    for (topo::LinkDir d = 0; d < ndirs; ++d) {
      const std::uint32_t L = lc[d];
      if (per[L] < 0) {
        per[L] = cnt[d];
        where[L] = d;
      } else if (per[L] != cnt[d]) {
        auto name = [&](topo::LinkDir x) { return t.node(t.dir_src(x)).id + "->" + t.node(t.dir_dst(x)).id; };
        out.reason = "not symmetric: link " + name(where[L]) + " carries " + std::to_string(per[L]) +
                     " transfers of the class of " + t.node(acc[c].info.src).id + "->" + t.node(acc[c].info.dst).id + ", link " +
                     name(d) + " of the same class carries " + std::to_string(cnt[d]);
        out.flow_class.clear();
        if (opt.refine) {
          acc.clear();
          return refine(produce, fixed_latency_s, t, routing, capd, latd, lc, lkeys.size(), opt, std::move(out));
        }
        return out;
      }
    }
    for (std::uint32_t L = 0; L < lkeys.size(); ++L)
      if (per[L] > 0) {
        mult[c].emplace_back(L, static_cast<double>(per[L]));
      }
    std::vector<std::uint32_t>().swap(acc[c].count);
  }

  return simulate(acc, mult, lkeys.size(), [&](std::uint32_t L) { return lkeys[L].cap; }, seen, fixed_latency_s, opt,
                  std::move(out));
}

QuotientResult run_collective_quotient(const models::CollectiveSpec& spec, const topo::Topology& t,
                                       topo::Routing& routing, const models::Calibration& calib,
                                       const QuotientOptions& opt, models::Schedule* header) {
  // Two passes would build the schedule twice; instead the stream feeds run_quotient directly, and the
  // header (fixed latency) comes back once the stream has ended: run_quotient adds it to the makespan then.
  // Unequal blocks split the flows into classes by size that are (almost always) not symmetric; refusing
  // them here saves a pass over every transfer (a replay prices thousands of skewed all_to_allv calls).
  if (spec.op == models::Op::AllToAllv && !spec.matrix.empty()) {
    const auto& m = spec.matrix;
    std::optional<std::uint64_t> blk;
    for (std::size_t i = 0; i < m.size(); ++i)
      for (std::size_t j = 0; j < m[i].size(); ++j) {
        if (i == j) continue;
        if (!blk) blk = m[i][j];
        if (m[i][j] != *blk) {
          QuotientResult no;
          no.reason = "unequal sizes: the all_to_allv matrix has different off-diagonal blocks";
          return no;
        }
      }
  }
  std::optional<models::Schedule> head;
  bool direct = true;
  QuotientResult r = run_quotient(
      [&](const models::TransferSink& sink) {
        head = models::stream_direct(spec, t, routing, calib, sink);
        direct = head.has_value();
      },
      0.0, t, routing, calib, opt);
  if (!direct) {
    QuotientResult no;
    no.reason = "not a dependency-free direct all_to_all";
    return no;
  }
  if (r.applied) r.makespan_s += head->fixed_latency_s;
  if (header) *header = std::move(*head);
  return r;
}

MirrorQuotient mirror_quotient(const models::Schedule& s, std::uint32_t groups, const RouteInto& route,
                               const std::vector<double>& cap, const std::vector<double>& hop_latency_s) {
  MirrorQuotient q;
  q.groups = groups;
  const std::size_t n = s.transfers.size();
  if (groups < 2 || n == 0 || n % groups != 0) {
    q.reason = "not " + std::to_string(groups) + " blocks of equal size";
    q.kind = "blocks differ";
    return q;
  }
  for (const models::Transfer& tr : s.transfers)
    if (tr.via != topo::kNoNode) {  // `route` routes a transfer by its ends only
      q.reason = q.kind = "relayed hops";
      return q;
    }
  const std::size_t n0 = n / groups;
  q.per_group = static_cast<std::uint32_t>(n0);
  auto moves = [](const models::Transfer& tr) { return tr.src != tr.dst && tr.bytes * tr.steps > 0; };
  // 1. Block g is the image of block 0: same attributes, dependencies shifted by the block.
  for (std::size_t g = 1; g < groups; ++g)
    for (std::size_t i = 0; i < n0; ++i) {
      const models::Transfer& a = s.transfers[i];
      const models::Transfer& b = s.transfers[i + g * n0];
      bool same = a.bytes == b.bytes && a.steps == b.steps && a.weight == b.weight &&
                  a.rate_cap_Bps == b.rate_cap_Bps && a.step_latency_s == b.step_latency_s &&
                  a.latency_includes_route == b.latency_includes_route &&
                  a.latency_deferred == b.latency_deferred && moves(a) == moves(b) &&
                  a.deps.size() == b.deps.size();
      for (std::size_t k = 0; same && k < a.deps.size(); ++k) same = b.deps[k] == a.deps[k] + g * n0;
      if (!same) {
        q.reason = "transfer " + std::to_string(i + g * n0) + " is not the image of transfer " + std::to_string(i);
        q.kind = "blocks differ";
        return q;
      }
    }
  // 2. Orbits: link directions joined by "hop h of transfer i's copy in block 0 and in block g" (union-find).
  std::vector<std::uint32_t> local(cap.size(), kNoRes);  // link direction -> its local id, in order of appearance
  std::vector<topo::LinkDir> dirs;
  std::vector<std::uint32_t> parent;
  auto id = [&](topo::LinkDir d) {
    std::uint32_t& x = local[d];
    if (x == kNoRes) {
      x = static_cast<std::uint32_t>(dirs.size());
      dirs.push_back(d), parent.push_back(x);
    }
    return x;
  };
  auto find = [&](std::uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  std::vector<std::uint32_t> hops_off(n0 + 1, 0), hops;  // per transfer: its copies' routes, block by block
  // The check on the classes of the first `upto` transfers, with the orbits they make.
  auto prefix_equitable = [&](std::size_t upto) {
    std::vector<std::uint32_t> size(dirs.size(), 0), cnt(dirs.size(), 0), touched;
    for (std::uint32_t x = 0; x < dirs.size(); ++x) ++size[find(x)];
    std::vector<std::pair<std::uint32_t, std::uint32_t>> per;  // (orbit root, count)
    for (std::size_t i = 0; i < upto; ++i) {
      touched.clear();
      for (std::uint32_t k = hops_off[i]; k < hops_off[i + 1]; ++k)
        if (cnt[hops[k]]++ == 0) touched.push_back(hops[k]);
      per.clear();
      for (std::uint32_t x : touched) per.emplace_back(find(x), cnt[x]);
      std::sort(per.begin(), per.end());
      for (std::size_t a = 0; a < per.size();) {
        std::size_t b = a;
        while (b < per.size() && per[b].first == per[a].first) ++b;
        if (b - a != size[per[a].first] || per[a].second != per[b - 1].second) return false;
        a = b;
      }
      for (std::uint32_t x : touched) cnt[x] = 0;
    }
    return true;
  };
  std::vector<topo::LinkDir> r0, rg;
  std::size_t next_check = 64;
  for (std::size_t i = 0; i < n0; ++i) {
    if (moves(s.transfers[i])) {
      route(s.transfers[i].src, s.transfers[i].dst, r0);
      for (topo::LinkDir d : r0) hops.push_back(id(d));
      for (std::size_t g = 1; g < groups; ++g) {
        const models::Transfer& b = s.transfers[i + g * n0];
        route(b.src, b.dst, rg);
        if (rg.size() != r0.size()) {
          q.reason = "the route of transfer " + std::to_string(i + g * n0) + " has " + std::to_string(rg.size()) +
                     " hops, its block-0 image " + std::to_string(r0.size());
          q.kind = "routes differ";
          return q;
        }
        for (std::size_t h = 0; h < rg.size(); ++h) {
          const std::uint32_t x = id(rg[h]);
          hops.push_back(x);
          const std::uint32_t p0 = find(id(r0[h])), p1 = find(x);
          if (p0 != p1) parent[std::max(p0, p1)] = std::min(p0, p1);
        }
      }
    }
    hops_off[i + 1] = static_cast<std::uint32_t>(hops.size());
    // Orbits only grow as transfers are added and a class's counts are fixed, so a class that crosses its
    // orbit unequally now does so in the end: checking a prefix first refuses a non-equitable schedule after
    // routing a few of its transfers instead of all of them.
    // Checked after 64, 512, 4096, ... transfers.
    if (i + 1 == next_check && i + 1 < n0) {
      next_check *= 8;
      if (!prefix_equitable(i + 1)) {
        q.reason = "not equitable (the classes of the first " + std::to_string(i + 1) + " transfers)";
        q.kind = "not equitable";
        return q;
      }
    }
  }
  // 3. Orbits in the order of their smallest link direction; one capacity and per-hop latency each.
  std::vector<std::uint32_t> comp_orbit(dirs.size(), kNoRes);
  {
    std::vector<std::pair<topo::LinkDir, std::uint32_t>> by_dir(dirs.size());
    for (std::uint32_t x = 0; x < dirs.size(); ++x) by_dir[x] = {dirs[x], x};
    std::sort(by_dir.begin(), by_dir.end());
    for (const auto& [d, x] : by_dir) {
      const std::uint32_t root = find(x);
      if (comp_orbit[root] == kNoRes) {
        comp_orbit[root] = static_cast<std::uint32_t>(q.orbits.size());
        q.orbits.emplace_back();
      }
      auto& o = q.orbits[comp_orbit[root]];
      if (!o.empty() && (cap[d] != cap[o.front()] || hop_latency_s[d] != hop_latency_s[o.front()])) {
        q.reason = "link directions " + std::to_string(o.front()) + " and " + std::to_string(d) +
                   " are images of each other with different capacity or latency";
        q.kind = "unequal links";
        q.orbits.clear();
        return q;
      }
      o.push_back(d);
    }
  }
  // 4. The check (as run_quotient's): per class, the same number of copies on every link direction of an orbit.
  q.off.assign(n0 + 1, 0);
  std::vector<std::uint32_t> cnt(dirs.size(), 0), touched;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> per;  // (orbit, local link) crossed by the class
  for (std::size_t i = 0; i < n0; ++i) {
    touched.clear();
    for (std::uint32_t k = hops_off[i]; k < hops_off[i + 1]; ++k)
      if (cnt[hops[k]]++ == 0) touched.push_back(hops[k]);
    per.clear();
    for (std::uint32_t x : touched) per.emplace_back(comp_orbit[find(x)], x);
    std::sort(per.begin(), per.end());
    for (std::size_t a = 0; a < per.size();) {
      std::size_t b = a;
      while (b < per.size() && per[b].first == per[a].first) ++b;
      const std::uint32_t o = per[a].first, c = cnt[per[a].second];
      bool eq = b - a == q.orbits[o].size();
      for (std::size_t k = a; eq && k < b; ++k) eq = cnt[per[k].second] == c;
      if (!eq) {
        q.reason = "not equitable: the copies of transfer " + std::to_string(i) + " cross the " +
                   std::to_string(q.orbits[o].size()) + " link directions of the orbit of link direction " +
                   std::to_string(q.orbits[o].front()) + " unequally";
        q.kind = "not equitable";
        q.orbits.clear();
        q.off.clear();
        return q;
      }
      q.orbit.push_back(o);
      q.mult.push_back(c);
      a = b;
    }
    for (std::uint32_t x : touched) cnt[x] = 0;
    q.off[i + 1] = static_cast<std::uint32_t>(q.orbit.size());
  }
  q.ok = true;
  return q;
}

}  // namespace fabricsim::sim
