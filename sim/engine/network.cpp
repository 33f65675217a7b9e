#include "sim/engine/network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <stdexcept>
#include <string>

#include "sim/base/error.hpp"

namespace fabricsim::sim {

void check_transfer_fields(const models::Transfer& tr, const std::string& where, std::size_t i,
                           const topo::Topology& topo) {
  auto at = [&](const char* field) {
    std::string w = where;
    w.append(": transfers[").append(std::to_string(i)).append("]").append(field);
    return w;
  };
  if (tr.src >= topo.num_nodes() || tr.dst >= topo.num_nodes())
    throw InputError(at(""), "src/dst is not a node of topology '" + topo.name() + "'");
  if (!(tr.bytes >= 0) || !std::isfinite(tr.bytes)) throw InputError(at(".bytes"), "expected bytes >= 0");
  if (!(tr.weight > 0) || !std::isfinite(tr.weight)) throw InputError(at(".weight"), "expected a weight > 0");
  if (tr.steps == 0) throw InputError(at(".steps"), "expected steps >= 1");
  if (!(tr.step_latency_s >= 0) || !std::isfinite(tr.step_latency_s))
    throw InputError(at(".step_latency_s"), "expected a time >= 0 seconds");
  if (!(tr.rate_cap_Bps >= 0)) throw InputError(at(".rate_cap_Bps"), "expected a rate >= 0 bytes/s");
}

namespace {
constexpr std::uint64_t kIdxBits = 40;
constexpr std::uint64_t kIdxMask = (std::uint64_t{1} << kIdxBits) - 1;
constexpr std::uint64_t kReadyBit = std::uint64_t{1} << 63;  // latency-heap entry that makes a root ready
constexpr std::uint32_t kMaxRuns = 1u << 22;
constexpr std::size_t kMinBundleTransfers = 16;  // smaller dependency-free schedules run flow by flow
constexpr std::uint32_t kNoWave = 0xffffffffu;
// A block-0 transfer of a mirror-quotient run (Network::Run::qstate): where it is, so that expanding the run gives
// every copy the same state.
enum QState : std::uint8_t { kQWait, kQQueued, kQDelayed, kQLatency, kQBandwidth, kQDone };

std::uint64_t make_key(std::uint32_t slot, std::uint64_t idx) { return (std::uint64_t{slot} << kIdxBits) | idx; }
std::uint32_t key_slot(std::uint64_t k) { return static_cast<std::uint32_t>((k & ~kReadyBit) >> kIdxBits); }
std::uint64_t key_idx(std::uint64_t k) { return k & kIdxMask; }
bool lat_after(const auto& a, const auto& b) { return a.t_s > b.t_s || (a.t_s == b.t_s && a.key > b.key); }

}  // namespace

std::vector<double> link_capacities(const topo::Topology& t, const models::Calibration& c) {
  std::vector<double> cap(2 * t.num_links());
  for (topo::LinkId l = 0; l < t.num_links(); ++l) {
    const topo::Link& link = t.link(l);
    const double eff = c.of(link.kind).bw_efficiency;
    if (!(eff > 0) || !std::isfinite(eff))
      throw InputError("calibration '" + c.name + "': link." + topo::to_string(link.kind) + ".bw_efficiency",
                       "expected a number > 0, got " + std::to_string(eff));
    if (!(link.bandwidth_Bps > 0))
      throw InputError("topology '" + t.name() + "': link " + std::to_string(l), "bandwidth must be > 0");
    cap[2 * l] = cap[2 * l + 1] = link.bandwidth_Bps * eff;
  }
  return cap;
}

// Bundles of a dependency-free schedule (network.hpp). Node keys are transfer indices past the schedule's end
// (n + node index).
struct Network::Plan {
  struct Node {
    std::vector<std::uint32_t> members;        // transfer indices
    std::vector<std::uint32_t> res, mult;      // link directions crossed and by how many members
    std::vector<std::uint32_t> child_nodes;    // when split: these bundles ...
    std::vector<std::uint32_t> child_singles;  // ... and these transfers as single flows
    double lat = 0, bytes = 0, weight = 1, cap = 0;
  };
  std::shared_ptr<const models::Schedule> s;  // keeps the key valid
  std::vector<Node> nodes;
  std::vector<std::uint32_t> top_nodes, singles;  // what starts: bundles and single transfers
  std::vector<std::uint32_t> roots;  // their key indices in increasing order: singles, then transfers.size() + node
};

struct Network::WavePlan {
  struct Wave {
    std::vector<std::uint32_t> members;
    double latency_s = 0;                // the members' common latency phase
    std::vector<topo::LinkDir> route;    // the union of the members' (link-disjoint) routes
  };
  std::vector<std::uint32_t> wave_of;    // per transfer (kNoWave: it runs as its own flow)
  std::vector<Wave> waves;
  std::size_t hops = 0;                  // link directions held in the routes
};

// A schedule's checked dependencies (index_dependencies), shared by its runs: initial pending counts, successors
// (CSR) and, filled as transfers become ready, each one's latency phase on the index's routing (NaN: not yet).
struct Network::DepIndex {
  std::shared_ptr<const models::Schedule> s;  // keeps the key valid
  std::vector<std::uint32_t> pending, succ_off, succ;
  std::vector<std::uint32_t> roots;  // transfers without dependencies, increasing
  std::vector<double> lat;
};

struct Network::Run {
  std::uint32_t id = 0;
  std::shared_ptr<const models::Schedule> s;
  const Plan* plan = nullptr;  // bundled (no dependencies)
  // Lockstep waves (docs/engine.md "Lockstep waves"; schedules with dependencies): the schedule's wave plan
  // (shared by its runs) and, per wave, the members whose dependencies are not met yet; a wave's key index is
  // transfers.size() + its index.
  std::shared_ptr<const WavePlan> wave_plan;
  std::vector<std::uint32_t> wave_waiting;
  std::shared_ptr<DepIndex> dep;       // successors and latencies (not set for a run of a cached bundle plan)
  std::vector<std::uint32_t> pending;   // unmet dependencies per transfer
  std::vector<TransferTiming> timings;  // per transfer; empty without NetworkOptions::transfer_times
  std::size_t nt = 0;                   // transfers in the schedule (key indices from nt on: bundles, waves)
  bool alt = false;  // routes from the alternate routing
  // Mirror quotient (docs/engine.md), while set: only block 0 runs, as representatives; per block-0 transfer its
  // state, when its latency phase or delayed start ends, and its representative flow.
  std::shared_ptr<const MirrorQuotient> mq;
  std::vector<std::uint32_t> qorbit;  // the quotient's orbits -> Network::orbits_ indices
  std::vector<std::uint8_t> qstate;
  std::vector<double> qlat;
  std::vector<FlowModel::FlowId> qflow;
  // Delayed roots (start_schedule with root_delay_s > 0): one latency-heap entry walks roots[roots_next ..
  // roots_end) in key order, instead of one entry per root (the same order of events; Network::process).
  const std::vector<std::uint32_t>* roots = nullptr;
  std::size_t roots_next = 0, roots_end = 0;
  std::size_t done = 0;
  double start_s = 0;
  ScheduleDone cb;
};

Network::Network(EventQueue& q, const topo::Topology& t, topo::Routing& routing, const models::Calibration& calib,
                 NetworkOptions opt)
    : q_(q), topo_(t), routing_(routing), calib_(calib), opt_(opt), model_(link_capacities(t, calib)),
      orbit_at_(2 * static_cast<std::size_t>(t.num_links()), 0) {
  if (!(opt_.batch_tolerance_s >= 0) || !std::isfinite(opt_.batch_tolerance_s))
    throw InputError("batch tolerance", "expected a time >= 0 seconds");
}

Network::~Network() = default;

double Network::tol(double now) const { return std::max(opt_.batch_tolerance_s, 1e-10 * now + 1e-15); }

double Network::route_latency_s(topo::NodeId src, topo::NodeId dst, bool alternate_routing) {
  if (src == dst) return 0;
  double lat = 0;
  // Routes come from a bounded cache (network.hpp, route_of): caching every pair of a 4096-GPU all-to-all
  // would cost hundreds of MB, so only the first kRouteCacheEntries pairs are kept.
  for (topo::LinkDir d : route_of(src, dst, alternate_routing)) {
    const topo::Link& link = topo_.link(topo::Topology::link_of(d));
    lat += link.latency_s + calib_.of(link.kind).latency_s;
  }
  return lat;
}

double Network::route_latency_s(const models::Transfer& tr, bool alternate_routing) {
  if (tr.via == topo::kNoNode) return route_latency_s(tr.src, tr.dst, alternate_routing);
  return route_latency_s(tr.src, tr.via, alternate_routing) + route_latency_s(tr.via, tr.dst, alternate_routing);
}

std::span<const topo::LinkDir> Network::route_of(const models::Transfer& tr, bool alternate) {
  if (tr.via == topo::kNoNode) return route_of(tr.src, tr.dst, alternate);
  const auto first = route_of(tr.src, tr.via, alternate);
  via_buf_.assign(first.begin(), first.end());
  const auto second = route_of(tr.via, tr.dst, alternate);
  via_buf_.insert(via_buf_.end(), second.begin(), second.end());
  return std::span<const topo::LinkDir>(via_buf_.data(), via_buf_.size());
}

std::span<const topo::LinkDir> Network::route_of(topo::NodeId src, topo::NodeId dst, bool alternate) {
  if (alternate && !alt_routing_) throw std::logic_error("Network: no alternate routing set");
  // bit 63 tells the two routings apart (node ids are 32-bit)
  const std::uint64_t key =
      (static_cast<std::uint64_t>(alternate) << 63) | (static_cast<std::uint64_t>(src) << 32) | dst;
  auto it = route_cache_.find(key);
  if (it != route_cache_.end())
    return std::span<const topo::LinkDir>(route_pool_.data() + it->second.first, it->second.second);
  topo::Routing& routing = alternate ? *alt_routing_ : routing_;
  // A pair the Routing cached already (the replay's comm models route every call's transfers for their link
  // bytes before running it) is read from there, neither recomputed nor copied into this cache.
  if (const auto* cached = routing.cached_route(src, dst)) return std::span<const topo::LinkDir>(*cached);
  routing.compute_route(src, dst, route_buf_);
  if (route_cache_.size() < kRouteCacheEntries) {
    const auto off = static_cast<std::uint32_t>(route_pool_.size());
    route_pool_.insert(route_pool_.end(), route_buf_.begin(), route_buf_.end());
    route_cache_.emplace(key, std::make_pair(off, static_cast<std::uint32_t>(route_buf_.size())));
  }
  return std::span<const topo::LinkDir>(route_buf_.data(), route_buf_.size());
}

const Network::Plan* Network::plan_for(const std::shared_ptr<const models::Schedule>& s, bool alt) {
  auto& cache = plans_[alt ? 1 : 0];
  auto it = cache.find(s.get());
  if (it != cache.end()) return it->second.get();
  // Called for a validated schedule without dependencies. Level 1: same destination, bytes, weight, cap and
  // latency; level 2 (what a level-1 bundle splits into): same route after the first hop. Groups are formed by
  // sorting (key, transfer index): bundles in key order, members in index order, link directions in id order.
  const std::size_t n = s->transfers.size();
  auto plan = std::make_unique<Plan>();
  plan->s = s;
  // Each moving transfer's route, looked up once (copied: route_of may hand out its scratch).
  std::vector<std::uint32_t> off(n + 1, 0);
  std::vector<topo::LinkDir> hops;
  std::vector<double> lat(n, 0);
  using Key = std::tuple<topo::NodeId, double, double, double, double>;
  std::vector<std::pair<Key, std::uint32_t>> keyed;
  keyed.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const models::Transfer& tr = s->transfers[i];
    const double bytes = tr.bytes * tr.steps;
    if (tr.src == tr.dst || !(bytes > 0)) {
      plan->singles.push_back(i);
      off[i + 1] = static_cast<std::uint32_t>(hops.size());
      continue;
    }
    const auto route = route_of(tr, alt);
    double route_lat = 0;  // as route_latency_s
    for (topo::LinkDir d : route) {
      const topo::Link& link = topo_.link(topo::Topology::link_of(d));
      route_lat += link.latency_s + calib_.of(link.kind).latency_s;
    }
    hops.insert(hops.end(), route.begin(), route.end());
    off[i + 1] = static_cast<std::uint32_t>(hops.size());
    lat[i] = models::transfer_latency_s(tr, route_lat);
    keyed.emplace_back(Key{tr.dst, bytes, tr.weight, tr.rate_cap_Bps, lat[i]}, i);
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<topo::LinkDir> all;
  auto make_node = [&](std::vector<std::uint32_t> members) {
    Plan::Node nd;
    const models::Transfer& t0 = s->transfers[members[0]];
    nd.lat = lat[members[0]], nd.bytes = t0.bytes * t0.steps, nd.weight = t0.weight, nd.cap = t0.rate_cap_Bps;
    all.clear();
    for (std::uint32_t i : members) all.insert(all.end(), hops.begin() + off[i], hops.begin() + off[i + 1]);
    std::sort(all.begin(), all.end());
    for (std::size_t a = 0; a < all.size();) {
      std::size_t b = a + 1;
      while (b < all.size() && all[b] == all[a]) ++b;
      nd.res.push_back(all[a]), nd.mult.push_back(static_cast<std::uint32_t>(b - a));
      a = b;
    }
    nd.members = std::move(members);
    plan->nodes.push_back(std::move(nd));
    return static_cast<std::uint32_t>(plan->nodes.size() - 1);
  };
  // A route after its first hop.
  auto tail = [&](std::uint32_t i) {
    const std::uint32_t b = off[i] + (off[i + 1] > off[i] ? 1 : 0);
    return std::span<const topo::LinkDir>(hops.data() + b, off[i + 1] - b);
  };
  std::vector<std::uint32_t> members, by_tail;
  for (std::size_t a = 0; a < keyed.size();) {
    std::size_t b = a + 1;
    while (b < keyed.size() && !(keyed[a].first < keyed[b].first)) ++b;
    members.clear();
    for (std::size_t k = a; k < b; ++k) members.push_back(keyed[k].second);
    a = b;
    if (members.size() == 1) {
      plan->singles.push_back(members[0]);
      continue;
    }
    const std::uint32_t top = make_node(members);
    plan->top_nodes.push_back(top);
    by_tail = members;
    std::stable_sort(by_tail.begin(), by_tail.end(), [&](std::uint32_t x, std::uint32_t y) {
      const auto tx = tail(x), ty = tail(y);
      return std::lexicographical_compare(tx.begin(), tx.end(), ty.begin(), ty.end());
    });
    auto same_tail = [&](std::uint32_t x, std::uint32_t y) {
      const auto tx = tail(x), ty = tail(y);
      return std::equal(tx.begin(), tx.end(), ty.begin(), ty.end());
    };
    std::vector<std::uint32_t> child_nodes, child_singles;
    if (!same_tail(by_tail.front(), by_tail.back())) {
      for (std::size_t c = 0; c < by_tail.size();) {
        std::size_t e = c + 1;
        while (e < by_tail.size() && same_tail(by_tail[c], by_tail[e])) ++e;
        if (e - c == 1) child_singles.push_back(by_tail[c]);
        else child_nodes.push_back(make_node(std::vector<std::uint32_t>(by_tail.begin() + c, by_tail.begin() + e)));
        c = e;
      }
    } else {
      child_singles = members;
    }
    plan->nodes[top].child_nodes = std::move(child_nodes);
    plan->nodes[top].child_singles = std::move(child_singles);
  }
  // Level-2 bundles split into their members.
  for (auto& nd : plan->nodes)
    if (nd.child_nodes.empty() && nd.child_singles.empty()) nd.child_singles = nd.members;
  std::sort(plan->singles.begin(), plan->singles.end());
  plan->roots = plan->singles;
  for (std::uint32_t top : plan->top_nodes) plan->roots.push_back(static_cast<std::uint32_t>(n) + top);
  const Plan* out = plan.get();
  cache.emplace(s.get(), std::move(plan));
  return out;
}

std::uint32_t Network::start_transfer(const models::Transfer& tr, ScheduleDone on_done) {
  auto s = std::make_shared<models::Schedule>();
  s->op = "transfer";
  s->transfers.push_back(tr);
  s->transfers.back().deps.clear();
  return start_schedule(std::move(s), 0.0, std::move(on_done));
}

std::uint32_t Network::start_schedule(std::shared_ptr<const models::Schedule> s, ScheduleDone on_done) {
  const double d = s ? s->fixed_latency_s : 0;
  return start_schedule(std::move(s), d, std::move(on_done));
}

std::uint32_t Network::start_schedule(std::shared_ptr<const models::Schedule> s, double root_delay_s,
                                      ScheduleDone on_done) {
  return start_schedule(std::move(s), root_delay_s, std::move(on_done), false);
}

std::uint32_t Network::start_schedule(std::shared_ptr<const models::Schedule> s, double root_delay_s,
                                      ScheduleDone on_done, bool alternate_routing) {
  return start_schedule(std::move(s), root_delay_s, std::move(on_done), alternate_routing, 1);
}

std::uint32_t Network::start_schedule(std::shared_ptr<const models::Schedule> s, double root_delay_s,
                                      ScheduleDone on_done, bool alternate_routing, std::uint32_t mirror_groups) {
  if (alternate_routing && !alt_routing_) throw std::logic_error("Network: no alternate routing set");
  if (!s) throw std::logic_error("Network::start_schedule: null schedule");
  const std::string where = "schedule " + s->op + "/" + s->algorithm;
  if (!(root_delay_s >= 0) || !std::isfinite(root_delay_s))
    throw InputError(where + ": fixed_latency_s", "expected a time >= 0 seconds");
  const std::size_t n = s->transfers.size();
  if (n > kIdxMask / 2) throw InputError(where, "too many transfers");
  std::unique_ptr<Run> run;
  if (!spare_runs_.empty()) {
    run = std::move(spare_runs_.back());
    spare_runs_.pop_back();
  } else {
    run = std::make_unique<Run>();
  }
  run->s = s;
  run->alt = alternate_routing;
  // A schedule planned before was validated then (schedules are immutable and the plan holds it).
  if (opt_.bundle_flows && n >= kMinBundleTransfers) {
    auto it = plans_[alternate_routing ? 1 : 0].find(s.get());
    if (it != plans_[alternate_routing ? 1 : 0].end()) run->plan = it->second.get();
  }
  if (!run->plan) {
    index_dependencies(*run, where);
    // A bundled schedule has no dependencies and runs its bundles instead; others may run lockstep waves.
    if (opt_.bundle_flows && n >= kMinBundleTransfers && run->dep->succ.empty()) {
      run->plan = plan_for(s, alternate_routing);
    } else if (mirror_groups > 1) {
      // Mirror quotient: the blocks' own check here, the network's (orbits free or shared alike) once the run has
      // a slot; lockstep waves only when it does not apply.
      run->mq = mirror_plan(*run, mirror_groups);
      if (!run->mq->ok) {
        ++mirror_fallbacks_[run->mq->kind];
        run->mq.reset();
        attach_waves(*run);
      }
    } else {
      attach_waves(*run);
    }
  }
  run->nt = n;
  if (opt_.transfer_times) run->timings.assign(n, {});
  std::uint32_t slot;
  if (!free_runs_.empty()) {
    slot = free_runs_.back();
    free_runs_.pop_back();
  } else {
    if (runs_.size() >= kMaxRuns) throw std::logic_error("Network: too many concurrent schedules");
    slot = static_cast<std::uint32_t>(runs_.size());
    runs_.emplace_back();
  }
  run->start_s = q_.now();
  run->cb = std::move(on_done);
  run->id = next_id_++;
  const std::uint32_t id = run->id;
  runs_[slot] = std::move(run);
  ++running_;
  const double now = q_.now();
  Run& r = *runs_[slot];
  std::size_t active_n = n;  // transfers that start: block 0 only for a mirror quotient
  if (r.mq) {
    std::string why;
    if (claim_orbits(r, slot, why)) {
      ++mirror_runs_;
      active_n = r.mq->per_group;
      r.qstate.assign(active_n, kQWait);
      r.qlat.assign(active_n, 0);
      r.qflow.assign(active_n, 0);
    } else {
      ++mirror_fallbacks_[why];
      r.mq.reset();
      attach_waves(r);
    }
  }
  if (n == 0) {
    if (root_delay_s == 0) {
      finished_runs_.emplace_back(slot, now);
    } else {
      // delivered at now + delay through the latency heap: a ready entry with an index past the end
      push_latency(now + root_delay_s, kReadyBit | make_key(slot, kIdxMask));
    }
  } else if (r.plan) {
    const Plan& pl = *r.plan;
    const std::size_t starts = pl.roots.size();
    model_.reserve(starts);
    reserve_geometric(lat_heap_, lat_heap_.size() + starts);
    if (root_delay_s > 0) {
      delay_roots(r, slot, pl.roots, starts, now + root_delay_s);
    } else {
      // pushed in reverse key order so the ready stack pops them in key order
      for (std::size_t k = pl.roots.size(); k-- > 0;) ready_stack_.push_back(make_key(slot, pl.roots[k]));
    }
  } else {
    // Roots start together (an all-to-all: all of its transfers): room for them in one allocation each.
    const std::vector<std::uint32_t>& all_roots = r.dep->roots;
    const std::size_t roots =
        static_cast<std::size_t>(std::lower_bound(all_roots.begin(), all_roots.end(), active_n) - all_roots.begin());
    model_.reserve(roots);
    reserve_geometric(lat_heap_, lat_heap_.size() + 1);
    if (root_delay_s > 0) {
      if (r.mq)
        for (std::size_t k = 0; k < roots; ++k) r.qstate[all_roots[k]] = kQDelayed, r.qlat[all_roots[k]] = now + root_delay_s;
      delay_roots(r, slot, all_roots, roots, now + root_delay_s);
    } else {
      reserve_geometric(ready_stack_, ready_stack_.size() + roots);
      // Roots: pushed in reverse index order so the ready stack pops them in index order.
      for (std::size_t k = roots; k-- > 0;) {
        ready_stack_.push_back(make_key(slot, all_roots[k]));
        if (r.mq) r.qstate[all_roots[k]] = kQQueued;
      }
    }
  }
  if (!in_process_) {
    drain(now);
    ensure_wake();
  }
  return id;
}

void Network::index_dependencies(Run& r, const std::string& where) {
  auto& cache = dep_index_[r.alt ? 1 : 0];
  if (auto it = cache.find(r.s.get()); it != cache.end()) {
    r.dep = it->second;
  } else {
    r.dep = build_dep_index(r.s, where);
    const std::size_t n = r.s->transfers.size();
    // Bundled schedules (no dependencies) keep their plan instead.
    const bool bundled = opt_.bundle_flows && n >= kMinBundleTransfers && r.dep->succ.empty();
    if (!bundled && dep_index_transfers_ + n > kMaxDepIndexTransfers) {
      // Full: drop the indexes of schedules nobody else holds any more (they cannot be started again).
      for (auto& c : dep_index_)
        for (auto jt = c.begin(); jt != c.end();) {
          if (jt->second->s.use_count() == 1) {
            dep_index_transfers_ -= jt->second->pending.size();
            jt = c.erase(jt);
          } else {
            ++jt;
          }
        }
    }
    if (!bundled && dep_index_transfers_ + n <= kMaxDepIndexTransfers) {
      dep_index_transfers_ += n;
      cache.emplace(r.s.get(), r.dep);
    }
  }
  r.pending.assign(r.dep->pending.begin(), r.dep->pending.end());
}

void Network::recycle(std::unique_ptr<Run> r) {
  // A schedule that only this run and this Network's caches hold can never be started again: its cached dependency
  // index and bundle plan go with the run (else start_transfer's one-transfer schedules, or fresh copies a caller
  // starts, would pile up to the kMaxDepIndexTransfers cap, and bundle plans without any bound). Holders counted:
  // the run, its dependency index and its plan; a schedule also held by a wave or mirror plan (capped caches) or
  // by another run or the caller has a higher count and stays.
  if (r->s && r->s.use_count() == 1 + (r->dep ? 1 : 0) + (r->plan ? 1 : 0)) {
    const std::size_t at = r->alt ? 1 : 0;
    if (auto it = dep_index_[at].find(r->s.get()); it != dep_index_[at].end() && it->second == r->dep) {
      dep_index_transfers_ -= it->second->pending.size();
      dep_index_[at].erase(it);
    }
    if (auto it = plans_[at].find(r->s.get()); it != plans_[at].end() && it->second.get() == r->plan) {
      r->plan = nullptr;
      plans_[at].erase(it);
    }
  }
  if (spare_runs_.size() >= kMaxSpareRuns) return;
  // Every field back to a fresh Run's, the vectors keeping their capacity.
  r->s.reset();
  r->plan = nullptr;
  r->wave_plan.reset();
  r->wave_waiting.clear();
  r->dep.reset();
  r->pending.clear();
  r->timings.clear();
  r->nt = 0;
  r->alt = false;
  r->mq.reset();
  r->roots = nullptr;
  r->roots_next = r->roots_end = 0;
  r->qorbit.clear();
  r->qstate.clear();
  r->qlat.clear();
  r->qflow.clear();
  r->done = 0;
  r->start_s = 0;
  r->cb = nullptr;
  spare_runs_.push_back(std::move(r));
}

std::shared_ptr<Network::DepIndex> Network::build_dep_index(const std::shared_ptr<const models::Schedule>& sp,
                                                            const std::string& where) const {
  const models::Schedule& s = *sp;
  const std::size_t n = s.transfers.size();
  auto ix = std::make_shared<DepIndex>();
  ix->s = sp;
  ix->pending.assign(n, 0);
  ix->succ_off.assign(n + 1, 0);
  ix->lat.assign(n, std::numeric_limits<double>::quiet_NaN());
  for (std::size_t i = 0; i < n; ++i) {
    const models::Transfer& tr = s.transfers[i];
    check_transfer_fields(tr, where, i, topo_);
    for (std::uint32_t d : tr.deps) {
      if (d >= n || d == i)
        throw InputError(where + ": transfers[" + std::to_string(i) + "].deps",
                         "dependency " + std::to_string(d) + " is not another transfer index");
      ++ix->succ_off[d + 1];
      ++ix->pending[i];
    }
  }
  for (std::size_t i = 0; i < n; ++i) ix->succ_off[i + 1] += ix->succ_off[i];
  ix->succ.resize(ix->succ_off[n]);
  {
    std::vector<std::uint32_t> fill(ix->succ_off.begin(), ix->succ_off.end() - 1);
    for (std::size_t i = 0; i < n; ++i)
      for (std::uint32_t d : s.transfers[i].deps) ix->succ[fill[d]++] = static_cast<std::uint32_t>(i);
  }
  // cycle check (Kahn)
  std::vector<std::uint32_t> pend = ix->pending, stack;
  for (std::uint32_t i = 0; i < n; ++i)
    if (pend[i] == 0) stack.push_back(i);
  std::size_t seen = 0;
  while (!stack.empty()) {
    const std::uint32_t i = stack.back();
    stack.pop_back();
    ++seen;
    for (std::uint32_t k = ix->succ_off[i]; k < ix->succ_off[i + 1]; ++k)
      if (--pend[ix->succ[k]] == 0) stack.push_back(ix->succ[k]);
  }
  if (seen != n) throw InputError(where + ": deps", "the dependencies contain a cycle");
  for (std::uint32_t i = 0; i < n; ++i)
    if (ix->pending[i] == 0) ix->roots.push_back(i);
  return ix;
}

void Network::attach_waves(Run& r) {
  const auto& trs = r.s->transfers;
  if (std::none_of(trs.begin(), trs.end(), [](const models::Transfer& tr) { return tr.lockstep >= 0; })) return;
  // One wave plan per schedule and routing, kept while the cached plans hold at most kMaxWavePlanHops link
  // directions (a replay starts the same schedules over and over).
  auto& cache = wave_plans_[r.alt ? 1 : 0];
  if (auto it = cache.find(r.s.get()); it != cache.end()) {
    r.wave_plan = it->second.second;
  } else {
    r.wave_plan = build_waves(r);
    if (wave_plan_hops_ + r.wave_plan->hops <= kMaxWavePlanHops) {
      wave_plan_hops_ += r.wave_plan->hops;
      cache.emplace(r.s.get(), std::make_pair(r.s, r.wave_plan));
    }
  }
  if (r.wave_plan->waves.empty()) {
    r.wave_plan.reset();
    return;
  }
  r.wave_waiting.resize(r.wave_plan->waves.size());
  for (std::size_t w = 0; w < r.wave_waiting.size(); ++w)
    r.wave_waiting[w] = static_cast<std::uint32_t>(r.wave_plan->waves[w].members.size());
}

std::shared_ptr<const Network::WavePlan> Network::build_waves(const Run& r) {
  // Transfers that may run in lockstep (docs/engine.md, "Lockstep waves"): same lockstep id, DAG depth (longest
  // dependency chain from a root), bytes, steps, weight, rate cap and latency phase. A wave's members have the
  // same depth, so no member depends on another and every dependency between waves goes to a greater depth:
  // waiting for a whole wave cannot deadlock. Within such a group, each transfer joins the first sub-wave after
  // every sub-wave that already crosses one of its link directions, so each wave's routes are link-disjoint and
  // its union route holds every member's links once.
  const auto& trs = r.s->transfers;
  const std::size_t n = trs.size();
  const DepIndex& ix = *r.dep;
  std::vector<std::uint32_t> depth(n, 0), pend = ix.pending, stack;
  for (std::uint32_t i = 0; i < n; ++i)
    if (pend[i] == 0) stack.push_back(i);
  while (!stack.empty()) {
    const std::uint32_t i = stack.back();
    stack.pop_back();
    for (std::uint32_t k = ix.succ_off[i]; k < ix.succ_off[i + 1]; ++k) {
      const std::uint32_t j = ix.succ[k];
      depth[j] = std::max(depth[j], depth[i] + 1);
      if (--pend[j] == 0) stack.push_back(j);
    }
  }
  using Key = std::tuple<std::int32_t, std::uint32_t, double, std::uint32_t, double, double, double>;
  std::map<Key, std::vector<std::uint32_t>> groups;
  for (std::uint32_t i = 0; i < n; ++i) {
    const models::Transfer& tr = trs[i];
    if (tr.lockstep < 0 || tr.src == tr.dst || !(tr.bytes * tr.steps > 0)) continue;
    const double lat = models::transfer_latency_s(tr, route_latency_s(tr, r.alt));
    groups[Key{tr.lockstep, depth[i], tr.bytes, tr.steps, tr.weight, tr.rate_cap_Bps, lat}].push_back(i);
  }
  auto plan = std::make_shared<WavePlan>();
  plan->wave_of.assign(n, kNoWave);
  std::unordered_map<topo::LinkDir, std::uint32_t> next_free;  // link direction -> first sub-wave not crossing it
  std::vector<std::vector<std::uint32_t>> sub;
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    next_free.clear();
    sub.clear();
    for (std::uint32_t i : members) {
      const auto route = route_of(trs[i], r.alt);
      std::uint32_t b = 0;
      for (auto d : route)
        if (auto it = next_free.find(d); it != next_free.end()) b = std::max(b, it->second);
      // Every sub-wave from b on is disjoint from this route. No cap on a wave's size: capped waves (at most 256
      // link directions, once needed by FlowModel::remove_flow's route scan) split a Bruck step into many waves
      // whose rates differ, each finishing at its own time (docs/performance.md, the 100,000-GPU cluster).
      for (auto d : route) next_free[d] = b + 1;
      if (sub.size() <= b) sub.resize(b + 1);
      sub[b].push_back(i);
    }
    for (auto& m : sub) {
      if (m.size() < 2) continue;
      WavePlan::Wave w;
      w.latency_s = std::get<6>(key);
      for (std::uint32_t i : m) {
        const auto route = route_of(trs[i], r.alt);
        w.route.insert(w.route.end(), route.begin(), route.end());
        plan->wave_of[i] = static_cast<std::uint32_t>(plan->waves.size());
      }
      plan->hops += w.route.size();
      w.members = std::move(m);
      plan->waves.push_back(std::move(w));
    }
  }
  if (n + plan->waves.size() > kIdxMask) throw std::logic_error("Network: too many transfers and waves");
  return plan;
}

