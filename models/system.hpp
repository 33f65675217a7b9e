#pragma once
// The simulated hardware, built once: a SystemSpec (topology preset or file, --param values, calibration
// reference, compute calibration reference) resolved by ONE policy that every command uses (`coll`, `run`,
// `validate`, `calibrate`, `sweep`, `plan`, the Python module), into a System holding the topology (NVSwitch
// planes merged, models::merge_nvswitch_planes), its routings, the network calibration and the compute
// kernels' calibration.
//
// Calibration policy (resolve_calibration_ref):
//   "auto"          (the default everywhere) the shipped calibration fitted on matching hardware
//                   (validate/calibrations/, models::matching_calibration_name), else the built-in defaults;
//   "default"       the built-in defaults, each cited in models/calibration.cpp;
//   "shipped:NAME"  one shipped calibration by name;
//   anything else   a calibration JSON file.
// Every output names the result with CalibrationRef::label(), e.g.
//   "h100 (fitted, validate/calibrations/h100.json)", "default (built-in cited defaults)".
// Exceptions, stated where they apply: `fabricsim calibrate` starts its fit from `default` unless --start says
// otherwise, and `validate --loo` refits from `default` (a file fitted on the held-out log would leak it).
#include <map>
#include <memory>
#include <string>

#include "models/calibration.hpp"
#include "models/compute_calibration.hpp"
#include "topologies/routing.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::models {

struct SystemSpec {
  std::string topology;                       // preset name or topology JSON file
  std::map<std::string, std::string> params;  // preset parameters (--param KEY=VALUE)
  std::string params_at;                      // where the parameters came from, for errors ("" = --param)
  std::string calibration = "auto";           // auto | default | shipped:NAME | FILE
  std::string compute;                        // compute calibration: "" = the GPU's shipped one; a name or a file
};

// A spec for a topology preset (or file) with its parameters and a calibration reference.
SystemSpec system_spec(std::string topology, std::map<std::string, std::string> params = {},
                       std::string calibration = "auto");

// Which network calibration a spec resolved to, for every output.
struct CalibrationRef {
  std::string name;  // "h100", "default", or the file's calibration name
  std::string kind;  // "fitted" (shipped), "built-in", "file"
  std::string path;  // validate/calibrations/h100.json, the user's file, "" for built-in
  std::string label() const;  // "h100 (fitted, validate/calibrations/h100.json)"
};

// The one policy (see the header comment). `t` is the topology the calibration will price.
CalibrationRef resolve_calibration_ref(const std::string& spec, const topo::Topology& t);
// The calibration a resolved reference names (file names in errors: the reference's path).
Calibration load_calibration_ref(const CalibrationRef& ref);

class System {
 public:
  explicit System(const SystemSpec& spec);
  // An already built topology (merged as above) with a given calibration, for fitters and tests that vary
  // one of them; `label` names the calibration in outputs.
  System(topo::Topology t, Calibration calib, CalibrationRef ref);
  ~System();
  System(System&&) noexcept;
  System& operator=(System&&) noexcept;
  System(const System&) = delete;
  System& operator=(const System&) = delete;

  const SystemSpec& spec() const;
  const topo::Topology& topology() const;
  // Routes on the topology; `pxn` routes cross-rail traffic through the peer GPU on the destination's rail
  // (NCCL PXN). The routings cache routes (not thread-safe: one System per thread).
  topo::Routing& routing(bool pxn = false) const;
  const Calibration& calibration() const;
  const CalibrationRef& calibration_ref() const;
  std::string calibration_label() const { return calibration_ref().label(); }
  // The compute kernels' calibration (spec.compute, else the first GPU's shipped one).
  const std::shared_ptr<const ComputeCalibration>& compute() const;
  const std::string& compute_label() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fabricsim::models
