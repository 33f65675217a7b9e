// Placement of a job's ranks on NVLink domains (workloads/cluster.hpp segment(N), the single-job topology
// "placement": {"segment": N}) and the warning when a model-parallel group straddles domains.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "models/gpu.hpp"
#include "replay/engine_comm_model.hpp"
#include "replay/placement_classes.hpp"
#include "replay/run_scenario.hpp"
#include "sim/base/error.hpp"
#include "topologies/io.hpp"
#include "workloads/cluster.hpp"
#include "workloads/gpt.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {
// A small MoE (2 layers of qwen3-30b-a3b, PP 2, EP 64, flex) on 128 GPUs of two GB200 NVL72 racks (18 trays
// of 4). PP 2: the second stage's EP group (ranks 64-127) is simulated, the one that straddles when packed.
Json nvl72_moe() {
  return Json::parse(R"({
    "topology": {"preset": "superpod", "params": {"nodes": 2, "node": "gb200-nvl72"}},
    "workload": {"generator": "gpt", "params": {
      "model": "qwen3-30b-a3b", "num_layers": 2, "seq_length": 4096, "micro_batch_size": 1, "global_batch_size": 128,
      "world_size": 128, "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 2,
      "recompute_granularity": "full", "expert_model_parallel_size": 64, "moe_token_dispatcher_type": "flex",
      "moe_grouped_gemm": true, "moe_permute_fusion": true, "use_distributed_optimizer": true}},
    "comm_model": "engine"
  })");
}
bool has_note(const std::vector<std::string>& notes, const std::string& part) {
  return std::any_of(notes.begin(), notes.end(), [&](const std::string& n) { return n.find(part) != std::string::npos; });
}
}  // namespace

TEST_CASE("placement: segment(N) puts whole segments of N servers in one NVLink domain") {
  const Scenario s = scenario_from_json(nvl72_moe(), "t.json");
  const models::System sys = sim::scenario_system(s);
  const topo::Topology& t = sys.topology();
  REQUIRE(t.gpus().size() == 144);
  CHECK(segment_capacity(t, 16) == 128);  // 16 of each rack's 18 trays
  CHECK(segment_capacity(t, 18) == 144);
  CHECK(segment_capacity(t, 10) == 80);   // one segment of 10 per rack
  CHECK(segment_capacity(t, 19) == 0);
  CHECK(is_placement("segment(16)"));
  CHECK(!is_placement("segment(0)"));
  CHECK(!is_placement("segment(x)"));
  JobSpec j;
  j.placement = "segment(16)", j.placement_segment = 16;
  const auto placed = place_jobs(t, {j}, {128});
  REQUIRE(placed.size() == 1);
  REQUIRE(placed[0].size() == 128);
  CHECK(placed[0][63] == 63);
  CHECK(placed[0][64] == 72);  // the second segment starts on the second rack
  // The NVLink domains as the job's ranks meet them: runs of 64 ranks.
  CHECK(nvlink_run_length(t, placed[0]) == 64);
  std::vector<std::int32_t> packed(128);
  for (int r = 0; r < 128; ++r) packed[r] = r;
  CHECK(nvlink_run_length(t, packed) == 72);  // 72 then 56
  std::vector<std::int32_t> odd = {0, 1, 72, 2};  // back in rack 0 after rack 1
  CHECK(nvlink_run_length(t, odd) == 0);
}

TEST_CASE("placement: a straddling EP group warns once, naming the group, the domain and the option") {
  const GptConfig c = gpt_config_from_params(
      {{"model", "qwen3-30b-a3b"}, {"world_size", "256"}, {"tensor_model_parallel_size", "1"},
       {"pipeline_model_parallel_size", "1"}, {"expert_model_parallel_size", "64"}, {"gpus_per_host", "4"},
       {"gpus_per_nvlink_domain", "72"}, {"global_batch_size", "256"}, {"attention_backend", "flash"}},
      "t");
  const auto w = nvlink_straddle_warnings(c, 72);
  REQUIRE(w.size() == 1);
  CHECK(w[0].find("expert-parallel (EP x ETP) groups of 64 GPUs straddle NVLink domains of 72 GPUs") != std::string::npos);
  CHECK(w[0].find("64 GPUs per domain") != std::string::npos);
  CHECK(w[0].find("\"placement\": {\"segment\": 16}") != std::string::npos);
  CHECK(nvlink_straddle_warnings(c, 64).empty());   // aligned domains
  CHECK(nvlink_straddle_warnings(c, 8).empty());    // no placement keeps 64 in an 8-GPU domain: nothing to offer
}

