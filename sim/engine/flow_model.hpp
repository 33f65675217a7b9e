#pragma once
// Flow-level network model with exact (weighted, capped) max-min fair sharing over abstract resources.
//
// A resource is one direction of a full-duplex link, with a capacity in bytes/s. A flow crosses a set of
// resources and has:
//   - a weight w > 0: it stands for w identical flows on the same path; it takes w shares of every resource
//     it crosses and its per-instance rate is the fair share x, so it loads each resource with w*x;
//   - an optional per-instance rate cap (bytes/s), 0 = none;
//   - its remaining bytes per instance.
// Rates are the max-min fair allocation computed by progressive filling (water-filling): all unfrozen
// flows grow at the same per-instance rate; a resource saturates when sum(w*x) reaches its capacity, which
// freezes every flow crossing it; a capped flow freezes at its cap. Implemented with a binary min-heap of resource
// saturation levels whose keys are refreshed lazily at the top (levels only rise as flows freeze, so a
// stored key is a lower bound), so a solve costs about O(sum of path lengths + refreshes * log(resources)).
//
// Changes (a flow added, a flow finished) only mark the touched flows/resources dirty; solve() re-solves
// only the flows whose rate can change: with theta = the smallest old rate of a finished flow and of a lower
// bound (min over its resources of capacity / total weight, and its cap) of each added flow's new rate,
// progressive filling below level theta is the same before and after the change, so every flow whose rate
// is below theta keeps it exactly; the others that are connected to the change through flows at or above
// theta are re-solved on the capacity that the kept flows leave (theta = 0: whole connected components). A flow
// at theta (to a 1e-9 margin) is also kept ("pinned") when one of its resources, crossed by all its members, is
// untouched by the changes, saturated, and carries no flow faster than theta: up to level theta that resource's
// load grows exactly as before, so it saturates at theta again and freezes the flow there (a skewed
// all-to-all: the flows to one destination finish, the others stay at their receiver's fair share). Flow
// finish times sit in a lazy min-heap (versioned entries, periodic compaction). A long plain flow's resources
// that no other flow uses are kept out of the solver ("shadow hops", flow_model.cpp) with the same results. Storage is flat
// (struct-of-arrays indexed by integer flow ids, recycled), with no per-flow heap allocation.
//
// Bundles (add_bundle): one flow standing for `members` flows of equal weight, bytes, cap and start whose routes
// differ, loading each resource with weight x multiplicity (how many members cross it) x rate. Up to the first
// freeze that involves it, progressive filling with the bundle is progressive filling with its members (the
// loads are the same), and the members freeze together when the resource that freezes them is crossed by all of
// them. The solver checks that every re-solved bundle has such a bottleneck (a resource crossed by all members,
// saturated, on which no flow has a higher rate, or the members' common cap): then every member has a bottleneck,
// so the expanded allocation is the (unique) max-min fair one of the members and the bundle is exact. A bundle
// without one is listed in split_requests(); the caller cancels it and adds its members (or smaller bundles)
// at the same time, before the clock moves.
//
// Latency is not handled here: callers add a flow once its latency has elapsed (see Network).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace fabricsim::sim {

struct ResourceStats {
  double bytes = 0;      // bytes carried (sum over flows of weight * per-instance bytes)
  double busy_s = 0;     // time with a non-zero load
  double peak_util = 0;  // max over time of load / capacity
};

// Makes room for `need` elements in `v`, at least doubling its capacity when it grows: callers that reserve
// a little more at every schedule (a replay starts thousands) keep the amortised O(1) growth of push_back.
template <class V>
void reserve_geometric(V& v, std::size_t need) {
  if (need > v.capacity()) v.reserve(std::max(need, 2 * v.capacity()));
}

class FlowModel {
 public:
  using FlowId = std::uint32_t;
  static constexpr double kInf = std::numeric_limits<double>::infinity();

  explicit FlowModel(std::vector<double> capacity_Bps);

