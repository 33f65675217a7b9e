#pragma once
// Engine-backed communication costs, two models behind the CommModel interface:
//  - EngineCommModel ("engine", the explicit fast tier): each distinct (communicator, operation, bytes) is
//    turned into an NCCL schedule by models::build_schedule (algorithm/protocol from the tuner unless the
//    trace forces one) and run on the flow-level engine (sim::run_schedule) on an idle fabric; the makespan
//    is cached. Different collectives in flight at the same time do not contend (stated in the notes).
//  - SharedNetworkCommModel ("shared"): every collective and message runs on one sim::Network bound to the
//    replay's EventQueue at the simulated time it starts, so everything in flight at the same time shares
//    the links max-min fairly. Exact shortcut (SharedNetworkCommModel below): an operation whose links no
//    other communicator or message of the replay uses, and that does not overlap another operation of its
//    own communicator, is priced once on an idle fabric and reused, because nothing could share its links.
// Both: concurrent identical groups (`mirrors`, ranks shifted by k * mirror_stride) are merged into the
// same schedule so that they contend for shared links (e.g. the 8 data-parallel rings of a DGX node on the
// rails and spines).
//
// Fidelity (models/collectives.hpp): a priced schedule whose step-level size estimate (ranks priced, i.e.
// members x (mirrors + 1), times communicator size) exceeds EngineCommOptions::step_limit is built at
// phase fidelity (ring hops' steps merged; aggregated all_to_all with PXN) and run with the completion
// batching tolerance `large_batch_tolerance_s` (docs/engine.md, "Completion batching": a flow completes at
// most that much early, a d-deep chain shifts at most ~d x tolerance). Symmetry fidelity is never used, so
// every flow is simulated and the link statistics are complete. all_to_all is built and run with PXN
// routing (cross-rail blocks forwarded over NVLink to the peer GPU on the destination's rail): NCCL turns
// PXN on by default since 2.12 (NCCL_PXN_DISABLE=0, docs.nvidia.com/deeplearning/nccl/user-guide/docs/
// env.html), and the phase-fidelity aggregated all_to_all needs it (models/collectives.cpp).
//
// Link statistics (when EngineCommOptions::collect_link_stats): each distinct schedule is run once with
// RunOptions::collect_link_stats, its per-link-direction bytes / busy time / peak utilisation kept, and
// every call the replay makes (cache hits included) adds them again. See link_dirs() and
// link_totals_by_tier() for exactly what the numbers mean.
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "models/calibration.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/network.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "replay/comm_model.hpp"
#include "topologies/routing.hpp"

namespace fabricsim::sim {

struct EngineCommOptions {
  bool collect_link_stats = true;
  double shared_batch_tolerance_s = 0;  // SharedNetworkCommModel: completion batching, seconds (0 = exact)
  // SharedNetworkCommModel: price operations on links nobody else uses once on an idle fabric (exact; see
  // the class). false runs every operation on the network (the reference the shortcut is tested against).
  bool shared_isolation_shortcut = true;
  // Step-level pricing while ranks_priced x communicator_size <= step_limit (a ring all_reduce emits about
  // 2 x that x channels transfers; a direct all_to_all that many flows); phase fidelity above.
  double step_limit = 20000;
  double large_batch_tolerance_s = 1e-6;  // completion batching for phase-fidelity schedules, seconds
  // SharedNetworkCommModel: run the flows of dependency-free schedules (all_to_all(v)) as flow bundles
  // (sim::NetworkOptions::bundle_flows; exact up to rounding). false: one flow per transfer (the reference).
  bool shared_bundle_flows = true;
  // SharedNetworkCommModel: run a communicator's co-located mirrors (and same-size stand-in groups) as one
  // representative block while that is an exact quotient of the shared network's load (sim::Network's mirror
  // quotient, docs/engine.md); false: every block's flows (the reference).
  bool shared_mirror_quotient = true;
  // SharedNetworkCommModel: calls of different communicators with the same ranks, mirrors, stand-in groups,
  // all_to_allv matrix and collnet_enable, operation, bytes and algorithm (e.g. each MoE layer's own dispatch
  // communicator) run the same schedule object, so it is built, routed, planned and priced on an idle fabric once
  // (exact: the schedules are equal); false: one schedule per communicator (the reference).
  bool shared_schedule_reuse = true;
};

// What the two engine-backed models share: building schedules (collectives with their mirrors, messages),
// pricing one on an idle fabric, link statistics and the symmetry bookkeeping for cluster-wide totals.
class EngineCommBase : public CommModel {
 public:
  std::size_t schedules_run() const { return runs_; }
  std::size_t phase_schedules_run() const { return phase_runs_; }
  // The call alone on an idle fabric, as this model prices an isolated call (the one price of a group
  // without mirrors, else its merged schedule with this model's completion batching); cached by the call's
  // schedule inputs (idle_prices_), and schedules_run(), link statistics and the replay's caches are left as
  // they were.
  CommTiming idle_collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                             const std::string& algorithm) override;
  // The tuner's algorithm and protocol for the call's group (as build_collective asks models::build_schedule),
  // cached per (communicator, op, bytes); nothing is priced.
  CommTiming collective_plan(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                             const std::string& algorithm) override;

