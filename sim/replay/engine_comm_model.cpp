#include "sim/replay/engine_comm_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "models/collectives.hpp"
#include "sim/base/error.hpp"
#include "sim/replay/outputs_links.hpp"

namespace fabricsim::sim {

using workloads::CollOp;

EngineCommModel::EngineCommModel(const topo::Topology& t, const models::Calibration& calib, EngineCommOptions opt)
    : t_(t), calib_(calib), opt_(opt), routing_(t), routing_pxn_(t, topo::RoutingOptions{true}) {
  if (opt_.collect_link_stats) dirs_.assign(2 * static_cast<std::size_t>(t.num_links()), LinkDirStats{});
}
EngineCommModel::~EngineCommModel() = default;

std::string EngineCommModel::describe() const {
  char lim[64];
  std::snprintf(lim, sizeof lim, "%.0f", opt_.step_limit);
  char tol[64];
  std::snprintf(tol, sizeof tol, "%g", opt_.large_batch_tolerance_s);
  return "communication: NCCL schedules (models/collectives, tuner-chosen algorithm and protocol) run on the "
         "flow-level engine on an idle fabric, cached per (communicator, op, bytes); co-located identical groups "
         "(mirrors) share the schedule so they contend; all_to_all with PXN routing; different collectives overlapping in time do not contend; "
         "step fidelity while ranks priced x communicator size <= " + std::string(lim) +
         ", else phase fidelity with completion batching " + std::string(tol) + " s; calibration '" + calib_.name + "'";
}

void EngineCommModel::set_symmetry(std::int32_t world_size, std::vector<std::int32_t> simulated) {
  world_size_ = world_size;
  simulated_ = std::set<std::int32_t>(simulated.begin(), simulated.end());
}

double EngineCommModel::replication(const workloads::Communicator& comm) const {
  if (world_size_ <= 0 || simulated_.empty()) return 1.0;
  double s = 0;
  for (auto r : comm.ranks) s += simulated_.count(r) ? 1.0 : 0.0;
  if (s <= 0) return 1.0;
  const double priced = static_cast<double>(comm.ranks.size()) * (comm.mirrors + 1.0);
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
  }
  return models::Op::AllReduce;
}

// Appends `s` to `into`, offsetting dependency indices.
void append(models::Schedule& into, const models::Schedule& s) {
  const auto off = static_cast<std::uint32_t>(into.transfers.size());
  for (auto tr : s.transfers) {
    for (auto& d : tr.deps) d += off;
    into.transfers.push_back(std::move(tr));
  }
}
}  // namespace

EngineCommModel::Priced EngineCommModel::price(const models::Schedule& s, bool phase, topo::Routing& routing) {
  RunOptions ro;
  ro.collect_link_stats = opt_.collect_link_stats;
  if (phase) ro.batch_tolerance_s = opt_.large_batch_tolerance_s;
  ScheduleResult res = run_schedule(s, t_, routing, calib_, ro);
  ++runs_;
  if (phase) ++phase_runs_;
  Priced p;
  p.timing.duration_s = res.makespan_s;
  p.timing.algorithm = s.algorithm;
  p.timing.protocol = s.protocol;
  if (!opt_.collect_link_stats) return p;
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
    for (auto d : routing.route(x.src, x.dst)) bytes[d] += b;
  }
  for (std::size_t d = 0; d < bytes.size(); ++d) {
    const LinkDirStats* st = d < res.link_dirs.size() ? &res.link_dirs[d] : nullptr;
    if (bytes[d] <= 0 && (!st || (st->busy_s <= 0 && st->peak_util <= 0))) continue;
    LinkDirStats a;
    a.bytes = bytes[d];
    if (st) {
      a.busy_s = st->busy_s;
      a.peak_util = st->peak_util;
    }
    p.dirs.emplace_back(static_cast<std::uint32_t>(d), a);
    p.tier_bytes[link_tier(t_, static_cast<topo::LinkId>(d / 2))] += a.bytes;
  }
  return p;
}

void EngineCommModel::account(const Priced& p, double replication) {
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
}

