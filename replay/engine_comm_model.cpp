#include "replay/engine_comm_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>

#include "models/collectives.hpp"
#include "models/tuner.hpp"
#include "sim/base/error.hpp"
#include "sim/engine/collective_time.hpp"
#include "replay/outputs.hpp"
#include "replay/outputs_links.hpp"

namespace fabricsim::sim {

using workloads::CollOp;

EngineCommBase::EngineCommBase(const topo::Topology& t, const models::Calibration& calib, EngineCommOptions opt)
    : t_(t), calib_(calib), opt_(opt), routing_(t), routing_pxn_(t, topo::RoutingOptions{true}) {
  reset_stats();
}

void EngineCommBase::reset_stats() {
  dirs_.assign(opt_.collect_link_stats ? 2 * static_cast<std::size_t>(t_.num_links()) : 0, LinkDirStats{});
  tiers_ = {};
  // the all-to-all class totals too: a restarted replay (ReplayRestart) counts its last pass only
  std::fill(a2a_bytes_.begin(), a2a_bytes_.end(), 0.0);
  std::fill(a2a_time_.begin(), a2a_time_.end(), 0.0);
}

namespace {
std::string num(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return std::string(buf);
}
}  // namespace

std::string EngineCommBase::describe_common() const {
  return "co-located identical groups (mirrors) run with their group; all_to_all with PXN routing; step fidelity "
         "while ranks priced x communicator size <= " + num("%.0f", opt_.step_limit) + ", else phase fidelity";
}

EngineCommModel::EngineCommModel(const topo::Topology& t, const models::Calibration& calib, EngineCommOptions opt)
    : EngineCommBase(t, calib, opt) {}

std::string EngineCommModel::describe() const {
  return "communication model engine (idle fabric, the fast tier): NCCL schedules (models/collectives, tuner-chosen "
         "algorithm and protocol) run on the flow-level engine on an idle fabric, cached per (communicator, op, "
         "bytes); different collectives overlapping in time do not contend (comm_model \"shared\" makes them); a group "
         "without mirrors is priced by sim::time_collective, the time `fabricsim coll` and `validate` give for the "
         "same call; " +
         describe_common() + " with completion batching " + num("%g", opt_.large_batch_tolerance_s) +
         " s; calibration '" + calib_.name + "'";
}

void EngineCommBase::set_symmetry(std::int32_t world_size, std::vector<std::int32_t> simulated) {
  world_size_ = world_size;
  simulated_ = std::set<std::int32_t>(simulated.begin(), simulated.end());
}

double EngineCommBase::replication(const workloads::Communicator& comm) const {
  if (world_size_ <= 0 || simulated_.empty()) return 1.0;
  double s = 0;
  for (auto r : comm.ranks) s += simulated_.count(r) ? 1.0 : 0.0;
  // A called communicator with no simulated member is a placement class a simulated rank's calls were moved to
  // (replay/placement_classes.hpp): it stands in for that rank's own group, one simulated member.
  if (s <= 0) s = 1;
  double priced = static_cast<double>(comm.ranks.size()) * (comm.mirrors + 1.0);
  for (const auto& g : comm.stand_ins) priced += static_cast<double>(g.size());
  const double per_sim = static_cast<double>(world_size_) / static_cast<double>(simulated_.size());
  return std::max(1.0, per_sim * s / priced);
}

namespace {
models::Op to_model_op(CollOp c) {
  switch (c) {
    case CollOp::AllReduce: return models::Op::AllReduce;
    case CollOp::AllGather: return models::Op::AllGather;
    case CollOp::ReduceScatter: return models::Op::ReduceScatter;
    case CollOp::AllToAll: return models::Op::AllToAll;
    case CollOp::Broadcast: return models::Op::Broadcast;
    case CollOp::Reduce: return models::Op::Reduce;
    case CollOp::AllToAllv: return models::Op::AllToAllv;
  }
  return models::Op::AllReduce;
}

// Appends `s` to `into`, offsetting dependency indices (into empty: s's transfers moved as they are).
void append(models::Schedule& into, models::Schedule&& s) {
  if (into.transfers.empty()) {
    into.transfers = std::move(s.transfers);
    return;
  }
  const auto off = static_cast<std::uint32_t>(into.transfers.size());
  for (auto& tr : s.transfers) {
    for (auto& d : tr.deps) d += off;
    into.transfers.push_back(std::move(tr));
  }
}
}  // namespace

EngineCommBase::Priced EngineCommBase::price(const models::Schedule& s, double tolerance_s, bool phase,
                                             topo::Routing& routing, const ScheduleResult* ran) {
  RunOptions ro;
  ro.collect_link_stats = opt_.collect_link_stats;
  ro.batch_tolerance_s = tolerance_s;
  Priced p;
  // Payload bytes first: they route every transfer through `routing`'s cache, where the engine's Network then
  // finds the routes (sim::Network::route_of) instead of computing them again.
  if (opt_.collect_link_stats) payload_bytes(s, routing, p);
  const ScheduleResult res = ran ? *ran : run_schedule(s, t_, routing, calib_, ro);
  ++runs_;
  if (phase) ++phase_runs_;
  p.timing.duration_s = res.makespan_s;
  p.timing.algorithm = s.algorithm;
  p.timing.protocol = s.protocol;
  if (!opt_.collect_link_stats) return p;
  // Busy time and peak utilisation from the engine, on every direction that carried payload or was busy.
  std::vector<std::pair<std::uint32_t, LinkDirStats>> dirs;
  std::size_t k = 0;
  for (std::uint32_t d = 0; d < res.link_dirs.size(); ++d) {
    const LinkDirStats& st = res.link_dirs[d];
    const bool payload = k < p.dirs.size() && p.dirs[k].first == d;
    if (!payload && st.busy_s <= 0 && st.peak_util <= 0) continue;
    LinkDirStats a;
    if (payload) a.bytes = p.dirs[k++].second.bytes;
    a.busy_s = st.busy_s;
    a.peak_util = st.peak_util;
    dirs.emplace_back(d, a);
  }
  p.dirs = std::move(dirs);
  return p;
}

void EngineCommBase::payload_bytes(const models::Schedule& s, topo::Routing& routing, Priced& p) const {
  // Bytes: the payload (NCCL data) each transfer moves, on every link direction of its route. The engine's
  // own byte count is wire bytes, inflated by 1 / (link efficiency x protocol efficiency) because that is
  // how the schedule models achieved bandwidth (models/schedule.hpp, Transfer::bytes); busy time and peak
  // utilisation come from the engine.
  // Routes come from the Routing's per-pair cache (Routing::route, same result as the engine's
  // compute_route): ring steps and the different bucket sizes of one communicator repeat the same pairs.
  std::vector<double> bytes(2 * static_cast<std::size_t>(t_.num_links()), 0.0);
  for (const auto& x : s.transfers) {
    if (x.src == x.dst) continue;
    const double b = x.payload_bytes * x.steps * x.weight;
    if (x.via != topo::kNoNode) {  // a relayed hop: both routes
      for (auto d : routing.route(x.src, x.via)) bytes[d] += b;
      for (auto d : routing.route(x.via, x.dst)) bytes[d] += b;
      continue;
    }
    for (auto d : routing.route(x.src, x.dst)) bytes[d] += b;
  }
  for (std::size_t d = 0; d < bytes.size(); ++d) {
    if (bytes[d] <= 0) continue;
    LinkDirStats a;
    a.bytes = bytes[d];
    p.dirs.emplace_back(static_cast<std::uint32_t>(d), a);
    p.tier_bytes[link_tier(t_, static_cast<topo::LinkId>(d / 2))] += a.bytes;
  }
}

void EngineCommBase::account(const Priced& p, double replication) {
  if (!opt_.collect_link_stats) return;
  for (const auto& [d, st] : p.dirs) {
    LinkDirStats& a = dirs_[d];
    a.bytes += st.bytes;
    a.busy_s += st.busy_s;
    a.peak_util = std::max(a.peak_util, st.peak_util);
  }
  for (const auto& [tier, b] : p.tier_bytes) {
    tiers_.priced[tier] += b;
    tiers_.cluster[tier] += b * replication;
  }
  if (p.all_to_all) {
    // Per class: payload bytes, and the busiest direction's bytes / nominal bandwidth of this call.
    if (a2a_class_of_link_.empty()) a2a_class_of_link_.assign(static_cast<std::size_t>(t_.num_links()), -1);
    if (p.a2a_dirs.size() != p.dirs.size()) {  // first call of this entry: each direction's class and time
      p.a2a_dirs.clear();
      for (const auto& [d, st] : p.dirs) {
        const auto l = static_cast<topo::LinkId>(d / 2);
        std::int32_t& c = a2a_class_of_link_[l];
        if (c < 0) {
          const std::string cls = link_class_slug(topo::to_string(t_.link(l).kind), link_tier(t_, l));
          const auto it = std::find(a2a_class_names_.begin(), a2a_class_names_.end(), cls);
          c = static_cast<std::int32_t>(it - a2a_class_names_.begin());
          if (it == a2a_class_names_.end()) {
            a2a_class_names_.push_back(cls);
            a2a_bytes_.push_back(0);
            a2a_time_.push_back(0);
            a2a_worst_.push_back(-1);  // < 0: not touched by this call
          }
        }
        const double bw = t_.link(l).bandwidth_Bps;
        p.a2a_dirs.emplace_back(c, bw > 0 ? st.bytes / bw : -1.0);
      }
    }
    a2a_touched_.clear();
    for (std::size_t k = 0; k < p.dirs.size(); ++k) {
      const auto [c, time] = p.a2a_dirs[k];
      a2a_bytes_[c] += p.dirs[k].second.bytes;
      double& w = a2a_worst_[c];
      if (w < 0) {
        w = 0;
        a2a_touched_.push_back(static_cast<std::uint32_t>(c));
      }
      if (time >= 0) w = std::max(w, time);
    }
    for (auto c : a2a_touched_) {
      a2a_time_[c] += a2a_worst_[c];
      a2a_worst_[c] = -1;
    }
  }
}

const EngineCommBase::ClassTotals& EngineCommBase::all_to_all_by_class() const {
  a2a_ = {};
  for (std::size_t c = 0; c < a2a_class_names_.size(); ++c) {
    a2a_.bytes[a2a_class_names_[c]] = a2a_bytes_[c];
    a2a_.time_s[a2a_class_names_[c]] = a2a_time_[c];
  }
  return a2a_;
}

namespace {
// Rounded size of a collective of `bytes` on n ranks: whole 2-byte elements per rank block (a multiple of n * 2).
std::uint64_t group_bytes(double bytes, int n) {
  const std::uint64_t unit = static_cast<std::uint64_t>(n) * 2;
  std::uint64_t b = static_cast<std::uint64_t>(std::llround(bytes));
  return std::max<std::uint64_t>(unit, (b + unit - 1) / unit * unit);
}

// The spec of copy k (0: the communicator itself, k > 0: its k-th mirror) of a collective.
// `ranks` (global ranks) replaces the shifted communicator when given: a stand-in group (Communicator::stand_ins).
models::CollectiveSpec group_spec(const topo::Topology& t, const workloads::Communicator& comm, CollOp op,
                                  double bytes, const std::string& algorithm, int k, models::Fidelity fidelity,
                                  const std::vector<std::int32_t>* ranks = nullptr) {
  const auto& gpus = t.gpus();
  const int n = static_cast<int>(comm.ranks.size());
  models::CollectiveSpec spec;
  spec.op = to_model_op(op);
  spec.bytes = group_bytes(bytes, n);
  spec.elem_bytes = 2;
  spec.fidelity = fidelity;
  spec.where = "communicator '" + comm.name + "'";
  spec.collnet_enable = comm.collnet_enable;
  if (op == CollOp::AllToAllv && !comm.a2a_matrix.empty()) {
    // Per-destination bytes: the op's bytes (mean send buffer per rank) times the communicator's matrix,
    // rounded to whole 2-byte elements.
    spec.matrix.assign(n, std::vector<std::uint64_t>(n, 0));
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        spec.matrix[i][j] = static_cast<std::uint64_t>(std::llround(bytes * comm.a2a_matrix[i][j] / 2.0)) * 2;
  }
  for (auto r : ranks ? *ranks : comm.ranks) {
    std::int64_t rr = static_cast<std::int64_t>(r) + (ranks ? 0 : static_cast<std::int64_t>(k) * comm.mirror_stride);
    if (rr < 0 || rr >= static_cast<std::int64_t>(gpus.size()))
      throw InputError(spec.where, "rank " + std::to_string(rr) + " is not a GPU of the topology (" +
                                       std::to_string(gpus.size()) + " GPUs)");
    spec.communicator.push_back(gpus[rr]);
  }
  if (!algorithm.empty()) {
    models::Algorithm a;
    if (!models::parse_algorithm(algorithm, a)) throw InputError(spec.where, "unknown algorithm '" + algorithm + "'");
    spec.algorithm = a;
  }
  return spec;
}
}  // namespace

namespace {
// A group's NCCL channels as equal blocks: a ring whose channels are emitted one after the other (ring
// reduce_scatter / all_gather; models/collectives.cpp rotates each host's ranks per channel, so channel c is
// the image of channel 0 under a permutation of each host's GPUs). 1 when the schedule is not so made.
std::uint32_t channel_blocks(const models::Schedule& s) {
  const auto& trs = s.transfers;
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < trs.size(); ++i) {
    if (i > 0 && trs[i].channel == trs[i - 1].channel) continue;
    if (i > 0 && trs[i].channel < trs[i - 1].channel) return 1;  // a channel seen again: not blocks
    starts.push_back(i);
  }
  if (starts.size() < 2 || trs.size() % starts.size() != 0) return 1;
  const std::size_t len = trs.size() / starts.size();
  for (std::size_t k = 0; k < starts.size(); ++k)
    if (starts[k] != k * len) return 1;
  return static_cast<std::uint32_t>(starts.size());
}
}  // namespace

