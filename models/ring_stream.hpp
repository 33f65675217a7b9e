#pragma once
// A step-fidelity ring collective in compact form: instead of materialising every (step, position, channel)
// transfer (2(n-1) x n x channels of them: 268 M for an all_reduce on 4096 GPUs with 16 channels), it holds
// one template transfer per ring hop and the dependency rule. sim::run_ring_stream (sim/engine/ring_stream.hpp)
// generates the transfers step by step. The rule is the one models::build_schedule's ring emits at step
// fidelity (models/collectives.cpp, Builder::ring).
//
// A hop's step is pipelined as NCCL runs a ring (src/device/prims_simple.h: a connection has NCCL_STEPS
// slots, so a sender's next step does not wait for its previous one to be received): the step pays its
// route's latency, then its bandwidth phase, which frees the hop for its next step, then the rest of its
// per-step latency (ring_post_latency_s), after which the data is at the receiver and may be forwarded.
// Step k of the hop leaving position p waits for step k-1 of the hop leaving p-1 to be received (the data it
// forwards), for its own step k-1 to be sent and for its own step k-depth to be received (a slot: NCCL's
// receiver frees one when it has consumed it). depth is the calibration's ring_credit_steps lowered to NCCL's
// depth at the ring's size (Builder::ring_depth). With depth 1 (the default) a step waits for the previous
// one's whole latency: every step of a ring whose hops differ costs its slowest hop's latency plus bandwidth.
// With depth D a step costs at least the slowest hop's latency / D and the mean hop latency (the data goes
// round the ring once per m steps), as NCCL's model prices a pipelined ring (src/graph/tuning.cc) when D is
// large; docs/collectives.md "Pipelined rings" measures it.
//
// LL and LL128 carry a flag with every line of data (src/device/prims_ll.h, prims_ll128.h at NVIDIA/nccl
// v2.26.2-1): the receiver polls the flags and a sender only waits for a free slot (prims_ll.h:59), so a step
// is not a round trip. On those protocols a network hop's step (Transfer::latency_deferred) holds the hop for
// NCCL's per-step network latency (the protocol's and proxy's work per step: tuning.cc's hwLat plus the net
// overhead) and its bandwidth phase; what the route's latency adds beyond that (a fabric slower than NCCL's
// per-step figure: EFA's 20 us per message, topologies/fabrics.cpp) is in flight after the send while the hop
// sends its next steps, up to NCCL_STEPS of them (Builder::ring). A ring has such hops only when one of its
// network hops' route latency exceeds its step latency; otherwise (InfiniBand, RoCE, every single-host ring)
// its steps are the serialised ones above.
#include <algorithm>
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

// Latency of a route as the engines charge it: link latencies plus the calibration's per-kind latencies.
inline double route_latency_s(const topo::Topology& t, const Calibration& calib, const std::vector<topo::LinkDir>& route) {
  double rl = 0;
  for (topo::LinkDir d : route) {
    const topo::Link& link = t.link(topo::Topology::link_of(d));
    rl += link.latency_s + calib.of(link.kind).latency_s;
  }
  return rl;
}

// A pipelined ring step's latency after its bandwidth phase: the hop's per-step latency less the route
// latency paid before it (models::transfer_latency_s with the hop's step latency).
inline double ring_post_latency_s(const Transfer& hop, double route_s) {
  return std::max(0.0, transfer_latency_s(hop, route_s) - route_s);
}

// A ring step's latency before and after its bandwidth phase: the route's, then the rest of the hop's per-step
// latency; for a latency_deferred hop (above) its step latency before (at most the whole) and the rest after.
struct RingStepLatency {
  double pre_s = 0, post_s = 0;
};
inline RingStepLatency ring_step_latency(const Transfer& hop, double route_s) {
  if (!hop.latency_deferred) return {route_s, ring_post_latency_s(hop, route_s)};
  Transfer whole = hop;
  whole.latency_deferred = false;
  const double total = transfer_latency_s(whole, route_s);
  const double held = std::min(total, transfer_latency_s(hop, route_s));
  return {held, total - held};
}

struct RingStream {
  struct Ring {
    std::vector<Transfer> hops;  // hops[p]: position p -> p+1 (mod size), as emitted for step 0 (deps empty)
  };
  std::string op, algorithm, protocol;
  double fixed_latency_s = 0;
  std::uint32_t nsteps = 0;  // steps per hop
  std::uint32_t depth = 1;   // steps of a hop in flight (above; 1 <= depth < 64)
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
