#pragma once
// A certified sandwich for a step-level ring (models::RingStream) without simulating its events.
//
// The ring's transfers form a max-plus system (models/ring_stream.hpp): transfer (hop g, step k) starts at
//   S(g,k) = max(A(prev g, k-1), E(g, k-1), A(g, k-depth))   (a missing term counts as 0)
// sends at E(g,k) = S(g,k) + P_g + B_g and is received at A(g,k) = E(g,k) + Q_g, with P_g and Q_g its latency
// before and after the bandwidth phase (known exactly) and B_g its bandwidth phase, which depends on how the
// fluid model shares the links. If every B_g is known to lie in
// [b_lo_g, b_hi_g] whatever the other flows do, evaluating the recurrence with b_lo (b_hi) gives a lower
// (upper) bound of every F(g,k) of the real run (max and + are monotone), hence of the makespan.
//
// Rate bounds of hop g's flow (per instance, weight w_g, cap c_g, bytes per instance V_g), from the max-min
// allocation alone (docs/engine.md, "Sharing"):
//  - at most x_hi = min(c_g, min over its links l of C_l / w_g) (a flow alone on its path);
//  - at least x_lo = min(c_g, min over its links l of max(C_l / W_l, (C_l - O_l) / w_g)), where W_l bounds the
//    weight on l at any time (the sum of the weights of the hops whose route crosses l: a hop sends one step
//    at a time) and O_l bounds what the other flows on l can take (the sum over those hops of w_h x_hi_h,
//    minus g's own). Why: a flow freezes at its cap or when one of its links l saturates; then sum w x = C_l over
//    l's flows, all at rates <= x_g, so x_g >= C_l / W_l, and w_g x_g = C_l - (the others' load) >= C_l - O_l.
// Then b_lo = V_g / x_hi and b_hi = V_g / x_lo. Transfers without a bandwidth phase (src == dst, 0 bytes)
// have b = 0.
//
// Evaluating the recurrence costs two max-plus cells per transfer (a few ns each, no fluid engine, memory
// O(depth x hops)). When the bounds agree within `rel_tol`, the makespan is certified; otherwise `reason`
// says where the gap comes from (the hop on the upper bound's critical ring with the widest [b_lo, b_hi] and
// the link that limits its lower rate bound). The bounds are for the exact fluid system; sim::run_ring_stream
// with batch tolerance 0 differs from it only by completion batching's rounding floor (docs/engine.md).
#include <cstdint>
#include <string>

#include "models/calibration.hpp"
#include "models/ring_stream.hpp"
#include "topologies/routing.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::sim {

struct RingBounds {
  double lower_s = 0, upper_s = 0;  // makespan bounds, fixed_latency_s included
  bool certified = false;           // upper_s - lower_s <= rel_tol x upper_s
  std::string reason;               // when not certified: the gap and where it comes from
  std::uint64_t cells = 0;          // max-plus cells evaluated (transfers x 2)
  std::uint64_t distinct_rings = 0; // rings evaluated (rings with the same duration bounds are evaluated once)
};

RingBounds bound_ring_stream(const models::RingStream& rs, const topo::Topology& t, topo::Routing& routing,
                             const models::Calibration& calib, double rel_tol = 1e-9);

}  // namespace fabricsim::sim