EngineCommBase::Built EngineCommBase::build_collective(const workloads::Communicator& comm, CollOp op,
                                                         double bytes, const std::string& algorithm) {
  Built out;
  const int n = static_cast<int>(comm.ranks.size());
  if (n <= 1 || bytes <= 0) return out;
  // Fidelity: step while the merged step schedule stays small, else phase (see the header).
  double ranks_priced = static_cast<double>(n) * (comm.mirrors + 1.0);
  for (const auto& g : comm.stand_ins) ranks_priced += static_cast<double>(g.size());
  out.phase = ranks_priced * n > opt_.step_limit;
  out.pxn = op == CollOp::AllToAll || op == CollOp::AllToAllv;
  topo::Routing& routing = routing_of(out);
  auto merged = std::make_shared<models::Schedule>();
  for (int k = 0; k <= comm.mirrors; ++k) {
    models::CollectiveSpec spec =
        group_spec(t_, comm, op, bytes, algorithm, k, out.phase ? models::Fidelity::Phase : models::Fidelity::Step);
    models::Schedule s = models::build_schedule(spec, t_, routing, calib_);
    if (k == 0) {
      merged->op = s.op;
      merged->algorithm = s.algorithm;
      merged->protocol = s.protocol;
      merged->fidelity = s.fidelity;
      merged->fixed_latency_s = s.fixed_latency_s;
    }
    append(*merged, std::move(s));
  }
  out.groups = static_cast<std::uint32_t>(comm.mirrors + 1);
  // Stand-in groups (cluster runs): the same call of the same size on their GPUs, in the same schedule.
  for (const auto& g : comm.stand_ins) out.groups = g.size() == comm.ranks.size() && out.groups > 0 ? out.groups + 1 : 0;
  if (out.groups == 0) out.groups = 1;  // blocks of different sizes: no mirror quotient
  if (comm.mirrors == 0 && comm.stand_ins.empty()) out.groups = channel_blocks(*merged);
  for (const auto& g : comm.stand_ins) {
    models::CollectiveSpec spec = group_spec(t_, comm, op, bytes, algorithm, 0,
                                             out.phase ? models::Fidelity::Phase : models::Fidelity::Step, &g);
    append(*merged, models::build_schedule(spec, t_, routing, calib_));
  }
  out.s = std::move(merged);
  return out;
}

