#pragma once
// The fabricsim network engine bound to an EventQueue: the incremental API used by run_schedule() and by
// the trace replayer. Several schedules (collectives) and single transfers can be in flight at once; they
// share the fabric through one FlowModel (max-min fair sharing per link direction), so they contend.
//
// Timing model of one transfer (models::Transfer) once its dependencies are met at time t0:
//   1. latency phase, outside the sharing: with R = sum over the route's hops of (link latency_s +
//      calibration per-kind latency_s), L = R + step_latency_s * steps, or steps * max(step_latency_s, R)
//      when latency_includes_route is set. Nothing is on the links during this phase (as in SimGrid's CM02,
//      where a communication's latency is paid before its bandwidth share).
//   2. bandwidth phase from t0 + L: a flow of weight `weight` carrying bytes * steps bytes per instance,
//      capped at rate_cap_Bps per instance, sharing every link direction it crosses (capacity = link
//      bandwidth_Bps * calibration bw_efficiency of the link kind) max-min fairly with all other flows.
//   A transfer with src == dst, or with 0 bytes, has no bandwidth phase: it finishes at t0 + L.
// Completion batching: flows whose projected finish lies within `batch_tolerance_s` of the earliest one are
// completed together at that earliest time (a floor of 1e-10 relative + 1e-15 s always applies, to merge
// finishes that differ only by floating-point rounding).
//
// Flow bundles (NetworkOptions::bundle_flows): the transfers of a dependency-free schedule (an all-to-all) that
// start together with the same bytes, weight, cap and latency and go to the same destination run as one
// FlowModel bundle (flow_model.hpp) instead of one flow each; a bundle that the solver finds without a bottleneck
// common to all its members is split at once, at the same time, into bundles of the members that also share
// their route after the first hop, and those into single flows. Exact (the same allocation as the members run
// one by one, up to floating-point rounding); the plan is built once per schedule object and reused when the
// same schedule is started again.
//
// Usage:
//   EventQueue q;  Network net(q, topology, routing, calib);
//   net.start_schedule(schedule_ptr, [](ScheduleRun& r) { ... r.finish_s ... });
//   q.schedule(5e-3, [&] { net.start_transfer(tr, on_done); });   // e.g. from a compute op's end
//   q.run();
// Callbacks run inside the queue's event processing; they may start further schedules/transfers.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "models/calibration.hpp"
#include "models/schedule.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/flow_model.hpp"
#include "sim/engine/quotient_flows.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "topologies/routing.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::sim {

// Checks one transfer's own fields (src/dst are nodes of `topo`; bytes, weight, steps, step latency and rate cap
// in range); an error names "<where>: transfers[<i>]<.field>". Dependencies are the caller's to check.
void check_transfer_fields(const models::Transfer& tr, const std::string& where, std::size_t i,
                           const topo::Topology& topo);

// Capacity (bytes/s) of every link direction (index = topo::LinkDir): link bandwidth x the calibration's
// bw_efficiency of its kind. Throws InputError for a non-positive bandwidth or efficiency.
std::vector<double> link_capacities(const topo::Topology& t, const models::Calibration& c);

struct NetworkOptions {
  double batch_tolerance_s = 0;  // completion batching window, seconds (0 = exact up to rounding)
  bool bundle_flows = false;     // flow bundles for dependency-free schedules (see above; exact)
  // false: ScheduleRun::transfers is left empty, and a bundle's start and finish cost one update, not one per
  // member (for callers that use finish_s only; every time and link figure stays the same)
  bool transfer_times = true;
  // A schedule's roots delayed by root_delay_s share one latency-heap entry that walks them in key order (the same
  // order of events as one entry each, which false keeps: the reference).
  bool batch_root_delays = true;
};

// A finished schedule: absolute simulated times (seconds since the queue's time 0).
struct ScheduleRun {
  std::uint32_t id = 0;                   // as returned by start_schedule / start_transfer
  double start_s = 0;                     // when start_schedule was called
  double finish_s = 0;                    // last transfer's finish (>= start_s + fixed_latency_s)
  std::vector<TransferTiming> transfers;  // absolute start/finish per schedule transfer
};

class Network final : public EventTarget {
 public:
  using ScheduleDone = std::function<void(ScheduleRun&)>;  // may move out of the run

