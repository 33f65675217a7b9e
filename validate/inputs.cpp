#include "validate/inputs.hpp"

#include "sim/base/error.hpp"

namespace fabricsim::validate {

std::vector<Measurement> load_all(const std::vector<std::string>& paths, const ParseHints& hints) {
  if (paths.empty())
    throw InputError("LOGS", "at least one nccl-tests log, .meta.json sidecar or collective-results JSON");
  std::vector<Measurement> out;
  for (const auto& p : paths)
    for (auto& m : load_measurements(p, hints)) out.push_back(std::move(m));
  return out;
}

}  // namespace fabricsim::validate