TEST_CASE("placement: a single job with the topology's placement runs as a one-job cluster on its segments") {
  Json packed = nvl72_moe();
  const sim::RunResult a = sim::run_scenario(scenario_from_json(packed, "t.json"), {}).result;
  CHECK(has_note(a.notes, "warning: expert-parallel (EP x ETP) groups of 64 GPUs straddle NVLink domains of 72 GPUs"));
  Json seg = nvl72_moe();
  seg["topology"]["placement"] = Json::parse(R"({"segment": 16})");
  seg["workload"]["params"].erase("world_size");  // the GPUs segment(16) finds: 128
  const sim::RunResult b = sim::run_scenario(scenario_from_json(seg, "t.json"), {}).result;
  REQUIRE(b.jobs.size() == 1);
  CHECK(b.jobs[0].placement == "segment(16)");
  CHECK(b.jobs[0].gpus == 128);
  CHECK(!has_note(b.notes, "straddle"));
  // Each EP group on one rack: the step is shorter than packed (the second group's traffic leaves its rack
  // when packed), and no routing skew is reported for the uniform router.
  CHECK(b.iteration_s < a.iteration_s);
  CHECK(a.metrics.at("moe.imbalance_all_to_all_s") == 0.0);
  CHECK(b.metrics.at("moe.imbalance_all_to_all_s") == 0.0);
}

TEST_CASE("placement: bad placement objects are errors naming their JSON path") {
  auto fails = [](const char* placement, const std::string& expect) {
    Json j = nvl72_moe();
    j["topology"]["placement"] = Json::parse(placement);
    try {
      (void)scenario_from_json(j, "t.json");
      FAIL("accepted " << placement);
    } catch (const InputError& e) {
      CAPTURE(e.what());
      CHECK(std::string(e.what()).find(expect) != std::string::npos);
    }
  };
  fails(R"({"segment": 0})", "t.json: /topology/placement/segment");
  fails(R"({"segment": 16, "gpus_per_domain": 64})", "gpus_per_domain");
  fails(R"({})", "segment");
  Json cl = Json::parse(R"({"topology": {"preset": "dgx-h100", "placement": {"segment": 1}},
    "jobs": [{"name": "a", "placement": "packed", "workload": {"generator": "dataparallel", "params": {"world_size": 8}}}]})");
  CHECK_THROWS_WITH_AS((void)scenario_from_json(cl, "c.json"), doctest::Contains("c.json: /topology/placement"), InputError);
}

