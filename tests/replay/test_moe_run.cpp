// MoE training steps replayed on the fabric (issue 21): the routing's skew shows up as slower expert-parallel
// all_to_allv (a hot destination rank) and longer expert compute; EP across servers costs more than inside.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "replay/run_scenario.hpp"
#include "replay_test_util.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {
const std::string kSweeps = std::string(FABRICSIM_SOURCE_DIR) + "/examples/sweeps/";

sim::RunResult run_small(const std::map<std::string, Json>& over, const std::string& comm = "engine",
                         bool sm_contention = true) {
  Json j = load_json_file(kSweeps + "moe_small.json");
  for (const auto& [k, v] : over) j["workload"]["params"][k] = v;
  if (!sm_contention) j["comm_sm_contention"] = false;
  Scenario s = scenario_from_json(j, kSweeps + "moe_small.json");
  return sim::run_scenario(s, {comm, {}, {}}).result;
}
double exposed(const sim::RunResult& r, const std::string& cat) {
  auto it = r.breakdown.exposed_comm_s.find(cat);
  return it == r.breakdown.exposed_comm_s.end() ? 0.0 : it->second;
}
}  // namespace

TEST_CASE("moe replay: a skewed router slows the EP all_to_allv and the expert compute") {
  for (const char* comm : {"engine", "analytic"}) {
    CAPTURE(comm);
    auto uni = run_small({{"expert_model_parallel_size", 16}, {"moe_load", "uniform"}}, comm);
    auto hot = run_small({{"expert_model_parallel_size", 16}, {"moe_load", "zipf"}, {"moe_load_skew", 1.0}}, comm);
    CHECK(exposed(uni, "ep") > 0);
    CHECK(exposed(hot, "ep") > 1.3 * exposed(uni, "ep"));
    CHECK(hot.breakdown.compute_s > 1.2 * uni.breakdown.compute_s);
    CHECK(hot.metrics.at("moe.imbalance_compute_s") > 0);
    CHECK(hot.iteration_s > uni.iteration_s);
  }
}

TEST_CASE("moe replay: EP inside one DGX (NVLink) is cheaper than EP over four (InfiniBand)") {
  auto ep8 = run_small({{"expert_model_parallel_size", 8}});
  auto ep32 = run_small({{"expert_model_parallel_size", 32}});
  CHECK(exposed(ep32, "ep") > 2.0 * exposed(ep8, "ep"));
  // The flex dispatcher (one copy per destination server under node-limited routing) moves fewer
  // scale-out bytes than the plain all-to-all.
  auto flex = run_small({{"expert_model_parallel_size", 32}, {"moe_token_dispatcher_type", "flex"},
                         {"moe_router_num_groups", 4}, {"moe_router_group_topk", 2}});
  CHECK(exposed(flex, "ep") < exposed(ep32, "ep"));
}

TEST_CASE("moe replay: overlap_moe_expert_parallel_comm hides part of the all-to-all behind the other micro-batch") {
  // PP 1: backward of micro-batch k interleaved with the forward of k + 1.
  auto off = run_small({{"expert_model_parallel_size", 16}});
  auto on = run_small({{"expert_model_parallel_size", 16}, {"overlap_moe_expert_parallel_comm", true}});
  CHECK(exposed(on, "ep") < 0.95 * exposed(off, "ep"));
  CHECK(on.iteration_s < off.iteration_s);
  // The same kernels, less the host waits before each forward dispatch, which the overlap's other micro-batch
  // covers (gpt_trace.cpp): `off` has 8 layers x (forward + full-recompute forward) x 2 micro-batches = 32
  // waits of 10.56 us on its compute stream. (Compute beside communication off: with it, the two schedules'
  // compute also differs by what runs beside which all-to-all.)
  auto off_k = run_small({{"expert_model_parallel_size", 16}}, "engine", false);
  auto on_k = run_small({{"expert_model_parallel_size", 16}, {"overlap_moe_expert_parallel_comm", true}}, "engine", false);
  CHECK(on_k.breakdown.compute_s == doctest::Approx(off_k.breakdown.compute_s - 32 * 10.56e-6));
  // PP 4: steady-state (forward, backward) pairs; the replay completes (no pipeline deadlock) and less of
  // the all-to-all is exposed (the coupled pair can grow the bubble: docs/workloads.md).
  auto off4 = run_small({{"pipeline_model_parallel_size", 4}});
  auto on4 = run_small({{"pipeline_model_parallel_size", 4}, {"overlap_moe_expert_parallel_comm", true}});
  CHECK(on4.iteration_s > 0);
  CHECK(exposed(on4, "ep") < exposed(off4, "ep"));
}