  std::size_t num_resources() const { return cap_.size(); }
  double capacity(std::uint32_t r) const { return cap_[r]; }
  double now() const { return now_s_; }

  // Adds a flow at time now_s (>= now()). `resources` must be non-empty and hold distinct ids; bytes > 0.
  // `user` is returned when the flow completes. Rates are recomputed at the next solve().
  FlowId add(double now_s, std::span<const std::uint32_t> resources, double bytes_per_instance,
             double weight, double rate_cap_Bps, std::uint64_t user);

  // A bundle of `members` flows (each of weight `weight`, `bytes_per_instance`, cap `rate_cap_Bps`): resource
  // resources[k] is crossed by multiplicity[k] (1..members) of them. rate()/remaining() are per member.
  FlowId add_bundle(double now_s, std::span<const std::uint32_t> resources, std::span<const std::uint32_t> multiplicity,
                    std::uint32_t members, double bytes_per_instance, double weight, double rate_cap_Bps,
                    std::uint64_t user);
  // A representative of `members` flows that an exact quotient guarantees to run at equal rates (sim::Network's
  // mirror groups, docs/engine.md "Mirror quotient"): loads resources[k] with weight x multiplicity[k] x rate like a
  // bundle, but is never checked or split. rate()/remaining() are per member.
  FlowId add_symmetric(double now_s, std::span<const std::uint32_t> resources,
                       std::span<const std::uint32_t> multiplicity, std::uint32_t members, double bytes_per_instance,
                       double weight, double rate_cap_Bps, std::uint64_t user);
  // Flows (and bundles) crossing resource r now.
  std::size_t flows_on(std::uint32_t r) const {
    return res_flows_[r].size() + shadowed(r);
  }
  // Resource r's statistics settled up to now_s (mutable: sim::Network carries a mirrored link's figures over).
  ResourceStats& settled_stats(std::uint32_t r, double now_s);
  // Bundles whose last solve found no common bottleneck (see above), in flow-id order; cleared by the next solve.
  const std::vector<FlowId>& split_requests() const { return split_; }
  // Removes an active flow without completing it (e.g. a bundle to split) and returns the bytes per instance it
  // still had to deliver at now_s. Its resources are re-solved at the next solve().
  double cancel(FlowId f, double now_s);
  std::size_t bundles_added() const { return bundles_added_; }
  std::size_t bundles_split() const { return bundles_split_; }

  // Capacity for `flows` more flows than are active now (and their completion-heap entries), so that a
  // caller that knows how many flows are about to start (e.g. an all-to-all's roots) saves the growth
  // copies and the up to 2x slack of doubling vectors. Changes no result.
  void reserve(std::size_t flows);

  bool dirty() const { return !dirty_flows_.empty() || !dirty_res_.empty(); }
  // Re-solves the components touched since the last solve, at time now_s (>= now()).
  void solve(double now_s);
  // Earliest projected finish time among active flows (kInf if none). Requires !dirty().
  double next_finish();
  // Completes, at time now_s, every active flow whose projected finish is <= now_s + tol_s (the earliest
  // finish must be <= now_s + tol_s, i.e. call it at next_finish()). Appends their user tags to `done`
  // in flow-id order and returns how many. Affected components are solved on the next solve().
  std::size_t complete(double now_s, double tol_s, std::vector<std::uint64_t>& done);

