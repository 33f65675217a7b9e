#pragma once
// What a benchmark loop measures. nccl-tests (src/common.cu BenchTime, read at NVIDIA/nccl-tests 0b30de5 and
// later) issues `iters` operations back to back on each rank's stream, waits for its own stream, and prints
// (its wall time) / iters; with MPI only process 0 prints. That is one operation's latency only when each
// rank's operation waits for every other rank's (ring all_reduce, all_gather, reduce_scatter: the data goes
// all the way round). In a rooted pipeline (broadcast, reduce) consecutive operations overlap: rank 0 starts
// operation i+1 as soon as its part of operation i is done, so the printed time is close to the pipeline's
// period, not its latency (the ABCI 2.0 broadcast logs: 7.3 us per call at 4 and 8 GPUs in one node and at
// 32 GPUs on 4 nodes; tests/data/external/abci, docs/validation.md).
#include <cstddef>
#include <vector>

#include "models/collectives.hpp"
#include "models/schedule.hpp"
#include "topologies/routing.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::models {

// Operations whose consecutive calls overlap in a benchmark loop (rooted pipelines: broadcast, reduce). For the
// others a loop's per-call time is one call's time (docs/validation.md, "Back-to-back calls").
bool calls_overlap(Op op);

// Prepares a spec (algorithm and protocol chosen) for back_to_back: step fidelity (every GPU in the schedule)
// and NCCL's per-call channel count (nccl_call_channels over the spec's channels, default_channels when 0):
// each channel's ring reaches a
// GPU at its own position and the GPU's next call waits for the last of them, so the count sets the period.
void prepare_loop_spec(CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing);

// Back-to-back calls simulated per loop: 2 to fill the pipeline, the second half gives its period.
inline constexpr int kLoopCopies = 4;

// `copies` back-to-back instances of `s` as one schedule, the way a loop issues them on every GPU's stream.
// Copy i on GPU g starts with a launch, a zero-byte transfer g -> g costing s.fixed_latency_s, after every
// transfer of copy i-1 that touches g (g's kernel of copy i-1, which sends and receives on all its channels,
// has finished); each transfer of copy i waits for its own dependencies and for its sender's launch in copy
// i, not its receiver's: NCCL's sender writes into the receiver's connection buffer (NCCL_STEPS slots per
// channel, benchmark_loop.cpp kNcclSteps) and the receiver's kernel takes the data when it runs. Those
// slots are the flow control: a call that takes n slots on connection a -> b (its transfers' steps there, one
// chunk each) waits until b has sent on what it sent on that channel floor(NCCL_STEPS / n) calls earlier (at
// least one), so a fast first hop cannot run ahead of a slow one downstream, while calls of one slot run
// up to 8 calls ahead. fixed_latency_s of the result is 0 (each copy pays its own launch). Transfers that stand for
// others (replicas > 1) would hide GPUs, so `s` must have none (step or phase fidelity). Layout: copy i's
// launches come first, then its transfers; `copy_begin[i]` is the index of its first entry.
struct BackToBack {
  Schedule schedule;
  std::vector<std::size_t> copy_begin;  // copies + 1 entries; copy i is [copy_begin[i], copy_begin[i+1])
  std::vector<topo::NodeId> gpus;       // the GPUs the schedule touches, in node-id order
};
BackToBack back_to_back(const Schedule& s, int copies, const topo::Topology& t);

// Finish time of GPU `gpu`'s part of each copy (its last transfer or, with none, its launch), from the
// per-transfer finish times of a run of `b.schedule`; with gpu = topo::kNoNode, the latest over all GPUs
// (what a benchmark that reports its slowest rank sees, like fabricsim-nccl-bench).
std::vector<double> copy_finish_s(const BackToBack& b, const std::vector<double>& finish_s, topo::NodeId gpu);

// The loop's steady-state period: the largest mean spacing, over the GPUs, of their finish times in the second
// half of the copies (at least 2). Downstream of the slowest hop calls arrive spaced by its period at once,
// while a GPU upstream of it only slows down once its slots fill, which a short simulated loop may not reach.
double steady_period_s(const BackToBack& b, const std::vector<double>& finish_s);

// The time nccl-tests prints for `iters` back-to-back calls: the printing rank's finish of the simulated copies,
// then `period_s` for each further call, divided by `iters`.
double loop_time_per_call_s(const std::vector<double>& copy_finish, double period_s, int iters);

}  // namespace fabricsim::models
