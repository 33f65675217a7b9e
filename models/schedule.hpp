#pragma once
// A collective algorithm's output: pure data, a DAG of transfers between topology nodes. The sim/
// executors run it on a network engine (our flow model or the SimGrid oracle); tests inspect it without
// any engine. Transfers go GPU->GPU, or GPU<->switch for in-network reductions (NVLS on an NVSwitch,
// SHARP on an InfiniBand switch).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "topologies/routing.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::models {

struct Transfer {
  topo::NodeId src = 0;
  topo::NodeId dst = 0;
  // A GPU the transfer is relayed through (kNoNode: none): its route is src -> via -> dst, one flow over both
  // routes, as NCCL's ring and tree search prices a PATH_NVB hop (a path through one intermediate GPU's
  // NVLinks: its bandwidth is the smallest of its links', and the channel's bandwidth is taken from every link
  // it crosses; src/graph/search.cc followPath at NVIDIA/nccl v2.26.2-1). transfer_route gives the links.
  topo::NodeId via = topo::kNoNode;
  double bytes = 0;              // bytes on the wire for one instance, one step (protocol overhead included)
  double payload_bytes = 0;      // useful bytes for one instance, one step (for statistics)
  double weight = 1;             // identical flows on this same path this transfer stands for: it takes
                                 // `weight` shares of every link it crosses and moves weight*bytes in total
  std::uint32_t replicas = 1;    // symmetric copies on other, identical paths (symmetry fidelity); the
                                 // engine simulates one and reports link statistics for one
  std::uint32_t steps = 1;       // consecutive algorithm steps merged into this transfer (phase fidelity):
                                 // it moves steps*bytes and pays the per-step latency `steps` times
  double step_latency_s = 0;     // fixed latency per step outside link latency (protocol / kernel
                                 // overhead); link latencies along the route are added by the engine
  bool latency_includes_route = false;  // true: step_latency_s is an end-to-end per-step latency that
                                 // already includes the wire (NCCL's hwLatencies), so each step costs
                                 // max(step_latency_s, route latency) instead of route + step_latency_s
  bool latency_deferred = false;  // true: the transfer pays its per-step latency (step_latency_s x steps) and
                                 // not its route's; a delay transfer after it (src == dst) pays the rest (the
                                 // send of an LL / LL128 ring step, whose route latency is in flight:
                                 // models/ring_stream.hpp)
  std::int32_t lockstep = -1;    // >= 0: a step of a bulk-synchronous wave (PAT at phase fidelity). sim::Network
                                 // runs the transfers of one schedule that have the same lockstep id, DAG
                                 // depth, bytes, steps, weight, rate cap and latency, and link-disjoint routes,
                                 // as one flow over the union of their routes (docs/engine.md, "Lockstep waves")
  double rate_cap_Bps = 0;       // upper bound on this flow's rate (per instance), 0 = none
  std::vector<std::uint32_t> deps;  // indices of transfers that must finish before this one starts
  std::int32_t channel = 0;      // NCCL channel, for display
  std::int32_t step = 0;         // algorithm step index (first step when merged), for display
};

// Latency of one transfer before its bandwidth phase, given the latency of the route it takes (link latencies
// plus calibration per-kind latencies, seconds): route + step_latency_s x steps, or, with
// latency_includes_route, steps x max(step_latency_s, route); step_latency_s x steps when latency_deferred. Both
// engines use it (docs/engine.md).
inline double transfer_latency_s(const Transfer& tr, double route_s) {
  if (tr.latency_deferred) return tr.step_latency_s * tr.steps;
  return tr.latency_includes_route ? tr.steps * std::max(tr.step_latency_s, route_s)
                                   : route_s + tr.step_latency_s * tr.steps;
}

// The link directions a transfer crosses into `out`: route(src, dst), or route(src, via) then route(via, dst).
inline void transfer_route(topo::Routing& routing, const Transfer& tr, std::vector<topo::LinkDir>& out) {
  out.clear();
  if (tr.src == tr.dst) return;
  if (tr.via == topo::kNoNode) {
    routing.compute_route(tr.src, tr.dst, out);
    return;
  }
  routing.compute_route(tr.src, tr.via, out);
  const std::vector<topo::LinkDir>& rest = routing.route(tr.via, tr.dst);
  out.insert(out.end(), rest.begin(), rest.end());
}

// A join: src == dst, no bytes, no latency. It finishes when its last dependency does (no latency phase, no
// bandwidth phase: docs/engine.md), so C transfers that all wait for the same P others can wait for one join
// instead, P + C dependencies in place of P x C (the collective builder's in-network reductions through one switch
// of many ranks: docs/collectives.md, "Joins"). Counts of a schedule's transfers (the engine's completion batching
// threshold, `coll --json` "transfers", timelines) leave joins out.
inline bool is_join(const Transfer& tr) {
  return tr.src == tr.dst && tr.bytes == 0 && tr.payload_bytes == 0 && tr.step_latency_s == 0;
}

struct Schedule {
  std::string op;         // "all_reduce", ...
  std::string algorithm;  // "ring", "tree", "nvls", "collnet", "pat", "direct", "pairwise", "hierarchical"
  std::string protocol;   // "simple", "ll", "ll128"
  std::string fidelity;   // "step", "phase", "symmetry"
  double fixed_latency_s = 0;  // launch/base latency added once before the first transfer
  std::vector<Transfer> transfers;
};

// The schedule's transfers that are not joins.
inline std::size_t counted_transfers(const Schedule& s) {
  return static_cast<std::size_t>(
      std::count_if(s.transfers.begin(), s.transfers.end(), [](const Transfer& tr) { return !is_join(tr); }));
}

}  // namespace fabricsim::models