  std::size_t active_flows() const { return active_; }
  double rate(FlowId f) const { return hot_[f].rate; }  // per-instance bytes/s
  std::uint64_t user(FlowId f) const { return user_[f]; }
  // Bytes per instance an active flow still has to deliver at time now_s (>= its last update).
  double remaining(FlowId f, double now_s) const { return rem_[f] - hot_[f].rate * (now_s - tupd_[f]); }
  std::size_t solves() const { return solves_; }
  std::size_t solved_flow_visits() const { return flow_visits_; }
  std::size_t solver_rounds() const { return rounds_; }
  std::size_t solver_rekeys() const { return rekeys_; }
  // Off: re-solve whole connected components (the reference for tests). On by default. Same allocation up to
  // floating-point rounding.
  void set_incremental(bool on) { incremental_ = on; }
  // Off: every resource a re-solved flow crosses is solved (the reference for tests). On by default: a plain flow
  // added over many resources that no flow uses keeps one of them in the solver and logs its solves for the
  // others ("shadow hops", flow_model.cpp). Same rates, times and statistics, bit for bit.
  void set_shadow_hops(bool on) { shadows_on_ = on; }
  // Hops made shadows so far.
  std::size_t shadow_hops() const { return shadow_hops_made_; }
  // Flows on reached resources that kept their rate below the threshold (counted, not re-solved).
  std::size_t kept_flow_visits() const { return kept_visits_; }
  // Flows on reached resources kept at the threshold by an untouched common bottleneck (not re-solved).
  std::size_t pinned_flow_visits() const { return pinned_visits_; }

  // Link statistics up to time now_s (settles loads first).
  void settle_stats(double now_s);
  const std::vector<ResourceStats>& stats() const { return stats_; }

 private:
  struct ResEntry {  // a flow crossing the resource
    FlowId flow;
    std::uint32_t mult;  // how many of its members cross the resource (1 for a plain flow)
    std::uint32_t hop;   // the flow's hop entry for this resource (index into hops_)
  };
  // A shadow hop (flow_model.cpp, "Shadow hops") has this bit set in Hop::mult.
  static constexpr std::uint32_t kShadowBit = 0x80000000u;
  // Plain flows over at least this many resources get shadow hops (when at least half as many are unused).
  static constexpr std::uint32_t kMinShadowRoute = 64;
  // shadow_flow_: a resource whose shadow hop's flow ended, settled by the next solve.
  static constexpr std::uint32_t kPendingSettle = 0xffffffffu;
  struct Hop {  // one resource of a flow's route: the flow's entry sits at res_flows_[res][pos]
    std::uint32_t res;
    std::uint32_t pos;
    std::uint32_t mult;  // how many of the flow's members cross it, | kShadowBit for a shadow hop
  };
  struct LogEntry {  // a re-solve of a flow with shadow hops: at t_s its rate became x
    double t_s;
    double x;
  };
  struct HeapEntry {
    double t_s;
    FlowId flow;
    std::uint32_t ver;
  };

  FlowId add_impl(double now_s, std::span<const std::uint32_t> resources, const std::uint32_t* multiplicity,
                  std::uint32_t members, double bytes_per_instance, double weight, double rate_cap_Bps,
                  std::uint64_t user);
  bool bundle_has_bottleneck(FlowId f) const;
  void remove_flow(FlowId f);
  void settle_resource(std::uint32_t r, double now_s);
  void compact_heap();
  void compact_hops();
  // Shadow hops: brings hop h of flow f through f's log (statistics, load, peak), as the re-solves would have;
  // flush_shadows does it for every shadow hop of f and empties the log.
  void flush_hop(FlowId f, std::uint32_t h);
  void flush_shadows(FlowId f);
  // Flow f has shadow hops (the route length is tested first, so a short flow never reads slot_).
  bool has_shadows(FlowId f) const { return hot_[f].cnt >= kMinShadowRoute && slot_[f] != 0; }
  // Resource r is a shadow hop of a live flow.
  bool shadowed(std::uint32_t r) const {
    return live_shadows_ > 0 && shadow_flow_[r] != 0 && shadow_flow_[r] != kPendingSettle;
  }