  // Symmetry of the trace being replayed, for cluster-wide totals: `world_size` GPUs of which the sorted
  // `simulated` ranks are replayed; every other rank is a stand-in for a simulated one. Without this call
  // every rank is assumed simulated (replication factor 1).
  void set_symmetry(std::int32_t world_size, std::vector<std::int32_t> simulated);
  // Cluster runs (workloads/cluster.hpp): the stand-in ranks' copies of each message pair (global ranks),
  // run with the pair's message; a communicator's copies are its Communicator::stand_ins.
  using PairCopies =
      std::map<std::pair<std::int32_t, std::int32_t>, std::vector<std::pair<std::int32_t, std::int32_t>>>;
  void set_p2p_stand_ins(PairCopies copies) { p2p_stand_ins_ = std::move(copies); }

  // Per link direction (indexed by topo::LinkDir, size 2 x links), summed over every call priced so far:
  // bytes (payload, i.e. NCCL data, not the efficiency-inflated wire bytes the engine runs) and busy time /
  // peak utilisation. EngineCommModel: busy time = sum over calls of the per-call values of the schedule
  // that priced it (the communicator and its mirrors, run alone on an idle fabric), an upper bound on the
  // real busy time when calls overlap; peak_util = max over calls. SharedNetworkCommModel: measured on the
  // shared network (after finalize_link_stats()). These are the links the *priced* groups use (the
  // simulated ranks' communicators with their co-located mirrors); stand-in groups elsewhere in the
  // cluster (e.g. the tensor-parallel groups of other data-parallel replicas) are not placed.
  const std::vector<LinkDirStats>& link_dirs() const { return dirs_; }
  // Call once the replay is over, before link_dirs() (the shared model copies the network's figures).
  virtual void finalize_link_stats() {}

  // Bytes by link tier (0 in-host, 1 leaf, 2 spine, 3 core): "priced" = sum of link_dirs() bytes;
  // "cluster" = each call's bytes times its replication factor R = (world_size / simulated ranks) x
  // (simulated members of the communicator) / (members x (mirrors + 1)), i.e. the number of identical
  // copies of the priced group that the stand-in ranks form in the whole cluster (1 for a data-parallel
  // group priced with all its mirrors, dp for a tensor-parallel group of one data-parallel replica).
  struct TierBytes {
    std::map<int, double> priced, cluster;
  };
  TierBytes link_totals_by_tier() const { return tiers_; }
  // The all-to-all family (all_to_all, all_to_allv: MoE dispatch / combine) by link class (link_class_slug:
  // "nvlink", "nic_leaf", "leaf_spine_uplink", ...): payload bytes on the class's link directions, and per
  // call the time the class's busiest link direction needs to carry its share at nominal bandwidth, summed
  // over calls (where the all-to-all time goes: a class's time is a lower bound on how long the calls keep
  // that class's bottleneck link busy). Priced groups only, as link_dirs().
  struct ClassTotals {
    std::map<std::string, double> bytes, time_s;
  };
  const ClassTotals& all_to_all_by_class() const;

