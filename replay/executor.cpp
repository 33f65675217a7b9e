#include "replay/executor.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "models/compute_contention.hpp"
#include "replay/a2a_imbalance.hpp"
#include "sim/engine/event_queue.hpp"

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

// ---- rank/stream state: every op of every simulated rank as one global id (gid), with its successors ----
struct OpGraph {
  const Trace& trace;
  std::vector<std::uint32_t> base;    // first gid of each simulated rank (size R + 1)
  std::vector<std::uint32_t> owner;   // rank index of each gid
  std::vector<std::uint32_t> indeg;   // unmet predecessors at the start (deps + previous op of its stream)
  std::vector<std::uint32_t> succ_off, succ;  // CSR successor lists
  std::map<std::int32_t, std::size_t> rank_index;  // global rank -> simulated rank index
  std::vector<int> sim_members;       // simulated members per communicator

  explicit OpGraph(const Trace& t) : trace(t) {
    const std::size_t R = t.ranks.size();
    base.assign(R + 1, 0);
    for (std::size_t r = 0; r < R; ++r) base[r + 1] = base[r] + static_cast<std::uint32_t>(t.ranks[r].ops.size());
    const std::uint32_t N = base[R];
    owner.resize(N);
    for (std::size_t r = 0; r < R; ++r)
      for (std::uint32_t g = base[r]; g < base[r + 1]; ++g) owner[g] = static_cast<std::uint32_t>(r);
    // Edges from deps and stream order (streams are FIFO, like CUDA streams).
    std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
    edges.reserve(static_cast<std::size_t>(N) * 2);
    for (std::size_t r = 0; r < R; ++r) {
      const auto& rt = t.ranks[r];
      std::vector<std::int64_t> last(rt.streams.size(), -1);
      for (std::uint32_t i = 0; i < rt.ops.size(); ++i) {
        const std::uint32_t g = base[r] + i;
        for (auto d : rt.ops[i].deps) edges.push_back({base[r] + d, g});
        auto& l = last[rt.ops[i].stream];
        if (l >= 0) edges.push_back({base[r] + static_cast<std::uint32_t>(l), g});
        l = i;
      }
    }
    indeg.assign(N, 0);
    succ_off.assign(static_cast<std::size_t>(N) + 1, 0);
    for (const auto& e : edges) {
      ++succ_off[e.first + 1];
      ++indeg[e.second];
    }
    for (std::uint32_t g = 0; g < N; ++g) succ_off[g + 1] += succ_off[g];
    succ.resize(edges.size());
    std::vector<std::uint32_t> fill(succ_off.begin(), succ_off.end() - 1);
    for (const auto& e : edges) succ[fill[e.first]++] = e.second;
    for (std::size_t r = 0; r < R; ++r) rank_index[t.ranks[r].rank] = r;
    sim_members.assign(t.comms.size(), 0);
    for (std::size_t c = 0; c < t.comms.size(); ++c)
      for (auto m : t.comms[c].ranks) sim_members[c] += rank_index.count(m) ? 1 : 0;
    // A communicator no simulated rank belongs to but one calls: a placement class's group the simulated
    // rank's calls were moved to (replay/placement_classes.hpp); its calls start when that caller arrives.
    std::vector<std::set<std::size_t>> callers;
    for (std::size_t r = 0; r < R; ++r)
      for (const auto& o : t.ranks[r].ops)
        if (o.kind == OpKind::Collective && o.comm >= 0 && sim_members[static_cast<std::size_t>(o.comm)] == 0) {
          if (callers.empty()) callers.resize(t.comms.size());
          callers[static_cast<std::size_t>(o.comm)].insert(r);
        }
    for (std::size_t c = 0; c < callers.size(); ++c)
      if (!callers[c].empty()) sim_members[c] = static_cast<int>(callers[c].size());
  }
  std::uint32_t size() const { return base.back(); }
  const Op& op(std::uint32_t g) const { return trace.ranks[owner[g]].ops[g - base[owner[g]]]; }
  std::string label(std::uint32_t g) const {
    const Op& o = op(g);
    return "rank " + std::to_string(trace.ranks[owner[g]].rank) + " op " + std::to_string(g - base[owner[g]]) +
           (o.name.empty() ? "" : " '" + o.name + "'");
  }
};

