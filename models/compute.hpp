#pragma once
// Compute roofline: the time of one kernel (or a fused group of kernels of one class) on one GPU is
//   max(flops / (peak_flops(precision) * flops_efficiency[class]),
//       bytes / (hbm_bandwidth_Bps * memory_efficiency[class])) + kernels * kernel_overhead_s
// The achieved efficiencies per op class are the calibratable part; defaults in compute.cpp cite their
// sources, fitted values for the Megatron / distributed-embeddings validation are documented in
// docs/validation.md ("Training").
#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/compute_calibration.hpp"
#include "models/gpu.hpp"
#include "models/kernel.hpp"
#include "sim/base/json_reader.hpp"

namespace fabricsim::models {

enum class OpClass { Gemm, Attention, Elementwise, Embedding };
constexpr int kNumOpClasses = 4;
const char* to_string(OpClass c);
bool parse_op_class(const std::string& s, OpClass& out);  // "gemm", "attention", "elementwise", "embedding"

struct ComputeEfficiency {
  std::array<double, kNumOpClasses> flops_efficiency{};   // achieved / peak FLOP/s, (0, 1]
  std::array<double, kNumOpClasses> memory_efficiency{};  // achieved / peak HBM bytes/s, (0, 1]
  double kernel_overhead_s = 0;                            // per kernel launch (gaps between kernels)

  double flops_eff(OpClass c) const { return flops_efficiency[static_cast<int>(c)]; }
  double mem_eff(OpClass c) const { return memory_efficiency[static_cast<int>(c)]; }
};

ComputeEfficiency default_compute_efficiency();

// Named sets of efficiencies fitted to a measured workload (compute.cpp cites each): "default" (the cited
// hardware defaults above) and "megatron-sc21" (Megatron-LM GPT training on A100, fitted on 3 rows of
// Narayanan et al. SC'21 Table 1). False for an unknown name.
bool compute_preset(const std::string& name, ComputeEfficiency& out);
const std::vector<std::string>& compute_preset_names();
std::string compute_preset_list();  // "default, megatron-sc21", for error messages and help

// The named preset, or an InputError naming `where` (a CLI flag) and the known names.
ComputeEfficiency compute_preset_named(const std::string& name, const std::string& where);
// The preset a compute JSON object names ("default" when it has none; not a string: an error naming `at`).
std::string compute_preset_name(const Json& j, const JsonPath& at);
// The efficiencies a compute JSON object starts from: its "preset" (an error naming `at` when unknown), or
// the defaults when it has none.
ComputeEfficiency compute_preset_from_json(const Json& j, const JsonPath& at);
// Overrides from a JSON object {"preset": "megatron-sc21", "gemm": {"flops_efficiency": 0.7,
// "memory_efficiency": 0.8}, ..., "kernel_overhead": "4us", "calibration": "h200"}: with `apply_preset`, "preset" (optional)
// first replaces `base` with the named preset; then the other keys override it. Unknown keys are errors
// naming `at`.
ComputeEfficiency compute_efficiency_from_json(const Json& j, const JsonPath& at, ComputeEfficiency base,
                                               bool apply_preset = true);
Json compute_efficiency_to_json(const ComputeEfficiency& e);
// The per-kernel calibration a compute JSON object names with "calibration" (a shipped name, "h100" / "h200",
// or a fabricsim.compute_calibration/1 file path, already resolved by the caller); null when it names none.
// Errors name `at`/calibration.
std::shared_ptr<const ComputeCalibration> compute_calibration_from_compute_json(const Json& j, const JsonPath& at);
// Overrides from Calibration::extra-style keys "compute.<class>.flops_efficiency",
// "compute.<class>.memory_efficiency", "compute.kernel_overhead_s". Unknown "compute.*" keys are errors.
ComputeEfficiency compute_efficiency_from_extra(const std::map<std::string, double>& extra,
                                                ComputeEfficiency base);

struct ComputeModel {
  GpuSpec gpu;
  ComputeEfficiency eff = default_compute_efficiency();
  Precision precision = Precision::FP16;

  // Seconds for `kernels` kernels of class `c` doing `flops` FLOPs and moving `bytes` bytes of HBM traffic.
  double time_s(OpClass c, double flops, double bytes, int kernels = 1) const;
  // Per-kernel calibration (models/compute_calibration.hpp); null = the GPU's default
  // (default_compute_calibration(gpu.name): its shipped fit, h100 / h200, else the H200 fit).
  std::shared_ptr<const ComputeCalibration> kernels;
  const ComputeCalibration& kernel_calibration() const;

  // Seconds for one kernel described by its shape (models/kernel.hpp), priced by the per-kernel model
  // (models/compute_calibration.hpp: tile/wave-quantised GEMMs, fused attention vs sequence and head dim,
  // memory-bound kernels at a per-kind fraction of HBM bandwidth). `eff` and `precision` are not used: the
  // kernel carries its precision; FP8 / FP4 on a GPU without them is an InputError naming the GPU.
  double kernel_time_s(const KernelDesc& k) const;
  // When set, every kernel_time_s call appends its kernel here (the shapes a workload prices:
  // `fabricsim run --kernel-shapes`, which feeds fabricsim-kernel-bench --shapes).
  std::vector<KernelDesc>* priced = nullptr;
};

}  // namespace fabricsim::models
