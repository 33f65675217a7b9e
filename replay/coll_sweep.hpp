#pragma once
// One NCCL collective over a size sweep on a topology: the library behind `fabricsim coll` and the Python
// module's coll() (docs/collectives.md). Takes the request already parsed (units resolved), builds the
// topology, calibration and routing, prices every size on the engine, and returns the nccl-tests-style table,
// the collective-results JSON ("fabricsim.collective_results/1") and, on request, the largest size's run for
// the timeline / link statistics / report writers. Errors are InputErrors naming the CLI flag (the
// request's fields are named after them).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/collectives.hpp"
#include "sim/base/json_reader.hpp"
#include "replay/result.hpp"
#include "workloads/scenario.hpp"

namespace fabricsim::sim {

struct CollSweepRequest {
  std::string topology;                       // preset name or JSON file (--topology)
  std::map<std::string, std::string> params;  // preset parameters (--param)
  models::CollectiveSpec spec;                // op, elem_bytes, algorithm/protocol/channels/fidelity, root
  std::string datatype = "float";             // printed type (-d); spec.elem_bytes is its size
  std::string redop = "sum";                  // printed reduction (-o)
  std::uint64_t min_bytes = 32ull << 20, max_bytes = 32ull << 20;
  long long step_factor = 2;
  std::optional<long long> ngpus;             // -g: the first N GPUs
  std::vector<std::string> comm;              // --comm: cluster GPU ranks, as given
  long long ep = 0;                           // --ep: expert-parallel group of all_to_all(v) (0: none)
  std::string ep_span = "node";               // --ep-span: node (pack servers) | rail (one GPU per server)
  int gpus_per_thread = 0;                    // host launch floor (0: none)
  int iters = 0;                              // back-to-back calls per size (0: one call)
  std::string engine = "fabricsim";
  std::optional<double> batch_tolerance_s;    // none: automatic
  std::string calibration = "auto";           // models::resolve_calibration spec
  std::string pxn = "auto";                   // auto | on | off
  bool want_run = false;                      // keep the largest size's run (timeline, links, report)
  // --fault: link / switch / NIC faults applied to the topology before pricing (workloads::parse_fault_text,
  // the vocabulary of a scenario's faults[]; docs/workloads.md "Cluster scenarios"). GPU and node faults
  // change a job, not the fabric: InputError.
  std::vector<workloads::FaultSpec> faults;
};

struct CollSweep {
  std::string text;  // the table, as `fabricsim coll` prints it
  Json doc;          // the collective-results JSON
  std::vector<double> times_s;  // each row's time in seconds, unrounded (sim::time_collective)
  RunResult last;    // the largest size's run (when want_run)
};

// The message sizes of an nccl-tests size sweep (-b MIN -e MAX -f FACTOR): MIN, MIN x FACTOR, ... while
// <= MAX, as nccl-tests' loop (integer factor). FACTOR >= 2, or 1 when MIN == MAX. The one sweep behind
// `fabricsim coll`, the Python coll() and fabricsim-nccl-bench; throws InputError naming -b, -e or -f.
std::vector<std::uint64_t> size_sweep(std::uint64_t min_bytes, std::uint64_t max_bytes, long long factor);

// Element size of an nccl-tests datatype name (int8 ... bfloat16); 0 when unknown.
int coll_datatype_bytes(const std::string& name);
// The request from option values keyed by coll's long flag names without the dashes ("topology", "op",
// "minbytes", "maxbytes", "stepfactor", "ngpus", "gpus-per-thread", "iters", "comm", "root", "algo", "proto",
// "channels", "engine", "fidelity", "calibration", "datatype", "redop", "batch-tolerance", "pxn", "ep",
// "ep-span"), with coll's
// defaults for absent ones; every value is checked here (InputError naming the flag), unknown keys too.
CollSweepRequest coll_request(const std::map<std::string, std::string>& options,
                              const std::map<std::string, std::string>& params);
CollSweep run_coll_sweep(const CollSweepRequest& r);

}  // namespace fabricsim::sim
