// Collective algorithms -> Schedule. See models/collectives.hpp and docs/collectives.md.
#include "models/collectives.hpp"
#include "models/ring_stream.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "models/tuner.hpp"
#include "sim/base/error.hpp"

namespace fabricsim::models {

using topo::NodeId;
using topo::NodeKind;

const char* to_string(Op op) {
  switch (op) {
    case Op::AllReduce: return "all_reduce";
    case Op::AllGather: return "all_gather";
    case Op::ReduceScatter: return "reduce_scatter";
    case Op::Broadcast: return "broadcast";
    case Op::Reduce: return "reduce";
    case Op::AllToAll: return "all_to_all";
    case Op::AllToAllv: return "all_to_allv";
    case Op::SendRecv: return "send_recv";
    case Op::Scatter: return "scatter";
  }
  return "?";
}

const char* to_string(Fidelity f) {
  switch (f) {
    case Fidelity::Auto: return "auto";
    case Fidelity::Step: return "step";
    case Fidelity::Phase: return "phase";
    case Fidelity::Symmetry: return "symmetry";
  }
  return "?";
}

bool parse_op(const std::string& s, Op& out) {
  if (s == "sendrecv") {
    out = Op::SendRecv;
    return true;
  }
  for (Op op : kAllOps)
    if (s == to_string(op)) {
      out = op;
      return true;
    }
  return false;
}

bool parse_fidelity(const std::string& s, Fidelity& out) {
  for (Fidelity f : {Fidelity::Auto, Fidelity::Step, Fidelity::Phase, Fidelity::Symmetry})
    if (s == to_string(f)) {
      out = f;
      return true;
    }
  return false;
}

std::vector<Algorithm> algorithms_for(Op op) {
  switch (op) {
    case Op::AllReduce:
      return {Algorithm::Ring,    Algorithm::Tree,         Algorithm::Nvls,
              Algorithm::NvlsTree, Algorithm::CollNet, Algorithm::Hierarchical};
    case Op::AllGather:
    case Op::ReduceScatter: return {Algorithm::Ring, Algorithm::Nvls, Algorithm::Pat};
    case Op::Broadcast:
    case Op::Reduce: return {Algorithm::Ring};
    case Op::AllToAll:
    case Op::AllToAllv: return {Algorithm::Direct, Algorithm::Pairwise};
    case Op::SendRecv:
    case Op::Scatter: return {Algorithm::Direct};
  }
  return {};
}

std::vector<Protocol> protocols_for(Algorithm a) {
  switch (a) {
    case Algorithm::Ring:
    case Algorithm::Tree:
    case Algorithm::Hierarchical: return {Protocol::Simple, Protocol::LL, Protocol::LL128};
    case Algorithm::Direct:
    case Algorithm::Pairwise: return {Protocol::Simple, Protocol::LL};
    case Algorithm::Nvls:
    case Algorithm::NvlsTree:
    case Algorithm::CollNet:
    case Algorithm::Pat: return {Protocol::Simple};
  }
  return {};
}

bool has_root(Op op) { return op == Op::Broadcast || op == Op::Reduce || op == Op::Scatter; }

double busbw_factor(Op op, int n) {
  if (n <= 1) return op == Op::AllReduce || op == Op::AllGather || op == Op::ReduceScatter || op == Op::AllToAll ||
                             op == Op::AllToAllv || op == Op::Scatter
                         ? 0.0
                         : 1.0;
  switch (op) {
    case Op::AllReduce: return 2.0 * (n - 1) / n;
    case Op::AllGather:
    case Op::ReduceScatter:
    case Op::AllToAll:
    case Op::AllToAllv:
    case Op::Scatter: return static_cast<double>(n - 1) / n;  // nccl-tests src/scatter.cu: (nranks-1)/nranks
    case Op::Broadcast:
    case Op::Reduce:
    case Op::SendRecv: return 1.0;
  }
  return 1.0;
}

bool per_rank_blocks(Op op) {
  return op == Op::AllGather || op == Op::ReduceScatter || op == Op::AllToAll || op == Op::AllToAllv ||
         op == Op::Scatter;
}

// NVIDIA/nccl-tests@a0b82b22 src/common.cu setupArgs: count = size / wordSize(type), then the test's
// GetCollByteCount; the printed size is max(sendBytes, expectedBytes). src/all_gather.cu, reduce_scatter.cu,
// alltoall.cu, alltoallv.cu (generated pattern) and scatter.cu: (count / nranks) & ~(16 / eltSize - 1)
// elements per rank, i.e. rounded down to 16 bytes, x nranks; all_reduce.cu, broadcast.cu, reduce.cu and
// sendrecv.cu: count as is.
std::uint64_t nccl_tests_bytes(Op op, std::uint64_t bytes, int n, int elem_bytes) {
  const std::uint64_t eb = static_cast<std::uint64_t>(std::max(1, elem_bytes)), count = bytes / eb;
  if (!per_rank_blocks(op)) return count * eb;
  const std::uint64_t ranks = static_cast<std::uint64_t>(std::max(1, n));
  const std::uint64_t align = eb < 16 ? 16 / eb : 1;  // 16 / eltSize elements (a power of two for every type)
  return (count / ranks) / align * align * ranks * eb;
}

std::uint64_t nccl_tests_count(Op op, std::uint64_t bytes, int n, int elem_bytes) {
  std::uint64_t e = bytes / static_cast<std::uint64_t>(elem_bytes);
  switch (op) {
    case Op::AllGather:
    case Op::ReduceScatter:
    case Op::AllToAll:
    case Op::AllToAllv:
    case Op::Scatter: return e / static_cast<std::uint64_t>(std::max(1, n));
    default: return e;
  }
}

// ---------------------------------------------------------------------------------------------------
// Communicator structure helpers

namespace {

struct CommLayout {
  int n = 0;
  std::vector<int> host_of_rank;               // index into hosts
  std::vector<std::vector<int>> hosts;         // ranks per host, in rank order; hosts in first-appearance order
  std::vector<int> local_of_rank;              // position of the rank within its host list
  bool equal_per_host = true;
};

CommLayout layout(const CollectiveSpec& spec, const topo::Topology& t) {
  CommLayout L;
  L.n = static_cast<int>(spec.communicator.size());
  std::map<int, int> idx;
  L.host_of_rank.resize(L.n);
  L.local_of_rank.resize(L.n);
  // Hosts are NCCL's nodes: a multi-node NVLink domain's ranks form one (nccl_nodes, MNNVL).
  const std::vector<int> node = nccl_nodes(spec.communicator, t);
  for (int r = 0; r < L.n; ++r) {
    const int key = node[static_cast<std::size_t>(r)];
    auto it = idx.find(key);
    if (it == idx.end()) {
      it = idx.emplace(key, static_cast<int>(L.hosts.size())).first;
      L.hosts.emplace_back();
    }
    L.host_of_rank[r] = it->second;
    L.local_of_rank[r] = static_cast<int>(L.hosts[it->second].size());
    L.hosts[it->second].push_back(r);
  }
  for (const auto& h : L.hosts)
    if (h.size() != L.hosts[0].size()) L.equal_per_host = false;
  return L;
}

bool is_fabric_switch(NodeKind k) { return k == NodeKind::IbSwitch || k == NodeKind::EthSwitch; }

// The NVLS switch a GPU reduces through: the adjacent NVLS NVSwitch with the widest link (first on ties).
NodeId nvls_switch_of(const topo::Topology& t, NodeId gpu) {
  NodeId best = topo::kNoNode;
  double bw = 0;
  for (const auto& [l, nb] : t.adjacent(gpu)) {
    const auto& nd = t.node(nb);
    if (nd.kind == NodeKind::NvSwitch && nd.nvls && t.link(l).bandwidth_Bps > bw) {
      bw = t.link(l).bandwidth_Bps;
      best = nb;
    }
  }
  return best;
}

// The SHARP switch a GPU's rail NIC attaches to.
NodeId sharp_leaf_of(const topo::Topology& t, topo::Routing& r, NodeId gpu) {
  NodeId nic = r.rail_nic(gpu);
  if (nic == topo::kNoNode) return topo::kNoNode;
  for (const auto& [l, nb] : t.adjacent(nic)) {
    const auto& nd = t.node(nb);
    if (is_fabric_switch(nd.kind)) return nd.sharp ? nb : topo::kNoNode;
  }
  return topo::kNoNode;
}

// An aggregation root for `leaves`: the single leaf, or a switch adjacent to all of them that satisfies
// `ok` (a spine for SHARP, a tier-2 NVSwitch for NVLS). kNoNode if none.
template <class Ok>
NodeId common_root(const topo::Topology& t, const std::vector<NodeId>& leaves, Ok ok) {
  std::set<NodeId> distinct(leaves.begin(), leaves.end());
  if (distinct.size() == 1) return *distinct.begin();
  NodeId first = *distinct.begin();
  std::set<NodeId> cands;
  for (const auto& [l, nb] : t.adjacent(first))
    if (ok(t.node(nb)) && !distinct.count(nb)) cands.insert(nb);
  for (NodeId c : cands) {
    std::set<NodeId> nbs;
    for (const auto& [l, nb] : t.adjacent(c)) nbs.insert(nb);
    bool all = true;
    for (NodeId lf : distinct)
      if (!nbs.count(lf)) {
        all = false;
        break;
      }
    if (all) return c;
  }
  return topo::kNoNode;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Validation

std::string why_not_applicable(const CollectiveSpec& spec, Algorithm a, const topo::Topology& t,
                               topo::Routing& routing) {
  auto algos = algorithms_for(spec.op);
  if (std::find(algos.begin(), algos.end(), a) == algos.end()) {
    std::string list;
    for (Algorithm x : algos) list += (list.empty() ? "" : ", ") + std::string(to_string(x));
    return std::string("algorithm ") + to_string(a) + " does not implement " + to_string(spec.op) + " (available: " +
           list + ")";
  }
  CommLayout L = layout(spec, t);
  const auto nvls_root = [](const topo::Node& nd) { return nd.kind == NodeKind::NvSwitch && nd.nvls; };
  // Every host's ranks under one NVLS NVSwitch, the same count on each ("" if so; `name` starts the message).
  const auto nvls_per_host = [&](const std::string& name) -> std::string {
    if (!L.equal_per_host) return name + " needs the same number of ranks on every host";
    for (const auto& h : L.hosts) {
      std::vector<NodeId> l1;
      for (int r : h) {
        const NodeId s = nvls_switch_of(t, spec.communicator[r]);
        if (s == topo::kNoNode)
          return name + " needs NVSwitches with NVLink SHARP (nvls) in every host; GPU '" +
                 t.node(spec.communicator[r]).id + "' has none";
        l1.push_back(s);
      }
      if (common_root(t, l1, nvls_root) == topo::kNoNode) return name + " needs each host's ranks under one NVLS NVSwitch";
    }
    return "";
  };
  // Every rank's rail NIC on a SHARP switch, one SHARP switch above the leaves of each rail group (the ranks at
  // one position on every host); "" if so.
  const auto sharp_groups = [&](const std::string& name) -> std::string {
    std::vector<std::vector<NodeId>> groups(L.hosts[0].size());
    for (int r = 0; r < L.n; ++r) {
      NodeId leaf = sharp_leaf_of(t, routing, spec.communicator[r]);
      if (leaf == topo::kNoNode)
        return name + " needs every GPU's rail NIC on an InfiniBand switch with SHARP (superpod --param sharp=true: "
                      "NCCL runs it only with the SHARP plugin and NCCL_COLLNET_ENABLE=1); GPU '" +
               t.node(spec.communicator[r]).id + "' has none";
      groups[L.local_of_rank[r]].push_back(leaf);
    }
    for (const auto& g : groups)
      if (common_root(t, g, [](const topo::Node& nd) { return is_fabric_switch(nd.kind) && nd.sharp; }) == topo::kNoNode)
        return name + " needs one SHARP switch above all the rail leaves of a rail group (two tiers at most)";
    if (!spec.collnet_enable)
      return name + " needs NCCL_COLLNET_ENABLE on this communicator (Megatron-LM: use_sharp, for its data-parallel group)";
    return "";
  };
  // NVIDIA/nccl: NVLS (and NVLS_TREE, which runs on NVLS's channels) needs more than 2 of the communicator's GPUs in
  // each node: ncclNvlsInit leaves nvlsSupport 0 when the node's topology, which holds only this communicator's
  // local GPUs, counts gpuCount <= 2 (src/transport/nvls.cc:157@v2.26.2-1, :239@v2.18.5-1), and ncclGetAlgoInfo
  // then skips both (src/enqueue.cc:1669@v2.26.2-1). A data-parallel group with one GPU per server never runs NVLS.
  const auto nvls_local_gpus = [&](const std::string& name) -> std::string {
    std::size_t fewest = L.hosts[0].size();
    for (const auto& h : L.hosts) fewest = std::min(fewest, h.size());
    if (fewest > 2) return "";
    return name + " needs more than 2 of the communicator's GPUs on every host (NCCL's ncclNvlsInit disables NVLS "
                  "at 2 or fewer); this communicator has " + std::to_string(fewest) + " on a host";
  };
  switch (a) {
    case Algorithm::Nvls: {
      if (std::string w = nvls_local_gpus("nvls"); !w.empty()) return w;
      std::vector<NodeId> l1;
      for (NodeId g : spec.communicator) {
        NodeId s = nvls_switch_of(t, g);
        if (s == topo::kNoNode)
          return "nvls needs NVSwitches with NVLink SHARP (nvls); GPU '" + t.node(g).id + "' has none";
        l1.push_back(s);
      }
      if (common_root(t, l1, nvls_root) != topo::kNoNode) return "";
      // [NCCL-E] NVLS across NVLink domains is NCCL's NVLS with CollNet: NVLink SHARP in each node, the heads'
      // shards reduced by the InfiniBand switches (SHARP), all_reduce only (src/enqueue.cc at v2.26.2-1: NVLS
      // is skipped when collNetSupport != 1 and nNodes > 1, and for all_gather/reduce_scatter on several nodes).
      const std::string why = "nvls needs all ranks under one NVLS NVSwitch (or one NVLS switch above theirs); the "
                              "ranks span several NVLink domains, which needs all_reduce with SHARP in the network "
                              "(NCCL's NVLS + CollNet); ";
      if (spec.op != Op::AllReduce)
        return why + "NCCL runs " + std::string(to_string(spec.op)) + " with NVLS inside one domain only (use ring)";
      if (L.hosts.size() < 2) return why + "these domains are in one host";
      std::string w = nvls_per_host("nvls across hosts");
      if (w.empty()) w = sharp_groups("nvls across hosts");
      return w.empty() ? "" : why + w;
    }
    case Algorithm::NvlsTree:
      // [NCCL-T] NVLS_TREE is disabled on a single node (tuning.cc: "Disable NVLS Tree on a single node").
      if (L.hosts.size() < 2) return "nvls_tree needs ranks on at least two hosts (NCCL disables it on one node)";
      if (std::string w = nvls_local_gpus("nvls_tree"); !w.empty()) return w;
      return nvls_per_host("nvls_tree");
    case Algorithm::CollNet: {
      if (!L.equal_per_host) return "collnet needs the same number of ranks on every host";
      // [NCCL-E] "CollNetDirect is only supported for up to 8 local GPUs" (src/enqueue.cc at v2.26.2-1:
      // maxLocalRanks > NCCL_MAX_DIRECT_ARITY + 1 = 8 skips it).
      if (L.hosts[0].size() > 8)
        return "collnet (NCCL's CollNet Direct) supports at most 8 ranks per host; this communicator has " +
               std::to_string(L.hosts[0].size());
      return sharp_groups("collnet");
    }
    case Algorithm::Pat:
      if (static_cast<int>(L.hosts.size()) != L.n)
        return "pat applies only with one rank per host (as in NCCL); this communicator has " +
               std::to_string(L.n) + " ranks on " + std::to_string(L.hosts.size()) + " hosts";
      return "";
    case Algorithm::Hierarchical:
      if (L.hosts.size() < 2) return "hierarchical needs ranks on at least two hosts";
      if (!L.equal_per_host) return "hierarchical needs the same number of ranks on every host";
      return "";
    default: return "";
  }
}

void validate_spec(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing) {
  const std::string& w = spec.where;
  if (spec.communicator.empty()) throw InputError(w, "a communicator with at least one GPU");
  std::set<NodeId> seen;
  for (std::size_t r = 0; r < spec.communicator.size(); ++r) {
    NodeId g = spec.communicator[r];
    if (g >= t.num_nodes())
      throw InputError(w, "communicator rank " + std::to_string(r) + ": node id " + std::to_string(g) +
                              " does not exist (topology has " + std::to_string(t.num_nodes()) + " nodes)");
    if (t.node(g).kind != NodeKind::Gpu)
      throw InputError(w, "communicator rank " + std::to_string(r) + ": node '" + t.node(g).id + "' is a " +
                              topo::to_string(t.node(g).kind) + ", not a GPU");
    if (!seen.insert(g).second)
      throw InputError(w, "communicator rank " + std::to_string(r) + ": GPU '" + t.node(g).id + "' appears twice");
  }
  const int n = static_cast<int>(spec.communicator.size());
  if (spec.elem_bytes <= 0) throw InputError(w, "a positive element size");
  if (has_root(spec.op) && (spec.root < 0 || spec.root >= n))
    throw InputError(w, "root rank in [0, " + std::to_string(n) + "), got " + std::to_string(spec.root));
  if (spec.channels < 0) throw InputError(w, "channels >= 0 (0 = automatic)");
  const std::uint64_t eb = static_cast<std::uint64_t>(spec.elem_bytes);
  if (per_rank_blocks(spec.op) && !(spec.op == Op::AllToAllv && !spec.matrix.empty())) {
    std::uint64_t unit = eb * static_cast<std::uint64_t>(n);
    if (spec.bytes % unit != 0)
      throw InputError(w, std::string("size ") + std::to_string(spec.bytes) + " B: " + to_string(spec.op) +
                              " bytes must be a multiple of nranks x element size = " + std::to_string(n) + " x " +
                              std::to_string(spec.elem_bytes) + " = " + std::to_string(unit) +
                              " B (each rank's block is bytes/nranks)");
  } else if (spec.bytes % eb != 0) {
    throw InputError(w, "size " + std::to_string(spec.bytes) + " B is not a multiple of the element size " +
                            std::to_string(spec.elem_bytes) + " B");
  }
  if (spec.op == Op::AllToAllv && !spec.matrix.empty()) {
    if (static_cast<int>(spec.matrix.size()) != n)
      throw InputError(w, "all_to_allv matrix with " + std::to_string(n) + " rows (one per rank), got " +
                              std::to_string(spec.matrix.size()));
    for (int i = 0; i < n; ++i) {
      if (static_cast<int>(spec.matrix[i].size()) != n)
        throw InputError(w, "all_to_allv matrix row " + std::to_string(i) + " with " + std::to_string(n) + " entries");
      for (auto b : spec.matrix[i])
        if (b % eb != 0)
          throw InputError(w, "all_to_allv matrix row " + std::to_string(i) + ": entries multiple of the element size");
    }
  } else if (!spec.matrix.empty()) {
    throw InputError(w, "a matrix only for all_to_allv");
  }
  if (spec.algorithm) {
    std::string why = why_not_applicable(spec, *spec.algorithm, t, routing);
    if (!why.empty()) throw InputError(w, why);
    if (spec.protocol) {
      auto ps = protocols_for(*spec.algorithm);
      if (std::find(ps.begin(), ps.end(), *spec.protocol) == ps.end())
        throw InputError(w, std::string("protocol ") + to_string(*spec.protocol) + " does not exist for algorithm " +
                                to_string(*spec.algorithm));
    }
  }
}

std::vector<int> nccl_nodes(const std::vector<topo::NodeId>& communicator, const topo::Topology& t) {
  // The hosts of each NVLink domain among the communicator's ranks.
  std::map<int, std::set<int>> domain_hosts;
  for (NodeId g : communicator) {
    const auto& nd = t.node(g);
    if (nd.nvlink_domain >= 0 && nd.host >= 0) domain_hosts[nd.nvlink_domain].insert(nd.host);
  }
  std::vector<int> out;
  out.reserve(communicator.size());
  for (NodeId g : communicator) {
    const auto& nd = t.node(g);
    if (nd.host < 0) {
      out.push_back(-1 - static_cast<int>(g));
      continue;
    }
    const auto it = nd.nvlink_domain >= 0 ? domain_hosts.find(nd.nvlink_domain) : domain_hosts.end();
    out.push_back(it != domain_hosts.end() && it->second.size() > 1 ? *it->second.begin() : nd.host);
  }
  return out;
}

double nic_fabric_port_Bps(const topo::Topology& t, NodeId nic) {
  double port = 0;
  for (const auto& [l, nb] : t.adjacent(nic))
    if (is_fabric_switch(t.node(nb).kind)) port = std::max(port, t.link(l).bandwidth_Bps);
  return port;
}

std::uint32_t ring_depth(const Calibration& calib, Protocol proto, double chunk_bytes) {
  // NVIDIA/nccl v2.26.2-1. A connection has NCCL_STEPS slots of stepSize = buffSize / NCCL_STEPS bytes
  // (src/include/device.h:24, src/enqueue.cc:1859; calibration chunk_bytes.simple), and a sender waits for a
  // free slot before each slice (src/device/prims_simple.h:115, prims_ll.h:59, prims_ll128.h:61), a slot
  // freeing when the receiver has consumed it. One primitive call of a ring kernel moves one chunk of
  // chunkSteps slots: NCCL_STEPS / 2 = 4 for Simple all_reduce, all_gather and reduce_scatter
  // (src/include/collectives.h:18-22, src/collectives.cc:87-146), 1 for LL and LL128 (src/enqueue.cc:1860-1862).
  // So a hop may run NCCL_STEPS / chunkSteps chunks ahead of its receiver: 2 on Simple, 8 on LL and LL128.
  // A modelled step of `chunk_bytes` per channel is `loops` NCCL chunks (the kernel's loop moves nranks
  // chunks of chunkSteps x stepSize per channel and, on the last loop, shrinks the chunk to
  // divUp(remaining, nranks): src/device/all_reduce.h:21,36), so up to one loop (1-256 MiB on 2 x 8 H100
  // with 8 channels) a step is one chunk and 2 steps may be in flight; with more loops the chunks of one
  // step pipeline behind each other and the depth grows with them, to NCCL_STEPS at most.
  const double cap = std::max(1.0, std::floor(calib.factors.ring_credit_steps));
  const int chunk_steps = proto == Protocol::Simple ? kNcclSteps / 2 : 1;
  const double chunk_size = chunk_steps * calib.factors.chunk_bytes_simple;
  const double loops = proto == Protocol::Simple ? std::max(1.0, std::ceil(chunk_bytes / chunk_size)) : 1.0;
  const double nccl = std::min<double>(kNcclSteps, loops * (kNcclSteps / chunk_steps));
  return static_cast<std::uint32_t>(std::min(cap, nccl));
}

// Whether the GPUs of these ranks (indices into comm) are joined pairwise by direct links, without a switch
// (a full mesh: MI300X's Infinity Fabric, topology preset mi300x-node; the 4 fully linked V100s of a DGX-1
// quad). Needs at least 3 ranks.
static bool full_mesh(const std::vector<int>& host, const std::vector<NodeId>& comm, const topo::Topology& t) {
  if (host.size() < 3) return false;
  for (int a : host) {
    std::set<NodeId> peers;
    for (const auto& [l, nb] : t.adjacent(comm[static_cast<std::size_t>(a)])) peers.insert(nb);
    for (int b : host)
      if (a != b && !peers.count(comm[static_cast<std::size_t>(b)])) return false;
  }
  return true;
}

// Bandwidth of the direct GPU-to-GPU NVLinks between a and b (every parallel link summed), bytes/s; 0 if none.
static double direct_nvlink_bw(const topo::Topology& t, NodeId a, NodeId b) {
  double bw = 0;
  for (const auto& [l, nb] : t.adjacent(a))
    if (nb == b && t.link(l).kind == topo::LinkKind::NVLink) bw += t.link(l).bandwidth_Bps;
  return bw;
}

// NCCL's P2P through an intermediate GPU (PATH_NVB, NVIDIA/nccl since v2.8.3-1; src/graph/paths.cc and
// src/transport/p2p.cc at v2.26.2-1). Two GPUs of one server without an NVLink between them (the DGX-1's
// hybrid cube-mesh: GPU 0 and 5, 6, 7) connect through a third GPU that has an NVLink to each: paths.cc
// ncclTopoSetPaths lets a path pass one GPU ("allow routing through a GPU only as 1 hop", NVLink in and out),
// ncclTopoCheckP2p returns that GPU as the intermediate rank (path of 2 links whose first hop ends at a GPU),
// and p2p.cc (P2P_INTERMEDIATE, "via P2P/indirect") places the connection's buffers in its memory: the sender
// writes over the first NVLink, the receiver reads over the second, no kernel runs on the intermediate, and its
// NVLinks carry these bytes beside its own traffic. The ring and tree search takes the same path for a hop
// (the path ncclTopoSetPaths kept for the pair, PATH_NVB once typeIntra allows it: search.cc
// ncclTopoFollowPath). Conditions, as NCCL has them:
// - the intermediate is a rank of the communicator on the same server: NCCL's topology holds only the
//   communicator's GPUs (src/graph/topo.cc ncclTopoGetSystem: "Detect only the GPU managed by this process.
//   We'll get any others through XML fusion"; ncclTopoAddNvLinks drops an NVLink whose GPU is absent), so a
//   2-rank communicator of GPU 0 and 5 stays on PCIe / host memory;
// - the pair has no NVLink path of its own (direct, or through NVSwitches): those are PATH_NVL;
// - which intermediate: ncclTopoSetPaths runs a breadth-first search from the destination whose first level is
//   the destination's links sorted by bandwidth (ncclTopoConnectNodes), and a later candidate replaces the
//   first only with strictly more bandwidth: the most bandwidth min(src->k, k->dst), then the widest k->dst
//   link, then (NCCL: the order NVML lists the NVLinks, which the topology does not give) the lowest GPU index;
// - the relayed path (2 links) is taken over a PCIe path only if that path is longer (through a CPU) or, with 2
//   links too (one PCIe switch), narrower: the search keeps the first path found at the fewest links;
// - not with NCCL_NVB_DISABLE=1 or NCCL_P2P_LEVEL below NVB, which fabricsim does not take (NCCL's defaults).
// V100 never reads over P2P (P2P read is for Ampere over PATH_NVL only, paths.cc ncclTopoCheckP2p), so the
// protocols are the direct connection's. `host`: the ranks (indices into comm) of the server of rank i.
// Returns the intermediate's rank index, or -1.
static int nvb_intermediate(const topo::Topology& t, topo::Routing& routing, const std::vector<NodeId>& comm,
                            const std::vector<int>& host, int i, int j) {
  const NodeId a = comm[static_cast<std::size_t>(i)], b = comm[static_cast<std::size_t>(j)];
  const auto& na = t.node(a);
  if (a == b || na.kind != NodeKind::Gpu || t.node(b).kind != NodeKind::Gpu || na.host < 0 || na.host != t.node(b).host)
    return -1;
  bool gpu_links = false;  // a has a direct NVLink to some GPU (else there is no intermediate to use)
  for (const auto& [l, nb] : t.adjacent(a))
    gpu_links = gpu_links || (t.link(l).kind == topo::LinkKind::NVLink && t.node(nb).kind == NodeKind::Gpu);
  if (!gpu_links || direct_nvlink_bw(t, a, b) > 0) return -1;
  int out = -1;
  double best_bw = 0, best_out = 0;
  for (int k : host) {
    const NodeId g = comm[static_cast<std::size_t>(k)];
    if (g == a || g == b) continue;
    const double in = direct_nvlink_bw(t, a, g), to = direct_nvlink_bw(t, g, b);
    if (in <= 0 || to <= 0) continue;
    const double bw = std::min(in, to);
    const bool better = out < 0 || bw > best_bw || (bw == best_bw && to > best_out) ||
                        (bw == best_bw && to == best_out &&
                         t.node(g).local_index < t.node(comm[static_cast<std::size_t>(out)]).local_index);
    if (better) out = k, best_bw = bw, best_out = to;
  }
  if (out < 0) return -1;
  // The pair's own route: an NVLink path (through NVSwitches) is PATH_NVL; a PCIe path of 2 links at least as
  // wide is kept; a topology without any other path (a test's NVLink chain) has the relay only.
  const std::vector<topo::LinkDir>* route = nullptr;
  try {
    route = &routing.route(a, b);
  } catch (const InputError&) {
    return out;
  }
  double route_Bps = std::numeric_limits<double>::infinity();
  bool nvlink_only = true;
  for (topo::LinkDir d : *route) {
    const topo::Link& link = t.link(topo::Topology::link_of(d));
    nvlink_only = nvlink_only && link.kind == topo::LinkKind::NVLink;
    route_Bps = std::min(route_Bps, link.bandwidth_Bps);
  }
  if (nvlink_only || (route->size() <= 2 && route_Bps >= best_bw)) return -1;
  return out;
}

// Rings over the direct GPU-to-GPU NVLinks of one host that has them but is neither switched nor a full mesh
// (the DGX-1's hybrid cube-mesh, topology preset dgx1-v100: 6 NVLinks per GPU, 2 to some neighbours, none to
// 3 of the 7 others). NCCL's ring search (src/graph/search.cc ncclTopoCompute and ncclTopoSearchRec at
// NVIDIA/nccl v2.26.2-1) looks for rings whose every hop is a path of the best type first (PATH_NVL: a direct
// NVLink; paths.cc) at a per-channel speed taken from speedArrayIntra, highest first; each channel takes that
// speed from the bandwidth left on every link it crosses, so a pair with 2 NVLinks can carry 2 channels at one
// link's speed; it tries lower speeds while a lower one can give more total bandwidth (speed x channels, the
// .49 rule) and stops when the channels use a GPU's whole bandwidth (totalBw). From each GPU it tries the next
// GPU with the widest path first, then in index order from the current GPU (ncclTopoSearchNextGpuSort, cmpScore).
// The search here is written for fabricsim, not NCCL's: speeds are whole numbers of the host's slowest
// GPU-to-GPU NVLink (k = most links of a pair down to 1); at each speed a depth-first search (same next-GPU
// preference) collects the most rings it can within a step budget; the speed with the most rings x k wins
// (ties: the higher speed), and a set that fills every GPU's links ends the search. Empty when the host has no
// GPU-to-GPU NVLink, has NVSwitches, or no ring of NVLink hops exists, relayed ones (below) included (then the
// ring follows rank order, and its hops without NVLink go over PCIe, as NCCL's fallback to PCI paths would). Orders are the
// host's ranks (indices into comm), each starting at the host's first rank.
//
// With `relay` (m x m: the intermediate's position of a pair's PATH_NVB path, nvb_intermediate; -1 none) a hop
// between two ranks without a direct NVLink may also go through the intermediate's two NVLinks, taking the
// speed from both (NCCL's search at typeIntra PATH_NVB: ncclTopoFollowPath subtracts the channel's bandwidth
// from every link of the path, search.cc followPath), and the next-rank order puts the wider path first, then the
// one of fewer hops (cmpScore: intraBw, then intraNhops). A pair with a direct NVLink always takes it (its path
// is PATH_NVL).
static std::vector<std::vector<int>> nvlink_rings_search(const std::vector<int>& cap, int m, long budget = 200000,
                                                         const std::vector<int>* relay = nullptr, bool* relayed = nullptr) {
  const auto at = [m](int a, int b) { return static_cast<std::size_t>(a * m + b); };
  const std::vector<int>* rel = nullptr;  // the relays the search at the current type may use
  // The hop a -> b: its links (one or two, as pairs) when it has a path at this search's types, else none.
  const auto hop_links = [&](int a, int b, std::array<std::pair<int, int>, 2>& out) -> int {
    if (cap[at(a, b)] > 0) return out[0] = {a, b}, 1;
    const int r = rel ? (*rel)[at(a, b)] : -1;
    if (r < 0) return 0;
    out[0] = {a, r}, out[1] = {r, b};
    return 2;
  };
  const auto hop_bw = [&](int a, int b) {  // the path's bandwidth in link units, 0 without one
    std::array<std::pair<int, int>, 2> ls;
    const int n = hop_links(a, b, ls);
    int bw = n ? std::numeric_limits<int>::max() : 0;
    for (int i = 0; i < n; ++i) bw = std::min(bw, cap[at(ls[i].first, ls[i].second)]);
    return bw;
  };
  int most = 0, perfect = std::numeric_limits<int>::max();
  for (int a = 0; a < m; ++a) {
    int out = 0;
    for (int b = 0; b < m; ++b) out += cap[at(a, b)], most = std::max(most, cap[at(a, b)]);
    perfect = std::min(perfect, out);
  }
  std::vector<std::vector<int>> best;
  int best_total = 0;
  bool best_nvb = false;
  // At each speed NCCL tries NVLink paths alone, then (typeIntra PATH_NVB) relayed ones too, the latter only while
  // no solution is kept or the kept one has relayed hops (search.cc ncclTopoCompute: typeIntra rises only while
  // "graph->nChannels == 0 || tmpGraph.typeIntra < graph->typeIntra", before the speed drops); a solution
  // replaces the kept one only with more bandwidth (ncclTopoCompareGraphs).
  for (int k = most; k >= 1 && best_total < perfect; --k)
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1 && !(relay && (best.empty() || best_nvb))) break;
    rel = pass == 1 ? relay : nullptr;
    std::vector<int> left = cap;
    std::vector<std::vector<int>> rings, found;
    std::vector<int> path{0};
    std::vector<char> seen(static_cast<std::size_t>(m), 0);
    seen[0] = 1;
    long left_steps = budget;
    const int limit = perfect / k;  // rings at speed k that fill the GPU with the fewest links
    // extend(): continue the ring in `path`; when it closes, start the next one. Keeps the largest set seen.
    std::function<bool()> extend = [&]() -> bool {
      if (--left_steps < 0) return false;
      const int cur = path.back();
      std::array<std::pair<int, int>, 2> ls;
      // Takes (sign -1) or gives back (+1) the speed on the links of hop a -> b; false when a link has too little.
      const auto take = [&](int a, int b, int sign) {
        const int n = hop_links(a, b, ls);
        if (n == 0) return false;
        if (sign < 0)
          for (int i = 0; i < n; ++i)
            if (left[at(ls[i].first, ls[i].second)] < k) return false;
        for (int i = 0; i < n; ++i) left[at(ls[i].first, ls[i].second)] += sign * k;
        return true;
      };
      if (static_cast<int>(path.size()) == m) {
        if (!take(cur, 0, -1)) return false;
        rings.push_back(path);
        if (rings.size() > found.size()) found = rings;
        bool done = static_cast<int>(rings.size()) >= limit;
        if (!done) {
          const std::vector<int> saved = path;
          std::fill(seen.begin(), seen.end(), 0);
          path.assign(1, 0), seen[0] = 1;
          done = extend();
          path = saved;
          std::fill(seen.begin(), seen.end(), 0);
          for (int r : path) seen[static_cast<std::size_t>(r)] = 1;
        }
        if (done) return true;
        rings.pop_back();
        take(cur, 0, +1);
        return false;
      }
      std::vector<int> next;
      for (int d = 1; d < m; ++d) {
        const int x = (cur + d) % m;
        if (seen[static_cast<std::size_t>(x)]) continue;
        const int n = hop_links(cur, x, ls);
        bool fits = n > 0;
        for (int i = 0; i < n; ++i) fits = fits && left[at(ls[i].first, ls[i].second)] >= k;
        if (fits) next.push_back(x);
      }
      // Wider path first, then fewer hops (a direct NVLink before a relayed path of the same width).
      std::stable_sort(next.begin(), next.end(), [&](int x, int y) {
        const int bx = hop_bw(cur, x), by = hop_bw(cur, y);
        if (bx != by) return bx > by;
        return (cap[at(cur, x)] > 0) > (cap[at(cur, y)] > 0);
      });
      for (int x : next) {
        take(cur, x, -1), seen[static_cast<std::size_t>(x)] = 1, path.push_back(x);
        const bool done = extend();
        path.pop_back(), seen[static_cast<std::size_t>(x)] = 0, take(cur, x, +1);
        if (done) return true;
        if (left_steps < 0) return false;
      }
      return false;
    };
    extend();
    const int total = static_cast<int>(found.size()) * k;
    if (total > best_total) best_total = total, best = found, best_nvb = pass == 1;
  }
  if (relayed) *relayed = best_nvb;
  return best;
}

// Arc-disjoint directed rings through all m ranks of a full mesh, m - 1 of them (every link of every GPU in one
// ring per direction): a Hamiltonian decomposition of the complete directed graph, which exists for every m but
// 4 and 6 (Tillson, "A Hamiltonian decomposition of K*_2m, 2m >= 8", J. Comb. Theory B 29, 1980; odd m by
// Walecki's construction). Found by nvlink_rings_search on the mesh (one unit per ordered pair: depth-first over
// ring positions, every ring starting at rank index 0, next ranks in index order) with a budget of 2 M search
// steps; empty when fewer than m - 1 rings are found within it (m 4 and 6, or large m).
static std::vector<std::vector<int>> mesh_decomposition_search(int m) {
  if (m < 3) return {};
  std::vector<int> cap(static_cast<std::size_t>(m * m), 1);
  for (int a = 0; a < m; ++a) cap[static_cast<std::size_t>(a * m + a)] = 0;
  std::vector<std::vector<int>> rings = nvlink_rings_search(cap, m, 2000000);
  if (static_cast<int>(rings.size()) != m - 1) return {};
  return rings;
}

// mesh_decomposition_search, once per m (the failing searches for m 4 and 6 take about a million steps).
static std::vector<std::vector<int>> mesh_decomposition(int m) {
  static std::mutex mu;
  static std::map<int, std::vector<std::vector<int>>> known;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(m);
  if (it == known.end()) it = known.emplace(m, mesh_decomposition_search(m)).first;
  return it->second;
}

// Rings of the channels of one host that is a full mesh (full_mesh); empty for any other host. One order per
// channel: with the same order on every channel, as on a switched host, all channels would share the m links
// of one cycle and leave the other m (m - 2) idle. RCCL runs its channels over rings that together cover every
// link of the mesh (ROCm/rccl src/graph/rome_models.cc @008c53db, rome_model_81: 8 MI300X, 7 links each,
// 8 distinct rings per group of 8 channels). The orders here are computed, not RCCL's table: channel c runs
// ring c mod (m - 1) of the mesh's Hamiltonian decomposition (mesh_decomposition); where there is none (m 4
// and 6), greedily: channel c starts at rank index c mod m and each hop goes to the unvisited rank whose link
// from the current one the earlier channels used least (ties: the next rank in host order).
static std::vector<std::vector<int>> full_mesh_rings(const std::vector<int>& host, const std::vector<NodeId>& comm,
                                                     const topo::Topology& t, int nch) {
  if (!full_mesh(host, comm, t)) return {};
  const int m = static_cast<int>(host.size());
  const std::vector<std::vector<int>> dec = mesh_decomposition(m);
  std::vector<int> load(static_cast<std::size_t>(m * m), 0);
  std::vector<std::vector<int>> rings;
  for (int c = 0; c < nch; ++c) {
    std::vector<int> idx;
    if (!dec.empty()) {
      idx = dec[static_cast<std::size_t>(c % (m - 1))];
    } else {
      idx = {c % m};
      std::vector<char> seen(static_cast<std::size_t>(m), 0);
      seen[static_cast<std::size_t>(c % m)] = 1;
      while (static_cast<int>(idx.size()) < m) {
        const int cur = idx.back();
        int best = -1;
        for (int d = 1; d < m; ++d) {
          const int x = (cur + d) % m;
          if (seen[static_cast<std::size_t>(x)]) continue;
          if (best < 0 || load[static_cast<std::size_t>(cur * m + x)] < load[static_cast<std::size_t>(cur * m + best)]) best = x;
        }
        idx.push_back(best);
        seen[static_cast<std::size_t>(best)] = 1;
      }
      for (int k = 0; k < m; ++k) ++load[static_cast<std::size_t>(idx[static_cast<std::size_t>(k)] * m + idx[static_cast<std::size_t>((k + 1) % m)])];
    }
    std::vector<int> order;
    for (int k : idx) order.push_back(host[static_cast<std::size_t>(k)]);
    // A cycle read from another start is the same ring: start every order at the host's first rank.
    std::rotate(order.begin(), std::find(order.begin(), order.end(), host[0]), order.end());
    rings.push_back(order);
  }
  return rings;
}

// The direct GPU-to-GPU NVLinks among a host's ranks as a capacity matrix (m x m, row-major over the positions
// in `host`): each pair's NVLink bandwidth in whole multiples of the slowest pair's. Empty when the host has
// fewer than 3 ranks, is a full mesh (full_mesh_rings), reaches an NVSwitch or has no GPU-to-GPU NVLink.
static std::vector<int> nvlink_capacity(const std::vector<int>& host, const std::vector<NodeId>& comm,
                                        const topo::Topology& t) {
  const int m = static_cast<int>(host.size());
  if (m < 3 || full_mesh(host, comm, t)) return {};
  std::map<NodeId, int> index;
  for (int i = 0; i < m; ++i) index[comm[static_cast<std::size_t>(host[static_cast<std::size_t>(i)])]] = i;
  std::vector<double> bw(static_cast<std::size_t>(m * m), 0.0);
  double unit = std::numeric_limits<double>::infinity();
  for (int i = 0; i < m; ++i)
    for (const auto& [l, nb] : t.adjacent(comm[static_cast<std::size_t>(host[static_cast<std::size_t>(i)])])) {
      const topo::Link& link = t.link(l);
      if (link.kind != topo::LinkKind::NVLink) continue;
      if (t.node(nb).kind == NodeKind::NvSwitch) return {};
      auto it = index.find(nb);
      if (it == index.end()) continue;
      bw[static_cast<std::size_t>(i * m + it->second)] += link.bandwidth_Bps;
    }
  for (double b : bw)
    if (b > 0) unit = std::min(unit, b);
  if (!std::isfinite(unit)) return {};
  std::vector<int> cap(bw.size(), 0);
  for (std::size_t i = 0; i < bw.size(); ++i) cap[i] = static_cast<int>(std::floor(bw[i] / unit + 1e-9));
  return cap;
}

// The host's rings (nvlink_rings_search); where no ring of NVLink hops alone is kept, NCCL's search with PATH_NVB
// hops (through an intermediate rank of the host, nvb_intermediate) decides, and `relayed` (when given) tells
// whether the rings have such hops.
static std::vector<std::vector<int>> nvlink_rings(const std::vector<int>& host, const std::vector<NodeId>& comm,
                                                  const topo::Topology& t, topo::Routing& routing,
                                                  bool* relayed = nullptr) {
  const int m = static_cast<int>(host.size());
  if (relayed) *relayed = false;
  const std::vector<int> cap = nvlink_capacity(host, comm, t);
  if (cap.empty()) return {};
  // The pairs' PATH_NVB intermediates (positions in the host), -1 where none; none at all: NVLink rings only.
  std::vector<int> relay(cap.size(), -1);
  bool any_relay = false;
  for (int a = 0; a < m; ++a)
    for (int b = 0; b < m; ++b) {
      if (a == b || cap[static_cast<std::size_t>(a * m + b)] > 0) continue;
      const int k = nvb_intermediate(t, routing, comm, host, host[static_cast<std::size_t>(a)], host[static_cast<std::size_t>(b)]);
      if (k < 0) continue;
      relay[static_cast<std::size_t>(a * m + b)] = static_cast<int>(std::find(host.begin(), host.end(), k) - host.begin());
      any_relay = true;
    }
  // Once per capacity and relay matrix (every schedule of a communicator asks again).
  static std::mutex mu;
  static std::map<std::pair<std::vector<int>, std::vector<int>>, std::pair<std::vector<std::vector<int>>, bool>> known;
  std::vector<std::vector<int>> idx;
  {
    const std::lock_guard<std::mutex> lock(mu);
    const auto key = std::make_pair(cap, any_relay ? relay : std::vector<int>{});
    auto it = known.find(key);
    if (it == known.end()) {
      bool nvb = false;
      auto found = nvlink_rings_search(cap, m, 200000, any_relay ? &relay : nullptr, &nvb);
      it = known.emplace(key, std::make_pair(std::move(found), nvb)).first;
    }
    idx = it->second.first;
    if (relayed) *relayed = it->second.second;
  }
  std::vector<std::vector<int>> rings;
  for (const auto& r : idx) {
    std::vector<int> order;
    for (int k : r) order.push_back(host[static_cast<std::size_t>(k)]);
    rings.push_back(order);
  }
  return rings;
}

// A host's part of a ring across hosts on such a server: a path from `from` to `to` (positions in the host)
// through all m ranks over direct NVLinks, as NCCL's search builds a channel NET n -> GPU a -> ... -> GPU b ->
// NET n over NVLink paths first (src/graph/search.cc ncclTopoSearchRecNet, ncclTopoSearchRecGpu at
// v2.26.2-1). From each rank the next tried is the one whose link the earlier channels used least (`load`,
// m x m, counts hops), then the widest link, then index order from the current rank; a depth-first search
// within a step budget. `to` < 0: the path may end anywhere (a tree's chain). `second` >= 0: the path's second
// rank, when `from` has an NVLink to it. Empty when there is none; otherwise `load` counts the path's hops.
static std::vector<int> nvlink_path(const std::vector<int>& cap, int m, int from, int to, std::vector<int>& load,
                                    int second = -1) {
  const auto at = [m](int a, int b) { return static_cast<std::size_t>(a * m + b); };
  std::vector<int> path{from};
  std::vector<char> seen(static_cast<std::size_t>(m), 0);
  seen[static_cast<std::size_t>(from)] = 1;
  if (second >= 0 && second != from && second != to && cap[at(from, second)] > 0) {
    path.push_back(second);
    seen[static_cast<std::size_t>(second)] = 1;
  }
  long budget = 100000;
  std::function<bool()> extend = [&]() -> bool {
    if (--budget < 0) return false;
    const int cur = path.back();
    if (static_cast<int>(path.size()) == m) return to < 0 || cur == to;
    std::vector<int> next;
    for (int d = 1; d < m; ++d) {
      const int x = (cur + d) % m;
      // `to` comes last
      if (seen[static_cast<std::size_t>(x)] || cap[at(cur, x)] == 0) continue;
      if (x == to && static_cast<int>(path.size()) != m - 1) continue;
      next.push_back(x);
    }
    std::stable_sort(next.begin(), next.end(), [&](int x, int y) {
      const double lx = static_cast<double>(load[at(cur, x)]) / cap[at(cur, x)];
      const double ly = static_cast<double>(load[at(cur, y)]) / cap[at(cur, y)];
      return lx != ly ? lx < ly : cap[at(cur, x)] > cap[at(cur, y)];
    });
    for (int x : next) {
      seen[static_cast<std::size_t>(x)] = 1, path.push_back(x);
      if (extend()) return true;
      path.pop_back(), seen[static_cast<std::size_t>(x)] = 0;
      if (budget < 0) return false;
    }
    return false;
  };
  if (from == to || !extend()) return {};
  for (int k = 0; k + 1 < m; ++k) ++load[at(path[static_cast<std::size_t>(k)], path[static_cast<std::size_t>(k + 1)])];
  return path;
}

int default_channels(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing) {
  if (spec.channels > 0) return spec.channels;
  CommLayout L = layout(spec, t);
  // One host that is a full mesh: one channel per link of a GPU (m - 1), so that the rings of full_mesh_rings
  // use every link once per direction. A host with direct NVLinks that is not a full mesh: one per NVLink ring
  // (below). Any other single host: 1 (a channel's flows are not capped per channel on a host;
  // docs/collectives.md).
  if (L.hosts.size() == 1 && full_mesh(L.hosts.front(), spec.communicator, t))
    return static_cast<int>(L.hosts.front().size()) - 1;
  // One host whose GPUs are joined by direct NVLinks but not all pairwise (a DGX-1): one channel per ring of
  // NVLink hops that NCCL's search would find (nvlink_rings).
  if (L.hosts.size() == 1) {
    const std::size_t rings = nvlink_rings(L.hosts.front(), spec.communicator, t, routing).size();
    if (rings > 0) return static_cast<int>(rings);
  }
  if (L.hosts.size() <= 1) return 1;
  // A host's channels: one per distinct rail NIC of its ranks. NCCL's ring/tree search at the top
  // inter-node speed puts one channel on each NIC (a channel is NET n -> GPUs -> NET n and takes the NIC's
  // bandwidth; src/graph/search.cc ncclTopoSearchRecNet, ncclTopoCompareGraphs, NCCL 2.30.7), and every
  // rank then takes the smallest channel count any rank found (src/init.cc: graphs[a]->nChannels = min over
  // allGather3Data). So a host that lost a NIC (its GPU leaves through a neighbour's NIC) gives the whole
  // communicator one channel fewer instead of two channels on one NIC. The minimum is over the hosts with
  // the most ranks of the communicator (same GPUs, fewer usable NICs); hosts holding fewer of its ranks are
  // not counted (the largest count stays, as before, when no host qualifies).
  std::size_t most = 0;
  for (const auto& h : L.hosts) most = std::max(most, h.size());
  int best = 1, fewest = std::numeric_limits<int>::max();
  for (const auto& h : L.hosts) {
    std::set<NodeId> nics;
    for (int r : h) {
      NodeId nic = routing.rail_nic(spec.communicator[r]);
      if (nic != topo::kNoNode) nics.insert(nic);
    }
    const int n = static_cast<int>(nics.size());
    best = std::max(best, n);
    if (h.size() == most && n > 0) fewest = std::min(fewest, n);
  }
  int channels = fewest == std::numeric_limits<int>::max() ? best : std::min(best, fewest);
  // On a node with more NICs than NCCL's search fills (a multi-node NVLink domain as one node, nccl_nodes), the
  // search stops where the channels use up a GPU's NVLink (nccl_search_channels): 16 of the NICs of a GB200
  // NVL72 rack's GPUs, each channel on its own NIC.
  const NodeId g0 = spec.communicator.front();
  int nvlinks = 0;
  for (const auto& [l, nb] : t.adjacent(g0))
    if (t.link(l).kind == topo::LinkKind::NVLink) nvlinks += t.link(l).count;
  const NodeId nic = routing.rail_nic(g0);
  const double nic_Bps = nic != topo::kNoNode ? nic_fabric_port_Bps(t, nic) : 0.0;
  return nccl_search_channels(t.node(g0).model, nvlinks, nic_Bps, channels);
}

// ---------------------------------------------------------------------------------------------------
// Schedule construction

namespace {

constexpr std::size_t kAutoStepLimit = 250000;  // transfers; above this `auto` uses symmetry

struct Builder {
  const CollectiveSpec& spec;
  const topo::Topology& t;
  topo::Routing& routing;
  const Calibration& calib;
  Algorithm algo;
  Protocol proto;
  bool step;  // step fidelity (else phase-style merging)
  int channels;
  const AlgoProtoParams& ap;
  double algo_eff = 1.0;
  CommLayout L;
  Schedule s;
  bool aggregated = false;  // the builder already emitted merged flows (compress() would find nothing)
  double step_latency_scale = 1.0;  // NVLS: NCCL loops per pipeline chunk (build_nvls)
  bool nvls_sharp = false;          // NVLS across hosts with SHARP (build_nvls_sharp): hops priced as NVLS_TREE's
  double ll_cap_payload_Bps = 0;    // LL: data rate cap of one modelled channel's flow, bytes/s (0 = none)
  double chunk_scale = 1.0;         // NCCL channels one modelled channel stands for, when more than one (LL cap)
  RingStream* stream = nullptr;     // set: a step-level ring records its step-0 hops here instead (build_ring_stream)
  const TransferSink* sink = nullptr;  // set: emit() hands each transfer to it instead of storing it (stream_direct)

