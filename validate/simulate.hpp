#pragma once
// Simulating a measured run: map the log's machine (GPU model, hosts, ranks) to a topology preset and
// parameters, pick the communicator (the first ranks/host GPUs of each host), and run every measured size
// through the collective model (models::build_schedule) on the flow engine (sim::run_schedule).
//
// Mapping rules (documented in docs/validation.md; the GPU name is the one nccl-tests prints):
//   "A100-SXM4-40GB"  -> dgx-a100 gpu=a100-40gb nics_per_node=4   (ABCI 2.0 A node: 8x A100-40GB on NVSwitch,
//                        4x HDR 200 Gb/s per node per the log sidecars / ABCI documentation)
//   other "A100"      -> dgx-a100 (a100-80gb, 8x HDR)
//   "H100"            -> dgx-h100
//   "B200"            -> dgx-b200
//   "V100"            -> dgx-a100 gpu=v100 gpus_per_node=4 nvlink_bandwidth=150GB/s nics_per_node=2
//                        nic_bandwidth=100Gbps (ABCI V node: 4x V100 SXM2 fully meshed by NVLink2, 2 EDR
//                        ports; the mesh is approximated by a crossbar with the same per-GPU NVLink total)
//   several hosts     -> superpod nodes=N node=<the server preset above> with the same server parameters.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "models/system.hpp"
#include "validate/nccl_log.hpp"

namespace fabricsim::validate {

struct SystemMapping {
  std::string preset;                         // topology preset name (or a topology file path)
  std::map<std::string, std::string> params;  // preset parameters
  int ranks_per_host = 0;
  std::string family;  // hardware family for calibration files: "a100", "h100", "b200", "v100"
  std::string rule;    // which rule matched, for reports
  // CollNet needs NCCL's SHARP plugin; none of the shared logs' sidecars mention it (ABCI ran NCCL 2.8.4 with
  // UCX, Together/NVIDIA single-node runs have no network), so the tuner's choice excludes CollNet unless set.
  bool allow_collnet = false;
};

// Throws InputError naming m.source when no rule applies (unknown GPU, ranks not divisible by hosts).
SystemMapping map_system(const Measurement& m);
// The same, but with a user-given topology (--topology/--param) for single-host runs; multi-host runs wrap a
// server preset in superpod. Empty preset -> map_system.
SystemMapping map_system(const Measurement& m, const std::string& preset,
                         const std::map<std::string, std::string>& params);

// One simulated point.
struct SimPoint {
  std::uint64_t size_bytes = 0;
  double time_s = 0;
  std::string algorithm, protocol;  // what the tuner (or the log's NCCL_ALGO) chose
  bool at_host_floor = false;       // time_s is the host launch floor (models::host_launch_floor_s)
  bool from_log = false;            // algorithm/protocol (and floor channels) are NCCL's, from the log's TUNING lines
};

// Topology, routing and communicator of one measured run, built once and reused for every size and every
// calibration tried by the fitter.
class SimSystem {
 public:
  SimSystem(const SystemMapping& map, const Measurement& m);
  ~SimSystem();
  SimSystem(const SimSystem&) = delete;
  SimSystem& operator=(const SimSystem&) = delete;

  // Simulated time of `op` with `size_bytes` (nccl-tests size convention) under `calib`. The algorithm is
  // the measurement's (when it recorded NCCL_ALGO) else the tuner's choice.
  SimPoint simulate(std::uint64_t size_bytes, const models::Calibration& calib) const;
  const SystemMapping& mapping() const { return map_; }
  int nranks() const;
  std::vector<std::string> gpu_models() const;  // distinct GPU models of the communicator
  const models::System& system() const;          // the topology and routings (models/system.hpp)

 private:
  struct Impl;
  SystemMapping map_;
  std::unique_ptr<Impl> impl_;
};

// What validate does with each NCCL_* setting a log records (Measurement::env): the ones it honours
// (NCCL_ALGO and NCCL_PROTO restrict the simulated algorithm and protocol, as NCCL's do; NCCL_NVLS_ENABLE=0
// removes NVLS and NVLS_TREE from the tuner's candidates), the ones that only
// name devices or debug output (no effect on the price), and every other one, which changes what NCCL does
// but not what fabricsim simulates ("NAME=value: why"). The report prints the last list for each log, so a
// setting fabricsim cannot honour is never silently ignored.
struct NcclEnvEffects {
  std::vector<std::string> honoured, no_effect, not_modelled;
};
NcclEnvEffects nccl_env_effects(const std::map<std::string, std::string>& env);
// NCCL's channel settings among a log's NCCL_* values (NCCL_MIN/MAX_NCHANNELS, NCCL_MIN/MAX_CTAS), with NCCL's
// treatment of out-of-range values; a value that is not an integer is an InputError naming `where`.
models::NcclChannelEnv nccl_channel_env(const std::map<std::string, std::string>& env, const std::string& where);

}  // namespace fabricsim::validate