// PP 1: the simulated rank's EP group is ranks 0-63, all on rack 0; the other group, ranks 64-127, has 8 GPUs
// on rack 0 and 56 on rack 1, its all-to-all crossing InfiniBand. The step is as slow as that group's.
TEST_CASE("placement: with PP 1 the all-to-alls are priced over the straddling EP group, not rank 0's") {
  Json j = nvl72_moe();
  auto& p = j["workload"]["params"];
  p["pipeline_model_parallel_size"] = 1;
  p["moe_token_dispatcher_type"] = "alltoall";  // one all_to_allv per dispatch / combine, on the EP ranks only
  p["moe_router_force_load_balancing"] = true;  // every EP group's matrix is the uniform one
  const Scenario s = scenario_from_json(j, "t.json");
  const models::System sys = sim::scenario_system(s);
  const topo::Topology& t = sys.topology();
  const models::ComputeModel cm = scenario_compute_model(s, t, sys.calibration().named_factors());
  const Trace tr = build_workload(s, t, cm);
  REQUIRE(tr.ranks.size() == 1);
  // The generator writes the straddling group beside each EP communicator, as its one other placement class.
  auto index_of = [&](const std::string& name) {
    for (std::size_t k = 0; k < tr.comms.size(); ++k)
      if (tr.comms[k].name == name) return static_cast<std::int32_t>(k);
    return std::int32_t{-1};
  };
  const std::int32_t disp = index_of("ep.l0.dispatch"), cls = index_of("ep.l0.dispatch@64");
  REQUIRE(disp >= 0);
  REQUIRE(cls >= 0);
  CHECK(index_of("ep.l0.dispatch@72") < 0);
  const Communicator& own = tr.comms[static_cast<std::size_t>(disp)];
  CHECK(own.ranks.front() == 0);
  CHECK(tr.comms[static_cast<std::size_t>(cls)].ranks.front() == 64);
  CHECK(tr.comms[static_cast<std::size_t>(cls)].ranks.back() == 127);
  CHECK(sim::group_shape(t, tr.comms[static_cast<std::size_t>(cls)].ranks) ==
        "ranks 64-127: 64 GPUs, 2 NVLink domains (8 + 56), 16 servers");
  CHECK(sim::group_shape(t, own.ranks) == "ranks 0-63: 64 GPUs, 1 NVLink domain, 16 servers");
  // By hand: the simulated rank's all-to-alls priced alone over ranks 64-127 and over its own ranks 0-63.
  Communicator straddle = own;
  for (int k = 0; k < 64; ++k) straddle.ranks[static_cast<std::size_t>(k)] = 64 + k;
  sim::EngineCommModel priced(t, sys.calibration());
  double straddle_s = 0, inside_s = 0;
  for (const auto& op : tr.ranks[0].ops)
    if (op.kind == OpKind::Collective && op.coll == CollOp::AllToAllv) {
      REQUIRE(tr.comms[static_cast<std::size_t>(op.comm)].a2a_matrix == own.a2a_matrix);  // uniform on every layer
      straddle_s += priced.idle_collective(straddle, op.coll, op.bytes, op.algorithm).duration_s;
      inside_s += priced.idle_collective(own, op.coll, op.bytes, op.algorithm).duration_s;
    }
  CHECK(straddle_s > 1.5 * inside_s);  // InfiniBand between the racks for 8 of the 64 ranks
  const sim::RunResult r = sim::run_scenario(s, {}).result;
  // The replay's EP all-to-alls took the straddling group's time: the step holds at least that much.
  double ep_ops_s = 0;
  for (const auto& o : r.ops)
    if (o.category == "ep" && o.kind == "collective") ep_ops_s += o.end_s - o.start_s;
  CHECK(ep_ops_s == doctest::Approx(straddle_s).epsilon(1e-9));
  CHECK(r.iteration_s >= straddle_s);
  CHECK(r.metrics.at("placement.ep.classes") == 2.0);
  CHECK(r.metrics.at("placement.ep.priced_s") == doctest::Approx(straddle_s).epsilon(1e-9));
  CHECK(r.metrics.at("placement.ep.own_s") == doctest::Approx(inside_s).epsilon(1e-9));
  CHECK(has_note(r.notes, "slowest ranks 64-127: 64 GPUs, 2 NVLink domains (8 + 56), 16 servers"));
  // Placed 64 GPUs per rack, both groups have rank 0's shape: nothing to reprice, and the step is shorter.
  Json seg = j;
  seg["topology"]["placement"] = Json::parse(R"({"segment": 16})");
  seg["workload"]["params"].erase("world_size");
  const sim::RunResult b = sim::run_scenario(scenario_from_json(seg, "t.json"), {}).result;
  CHECK(!has_note(b.notes, "placement: "));
  CHECK(b.iteration_s < r.iteration_s);
}

