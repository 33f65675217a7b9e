#pragma once
// The replay executor: runs a workloads::Trace (per-rank DAG) in simulated time.
//  - An op becomes ready when all its deps and the previous op of its stream have finished (streams are
//    FIFO, like CUDA streams).
//  - Compute ops take their given duration, or the roofline time of the compute model.
//  - A collective starts when every simulated member of its communicator has reached its k-th call on that
//    communicator (NCCL semantics: a collective is a rendezvous); all members finish together.
//  - Send/recv match by (src, dst, tag) in FIFO order and run when both sides are ready.
//  - Everything runs on one sim::EventQueue (one clock): op ends are its events, and an asynchronous
//    communication model (CommModel::bind) runs its network on the same queue.
//  - The trace's ranks may be any subset of the topology's GPUs (rank r runs on Topology::gpus()[r]);
//    RunResult::rank_end_s gives each simulated rank's finish time.
//  - Compute beside communication (ReplayOptions::comm_sm_contention): while a rank's collectives and p2p
//    ops hold C CTAs in total (a collective from its arrival, since an NCCL kernel that waits for its peers
//    already holds its SMs; a send/recv from the time it is matched; each op's Op::sm_ctas, or NCCL's channel
//    count for the call: models/compute_contention.hpp), that rank's compute ops progress at
//    1 / comm_sm_slowdown(C), and are re-timed whenever C changes during them.
//  - Start delay (ReplayOptions::comm_start_delay): a collective or send/recv (with CTAs: Op::sm_ctas != 0)
//    that becomes ready while a compute op of its rank runs is launched behind that op's running kernel: it
//    reaches its rendezvous (and takes its CTAs) models::comm_start_delay_s later, from the op's
//    Op::kernel_wait_s (none when unknown: < 0).
//  - When no event is left but ops remain, the replay stops and throws ReplayDeadlock listing the ops that
//    wait (collectives not reached by all members, sends without a recv, ...). It never hangs.
#include <cstddef>
#include <string>

#include "models/compute.hpp"
#include "sim/base/error.hpp"
#include "replay/comm_model.hpp"
#include "replay/result.hpp"
#include "topologies/topology.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::sim {

class ReplayDeadlock : public InputError {
 public:
  using InputError::InputError;
};

struct ReplayOptions {
  bool record_ops = true;               // fill RunResult::ops
  std::size_t max_op_records = 4000000;  // cap (records beyond it are dropped, noted in RunResult::notes)
  // Compute slowed by the SMs of the communication kernels beside it (see above); false: compute always
  // has the whole GPU (scenario key "comm_sm_contention").
  bool comm_sm_contention = true;
  // With comm_sm_contention: apply the H100 table on every GPU (true) or only on the GPUs it was measured on
  // (false, the default: models::comm_sm_contention_measured).
  bool comm_sm_contention_all_gpus = false;
  // A collective or send/recv launched while a compute op of its rank runs starts when that op's running
  // kernel leaves the SMs (see above; scenario key "comm_start_delay"); false: it starts at once.
  bool comm_start_delay = true;
  // With comm_start_delay: on every GPU (true) or only where it was measured (false, the default:
  // models::comm_start_delay_measured).
  bool comm_start_delay_all_gpus = false;
};

// Runs the trace. `topo` supplies ranks' hosts; `compute` prices roofline ops; `comm` prices communication.
RunResult replay(const workloads::Trace& trace, const topo::Topology& topo, const models::ComputeModel& compute,
                 CommModel& comm, const ReplayOptions& opt = {});

}  // namespace fabricsim::sim
