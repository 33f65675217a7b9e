#include "sim/engine/flow_model.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fabricsim::sim {

namespace {
// Min-heap helpers (std heaps are max-heaps: the comparator says "a comes after b").
bool finish_after(const auto& a, const auto& b) { return a.t_s > b.t_s || (a.t_s == b.t_s && a.flow > b.flow); }
}  // namespace

FlowModel::FlowModel(std::vector<double> capacity_Bps) : cap_(std::move(capacity_Bps)) {
  const std::size_t n = cap_.size();
  for (std::size_t r = 0; r < n; ++r)
    if (!(cap_[r] > 0)) throw std::logic_error("FlowModel: resource capacity must be > 0");
  res_flows_.resize(n);
  load_.assign(n, 0);
  wsum_.assign(n, 0);
  stat_t_.assign(n, 0);
  stats_.assign(n, {});
  res_mark_.assign(n, 0);
  res_dirty_.assign(n, 0);
  s_free_.assign(n, 0);
  s_w_.assign(n, 0);
  s_unfrozen_.assign(n, 0);
  touch_mark_.assign(n, 0);
  pin_res_mark_.assign(n, 0);
  pin_res_ok_.assign(n, 0);
}

FlowModel::FlowId FlowModel::add(double now_s, std::span<const std::uint32_t> resources, double bytes_per_instance,
                                 double weight, double rate_cap_Bps, std::uint64_t user) {
  return add_impl(now_s, resources, nullptr, 1, bytes_per_instance, weight, rate_cap_Bps, user);
}

namespace {
// add_bundle / add_symmetric: one multiplicity per resource, each in 1..members, at least one member.
void check_multiplicity(const char* who, std::span<const std::uint32_t> resources,
                        std::span<const std::uint32_t> multiplicity, std::uint32_t members) {
  if (multiplicity.size() != resources.size() || members == 0)
    throw std::logic_error(std::string(who) + ": one multiplicity per resource and at least one member");
  for (std::uint32_t m : multiplicity)
    if (m == 0 || m > members) throw std::logic_error(std::string(who) + ": multiplicity outside 1..members");
}
}  // namespace

FlowModel::FlowId FlowModel::add_bundle(double now_s, std::span<const std::uint32_t> resources,
                                        std::span<const std::uint32_t> multiplicity, std::uint32_t members,
                                        double bytes_per_instance, double weight, double rate_cap_Bps,
                                        std::uint64_t user) {
  check_multiplicity("FlowModel::add_bundle", resources, multiplicity, members);
  ++bundles_added_;
  return add_impl(now_s, resources, multiplicity.data(), members, bytes_per_instance, weight, rate_cap_Bps, user);
}

FlowModel::FlowId FlowModel::add_symmetric(double now_s, std::span<const std::uint32_t> resources,
                                           std::span<const std::uint32_t> multiplicity, std::uint32_t members,
                                           double bytes_per_instance, double weight, double rate_cap_Bps,
                                           std::uint64_t user) {
  check_multiplicity("FlowModel::add_symmetric", resources, multiplicity, members);
  const FlowId f = add_impl(now_s, resources, multiplicity.data(), members, bytes_per_instance, weight, rate_cap_Bps, user);
  hot_[f].members = 0;  // never a split suspect
  return f;
}