// One replay attempt on one EventQueue: every op's end is an event of that queue (tag = gid), and an
// asynchronous communication model's network runs on the same queue, so there is one clock.
class Replayer final : public EventTarget {
 public:
  Replayer(const OpGraph& g, const topo::Topology& topo, const models::ComputeModel& compute, CommModel& comm,
           EventQueue& q, const ReplayOptions& opt)
      : g_(g), topo_(topo), compute_(compute), comm_(comm), q_(q), pending_(g.indeg),
        contention_(opt.comm_sm_contention), start_delay_(opt.comm_start_delay),
        track_(opt.comm_sm_contention || opt.comm_start_delay), launcher_(*this) {
    const std::size_t N = g.size();
    const std::size_t R = g.trace.ranks.size();
    if (track_) {
      ver_.assign(N, 0);
      running_.resize(R);
    }
    if (contention_) {
      work_s_.assign(N, 0);
      mark_s_.assign(N, 0);
      alone_s_.assign(N, 0);
      slowed_.assign(N, 0);
      held_.assign(N, 0);
      ctas_.assign(R, 0);
      applies_.assign(R, 0);
      for (std::size_t r = 0; r < R; ++r)
        applies_[r] =
            opt.comm_sm_contention_all_gpus || models::comm_sm_contention_measured(gpu_model(g.trace.ranks[r].rank));
      comm_hosts_.assign(g.trace.comms.size(), -1);
    }
    if (start_delay_) {
      delays_.assign(R, 0);
      delay_applies_.assign(R, 0);
      for (std::size_t r = 0; r < R; ++r)
        delay_applies_[r] =
            opt.comm_start_delay_all_gpus || models::comm_start_delay_measured(gpu_model(g.trace.ranks[r].rank));
    }
    ready_s_.assign(N, -1);
    start_s_.assign(N, -1);
    end_s_.assign(N, -1);
    algo_.resize(N);
    proto_.resize(N);
    calls_.assign(g.trace.ranks.size(), std::vector<std::uint32_t>(g.trace.comms.size(), 0));
  }

  // Starts the ops without predecessors at time 0 and runs the queue dry.
  void run() {
    for (std::uint32_t g = 0; g < g_.size(); ++g)
      if (pending_[g] == 0) make_ready(g);
    q_.run();
  }

  // ---- deadlock detection: ops left when no event is: what waits on what ----
  void check_complete() const;

  // ---- accounting and result assembly ----
  double iteration_s() const {
    double T = 0;
    for (double e : end_s_) T = std::max(T, e);
    return T;
  }
  Breakdown breakdown(double T) const;
  std::vector<double> rank_end_s() const {
    std::vector<double> out(g_.trace.ranks.size(), 0.0);
    for (std::uint32_t g = 0; g < g_.size(); ++g) out[g_.owner[g]] = std::max(out[g_.owner[g]], end_s_[g]);
    return out;
  }
  void record_ops(const topo::Topology& topo, const ReplayOptions& opt, RunResult& res) const;
  std::uint32_t done() const { return done_; }

  // Time communication kernels waited for a running compute kernel to leave the SMs, summed over simulated ranks.
  double start_delay_s() const {
    double s = 0;
    for (double d : delays_) s += d;
    return s;
  }

  // Compute time the communication kernels beside it added, summed over simulated ranks' compute ops.
  double stretch_s() const {
    double s = 0;
    if (contention_)
      for (std::uint32_t g = 0; g < g_.size(); ++g)
        if (g_.op(g).kind == OpKind::Compute && slowed_[g]) s += (end_s_[g] - start_s_[g]) - alone_s_[g];
    return s;
  }

