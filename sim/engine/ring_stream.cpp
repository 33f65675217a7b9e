#include "sim/engine/ring_stream.hpp"

#include <algorithm>
#include <bit>
#include <numeric>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "sim/base/error.hpp"
#include "sim/engine/flow_model.hpp"
#include "sim/engine/network.hpp"
#include "sim/engine/ring_bounds.hpp"

namespace fabricsim::sim {

namespace {

constexpr std::uint32_t kSlots = 64;  // steps a hop may have issued beyond its lowest unfinished one
constexpr double kInf = std::numeric_limits<double>::infinity();

struct LatEntry {
  double t_s;
  std::uint64_t key;
};
bool lat_after(const LatEntry& a, const LatEntry& b) { return a.t_s > b.t_s || (a.t_s == b.t_s && a.key > b.key); }

class Runner {
 public:
  Runner(const models::RingStream& rs, const topo::Topology& t, topo::Routing& routing,
         const models::Calibration& calib, const RingStreamOptions& opt)
      : rs_(rs), opt_(opt), model_(link_capacities(t, calib)) {
    if (!(opt.batch_tolerance_s >= 0) || !std::isfinite(opt.batch_tolerance_s))
      throw InputError("batch tolerance", "expected a time >= 0 seconds");
    if (rs.depth < 1 || rs.depth >= kSlots)
      throw InputError("ring stream: depth", "expected 1 <= ring_credit_steps < 64");
    std::vector<topo::LinkDir> buf;
    for (const auto& ring : rs.rings) {
      const std::uint32_t m = static_cast<std::uint32_t>(ring.hops.size());
      const std::uint32_t base = static_cast<std::uint32_t>(tmpl_.size());
      for (std::uint32_t p = 0; p < m; ++p) {
        const models::Transfer& tr = ring.hops[p];
        if (tr.src >= t.num_nodes() || tr.dst >= t.num_nodes())
          throw InputError("ring stream: hop " + std::to_string(p), "src/dst is not a node of the topology");
        tmpl_.push_back(&tr);
        next_.push_back(base + (p + 1) % m);
        prev_.push_back(base + (p + m - 1) % m);
        buf.clear();
        models::transfer_route(routing, tr, buf);
        const double rl = models::route_latency_s(t, calib, buf);
        // The pipelined step (models/ring_stream.hpp): route latency, bandwidth, the rest; LL / LL128: bandwidth,
        // then all of it.
        const models::RingStepLatency lat = models::ring_step_latency(tr, rl);
        pre_.push_back(lat.pre_s);
        post_.push_back(lat.post_s);
        route_off_.push_back(static_cast<std::uint32_t>(route_pool_.size()));
        route_pool_.insert(route_pool_.end(), buf.begin(), buf.end());
        route_len_.push_back(static_cast<std::uint32_t>(buf.size()));
      }
    }
    const std::size_t G = tmpl_.size();
    depth_ = rs.depth;
    lo_.assign(G, 0);
    fin_.assign(G, 0);
    iss_.assign(G, 0);
    bw_.assign(G, 0);
    bwd_.assign(G, 0);
    slot_.assign(G * kSlots, 0);
  }