 protected:
  EngineCommBase(const topo::Topology& t, const models::Calibration& calib, EngineCommOptions opt);
  struct Priced {
    CommTiming timing;
    std::vector<std::pair<std::uint32_t, LinkDirStats>> dirs;  // link directions with traffic, per call
    std::map<int, double> tier_bytes;                           // per call, by link tier
    double replication = 1;                                     // copies in the whole cluster
    bool all_to_all = false;                                    // an all_to_all(v) (all_to_all_by_class)
    // account(): per entry of `dirs`, its link's all-to-all class and bytes / nominal bandwidth (< 0: no
    // bandwidth), looked up at the first call and reused (all_to_all only)
    mutable std::vector<std::pair<std::int32_t, double>> a2a_dirs;
  };
  // A collective's (or message's) schedule, with how it is run.
  struct Built {
    std::shared_ptr<const models::Schedule> s;  // null: nothing to move (one rank, or 0 bytes)
    bool phase = false;                          // phase fidelity (else step)
    bool pxn = false;                            // routed with PXN (all_to_all)
    std::uint32_t groups = 1;                    // equal blocks: the group, its mirrors, same-size stand-in groups
  };
  Built build_collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                         const std::string& algorithm);
  Built build_p2p(std::int32_t src, std::int32_t dst, double bytes);      // with its stand-in copies
  Built build_p2p_one(std::int32_t src, std::int32_t dst, double bytes);  // the one message
  // Runs `s` alone on an idle fabric with completion batching `tolerance_s`; `ran`: the schedule's result when
  // it was already run (with link statistics), else it is run here.
  Priced price(const models::Schedule& s, double tolerance_s, bool phase, topo::Routing& routing,
               const ScheduleResult* ran = nullptr);
  // The one price of a call of a group without mirrors (sim::time_collective: the time `fabricsim coll` and
  // `validate` give for the same call) with its link statistics. false (and `out` untouched) when the group
  // has mirrors or there is nothing to move: the caller prices the merged schedule instead.
  bool price_one_group(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                       const std::string& algorithm, Priced& out);
  // Payload bytes per link direction and per tier of one run of `s` (busy time / peak left at 0).
  void payload_bytes(const models::Schedule& s, topo::Routing& routing, Priced& into) const;
  double p2p_replication(std::int32_t src, std::int32_t dst) const;
  double replication(const workloads::Communicator& comm) const;
  void account(const Priced& p, double replication);
  // Completion batching of a merged schedule priced on an idle fabric (idle_collective).
  virtual double idle_tolerance(const Built& b) const { return b.phase ? opt_.large_batch_tolerance_s : 0.0; }
  void reset_stats();
  topo::Routing& routing_of(const Built& b) { return b.pxn ? routing_pxn_ : routing_; }
  std::string describe_common() const;

  const topo::Topology& t_;
  const models::Calibration& calib_;
  EngineCommOptions opt_;
  topo::Routing routing_;      // NCCL's default routes (no PXN): rings, trees, send/recv
  topo::Routing routing_pxn_;  // PXN on: all_to_all (NCCL enables PXN by default since 2.12)
  std::size_t runs_ = 0, phase_runs_ = 0;
  std::int32_t world_size_ = 0;
  std::set<std::int32_t> simulated_;
  PairCopies p2p_stand_ins_;
  std::vector<LinkDirStats> dirs_;
  TierBytes tiers_;
  // all_to_all_by_class, accumulated per class index (a link's class is looked up once per link, not per call;
  // the same additions in the same order as per-name totals): a2a_ is filled from them when asked for.
  std::vector<std::int32_t> a2a_class_of_link_;  // -1: not looked up yet
  std::vector<std::string> a2a_class_names_;
  std::vector<double> a2a_bytes_, a2a_time_, a2a_worst_;
  std::vector<std::uint32_t> a2a_touched_;
  mutable ClassTotals a2a_;
  // idle_collective's prices by what its schedule is built from (the communicator's GPUs, mirrors and
  // stand-ins, op, bytes, algorithm and the per-pair byte matrix as group_spec rounds it).
  std::map<std::vector<std::uint64_t>, CommTiming> idle_prices_;
  std::map<std::tuple<const void*, int, double>, CommTiming> plans_;  // collective_plan's, per call
};