  // ---- dependency release: op `tag` (low 32 bits; the high ones: a re-timed compute op's version) ended ----
  void on_event(EventQueue& q, std::uint64_t tag) override {
    const auto gid = static_cast<std::uint32_t>(tag);
    if (track_) {
      if (static_cast<std::uint32_t>(tag >> 32) != ver_[gid]) return;  // a compute end moved by a re-timing
      const std::size_t r = g_.owner[gid];
      if (g_.op(gid).kind == OpKind::Compute) {
        auto& run = running_[r];
        run.erase(std::find(run.begin(), run.end(), gid));
      } else if (contention_ && held_[gid] > 0) {
        hold(r, -held_[gid]);
        held_[gid] = 0;
      }
    }
    ++done_;
    for (std::uint32_t i = g_.succ_off[gid]; i < g_.succ_off[gid + 1]; ++i) {
      const std::uint32_t s = g_.succ[i];
      if (--pending_[s] == 0) make_ready(s);
    }
    (void)q;
  }

 private:
  void finish_at(std::uint32_t g, double s, double e) {
    start_s_[g] = s;
    end_s_[g] = e;
    q_.schedule(e, this, g);
  }
  void set_timing(std::uint32_t g, const CommTiming& ct) {
    algo_[g] = ct.algorithm;
    proto_[g] = ct.protocol;
  }

  // An op whose predecessors all ended starts now: compute runs, communication waits for its partners.
  void make_ready(std::uint32_t g) {
    const double t = q_.now();
    ready_s_[g] = t;
    const Op& op = g_.op(g);
    switch (op.kind) {
      case OpKind::Compute: {
        const double d = op.duration_s >= 0 ? op.duration_s : compute_.time_s(op.op_class, op.flops, op.mem_bytes);
        if (!track_) {
          finish_at(g, t, t + d);
          break;
        }
        const std::size_t r = g_.owner[g];
        if (!contention_) {
          running_[r].push_back(g);
          finish_at(g, t, t + d);
          break;
        }
        alone_s_[g] = work_s_[g] = d;
        mark_s_[g] = t;
        running_[r].push_back(g);
        slowed_[g] = ctas_[r] > 0;
        finish_at(g, t, slowed_[g] ? t + d * models::comm_sm_slowdown(ctas_[r]) : t + d);
        break;
      }
      case OpKind::Collective:
      case OpKind::Send:
      case OpKind::Recv:
        if (start_delay_ && delay_applies_[g_.owner[g]] && op.sm_ctas != 0) {
          // Launched now; whether a compute kernel holds the SMs is decided after everything else that
          // happens at this instant (a compute op made ready by the same end event is already running: its
          // stream had the kernel queued, models/compute_contention.hpp "Start delay").
          q_.schedule(t, &launcher_, g);
          break;
        }
        arrive(g);
        break;
    }
  }
  void arrive(std::uint32_t g) {
    const Op& op = g_.op(g);
    if (op.kind == OpKind::Collective) arrive_collective(g, op);
    else arrive_p2p(g, op);
  }

  // ---- start delay (models/compute_contention.hpp): a communication kernel launched while a compute op of
  // its rank runs gets the SMs when that op's running kernel leaves them; several compute ops running (other
  // compute streams): the first to leave ----
  void launch(std::uint32_t g) {
    const double t = q_.now();
    const std::size_t r = g_.owner[g];
    const double slow = contention_ && applies_[r] ? models::comm_sm_slowdown(ctas_[r]) : 1.0;
    double d = -1;
    for (std::uint32_t c : running_[r]) {
      const double w = g_.op(c).kernel_wait_s;
      if (w < 0) continue;  // kernels not known: no delay
      const double dc = models::comm_start_delay_s(w, slow, end_s_[c] - t);
      d = d < 0 ? dc : std::min(d, dc);
    }
    if (!(d > 0)) {
      arrive(g);
      return;
    }
    delays_[r] += d;
    q_.schedule(t + d, &arrival_, g);
  }
  // Event targets of the two steps: `launcher_` (the launch instant, after the other events of that
  // instant) and `arrival_` (the end of the start delay).
  struct Launcher final : EventTarget {
    Replayer& rp;
    explicit Launcher(Replayer& r) : rp(r) {}
    void on_event(EventQueue&, std::uint64_t tag) override { rp.launch(static_cast<std::uint32_t>(tag)); }
  };
  struct Arrival final : EventTarget {
    Replayer& rp;
    explicit Arrival(Replayer& r) : rp(r) {}
    void on_event(EventQueue&, std::uint64_t tag) override { rp.arrive(static_cast<std::uint32_t>(tag)); }
  };