// Groups all alike (TP 4 inside 4-GPU trays; EP 8 inside a rack, ranks 64-71 and 72-79 on either side of the
// rack boundary): no class communicators. EP 16 on the same 144 GPUs: the group 64-79 straddles the racks.
TEST_CASE("placement: groups of one shape add no placement-class communicators") {
  auto trace = [](const char* ep) {
    const GptConfig c = gpt_config_from_params(
        {{"model", "qwen3-30b-a3b"}, {"world_size", "144"}, {"tensor_model_parallel_size", "4"},
         {"pipeline_model_parallel_size", "1"}, {"expert_model_parallel_size", ep}, {"expert_tensor_parallel_size", "1"},
         {"moe_token_dispatcher_type", "alltoall"}, {"sequence_parallel", "true"}, {"gpus_per_host", "4"}, {"gpus_per_nvlink_domain", "72"},
         {"global_batch_size", "36"}, {"num_layers", "2"}, {"attention_backend", "flash"}},
        "t");
    models::ComputeModel cm;
    cm.gpu = models::gpu_spec(c.gpu);
    return generate_gpt(c, cm, "t");
  };
  for (const auto& cc : trace("8").comms) {
    CAPTURE(cc.name);
    CHECK(cc.name.find('@') == std::string::npos);
  }
  std::vector<std::string> classes;
  for (const auto& cc : trace("16").comms)
    if (cc.name.find('@') != std::string::npos) {
      classes.push_back(cc.name);
      CAPTURE(cc.name);
      if (cc.name.rfind("ep.", 0) == 0) {
        CHECK(cc.category == "ep");
        CHECK(cc.ranks.front() == 64);
        CHECK(cc.ranks.back() == 79);
      } else {
        // The expert data-parallel groups j, j + 16, ..., j + 128: 5 + 4 ranks over the two racks for j < 8,
        // 4 + 5 for j >= 8 (the first class other than the simulated rank's: j = 8).
        CHECK(cc.category == "dp");
        REQUIRE(cc.ranks.size() == 9);
        for (std::size_t k = 0; k < 9; ++k) CHECK(cc.ranks[k] == 8 + 16 * static_cast<std::int32_t>(k));
      }
    }
  CHECK(classes == std::vector<std::string>{"ep.l0.dispatch@64", "ep.l0.combine@64", "ep.l1.dispatch@64",
                                            "ep.l1.combine@64", "edp.stage0@8"});
}