  NodeId gpu(int rank) const { return spec.communicator[rank]; }

  // Ring and tree hops over NCCL's PATH_NVB paths: where one host's rings came from the search with relayed hops
  // (nvlink_rings: no ring of NVLink hops alone kept), a ring, chain or tree hop between two GPUs without an
  // NVLink goes through the pair's intermediate GPU (nvb_intermediate) as one transfer over both NVLinks
  // (Transfer::via), as NCCL's search priced the channel (followPath takes its bandwidth from every link of the
  // path) and its P2P transport connects it (buffers in the intermediate's memory, P2P_INTERMEDIATE).
  int relay_rings_ = -1;  // -1: not known yet
  std::map<NodeId, int> rank_of_node_;
  bool relay_rings() {
    if (relay_rings_ < 0) {
      bool r = false;
      if ((algo == Algorithm::Ring || algo == Algorithm::Tree) && L.hosts.size() == 1)
        nvlink_rings(L.hosts.front(), spec.communicator, t, routing, &r);
      relay_rings_ = r ? 1 : 0;
      if (r)
        for (int i = 0; i < L.n; ++i) rank_of_node_.emplace(gpu(i), i);
    }
    return relay_rings_ == 1;
  }
  // The GPU the hop a -> b goes through (kNoNode: none).
  NodeId hop_via(NodeId a, NodeId b) {
    if (a == b || !relay_rings()) return topo::kNoNode;
    const auto ia = rank_of_node_.find(a), ib = rank_of_node_.find(b);
    if (ia == rank_of_node_.end() || ib == rank_of_node_.end()) return topo::kNoNode;
    const int k = nvb_relay(ia->second, ib->second);
    return k < 0 ? topo::kNoNode : gpu(k);
  }