  // ---- collective rendezvous: the k-th call on a communicator starts when every simulated member reached it ----
  void arrive_collective(std::uint32_t g, const Op& op) {
    const std::size_t r = g_.owner[g];
    if (contention_) {
      held_[g] = collective_ctas(op);
      hold(r, held_[g]);
    }
    const std::uint32_t k = calls_[r][op.comm]++;
    auto it = colls_.try_emplace({op.comm, k}).first;
    it->second.push_back(g);
    if (static_cast<int>(it->second.size()) < g_.sim_members[op.comm]) return;
    std::vector<std::uint32_t> gids = std::move(it->second);
    colls_.erase(it);
    dispatch_collective(op, std::move(gids));
  }

  // ---- send/recv matching by (src, dst, tag), FIFO ----
  void arrive_p2p(std::uint32_t g, const Op& op) {
    const std::int32_t me = g_.trace.ranks[g_.owner[g]].rank;
    const bool send = op.kind == OpKind::Send;
    auto key = send ? std::make_tuple(me, op.peer, op.tag) : std::make_tuple(op.peer, me, op.tag);
    auto& qs = p2p_[key];
    auto& mine = send ? qs.first : qs.second;
    auto& other = send ? qs.second : qs.first;
    if (other.empty()) {
      mine.push_back(g);
      return;
    }
    const std::uint32_t o = other.front();
    other.pop_front();
    const std::uint32_t sg = send ? g : o;
    dispatch_p2p(g, o, std::get<0>(key), std::get<1>(key), g_.op(sg).bytes);
  }

  // ---- communication-model dispatch: priced now (synchronous model) or started on the shared network ----
  void dispatch_collective(const Op& op, std::vector<std::uint32_t> gids) {
    const double t = q_.now();
    const auto& comm = g_.trace.comms[op.comm];
    if (comm_.asynchronous()) {
      comm_.start_collective(comm, op.coll, op.bytes, op.algorithm,
                             [this, gids = std::move(gids), t](double end, const CommTiming& ct) {
                               for (auto m : gids) {
                                 finish_at(m, t, end);
                                 set_timing(m, ct);
                               }
                             });
      return;
    }
    const CommTiming ct = comm_.collective(comm, op.coll, op.bytes, op.algorithm);
    for (auto m : gids) {
      finish_at(m, t, t + ct.duration_s);
      set_timing(m, ct);
    }
  }
  void dispatch_p2p(std::uint32_t g, std::uint32_t o, std::int32_t src, std::int32_t dst, double bytes) {
    const double t = q_.now();
    if (contention_)
      for (std::uint32_t x : {g, o}) {
        const Op& xo = g_.op(x);
        held_[x] = xo.sm_ctas >= 0 ? xo.sm_ctas
                                   : models::nccl_p2p_ctas(gpu_model(src), host_of(src) == host_of(dst), bytes);
        hold(g_.owner[x], held_[x]);
      }
    auto both = [this, g, o, t](double end, const CommTiming& ct) {
      finish_at(g, t, end);
      finish_at(o, t, end);
      set_timing(g, ct);
      set_timing(o, ct);
    };
    if (comm_.asynchronous()) {
      comm_.start_p2p(src, dst, bytes, both);
      return;
    }
    const CommTiming ct = comm_.p2p(src, dst, bytes);
    both(t + ct.duration_s, ct);
  }

