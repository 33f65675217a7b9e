#pragma once
// NCCL collectives as schedules: a CollectiveSpec (what to run, on which GPUs) becomes a models::Schedule
// (pure data: transfers with dependencies) that an engine runs. Algorithms follow NCCL's (ring with
// channels, double binary tree, NVLS, CollNet/SHARP, PAT, p2p all-to-all, send/recv) plus a hierarchical
// multi-node all_reduce. docs/collectives.md describes what each emits.
//
// `bytes` follows nccl-tests' "size" column exactly:
//   all_reduce      the buffer on every rank (input = output size)
//   all_gather      the gathered OUTPUT on every rank; each rank contributes bytes/n   (must divide by n)
//   reduce_scatter  the INPUT on every rank; each rank ends with bytes/n               (must divide by n)
//   broadcast       the buffer the root sends and every rank ends with
//   reduce          the buffer every rank contributes; the root ends with it
//   all_to_all      the send buffer of every rank; bytes/n go to each rank (itself included)  (must divide by n)
//   all_to_allv     as all_to_all, but `matrix[i][j]` bytes go from rank i to rank j when given
//   send_recv       what every rank sends to rank (r+1) mod n (and receives from (r-1) mod n)
//   scatter         the root's send buffer; bytes/n go to each rank (the root's own block stays)  (must divide by n)
// Every per-rank block must also be a whole number of elements (`elem_bytes`, 4 for float).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "models/schedule.hpp"
#include "topologies/routing.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::models {

// Buffer slots per connection: NCCL_STEPS, 8 in NVIDIA/nccl src/include/devcomm.h at v2.8.4-1 and
// src/include/device.h:24 at v2.26.2-1 and the current master (read 2026-11-22 and 2026-11-28).
inline constexpr int kNcclSteps = 8;

enum class Op { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, AllToAllv, SendRecv, Scatter };
enum class Fidelity { Auto, Step, Phase, Symmetry };

const char* to_string(Op op);
const char* to_string(Fidelity f);
bool parse_op(const std::string& s, Op& out);  // "all_reduce", "all_gather", ..., "send_recv" (also "sendrecv")
bool parse_fidelity(const std::string& s, Fidelity& out);
// Operations with a root rank (broadcast, reduce, scatter): nccl-tests prints their root, -1 for the others.
bool has_root(Op op);
constexpr std::array<Op, 9> kAllOps = {Op::AllReduce, Op::AllGather, Op::ReduceScatter, Op::Broadcast, Op::Reduce,
                                       Op::AllToAll,  Op::AllToAllv, Op::SendRecv,      Op::Scatter};

// The NCCL channel settings of the run being modelled (0 = unset): NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS and
// NCCL_MIN_CTAS, NCCL_MAX_CTAS (the communicator config's minCTAs/maxCTAs, which src/init.cc reads from the
// environment). tuner.hpp nccl_channels_with_env / nccl_nvls_channels_with_env apply them as NCCL does.
struct NcclChannelEnv {
  int min_nchannels = 0, max_nchannels = 0, min_ctas = 0, max_ctas = 0;
  bool any() const { return min_nchannels > 0 || max_nchannels > 0 || min_ctas > 0 || max_ctas > 0; }
};

struct CollectiveSpec {
  Op op = Op::AllReduce;
  std::uint64_t bytes = 0;                 // nccl-tests "size", see the table above
  std::vector<topo::NodeId> communicator;  // GPU node ids in rank order (any subset of the GPUs)
  int root = 0;                            // rank of the root (broadcast, reduce)
  std::optional<Algorithm> algorithm;      // empty: the tuner picks
  std::optional<Protocol> protocol;        // empty: the tuner picks
  int channels = 0;                        // ring/tree channels; 0 = NIC count of the busiest host (>= 1)
  NcclChannelEnv nccl_env;                 // NCCL's channel settings (NCCL's call channel counts, not `channels`)
  int nccl_version = -1;                   // NCCL release whose tuner rules apply (major * 100 + minor, as
                                           // models::nccl_version_code); -1: the current release's (tuner.hpp)
  Fidelity fidelity = Fidelity::Auto;
  int elem_bytes = 4;                      // datatype size (float)
  std::vector<std::vector<std::uint64_t>> matrix;  // all_to_allv only: bytes rank i -> rank j (n x n)
  std::string where = "collective";        // names the input in error messages (a flag or file path)
  // NCCL_COLLNET_ENABLE when the communicator was created (workloads::Communicator::collnet_enable): false
  // makes CollNet and NVLS across hosts, NCCL's SHARP algorithms, inapplicable even where the fabric has SHARP.
  bool collnet_enable = true;
};

// Algorithms that implement an operation at all (before topology checks), in NCCL's order.
std::vector<Algorithm> algorithms_for(Op op);
// Protocols an algorithm supports (NCCL: NVLS, CollNet, PAT Simple only; p2p Simple and LL).
std::vector<Protocol> protocols_for(Algorithm a);