  RingStreamResult run() {
    RingStreamResult res;
    res.transfers = rs_.transfers();
    const std::uint64_t N = rs_.nsteps;
    if (N == 0 || tmpl_.empty()) {
      res.makespan_s = rs_.fixed_latency_s;
      return res;
    }
    for (std::size_t g = tmpl_.size(); g-- > 0;) ready_.push_back({static_cast<std::uint32_t>(g), 0});
    drain(0);
    model_.solve(0);
    for (;;) {
      const double nl = lat_heap_.empty() ? kInf : lat_heap_.front().t_s;
      const double next = std::min(model_.next_finish(), nl);
      if (next == kInf) break;
      const double now = next;
      ++res.events;
      while (!lat_heap_.empty() && lat_heap_.front().t_s <= now) {
        const std::uint64_t key = lat_heap_.front().key;
        std::pop_heap(lat_heap_.begin(), lat_heap_.end(), lat_after);
        lat_heap_.pop_back();
        const std::uint32_t g = key_hop(key);
        const std::uint64_t k = step_of(g, key_slot(key));
        // A latency phase ended: before the bandwidth phase, or after it (then the data has arrived).
        if ((bwd_[g] >> (k - lo_[g])) & 1u) finish(g, k, now);
        else begin_bandwidth(g, k, now);
        drain(now);
      }
      // Same batching floor as Network::tol, on the unskipped clock.
      const double tl = std::max(opt_.batch_tolerance_s, 1e-10 * (now + shift_s_) + 1e-15);
      if (model_.next_finish() <= now + tl) {
        done_.clear();
        model_.complete(now, tl, done_);
        for (std::uint64_t key : done_) bandwidth_done(key_hop(key), step_of(key_hop(key), key_slot(key)), now);
        drain(now);
      }
      model_.solve(now);
      if (snap_due_ && opt_.skip_periods && !skipped_) snapshot(now, res);
      snap_due_ = false;
    }
    if (done_count_ != res.transfers - skipped_transfers_)
      throw std::logic_error("run_ring_stream: the ring did not complete (" + std::to_string(done_count_) + " of " +
                             std::to_string(res.transfers - skipped_transfers_) + " transfers, " +
                             std::to_string(skipped_transfers_) + " skipped)");
    res.simulated = issued_count_;
    res.makespan_s = rs_.fixed_latency_s + last_finish_ + shift_s_;
    return res;
  }

 private:
  struct Ready {
    std::uint32_t g;
    std::uint64_t k;
  };

  // Step k of a hop in flight lives in slot (k + rot_) mod 64 (rot_ changes when periods are skipped, so
  // that keys already in the latency heap and the flow model keep naming the same transfer).
  std::uint32_t slot_of(std::uint64_t k) const { return static_cast<std::uint32_t>((k + rot_) % kSlots); }
  std::uint64_t make_key(std::uint32_t g, std::uint64_t k) const { return (std::uint64_t{g} << 8) | slot_of(k); }
  static std::uint32_t key_hop(std::uint64_t key) { return static_cast<std::uint32_t>(key >> 8); }
  static std::uint32_t key_slot(std::uint64_t key) { return static_cast<std::uint32_t>(key & 0xff); }
  // The step in flight at hop g whose slot is s (steps in flight lie in [lo, lo + 64)).
  std::uint64_t step_of(std::uint32_t g, std::uint32_t s) const {
    return lo_[g] + ((s - lo_[g] - rot_) % kSlots);  // unsigned wrap-around: 64 divides 2^64
  }
  bool done(std::uint64_t j, std::uint32_t g) const {
    if (j < lo_[g]) return true;
    const std::uint64_t b = j - lo_[g];
    return b < kSlots && ((fin_[g] >> b) & 1u);
  }
  // Step j of hop g has finished its bandwidth phase (the hop is free for step j + 1).
  bool sent(std::uint64_t j, std::uint32_t g) const {
    if (j < lo_[g]) return true;
    const std::uint64_t b = j - lo_[g];
    return b < kSlots && ((bwd_[g] >> b) & 1u);
  }
  // Whether step j of hop g may be issued: the data (step j-1 of the previous hop received), the hop (its
  // step j-1 sent) and a slot (its step j-depth received).
  bool can_issue(std::uint32_t g, std::uint64_t j) const {
    return j == 0 || (done(j - 1, prev_[g]) && sent(j - 1, g) && (j < depth_ || done(j - depth_, g)));
  }

  void drain(double t) {
    while (!ready_.empty()) {
      const Ready r = ready_.back();
      ready_.pop_back();
      issue(r.g, r.k, t);
    }
  }

  void issue(std::uint32_t g, std::uint64_t k, double t) {
    const std::uint64_t b = k - lo_[g];
    if (b >= kSlots) throw std::logic_error("run_ring_stream: more than 64 steps of one hop in flight");
    iss_[g] |= std::uint64_t{1} << b;
    ++issued_count_;
    if (g == 0 && k > snap_step_) {
      snap_due_ = true;
      snap_step_ = k;
    }
    const double lat = pre_[g];
    if (lat > 0) wait_latency(g, k, t + lat);
    else begin_bandwidth(g, k, t);
  }