  double now_s_ = 0;
  // resources
  std::vector<double> cap_;
  std::vector<std::vector<ResEntry>> res_flows_;
  std::vector<double> load_;      // current sum of w*rate
  std::vector<double> wsum_;      // sum of the weights of the flows crossing the resource
  std::vector<double> stat_t_;    // last time stats were settled
  std::vector<ResourceStats> stats_;
  std::vector<std::uint32_t> res_mark_;
  // per solve (epoch marks): resources touched by the changes, and the pinned-at-theta test per resource/flow
  std::vector<std::uint32_t> touch_mark_, pin_res_mark_, pin_flow_mark_;
  std::vector<std::uint8_t> pin_res_ok_, pin_flow_ok_;
  // solver scratch (per resource)
  std::vector<double> s_free_, s_w_;
  std::vector<std::uint32_t> s_unfrozen_;
  // flows (struct of arrays)
  struct FlowHot {  // what the solver reads per flow (scanning a resource's flows), in one 32-byte slot
    double w = 0;              // weight
    double rate = 0;           // per-instance rate (bytes/s)
    std::uint32_t off = 0;     // first hop in hops_
    std::uint32_t cnt = 0;     // number of hops
    std::uint32_t mark = 0;    // epoch of the solve that re-solves it
    std::uint32_t members = 1; // 1, a bundle's member count, or 0 (add_symmetric: never split)
  };
  std::vector<FlowHot> hot_;
  // Shadow hops (flow_model.cpp): per flow with some, a slot holding how many of its hops are shadows and its log
  // of solves (slot_: 0, or the slot's index + 1); per resource (allocated with the first shadow), the flow + 1
  // whose shadow hop it is (0: none, kPendingSettle) and that hop's index.
  struct ShadowSlot {
    FlowId flow = 0;
    std::uint32_t n = 0;  // 0: a free slot
    std::vector<LogEntry> log;
  };
  std::vector<std::uint32_t> slot_;
  std::vector<ShadowSlot> slots_;
  std::vector<std::uint32_t> free_slots_;
  void release_slot(FlowId f);
  std::vector<std::uint32_t> shadow_flow_, shadow_hop_;
  std::vector<std::uint32_t> pending_settle_;  // resources of ended flows' shadow hops
  std::vector<std::uint32_t> shadow_scratch_;
  std::size_t live_shadows_ = 0;  // shadow hops of live flows
  std::vector<double> rem_, tupd_, capr_, finish_;
  std::vector<std::uint64_t> user_;
  std::vector<std::uint32_t> ver_;
  std::vector<std::uint8_t> alive_, frozen_;
  std::vector<FlowId> free_ids_;
  std::vector<Hop> hops_;
  std::vector<FlowId> suspects_, split_;
  std::size_t bundles_added_ = 0, bundles_split_ = 0;
  std::size_t dead_hops_ = 0;
  std::uint64_t added_flows_ = 0, added_hops_ = 0;  // totals, for reserve()'s route-length estimate
  std::size_t active_ = 0;
  std::uint32_t epoch_ = 0;
  // dirty sets
  std::vector<FlowId> dirty_flows_;
  std::vector<std::uint32_t> dirty_res_;   // each resource at most once (res_dirty_)
  std::vector<std::uint8_t> res_dirty_;
  // completion heap
  std::vector<HeapEntry> heap_;
  // scratch
  std::vector<std::uint32_t> stack_, comp_res_;
  std::vector<FlowId> comp_flows_;
  // min-heap of resources by saturation level (solver)
  struct HeapNode {
    double key;
    std::uint32_t res;
  };
  std::vector<HeapNode> rheap_;  // only its top is ever removed, so no position index is kept
  void sift_down(std::uint32_t i);
  void heap_pop();
  std::vector<std::pair<double, FlowId>> capped_;
  std::vector<double> new_rate_;
  std::vector<FlowId> batch_;
  std::size_t solves_ = 0, flow_visits_ = 0, rounds_ = 0, rekeys_ = 0, kept_visits_ = 0, pinned_visits_ = 0;
  bool incremental_ = true;
  bool shadows_on_ = true;
  std::size_t shadow_hops_made_ = 0;
  double removed_min_rate_ = kInf;  // smallest rate among flows finished since the last solve
};

}  // namespace fabricsim::sim