EngineCommBase::Built EngineCommBase::build_p2p(std::int32_t src, std::int32_t dst, double bytes) {
  Built out = build_p2p_one(src, dst, bytes);
  auto it = p2p_stand_ins_.find({src, dst});
  if (it == p2p_stand_ins_.end() || it->second.empty()) return out;
  // The stand-in copies of the message (cluster runs) in the same schedule.
  auto merged = std::make_shared<models::Schedule>(*out.s);
  for (const auto& [a, b] : it->second) append(*merged, models::Schedule(*build_p2p_one(a, b, bytes).s));
  out.s = std::move(merged);
  return out;
}

EngineCommBase::Built EngineCommBase::build_p2p_one(std::int32_t src, std::int32_t dst, double bytes) {
  const auto& gpus = t_.gpus();
  if (src < 0 || dst < 0 || static_cast<std::size_t>(std::max(src, dst)) >= gpus.size())
    throw InputError("send/recv", "rank outside the topology's " + std::to_string(gpus.size()) + " GPUs");
  models::CollectiveSpec spec;
  spec.op = models::Op::SendRecv;
  spec.elem_bytes = 1;
  spec.bytes = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(bytes)));
  spec.communicator = {gpus[src], gpus[dst]};
  spec.where = "send/recv " + std::to_string(src) + "->" + std::to_string(dst);
  models::Schedule s = models::build_schedule(spec, t_, routing_, calib_);
  // Keep only the src->dst direction (send_recv on two ranks also sends dst->src).
  auto one = std::make_shared<models::Schedule>(s);
  one->transfers.clear();
  std::vector<std::int64_t> remap(s.transfers.size(), -1);
  for (std::size_t i = 0; i < s.transfers.size(); ++i) {
    const auto& tr = s.transfers[i];
    bool keep = true;
    for (auto d : tr.deps) keep = keep && remap[d] >= 0;
    if (tr.src == gpus[dst] && tr.dst == gpus[src]) keep = false;
    if (!keep) continue;
    auto c = tr;
    c.deps.clear();
    for (auto d : tr.deps) c.deps.push_back(static_cast<std::uint32_t>(remap[d]));
    remap[i] = static_cast<std::int64_t>(one->transfers.size());
    one->transfers.push_back(std::move(c));
  }
  if (one->transfers.empty()) *one = s;
  Built out;
  out.s = std::move(one);
  return out;
}