  // Step k of hop g waits until `until` (its latency before or after the bandwidth phase).
  void wait_latency(std::uint32_t g, std::uint64_t k, double until) {
    slot_[g * kSlots + slot_of(k)] = until;
    lat_heap_.push_back(LatEntry{until, make_key(g, k)});
    std::push_heap(lat_heap_.begin(), lat_heap_.end(), lat_after);
  }

  void begin_bandwidth(std::uint32_t g, std::uint64_t k, double t) {
    const models::Transfer& tr = *tmpl_[g];
    const double bytes = tr.bytes * tr.steps;
    if (tr.src == tr.dst || !(bytes > 0)) {
      bandwidth_done(g, k, t);
      return;
    }
    const std::span<const std::uint32_t> route(route_pool_.data() + route_off_[g], route_len_[g]);
    const FlowModel::FlowId f = model_.add(t, route, bytes, tr.weight, tr.rate_cap_Bps, make_key(g, k));
    slot_[g * kSlots + slot_of(k)] = static_cast<double>(f);
    bw_[g] |= std::uint64_t{1} << (k - lo_[g]);
  }

  // The bandwidth phase of step k of hop g ended: the hop may send step k+1; the rest of the step's
  // latency follows (models/ring_stream.hpp).
  void bandwidth_done(std::uint32_t g, std::uint64_t k, double t) {
    const std::uint64_t b = k - lo_[g];
    bw_[g] &= ~(std::uint64_t{1} << b);
    bwd_[g] |= std::uint64_t{1} << b;
    const std::uint64_t N = rs_.nsteps;
    if (k + 1 < N && can_issue(g, k + 1)) ready_.push_back({g, k + 1});
    const double lat = post_[g];
    if (lat > 0) wait_latency(g, k, t + lat);
    else finish(g, k, t);
  }

  // Step k of hop g was received.
  void finish(std::uint32_t g, std::uint64_t k, double t) {
    last_finish_ = std::max(last_finish_, t);
    ++done_count_;
    const std::uint64_t b = k - lo_[g];
    fin_[g] |= std::uint64_t{1} << b;
    while (fin_[g] & 1u) {
      fin_[g] >>= 1;
      iss_[g] >>= 1;
      bw_[g] >>= 1;
      bwd_[g] >>= 1;
      ++lo_[g];
    }
    const std::uint64_t N = rs_.nsteps;
    // The next hop's step k+1 forwards this data.
    const std::uint32_t gn = next_[g];
    if (k + 1 < N && can_issue(gn, k + 1)) ready_.push_back({gn, k + 1});
    // This hop's step k+depth waited for this slot. (Each condition of can_issue becomes true at one event;
    // the event that completes the last one issues the step, once.)
    if (k + depth_ < N && can_issue(g, k + depth_)) ready_.push_back({g, k + depth_});
  }