// The same straddling PP 1 job as a cluster scenario (one job on GPUs 0-127 listed explicitly): the cluster
// path runs the placement-class pass too. Without stand-in traffic a class group is priced exactly as in the
// single-job run (the group alone with its mirrors), so the two runs price the same EP time.
TEST_CASE("placement: a cluster job's calls are priced over its slowest placement class") {
  Json single = nvl72_moe();
  auto& p = single["workload"]["params"];
  p["pipeline_model_parallel_size"] = 1;
  p["moe_token_dispatcher_type"] = "alltoall";
  p["moe_router_force_load_balancing"] = true;
  const sim::RunResult one = sim::run_scenario(scenario_from_json(single, "t.json"), {}).result;
  Json cl = Json::parse(R"({"topology": {"preset": "superpod", "params": {"nodes": 2, "node": "gb200-nvl72"}},
                            "comm_model": "engine", "stand_in_traffic": false})");
  Json job = Json::object();
  job["name"] = "a";
  job["workload"] = single["workload"];
  Json gpus = Json::array();
  for (int g = 0; g < 128; ++g) gpus.push_back(g);
  job["gpus"] = gpus;
  cl["jobs"] = Json::array();
  cl["jobs"].push_back(job);
  const sim::RunResult r = sim::run_scenario(scenario_from_json(cl, "t.json"), {}).result;
  REQUIRE(r.jobs.size() == 1);
  CHECK(has_note(r.notes, "job a: placement: the ep groups of a pipeline stage take up to 2 shapes"));
  CHECK(has_note(r.notes, "slowest ranks 64-127: 64 GPUs, 2 NVLink domains (8 + 56), 16 servers"));
  CHECK(has_note(r.notes, "(metrics job.a.placement.ep.*)"));
  CHECK(r.metrics.at("job.a.placement.ep.classes") == 2.0);
  CHECK(r.metrics.at("job.a.placement.ep.priced_s") == doctest::Approx(one.metrics.at("placement.ep.priced_s")).epsilon(1e-9));
  CHECK(r.metrics.at("job.a.placement.ep.own_s") == doctest::Approx(one.metrics.at("placement.ep.own_s")).epsilon(1e-9));
  CHECK(r.metrics.at("job.a.placement.ep.priced_s") > 1.5 * r.metrics.at("job.a.placement.ep.own_s"));
  double ep_ops_s = 0;
  for (const auto& o : r.ops)
    if (o.category == "ep" && o.kind == "collective") ep_ops_s += o.end_s - o.start_s;
  CHECK(ep_ops_s == doctest::Approx(r.metrics.at("job.a.placement.ep.priced_s")).epsilon(1e-9));
  CHECK(r.jobs[0].iteration_s >= r.metrics.at("job.a.placement.ep.priced_s"));

  // With stand-in traffic (the default) the own group runs with its stand-in copy (ranks 64-127) and the class
  // group with the own group's ranks as its stand-in copy: both prices cover the same two groups.
  cl.erase("stand_in_traffic");
  const Scenario s = scenario_from_json(cl, "t.json");
  const models::System sys = sim::scenario_system(s);
  const ClusterPlan plan = plan_cluster(s, sys.topology(), sys.calibration().named_factors());
  REQUIRE(plan.jobs.size() == 1);
  const Communicator *own = nullptr, *cls = nullptr;
  for (const auto& c : plan.jobs[0].trace.comms) {
    if (c.name == "a/ep.l0.dispatch") own = &c;
    if (c.name == "a/ep.l0.dispatch@64") cls = &c;
  }
  REQUIRE(own);
  REQUIRE(cls);
  std::vector<std::int32_t> lo(64), hi(64);
  for (int k = 0; k < 64; ++k) lo[static_cast<std::size_t>(k)] = k, hi[static_cast<std::size_t>(k)] = 64 + k;
  CHECK(own->stand_ins == std::vector<std::vector<std::int32_t>>{hi});
  CHECK(cls->stand_ins == std::vector<std::vector<std::int32_t>>{lo});
  const sim::RunResult rs = sim::run_scenario(s, {}).result;
  CHECK(rs.metrics.at("job.a.placement.ep.classes") == 2.0);
  CHECK(rs.metrics.at("job.a.placement.ep.priced_s") >= rs.metrics.at("job.a.placement.ep.own_s"));
}

// link_bytes.cluster_estimate: a placement class's calls stand for the simulated rank's own group, so they are
// scaled by that group's copies in the cluster (world / simulated ranks x 1 simulated member / ranks priced),
// not counted once.
TEST_CASE("placement: a moved call counts its group's copies in the cluster estimate") {
  const topo::Topology t = topo::build_preset("superpod", {{"nodes", "2"}, {"node", "gb200-nvl72"}});
  const models::Calibration calib = models::default_calibration();
  sim::EngineCommOptions eo;
  eo.collect_link_stats = true;
  Communicator own, straddle;
  own.name = "ep", straddle.name = "ep@64";
  own.category = straddle.category = "ep";
  for (int k = 0; k < 64; ++k) own.ranks.push_back(k), straddle.ranks.push_back(64 + k);
  for (const Communicator* c : {&own, &straddle}) {
    sim::EngineCommModel m(t, calib, eo);
    m.set_symmetry(128, {0});  // rank 0 simulated: two groups of 64 in the world
    m.collective(*c, CollOp::AllToAll, 64.0 * (1 << 20), "");
    const auto tiers = m.link_totals_by_tier();
    REQUIRE(!tiers.priced.empty());
    for (const auto& [tier, b] : tiers.priced) {
      CAPTURE(c->name);
      CAPTURE(tier);
      CHECK(tiers.cluster.at(tier) == doctest::Approx(2 * b).epsilon(1e-12));
    }
  }
}

