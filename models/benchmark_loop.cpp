#include "models/benchmark_loop.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "models/tuner.hpp"
#include "sim/base/error.hpp"

namespace fabricsim::models {

namespace {
bool is_gpu(const topo::Topology& t, topo::NodeId n) { return t.node(n).kind == topo::NodeKind::Gpu; }
// Position of `n` in the sorted list `gpus`, or -1.
std::ptrdiff_t index_of(const std::vector<topo::NodeId>& gpus, topo::NodeId n) {
  auto it = std::lower_bound(gpus.begin(), gpus.end(), n);
  return it != gpus.end() && *it == n ? it - gpus.begin() : -1;
}
}  // namespace

bool calls_overlap(Op op) { return op == Op::Broadcast || op == Op::Reduce; }

void prepare_loop_spec(CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing) {
  if (!spec.algorithm || !spec.protocol)
    throw InputError(spec.where, "prepare_loop_spec needs the algorithm and protocol chosen");
  spec.fidelity = Fidelity::Step;
  spec.channels = nccl_call_channels(*spec.algorithm, *spec.protocol, static_cast<double>(spec.bytes),
                                     static_cast<int>(spec.communicator.size()),
                                     spec.channels > 0 ? spec.channels : default_channels(spec, t, routing));
}

BackToBack back_to_back(const Schedule& s, int copies, const topo::Topology& t) {
  if (copies < 1) throw InputError("back_to_back: copies", "expected >= 1, got " + std::to_string(copies));
  // The GPUs the schedule touches, in node-id order (deterministic layout).
  std::vector<topo::NodeId> gpus;
  for (const auto& tr : s.transfers) {
    if (tr.replicas != 1)
      throw InputError("back_to_back: schedule " + s.op + "/" + s.algorithm,
                       "a transfer standing for symmetric copies (replicas > 1); build it at step or phase fidelity");
    for (topo::NodeId n : {tr.src, tr.dst})
      if (is_gpu(t, n)) gpus.push_back(n);
  }
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  auto gpu_index = [&](topo::NodeId n) { return index_of(gpus, n); };

  BackToBack b;
  b.gpus = gpus;
  b.schedule.op = s.op;
  b.schedule.algorithm = s.algorithm;
  b.schedule.protocol = s.protocol;
  b.schedule.fidelity = s.fidelity;
  b.schedule.fixed_latency_s = 0;
  const std::size_t per_copy = gpus.size() + s.transfers.size();
  b.schedule.transfers.reserve(per_copy * static_cast<std::size_t>(copies));
  // touching[k]: transfers of the previous copy that touch GPU k (absolute indices).
  std::vector<std::vector<std::uint32_t>> touching(gpus.size()), next(gpus.size());
  // Slots one call takes on each connection (sender, receiver, channel): its transfers' steps (one chunk each).
  using Conn = std::tuple<topo::NodeId, topo::NodeId, std::int32_t>;
  std::map<Conn, std::uint32_t> slots;
  for (const auto& tr : s.transfers) slots[{tr.src, tr.dst, tr.channel}] += std::max<std::uint32_t>(1, tr.steps);
  // sent[c][(k, channel)]: transfers of copy c that GPU k sent on that channel (absolute indices).
  using SentMap = std::map<std::pair<std::ptrdiff_t, std::int32_t>, std::vector<std::uint32_t>>;
  std::vector<SentMap> sent(static_cast<std::size_t>(copies));
  for (int c = 0; c < copies; ++c) {
    const auto base = static_cast<std::uint32_t>(b.schedule.transfers.size());
    b.copy_begin.push_back(base);
    for (std::size_t k = 0; k < gpus.size(); ++k) {
      Transfer launch;
      launch.src = launch.dst = gpus[k];
      launch.step_latency_s = s.fixed_latency_s;
      launch.deps = touching[k];
      b.schedule.transfers.push_back(std::move(launch));
    }
    const auto first = base + static_cast<std::uint32_t>(gpus.size());
    for (auto& v : next) v.clear();
    for (std::size_t i = 0; i < s.transfers.size(); ++i) {
      Transfer tr = s.transfers[i];
      for (auto& d : tr.deps) d += first;
      // The sender's kernel must run; the receiver's need not: the data lands in its connection buffer
      // (NCCL_STEPS slots per channel) and its kernel takes it when it gets there. A switch (NVLS, SHARP) has
      // no kernel: its transfers wait for the GPU end's.
      const auto ks = gpu_index(tr.src), kd = gpu_index(tr.dst);
      const auto kernel = ks >= 0 ? ks : kd;
      if (kernel >= 0) tr.deps.push_back(base + static_cast<std::uint32_t>(kernel));
      // Flow control: NCCL_STEPS slots per connection, so a call of n slots may start while the receiver
      // still holds the data of the floor(NCCL_STEPS / n) calls before it (at least one); the slots free up
      // as the receiver passes that data on.
      const int ahead = std::max(1, kNcclSteps / static_cast<int>(slots.at({tr.src, tr.dst, tr.channel})));
      if (kd >= 0 && c >= ahead) {
        const auto& prev = sent[static_cast<std::size_t>(c - ahead)];
        if (auto it = prev.find({kd, tr.channel}); it != prev.end())
          tr.deps.insert(tr.deps.end(), it->second.begin(), it->second.end());
      }
      if (ks >= 0) sent[static_cast<std::size_t>(c)][{ks, tr.channel}].push_back(first + static_cast<std::uint32_t>(i));
      for (const auto k : {ks, kd})
        if (k >= 0) next[static_cast<std::size_t>(k)].push_back(first + static_cast<std::uint32_t>(i));
      std::sort(tr.deps.begin(), tr.deps.end());
      tr.deps.erase(std::unique(tr.deps.begin(), tr.deps.end()), tr.deps.end());
      b.schedule.transfers.push_back(std::move(tr));
    }
    for (std::size_t k = 0; k < gpus.size(); ++k) {
      // A GPU with no transfer in this copy is done at its launch.
      if (next[k].empty()) next[k].push_back(base + static_cast<std::uint32_t>(k));
      touching[k].swap(next[k]);
    }
  }
  b.copy_begin.push_back(b.schedule.transfers.size());
  return b;
}

namespace {
// finish[k][c]: when GPU b.gpus[k] finished its part of copy c (its last transfer, or its launch), one pass.
std::vector<std::vector<double>> finish_table(const BackToBack& b, const std::vector<double>& finish_s) {
  if (finish_s.size() != b.schedule.transfers.size())
    throw InputError("copy_finish_s", "expected one finish time per transfer of the back-to-back schedule");
  const std::size_t copies = b.copy_begin.size() - 1;
  std::vector<std::vector<double>> out(b.gpus.size(), std::vector<double>(copies, -1));
  for (std::size_t c = 0; c < copies; ++c)
    for (std::size_t i = b.copy_begin[c]; i < b.copy_begin[c + 1]; ++i)
      for (topo::NodeId n : {b.schedule.transfers[i].src, b.schedule.transfers[i].dst})
        if (const auto k = index_of(b.gpus, n); k >= 0) {
          double& f = out[static_cast<std::size_t>(k)][c];
          f = std::max(f, finish_s[i]);
        }
  return out;
}
}  // namespace

std::vector<double> copy_finish_s(const BackToBack& b, const std::vector<double>& finish_s, topo::NodeId gpu) {
  if (gpu == topo::kNoNode) {  // the slowest GPU: per copy, the last of them to finish
    const auto table = finish_table(b, finish_s);
    std::vector<double> out(b.copy_begin.size() - 1, 0);
    for (const auto& f : table)
      for (std::size_t c = 0; c < out.size(); ++c) out[c] = std::max(out[c], f[c]);
    return out;
  }
  const auto k = index_of(b.gpus, gpu);
  if (k < 0) throw InputError("copy_finish_s", "GPU node " + std::to_string(gpu) + " is not in the schedule");
  return finish_table(b, finish_s)[static_cast<std::size_t>(k)];
}

double steady_period_s(const BackToBack& b, const std::vector<double>& finish_s) {
  const std::size_t k = b.copy_begin.size() - 1;
  if (k < 2) throw InputError("steady_period_s", "expected at least 2 simulated copies");
  const std::size_t h = k / 2;
  double period = 0;
  for (const auto& f : finish_table(b, finish_s))
    period = std::max(period, (f[k - 1] - f[h - 1]) / static_cast<double>(k - h));
  return period;
}

double loop_time_per_call_s(const std::vector<double>& copy_finish, double period_s, int iters) {
  const std::size_t k = copy_finish.size();
  if (k < 1) throw InputError("loop_time_per_call_s", "expected at least 1 simulated copy");
  if (iters < 1) throw InputError("loop_time_per_call_s: iters", "expected >= 1");
  if (static_cast<std::size_t>(iters) <= k) return copy_finish[static_cast<std::size_t>(iters) - 1] / iters;
  return (copy_finish[k - 1] + static_cast<double>(static_cast<std::size_t>(iters) - k) * period_s) / iters;
}

}  // namespace fabricsim::models