void Network::ready(std::uint64_t key, double t) {
  Run& r = *runs_[key_slot(key)];
  const std::uint64_t i = key_idx(key);
  if (i >= r.nt) {  // a bundle
    const Plan::Node& nd = r.plan->nodes[i - r.nt];
    if (!r.timings.empty())
      for (std::uint32_t m : nd.members) r.timings[m].start_s = t;
    start_phase(key, t, nd.lat);
    return;
  }
  const models::Transfer& tr = r.s->transfers[i];
  if (!r.timings.empty()) r.timings[i].start_s = t;
  if (r.wave_plan && r.wave_plan->wave_of[i] != kNoWave) {
    // A member of a lockstep wave: the wave starts its latency phase once its last member is ready.
    const std::uint32_t wi = r.wave_plan->wave_of[i];
    const WavePlan::Wave& w = r.wave_plan->waves[wi];
    if (--r.wave_waiting[wi] > 0) return;
    const std::uint64_t wk = make_key(key_slot(key), r.nt + wi);
    start_phase(wk, t, w.latency_s);
    return;
  }
  double lat;
  if (!r.dep) {  // a single transfer of a cached bundle plan
    lat = models::transfer_latency_s(tr, route_latency_s(tr, r.alt));
  } else {
    double& known = r.dep->lat[i];
    if (std::isnan(known)) known = models::transfer_latency_s(tr, route_latency_s(tr, r.alt));
    lat = known;
  }
  if (r.mq) r.qstate[i] = kQLatency, r.qlat[i] = t + lat;
  start_phase(key, t, lat);
}