// The other group kinds on 144 GPUs of two GB200 NVL72 racks (ranks 0-71 and 72-143, trays of 4). Their
// groups of a stage are shifts of the simulated rank's by a tensor (or expert-tensor, or position) index, so
// they take one shape where the domains and servers hold whole groups of the kind they shift by (TP 4 and
// EP 8 above: no class); here they do not.
TEST_CASE("placement: data-parallel, HSDP replica, hierarchical CP and ETP groups get placement classes where they differ") {
  auto classes = [](std::map<std::string, std::string> over, const char* world = "144") {
    std::map<std::string, std::string> p = {
        {"model", "llama3-8b"}, {"world_size", world}, {"tensor_model_parallel_size", "1"},
        {"pipeline_model_parallel_size", "1"}, {"gpus_per_host", "4"}, {"gpus_per_nvlink_domain", "72"},
        {"seq_length", "8192"}, {"micro_batch_size", "1"}, {"num_layers", "2"}, {"attention_backend", "flash"}};
    for (auto& [k, v] : over) p[k] = v;
    if (!p.count("global_batch_size")) p["global_batch_size"] = world;
    models::ComputeModel cm;
    const GptConfig c = gpt_config_from_params(ParamMap(p), "t");
    cm.gpu = models::gpu_spec(c.gpu);
    std::map<std::string, std::vector<std::int32_t>> out;
    for (const auto& cc : generate_gpt(c, cm, "t").comms)
      if (cc.name.find('@') != std::string::npos) out[cc.name] = cc.ranks;
    return out;
  };
  auto stride = [](std::int32_t first, std::int32_t step, int n) {
    std::vector<std::int32_t> v;
    for (int k = 0; k < n; ++k) v.push_back(first + step * k);
    return v;
  };
  // TP 16: the tensor group 64-79 straddles the racks, and so do the data-parallel groups i, i + 16, ...:
  // 5 + 4 ranks for i < 8, 4 + 5 for i >= 8.
  {
    const auto c = classes({{"tensor_model_parallel_size", "16"}, {"global_batch_size", "9"}});
    CHECK(c.count("tp.stage0@64"));
    REQUIRE(c.count("dp.stage0@8"));
    CHECK(c.at("dp.stage0@8") == stride(8, 16, 9));
  }
  // HSDP, 3 replicas of 48 ranks: the shard 48-95 straddles (24 + 24); replica groups m, 48 + m, 96 + m lie
  // on racks (0, 0, 1) for m < 24 and (0, 1, 1) from m = 24.
  {
    const auto c = classes({{"use_distributed_optimizer", "true"}, {"num_distributed_optimizer_instances", "3"}});
    REQUIRE(c.count("dp.stage0@48"));
    CHECK(c.at("dp.stage0@48") == stride(48, 1, 48));
    CHECK(!c.count("dp.stage0@96"));  // 96-143: inside rack 1, the first shard's shape
    REQUIRE(c.count("dp.replica.stage0@24"));
    CHECK(c.at("dp.replica.stage0@24") == stride(24, 48, 3));
    CHECK(c.size() == 2);
  }
  // Hierarchical CP 16 = 2 x 8: the CP group 64-79 straddles, its level-1 groups 64, 66, ..., 78 (4 + 4) too;
  // the level-0 pairs never do (72 is even, trays of 4).
  {
    const auto c = classes({{"context_parallel_size", "16"}, {"cp_comm_type", "a2a+p2p"},
                            {"hierarchical_context_parallel_sizes", "2 8"}, {"global_batch_size", "9"}});
    CHECK(c.count("cp.stage0@64"));
    REQUIRE(c.count("cp.p2p.stage0@64"));
    CHECK(c.at("cp.p2p.stage0@64") == stride(64, 2, 8));
    for (const auto& [name, ranks] : c) CHECK(name.rfind("cp.a2a.", 0) != 0);
  }
  // ETP 16 x EP 4 on 128 GPUs: the expert tensor group 64-79 straddles.
  {
    const auto c = classes({{"model", "qwen3-30b-a3b"}, {"expert_model_parallel_size", "4"},
                            {"expert_tensor_parallel_size", "16"}, {"moe_token_dispatcher_type", "alltoall"}},
                           "128");
    REQUIRE(c.count("etp.stage0@64"));
    CHECK(c.at("etp.stage0@64") == stride(64, 1, 16));
  }
}
