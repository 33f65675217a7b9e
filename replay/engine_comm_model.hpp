#pragma once
// Engine-backed communication costs: each distinct (communicator, operation, bytes) is turned into an NCCL
// schedule by models::build_schedule (algorithm/protocol from the tuner unless the trace forces one) and
// run on the flow-level engine (sim::run_schedule) on an idle fabric; the makespan is cached. Concurrent
// identical groups (`mirrors`, ranks shifted by k * mirror_stride) are merged into the same schedule so
// that they contend for shared links (e.g. the 8 data-parallel rings of a DGX node on the rails and
// spines). Different collectives in flight at the same time do not contend with each other in this
// model (stated in RunResult::notes).
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
  // Contention between different collectives: false = each distinct collective is priced once on an idle
  // fabric and cached (fast; overlapping collectives do not slow each other down); true = every collective
  // and message of the replay runs on one shared network at the time it starts (asynchronous model), so
  // everything in flight at the same time shares the links max-min fairly (slower: nothing is cached).
  bool shared_network = false;
  double shared_batch_tolerance_s = 0;  // completion batching of the shared network, seconds (0 = exact)
  // Step-level pricing while ranks_priced x communicator_size <= step_limit (a ring all_reduce emits about
  // 2 x that x channels transfers; a direct all_to_all that many flows); phase fidelity above.
  double step_limit = 20000;
  double large_batch_tolerance_s = 1e-6;  // completion batching for phase-fidelity schedules, seconds
};

class EngineCommModel final : public CommModel {
 public:
  EngineCommModel(const topo::Topology& t, const models::Calibration& calib, EngineCommOptions opt = {});
  ~EngineCommModel() override;
  CommTiming collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                        const std::string& algorithm) override;
  CommTiming p2p(std::int32_t src_rank, std::int32_t dst_rank, double bytes) override;
  std::string describe() const override;
  // shared_network mode (asynchronous; see CommModel): the replay calls these instead.
  bool asynchronous() const override { return opt_.shared_network; }
  void start_collective(double now_s, const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                        const std::string& algorithm, Done done) override;
  void start_p2p(double now_s, std::int32_t src_rank, std::int32_t dst_rank, double bytes, Done done) override;
  double next_event_s() const override;
  void run_until(double t_s) override;
  // shared_network mode: copies the shared network's busy time and peak utilisation per link direction
  // into link_dirs() (call once the replay is over; bytes are accounted as operations start).
  void finalize_link_stats();

  std::size_t schedules_run() const { return runs_; }
  std::size_t phase_schedules_run() const { return phase_runs_; }

  // Symmetry of the trace being replayed, for cluster-wide totals: `world_size` GPUs of which the sorted
  // `simulated` ranks are replayed; every other rank is a stand-in for a simulated one. Without this call
  // every rank is assumed simulated (replication factor 1).
  void set_symmetry(std::int32_t world_size, std::vector<std::int32_t> simulated);

  // Per link direction (indexed by topo::LinkDir, size 2 x links), summed over every call priced so far:
  // bytes (payload, i.e. NCCL data, not the efficiency-inflated wire bytes the engine runs) and busy time
  // = sum over calls of the per-call values of the schedule that priced it (the
  // communicator and its mirrors, run alone on an idle fabric); peak_util = max over calls. These are the
  // links the *priced* groups use (the simulated ranks' communicators and their co-located mirrors), with
  // the traffic those groups put on them; stand-in groups elsewhere in the cluster (e.g. the tensor-
  // parallel groups of other data-parallel replicas) are not placed on their own links. Busy times add
  // per call as if calls did not overlap (an upper bound on the real busy time when they do).
  const std::vector<LinkDirStats>& link_dirs() const { return dirs_; }

  // Bytes by link tier (0 in-host, 1 leaf, 2 spine, 3 core): "priced" = sum of link_dirs() bytes;
  // "cluster" = each call's bytes times its replication factor R = (world_size / simulated ranks) x
  // (simulated members of the communicator) / (members x (mirrors + 1)), i.e. the number of identical
  // copies of the priced group that the stand-in ranks form in the whole cluster (1 for a data-parallel
  // group priced with all its mirrors, dp for a tensor-parallel group of one data-parallel replica).
  struct TierBytes {
    std::map<int, double> priced, cluster;
  };
  TierBytes link_totals_by_tier() const { return tiers_; }

 private:
  struct Priced {
    CommTiming timing;
    std::vector<std::pair<std::uint32_t, LinkDirStats>> dirs;  // link directions with traffic, per call
    std::map<int, double> tier_bytes;                           // per call, by link tier
    double replication = 1;                                     // copies in the whole cluster
  };
  // A collective's (or message's) schedule, with how it is run.
  struct Built {
    std::shared_ptr<const models::Schedule> s;  // null: nothing to move (one rank, or 0 bytes)
    bool phase = false;                          // phase fidelity (else step)
    bool pxn = false;                            // routed with PXN (all_to_all)
  };
  // What is cached per (communicator, op, bytes) or (src, dst, bytes). Idle mode: the priced timing and
  // link figures (no schedule kept). shared_network mode: the schedule to start on every call, its
  // algorithm/protocol and payload link figures.
  struct Entry {
    Priced p;
    Built b;
  };
  Built build_collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                         const std::string& algorithm);
  Built build_p2p(std::int32_t src, std::int32_t dst, double bytes);
  // `ran`: the schedule's result when it was already run (with link statistics), else it is run here.
  Priced price(const models::Schedule& s, bool phase, topo::Routing& routing, const ScheduleResult* ran = nullptr);
  // Payload bytes per link direction and per tier of one run of `s` (busy time / peak left at 0).
  void payload_bytes(const models::Schedule& s, topo::Routing& routing, Priced& into) const;
  double p2p_replication() const;
  void account(const Priced& p, double replication);
  topo::Routing& routing_of(const Built& b) { return b.pxn ? routing_pxn_ : routing_; }
  void start_shared(double now_s, Entry& e, Done done);
  double replication(const workloads::Communicator& comm) const;

  const topo::Topology& t_;
  const models::Calibration& calib_;
  EngineCommOptions opt_;
  topo::Routing routing_;      // NCCL's default routes (no PXN): rings, trees, send/recv
  topo::Routing routing_pxn_;  // PXN on: all_to_all (NCCL enables PXN by default since 2.12)
  std::map<std::tuple<const void*, int, double>, Entry> cache_;
  std::map<std::tuple<std::int32_t, std::int32_t, double>, Entry> p2p_cache_;
  // shared_network mode: the one network every collective and message runs on
  std::unique_ptr<EventQueue> q_;
  std::unique_ptr<Network> net_;
  std::size_t runs_ = 0, phase_runs_ = 0;
  std::int32_t world_size_ = 0;
  std::set<std::int32_t> simulated_;
  std::vector<LinkDirStats> dirs_;
  TierBytes tiers_;
};

}  // namespace fabricsim::sim