  // Calibration factors of a hop (hop_params runs once per transfer: millions of times for a large all-to-all):
  // typed fields, and the NVLink efficiency of the last GPU model asked for.
  mutable double nv_eff_ = -1;
  mutable std::string nv_model_;
  double net_eff() const { return calib.factors.network_efficiency; }
  double pcie_eff() const { return calib.factors.pcie_efficiency; }
  double nv_eff(const std::string& model) const {
    if (nv_eff_ < 0 || model != nv_model_) {
      nv_eff_ = calib.nvlink_efficiency(model);
      nv_model_ = model;
    }
    return nv_eff_;
  }

  // Whether a GPU -> GPU hop goes over the scale-out network (hop_params' network case: neither one NVLink
  // domain nor one host).
  bool network_hop(NodeId a, NodeId b) const {
    const auto& na = t.node(a);
    const auto& nb = t.node(b);
    if (na.kind != NodeKind::Gpu || nb.kind != NodeKind::Gpu) return false;
    if (na.nvlink_domain >= 0 && na.nvlink_domain == nb.nvlink_domain) return false;
    return !(na.host >= 0 && na.host == nb.host);
  }

  // Efficiency and per-step latency of a hop between two nodes.
  std::pair<double, double> hop_params(NodeId a, NodeId b) const {
    const auto& na = t.node(a);
    const auto& nb = t.node(b);
    const std::string& model = na.kind == NodeKind::Gpu ? na.model : nb.model;
    auto kinds = [&](NodeKind k) { return na.kind == k || nb.kind == k; };
    // NVLS's efficiency is the fraction of nominal NVLink bandwidth its multimem loads and stores reach
    // (nvls_efficiency, set as algo_eff by build_nvls), not a loss on top of the copy kernels' NVLink
    // efficiency, which is measured on ring runs (calibration.cpp).
    if (kinds(NodeKind::NvSwitch)) {
      if (algo == Algorithm::NvlsTree || nvls_sharp) return {calib.factor("nvls_efficiency"), ap.step_latency_s};
      return {algo == Algorithm::Nvls ? 1.0 : nv_eff(model), ap.step_latency_s};
    }
    // NVLS_TREE: every chunk of every edge pays the kernel's per-loop cost (step latency); the network latency
    // is paid once per tree level and direction per call (build_nvls_tree), as NCCL's model charges it.
    if (algo == Algorithm::NvlsTree || nvls_sharp) return {net_eff(), ap.step_latency_s};
    // CollNet: the same. Every chunk pays the per-step latency on its SHARP hops; the network latency once per
    // call (build_collnet), as NCCL's model charges it. Charged per chunk, the 31 us bound every hop of a
    // 64-chunk pipeline to one chunk per 31 us: 256 MiB on 2 GB200 NVL72 racks took 4.50 ms where the tuner
    // priced 2.45 ms, and the tuner chose CollNet at 118 GB/s busbw over NVLS_TREE's 239.
    if (is_fabric_switch(na.kind) || is_fabric_switch(nb.kind))
      return {net_eff(), algo == Algorithm::CollNet ? ap.step_latency_s : ap.net_step_latency_s};
    if (na.kind == NodeKind::Gpu && nb.kind == NodeKind::Gpu) {
      if (na.nvlink_domain >= 0 && na.nvlink_domain == nb.nvlink_domain) return {nv_eff(model), ap.step_latency_s};
      if (na.host >= 0 && na.host == nb.host) return {pcie_eff(), ap.step_latency_s};
    }
    return {net_eff(), ap.net_step_latency_s};
  }

