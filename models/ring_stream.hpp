#pragma once
// A step-fidelity ring collective in compact form: instead of materialising every (step, position, channel)
// transfer (2(n-1) x n x channels of them: 268 M for an all_reduce on 4096 GPUs with 16 channels), it holds
// one template transfer per ring hop and the dependency rule. sim::run_ring_stream (sim/engine/ring_stream.hpp)
// generates the transfers step by step. The rule is the one models::build_schedule's ring emits at step
// fidelity (models/collectives.cpp, Builder::ring): step k of the hop leaving position p waits for step k-1
// of the hop leaving position p-1 (the data it forwards) and for its own step k-window.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "models/schedule.hpp"
#include "topologies/routing.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::models {

struct RingStream {
  struct Ring {
    std::vector<Transfer> hops;  // hops[p]: position p -> p+1 (mod size), as emitted for step 0 (deps empty)
  };
  std::string op, algorithm, protocol;
  double fixed_latency_s = 0;
  std::uint32_t nsteps = 0;  // steps per hop
  std::uint32_t window = 1;  // calibration ring_outstanding_steps
  std::vector<Ring> rings;   // one per distinct channel order (weight = channels sharing it)
  // Transfers the equivalent step-level Schedule holds.
  std::uint64_t transfers() const {
    std::uint64_t n = 0;
    for (const auto& r : rings) n += r.hops.size();
    return n * nsteps;
  }
};

// The compact form of build_schedule(spec, ...) when that schedule is a plain ring at step fidelity
// (ring all_reduce, all_gather or reduce_scatter; algorithm and fidelity from the spec or as build_schedule
// resolves them); std::nullopt otherwise. Same validation and errors as build_schedule.
std::optional<RingStream> build_ring_stream(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing,
                                            const Calibration& calib);

}  // namespace fabricsim::models
