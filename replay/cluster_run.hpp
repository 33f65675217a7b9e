#pragma once
// Runs a cluster scenario (workloads/cluster.hpp): every job's trace on its GPUs, merged into one trace and
// replayed once with the shared-network communication model (all collectives and messages of all jobs on
// one sim::Network, max-min fair on the links they share); then each job alone on the same GPUs and the
// same faulted fabric for `iteration_s_alone`, unless no link direction carries two jobs' traffic (then
// each job's replay together is its replay alone, exactly, and the alone replays are skipped). Links that two
// or more jobs' calls route over are reported with each job's bytes (from an analytic-times replay of the
// job: its schedules' payload on their routes) and utilisation (RunResult::shared_links): where the
// interference happens. Stand-in traffic: workloads/cluster.hpp, Communicator::stand_ins.
// Comm model "engine" (the fast tier): the merged trace is replayed once with EngineCommModel (every distinct
// call with its mirrors and stand-in copies priced alone on an idle fabric), so the jobs do not contend: each
// job's step alone is its step together and no alone replay runs; shared_links is computed as above.
#include "replay/run_scenario.hpp"

namespace fabricsim::sim {

ScenarioRun run_cluster(const workloads::Scenario& s, const ScenarioRunOptions& opt = {});

}  // namespace fabricsim::sim