TEST_CASE("moe replay: DualPipe and A2A overlap with virtual pipeline stages run without pipeline deadlock") {
  // DualPipe on 4 and 8 stages (8 and 16 micro-batches: 2 x PP, the minimum): each rank runs two stages for
  // half the micro-batches, so the per-rank compute equals 1F1B's; the bidirectional schedule's smaller
  // bubble and overlapped pairs make the step shorter.
  for (int pp : {4, 8}) {
    CAPTURE(pp);
    const int gbs = 64;  // 32 GPUs: DP 8 (PP 4) -> 8 micro-batches, DP 4 (PP 8) -> 16
    const int ep = 32 / pp;  // EP within the stage's DP ranks
    auto f1b = run_small({{"pipeline_model_parallel_size", pp}, {"global_batch_size", gbs}, {"expert_model_parallel_size", ep}});
    auto dual = run_small({{"pipeline_model_parallel_size", pp}, {"global_batch_size", gbs}, {"expert_model_parallel_size", ep},
                           {"pipeline_parallel_schedule", "DualPipe"}});
    CHECK(dual.iteration_s > 0);
    CHECK(dual.breakdown.compute_s == doctest::Approx(f1b.breakdown.compute_s).epsilon(0.02));
    CHECK(dual.iteration_s < f1b.iteration_s);
  }
  auto vpp = run_small({{"pipeline_model_parallel_size", 2}, {"virtual_pipeline_model_parallel_size", 2},
                        {"overlap_moe_expert_parallel_comm", true}, {"recompute_granularity", "none"}});
  CHECK(vpp.iteration_s > 0);
  // As many micro-batches as stages (global batch 32 on DP 16 / DP 8): stage 0's warm-up covers every
  // micro-batch, so it runs no pair (Megatron's are_all_microbatches_in_warmup); pairing its last warm-up
  // forward with its first backward, as fabricsim did before, deadlocked the replay.
  for (int pp : {2, 4}) {
    CAPTURE(pp);
    auto eq = run_small({{"pipeline_model_parallel_size", pp}, {"virtual_pipeline_model_parallel_size", 2},
                         {"global_batch_size", 32}, {"overlap_moe_expert_parallel_comm", true}});
    CHECK(eq.iteration_s > 0);
  }
}

TEST_CASE("moe replay: split weight gradients (DualPipe zero bubble, Megatron delay_wgrad_compute) shorten the step") {
  // DualPipe on 4 stages, 8 micro-batches: the deferred weight gradients fill the warm-up and cool-down
  // waits; the same compute, a smaller bubble.
  auto zb = run_small({{"pipeline_model_parallel_size", 4}, {"global_batch_size", 64}, {"pipeline_parallel_schedule", "DualPipe"}});
  auto whole = run_small({{"pipeline_model_parallel_size", 4}, {"global_batch_size", 64}, {"pipeline_parallel_schedule", "DualPipe"},
                          {"dualpipe_zero_bubble", false}});
  CHECK(zb.breakdown.compute_s == doctest::Approx(whole.breakdown.compute_s).epsilon(1e-6));
  CHECK(zb.breakdown.bubble_s < whole.breakdown.bubble_s);
  CHECK(zb.iteration_s < whole.iteration_s);
  // A2A overlap at EP 16 (over two DGX): the experts' weight gradient runs while the combine is in flight.
  auto ovl = run_small({{"expert_model_parallel_size", 16}, {"overlap_moe_expert_parallel_comm", true}});
  auto delay = run_small({{"expert_model_parallel_size", 16}, {"overlap_moe_expert_parallel_comm", true},
                          {"delay_wgrad_compute", true}});
  // The same kernels (compute beside communication off: with it, what runs beside the combine differs).
  CHECK(run_small({{"expert_model_parallel_size", 16}, {"overlap_moe_expert_parallel_comm", true},
                   {"delay_wgrad_compute", true}}, "engine", false).breakdown.compute_s ==
        doctest::Approx(run_small({{"expert_model_parallel_size", 16}, {"overlap_moe_expert_parallel_comm", true}},
                                  "engine", false).breakdown.compute_s).epsilon(1e-6));
  CHECK(exposed(delay, "ep") < exposed(ovl, "ep"));
  CHECK(delay.iteration_s < ovl.iteration_s);
}

