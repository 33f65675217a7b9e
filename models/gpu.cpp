#include "models/gpu.hpp"

#include <cctype>

#include "sim/base/error.hpp"

namespace fabricsim::models {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::FP16: return "fp16";
    case Precision::BF16: return "bf16";
    case Precision::TF32: return "tf32";
    case Precision::FP32: return "fp32";
    case Precision::FP8: return "fp8";
    case Precision::FP4: return "fp4";
  }
  return "?";
}

bool parse_precision(const std::string& s, Precision& out) {
  if (s == "fp16") out = Precision::FP16;
  else if (s == "bf16") out = Precision::BF16;
  else if (s == "tf32") out = Precision::TF32;
  else if (s == "fp32") out = Precision::FP32;
  else if (s == "fp8") out = Precision::FP8;
  else if (s == "fp4") out = Precision::FP4;
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
    case Precision::FP4: return peak_fp4_flops;
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
  // Fields: name, fp16, bf16, tf32, fp32, HBM bandwidth, HBM capacity, source, fp8, SMs, fp4 (all dense).
  // A100 SXM4 40GB.
  //  FP16/BF16 dense 312 TFLOP/s: /work/shared/data/hardware/hardware_specs.json facts[6] (Narayanan et al.
  //    SC21 Sec.5, primary); TF32 dense 156 and FP32 19.5 TFLOP/s: NVIDIA A100 Tensor Core GPU datasheet
  //    (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf, "TF32 Tensor Core 156 TFLOPS", "FP32 19.5").
  //  HBM 1555 GB/s: hardware_specs.json facts[7] (citing the same datasheet). Capacity 40 GB: datasheet
  //    (the product name; the device reports 40 GiB = 42.9e9 bytes, which we use as usable capacity).
  //  108 SMs: NVIDIA A100 Tensor Core GPU Architecture whitepaper (GA100 in A100: 108 SMs). No FP8 / FP4.
  v.push_back({"a100-40gb", 312 * T, 312 * T, 156 * T, 19.5 * T, 1555 * GBps, 40 * GiB,
               "hardware_specs.json facts[6],[7]; NVIDIA A100 datasheet r4", 0, 108});
  // A100 SXM4 80GB: same compute as above; HBM2e 2039 GB/s: hardware_specs.json facts[8]; 80 GB: datasheet
  //   (80 GiB device memory).
  v.push_back({"a100-80gb", 312 * T, 312 * T, 156 * T, 19.5 * T, 2039 * GBps, 80 * GiB,
               "hardware_specs.json facts[6],[8]; NVIDIA A100 datasheet r4", 0, 108});
  // H100 SXM5: FP16/BF16 dense 989.4 TFLOP/s: hardware_specs.json facts[19] (H100 whitepaper via
  //   glennklockwood); TF32 dense 494.7 and FP32 66.9 TFLOP/s: NVIDIA H100 whitepaper (Table 3, SXM5).
  //   HBM3 3.35 TB/s, 80 GB: hardware_specs.json facts[20].
  //   FP8 dense 1978.9 TFLOP/s: NVIDIA H100 whitepaper Table 3 (SXM5, 3957.8 with sparsity).
  //   132 SMs: tests/data/hardware/h100-kernels/env.txt (torch device properties, "sms=132").
  v.push_back({"h100", 989.4 * T, 989.4 * T, 494.7 * T, 66.9 * T, 3350 * GBps, 80 * GiB,
               "hardware_specs.json facts[19],[20]; NVIDIA H100 whitepaper", 1978.9 * T, 132});
  // H100 SXM 96GB HBM2e at a 500 W power limit (Meta's Grand Teton servers, the GPUs of torchtitan's published
  //   H100 tables): 96 GB HBM2e at 2.4 TB/s peak bandwidth and the 500 W limit are stated in the benchmark files
  //   the rows come from (pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md and
  //   benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md, "Hardware"; tests/data/training-modern/
  //   torchtitan_dense.csv `gpu` column). The same file says the part's peak TFLOP/s lies "between SXM and NVL"
  //   and is not known: the H100 SXM5 peaks above are used, an upper bound.
  v.push_back({"h100-96gb", 989.4 * T, 989.4 * T, 494.7 * T, 66.9 * T, 2400 * GBps, 96 * GiB,
               "torchtitan benchmarks/llama3_h100_202412_torchtitan.md (96 GB HBM2e, 2.4 TB/s, 500 W); H100 SXM5 peaks (upper bound)",
               1978.9 * T, 132});
  // H200 SXM: same GH100 compute as H100 SXM (NVIDIA H200 datasheet: FP16 Tensor 1,979 TFLOPS with
  //   sparsity = 989.5 dense; TF32 989 sparse = 494.7 dense; FP32 67); HBM3e 4.8 TB/s, 141 GB: NVIDIA H200
  //   datasheet. (Measured STREAM 4.0-4.15 TB/s: hardware_specs.json facts[25].)
  //   FP8 dense 1979 TFLOP/s: NVIDIA H200 datasheet (FP8 Tensor Core 3,958 TFLOPS with sparsity).
  //   132 SMs: tests/data/hardware/h200-kernels/env.txt ("sms=132").
  v.push_back({"h200", 989.4 * T, 989.4 * T, 494.7 * T, 67 * T, 4800 * GBps, 141 * GB,
               "NVIDIA H200 datasheet; hardware_specs.json facts[25]", 1979 * T, 132});
  // B200 (HGX / DGX B200, 1000 W): FP16 dense 2250 TFLOP/s, HBM3e 8 TB/s: hardware_specs.json facts[41]
  //   (secondary). HBM 180 GB, not the 192 GB of facts[41]'s value: its own note says the DGX / HGX B200 parts expose
  //   180 GB (1,440 GB per 8 GPUs), and NVIDIA's BioNeMo Boltz-2 NIM support matrix (docs.nvidia.com/nim/bionemo/
  //   boltz2/1.8.0/support-matrix.html, "Supported NVIDIA GPUs") lists "NVIDIA B200 | 180" GB beside "NVIDIA
  //   GB200 | 186" and "NVIDIA B300 | 288". TF32 dense 1100
  //   TFLOP/s (2.2 PF sparse) and FP32 75 TFLOP/s: NVIDIA DGX B200 / HGX B200 datasheet (8-GPU totals / 8).
  //   FP8 dense 4.5 PFLOP/s: HGX B200 datasheet (72 PFLOPS FP8 per 8 GPUs with sparsity). FP4 dense 9
  //   PFLOP/s: HGX B200 datasheet (144 PFLOPS FP4 per 8 GPUs with sparsity). 148 SMs: NVIDIA Blackwell
  //   architecture technical brief (two GB100 dies, 74 SMs each enabled in B200).
  v.push_back({"b200", 2250 * T, 2250 * T, 1100 * T, 75 * T, 8000 * GBps, 180 * GB,
               "hardware_specs.json facts[41]; NVIDIA HGX B200 datasheet; 180 GB: NVIDIA NIM support matrix", 4500 * T,
               148, 9000 * T});
  // GB200 (the B200 GPU of a GB200 NVL72 / GB200 superchip, 1200 W, higher clocks than HGX B200): NVIDIA
  //   GB200 NVL72 datasheet, 72-GPU totals / 72: FP16/BF16 360 PF sparse -> 2.5 PF dense; TF32 180 PF sparse
  //   -> 1.25 PF dense; FP32 5,760 TF -> 80 TF; FP8 720 PF sparse -> 5 PF dense; FP4 1,440 PF sparse -> 10 PF
  //   dense; HBM3e 13.4 TB, 576 TB/s -> 186 GB and 8 TB/s per GPU (hardware_specs.json facts[42]: 72 GPUs).
  //   Same silicon as B200: 148 SMs (Blackwell technical brief). The datasheet is not in the project's data (facts[42]
  //   holds only the rack's 72 GPUs and "about 13.4 TB"); the per-GPU figures agree with two secondary restatements
  //   of NVIDIA's specification table: zdszero.github.io Computer/Artificial_Intelligence/Hardware.html ("Individual
  //   Blackwell GPU": FP4 20, FP8 10, FP16/BF16 5, TF32 2.5 PFLOP/s with sparsity, FP32 80 TFLOP/s, 186 GB HBM3E,
  //   8 TB/s) and glennklockwood.com garden/processors/B200 ("GB200 variant of B200 ... 1,200 W": TF32 1250, BF16
  //   2500, FP8 5000, FP4 10000 TFLOP/s dense). The default GPU of the gb200-nvl72 preset (topologies/presets.cpp).
  v.push_back({"gb200", 2500 * T, 2500 * T, 1250 * T, 80 * T, 8000 * GBps, 186 * GB,
               "NVIDIA GB200 NVL72 datasheet (per-GPU = rack / 72); hardware_specs.json facts[42]", 5000 * T, 148,
               10000 * T});
  // B300 (HGX B300, Blackwell Ultra): NVIDIA HGX B300 datasheet, 8-GPU totals / 8: FP16/BF16 36 PF sparse ->
  //   2.25 PF dense; TF32 18 PF sparse -> 1.125 PF dense; FP32 600 TF -> 75 TF; FP8 72 PF sparse -> 4.5 PF
  //   dense; FP4 108 PF dense -> 13.5 PF; HBM3e 2.3 TB -> 288 GB and 8 TB/s per GPU. 160 SMs: NVIDIA
  //   "Inside NVIDIA Blackwell Ultra" technical blog (160 SMs across two dies). Those documents are not in the
  //   project's data; the per-GPU dense figures agree with two secondary summaries of them (glennklockwood.com
  //   garden/processors/B300: BF16 2250, FP8 4500 TFLOP/s dense, "13 PF" dense FP4; verda.com blog
  //   gb300-nvl72-architecture: BF16 2.25, FP8 4.5 PF dense).
  v.push_back({"b300", 2250 * T, 2250 * T, 1125 * T, 75 * T, 8000 * GBps, 288 * GB,
               "NVIDIA HGX B300 datasheet (per-GPU = 8-GPU totals / 8)", 4500 * T, 160, 13500 * T});
  // GB300 (the Blackwell Ultra GPU of a GB300 NVL72): NVIDIA GB300 NVL72 datasheet, 72-GPU totals / 72:
  //   FP16/BF16 360 PF sparse -> 2.5 PF dense; TF32 180 PF sparse -> 1.25 PF dense; FP32 6 PF -> 83 TF; FP8
  //   720 PF sparse -> 5 PF dense; FP4 1,080 PF dense -> 15 PF; HBM3e 20.7 TB, 576 TB/s -> 288 GB, 8 TB/s per
  //   GPU. 160 SMs as B300. The datasheet is not in the project's data; the per-GPU dense figures agree with a
  //   secondary summary of it (verda.com blog gb300-nvl72-architecture: FP4 15, FP8 5, BF16 2.5 PF dense; rack
  //   1,080 PF dense FP4, 576 TB/s).
  v.push_back({"gb300", 2500 * T, 2500 * T, 1250 * T, 83.3 * T, 8000 * GBps, 288 * GB,
               "NVIDIA GB300 NVL72 datasheet (per-GPU = rack / 72)", 5000 * T, 160, 15000 * T});
  // AMD Instinct MI300X (OAM, 750 W, CDNA 3): ROCm documentation "AMD Instinct MI300 series microarchitecture"
  //   (rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html, table "Peak-performance capabilities of the
  //   MI300X for different data types", dense): Matrix FP16 and BF16 1307.4, Matrix FP8 2614.9, Vector TF32
  //   653.7, Matrix / Vector FP32 163.4 TFLOP/s; "theoretical aggregated peak memory bandwidth of the GPU is 5.3 TB
  //   per second"; 8 XCDs of 38 active CUs, "up to 304 CUs". 192 GB HBM3: the same page's 8 HBM3 stacks and
  //   AMD's MI300X product page; MLCommons inference_results_v4.1 closed/AMD/systems/8xMI300X_2xEPYC-9374F.json
  //   ("accelerator_memory_capacity": "192 GB", "AMD Instinct MI300X-NPS1-SPX-192GB-750W"). The FP8 formats are
  //   the FNUZ variants of e4m3 / e5m2 (CDNA 3 has no OCP FP8 and no MX block scaling: mxfp8 is refused as on
  //   Hopper, workloads/gpt.cpp); no FP4. `sm_count` holds the 304 compute units (each with half an H100 SM's
  //   dense FP16 rate: 2048 vs 4096 FLOP per clock), which the wave-quantisation model uses as it uses SMs.
  //   No kernel measurement of this GPU exists in the project: its kernel efficiencies are the H200's NVIDIA fit
  //   (models/compute_calibration.cpp default_compute_calibration; docs/calibration.md says what to measure).
  v.push_back({"mi300x", 1307.4 * T, 1307.4 * T, 653.7 * T, 163.4 * T, 5300 * GBps, 192 * GB,
               "ROCm docs, AMD Instinct MI300 series microarchitecture (peak table, 5.3 TB/s, 304 CUs); 192 GB HBM3",
               2614.9 * T, 304});
  // V100 SXM2 16GB (ABCI V nodes, as in /work/shared/data/nccl-tests abci_*_vnode_*): FP16 Tensor 125
  //   TFLOP/s, FP32 15.7 TFLOP/s, HBM2 900 GB/s, 16 GB: NVIDIA Tesla V100 datasheet (SXM2). No BF16/TF32:
  //   TF32 work runs on the FP32 cores (15.7). 80 SMs: NVIDIA Tesla V100 GPU architecture whitepaper.
  v.push_back({"v100", 125 * T, 0, 15.7 * T, 15.7 * T, 900 * GBps, 16 * GiB, "NVIDIA Tesla V100 datasheet", 0, 80});
  return v;
}

std::string canonical(const std::string& n) {
  if (n == "a100") return "a100-80gb";  // Selene / DGX A100 80GB is the project's reference A100
  if (n == "h100-80gb" || n == "h100-sxm") return "h100";
  if (n == "v100-16gb") return "v100";
  if (n == "b200-sxm") return "b200";
  return n;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
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

std::string gpu_preset_for_device(const std::string& device_name, double memory_bytes) {
  const std::string n = lower(device_name);
  // Longest names first: "gb200" contains "b200", "gb300" contains "b300".
  for (const char* p : {"gb300", "gb200", "b300", "b200", "h200", "h100", "v100", "mi300x"})
    if (n.find(p) != std::string::npos) return p;
  if (n.find("a100") != std::string::npos) {
    if (n.find("40gb") != std::string::npos) return "a100-40gb";
    if (n.find("80gb") != std::string::npos) return "a100-80gb";
    return memory_bytes > 0 && memory_bytes < 60e9 ? "a100-40gb" : "a100-80gb";
  }
  return "";
}

}  // namespace fabricsim::models
