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

// ---- Start delay: a communication kernel launched while a compute kernel runs starts when it leaves ----
// Measured on the same H100 (tests/data/hardware/h100-comm-overlap/README.md, "queued"; overlap.csv and
// overlap_repeat.csv rows `queued`, comm_kind wait: 6 GEMMs x 3 CTA counts x 2 stream priorities x 2 runs):
// a stand-in of 8-32 CTAs launched on another stream while a series of GEMMs runs starts only when the GEMM
// running at its launch has ended (comm_beside_us - comm_alone_us never exceeds that GEMM's gemm_alone_us by
// more than its repeat spread, and never reaches into the next queued GEMM), whatever the stream priority.
// So a collective or send/recv whose kernel is launched on rank r while a compute op of r runs starts
// comm_start_delay_s() later; its CTAs are held only from then on.
//
// A compute op may stand for many kernels (a decoder layer's forward: norms, GEMMs, attention, ...); where
// in them the launch falls is not known, so the delay is the expectation for a launch at a uniformly random
// instant of the op: the instant falls in kernel i with probability d_i / sum d, and then d_i / 2 of it is
// left on average, so E[left] = sum d_i^2 / (2 sum d_i) (kernel_residual_s). One kernel (or an op whose
// kernel the launch falls in is known): the op's remaining time.
//
// E[time left in the kernel running at a random instant of kernels of durations d_i]: sum_sq_s / (2 sum_s),
// from sum_s = sum d_i and sum_sq_s = sum d_i^2; 0 for no kernels.
double kernel_residual_s(double sum_s, double sum_sq_s);
// The start delay of a communication kernel launched while a compute op runs: the op's `kernel_wait_s`
// (its kernel_residual_s at full speed; < 0: unknown, no delay) times `slowdown` (comm_sm_slowdown beside
// the communication kernels already running: its kernels run that much longer), at most `op_left_s` (when
// the op ends, its last kernel has left and the communication kernel goes before the next compute op's).
double comm_start_delay_s(double kernel_wait_s, double slowdown, double op_left_s);
// Whether the start delay was measured on this GPU's architecture: the same H100 as the table above, so the
// same GPUs (comm_sm_contention_measured); elsewhere only when a scenario asks ("comm_start_delay": true).
bool comm_start_delay_measured(const std::string& gpu_model);

}  // namespace fabricsim::models