// Validates the spec against the topology: communicator (non-empty, distinct, existing GPU nodes), root,
// size divisibility, all_to_allv matrix shape; then, when an algorithm is given, whether it applies here
// (NVLS needs NVLS NVSwitches shared by all ranks, CollNet needs SHARP switches, PAT one GPU per host,
// hierarchical several hosts with equal GPU counts). Throws InputError naming spec.where.
void validate_spec(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing);
// Empty string when `a` applies to `spec` on `t`, else the reason.
std::string why_not_applicable(const CollectiveSpec& spec, Algorithm a, const topo::Topology& t,
                               topo::Routing& routing);

// The fidelity `Auto` resolves to for this spec (step when the step-level schedule stays small).
Fidelity resolve_fidelity(const CollectiveSpec& spec, Algorithm a, Protocol p, int channels);
int default_channels(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing);
// Steps of a ring hop in flight (models/ring_stream.hpp) for ring steps of `chunk_bytes` per channel on
// `proto`: the calibration's ring_credit_steps, lowered to the depth NCCL's slots allow at that size (in
// collectives.cpp, with the NCCL lines it follows). 1 when ring_credit_steps is 1.
std::uint32_t ring_depth(const Calibration& calib, Protocol proto, double chunk_bytes);
// NCCL's node of each rank of `communicator`, as a host id: the rank's host, except where the communicator's
// ranks in one NVLink domain sit on several hosts (a multi-node NVLink domain: a GB200/GB300 NVL72 rack, an
// NVLink Switch System), whose ranks all get the lowest of those hosts. NCCL's MNNVL puts the communicator's
// ranks of one NVLink clique (same fabric cluster UUID and clique id) into one clique (src/mnnvl.cc
// ncclMnnvlCheck), fuses their topologies into one system (src/graph/topo.cc ncclTopoGetSystem, "MNNVL clique
// support") and numbers nodes by the search graphs of that system (src/init.cc, nNodes from ringRecv[0]), so
// the clique is one node with all its GPUs and NICs (NVIDIA/nccl v2.26.2-1 and v2.28.9-1). A GPU without a host
// is its own node (-1 - its id). Every count of hosts, ranks per host and NICs per host of the collective model
// and the tuner goes through this.
std::vector<int> nccl_nodes(const std::vector<topo::NodeId>& communicator, const topo::Topology& t);

// A NIC's port bandwidth toward the scale-out fabric: its fastest link to an InfiniBand or Ethernet switch
// (bytes/s), 0 when it has none.
double nic_fabric_port_Bps(const topo::Topology& t, topo::NodeId nic);

// Builds the schedule. Algorithm/protocol come from the spec or, when absent, from the tuner
// (models/tuner.hpp). `routing` must be the one the engine will use (symmetry fidelity checks that the
// routes of collapsed transfers are isolated).
Schedule build_schedule(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing,
                        const Calibration& calib);
// A dependency-free direct all_to_all(v) streamed instead of stored: when build_schedule(spec, ...) would
// return the per-pair direct all_to_all(v) (step fidelity) or the aggregated all_to_all (phase/symmetry
// fidelity with PXN routing, docs/engine.md), hands each of its transfers to `sink`, in build_schedule's
// order, and returns that schedule without its transfers (op, algorithm, protocol, fidelity,
// fixed_latency_s). Otherwise (another algorithm or operation, or a form that build_schedule would merge
// afterwards) returns std::nullopt without calling `sink`. Used by sim::run_quotient (all-to-alls whose
// millions of flows need not be held at once).
using TransferSink = std::function<void(const Transfer&)>;
std::optional<Schedule> stream_direct(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing,
                                      const Calibration& calib, const TransferSink& sink);
// Convenience: builds a default Routing.
Schedule build_schedule(const CollectiveSpec& spec, const topo::Topology& t, const Calibration& calib);

// nccl-tests' bus-bandwidth factor (busbw = algbw * factor): all_reduce 2(n-1)/n; all_gather,
// reduce_scatter, all_to_all(v) (n-1)/n; broadcast, reduce, send_recv 1.
double busbw_factor(Op op, int nranks);
// Elements nccl-tests prints in its "count" column for `bytes` (per-rank count for all_gather,
// reduce_scatter and all_to_all as nccl-tests does).
std::uint64_t nccl_tests_count(Op op, std::uint64_t bytes, int nranks, int elem_bytes);
// The size nccl-tests runs and prints for a requested `bytes` (its setupArgs and each test's GetCollByteCount):
// whole elements; for the ops with a block per rank (all_gather, reduce_scatter, all_to_all(v), scatter) the
// per-rank count rounded down to a multiple of 16 bytes, times nranks. May be 0.
std::uint64_t nccl_tests_bytes(Op op, std::uint64_t bytes, int nranks, int elem_bytes);
// Whether `op` has one block per rank (the rounding above).
bool per_rank_blocks(Op op);

// NVLink traffic between two GPUs is striped by the hardware over every NVSwitch plane they share, but a
// flow model routes one flow over one path. This returns a copy of `t` in which the NVSwitches of one
// tier attached to the same GPUs (or, without GPUs, of one (tier, host, nvlink_domain)) are merged into one switch and parallel links are bundled (bandwidth
// and counts summed), so a GPU pair sees its full NVLink bandwidth. GPUs keep their rank order.
topo::Topology merge_nvswitch_planes(const topo::Topology& t);

}  // namespace fabricsim::models
