#pragma once
// Contract between the collective algorithms (models::Schedule, pure data) and the engines that run
// them. Two engines implement it: "fabricsim" (our flow-level max-min engine) and "simgrid" (the SimGrid
// 3.32 oracle, built when FABRICSIM_HAVE_SIMGRID). Both must give the same transfer finish times.
// The timing model (latency phase, then max-min fair bandwidth phase; batching; weights) is described in
// docs/engine.md; the incremental API (several schedules/transfers in flight on one EventQueue) is
// sim::Network in sim/engine/network.hpp.
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "models/schedule.hpp"
#include "topologies/routing.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::sim {

struct RunOptions {
  std::string engine = "fabricsim";   // "fabricsim" | "simgrid"
  double batch_tolerance_s = 0;        // completion batching window, seconds (0 = exact); 1e-6 makes large
                                       // all-to-alls tractable (see docs/performance.md)
  bool collect_link_stats = false;
};

struct TransferTiming {
  double start_s = 0;   // when its dependencies were met (latency starts counting)
  double finish_s = 0;  // when its last byte arrived
};

struct LinkDirStats {
  double bytes = 0;      // bytes carried in this direction (replicas not counted)
  double busy_s = 0;     // time with at least one flow crossing it
  double peak_util = 0;  // max instantaneous rate / effective capacity
};

struct ScheduleResult {
  double makespan_s = 0;                     // schedule.fixed_latency_s + last finish
  std::vector<TransferTiming> transfers;     // one per schedule transfer
  std::vector<LinkDirStats> link_dirs;       // indexed by topo::LinkDir when collect_link_stats
  std::size_t events = 0;                    // engine events processed (diagnostics)
};

// Runs `s` from time 0 on an idle fabric: roots start at 0; per-transfer times exclude fixed_latency_s,
// which is added to makespan_s. Throws InputError for an unknown engine name or a malformed schedule (the
// simgrid engine also needs integer weights; it rounds bytes to whole bytes and reports events = 0 and no
// link statistics).
ScheduleResult run_schedule(const models::Schedule& s, const topo::Topology& t, topo::Routing& routing,
                            const models::Calibration& calib, const RunOptions& opt = {});

// The per-call time nccl-tests prints for `iters` back-to-back calls of `s`, timed by the process driving
// `printing_gpu` (rank 0; topo::kNoNode: the slowest rank, as fabricsim-nccl-bench reports): models::back_to_back with models::kLoopCopies copies run on the engine, then the
// steady period for the remaining calls (models/benchmark_loop.hpp, docs/validation.md "Back-to-back calls").
double run_benchmark_loop(const models::Schedule& s, int iters, topo::NodeId printing_gpu, const topo::Topology& t,
                          topo::Routing& routing, const models::Calibration& calib, const RunOptions& opt = {});

std::vector<std::string> engine_names();  // engines built into this binary

}  // namespace fabricsim::sim