void Network::delay_roots(Run& r, std::uint32_t slot, const std::vector<std::uint32_t>& roots, std::size_t count,
                          double at_s) {
  if (count == 0) return;
  if (!opt_.batch_root_delays) {
    for (std::size_t k = count; k-- > 0;) push_latency(at_s, kReadyBit | make_key(slot, roots[k]));
    return;
  }
  r.roots = &roots;
  r.roots_next = 0;
  r.roots_end = count;
  push_latency(at_s, kReadyBit | make_key(slot, roots[0]));
}

void Network::push_latency(double at_s, std::uint64_t key) {
  lat_heap_.push_back(LatEntry{at_s, key});
  std::push_heap(lat_heap_.begin(), lat_heap_.end(), [](const LatEntry& a, const LatEntry& b) { return lat_after(a, b); });
}

void Network::start_phase(std::uint64_t key, double t, double latency_s) {
  if (latency_s > 0) push_latency(t + latency_s, key);
  else begin_bandwidth(key, t);
}

void Network::begin_bandwidth(std::uint64_t key, double t) {
  Run& r = *runs_[key_slot(key)];
  if (key_idx(key) >= r.nt && r.wave_plan) {  // a lockstep wave: one flow over its members' routes
    const WavePlan::Wave& w = r.wave_plan->waves[key_idx(key) - r.nt];
    const models::Transfer& tr = r.s->transfers[w.members.front()];
    if (live_orbits_ > 0) touch(w.route, t);
    model_.add(t, std::span<const std::uint32_t>(w.route.data(), w.route.size()), tr.bytes * tr.steps, tr.weight,
               tr.rate_cap_Bps, key);
    return;
  }
  if (key_idx(key) >= r.nt) {
    const Plan::Node& nd = r.plan->nodes[key_idx(key) - r.nt];
    if (live_orbits_ > 0) touch(nd.res, t);
    model_.add_bundle(t, nd.res, nd.mult, static_cast<std::uint32_t>(nd.members.size()), nd.bytes, nd.weight, nd.cap,
                      key);
    return;
  }
  const models::Transfer& tr = r.s->transfers[key_idx(key)];
  const double bytes = tr.bytes * tr.steps;
  if (tr.src == tr.dst || !(bytes > 0)) {
    finish(key, t);
    return;
  }
  const std::uint64_t i = key_idx(key);
  if (r.mq) {  // a representative: each orbit its copies cross, with how many of them cross each of its links
    const MirrorQuotient& q = *r.mq;
    route_buf_.clear();
    for (std::uint32_t k = q.off[i]; k < q.off[i + 1]; ++k) route_buf_.push_back(q.orbits[q.orbit[k]].front());
    r.qflow[i] = model_.add_symmetric(
        t, std::span<const std::uint32_t>(route_buf_.data(), route_buf_.size()),
        std::span<const std::uint32_t>(q.mult.data() + q.off[i], q.off[i + 1] - q.off[i]), q.groups, bytes, tr.weight,
        tr.rate_cap_Bps, key);
    r.qstate[i] = kQBandwidth;
    return;
  }
  auto route = route_of(tr, r.alt);
  if (live_orbits_ > 0) {
    const std::vector<topo::LinkDir> mine(route.begin(), route.end());
    touch(mine, t);
    route = route_of(tr, r.alt);  // expanding may have reused the route scratch
  }
  model_.add(t, std::span<const std::uint32_t>(route.data(), route.size()), bytes, tr.weight, tr.rate_cap_Bps, key);
}

