#pragma once
// Algorithm/protocol selection like NCCL's tuner (src/graph/tuning.cc + enqueue.cc topoGetAlgoInfo):
// predict each applicable (algorithm, protocol) candidate's time with an analytic alpha-beta model
// built from the calibration and the communicator's bandwidths in the topology, take the fastest.
// Overridable: a spec with an algorithm and/or protocol restricts the candidates (like NCCL_ALGO /
// NCCL_PROTO). docs/collectives.md gives the formulas.
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "topologies/routing.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::models {

// [NCCL-E] The protocol NCCL gives a p2p operation (send/recv; all_to_all as grouped send/recv): LL when the
// bytes to one peer are <= NCCL_P2P_LL_THRESHOLD (16384 B) and no peer is across the network, else Simple.
// The tuner uses it for direct/pairwise unless the protocol is forced.
Protocol nccl_p2p_protocol(const CollectiveSpec& spec, int hosts);

// Bandwidths the model sees for one communicator, bytes/s per direction, efficiencies applied.
struct CommBandwidths {
  int nranks = 0;
  int hosts = 0;          // distinct hosts among the ranks
  int max_per_host = 0;   // most ranks on one host
  bool one_domain = false;  // all ranks in one NVLink domain
  double intra_Bps = 0;   // per GPU towards other GPUs of its host/domain (NVLink or PCIe)
  double nic_Bps = 0;     // per GPU through its rail NIC (0 when it has none)
  double host_net_Bps = 0;  // per host, all rail NICs used by its ranks together
  double ll_max_Bps = 0;    // NCCL's LL busBw ceiling for this GPU generation and host count (0: none known)
  double nvlink_Bps = 0;    // per GPU, nominal NVLink bandwidth (sum of its NVLinks, no efficiency); 0: none
};
// The rules of NCCL's tuner (src/graph/tuning.cc) that changed between releases, for the release a run states
// (CollectiveSpec::nccl_version; unknown = the current rules). Each value is cited in tuner.cpp
// nccl_tuner_rules, tag by tag. These are NCCL's algorithm/protocol choice rules, not fitted constants: the
// latency table of a release is the calibration's (models::NcclEra).
struct NcclTunerRules {
  // >= 2.18: each intra-node step of a multi-node ring costs at least getNetOverhead (x3 for Simple).
  bool ring_net_overhead = true;
  // Multi-node Ring/Simple all_reduce "plateau" latency factor: >= 2.18 from bytes / (channels x ranks) >= 64,
  // x1.9 below compute capability 8.0 and x1.4 from it; before 2.18 from bytes >= ranks / 16 x 65536, x1.9
  // (2.17: x1.5 from compute capability 9.0).
  bool plateau_per_channel = true;
  double plateau_factor_sm80 = 1.4;  // compute capability 8.x (A100)
  double plateau_factor_sm90 = 1.4;  // 9.0 and later
  // treeCorrectionFactor's LL128 row of NCCL 2.8-2.9 (it changed in 2.10).
  bool tree_ll128_row_2_8 = false;
};
NcclTunerRules nccl_tuner_rules(int nccl_version_code);
// [NCCL-T] treeCorrectionFactor: NCCL's static correction of a Tree all_reduce's modelled bandwidth for
// medium sizes (0.4-1.0, by protocol and power of two of the size from 64 B to 256 MiB); 1 elsewhere. The
// release's rules choose the LL128 row (NcclTunerRules::tree_ll128_row_2_8).
double nccl_tree_correction(Protocol p, double bytes, const NcclTunerRules& rules = {});
// [NCCL-T] llMaxBws: the LL protocol's modelled busBw ceiling for a GPU model ("a100-40gb" -> Ampere) and host
// count, in bytes/s; 0 for models NCCL's table does not cover.
double ll_max_busbw_Bps(const std::string& gpu_model, int hosts);
CommBandwidths comm_bandwidths(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing,
                               const Calibration& calib);
// Collective channels NCCL opens on a communicator of GPUs of `gpu_model` spread over `hosts` hosts (its
// NCCL_DEBUG=INFO line "N coll channels"), or 0 when no measurement of it is known (models/tuner.cpp cites
// each value).
int nccl_coll_channels(const std::string& gpu_model, int hosts);
// NVIDIA/nccl: the ring/tree channels NCCL's search gives one node with `nics` NICs of `nic_Bps` whose GPUs of
// `gpu_model` have `nvlinks` NVLinks each (ncclTopoCompute, src/graph/search.cc; SM*_NVLINK_BW,
// src/graph/topo.h; v2.28.9-1): among its per-channel speeds that a NIC carries, the most channels x speed
// where every channel takes its speed of each GPU's NVLink and of one NIC. A server's NICs all get a channel
// (8 on DGX H100 / B200); a multi-node NVLink domain (MNNVL) with more NICs than NVLink bandwidth stops at the
// NVLink: 16 channels on a GB200 or GB300 NVL72 rack (16 x 45.1 GB/s of 18 x 40.1). `nics` when nvlinks or
// nic_Bps is 0.
int nccl_search_channels(const std::string& gpu_model, int nvlinks, double nic_Bps, int nics);
// [NCCL-E] Channels one Ring or Tree call of `bytes` actually runs on, out of `coll_channels`: NCCL drops
// channels while bytes < channels x threads x threadThreshold (src/enqueue.cc, getNChannels/topoGetAlgoInfo;
// thresholds from src/graph/tuning.cc). Other algorithms, and coll_channels <= 1, give 1.
int nccl_call_channels(Algorithm a, Protocol p, double bytes, int nranks, int coll_channels);
// The same for a spec whose algorithm and protocol are set (throws InputError otherwise), with coll_channels
// from nccl_coll_channels of its first GPU's model and its host count, under spec.nccl_env
// (nccl_channels_with_env).
int nccl_call_channels(const CollectiveSpec& spec, const topo::Topology& t);