  // ---- compute beside communication kernels (models/compute_contention.hpp) ----
  int host_of(std::int32_t rank) const { return topo_.node(topo_.gpus()[rank]).host; }
  const std::string& gpu_model(std::int32_t rank) const { return topo_.node(topo_.gpus()[rank]).model; }
  // CTAs a collective's kernel holds: the op's sm_ctas, else NCCL's channels for the algorithm and protocol
  // the communication model runs it with.
  int collective_ctas(const Op& op) {
    if (op.sm_ctas >= 0) return op.sm_ctas;
    const auto& comm = g_.trace.comms[op.comm];
    const CommTiming plan = comm_.collective_plan(comm, op.coll, op.bytes, op.algorithm);
    if (plan.algorithm == "none" || comm.ranks.size() <= 1 || !(op.bytes > 0)) return 0;
    int& hosts = comm_hosts_[op.comm];
    if (hosts < 0) {
      std::vector<int> hs;
      for (auto m : comm.ranks) hs.push_back(host_of(m));
      std::sort(hs.begin(), hs.end());
      hosts = static_cast<int>(std::unique(hs.begin(), hs.end()) - hs.begin());
    }
    const std::string& model = gpu_model(comm.ranks.front());
    if (op.coll == workloads::CollOp::AllToAll || op.coll == workloads::CollOp::AllToAllv)
      return models::nccl_all_to_all_ctas(model, hosts);
    models::Algorithm a = models::Algorithm::Ring;
    models::Protocol p = models::Protocol::Simple;
    if (!models::parse_algorithm(plan.algorithm.empty() ? op.algorithm : plan.algorithm, a)) a = models::Algorithm::Ring;
    if (!models::parse_protocol(plan.protocol, p)) p = models::Protocol::Simple;
    return models::nccl_collective_ctas(model, hosts, static_cast<int>(comm.ranks.size()), a, p, op.bytes);
  }
  // Rank r's communication kernels take `delta` more CTAs now: its running compute ops are re-timed (the
  // work each did so far at the old rate, the rest at the new one; their old end events become stale).
  void hold(std::size_t r, int delta) {
    if (delta == 0 || !applies_[r]) return;
    const double t = q_.now();
    const double s_old = models::comm_sm_slowdown(ctas_[r]);
    ctas_[r] += delta;
    const double s_new = models::comm_sm_slowdown(ctas_[r]);
    if (s_new == s_old) return;
    for (std::uint32_t c : running_[r]) {
      work_s_[c] = std::max(0.0, work_s_[c] - (t - mark_s_[c]) / s_old);
      mark_s_[c] = t;
      slowed_[c] = 1;
      end_s_[c] = t + work_s_[c] * s_new;
      q_.schedule(end_s_[c], this, static_cast<std::uint64_t>(c) | (static_cast<std::uint64_t>(++ver_[c]) << 32));
    }
  }

  const OpGraph& g_;
  const topo::Topology& topo_;
  const models::ComputeModel& compute_;
  CommModel& comm_;
  EventQueue& q_;
  std::vector<std::uint32_t> pending_;
  std::vector<double> ready_s_, start_s_, end_s_;
  std::vector<std::string> algo_, proto_;
  std::vector<std::vector<std::uint32_t>> calls_;  // per simulated rank and communicator: calls made
  std::map<std::pair<std::int32_t, std::uint32_t>, std::vector<std::uint32_t>> colls_;  // (comm, k) -> arrived
  std::map<std::tuple<std::int32_t, std::int32_t, std::int64_t>,
           std::pair<std::deque<std::uint32_t>, std::deque<std::uint32_t>>> p2p_;  // (src, dst, tag) -> sends, recvs
  std::uint32_t done_ = 0;
  // Compute contention (empty when off): per op, compute work left (seconds alone) at mark_s_, its time
  // alone, the version of its end event, the CTAs a communication op holds; per simulated rank, the CTAs
  // held and the compute ops running; per communicator, its host count (-1: not counted yet).
  bool contention_ = false;
  bool start_delay_ = false;
  bool track_ = false;  // compute ops running per rank, versioned compute ends (contention or start delay)
  Launcher launcher_;
  Arrival arrival_{*this};
  std::vector<double> delays_;        // per simulated rank: start delay summed
  std::vector<char> delay_applies_;  // per simulated rank: its GPU takes the start delay
  std::vector<double> work_s_, mark_s_, alone_s_;
  std::vector<std::uint32_t> ver_;
  std::vector<char> slowed_;  // ran at least part of the time beside communication CTAs
  std::vector<char> applies_;  // per simulated rank: its GPU takes the table (comm_sm_contention_all_gpus or measured)
  std::vector<int> held_, ctas_, comm_hosts_;
  std::vector<std::vector<std::uint32_t>> running_;
};

