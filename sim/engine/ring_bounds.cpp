#include "sim/engine/ring_bounds.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "sim/base/error.hpp"
#include "sim/engine/network.hpp"

namespace fabricsim::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Hop {
  std::uint32_t ring = 0, pos = 0;
  double pre_s = 0, post_s = 0;  // latency before and after the bandwidth phase
  double bytes = 0;       // per instance, bandwidth phase (0: none)
  double w = 1, cap = 0;  // weight, per-instance rate cap (0 = none)
  std::vector<std::uint32_t> route;
  double x_hi = kInf, x_lo = kInf;
  std::uint32_t lo_link = 0;  // the link direction that gives x_lo (when it is not the cap)
  bool lo_by_cap = false;
};

// Latest finish of a ring of m hops, nsteps steps and the given depth, each hop with latency pre[p] before
// and post[p] after its bandwidth phase b[p] (models/ring_stream.hpp): the max-plus recurrence of
// ring_bounds.hpp, E(p,k) = max(A(p-1,k-1), E(p,k-1), A(p,k-depth)) + pre + b, A = E + post, evaluated
// row by row with depth + 1 rows.
double ring_makespan(const std::vector<double>& pre, const std::vector<double>& b, const std::vector<double>& post,
                     std::uint32_t nsteps, std::uint32_t depth) {
  const std::size_t m = b.size();
  if (m == 0 || nsteps == 0) return 0;
  const std::size_t R = std::size_t{depth} + 1;
  std::vector<double> E(R * m, 0.0), A(R * m, 0.0);
  double best = 0;
  for (std::uint32_t k = 0; k < nsteps; ++k) {
    double* e = E.data() + (k % R) * m;
    double* a = A.data() + (k % R) * m;
    const double* ap = k >= 1 ? A.data() + ((k - 1) % R) * m : nullptr;              // row k-1
    const double* ew = k >= 1 ? E.data() + ((k - 1) % R) * m : nullptr;              // row k-1
    const double* ac = k >= depth ? A.data() + ((k - depth) % R) * m : nullptr;      // row k-depth
    for (std::size_t p = 0; p < m; ++p) {
      double s = ap ? ap[(p + m - 1) % m] : 0.0;
      if (ew) s = std::max(s, ew[p]);
      if (ac) s = std::max(s, ac[p]);
      e[p] = s + pre[p] + b[p];
      a[p] = e[p] + post[p];
      best = std::max(best, a[p]);
    }
  }
  return best;
}

std::string fmt(const char* f, double a, double b) {
  char s[96];
  std::snprintf(s, sizeof s, f, a, b);
  return s;
}
std::string fmt(const char* f, double a) {
  char s[96];
  std::snprintf(s, sizeof s, f, a);
  return s;
}

}  // namespace

