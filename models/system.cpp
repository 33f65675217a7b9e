#include "models/system.hpp"

#include <optional>

#include "models/calibration_presets.hpp"
#include "models/collectives.hpp"
#include "sim/base/error.hpp"
#include "topologies/io.hpp"

namespace fabricsim::models {

SystemSpec system_spec(std::string topology, std::map<std::string, std::string> params, std::string calibration) {
  SystemSpec s;
  s.topology = std::move(topology);
  s.params = std::move(params);
  s.calibration = std::move(calibration);
  return s;
}

std::string CalibrationRef::label() const {
  if (kind == "built-in") return name + " (built-in cited defaults, models/calibration.cpp)";
  return name + " (" + kind + ", " + path + ")";
}

CalibrationRef resolve_calibration_ref(const std::string& spec, const topo::Topology& t) {
  CalibrationRef r;
  std::string shipped;
  if (spec == "default") {
    r.name = "default";
    r.kind = "built-in";
    return r;
  }
  if (spec == "auto" || spec.empty()) {
    shipped = matching_calibration_name(t);
    if (shipped.empty()) {
      r.name = "default";
      r.kind = "built-in";
      return r;
    }
  } else if (spec.rfind("shipped:", 0) == 0) {
    shipped = spec.substr(8);
  } else {
    r.kind = "file";
    r.path = spec;
    r.name = spec;  // replaced by the file's own name when loaded
    return r;
  }
  for (const auto& e : embedded_calibrations())
    if (shipped == e.name) {
      r.name = shipped;
      r.kind = "fitted";
      r.path = "validate/calibrations/" + shipped + ".json";
      return r;
    }
  std::string known;
  for (const auto& e : embedded_calibrations()) known += std::string(known.empty() ? "" : ", ") + e.name;
  throw InputError("--calibration " + spec, "unknown shipped calibration (known: " + known + ")");
}

Calibration load_calibration_ref(const CalibrationRef& ref) {
  if (ref.kind == "built-in") return default_calibration();
  if (ref.kind == "file") return load_calibration(ref.path);
  for (const auto& e : embedded_calibrations())
    if (ref.name == e.name) {
      const std::string src = "shipped calibration " + ref.name + " (" + ref.path + ")";
      return calibration_from_json(parse_json_text(e.json, src), src);
    }
  throw InputError("--calibration shipped:" + ref.name, "unknown shipped calibration");
}

struct System::Impl {
  SystemSpec spec;
  topo::Topology topo;
  Calibration calib;
  CalibrationRef ref;
  std::shared_ptr<const ComputeCalibration> compute;
  std::string compute_label;
  // Built on first use: most commands need one of the two.
  mutable std::optional<topo::Routing> routing, routing_pxn;
  explicit Impl(topo::Topology t) : topo(std::move(t)) {}
  void set_compute(const std::string& name) {
    if (name.empty()) {
      const std::string gpu = topo.gpus().empty() ? std::string("h200") : topo.node(topo.gpus().front()).model;
      // default_compute_calibration returns a reference to a static table: no ownership.
      compute = std::shared_ptr<const ComputeCalibration>(&default_compute_calibration(gpu),
                                                          [](const ComputeCalibration*) {});
      compute_label = "default for " + gpu;
    } else {
      compute = std::make_shared<const ComputeCalibration>(compute_calibration_named(name, "compute calibration"));
      compute_label = name;
    }
  }
};


System::System(const SystemSpec& spec) {
  // NVLink traffic is striped by the hardware over every NVSwitch plane; the flow model needs them merged
  // (models/collectives.hpp, merge_nvswitch_planes).
  impl_ = std::make_unique<Impl>(merge_nvswitch_planes(topo::load_topology(spec.topology, spec.params, spec.params_at)));
  impl_->spec = spec;
  impl_->ref = resolve_calibration_ref(spec.calibration, impl_->topo);
  impl_->calib = load_calibration_ref(impl_->ref);
  if (impl_->ref.kind == "file") impl_->ref.name = impl_->calib.name;
  impl_->set_compute(spec.compute);
}

System::System(topo::Topology t, Calibration calib, CalibrationRef ref) {
  impl_ = std::make_unique<Impl>(std::move(t));
  impl_->spec.topology = impl_->topo.name();
  impl_->spec.params = impl_->topo.params();
  impl_->calib = std::move(calib);
  impl_->ref = std::move(ref);
  impl_->set_compute("");
}

System::~System() = default;
System::System(System&&) noexcept = default;
System& System::operator=(System&&) noexcept = default;

const SystemSpec& System::spec() const { return impl_->spec; }
const topo::Topology& System::topology() const { return impl_->topo; }
topo::Routing& System::routing(bool pxn) const {
  auto& r = pxn ? impl_->routing_pxn : impl_->routing;
  if (!r) r.emplace(impl_->topo, topo::RoutingOptions{pxn, std::nullopt});
  return *r;
}
const Calibration& System::calibration() const { return impl_->calib; }
const CalibrationRef& System::calibration_ref() const { return impl_->ref; }
const std::shared_ptr<const ComputeCalibration>& System::compute() const { return impl_->compute; }
const std::string& System::compute_label() const { return impl_->compute_label; }

}  // namespace fabricsim::models