  // The topology, routing and calibration must outlive the Network.
  Network(EventQueue& q, const topo::Topology& t, topo::Routing& routing, const models::Calibration& calib,
          NetworkOptions opt = {});
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  // Starts a schedule at q.now(): its root transfers start after s->fixed_latency_s. Throws InputError
  // for malformed schedules (bad node ids, dependency indices or cycles, negative sizes, weight <= 0,
  // steps == 0). `on_done` (may be empty) is called once the last transfer finished.
  std::uint32_t start_schedule(std::shared_ptr<const models::Schedule> s, ScheduleDone on_done);
  // Same, but the roots start at q.now() + root_delay_s instead of after fixed_latency_s.
  std::uint32_t start_schedule(std::shared_ptr<const models::Schedule> s, double root_delay_s,
                               ScheduleDone on_done);
  // Same, with the routes of `set_alternate_routing` instead of the constructor's routing (e.g. all_to_all
  // with PXN while rings keep NCCL's default routes, sharing one fabric).
  std::uint32_t start_schedule(std::shared_ptr<const models::Schedule> s, double root_delay_s, ScheduleDone on_done,
                               bool alternate_routing);
  // Same, for a schedule made of `mirror_groups` equal blocks, block g the image of block 0 (a communicator and its
  // co-located mirrors): while the blocks are an exact quotient of the network's load (docs/engine.md, "Mirror
  // quotient on the shared network") only block 0 runs, as representatives loading each orbit of link directions
  // with the copies' multiplicity, and the other blocks get its times; the moment another flow would load the
  // orbits unequally, the blocks are expanded into their own flows, with block 0's state. mirror_groups <= 1: as
  // above.
  std::uint32_t start_schedule(std::shared_ptr<const models::Schedule> s, double root_delay_s, ScheduleDone on_done,
                               bool alternate_routing, std::uint32_t mirror_groups);
  // A second routing of the same topology (must outlive the Network) for schedules started with
  // alternate_routing = true.
  void set_alternate_routing(topo::Routing& r) { alt_routing_ = &r; }
  // Starts one transfer at q.now() (its deps are ignored).
  std::uint32_t start_transfer(const models::Transfer& tr, ScheduleDone on_done);

  // Latency phase of a transfer on its route (link + calibration per-hop latency), without step latency.
  double route_latency_s(topo::NodeId src, topo::NodeId dst, bool alternate_routing = false);
  // The same over a transfer's route (route_of(tr)).
  double route_latency_s(const models::Transfer& tr, bool alternate_routing = false);
  // Effective capacity (bytes/s) of a link direction.
  double capacity_Bps(topo::LinkDir d) const { return model_.capacity(d); }

  // Per link direction (index = topo::LinkDir), statistics up to q.now().
  std::vector<LinkDirStats> link_stats();
  std::size_t active_flows() const { return model_.active_flows(); }
  std::size_t running_schedules() const { return running_; }
  std::size_t bundles_added() const { return model_.bundles_added(); }
  std::size_t bundles_split() const { return splits_; }
  // Schedules whose checked dependencies (per routing) and whose bundle plans this Network keeps for later starts.
  std::size_t dependency_indexes_cached() const { return dep_index_[0].size() + dep_index_[1].size(); }
  std::size_t bundle_plans_cached() const { return plans_[0].size() + plans_[1].size(); }
  // Mirror quotient: schedules that started as block 0 only, of those how many were expanded later (another flow
  // on their orbits), and why the others ran every block (reason -> count).
  std::size_t mirror_quotient_runs() const { return mirror_runs_; }
  std::size_t mirror_expanded() const { return mirror_expanded_; }
  const std::map<std::string, std::size_t>& mirror_fallbacks() const { return mirror_fallbacks_; }
  const FlowModel& model() const { return model_; }

  void on_event(EventQueue& q, std::uint64_t tag) override;

 private:
  struct Run;
  struct Plan;
  struct WavePlan;
  struct DepIndex;
  struct LatEntry {
    double t_s;
    std::uint64_t key;
  };
  void ready(std::uint64_t key, double t);
  void begin_bandwidth(std::uint64_t key, double t);
  // The latency heap's entry for `key` at at_s (a ready entry when key carries kReadyBit).
  void push_latency(double at_s, std::uint64_t key);
  // The first `count` of `roots` (key indices, increasing) of r become ready at at_s: one latency-heap entry.
  void delay_roots(Run& r, std::uint32_t slot, const std::vector<std::uint32_t>& roots, std::size_t count,
                   double at_s);
  // The latency phase of `key` from t when latency_s > 0, else its bandwidth phase at once.
  void start_phase(std::uint64_t key, double t, double latency_s);
  void finish(std::uint64_t key, double t);
  void drain(double t);
  void process(double now);
  void ensure_wake();
  const Plan* plan_for(const std::shared_ptr<const models::Schedule>& s, bool alt);
  void split_bundles(double now);
  double tol(double now) const;