void Replayer::check_complete() const {
  if (done_ == g_.size()) return;
  const Trace& trace = g_.trace;
  std::string msg;
  int shown = 0;
  for (const auto& [key, gids] : colls_) {
    if (shown >= 4) break;
    const auto& c = trace.comms[key.first];
    std::string missing;
    std::vector<std::int32_t> arrived;
    for (auto g : gids) arrived.push_back(trace.ranks[g_.owner[g]].rank);
    int listed = 0;
    for (auto m : c.ranks)
      if (g_.rank_index.count(m) && std::find(arrived.begin(), arrived.end(), m) == arrived.end() && listed++ < 8)
        missing += (missing.empty() ? "" : ",") + std::to_string(m);
    msg += (shown++ ? "; " : "") + std::string("collective ") + workloads::to_string(g_.op(gids[0]).coll) + " #" +
           std::to_string(key.second) + " on '" + c.name + "' reached by " + g_.label(gids[0]) +
           (gids.size() > 1 ? " and " + std::to_string(gids.size() - 1) + " more" : "") + " but not by rank(s) " +
           missing;
  }
  for (const auto& [key, qs] : p2p_) {
    for (int side = 0; side < 2 && shown < 8; ++side)
      for (auto g : side == 0 ? qs.first : qs.second) {
        if (shown >= 8) break;
        msg += (shown++ ? "; " : "") + std::string(side == 0 ? "send " : "recv ") + "from rank " +
               std::to_string(std::get<0>(key)) + " to rank " + std::to_string(std::get<1>(key)) + " tag " +
               std::to_string(std::get<2>(key)) + " (" + g_.label(g) + ") has no matching " +
               (side == 0 ? "recv" : "send") + " ready";
      }
  }
  if (msg.empty()) msg = "ops wait on each other (dependency cycle)";
  throw ReplayDeadlock("replay of '" + trace.name + "'", "deadlock after " + std::to_string(done_) + " of " +
                                                             std::to_string(g_.size()) + " ops: " + msg);
}

