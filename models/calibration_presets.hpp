#pragma once
// The shipped calibrations (validate/calibrations/*.json, fitted on the shared nccl-tests logs by the
// command in validate/calibrations/README.md) and the rule that picks one for a topology. This is what
// `--calibration auto` (the default of `fabricsim coll`) uses.
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::models {

struct EmbeddedCalibration {
  const char* name;  // file stem: "a100", "h100", "v100", "b200", "multinode-ib"
  const char* json;
};
const std::vector<EmbeddedCalibration>& embedded_calibrations();

// Name of the shipped calibration that matches `t`, or "" when none does (then the built-in defaults
// apply). Rule: the GPU model of the first GPU (a100-40gb -> a100, h100/h200 -> h100, v100, b200; a100-80gb
// keeps the built-in defaults, see the .cpp); for A100-40GB and V100 systems with more than one host,
// multinode-ib (fitted on the ABCI multi-node InfiniBand logs).
std::string matching_calibration_name(const topo::Topology& t);

// Resolves a --calibration value: "auto" (the matching shipped file, else defaults), "default" (built-in
// defaults, each cited in calibration.cpp), "shipped:<name>", or a path to a JSON file.
Calibration resolve_calibration(const std::string& spec, const topo::Topology& t);

}  // namespace fabricsim::models