double EngineCommBase::p2p_replication(std::int32_t src, std::int32_t dst) const {
  // Every stand-in copy of the simulated pair sends the same message (symmetry of the trace); copies placed
  // with it (cluster runs) are priced already.
  auto it = p2p_stand_ins_.find({src, dst});
  const double placed = 1.0 + (it == p2p_stand_ins_.end() ? 0.0 : static_cast<double>(it->second.size()));
  if (world_size_ > 0 && !simulated_.empty())
    return std::max(1.0, static_cast<double>(world_size_) / static_cast<double>(simulated_.size()) / placed);
  return 1.0;
}

bool EngineCommBase::price_one_group(const workloads::Communicator& comm, CollOp op, double bytes,
                                     const std::string& algorithm, Priced& out) {
  if (comm.mirrors != 0 || !comm.stand_ins.empty() || comm.ranks.size() <= 1 || bytes <= 0) return false;
  // One group on an idle fabric: the one price of a call (sim/engine/collective_time.hpp), the time
  // `fabricsim coll` and `fabricsim validate` give for the same call (tests/validate/test_one_price.cpp).
  // With link statistics the materialised schedule's run provides them; the time stays the same.
  // Groups beyond step_limit (ranks x size > 20000 by default, i.e. more than 141 ranks) keep the fast tier:
  // phase fidelity with completion batching (EngineCommOptions); below it the fidelity is the one `coll`
  // uses (auto).
  const bool phase = static_cast<double>(comm.ranks.size()) * static_cast<double>(comm.ranks.size()) > opt_.step_limit;
  CollectiveCall call;
  call.spec = group_spec(t_, comm, op, bytes, algorithm, 0, phase ? models::Fidelity::Phase : models::Fidelity::Auto);
  call.pxn = op == CollOp::AllToAll || op == CollOp::AllToAllv;
  call.keep_run = opt_.collect_link_stats;
  const double tolerance = phase ? opt_.large_batch_tolerance_s : 0.0;
  if (phase) call.batch_tolerance_s = tolerance;
  topo::Routing& routing = *call.pxn ? routing_pxn_ : routing_;
  const CollectiveTime ct = time_collective(t_, routing, calib_, call);
  Priced p;
  if (ct.run && ct.fidelity == "symmetry") {
    // Symmetry collapses transfers, so its run lacks the collapsed links' busy time: link statistics come
    // from the step/phase schedule of this model's fidelity policy (the time stays time_collective's).
    const Built b = build_collective(comm, op, bytes, algorithm);
    p = price(*b.s, b.phase ? opt_.large_batch_tolerance_s : 0.0, b.phase, routing_of(b));
  } else if (ct.run) {
    p = price(*ct.schedule, tolerance, phase, routing, ct.run.get());
  } else {
    ++runs_;
    if (phase) ++phase_runs_;
  }
  p.timing.duration_s = ct.time_s;
  p.timing.algorithm = ct.algorithm;
  p.timing.protocol = ct.protocol;
  out = std::move(p);
  return true;
}

// ---- EngineCommModel: idle fabric, cached ----

CommTiming EngineCommModel::collective(const workloads::Communicator& comm, CollOp op, double bytes,
                                       const std::string& algorithm) {
  auto key = std::make_tuple(static_cast<const void*>(&comm), static_cast<int>(op), bytes);
  if (auto it = cache_.find(key); it != cache_.end()) {
    account(it->second, it->second.replication);
    return it->second.timing;
  }
  const bool a2a = op == CollOp::AllToAll || op == CollOp::AllToAllv;
  if (Priced one; price_one_group(comm, op, bytes, algorithm, one)) {
    one.replication = replication(comm);
    one.all_to_all = a2a;
    account(one, one.replication);
    return (cache_[key] = std::move(one)).timing;
  }
  const Built b = build_collective(comm, op, bytes, algorithm);
  Priced p;
  if (!b.s) {
    p.timing.algorithm = "none";
    return (cache_[key] = std::move(p)).timing;
  }
  p = price(*b.s, b.phase ? opt_.large_batch_tolerance_s : 0.0, b.phase, routing_of(b));
  p.replication = replication(comm);
  p.all_to_all = a2a;
  account(p, p.replication);
  return (cache_[key] = std::move(p)).timing;
}

CommTiming EngineCommModel::p2p(std::int32_t src, std::int32_t dst, double bytes) {
  auto key = std::make_tuple(src, dst, bytes);
  if (auto it = p2p_cache_.find(key); it != p2p_cache_.end()) {
    account(it->second, it->second.replication);
    return it->second.timing;
  }
  const Built b = build_p2p(src, dst, bytes);
  Priced p = price(*b.s, 0.0, false, routing_of(b));
  p.timing.algorithm = "p2p";
  p.replication = p2p_replication(src, dst);
  account(p, p.replication);
  return (p2p_cache_[key] = std::move(p)).timing;
}

// ---- AnalyticLinksCommModel: analytic times, schedule bytes ----

