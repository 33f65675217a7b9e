// The calibration parameter table (models/calibration_params.cpp) against its documentation and loader.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "models/calibration.hpp"
#include "models/calibration_params.hpp"
#include "models/compute.hpp"
#include "sim/base/error.hpp"

using namespace fabricsim;
using namespace fabricsim::models;

TEST_CASE("docs/calibration.md's named-factor table lists exactly the declared parameters") {
  std::ifstream f(std::string(FABRICSIM_SOURCE_DIR) + "/docs/calibration.md");
  REQUIRE(f);
  std::string line;
  bool in_table = false;
  std::set<std::string> documented;
  while (std::getline(f, line)) {
    if (line.rfind("Named factors (`extra`)", 0) == 0) in_table = true;
    if (!in_table) continue;
    if (line.rfind("| `", 0) == 0) {
      const auto b = line.find('`') + 1;
      documented.insert(line.substr(b, line.find('`', b) - b));
    } else if (!documented.empty() && line.rfind("|", 0) != 0) {
      break;  // the end of the table
    }
  }
  std::set<std::string> declared;
  for (const auto& d : calibration_params()) declared.insert(d.name);
  CHECK(documented == declared);
}

TEST_CASE("every declared parameter loads at its default, and the defaults are the built-in calibration's") {
  const Calibration dflt = default_calibration();
  for (const auto& d : calibration_params()) {
    CAPTURE(d.name);
    // compute.* keys have no default of their own: a value in range loads.
    const double v = std::isnan(d.default_value) ? (d.unit == ParamUnit::Seconds ? 2e-6 : 0.5) : d.default_value;
    const Json doc = {{"extra", {{d.name, v}}}};
    const Calibration c = calibration_from_json(doc, "c.json");
    CHECK(c.factor(d.name) == v);
    if (!std::isnan(d.default_value)) CHECK(dflt.factor(d.name) == d.default_value);
    else CHECK(!dflt.has_factor(d.name));
  }
  // Times and sizes take units: "4.285us" and "512K".
  const Calibration c = calibration_from_json(Json::parse(R"({"extra": {"kernel_launch_s": "4.285us",
      "chunk_bytes.simple": "512K"}})"), "c.json");
  CHECK(c.factor("kernel_launch_s") == doctest::Approx(4.285e-6).epsilon(1e-12));
  CHECK(c.factor("chunk_bytes.simple") == 524288.0);
}

TEST_CASE("compute.* keys in a calibration file override the compute preset (docs/workloads.md)") {
  const Calibration c = calibration_from_json(
      Json::parse(R"({"extra": {"compute.gemm.flops_efficiency": 0.5, "compute.kernel_overhead_s": "3us"}})"), "c.json");
  const ComputeEfficiency e = compute_efficiency_from_extra(c.named_factors(), default_compute_efficiency());
  CHECK(e.flops_eff(OpClass::Gemm) == 0.5);
  CHECK(e.kernel_overhead_s == doctest::Approx(3e-6).epsilon(1e-12));
  // Untouched classes keep the preset's values.
  CHECK(e.flops_eff(OpClass::Attention) == default_compute_efficiency().flops_eff(OpClass::Attention));
}

TEST_CASE("--list-params text: one line per declared parameter") {
  const std::string t = calibration_params_text();
  std::size_t lines = 0;
  std::istringstream in(t);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') ++lines;
  CHECK(lines == calibration_params().size());
  CHECK(t.find("network_efficiency                       fraction    (0, 1]             0.97") != std::string::npos);
}

TEST_CASE("every declared parameter has its own typed field: set by name, read by field and by name") {
  Calibration c = default_calibration();
  const auto& params = calibration_params();
  for (std::size_t i = 0; i < params.size(); ++i) c.set_factor(params[i].name, 1000.0 + static_cast<double>(i));
  for (std::size_t i = 0; i < params.size(); ++i) {
    CAPTURE(params[i].name);
    CHECK(c.factors.*params[i].field == 1000.0 + static_cast<double>(i));  // no two names share a field
    CHECK(c.factor(params[i].name) == 1000.0 + static_cast<double>(i));
  }
  CHECK(c.named_factors().size() == params.size());
  // What the models read: the fields, e.g. the NVLink efficiency of an h100 by its longest prefix.
  c.factors.nvlink_efficiency_h100 = 0.5;
  c.factors.nvlink_efficiency_default = 0.25;
  CHECK(c.nvlink_efficiency("h100-sxm") == 0.5);
  CHECK(c.nvlink_efficiency("gb200") == c.factors.nvlink_efficiency_gb200);
  CHECK(c.nvlink_efficiency("mi300x") == 0.25);
  CHECK_THROWS_AS(c.factor("no_such_factor"), InputError);
  CHECK_THROWS_AS(c.set_factor("no_such_factor", 1), InputError);
  CHECK_THROWS_AS(default_calibration().factor("compute.gemm.flops_efficiency"), InputError);  // not set
}