void Network::finish(std::uint64_t key, double t) {
  const std::uint32_t slot = key_slot(key);
  Run& r = *runs_[slot];
  const std::uint64_t i = key_idx(key);
  if (r.plan) {
    if (i >= r.nt) {
      const Plan::Node& nd = r.plan->nodes[i - r.nt];
      if (r.timings.empty()) {  // no transfer times: the members finish at once
        r.done += nd.members.size();
        if (r.done == r.nt) finished_runs_.emplace_back(slot, t);
        return;
      }
      for (std::uint32_t m : nd.members) finish(make_key(slot, m), t);
      return;
    }
    if (!r.timings.empty()) r.timings[i].finish_s = t;
    if (++r.done == r.nt) finished_runs_.emplace_back(slot, t);
    return;
  }
  const DepIndex& ix = *r.dep;
  if (r.mq) {  // a block-0 transfer of a mirror quotient
    if (!r.timings.empty()) r.timings[i].finish_s = t;
    r.qstate[i] = kQDone;
    for (std::uint32_t k = ix.succ_off[i]; k < ix.succ_off[i + 1]; ++k) {
      const std::uint32_t s = ix.succ[k];
      if (--r.pending[s] == 0) {
        ready_stack_.push_back(make_key(slot, s));
        r.qstate[s] = kQQueued;
      }
    }
    if (++r.done == r.mq->per_group) {  // every block gets block 0's times
      const std::size_t n0 = r.mq->per_group;
      if (!r.timings.empty())
        for (std::size_t g = 1; g < r.mq->groups; ++g)
          for (std::size_t j = 0; j < n0; ++j) r.timings[g * n0 + j] = r.timings[j];
      release_orbits(r, slot, t);
      r.mq.reset();
      r.done = r.nt;
      finished_runs_.emplace_back(slot, t);
    }
    return;
  }
  if (i >= r.nt) {  // a lockstep wave: every member finishes now
    for (std::uint32_t m : r.wave_plan->waves[i - r.nt].members) finish(make_key(slot, m), t);
    return;
  }
  if (!r.timings.empty()) r.timings[i].finish_s = t;
  for (std::uint32_t k = ix.succ_off[i]; k < ix.succ_off[i + 1]; ++k) {
    const std::uint32_t s = ix.succ[k];
    if (--r.pending[s] == 0) ready_stack_.push_back(make_key(slot, s));
  }
  if (++r.done == r.nt) finished_runs_.emplace_back(slot, t);
}

