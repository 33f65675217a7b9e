// Analytic alpha-beta tuner, after NCCL's ncclTopoTuneModel (src/graph/tuning.cc): time = latency terms
// from the calibration + bytes / bandwidth, with bandwidths taken from the communicator's links.
#include "models/tuner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "sim/base/error.hpp"

namespace fabricsim::models {

using topo::NodeId;

double ll_max_busbw_Bps(const std::string& gpu_model, int hosts) {
  // [NCCL-T] llMaxBws (GB/s of busBw) for 1 / 2 / >= 4 nodes (NCCL's index is 0, 1, 2 for 1, 2, > 2 nodes).
  struct Row {
    const char* prefix;
    double gbps[3];
  };
  static const Row rows[] = {{"v100", {39.0, 39.0, 20.4}},    {"a100", {87.7, 22.5, 19.0}},
                             {"h100", {141.0, 45.0, 35.0}},   {"h200", {141.0, 45.0, 35.0}},
                             {"gb200", {282.0, 90.0, 70.0}}, {"b200", {282.0, 90.0, 70.0}}};
  const int k = hosts <= 1 ? 0 : hosts == 2 ? 1 : 2;
  for (const auto& r : rows)
    if (gpu_model.rfind(r.prefix, 0) == 0) return r.gbps[k] * 1e9;
  return 0;
}

int nccl_coll_channels(const std::string& gpu_model, int hosts) {
  // NCCL_DEBUG=INFO "coll channels" lines of real runs (read, not copied):
  //  - 8x H100 SXM (AWS p5.48xlarge), one node: "24 coll channels, 16 nvls channels"; two nodes: "16 coll
  //    channels" (aws-samples/aws-do-eks Container-Root/eks/deployment/nccl-test/README.md @ 701c554a).
  //  - 8x A100 SXM on NVSwitch (HGX A100), one node: "Channel 23/24" (NVIDIA/nccl-tests issue #100).
  // NCCL derives the count from the GPU's NVLinks (12 on A100, 18 on H100; AddyLaddy in NVIDIA/nccl issue
  // #1429), so H200 (same NVLink 4 x 18) shares H100's.
  struct Row {
    const char* prefix;
    int one_host, multi_host;  // 0: not measured
  };
  static const Row rows[] = {{"h100", 24, 16}, {"h200", 24, 16}, {"a100", 24, 0}};
  for (const auto& r : rows)
    if (gpu_model.rfind(r.prefix, 0) == 0) return hosts <= 1 ? r.one_host : r.multi_host;
  return 0;
}

int nccl_search_channels(const std::string& gpu_model, int nvlinks, double nic_Bps, int nics) {
  if (nvlinks <= 0 || nic_Bps <= 0 || nics <= 0) return nics;
  // NVIDIA/nccl src/graph/search.cc at v2.28.9-1: sm100SpeedArrayInter, sm90SpeedArrayInter, speedArrayInter
  // (GB/s per channel); src/graph/topo.h: SM100_NVLINK_BW 40.1, SM90_NVLINK_BW 20.6, SM80/SM70 20.0.
  static const std::vector<double> sm100 = {96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                            15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  static const std::vector<double> sm90 = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                           15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  static const std::vector<double> older = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                            7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  auto is = [&](std::initializer_list<const char*> prefixes) {
    for (const char* p : prefixes)
      if (gpu_model.rfind(p, 0) == 0) return true;
    return false;
  };
  const bool blackwell = is({"b200", "gb200", "b300", "gb300"});
  const bool hopper = is({"h100", "h200"});
  const double total = nvlinks * (blackwell ? 40.1 : hopper ? 20.6 : 20.0), nic = nic_Bps / 1e9;
  const std::vector<double>& speeds = blackwell ? sm100 : hopper ? sm90 : older;
  // ncclTopoCompute's first pass: from the fastest speed a NIC carries, down while the next speed is above
  // 0.49 of the best graph's; at speed s a channel takes s of every GPU's NVLink (a ring passes each GPU once)
  // and of one NIC, so floor(total / s) and nics x floor(nic / s) channels fit, at most MAXCHANNELS/2 = 32
  // (ringGraph->maxChannels, src/init.cc; MAXCHANNELS 64, src/include/device.h); a graph replaces the best
  // one only with more channels x speed (ncclTopoCompareGraphs).
  int best = 0;
  double best_speed = 0;
  for (double sp : speeds) {
    if (sp > nic) continue;
    if (best > 0 && sp / best_speed <= 0.49) break;
    const int ch = std::min({static_cast<int>(std::floor(total / sp + 1e-9)),
                             nics * static_cast<int>(std::floor(nic / sp + 1e-9)), 32});
    if (ch > 0 && ch * sp > best * best_speed + 1e-9) best = ch, best_speed = sp;
  }
  return best > 0 ? best : nics;
}

// [NCCL-T] hwLatencies[NCCL_HW_NVLINK][NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE]: NCCL's modelled NVLS call latency
// (NVLSTree's NVLINK entry is the same 25 us).
constexpr double kNcclNvlsLatency_s = 25e-6;
// [NCCL-T] ncclTopoTuneModel, COLLNET_DIRECT latency: "Add 0.4 us arity serialization latency" per local rank
// beyond the first (src/graph/tuning.cc at v2.26.2-1 and 5067397c).
constexpr double kNcclCollNetAritySerialisation_s = 0.4e-6;
// [NCCL-T] getNetOverhead: 1 us on Intel (and any CPU NCCL does not single out), 2 us on AMD x86.
constexpr double kNcclNetOverhead_s = 1e-6;

int nccl_nvls_channels(const std::string& gpu_model) {
  for (const char* b : {"b200", "gb200", "b300", "gb300"})
    if (gpu_model.rfind(b, 0) == 0) return 24;
  return 16;
}

// NCCL's MAXCHANNELS (src/include/device.h at v2.26.2-1): ncclMinNchannels/ncclMaxNchannels and the config's
// minCTAs are capped at it (src/graph/connect.cc, src/init.cc).
constexpr int kNcclMaxChannels = 64;

int nccl_channels_with_env(int coll_channels, const NcclChannelEnv& env) {
  int nc = coll_channels;
  const int cap = std::min(env.max_nchannels > 0 ? env.max_nchannels : kNcclMaxChannels,
                           env.max_ctas > 0 ? env.max_ctas : kNcclMaxChannels);
  if (nc > 0) nc = std::min(nc, std::min(cap, kNcclMaxChannels));
  const int floor = std::min(kNcclMaxChannels, std::max(env.min_nchannels, env.min_ctas));
  return std::max(nc, floor);
}

int nccl_nvls_channels_with_env(int nvls_channels, const NcclChannelEnv& env) {
  int nc = env.max_ctas > 0 ? std::min(env.max_ctas, nvls_channels) : nvls_channels;
  return std::max(std::min(env.min_ctas, kNcclMaxChannels), nc);
}

namespace {
// One loop of NCCL's NVLS kernels moves ops x chunk bytes, ops = channels x heads (heads capped at
// NCCL_MAX_NVLS_ARITY = 32); `shrink` lowers the chunk for the call's size (the two rules below).
template <class Shrink>
NvlsLoops nvls_loops_of(double bytes, int channels, int heads, double chunk, Shrink shrink) {
  NvlsLoops l;
  const double ops = static_cast<double>(std::max(1, channels)) * std::clamp(heads, 1, 32);
  chunk = shrink(ops, chunk);
  l.chunk_bytes = chunk;
  l.loop_bytes = ops * chunk;
  l.loops = std::max(1.0, std::ceil(bytes / l.loop_bytes));
  return l;
}
}  // namespace

NvlsLoops nccl_nvls_loops(double bytes, int channels, int heads) {
  return nvls_loops_of(bytes, channels, heads, 131072, [bytes](double ops, double chunk) {
    if (bytes < 64 * ops * chunk && chunk > 65536) chunk = 65536;
    if (bytes < 8 * ops * chunk && chunk > 32768) chunk = 32768;
    if (bytes < 2 * ops * chunk && chunk > 16384) chunk = 16384;
    return chunk;
  });
}

NvlsLoops nccl_nvls_tree_loops(double bytes, int channels, int heads, int nodes) {
  return nvls_loops_of(bytes, channels, heads, nodes >= 4 ? 65536 : 131072, [bytes](double ops, double chunk) {
    if (bytes < 4 * ops * chunk && chunk > 65536) chunk = 65536;
    if (bytes < 1 * ops * chunk && chunk > 32768) chunk = 32768;
    return chunk;
  });
}

int nccl_call_channels(Algorithm a, Protocol p, double bytes, int nranks, int coll_channels) {
  if (coll_channels <= 1 || (a != Algorithm::Ring && a != Algorithm::Tree)) return 1;
  // [NCCL-E] threads per channel (maxThreads: LL 512, LL128 640, Simple 512; src/graph/tuning.cc with
  // NCCL_LL_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS, NCCL_SIMPLE_MAX_NTHREADS of src/include/device.h) and
  // bytes per thread below which a channel is dropped (NCCL_LL_THREAD_THRESHOLD 8, LL128 8, Simple 64; Ring
  // LL's is multiplied by the rank count). An 8-rank H100 run prints "threadThresholds 8/8/64 | 64/8/64"
  // (the aws-do-eks log above): Tree, then Ring, LL/LL128/Simple.
  const double threads = p == Protocol::LL128 ? 640 : 512;
  double per_thread = p == Protocol::Simple ? 64 : 8;
  if (a == Algorithm::Ring && p == Protocol::LL) per_thread *= std::max(1, nranks);
  int nc = coll_channels;
  while (nc >= 2 && bytes < nc * threads * per_thread) --nc;
  return nc;
}

int nccl_call_channels(const CollectiveSpec& spec, const topo::Topology& t) {
  if (!spec.algorithm || !spec.protocol)
    throw InputError(spec.where, "nccl_call_channels needs the algorithm and protocol chosen");
  if (spec.communicator.empty()) return 1;
  const std::vector<int> node = nccl_nodes(spec.communicator, t);
  const std::set<int> hosts(node.begin(), node.end());
  const int coll = nccl_channels_with_env(
      nccl_coll_channels(t.node(spec.communicator.front()).model, static_cast<int>(hosts.size())), spec.nccl_env);
  return nccl_call_channels(*spec.algorithm, *spec.protocol, static_cast<double>(spec.bytes),
                            static_cast<int>(spec.communicator.size()), coll);
}

NcclTunerRules nccl_tuner_rules(int v) {
  NcclTunerRules r;  // the current rules (NVIDIA/nccl src/graph/tuning.cc at v2.18.1-1 through v2.26.2-1)
  if (v < 0 || v >= 218) return r;
  // NVIDIA/nccl src/graph/tuning.cc, read at every release tag from v2.8.3-1 to v2.18.6-1:
  //  - "Inter-node rings still have to launch nsteps * net overhead" (getNetOverhead) first at v2.18.1-1.
  //  - ncclTopoGetAlgoTime's ring plateau: up to v2.17.1-1 `nBytes >= nRanks/16.0*65536`, then `lat *= 1.9`
  //    (v2.8.3-1 to v2.16.5-1), `minCompCap < 90 ? 1.9 : 1.5` (v2.17.1-1); from v2.18.1-1
  //    `nBytes/(nChannels*nRanks) >= 64` and `minCompCap < 80 ? 1.9 : 1.4`.
  //  - treeCorrectionFactor's LL128 row: the 2.8 row (.5 at 512 KiB, .7/.7/.8 at 4-16 MiB, .92 from 128 MiB)
  //    at v2.8.3-1 to v2.9.9-1, the current one from v2.10.3-1.
  r.ring_net_overhead = false;
  r.plateau_per_channel = false;
  r.plateau_factor_sm80 = 1.9;
  r.plateau_factor_sm90 = v >= 217 ? 1.5 : 1.9;
  r.tree_ll128_row_2_8 = v < 210;
  return r;
}

double nccl_tree_correction(Protocol p, double bytes, const NcclTunerRules& rules) {
  // [NCCL-T] treeCorrectionFactor rows LL, LL128, Simple; column k is for sizes in [64 * 2^k, 64 * 2^(k+1))
  // bytes, applied (ncclTopoGetAlgoTime) for k = 0..22. The values are NCCL's own measured corrections; the
  // fourth row is the LL128 row of NCCL 2.8-2.9 (nccl_tuner_rules).
  static const double table[4][23] = {
      {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
      {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
      {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
      {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, .92, .92}};
  const double units = std::floor(bytes / 64.0);
  if (units < 1) return 1.0;
  const int k = static_cast<int>(std::floor(std::log2(units)));
  if (k < 0 || k >= 23) return 1.0;
  const int row = p == Protocol::LL ? 0 : p == Protocol::LL128 ? (rules.tree_ll128_row_2_8 ? 3 : 1) : 2;
  return table[row][k];
}

CommBandwidths comm_bandwidths(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing,
                               const Calibration& calib) {
  CommBandwidths b;
  b.nranks = static_cast<int>(spec.communicator.size());
  // Hosts are NCCL's nodes: a multi-node NVLink domain's ranks form one (nccl_nodes, MNNVL).
  std::map<int, std::vector<NodeId>> hosts;
  std::set<int> domains;
  const std::vector<int> node = nccl_nodes(spec.communicator, t);
  for (std::size_t r = 0; r < spec.communicator.size(); ++r) {
    hosts[node[r]].push_back(spec.communicator[r]);
    domains.insert(t.node(spec.communicator[r]).nvlink_domain);
  }
  b.hosts = static_cast<int>(hosts.size());
  for (const auto& [h, v] : hosts) b.max_per_host = std::max(b.max_per_host, static_cast<int>(v.size()));
  b.one_domain = domains.size() == 1 && *domains.begin() >= 0;
  double intra = std::numeric_limits<double>::infinity();
  double nvlink = std::numeric_limits<double>::infinity();
  double nic = std::numeric_limits<double>::infinity();
  double host_net = std::numeric_limits<double>::infinity();
  for (const auto& [h, v] : hosts) {
    std::set<NodeId> nics;
    for (NodeId g : v) {
      const auto& nd = t.node(g);
      double nvl = 0, pcie = 0;
      for (const auto& [l, nb] : t.adjacent(g)) {
        const auto& lk = t.link(l);
        if (lk.kind == topo::LinkKind::NVLink) nvl += lk.bandwidth_Bps;
        if (lk.kind == topo::LinkKind::PCIe) pcie = std::max(pcie, lk.bandwidth_Bps);
      }
      double gi = nvl > 0 ? nvl * calib.nvlink_efficiency(nd.model) : pcie * calib.factors.pcie_efficiency;
      if (nvl > 0) nvlink = std::min(nvlink, nvl);
      intra = std::min(intra, gi);
      NodeId n = routing.rail_nic(g);
      if (n != topo::kNoNode) {
        nics.insert(n);
        const double port = nic_fabric_port_Bps(t, n);
        if (port > 0) nic = std::min(nic, port * calib.factors.network_efficiency);
      }
    }
    if (std::isfinite(nic)) host_net = std::min(host_net, static_cast<double>(nics.size()) * nic);
  }
  b.intra_Bps = std::isfinite(intra) ? intra : 0;
  b.nvlink_Bps = std::isfinite(nvlink) ? nvlink : 0;
  b.nic_Bps = std::isfinite(nic) ? nic : 0;
  b.host_net_Bps = std::isfinite(host_net) ? host_net : 0;
  b.ll_max_Bps = ll_max_busbw_Bps(t.node(spec.communicator.front()).model, b.hosts);
  return b;
}

Candidate predict(const CollectiveSpec& spec, Algorithm a, Protocol p, const CommBandwidths& bw,
                  const Calibration& calib, int channels) {
  Candidate c{a, p, 0, 0};
  const AlgoProtoParams& ap = calib.of(a, p);
  const NcclTunerRules rules = nccl_tuner_rules(spec.nccl_version);
  const double S = static_cast<double>(spec.bytes);
  const double n = bw.nranks, H = bw.hosts, g = bw.max_per_host;
  const double li = ap.step_latency_s, ln = ap.net_step_latency_s, e = ap.bw_efficiency;
  const double inf = std::numeric_limits<double>::infinity();
  const double Bi = g > 1 && bw.intra_Bps > 0 ? bw.intra_Bps : inf;
  const double Bn = H > 1 && bw.nic_Bps > 0 ? bw.nic_Bps : inf;
  const double Bhost = H > 1 && bw.host_net_Bps > 0 ? std::min(bw.host_net_Bps, channels * bw.nic_Bps) : inf;
  auto t_of = [](double bytes, double B) { return std::isfinite(B) && B > 0 ? bytes / B : 0.0; };
  // [NCCL-T] ncclTopoTuneModel caps Ring and Tree LL at llMaxBw (busBw, per GPU generation and node count).
  auto ll_capped = [&](double B) { return p == Protocol::LL && bw.ll_max_Bps > 0 ? std::min(B, bw.ll_max_Bps) : B; };
  // Per-call latency; a communicator spanning several hosts pays it times multi_host_base_latency_factor
  // (1 = NCCL's model, calibration.cpp).
  double lat = ap.base_latency_s * (H > 1 ? calib.factors.multi_host_base_latency_factor : 1.0), xfer = 0;
  if (n <= 1) {
    c.latency_s = c.predicted_s = lat;
    return c;
  }
  switch (a) {
    case Algorithm::Ring: {
      if (spec.op == Op::Broadcast || spec.op == Op::Reduce) {
        lat += (n - H) * li + (H - 1) * ln;
        xfer = t_of(S, std::min(Bi, Bhost) * e);
        break;
      }
      double steps = spec.op == Op::AllReduce ? 2 * (n - 1) : n - 1;
      double inter = H <= 1 ? 0 : (spec.op == Op::AllReduce ? 2 * (H - 1) : H - 1);
      // [NCCL-T] ncclTopoTuneModel (NCCL >= 2.18; tuning.cc at v2.18.1-1, v2.26.2-1, 5067397c): "inter-node
      // rings still have to launch nsteps * net overhead": across nodes each intra-node step costs at least
      // getNetOverhead, 1 us (2 us on AMD x86 CPUs, which the topology does not say; 1 us taken), x3 for Simple.
      // Older releases have no such floor (nccl_tuner_rules).
      const double li_ring = H > 1 && rules.ring_net_overhead
                                 ? std::max(li, kNcclNetOverhead_s * (p == Protocol::Simple ? 3 : 1))
                                 : li;
      lat += (steps - inter) * li_ring + inter * ln;
      xfer = t_of(steps / n * S, ll_capped(std::min(Bi, Bhost) * e));
      break;
    }
    case Algorithm::Tree: {
      double te = calib.factors.tree_efficiency;
      lat += 2 * ((g - 1) * li + std::ceil(std::log2(std::max(1.0, H))) * ln);
      // [NCCL-T] ncclTopoTuneModel: a tree's algorithm bandwidth is busBw * 0.5 at any node count (ratio .5
      // for every non-ring algorithm; busBw is the same nChannels * per-channel bandwidth the ring gets). The
      // double binary tree really sends only S through each NIC at 2 hosts (1.5 S beyond), which the
      // simulated schedule reproduces, but NCCL chooses by this model, so the tuner must too: with the
      // physical NIC load instead it picked Tree for 2-host all_reduce at every size >= 1 MiB, where NCCL
      // runs Ring (the ABCI 2-node logs measure the same busbw as 4 nodes; docs/validation.md).
      double tb = ll_capped(std::min(Bi, Bhost) * e * te);
      // [NCCL-T] ncclTopoGetAlgoTime scales a Tree all_reduce's bandwidth by treeCorrectionFactor.
      if (spec.op == Op::AllReduce) tb *= nccl_tree_correction(p, S, rules);
      xfer = t_of(2 * S, tb);
      break;
    }
    case Algorithm::Nvls: {
      // nvls_efficiency is a fraction of the nominal NVLink bandwidth (collectives.cpp hop_params).
      const double ne = calib.factors.nvls_efficiency;
      // The schedule pays a base latency plus the NVLS step latency once per NCCL loop (collectives.cpp
      // build_nvls, calibration.cpp). NCCL's own model, whose choice the tuner imitates, has no per-loop cost:
      // [NCCL-T] one constant per call, hwLatencies[NVLINK][NVLS][Simple] = 25 us (which is about our fitted
      // base plus one loop). The tuner uses NCCL's constant, so that its crossover from Ring LL to NVLS
      // (between 1 and 2 MiB on 8x H100, as the DGX H100 and p5 sweeps show) does not move with our fit.
      lat = kNcclNvlsLatency_s + (H > 1 ? ln : 0);
      double per_gpu = spec.op == Op::AllReduce ? S : (n - 1) / n * S;
      xfer = t_of(per_gpu, bw.nvlink_Bps * e * ne);
      // [NCCL-T] Across NVLink domains (NVLS with CollNet, SHARP in the network: collectives.cpp
      // build_nvls_sharp), per-channel bandwidth min(bwIntra, bwInter): also each head's shard S/g through its
      // rail NIC.
      if (!bw.one_domain) xfer = std::max(xfer, t_of(S / std::max(1.0, g), Bn * e));
      break;
    }
    case Algorithm::NvlsTree: {
      // [NCCL-T] ncclTopoTuneModel, NVLS_TREE (all_reduce across nodes, Simple only): per-channel bandwidth the
      // minimum of the NVLS one inside the node and the network one, the latter doubled on <= 2 nodes (NCCL
      // 2.19-2.26 wrote it as bwInter on <= 2 nodes and bwInter/2 beyond: the same ratio); latency
      // intraLat + 2 log2(nNodes) x interLat, interLat the calibration's NVLS_TREE network latency (NCCL's
      // hwLatencies[NET][NVLS_TREE][Simple] of the release imitated: 20.9 us by default, the log's release's
      // value under `fabricsim validate`, validate/simulate.cpp). Here the NVLS side is the NVLS candidate's (S through each GPU's
      // NVLink at nvls_efficiency of nominal), the network side is head k's shard S/g through its rail NIC,
      // once on two hosts (each head sends half the shard up one tree and half down the other) and twice
      // beyond (an inner host of a tree forwards to two children and its parent). NCCL's per-channel cap
      // (perChMaxNVLSTreeBws: 57.7 GB/s on 2 Hopper nodes x 16 channels) does not bind at these rates.
      const double ne = calib.factor("nvls_efficiency");
      lat = kNcclNvlsLatency_s + 2 * std::ceil(std::log2(std::max(1.0, H))) * ln;
      const double t_intra = t_of(S, bw.nvlink_Bps * e * ne);
      const double t_inter = (H <= 2 ? 1.0 : 2.0) * t_of(S / std::max(1.0, g), Bn * e);
      xfer = std::max(t_intra, t_inter);
      break;
    }
    case Algorithm::CollNet: {
      // [NCCL-T] ncclTopoTuneModel, COLLNET_DIRECT (src/graph/tuning.cc at v2.26.2-1 and 5067397c): baseLat 0 +
      // 2 (min(1, ppn-1) intraLat + (ppn-1) x 0.4 us of arity serialisation) + interLat, intraLat the NVLink
      // CollNet latency (3.7 us), interLat the network one (31 us) once per call; the network latency is not
      // paid per step or per chunk, and the schedule charges it the same way (build_collnet). Bandwidth: the
      // host's reduce-scatter and all_gather over NVLink, then each GPU's shard S/g through its rail NIC at
      // collnet_efficiency (NCCL's busBw x 0.85 from compute capability 9.0), or the host's S through its NICs
      // when GPUs share them (NCCL divides busBw by the GPU/NIC ratio, less half its excess over 1).
      double ce = calib.factors.collnet_efficiency;
      lat += 2 * (std::min(1.0, g - 1) * li + (g - 1) * kNcclCollNetAritySerialisation_s) + ln;
      const double Bnet = H > 1 && bw.host_net_Bps > 0 ? bw.host_net_Bps : inf;
      xfer = t_of(2 * (g - 1) / g * S, Bi * e) + std::max(t_of(S / g, Bn * e * ce), t_of(S, Bnet * e * ce));
      break;
    }
    case Algorithm::Pat: {
      double pe = calib.factors.pat_efficiency;
      lat += std::ceil(std::log2(n)) * (H > 1 ? ln : li);
      xfer = t_of((n - 1) / n * S, (H > 1 ? Bn : Bi) * e * pe);
      break;
    }
    case Algorithm::Direct:
    case Algorithm::Pairwise: {
      double stepl = H > 1 ? ln : li;
      if (spec.op == Op::SendRecv) {
        lat += stepl;
        xfer = t_of(S, (H > 1 ? Bn : Bi) * e);
        break;
      }
      if (spec.op == Op::Scatter) {  // the root's sends (build_direct): (g-1)/n of S stays on its host, the
        lat += stepl;                // rest leaves through the host's NICs (PXN)
        xfer = std::max(t_of((g - 1) / n * S, Bi * e), t_of((n - g) / n * S, Bhost * e));
        break;
      }
      double row = S;
      if (!spec.matrix.empty()) {
        row = 0;
        for (const auto& r : spec.matrix) {
          double sum = 0;
          for (auto v : r) sum += static_cast<double>(v);
          row = std::max(row, sum);
        }
      }
      lat += a == Algorithm::Pairwise ? (n - 1) * stepl : stepl;
      xfer = std::max(t_of((g - 1) / n * row, Bi * e), t_of((n - g) / n * row, Bn * e));
      break;
    }
    case Algorithm::Hierarchical: {
      lat += 2 * (g - 1) * li + 2 * (H - 1) * ln;
      xfer = t_of(2 * (g - 1) / g * S, Bi * e) + t_of(2 * (H - 1) / H * S / g, Bn * e);
      break;
    }
  }
  c.latency_s = lat;
  c.predicted_s = lat + xfer;
  return c;
}

Protocol nccl_p2p_protocol(const CollectiveSpec& spec, int hosts) {
  // [NCCL-E] src/enqueue.cc + src/init.cc: a p2p operation (send/recv, and the all_to_all NCCL builds from
  // grouped send/recv) runs LL only when the bytes to one peer are at most NCCL_P2P_LL_THRESHOLD (16384 B by
  // default), and over the network only when NCCL_ALLOC_P2P_NET_LL_BUFFERS is set (default 0: the shared
  // network buffers carry Simple only); otherwise Simple. NCCL does not compare costs here.
  constexpr double kP2pLLThresholdBytes = 16384;
  const double n = static_cast<double>(std::max<std::size_t>(1, spec.communicator.size()));
  const double per_peer = spec.op == Op::SendRecv ? static_cast<double>(spec.bytes) : static_cast<double>(spec.bytes) / n;
  return hosts <= 1 && per_peer <= kP2pLLThresholdBytes ? Protocol::LL : Protocol::Simple;
}

TunerChoice tune(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing,
                 const Calibration& calib) {
  TunerChoice out;
  CommBandwidths bw = comm_bandwidths(spec, t, routing, calib);
  int channels = default_channels(spec, t, routing);
  const Protocol p2p_protocol = nccl_p2p_protocol(spec, bw.hosts);
  bool found = false;
  for (Algorithm a : algorithms_for(spec.op)) {
    if (spec.algorithm && *spec.algorithm != a) continue;
    // hierarchical is fabricsim's own two-level all_reduce, which no NCCL release has: the tuner chooses among
    // NCCL's algorithms, as a user comparing with nccl-tests expects (and as `fabricsim validate` always did);
    // hierarchical runs only when asked for (--algo hierarchical). docs/collectives.md, "Tuner".
    if (a == Algorithm::Hierarchical && !spec.algorithm) {
      out.rejected.push_back("hierarchical: fabricsim's own algorithm, not NCCL's; the tuner takes it only when "
                             "asked for (--algo hierarchical)");
      continue;
    }
    std::string why = why_not_applicable(spec, a, t, routing);
    if (!why.empty()) {
      out.rejected.push_back(std::string(to_string(a)) + ": " + why);
      continue;
    }
    const bool p2p_rule = (a == Algorithm::Direct || a == Algorithm::Pairwise) && !spec.protocol;
    for (Protocol p : protocols_for(a)) {
      if (spec.protocol && *spec.protocol != p) continue;
      if (!calib.has(a, p)) continue;
      if (p2p_rule && p != p2p_protocol) continue;
      // One rank: nothing to communicate; like NCCL (which costs only Ring/Simple then), take the first
      // applicable algorithm with its first protocol instead of comparing launch latencies.
      if (bw.nranks <= 1 && found) continue;
      Candidate c = predict(spec, a, p, bw, calib, channels);
      // [NCCL-T] ncclTopoGetAlgoTime (NCCL >= 2.18; older releases: nccl_tuner_rules): "Plateau effect of
      // ring": a multi-node Ring/Simple all_reduce with at least 64 bytes per channel and rank has its latency
      // x1.4, x1.9 below compute capability 8.0 (V100). nChannels is the communicator's (nccl_coll_channels under
      // the run's NCCL_MIN/MAX_NCHANNELS and CTAs settings, else ours). It is the only place the channel settings
      // enter NCCL's choice: its bandwidth table multiplies the per-channel bandwidth by the search graph's
      // channel count (graphs[a]->nChannels in ncclTopoTuneModel, src/graph/tuning.cc at v2.26.2-1), which
      // ncclTopoPostset's duplication for NCCL_MIN_CTAS does not change. Before 2.18 the rule starts at
      // ranks / 16 x 64 KiB, whatever the channels.
      if (a == Algorithm::Ring && p == Protocol::Simple && bw.hosts > 1 && spec.op == Op::AllReduce) {
        const NcclTunerRules rules = nccl_tuner_rules(spec.nccl_version);
        const std::string& model = t.node(spec.communicator.front()).model;
        const int known = nccl_channels_with_env(nccl_coll_channels(model, bw.hosts), spec.nccl_env);
        const int nch = std::max(1, known > 0 ? known : channels);
        const double S = static_cast<double>(spec.bytes);
        const bool plateau = rules.plateau_per_channel ? S / (static_cast<double>(nch) * bw.nranks) >= 64
                                                       : S >= bw.nranks / 16.0 * 65536;
        if (plateau) {
          const bool volta = model.rfind("v100", 0) == 0, ampere = model.rfind("a100", 0) == 0;
          const double f = volta ? 1.9 : ampere ? rules.plateau_factor_sm80 : rules.plateau_factor_sm90;
          c.predicted_s += (f - 1) * c.latency_s;
          c.latency_s *= f;
        }
      }
      out.candidates.push_back(c);
      if (!found || c.predicted_s < out.predicted_s) {
        found = true;
        out.algorithm = a;
        out.protocol = p;
        out.predicted_s = c.predicted_s;
      }
    }
  }
  if (!found) {
    std::string msg = std::string("no applicable algorithm/protocol for ") + to_string(spec.op);
    if (spec.algorithm) msg += std::string(" with algorithm ") + to_string(*spec.algorithm);
    if (spec.protocol) msg += std::string(" with protocol ") + to_string(*spec.protocol);
    for (const auto& r : out.rejected) msg += "; " + r;
    throw InputError(spec.where, msg);
  }
  return out;
}

}  // namespace fabricsim::models
