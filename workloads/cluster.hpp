#pragma once
// Cluster scenarios (docs/workloads.md "Cluster scenarios"): several jobs on one topology, each a workload as
// in a single-job scenario, placed on GPUs explicitly or by a policy; faults (a link slower or down, a switch
// or NIC down, a slower GPU, a lost server) and a seeded compute-jitter model. This file parses the
// `jobs` / `faults` / `jitter` keys, applies the topology faults, places the jobs, builds each job's trace
// and rewrites it onto its GPUs (global ranks) with the compute slowdowns baked in as fixed durations, and
// merges the jobs into one trace that the replay runs on one shared network (replay/cluster_run.hpp).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/base/json_reader.hpp"
#include "topologies/topology.hpp"
#include "workloads/scenario.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::workloads {

// Reads "jobs", "faults" and "jitter" of the scenario object `r` (called by scenario_from_json).
void parse_cluster(Scenario& s, ObjectReader& r, const std::string& file);

// One entry of a scenario's "faults" array at `at` (InputError naming it when malformed).
FaultSpec parse_fault(const Json& j, const JsonPath& at);
// A fault given on a command line (`flag` names it in errors): the JSON object of a faults[] entry, or the
// compact form of the same object: link=A,B:50% | link=A,B:down | switch=ID | nic=ID | gpu=RANK:20% |
// node=HOST[:shrink|spare]. Read by parse_fault, so both forms mean the same and fail the same way.
FaultSpec parse_fault_text(const std::string& text, const std::string& flag);

// The placement policies, for help texts: "packed, spread, random(SEED), rail-aligned, fill-racks, segment(N)".
const char* placement_help();
bool is_placement(const std::string& text);  // also accepts random(N) and segment(N)

// GPUs that segment(n) placement finds on a topology with every GPU free: in each NVLink domain (a server
// where GPUs have none), whole segments of n servers.
std::int64_t segment_capacity(const topo::Topology& t, std::int64_t n);
// A single-job scenario with the topology's "placement" ({"segment": N}) as a one-job cluster scenario: job
// "job" placed by segment(N), world_size by default the GPUs segment(N) finds (segment_capacity).
Scenario one_job_cluster(const Scenario& s, const topo::Topology& t);

// The topology with the scenario's link / switch / NIC faults applied: a link at a fraction of its
// bandwidth, or removed when down (routing then takes the remaining shortest paths); a switch or NIC down
// removes every link of it. `notes` gets one line per fault.
topo::Topology apply_topology_faults(const topo::Topology& t, const std::vector<FaultSpec>& faults,
                                     std::vector<std::string>& notes);

// Servers and racks of a topology as placement sees them: GPUs of each server (global ranks, local
// order) and the rack (leaf group) of each server.
struct ClusterLayout {
  std::vector<std::vector<std::int32_t>> host_gpus;
  std::vector<int> host_rack;
  int racks = 0;
};
ClusterLayout cluster_layout(const topo::Topology& t);

// Places the jobs in order: explicit `gpus` first, then each policy over the GPUs still free. Returns
// every job's GPUs (local rank -> global GPU rank). Overlaps and jobs that do not fit are InputErrors
// naming the job.
std::vector<std::vector<std::int32_t>> place_jobs(const topo::Topology& t, const std::vector<JobSpec>& jobs,
                                                  const std::vector<std::int64_t>& world_sizes);

// One job ready to replay: its trace rewritten onto global GPU ranks, compute ops with fixed durations
// (slow-GPU and jitter factors applied), `iterations` steps after `start_offset_s`.
struct PlacedJob {
  std::string name;
  std::string placement;              // policy or "explicit"
  std::vector<std::int32_t> gpus;     // local rank -> global GPU rank
  std::int64_t world_size = 0;
  double start_offset_s = 0;
  int iterations = 1;
  Trace trace;                        // global ranks; world_size = the topology's GPU count
  std::map<std::string, double> metadata;      // the job's own trace metadata (per iteration)
  std::map<std::string, std::string> params;   // generator parameters
  std::string workload;                         // generator name or file
  std::vector<std::string> notes;              // what faults / jitter changed for this job
  // Stand-in traffic (Scenario::stand_in_traffic): the copies of each message pair the simulated ranks send,
  // made of stand-in ranks (global ranks; the communicators' copies are Communicator::stand_ins), and counts.
  std::map<std::pair<std::int32_t, std::int32_t>, std::vector<std::pair<std::int32_t, std::int32_t>>> p2p_stand_ins;
  std::size_t stand_in_groups = 0, stand_in_pairs = 0, stand_ins_in_server = 0;
};

struct ClusterPlan {
  std::vector<PlacedJob> jobs;
  std::vector<std::string> notes;
};

// Builds every job (generators get world_size = the job's GPU count unless given, gpus_per_host from the
// topology), applies node losses (shrink: the job drops whole model replicas, i.e. TP x PP x CP GPUs for
// gpt, 1 GPU for dataparallel; spare: the lost server's GPUs are replaced by a free server's), slow GPUs
// and jitter. `t` is the topology with faults applied; `calibration_extra` feeds the compute models.
ClusterPlan plan_cluster(const Scenario& s, const topo::Topology& t,
                         const std::map<std::string, double>& calibration_extra);

// The jobs' traces as one trace on the whole cluster (world_size = GPUs of `t`), communicators renamed
// "<job>/<name>". Jobs must not share a GPU.
Trace merge_jobs(const std::vector<const PlacedJob*>& jobs, std::int32_t world_size);

// Standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9), for the jitter
// model's order statistics; p in (0, 1).
double normal_quantile(double p);

}  // namespace fabricsim::workloads