AnalyticLinksCommModel::AnalyticLinksCommModel(const topo::Topology& t, const models::Calibration& calib,
                                               AnalyticCommParams ap, EngineCommOptions opt)
    : EngineCommBase(t, calib, opt), analytic_(t, ap) {}

std::string AnalyticLinksCommModel::describe() const {
  return analytic_.describe() +
         "; link statistics: each call's per-link payload bytes from its NCCL schedule (models/collectives, as the "
         "engine models build it), busy for the analytic time";
}

void AnalyticLinksCommModel::add_call(const Priced& b, double duration_s) {
  if (!opt_.collect_link_stats) return;
  scratch_.dirs = b.dirs;
  scratch_.tier_bytes = b.tier_bytes;
  scratch_.all_to_all = b.all_to_all;
  for (auto& [d, st] : scratch_.dirs) {
    st.busy_s = duration_s;
    // mean load over the call relative to nominal bandwidth (link_dirs() utilisation convention)
    const double nominal = t_.link(static_cast<topo::LinkId>(d / 2)).bandwidth_Bps;
    st.peak_util = duration_s > 0 && nominal > 0 ? std::min(1.0, st.bytes / (duration_s * nominal)) : 0.0;
  }
  account(scratch_, b.replication);
}

CommTiming AnalyticLinksCommModel::collective(const workloads::Communicator& comm, CollOp op, double bytes,
                                              const std::string& algorithm) {
  const CommTiming t = analytic_.collective(comm, op, bytes, algorithm);
  if (!opt_.collect_link_stats) return t;
  auto key = std::make_tuple(static_cast<const void*>(&comm), static_cast<int>(op), bytes);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    Priced p;
    const Built b = build_collective(comm, op, bytes, algorithm);
    if (b.s) payload_bytes(*b.s, routing_of(b), p);
    p.replication = replication(comm);
    p.all_to_all = op == CollOp::AllToAll || op == CollOp::AllToAllv;
    it = cache_.emplace(key, std::move(p)).first;
  }
  add_call(it->second, t.duration_s);
  return t;
}

CommTiming AnalyticLinksCommModel::p2p(std::int32_t src, std::int32_t dst, double bytes) {
  const CommTiming t = analytic_.p2p(src, dst, bytes);
  if (!opt_.collect_link_stats) return t;
  auto key = std::make_tuple(src, dst, bytes);
  auto it = p2p_cache_.find(key);
  if (it == p2p_cache_.end()) {
    Priced p;
    const Built b = build_p2p(src, dst, bytes);
    payload_bytes(*b.s, routing_of(b), p);
    p.replication = p2p_replication(src, dst);
    it = p2p_cache_.emplace(key, std::move(p)).first;
  }
  add_call(it->second, t.duration_s);
  return t;
}

// ---- SharedNetworkCommModel ----

SharedNetworkCommModel::SharedNetworkCommModel(const topo::Topology& t, const models::Calibration& calib,
                                               EngineCommOptions opt)
    : EngineCommBase(t, calib, opt), link_owner_(2 * static_cast<std::size_t>(t.num_links()), -1) {}
SharedNetworkCommModel::~SharedNetworkCommModel() = default;

std::string SharedNetworkCommModel::describe() const {
  return "communication model shared (contention): NCCL schedules (models/collectives, tuner-chosen algorithm and "
         "protocol) all run on one shared flow-level network at the simulated time they start, so collectives "
         "and messages that overlap in time contend for links (max-min fair); " +
         std::string(opt_.shared_isolation_shortcut
                         ? "a communicator or message pair whose links nothing else uses is priced once on an idle "
                           "fabric while its calls do not overlap, and any other call whose links stay free of other calls from "
                           "its start to its end likewise (exact: checked, the replay reruns with a call on the "
                           "network when another started on its links); "
                         : "") +
         describe_common() + "; completion batching " + num("%g", opt_.shared_batch_tolerance_s) +
         " s; calibration '" + calib_.name + "'";
}

CommTiming SharedNetworkCommModel::collective(const workloads::Communicator&, CollOp, double, const std::string&) {
  throw std::logic_error("SharedNetworkCommModel is asynchronous: use start_collective");
}
CommTiming SharedNetworkCommModel::p2p(std::int32_t, std::int32_t, double) {
  throw std::logic_error("SharedNetworkCommModel is asynchronous: use start_p2p");
}

std::size_t SharedNetworkCommModel::shared_owners() const {
  return static_cast<std::size_t>(std::count(owner_shared_.begin(), owner_shared_.end(), 1));
}

SharedNetworkCommModel::Entry& SharedNetworkCommModel::collective_entry(const workloads::Communicator& comm, CollOp op,
                                                                        double bytes, const std::string& algorithm) {
  auto key = std::make_tuple(static_cast<const void*>(&comm), static_cast<int>(op), bytes);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  Entry e;
  e.comm = &comm, e.op = op, e.bytes = bytes, e.algorithm = algorithm;
  // The schedule depends on these only (build_collective; the name is for messages), so does the payload.
  std::shared_ptr<Shape>* shared = nullptr;
  if (opt_.shared_schedule_reuse) {
    auto [at, fresh] = shapes_.try_emplace(ShapeKey{static_cast<int>(op), bytes, algorithm, comm.ranks, comm.mirrors,
                                                    comm.mirror_stride, comm.stand_ins, comm.a2a_matrix,
                                                    comm.collnet_enable});
    if (!fresh) {
      e.shape = at->second;
      e.b = e.shape->b;
      e.p = e.shape->p;
      ++shapes_reused_;
    }
    shared = &at->second;
  }
  if (!e.shape) {
    e.b = build_collective(comm, op, bytes, algorithm);
    e.p.timing.algorithm = e.b.s ? e.b.s->algorithm : "none";
    if (e.b.s) {
      e.p.timing.protocol = e.b.s->protocol;
      if (opt_.collect_link_stats) payload_bytes(*e.b.s, routing_of(e.b), e.p);
      e.p.replication = replication(comm);
      e.p.all_to_all = op == CollOp::AllToAll || op == CollOp::AllToAllv;
    }
    if (shared) {
      e.shape = std::make_shared<Shape>();
      e.shape->b = e.b;
      e.shape->p = e.p;
      *shared = e.shape;
    }
  }
  auto [o, fresh] = comm_owner_.emplace(static_cast<const void*>(&comm), static_cast<std::uint32_t>(owner_shared_.size()));
  if (fresh) {
    owner_shared_.push_back(opt_.shared_isolation_shortcut ? 0 : 1);
    owner_in_flight_.push_back(0);
  }
  e.owner = o->second;
  return cache_.emplace(key, std::move(e)).first->second;
}

