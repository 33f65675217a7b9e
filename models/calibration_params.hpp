#pragma once
// The network calibration's named parameters (the JSON "extra" object), declared once: name, the typed field
// of CalibrationFactors that holds it, unit kind, range, default, citation and the model that reads it. The
// loader (calibration_from_json) checks every key, type, unit and range against this table and stores the
// value in its field; default_calibration() takes its defaults from it; `fabricsim calibrate --list-params`
// prints it; tests check that docs/calibration.md's "Named factors" table and docs/calibration.schema.json
// list exactly these names. The models read the fields (Calibration::factors), never a name.
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/json_reader.hpp"

namespace fabricsim::models {

// The named parameters' values, one field per declared name (the table below maps names to fields). A
// field holding NaN is not set (the compute.* keys by default: the scenario's compute preset applies).
struct CalibrationFactors {
  double nvlink_efficiency_default = 0, nvlink_efficiency_v100 = 0, nvlink_efficiency_a100 = 0,
         nvlink_efficiency_h100 = 0, nvlink_efficiency_h200 = 0, nvlink_efficiency_b200 = 0,
         nvlink_efficiency_gb200 = 0;
  double pcie_efficiency = 0, network_efficiency = 0, nvls_efficiency = 0, tree_efficiency = 0, pat_efficiency = 0,
         collnet_efficiency = 0;
  double chunk_bytes_simple = 0, chunk_bytes_ll = 0, chunk_bytes_ll128 = 0;
  double ll_channel_rate = 0, max_pipeline_chunks = 0, ring_credit_steps = 0, multi_host_base_latency_factor = 0;
  double kernel_launch_s = 0, channel_launch_s = 0;
  double compute_gemm_flops_efficiency = 0, compute_gemm_memory_efficiency = 0,
         compute_attention_flops_efficiency = 0, compute_attention_memory_efficiency = 0,
         compute_elementwise_flops_efficiency = 0, compute_elementwise_memory_efficiency = 0,
         compute_embedding_flops_efficiency = 0, compute_embedding_memory_efficiency = 0, compute_kernel_overhead_s = 0;
};

enum class ParamUnit {
  Fraction,    // dimensionless, in (min, max]
  Multiplier,  // dimensionless factor > 0
  Count,       // integer
  Bytes,       // a number of bytes or a size string ("512K", "4MiB")
  Seconds,     // seconds as a number, or a time string ("4.285us")
};
const char* to_string(ParamUnit u);

struct ParamDecl {
  const char* name;
  double CalibrationFactors::*field;  // where the value lives
  ParamUnit unit;
  double min, max;        // allowed range; min exclusive for Fraction and Multiplier, inclusive otherwise
  double default_value;   // NaN: not set by default (compute.* keys: the scenario's compute preset applies)
  const char* citation;   // source of the default (tags as in docs/calibration.md)
  const char* reader;     // which model reads it
};

const std::vector<ParamDecl>& calibration_params();
// Every field at its declared default (NaN where the table has none).
CalibrationFactors default_calibration_factors();
const ParamDecl* find_calibration_param(std::string_view name);
// A parameter that no longer exists: the error a file that sets it gets (naming what replaces it), or nullptr.
const char* removed_calibration_param(std::string_view name);
// The declared name closest to `name` (edit distance), for "did you mean" messages.
std::string nearest_calibration_param(std::string_view name);
// The value of `v` for parameter `d`, checked (type, unit, range); errors name `at` and the expectation.
double read_calibration_param(const ParamDecl& d, const Json& v, const JsonPath& at);
// The table as `fabricsim calibrate --list-params` prints it.
std::string calibration_params_text();

}  // namespace fabricsim::models