RingBounds bound_ring_stream(const models::RingStream& rs, const topo::Topology& t, topo::Routing& routing,
                             const models::Calibration& calib, double rel_tol) {
  if (!(rel_tol >= 0) || !std::isfinite(rel_tol)) throw InputError("ring bounds: rel_tol", "expected a number >= 0");
  if (rs.depth < 1) throw InputError("ring bounds: depth", "expected ring_credit_steps >= 1");
  RingBounds out;
  const std::vector<double> cap = link_capacities(t, calib);
  std::vector<Hop> hops;
  std::vector<topo::LinkDir> buf;
  for (std::uint32_t r = 0; r < rs.rings.size(); ++r) {
    const auto& ring = rs.rings[r];
    for (std::uint32_t p = 0; p < ring.hops.size(); ++p) {
      const models::Transfer& tr = ring.hops[p];
      if (tr.src >= t.num_nodes() || tr.dst >= t.num_nodes())
        throw InputError("ring bounds: hop " + std::to_string(p), "src/dst is not a node of the topology");
      Hop h;
      h.ring = r;
      h.pos = p;
      buf.clear();
      models::transfer_route(routing, tr, buf);
      const double rl = models::route_latency_s(t, calib, buf);  // as sim::run_ring_stream
      const models::RingStepLatency lat = models::ring_step_latency(tr, rl);
      h.pre_s = lat.pre_s;
      h.post_s = lat.post_s;
      const double bytes = tr.bytes * tr.steps;
      if (tr.src != tr.dst && bytes > 0 && !buf.empty()) {
        h.bytes = bytes;
        h.w = tr.weight;
        h.cap = tr.rate_cap_Bps;
        h.route.assign(buf.begin(), buf.end());
      }
      hops.push_back(std::move(h));
    }
  }
  // Upper rate bounds (alone on the path), and per link the weight W_l and the others' load bound.
  std::vector<double> W(cap.size(), 0.0), load_hi(cap.size(), 0.0);
  for (Hop& h : hops) {
    if (h.bytes == 0) continue;
    h.x_hi = h.cap > 0 ? h.cap : kInf;
    for (std::uint32_t l : h.route) h.x_hi = std::min(h.x_hi, cap[l] / h.w);
    for (std::uint32_t l : h.route) {
      W[l] += h.w;
      load_hi[l] += h.w * h.x_hi;
    }
  }
  for (Hop& h : hops) {
    if (h.bytes == 0) continue;
    h.x_lo = kInf;
    for (std::uint32_t l : h.route) {
      const double others = load_hi[l] - h.w * h.x_hi;
      const double v = std::max(cap[l] / W[l], (cap[l] - others) / h.w);
      if (v < h.x_lo) {
        h.x_lo = v;
        h.lo_link = l;
      }
    }
    if (h.cap > 0 && h.cap <= h.x_lo) {
      h.x_lo = h.cap;
      h.lo_by_cap = true;
    }
  }
  // Max-plus evaluation per ring; rings with identical duration vectors are evaluated once.
  std::map<std::pair<std::vector<double>, std::vector<double>>, std::pair<double, double>> seen;
  std::size_t hi_ring = 0;
  double hi_best = -1;
  std::size_t i = 0;
  for (std::uint32_t r = 0; r < rs.rings.size(); ++r) {
    const std::size_t m = rs.rings[r].hops.size();
    // key: (pre ++ post ++ b_lo, b_hi)
    std::vector<double> fixed(3 * m), dhi(m);
    for (std::size_t p = 0; p < m; ++p, ++i) {
      const Hop& h = hops[i];
      fixed[p] = h.pre_s;
      fixed[m + p] = h.post_s;
      fixed[2 * m + p] = h.bytes > 0 ? h.bytes / h.x_hi : 0.0;
      dhi[p] = h.bytes > 0 ? h.bytes / h.x_lo : 0.0;
    }
    auto key = std::make_pair(std::move(fixed), std::move(dhi));
    auto it = seen.find(key);
    if (it == seen.end()) {
      const std::vector<double> pre(key.first.begin(), key.first.begin() + m);
      const std::vector<double> post(key.first.begin() + m, key.first.begin() + 2 * m);
      const std::vector<double> blo(key.first.begin() + 2 * m, key.first.end());
      const double lo = ring_makespan(pre, blo, post, rs.nsteps, rs.depth);
      const double hi = ring_makespan(pre, key.second, post, rs.nsteps, rs.depth);
      out.cells += 2 * std::uint64_t{m} * rs.nsteps;
      ++out.distinct_rings;
      it = seen.emplace(std::move(key), std::make_pair(lo, hi)).first;
    }
    out.lower_s = std::max(out.lower_s, it->second.first);
    if (it->second.second > hi_best) {
      hi_best = it->second.second;
      hi_ring = r;
    }
    out.upper_s = std::max(out.upper_s, it->second.second);
  }
  out.lower_s += rs.fixed_latency_s;
  out.upper_s += rs.fixed_latency_s;
  out.certified = out.upper_s - out.lower_s <= rel_tol * out.upper_s;
  if (!out.certified) {
    // The hop of the upper bound's critical ring whose bandwidth phase bounds are widest.
    const Hop* worst = nullptr;
    double gap = -1;
    for (const Hop& h : hops)
      if (h.ring == hi_ring && h.bytes > 0 && h.bytes / h.x_lo - h.bytes / h.x_hi > gap) {
        gap = h.bytes / h.x_lo - h.bytes / h.x_hi;
        worst = &h;
      }
    out.reason = "bounds " + fmt("[%.9g, %.9g] s", out.lower_s, out.upper_s) + " differ by " +
                 fmt("%.3g relative", (out.upper_s - out.lower_s) / out.upper_s);
    if (worst) {
      const models::Transfer& tr = rs.rings[hi_ring].hops[worst->pos];
      out.reason += "; widest on the upper bound's ring " + std::to_string(hi_ring) + ": hop " +
                    t.node(tr.src).id + " -> " + t.node(tr.dst).id + ", bandwidth phase in " +
                    fmt("[%.6g, %.6g] s", worst->bytes / worst->x_hi, worst->bytes / worst->x_lo);
      if (worst->lo_by_cap) {
        out.reason += " (its rate cap)";
      } else {
        const topo::Link& L = t.link(topo::Topology::link_of(worst->lo_link));
        out.reason += std::string(" (lower rate bound from ") + topo::to_string(L.kind) + " link " + t.node(L.a).id +
                      " - " + t.node(L.b).id + fmt(": up to %g weighted flows)", W[worst->lo_link]);
      }
    }
  }
  return out;
}

}  // namespace fabricsim::sim
