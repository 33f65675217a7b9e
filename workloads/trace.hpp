#pragma once
// The workload trace: a per-rank DAG of operations (compute, collective, send, recv) with dependencies and
// streams. JSON form documented in docs/workloads.md, JSON Schema in docs/trace.schema.json.
//
// Symmetry: a trace may list only some ranks ("simulated ranks"); `world_size` is the number of GPUs of the
// job. Communicators always list all their member ranks (global ranks in [0, world_size)). A collective
// starts when every *simulated* member has reached it; members that are not simulated are stand-ins
// assumed to behave exactly like a simulated rank (the generator guarantees it and records how in
// `notes`). `mirrors` on a communicator names how many identical copies of it (other groups made of
// non-simulated ranks) run the same collectives at the same time, so their traffic can be modelled.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/compute.hpp"
#include "sim/base/json_reader.hpp"

namespace fabricsim::workloads {

// The most ranks an imported workload (ASTRA-sim/SimAI text, Chakra) may have: 2^20, as for the generators'
// worlds (kMaxDataParallelWorld). Checked before anything is sized by the rank count (docs/reliability.md).
constexpr std::int64_t kMaxImportedWorld = 1 << 20;

enum class OpKind : std::uint8_t { Compute, Collective, Send, Recv };
const char* to_string(OpKind k);

// Collective operations (NCCL names).
enum class CollOp : std::uint8_t { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, AllToAllv };
const char* to_string(CollOp c);
bool parse_coll_op(const std::string& s, CollOp& out);  // "all_reduce", "all_gather", "reduce_scatter",
                                                        // "all_to_all", "broadcast", "reduce", "all_to_allv"

struct Op {
  OpKind kind = OpKind::Compute;
  std::uint16_t stream = 0;     // index into RankTrace::streams
  std::string name;
  std::string category;         // breakdown bucket: "compute", "tp", "pp", "dp", "all_to_all", "ep", "other"
  std::vector<std::uint32_t> deps;  // indices of ops of the same rank that must finish first
  // Compute: either duration_s >= 0 (given), or flops/bytes/op_class evaluated by the compute model.
  double duration_s = -1;       // < 0: use the roofline
  double flops = 0;             // FLOPs (also recorded for statistics when duration is given)
  double mem_bytes = 0;         // HBM bytes moved (roofline)
  models::OpClass op_class = models::OpClass::Gemm;
  // Compute: how long a communication kernel launched while this op runs waits for its running kernel to
  // leave the SMs (models::comm_start_delay_s; at most the time left in the op): for an op of kernels of
  // durations d_i, the expectation for a launch at a random instant, sum d_i^2 / (2 sum d_i)
  // (models::kernel_residual_s); for one kernel, its duration (the wait is then the time left in it).
  // < 0: not known (no delay: generators whose ops stand for work of unknown kernels, traces without it).
  double kernel_wait_s = -1;
  // Collective / send / recv.
  CollOp coll = CollOp::AllReduce;
  std::int32_t comm = -1;       // index into Trace::comms (collectives)
  std::string algorithm;        // optional forced algorithm ("ring", "tree", ...), empty = tuner
  std::int32_t peer = -1;       // send: destination rank; recv: source rank
  std::int64_t tag = 0;
  double bytes = 0;             // collective: NCCL count*sizeof(type) (all_gather: output, reduce_scatter:
                                // input); send/recv: message bytes
  // Collective / send / recv: the CTAs (SMs) its kernel holds while it runs beside compute, which the replay
  // slows down by that much (models/compute_contention.hpp). -1: NCCL's channel count for the call; 0: none
  // (a copy-engine transfer, or communication whose SM cost the compute ops already carry, e.g. the gpt
  // generator's tp_comm_overlap userbuffers collectives).
  std::int32_t sm_ctas = -1;
};

struct RankTrace {
  std::int32_t rank = 0;
  std::vector<std::string> streams{"compute"};  // stream 0 is the compute stream by convention
  std::vector<Op> ops;                           // program order; a stream runs its ops in this order
};

struct Communicator {
  std::string name;
  std::vector<std::int32_t> ranks;  // global ranks, in NCCL rank order
  std::int32_t mirrors = 0;         // identical concurrent copies on non-simulated ranks (see above),
                                    // co-located with this group (sharing its hosts' network interfaces)
  std::int32_t mirror_stride = 1;   // copy k (1..mirrors) has ranks shifted by k * mirror_stride
  std::string category;             // default category of its collectives ("tp", "dp", ...)
  // all_to_allv on this communicator: rank i (index in `ranks`) sends bytes x a2a_matrix[i][j] to rank j
  // (`bytes` of the op is the mean send buffer per rank, so the entries of a uniform all_to_all are 1/n).
  // Empty: uniform. Mirror copies use the same matrix. MoE generators give each layer's dispatch and
  // combine their own communicator with the routing's matrix (a hot expert -> a heavy column).
  std::vector<std::vector<double>> a2a_matrix;
  // The matrix a uniform router would give this call on the same ranks (same shape as a2a_matrix; empty:
  // not known): what the routing-skew metric (moe.imbalance_all_to_all_s, replay/a2a_imbalance.hpp) prices
  // the call against. The gpt generator sets it for its flex dispatch, whose entries depend on the NVLink
  // domains as well as on the router; without it the metric fits a balanced matrix to a2a_matrix.
  std::vector<std::vector<double>> a2a_uniform;
  // Cluster runs only (workloads/cluster.hpp; not read from or written to trace files): the groups of
  // stand-in (non-simulated) ranks that run this same call at the same time elsewhere in the cluster,
  // explicit global ranks in NCCL order, besides the `mirrors`. The engine-backed models put their traffic
  // on the fabric with this group's.
  std::vector<std::vector<std::int32_t>> stand_ins;
  // NCCL_COLLNET_ENABLE when NCCL created it: whether its collectives may use NCCL's SHARP algorithms (CollNet,
  // NVLS across hosts) where the fabric has SHARP switches. Trace files say "collnet_enable": false only
  // (default true). The gpt generator clears it but on Megatron's use_sharp data-parallel group.
  bool collnet_enable = true;
};

struct Trace {
  std::string name;
  std::int32_t world_size = 0;
  std::vector<RankTrace> ranks;                 // simulated ranks, sorted by rank
  std::vector<Communicator> comms;
  std::map<std::string, double> metadata;       // e.g. "samples_per_iteration", "tokens_per_iteration",
                                                // "model_flops_per_iteration", "memory_per_gpu_bytes.max"
  std::map<std::string, std::string> params;    // generator parameters (strings, for reports)
  std::vector<std::string> notes;               // modelling notes (what is simulated)
  std::string gpu;                              // optional GPU model for roofline ops ("" = topology's)

  std::size_t num_ops() const;
};

// Strict parsing: unknown keys, bad types, out-of-range deps/streams/comm indices, ranks outside
// [0, world_size) and duplicate ranks are InputErrors naming `file` and the JSON path.
Trace trace_from_json(const Json& doc, const std::string& file);
Trace load_trace_file(const std::string& path);
Json trace_to_json(const Trace& t);

// Where an op came from in the importer's input ("file: node 17"), for errors; empty = not known.
using OpLocator = std::function<std::string(std::int32_t rank, std::size_t op)>;

// Structural checks that do not need a simulation: dependency cycles (through deps and stream order, named
// with the rank), sends without a matching recv and vice versa (by (src, dst, tag), counted), the k-th send
// and k-th recv of one (src, dst, tag) moving different byte counts, collectives whose simulated members do
// not all call it the same number of times, and the k-th call of a communicator differing between members in
// operation or bytes. Throws InputError naming the ops involved (both sides of a mismatch); located at
// `where`, or at the first op named when `locate` is given.
void check_trace(const Trace& t, const std::string& where, const OpLocator& locate = {});

}  // namespace fabricsim::workloads