SharedNetworkCommModel::Entry& SharedNetworkCommModel::p2p_entry(std::int32_t src, std::int32_t dst, double bytes) {
  auto key = std::make_tuple(src, dst, bytes);
  auto it = p2p_cache_.find(key);
  if (it != p2p_cache_.end()) return it->second;
  Entry e;
  e.b = build_p2p(src, dst, bytes);
  e.p.timing.algorithm = "p2p";
  e.p.timing.protocol = e.b.s->protocol;
  if (opt_.collect_link_stats) payload_bytes(*e.b.s, routing_of(e.b), e.p);
  e.p.replication = p2p_replication(src, dst);
  auto [o, fresh] = p2p_owner_.emplace(std::make_pair(src, dst), static_cast<std::uint32_t>(owner_shared_.size()));
  if (fresh) {
    owner_shared_.push_back(opt_.shared_isolation_shortcut ? 0 : 1);
    owner_in_flight_.push_back(0);
  }
  e.owner = o->second;
  return p2p_cache_.emplace(key, std::move(e)).first->second;
}

void SharedNetworkCommModel::claim(Entry& e) {
  e.claimed = true;
  if (!e.b.s) return;
  if (e.shape && e.shape->dirs_known) {
    e.dirs_used = e.shape->dirs;
  } else {
    topo::Routing& routing = routing_of(e.b);
    if (dir_mark_.empty()) dir_mark_.assign(link_owner_.size(), 0);
    ++claims_;
    for (const auto& x : e.b.s->transfers) {
      if (x.src == x.dst) continue;
      const auto mark = [&](const std::vector<topo::LinkDir>& r) {
        for (auto d : r)
          if (dir_mark_[d] != claims_) {  // each direction once (a ring's 130,048 transfers cross a few hundred)
            dir_mark_[d] = claims_;
            e.dirs_used.push_back(static_cast<std::uint32_t>(d));
          }
      };
      if (x.via != topo::kNoNode) {  // a relayed hop: both routes
        mark(routing.route(x.src, x.via));
        mark(routing.route(x.via, x.dst));
      } else {
        mark(routing.route(x.src, x.dst));
      }
    }
    std::sort(e.dirs_used.begin(), e.dirs_used.end());
    e.dirs_used.shrink_to_fit();
    if (e.shape) e.shape->dirs = e.dirs_used, e.shape->dirs_known = true;
  }
  // Owners per link direction (the same for every hop that crosses it).
  std::vector<std::uint32_t> others;
  bool conflict = false;
  for (auto d : e.dirs_used) {
    std::int64_t& o = link_owner_[d];
    if (o == -1) {
      o = e.owner;
    } else if (o != static_cast<std::int64_t>(e.owner)) {
      conflict = true;
      if (o >= 0) others.push_back(static_cast<std::uint32_t>(o));
      o = -2;
    }
  }
  if (!conflict) return;
  // Every owner that met another on a link direction now runs on the network; if one of them has a call
  // priced as isolated still in flight, that call's price may be wrong: start over.
  others.push_back(e.owner);
  bool in_flight = false;
  for (auto o : others) {
    owner_shared_[o] = 1;
    in_flight = in_flight || owner_in_flight_[o] > 0;
  }
  if (in_flight) {
    ++restarts_;
    throw ReplayRestart("a communicator priced as isolated shares a link with another in flight");
  }
}

void SharedNetworkCommModel::prepare(const workloads::Trace& trace) {
  // Build the schedule of every distinct call and mark its links, so that isolation is known before the
  // first call runs (no restart needed for sharing between owners).
  for (const auto& rt : trace.ranks)
    for (const auto& op : rt.ops) {
      if (op.kind == workloads::OpKind::Collective) {
        Entry& e = collective_entry(trace.comms[op.comm], op.coll, op.bytes, op.algorithm);
        if (!e.claimed) claim(e);
      } else if (op.kind == workloads::OpKind::Send) {
        if (op.peer < 0 || op.peer >= static_cast<std::int32_t>(t_.gpus().size())) continue;  // reported by the replay
        Entry& e = p2p_entry(rt.rank, op.peer, op.bytes);
        if (!e.claimed) claim(e);
      }
    }
}

void SharedNetworkCommModel::bind(EventQueue& q) {
  // A fresh network on the replay's queue (a restarted replay binds a fresh queue); what was learnt about
  // owners and the cached schedules are kept.
  q_ = &q;
  // Calls end at their schedule's finish_s: no per-transfer times (NetworkOptions::transfer_times).
  net_ = std::make_unique<Network>(q, t_, routing_, calib_,
                                   NetworkOptions{opt_.shared_batch_tolerance_s, opt_.shared_bundle_flows, false});
  net_->set_alternate_routing(routing_pxn_);
  std::fill(owner_in_flight_.begin(), owner_in_flight_.end(), 0);
  reset_stats();
  isolated_calls_ = network_calls_ = window_calls_ = 0;
  dir_busy_.assign(link_owner_.size(), 0);
  dir_window_.assign(link_owner_.size(), -1);
  owner_calls_.assign(owner_shared_.size(), 0);
  window_.clear();
  free_windows_.clear();
  invalidated_ = 0;
}