  // `step_cost`: the fraction of the hop's per-step latency this transfer pays (PEdge::first_step_cost).
  std::uint32_t emit(NodeId src, NodeId dst, double payload, std::uint32_t steps, double weight,
                     std::vector<std::uint32_t> deps, int channel, int stepidx, double step_cost = 1.0) {
    auto [eff, lat] = hop_params(src, dst);
    Transfer x;
    x.src = src;
    x.dst = dst;
    x.via = hop_via(src, dst);
    x.payload_bytes = payload;
    x.bytes = payload / (eff * ap.bw_efficiency * algo_eff);
    x.weight = weight;
    x.steps = steps;
    // NCCL's per-step latencies ([NCCL-T] hwLatencies) are measured end to end, so they already include the
    // time on the wire: the engine charges each step max(step latency, latency of the route it takes), not
    // their sum (the sum counted the NVLink hops twice: 19.2 us for an 8-byte all_reduce on 8 H100 with
    // NCCL's defaults, where NCCL's own model says 15 us). A merged transfer pays it `steps` times.
    x.step_latency_s = lat * step_latency_scale * step_cost;
    x.latency_includes_route = true;
    if (ll_cap_payload_Bps > 0 && payload > 0) x.rate_cap_Bps = ll_cap_payload_Bps * x.bytes / payload;
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    x.deps = std::move(deps);
    x.channel = channel;
    x.step = stepidx;
    if (sink) {  // dependency-free schedules only (stream_direct): nothing refers to the index
      (*sink)(x);
      return 0;
    }
    s.transfers.push_back(std::move(x));
    return static_cast<std::uint32_t>(s.transfers.size() - 1);
  }

  double direct_nvlink_Bps(NodeId a, NodeId b) const { return direct_nvlink_bw(t, a, b); }

  // NCCL's PATH_NVB path between two GPUs of a server: the intermediate's rank index, or -1 (nvb_intermediate).
  int nvb_relay(int i, int j) {
    const auto key = std::make_pair(i, j);
    if (auto it = relays_.find(key); it != relays_.end()) return it->second;
    const int k = nvb_intermediate(t, routing, spec.communicator,
                                   L.hosts[static_cast<std::size_t>(L.host_of_rank[static_cast<std::size_t>(i)])], i, j);
    relays_[key] = k;
    return k;
  }

  // NCCL's PATH_NVL between two GPUs of a host: a direct NVLink, or NVLinks through NVSwitches only.
  bool nvl_reach(NodeId a, NodeId b) {
    if (direct_nvlink_Bps(a, b) > 0) return true;
    const std::vector<topo::LinkDir>& r = routing.route(a, b);
    if (r.empty()) return false;
    for (std::size_t k = 0; k < r.size(); ++k) {
      if (t.link(topo::Topology::link_of(r[k])).kind != topo::LinkKind::NVLink) return false;
      if (k + 1 < r.size() && t.node(t.dir_dst(r[k])).kind == NodeKind::Gpu) return false;
    }
    return true;
  }

  std::map<std::pair<int, int>, int> relays_;

  // A point-to-point send of `payload` from rank i to rank j (all_to_all, send_recv, scatter): one transfer, or,
  // between GPUs that NCCL connects through an intermediate GPU (nvb_relay), one transfer per NVLink leg, both
  // at once (the legs are pipelined through the intermediate's buffer; the approximation is that each leg's rate
  // is set on its own, as the PXN legs of build_direct_aggregated). With `joined`, the legs are followed by a
  // join whose index is returned (for transfers that wait for this send).
  std::uint32_t emit_p2p(int i, int j, double payload, std::vector<std::uint32_t> deps, int channel, int stepidx,
                         bool joined = false) {
    const int k = nvb_relay(i, j);
    if (k < 0) return emit(gpu(i), gpu(j), payload, 1, 1.0, std::move(deps), channel, stepidx);
    const std::uint32_t first = emit(gpu(i), gpu(k), payload, 1, 1.0, deps, channel, stepidx);
    const std::uint32_t second = emit(gpu(k), gpu(j), payload, 1, 1.0, std::move(deps), channel, stepidx);
    if (!joined || sink) return second;
    return emit_join(gpu(j), {first, second}, channel, stepidx);
  }

  std::uint32_t chunk_count(double max_edge_payload) const {
    double chunk = proto == Protocol::Simple ? calib.factors.chunk_bytes_simple
                   : proto == Protocol::LL   ? calib.factors.chunk_bytes_ll
                                             : calib.factors.chunk_bytes_ll128;
    // A modelled channel that stands for several NCCL channels moves their chunks side by side.
    chunk *= chunk_scale;
    double k = std::ceil(max_edge_payload / chunk);
    double cap = calib.factors.max_pipeline_chunks;
    return static_cast<std::uint32_t>(std::clamp(k, 1.0, cap));
  }

  // Ring orders for the given ranks: one per channel, rotating each host's ranks by the channel so that
  // channels leave each host through different GPUs (and rail NICs). Identical orders are merged into one
  // ring with weight = number of channels sharing it.
  // Where channel c enters and leaves a host that has fewer rail NICs than GPUs: the host's ranks whose
  // rail NIC is the channel's NIC (NIC c mod #NICs, in order of first appearance), rotated by the channel's
  // round over the NICs. NCCL's ring and tree search (src/graph/search.cc) builds each channel's path through
  // a node from one NIC back to the same NIC, so that with 2 GPUs per NIC (ABCI A and V nodes) the channels
  // spread over all NICs. Empty when every GPU has its own NIC (then the rotation of ring_orders already
  // spreads channels over the rails) or no NIC is known.
  std::vector<int> channel_nic_ranks(const std::vector<int>& host, int c) const {
    std::vector<NodeId> nics;
    for (int r : host) {
      const NodeId k = routing.rail_nic(gpu(r));
      if (k != topo::kNoNode && std::find(nics.begin(), nics.end(), k) == nics.end()) nics.push_back(k);
    }
    if (nics.empty() || nics.size() >= host.size() || uneven_nics(host)) return {};
    const int nn = static_cast<int>(nics.size());
    const NodeId k = nics[static_cast<std::size_t>(c % nn)];
    std::vector<int> on;
    for (int r : host)
      if (routing.rail_nic(gpu(r)) == k) on.push_back(r);
    std::rotate(on.begin(), on.begin() + (c / nn) % static_cast<int>(on.size()), on.end());
    return on;
  }

  // Whether the host's ranks share its rail NICs unevenly (some NIC serves more of them than another): a
  // server that lost a NIC, whose GPU leaves through a neighbour's NIC.
  bool uneven_nics(const std::vector<int>& host) const {
    std::map<NodeId, int> per;
    for (int r : host) {
      const NodeId k = routing.rail_nic(gpu(r));
      if (k != topo::kNoNode) ++per[k];
    }
    int lo = std::numeric_limits<int>::max(), hi = 0;
    for (const auto& [k, n] : per) lo = std::min(lo, n), hi = std::max(hi, n);
    return !per.empty() && lo != hi;
  }

  // Where channel c enters and leaves a host whose ranks share its NICs unevenly: enter at the first rank on
  // NIC c mod m, leave at the first rank on NIC (c - 1) mod m (m distinct NICs in order of first appearance),
  // so that with m channels (default_channels takes the smallest NIC count of the communicator's hosts, as
  // NCCL aligns its channels) every usable NIC carries one channel in and one out, as NCCL's search puts
  // one channel on each NIC (src/graph/search.cc, NCCL 2.30.7). {-1, -1} when it does not apply.
  std::pair<int, int> uneven_nic_ends(const std::vector<int>& host, int c) const {
    if (host.size() < 2 || !uneven_nics(host)) return {-1, -1};
    std::vector<NodeId> nics;
    std::vector<int> first;
    for (int r : host) {
      const NodeId k = routing.rail_nic(gpu(r));
      if (k != topo::kNoNode && std::find(nics.begin(), nics.end(), k) == nics.end()) {
        nics.push_back(k);
        first.push_back(r);
      }
    }
    const int m = static_cast<int>(nics.size());
    if (m < 2) return {-1, -1};
    return {first[static_cast<std::size_t>(c % m)], first[static_cast<std::size_t>((c + m - 1) % m)]};
  }

  std::vector<std::pair<std::vector<int>, int>> ring_orders(const std::vector<int>& ranks, int nch) const {
    std::vector<std::vector<int>> byhost;
    std::map<int, int> hidx;
    for (int r : ranks) {
      int h = L.host_of_rank[r];
      auto it = hidx.find(h);
      if (it == hidx.end()) {
        it = hidx.emplace(h, static_cast<int>(byhost.size())).first;
        byhost.emplace_back();
      }
      byhost[it->second].push_back(r);
    }
    std::map<std::vector<int>, int> count;
    std::vector<std::vector<int>> order_list;
    // Rail-aligned hops between hosts whose GPUs each have their own rail NIC: NCCL's channel c enters and
    // leaves a host through NIC c (src/graph/search.cc; the last GPU reaches NIC c over NVLink, PXN, NCCL >=
    // 2.12), so every host-to-host hop of a ring stays on one rail of a rail-optimised fabric and never
    // climbs to the spines. fabricsim routes a GPU-to-GPU flow through the sender's own NIC, so the same
    // rail alignment is had by running the ring through every second host backwards: host 2k enters at GPU
    // c and leaves at GPU c-1, host 2k+1 enters at GPU c-1 and leaves at GPU c, and each hop joins two GPUs
    // of the same local index (rail). Every NIC still carries one channel in and one out. With an odd host
    // count the hop that closes the ring changes rail. (Before 2026-11-26 every ring hop between hosts changed
    // rail, so with oversubscribed leaves the rings were congested at the spines, which NCCL's are not:
    // 64-node H100 all_gather 1 GiB at 2:1, 118 GB/s against 212 at 1:1; docs/collectives.md.)
    auto own_rail_nics = [&](const std::vector<int>& h) {
      std::set<NodeId> nics;
      for (int r : h) {
        const NodeId k = routing.rail_nic(gpu(r));
        if (k == topo::kNoNode) return false;
        nics.insert(k);
      }
      return nics.size() == h.size();
    };
    bool zigzag = byhost.size() > 1;
    for (const auto& h : byhost) zigzag = zigzag && h.size() == byhost.front().size() && own_rail_nics(h);
    std::vector<std::vector<int>> mesh = byhost.size() == 1 ? full_mesh_rings(byhost[0], spec.communicator, t, nch) : std::vector<std::vector<int>>{};
    // A host with direct NVLinks that is not a full mesh (a DGX-1): channel c runs NVLink ring c mod R.
    if (byhost.size() == 1 && mesh.empty()) {
      const std::vector<std::vector<int>> nv = nvlink_rings(byhost[0], spec.communicator, t, routing);
      for (int c = 0; c < nch && !nv.empty(); ++c) mesh.push_back(nv[static_cast<std::size_t>(c) % nv.size()]);
    }
    // Per host: its direct NVLinks (nvlink_capacity; empty for switched hosts, full meshes and hosts without
    // them) and the hops the channels' paths put on them so far.
    std::vector<std::vector<int>> nv_caps, nv_load;
    for (const auto& h : byhost) {
      nv_caps.push_back(byhost.size() > 1 ? nvlink_capacity(h, spec.communicator, t) : std::vector<int>{});
      nv_load.emplace_back(nv_caps.back().size(), 0);
    }
    for (int c = 0; c < nch; ++c) {
      std::vector<int> o;
      for (std::size_t hi = 0; hi < byhost.size(); ++hi) {
        const auto& h = byhost[hi];
        int m = static_cast<int>(h.size());
        std::vector<int> rot;
        if (zigzag && hi % 2 == 1)
          for (int i = 0; i < m; ++i) rot.push_back(h[((c - 1 - i) % m + 2 * m) % m]);
        else
          for (int i = 0; i < m; ++i) rot.push_back(h[(i + c) % m]);
        // Enter and leave through GPUs on the channel's NIC when GPUs share NICs (channel_nic_ranks).
        const std::vector<int> on = byhost.size() > 1 ? channel_nic_ranks(h, c) : std::vector<int>{};
        const std::pair<int, int> ends = byhost.size() > 1 ? uneven_nic_ends(h, c) : std::pair<int, int>{-1, -1};
        if (on.size() >= 2) {
          o.push_back(on[0]);
          for (int r : rot)
            if (r != on[0] && r != on[1]) o.push_back(r);
          o.push_back(on[1]);
        } else if (ends.first >= 0) {
          o.push_back(ends.first);
          for (int r : rot)
            if (r != ends.first && r != ends.second) o.push_back(r);
          o.push_back(ends.second);
        } else {
          o.insert(o.end(), rot.begin(), rot.end());
        }
        // On a server with direct NVLinks that is not a full mesh (a DGX-1), the host's part of the ring keeps
        // its first and last rank (where the channel enters and leaves) and goes between them over NVLinks
        // (nvlink_path) when a hop of it has none.
        const std::vector<int>& cap = nv_caps[hi];
        if (byhost.size() > 1 && !cap.empty()) {
          const auto seg = o.end() - m;
          std::vector<int> pos(static_cast<std::size_t>(m));
          for (int i = 0; i < m; ++i)
            pos[static_cast<std::size_t>(i)] =
                static_cast<int>(std::find(h.begin(), h.end(), seg[i]) - h.begin());
          bool nvlink_only = true;
          for (int i = 0; i + 1 < m; ++i)
            nvlink_only = nvlink_only && cap[static_cast<std::size_t>(pos[i] * m + pos[i + 1])] > 0;
          if (!nvlink_only) {
            const std::vector<int> path = nvlink_path(cap, m, pos.front(), pos.back(), nv_load[hi]);
            for (int i = 0; i < static_cast<int>(path.size()); ++i) seg[i] = h[static_cast<std::size_t>(path[i])];
          }
        }
      }
      // A single host's ring is a cycle: rotations give the same edges.
      if (byhost.size() == 1) o = mesh.empty() ? byhost[0] : mesh[static_cast<std::size_t>(c)];
      if (count[o]++ == 0) order_list.push_back(o);
    }
    std::vector<std::pair<std::vector<int>, int>> out;
    for (auto& o : order_list) out.emplace_back(o, count[o]);
    return out;
  }