void Network::drain(double t) {
  while (!ready_stack_.empty()) {
    const std::uint64_t k = ready_stack_.back();
    ready_stack_.pop_back();
    ready(k, t);
  }
}

void Network::on_event(EventQueue& q, std::uint64_t tag) {
  if (!wake_pending_ || tag != wake_token_) return;  // superseded wake-up
  wake_pending_ = false;
  process(q.now());
}

void Network::process(double now) {
  in_process_ = true;
  auto cmp = [](const LatEntry& a, const LatEntry& b) { return lat_after(a, b); };
  // 1. latency phases that end now (and delayed roots that become ready now)
  while (!lat_heap_.empty() && lat_heap_.front().t_s <= now) {
    const std::uint64_t key = lat_heap_.front().key;
    const double at = lat_heap_.front().t_s;
    std::pop_heap(lat_heap_.begin(), lat_heap_.end(), cmp);
    lat_heap_.pop_back();
    if (key & kReadyBit) {
      const std::uint64_t k = key & ~kReadyBit;
      const std::uint32_t slot = key_slot(k);
      Run* r = key_idx(k) == kIdxMask ? nullptr : runs_[slot].get();
      if (!r) {
        finished_runs_.emplace_back(slot, now);  // empty schedule
      } else if (r->roots_next < r->roots_end && key_idx(k) == (*r->roots)[r->roots_next]) {
        // Delayed roots: each in key order, as if each had its own entry at `at`; the walk yields to any entry
        // due now that such an entry would have come after.
        for (;;) {
          ready(make_key(slot, (*r->roots)[r->roots_next++]), now);
          if (r->roots_next == r->roots_end) break;
          drain(now);
          const LatEntry next{at, kReadyBit | make_key(slot, (*r->roots)[r->roots_next])};
          if (!lat_heap_.empty() && lat_heap_.front().t_s <= now && lat_after(next, lat_heap_.front())) {
            push_latency(next.t_s, next.key);
            break;
          }
        }
      } else {
        ready(k, now);
      }
    } else {
      begin_bandwidth(key, now);
    }
    drain(now);
  }
  // 2. flows that finish now (within the batching tolerance)
  const double tl = tol(now);
  if (model_.next_finish() <= now + tl) {
    done_.clear();
    model_.complete(now, tl, done_);
    for (std::uint64_t k : done_) finish(k, now);
    drain(now);
  }
  // 3. new rates for the components touched now (bundles without a common bottleneck split and re-solved)
  model_.solve(now);
  if (!model_.split_requests().empty()) split_bundles(now);
  in_process_ = false;
  // 4. finished schedules
  if (!finished_runs_.empty()) {
    auto fin = std::move(finished_runs_);
    finished_runs_.clear();
    for (auto& [slot, t] : fin) {
      std::unique_ptr<Run> r = std::move(runs_[slot]);
      free_runs_.push_back(slot);
      --running_;
      ScheduleRun out;
      out.id = r->id;
      out.start_s = r->start_s;
      out.finish_s = t;
      if (opt_.transfer_times) out.transfers = std::move(r->timings);
      ScheduleDone cb = std::move(r->cb);
      recycle(std::move(r));
      if (cb) cb(out);
    }
  }
  ensure_wake();
}

