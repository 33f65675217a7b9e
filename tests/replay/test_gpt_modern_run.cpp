// The modern GPT examples (examples/workloads) run end to end, and the overlaps change the replayed step
// the way the real system does.
#include <doctest/doctest.h>

#include <string>

#include "replay/outputs.hpp"
#include "replay/run_scenario.hpp"
#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {
const std::string kExamples = std::string(FABRICSIM_SOURCE_DIR) + "/examples/workloads/";

sim::RunResult run_file(const std::string& name, const std::string& comm = "engine") {
  Scenario s = load_scenario(kExamples + name);
  return sim::run_scenario(s, {comm, {}, {}}).result;
}

sim::RunResult run_json(const std::string& text, const std::string& comm = "analytic") {
  Scenario s = scenario_from_json(Json::parse(text), "sc.json");
  return sim::run_scenario(s, {comm, {}, {}}).result;
}

bool has_note(const sim::RunResult& r, const std::string& part) {
  for (const auto& n : r.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST_CASE("examples: Llama-3-70B FP8 on 64 H100 and Llama-3.1-405B on 256 GB200 NVL72 run") {
  for (const char* f : {"llama3-70b-fp8-64-h100.json", "llama3.1-405b-256-gb200.json"}) {
    CAPTURE(f);
    auto r = run_file(f);
    CHECK(r.iteration_s > 0);
    CHECK(r.tflops_per_gpu > 0);
    // Below the dense peak of the precision in use (MFU < 1).
    CHECK(r.tflops_per_gpu < r.metrics.at("peak_dense_flops_per_gpu") / 1e12);
    // MFU as the executor reports it: achieved model TFLOP/s over that peak.
    CHECK(r.mfu == doctest::Approx(r.tflops_per_gpu * 1e12 / r.metrics.at("peak_dense_flops_per_gpu")));
    CHECK(r.mfu > 0.05);
    CHECK(r.mfu < 1.0);
    const Json j = sim::result_json(r, 0);
    CHECK(j.at("mfu").get<double>() == r.mfu);
    CHECK(j.at("mfu_convention").get<std::string>().find("peak_dense_flops_per_gpu") != std::string::npos);
    CHECK(sim::summary_text(r, 0).find("MFU ") != std::string::npos);
    CHECK(r.metrics.at("memory_per_gpu_bytes.max") > 0);
    CHECK(has_note(r, "megatron-core convention"));
    CHECK(r.breakdown.bubble_s > 0);
  }
}

TEST_CASE("examples: a gb200-nvl72 rack prices the GB200 part by default, b200 on request") {
  // Llama-3.1-405B on 4 GB200 NVL72 racks, whose topology names no GPU. The default is the GB200 superchip's
  // GPU: NVIDIA GB200 NVL72 datasheet, FP16/BF16 360 PFLOP/s with sparsity per 72 GPUs -> 2.5 PFLOP/s dense, and
  // 13.4 TB HBM3e per 72 GPUs -> 186 GB (hardware_specs.json facts[42]: 72 GPUs, "about 13.4 TB"). gpu=b200 is
  // the HGX B200 part (2.25 PFLOP/s, 180 GB). Both take the b200 network calibration, chosen for gb200 by name
  // (models/calibration_presets.cpp), so the two runs differ in the GPU alone.
  Scenario s = load_scenario(kExamples + "llama3.1-405b-256-gb200.json");
  const auto r = sim::run_scenario(s, {"analytic", {}, {}}).result;
  CHECK(r.workload_params.at("gpu") == "gb200");
  CHECK(r.metrics.at("peak_dense_flops_per_gpu") == doctest::Approx(2500e12));
  CHECK(models::gpu_spec("gb200").hbm_capacity_bytes == doctest::Approx(186e9));
  CHECK(sim::summary_text(r, 0).find("of 173.23 GiB on gb200") != std::string::npos);  // 186e9 B
  CHECK(r.calibration.find("b200 (fitted, validate/calibrations/b200.json)") == 0);
  Scenario b = load_scenario(kExamples + "llama3.1-405b-256-gb200.json");
  b.topology_params["gpu"] = "b200";
  const auto rb = sim::run_scenario(b, {"analytic", {}, {}}).result;
  CHECK(rb.workload_params.at("gpu") == "b200");
  CHECK(rb.metrics.at("peak_dense_flops_per_gpu") == doctest::Approx(2250e12));
  CHECK(rb.calibration == r.calibration);
  // The same kernels at 10 % lower peaks: the B200 step is longer, by less than the peak ratio (communication
  // and the bubble's share do not scale with the clock).
  CHECK(rb.iteration_s > r.iteration_s);
  CHECK(rb.iteration_s < r.iteration_s * 2500.0 / 2250.0);
}

TEST_CASE("examples: Llama-3.1-405B NVFP4 with bf16 end layers on 256 GB300 NVL72 runs") {
  // Not validated: no FP4 kernel is measured (the FP4 GEMMs borrow the FP8 efficiency at the FP4 peak).
  const std::string file = "llama3.1-405b-nvfp4-256-gb300.json";
  Scenario s = load_scenario(kExamples + file);
  const auto r = sim::run_scenario(s, {"analytic", {}, {}}).result;
  CHECK(r.gpus == 256);
  CHECK(r.metrics.at("peak_dense_flops_per_gpu") == doctest::Approx(15000e12));
  CHECK(r.mfu > 0.05);
  CHECK(r.mfu < 1.0);
  CHECK(r.metrics.at("memory_per_gpu_bytes.max") < 288e9);
  CHECK(has_note(r, "FP4 throughput is not validated"));
  CHECK(has_note(r, "first_last_layers_bf16"));
  // Without the bf16 end layers: the first and the last stage each lose one bf16 layer, so the step is shorter
  // by about m = 64 micro-batches x one layer's bf16-vs-NVFP4 difference (forward + backward), at most by
  // (m + p - 1) of them (the 1F1B bubble scales with the slowest stage too).
  Scenario q = load_scenario(kExamples + file);
  q.workload.params["first_last_layers_bf16"] = "false";
  const auto rq = sim::run_scenario(q, {"analytic", {}, {}}).result;
  const double dt = r.iteration_s - rq.iteration_s;
  const double step_fp4 = rq.iteration_s;
  CHECK(dt > 0);
  CAPTURE(dt);
  CAPTURE(step_fp4);
  workloads::ParamMap p4 = q.workload.params;
  p4["gpu"] = "gb300";  // the gb300-nvl72 rack's GPU
  const workloads::GptConfig c4 = workloads::gpt_config_from_params(p4, "test");
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec(c4.gpu);
  const auto K4 = workloads::gpt_detail::gpt_step_kernels(c4, cm, "test");
  const auto Kb = workloads::gpt_detail::gpt_step_kernels(c4.bf16_layers_config(), cm, "test");
  auto layer_s = [](const workloads::gpt_detail::LayerCosts& L) {
    return L.fwd_attn.seconds + L.fwd_mlp.seconds + L.bwd_attn.seconds + L.bwd_mlp.seconds;
  };
  const double d_layer = layer_s(Kb.layer) - layer_s(K4.layer);
  CHECK(dt > 0.9 * 64.0 * d_layer);
  CHECK(dt < 1.1 * (64.0 + 7.0) * d_layer);
}

TEST_CASE("run notes: the per-kernel calibration note only when the workload prices kernels by shape") {
  const std::string kernel_note = "priced by the per-kernel calibration fitted on";
  // The SC'21 flagship (`fabricsim run` without arguments): unfused attention, every op priced by its class at
  // the roofline (megatron-sc21 efficiencies); no kernel is described by its shape.
  const auto flagship = sim::run_scenario(default_scenario(), {"analytic", {}, {}}).result;
  CHECK_FALSE(has_note(flagship, kernel_note));
  CHECK(has_note(flagship, "compute: roofline on"));
  CHECK(sim::summary_text(flagship, 0).find(kernel_note) == std::string::npos);
  // A modern GPT (fused attention, GEMM shapes): the note names the fit.
  const auto modern = run_file("llama3-70b-fp8-64-h100.json", "analytic");
  CHECK(has_note(modern, kernel_note + std::string(" h100")));
  CHECK(sim::summary_text(modern, 0).find(kernel_note) != std::string::npos);
}

TEST_CASE("examples: Llama-3.1-405B on 16,384 H100 (TP 8, PP 16, DP 128, seq 8192) runs") {
  // The engine comm model run is the bench (bench_workloads llama405b16k, docs/performance.md); here the
  // analytic model keeps the test fast.
  auto r = run_file("llama3.1-405b-16384-h100.json", "analytic");
  CHECK(r.gpus == 16384);
  CHECK(r.tokens_per_s == doctest::Approx(16777216.0 / r.iteration_s));
  CHECK(r.metrics.at("memory_per_gpu_bytes.max") < 80.0 * 1073741824.0);
  CHECK(r.metrics.at("micro_batches") == 16);
}

TEST_CASE("gpt replay: tp_comm_overlap hides TP communication, CP adds its K/V exchange") {
  const std::string base = R"({"topology":{"preset":"dgx-h100"},
      "workload":{"generator":"gpt","params":{"num_layers":4,"hidden_size":4096,"num_attention_heads":32,
      "num_query_groups":8,"ffn_hidden_size":14336,"swiglu":true,"seq_length":4096,"padded_vocab_size":32000,
      "micro_batch_size":1,"global_batch_size":4,"tensor_model_parallel_size":8,"pipeline_model_parallel_size":1,
      "sequence_parallel":true,"recompute_granularity":"none")";
  auto plain = run_json(base + "}}}");
  auto ovl = run_json(base + R"(,"tp_comm_overlap":true}}})");
  // Compute beside communication off: the userbuffers SM cost the generator prices alone. With it on, the NCCL
  // TP collectives of the plain run's backward (24 CTAs beside the dgrad / wgrad GEMMs) cost more compute
  // than userbuffers' 16 SMs.
  const std::string off = R"({"comm_sm_contention":false,)";
  auto plain_off = run_json(off + base.substr(1) + "}}}");
  auto ovl_off = run_json(off + base.substr(1) + R"(,"tp_comm_overlap":true}}})");
  CHECK(ovl_off.breakdown.compute_s > plain_off.breakdown.compute_s);  // the SM cost
  CHECK(plain.breakdown.compute_s > plain_off.breakdown.compute_s);
  REQUIRE(plain.breakdown.exposed_comm_s.count("tp"));
  const double tp_plain = plain.breakdown.exposed_comm_s.at("tp");
  const double tp_ovl = ovl.breakdown.exposed_comm_s.count("tp") ? ovl.breakdown.exposed_comm_s.at("tp") : 0.0;
  CHECK(tp_ovl < 0.5 * tp_plain);
  // Context parallelism 2 (TP 4): half the tokens per GPU, K/V exchanged over the CP group.
  const std::string cp = R"({"topology":{"preset":"dgx-h100"},
      "workload":{"generator":"gpt","params":{"num_layers":4,"hidden_size":4096,"num_attention_heads":32,
      "num_query_groups":8,"ffn_hidden_size":14336,"swiglu":true,"seq_length":16384,"padded_vocab_size":32000,
      "micro_batch_size":1,"global_batch_size":1,"tensor_model_parallel_size":4,"pipeline_model_parallel_size":1,
      "sequence_parallel":true,"recompute_granularity":"none","world_size":4)";
  auto c1 = run_json(cp + "}}}");
  auto c2 = run_json(cp + R"(,"context_parallel_size":2,"world_size":8,"cp_comm_type":"all_gather"}}})");
  CHECK(c2.breakdown.compute_s < 0.6 * c1.breakdown.compute_s);
  CHECK(c2.breakdown.exposed_comm_s.count("cp"));  // context-parallel exchanges have their own category
  CHECK_FALSE(c2.breakdown.exposed_comm_s.count("other"));
  CHECK_FALSE(c1.breakdown.exposed_comm_s.count("cp"));
}

namespace {
// The audit's Llama-3-8B on two DGX H100 (16 GPUs), sequence parallel, distributed optimizer, no recompute.
std::string llama8b_16(const std::string& extra) {
  return R"({"topology":{"preset":"superpod","params":{"nodes":2,"node":"dgx-h100"}},
      "workload":{"generator":"gpt","params":{"model":"llama3-8b","pipeline_model_parallel_size":1,
      "micro_batch_size":1,"sequence_parallel":true,"use_distributed_optimizer":true,
      "recompute_granularity":"none",)" + extra + "}}}";
}
}  // namespace

TEST_CASE("gpt replay: FP8 under sequence parallelism at TP 8 is faster than bf16") {
  // Transformer Engine casts the norm output / output gradient on the local sequence shard and all-gathers the
  // FP8 data; priced on the gathered tokens with bf16 all-gathers, FP8 was 2.5 % slower than bf16 here.
  const std::string tp8 = R"("tensor_model_parallel_size":8,"global_batch_size":16,"precision":)";
  auto bf = run_json(llama8b_16(tp8 + R"("bf16")"));
  auto f8 = run_json(llama8b_16(tp8 + R"("fp8")"));
  CHECK(f8.iteration_s < bf.iteration_s);
  CHECK(f8.breakdown.compute_s < bf.breakdown.compute_s);
  // Exposed TP communication shrinks with the FP8 all-gathers.
  REQUIRE(bf.breakdown.exposed_comm_s.count("tp"));
  REQUIRE(f8.breakdown.exposed_comm_s.count("tp"));
  CHECK(f8.breakdown.exposed_comm_s.at("tp") < bf.breakdown.exposed_comm_s.at("tp"));
}

TEST_CASE("gpt replay: tp_comm_overlap at TP 2 stretches only the GEMMs beside SM communication") {
  const std::string tp2 = R"("tensor_model_parallel_size":2,"global_batch_size":32)";
  auto plain = run_json(llama8b_16(tp2));
  auto ovl = run_json(llama8b_16(tp2 + R"(,"tp_comm_overlap":true)"));
  // The old price stretched every kernel of the blocks by 132/116 (compute +13.8 %, step +7.0 %).
  const double grown = ovl.breakdown.compute_s / plain.breakdown.compute_s - 1.0;
  CHECK(grown > 0.0);
  CHECK(grown < 0.5 * (132.0 / 116.0 - 1.0));
  CHECK(ovl.iteration_s < plain.iteration_s * 1.02);
}

TEST_CASE("gpt replay: torch FSDP2's copy-out and chunk-cat lengthen the step by about their time") {
  // Llama-3-8B on one DGX H100, torch FSDP 8. FSDP1's flat parameters (fsdp_flat_params) run the same
  // collectives without FSDP2's copies. The copy-outs and chunk-cats sit on the compute stream in series with
  // the layers, so the step grows by at least their summed time; the copy-ins run on their own stream and can
  // only delay the all-gathers behind them, so it grows by at most the sum of all three.
  auto scenario = [](bool flat) {
    return R"({"topology":{"preset":"superpod","params":{"nodes":1,"node":"dgx-h100"}},
      "workload":{"generator":"gpt","params":{"model":"llama3-8b","use_torch_fsdp2":true,"fsdp_flat_params":)" +
           std::string(flat ? "true" : "false") + R"(,"tensor_model_parallel_size":1,"pipeline_model_parallel_size":1,
      "global_batch_size":8,"micro_batch_size":1,"seq_length":4096,"recompute_granularity":"none","grad_reduce_in_fp32":true}}})";
  };
  const Scenario s = scenario_from_json(Json::parse(scenario(false)), "sc.json");
  const models::System sys = sim::scenario_system(s);
  const Trace tr = build_workload(s, sys.topology(), scenario_compute_model(s, sys.topology(), sys.calibration().named_factors()));
  double on_compute = 0, copy_in = 0;
  for (const auto& op : tr.ranks[0].ops) {
    const std::string& n = op.name;
    if (n.find(".copy_out") != std::string::npos || n.find(".chunk_cat") != std::string::npos) on_compute += op.duration_s;
    if (n.find(".copy_in") != std::string::npos) copy_in += op.duration_s;
  }
  REQUIRE(on_compute > 0);
  const double fsdp2 = run_json(scenario(false)).iteration_s, fsdp1 = run_json(scenario(true)).iteration_s;
  MESSAGE("FSDP2 " << fsdp2 * 1e3 << " ms, flat " << fsdp1 * 1e3 << " ms, copy-out + chunk-cat " << on_compute * 1e3
                   << " ms, copy-in " << copy_in * 1e3 << " ms");
  CHECK(fsdp2 - fsdp1 >= on_compute * (1 - 1e-9));
  CHECK(fsdp2 - fsdp1 <= on_compute + copy_in);
}

