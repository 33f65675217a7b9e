#pragma once
// Per-kernel compute model and its calibration (`fabricsim.compute_calibration/1`).
//
// The time of one kernel on one GPU (docs/workloads.md "Compute model", docs/calibration.md):
//   GEMM (m x n x k, `groups` of them):
//     q      = m n groups / (waves * SMs * TM * TN),  waves = ceil(groups ceil(m/TM) ceil(n/TN) / SMs)
//              (tile + wave quantisation over the SMs; the tile TM x TN is the one of kTiles that minimises
//              the time, as cuBLAS heuristics pick a tile per shape)
//     t      = max(2 m n k groups / (peak(prec) * eff * q * k / (k + k_half)),
//                  bytes(A, B, C) / (HBM * mem_eff), bytes / (SMs * sm_stream)) + overhead
//   fused attention (fwd or bwd, per implementation), as flash kernels run it: one CTA per 128-row tile of
//   the parallel dimension (queries forward, keys backward) and head and batch, each looping over the other
//   dimension (`loop` rows; the causal mean is loop/2 plus half the diagonal tile):
//     n      = batch * heads * ceil(par / 128) CTAs,  w = mean rows per CTA + k_half,  w_max = loop + k_half
//     units  = max(n * w / SMs + tail * w_max, w_max)    (SM-time in rows; one CTA alone takes w_max)
//     t      = flops / (peak(prec) * eff * f(d)) * units / (n * mean_flop_rows / SMs) + overhead
//              (f(d) = (d / (d + d_half)) / (128 / (128 + d_half)), d_half = the GEMM k_half: the S = QK^T
//              GEMM has K = head dim; 1 at the measured d = 128 and capped there, d > 128 not measured)
//   memory-bound: t = bytes / (HBM * fraction(kind)) + launch
// The dimensionless parameters (eff, k_half, tail, fractions) are fitted per GPU on measured kernel times
// (fit_compute_calibration); the peaks, HBM bandwidth and SM count come from models/gpu.cpp.
#include <array>
#include <set>
#include <string>
#include <vector>

#include "models/gpu.hpp"
#include "models/kernel.hpp"
#include "sim/base/json_reader.hpp"

namespace fabricsim::models {

inline constexpr const char* kComputeCalibrationSchema = "fabricsim.compute_calibration/1";
inline constexpr const char* kKernelMeasurementsSchema = "fabricsim.kernel_measurements/1";

struct GemmParams {
  double efficiency = 0.7;       // achieved / dense peak at full tiles, full waves and k >> k_half
  double k_half = 256;           // k at which the K-loop reaches half its asymptotic rate (prologue/epilogue)
  double overhead_s = 5e-6;      // fixed time per kernel (launch gap, epilogue, tail)
  double memory_efficiency = 0.8;  // achieved / peak HBM bandwidth when the GEMM streams its operands
  // Operand streaming rate per SM (bytes/s; 0 = not limiting). Grouped GEMMs with few tokens per expert are
  // bound by how fast each SM pulls its expert's weight tiles, not by HBM: the H100 and H200 run them in the
  // same time despite 3.35 vs 4.8 TB/s (tests/data/hardware/h1x0-kernels/grouped_gemm.csv).
  double sm_stream_Bps = 0;
};

struct AttentionParams {
  double efficiency = 0.6;  // achieved / dense peak with full waves and loop >> k_half
  double k_half = 256;      // a CTA's fixed cost (prologue, epilogue) in rows of its loop
  double overhead_s = 5e-6;  // fixed time per kernel (launch, grid start and drain)
  double tail = 0.5;        // share of one longest CTA that runs after the other SMs are done
};
// Physical ranges of the attention parameters (the reader refuses values outside; the fit, which optimises
// logarithms, keeps k_half >= 1, overhead >= the measured launch and tail >= 0.01):
//  - k_half in [0, 2048] rows: at most 16 of the 128-row tiles the loop steps through;
//  - overhead in [0, 10 us]: a launch (0.85 us in a CUDA graph, kernels2.csv) up to the largest fixed time the
//    GEMM fits find on the same GPUs (4.6 / 8.2 us bf16 / fp8, validate/compute_calibrations/h200.json),
//    rounded up: the kernel's own start and drain;
//  - tail in [0, 1]: 1 = the last CTA starts when the others finish (worst case), 0 = perfectly balanced.
inline constexpr double kAttentionKHalfMax = 2048;
inline constexpr double kAttentionOverheadMax_s = 10e-6;
// Rows per CTA tile of the parallel dimension: FlashAttention-2 at head dim 128 runs kBlockM = 128 query rows
// per CTA forward (grid = (ceil(seqlen_q / kBlockM), b, h)) and kBlockN = 128 key rows per CTA backward
// (grid_n over ceil(seqlen_k / kBlockN)): Dao-AILab/flash-attention@0251105a2 csrc/flash_attn/src/
// flash_fwd_launch_template.h (run_mha_fwd_hdim128, run_flash_fwd) and flash_bwd_launch_template.h
// (run_mha_bwd_hdim128, run_flash_bwd_seqk_parallel). cuDNN's kernels are closed; the same tile is assumed.
inline constexpr double kAttentionTileRows = 128;

struct ComputeCalibration {
  std::string gpu;     // GPU preset it was fitted on (models/gpu.cpp), e.g. "h200"
  std::string source;  // provenance: measurement file(s), tool, split
  int sm_count = 0;    // SMs of the measured GPU (0 = take the GpuSpec's)
  GemmParams gemm_bf16, gemm_fp8, grouped_gemm;
  // [impl][pass]: impl 0 = flash, 1 = cudnn; pass 0 = fwd, 1 = bwd.
  std::array<std::array<AttentionParams, 2>, 2> attention{};
  std::array<double, kNumMemoryKernels> memory_fraction{};  // achieved / peak HBM bandwidth per kind
  double launch_overhead_s = 0.85e-6;                        // memory-bound kernels' fixed time