// Per simulated rank, the time from 0 to T split into compute (any compute op running), exposed
// communication by category (first category in kCommCats order among those running, when no compute runs),
// bubble (waiting on a p2p partner, or any other idle time in a pipelined trace) and idle; then averaged.
Breakdown Replayer::breakdown(double T) const {
  const std::size_t R = g_.trace.ranks.size();
  bool has_pp = false;
  for (std::uint32_t g = 0; g < g_.size() && !has_pp; ++g) has_pp = g_.op(g).category == "pp";
  std::array<double, kCommCats.size()> exposed{};
  double compute_sum = 0, bubble_sum = 0, idle_sum = 0;
  for (std::size_t r = 0; r < R; ++r) {
    // (time, kind, delta): kind 0 compute, 1..kCommCats.size() comm category, kWait p2p wait.
    std::vector<std::tuple<double, int, int>> pts;
    for (std::uint32_t g = g_.base[r]; g < g_.base[r + 1]; ++g) {
      const Op& op = g_.op(g);
      if (op.kind == OpKind::Compute) {
        if (end_s_[g] > start_s_[g]) {
          pts.emplace_back(start_s_[g], 0, +1);
          pts.emplace_back(end_s_[g], 0, -1);
        }
        continue;
      }
      const int k = 1 + cat_index(op.category);
      if (end_s_[g] > start_s_[g]) {
        pts.emplace_back(start_s_[g], k, +1);
        pts.emplace_back(end_s_[g], k, -1);
      }
      if ((op.kind == OpKind::Send || op.kind == OpKind::Recv) && start_s_[g] > ready_s_[g]) {
        pts.emplace_back(ready_s_[g], kWait, +1);
        pts.emplace_back(start_s_[g], kWait, -1);
      }
    }
    pts.emplace_back(T, -1, 0);
    std::sort(pts.begin(), pts.end());
    std::array<int, kWait + 1> cnt{};
    double prev = 0;
    for (const auto& [t, k, d] : pts) {
      const double dt = t - prev;
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
  Breakdown b;
  b.compute_s = compute_sum / rn;
  for (std::size_t i = 0; i < kCommCats.size(); ++i)
    if (exposed[i] > 0) b.exposed_comm_s[kCommCats[i]] = exposed[i] / rn;
  b.bubble_s = bubble_sum / rn;
  b.idle_s = idle_sum / rn;
  return b;
}

void Replayer::record_ops(const topo::Topology& topo, const ReplayOptions& opt, RunResult& res) const {
  const std::uint32_t N = g_.size();
  const std::size_t n = std::min<std::size_t>(N, opt.max_op_records);
  res.ops.reserve(n);
  for (std::uint32_t g = 0; g < n; ++g) {
    const Op& op = g_.op(g);
    const auto& rt = g_.trace.ranks[g_.owner[g]];
    OpRecord rec;
    rec.rank = rt.rank;
    rec.host = rt.rank < static_cast<std::int32_t>(topo.gpus().size()) ? topo.node(topo.gpus()[rt.rank]).host : -1;
    rec.stream = rt.streams[op.stream];
    rec.name = op.name;
    rec.kind = workloads::to_string(op.kind);
    rec.category = op.category;
    rec.start_s = start_s_[g];
    rec.end_s = end_s_[g];
    rec.bytes = op.kind == OpKind::Compute ? 0 : op.bytes;
    rec.algorithm = algo_[g];
    rec.protocol = proto_[g];
    rec.flops = op.flops;
    res.ops.push_back(std::move(rec));
  }
  if (n < N) res.notes.push_back("op records capped at " + std::to_string(n) + " of " + std::to_string(N));
}

// Throughput figures from the trace's metadata and the iteration time.
void fill_throughput(const OpGraph& g, double T, RunResult& res) {
  const Trace& trace = g.trace;
  auto meta = [&](const char* k) {
    auto it = trace.metadata.find(k);
    return it == trace.metadata.end() ? 0.0 : it->second;
  };
  if (!(T > 0)) return;
  const double rn = trace.ranks.empty() ? 1.0 : static_cast<double>(trace.ranks.size());
  res.samples_per_s = meta("samples_per_iteration") / T;
  res.samples_known = trace.metadata.count("samples_per_iteration") > 0;
  res.tokens_per_s = meta("tokens_per_iteration") / T;
  double flops = meta("model_flops_per_iteration");
  if (flops <= 0) {
    double sim_flops = 0;
    for (std::uint32_t i = 0; i < g.size(); ++i) sim_flops += g.op(i).flops;
    flops = trace.ranks.empty() ? 0 : sim_flops / rn * trace.world_size;
    res.notes.push_back("tflops_per_gpu from the trace's compute-op FLOPs (no model_flops_per_iteration)");
  }
  res.tflops_per_gpu = flops / trace.world_size / T / 1e12;
  res.flops_known = flops > 0;
  // MFU: achieved model FLOP/s over the dense (no sparsity) tensor-core peak the generator names for the
  // precision in use; no peak, no MFU.
  const double peak = meta("peak_dense_flops_per_gpu");
  if (peak > 0) res.mfu = res.tflops_per_gpu * 1e12 / peak;
}

}  // namespace

RunResult replay(const Trace& trace, const topo::Topology& topo, const models::ComputeModel& compute, CommModel& comm,
                 const ReplayOptions& opt) {
  if (trace.world_size > static_cast<std::int32_t>(topo.gpus().size()))
    throw InputError("trace '" + trace.name + "'", "needs " + std::to_string(trace.world_size) +
                                                       " GPUs but the topology has " + std::to_string(topo.gpus().size()));
  const OpGraph graph(trace);
  comm.prepare(trace);
  // An asynchronous model may find an assumption wrong mid-run (ReplayRestart): run again from time 0 on a
  // fresh queue. The model marks what it learnt before throwing, so this ends (at most once per communicator).
  std::size_t restarts = 0;
  for (;;) {
    EventQueue q;
    comm.bind(q);
    Replayer rp(graph, topo, compute, comm, q, opt);
    try {
      rp.run();
      comm.end_of_replay();
    } catch (const ReplayRestart&) {
      ++restarts;
      continue;
    }
    rp.check_complete();

    RunResult res;
    res.workload = trace.name;
    res.workload_params = trace.params;
    res.gpus = trace.world_size;
    res.comm_model = comm.name();
    const double T = rp.iteration_s();
    res.iteration_s = T;
    res.breakdown = rp.breakdown(T);
    res.rank_end_s = rp.rank_end_s();
    fill_throughput(graph, T, res);
    for (const auto& [k, v] : trace.metadata) res.metrics[k] = v;
    // The all-to-all part of the imbalance cost beside the expert-compute part (replay/a2a_imbalance.hpp).
    if (const A2aImbalance imb = all_to_all_imbalance(trace, comm); imb.calls > 0)
      res.metrics["moe.imbalance_all_to_all_s"] = imb.seconds;
    res.metrics["replay.ops_simulated"] = graph.size();
    res.metrics["replay.ranks_simulated"] = static_cast<double>(trace.ranks.size());
    res.metrics["replay.events"] = static_cast<double>(rp.done());
    if (restarts) res.metrics["replay.restarts"] = static_cast<double>(restarts);
    if (opt.comm_sm_contention)
      res.metrics["replay.comm_sm_contention_s"] =
          rp.stretch_s() / (trace.ranks.empty() ? 1.0 : static_cast<double>(trace.ranks.size()));
    if (opt.comm_start_delay)
      res.metrics["replay.comm_start_delay_s"] =
          rp.start_delay_s() / (trace.ranks.empty() ? 1.0 : static_cast<double>(trace.ranks.size()));
    // The trace's notes first, then the replay's (appended, so the TFLOP/s note above is kept).
    res.notes.insert(res.notes.begin(), trace.notes.begin(), trace.notes.end());
    res.notes.push_back(comm.describe());
    res.notes.push_back(opt.comm_sm_contention
                            ? (opt.comm_sm_contention_all_gpus
                                   ? "compute beside communication kernels slowed by the SMs their CTAs hold (H100 "
                                     "measurement applied to every GPU, models/compute_contention.hpp; comm_sm_contention)"
                                   : "compute beside communication kernels slowed by the SMs their CTAs hold on H100 / "
                                     "H200 (measured there; other GPUs unchanged unless \"comm_sm_contention\": true; "
                                     "models/compute_contention.hpp)")
                            : "compute has the whole GPU beside communication kernels (comm_sm_contention off)");
    if (opt.comm_start_delay)
      res.notes.push_back(opt.comm_start_delay_all_gpus
                              ? "a communication kernel launched while a compute kernel runs starts when it leaves the "
                                "SMs (H100 measurement applied to every GPU; models/compute_contention.hpp; "
                                "comm_start_delay)"
                              : "a communication kernel launched while a compute kernel runs starts when it leaves the "
                                "SMs on H100 / H200 (measured there; models/compute_contention.hpp; comm_start_delay)");
    if (trace.ranks.size() < static_cast<std::size_t>(trace.world_size))
      res.notes.push_back("simulated " + std::to_string(trace.ranks.size()) + " of " +
                          std::to_string(trace.world_size) +
                          " ranks; the others are symmetric stand-ins (breakdown averaged over simulated ranks)");
    if (opt.record_ops) rp.record_ops(topo, opt, res);
    return res;
  }
}

}  // namespace fabricsim::sim