// "engine": idle-fabric pricing, cached per (communicator, op, bytes) and (src, dst, bytes).
class EngineCommModel final : public EngineCommBase {
 public:
  EngineCommModel(const topo::Topology& t, const models::Calibration& calib, EngineCommOptions opt = {});
  CommTiming collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                        const std::string& algorithm) override;
  CommTiming p2p(std::int32_t src_rank, std::int32_t dst_rank, double bytes) override;
  std::string describe() const override;
  std::string name() const override { return "engine"; }
  std::optional<CommTiming> replayed_idle_price(const workloads::Communicator& comm, workloads::CollOp op,
                                                double bytes, const std::string& algorithm) const override;

 private:
  std::map<std::tuple<const void*, int, double>, Priced> cache_;
  std::map<std::tuple<std::int32_t, std::int32_t, double>, Priced> p2p_cache_;
};

// "analytic" with link statistics: the closed-form AnalyticCommModel prices every call (the times are
// exactly its), and each call's per-link-direction payload bytes come from the NCCL schedule the engine
// models would run for it (models::build_schedule with the same algorithm choice, mirrors and PXN routing,
// built once per distinct call; the bytes do not depend on the timing model). Busy time per call = the
// analytic duration on every direction that carries bytes, peak utilisation = the call's mean load over
// that time relative to nominal bandwidth (bytes / (duration x nominal), at most 1), so
// links.by_class has real bytes and utilisation under comm_model "analytic" too. Nothing is simulated.
class AnalyticLinksCommModel final : public EngineCommBase {
 public:
  AnalyticLinksCommModel(const topo::Topology& t, const models::Calibration& calib, AnalyticCommParams ap,
                         EngineCommOptions opt = {});
  CommTiming collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                        const std::string& algorithm) override;
  CommTiming p2p(std::int32_t src_rank, std::int32_t dst_rank, double bytes) override;
  CommTiming idle_collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                             const std::string& algorithm) override {
    return analytic_.idle_collective(comm, op, bytes, algorithm);
  }
  std::string describe() const override;
  std::string name() const override { return "analytic"; }

 private:
  void add_call(const Priced& bytes_only, double duration_s);
  AnalyticCommModel analytic_;
  std::map<std::tuple<const void*, int, double>, Priced> cache_;
  std::map<std::tuple<std::int32_t, std::int32_t, double>, Priced> p2p_cache_;
  Priced scratch_;
};