  const AttentionParams& attn(AttentionImpl impl, bool backward) const {
    return attention[impl == AttentionImpl::Cudnn ? 1 : 0][backward ? 1 : 0];
  }
  AttentionParams& attn(AttentionImpl impl, bool backward) {
    return attention[impl == AttentionImpl::Cudnn ? 1 : 0][backward ? 1 : 0];
  }
};

// Seconds for kernel `k` on `gpu` under calibration `c`. FP8 / FP4 on a GPU without them: InputError naming
// the GPU.
double calibrated_kernel_time_s(const ComputeCalibration& c, const GpuSpec& gpu, const KernelDesc& k);

// Shipped calibrations (validate/compute_calibrations/*.json, embedded at build time): "h100", "h200".
const std::vector<std::string>& compute_calibration_names();
// The shipped calibration `name`, or an InputError naming `where`.
const ComputeCalibration& shipped_compute_calibration(const std::string& name, const std::string& where);
// The calibration a GPU preset uses by default: its own shipped one (h100, h200), else the H200 fit (the
// dimensionless efficiencies of a Hopper GPU; Blackwell / Ampere parts carry them uncalibrated, with their own
// peaks, bandwidth and SM count).
const ComputeCalibration& default_compute_calibration(const std::string& gpu_name);
// A shipped name or a calibration file path (relative paths are resolved by the caller).
ComputeCalibration compute_calibration_named(const std::string& name_or_path, const std::string& where);

ComputeCalibration compute_calibration_from_json(const Json& j, const std::string& file);
ComputeCalibration load_compute_calibration(const std::string& path);
Json compute_calibration_to_json(const ComputeCalibration& c);
std::string compute_calibration_dump(const ComputeCalibration& c);  // deterministic text, newline-terminated

// ---- measured kernel times ----
struct KernelMeasurement {
  KernelDesc kernel;
  double time_s = 0;
  std::string label;
  std::string group;  // held-out folds: model name (GEMM), heads/kv (attention); "" = always fitted
  std::string where;  // file:line or JSON path
};

struct KernelMeasurements {
  std::string device;  // as the measurement names it ("NVIDIA H200")
  std::string gpu;     // GPU preset (gpu_preset_for_device)
  int sm_count = 0;
  double memory_bytes = 0;
  std::string source;
  std::vector<KernelMeasurement> rows;
  double launch_overhead_s = 0;  // measured per-kernel launch in a CUDA graph (kernels2.csv), 0 = none
};

// A `fabricsim.kernel_measurements/1` JSON file, or a folder of CSVs in the tests/data/hardware/h200-kernels
// format (gemm.csv, attention.csv, memory_bound.csv, grouped_gemm.csv, optimizer.csv, kernels2.csv; the
// GPU from env.txt). Strict: unknown keys, kinds and columns are errors naming the file and location.
KernelMeasurements load_kernel_measurements(const std::string& path);
KernelMeasurements kernel_measurements_from_json(const Json& j, const std::string& file);

// Fits every parameter that rows of `m` identify (the others keep `start`'s values) by least squares on
// ln(time) (Nelder-Mead per kernel class). Deterministic.
// `classes` (error_class names, with "attention" for all four attention classes; empty = all) limits the fit to
// those classes; the others keep `start`'s values.
ComputeCalibration fit_compute_calibration(const KernelMeasurements& m, const ComputeCalibration& start,
                                           const std::set<std::string>& classes = {});
// The start values of a fit: the cited defaults in compute_calibration.cpp.
ComputeCalibration default_fit_start();

// ---- held-out errors ----
// The error class of a row: gemm-bf16, gemm-fp8, grouped_gemm, attention-<impl>-<fwd|bwd>, memory_bound.
std::string error_class(const KernelDesc& k);
struct HeldOutRow {
  std::string split;  // "leave-one-model-out h200" / "h200 -> h100"
  std::string cls;
  int n = 0;
  double median_abs = 0, max_abs = 0;  // |predicted / measured - 1|
};
// Leave-one-group-out within `fit` (each group's rows predicted by a fit on the other rows), and, when
// `other` has rows, a fit on all of `fit` predicting `other` (on its own GPU's peaks and bandwidth).
std::vector<HeldOutRow> compute_held_out(const KernelMeasurements& fit, const KernelMeasurements* other);
std::string held_out_table(const std::vector<HeldOutRow>& rows);  // markdown

}  // namespace fabricsim::models