  EventQueue& q_;
  const topo::Topology& topo_;
  topo::Routing& routing_;
  topo::Routing* alt_routing_ = nullptr;
  const models::Calibration& calib_;
  NetworkOptions opt_;
  FlowModel model_;
  std::vector<std::unique_ptr<Run>> runs_;
  std::vector<std::uint32_t> free_runs_;
  std::size_t running_ = 0;
  std::vector<LatEntry> lat_heap_;
  std::vector<std::uint64_t> ready_stack_, done_;
  std::vector<topo::LinkDir> route_buf_;  // scratch: the route being looked at
  // Bounded route cache: the first kRouteCacheEntries distinct (src, dst) pairs keep their route (pooled);
  // later pairs are computed each time. Replays price the same collectives over and over (the same pairs),
  // while a huge all-to-all touches millions of pairs once each and must not pay a cache of all of them.
  // Pairs the Routing has cached already (Routing::cached_route) are read from there and not copied.
  static constexpr std::size_t kRouteCacheEntries = 1u << 20;
  std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::uint32_t>> route_cache_;  // -> (offset, length)
  std::vector<topo::LinkDir> route_pool_;
  std::span<const topo::LinkDir> route_of(topo::NodeId src, topo::NodeId dst, bool alternate = false);
  // A transfer's route: route_of(src, dst), or through its relay GPU (Transfer::via) the two routes joined in
  // via_buf_ (valid until the next call).
  std::span<const topo::LinkDir> route_of(const models::Transfer& tr, bool alternate = false);
  std::vector<topo::LinkDir> via_buf_;
  std::vector<std::pair<std::uint64_t, double>> finished_runs_;
  std::unordered_map<const models::Schedule*, std::unique_ptr<Plan>> plans_[2];  // [alternate routing]
  // Lockstep wave plans per schedule (index 1: alternate routing), holding the schedule so its address stays
  // its own; at most kMaxWavePlanHops link directions in all (128 MiB), later schedules build theirs per run. The
  // 2 x 49,152-GPU cluster replay's 40 PAT schedules hold 20.9 M (docs/performance.md); 2^24 rebuilt some per run.
  static constexpr std::size_t kMaxWavePlanHops = std::size_t{1} << 25;
  std::unordered_map<const models::Schedule*,
                     std::pair<std::shared_ptr<const models::Schedule>, std::shared_ptr<const WavePlan>>>
      wave_plans_[2];
  std::size_t wave_plan_hops_ = 0;
  std::shared_ptr<const WavePlan> build_waves(const Run& r);
  // Checks r's transfers and dependencies (InputError naming `where`) and builds its pending counts and successor
  // lists (CSR); refuses a dependency cycle. Done once per schedule and routing while the cached indexes hold at
  // most kMaxDepIndexTransfers transfers in all (schedules are immutable; the index holds the schedule so its
  // address stays its own); each run copies the initial pending counts.
  void index_dependencies(Run& r, const std::string& where);
  std::shared_ptr<DepIndex> build_dep_index(const std::shared_ptr<const models::Schedule>& s,
                                            const std::string& where) const;
  static constexpr std::size_t kMaxDepIndexTransfers = std::size_t{1} << 24;
  std::unordered_map<const models::Schedule*, std::shared_ptr<DepIndex>> dep_index_[2];  // [alternate routing]
  std::size_t dep_index_transfers_ = 0;
  // Finished runs kept for reuse (their vectors keep their capacity: no allocation per start).
  static constexpr std::size_t kMaxSpareRuns = 64;
  std::vector<std::unique_ptr<Run>> spare_runs_;
  void recycle(std::unique_ptr<Run> r);
  // The schedule's lockstep waves (cached per schedule and routing) when some transfer has a lockstep id.
  void attach_waves(Run& r);
  std::size_t splits_ = 0;
  // Mirror quotient (docs/engine.md). Per schedule and routing: its blocks' quotient (cached like the wave plans).
  std::unordered_map<const models::Schedule*,
                     std::pair<std::shared_ptr<const models::Schedule>, std::shared_ptr<const MirrorQuotient>>>
      mirror_plans_[2];
  std::size_t mirror_plan_hops_ = 0;
  std::shared_ptr<const MirrorQuotient> mirror_plan(const Run& r, std::uint32_t groups);
  // An orbit claimed by quotient runs in flight: its link directions (the first carries the representatives),
  // the runs (slots) holding it, and the first link's statistics when it was claimed (the others get its
  // increments when it is released).
  struct Orbit {
    std::vector<topo::LinkDir> links;
    std::vector<std::uint32_t> runs;
    double bytes0 = 0, busy0 = 0, saved_peak = 0;
  };
  std::vector<Orbit> orbits_;
  std::vector<std::uint32_t> free_orbits_;
  std::vector<std::uint32_t> orbit_at_;  // per link direction: orbit index + 1, 0 = none
  std::size_t live_orbits_ = 0;
  bool claim_orbits(Run& r, std::uint32_t slot, std::string& why);
  void release_orbits(Run& r, std::uint32_t slot, double now);
  // Another flow is about to load `route`: expands every quotient run holding one of its orbits (and, in turn,
  // every quotient run sharing an orbit with those).
  void touch(std::span<const topo::LinkDir> route, double now);
  void expand(std::uint32_t slot, double now);
  std::size_t mirror_runs_ = 0, mirror_expanded_ = 0;
  std::map<std::string, std::size_t> mirror_fallbacks_;
  bool in_process_ = false;
  bool wake_pending_ = false;
  double wake_t_ = 0;
  std::uint64_t wake_token_ = 0;
  std::uint32_t next_id_ = 0;
};

}  // namespace fabricsim::sim
