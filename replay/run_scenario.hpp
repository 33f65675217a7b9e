#pragma once
// One call from a parsed scenario to a filled RunResult: build the topology, the calibration and compute
// model, generate or load the workload trace, replay it with the chosen communication model.
#include <string>

#include "models/system.hpp"
#include "replay/engine_comm_model.hpp"
#include "replay/executor.hpp"
#include "replay/result.hpp"
#include "workloads/scenario.hpp"

namespace fabricsim::sim {

struct ScenarioRunOptions {
  std::string comm_model;  // "" = the scenario's ("engine" by default), or "engine" / "shared" / "analytic"
  ReplayOptions replay;
  EngineCommOptions engine;  // engine comm model: fidelity policy and link statistics (RunResult::links)
};

struct ScenarioRun {
  RunResult result;
  double generate_wall_s = 0;  // topology + trace generation
  double replay_wall_s = 0;
  std::size_t trace_ops = 0;
};

// The scenario's System (topology, its params, calibration: absent = auto), as every command builds it
// (models/system.hpp).
models::System scenario_system(const workloads::Scenario& s);

// Checks what can be checked before simulating (the compute model's keys, a generator's parameters against
// the System's GPUs) and throws the InputError run_scenario would throw later; `fabricsim sweep` calls it on
// every point before running the first.
void check_scenario_inputs(const workloads::Scenario& s, const models::System& sys);

ScenarioRun run_scenario(const workloads::Scenario& s, const ScenarioRunOptions& opt = {});

class EngineCommBase;
class SharedNetworkCommModel;
// The engine-backed models' run figures in r.metrics: schedules priced, and for the shared model where its CPU
// goes (isolated / network calls, solves, bundles, mirror quotient; docs/performance.md). One place for
// run_scenario and run_cluster.
void add_engine_run_metrics(const EngineCommBase& engine, const SharedNetworkCommModel* shared, RunResult& r);

// The GEMMs a scenario's compute model prices while its workload is generated, one line per distinct shape
// in fabricsim-kernel-bench's --shapes format ("M N K bf16|fp8 label", label: how many times the generator
// priced that shape), so the bench measures exactly those shapes on the user's GPU. fp16 GEMMs are listed as
// bf16 (same Tensor Core rate). Empty when the workload prices no GEMM by shape (trace files, SC'21-style
// unfused GEMMs priced by class).
std::string scenario_gemm_shapes(const workloads::Scenario& s);

}  // namespace fabricsim::sim