  // Ring over `ranks`: nsteps steps, each moving chunk_payload per channel from every rank to the next.
  // stage_deps[rank]: transfers that must finish before rank sends its first step. Returns, per rank, the
  // transfers whose completion means the rank has received its last step.
  std::map<int, std::vector<std::uint32_t>> ring(const std::vector<int>& ranks, int nsteps, double total_per_step,
                                                 const std::map<int, std::vector<std::uint32_t>>& stage_deps) {
    std::map<int, std::vector<std::uint32_t>> done;
    const int m = static_cast<int>(ranks.size());
    if (m < 2 || nsteps <= 0) {
      for (int r : ranks) {
        auto it = stage_deps.find(r);
        if (it != stage_deps.end()) done[r] = it->second;
      }
      return done;
    }
    auto deps_of = [&](int r) {
      auto it = stage_deps.find(r);
      return it == stage_deps.end() ? std::vector<std::uint32_t>{} : it->second;
    };
    // Steps of a hop in flight (ring_depth: the calibration's ring_credit_steps at most, NCCL's depth at
    // this step size).
    // LL / LL128 over a fabric whose own per-message latency (its links' latencies, topologies/fabrics.cpp: EFA's
    // 20 us) exceeds NCCL's per-step network latency (models/ring_stream.hpp): the network hops' sends hold them
    // for the step latency only, the rest of the route's latency in flight, NCCL_STEPS steps deep (the slots:
    // prims_ll.h:59, prims_ll128.h:61 @v2.26.2-1; NCCL_STEPS 8, src/include/device.h:24). The fabric and NCCL's
    // own figure (hwLatencies NET Ring: 2.7 us LL, 4.0 us LL128; the built-in defaults) decide, not a fit: fitted
    // step latencies below InfiniBand's 1.6 us do not make InfiniBand a fabric with latency in flight.
    const auto orders = ring_orders(ranks, channels);
    bool in_flight = false;
    if (proto != Protocol::Simple) {
      static const Calibration nccl_defaults = default_calibration();
      const double nccl_net_step_s = nccl_defaults.algo.at({Algorithm::Ring, proto}).net_step_latency_s;
      std::vector<topo::LinkDir> route;
      for (const auto& ow : orders)
        for (int p = 0; p < m && !in_flight; ++p) {
          const NodeId a = gpu(ow.first[p]), b = gpu(ow.first[(p + 1) % m]);
          if (!network_hop(a, b)) continue;
          route.clear();
          routing.compute_route(a, b, route);
          double fabric_s = 0;
          for (topo::LinkDir d : route) fabric_s += t.link(topo::Topology::link_of(d)).latency_s;
          in_flight = fabric_s > nccl_net_step_s;
        }
    }
    auto deferred = [&](NodeId a, NodeId b) { return in_flight && network_hop(a, b); };
    const std::uint32_t depth =
        in_flight ? static_cast<std::uint32_t>(kNcclSteps) : ring_depth(calib, proto, total_per_step / channels);
    int c = 0;
    for (const auto& [order, w] : orders) {
      double chunk = total_per_step / channels;  // per flow; weight w flows share the path
      if (!step) {
        // One transfer per hop carrying all steps. With depth 1 each step pays the hop's own latency, as the
        // step schedule does. With depth D > 1 a step of the step schedule (models/ring_stream.hpp) takes at
        // least the slowest hop's bandwidth time b, the mean hop latency on top of the bandwidth (the data goes
        // round the ring once per m steps, paying every hop's latency once: NCCL's model, src/graph/tuning.cc)
        // and (l_p + b_p) / D for every hop p (D steps of a hop in flight). The merged transfers pay the
        // slowest hop's bandwidth plus nsteps x a per-step latency, so that latency is the larger of the mean
        // and max_p (l_p + b_p) / D - b, with b_p the hop's bandwidth time alone on its route (equal to the
        // step schedule on a ring whose hops are alike; above it where other flows slow the slowest hop).
        std::vector<std::uint32_t> ids(m);
        for (int p = 0; p < m; ++p) {
          int src = order[p], dst = order[(p + 1) % m];
          ids[p] = emit(gpu(src), gpu(dst), chunk, nsteps, w, deps_of(src), c, 0);
          done[dst].push_back(ids[p]);
        }
        if (depth > 1) {
          std::vector<topo::LinkDir> route;
          std::vector<double> lat(m), bw(m), held(m);
          double mean_lat = 0, b_max = 0;
          for (int p = 0; p < m; ++p) {
            const Transfer& x = s.transfers[ids[p]];
            transfer_route(routing, x, route);
            if (in_flight) {
              // The step's whole latency, of which the hop holds `held` (models/ring_stream.hpp).
              Transfer hop = x;
              hop.latency_deferred = deferred(x.src, x.dst);
              const RingStepLatency rl = ring_step_latency(hop, route_latency_s(t, calib, route));
              lat[p] = (rl.pre_s + rl.post_s) / x.steps;
              held[p] = rl.pre_s / x.steps;
            } else {
              lat[p] = x.step_latency_s;
            }
            mean_lat += lat[p] / m;
            double rate = std::numeric_limits<double>::infinity();
            for (topo::LinkDir d : route) {
              const topo::Link& link = t.link(topo::Topology::link_of(d));
              rate = std::min(rate, link.bandwidth_Bps * calib.of(link.kind).bw_efficiency / x.weight);
            }
            bw[p] = std::isfinite(rate) ? x.bytes / rate : 0.0;
            b_max = std::max(b_max, bw[p]);
          }
          double per_step = mean_lat;
          for (int p = 0; p < m; ++p) per_step = std::max(per_step, (lat[p] + bw[p]) / depth - b_max);
          // With latency in flight every step also holds its hop for `held` + its bandwidth time, and the
          // per-step latency replaces the route's floor (the route's latency is in lat).
          if (in_flight)
            for (int p = 0; p < m; ++p) per_step = std::max(per_step, held[p] + bw[p] - b_max);
          for (int p = 0; p < m; ++p) {
            s.transfers[ids[p]].step_latency_s = per_step;
            s.transfers[ids[p]].latency_deferred = in_flight;
          }
        }
      } else if (stream) {
        // Compact form: the step-0 hops of this order (same emit() as below, without dependencies); the
        // runner repeats them for every step with the dependency rule below (models/ring_stream.hpp).
        RingStream::Ring rs;
        for (int p = 0; p < m; ++p) {
          const std::uint32_t id = emit(gpu(order[p]), gpu(order[(p + 1) % m]), chunk, 1, w, {}, c, 0);
          s.transfers[id].latency_deferred = deferred(s.transfers[id].src, s.transfers[id].dst);
          rs.hops.push_back(std::move(s.transfers[id]));
        }
        s.transfers.clear();
        stream->rings.push_back(std::move(rs));
        stream->nsteps = static_cast<std::uint32_t>(nsteps);
        stream->depth = depth;
      } else {
        // A pipelined step (models/ring_stream.hpp) is two transfers: the send (route latency, bandwidth
        // phase) and the rest of the hop's per-step latency at the receiver (a delay, src == dst). Step k of a
        // rank waits for step k-1 of its predecessor to be received (the data it forwards), for its own step
        // k-1 to be sent and for its own step k-depth to be received.
        if (depth <= 1) {
          // No step is sent before the previous one is received: one transfer per step and hop (its latency,
          // then its bandwidth phase). Step k of a rank waits for step k-1 of its predecessor (the data it
          // forwards) and for its own step k-1.
          std::vector<std::vector<std::uint32_t>> ids(static_cast<std::size_t>(nsteps), std::vector<std::uint32_t>(m));
          for (int k = 0; k < nsteps; ++k) {
            for (int p = 0; p < m; ++p) {
              int src = order[p], dst = order[(p + 1) % m];
              std::vector<std::uint32_t> d;
              if (k == 0) {
                d = deps_of(src);
              } else {
                d.push_back(ids[k - 1][(p - 1 + m) % m]);
                d.push_back(ids[k - 1][p]);
              }
              ids[k][p] = emit(gpu(src), gpu(dst), chunk, 1, w, std::move(d), c, k);
            }
          }
          for (int p = 0; p < m; ++p) done[order[(p + 1) % m]].push_back(ids[nsteps - 1][p]);
          c += w;
          continue;
        }
        std::vector<double> post(m), route_lat(m);
        std::vector<Transfer> hop_tmpl(m);
        std::vector<topo::LinkDir> route;
        for (int p = 0; p < m; ++p) {
          const NodeId a = gpu(order[p]), b = gpu(order[(p + 1) % m]);
          Transfer& hop = hop_tmpl[p];
          hop.src = a, hop.dst = b, hop.via = hop_via(a, b);
          transfer_route(routing, hop, route);
          hop.step_latency_s = hop_params(a, b).second * step_latency_scale;
          hop.latency_includes_route = true;
          hop.latency_deferred = deferred(a, b);
          route_lat[p] = route_latency_s(t, calib, route);
          post[p] = ring_step_latency(hop, route_lat[p]).post_s;
        }
        std::vector<std::vector<std::uint32_t>> sent(static_cast<std::size_t>(nsteps), std::vector<std::uint32_t>(m));
        std::vector<std::vector<std::uint32_t>> recv(sent);
        for (int k = 0; k < nsteps; ++k) {
          for (int p = 0; p < m; ++p) {
            int src = order[p], dst = order[(p + 1) % m];
            std::vector<std::uint32_t> d;
            if (k == 0) d = deps_of(src);
            else d.push_back(recv[k - 1][(p - 1 + m) % m]);
            if (k >= 1) d.push_back(sent[k - 1][p]);
            if (k >= static_cast<int>(depth)) d.push_back(recv[k - depth][p]);
            sent[k][p] = emit(gpu(src), gpu(dst), chunk, 1, w, std::move(d), c, k);
            Transfer& x = s.transfers[sent[k][p]];
            // The route's latency only (latency_includes_route); with latency in flight on a network hop, the
            // hop's step latency only, the rest after it (the delay below).
            x.latency_deferred = hop_tmpl[p].latency_deferred;
            x.step_latency_s = x.latency_deferred ? ring_step_latency(hop_tmpl[p], route_lat[p]).pre_s : 0.0;
            Transfer delay;
            delay.src = delay.dst = gpu(dst);
            delay.weight = w;
            delay.step_latency_s = post[p];
            delay.deps = {sent[k][p]};
            delay.channel = c;
            delay.step = k;
            s.transfers.push_back(std::move(delay));
            recv[k][p] = static_cast<std::uint32_t>(s.transfers.size() - 1);
          }
        }
        for (int p = 0; p < m; ++p) done[order[(p + 1) % m]].push_back(recv[nsteps - 1][p]);
      }
      c += w;
    }
    return done;
  }

  // Parent of every host (index 0..H-1; -1 for the root) in the first or second tree of NCCL's double binary
  // tree (src/graph/trees.cc): in the first tree a host's parent is found from the lowest set bit of its index
  // (odd indices are leaves, 0 is the root with one child); the second tree is the first one mirrored
  // (index -> H-1-index) when H is even, shifted by one when H is odd, so a host that is internal in one tree
  // is a leaf in the other and no host forwards for both trees.
  static std::vector<int> double_binary_tree(int H, bool second) {
    auto btree_parent = [&](int r) {
      if (r == 0) return -1;
      int bit = 1;
      while (bit < H && !(bit & r)) bit <<= 1;
      int up = (r ^ bit) | (bit << 1);
      if (up >= H) up = r ^ bit;
      return up;
    };
    std::vector<int> parent(H, -1);
    for (int h = 0; h < H; ++h) {
      if (!second) {
        parent[h] = btree_parent(h);
      } else if (H % 2 == 0) {  // mirror: host h sits at index H-1-h of the first tree
        const int up = btree_parent(H - 1 - h);
        parent[h] = up < 0 ? -1 : H - 1 - up;
      } else {  // shift: host h sits at index (h-1) mod H
        const int up = btree_parent((h - 1 + H) % H);
        parent[h] = up < 0 ? -1 : (up + 1) % H;
      }
    }
    return parent;
  }

  // Pipelined DAG of edges, every edge carrying its payload in K chunks; chunk k of an edge may start when
  // chunk k of each parent edge and its own chunk k-1 are done. Edges must be in topological order.
  struct PEdge {
    NodeId src, dst;
    double payload = 0;  // per flow, all chunks
    double weight = 1;
    std::vector<int> parents;
    std::vector<std::uint32_t> start_deps;
    int channel = 0;
    double first_step_cost = 1.0;  // fraction of the hop's per-step latency the first chunk pays (build_nvls_tree)
    bool join = false;             // a join at src (== dst): each chunk is a join transfer (models/schedule.hpp)
  };
  // A join transfer (models/schedule.hpp) at node `at`.
  std::uint32_t emit_join(NodeId at, std::vector<std::uint32_t> deps, int channel, int stepidx) {
    Transfer x;
    x.src = x.dst = at;
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    x.deps = std::move(deps);
    x.channel = channel;
    x.step = stepidx;
    s.transfers.push_back(std::move(x));
    return static_cast<std::uint32_t>(s.transfers.size() - 1);
  }
  // What `children` edges that all wait for `parents` list as their parents: `parents` itself, or, where that
  // takes more than kJoinAbove dependencies per chunk, one join edge at `at` that waits for them (added to
  // `edges`, which the children must follow): P + C dependencies in place of P x C. Each chunk of every child
  // then starts when it would have without the join, and the engines start the children in the same order
  // (they become ready as the join finishes, with nothing in between); SHARP on one switch of 20,000 hosts
  // listed 4 x 10^8 dependencies per chunk. Below the bound (an NVLink domain of 72 GPUs: 5,184; a SHARP leaf)
  // the schedule keeps its plain form, every transfer a hop.
  static constexpr std::size_t kJoinAbove = std::size_t{1} << 16;
  static std::vector<int> fan_in(std::vector<PEdge>& edges, NodeId at, std::vector<int> parents, std::size_t children,
                                 int channel) {
    if (parents.size() * children <= kJoinAbove) return parents;
    PEdge j{at, at, 0.0, 1.0, std::move(parents), {}, channel};
    j.join = true;
    edges.push_back(std::move(j));
    return {static_cast<int>(edges.size() - 1)};
  }
  // Returns each edge's completing transfer.
  std::vector<std::uint32_t> pipeline(const std::vector<PEdge>& edges, std::uint32_t K) {
    const std::size_t E = edges.size();
    std::vector<std::uint32_t> last(E);
    if (step || K == 1) {
      std::vector<std::uint32_t> prev(E), cur(E);
      for (std::uint32_t k = 0; k < K; ++k) {
        for (std::size_t e = 0; e < E; ++e) {
          const PEdge& pe = edges[e];
          std::vector<std::uint32_t> d;
          for (int p : pe.parents) d.push_back(cur[p]);
          if (k == 0) d.insert(d.end(), pe.start_deps.begin(), pe.start_deps.end());
          else d.push_back(prev[e]);
          if (pe.join) {
            cur[e] = emit_join(pe.src, std::move(d), pe.channel, static_cast<int>(k));
            continue;
          }
          cur[e] = emit(pe.src, pe.dst, pe.payload / K, 1, pe.weight, std::move(d), pe.channel, static_cast<int>(k), k == 0 ? pe.first_step_cost : 1.0);
        }
        std::swap(prev, cur);
      }
      return prev;
    }
    // Phase: head (chunk 0) / body (chunks 1..K-2 merged) / tail (chunk K-1). Exact on uniform paths:
    // heads carry the pipeline fill, bodies stream concurrently, tails wait for their parents' tails.
    std::vector<std::uint32_t> head(E), tail(E);
    for (std::size_t e = 0; e < E; ++e) {
      const PEdge& pe = edges[e];
      std::vector<std::uint32_t> d(pe.start_deps);
      for (int p : pe.parents) d.push_back(head[p]);
      if (pe.join) {
        head[e] = emit_join(pe.src, std::move(d), pe.channel, 0);
        continue;
      }
      head[e] = emit(pe.src, pe.dst, pe.payload / K, 1, pe.weight, std::move(d), pe.channel, 0, pe.first_step_cost);
    }
    for (std::size_t e = 0; e < E; ++e) {
      const PEdge& pe = edges[e];
      std::uint32_t before = head[e];
      if (K > 2 && !pe.join)
        before = emit(pe.src, pe.dst, pe.payload / K, K - 2, pe.weight, {head[e]}, pe.channel, 1);
      std::vector<std::uint32_t> d{before};
      for (int p : pe.parents) d.push_back(tail[p]);
      if (pe.join) {
        tail[e] = emit_join(pe.src, std::move(d), pe.channel, static_cast<int>(K - 1));
        continue;
      }
      tail[e] = emit(pe.src, pe.dst, pe.payload / K, 1, pe.weight, std::move(d), pe.channel, static_cast<int>(K - 1));
    }
    return tail;
  }

  double max_payload(const std::vector<PEdge>& edges) const {
    double m = 0;
    for (const auto& e : edges) m = std::max(m, e.payload);
    return m;
  }

  std::vector<int> all_ranks() const {
    std::vector<int> v(L.n);
    for (int i = 0; i < L.n; ++i) v[i] = i;
    return v;
  }

  // ---- algorithms ---------------------------------------------------------------------------------

  void build_ring() {
    const double S = static_cast<double>(spec.bytes);
    const int n = L.n;
    switch (spec.op) {
      case Op::AllReduce: ring(all_ranks(), 2 * (n - 1), S / n, {}); break;
      case Op::AllGather:
      case Op::ReduceScatter: ring(all_ranks(), n - 1, S / n, {}); break;
      case Op::Broadcast:
      case Op::Reduce: build_chain(); break;
      default: break;
    }
  }

  // Broadcast (root -> along the ring) and reduce (along the ring -> root), pipelined in chunks.
  void build_chain() {
    const int n = L.n;
    if (n < 2) return;
    const double S = static_cast<double>(spec.bytes);
    std::vector<PEdge> edges;
    int c = 0;
    for (const auto& [order, w] : ring_orders(all_ranks(), channels)) {
      int rp = static_cast<int>(std::find(order.begin(), order.end(), spec.root) - order.begin());
      std::vector<int> chain;
      for (int i = 0; i < n; ++i) chain.push_back(order[(rp + i) % n]);
      if (spec.op == Op::Reduce) {  // data flows toward the root: chain[n-1] -> ... -> chain[0]
        std::reverse(chain.begin(), chain.end());
      }
      int base = static_cast<int>(edges.size());
      for (int i = 0; i + 1 < n; ++i) {
        PEdge e{gpu(chain[i]), gpu(chain[i + 1]), S / channels, static_cast<double>(w), {}, {}, c};
        if (i > 0) e.parents.push_back(base + i - 1);
        edges.push_back(e);
      }
      c += w;
    }
    pipeline(edges, chunk_count(max_payload(edges)));
  }

