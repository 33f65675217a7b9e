#include "replay/executor.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

namespace fabricsim::sim {

using workloads::Op;
using workloads::OpKind;
using workloads::Trace;

namespace {

// Breakdown categories for exposed communication, in attribution priority order.
const std::array<const char*, 7> kCommCats = {"tp", "cp", "ep", "all_to_all", "pp", "dp", "other"};
constexpr int kWait = static_cast<int>(kCommCats.size()) + 1;  // breakdown slot of p2p waits
int cat_index(const std::string& c) {
  for (std::size_t i = 0; i < kCommCats.size(); ++i)
    if (c == kCommCats[i]) return static_cast<int>(i);
  return static_cast<int>(kCommCats.size()) - 1;
}

struct Event {
  double t;
  std::uint64_t seq;
  std::uint32_t gid;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

struct PendingColl {
  int arrived = 0;
  std::vector<std::uint32_t> gids;
};

}  // namespace

RunResult replay(const Trace& trace, const topo::Topology& topo, const models::ComputeModel& compute, CommModel& comm,
                 const ReplayOptions& opt) {
  const std::size_t R = trace.ranks.size();
  if (trace.world_size > static_cast<std::int32_t>(topo.gpus().size()))
    throw InputError("trace '" + trace.name + "'", "needs " + std::to_string(trace.world_size) +
                                                       " GPUs but the topology has " + std::to_string(topo.gpus().size()));
  std::vector<std::uint32_t> base(R + 1, 0);
  for (std::size_t r = 0; r < R; ++r) base[r + 1] = base[r] + static_cast<std::uint32_t>(trace.ranks[r].ops.size());
  const std::uint32_t N = base[R];
  std::vector<std::uint32_t> owner(N);
  for (std::size_t r = 0; r < R; ++r)
    for (std::uint32_t g = base[r]; g < base[r + 1]; ++g) owner[g] = static_cast<std::uint32_t>(r);
  auto op_of = [&](std::uint32_t g) -> const Op& { return trace.ranks[owner[g]].ops[g - base[owner[g]]]; };

  // Successor lists (CSR) from deps and stream order.
  std::vector<std::uint32_t> pending(N, 0), succ_count(N + 1, 0);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  edges.reserve(N * 2);
  for (std::size_t r = 0; r < R; ++r) {
    const auto& rt = trace.ranks[r];
    std::vector<std::int64_t> last(rt.streams.size(), -1);
    for (std::uint32_t i = 0; i < rt.ops.size(); ++i) {
      std::uint32_t g = base[r] + i;
      for (auto d : rt.ops[i].deps) edges.push_back({base[r] + d, g});
      auto& l = last[rt.ops[i].stream];
      if (l >= 0) edges.push_back({base[r] + static_cast<std::uint32_t>(l), g});
      l = i;
    }
  }
  for (const auto& e : edges) {
    ++succ_count[e.first + 1];
    ++pending[e.second];
  }
  for (std::uint32_t g = 0; g < N; ++g) succ_count[g + 1] += succ_count[g];
  std::vector<std::uint32_t> succ(edges.size());
  {
    std::vector<std::uint32_t> fill(succ_count.begin(), succ_count.end() - 1);
    for (const auto& e : edges) succ[fill[e.first]++] = e.second;
  }
  edges.clear();
  edges.shrink_to_fit();

  // Simulated members per communicator.
  std::map<std::int32_t, std::size_t> rank_index;
  for (std::size_t r = 0; r < R; ++r) rank_index[trace.ranks[r].rank] = r;
  std::vector<int> sim_members(trace.comms.size(), 0);
  for (std::size_t c = 0; c < trace.comms.size(); ++c)
    for (auto m : trace.comms[c].ranks) sim_members[c] += rank_index.count(m) ? 1 : 0;

  std::vector<double> ready_s(N, -1), start_s(N, -1), end_s(N, -1);
  std::vector<std::string> algo(N), proto(N);
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> q;
  std::uint64_t seq = 0;
  std::vector<std::vector<std::uint32_t>> calls(R, std::vector<std::uint32_t>(trace.comms.size(), 0));
  std::map<std::pair<std::int32_t, std::uint32_t>, PendingColl> colls;
  std::map<std::tuple<std::int32_t, std::int32_t, std::int64_t>, std::pair<std::deque<std::uint32_t>, std::deque<std::uint32_t>>> p2p;

  auto finish_at = [&](std::uint32_t g, double s, double e) {
    start_s[g] = s;
    end_s[g] = e;
    q.push({e, seq++, g});
  };
  auto make_ready = [&](std::uint32_t g, double t) {
    ready_s[g] = t;
    const Op& op = op_of(g);
    const std::size_t r = owner[g];
    switch (op.kind) {
      case OpKind::Compute: {
        double d = op.duration_s >= 0 ? op.duration_s : compute.time_s(op.op_class, op.flops, op.mem_bytes);
        finish_at(g, t, t + d);
        break;
      }
      case OpKind::Collective: {
        auto k = calls[r][op.comm]++;
        auto& pc = colls[{op.comm, k}];
        pc.gids.push_back(g);
        if (++pc.arrived == sim_members[op.comm] && comm.asynchronous()) {
          std::vector<std::uint32_t> gids = std::move(pc.gids);
          colls.erase({op.comm, k});
          comm.start_collective(t, trace.comms[op.comm], op.coll, op.bytes, op.algorithm,
                                [&, gids = std::move(gids), t](double end, const CommTiming& ct) {
                                  for (auto m : gids) {
                                    finish_at(m, t, end);
                                    algo[m] = ct.algorithm;
                                    proto[m] = ct.protocol;
                                  }
                                });
        } else if (pc.arrived == sim_members[op.comm]) {
          CommTiming ct = comm.collective(trace.comms[op.comm], op.coll, op.bytes, op.algorithm);
          for (auto m : pc.gids) {
            finish_at(m, t, t + ct.duration_s);
            algo[m] = ct.algorithm;
            proto[m] = ct.protocol;
          }
          colls.erase({op.comm, k});
        }
        break;
      }
      case OpKind::Send:
      case OpKind::Recv: {
        const std::int32_t me = trace.ranks[r].rank;
        bool send = op.kind == OpKind::Send;
        auto key = send ? std::make_tuple(me, op.peer, op.tag) : std::make_tuple(op.peer, me, op.tag);
        auto& qs = p2p[key];
        auto& mine = send ? qs.first : qs.second;
        auto& other = send ? qs.second : qs.first;
        if (other.empty()) {
          mine.push_back(g);
        } else {
          std::uint32_t o = other.front();
          other.pop_front();
          std::uint32_t sg = send ? g : o;
          if (comm.asynchronous()) {
            comm.start_p2p(t, std::get<0>(key), std::get<1>(key), op_of(sg).bytes,
                           [&, g, o, t](double end, const CommTiming& ct) {
                             finish_at(g, t, end);
                             finish_at(o, t, end);
                             algo[g] = algo[o] = ct.algorithm;
                             proto[g] = proto[o] = ct.protocol;
                           });
            break;
          }
          CommTiming ct = comm.p2p(std::get<0>(key), std::get<1>(key), op_of(sg).bytes);
          finish_at(g, t, t + ct.duration_s);
          finish_at(o, t, t + ct.duration_s);
          algo[g] = algo[o] = ct.algorithm;
          proto[g] = proto[o] = ct.protocol;
        }
        break;
      }
    }
  };

  for (std::uint32_t g = 0; g < N; ++g)
    if (pending[g] == 0) make_ready(g, 0.0);
  std::uint32_t done = 0;
  std::size_t events = 0;
  // The replay's own events and (for an asynchronous communication model) the network's, in time order;
  // at equal times the network goes first, so communication that ends at t is done before ops at t run.
  for (;;) {
    const double tq = q.empty() ? std::numeric_limits<double>::infinity() : q.top().t;
    const double tc = comm.next_event_s();
    if (q.empty() && !(tc < std::numeric_limits<double>::infinity())) break;
    if (tc <= tq) {
      comm.run_until(tc);
      continue;
    }
    Event ev = q.top();
    q.pop();
    ++done;
    ++events;
    for (std::uint32_t i = succ_count[ev.gid]; i < succ_count[ev.gid + 1]; ++i) {
      std::uint32_t s = succ[i];
      if (--pending[s] == 0) make_ready(s, ev.t);
    }
  }

  auto label = [&](std::uint32_t g) {
    const Op& op = op_of(g);
    return "rank " + std::to_string(trace.ranks[owner[g]].rank) + " op " + std::to_string(g - base[owner[g]]) +
           (op.name.empty() ? "" : " '" + op.name + "'");
  };
  if (done != N) {
    std::string msg;
    int shown = 0;
    for (const auto& [key, pc] : colls) {
      if (shown >= 4) break;
      const auto& c = trace.comms[key.first];
      std::string missing;
      std::vector<std::int32_t> arrived;
      for (auto g : pc.gids) arrived.push_back(trace.ranks[owner[g]].rank);
      int listed = 0;
      for (auto m : c.ranks)
        if (rank_index.count(m) && std::find(arrived.begin(), arrived.end(), m) == arrived.end() && listed++ < 8)
          missing += (missing.empty() ? "" : ",") + std::to_string(m);
      msg += (shown++ ? "; " : "") + std::string("collective ") + workloads::to_string(op_of(pc.gids[0]).coll) +
             " #" + std::to_string(key.second) + " on '" + c.name + "' reached by " + label(pc.gids[0]) +
             (pc.gids.size() > 1 ? " and " + std::to_string(pc.gids.size() - 1) + " more" : "") +
             " but not by rank(s) " + missing;
    }
    for (const auto& [key, qs] : p2p) {
      for (int side = 0; side < 2 && shown < 8; ++side)
        for (auto g : side == 0 ? qs.first : qs.second) {
          if (shown >= 8) break;
          msg += (shown++ ? "; " : "") + std::string(side == 0 ? "send " : "recv ") + "from rank " +
                 std::to_string(std::get<0>(key)) + " to rank " + std::to_string(std::get<1>(key)) + " tag " +
                 std::to_string(std::get<2>(key)) + " (" + label(g) + ") has no matching " +
                 (side == 0 ? "recv" : "send") + " ready";
        }
    }
    if (msg.empty()) msg = "ops wait on each other (dependency cycle)";
    throw ReplayDeadlock("replay of '" + trace.name + "'", "deadlock after " + std::to_string(done) + " of " +
                                                               std::to_string(N) + " ops: " + msg);
  }

  RunResult res;
  res.workload = trace.name;
  res.workload_params = trace.params;
  res.gpus = trace.world_size;
  double T = 0;
  for (std::uint32_t g = 0; g < N; ++g) T = std::max(T, end_s[g]);
  res.iteration_s = T;

  // Breakdown per simulated rank, then averaged.
  bool has_pp = false;
  for (std::uint32_t g = 0; g < N && !has_pp; ++g) has_pp = op_of(g).category == "pp";
  std::array<double, kCommCats.size()> exposed{};
  double compute_sum = 0, bubble_sum = 0, idle_sum = 0;
  for (std::size_t r = 0; r < R; ++r) {
    // (time, kind, delta): kind 0 compute, 1..kCommCats.size() comm category, kWait p2p wait.
    std::vector<std::tuple<double, int, int>> pts;
    for (std::uint32_t g = base[r]; g < base[r + 1]; ++g) {
      const Op& op = op_of(g);
      if (op.kind == OpKind::Compute) {
        if (end_s[g] > start_s[g]) {
          pts.emplace_back(start_s[g], 0, +1);
          pts.emplace_back(end_s[g], 0, -1);
        }
        continue;
      }
      int k = 1 + cat_index(op.category);
      if (end_s[g] > start_s[g]) {
        pts.emplace_back(start_s[g], k, +1);
        pts.emplace_back(end_s[g], k, -1);
      }
      if ((op.kind == OpKind::Send || op.kind == OpKind::Recv) && start_s[g] > ready_s[g]) {
        pts.emplace_back(ready_s[g], kWait, +1);
        pts.emplace_back(start_s[g], kWait, -1);
      }
    }
    pts.emplace_back(T, -1, 0);
    std::sort(pts.begin(), pts.end());
    std::array<int, kWait + 1> cnt{};
    double prev = 0;
    for (const auto& [t, k, d] : pts) {
      double dt = t - prev;
      if (dt > 0) {
        if (cnt[0] > 0) {
          compute_sum += dt;
        } else {
          int c = -1;
          for (int i = 1; i <= static_cast<int>(kCommCats.size()); ++i)
            if (cnt[i] > 0) {
              c = i - 1;
              break;
            }
          if (c >= 0) exposed[c] += dt;
          else if (cnt[kWait] > 0 || has_pp) bubble_sum += dt;
          else idle_sum += dt;
        }
      }
      prev = t;
      if (k >= 0) cnt[k] += d;
    }
  }
  const double rn = R ? static_cast<double>(R) : 1.0;
  res.breakdown.compute_s = compute_sum / rn;
  for (std::size_t i = 0; i < kCommCats.size(); ++i)
    if (exposed[i] > 0) res.breakdown.exposed_comm_s[kCommCats[i]] = exposed[i] / rn;
  res.breakdown.bubble_s = bubble_sum / rn;
  res.breakdown.idle_s = idle_sum / rn;

  auto meta = [&](const char* k) {
    auto it = trace.metadata.find(k);
    return it == trace.metadata.end() ? 0.0 : it->second;
  };
  if (T > 0) {
    res.samples_per_s = meta("samples_per_iteration") / T;
    res.tokens_per_s = meta("tokens_per_iteration") / T;
    double flops = meta("model_flops_per_iteration");
    if (flops <= 0) {
      double sim_flops = 0;
      for (std::uint32_t g = 0; g < N; ++g) sim_flops += op_of(g).flops;
      flops = R ? sim_flops / rn * trace.world_size : 0;
      res.notes.push_back("tflops_per_gpu from the trace's compute-op FLOPs (no model_flops_per_iteration)");
    }
    res.tflops_per_gpu = flops / trace.world_size / T / 1e12;
    // MFU: achieved model FLOP/s over the dense (no sparsity) tensor-core peak the generator names for the
    // precision in use; no peak, no MFU.
    const double peak = meta("peak_dense_flops_per_gpu");
    if (peak > 0) res.mfu = res.tflops_per_gpu * 1e12 / peak;
  }
  for (const auto& [k, v] : trace.metadata) res.metrics[k] = v;
  res.metrics["replay.ops_simulated"] = N;
  res.metrics["replay.ranks_simulated"] = static_cast<double>(R);
  res.metrics["replay.events"] = static_cast<double>(events);
  // The trace's notes first, then the replay's (appended, so the TFLOP/s note above is kept).
  res.notes.insert(res.notes.begin(), trace.notes.begin(), trace.notes.end());
  res.notes.push_back(comm.describe());
  if (R < static_cast<std::size_t>(trace.world_size))
    res.notes.push_back("simulated " + std::to_string(R) + " of " + std::to_string(trace.world_size) +
                        " ranks; the others are symmetric stand-ins (breakdown averaged over simulated ranks)");

  if (opt.record_ops) {
    std::size_t n = std::min<std::size_t>(N, opt.max_op_records);
    res.ops.reserve(n);
    for (std::uint32_t g = 0; g < n; ++g) {
      const Op& op = op_of(g);
      const auto& rt = trace.ranks[owner[g]];
      OpRecord rec;
      rec.rank = rt.rank;
      rec.host = rt.rank < static_cast<std::int32_t>(topo.gpus().size()) ? topo.node(topo.gpus()[rt.rank]).host : -1;
      rec.stream = rt.streams[op.stream];
      rec.name = op.name;
      rec.kind = workloads::to_string(op.kind);
      rec.category = op.category;
      rec.start_s = start_s[g];
      rec.end_s = end_s[g];
      rec.bytes = op.kind == OpKind::Compute ? 0 : op.bytes;
      rec.algorithm = algo[g];
      rec.protocol = proto[g];
      rec.flops = op.flops;
      res.ops.push_back(std::move(rec));
    }
    if (n < N) res.notes.push_back("op records capped at " + std::to_string(n) + " of " + std::to_string(N));
  }
  return res;
}

}  // namespace fabricsim::sim
