#pragma once
// A scenario file (docs/scenario.schema.json, docs/workloads.md): which cluster, which workload, which
// calibration, which outputs. Parsed once, strictly (unknown keys are errors naming file and JSON path).
//
// {
//   "topology": {"preset": "superpod", "params": {"nodes": 128, "node": "dgx-a100"}}   | {"file": "t.json"},
//   "workload": {"generator": "gpt" | "dlrm" | "dataparallel", "params": {...}}
//             | {"trace": "trace.json"} | {"chakra": "PREFIX or file", "params": {...}} | {"astra": "workload.txt", "params": {...}},
//   "calibration": "calib.json",                 (optional; auto (default) | default | shipped:NAME | a models::Calibration file)
//   "compute": {"gemm": {"flops_efficiency": 0.7}, ...},   (optional; overrides, models/compute.hpp)
//   "comm_model": "engine" | "shared" | "analytic",   (optional; default shared; see comm_model_help())
//   "comm_sm_contention": true | false,   (optional; absent: compute beside NCCL kernels runs on fewer SMs on H100 /
//                                          H200, where measured; true: on every GPU; false: nowhere)
//   "comm_start_delay": true | false,     (optional; absent: a collective launched while a compute kernel runs starts
//                                          when it leaves the SMs on H100 / H200, where measured; true: every GPU; false: nowhere)
//   "outputs": {"timeline": "t.json", "link_stats": "l.csv", "json": "r.json", "report": "r.html"}
// }
// Relative file names are relative to the scenario file's directory.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/compute.hpp"
#include "sim/base/json_reader.hpp"
#include "topologies/topology.hpp"
#include "workloads/params.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::workloads {

struct GptConfig;  // workloads/gpt.hpp

struct WorkloadSpec {
  std::string kind;       // "generator", "trace", "chakra", "astra"
  std::string generator;  // "gpt", "dlrm", "dataparallel"
  std::string file;       // trace / chakra / astra file (resolved path)
  ParamMap params;
  std::string where;      // for error messages ("scenario.json: /workload/params")
  std::vector<std::string> notes;  // "notes": an importer's record (flags not modelled / ignored); into the result
};

// A cluster scenario (docs/workloads.md "Cluster scenarios"; parsed by workloads/cluster.cpp): several jobs
// on one topology, faults and a compute-jitter model. Empty `jobs` = the single-`workload` scenario.
struct JobSpec {
  std::string name;
  WorkloadSpec workload;
  std::vector<std::int32_t> gpus;  // explicit global GPU ranks (Topology::gpus() order); empty = placement
  std::string placement;           // "packed", "spread", "random", "rail-aligned", "fill-racks" (or "" with gpus)
  std::uint64_t placement_seed = 0;  // random(SEED)
  std::int64_t placement_segment = 0;  // segment(N): servers per segment
  double start_offset_s = 0;
  int iterations = 1;
  std::string where;  // "scenario.json: /jobs/0"
};

struct FaultSpec {
  std::string kind;            // "link", "switch", "nic", "gpu", "node"
  std::string a, b;            // link: endpoint node ids; switch / nic: node id in a
  double bandwidth_factor = 1;  // link: remaining fraction of bandwidth (0 = down)
  double slowdown = 0;         // gpu: compute takes (1 + slowdown) x as long
  std::int32_t gpu = -1;       // gpu: global GPU rank
  std::int32_t host = -1;      // node: server index
  std::string policy;          // node: "shrink" (fewer DP replicas) or "spare" (the job moves to a free server)
  std::string where;
};

struct JitterSpec {
  double sigma = 0;            // relative standard deviation of a kernel's (or a GPU's) compute time
  std::uint64_t seed = 0;
  std::string scope = "kernel";  // "kernel": every kernel draws its own noise; "gpu": one factor per GPU
  std::string where;
};

