#include "replay/cluster_run.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <set>

#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "replay/comm_model.hpp"
#include "replay/engine_comm_model.hpp"
#include "replay/executor.hpp"
#include "replay/outputs_links.hpp"
#include "replay/placement_classes.hpp"
#include "replay/run_scenario.hpp"
#include "sim/base/error.hpp"
#include "topologies/io.hpp"
#include "workloads/cluster.hpp"

namespace fabricsim::sim {

namespace {

// Replays `jobs` merged into one trace: `shared` on one shared network (their flows contend), else with the
// idle-fabric engine tier (every distinct call priced alone, cached: the jobs do not contend).
RunResult replay_jobs(const std::vector<const workloads::PlacedJob*>& jobs, const topo::Topology& topo,
                      const models::Calibration& calib, const models::ComputeModel& cm, const ScenarioRunOptions& opt,
                      bool shared) {
  workloads::Trace trace = workloads::merge_jobs(jobs, static_cast<std::int32_t>(topo.gpus().size()));
  EngineCommOptions eo = opt.engine;
  eo.collect_link_stats = true;
  std::unique_ptr<EngineCommBase> model;
  SharedNetworkCommModel* net = nullptr;
  if (shared) {
    auto sh = std::make_unique<SharedNetworkCommModel>(topo, calib, eo);  // all jobs' flows on one network
    net = sh.get();
    model = std::move(sh);
  } else {
    model = std::make_unique<EngineCommModel>(topo, calib, eo);
  }
  std::vector<std::int32_t> simulated;
  for (const auto& rt : trace.ranks) simulated.push_back(rt.rank);
  std::int32_t world = 0;
  for (const auto* j : jobs) world += static_cast<std::int32_t>(j->world_size);
  model->set_symmetry(world, std::move(simulated));
  // The stand-in ranks' message copies (workloads/cluster.hpp), keyed by the simulated pair; jobs share no GPU.
  EngineCommBase::PairCopies copies;
  for (const auto* j : jobs) copies.insert(j->p2p_stand_ins.begin(), j->p2p_stand_ins.end());
  model->set_p2p_stand_ins(std::move(copies));
  ReplayOptions ro = opt.replay;
  ro.record_ops = true;  // per-job finish times come from the op records
  ro.max_op_records = std::numeric_limits<std::size_t>::max();
  RunResult r = replay(trace, topo, cm, *model, ro);
  model->finalize_link_stats();
  r.links = link_records(topo, model->link_dirs());
  add_engine_run_metrics(*model, net, r);
  return r;
}

// Payload bytes per link direction of one job's calls (its NCCL schedules with mirrors and stand-in copies,
// routed as the shared model routes them), from a replay with analytic times: nothing is simulated.
std::vector<double> job_link_bytes(const workloads::PlacedJob& j, const topo::Topology& topo,
                                   const models::Calibration& calib, const models::ComputeModel& cm,
                                   const ScenarioRunOptions& opt) {
  workloads::Trace trace = workloads::merge_jobs({&j}, static_cast<std::int32_t>(topo.gpus().size()));
  EngineCommOptions eo = opt.engine;
  eo.collect_link_stats = true;
  AnalyticLinksCommModel model(topo, calib, analytic_params(calib, topo), eo);
  std::vector<std::int32_t> simulated;
  for (const auto& rt : trace.ranks) simulated.push_back(rt.rank);
  model.set_symmetry(static_cast<std::int32_t>(j.world_size), std::move(simulated));
  model.set_p2p_stand_ins(j.p2p_stand_ins);
  ReplayOptions ro = opt.replay;
  ro.record_ops = false;
  replay(trace, topo, cm, model, ro);
  std::vector<double> out(model.link_dirs().size());
  for (std::size_t d = 0; d < out.size(); ++d) out[d] = model.link_dirs()[d].bytes;
  return out;
}

struct JobTimes {
  double finish_s = 0, compute_s = 0;
};

JobTimes job_times(const RunResult& r, const workloads::PlacedJob& j) {
  std::set<std::int32_t> ranks;
  for (const auto& rt : j.trace.ranks) ranks.insert(rt.rank);
  JobTimes out;
  double comp = 0;
  for (const auto& op : r.ops) {
    if (!ranks.count(op.rank)) continue;
    out.finish_s = std::max(out.finish_s, op.end_s);
    if (op.kind == "compute" && op.name != "start_offset") comp += op.end_s - op.start_s;
  }
  out.compute_s = ranks.empty() ? 0 : comp / static_cast<double>(ranks.size()) / j.iterations;
  return out;
}

double meta(const workloads::PlacedJob& j, const char* k) {
  auto it = j.metadata.find(k);
  return it == j.metadata.end() ? 0.0 : it->second;
}

}  // namespace

ScenarioRun run_cluster(const workloads::Scenario& s, const ScenarioRunOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  const std::string which = opt.comm_model.empty() ? s.comm_model : opt.comm_model;
  if (which == "analytic")
    throw InputError(s.file + ": /comm_model", "engine or shared for a cluster scenario (its jobs contend on one "
                                               "shared network; the analytic model has none)");
  // engine: the fast tier, every distinct call priced alone on an idle fabric, so the jobs do not contend.
  const bool shared = which != "engine";
  std::vector<std::string> notes;
  // The System every command builds (models/system.hpp: topology, one calibration policy), then the faults.
  const models::System sys = scenario_system(s);
  const topo::Topology topo = workloads::apply_topology_faults(sys.topology(), s.faults, notes);
  const models::Calibration& calib = sys.calibration();
  workloads::ClusterPlan plan = workloads::plan_cluster(s, topo, calib.named_factors());
  models::ComputeModel cm = workloads::scenario_compute_model(s, topo, calib.named_factors());
  // Groups of one kind not all alike over the fabric (placement classes): each job's calls priced over its
  // slowest class, as a single job's are (replay/placement_classes.hpp), each call alone on an idle fabric as
  // this run's comm model prices it (with the stand-in copies workloads/cluster.hpp gives the class groups).
  std::vector<std::map<std::string, PlacementClassChoice>> placement(plan.jobs.size());
  bool any_class = false;
  for (const auto& j : plan.jobs)
    for (const auto& c : j.trace.comms) any_class = any_class || c.name.find('@') != std::string::npos;
  if (any_class) {  // (no model to build where no job has placement classes)
    std::unique_ptr<EngineCommBase> pricer;
    if (shared) pricer = std::make_unique<SharedNetworkCommModel>(topo, calib, opt.engine);
    else pricer = std::make_unique<EngineCommModel>(topo, calib, opt.engine);
    for (std::size_t j = 0; j < plan.jobs.size(); ++j) {
      workloads::PlacedJob& pj = plan.jobs[j];
      placement[j] = price_slowest_placement_classes(pj.trace, topo, *pricer);
      for (auto& [cat, ch] : placement[j]) ch.own_s /= pj.iterations, ch.priced_s /= pj.iterations;  // per step
      std::vector<std::string> notes_j;
      std::map<std::string, double> unused;
      add_placement_class_results(placement[j], notes_j, unused, "job." + pj.name + ".");
      for (auto& n : notes_j) pj.notes.push_back("job " + pj.name + ": " + n);
    }
  }
  auto t1 = std::chrono::steady_clock::now();

  std::vector<const workloads::PlacedJob*> all;
  for (const auto& j : plan.jobs) all.push_back(&j);
  ScenarioRun out;
  for (const auto& j : plan.jobs) out.trace_ops += j.trace.num_ops();
  out.result = replay_jobs(all, topo, calib, cm, opt, shared);
  RunResult& r = out.result;

  const workloads::ClusterLayout L = workloads::cluster_layout(topo);
  std::vector<int> host_of_gpu(topo.gpus().size(), -1);
  for (std::size_t h = 0; h < L.host_gpus.size(); ++h)
    for (auto g : L.host_gpus[h]) host_of_gpu[g] = static_cast<int>(h);
  // Per link direction: bytes of each job's calls (payload of its schedules' routes, analytic replay).
  std::map<std::pair<std::uint32_t, int>, std::map<std::string, double>> by_dir;
  std::map<std::pair<std::uint32_t, int>, const LinkRecord*> rec_of;
  for (const auto& j : plan.jobs) {
    const std::vector<double> b = job_link_bytes(j, topo, calib, cm, opt);
    for (std::size_t d = 0; d < b.size(); ++d)
      if (b[d] > 0) by_dir[{static_cast<std::uint32_t>(d / 2), static_cast<int>(d % 2)}][j.name] += b[d];
  }
  // Jobs that have no link direction in common cannot meet on the network (and share no GPU): each job's
  // replay together is then exactly its replay alone, and the alone replays are skipped.
  // Under the engine tier no call sees another: each job's replay together is its replay alone too.
  bool meet = false;
  for (const auto& [key, jobs] : by_dir) meet = meet || jobs.size() >= 2;
  const bool replay_alone = shared && meet;
  std::vector<RunResult> alone;
  alone.reserve(plan.jobs.size());
  double total_gpus = 0, flops_rate = 0;
  for (const auto& j : plan.jobs) {
    // (One job, or jobs that cannot meet: the replay alone would be the replay together.)
    alone.push_back(replay_alone ? replay_jobs({&j}, topo, calib, cm, opt, true) : RunResult{});
    const RunResult& a = alone.back();
    for (const char* k : {"replay.restarts", "replay.shared.network_calls", "replay.shared.network_solves",
                          "replay.shared.network_solver_flow_visits"})
      if (auto it = a.metrics.find(k); it != a.metrics.end()) r.metrics["alone." + j.name + "." + (k + 7)] = it->second;
    JobResult jr;
    jr.name = j.name;
    jr.workload = j.workload;
    jr.placement = j.placement;
    jr.gpus = static_cast<int>(j.world_size);
    std::set<int> hosts, racks;
    for (auto g : j.gpus) {
      int h = host_of_gpu[g];
      hosts.insert(h);
      if (h >= 0) racks.insert(L.host_rack[h]);
    }
    jr.hosts = static_cast<int>(hosts.size());
    jr.racks = static_cast<int>(racks.size());
    jr.start_offset_s = j.start_offset_s;
    jr.iterations = j.iterations;
    const JobTimes together = job_times(r, j), solo = replay_alone ? job_times(a, j) : together;
    jr.iteration_s = (together.finish_s - j.start_offset_s) / j.iterations;
    jr.iteration_s_alone = (solo.finish_s - j.start_offset_s) / j.iterations;
    jr.slowdown = jr.iteration_s_alone > 0 ? jr.iteration_s / jr.iteration_s_alone : 1.0;
    jr.compute_s = together.compute_s;
    if (jr.iteration_s > 0) {
      jr.samples_per_s = meta(j, "samples_per_iteration") / jr.iteration_s;
      jr.tokens_per_s = meta(j, "tokens_per_iteration") / jr.iteration_s;
      const double f = meta(j, "model_flops_per_iteration");
      jr.tflops_per_gpu = f / static_cast<double>(j.world_size) / jr.iteration_s / 1e12;
      flops_rate += f / jr.iteration_s;
    }
    total_gpus += static_cast<double>(j.world_size);
    jr.notes = j.notes;
    r.jobs.push_back(std::move(jr));
  }
  r.metrics["cluster.alone_replays"] = replay_alone ? static_cast<double>(plan.jobs.size()) : 0.0;
  for (const auto& lr : r.links)
    for (int d = 0; d < 2; ++d) rec_of[{lr.link, d}] = &lr;
  const double span = r.iteration_s > 0 ? r.iteration_s : 1.0;
  for (const auto& [key, jobs] : by_dir) {
    if (jobs.size() < 2) continue;
    const auto& L0 = topo.link(key.first);
    SharedLinkRecord sl;
    sl.link = key.first;
    sl.dir = key.second;
    sl.from = topo.node(key.second ? L0.b : L0.a).id;
    sl.to = topo.node(key.second ? L0.a : L0.b).id;
    sl.kind = topo::to_string(L0.kind);
    auto it = rec_of.find(key);
    sl.tier = it != rec_of.end() ? it->second->tier : 0;
    sl.capacity_Bps = it != rec_of.end() ? it->second->capacity_Bps : L0.bandwidth_Bps;
    sl.bytes_by_job = jobs;
    for (const auto& [name, b] : jobs) sl.util_by_job[name] = b / (sl.capacity_Bps * span);
    if (it != rec_of.end()) sl.util_together = it->second->bytes[key.second] / (sl.capacity_Bps * span);
    r.shared_links.push_back(std::move(sl));
  }
  std::sort(r.shared_links.begin(), r.shared_links.end(), [](const SharedLinkRecord& a, const SharedLinkRecord& b) {
    if (a.util_together != b.util_together) return a.util_together > b.util_together;
    return std::tie(a.link, a.dir) < std::tie(b.link, b.dir);
  });
  r.metrics["cluster.shared_link_directions"] = static_cast<double>(r.shared_links.size());
  double groups = 0, pairs = 0;
  for (const auto& j : plan.jobs) groups += static_cast<double>(j.stand_in_groups), pairs += static_cast<double>(j.stand_in_pairs);
  r.metrics["cluster.stand_in_groups"] = groups;
  r.metrics["cluster.stand_in_message_pairs"] = pairs;
  if (r.shared_links.size() > 64) r.shared_links.resize(64);

  auto t2 = std::chrono::steady_clock::now();
  r.topology = s.topology;
  r.topology_params = topo.params();
  r.calibration = sys.calibration_label();
  std::string names;
  for (const auto& j : plan.jobs) names += (names.empty() ? "" : " + ") + j.name;
  r.workload = "cluster: " + names;
  r.workload_params.clear();
  r.gpus = static_cast<int>(total_gpus);
  r.samples_per_s = r.tokens_per_s = 0;
  for (const auto& jr : r.jobs) {
    r.samples_per_s += jr.samples_per_s;
    r.tokens_per_s += jr.tokens_per_s;
  }
  r.tflops_per_gpu = total_gpus > 0 ? flops_rate / total_gpus / 1e12 : 0;
  // The sums are known when every job states its part (the merged trace carries no samples of its own).
  r.samples_known = std::all_of(plan.jobs.begin(), plan.jobs.end(),
                                [](const workloads::PlacedJob& j) { return j.metadata.count("samples_per_iteration") > 0; });
  r.flops_known = flops_rate > 0;
  r.mfu = 0;
  for (const auto& jr : r.jobs) {
    r.metrics["job." + jr.name + ".iteration_s"] = jr.iteration_s;
    r.metrics["job." + jr.name + ".iteration_s_alone"] = jr.iteration_s_alone;
    r.metrics["job." + jr.name + ".slowdown"] = jr.slowdown;
  }
  for (std::size_t j = 0; j < plan.jobs.size(); ++j) {
    std::vector<std::string> unused;
    add_placement_class_results(placement[j], unused, r.metrics, "job." + plan.jobs[j].name + ".");
  }
  // The merged trace's notes are the jobs' generators' (repeated per job); keep them once each.
  std::vector<std::string> kept;
  std::set<std::string> seen;
  for (const auto& n : r.notes)
    if (seen.insert(n).second && n.rfind("tflops_per_gpu from", 0) != 0) kept.push_back(n);
  r.notes = std::move(kept);
  r.notes.insert(r.notes.begin(),
                 shared ? "cluster: " + std::to_string(plan.jobs.size()) + " jobs replayed together on one shared "
                          "network (comm model shared: every collective and message of every job on one flow-level "
                          "network, max-min fair where they share links), then each alone on the same GPUs and faults "
                          "for iteration_s_alone; the top-level step time is the makespan, throughput the jobs' sum"
                        : "cluster: " + std::to_string(plan.jobs.size()) + " jobs replayed with comm model engine (the "
                          "fast tier: every distinct collective and message, with its mirrors and stand-in copies, "
                          "priced alone on an idle fabric), so the jobs do not contend: iteration_s_alone = "
                          "iteration_s and slowdown 1 by construction (comm model shared measures the contention); "
                          "shared_links lists where their traffic would meet; the top-level step time is the "
                          "makespan, throughput the jobs' sum");
  if (shared && !meet && plan.jobs.size() > 1)
    r.notes.push_back("cluster: the jobs' NCCL schedules route over no link direction in common (and the jobs share "
                      "no GPU), so they cannot meet on the network: each job's step alone equals its step together "
                      "and the alone replays were not run");
  for (const auto& n : notes) r.notes.push_back(n);
  for (const auto& n : plan.notes) r.notes.push_back(n);
  for (const auto& jr : r.jobs)
    for (const auto& n : jr.notes) r.notes.push_back(n);
  if (!opt.replay.record_ops) r.ops.clear();
  out.generate_wall_s = std::chrono::duration<double>(t1 - t0).count();
  out.replay_wall_s = std::chrono::duration<double>(t2 - t1).count();
  r.wall_s = std::chrono::duration<double>(t2 - t0).count();
  return out;
}

}  // namespace fabricsim::sim