  // Double binary tree: an intra-host chain to the host's first rank, a binary tree over hosts; the second
  // tree mirrors the host order. Each tree carries half the data; reduce up, broadcast down, pipelined.
  void build_tree() {
    const int n = L.n;
    if (n < 2) return;
    const double S = static_cast<double>(spec.bytes);
    const int H = static_cast<int>(L.hosts.size());
    // NCCL's double binary tree over hosts (src/graph/trees.cc): in the first tree a host's parent is
    // found from the lowest set bit of its index (odd indices are leaves, 0 is the root with one child);
    // the second tree is the first one mirrored (index -> H-1-index) when H is even, shifted by one when
    // H is odd, so a host that is internal in one tree is a leaf in the other and no host forwards for
    // both trees.
    // One host with direct NVLinks that is not a full mesh (a DGX-1): channel c's chain follows NVLink ring
    // c mod R (nvlink_rings), as NCCL's tree search, like its ring search, takes NVLink paths first.
    bool relayed_rings = false;
    const std::vector<std::vector<int>> nv =
        H == 1 ? nvlink_rings(L.hosts[0], spec.communicator, t, routing, &relayed_rings) : std::vector<std::vector<int>>{};
    // Several such servers: in each, channel c's chain starts at its head (below) and goes over NVLinks, as NCCL's
    // tree search builds a channel NET n -> GPU a -> GPU b -> ... over NVLink paths first with the free end of a
    // tree (src/graph/search.cc ncclTopoSearchRecGpu at v2.26.2-1: NCCL_TOPO_PATTERN_BALANCED_TREE goes back to
    // the NIC from the first two GPUs, whose next GPU is sorted by its distance to the NIC) and connect.cc
    // ncclTopoPreset chains the server's ranks in that order (tree.up = intra[i-1], tree.down[0] = intra[i+1]).
    // So the chain is the head, the other GPU of the channel's NIC (channel_nic_ranks) when an NVLink joins them,
    // then the remaining GPUs over NVLinks, each channel preferring the links the earlier ones used least
    // (nvlink_path). Both trees of a channel share its chain (ncclTopoPreset duplicates the channels). Where
    // no such path exists the chain stays in rank order from the head (its hops without NVLink over PCIe).
    std::vector<std::vector<std::vector<int>>> chains(static_cast<std::size_t>(H));
    if (H > 1)
      for (int h = 0; h < H; ++h) {
        const std::vector<int>& hr = L.hosts[static_cast<std::size_t>(h)];
        const std::vector<int> cap = nvlink_capacity(hr, spec.communicator, t);
        if (cap.empty()) continue;
        const int m = static_cast<int>(hr.size());
        std::vector<int> load(cap.size(), 0);
        auto pos = [&](int r) { return static_cast<int>(std::find(hr.begin(), hr.end(), r) - hr.begin()); };
        for (int c = 0; c < channels; ++c) {
          const std::vector<int> on = channel_nic_ranks(hr, c);
          const int head = on.empty() ? c % m : pos(on[0]);
          const int partner = on.size() >= 2 ? pos(on[1]) : -1;
          const std::vector<int> path = nvlink_path(cap, m, head, -1, load, partner);
          std::vector<int> chain;
          for (int k : path) chain.push_back(hr[static_cast<std::size_t>(k)]);
          chains[static_cast<std::size_t>(h)].push_back(chain);
        }
      }
    // One host whose rings need relayed hops (nvlink_rings): NCCL's tree search is a search of its own, for a chain
    // that does not close (src/graph/search.cc, NCCL_TOPO_PATTERN_BALANCED_TREE without backToFirstRank), at
    // NVLink paths first, so where a chain of NVLink hops alone exists the tree takes it: channel c's chain from
    // the first rank (from rank c mod m on) that has one (nvlink_path, each channel preferring the links the
    // earlier ones used least), with no relayed hop; else the chains follow the relayed rings.
    if (H == 1 && relayed_rings) {
      const std::vector<int>& hr = L.hosts[0];
      const std::vector<int> cap = nvlink_capacity(hr, spec.communicator, t);
      const int m = static_cast<int>(hr.size());
      std::vector<int> load(cap.size(), 0);
      std::vector<std::vector<int>> found;
      for (int c = 0; c < channels && !cap.empty(); ++c) {
        std::vector<int> path;
        for (int d = 0; d < m && path.empty(); ++d) path = nvlink_path(cap, m, (c + d) % m, -1, load);
        if (path.empty()) break;
        std::vector<int> chain;
        for (int k : path) chain.push_back(hr[static_cast<std::size_t>(k)]);
        found.push_back(chain);
      }
      if (static_cast<int>(found.size()) == channels) chains[0] = std::move(found);
    }
    auto chain_of = [&](int h, int c) -> const std::vector<int>* {
      const auto& v = chains[static_cast<std::size_t>(h)];
      if (v.empty() || v[static_cast<std::size_t>(c)].empty()) return nullptr;
      return &v[static_cast<std::size_t>(c)];
    };
    auto host_ranks = [&](int h, int c) -> const std::vector<int>& {
      if (const auto* ch = chain_of(h, c)) return *ch;
      return nv.empty() ? L.hosts[h] : nv[static_cast<std::size_t>(c) % nv.size()];
    };
    auto host_tree = [&](bool second, int c) {
      const std::vector<int> parent = double_binary_tree(H, second);
      // Where GPUs share NICs, the head is a GPU on the channel's NIC (channel_nic_ranks); an NVLink chain
      // starts at its head.
      std::vector<int> rp(n, -1);
      std::vector<std::size_t> head_pos(H);
      for (int h = 0; h < H; ++h) {
        const auto& rs = host_ranks(h, c);
        head_pos[h] = c % rs.size();
        const std::vector<int> on = H > 1 ? channel_nic_ranks(rs, c) : std::vector<int>{};
        if (chain_of(h, c)) head_pos[h] = 0;
        else if (!on.empty())
          head_pos[h] = static_cast<std::size_t>(std::find(rs.begin(), rs.end(), on[0]) - rs.begin());
      }
      auto head = [&](int h) { return host_ranks(h, c)[head_pos[h]]; };
      for (int h = 0; h < H; ++h) {
        const auto& rs = host_ranks(h, c);
        const std::size_t m = rs.size();
        for (std::size_t i = 1; i < m; ++i) rp[rs[(i + head_pos[h]) % m]] = rs[(i - 1 + head_pos[h]) % m];
        if (parent[h] < 0) continue;
        // Which GPU of the parent server takes the child server: on a server with an NVLink chain (DGX-1), NCCL's
        // tree pattern NCCL_TOPO_PATTERN_BALANCED_TREE ("Tree parent + one child on first GPU, second child on
        // second GPU", src/include/graph.h; the pattern init.cc gives the tree graph, which search.cc trades for
        // NCCL_TOPO_PATTERN_TREE only from compute capability 9.0) puts the child of type 0 on the chain's second
        // GPU (src/graph/connect.cc ncclTopoPreset: treeToChild0 = intra[1], treeToChild1 = intra[0];
        // connectTrees), all at v2.26.2-1. The type is the btree's (src/graph/trees.cc ncclGetBtree: type 0 when
        // the child's index is below its parent's), read in the second tree's mirrored or shifted indices
        // (ncclGetDtree). Servers without a chain keep both children on the head (unchanged).
        const auto* pc = chain_of(parent[h], c);
        if (pc && pc->size() >= 2) {
          auto index = [&](int x) { return !second ? x : H % 2 == 0 ? H - 1 - x : (x - 1 + H) % H; };
          const bool type0 = index(h) < index(parent[h]);
          rp[head(h)] = type0 ? (*pc)[1] : head(parent[h]);
        } else {
          rp[head(h)] = head(parent[h]);
        }
      }
      return rp;
    };
    // Each (tree, channel) carries S / (2 * channels); identical structures merge into one weighted tree.
    std::map<std::vector<int>, int> count;
    std::vector<std::vector<int>> trees;
    for (int c = 0; c < channels; ++c)
      for (bool mirror : {false, true}) {
        std::vector<int> rp = host_tree(mirror, c);
        if (count[rp]++ == 0) trees.push_back(rp);
      }
    std::vector<PEdge> edges;
    for (std::size_t ti = 0; ti < trees.size(); ++ti) {
      const auto& rp = trees[ti];
      std::vector<std::vector<int>> kids(n);
      int root = -1;
      for (int r = 0; r < n; ++r) {
        if (rp[r] < 0) root = r;
        else kids[rp[r]].push_back(r);
      }
      // pre-order (parents first) for down edges; its reverse (children first) for up edges
      std::vector<int> post, pre, st{root};
      while (!st.empty()) {
        int v = st.back();
        st.pop_back();
        pre.push_back(v);
        for (int k : kids[v]) st.push_back(k);
      }
      post.assign(pre.rbegin(), pre.rend());
      const double payload = S / 2.0 / channels;
      const double w = count[rp];
      std::vector<int> up_edge(n, -1), down_edge(n, -1);
      for (int v : post) {
        if (v == root) continue;
        PEdge e{gpu(v), gpu(rp[v]), payload, w, {}, {}, static_cast<int>(ti)};  // up
        for (int k : kids[v]) e.parents.push_back(up_edge[k]);
        up_edge[v] = static_cast<int>(edges.size());
        edges.push_back(e);
      }
      for (int v : pre) {
        if (v == root) continue;
        PEdge e{gpu(rp[v]), gpu(v), payload, w, {}, {}, static_cast<int>(ti)};
        if (rp[v] == root) {
          for (int k : kids[root]) e.parents.push_back(up_edge[k]);
        } else {
          e.parents.push_back(down_edge[rp[v]]);
        }
        down_edge[v] = static_cast<int>(edges.size());
        edges.push_back(e);
      }
    }
    pipeline(edges, chunk_count(max_payload(edges)));
  }

  // In-network reduction tree (NVLS through NVSwitches, CollNet through SHARP switches): members send up
  // to their aggregation leaf, leaves to the root when there are several, the root sends results down.
  // up/down payloads are per member; leaf<->root payloads are given per leaf by the callbacks.
  template <class LeafUp, class LeafDown>
  std::vector<std::uint32_t> innet(const std::vector<int>& members, const std::vector<NodeId>& leaf_of, NodeId root,
                                   double up_payload, double down_payload, LeafUp leaf_up, LeafDown leaf_down,
                                   const std::map<int, std::vector<std::uint32_t>>& start, double weight,
                                   std::uint32_t chunks = 0) {
    std::vector<PEdge> edges;
    std::map<NodeId, std::vector<int>> leaf_members;
    for (std::size_t i = 0; i < members.size(); ++i) leaf_members[leaf_of[i]].push_back(static_cast<int>(i));
    std::map<NodeId, std::vector<int>> up_into;  // aggregation node -> up edges into it
    for (std::size_t i = 0; i < members.size(); ++i) {
      PEdge e{gpu(members[i]), leaf_of[i], up_payload, weight, {}, {}, 0};
      auto it = start.find(members[i]);
      if (it != start.end()) e.start_deps = it->second;
      up_into[leaf_of[i]].push_back(static_cast<int>(edges.size()));
      edges.push_back(e);
    }
    const bool two_level = leaf_members.size() > 1 || leaf_members.begin()->first != root;
    std::map<NodeId, int> leaf_down_edge;
    if (two_level) {
      for (const auto& [leaf, ms] : leaf_members) {
        PEdge e{leaf, root, leaf_up(static_cast<int>(ms.size())), weight, up_into[leaf], {}, 0};
        up_into[root].push_back(static_cast<int>(edges.size()));
        edges.push_back(e);
      }
      const std::vector<int> at_root = fan_in(edges, root, up_into[root], leaf_members.size(), 0);
      for (const auto& [leaf, ms] : leaf_members) {
        PEdge e{root, leaf, leaf_down(static_cast<int>(ms.size())), weight, at_root, {}, 0};
        leaf_down_edge[leaf] = static_cast<int>(edges.size());
        edges.push_back(e);
      }
    }
    // One leaf, the root: every member's down edge waits for all the up edges.
    const std::vector<int> reduced =
        two_level ? std::vector<int>{} : fan_in(edges, root, up_into[root], members.size(), 0);
    std::vector<int> member_down(members.size());
    for (std::size_t i = 0; i < members.size(); ++i) {
      PEdge e{leaf_of[i], gpu(members[i]), down_payload, weight, {}, {}, 0};
      if (two_level) e.parents.push_back(leaf_down_edge[leaf_of[i]]);
      else e.parents = reduced;
      member_down[i] = static_cast<int>(edges.size());
      edges.push_back(e);
    }
    auto last = pipeline(edges, chunks > 0 ? chunks : chunk_count(max_payload(edges)));
    std::vector<std::uint32_t> out;
    for (int e : member_down) out.push_back(last[e]);
    return out;
  }

  void build_nvls() {
    const int n = L.n;
    if (n < 2) return;
    const double S = static_cast<double>(spec.bytes);
    std::vector<NodeId> leaf_of;
    for (int r = 0; r < n; ++r) leaf_of.push_back(nvls_switch_of(t, gpu(r)));
    NodeId root = common_root(t, leaf_of, [](const topo::Node& nd) { return nd.kind == NodeKind::NvSwitch && nd.nvls; });
    if (root == topo::kNoNode) {  // several NVLink domains: NVLS with SHARP between them (why_not_applicable)
      build_nvls_sharp();
      return;
    }
    algo_eff = calib.factors.nvls_efficiency;
    // NCCL's NVLS kernel works in loops of channels x heads x chunk bytes (tuner.hpp nccl_nvls_loops); each
    // loop costs the NVLS per-step latency. The pipeline gets one chunk per loop (at most
    // max_pipeline_chunks, each then standing for several loops and paying their latencies).
    const NvlsLoops nl = nccl_nvls_loops(S, nccl_nvls_channels_with_env(nccl_nvls_channels(t.node(gpu(0)).model), spec.nccl_env), n);
    const std::uint32_t K = static_cast<std::uint32_t>(std::clamp(nl.loops, 1.0, calib.factors.max_pipeline_chunks));
    step_latency_scale = nl.loops / K;
    const double nn = n;
    switch (spec.op) {
      case Op::AllReduce:
        // multimem reduce: every rank's full buffer goes up and the reduced buffer comes down.
        innet(all_ranks(), leaf_of, root, S, S, [&](int) { return S; }, [&](int) { return S; }, {}, 1.0, K);
        break;
      case Op::AllGather:
        // multicast store: each rank pushes its block, receives the n-1 others.
        innet(all_ranks(), leaf_of, root, S / nn, S * (nn - 1) / nn, [&](int m) { return m * S / nn; },
              [&](int m) { return (nn - m) * S / nn; }, {}, 1.0, K);
        break;
      case Op::ReduceScatter:
        // multimem reduce of the n-1 blocks owned by others, each rank receives its reduced block.
        innet(all_ranks(), leaf_of, root, S * (nn - 1) / nn, S / nn, [&](int m) { return (nn - m) * S / nn; },
              [&](int m) { return m * S / nn; }, {}, 1.0, K);
        break;
      default: break;
    }
  }

  // NCCL's NVLS_TREE all_reduce across hosts (NCCL >= 2.18; src/device/all_reduce.h, RunWorkColl for
  // NCCL_ALGO_NVLS_TREE at v2.26.2-1: scatter to the NVLS heads, tree reduce/broadcast between hosts, gather;
  // read, not copied): inside each host NVLink SHARP reduces shard k (S/g) of every
  // rank's buffer into head k (one head per local GPU, each with its own rail NIC), head k of every host
  // all-reduces its shard over NCCL's double binary tree between hosts (two trees, half the shard each: up
  // then down), and each head multicasts the result back through the NVSwitch. One pipeline: a chunk
  // moves up, across the trees and down while the next follows. NVLink bytes per GPU are those of the
  // single-host NVLS all_reduce (S up, S down: (g-1)/g S of reduce input and S/g of multicast up; S/g of
  // reduced shard and (g-1)/g S of multicast down), at nvls_efficiency of nominal NVLink as NVLS; the tree
  // hops are GPU-to-GPU over the heads' rail NICs at network_efficiency.
  void build_nvls_tree() {
    if (L.n < 2) return;
    const double S = static_cast<double>(spec.bytes);
    const int H = static_cast<int>(L.hosts.size());
    const int g = static_cast<int>(L.hosts[0].size());
    const double shard = S / g;
    // NCCL's NVLS_TREE loop: nvls channels x heads x a chunk that differs from NVLS's (tuner.hpp
    // nccl_nvls_tree_loops).
    const NvlsLoops nl = nccl_nvls_tree_loops(S, nccl_nvls_channels_with_env(nccl_nvls_channels(t.node(gpu(0)).model), spec.nccl_env), g, H);
    const std::uint32_t K = static_cast<std::uint32_t>(std::clamp(nl.loops, 1.0, calib.factor("max_pipeline_chunks")));
    step_latency_scale = nl.loops / K;
    // [NCCL-T] ncclTopoTuneModel's NVLS_TREE latency, intraLat + 2 log2(nNodes) x interLat: the network part
    // once per call (the NvlsTree row's net_step_latency per tree level and direction), not per pipeline chunk:
    // charged per chunk (64 KiB chunks on 8 nodes: 128 loops per GiB) it serialised 2.7 ms of latency into a
    // 1 GiB call, 8.6 ms simulated against 5.6 ms measured on 8 H100 nodes.
    s.fixed_latency_s += 2 * std::ceil(std::log2(static_cast<double>(H))) * ap.net_step_latency_s;
    nvls_hosts(K, [&](int k, const std::vector<std::vector<int>>& rs, auto& add, auto&, auto& head, auto& ready) {
      // Trees between the heads of shard k: what each head waits for before multicasting (per tree: the up edges
      // of its children when it is the root, else the down edge into it).
      for (bool second : {false, true}) {
        const std::vector<int> parent = double_binary_tree(H, second);
        std::vector<std::vector<int>> kids(H);
        int root = -1;
        for (int h = 0; h < H; ++h) {
          if (parent[h] < 0) root = h;
          else kids[parent[h]].push_back(h);
        }
        std::vector<int> pre, st{root};
        while (!st.empty()) {
          const int v = st.back();
          st.pop_back();
          pre.push_back(v);
          for (int c : kids[v]) st.push_back(c);
        }
        std::vector<int> up_e(H, -1), down_e(H, -1);
        for (auto it = pre.rbegin(); it != pre.rend(); ++it) {  // children first
          const int v = *it;
          if (v == root) continue;
          std::vector<int> par{rs[v][k]};
          for (int c : kids[v]) par.push_back(up_e[c]);
          up_e[v] = add(head(v, k), head(parent[v], k), shard / 2, std::move(par), k);
        }
        std::vector<int> at_root{rs[root][k]};
        for (int c : kids[root]) at_root.push_back(up_e[c]);
        for (int v : pre) {
          if (v == root) continue;
          down_e[v] = add(head(parent[v], k), head(v, k), shard / 2,
                          parent[v] == root ? at_root : std::vector<int>{down_e[parent[v]]}, k);
        }
        for (int h = 0; h < H; ++h) {
          auto& r = ready[h][k];
          if (h == root) r.insert(r.end(), at_root.begin(), at_root.end());
          else r.push_back(down_e[h]);
        }
      }
    });
  }

