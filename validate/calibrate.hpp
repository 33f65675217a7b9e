#pragma once
// Fitting the network model's calibration to measured collective times.
//
// Residual of one measured row: r = ln(t_simulated / t_measured) (t_measured from row_time_s). The fit
// minimises sum_i rho(r_i) with the Huber loss rho (delta = FitOptions::huber_delta, in log units: 0.1 is
// about 10 %), by iteratively reweighted Gauss-Newton with Levenberg-Marquardt damping: each iteration
// takes finite-difference derivatives of ln(t_sim) with respect to every free parameter (in log space, so
// every parameter stays positive), solves the weighted normal equations with IRLS weights
// w_i = min(1, delta / |r_i|), and keeps a step only if the true objective (a full re-simulation, tuner
// choices included) decreases. Parameters that no training row depends on are left at their start value.
//
// Free parameters (names as in calibration JSON, docs/calibration.md):
//   extra factors   nvlink_efficiency.<gpu>, network_efficiency, pcie_efficiency, nvls_efficiency,
//                   tree_efficiency (fractions, capped at 1); kernel_launch_s and channel_launch_s
//                   (seconds; moved only by runs whose host thread drives several GPUs, nccl-tests -g > 1:
//                   models::host_launch_floor_s)
//   latency groups  base_latency.<proto>, step_latency.<proto>, net_step_latency.<proto> for proto in
//                   simple/ll/ll128: one multiplier on that field of every algorithm with that protocol,
//                   keeping NCCL's relative latencies between algorithms; the same groups per NCCL era
//                   (nccl_eras.<name>.<field>.<proto>) when the calibration has eras, each fitted on the
//                   runs of that NCCL generation only.
//   with FitOptions::split_identification: bw_efficiency.ll / .ll128 (capped by the wire format) and
//                   multi_host_base_latency_factor.
#include <memory>
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "validate/nccl_log.hpp"
#include "validate/simulate.hpp"

namespace fabricsim::validate {

// One measured run prepared for simulation.
struct Case {
  Measurement m;
  std::shared_ptr<SimSystem> sys;
  std::vector<std::uint64_t> sizes;   // rows with a usable measured time, in row order
  std::vector<double> measured_s;     // their measured times
  std::vector<std::string> gpu_models;  // GPU models in the simulated communicator (for parameter relevance)
};

// Builds cases (mapping every measurement to a topology). `preset`/`params` as map_system.
std::vector<Case> make_cases(const std::vector<Measurement>& ms, const std::string& preset = "",
                             const std::map<std::string, std::string>& params = {});
// Keeps only the rows of sizes in [min_bytes, max_bytes] (`fabricsim calibrate --min-bytes/--max-bytes`) and
// drops cases left without rows; throws InputError naming the flags when no row is left.
void restrict_sizes(std::vector<Case>& cases, std::uint64_t min_bytes, std::uint64_t max_bytes);
// The case's topology `fabric` parameter ("infiniband-ndr", "efa", ...), "" when its topology has none.
std::string fabric_param(const Case& cs);

struct FitOptions {
  int max_iterations = 12;
  double huber_delta = 0.1;       // log units
  double fd_step = 0.02;          // finite-difference step in log space
  double min_improvement = 1e-4;  // relative objective decrease that counts as progress
  int threads = 2;                // cases simulated in parallel (results do not depend on it)
  // --split-fit (docs/validation.md "Leave-one-out accuracy"): also fit NCCL's older tuning tables
  // (models::default_nccl_eras, e.g. NCCL 2.8-2.17, separate latency multipliers for runs of that
  // generation), the LL/LL128 payload efficiencies and multi_host_base_latency_factor, and identify each
  // parameter from the runs that show it: per-step latency inside a host and protocol efficiencies from
  // single-host runs, network step latency and the multi-host factor from multi-host runs.
  bool split_identification = false;
  // --nccl-eras: only the first part of --split-fit. Runs of an older NCCL generation use that
  // generation's tuning table (models::default_nccl_eras) with latency multipliers fitted on those runs
  // only; everything else as the default fit. Leave-one-out on the shared logs (docs/validation.md, 2026-11-22
  // 08:10 UTC): >= 1 MiB median 5.7 % (default fit 5.6 %), < 1 MiB median 13.7 % (12.9 %).
  bool nccl_eras = false;
  // --loo-by system (validate::leave_one_out only): hold out every multi-host log of the held-out log's system
  // (same server, scale-out fabric, NICs and GPUs; any node count) together, so that no run of the same
  // cluster trains its prediction. Single-host logs stay held out one file at a time.
  bool loo_by_system = false;
  // Set by validate::leave_one_out with loo_by_system for a held-out multi-host system: its scale-out fabric
  // (the topology's `fabric` parameter, "infiniband-edr", "efa", ...). The fabric's own properties, the network
  // efficiency and the network step latencies, are then identified from multi-host runs on that fabric only,
  // and stay at the start's values when no training run has it: fitted on other fabrics they carried those
  // fabrics' efficiency and latency to the held-out system (docs/validation.md "Leave one system out").
  // The host's latencies (base latency, step latency inside a host) are identified from single-host runs and
  // multi-host runs on that fabric: a multi-host run's per-call cost cannot tell them from the fabric's.
  std::string fabric;
};

struct ParamValue {
  std::string name;
  double start = 0, fitted = 0;  // absolute values (seconds for latencies: the group's Ring value)
};

struct RowResidual {
  std::string source;
  std::uint64_t size_bytes = 0;
  double measured_s = 0, simulated_s = 0;
  double log_residual = 0;  // ln(simulated / measured)
};

struct FitResult {
  models::Calibration calib;
  std::vector<ParamValue> params;  // the free parameters the data constrained
  double start_objective = 0, final_objective = 0;
  int iterations = 0, simulations = 0;
  std::vector<RowResidual> residuals;  // at the fitted calibration
};

// Fits `start` to the cases. Throws InputError when there is nothing to fit (no usable rows).
FitResult fit_calibration(const std::vector<Case>& cases, const models::Calibration& start,
                          const FitOptions& opt = {});

// Residuals of every usable row under `calib`.
std::vector<RowResidual> residuals(const std::vector<Case>& cases, const models::Calibration& calib);

}  // namespace fabricsim::validate