FlowModel::FlowId FlowModel::add_impl(double now_s, std::span<const std::uint32_t> resources,
                                      const std::uint32_t* multiplicity, std::uint32_t members,
                                      double bytes_per_instance, double weight, double rate_cap_Bps,
                                      std::uint64_t user) {
  if (!(now_s >= now_s_)) throw std::logic_error("FlowModel::add in the past");
  if (resources.empty()) throw std::logic_error("FlowModel::add: a flow needs at least one resource");
  if (!(bytes_per_instance > 0) || !(weight > 0)) throw std::logic_error("FlowModel::add: bytes and weight must be > 0");
  now_s_ = now_s;
  FlowId f;
  if (!free_ids_.empty()) {
    f = free_ids_.back();
    free_ids_.pop_back();
  } else {
    f = static_cast<FlowId>(rem_.size());
    rem_.push_back(0);
    tupd_.push_back(0);
    hot_.push_back(FlowHot{});
    capr_.push_back(0);
    finish_.push_back(kInf);
    user_.push_back(0);
    ver_.push_back(0);
    pin_flow_mark_.push_back(0);
    pin_flow_ok_.push_back(0);
    alive_.push_back(0);
    frozen_.push_back(0);
    slot_.push_back(0);
  }
  hot_[f].members = members;
  rem_[f] = bytes_per_instance;
  tupd_[f] = now_s;
  hot_[f].rate = 0;
  hot_[f].w = weight;
  capr_[f] = rate_cap_Bps > 0 ? rate_cap_Bps : 0;
  finish_[f] = kInf;
  user_[f] = user;
  ++ver_[f];
  alive_[f] = 1;
  hot_[f].mark = 0;
  pin_flow_mark_[f] = 0;
  if (hops_.size() > 4096 && dead_hops_ * 2 > hops_.size()) compact_hops();
  if (hops_.size() + resources.size() > 0xffffffffu) throw std::logic_error("FlowModel: too many hops");
  for (std::uint32_t r : resources)
    if (r >= cap_.size()) throw std::logic_error("FlowModel::add: resource id out of range");
  if (hops_.size() + resources.size() > hops_.capacity()) {
    // Grow by a quarter, not the vector's doubling: the hop array is the model's largest (12 bytes per hop).
    hops_.reserve(std::max(hops_.size() + resources.size(), hops_.capacity() + hops_.capacity() / 4));
  }
  const auto off = static_cast<std::uint32_t>(hops_.size());
  hot_[f].off = off;
  hot_[f].cnt = static_cast<std::uint32_t>(resources.size());
  // A shadow hop of another flow on one of these resources stops being one: it takes in that flow's log and
  // joins the resource's flow list (where it would have been all along: the flow was alone there).
  if (live_shadows_ > 0)
    for (std::uint32_t r : resources) {
      if (shadow_flow_[r] == 0 || shadow_flow_[r] == kPendingSettle) continue;
      const FlowId g = shadow_flow_[r] - 1;
      const std::uint32_t h = shadow_hop_[r];
      flush_hop(g, h);
      Hop& hp = hops_[h];
      hp.mult &= ~kShadowBit;
      hp.pos = static_cast<std::uint32_t>(res_flows_[r].size());
      res_flows_[r].push_back(ResEntry{g, hp.mult, h});
      wsum_[r] += hot_[g].w * hp.mult;
      shadow_flow_[r] = 0;
      --live_shadows_;
      if (--slots_[slot_[g] - 1].n == 0) release_slot(g);
    }
  // Shadow hops (see "Shadow hops" below) of a plain flow over many resources: those no flow uses (nor an ended
  // one's pending statistics), but the one of smallest (capacity / weight, id), which the solver keeps.
  std::uint32_t rep = 0xffffffffu, eligible = 0;
  if (shadows_on_ && multiplicity == nullptr && members == 1 && resources.size() >= kMinShadowRoute) {
    if (shadow_flow_.empty()) shadow_flow_.assign(cap_.size(), 0), shadow_hop_.assign(cap_.size(), 0);
    shadow_scratch_.assign(resources.size(), 0);
    double rep_key = kInf;
    for (std::uint32_t k = 0; k < resources.size(); ++k) {
      const std::uint32_t r = resources[k];
      if (!res_flows_[r].empty() || res_dirty_[r] || shadow_flow_[r] != 0) continue;
      shadow_scratch_[k] = 1;
      ++eligible;
      const double key = cap_[r] / weight;  // the solver's level of a resource the flow alone crosses
      if (rep == 0xffffffffu || key < rep_key || (key == rep_key && r < resources[rep])) {
        rep = k;
        rep_key = key;
      }
    }
    if (eligible < kMinShadowRoute / 2) eligible = 0;
  }
  for (std::uint32_t k = 0; k < resources.size(); ++k) {
    const std::uint32_t r = resources[k];
    const std::uint32_t m = multiplicity ? multiplicity[k] : 1;
    if (eligible > 0 && k != rep && shadow_scratch_[k]) {
      hops_.push_back(Hop{r, 0, m | kShadowBit});
      shadow_flow_[r] = f + 1;
      shadow_hop_[r] = off + k;
      continue;
    }
    auto& list = res_flows_[r];
    hops_.push_back(Hop{r, static_cast<std::uint32_t>(list.size()), m});
    list.push_back(ResEntry{f, m, off + k});
    wsum_[r] += weight * m;
  }
  if (eligible > 1) {
    std::uint32_t i;
    if (!free_slots_.empty()) {
      i = free_slots_.back();
      free_slots_.pop_back();
    } else {
      i = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    slots_[i].flow = f;
    slots_[i].n = eligible - 1;
    slots_[i].log.clear();
    slot_[f] = i + 1;
    live_shadows_ += eligible - 1;
    shadow_hops_made_ += eligible - 1;
  }
  dirty_flows_.push_back(f);
  ++active_;
  ++added_flows_;
  added_hops_ += resources.size();
  return f;
}

void FlowModel::reserve(std::size_t flows) {
  // Flow ids are recycled: arrays hold active flows plus free ids, so `active + flows` entries suffice.
  const std::size_t need = active_ + flows;
  for (auto* v : {&rem_, &tupd_, &capr_, &finish_}) reserve_geometric(*v, need);
  reserve_geometric(hot_, need);
  reserve_geometric(user_, need);
  reserve_geometric(ver_, need);
  reserve_geometric(pin_flow_mark_, need);
  reserve_geometric(pin_flow_ok_, need);
  reserve_geometric(alive_, need);
  reserve_geometric(frozen_, need);
  reserve_geometric(slot_, need);
  reserve_geometric(heap_, heap_.size() + flows);
  // Hops: the mean route length so far (8 before any flow: GPU-NVSwitch-GPU-NIC-leaf-spine-leaf-NIC-GPU).
  const std::size_t per = added_flows_ ? static_cast<std::size_t>((added_hops_ + added_flows_ - 1) / added_flows_) : 8;
  reserve_geometric(hops_, hops_.size() + flows * per);
}

void FlowModel::remove_flow(FlowId f) {
  removed_min_rate_ = std::min(removed_min_rate_, hot_[f].rate);
  const FlowHot h = hot_[f];
  if (has_shadows(f)) {
    // Its shadow hops' resources are settled by the next solve, as the others: bring them up to its last solve.
    flush_shadows(f);
    for (std::uint32_t k = 0; k < h.cnt; ++k)
      if (hops_[h.off + k].mult & kShadowBit) {
        const std::uint32_t r = hops_[h.off + k].res;
        shadow_flow_[r] = kPendingSettle;
        pending_settle_.push_back(r);
      }
    live_shadows_ -= slots_[slot_[f] - 1].n;
    release_slot(f);
  }
  for (std::uint32_t k = 0; k < h.cnt; ++k) {
    const Hop hp = hops_[h.off + k];
    if (hp.mult & kShadowBit) continue;
    const std::uint32_t r = hp.res;
    auto& list = res_flows_[r];
    // Swap-remove: the last entry takes the removed one's place (nothing to move when it is the last).
    const std::size_t last = list.size() - 1;
    if (hp.pos != last) {
      const ResEntry e = list[last];
      list[hp.pos] = e;
      hops_[e.hop].pos = hp.pos;
    }
    list.pop_back();
    wsum_[r] = list.empty() ? 0 : wsum_[r] - h.w * hp.mult;
    if (!res_dirty_[r]) {  // once per resource: an all-to-all's completions touch each NIC link thousands of times
      res_dirty_[r] = 1;
      dirty_res_.push_back(r);
    }
  }
  dead_hops_ += hot_[f].cnt;
  hot_[f].cnt = 0;
  alive_[f] = 0;
  ++ver_[f];
  hot_[f].rate = 0;
  finish_[f] = kInf;
  free_ids_.push_back(f);
  --active_;
}

void FlowModel::compact_hops() {
  std::vector<Hop> nh;
  nh.reserve(hops_.size() - dead_hops_);
  for (FlowId f = 0; f < rem_.size(); ++f) {
    if (!alive_[f]) continue;
    const std::uint64_t off = hot_[f].off;
    hot_[f].off = static_cast<std::uint32_t>(nh.size());
    for (std::uint32_t k = 0; k < hot_[f].cnt; ++k) {
      const Hop hp = hops_[off + k];
      if (hp.mult & kShadowBit) shadow_hop_[hp.res] = static_cast<std::uint32_t>(nh.size());
      else res_flows_[hp.res][hp.pos].hop = static_cast<std::uint32_t>(nh.size());  // the entry's back-pointer follows
      nh.push_back(hp);
    }
  }
  hops_ = std::move(nh);
  dead_hops_ = 0;
}

void FlowModel::settle_resource(std::uint32_t r, double now_s) {
  const double dt = now_s - stat_t_[r];
  if (dt > 0) {
    stats_[r].bytes += load_[r] * dt;
    if (load_[r] > 0) stats_[r].busy_s += dt;
  }
  stat_t_[r] = now_s;
}

void FlowModel::settle_stats(double now_s) {
  for (const ShadowSlot& sl : slots_)
    if (sl.n > 0) flush_shadows(sl.flow);
  for (std::uint32_t r = 0; r < cap_.size(); ++r) settle_resource(r, now_s);
}

ResourceStats& FlowModel::settled_stats(std::uint32_t r, double now_s) {
  if (shadowed(r)) flush_shadows(shadow_flow_[r] - 1);
  settle_resource(r, now_s);
  return stats_[r];
}

// Shadow hops. A solve settles the statistics of each resource that a re-solved flow crosses (load x elapsed
// time, busy time), sets its load to weight x multiplicity x the new rate and updates its peak. On a resource
// that only this flow crosses, that is all a solve does: its level, capacity / weight, never freezes the flow
// before the smallest such level among its lone resources does (a resource shared with other flows only gets a
// lower level, and ties go to the lower resource id). So when a plain flow over many resources (a lockstep
// wave: thousands of link directions) is added, the resources it will cross alone (no flow on them, none ending)
// become shadow hops but the one with the smallest (level, id), which the solver keeps: they are not in any
// resource's flow list, so solves neither reach, settle, heap-order nor freeze them, and each solve of the flow
// appends (time, new rate) to its log instead. A shadow takes in the log, one entry at a time with the same
// operations the solve would have done on it (so every statistic is the same bit for bit), when another flow
// is added on it (it joins the resource's flow list, as if it had been there all along), when its statistics
// are read (settle_stats, settled_stats), and when the flow ends (the next solve then settles it at zero load,
// as it settles the ended flow's other resources). Every shadow of a flow has taken in none of its log: the
// log is emptied whenever all of them took it in.
void FlowModel::flush_hop(FlowId f, std::uint32_t h) {
  const Hop& hp = hops_[h];
  const std::vector<LogEntry>& log = slots_[slot_[f] - 1].log;
  const std::uint32_t r = hp.res;
  const double wm = hot_[f].w * (hp.mult & ~kShadowBit);
  for (std::size_t i = 0; i < log.size(); ++i) {
    settle_resource(r, log[i].t_s);
    load_[r] = wm * log[i].x;
    const double u = load_[r] / cap_[r];
    if (u > stats_[r].peak_util) stats_[r].peak_util = u;
  }
}

void FlowModel::flush_shadows(FlowId f) {
  const std::uint32_t off = hot_[f].off;
  for (std::uint32_t k = 0; k < hot_[f].cnt; ++k)
    if (hops_[off + k].mult & kShadowBit) flush_hop(f, off + k);
  slots_[slot_[f] - 1].log.clear();
}

void FlowModel::release_slot(FlowId f) {
  ShadowSlot& sl = slots_[slot_[f] - 1];
  sl.n = 0;
  sl.log.clear();
  free_slots_.push_back(slot_[f] - 1);
  slot_[f] = 0;
}

void FlowModel::solve(double now_s) {
  if (!(now_s >= now_s_)) throw std::logic_error("FlowModel::solve in the past");
  now_s_ = now_s;
  if (!dirty()) return;
  ++solves_;
  // Resources of ended flows' shadow hops: what this solve would do on them (reached, they carry no load now).
  for (std::uint32_t r : pending_settle_) {
    settle_resource(r, now_s);
    load_[r] = 0;
    shadow_flow_[r] = 0;
  }
  pending_settle_.clear();
  if (++epoch_ == 0) {  // wrapped: reset marks
    for (auto* v : {&pin_flow_mark_, &res_mark_, &touch_mark_, &pin_res_mark_}) std::fill(v->begin(), v->end(), 0);
    for (FlowHot& h : hot_) h.mark = 0;
    epoch_ = 1;
  }
  const std::uint32_t ep = epoch_;
  // Threshold (flow_model.hpp): flows with an old rate below theta keep it. A finished flow bounds theta by
  // its old rate; an added flow by a lower bound of its new rate (no resource saturates below capacity /
  // total weight, and a capped flow reaches its cap unless frozen earlier). The margin keeps flows whose
  // rate equals theta up to rounding on the re-solved side.
  double theta = 0, th0 = 0;
  if (incremental_) {
    theta = removed_min_rate_;
    for (FlowId f : dirty_flows_) {
      if (!alive_[f]) continue;
      double lb = capr_[f] > 0 ? capr_[f] : kInf;
      const std::uint64_t off = hot_[f].off;
      for (std::uint32_t k = 0; k < hot_[f].cnt; ++k) {
        if (hops_[off + k].mult & kShadowBit) continue;  // its level is no lower than the kept one's
        const std::uint32_t r = hops_[off + k].res;
        lb = std::min(lb, cap_[r] / wsum_[r]);
      }
      theta = std::min(theta, lb);
    }
    th0 = theta;
    theta = theta == kInf ? kInf : theta * (1 - 1e-9);
  }
  // Pinned at theta (flow_model.hpp): a flow at theta (to the margin) with a common bottleneck that no change
  // touched keeps its rate. Touched resources: those of finished (dirty_res_) and of added flows.
  const double th_hi = th0 * (1 + 1e-9);
  const bool pinning = incremental_ && th0 > 0 && th0 != kInf;
  if (pinning) {
    for (std::uint32_t r : dirty_res_) touch_mark_[r] = ep;
    for (FlowId f : dirty_flows_) {
      if (!alive_[f]) continue;
      const std::uint64_t off = hot_[f].off;
      for (std::uint32_t k = 0; k < hot_[f].cnt; ++k)
        if (!(hops_[off + k].mult & kShadowBit)) touch_mark_[hops_[off + k].res] = ep;
    }
  }
  // An untouched resource pins its flows at theta when it is saturated and none of its flows runs faster than
  // theta: up to level theta its load grows as before, so it saturates at theta again. Evaluated once a solve.
  auto resource_pins = [&](std::uint32_t r) {
    if (touch_mark_[r] == ep) return false;
    if (pin_res_mark_[r] == ep) return pin_res_ok_[r] != 0;
    pin_res_mark_[r] = ep;
    bool ok = load_[r] >= cap_[r] * (1 - 1e-9);
    if (ok)
      for (const ResEntry& e : res_flows_[r])
        if (hot_[e.flow].rate > th_hi) {
          ok = false;
          break;
        }
    pin_res_ok_[r] = ok ? 1 : 0;
    return ok;
  };
  auto pinned = [&](FlowId f) {
    if (!pinning || hot_[f].rate > th_hi) return false;
    if (pin_flow_mark_[f] == ep) return pin_flow_ok_[f] != 0;
    pin_flow_mark_[f] = ep;
    bool ok = false;
    const std::uint64_t off = hot_[f].off;
    for (std::uint32_t k = 0; k < hot_[f].cnt && !ok; ++k) {
      const Hop& hp = hops_[off + k];
      if (hp.mult & kShadowBit) {
        // A shadow: untouched, crossed by f alone (rate <= th_hi); its load is the one f's last re-solve set.
        ok = hot_[f].w * (hp.mult & ~kShadowBit) * hot_[f].rate >= cap_[hp.res] * (1 - 1e-9);
        continue;
      }
      ok = hp.mult == hot_[f].members && resource_pins(hp.res);
    }
    pin_flow_ok_[f] = ok ? 1 : 0;
    return ok;
  };
  removed_min_rate_ = kInf;
  stack_.clear();
  comp_res_.clear();
  comp_flows_.clear();
  auto visit_flow = [&](FlowId f) {
    hot_[f].mark = ep;
    comp_flows_.push_back(f);
    const std::uint64_t off = hot_[f].off;
    const bool sh = has_shadows(f);
    for (std::uint32_t k = 0; k < hot_[f].cnt; ++k) {
      if (sh && (hops_[off + k].mult & kShadowBit)) continue;
      const std::uint32_t r = hops_[off + k].res;
      if (res_mark_[r] != ep) {
        res_mark_[r] = ep;
        stack_.push_back(r);
      }
    }
  };
  for (FlowId f : dirty_flows_)
    if (alive_[f] && hot_[f].mark != ep) visit_flow(f);
  for (std::uint32_t r : dirty_res_) {
    res_dirty_[r] = 0;
    if (res_mark_[r] != ep) {
      res_mark_[r] = ep;
      stack_.push_back(r);
    }
  }
  dirty_flows_.clear();
  dirty_res_.clear();
  // Reached resources: their flows at or above theta join the re-solve; the load of the others is kept.
  while (!stack_.empty()) {
    const std::uint32_t r = stack_.back();
    stack_.pop_back();
    comp_res_.push_back(r);
    double kept = 0;
    for (const ResEntry& e : res_flows_[r]) {
      const FlowId f = e.flow;
      if (hot_[f].mark == ep) continue;
      if (hot_[f].rate < theta) {
        kept += hot_[f].w * e.mult * hot_[f].rate;
        ++kept_visits_;
      } else if (pinned(f)) {
        kept += hot_[f].w * e.mult * hot_[f].rate;
        ++pinned_visits_;
      } else {
        visit_flow(f);
      }
    }
    s_free_[r] = kept;  // the kept load, until the settle pass below
  }
  flow_visits_ += comp_flows_.size();
  // Id order: the passes below then walk the per-flow arrays sequentially instead of in BFS order.
  if (comp_flows_.size() > 1024) {
    if (comp_flows_.size() * 8 > rem_.size()) {
      // Dense component (e.g. one all-to-all holding every flow): re-list it in id order by one sequential
      // scan of the marks, cheaper than sorting millions of ids; same list as the sort.
      comp_flows_.clear();
      for (FlowId f = 0; f < rem_.size(); ++f)
        if (hot_[f].mark == ep) comp_flows_.push_back(f);
    } else {
      std::sort(comp_flows_.begin(), comp_flows_.end());
    }
  }

  // Settle statistics (old loads) and remaining bytes (old rates) up to now.
  for (std::uint32_t r : comp_res_) {
    settle_resource(r, now_s);
    load_[r] = s_free_[r];
    s_free_[r] = cap_[r] - s_free_[r];
    s_w_[r] = 0;
    s_unfrozen_[r] = 0;
  }
  capped_.clear();
  for (FlowId f : comp_flows_) {
    rem_[f] -= hot_[f].rate * (now_s - tupd_[f]);
    if (rem_[f] < 0) rem_[f] = 0;
    tupd_[f] = now_s;
    frozen_[f] = 0;
    const std::uint64_t off = hot_[f].off;
    const bool sh = has_shadows(f);
    for (std::uint32_t k = 0; k < hot_[f].cnt; ++k) {
      if (sh && (hops_[off + k].mult & kShadowBit)) continue;
      const std::uint32_t r = hops_[off + k].res;
      s_w_[r] += hot_[f].w * hops_[off + k].mult;
      ++s_unfrozen_[r];
    }
    if (capr_[f] > 0) capped_.emplace_back(capr_[f], f);
  }
  std::sort(capped_.begin(), capped_.end());
  // Indexed binary min-heap of the component's resources by saturation level (free capacity / unfrozen
  // weight = the per-instance rate at which the resource would saturate). Each round either freezes the
  // smallest-capped flow (if its cap is below the minimum level) or saturates the minimum resource and
  // freezes every unfrozen flow crossing it.
  rheap_.clear();
  for (std::uint32_t r : comp_res_)
    if (s_unfrozen_[r] != 0) rheap_.push_back(HeapNode{s_free_[r] / s_w_[r], r});
  for (std::size_t i = rheap_.size() / 2; i-- > 0;) sift_down(static_cast<std::uint32_t>(i));

  // Progressive filling. Old rates stay in rate_ until the end (to detect unchanged flows); new per-instance
  // rates go to new_rate_.
  double level = 0;
  std::size_t remaining = comp_flows_.size();
  std::size_t ci = 0;
  new_rate_.resize(rem_.size());
  auto freeze = [&](FlowId f, double x) {
    frozen_[f] = 1;
    new_rate_[f] = x;
    const double w = hot_[f].w;
    const std::uint64_t off = hot_[f].off;
    const bool sh = has_shadows(f);
    for (std::uint32_t k = 0; k < hot_[f].cnt; ++k) {
      if (sh && (hops_[off + k].mult & kShadowBit)) continue;
      const std::uint32_t r = hops_[off + k].res;
      const double wm = w * hops_[off + k].mult;
      s_free_[r] -= wm * x;
      s_w_[r] -= wm;
      load_[r] += wm * x;
      --s_unfrozen_[r];
    }
  };
  while (remaining > 0) {
    ++rounds_;
    // Refresh the top lazily: stored keys are lower bounds (levels only rise as flows freeze), so an
    // out-of-date top is re-keyed and sifted down until the top is current.
    while (!rheap_.empty()) {
      const std::uint32_t r = rheap_.front().res;
      if (s_unfrozen_[r] == 0) {
        heap_pop();
        continue;
      }
      double k = s_free_[r] / s_w_[r];
      if (!(k >= level)) k = level;  // rounding: levels never drop below the current level
      if (k > rheap_.front().key) {
        ++rekeys_;
        rheap_.front().key = k;
        sift_down(0);
        continue;
      }
      break;
    }
    const double rl = rheap_.empty() ? kInf : rheap_.front().key;
    while (ci < capped_.size() && frozen_[capped_[ci].second]) ++ci;
    const double cl = ci < capped_.size() ? capped_[ci].first : kInf;
    if (cl <= rl) {
      if (cl == kInf) throw std::logic_error("FlowModel: unconstrained flow");
      level = std::max(level, cl);
      freeze(capped_[ci].second, cl);
      ++ci;
      --remaining;
    } else {
      level = std::max(level, rl);
      const std::uint32_t r = rheap_.front().res;
      heap_pop();
      for (const ResEntry& e : res_flows_[r])
        if (!frozen_[e.flow]) {
          // a bundle frozen by a resource that only some of its members cross: check it below
          if (e.mult != hot_[e.flow].members && hot_[e.flow].members != 0) suspects_.push_back(e.flow);
          freeze(e.flow, level);
          --remaining;
        }
    }
  }

  split_.clear();
  if (!suspects_.empty()) {
    for (FlowId f : suspects_)
      if (!bundle_has_bottleneck(f)) split_.push_back(f);
    suspects_.clear();
    std::sort(split_.begin(), split_.end());
    bundles_split_ += split_.size();
  }
  for (std::uint32_t r : comp_res_) {
    const double u = load_[r] / cap_[r];
    if (u > stats_[r].peak_util) stats_[r].peak_util = u;
  }
  for (FlowId f : comp_flows_) {
    const double x = new_rate_[f];
    // Shadow hops (above): the solve goes to the flow's log.
    if (has_shadows(f)) slots_[slot_[f] - 1].log.push_back(LogEntry{now_s, x});
    if (x == hot_[f].rate && finish_[f] != kInf) continue;  // unchanged: its heap entry stays valid
    hot_[f].rate = x;
    finish_[f] = x > 0 ? now_s + rem_[f] / x : kInf;
    ++ver_[f];
    if (finish_[f] != kInf) {
      heap_.push_back(HeapEntry{finish_[f], f, ver_[f]});
      std::push_heap(heap_.begin(), heap_.end(), [](const HeapEntry& a, const HeapEntry& b) {
        return finish_after(a, b);
      });
    }
  }
  if (heap_.size() > 2 * active_ + 4096) compact_heap();
}

bool FlowModel::bundle_has_bottleneck(FlowId f) const {
  // Called at the end of solve(), before rate_ takes the new rates: re-solved flows (marked this epoch) have
  // theirs in new_rate_, kept flows in rate_. A bottleneck shared by all members: a resource that every member
  // crosses, saturated (free capacity within 1e-9 of its capacity: rounding), on which no flow runs faster.
  const double x = new_rate_[f];
  if (capr_[f] > 0 && x >= capr_[f] * (1 - 1e-12)) return true;  // every member sits at the common cap
  const std::uint64_t off = hot_[f].off;
  for (std::uint32_t k = 0; k < hot_[f].cnt; ++k) {
    if (hops_[off + k].mult != hot_[f].members) continue;
    const std::uint32_t r = hops_[off + k].res;
    if (s_free_[r] > 1e-9 * cap_[r]) continue;
    bool top = true;
    for (const ResEntry& e : res_flows_[r]) {
      const double y = hot_[e.flow].mark == epoch_ ? new_rate_[e.flow] : hot_[e.flow].rate;
      if (y > x * (1 + 1e-9)) {
        top = false;
        break;
      }
    }
    if (top) return true;
  }
  return false;
}

double FlowModel::cancel(FlowId f, double now_s) {
  if (!(now_s >= now_s_)) throw std::logic_error("FlowModel::cancel in the past");
  if (f >= alive_.size() || !alive_[f]) throw std::logic_error("FlowModel::cancel: not an active flow");
  now_s_ = now_s;
  // As a completion: its resources are marked dirty and the next solve settles their loads up to now.
  const double left = std::max(0.0, remaining(f, now_s));
  remove_flow(f);
  return left;
}

namespace {
inline bool hless(double ka, std::uint32_t ra, double kb, std::uint32_t rb) { return ka < kb || (ka == kb && ra < rb); }
}  // namespace

void FlowModel::sift_down(std::uint32_t i) {
  const std::uint32_t n = static_cast<std::uint32_t>(rheap_.size());
  const HeapNode x = rheap_[i];
  for (;;) {
    std::uint32_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && hless(rheap_[c + 1].key, rheap_[c + 1].res, rheap_[c].key, rheap_[c].res)) ++c;
    if (!hless(rheap_[c].key, rheap_[c].res, x.key, x.res)) break;
    rheap_[i] = rheap_[c];
    i = c;
  }
  rheap_[i] = x;
}