CommTiming EngineCommModel::collective(const workloads::Communicator& comm, CollOp op, double bytes,
                                       const std::string& algorithm) {
  auto key = std::make_tuple(static_cast<const void*>(&comm), static_cast<int>(op), bytes);
  if (auto it = cache_.find(key); it != cache_.end()) {
    account(it->second, it->second.replication);
    return it->second.timing;
  }
  const auto& gpus = t_.gpus();
  const int n = static_cast<int>(comm.ranks.size());
  if (n <= 1 || bytes <= 0) {
    Priced none;
    none.timing.algorithm = "none";
    return (cache_[key] = none).timing;
  }
  // Sizes must be whole elements per rank block: round to a multiple of n * 2 bytes (2-byte elements).
  const std::uint64_t unit = static_cast<std::uint64_t>(n) * 2;
  std::uint64_t b = static_cast<std::uint64_t>(std::llround(bytes));
  b = std::max<std::uint64_t>(unit, (b + unit - 1) / unit * unit);
  // Fidelity: step while the merged step schedule stays small, else phase (see the header).
  const double ranks_priced = static_cast<double>(n) * (comm.mirrors + 1.0);
  const bool phase = ranks_priced * n > opt_.step_limit;
  topo::Routing& routing = op == CollOp::AllToAll ? routing_pxn_ : routing_;
  models::Schedule merged;
  for (int k = 0; k <= comm.mirrors; ++k) {
    models::CollectiveSpec spec;
    spec.op = to_model_op(op);
    spec.bytes = b;
    spec.elem_bytes = 2;
    spec.fidelity = phase ? models::Fidelity::Phase : models::Fidelity::Step;
    spec.where = "communicator '" + comm.name + "'";
    for (auto r : comm.ranks) {
      std::int64_t rr = static_cast<std::int64_t>(r) + static_cast<std::int64_t>(k) * comm.mirror_stride;
      if (rr < 0 || rr >= static_cast<std::int64_t>(gpus.size()))
        throw InputError(spec.where, "rank " + std::to_string(rr) + " is not a GPU of the topology (" +
                                         std::to_string(gpus.size()) + " GPUs)");
      spec.communicator.push_back(gpus[rr]);
    }
    if (!algorithm.empty()) {
      models::Algorithm a;
      if (!models::parse_algorithm(algorithm, a))
        throw InputError(spec.where, "unknown algorithm '" + algorithm + "'");
      spec.algorithm = a;
    }
    models::Schedule s = models::build_schedule(spec, t_, routing, calib_);
    if (k == 0) {
      merged.op = s.op;
      merged.algorithm = s.algorithm;
      merged.protocol = s.protocol;
      merged.fidelity = s.fidelity;
      merged.fixed_latency_s = s.fixed_latency_s;
    }
    append(merged, s);
  }
  Priced p = price(merged, phase, routing);
  p.replication = replication(comm);
  account(p, p.replication);
  return (cache_[key] = std::move(p)).timing;
}

CommTiming EngineCommModel::p2p(std::int32_t src, std::int32_t dst, double bytes) {
  auto key = std::make_tuple(src, dst, bytes);
  if (auto it = p2p_cache_.find(key); it != p2p_cache_.end()) {
    account(it->second, it->second.replication);
    return it->second.timing;
  }
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
  models::Schedule one = s;
  one.transfers.clear();
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
    remap[i] = static_cast<std::int64_t>(one.transfers.size());
    one.transfers.push_back(std::move(c));
  }
  if (one.transfers.empty()) one = s;
  Priced p = price(one, false, routing_);
  p.timing.algorithm = "p2p";
  // Every stand-in copy of the simulated pair sends the same message (symmetry of the trace).
  if (world_size_ > 0 && !simulated_.empty())
    p.replication = std::max(1.0, static_cast<double>(world_size_) / static_cast<double>(simulated_.size()));
  account(p, p.replication);
  return (p2p_cache_[key] = std::move(p)).timing;
}

}  // namespace fabricsim::sim
