#include "sim/replay/engine_comm_model.hpp"

#include <algorithm>
#include <cmath>

#include "models/collectives.hpp"
#include "sim/base/error.hpp"
#include "sim/engine/schedule_runner.hpp"

namespace fabricsim::sim {

using workloads::CollOp;

EngineCommModel::EngineCommModel(const topo::Topology& t, const models::Calibration& calib)
    : t_(t), calib_(calib), routing_(t) {}
EngineCommModel::~EngineCommModel() = default;

std::string EngineCommModel::describe() const {
  return "communication: NCCL schedules (models/collectives, tuner-chosen algorithm and protocol) run on the "
         "flow-level engine on an idle fabric, cached per (communicator, op, bytes); co-located identical groups "
         "(mirrors) share the schedule so they contend; different collectives overlapping in time do not contend; "
         "calibration '" + calib_.name + "'";
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

CommTiming EngineCommModel::collective(const workloads::Communicator& comm, CollOp op, double bytes,
                                       const std::string& algorithm) {
  auto key = std::make_tuple(static_cast<const void*>(&comm), static_cast<int>(op), bytes);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  const auto& gpus = t_.gpus();
  const int n = static_cast<int>(comm.ranks.size());
  CommTiming out;
  if (n <= 1 || bytes <= 0) {
    out.algorithm = "none";
    return cache_[key] = out;
  }
  // Sizes must be whole elements per rank block: round to a multiple of n * 2 bytes (2-byte elements).
  const std::uint64_t unit = static_cast<std::uint64_t>(n) * 2;
  std::uint64_t b = static_cast<std::uint64_t>(std::llround(bytes));
  b = std::max<std::uint64_t>(unit, (b + unit - 1) / unit * unit);
  models::Schedule merged;
  for (int k = 0; k <= comm.mirrors; ++k) {
    models::CollectiveSpec spec;
    spec.op = to_model_op(op);
    spec.bytes = b;
    spec.elem_bytes = 2;
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
    models::Schedule s = models::build_schedule(spec, t_, routing_, calib_);
    if (k == 0) {
      merged.op = s.op;
      merged.algorithm = s.algorithm;
      merged.protocol = s.protocol;
      merged.fidelity = s.fidelity;
      merged.fixed_latency_s = s.fixed_latency_s;
    }
    append(merged, s);
  }
  ScheduleResult res = run_schedule(merged, t_, routing_, calib_, RunOptions{});
  ++runs_;
  out.duration_s = res.makespan_s;
  out.algorithm = merged.algorithm;
  out.protocol = merged.protocol;
  return cache_[key] = out;
}

CommTiming EngineCommModel::p2p(std::int32_t src, std::int32_t dst, double bytes) {
  auto key = std::make_tuple(src, dst, bytes);
  if (auto it = p2p_cache_.find(key); it != p2p_cache_.end()) return it->second;
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
  ScheduleResult res = run_schedule(one, t_, routing_, calib_, RunOptions{});
  ++runs_;
  CommTiming out;
  out.duration_s = res.makespan_s;
  out.algorithm = "p2p";
  out.protocol = s.protocol;
  return p2p_cache_[key] = out;
}

}  // namespace fabricsim::sim