struct Scenario {
  std::string file;  // the scenario's path ("<built-in>" for the default)
  std::string topology;  // preset name or resolved file path
  std::map<std::string, std::string> topology_params;
  // Single-job scenario, the topology's "placement": {"segment": N}: the job's ranks fill segments of N whole
  // servers, each segment inside one NVLink domain (Slurm's --segment); the run is a one-job cluster
  // (workloads/cluster.hpp one_job_cluster). 0: ranks on GPUs 0..N-1 in order.
  std::int64_t placement_segment = 0;
  JsonPath placement_at;
  // build_workload adds nvlink_straddle_warnings for a gpt workload: its ranks fill the NVLink domains in runs
  // of gpus_per_nvlink_domain (false for a cluster job whose placement has no such form).
  bool nvlink_warnings = true;
  WorkloadSpec workload;
  std::string calibration_file;  // auto | default | shipped:NAME | a file path; empty = auto (models/system.hpp)
  std::optional<Json> compute;   // efficiency overrides
  JsonPath compute_at;
  std::string comm_model = "shared";
  bool comm_sm_contention = true;  // sim::ReplayOptions::comm_sm_contention (models/compute_contention.hpp)
  bool comm_sm_contention_all_gpus = false;  // "comm_sm_contention": true given (every GPU, not only H100/H200)
  bool comm_start_delay = true;  // sim::ReplayOptions::comm_start_delay (models/compute_contention.hpp)
  bool comm_start_delay_all_gpus = false;  // "comm_start_delay": true given (every GPU, not only H100/H200)
  std::optional<Json> outputs;   // passed to sim::output_options_from_json
  JsonPath outputs_at;
  std::vector<JobSpec> jobs;       // cluster scenario (then `workload` is unused)
  std::vector<FaultSpec> faults;
  std::optional<JitterSpec> jitter;
  bool stand_in_traffic = true;    // cluster scenario: place the stand-in ranks' groups' traffic (cluster.hpp)
};

// Parses one workload object ({"generator"...} | {"trace"...} | ...) at `at`; paths relative to `file`.
WorkloadSpec workload_from_json(const Json& w, const JsonPath& at, const std::string& file);

// Communication models a scenario (or --comm-model) may name: "engine" (NCCL schedules on the flow engine,
// each distinct collective priced once on an idle fabric), "shared" (every collective and message on one
// shared flow-level network as the replay runs, so overlapping communication contends), "analytic"
// (closed form).
bool is_comm_model(const std::string& name);
const char* comm_model_help();  // "shared, engine or analytic"

Scenario scenario_from_json(const Json& doc, const std::string& file);
Scenario load_scenario(const std::string& path);
// The flagship default for `fabricsim run` without arguments: GPT-3 175B (Megatron layout TP 8, PP 16,
// DP 8, interleaved) on 1024 A100 GPUs (128 DGX A100 in a rail-optimised HDR InfiniBand SuperPOD), with the
// compute efficiencies fitted to Megatron-LM's measured throughput (compute preset "megatron-sc21").
Scenario default_scenario();
Json default_scenario_json();

// Sets the compute preset of a scenario document (models::compute_preset; the CLI's --compute-preset):
// "compute"/"preset" is added or replaced, the scenario's other compute keys still apply on top. An unknown
// name is an InputError naming `where`.
void set_compute_preset(Json& scenario_doc, const std::string& name, const std::string& where);

// Compute model for the scenario: GPU from the topology's first GPU (or the workload's "gpu" param),
// efficiencies from defaults <- calibration extra "compute.*" keys <- scenario "compute".
models::ComputeModel scenario_compute_model(const Scenario& s, const topo::Topology& t,
                                            const std::map<std::string, double>& calibration_extra);

// Builds the workload's trace for this topology (generator defaults: world_size = the topology's GPUs,
// gpu = the topology's GPU model, gpus_per_host from the topology).
Trace build_workload(const Scenario& s, const topo::Topology& t, const models::ComputeModel& cm);
// The generator's parameters as build_workload passes them: the scenario's, plus what the topology implies
// (world_size, gpu, gpus_per_host, gpus_per_nvlink_domain).
ParamMap generator_params(const Scenario& s, const topo::Topology& t, const models::ComputeModel& cm);
// The NVLink domains of a job placed on `gpus` (local rank -> global GPU rank) as the gpt generator's
// gpus_per_nvlink_domain describes them: S when the ranks fill the domains in consecutive runs of S ranks,
// each run in a domain of its own (the last run may be shorter); 0 when the placement has no such form (a run
// starts part-way, or the runs differ) or the GPUs have no NVLink domains.
std::int64_t nvlink_run_length(const topo::Topology& t, const std::vector<std::int32_t>& gpus);
// One warning line for each model-parallel group of a gpt workload (tensor, tensor x context, expert x expert
// tensor) that straddles NVLink domains of `domain` ranks while a placement with fewer GPUs per domain would
// keep every such group in one domain (c.gpus_per_host sizes that placement in whole servers, Slurm's
// --segment). Empty when nothing straddles.
std::vector<std::string> nvlink_straddle_warnings(const GptConfig& c, std::int64_t domain);
// Checks a generator workload's parameters (names, types, ranges, divisibility by the topology's GPUs) as
// build_workload would read them, without generating: `fabricsim sweep` runs it on every point first.
void check_generator_params(const Scenario& s, const topo::Topology& t, const models::ComputeModel& cm);

// Generates a trace by generator name from key=value params (used by `fabricsim gen` and build_workload).
Trace generate(const std::string& generator, const ParamMap& params, const models::ComputeModel& cm,
               const std::string& where);

}  // namespace fabricsim::workloads