void Network::split_bundles(double now) {
  while (!model_.split_requests().empty()) {
    const std::vector<FlowModel::FlowId> split = model_.split_requests();
    for (FlowModel::FlowId f : split) {
      const std::uint64_t key = model_.user(f);
      const double left = model_.cancel(f, now);
      ++splits_;
      Run& r = *runs_[key_slot(key)];
      const Plan::Node& nd = r.plan->nodes[key_idx(key) - r.nt];
      if (!(left > 0)) {  // nothing left: it finishes now
        finish(key, now);
        continue;
      }
      for (std::uint32_t c : nd.child_nodes) {
        const Plan::Node& ch = r.plan->nodes[c];
        model_.add_bundle(now, ch.res, ch.mult, static_cast<std::uint32_t>(ch.members.size()), left, ch.weight,
                          ch.cap, make_key(key_slot(key), r.nt + c));
      }
      for (std::uint32_t m : nd.child_singles) {
        const models::Transfer& tr = r.s->transfers[m];
        const auto route = route_of(tr, r.alt);
        model_.add(now, std::span<const std::uint32_t>(route.data(), route.size()), left, tr.weight, tr.rate_cap_Bps,
                   make_key(key_slot(key), m));
      }
    }
    model_.solve(now);
  }
  drain(now);
}

