#pragma once
// One price for one collective call: the function `fabricsim coll`, `fabricsim validate`/`calibrate`
// (validate/simulate.cpp) and the replay's engine communication model use, so that the same call on the same
// System gets the same time everywhere (tests/coll/test_one_price.cpp checks coll, run and validate agree
// exactly).
//
// time_collective: the tuner's algorithm and protocol unless the call fixes them (models::tune), the spec's
// fidelity (Auto: models::resolve_fidelity), the routing NCCL would use (PXN for all_to_all(v) and send_recv
// unless the call says otherwise), then on the engine: a step-level ring streamed (sim::run_ring_stream, the
// materialised schedule's time up to floating-point rounding, docs/engine.md), first through its certified
// bounds (sim/engine/ring_bounds.hpp), which when they close give the exact time without events or batching;
// a direct all_to_all(v) through the exact quotient by the fabric's symmetry when its check passes
// (sim::run_quotient, docs/engine.md), else the schedule (completion batching: exact below 20000 transfers,
// else 1 us, docs/engine.md);
// for rooted operations with `iters` the benchmark loop's period (models/benchmark_loop.hpp); finally the
// host launch floor when one host thread drives several GPUs (models::host_launch_floor_s).
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "models/collectives.hpp"
#include "models/system.hpp"
#include "models/tuner.hpp"
#include "sim/engine/schedule_runner.hpp"

namespace fabricsim::sim {

struct CollectiveCall {
  models::CollectiveSpec spec;  // op, bytes, communicator; algorithm/protocol empty = the tuner's choice
  std::optional<bool> pxn;      // none: on for all_to_all(v), send_recv and scatter (NCCL's default on any fabric)
  int iters = 0;                // back-to-back calls: for rooted ops (models::calls_overlap) the loop's period
  bool slowest_rank = false;    // with iters: the slowest rank's loop time (fabricsim-nccl-bench), not rank 0's
  int gpus_per_thread = 0;      // > 0: at least the host launch floor of a thread driving that many GPUs
  int floor_channels = 0;       // channels the call ran on, for the floor (0: models::nccl_call_channels)
  std::string engine = "fabricsim";
  std::optional<double> batch_tolerance_s;  // none: exact below 20000 transfers, else 1 us
  bool keep_run = false;        // materialise the schedule and keep it with its per-transfer/link results
};

struct CollectiveTime {
  double time_s = 0;
  double predicted_s = 0;  // the tuner's closed-form estimate of the chosen algorithm
  std::string algorithm, protocol, fidelity;
  std::size_t transfers = 0;
  bool at_host_floor = false;  // time_s is the host launch floor
  // How the engine ran it: "quotient" (a symmetric direct all_to_all(v) through sim::run_quotient, exact),
  // "ring-stream" (sim::run_ring_stream) or "flows" (the schedule on sim::run_schedule); with "flows" for a
  // direct all_to_all(v), quotient_reason says why the quotient did not apply.
  std::string method = "flows";
  std::string quotient_reason;
  // With "ring-stream": whether the ring's certified bounds closed (time_s is then the exact fluid model's
  // makespan within 1e-9 relative, no events run), and why not when they did not (the events ran).
  bool certified = false;
  std::string certify_reason;
  // With keep_run: the single call's schedule and its engine result (link statistics collected).
  std::shared_ptr<models::Schedule> schedule;
  std::shared_ptr<ScheduleResult> run;
};

// The spec with the tuner's algorithm and protocol filled in (when the call leaves them open) and its
// closed-form estimate; `calib` defaults to the System's.
models::CollectiveSpec tuned_spec(const models::System& sys, const CollectiveCall& call,
                                  const models::Calibration& calib, double* predicted_s = nullptr);
// The routing time_collective uses for the call.
topo::Routing& call_routing(const models::System& sys, const CollectiveCall& call);
// The schedule-producing sibling: the schedule time_collective runs for one call (tuned spec, same routing).
models::Schedule collective_schedule(const models::System& sys, const CollectiveCall& call);
models::Schedule collective_schedule(const models::System& sys, const CollectiveCall& call,
                                     const models::Calibration& calib);

CollectiveTime time_collective(const models::System& sys, const CollectiveCall& call);
// The same with another calibration on the System's topology (calibration fitters).
CollectiveTime time_collective(const models::System& sys, const CollectiveCall& call, const models::Calibration& calib);
// The same on a topology, routing and calibration held elsewhere (the replay's engine model, which holds them
// for a whole run); `routing` must be call_routing's choice for the call (PXN for all_to_all(v), send_recv).
CollectiveTime time_collective(const topo::Topology& t, topo::Routing& routing, const models::Calibration& calib,
                               const CollectiveCall& call);

}  // namespace fabricsim::sim
