#pragma once
// Loading the measurement inputs of `fabricsim calibrate` / `fabricsim validate` (shared by both).
#include <string>
#include <vector>

#include "validate/nccl_log.hpp"

namespace fabricsim::validate {

// Loads every path (see load_measurements) with the same hints; throws InputError when `paths` is empty.
std::vector<Measurement> load_all(const std::vector<std::string>& paths, const ParseHints& hints);

}  // namespace fabricsim::validate
