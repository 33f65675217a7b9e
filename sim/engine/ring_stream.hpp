#pragma once
// Runs a step-level ring collective (models::RingStream) without materialising its transfers: the ring's
// transfers are generated step by step from one template per hop, with the dependency rule of the step-level
// schedule, on the same FlowModel and with the same timing model as sim::Network (docs/engine.md, "A
// transfer"). Memory is O(ring hops), not O(hops x steps).
//
// Period skipping (exact up to floating-point rounding): the runner takes a snapshot of its whole state
// each time the first hop starts a new step (per hop: lowest unfinished step relative to that step,
// finished / issued / in-bandwidth-phase bit masks; per transfer in flight: remaining latency or remaining
// bytes). When a snapshot equals one of the last 64 (discrete parts exactly, remaining times and bytes to
// 1e-9 relative), p steps and P seconds apart, the state repeats with that period: the ring's dynamics do
// not depend on the step index until the last step is reached, so every later period would repeat it. The
// runner then advances every hop by m steps at once (m a multiple of p, as large as keeps the highest step
// in flight at or below the last one), adds (m / p) x P to the clock, and simulates the remaining steps (the ring's end)
// normally. Anything that breaks the repetition (a degraded link whose slowdown is still propagating around
// the ring) only delays the skip; without a repetition the run is the plain step-by-step simulation.
#include <cstdint>
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "models/ring_stream.hpp"
#include "topologies/routing.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::sim {

struct RingStreamOptions {
  double batch_tolerance_s = 0;  // as NetworkOptions::batch_tolerance_s
  bool skip_periods = true;      // false: simulate every step
  // true: first bound the makespan by the certified sandwich (sim/engine/ring_bounds.hpp); when its bounds
  // agree within certify_rel_tol the result is their midpoint and no event is simulated, otherwise the
  // events are simulated as with false and certify_reason says why the bounds did not close.
  bool certify = false;
  double certify_rel_tol = 1e-9;
};

struct RingStreamResult {
  double makespan_s = 0;              // fixed_latency_s + last transfer's finish
  std::size_t events = 0;             // engine wake-ups (distinct event times) simulated
  std::uint64_t transfers = 0;        // transfers of the equivalent step-level schedule
  std::uint64_t simulated = 0;        // of those, run through the flow model (the rest were skipped)
  std::uint64_t skipped_steps = 0;    // steps per hop advanced by period skipping
  std::uint64_t period_at_step = 0;   // step of the first hop at which the repetition was found (0 = none)
  double period_s = 0;                // the repetition's period (0 = none found)
  std::uint64_t period_steps = 0;     // its length in steps
  // With RingStreamOptions::certify: the sandwich's bounds (fixed latency included), whether they closed
  // (then makespan_s is their midpoint and events == simulated == 0), and why not when they did not.
  bool certified = false;
  double lower_s = 0, upper_s = 0;
  std::string certify_reason;
};

RingStreamResult run_ring_stream(const models::RingStream& rs, const topo::Topology& t, topo::Routing& routing,
                                 const models::Calibration& calib, const RingStreamOptions& opt = {});

}  // namespace fabricsim::sim