  // NCCL's NVLS across nodes with CollNet (NCCL >= 2.18 with the SHARP plugin; src/graph/connect.cc connectNvls
  // at v2.26.2-1 gives each head rank a network peer, nvls.out, when collNetSupport; src/device/all_reduce.h
  // RunWorkColl<..., NCCL_ALGO_NVLS, ...> without oneNode: the reduce warps send the NVLS-reduced shard to the
  // network, the broadcast warps multicast what comes back): NVLS_TREE's pipeline inside each host, with one
  // SHARP in-network all_reduce of shard k among the heads k of all hosts (one rail) in place of the trees.
  void build_nvls_sharp() {
    if (L.n < 2) return;
    const double S = static_cast<double>(spec.bytes);
    const int H = static_cast<int>(L.hosts.size());
    const int g = static_cast<int>(L.hosts[0].size());
    const double shard = S / g;
    // NCCL cuts it as single-node NVLS (src/enqueue.cc calcCollChunking at v2.26.2-1; the 32 KiB cap for an NVLS
    // busBw below 150 GB/s is not modelled).
    const NvlsLoops nl = nccl_nvls_loops(S, nccl_nvls_channels_with_env(nccl_nvls_channels(t.node(gpu(0)).model), spec.nccl_env), g);
    const std::uint32_t K = static_cast<std::uint32_t>(std::clamp(nl.loops, 1.0, calib.factor("max_pipeline_chunks")));
    step_latency_scale = nl.loops / K;
    // [NCCL-T] ncclTopoTuneModel's NVLS latency across nodes: intraLat + interLat, the network part once per call
    // (the Nvls row's net_step_latency, hwLatencies[NET][NVLS][Simple] = 18 us); the SHARP hops pay the NVLS
    // per-loop latency per chunk (hop_params), as CollNet's and NVLS_TREE's do.
    s.fixed_latency_s += ap.net_step_latency_s;
    nvls_sharp = true;
    nvls_hosts(K, [&](int k, const std::vector<std::vector<int>>& rs, auto& add, auto& join, auto& head, auto& ready) {
      std::vector<NodeId> leaves(H);
      for (int h = 0; h < H; ++h) leaves[h] = sharp_leaf_of(t, routing, head(h, k));
      const NodeId root = common_root(t, leaves, [](const topo::Node& nd) { return is_fabric_switch(nd.kind) && nd.sharp; });
      std::map<NodeId, std::vector<int>> into;  // aggregation switch -> edges into it
      for (int h = 0; h < H; ++h) into[leaves[h]].push_back(add(head(h, k), leaves[h], shard, {rs[h][k]}, k));
      std::map<NodeId, int> down;  // leaf -> the reduced shard reaching it
      std::vector<int> reduced;    // one switch, the root: what every head waits for (all the heads' shards)
      if (into.size() > 1 || into.begin()->first != root) {
        std::vector<int> at_root;
        for (const auto& [leaf, e] : into) at_root.push_back(add(leaf, root, shard, e, k));
        at_root = join(root, std::move(at_root), into.size(), k);
        for (const auto& [leaf, e] : into) down[leaf] = add(root, leaf, shard, at_root, k);
      } else {
        reduced = join(root, into[root], static_cast<std::size_t>(H), k);
      }
      for (int h = 0; h < H; ++h) {
        const std::vector<int> par = down.count(leaves[h]) ? std::vector<int>{down[leaves[h]]} : reduced;
        ready[h][k].push_back(add(leaves[h], head(h, k), shard, par, k));
      }
    });
  }

  // NVLS inside each host around an inter-host all_reduce of every shard (NCCL's NVLS_TREE, and its NVLS with
  // CollNet): `inter(k, rs, add, join, head, ready)` adds the inter-host edges of shard k, which start after rs[h][k]
  // (the reduced shard k reaching head k of host h), and fills ready[h][k] with the edges head k waits for before
  // multicasting the result.
  template <class Inter>
  void nvls_hosts(std::uint32_t K, Inter inter) {
    const double S = static_cast<double>(spec.bytes);
    const int H = static_cast<int>(L.hosts.size());
    const int g = static_cast<int>(L.hosts[0].size());
    const double shard = S / g;
    std::vector<NodeId> sw(H);
    for (int h = 0; h < H; ++h) {
      std::vector<NodeId> l1;
      for (int r : L.hosts[h]) l1.push_back(nvls_switch_of(t, gpu(r)));
      sw[h] = common_root(t, l1, [](const topo::Node& nd) { return nd.kind == NodeKind::NvSwitch && nd.nvls; });
    }
    // The per-loop cost on the first loop's path: NCCL's NVLS_TREE kernel runs NVLS's four warp groups per
    // channel (scatter, reduce, broadcast, gather; NVIDIA/nccl src/device/all_reduce.h
    // RunWorkColl<..., NCCL_ALGO_NVLS_TREE, ...> at v2.26.2-1, src/collectives/device/all_reduce.h at v2.18.1-1,
    // read, not copied), so a loop crosses the single-host NVLS kernel's two hand-offs inside a host, scatter ->
    // reduce and broadcast -> gather, which the single-host schedule (build_nvls) charges once each, on its up
    // and down edges. Here each of them is two edges (through the switch to the head and back), and the reduce
    // and broadcast warps hand the tree (or SHARP) hops to the network proxy, whose latency the caller charges per
    // call, as NCCL's model does. So the first chunk pays the cost on the first edge of the reduce (rank -> switch) and
    // the last of the broadcast (switch -> rank) only: charged on all six edges, a one-loop call (up to 8 MiB
    // on 2 x 8 H100) paid it six times in series (XE9680 1-8 MiB 18-24 % slow). Every later chunk pays it on
    // every edge: in the schedule a chunk's per-step latency runs before its bytes, so the per-loop cost is
    // also what bounds each edge's rate in the single-host fit; taken off the head's edges for every chunk, the
    // shard bytes overlapped the other edges' latency and the plateau rose (XE9680 16 GiB +4.5 -> +9.3 %).
    std::vector<PEdge> edges;
    auto add = [&](NodeId a, NodeId b, double payload, std::vector<int> parents, int ch, double first_step_cost = 0.0) {
      edges.push_back(PEdge{a, b, payload, 1.0, std::move(parents), {}, ch, first_step_cost});
      return static_cast<int>(edges.size() - 1);
    };
    auto join = [&](NodeId at, std::vector<int> parents, std::size_t children, int ch) {
      return fan_in(edges, at, std::move(parents), children, ch);
    };
    auto head = [&](int h, int k) { return gpu(L.hosts[h][k]); };
    // Reduce input: every rank sends the g-1 shards it does not head to the switch.
    std::vector<std::vector<int>> up(H);
    for (int h = 0; h < H; ++h)
      for (int k = 0; k < g; ++k) up[h].push_back(add(head(h, k), sw[h], S * (g - 1) / g, {}, k, 1.0));
    // The reduced shard k reaches head k.
    std::vector<std::vector<int>> rs(H, std::vector<int>(g));
    for (int h = 0; h < H; ++h)
      for (int k = 0; k < g; ++k) rs[h][k] = add(sw[h], head(h, k), shard, up[h], k);
    std::vector<std::vector<std::vector<int>>> ready(H, std::vector<std::vector<int>>(g));
    for (int k = 0; k < g; ++k) inter(k, rs, add, join, head, ready);
    // Head k multicasts its all-reduced shard; every rank receives the g-1 shards it does not head.
    std::vector<std::vector<int>> ag(H, std::vector<int>(g));
    for (int h = 0; h < H; ++h)
      for (int k = 0; k < g; ++k) ag[h][k] = add(head(h, k), sw[h], shard, ready[h][k], k);
    for (int h = 0; h < H; ++h)
      for (int k = 0; k < g; ++k) add(sw[h], head(h, k), S * (g - 1) / g, ag[h], k, 1.0);
    pipeline(edges, K);
  }

  // CollNet (SHARP): intra-host reduce-scatter ring, per rail group an in-network all_reduce of the
  // 1/g shard through the SHARP switches, intra-host all_gather ring.
  void build_collnet() {
    const int n = L.n;
    if (n < 2) return;
    const double S = static_cast<double>(spec.bytes);
    const int g = static_cast<int>(L.hosts[0].size());
    std::map<int, std::vector<std::uint32_t>> after_rs;
    for (const auto& h : L.hosts) {
      auto d = ring(h, g - 1, S / g, {});
      for (auto& [r, v] : d) after_rs[r] = v;
    }
    algo_eff = calib.factors.collnet_efficiency;
    // [NCCL-T] COLLNET_DIRECT's network latency (interLat, hwLatencies[NET][COLLNET_DIRECT][Simple] = 31 us) once
    // per call (tuner.cpp); the SHARP hops below pay the per-step latency per chunk (hop_params).
    s.fixed_latency_s += ap.net_step_latency_s;
    std::map<int, std::vector<std::uint32_t>> after_ar;
    for (int k = 0; k < g; ++k) {
      std::vector<int> members;
      std::vector<NodeId> leaves;
      for (const auto& h : L.hosts) {
        members.push_back(h[k]);
        leaves.push_back(sharp_leaf_of(t, routing, gpu(h[k])));
      }
      NodeId root = common_root(t, leaves, [](const topo::Node& nd) { return is_fabric_switch(nd.kind) && nd.sharp; });
      const double shard = S / g;
      auto done = innet(members, leaves, root, shard, shard, [&](int) { return shard; }, [&](int) { return shard; },
                        after_rs, 1.0);
      for (std::size_t i = 0; i < members.size(); ++i) after_ar[members[i]] = {done[i]};
    }
    algo_eff = 1.0;
    for (const auto& h : L.hosts) ring(h, g - 1, S / g, after_ar);
  }

  // PAT (one rank per host): Bruck-style log2(n) steps; all_gather doubles the blocks sent at each
  // step, reduce_scatter runs the same steps in reverse. At phase fidelity each step's transfers are marked as
  // one lockstep wave, which the engine runs as one flow per link-disjoint set (docs/engine.md).
  void build_pat() {
    const int n = L.n;
    if (n < 2) return;
    const double block = static_cast<double>(spec.bytes) / n;
    algo_eff = calib.factors.pat_efficiency;
    std::vector<int> dist;
    for (int d = 1; d < n; d *= 2) dist.push_back(d);
    if (spec.op == Op::ReduceScatter) std::reverse(dist.begin(), dist.end());
    std::vector<std::uint32_t> sent(n), recvd(n);
    for (std::size_t k = 0; k < dist.size(); ++k) {
      int d = dist[k];
      int blocks = std::min(d, n - d);
      std::vector<std::uint32_t> ns(n), nr(n);
      for (int r = 0; r < n; ++r) {
        int dst = (r - d + n) % n;
        std::vector<std::uint32_t> dp;
        if (k > 0) dp = {sent[r], recvd[r]};
        ns[r] = emit(gpu(r), gpu(dst), blocks * block, 1, 1.0, std::move(dp), 0, static_cast<int>(k));
        // Phase fidelity: step k is a bulk-synchronous wave (docs/engine.md, "Lockstep waves").
        if (!step) s.transfers[ns[r]].lockstep = static_cast<std::int32_t>(k);
        nr[dst] = ns[r];
      }
      sent = ns;
      recvd = nr;
    }
  }

  double a2a_bytes(int i, int j) const {
    if (!spec.matrix.empty()) return static_cast<double>(spec.matrix[i][j]);
    return static_cast<double>(spec.bytes) / L.n;
  }

  // Aggregated direct all_to_all (phase/symmetry fidelity; docs/engine.md, "Aggregated all_to_all").
  // Models NCCL's PXN forwarding on rail-optimised systems: a block for an off-host destination j first
  // crosses NVLink from the sender to the peer GPU on j's rail (the first rank of the host whose rail NIC
  // is on j's rail, the peer topo::Routing picks with pxn on), unless the sender is on that rail itself, and
  // then goes over the network from that GPU to j. All senders of one host that leave through the same GPU
  // towards j move equal blocks on the same path, so they become one flow of weight = their count (exact in
  // max-min: a weight-w flow is w identical flows). The NVLink forwarding of each (sender, peer) pair is one
  // flow carrying all its forwarded blocks; it runs concurrently with the network flows (NCCL pipelines
  // the two legs), which is the approximation: the per-pair form couples each block's two legs into one
  // flow. Used only when the routing has PXN on (so the step form routes the same way); needs equal
  // blocks, every rank on a host with a rail NIC, one NVLink domain per host and the same set of rails on
  // every host; returns false (and emits nothing) otherwise.
  bool build_direct_aggregated() {
    const int n = L.n;
    const int H = static_cast<int>(L.hosts.size());
    if (step || !routing.options().pxn || spec.op != Op::AllToAll || !spec.matrix.empty() || n < 2 || H < 2)
      return false;
    std::vector<int> rail(n);
    for (int r = 0; r < n; ++r) {
      const NodeId nic = routing.rail_nic(gpu(r));
      if (nic == topo::kNoNode) return false;
      const auto& nd = t.node(nic);
      rail[r] = nd.rail >= 0 ? nd.rail : nd.local_index;
    }
    std::vector<std::map<int, int>> proxy(H);  // host -> rail -> first rank on it
    std::set<int> domains;
    for (int h = 0; h < H; ++h) {
      const int dom = t.node(gpu(L.hosts[h][0])).nvlink_domain;
      // Hosts that share an NVLink domain (NVLink Switch System, NVL72) talk over NVLink directly, not
      // through rail NICs: PXN forwarding does not apply, so the per-pair form is used.
      if (!domains.insert(dom).second) return false;
      for (int r : L.hosts[h]) {
        if (dom < 0 || t.node(gpu(r)).nvlink_domain != dom) return false;
        proxy[h].emplace(rail[r], r);
      }
    }
    for (int h = 1; h < H; ++h) {
      if (proxy[h].size() != proxy[0].size()) return false;
      for (auto a = proxy[h].begin(), b = proxy[0].begin(); a != proxy[h].end(); ++a, ++b)
        if (a->first != b->first) return false;
    }
    // Every sender forwards through each rail's proxy only where NCCL would: over a direct NVLink or NVSwitches,
    // no other GPU between (topo::Routing's PXN rule, NCCL's PATH_NVL). A DGX-1's GPU 0 and rail 3's GPU 6 are
    // not so joined: GPU 0 sends through its own NIC there, which the per-pair form routes.
    for (int h = 0; h < H; ++h)
      for (int i : L.hosts[h])
        for (const auto& [k, p] : proxy[h])
          if (rail[i] != k && !nvl_reach(gpu(i), gpu(p))) return false;
    const double blk = static_cast<double>(spec.bytes) / n;
    if (!sink) {  // exact count when every host has one GPU per rail (DGX): avoids regrowing a 2 M-element vector
      std::size_t est = 0;
      for (const auto& h : L.hosts) est += h.size() * (h.size() - 1) + h.size() * (proxy[0].size() - 1);
      est += static_cast<std::size_t>(n) * static_cast<std::size_t>(n - static_cast<int>(L.hosts[0].size()));
      s.transfers.reserve(s.transfers.size() + est);
    }
    std::map<int, int> dst_per_rail;  // rail -> ranks on it (all hosts)
    for (int r = 0; r < n; ++r) ++dst_per_rail[rail[r]];
    // 1. intra-host blocks over NVLink.
    for (const auto& h : L.hosts)
      for (int i : h)
        for (int j : h)
          if (i != j) emit_p2p(i, j, blk, {}, 0, 0);
    // 2. PXN forwarding: sender i -> peer p on rail k carries the blocks for every off-host rank on rail k.
    for (int h = 0; h < H; ++h) {
      std::map<int, int> here;  // rail -> ranks on this host
      for (int r : L.hosts[h]) ++here[rail[r]];
      for (int i : L.hosts[h])
        for (const auto& [k, p] : proxy[h]) {
          if (rail[i] == k) continue;
          const int off_host = dst_per_rail[k] - here[k];
          if (off_host > 0) emit(gpu(i), gpu(p), blk * off_host, 1, 1.0, {}, 0, 0);
        }
    }
    // 3. network: per (source host, destination rank), one weighted flow per leaving GPU.
    for (int h = 0; h < H; ++h) {
      std::map<int, std::vector<std::pair<int, int>>> senders;  // rail -> (leaving rank, weight)
      for (const auto& [k, p] : proxy[h]) {
        auto& v = senders[k];
        int via_proxy = 0;
        for (int i : L.hosts[h]) {
          if (rail[i] != k) ++via_proxy;
          else if (i != p) v.emplace_back(i, 1);
        }
        v.emplace_back(p, via_proxy + 1);
        std::sort(v.begin(), v.end());
      }
      for (int j = 0; j < n; ++j) {
        if (L.host_of_rank[j] == h) continue;
        for (const auto& [from, w] : senders[rail[j]]) emit(gpu(from), gpu(j), blk, 1, static_cast<double>(w), {}, 0, 0);
      }
    }
    aggregated = true;
    return true;
  }