void Network::ensure_wake() {
  double next;
  if (model_.dirty() || !ready_stack_.empty() || !finished_runs_.empty()) {
    next = q_.now();
  } else {
    next = model_.next_finish();
    if (!lat_heap_.empty()) next = std::min(next, lat_heap_.front().t_s);
  }
  if (next == FlowModel::kInf) return;
  if (wake_pending_ && wake_t_ <= next) return;
  wake_pending_ = true;
  wake_t_ = next;
  q_.schedule(next, this, ++wake_token_);
}

std::vector<LinkDirStats> Network::link_stats() {
  model_.settle_stats(q_.now());
  const auto& st = model_.stats();
  std::vector<LinkDirStats> out(st.size());
  for (std::size_t d = 0; d < st.size(); ++d) out[d] = LinkDirStats{st[d].bytes, st[d].busy_s, st[d].peak_util};
  // Orbits still claimed: their other links carry what the first one carried since the claim.
  for (const Orbit& ob : orbits_) {
    if (ob.runs.empty()) continue;
    const ResourceStats& f = st[ob.links.front()];
    out[ob.links.front()].peak_util = std::max(ob.saved_peak, f.peak_util);
    for (std::size_t k = 1; k < ob.links.size(); ++k) {
      LinkDirStats& o = out[ob.links[k]];
      o.bytes += f.bytes - ob.bytes0;
      o.busy_s += f.busy_s - ob.busy0;
      o.peak_util = std::max(o.peak_util, f.peak_util);
    }
  }
  return out;
}

std::shared_ptr<const MirrorQuotient> Network::mirror_plan(const Run& r, std::uint32_t groups) {
  auto& cache = mirror_plans_[r.alt ? 1 : 0];
  if (auto it = cache.find(r.s.get()); it != cache.end() && it->second.second->groups == groups)
    return it->second.second;
  const auto& trs = r.s->transfers;
  if (std::any_of(trs.begin(), trs.end(), [](const models::Transfer& tr) { return tr.via != topo::kNoNode; })) {
    // Relayed hops (Transfer::via): the quotient routes a transfer by its ends only.
    auto no = std::make_shared<MirrorQuotient>();
    no->groups = groups;
    no->reason = no->kind = "relayed hops";
    cache[r.s.get()] = std::make_pair(r.s, no);
    return no;
  }
  if (std::any_of(trs.begin(), trs.end(), [](const models::Transfer& tr) { return tr.lockstep >= 0; })) {
    // Lockstep waves (PAT at phase fidelity) already run a step's link-disjoint transfers as one flow, and a
    // quotient expanded later would continue without them: such schedules keep their waves.
    auto no = std::make_shared<MirrorQuotient>();
    no->groups = groups;
    no->reason = no->kind = "lockstep waves";
    cache[r.s.get()] = std::make_pair(r.s, no);
    return no;
  }
  const std::size_t ndirs = orbit_at_.size();
  std::vector<double> cap(ndirs), lat(ndirs);
  for (topo::LinkDir d = 0; d < ndirs; ++d) {
    const topo::Link& link = topo_.link(topo::Topology::link_of(d));
    cap[d] = model_.capacity(d);
    lat[d] = link.latency_s + calib_.of(link.kind).latency_s;  // route_latency_s, per hop
  }
  auto plan = std::make_shared<const MirrorQuotient>(mirror_quotient(
      *r.s, groups,
      [&](topo::NodeId a, topo::NodeId b, std::vector<topo::LinkDir>& out) {
        const auto sp = route_of(a, b, r.alt);
        out.assign(sp.begin(), sp.end());
      },
      cap, lat));
  std::size_t hops = plan->orbit.size();
  for (const auto& o : plan->orbits) hops += o.size();
  if (mirror_plan_hops_ + hops <= kMaxWavePlanHops) {
    mirror_plan_hops_ += hops;
    cache[r.s.get()] = std::make_pair(r.s, plan);
  }
  return plan;
}