// [NCCL-E] Channels (CTAs) NCCL runs an NVLS call on, for GPUs of `gpu_model` in one NVLink domain
// (src/transport/nvls.cc): 16 on Hopper (NVLS_NCHANNELS_SM90, NCCL 2.18-2.28; the aws-do-eks p5.48xlarge
// log cited in tuner.cpp prints "16 nvls channels"), 24 on Blackwell within one NVLink domain
// (NVLS_NCHANNELS_SM100_NVL, NCCL 2.28). Other models: Hopper's 16.
int nccl_nvls_channels(const std::string& gpu_model);
// NVIDIA/nccl: NCCL's ring/tree channel count under the run's channel settings (src/graph/connect.cc
// ncclTopoPostset at v2.26.2-1: nChannels = min(NCCL_MAX_NCHANNELS, nChannels, maxCTAs), then channels are
// duplicated up to max(NCCL_MIN_NCHANNELS, minCTAs); both capped at MAXCHANNELS = 64). `coll_channels` 0
// (count not known) stays 0 unless a minimum is set, which then gives the minimum.
int nccl_channels_with_env(int coll_channels, const NcclChannelEnv& env);
// NVIDIA/nccl: NVLS channels under the run's settings (src/transport/nvls.cc ncclNvlsInit at v2.26.2-1:
// max(minCTAs, min(maxCTAs, channels)); NCCL_MIN/MAX_NCHANNELS do not enter).
int nccl_nvls_channels_with_env(int nvls_channels, const NcclChannelEnv& env);
// How NCCL cuts an NVLS call of `bytes` (src/enqueue.cc calcCollChunking, NCCL 2.18-2.28): the chunk starts
// at nvlsChunkSize (128 KiB) and drops to 64 KiB below 64 x ops x chunk bytes, 32 KiB below 8 x ops x 64 KiB
// and 16 KiB below 2 x ops x 32 KiB, where ops = channels x heads (heads: the communicator's ranks, at most
// NCCL_MAX_NVLS_ARITY = 32); one loop of the kernel moves ops x chunk bytes, so a call takes
// ceil(bytes / loop) loops (at least 1). The collective model charges NVLS's per-step latency once per loop.
struct NvlsLoops {
  double chunk_bytes = 0;
  double loop_bytes = 0;
  double loops = 1;
};
NvlsLoops nccl_nvls_loops(double bytes, int channels, int heads);
// The same for an NVLS_TREE all_reduce across `nodes` hosts (src/enqueue.cc calcCollChunking at v2.26.2-1 and
// 5067397c, src/transport/nvls.cc for the defaults): the chunk starts at nvlsChunkSize (128 KiB) capped by the
// tree's maximum (64 KiB on >= 4 nodes, else the chunk size), then drops to 64 KiB below 4 x ops x chunk bytes
// and to 32 KiB below 1 x ops x chunk, ops = channels x heads. NVLS_TREE keeps larger chunks down to smaller
// calls than NVLS (thresholds 64x / 8x / 2x above), so fewer loops pipeline a mid-size call.
NvlsLoops nccl_nvls_tree_loops(double bytes, int channels, int heads, int nodes);

struct Candidate {
  Algorithm algorithm = Algorithm::Ring;
  Protocol protocol = Protocol::Simple;
  double predicted_s = 0;  // alpha-beta prediction
  double latency_s = 0;    // the alpha part
};

struct TunerChoice {
  Algorithm algorithm = Algorithm::Ring;
  Protocol protocol = Protocol::Simple;
  double predicted_s = 0;
  std::vector<Candidate> candidates;  // every applicable candidate, in (algorithm, protocol) order
  std::vector<std::string> rejected;  // "nvls: <reason>" for algorithms that do not apply
};

// Predicted time of one candidate (assumes it applies).
Candidate predict(const CollectiveSpec& spec, Algorithm a, Protocol p, const CommBandwidths& bw,
                  const Calibration& calib, int channels);
// Throws InputError (naming spec.where) when no candidate applies, e.g. --algo nvls on dgx-a100.
TunerChoice tune(const CollectiveSpec& spec, const topo::Topology& t, topo::Routing& routing,
                 const Calibration& calib);

}  // namespace fabricsim::models