TEST_CASE("gpt replay: a standalone MTP stage shortens the step where it takes the MTP layer off the critical stage") {
  // 8 layers and one MTP layer on 4 stages of one DGX H100 (DP 2, 8 micro-batches). The loss stage holds no
  // decoder layer; its output layer is about 1.1 layers of FLOPs (32,000 x 2,048 logits), twice with the MTP
  // head. With the MTP layer there too (Megatron's default placement) it is the critical stage (~1 + 2.2 layers
  // against 3); moved to stage 2 (2 layers, Megatron's standalone MTP stage) no stage exceeds 3 layers.
  auto run = [](const std::string& layout) {
    return run_json(R"({"topology":{"preset":"dgx-h100"},
      "workload":{"generator":"gpt","params":{"num_layers":8,"hidden_size":2048,"num_attention_heads":16,
      "seq_length":2048,"padded_vocab_size":32000,"micro_batch_size":1,"global_batch_size":16,
      "tensor_model_parallel_size":1,"pipeline_model_parallel_size":4,"world_size":8,"gpu":"h100",
      "untie_embeddings_and_output_weights":true,"recompute_granularity":"none","mtp_num_layers":1,
      "pipeline_model_parallel_layout":")" + layout + R"("}}})");
  };
  const auto with_loss = run("Ettt|ttt|tt|mL"), standalone = run("Ettt|ttt|ttm|L");
  MESSAGE("MTP with the loss " << with_loss.iteration_s * 1e3 << " ms, standalone " << standalone.iteration_s * 1e3 << " ms");
  CHECK(standalone.iteration_s < with_loss.iteration_s);
  // The other way: stage 2 already holds 4 layers; the MTP layer on it makes it the critical stage. (With 3
  // layers there the two placements are within 1 %: 71.8 / 72.7 ms with every attention kernel carrying a fitted
  // 68-140 us fixed time, 70.7 / 70.3 ms with the attention priced per CTA; too close to say which is critical.)
  const auto with_loss3 = run("Et|ttt|tttt|mL"), standalone3 = run("Et|ttt|ttttm|L");
  MESSAGE("4-layer stage 2: MTP with the loss " << with_loss3.iteration_s * 1e3 << " ms, standalone "
                                                << standalone3.iteration_s * 1e3 << " ms");
  CHECK(standalone3.iteration_s > with_loss3.iteration_s);
}

