// The schedule layer of the gpt generator (workloads/gpt_schedule.cpp): DualPipe (DeepSeek-V3 arXiv:2412.19437
// Sec. 3.2.1, step order of github:deepseek-ai/DualPipe dualpipe/dualpipe.py) and the interleaved schedule's
// extra warm-up forward under overlap_moe_expert_parallel_comm (Megatron-Core get_pp_rank_microbatches).
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <set>
#include <string>

#include "models/compute.hpp"
#include "models/compute_calibration.hpp"
#include "models/gpu.hpp"
#include "workloads/gpt.hpp"
#include "workloads/params.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;
using workloads_test::compute_s;
using workloads_test::gen;

namespace {

// A small dense decoder on 16 H100s: 8 layers, PP 4, DP 4, 8 micro-batches (2 x PP, DualPipe's minimum).
ParamMap small_dense(ParamMap over = {}) {
  ParamMap p = {{"num_layers", "8"},          {"hidden_size", "1024"},        {"num_attention_heads", "16"},
                {"seq_length", "2048"},       {"padded_vocab_size", "32000"}, {"micro_batch_size", "1"},
                {"global_batch_size", "32"},  {"tensor_model_parallel_size", "1"},
                {"pipeline_model_parallel_size", "4"}, {"world_size", "16"}, {"gpu", "h100"},
                {"untie_embeddings_and_output_weights", "true"}, {"recompute_granularity", "none"}};
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}

bool has_op(const RankTrace& r, const std::string& part) {
  for (const auto& op : r.ops)
    if (op.name.find(part) != std::string::npos) return true;
  return false;
}
int count_ops(const RankTrace& r, const std::string& part) {
  int n = 0;
  for (const auto& op : r.ops) n += op.name.find(part) != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("gpt pipeline_parallel_schedule: DualPipe's preconditions are checked with the configuration") {
  auto err = [](ParamMap over) { return error_of([&] { gpt_config_from_params(small_dense(over), "--param"); }); };
  CHECK(err({{"pipeline_parallel_schedule", "DualPipeV"}}).find("expected one of 1F1B, Interleaved1F1B, DualPipe") !=
        std::string::npos);
  CHECK(err({{"pipeline_parallel_schedule", "DualPipe"}, {"pipeline_model_parallel_size", "1"}})
            .find("even pipeline_model_parallel_size") != std::string::npos);
  // 16 micro-batches of 8 GPUs... 4 stages x 4 DP: 16 / 4 = 4 micro-batches < 2 x 4.
  CHECK(err({{"pipeline_parallel_schedule", "DualPipe"}, {"global_batch_size", "16"}}).find("at least 2 x") !=
        std::string::npos);
  CHECK(err({{"pipeline_parallel_schedule", "DualPipe"}, {"virtual_pipeline_model_parallel_size", "2"}})
            .find("no virtual pipeline") != std::string::npos);
  CHECK(err({{"pipeline_parallel_schedule", "Interleaved1F1B"}}).find("virtual_pipeline_model_parallel_size > 1") !=
        std::string::npos);
  CHECK(err({{"pipeline_parallel_schedule", "1F1B"}}).empty());
}

TEST_CASE("gpt DualPipe: each rank runs stage st and stage p-1-st, overlapped pairs as in dualpipe.py") {
  const Trace t = gen(small_dense({{"pipeline_parallel_schedule", "DualPipe"}}));
  REQUIRE(t.ranks.size() == 4);
  for (std::int64_t st = 0; st < 4; ++st) {
    CAPTURE(st);
    const RankTrace& r = t.ranks[st];
    // 8 layers over 4 stages: stage s holds layers 2s, 2s+1.
    std::set<std::int64_t> layers;
    for (std::int64_t gl = 0; gl < 8; ++gl)
      if (has_op(r, ".l" + std::to_string(gl) + ".fwd.attn")) layers.insert(gl);
    CHECK(layers == std::set<std::int64_t>{2 * st, 2 * st + 1, 2 * (3 - st), 2 * (3 - st) + 1});
    // Both end ranks start one direction (embedding) and end the other (loss); the middle ones neither.
    CHECK(has_op(r, ".embed.fwd") == (st == 0 || st == 3));
    CHECK(has_op(r, ".logits.fwd") == (st == 0 || st == 3));
    // Every micro-batch passes every rank once per direction it belongs to: 4 forwards per chunk, 8 in all.
    CHECK(count_ops(r, ".l" + std::to_string(2 * st) + ".fwd.attn") == 4);
    CHECK(count_ops(r, ".l" + std::to_string(2 * (3 - st)) + ".fwd.attn") == 4);
    // Overlapped forward/backward pairs, from dualpipe.py's step counts with 4 ranks and 8 micro-batches
    // (half_num_chunks 4): end ranks (half_rank 0) step 4 runs 1 x 2 pairs and step 5 1 pair = 3; middle
    // ranks (half_rank 1) step 4 runs 2 x 2 pairs less the first, not overlapped on middle ranks = 3.
    CHECK(count_ops(r, ".a2a_overlap.join") == 3);
  }
  // The reverse direction's pipeline messages have their own streams.
  bool rev = false;
  for (const auto& s : t.ranks[1].streams) rev = rev || s == "pp.recv.fwd.rev";
  CHECK(rev);
}

TEST_CASE("gpt DualPipe: two copies of the parameters and PP + 1 micro-batches of activations per rank") {
  GptConfig one = gpt_config_from_params(small_dense(), "--param");
  GptConfig dual = gpt_config_from_params(small_dense({{"pipeline_parallel_schedule", "DualPipe"}}), "--param");
  for (std::int64_t st = 0; st < 4; ++st) {
    CAPTURE(st);
    // Rank st holds stage st and stage 3 - st: their weights add up (no distributed optimizer: 2 bytes each).
    const double w = gpt_memory_of_stage(one, st).weights_bytes + gpt_memory_of_stage(one, 3 - st).weights_bytes;
    CHECK(gpt_memory_of_stage(dual, st).weights_bytes == doctest::Approx(w));
  }
  // Activations: a middle rank (no loss buffers) holds p + 1 = 5 micro-batches of a 2-layer chunk where 1F1B's
  // stage 1 holds p - 1 = 3.
  CHECK(gpt_memory_of_stage(dual, 1).activations_bytes ==
        doctest::Approx(gpt_memory_of_stage(one, 1).activations_bytes * 5.0 / 3.0));
}

TEST_CASE("gpu preset h100-96gb: torchtitan's 96 GB H100s, the H100's compute and kernel calibration") {
  const auto& g = models::gpu_spec("h100-96gb");
  CHECK(g.hbm_capacity_bytes == doctest::Approx(96.0 * 1024 * 1024 * 1024));
  CHECK(g.peak_bf16_flops == models::gpu_spec("h100").peak_bf16_flops);
  // HBM2e at 2.4 TB/s, as torchtitan's benchmark files state for these parts (the SXM5's HBM3: 3.35 TB/s).
  CHECK(g.hbm_bandwidth_Bps == doctest::Approx(2.4e12));
  CHECK(models::gpu_spec("h100").hbm_bandwidth_Bps == doctest::Approx(3.35e12));
  CHECK(&models::default_compute_calibration("h100-96gb") == &models::default_compute_calibration("h100"));
  // A100s have no shipped kernel fit: unchanged (the H200 fit), not an "a100" prefix match.
  CHECK(&models::default_compute_calibration("a100-80gb") == &models::default_compute_calibration("h200"));
  // Llama 3.1 8B, FSDP 8 on 8 GPUs, sequence 32768, float8, full AC (torchtitan Table 2, published 83.9 GiB,
  // 84.2 GiB here): more than the 80 GB part, less than the 96 GB one.
  ParamMap p = {{"model", "llama3-8b"}, {"world_size", "8"}, {"tensor_model_parallel_size", "1"},
                {"pipeline_model_parallel_size", "1"}, {"use_torch_fsdp2", "true"}, {"micro_batch_size", "1"},
                {"global_batch_size", "8"}, {"seq_length", "32768"}, {"grad_reduce_in_fp32", "true"},
                {"attention_backend", "flash"}, {"precision", "fp8"}, {"fp8_recipe", "tensorwise"},
                {"recompute_granularity", "full"}, {"gpu", "h100-96gb"}};
  const double need = gpt_memory_per_gpu(gpt_config_from_params(p, "--param")).total_bytes();
  CHECK(need > models::gpu_spec("h100").hbm_capacity_bytes);
  CHECK(need < g.hbm_capacity_bytes);
}

TEST_CASE("gpt DualPipe zero bubble: input-only backwards and FIFO weight steps where dualpipe.py puts them") {
  const Trace on = gen(small_dense({{"pipeline_parallel_schedule", "DualPipe"}}));
  const Trace off = gen(small_dense({{"pipeline_parallel_schedule", "DualPipe"}, {"dualpipe_zero_bubble", "false"}}));
  auto index_of = [](const RankTrace& r, const std::string& name) {
    for (std::size_t i = 0; i < r.ops.size(); ++i)
      if (r.ops[i].name == name) return static_cast<long>(i);
    return -1L;
  };
  // Rank 0 (half_rank 0 of 4 ranks, 8 micro-batches, 4 per direction): step 3 runs B1 split, W, F1 once;
  // step 6 runs B1 whole then B0 split; step 7 runs W, B0 split; step 8 one W. The queue pops in FIFO order:
  // the step-3 backward (direction 1's first: micro-batch 4, chunk 1 = stage 3, layers 7, 6), the step-6 B0
  // (direction 0's third backward: micro-batch 2, chunk 0 = stage 0, layers 1, 0), the step-7 B0 (micro-batch 3).
  std::vector<std::string> w0;
  for (const auto& op : on.ranks[0].ops)
    if (op.name.size() > 6 && op.name.substr(op.name.size() - 6) == ".wgrad") w0.push_back(op.name);
  CHECK(w0 == std::vector<std::string>{"mb4.c1.l7.wgrad", "mb4.c1.l6.wgrad", "mb2.c0.l1.wgrad", "mb2.c0.l0.wgrad",
                                       "mb3.c0.l1.wgrad", "mb3.c0.l0.wgrad"});
  // Step 3's W runs after its backward has sent the input gradient upstream and before the next forward.
  const RankTrace& r0 = on.ranks[0];
  CHECK(index_of(r0, "mb4.c1.send.bwd") >= 0);
  CHECK(index_of(r0, "mb4.c1.l6.wgrad") > index_of(r0, "mb4.c1.send.bwd"));
  CHECK(index_of(r0, "mb4.c1.l6.wgrad") < index_of(r0, "mb5.c1.l6.fwd.attn"));
  // Rank 1 (half_rank 1): no step 3 / 7; step 6's second iteration splits both backwards; step 8 runs 2 W.
  CHECK(count_ops(on.ranks[1], ".wgrad") == 4);
  // Splitting moves work, it does not add any: a split layer's input-gradient ops plus its W op take what the
  // whole backward took (each op rounded to the nanosecond), and each rank computes as long as without zb.
  auto dur = [&](const Trace& t, const std::string& name) {
    const long i = index_of(t.ranks[0], name);
    REQUIRE(i >= 0);
    return t.ranks[0].ops[static_cast<std::size_t>(i)].duration_s;
  };
  const double whole = dur(off, "mb4.c1.l7.bwd.mlp") + dur(off, "mb4.c1.l7.bwd.attn");
  const double split = dur(on, "mb4.c1.l7.bwd.mlp") + dur(on, "mb4.c1.l7.bwd.attn") + dur(on, "mb4.c1.l7.wgrad");
  CHECK(split == doctest::Approx(whole).epsilon(1e-6));
  CHECK(dur(on, "mb4.c1.l7.bwd.mlp") < 0.7 * dur(off, "mb4.c1.l7.bwd.mlp"));  // the weight GEMMs left
  for (std::size_t st = 0; st < 4; ++st) {
    CHECK(compute_s(on.ranks[st]) == doctest::Approx(compute_s(off.ranks[st])).epsilon(1e-6));
  }
  CHECK(error_of([] { gen(small_dense({{"dualpipe_zero_bubble", "false"}})); }).find("needs pipeline_parallel_schedule DualPipe") !=
        std::string::npos);
}