void FlowModel::heap_pop() {
  // The solver only ever removes the top: the last node takes its place and sinks (never rises above the root).
  const HeapNode last = rheap_.back();
  rheap_.pop_back();
  if (rheap_.empty()) return;
  rheap_[0] = last;
  sift_down(0);
}

void FlowModel::compact_heap() {
  heap_.clear();
  for (FlowId f = 0; f < rem_.size(); ++f)
    if (alive_[f] && finish_[f] != kInf) heap_.push_back(HeapEntry{finish_[f], f, ver_[f]});
  std::make_heap(heap_.begin(), heap_.end(), [](const HeapEntry& a, const HeapEntry& b) { return finish_after(a, b); });
}

double FlowModel::next_finish() {
  auto cmp = [](const HeapEntry& a, const HeapEntry& b) { return finish_after(a, b); };
  while (!heap_.empty()) {
    const HeapEntry& top = heap_.front();
    if (alive_[top.flow] && ver_[top.flow] == top.ver) return top.t_s;
    std::pop_heap(heap_.begin(), heap_.end(), cmp);
    heap_.pop_back();
  }
  return kInf;
}

std::size_t FlowModel::complete(double now_s, double tol_s, std::vector<std::uint64_t>& done) {
  if (!(now_s >= now_s_)) throw std::logic_error("FlowModel::complete in the past");
  now_s_ = now_s;
  auto cmp = [](const HeapEntry& a, const HeapEntry& b) { return finish_after(a, b); };
  const double thr = now_s + tol_s;
  batch_.clear();
  while (!heap_.empty()) {
    const HeapEntry top = heap_.front();
    const bool valid = alive_[top.flow] && ver_[top.flow] == top.ver;
    if (valid && top.t_s > thr) break;
    std::pop_heap(heap_.begin(), heap_.end(), cmp);
    heap_.pop_back();
    if (valid) batch_.push_back(top.flow);
  }
  std::sort(batch_.begin(), batch_.end());
  for (FlowId f : batch_) {
    done.push_back(user_[f]);
    remove_flow(f);
  }
  return batch_.size();
}

}  // namespace fabricsim::sim
