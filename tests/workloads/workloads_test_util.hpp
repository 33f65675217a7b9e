#pragma once
// Shared by the tests in tests/workloads.
#include <functional>
#include <string>

#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "sim/base/error.hpp"
#include "workloads/gpt.hpp"
#include "workloads/params.hpp"

// The message of the InputError `f` throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fabricsim::InputError& e) {
    return e.what();
  }
  return "";
}

namespace workloads_test {

// The gpt generator's trace for `p` (--param names), priced with the default compute model of its GPU.
inline fabricsim::workloads::Trace gen(const fabricsim::workloads::ParamMap& p) {
  fabricsim::workloads::GptConfig c = fabricsim::workloads::gpt_config_from_params(p, "--param");
  fabricsim::models::ComputeModel cm;
  cm.gpu = fabricsim::models::gpu_spec(c.gpu);
  return fabricsim::workloads::generate_gpt(c, cm, "test");
}

// A rank's compute time: the sum of its compute ops' durations.
inline double compute_s(const fabricsim::workloads::RankTrace& r) {
  double s = 0;
  for (const auto& op : r.ops) s += op.kind == fabricsim::workloads::OpKind::Compute ? op.duration_s : 0.0;
  return s;
}

}  // namespace workloads_test