bool Network::claim_orbits(Run& r, std::uint32_t slot, std::string& why) {
  // Exact while every orbit is loaded alike: an orbit's links are either all free (no flow on any) or held, with
  // the same link set, by quotient runs in flight; a link of another orbit, or a flow on a free one, falls back.
  const MirrorQuotient& q = *r.mq;
  for (const auto& o : q.orbits) {
    if (const std::uint32_t at = orbit_at_[o.front()]) {
      if (orbits_[at - 1].links != o) {
        why = "orbits differ from a quotient call in flight";
        return false;
      }
      continue;
    }
    for (topo::LinkDir d : o) {
      if (orbit_at_[d]) {
        why = "orbits differ from a quotient call in flight";
        return false;
      }
      if (model_.flows_on(d)) {
        why = "another call on its links";
        return false;
      }
    }
  }
  const double now = q_.now();
  r.qorbit.resize(q.orbits.size());
  for (std::size_t k = 0; k < q.orbits.size(); ++k) {
    const auto& o = q.orbits[k];
    std::uint32_t at = orbit_at_[o.front()];
    if (!at) {
      std::uint32_t id;
      if (!free_orbits_.empty()) {
        id = free_orbits_.back();
        free_orbits_.pop_back();
      } else {
        id = static_cast<std::uint32_t>(orbits_.size());
        orbits_.emplace_back();
      }
      Orbit& ob = orbits_[id];
      ob.links = o;
      ob.runs.clear();
      // The first link carries the representatives: its figures from now on are every link's of the orbit.
      ResourceStats& st = model_.settled_stats(o.front(), now);
      ob.bytes0 = st.bytes, ob.busy0 = st.busy_s, ob.saved_peak = st.peak_util;
      st.peak_util = 0;
      for (topo::LinkDir d : o) orbit_at_[d] = id + 1;
      ++live_orbits_;
      at = id + 1;
    }
    orbits_[at - 1].runs.push_back(slot);
    r.qorbit[k] = at - 1;
  }
  return true;
}

void Network::release_orbits(Run& r, std::uint32_t slot, double now) {
  for (std::uint32_t id : r.qorbit) {
    Orbit& ob = orbits_[id];
    auto it = std::find(ob.runs.begin(), ob.runs.end(), slot);
    if (it != ob.runs.end()) {
      *it = ob.runs.back();
      ob.runs.pop_back();
    }
    if (!ob.runs.empty()) continue;
    ResourceStats& f = model_.settled_stats(ob.links.front(), now);
    const double db = f.bytes - ob.bytes0, dbusy = f.busy_s - ob.busy0, peak = f.peak_util;
    f.peak_util = std::max(ob.saved_peak, peak);
    for (std::size_t k = 1; k < ob.links.size(); ++k) {
      ResourceStats& o = model_.settled_stats(ob.links[k], now);
      o.bytes += db;
      o.busy_s += dbusy;
      o.peak_util = std::max(o.peak_util, peak);
    }
    for (topo::LinkDir d : ob.links) orbit_at_[d] = 0;
    ob.links.clear();
    free_orbits_.push_back(id);
    --live_orbits_;
  }
  r.qorbit.clear();
}

void Network::touch(std::span<const topo::LinkDir> route, double now) {
  std::vector<std::uint32_t> work;
  for (topo::LinkDir d : route)
    if (orbit_at_[d]) work.push_back(orbit_at_[d] - 1);
  if (work.empty()) return;
  // The closure: runs holding these orbits, the other orbits of those runs, and so on.
  std::vector<std::uint8_t> seen_orbit(orbits_.size(), 0);
  std::vector<std::uint32_t> slots;
  while (!work.empty()) {
    const std::uint32_t o = work.back();
    work.pop_back();
    if (seen_orbit[o]) continue;
    seen_orbit[o] = 1;
    for (std::uint32_t s : orbits_[o].runs) {
      if (std::find(slots.begin(), slots.end(), s) != slots.end()) continue;
      slots.push_back(s);
      for (std::uint32_t o2 : runs_[s]->qorbit) work.push_back(o2);
    }
  }
  std::sort(slots.begin(), slots.end());
  for (std::uint32_t s : slots) expand(s, now);
}

void Network::expand(std::uint32_t slot, double now) {
  // Until now every block ran as block 0 does (the quotient is exact), so each copy takes block 0's state: its
  // pending dependencies, times, latency-heap entry or remaining bytes.
  Run& r = *runs_[slot];
  const std::shared_ptr<const MirrorQuotient> q = r.mq;
  const std::size_t n0 = q->per_group, k = q->groups;
  std::vector<double> left(n0, 0);
  for (std::size_t i = 0; i < n0; ++i)
    if (r.qstate[i] == kQBandwidth) left[i] = model_.cancel(r.qflow[i], now);
  release_orbits(r, slot, now);
  r.mq.reset();
  ++mirror_expanded_;
  std::size_t done0 = 0;
  std::vector<std::uint64_t> finish_now;
  for (std::size_t i = 0; i < n0; ++i) {
    done0 += r.qstate[i] == kQDone;
    for (std::size_t g = 0; g < k; ++g) {
      const std::size_t j = i + g * n0;
      const std::uint64_t key = make_key(slot, j);
      if (g > 0) {
        r.pending[j] = r.pending[i];
        if (!r.timings.empty()) r.timings[j] = r.timings[i];
      }
      switch (r.qstate[i]) {
        case kQQueued:
          if (g > 0) ready_stack_.push_back(key);
          break;
        case kQDelayed:
          if (g > 0) push_latency(r.qlat[i], kReadyBit | key);
          break;
        case kQLatency:
          if (g > 0) push_latency(r.qlat[i], key);
          break;
        case kQBandwidth: {
          if (!(left[i] > 0)) {
            finish_now.push_back(key);
            break;
          }
          const models::Transfer& tr = r.s->transfers[j];
          const auto route = route_of(tr, r.alt);
          model_.add(now, std::span<const std::uint32_t>(route.data(), route.size()), left[i], tr.weight,
                     tr.rate_cap_Bps, key);
          break;
        }
        default: break;
      }
    }
  }
  r.qstate.clear();
  r.qlat.clear();
  r.qflow.clear();
  r.done = done0 * k;
  for (std::uint64_t key : finish_now) finish(key, now);
}

}  // namespace fabricsim::sim
