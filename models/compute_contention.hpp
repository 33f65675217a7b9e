#pragma once
// What a communication kernel that runs beside compute costs the compute: NCCL runs a collective (or a
// send/recv) as one kernel with one CTA per channel (src/device/common.h, src/include/device.h at NVIDIA/nccl
// v2.26.2-1), and while those CTAs are resident the kernels of the compute stream cannot use their SMs.
//
// comm_sm_slowdown(C): how much longer compute takes while communication kernels hold C CTAs in total,
// measured on one H100 SXM (132 SMs) with cuBLASLt GEMMs beside a stand-in kernel of C CTAs
// (tests/data/hardware/h100-comm-overlap/README.md: `fabricsim-kernel-bench --overlap`, two runs, the three
// device-memory stand-ins wait / poll / copy, 6 GEMMs: the nearest-rank lower median of 36 ratios beside /
// alone per CTA count). Linear between the measured counts, 1 at 0 CTAs, and clamped at 32 CTAs (the largest
// count inside NCCL's usual channel range; the 64-CTA row, 3.9x, is left out). The same table is applied to
// every GPU (an H100 measurement; not scaled by SM count).
//
// nccl_*_ctas: the CTAs one NCCL kernel holds (its channels), from the tuner's channel counts.
#include <string>
#include <vector>

#include "models/calibration.hpp"

namespace fabricsim::models {

struct CommSmContentionPoint {
  int ctas = 0;           // CTAs the communication kernels hold
  double slowdown = 1.0;  // compute time beside them / alone
};
// The measured table (ascending CTA counts, without the 0-CTA point).
const std::vector<CommSmContentionPoint>& comm_sm_contention_table();
// The CTA count above which the table is clamped.
constexpr int kCommSmContentionMaxCtas = 32;
// Compute time beside communication kernels holding `ctas` CTAs in total over the time alone (>= 1).
double comm_sm_slowdown(double ctas);
// Whether the table was measured on this GPU's architecture: Hopper (h100*, h200*: 132 SMs, the GEMM kernels
// measured). The loss is mostly the GEMM tiles no longer dividing evenly over the SMs left (README), which
// depends on the SM count and the kernels: A100 (108 SMs) and Blackwell (148 SMs) are not measured, so a
// scenario applies the table to them only when it asks to ("comm_sm_contention": true).
bool comm_sm_contention_measured(const std::string& gpu_model);

// CTAs of a Ring / Tree / NVLS / NVLS_TREE / CollNet / PAT collective of `bytes` on `nranks` GPUs of
// `gpu_model` over `hosts` hosts, run with algorithm `a` and protocol `p` (NCCL's default channel settings).
int nccl_collective_ctas(const std::string& gpu_model, int hosts, int nranks, Algorithm a, Protocol p, double bytes);
// CTAs of an all_to_all(v) (grouped send/recv to every peer): all of the communicator's p2p channels.
int nccl_all_to_all_ctas(const std::string& gpu_model, int hosts);
// CTAs of one send (or recv) of `bytes` to a peer on the same host (`same_host`) or across the network.
int nccl_p2p_ctas(const std::string& gpu_model, bool same_host, double bytes);

}  // namespace fabricsim::models