// "shared": every collective and message on one sim::Network on the replay's EventQueue (asynchronous).
//
// Isolation shortcut (exact): every communicator and every (src, dst) message pair is an *owner* of the
// link directions its schedules route over (all its priced calls, mirrors included). prepare() builds the
// schedule of every distinct call of the trace up front and marks each link direction with its owner; an
// owner none of whose link directions is used by another owner is *isolated*. A call of an isolated owner
// while no other call of that owner is in flight cannot share a link with anything, so the shared network
// would give it exactly its idle-fabric time: it is priced once on an idle fabric (same completion
// batching as the network) and its end is scheduled on the replay's queue. Calls of owners that share a
// link run on the network. Two calls of an isolated owner that overlap in time (e.g. two collectives of one
// communicator on two streams) would contend with each other: the owner is then marked shared and the
// model throws ReplayRestart, so the replay reruns from time 0 with it on the network (metric
// replay.restarts). Owners not seen by prepare() (a trace replayed without it) claim their links on first
// use, with the same restart rule when that reveals sharing with an owner that has a call in flight.
//
// Idle-window pricing (exact, for calls of owners that do share links): a call that starts while none of
// its link directions is used by another call in flight is priced on an idle fabric too, optimistically.
// If another call then starts on one of its link directions before it ends, the optimistic price may be
// wrong: that call instance ((owner, k-th call of the owner) of this run) is marked to run on the network,
// the replay goes on to its end and then reruns from time 0 (ReplayRestart from end_of_replay()). A run
// with no such invalidation is exact: every call priced on an idle fabric had its links to itself for
// its whole duration, where the shared network would have given it the same time. The marked set only
// grows, so the reruns end; after kMaxWindowReruns reruns every call of a sharing owner runs on the
// network (the previous behaviour). Conservative: a call occupies all its link directions from its start
// to its end.
class SharedNetworkCommModel final : public EngineCommBase {
 public:
  SharedNetworkCommModel(const topo::Topology& t, const models::Calibration& calib, EngineCommOptions opt = {});
  ~SharedNetworkCommModel() override;
  CommTiming collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                        const std::string& algorithm) override;
  CommTiming p2p(std::int32_t src_rank, std::int32_t dst_rank, double bytes) override;
  std::string describe() const override;
  std::string name() const override { return "shared"; }
  std::optional<CommTiming> replayed_idle_price(const workloads::Communicator& comm, workloads::CollOp op,
                                                double bytes, const std::string& algorithm) const override;
  bool asynchronous() const override { return true; }
  void prepare(const workloads::Trace& trace) override;
  void bind(EventQueue& q) override;
  void start_collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                        const std::string& algorithm, Done done) override;
  void start_p2p(std::int32_t src_rank, std::int32_t dst_rank, double bytes, Done done) override;
  // The schedule's algorithm and protocol, as start_collective will run it.
  CommTiming collective_plan(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                             const std::string& algorithm) override;
  void finalize_link_stats() override;
  double idle_tolerance(const Built&) const override { return opt_.shared_batch_tolerance_s; }

  std::size_t isolated_calls() const { return isolated_calls_; }  // priced by the isolation shortcut
  std::size_t network_calls() const { return network_calls_; }    // run on the shared network
  std::size_t restarts() const { return restarts_; }
  std::size_t window_calls() const { return window_calls_; }        // of isolated_calls(): idle-window ones
  std::size_t window_reruns() const { return window_reruns_; }      // reruns after an invalidated window
  // Distinct collective calls (communicator, op, bytes) and how many of them reuse the schedule of an earlier call
  // of the same shape (EngineCommOptions::shared_schedule_reuse).
  std::size_t collective_entries() const { return cache_.size(); }
  std::size_t schedules_reused() const { return shapes_reused_; }
  void end_of_replay() override;
  std::size_t shared_owners() const;                               // owners that share a link
  // The shared network's max-min solver since the last bind(): component re-solves and the flows they
  // visited (where the CPU goes when many calls run on the network).
  std::size_t network_solves() const { return net_ ? net_->model().solves() : 0; }
  std::size_t network_solver_flow_visits() const { return net_ ? net_->model().solved_flow_visits() : 0; }
  // Flow bundles started on the network (EngineCommOptions::shared_bundle_flows) and how many were split.
  std::size_t network_bundles() const { return net_ ? net_->bundles_added() : 0; }
  std::size_t network_bundles_split() const { return net_ ? net_->bundles_split() : 0; }
  // Mirror quotient on the network (EngineCommOptions::shared_mirror_quotient): calls run as one block, of those
  // expanded later, and why the other calls with mirrors ran every block.
  std::size_t mirror_quotient_calls() const { return net_ ? net_->mirror_quotient_runs() : 0; }
  std::size_t mirror_quotient_expanded() const { return net_ ? net_->mirror_expanded() : 0; }
  std::map<std::string, std::size_t> mirror_quotient_fallbacks() const {
    return net_ ? net_->mirror_fallbacks() : std::map<std::string, std::size_t>{};
  }

 private:
  // What calls of the same shape share (EngineCommOptions::shared_schedule_reuse): the schedule, its payload link
  // figures, the distinct link directions it routes over (filled by the first claim()) and its idle-fabric price
  // (filled by the first price_idle() of one of its entries, with how many schedule runs that pricing counted).
  struct Shape {
    Priced p;
    Built b;
    std::vector<std::uint32_t> dirs;
    bool dirs_known = false;
    std::shared_ptr<const Priced> idle;
    std::size_t idle_runs = 0, idle_phase_runs = 0;
  };
  // Everything build_collective and price_one_group read from a call (group_spec: ranks, mirrors, mirror stride,
  // stand-in groups, all_to_allv matrix, collnet_enable; op, bytes, algorithm); the communicator's name only names it
  // in error messages.
  using ShapeKey = std::tuple<int, double, std::string, std::vector<std::int32_t>, std::int32_t, std::int32_t,
                              std::vector<std::vector<std::int32_t>>, std::vector<std::vector<double>>, bool>;
  struct Entry {
    Priced p;              // algorithm/protocol, payload link figures
    Built b;
    std::shared_ptr<Shape> shape;  // shared with the calls of the same shape (collectives)
    std::uint32_t owner = 0;
    bool claimed = false;  // its link directions are marked with its owner
    bool idle_priced = false;  // price_idle() ran for this entry (and counted its schedule runs)
    // idle-fabric timing and link figures (isolated owners, idle windows); shared with the entries of its shape
    std::shared_ptr<const Priced> idle;
    std::vector<std::uint32_t> dirs_used;  // distinct link directions its schedule routes over (sorted)
    // The call, for its idle-fabric price (collectives; comm points into the replayed trace's communicators).
    const workloads::Communicator* comm = nullptr;
    workloads::CollOp op{};
    double bytes = 0;
    std::string algorithm;
  };
  // An owner whose idle-window calls were invalidated kOwnerWindowLimit times runs all its calls on the
  // network from the next run on (its calls overlap others: windows would only cost reruns); a run stops
  // at once (ReplayRestart) after kRunInvalidLimit invalidations, since what follows is timed wrong anyway.
  static constexpr std::size_t kMaxWindowReruns = 16;
  static constexpr std::uint32_t kOwnerWindowLimit = 2;
  static constexpr std::size_t kRunInvalidLimit = 64;
  // ... and as soon as kEarlyInvalid or more idle windows failed and they are a quarter or more of this run's
  // windows so far: end_of_replay() then turns windows off, as it would at the end of such a run (DeepSeek-V3:
  // 8 of its first ~10 windows fail, where the run used to go on to 64 of 80).
  static constexpr std::size_t kEarlyInvalid = 8;
  void price_idle(Entry& e);
  Entry& collective_entry(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                          const std::string& algorithm);
  Entry& p2p_entry(std::int32_t src, std::int32_t dst, double bytes);
  void claim(Entry& e);  // may throw ReplayRestart
  void start(Entry& e, Done done);

  std::map<std::tuple<const void*, int, double>, Entry> cache_;
  std::map<std::tuple<std::int32_t, std::int32_t, double>, Entry> p2p_cache_;
  std::map<ShapeKey, std::shared_ptr<Shape>> shapes_;
  std::size_t shapes_reused_ = 0;
  std::map<const void*, std::uint32_t> comm_owner_;
  std::map<std::pair<std::int32_t, std::int32_t>, std::uint32_t> p2p_owner_;
  std::vector<std::int64_t> link_owner_;  // per link direction: -1 none, -2 several, else the owner
  std::vector<std::uint64_t> dir_mark_;   // per link direction: the last claim() that listed it
  std::uint64_t claims_ = 0;
  std::vector<std::uint8_t> owner_shared_;
  std::vector<std::uint32_t> owner_in_flight_;  // isolated calls in flight per owner
  EventQueue* q_ = nullptr;
  std::unique_ptr<Network> net_;
  std::size_t isolated_calls_ = 0, network_calls_ = 0, restarts_ = 0;
  // idle-window pricing: per link direction the calls in flight on it (this run) and the idle-window call
  // occupying it (index into window_, or -1); per owner the calls started this run; the marked instances
  std::vector<std::uint32_t> dir_busy_;
  std::vector<std::int32_t> dir_window_;
  std::vector<std::uint32_t> owner_calls_;
  struct Window {
    std::uint64_t instance = 0;  // owner << 32 | k
    bool invalid = false;
  };
  std::vector<Window> window_;
  std::vector<std::int32_t> free_windows_;
  std::set<std::uint64_t> forced_;
  std::vector<std::uint32_t> owner_invalid_;  // invalidated idle-window calls per owner, over all runs
  bool window_off_ = false;
  std::size_t invalidated_ = 0, window_calls_ = 0, window_reruns_ = 0;
};

}  // namespace fabricsim::sim
