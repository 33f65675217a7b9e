#pragma once
// GPU hardware specifications used by the compute roofline (models/compute.hpp). Every number is cited
// in gpu.cpp. Peak figures are dense (no 2:4 sparsity), per GPU.
#include <string>
#include <vector>

namespace fabricsim::models {

enum class Precision { FP16, BF16, TF32, FP32, FP8 };
const char* to_string(Precision p);
bool parse_precision(const std::string& s, Precision& out);  // "fp16", "bf16", "tf32", "fp32", "fp8"

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

  // Peak for a precision; BF16 on a GPU without BF16 falls back to FP16 (the trace's numbers still count).
  double peak_flops(Precision p) const;
};

// Known GPUs: a100-40gb, a100-80gb (alias "a100"), h100 (alias "h100-80gb"), h200, b200, v100.
const std::vector<GpuSpec>& gpu_specs();
// Throws InputError(where, ...) listing the known names when `name` is unknown.
const GpuSpec& gpu_spec(const std::string& name, const std::string& where = "gpu");
bool is_known_gpu(const std::string& name);

}  // namespace fabricsim::models
