// Compute slowed by the communication kernels beside it (models/compute_contention.hpp).
#include "models/compute_contention.hpp"

#include <algorithm>
#include <cmath>

#include "models/tuner.hpp"

namespace fabricsim::models {

const std::vector<CommSmContentionPoint>& comm_sm_contention_table() {
  // tests/data/hardware/h100-comm-overlap/README.md (H100 80GB HBM3 SXM, 132 SMs, CUDA 13.0, cuBLASLt 13.1):
  // rows `resident` of overlap.csv and overlap_repeat.csv, comm_kind wait / poll / copy (the *_host kinds are
  // a stand-in artifact), 6 GEMMs x 3 kinds x 2 runs = 36 ratios gemm_beside_us / gemm_alone_us per CTA
  // count, nearest-rank lower median, to 4 decimals (tests/models/test_compute_contention.cpp recomputes
  // them from the two CSVs).
  static const std::vector<CommSmContentionPoint> t = {{1, 1.0240},  {2, 1.0780},  {4, 1.1465}, {8, 1.1607},
                                                       {16, 1.2450}, {24, 1.2895}, {32, 1.4485}};
  return t;
}

double comm_sm_slowdown(double ctas) {
  if (!(ctas > 0)) return 1.0;
  const auto& t = comm_sm_contention_table();
  ctas = std::min(ctas, static_cast<double>(kCommSmContentionMaxCtas));
  double x0 = 0, y0 = 1.0;
  for (const auto& p : t) {
    if (ctas <= p.ctas) return y0 + (p.slowdown - y0) * (ctas - x0) / (p.ctas - x0);
    x0 = p.ctas, y0 = p.slowdown;
  }
  return y0;
}

bool comm_sm_contention_measured(const std::string& gpu_model) {
  return gpu_model.rfind("h100", 0) == 0 || gpu_model.rfind("h200", 0) == 0;
}

namespace {
// NCCL's ring/tree channels on `hosts` hosts of `gpu_model` (tuner.cpp nccl_coll_channels). GPUs whose count
// was not measured (B200, GB200, A100 across hosts, ...) take H100's (24 on one host, 16 across hosts): NCCL
// derives it from the NVLink count (18 on H100, H200 and B200).
int coll_channels(const std::string& gpu_model, int hosts) {
  const int c = nccl_coll_channels(gpu_model, hosts);
  return c > 0 ? c : nccl_coll_channels("h100", hosts);
}
int pow2_up(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}
}  // namespace

int nccl_collective_ctas(const std::string& gpu_model, int hosts, int nranks, Algorithm a, Protocol p, double bytes) {
  if (nranks <= 1 || !(bytes > 0)) return 0;
  switch (a) {
    case Algorithm::Ring:
    case Algorithm::Tree:
      return nccl_call_channels(a, p, bytes, nranks, coll_channels(gpu_model, hosts));
    case Algorithm::Nvls:
    case Algorithm::NvlsTree:
      return nccl_nvls_channels(gpu_model);
    case Algorithm::Direct:
    case Algorithm::Pairwise:
      return nccl_all_to_all_ctas(gpu_model, hosts);
    default:  // CollNet, PAT, hierarchical: the communicator's channels
      return coll_channels(gpu_model, hosts);
  }
}

int nccl_all_to_all_ctas(const std::string& gpu_model, int hosts) {
  // NVIDIA/nccl src/graph/paths.cc ncclTopoComputeP2pChannels at v2.26.2-1: p2pnChannels = pow2Up(nChannels)
  // (NCCL_MIN/MAX_P2P_NCHANNELS at their defaults); a grouped send/recv to every peer spreads over them all.
  return pow2_up(coll_channels(gpu_model, hosts));
}

int nccl_p2p_ctas(const std::string& gpu_model, bool same_host, double bytes) {
  if (!(bytes > 0)) return 1;
  // NVIDIA/nccl v2.26.2-1: src/graph/paths.cc ncclTopoGetNchannels gives a peer across the network 2 channels
  // ("2 channels per NIC"), an NVLink peer 2 x its NVLinks, capped by p2pnChannels = pow2Up(nChannels); a
  // two-rank communicator then halves the per-peer count while nChannels x nRanks > p2pnChannels and uses
  // one channel per 64 KiB (stepSize / 8 on one node) up to it (src/enqueue.cc addP2pToPlan and its caller).
  if (!same_host) return 2;
  const int p2p = pow2_up(coll_channels(gpu_model, 1));
  const int per_peer = std::max(1, p2p / 2);
  const double parts = std::ceil(bytes / 65536.0);
  return static_cast<int>(std::clamp(parts, 1.0, static_cast<double>(per_peer)));
}

double kernel_residual_s(double sum_s, double sum_sq_s) {
  return sum_s > 0 && sum_sq_s > 0 ? sum_sq_s / (2.0 * sum_s) : 0.0;
}

double comm_start_delay_s(double kernel_wait_s, double slowdown, double op_left_s) {
  if (!(kernel_wait_s >= 0) || !(op_left_s > 0)) return 0.0;
  return std::min(kernel_wait_s * std::max(1.0, slowdown), op_left_s);
}

bool comm_start_delay_measured(const std::string& gpu_model) { return comm_sm_contention_measured(gpu_model); }

}  // namespace fabricsim::models
