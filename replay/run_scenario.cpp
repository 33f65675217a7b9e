#include <algorithm>
#include "replay/run_scenario.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>
#include <vector>

#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "models/compute.hpp"
#include "models/compute_calibration.hpp"
#include "models/system.hpp"
#include "replay/cluster_run.hpp"
#include "replay/engine_comm_model.hpp"
#include "replay/outputs_links.hpp"
#include "replay/placement_classes.hpp"
#include "topologies/io.hpp"
#include "workloads/cluster.hpp"

namespace fabricsim::sim {

models::System scenario_system(const workloads::Scenario& s) {
  models::SystemSpec spec;
  spec.topology = s.topology;
  spec.params = s.topology_params;
  spec.params_at = s.file.empty() ? std::string() : JsonPath{s.file, "/topology/params"}.str();
  spec.calibration = s.calibration_file.empty() ? "auto" : s.calibration_file;
  return models::System(spec);
}

void check_scenario_inputs(const workloads::Scenario& s_in, const models::System& sys) {
  // A placed single job is checked as the job the one-job cluster runs (its world_size: the placed GPUs).
  workloads::Scenario s = s_in;
  if (s.placement_segment > 0) s.workload = workloads::one_job_cluster(s_in, sys.topology()).jobs.front().workload;
  const models::ComputeModel cm = workloads::scenario_compute_model(s, sys.topology(), sys.calibration().named_factors());
  workloads::check_generator_params(s, sys.topology(), cm);
}

namespace {
// all_to_all.link_bytes.<class> / all_to_all.link_time_s.<class> (EngineCommBase::all_to_all_by_class): where
// the all-to-all traffic (MoE dispatch / combine) and its time go, per link class.
void add_all_to_all_metrics(const EngineCommBase::ClassTotals& a2a, RunResult& r) {
  for (const auto& [cls, b] : a2a.bytes) r.metrics["all_to_all.link_bytes." + cls] = b;
  for (const auto& [cls, s] : a2a.time_s) r.metrics["all_to_all.link_time_s." + cls] = s;
}
}  // namespace

ScenarioRun run_scenario(const workloads::Scenario& s, const ScenarioRunOptions& opt_in) {
  // Compute beside communication kernels, and the start delay of communication launched while compute runs:
  // on unless the scenario ("comm_sm_contention" / "comm_start_delay": false) or the caller turns them off.
  ScenarioRunOptions opt = opt_in;
  opt.replay.comm_sm_contention = opt_in.replay.comm_sm_contention && s.comm_sm_contention;
  opt.replay.comm_sm_contention_all_gpus = opt_in.replay.comm_sm_contention_all_gpus || s.comm_sm_contention_all_gpus;
  opt.replay.comm_start_delay = opt_in.replay.comm_start_delay && s.comm_start_delay;
  opt.replay.comm_start_delay_all_gpus = opt_in.replay.comm_start_delay_all_gpus || s.comm_start_delay_all_gpus;
  if (!s.jobs.empty()) return run_cluster(s, opt);  // several jobs on one fabric (replay/cluster_run.hpp)
  auto t0 = std::chrono::steady_clock::now();
  // NVLink traffic is striped by the hardware over all NVSwitch planes; the flow model needs them merged
  // (models/collectives.hpp, merge_nvswitch_planes), as `fabricsim coll` does.
  const models::System sys = scenario_system(s);
  // A placed single job ("placement": {"segment": N}) runs as a one-job cluster on the GPUs it is placed on.
  if (s.placement_segment > 0) return run_cluster(workloads::one_job_cluster(s, sys.topology()), opt);
  const topo::Topology& topo = sys.topology();
  const models::Calibration& calib = sys.calibration();
  models::ComputeModel cm = workloads::scenario_compute_model(s, topo, calib.named_factors());
  // The kernels priced by shape (ComputeModel::kernel_time_s): whether the per-kernel calibration note applies.
  std::vector<models::KernelDesc> kernel_priced;
  cm.priced = &kernel_priced;
  workloads::Trace trace = workloads::build_workload(s, topo, cm);
  cm.priced = nullptr;
  auto t1 = std::chrono::steady_clock::now();
  std::string which = opt.comm_model.empty() ? s.comm_model : opt.comm_model;
  std::unique_ptr<CommModel> comm;
  EngineCommBase* engine = nullptr;
  SharedNetworkCommModel* shared = nullptr;
  AnalyticLinksCommModel* analytic = nullptr;
  if (which == "analytic") {
    if (opt.engine.collect_link_stats) {
      // analytic times; per-link bytes from the calls' schedules (replay/engine_comm_model.hpp)
      auto a = std::make_unique<AnalyticLinksCommModel>(topo, calib, analytic_params(calib, topo), opt.engine);
      std::vector<std::int32_t> simulated;
      for (const auto& rt : trace.ranks) simulated.push_back(rt.rank);
      a->set_symmetry(trace.world_size, std::move(simulated));
      analytic = a.get();
      comm = std::move(a);
    } else {
      comm = std::make_unique<AnalyticCommModel>(topo, analytic_params(calib, topo));
    }
  } else {
    std::unique_ptr<EngineCommBase> e;
    if (which == "shared") {
      auto sh = std::make_unique<SharedNetworkCommModel>(topo, calib, opt.engine);
      shared = sh.get();
      e = std::move(sh);
    } else {
      e = std::make_unique<EngineCommModel>(topo, calib, opt.engine);
    }
    std::vector<std::int32_t> simulated;
    for (const auto& rt : trace.ranks) simulated.push_back(rt.rank);
    e->set_symmetry(trace.world_size, std::move(simulated));
    engine = e.get();
    comm = std::move(e);
  }
  ScenarioRun out;
  out.trace_ops = trace.num_ops();
  // Groups of one kind not all alike over the fabric: the calls priced over the slowest one's.
  const auto placement = price_slowest_placement_classes(trace, topo, *comm);
  out.result = replay(trace, topo, cm, *comm, opt.replay);
  RunResult& r = out.result;
  add_placement_class_results(placement, r.notes, r.metrics);
  if (engine) {
    add_engine_run_metrics(*engine, shared, r);
    if (opt.engine.collect_link_stats) {
      engine->finalize_link_stats();
      r.links = link_records(topo, engine->link_dirs());
      auto tiers = engine->link_totals_by_tier();
      for (const auto& [tier, b] : tiers.priced)
        r.metrics["link_bytes.priced_groups.tier" + std::to_string(tier)] = b;
      for (const auto& [tier, b] : tiers.cluster)
        r.metrics["link_bytes.cluster_estimate.tier" + std::to_string(tier)] = b;
      add_all_to_all_metrics(engine->all_to_all_by_class(), r);
      if (which == "shared")
        r.notes.push_back(
            "link statistics: one training iteration on the shared network: per-link bytes are the payload of "
            "every collective / send started (the simulated ranks' communicators with their co-located mirrors; "
            "stand-in groups on other links are not placed), busy time and peak utilisation are measured on the "
            "shared network, where overlapping communication shares the links (on links only one communicator "
            "uses, per call from its idle-fabric run: the same figures); utilisation relative to nominal "
            "link bandwidth. metrics link_bytes.cluster_estimate.tier<k> scale each call by the number of copies "
            "of its group in the whole cluster (world / simulated ranks x simulated members / ranks priced)");
      else
        r.notes.push_back(
            "link statistics: one training iteration; each collective / send priced on the engine contributes its "
            "schedule's per-link bytes and busy time once per call (count x per-call), on the links of the priced "
            "group (the simulated ranks' communicators with their co-located mirrors); stand-in groups on other "
            "links are not placed; busy times add as if calls did not overlap; utilisation relative to nominal "
            "link bandwidth. metrics link_bytes.cluster_estimate.tier<k> scale each call by the number of copies of "
            "its group in the whole cluster (world / simulated ranks x simulated members / ranks priced)");
    }
  }
  if (analytic) {
    r.links = link_records(topo, analytic->link_dirs());
    auto tiers = analytic->link_totals_by_tier();
    for (const auto& [tier, b] : tiers.priced) r.metrics["link_bytes.priced_groups.tier" + std::to_string(tier)] = b;
    for (const auto& [tier, b] : tiers.cluster) r.metrics["link_bytes.cluster_estimate.tier" + std::to_string(tier)] = b;
    add_all_to_all_metrics(analytic->all_to_all_by_class(), r);
    r.notes.push_back(
        "link statistics: one training iteration; bytes per link are each collective / send's payload on the "
        "routes of the NCCL schedule the engine would run for it (the simulated ranks' communicators with their "
        "co-located mirrors; stand-in groups on other links are not placed), busy time is the analytic time of "
        "every call on each link it uses (added as if calls did not overlap); utilisation relative to nominal "
        "link bandwidth. metrics link_bytes.cluster_estimate.tier<k> scale each call by the number of copies of "
        "its group in the whole cluster (world / simulated ranks x simulated members / ranks priced)");
  }
  auto t2 = std::chrono::steady_clock::now();
  r.topology = s.topology;
  r.topology_params = topo.params();
  r.calibration = sys.calibration_label();
  if (s.workload.kind != "generator") r.workload = s.workload.file;
  else r.workload = s.workload.generator;
  for (const auto& n : s.workload.notes) r.notes.push_back(n);
  // Which compute model priced what: the per-kernel calibration for ops that name their kernel (only when the
  // workload has such ops: the SC'21-era op-class workloads have none), the roofline for ops given as FLOPs /
  // bytes only. A GPU without a fit of its own borrows another's efficiencies.
  if (!kernel_priced.empty()) {
    const models::ComputeCalibration& kc = cm.kernel_calibration();
    const bool borrowed = models::default_compute_calibration(cm.gpu.name).gpu == kc.gpu && kc.gpu != cm.gpu.name &&
                          cm.gpu.name.rfind(kc.gpu + "-", 0) != 0;
    r.notes.push_back("compute: ops that name their kernel (GEMM shapes, attention, memory-bound kernels) priced by the "
                      "per-kernel calibration fitted on " + kc.gpu +
                      (borrowed ? " (no fit of " + cm.gpu.name + "'s own: its peaks with that fit's efficiencies)" : "") +
                      " at " + cm.gpu.name + "'s peaks (docs/calibration.md \"Compute kernels\"); ops given as FLOPs / "
                      "bytes only at the roofline");
  }
  r.notes.push_back("compute: roofline on " + cm.gpu.name + " (" + models::to_string(cm.precision) +
                    "), efficiencies gemm " + std::to_string(cm.eff.flops_eff(models::OpClass::Gemm)) + ", attention " +
                    std::to_string(cm.eff.flops_eff(models::OpClass::Attention)) + ", elementwise memory " +
                    std::to_string(cm.eff.mem_eff(models::OpClass::Elementwise)) + ", embedding memory " +
                    std::to_string(cm.eff.mem_eff(models::OpClass::Embedding)) + " (compute preset " +
                    (s.compute ? models::compute_preset_name(*s.compute, s.compute_at) : std::string("default")) +
                    ", then any calibration compute.* keys and scenario compute keys; docs/workloads.md)");
  out.generate_wall_s = std::chrono::duration<double>(t1 - t0).count();
  out.replay_wall_s = std::chrono::duration<double>(t2 - t1).count();
  r.wall_s = std::chrono::duration<double>(t2 - t0).count();
  return out;
}

std::string scenario_gemm_shapes(const workloads::Scenario& s) {
  if (!s.jobs.empty())
    throw InputError(s.file + ": /jobs", "a single-workload scenario for --kernel-shapes (list each job's workload in a "
                                         "scenario of its own)");
  const models::System sys = scenario_system(s);
  const topo::Topology& topo = sys.topology();
  const models::Calibration& calib = sys.calibration();
  models::ComputeModel cm = workloads::scenario_compute_model(s, topo, calib.named_factors());
  std::vector<models::KernelDesc> priced;
  cm.priced = &priced;
  workloads::build_workload(s, topo, cm);
  // Distinct (M, N, K, precision) in first-priced order, with how often each was priced.
  std::vector<std::pair<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::string>, long>> shapes;
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::string>, std::size_t> at;
  for (const auto& k : priced) {
    if (k.kind != models::KernelKind::Gemm || k.groups > 1) continue;  // batched launches are no single-GEMM shape
    const std::string p = k.precision == models::Precision::FP8 ? "fp8" : "bf16";
    auto key = std::make_tuple(k.m, k.n, k.k, p);
    auto [it, fresh] = at.emplace(key, shapes.size());
    if (fresh) shapes.push_back({key, 0});
    ++shapes[it->second].second;
  }
  std::ostringstream o;
  o << "# GEMMs priced by " << (s.file.empty() ? std::string("the scenario") : s.file)
    << " (fabricsim run --kernel-shapes): M N K precision label\n";
  for (const auto& [key, n] : shapes)
    o << std::get<0>(key) << " " << std::get<1>(key) << " " << std::get<2>(key) << " " << std::get<3>(key) << " priced x" << n << "\n";
  return o.str();
}

void add_engine_run_metrics(const EngineCommBase& engine, const SharedNetworkCommModel* shared, RunResult& r) {
  r.metrics["replay.schedules_run"] = static_cast<double>(engine.schedules_run());
  r.metrics["replay.schedules_run_phase_fidelity"] = static_cast<double>(engine.phase_schedules_run());
  if (shared) {
    r.metrics["replay.shared.isolated_calls"] = static_cast<double>(shared->isolated_calls());
    r.metrics["replay.shared.network_calls"] = static_cast<double>(shared->network_calls());
    r.metrics["replay.shared.sharing_owners"] = static_cast<double>(shared->shared_owners());
    r.metrics["replay.shared.idle_window_calls"] = static_cast<double>(shared->window_calls());
    r.metrics["replay.shared.idle_window_reruns"] = static_cast<double>(shared->window_reruns());
    r.metrics["replay.shared.network_solves"] = static_cast<double>(shared->network_solves());
    r.metrics["replay.shared.network_solver_flow_visits"] = static_cast<double>(shared->network_solver_flow_visits());
    r.metrics["replay.shared.network_bundles"] = static_cast<double>(shared->network_bundles());
    r.metrics["replay.shared.network_bundles_split"] = static_cast<double>(shared->network_bundles_split());
    r.metrics["replay.shared.mirror_quotient_calls"] = static_cast<double>(shared->mirror_quotient_calls());
    r.metrics["replay.shared.mirror_quotient_expanded"] = static_cast<double>(shared->mirror_quotient_expanded());
    for (const auto& [why, count] : shared->mirror_quotient_fallbacks()) {
      std::string slug = why;
      std::replace(slug.begin(), slug.end(), ' ', '_');
      r.metrics["replay.shared.mirror_quotient_fallback." + slug] = static_cast<double>(count);
    }
  }
}

}  // namespace fabricsim::sim