TEST_CASE("gpt replay: pipeline_model_parallel_layout and microbatch_group_size_per_vp_stage run end to end") {
  // 8 layers on one DGX H100: PP 4, DP 2, 8 micro-batches; the list form of the layout comes as a JSON list.
  auto run = [](const std::string& extra) {
    return run_json(R"({"topology":{"preset":"dgx-h100"},
      "workload":{"generator":"gpt","params":{"num_layers":8,"hidden_size":2048,"num_attention_heads":16,
      "seq_length":2048,"padded_vocab_size":32000,"micro_batch_size":1,"global_batch_size":16,
      "tensor_model_parallel_size":1,"pipeline_model_parallel_size":4,"world_size":8,"gpu":"h100",
      "untie_embeddings_and_output_weights":true,"recompute_granularity":"none")" + extra + "}}}");
  };
  const auto even = run("");
  const auto same = run(R"(,"pipeline_model_parallel_layout":[["embedding","decoder","decoder"],["decoder","decoder"],
                           ["decoder","decoder"],["decoder","decoder","loss"]])");
  CHECK(same.iteration_s == even.iteration_s);
  // The even split's critical stage is the last: its output layer (32,000 x 2,048 logits, about 1.1 layers of
  // FLOPs) on top of 2 layers. One layer off each end stage (1, 3, 3, 1) balances it: a shorter step. A fourth
  // layer on stage 1 (1, 4, 2, 1) makes that stage the critical one: longer again.
  const auto uneven = run(R"(,"pipeline_model_parallel_layout":"Et|ttt|ttt|tL")");
  CHECK(uneven.iteration_s < even.iteration_s);
  const auto heavy1 = run(R"(,"pipeline_model_parallel_layout":"Et|tttt|tt|tL")");
  CHECK(heavy1.iteration_s > uneven.iteration_s);
  // Embedding-only and loss-only stages pass the activations on.
  const auto empty_ends = run(R"(,"pipeline_model_parallel_layout":"E|tttt|tttt|L")");
  CHECK(empty_ends.iteration_s > uneven.iteration_s);
  // Interleaved with an empty chunk, and the interleaved schedule with N = PP = 4 and N = 8 (m = 8: one group,
  // every stage warms up VP - 1 more chunk passes of 8 micro-batches).
  CHECK(run(R"(,"pipeline_model_parallel_layout":"Et|t|t|t|tt||tt|L","overlap_p2p_comm":true)").iteration_s > 0);
  const auto n4 = run(R"(,"virtual_pipeline_model_parallel_size":2)");
  const auto n8 = run(R"(,"virtual_pipeline_model_parallel_size":2,"microbatch_group_size_per_vp_stage":8)");
  CHECK(n4.iteration_s > 0);
  CHECK(n8.iteration_s > 0);
  CHECK(n8.iteration_s != n4.iteration_s);
}
