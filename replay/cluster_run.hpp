#pragma once
// Runs a cluster scenario (workloads/cluster.hpp): every job's trace on its GPUs, merged into one trace and
// replayed once with the shared-network communication model (all collectives and messages of all jobs on
// one sim::Network, max-min fair on the links they share); then each job alone on the same GPUs and the
// same faulted fabric for `iteration_s_alone`. Links that two or more jobs' alone runs use are reported
// with each job's bytes and utilisation (RunResult::shared_links): where the interference happens.
#include "replay/run_scenario.hpp"

namespace fabricsim::sim {

ScenarioRun run_cluster(const workloads::Scenario& s, const ScenarioRunOptions& opt = {});

}  // namespace fabricsim::sim