void SharedNetworkCommModel::end_of_replay() {
  if (invalidated_ == 0) return;
  // Some call priced on an idle window met another call on its links: rerun with those instances on the
  // network. After kMaxWindowReruns reruns, or when a quarter or more of this run's idle windows failed
  // (the sharing communicators' calls overlap as a rule, e.g. expert-parallel all_to_alls beside pipeline
  // sends: more reruns would cost more than they save), every call of a sharing owner runs on the network.
  if (++window_reruns_ >= kMaxWindowReruns || 4 * invalidated_ >= window_calls_) window_off_ = true;
  ++restarts_;
  throw ReplayRestart("a call priced on an idle window shared a link with another call");
}

void SharedNetworkCommModel::price_idle(Entry& e) {
  if (e.idle_priced) return;
  if (e.shape && e.shape->idle) {
    // Priced for an earlier entry of the same shape: the same inputs (ShapeKey), so the same price. The schedule
    // runs that pricing counted are counted again, so schedules_run() counts one idle pricing per entry, as
    // when each entry priced its own.
    e.idle = e.shape->idle;
    runs_ += e.shape->idle_runs;
    phase_runs_ += e.shape->idle_phase_runs;
    e.idle_priced = true;
    return;
  }
  const std::size_t runs = runs_, phase_runs = phase_runs_;
  // A collective of a group without mirrors alone on its links: its one price (time_collective), as
  // `fabricsim coll` gives it; otherwise the merged schedule on an idle fabric.
  Priced idle;
  if (!(e.comm && price_one_group(*e.comm, e.op, e.bytes, e.algorithm, idle)))
    idle = price(*e.b.s, opt_.shared_batch_tolerance_s, e.b.phase, routing_of(e.b));
  idle.all_to_all = e.p.all_to_all;
  e.idle = std::make_shared<const Priced>(std::move(idle));
  e.idle_priced = true;
  if (e.shape) {
    e.shape->idle = e.idle;
    e.shape->idle_runs = runs_ - runs;
    e.shape->idle_phase_runs = phase_runs_ - phase_runs;
  }
}

void SharedNetworkCommModel::start(Entry& e, Done done) {
  if (!q_) throw std::logic_error("SharedNetworkCommModel: bind() before starting operations");
  const double now = q_->now();
  if (!e.b.s) {  // nothing to move
    done(now, e.p.timing);
    return;
  }
  if (!e.claimed) claim(e);
  if (!owner_shared_[e.owner] && owner_in_flight_[e.owner] > 0) {
    // two calls of one isolated owner overlap: they would share its links
    owner_shared_[e.owner] = 1;
    ++restarts_;
    throw ReplayRestart("two calls of a communicator priced as isolated overlap in time");
  }
  if (!owner_shared_[e.owner]) {
    price_idle(e);
    account(*e.idle, e.p.replication);
    ++isolated_calls_;
    ++owner_in_flight_[e.owner];
    const double end = now + e.idle->timing.duration_s;
    q_->schedule(end, [this, owner = e.owner, end, timing = e.p.timing, done = std::move(done)] {
      --owner_in_flight_[owner];
      done(end, timing);
    });
    return;
  }
  // A sharing owner: idle-window pricing (see the class comment) unless this instance is marked.
  if (owner_calls_.size() < owner_shared_.size()) owner_calls_.resize(owner_shared_.size(), 0);
  const std::uint64_t instance = (static_cast<std::uint64_t>(e.owner) << 32) | owner_calls_[e.owner]++;
  if (owner_invalid_.size() < owner_shared_.size()) owner_invalid_.resize(owner_shared_.size(), 0);
  bool window = opt_.shared_isolation_shortcut && !window_off_ && owner_invalid_[e.owner] < kOwnerWindowLimit &&
                !forced_.count(instance);
  for (auto d : e.dirs_used) {
    if (!window) break;
    window = dir_busy_[d] == 0;
  }
  if (window) {
    price_idle(e);
    account(*e.idle, e.p.replication);
    ++isolated_calls_;
    ++window_calls_;
    std::int32_t w;
    if (!free_windows_.empty()) {
      w = free_windows_.back();
      free_windows_.pop_back();
    } else {
      w = static_cast<std::int32_t>(window_.size());
      window_.emplace_back();
    }
    window_[w] = Window{instance, false};
    for (auto d : e.dirs_used) {
      ++dir_busy_[d];
      dir_window_[d] = w;
    }
    const double end = now + e.idle->timing.duration_s;
    q_->schedule(end, [this, &e, w, end, timing = e.p.timing, done = std::move(done)] {
      for (auto d : e.dirs_used) {
        --dir_busy_[d];
        if (dir_window_[d] == w) dir_window_[d] = -1;
      }
      free_windows_.push_back(w);
      done(end, timing);
    });
    return;
  }
  // On the network: an idle-window call in flight on one of its links was priced wrong.
  for (auto d : e.dirs_used) {
    const std::int32_t w = dir_window_[d];
    if (w >= 0 && !window_[w].invalid) {
      window_[w].invalid = true;
      forced_.insert(window_[w].instance);
      ++owner_invalid_[window_[w].instance >> 32];
      ++invalidated_;
    }
    ++dir_busy_[d];
  }
  // the rest of this run is timed wrong: rerun now
  if (invalidated_ >= kRunInvalidLimit || (invalidated_ >= kEarlyInvalid && 4 * invalidated_ >= window_calls_))
    end_of_replay();
  account(e.p, e.p.replication);
  ++runs_;
  ++network_calls_;
  if (e.b.phase) ++phase_runs_;
  net_->start_schedule(e.b.s, e.b.s->fixed_latency_s,
                       [this, &e, done = std::move(done), timing = e.p.timing](ScheduleRun& r) {
                         for (auto d : e.dirs_used) --dir_busy_[d];
                         done(r.finish_s, timing);
                       },
                       e.b.pxn, opt_.shared_mirror_quotient ? e.b.groups : 1);
}

void SharedNetworkCommModel::start_collective(const workloads::Communicator& comm, CollOp op, double bytes,
                                              const std::string& algorithm, Done done) {
  start(collective_entry(comm, op, bytes, algorithm), std::move(done));
}