TEST_CASE("moe replay: where the all-to-all time goes, per link class (examples/sweeps/moe_ep_skew.json's columns)") {
  auto metric = [](const sim::RunResult& r, const std::string& k) {
    auto it = r.metrics.find(k);
    return it == r.metrics.end() ? -1.0 : it->second;
  };
  // EP 8 inside one DGX H100: every dispatch / combine byte is on NVLink, none leaves the server.
  auto ep8 = run_small({{"expert_model_parallel_size", 8}});
  CHECK(metric(ep8, "all_to_all.link_bytes.nvlink") > 0);
  CHECK(metric(ep8, "all_to_all.link_bytes.nic_leaf") == -1.0);
  // EP 32 over four: the NIC - leaf InfiniBand links carry the remote share (PXN: NVLink to the peer GPU on the
  // destination's rail, then PCIe to its NIC) and take most of the time.
  auto ep32 = run_small({{"expert_model_parallel_size", 32}});
  CHECK(metric(ep32, "all_to_all.link_bytes.nic_leaf") > 0);
  CHECK(metric(ep32, "all_to_all.link_time_s.nic_leaf") > metric(ep32, "all_to_all.link_time_s.nvlink"));
  CHECK(metric(ep32, "all_to_all.link_time_s.nic_leaf") > metric(ep32, "all_to_all.link_time_s.pcie"));
  // A skewed router makes a hot destination: its InfiniBand link is busy for longer.
  auto hot = run_small({{"expert_model_parallel_size", 32}, {"moe_load", "zipf"}, {"moe_load_skew", 1.5}});
  CHECK(metric(hot, "all_to_all.link_time_s.nic_leaf") > 2.0 * metric(ep32, "all_to_all.link_time_s.nic_leaf"));
  // The per-class time is each call's busiest link of the class at nominal bandwidth: at most the
  // dispatch / combine time the run exposes plus what compute hid, i.e. bounded by the step.
  CHECK(metric(ep32, "all_to_all.link_time_s.nic_leaf") < ep32.iteration_s);
  // The sweep asks for these columns; at EP 32 every one of them is filled.
  const Json sweep = load_json_file(kSweeps + "moe_ep_skew.json");
  int link_columns = 0;
  for (const auto& m : sweep.at("metrics")) {
    const std::string k = m.get<std::string>();
    if (k.rfind("all_to_all.link_", 0) != 0) continue;
    CAPTURE(k);
    CHECK(metric(ep32, k) > 0);
    ++link_columns;
  }
  CHECK(link_columns == 6);
}

TEST_CASE("moe replay: flow bundles on the shared network give the same step as the flows one by one") {
  // EP 16 over two DGX (x 2 stages) with the flex dispatcher and a Zipf router (unequal per-destination bytes), PP 2 so that
  // dispatch/combine overlap pipeline sends and each other on the NICs: every op ends where it does with
  // EngineCommOptions::shared_bundle_flows off (sim::NetworkOptions::bundle_flows, exact up to rounding).
  Json j = load_json_file(kSweeps + "moe_small.json");
  auto& p = j["workload"]["params"];
  p["expert_model_parallel_size"] = 16, p["moe_token_dispatcher_type"] = "flex", p["moe_load"] = "zipf";
  p["moe_load_skew"] = 1.2, p["pipeline_model_parallel_size"] = 2;
  Scenario s = scenario_from_json(j, kSweeps + "moe_small.json");
  sim::ScenarioRunOptions with, without;
  with.comm_model = without.comm_model = "shared";
  with.replay.record_ops = without.replay.record_ops = true;
  without.engine.shared_bundle_flows = false;
  const sim::RunResult a = sim::run_scenario(s, with).result, b = sim::run_scenario(s, without).result;
  CHECK(a.metrics.at("replay.shared.network_bundles") > 0);
  CHECK(b.metrics.at("replay.shared.network_bundles") == 0);
  MESSAGE("bundles ", a.metrics.at("replay.shared.network_bundles"), " split ",
          a.metrics.at("replay.shared.network_bundles_split"));
  CHECK(a.iteration_s == doctest::Approx(b.iteration_s).epsilon(1e-9));
  CHECK(replay_test::max_op_end_gap(a, b) < 1e-9);
}

TEST_CASE("moe replay: an MTP layer built as an MoE layer adds its all-to-alls to the step") {
  // examples/sweeps/moe_small.json: 8 MoE layers, full recompute (6 all-to-alls per layer and micro-batch); the MTP
  // depth adds 4 (forward and backward dispatch / combine): about 1/12 more exposed EP time.
  auto base = run_small({{"expert_model_parallel_size", 16}});
  auto mtp = run_small({{"expert_model_parallel_size", 16}, {"mtp_num_layers", 1}});
  CHECK(exposed(mtp, "ep") > 1.04 * exposed(base, "ep"));
  CHECK(mtp.breakdown.compute_s > base.breakdown.compute_s);
  CHECK(mtp.iteration_s > base.iteration_s);
}
