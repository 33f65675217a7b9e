#include "models/gpu.hpp"

#include "sim/base/error.hpp"

namespace fabricsim::models {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::FP16: return "fp16";
    case Precision::BF16: return "bf16";
    case Precision::TF32: return "tf32";
    case Precision::FP32: return "fp32";
    case Precision::FP8: return "fp8";
  }
  return "?";
}

bool parse_precision(const std::string& s, Precision& out) {
  if (s == "fp16") out = Precision::FP16;
  else if (s == "bf16") out = Precision::BF16;
  else if (s == "tf32") out = Precision::TF32;
  else if (s == "fp32") out = Precision::FP32;
  else if (s == "fp8") out = Precision::FP8;
  else return false;
  return true;
}

double GpuSpec::peak_flops(Precision p) const {
  switch (p) {
    case Precision::FP16: return peak_fp16_flops;
    case Precision::BF16: return peak_bf16_flops > 0 ? peak_bf16_flops : peak_fp16_flops;
    case Precision::TF32: return peak_tf32_flops;
    case Precision::FP32: return peak_fp32_flops;
    case Precision::FP8: return peak_fp8_flops;
  }
  return peak_fp16_flops;
}

namespace {
constexpr double T = 1e12;   // TFLOP/s -> FLOP/s
constexpr double GBps = 1e9; // GB/s -> bytes/s (decimal, as datasheets)
constexpr double GB = 1e9;   // GB capacity (decimal, as datasheets)
constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

std::vector<GpuSpec> make_specs() {
  std::vector<GpuSpec> v;
  // A100 SXM4 40GB.
  //  FP16/BF16 dense 312 TFLOP/s: /work/shared/data/hardware/hardware_specs.json facts[6] (Narayanan et al.
  //    SC21 Sec.5, primary); TF32 dense 156 and FP32 19.5 TFLOP/s: NVIDIA A100 Tensor Core GPU datasheet
  //    (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf, "TF32 Tensor Core 156 TFLOPS", "FP32 19.5").
  //  HBM 1555 GB/s: hardware_specs.json facts[7] (citing the same datasheet). Capacity 40 GB: datasheet
  //    (the product name; the device reports 40 GiB = 42.9e9 bytes, which we use as usable capacity).
  v.push_back({"a100-40gb", 312 * T, 312 * T, 156 * T, 19.5 * T, 1555 * GBps, 40 * GiB,
               "hardware_specs.json facts[6],[7]; NVIDIA A100 datasheet r4"});
  // A100 SXM4 80GB: same compute as above; HBM2e 2039 GB/s: hardware_specs.json facts[8]; 80 GB: datasheet
  //   (80 GiB device memory).
  v.push_back({"a100-80gb", 312 * T, 312 * T, 156 * T, 19.5 * T, 2039 * GBps, 80 * GiB,
               "hardware_specs.json facts[6],[8]; NVIDIA A100 datasheet r4"});
  // H100 SXM5: FP16/BF16 dense 989.4 TFLOP/s: hardware_specs.json facts[19] (H100 whitepaper via
  //   glennklockwood); TF32 dense 494.7 and FP32 66.9 TFLOP/s: NVIDIA H100 whitepaper (Table 3, SXM5).
  //   HBM3 3.35 TB/s, 80 GB: hardware_specs.json facts[20].
  v.push_back({"h100", 989.4 * T, 989.4 * T, 494.7 * T, 66.9 * T, 3350 * GBps, 80 * GiB,
               "hardware_specs.json facts[19],[20]; NVIDIA H100 whitepaper", 1978.9 * T});
  //   FP8 dense 1978.9 TFLOP/s: NVIDIA H100 whitepaper Table 3 (SXM5, 3957.8 with sparsity).
  // H200 SXM: same GH100 compute as H100 SXM (NVIDIA H200 datasheet: FP16 Tensor 1,979 TFLOPS with
  //   sparsity = 989.5 dense; TF32 989 sparse = 494.7 dense; FP32 67); HBM3e 4.8 TB/s, 141 GB: NVIDIA H200
  //   datasheet. (Measured STREAM 4.0-4.15 TB/s: hardware_specs.json facts[25].)
  v.push_back({"h200", 989.4 * T, 989.4 * T, 494.7 * T, 67 * T, 4800 * GBps, 141 * GB,
               "NVIDIA H200 datasheet; hardware_specs.json facts[25]", 1979 * T});
  //   FP8 dense 1979 TFLOP/s: NVIDIA H200 datasheet (FP8 Tensor Core 3,958 TFLOPS with sparsity).
  // B200: FP16 dense 2250 TFLOP/s, HBM3e 8 TB/s, 192 GB: hardware_specs.json facts[41] (secondary; note
  //   there: some DGX/HGX parts expose 180 GB). TF32 dense 1100 TFLOP/s (2.2 PF sparse) and FP32 75 TFLOP/s:
  //   NVIDIA DGX B200 / HGX B200 datasheet (8-GPU totals divided by 8).
  v.push_back({"b200", 2250 * T, 2250 * T, 1100 * T, 75 * T, 8000 * GBps, 192 * GB,
               "hardware_specs.json facts[41]; NVIDIA HGX B200 datasheet", 4500 * T});
  //   FP8 dense 4.5 PFLOP/s: NVIDIA HGX B200 datasheet (72 PFLOPS FP8 training per 8 GPUs with sparsity).
  // V100 SXM2 16GB (ABCI V nodes, as in /work/shared/data/nccl-tests abci_*_vnode_*): FP16 Tensor 125
  //   TFLOP/s, FP32 15.7 TFLOP/s, HBM2 900 GB/s, 16 GB: NVIDIA Tesla V100 datasheet (SXM2). No BF16/TF32:
  //   TF32 work runs on the FP32 cores (15.7).
  v.push_back({"v100", 125 * T, 0, 15.7 * T, 15.7 * T, 900 * GBps, 16 * GiB, "NVIDIA Tesla V100 datasheet"});
  return v;
}

std::string canonical(const std::string& n) {
  if (n == "a100") return "a100-80gb";  // Selene / DGX A100 80GB is the project's reference A100
  if (n == "h100-80gb" || n == "h100-sxm") return "h100";
  if (n == "v100-16gb") return "v100";
  return n;
}
}  // namespace

const std::vector<GpuSpec>& gpu_specs() {
  static const std::vector<GpuSpec> specs = make_specs();  // immutable table, built once
  return specs;
}

bool is_known_gpu(const std::string& name) {
  std::string c = canonical(name);
  for (const auto& s : gpu_specs())
    if (s.name == c) return true;
  return false;
}

const GpuSpec& gpu_spec(const std::string& name, const std::string& where) {
  std::string c = canonical(name);
  for (const auto& s : gpu_specs())
    if (s.name == c) return s;
  std::string known;
  for (const auto& s : gpu_specs()) known += (known.empty() ? "" : ", ") + s.name;
  throw InputError(where, "unknown GPU model '" + name + "' (known: " + known + ")");
}

}  // namespace fabricsim::models
