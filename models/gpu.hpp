#pragma once
// GPU hardware specifications used by the compute roofline (models/compute.hpp). Every number is cited
// in gpu.cpp. Peak figures are dense (no 2:4 sparsity), per GPU.
#include <string>
#include <vector>

namespace fabricsim::models {

enum class Precision { FP16, BF16, TF32, FP32, FP8, FP4 };
const char* to_string(Precision p);
bool parse_precision(const std::string& s, Precision& out);  // "fp16", "bf16", "tf32", "fp32", "fp8", "fp4"

struct GpuSpec {
  std::string name;              // "a100-80gb", "h100", ...
  double peak_fp16_flops = 0;    // FLOP/s, dense Tensor Core FP16 (== BF16 on A100 and later)
  double peak_bf16_flops = 0;    // FLOP/s, dense Tensor Core BF16 (0 = not supported, e.g. V100)
  double peak_tf32_flops = 0;    // FLOP/s, dense Tensor Core TF32 (V100: FP32 CUDA-core peak)
  double peak_fp32_flops = 0;    // FLOP/s, FP32 CUDA cores (non-tensor)
  double hbm_bandwidth_Bps = 0;  // bytes/s
  double hbm_capacity_bytes = 0; // bytes
  std::string source;            // short provenance string
  double peak_fp8_flops = 0;     // FLOP/s, dense Tensor Core FP8 (0 = not supported: V100, A100)
  int sm_count = 0;              // streaming multiprocessors (GEMM wave quantisation, models/compute_calibration)
  double peak_fp4_flops = 0;     // FLOP/s, dense Tensor Core FP4 (NVFP4; 0 = not supported: before Blackwell)

  // Peak for a precision; BF16 on a GPU without BF16 falls back to FP16 (the trace's numbers still count).
  double peak_flops(Precision p) const;
};

// Known GPUs: a100-40gb, a100-80gb (alias "a100"), h100 (alias "h100-80gb", "h100-sxm"), h200, b200, gb200,
// b300, gb300, v100, mi300x (AMD Instinct MI300X).
const std::vector<GpuSpec>& gpu_specs();
// Throws InputError(where, ...) listing the known names when `name` is unknown.
const GpuSpec& gpu_spec(const std::string& name, const std::string& where = "gpu");
bool is_known_gpu(const std::string& name);
// The preset for a device name as CUDA / nvidia-smi reports it ("NVIDIA H200", "NVIDIA H100 80GB HBM3",
// "NVIDIA A100-SXM4-40GB", "NVIDIA GB200"); "" when none matches. `memory_bytes` (0 = unknown) tells the A100
// 40/80 GB parts apart.
std::string gpu_preset_for_device(const std::string& device_name, double memory_bytes = 0);

}  // namespace fabricsim::models