  // Snapshot of the state relative to the first hop's current step; compares it with the last kHistory
  // snapshots and skips whole periods when one equals it (see ring_stream.hpp).
  static constexpr std::size_t kHistory = 64;
  struct Snap {
    std::uint64_t step = 0;
    double t_s = 0;
    std::uint64_t hash = 0;
    std::vector<std::int64_t> disc;
    std::vector<double> cont;
  };
  static bool same_cont(const std::vector<double>& x, const std::vector<double>& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double a = x[i], b = y[i];
      if (!(std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)) + 1e-18)) return false;
    }
    return true;
  }

  void snapshot(double now, RingStreamResult& res) {
    const std::uint64_t K = snap_step_;
    Snap cur;
    if (hist_.size() == kHistory) {
      cur = std::move(hist_.front());
      hist_.erase(hist_.begin());
    }
    cur.step = K;
    cur.t_s = now;
    cur.disc.clear();
    cur.cont.clear();
    const std::size_t G = tmpl_.size();
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&](std::int64_t v) {
      cur.disc.push_back(v);
      h = (h ^ static_cast<std::uint64_t>(v)) * 1099511628211ull;
    };
    for (std::uint32_t g = 0; g < G; ++g) {
      mix(static_cast<std::int64_t>(lo_[g] - K));
      mix(static_cast<std::int64_t>(fin_[g]));
      mix(static_cast<std::int64_t>(iss_[g]));
      mix(static_cast<std::int64_t>(bw_[g]));
      mix(static_cast<std::int64_t>(bwd_[g]));
      std::uint64_t fl = iss_[g] & ~fin_[g];
      while (fl) {
        const int b = std::countr_zero(fl);
        fl &= fl - 1;
        const double v = slot_[g * kSlots + slot_of(lo_[g] + b)];
        cur.cont.push_back((bw_[g] >> b) & 1u ? model_.remaining(static_cast<FlowModel::FlowId>(v), now) : v - now);
      }
    }
    cur.hash = h;
    // Most recent first: the shortest period.
    for (std::size_t i = hist_.size(); i-- > 0;) {
      const Snap& old = hist_[i];
      const std::uint64_t p = K - old.step;  // period in steps
      if (old.hash != cur.hash || old.disc != cur.disc || !same_cont(old.cont, cur.cont)) continue;
      const double P = now - old.t_s;
      // Highest step any hop has issued (finished steps below lo included).
      std::uint64_t max_iss = 0;
      for (std::uint32_t g = 0; g < G; ++g) {
        if (lo_[g] > 0) max_iss = std::max<std::uint64_t>(max_iss, lo_[g] - 1);
        if (iss_[g]) max_iss = std::max<std::uint64_t>(max_iss, lo_[g] + 63 - std::countl_zero(iss_[g]));
      }
      std::uint64_t m = rs_.nsteps - 1 - max_iss;
      m -= m % p;  // whole periods
      if (P > 0 && m > 0) {
        for (std::uint32_t g = 0; g < G; ++g) lo_[g] += m;
        rot_ -= m;
        const std::uint64_t periods = m / p;
        shift_s_ = static_cast<double>(periods) * P;
        skipped_ = true;
        skipped_transfers_ = m * G;
        res.skipped_steps = m;
        res.period_s = P;
        res.period_steps = p;
        res.period_at_step = K;
        snap_step_ += m;
        hist_.clear();
        return;
      }
      break;
    }
    hist_.push_back(std::move(cur));
  }

  const models::RingStream& rs_;
  RingStreamOptions opt_;
  FlowModel model_;
  // per hop (all rings' positions in one index space)
  std::vector<const models::Transfer*> tmpl_;
  std::vector<std::uint32_t> next_, prev_, route_off_, route_len_;
  std::vector<std::uint32_t> route_pool_;
  std::vector<double> pre_, post_;  // latency before and after the bandwidth phase
  std::uint64_t depth_ = 0;         // models::RingStream::depth
  std::vector<std::uint64_t> lo_, fin_, iss_, bw_, bwd_;  // masks: bit b = step lo + b (bwd_: bandwidth done)
  std::vector<double> slot_;  // per (hop, step mod 64) in flight: latency end time, or flow id in bandwidth phase
  std::vector<LatEntry> lat_heap_;
  std::vector<Ready> ready_;
  std::vector<std::uint64_t> done_;
  double last_finish_ = 0;
  std::uint64_t done_count_ = 0, issued_count_ = 0, skipped_transfers_ = 0;
  // period skipping
  bool snap_due_ = false, skipped_ = false;
  std::uint64_t snap_step_ = 0;
  double shift_s_ = 0;
  std::uint64_t rot_ = 0;
  std::vector<Snap> hist_;
};

}  // namespace

RingStreamResult run_ring_stream(const models::RingStream& rs, const topo::Topology& t, topo::Routing& routing,
                                 const models::Calibration& calib, const RingStreamOptions& opt) {
  if (opt.certify) {
    if (!(opt.batch_tolerance_s >= 0) || !std::isfinite(opt.batch_tolerance_s))
      throw InputError("batch tolerance", "expected a time >= 0 seconds");
    const RingBounds b = bound_ring_stream(rs, t, routing, calib, opt.certify_rel_tol);
    if (b.certified) {
      RingStreamResult res;
      res.transfers = rs.transfers();
      res.certified = true;
      res.lower_s = b.lower_s;
      res.upper_s = b.upper_s;
      res.makespan_s = 0.5 * (b.lower_s + b.upper_s);
      return res;
    }
    Runner r(rs, t, routing, calib, opt);
    RingStreamResult res = r.run();
    res.lower_s = b.lower_s;
    res.upper_s = b.upper_s;
    res.certify_reason = b.reason;
    return res;
  }
  Runner r(rs, t, routing, calib, opt);
  return r.run();
}

}  // namespace fabricsim::sim
