#pragma once
// Exact quotient of a dependency-free transfer set (an all-to-all) by the symmetry of its routes
// (docs/engine.md, "Quotient of a symmetric all-to-all").
//
// On a symmetric fabric (a superpod with D-mod-k routing) the millions of flows of an all-to-all fall into a
// few classes that the max-min allocation treats alike. run_quotient streams the transfers once, computes
// each one's route, and groups:
//   - link directions into link classes: same capacity, same per-hop latency (link + calibration), same
//     link kind, same kind and tier of the two end nodes;
//   - transfers into flow classes: same multiset of link classes on the route, same bytes, weight, steps,
//     step latency, latency rule and rate cap.
// It then checks that the partition is equitable: every link direction of a link class is crossed by the
// same number c(L, F) of flows of each flow class F (per flow, the number of hops in each link class is equal
// by construction). When it is, progressive filling gives every flow of a class the same rate at all times
// (at every filling level all links of a class carry the same load, so they saturate together and freeze
// whole classes), flows of a class start together (same route latency) and finish together, and finished
// classes leave an equitable partition behind. So a weighted fluid simulation over one representative per
// class, where class F loads link class L with multiplicity c(L, F) = |F|·hops(F, L)/|L|, gives every flow
// the finish time the full flow simulation (sim::run_schedule) gives it, up to floating-point rounding; the
// timing rules (latency phase, bandwidth phase, completion batching with the same tolerance) are
// sim::Network's. When the check fails (a degraded link, an irregular placement, unequal sizes) nothing is
// simulated: `applied` is false and `reason` names the first link class whose counts differ; the caller runs
// the flows (sim::run_schedule). With QuotientOptions::refine the classes are refined instead (colour
// refinement, one routing pass per round) until the partition is equitable (partial symmetry).
//
// Cost: one route computation per transfer and a counter per (flow class, link direction); memory is
// O(flow classes x link directions), independent of the number of transfers.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "models/schedule.hpp"
#include "topologies/routing.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::sim {

struct QuotientOptions {
  double batch_tolerance_s = 0;        // completion batching window, as RunOptions (0 = exact)
  // When set, the window as a function of the number of transfers (known once they have streamed past);
  // overrides batch_tolerance_s (sim::time_collective: exact below 20000 transfers, else 1 us).
  std::function<double(std::size_t)> tolerance_for_flows;
  // More classes than this: not applied (the quotient is not small). The per-class link counters
  // (4 bytes per link direction) are also held to at most 64 MiB in all.
  std::size_t max_flow_classes = 512;
  bool keep_flow_classes = false;      // fill QuotientResult::flow_class (one entry per transfer; tests)
  // Partial symmetry: when the one-pass check fails, refine the classes (colour refinement, one routing pass
  // per round) until the partition is equitable, and run the quotient over the finer classes (exact in the
  // same way; QuotientResult::refine_rounds says how many rounds). Off: the check's failure is final.
  bool refine = false;
  int max_refine_rounds = 12;
};

struct QuotientFlowClass {
  std::size_t flows = 0;               // transfers in the class
  topo::NodeId src = 0, dst = 0;       // the first of them
  double weight = 1, bytes = 0;        // per transfer: weight, bytes per instance (bytes x steps)
  double start_bw_s = 0;               // when its bandwidth phase starts (its latency phase's length)
  double finish_s = 0;                 // when every transfer of the class finishes (fixed latency excluded)
};

struct QuotientResult {
  bool applied = false;  // the quotient ran; false: `reason` says why not and nothing was simulated
  std::string reason;
  double makespan_s = 0;  // fixed_latency_s + last finish, as sim::run_schedule
  std::size_t flows = 0;  // transfers seen
  std::size_t link_classes = 0;  // link classes crossed by some transfer
  std::size_t events = 0;        // distinct simulated times processed
  int refine_rounds = 0;         // with QuotientOptions::refine: colour-refinement rounds run (0: one-pass check)
  std::vector<QuotientFlowClass> classes;
  std::vector<std::uint32_t> flow_class;  // with keep_flow_classes: class index per transfer, in stream order
};

// Calls `produce(sink)`, which must hand every transfer of the set to `sink` (dependencies are not allowed:
// every transfer starts at time 0, as the roots of sim::run_schedule). Throws InputError for a malformed
// transfer (as sim::Network does).
using TransferProducer = std::function<void(const models::TransferSink&)>;
QuotientResult run_quotient(const TransferProducer& produce, double fixed_latency_s, const topo::Topology& t,
                            topo::Routing& routing, const models::Calibration& calib, const QuotientOptions& opt = {});

// A collective through the quotient: models::stream_direct (the direct all_to_all(v), per pair at step
// fidelity or aggregated with PXN routing) and run_quotient. Not applied (reason set) when the spec's
// schedule is not such an all-to-all or the check fails. `header`, when given, receives the schedule's
// op/algorithm/protocol/fidelity/fixed_latency_s.
QuotientResult run_collective_quotient(const models::CollectiveSpec& spec, const topo::Topology& t,
                                       topo::Routing& routing, const models::Calibration& calib,
                                       const QuotientOptions& opt = {}, models::Schedule* header = nullptr);

// Exact quotient of the mirror groups of one schedule (docs/engine.md, "Mirror quotient on the shared network"):
// the schedule's transfers are `groups` blocks of equal size, block g being the image of block 0 (a communicator
// and its co-located mirrors, merged as replay/engine_comm_model.cpp does). Transfer i of block 0 and its images
// form one flow class. The link directions are partitioned into orbits: the connected pieces of "hop h of
// transfer i in block 0 and hop h of its image in block g" (links of different capacity or per-hop latency in one
// orbit: not applied). The check is the one of run_quotient: the partition is equitable, i.e. every link direction
// of an orbit is crossed by the same number of copies of each class. Then max-min gives the copies of a class
// equal rates at all times, so one representative per class, loading each orbit's first link direction with that
// number (its multiplicity), gives every copy's times, as long as nothing else loads the orbits unequally
// (sim::Network's concern).
struct MirrorQuotient {
  bool ok = false;
  std::string reason;  // why not, when !ok
  std::string kind;    // the reason's category (metrics): "blocks differ", "routes differ", "unequal links", "not equitable"
  std::uint32_t groups = 1, per_group = 0;
  std::vector<std::vector<topo::LinkDir>> orbits;  // sorted; represented by their first link direction
  // Per transfer i < per_group (CSR by off): the orbits its copies cross and how many copies cross each link of one.
  std::vector<std::uint32_t> off, orbit, mult;
};
// `route(src, dst, out)` computes a route (the caller's routing, e.g. Network's cached one); `cap` and `hop_latency_s`
// per link direction as sim::Network uses them.
using RouteInto = std::function<void(topo::NodeId, topo::NodeId, std::vector<topo::LinkDir>&)>;
MirrorQuotient mirror_quotient(const models::Schedule& s, std::uint32_t groups, const RouteInto& route,
                               const std::vector<double>& cap, const std::vector<double>& hop_latency_s);

}  // namespace fabricsim::sim
