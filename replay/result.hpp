#pragma once
// What one simulation produced, in a form every output writer reads (summary text, result JSON, Chrome
// trace timeline, link statistics, HTML report, sweep CSV rows). The replayer fills it; writers never
// look at the engine. Times in seconds, sizes in bytes, rates in bytes/s.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fabricsim::sim {

// One executed op on one rank's stream: a compute kernel, a collective (this rank's part) or a send/recv.
struct OpRecord {
  std::int32_t rank = 0;        // global GPU rank (index into Topology::gpus())
  std::int32_t host = 0;        // server index of that GPU
  std::string stream;           // "compute", "comm", "comm.tp", "comm.dp", "p2p", ...
  std::string name;             // layer / op name, e.g. "layer3.fwd.attn", "dp.allreduce.bucket2"
  std::string kind;             // "compute" | "collective" | "send" | "recv"
  std::string category;         // breakdown bucket: "compute", "tp", "cp", "pp", "dp", "ep", "all_to_all", "other"
  double start_s = 0;           // when it began executing (after deps and stream were free)
  double end_s = 0;
  double bytes = 0;             // payload bytes (collective size / message size), 0 for compute
  std::string algorithm;        // collective algorithm and protocol, empty otherwise
  std::string protocol;
  double flops = 0;             // compute ops: FLOPs
};

// A change point of one link direction's utilisation: from t_s until the next point (or the end of the
// run) the direction carries util * capacity_Bps. Points are in increasing t_s; the series starts at 0.
struct UtilPoint {
  double t_s = 0;
  double util = 0;  // 0..1
};

struct LinkRecord {
  std::uint32_t link = 0;       // topology link id
  std::string a, b;             // node ids (direction 0 is a->b, 1 is b->a)
  std::string kind;             // "nvlink", "pcie", "infiniband", "ethernet"
  int tier = 0;                 // 0 inside a host; 1 leaf, 2 spine, 3 core (from the higher-tier endpoint)
  double capacity_Bps = 0;      // per direction, effective
  double bytes[2] = {0, 0};     // carried per direction
  double busy_s[2] = {0, 0};    // time with traffic per direction
  double peak_util[2] = {0, 0}; // peak instantaneous utilisation per direction (0..1)
  // Optional utilisation time series per direction (change points). Empty when the engine did not record
  // it; the timeline then shows the average over busy time and says so (replay/outputs.hpp).
  std::vector<UtilPoint> util_series[2];
};

struct Breakdown {
  // Per-rank average, seconds. compute + exposed comm per category + bubble + idle = iteration time.
  double compute_s = 0;
  std::map<std::string, double> exposed_comm_s;  // by category: "tp", "pp", "dp", "all_to_all", ...
  double bubble_s = 0;                          // pipeline bubble (idle waiting on pipeline deps)
  double idle_s = 0;                            // remaining idle time
};

// One job of a cluster scenario (replay/cluster_run.hpp): its step time with the other jobs on the shared
// fabric and alone on the same GPUs (same faults), and the ratio.
struct JobResult {
  std::string name;
  std::string workload;                  // generator or file
  std::string placement;                 // policy or "explicit"
  int gpus = 0;
  int hosts = 0, racks = 0;              // servers and racks (leaf groups) it occupies
  double start_offset_s = 0;
  int iterations = 1;
  double iteration_s = 0;                // (finish - start_offset) / iterations, all jobs together
  double iteration_s_alone = 0;          // the same job alone on the same GPUs
  double slowdown = 1;                   // iteration_s / iteration_s_alone
  double samples_per_s = 0, tokens_per_s = 0, tflops_per_gpu = 0;  // at iteration_s
  double compute_s = 0;                  // mean busy compute time per simulated rank and iteration
  std::vector<std::string> notes;        // faults and jitter that changed this job
};

// A link direction that two or more jobs used (the bytes each job's alone run put on it): where the jobs
// interfere. Utilisation = bytes / (capacity x the shared run's span).
struct SharedLinkRecord {
  std::uint32_t link = 0;
  int dir = 0;
  std::string from, to, kind;
  int tier = 0;
  double capacity_Bps = 0;
  std::map<std::string, double> bytes_by_job;  // one iteration set (iterations x steps) per job
  std::map<std::string, double> util_by_job;
  double util_together = 0;                    // the shared run's bytes on it over the same span
};

struct RunResult {
  std::string topology;                  // preset name or file
  std::map<std::string, std::string> topology_params;
  std::string calibration;               // the network calibration's label (models::CalibrationRef::label)
  std::string workload;                  // generator or trace file
  std::map<std::string, std::string> workload_params;
  // Which communication model priced the communication: "engine" (idle fabric, the fast tier), "shared"
  // (one shared network: overlapping communication contends) or "analytic"; its full description is in notes.
  std::string comm_model;
  int gpus = 0;
  double iteration_s = 0;                // one training step
  double samples_per_s = 0;
  double tokens_per_s = 0;               // 0 when not a language model
  double tflops_per_gpu = 0;             // achieved model FLOP/s per GPU / 1e12
  double mfu = 0;                        // tflops_per_gpu x 1e12 / metric peak_dense_flops_per_gpu; 0: no peak
  // Whether the workload states its samples per step and its model FLOPs (a Chakra / ASTRA-sim / SimAI trace may
  // state neither); when not, samples_per_s / tflops_per_gpu are 0 and the outputs print them as not known.
  bool samples_known = true, flops_known = true;
  Breakdown breakdown;
  // When each simulated rank's last op ended, in the trace's rank order (Trace::ranks), seconds. Not written
  // by the output writers; for callers that replay a subset of a topology's GPUs (e.g. several jobs).
  std::vector<double> rank_end_s;
  std::vector<OpRecord> ops;             // may be a representative subset (ranks simulated); see notes
  std::vector<LinkRecord> links;         // links that carried traffic
  std::map<std::string, double> metrics; // extra named figures (e.g. "memory_per_gpu_bytes.max")
  std::vector<std::string> notes;        // modelling notes (fidelity, symmetry used, ...)
  double wall_s = 0;                     // simulator wall time (not part of deterministic outputs)
  std::vector<JobResult> jobs;           // cluster scenarios only
  std::vector<SharedLinkRecord> shared_links;  // cluster scenarios: links two or more jobs use, busiest first
};

}  // namespace fabricsim::sim
