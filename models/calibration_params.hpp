#pragma once
// The network calibration's named parameters (Calibration::extra, the JSON "extra" object), declared once:
// name, unit kind, range, default, citation and the model that reads it. The loader (calibration_from_json)
// checks every key, type, unit and range against this table; default_calibration() takes its defaults from
// it; `fabricsim calibrate --list-params` prints it; tests check that docs/calibration.md's "Named factors"
// table and docs/calibration.schema.json list exactly these names.
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/json_reader.hpp"

namespace fabricsim::models {

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
  ParamUnit unit;
  double min, max;        // allowed range; min exclusive for Fraction and Multiplier, inclusive otherwise
  double default_value;   // NaN: not set by default (compute.* keys: the scenario's compute preset applies)
  const char* citation;   // source of the default (tags as in docs/calibration.md)
  const char* reader;     // which model reads it
};

const std::vector<ParamDecl>& calibration_params();
const ParamDecl* find_calibration_param(std::string_view name);
// The declared name closest to `name` (edit distance), for "did you mean" messages.
std::string nearest_calibration_param(std::string_view name);
// The value of `v` for parameter `d`, checked (type, unit, range); errors name `at` and the expectation.
double read_calibration_param(const ParamDecl& d, const Json& v, const JsonPath& at);
// The table as `fabricsim calibrate --list-params` prints it.
std::string calibration_params_text();

}  // namespace fabricsim::models