void SharedNetworkCommModel::start_p2p(std::int32_t src, std::int32_t dst, double bytes, Done done) {
  start(p2p_entry(src, dst, bytes), std::move(done));
}

void SharedNetworkCommModel::finalize_link_stats() {
  if (!opt_.collect_link_stats || !net_) return;
  // Isolated owners' links carry nothing on the network (their busy time and peak were added per call);
  // the others' come from the network.
  const std::vector<LinkDirStats> st = net_->link_stats();
  for (std::size_t d = 0; d < st.size() && d < dirs_.size(); ++d) {
    dirs_[d].busy_s += st[d].busy_s;
    dirs_[d].peak_util = std::max(dirs_[d].peak_util, st[d].peak_util);
  }
}

// ---- idle-fabric price beside the replay (replay/a2a_imbalance.hpp) ----

CommTiming EngineCommBase::idle_collective(const workloads::Communicator& comm, CollOp op, double bytes,
                                           const std::string& algorithm) {
  // The key: everything the call's schedule is built from (price_one_group and build_collective read the
  // communicator's ranks, mirrors, mirror stride, stand-ins and collnet_enable, and its byte matrix only through
  // group_spec's rounded spec.matrix; comm.name only names it in error messages). Calls with equal keys are the same
  // schedule inputs, so one price serves them all exactly: e.g. the balanced counterparts of the MoE layers of
  // one group, whose fitted matrices differ in the last bits but round to the same bytes.
  std::vector<std::uint64_t> key;
  {
    const models::CollectiveSpec spec = group_spec(t_, comm, op, bytes, algorithm, 0, models::Fidelity::Step);
    auto put = [&key](auto v) { key.push_back(static_cast<std::uint64_t>(v)); };
    auto put_ranks = [&](const std::vector<std::int32_t>& r) {
      put(r.size());
      for (auto x : r) put(x);
    };
    std::uint64_t b;
    static_assert(sizeof b == sizeof bytes);
    std::memcpy(&b, &bytes, sizeof b);
    put(static_cast<int>(op)), put(b), put(comm.mirrors), put(comm.mirror_stride), put(comm.collnet_enable);
    put_ranks(comm.ranks);
    put(comm.stand_ins.size());
    for (const auto& g : comm.stand_ins) put_ranks(g);
    put(algorithm.size());
    for (char ch : algorithm) put(static_cast<unsigned char>(ch));
    put(spec.matrix.size());
    for (const auto& row : spec.matrix) key.insert(key.end(), row.begin(), row.end());
  }
  if (auto it = idle_prices_.find(key); it != idle_prices_.end()) return it->second;
  // Priced as SharedNetworkCommModel::price_idle and EngineCommModel::collective price a call, with link
  // statistics off; the run counters are put back, so the replay's figures stay its own.
  const std::size_t runs = runs_, phase_runs = phase_runs_;
  const bool stats = opt_.collect_link_stats;
  opt_.collect_link_stats = false;
  struct Restore {
    EngineCommBase& m;
    std::size_t runs, phase_runs;
    bool stats;
    ~Restore() { m.runs_ = runs, m.phase_runs_ = phase_runs, m.opt_.collect_link_stats = stats; }
  } restore{*this, runs, phase_runs, stats};
  CommTiming timing{0, "none", ""};
  if (Priced p; price_one_group(comm, op, bytes, algorithm, p)) {
    timing = p.timing;
  } else if (const Built b = build_collective(comm, op, bytes, algorithm); b.s) {
    timing = price(*b.s, idle_tolerance(b), b.phase, routing_of(b)).timing;
  }
  return idle_prices_[std::move(key)] = timing;
}

// The replay's own price of the call when it priced it on an idle fabric: the same computation as
// idle_collective (price_one_group, or the merged schedule with this model's completion batching; collecting
// link statistics never changes a time, sim/engine/collective_time.cpp), so the same number.
CommTiming EngineCommBase::collective_plan(const workloads::Communicator& comm, CollOp op, double bytes,
                                           const std::string& algorithm) {
  auto key = std::make_tuple(static_cast<const void*>(&comm), static_cast<int>(op), bytes);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  CommTiming out{0, "none", ""};
  if (comm.ranks.size() > 1 && bytes > 0) {
    models::CollectiveSpec spec = group_spec(t_, comm, op, bytes, algorithm, 0, models::Fidelity::Step);
    const bool a2a = op == CollOp::AllToAll || op == CollOp::AllToAllv;
    const models::TunerChoice ch = models::tune(spec, t_, a2a ? routing_pxn_ : routing_, calib_);
    out.algorithm = models::to_string(ch.algorithm);
    out.protocol = models::to_string(ch.protocol);
  }
  return plans_[key] = out;
}

CommTiming SharedNetworkCommModel::collective_plan(const workloads::Communicator& comm, CollOp op, double bytes,
                                                   const std::string& algorithm) {
  return collective_entry(comm, op, bytes, algorithm).p.timing;
}

std::optional<CommTiming> EngineCommModel::replayed_idle_price(const workloads::Communicator& comm, CollOp op,
                                                               double bytes, const std::string&) const {
  auto it = cache_.find(std::make_tuple(static_cast<const void*>(&comm), static_cast<int>(op), bytes));
  if (it == cache_.end()) return std::nullopt;
  return it->second.timing;
}

std::optional<CommTiming> SharedNetworkCommModel::replayed_idle_price(const workloads::Communicator& comm, CollOp op,
                                                                      double bytes, const std::string& algorithm) const {
  // Calls of isolated owners and idle-window calls (price_idle); calls run on the network have no idle price.
  auto it = cache_.find(std::make_tuple(static_cast<const void*>(&comm), static_cast<int>(op), bytes));
  if (it == cache_.end() || !it->second.idle_priced || it->second.comm != &comm || it->second.algorithm != algorithm)
    return std::nullopt;
  return it->second.idle->timing;
}

}  // namespace fabricsim::sim