  void build_direct() {
    const int n = L.n;
    if (build_direct_aggregated()) return;
    if (spec.op == Op::SendRecv) {
      if (n < 2) return;
      for (int r = 0; r < n; ++r) emit_p2p(r, (r + 1) % n, static_cast<double>(spec.bytes), {}, 0, 0);
      return;
    }
    if (spec.op == Op::Scatter) {
      // [NCCL-E] NCCL has no scatter kernel: a scatter is point-to-point sends of bytes/n from the root to
      // every rank (src/enqueue.cc taskAppend at v2.28.3-1: ncclScatter appends one p2p send per rank on the
      // root and one recv from the root on every rank; before NCCL 2.28, nccl-tests src/scatter.cu issues the
      // same ncclSend/ncclRecv group), so it runs as the p2p rows do: all sends at once, over PXN paths across
      // hosts. The root's block to itself is a local copy, not modelled.
      const double blk = static_cast<double>(spec.bytes) / n;
      for (int j = 0; j < n; ++j)
        if (j != spec.root) emit_p2p(spec.root, j, blk, {}, 0, 0);
      return;
    }
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (i != j && a2a_bytes(i, j) > 0) emit_p2p(i, j, a2a_bytes(i, j), {}, 0, 0);
  }

  // Pairwise exchange: n-1 rounds, in round k rank r sends to r+k and receives from r-k; a rank starts a
  // round after its previous send and receive.
  void build_pairwise() {
    const int n = L.n;
    std::vector<std::int64_t> sent(n, -1), recvd(n, -1);
    for (int k = 1; k < n; ++k) {
      std::vector<std::int64_t> ns(n, -1), nr(n, -1);
      for (int r = 0; r < n; ++r) {
        int dst = (r + k) % n;
        std::vector<std::uint32_t> dp;
        if (sent[r] >= 0) dp.push_back(static_cast<std::uint32_t>(sent[r]));
        if (recvd[r] >= 0) dp.push_back(static_cast<std::uint32_t>(recvd[r]));
        double b = a2a_bytes(r, dst);
        // zero-byte rounds still synchronise the pair (NCCL posts them); keep them as tiny transfers.
        ns[r] = emit_p2p(r, dst, b, std::move(dp), 0, k - 1, true);
        nr[dst] = ns[r];
      }
      sent = ns;
      recvd = nr;
    }
  }

  // Hierarchical all_reduce: intra-host reduce-scatter ring, inter-host ring all_reduce of each 1/g shard
  // among the ranks with the same position on every host (one rail each), intra-host all_gather ring.
  void build_hierarchical() {
    const double S = static_cast<double>(spec.bytes);
    const int g = static_cast<int>(L.hosts[0].size());
    const int H = static_cast<int>(L.hosts.size());
    std::map<int, std::vector<std::uint32_t>> s1, s2;
    for (const auto& h : L.hosts) {
      auto d = ring(h, g - 1, S / g, {});
      for (auto& [r, v] : d) s1[r] = v;
    }
    for (int k = 0; k < g; ++k) {
      std::vector<int> members;
      for (const auto& h : L.hosts) members.push_back(h[k]);
      auto d = ring(members, 2 * (H - 1), S / g / H, s1);
      for (auto& [r, v] : d) s2[r] = v;
    }
    for (const auto& h : L.hosts) ring(h, g - 1, S / g, s2);
  }
};

// Weight merge and replica collapse (see docs/collectives.md, "Fidelity").
void compress(Schedule& s, topo::Routing& routing, const topo::Topology& t, bool collapse_replicas) {
  const std::size_t N = s.transfers.size();
  std::vector<char> has_dependents(N, 0);
  for (const auto& x : s.transfers)
    for (auto d : x.deps) has_dependents[d] = 1;
  auto is_free = [&](std::size_t i) { return s.transfers[i].deps.empty() && !has_dependents[i]; };
  // 1. identical free transfers on the same path -> one with the summed weight.
  using Key = std::tuple<NodeId, NodeId, NodeId, double, double, std::uint32_t, double, bool, bool, double, std::uint32_t>;
  std::map<Key, std::size_t> first;
  std::vector<std::int64_t> remap(N, -1);
  std::vector<Transfer> out;
  out.reserve(N);
  for (std::size_t i = 0; i < N; ++i) {
    const Transfer& x = s.transfers[i];
    if (is_free(i)) {
      Key k{x.src,           x.dst,          x.via,   x.bytes, x.payload_bytes, x.steps, x.step_latency_s,
            x.latency_includes_route, x.latency_deferred, x.rate_cap_Bps, x.replicas};
      auto it = first.find(k);
      if (it != first.end()) {
        out[it->second].weight += x.weight;
        continue;
      }
      first.emplace(k, out.size());
    }
    remap[i] = static_cast<std::int64_t>(out.size());
    out.push_back(x);
  }
  for (auto& x : out)
    for (auto& d : x.deps) d = static_cast<std::uint32_t>(remap[d]);
  s.transfers = std::move(out);
  if (!collapse_replicas) return;
  // 2. free transfers whose every link direction carries no other transfer ("isolated") and that share
  //    the same bytes/steps/latency and the same sequence of link (kind, bandwidth, latency) finish at the
  //    same time: keep one, count the others as replicas.
  const std::size_t M = s.transfers.size();
  std::vector<char> dependents(M, 0);
  for (const auto& x : s.transfers)
    for (auto d : x.deps) dependents[d] = 1;
  std::unordered_map<topo::LinkDir, std::uint32_t> usage;
  std::vector<const std::vector<topo::LinkDir>*> routes(M);
  std::map<std::size_t, std::vector<topo::LinkDir>> relayed;  // the routes of relayed hops (Transfer::via)
  for (std::size_t i = 0; i < M; ++i) {
    if (s.transfers[i].via != topo::kNoNode) {
      transfer_route(routing, s.transfers[i], relayed[i]);
      routes[i] = &relayed[i];
    } else {
      routes[i] = &routing.route(s.transfers[i].src, s.transfers[i].dst);
    }
    for (auto ld : *routes[i]) ++usage[ld];
  }
  using Sig = std::tuple<double, double, double, std::uint32_t, double, bool, bool, double,
                         std::vector<std::tuple<int, double, double>>>;
  std::map<Sig, std::size_t> rep;
  std::vector<char> drop(M, 0);
  for (std::size_t i = 0; i < M; ++i) {
    const Transfer& x = s.transfers[i];
    if (!x.deps.empty() || dependents[i]) continue;
    bool isolated = true;
    for (auto ld : *routes[i])
      if (usage[ld] != 1) {
        isolated = false;
        break;
      }
    if (!isolated || routes[i]->empty()) continue;
    std::vector<std::tuple<int, double, double>> path;
    for (auto ld : *routes[i]) {
      const auto& lk = t.link(topo::Topology::link_of(ld));
      path.emplace_back(static_cast<int>(lk.kind), lk.bandwidth_Bps, lk.latency_s);
    }
    Sig sig{x.bytes,          x.payload_bytes,          x.weight,           x.steps,
            x.step_latency_s, x.latency_includes_route, x.latency_deferred, x.rate_cap_Bps, std::move(path)};
    auto it = rep.find(sig);
    if (it == rep.end()) {
      rep.emplace(std::move(sig), i);
    } else {
      s.transfers[it->second].replicas += x.replicas;
      drop[i] = 1;
    }
  }
  std::vector<Transfer> kept;
  std::vector<std::int64_t> rm(M, -1);
  for (std::size_t i = 0; i < M; ++i)
    if (!drop[i]) {
      rm[i] = static_cast<std::int64_t>(kept.size());
      kept.push_back(std::move(s.transfers[i]));
    }
  for (auto& x : kept)
    for (auto& d : x.deps) d = static_cast<std::uint32_t>(rm[d]);
  s.transfers = std::move(kept);
}

std::size_t estimate_step_transfers(const CollectiveSpec& spec, Algorithm a, int channels, const Calibration& c,
                                    Protocol p) {
  const double n = static_cast<double>(spec.communicator.size());
  const double chunk = p == Protocol::Simple ? c.factors.chunk_bytes_simple
                       : p == Protocol::LL   ? c.factors.chunk_bytes_ll
                                             : c.factors.chunk_bytes_ll128;
  const double K = std::clamp(std::ceil(static_cast<double>(spec.bytes) / chunk), 1.0, c.factors.max_pipeline_chunks);
  double est = 0;
  switch (a) {
    case Algorithm::Ring:
      if (spec.op == Op::Broadcast || spec.op == Op::Reduce) est = n * K * channels;
      else est = 2.0 * n * n * channels;
      break;
    case Algorithm::Hierarchical: est = 4.0 * n * n * channels; break;
    case Algorithm::Tree: est = 4.0 * n * K; break;
    case Algorithm::Nvls:
    case Algorithm::NvlsTree:
    case Algorithm::CollNet: est = 4.0 * n * K + 2.0 * n * n; break;
    case Algorithm::Pat: est = n * std::log2(std::max(2.0, n)); break;
    case Algorithm::Direct:
    case Algorithm::Pairwise: est = n * n; break;
  }
  return est > 1e18 ? static_cast<std::size_t>(1e18) : static_cast<std::size_t>(est);
}

}  // namespace

Fidelity resolve_fidelity(const CollectiveSpec& spec, Algorithm a, Protocol p, int channels) {
  if (spec.fidelity != Fidelity::Auto) return spec.fidelity;
  // Direct/pairwise all-to-all flows all share GPU links, so nothing collapses; step = phase for them.
  Calibration dflt = default_calibration();
  return estimate_step_transfers(spec, a, channels, dflt, p) <= kAutoStepLimit ? Fidelity::Step : Fidelity::Symmetry;
}

namespace {
// build_schedule, or with `stream` set the compact ring (returns false when the schedule is not a plain
// step-level ring).
bool build_impl(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing, const Calibration& calib,
                Schedule& out, RingStream* stream, const TransferSink* sink = nullptr) {
  validate_spec(spec, t, routing);
  Algorithm a;
  Protocol p;
  if (spec.algorithm && spec.protocol) {
    a = *spec.algorithm;
    p = *spec.protocol;
  } else {
    TunerChoice ch = tune(spec, t, routing, calib);
    a = ch.algorithm;
    p = ch.protocol;
  }
  const int channels = default_channels(spec, t, routing);
  Fidelity f = spec.fidelity;
  if (f == Fidelity::Auto) {
    f = estimate_step_transfers(spec, a, channels, calib, p) <= kAutoStepLimit ? Fidelity::Step : Fidelity::Symmetry;
  }
  if (stream && !(a == Algorithm::Ring && f == Fidelity::Step &&
                  (spec.op == Op::AllReduce || spec.op == Op::AllGather || spec.op == Op::ReduceScatter)))
    return false;
  Builder b{spec, t, routing, calib, a, p, f == Fidelity::Step, channels, calib.of(a, p), 1.0, layout(spec, t), {}, false};
  b.stream = stream;
  b.s.op = to_string(spec.op);
  b.s.algorithm = to_string(a);
  b.s.protocol = to_string(p);
  b.s.fidelity = to_string(f);
  // Per-call latency; a communicator spanning several hosts pays it times multi_host_base_latency_factor
  // (calibration.cpp).
  b.s.fixed_latency_s = b.ap.base_latency_s * (b.L.hosts.size() > 1 ? calib.factors.multi_host_base_latency_factor : 1.0);
  // LL is bound per channel, not by the link (calibration.cpp ll_channel_rate): the call's nc NCCL channels
  // move at most nc x the per-channel rate, shared by the `channels` modelled ones. Inside one host only: that
  // is where it is measured (the external 8x H100 sweep, the ABCI and DGX single-node logs); across hosts
  // NCCL's LL ceiling is a network one (llMaxBws N2/N4, by CPU vendor) that no log here calibrates.
  if (p == Protocol::LL && (a == Algorithm::Ring || a == Algorithm::Tree) && b.L.hosts.size() == 1) {
    const std::string& model = t.node(spec.communicator.front()).model;
    const int coll = nccl_channels_with_env(nccl_coll_channels(model, 1), spec.nccl_env);
    const double llmax = ll_max_busbw_Bps(model, 1);
    if (coll > 0 && llmax > 0) {
      const int nc = nccl_call_channels(a, p, static_cast<double>(spec.bytes), static_cast<int>(spec.communicator.size()), coll);
      b.ll_cap_payload_Bps = llmax / coll * calib.factors.ll_channel_rate * nc / channels;
      b.chunk_scale = std::max(1.0, static_cast<double>(nc) / channels);
    }
  }
  if (sink) {
    // stream_direct: only the dependency-free direct all_to_all(v) forms, i.e. the per-pair flows at step
    // fidelity or the aggregated form (phase/symmetry fidelity); anything else (compress() would merge or
    // collapse transfers afterwards) is not streamed, and nothing reaches the sink.
    if (a != Algorithm::Direct || (spec.op != Op::AllToAll && spec.op != Op::AllToAllv)) return false;
    b.sink = sink;
    if (f == Fidelity::Step) b.build_direct();
    else if (!b.build_direct_aggregated()) return false;
    out = std::move(b.s);
    return true;
  }
  switch (a) {
    case Algorithm::Ring: b.build_ring(); break;
    case Algorithm::Tree: b.algo_eff = calib.factors.tree_efficiency; b.build_tree(); break;
    case Algorithm::Nvls: b.build_nvls(); break;
    case Algorithm::NvlsTree: b.build_nvls_tree(); break;
    case Algorithm::CollNet: b.build_collnet(); break;
    case Algorithm::Pat: b.build_pat(); break;
    case Algorithm::Direct: b.build_direct(); break;
    case Algorithm::Pairwise: b.build_pairwise(); break;
    case Algorithm::Hierarchical: b.build_hierarchical(); break;
  }
  if ((f == Fidelity::Phase || f == Fidelity::Symmetry) && !b.aggregated)
    compress(b.s, routing, t, f == Fidelity::Symmetry);
  if (stream) {
    stream->op = b.s.op;
    stream->algorithm = b.s.algorithm;
    stream->protocol = b.s.protocol;
    stream->fixed_latency_s = b.s.fixed_latency_s;
  }
  out = std::move(b.s);
  return true;
}
}  // namespace

Schedule build_schedule(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing,
                        const Calibration& calib) {
  Schedule s;
  build_impl(spec, t, routing, calib, s, nullptr);
  return s;
}

std::optional<RingStream> build_ring_stream(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing,
                                            const Calibration& calib) {
  RingStream rs;
  Schedule s;
  if (!build_impl(spec, t, routing, calib, s, &rs)) return std::nullopt;
  return rs;
}

std::optional<Schedule> stream_direct(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing,
                                      const Calibration& calib, const TransferSink& sink) {
  Schedule s;
  if (!build_impl(spec, t, routing, calib, s, nullptr, &sink)) return std::nullopt;
  return s;
}

Schedule build_schedule(const CollectiveSpec& spec, const topo::Topology& t, const Calibration& calib) {
  topo::Routing r(t);
  return build_schedule(spec, t, r, calib);
}

// ---------------------------------------------------------------------------------------------------

topo::Topology merge_nvswitch_planes(const topo::Topology& t) {
  topo::TopologyBuilder b(t.name());
  b.properties_of(t);
  b.param("nvswitch_planes", "merged");
  // Planes = NVSwitches of the same tier attached to the same set of GPUs (all GPUs of a DGX, of an NVL72
  // rack). Switches without GPUs (second-tier NVLink switches) group by (tier, host, NVLink domain).
  using Key = std::tuple<int, int, int, std::vector<NodeId>>;
  std::map<Key, NodeId> group;
  std::vector<NodeId> map(t.num_nodes());
  for (NodeId i = 0; i < t.num_nodes(); ++i) {
    const auto& nd = t.node(i);
    if (nd.kind == NodeKind::NvSwitch) {
      std::vector<NodeId> gpus;
      for (const auto& [l, nb] : t.adjacent(i))
        if (t.node(nb).kind == NodeKind::Gpu) gpus.push_back(nb);
      std::sort(gpus.begin(), gpus.end());
      gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
      Key key = gpus.empty() ? Key{nd.tier, nd.host, nd.nvlink_domain, {}} : Key{nd.tier, -2, -2, gpus};
      auto it = group.find(key);
      if (it != group.end()) {
        map[i] = it->second;
        continue;
      }
      topo::Node m = nd;
      m.id = nd.id + "+planes";
      map[i] = b.add_node(m);
      group.emplace(key, map[i]);
      continue;
    }
    map[i] = b.add_node(nd);
  }
  // Bundle parallel links (after mapping) by (a, b, kind).
  std::map<std::tuple<NodeId, NodeId, int>, topo::Link> bundles;
  std::vector<std::tuple<NodeId, NodeId, int>> order;
  for (const auto& lk : t.links()) {
    NodeId a = map[lk.a], c = map[lk.b];
    if (a == c) continue;
    if (a > c) std::swap(a, c);
    std::tuple<NodeId, NodeId, int> key{a, c, static_cast<int>(lk.kind)};
    auto it = bundles.find(key);
    if (it == bundles.end()) {
      topo::Link l = lk;
      l.a = a;
      l.b = c;
      bundles.emplace(key, l);
      order.push_back(key);
    } else {
      it->second.bandwidth_Bps += lk.bandwidth_Bps;
      it->second.count += lk.count;
      it->second.latency_s = std::max(it->second.latency_s, lk.latency_s);
    }
  }
  for (const auto& key : order) {
    const auto& l = bundles.at(key);
    b.add_link(l.a, l.b, l.kind, l.bandwidth_Bps, l.latency_s, l.count);
  }
  return std::move(b).build(t.name() + " (NVSwitch planes merged)");
}

}  // namespace fabricsim::models
