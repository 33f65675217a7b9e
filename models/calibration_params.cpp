#include "models/calibration_params.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <sstream>

#include "sim/base/did_you_mean.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace fabricsim::models {

namespace {
constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

const char* to_string(ParamUnit u) {
  switch (u) {
    case ParamUnit::Fraction: return "fraction";
    case ParamUnit::Multiplier: return "multiplier";
    case ParamUnit::Count: return "count";
    case ParamUnit::Bytes: return "bytes";
    case ParamUnit::Seconds: return "seconds";
  }
  return "?";
}

// Tags: docs/calibration.md "Sources" (NCCL-T tuning.cc, NCCL-H topo.h/device.h/init.cc, HW statements in
// tests/data/hardware/hardware_specs.json, LOG shared nccl-tests logs, EXT tests/data/external). The longer
// derivations are in docs/calibration.md "Named factors".
const std::vector<ParamDecl>& calibration_params() {
  static const std::vector<ParamDecl> t = {
      // NVLink usable fraction = NCCL's modelled per-link bandwidth / nominal per-direction link bandwidth
      // (hardware_specs.json: NVLink2/3/4 25 GB/s, NVLink5 50 GB/s).
      {"nvlink_efficiency.default", &CalibrationFactors::nvlink_efficiency_default, ParamUnit::Fraction, 0, 1, 20.0 / 25.0, "NCCL-H SM80_NVLINK_BW 20.0 / 25",
       "collective builder and tuner: NVLink hops of GPUs without their own entry"},
      {"nvlink_efficiency.v100", &CalibrationFactors::nvlink_efficiency_v100, ParamUnit::Fraction, 0, 1, 20.0 / 25.0, "NCCL-H SM70_NVLINK_BW 20.0 / 25",
       "collective builder and tuner: NVLink hops of v100 GPUs"},
      {"nvlink_efficiency.a100", &CalibrationFactors::nvlink_efficiency_a100, ParamUnit::Fraction, 0, 1, 20.0 / 25.0, "NCCL-H SM80_NVLINK_BW 20.0 / 25",
       "collective builder and tuner: NVLink hops of a100* GPUs"},
      {"nvlink_efficiency.h100", &CalibrationFactors::nvlink_efficiency_h100, ParamUnit::Fraction, 0, 1, 20.6 / 25.0, "NCCL-H SM90_NVLINK_BW 20.6 / 25",
       "collective builder and tuner: NVLink hops of h100 GPUs"},
      {"nvlink_efficiency.h200", &CalibrationFactors::nvlink_efficiency_h200, ParamUnit::Fraction, 0, 1, 20.6 / 25.0, "NCCL-H SM90_NVLINK_BW 20.6 / 25",
       "collective builder and tuner: NVLink hops of h200 GPUs"},
      {"nvlink_efficiency.b200", &CalibrationFactors::nvlink_efficiency_b200, ParamUnit::Fraction, 0, 1, 40.1 / 50.0, "NCCL-H SM100_NVLINK_BW 40.1 / 50",
       "collective builder and tuner: NVLink hops of b200 GPUs"},
      {"nvlink_efficiency.gb200", &CalibrationFactors::nvlink_efficiency_gb200, ParamUnit::Fraction, 0, 1, 40.1 / 50.0, "NCCL-H SM100_NVLINK_BW 40.1 / 50",
       "collective builder and tuner: NVLink hops of gb200 GPUs"},
      {"pcie_efficiency", &CalibrationFactors::pcie_efficiency, ParamUnit::Fraction, 0, 1, 12.0 / 15.75,
       "NCCL-H PCI_BW 12.0 GB/s / 15.75 GB/s (Gen3 x16)",
       "collective builder, tuner, analytic tier: GPU-GPU hops inside a host without NVLink"},
      {"network_efficiency", &CalibrationFactors::network_efficiency, ParamUnit::Fraction, 0, 1, 48.5 / 50.0,
       "HW: CX-7 at NDR 400Gbps reaches 48-49 GB/s per NIC (nccl-tests issue 267); 48.5 / 50",
       "collective builder, tuner, analytic tier: hops that leave the host"},
      {"nvls_efficiency", &CalibrationFactors::nvls_efficiency, ParamUnit::Fraction, 0, 1, 0.662,
       "EXT aws-p5 8x H100 NVLS sweep fit (fabricsim calibrate --min-bytes 2M ...aws_p5...)",
       "collective builder and tuner: NVLS in-switch reduction"},
      {"tree_efficiency", &CalibrationFactors::tree_efficiency, ParamUnit::Fraction, 0, 1, 0.92, "NCCL-T Tree all_reduce busBw x 0.92",
       "collective builder and tuner: tree all_reduce"},
      {"pat_efficiency", &CalibrationFactors::pat_efficiency, ParamUnit::Fraction, 0, 1, 0.75, "NCCL-T PAT busBw x 0.75",
       "collective builder and tuner: PAT"},
      {"collnet_efficiency", &CalibrationFactors::collnet_efficiency, ParamUnit::Fraction, 0, 1, 0.85,
       "NCCL-T CollNetDirect busBw x 0.85 (compute capability >= 9.0)", "collective builder and tuner: CollNet"},
      {"chunk_bytes.simple", &CalibrationFactors::chunk_bytes_simple, ParamUnit::Bytes, 1, 1e12, 4194304.0 / 8.0,
       "NCCL-H DEFAULT_BUFFSIZE 4 MiB / NCCL_STEPS 8", "collective builder: Simple pipeline chunk"},
      {"chunk_bytes.ll", &CalibrationFactors::chunk_bytes_ll, ParamUnit::Bytes, 1, 1e12, 32768.0,
       "NCCL-H LL buffer 8 lines x 512 threads x 8 steps x 16 B; 32 KiB of data per step",
       "collective builder: LL pipeline chunk"},
      {"chunk_bytes.ll128", &CalibrationFactors::chunk_bytes_ll128, ParamUnit::Bytes, 1, 1e12, 576000.0,
       "NCCL-H 120 x 640 x 8 x 8 B / 8 steps, 120/128 of it data", "collective builder: LL128 pipeline chunk"},
      {"ll_channel_rate", &CalibrationFactors::ll_channel_rate, ParamUnit::Multiplier, 0, 1e3, 2.6,
       "EXT aws-p5 16 KiB-1 MiB rows, Huber objective minimum (docs/validation.md \"What the numbers rest on\")",
       "collective builder: LL throughput per channel inside one host"},
      {"max_pipeline_chunks", &CalibrationFactors::max_pipeline_chunks, ParamUnit::Count, 1, 1e6, 64.0,
       "modelling choice: most chunks one pipelined edge is split into", "collective builder"},
      {"ring_credit_steps", &CalibrationFactors::ring_credit_steps, ParamUnit::Count, 1, 63, 1.0,
       "modelling choice: 1 = a ring hop's next step waits for its previous one to be received; a connection has "
       "NCCL_STEPS 8 slots (NVIDIA/nccl src/include/device.h:24, v2.26.2-1) and 8 gives NCCL's depth, which the "
       "builder lowers by size (docs/collectives.md \"Pipelined rings\")",
       "collective builder: steps of a ring hop in flight (at most; models/collectives.cpp ring_depth)"},
      {"multi_host_base_latency_factor", &CalibrationFactors::multi_host_base_latency_factor, ParamUnit::Multiplier, 0, 1e6, 1.0,
       "NCCL-T: baseLat does not depend on the node count", "collective builder and tuner: multi-host calls"},
      {"kernel_launch_s", &CalibrationFactors::kernel_launch_s, ParamUnit::Seconds, 0, 1, 34.28e-6 / 8.0,
       "LOG together_h100_1node_8gpu_all_gather_ring (-g 8): 34.28 us floor / 8 GPUs",
       "host launch floor (models::host_launch_floor_s)"},
      {"channel_launch_s", &CalibrationFactors::channel_launch_s, ParamUnit::Seconds, 0, 1, (41.47e-6 - 34.28e-6) / 8.0 / 23.0,
       "LOG together_h100_1node_8gpu_all_gather_ring: (41.47 - 34.28) us / 8 GPUs / 23 channels",
       "host launch floor per extra channel"},
      // Compute efficiencies (docs/workloads.md "Compute model"): not set by default, the scenario's compute
      // preset applies; a calibration that sets them overrides the preset.
      {"compute.gemm.flops_efficiency", &CalibrationFactors::compute_gemm_flops_efficiency, ParamUnit::Fraction, 0, 1, kNone, "compute preset (models/compute.cpp)",
       "roofline compute model: GEMM FLOP/s fraction"},
      {"compute.gemm.memory_efficiency", &CalibrationFactors::compute_gemm_memory_efficiency, ParamUnit::Fraction, 0, 1, kNone, "compute preset (models/compute.cpp)",
       "roofline compute model: GEMM HBM fraction"},
      {"compute.attention.flops_efficiency", &CalibrationFactors::compute_attention_flops_efficiency, ParamUnit::Fraction, 0, 1, kNone, "compute preset (models/compute.cpp)",
       "roofline compute model: attention FLOP/s fraction"},
      {"compute.attention.memory_efficiency", &CalibrationFactors::compute_attention_memory_efficiency, ParamUnit::Fraction, 0, 1, kNone,
       "compute preset (models/compute.cpp)", "roofline compute model: attention HBM fraction"},
      {"compute.elementwise.flops_efficiency", &CalibrationFactors::compute_elementwise_flops_efficiency, ParamUnit::Fraction, 0, 1, kNone,
       "compute preset (models/compute.cpp)", "roofline compute model: elementwise FLOP/s fraction"},
      {"compute.elementwise.memory_efficiency", &CalibrationFactors::compute_elementwise_memory_efficiency, ParamUnit::Fraction, 0, 1, kNone,
       "compute preset (models/compute.cpp)", "roofline compute model: elementwise HBM fraction"},
      {"compute.embedding.flops_efficiency", &CalibrationFactors::compute_embedding_flops_efficiency, ParamUnit::Fraction, 0, 1, kNone, "compute preset (models/compute.cpp)",
       "roofline compute model: embedding FLOP/s fraction"},
      {"compute.embedding.memory_efficiency", &CalibrationFactors::compute_embedding_memory_efficiency, ParamUnit::Fraction, 0, 1, kNone,
       "compute preset (models/compute.cpp)", "roofline compute model: embedding HBM fraction"},
      {"compute.kernel_overhead_s", &CalibrationFactors::compute_kernel_overhead_s, ParamUnit::Seconds, 0, 1, kNone, "compute preset (models/compute.cpp)",
       "roofline compute model: time per kernel launch"},
  };
  return t;
}

CalibrationFactors default_calibration_factors() {
  CalibrationFactors f;
  for (const auto& d : calibration_params()) f.*d.field = d.default_value;
  return f;
}

const ParamDecl* find_calibration_param(std::string_view name) {
  for (const auto& d : calibration_params())
    if (name == d.name) return &d;
  return nullptr;
}

const char* removed_calibration_param(std::string_view name) {
  if (name == "ring_outstanding_steps")
    return "parameter 'ring_outstanding_steps' was removed: a ring hop's steps in flight are one parameter, "
           "'ring_credit_steps' (docs/calibration.md); delete the key, or set ring_credit_steps instead";
  return nullptr;
}

std::string nearest_calibration_param(std::string_view name) {
  std::string best;
  std::size_t bd = std::numeric_limits<std::size_t>::max();
  for (const auto& d : calibration_params()) {
    const std::size_t x = edit_distance(name, d.name);
    if (x < bd) bd = x, best = d.name;
  }
  return best;
}

double read_calibration_param(const ParamDecl& d, const Json& v, const JsonPath& at) {
  double x = 0;
  if (v.is_number()) {
    x = v.get<double>();
  } else if (v.is_string() && d.unit == ParamUnit::Seconds) {
    try {
      x = parse_time(v.get<std::string>(), d.name);
    } catch (const InputError&) {
      json_fail(at, "expected a time such as \"4.285us\" or a number of seconds, found " + json_excerpt(v));
    }
  } else if (v.is_string() && d.unit == ParamUnit::Bytes) {
    try {
      x = static_cast<double>(parse_size(v.get<std::string>(), d.name));
    } catch (const InputError&) {
      json_fail(at, "expected a size such as \"512K\" or a number of bytes, found " + json_excerpt(v));
    }
  } else {
    json_fail(at, std::string("expected a number (") + to_string(d.unit) + "), found " + v.type_name());
  }
  char range[160];
  switch (d.unit) {
    case ParamUnit::Fraction:
    case ParamUnit::Multiplier:
      std::snprintf(range, sizeof range, "a %s in (%g, %g]", to_string(d.unit), d.min, d.max);
      if (!(x > d.min && x <= d.max)) json_fail(at, std::string("expected ") + range);
      break;
    case ParamUnit::Count:
      std::snprintf(range, sizeof range, "an integer in [%g, %g]", d.min, d.max);
      // Range before the cast (a double above 2^63 makes the cast undefined).
      if (!(x >= d.min && x <= d.max) || x != static_cast<double>(static_cast<long long>(x)))
        json_fail(at, std::string("expected ") + range);
      break;
    case ParamUnit::Bytes:
      std::snprintf(range, sizeof range, "%s in [%g, %g]", to_string(d.unit), d.min, d.max);
      if (!(x >= d.min && x <= d.max)) json_fail(at, std::string("expected ") + range);
      break;
    case ParamUnit::Seconds:  // a latency or launch cost of 0 is not a calibration of real hardware
      std::snprintf(range, sizeof range, "%s in (%g, %g]", to_string(d.unit), d.min, d.max);
      if (!(x > d.min && x <= d.max)) json_fail(at, std::string("expected ") + range);
      break;
  }
  return x;
}

std::string calibration_params_text() {
  std::ostringstream o;
  o << "# calibration parameters (\"extra\" in a calibration file; docs/calibration.md)\n";
  o << "# name                                   unit        range              default       source; read by\n";
  for (const auto& d : calibration_params()) {
    char line[512];
    char range[64];
    const bool open_low = d.unit != ParamUnit::Count && d.unit != ParamUnit::Bytes;
    std::snprintf(range, sizeof range, "%s%g, %g]", open_low ? "(" : "[", d.min, d.max);
    char dflt[32];
    if (std::isnan(d.default_value)) std::snprintf(dflt, sizeof dflt, "preset");
    else std::snprintf(dflt, sizeof dflt, "%.6g", d.default_value);
    std::snprintf(line, sizeof line, "%-40s %-11s %-18s %-13s %s; %s\n", d.name, to_string(d.unit), range, dflt,
                  d.citation, d.reader);
    o << line;
  }
  (void)kInf;
  return o.str();
}

}  // namespace fabricsim::models
