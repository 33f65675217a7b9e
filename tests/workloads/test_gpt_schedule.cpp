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
#include "workloads/gpt_detail.hpp"
#include "sim/base/json_reader.hpp"
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

// ---- Megatron-Core's pipeline_model_parallel_layout (megatron/core/transformer/pipeline_parallel_layer_layout.py
// at NVIDIA/Megatron-LM@d98e8a64dd) and the interleaved schedule's micro-batch group N
// (microbatch_group_size_per_vp_stage; megatron/core/pipeline_parallel/schedules.py get_schedule_table).

TEST_CASE("gpt pipeline_model_parallel_layout: Megatron's string and list forms") {
  // DeepSeek-V3's layout (parse_str_to_list's own example): "(tt|)*29" unrolls before "t*3"; commas are cosmetic.
  const auto ds = parse_pipeline_layout("Et*3|(tt|)*29,m|L", "k");
  REQUIRE(ds.size() == 32);
  CHECK(ds[0] == "Ettt");
  for (std::size_t k = 1; k <= 29; ++k) CHECK(ds[k] == "tt");
  CHECK(ds[30] == "m");
  CHECK(ds[31] == "L");
  // `,` is not `|`: "E,tt|tt,L" is two virtual stages.
  CHECK(parse_pipeline_layout("E,tt|tt,L", "k") == std::vector<std::string>{"Ett", "ttL"});
  // (|x)*n and a group then a single repetition: "(|tt)*2" -> "|tt|tt"; empty stages stay.
  CHECK(parse_pipeline_layout("E(|tt)*2,L", "k") == std::vector<std::string>{"E", "tt", "ttL"});
  CHECK(parse_pipeline_layout("E|t*2|L", "k") == std::vector<std::string>{"E", "tt", "L"});
  // The list form: LayerType names, stripped and lower-cased as Megatron does.
  CHECK(parse_pipeline_layout(R"([["embedding", "decoder"], [" Decoder ", "LOSS"]])", "k") ==
        std::vector<std::string>{"Et", "tL"});
  CHECK(pipeline_layout_text({"Et", "", "tL"}) == "Et||tL");
  CHECK(pipeline_layout_of_counts({2, 0, 3}) == "Ett||tttL");
  // Bad letters and names name the key.
  CHECK(error_of([] { parse_pipeline_layout("Etx|L", "pipeline_model_parallel_layout"); })
            .find("pipeline_model_parallel_layout: invalid layer character 'x'") != std::string::npos);
  CHECK(error_of([] { parse_pipeline_layout(R"([["embedding", "attention"]])", "k"); })
            .find("'attention' is not a LayerType") != std::string::npos);
  CHECK(error_of([] { parse_pipeline_layout("(t)*99999999", "k"); }).find("more than") != std::string::npos);
}

TEST_CASE("gpt pipeline_model_parallel_layout: bad layouts are one error naming the key and what was expected") {
  auto err = [](ParamMap over) { return error_of([&] { gpt_config_from_params(small_dense(over), "--param"); }); };
  auto L = [](const std::string& s) { return ParamMap{{"pipeline_model_parallel_layout", s}}; };
  CHECK(err(L("Ett|tt|tt|tL")).find("holds 7 decoder layers t, num_layers is 8") != std::string::npos);
  CHECK(err(L("Ett|tt|ttL")).find("3 virtual stages, not a multiple of pipeline_model_parallel_size (4)") !=
        std::string::npos);
  CHECK(err(L("tEt|tt|tt|ttL")).find("the first layer must be the embedding E") != std::string::npos);
  CHECK(err(L("Ett|tt|tt|tLt")).find("the last layer must be the loss L") != std::string::npos);
  CHECK(err(L("Ett|Ett|tt|ttL")).find("exactly once") != std::string::npos);
  CHECK(err(L("Ett|tt|tt|ttmL")).find("holds 1 MTP layers m, mtp_num_layers is 0") != std::string::npos);
  // Megatron's exclusions: the other split keys, a contradicting VP.
  ParamMap a = L("Ett|tt|tt|ttL");
  a["decoder_first_pipeline_num_layers"] = "2";
  CHECK(err(a).find("cannot be combined with decoder_first_pipeline_num_layers") != std::string::npos);
  a = L("Ett|tt|tt|ttL");
  a["account_for_loss_in_pipeline_split"] = "true";
  CHECK(err(a).find("cannot be combined with account_for_loss_in_pipeline_split") != std::string::npos);
  a = L("Et|t|t|t|t|t|t|tL");
  a["virtual_pipeline_model_parallel_size"] = "4";
  CHECK(err(a).find("2 virtual stages per pipeline rank but virtual_pipeline_model_parallel_size is 4") !=
        std::string::npos);
  a = L("Et|t|t|t|t|t|t|tL");
  a["num_layers_per_virtual_pipeline_stage"] = "1";
  CHECK(err(a).find("cannot be combined with num_layers_per_virtual_pipeline_stage") != std::string::npos);
  // Where fabricsim places less than Megatron: the embedding in the first virtual stage.
  CHECK(err(L("|Ettt|ttt|ttL")).find("the embedding must open the first virtual stage") != std::string::npos);
}

namespace {
// The trace's JSON without its record of the parameters (which echoes the layout key when one is given).
std::string ops_json(const Trace& t) {
  Json j = trace_to_json(t);
  j.erase("params");
  return j.dump();
}
}  // namespace

TEST_CASE("gpt pipeline_model_parallel_layout: a layout equal to an even split gives the same trace") {
  auto same = [](ParamMap a, ParamMap b) {
    const Trace ta = gen(small_dense(a)), tb = gen(small_dense(b));
    CHECK(ops_json(ta) == ops_json(tb));
    CHECK(tb.params.at("pipeline_model_parallel_layout") == pipeline_layout_text(
                                                                 parse_pipeline_layout(small_dense(b).at("pipeline_model_parallel_layout"), "k")));
  };
  same({}, {{"pipeline_model_parallel_layout", "Ett|tt|tt|ttL"}});
  // Interleaved: VP 2 (one layer per chunk), the list form.
  same({{"virtual_pipeline_model_parallel_size", "2"}},
       {{"pipeline_model_parallel_layout",
         R"([["embedding","decoder"],["decoder"],["decoder"],["decoder"],["decoder"],["decoder"],["decoder"],["decoder","loss"]])"}});
  // The embedding and the loss counted as layers: 6 layers + 2 over 4 stages.
  same({{"num_layers", "6"}, {"account_for_embedding_in_pipeline_split", "true"}, {"account_for_loss_in_pipeline_split", "true"}},
       {{"num_layers", "6"}, {"pipeline_model_parallel_layout", "Et|tt|tt|tL"}});
  // decoder_first/last_pipeline_num_layers.
  same({{"num_layers", "10"}, {"decoder_first_pipeline_num_layers", "1"}, {"decoder_last_pipeline_num_layers", "1"}},
       {{"num_layers", "10"}, {"pipeline_model_parallel_layout", "Et|tttt|tttt|tL"}});
}

TEST_CASE("gpt pipeline_model_parallel_layout: an uneven layout moves the layers, empty chunks pass activations on") {
  // 1, 3, 3, 1 layers: the middle stages compute three times the layers of the end stages.
  const Trace t = gen(small_dense({{"pipeline_model_parallel_layout", "Et|ttt|ttt|tL"}}));
  REQUIRE(t.ranks.size() == 4);
  CHECK(count_ops(t.ranks[0], ".l0.fwd.attn") == 8);
  CHECK(count_ops(t.ranks[1], ".l1.fwd.attn") == 8);
  CHECK(count_ops(t.ranks[1], ".l3.fwd.attn") == 8);
  CHECK_FALSE(has_op(t.ranks[1], ".l4.fwd.attn"));
  CHECK(count_ops(t.ranks[3], ".l7.fwd.attn") == 8);
  CHECK(compute_s(t.ranks[1]) > compute_s(t.ranks[0]));
  const GptConfig c = gpt_config_from_params(small_dense({{"pipeline_model_parallel_layout", "Et|ttt|ttt|tL"}}), "--param");
  CHECK(gpt_layer_layout(c) == std::vector<std::vector<std::int64_t>>{{1}, {3}, {3}, {1}});
  CHECK(gpt_memory_of_stage(c, 1).weights_bytes > gpt_memory_of_stage(c, 2).weights_bytes * 0.99);
  // Empty chunks: stage 0 holds only the embedding, stage 3 only the loss; they still receive and send.
  const Trace e = gen(small_dense({{"pipeline_model_parallel_layout", "E|tttt|tttt|L"}}));
  CHECK_FALSE(has_op(e.ranks[0], ".fwd.attn"));
  CHECK(has_op(e.ranks[0], ".embed.fwd"));
  CHECK_FALSE(has_op(e.ranks[3], ".fwd.attn"));
  CHECK(has_op(e.ranks[3], ".logits.fwd"));
  // Interleaved with an empty middle chunk (PP 4 x VP 2; virtual stage 5 = rank 1's second chunk is empty).
  const GptConfig v = gpt_config_from_params(small_dense({{"pipeline_model_parallel_layout", "Et|t|t|t|tt||tt|L"}}), "--param");
  CHECK(v.vp() == 2);
  CHECK(gpt_layer_layout(v) == std::vector<std::vector<std::int64_t>>{{1, 2}, {1, 0}, {1, 2}, {1, 0}});
  CHECK(gen(small_dense({{"pipeline_model_parallel_layout", "Et|t|t|t|tt||tt|L"}})).ranks.size() == 4);
}

TEST_CASE("gpt pipeline_model_parallel_layout: MTP layers in any rank's last virtual stage (standalone MTP)") {
  auto p = [](const std::string& layout, ParamMap over = {}) {
    ParamMap m = small_dense({{"mtp_num_layers", "1"}, {"pipeline_model_parallel_layout", layout}});
    for (const auto& [k, v] : over) m[k] = v;
    return m;
  };
  const Trace t = gen(p("Ett|tt|tt|ttmL"));
  CHECK(has_op(t.ranks[3], ".mtp.fwd"));
  CHECK_FALSE(has_op(t.ranks[2], ".mtp.fwd"));
  // The same trace as without a layout (MTP on the last stage is Megatron's default placement).
  CHECK(ops_json(t) == ops_json(gen(small_dense({{"mtp_num_layers", "1"}}))));
  // DeepSeek-V3's kind of placement (Megatron's standalone MTP): the MTP layer alone in rank 2's last chunk. Rank 2
  // runs the MTP layers, rank 3 the MTP head with the loss.
  const Trace s = gen(p("Ett|tt|tt|tt|||m|L"));
  CHECK(count_ops(s.ranks[2], ".mtp.fwd") == 8);
  CHECK(count_ops(s.ranks[2], ".mtp.bwd") == 8);
  CHECK_FALSE(has_op(s.ranks[3], ".mtp.fwd"));
  CHECK(count_ops(s.ranks[3], ".mtp.heads.fwd") == 8);
  CHECK(count_ops(s.ranks[3], ".mtp.heads.bwd") == 8);
  // Its output, the decoder's hidden states and the MTP layer's concatenated, is twice a chunk's message, in
  // both directions: rank 2 chunk 1 -> rank 3 chunk 1; chunk 0's messages keep one.
  auto bytes = [](const RankTrace& r, const std::string& name) {
    for (const auto& op : r.ops)
      if (op.name == name) return op.bytes;
    return -1.0;
  };
  const double one = bytes(s.ranks[2], "mb0.c0.send.fwd");
  REQUIRE(one > 0);
  CHECK(bytes(s.ranks[2], "mb0.c1.send.fwd") == 2.0 * one);
  CHECK(bytes(s.ranks[3], "mb0.c1.recv.fwd") == 2.0 * one);
  CHECK(bytes(s.ranks[3], "mb0.c1.send.bwd") == 2.0 * one);
  CHECK(bytes(s.ranks[2], "mb0.c1.recv.bwd") == 2.0 * one);
  CHECK(bytes(s.ranks[1], "mb0.c1.send.fwd") == one);
  // The word embeddings' gradient all-reduce: rank 0 and the MTP rank (untied weights: not the last rank).
  bool emb = false;
  for (const auto& cm : s.comms)
    if (cm.name == "embedding") {
      emb = true;
      CHECK(cm.ranks == std::vector<std::int32_t>{0, 8});
    }
  CHECK(emb);
  CHECK(has_op(s.ranks[2], "embedding.grad.ar"));
  CHECK_FALSE(has_op(s.ranks[3], "embedding.grad.ar"));
  // The MTP rank holds the MTP layer and a copy of the word embeddings: more weight memory than without MTP.
  const GptConfig cs = gpt_config_from_params(p("Ett|tt|tt|tt|||m|L"), "t");
  const GptConfig c0 = gpt_config_from_params(small_dense({{"pipeline_model_parallel_layout", "Ett|tt|tt|tt||||L"}}), "t");
  CHECK(cs.mtp_standalone());
  CHECK(gpt_memory_of_stage(cs, 2).weights_bytes ==
        doctest::Approx(gpt_memory_of_stage(c0, 2).weights_bytes +
                        2.0 * (gpt_detail::mtp_params_per_rank(cs) + gpt_detail::embedding_params_per_rank(cs))));
  CHECK(gpt_memory_of_stage(cs, 3).weights_bytes == gpt_memory_of_stage(c0, 3).weights_bytes);
  // Megatron's errors for the placements it refuses.
  auto err = [&](const std::string& layout, ParamMap over = {}) {
    return error_of([&] { gpt_config_from_params(p(layout, over), "--param"); });
  };
  CHECK(err("Ett|tt|tt|tmtL").find("decoder layers must be placed before MTP layers") != std::string::npos);
  CHECK(err("Ett|tt|tt|ttm||||L").find("Megatron-LM restricts the MTP to the last virtual pipeline stage of its rank") !=
        std::string::npos);
  CHECK(err("Ett|tt|tt|tt|||mm|L", {{"mtp_num_layers", "2"}}).empty());
  CHECK(err("Ett|tt|tt|tt||m|m|L", {{"mtp_num_layers", "2"}}).find("all of the MTP layers must be in the same one") !=
        std::string::npos);
  CHECK(err("Ett|tt|tt|m|L", {{"num_layers", "6"}}).find("not a multiple of pipeline_model_parallel_size") !=
        std::string::npos);
  CHECK(err("Ett|tt|ttm|L", {{"num_layers", "6"}, {"pipeline_parallel_schedule", "DualPipe"}})
            .find("not DualPipe") != std::string::npos);
}

TEST_CASE("gpt pipeline_model_parallel_layout: DeepSeek-V3's own layout runs its MTP stage on rank 14") {
  // examples/workloads/deepseek-v3-2048-h800.json with Megatron's layout Et*3|(tt|)*29,m|L (PP 16 x VP 2) in place
  // of DualPipe and its 3/2-layer end stages; 16,384 sequences (128 micro-batches, a multiple of N = 16).
  const std::string f = std::string(FABRICSIM_SOURCE_DIR) + "/examples/workloads/deepseek-v3-2048-h800.json";
  Json sc = load_json_file(f);
  ParamMap p = params_from_json(sc["workload"]["params"], JsonPath{f, "/workload/params"});
  p["gpus_per_host"] = "8";
  p["gpu"] = "h100";
  const GptConfig dual = gpt_config_from_params(p, "t");
  for (const char* k : {"pipeline_parallel_schedule", "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"})
    p.erase(k);
  p["pipeline_model_parallel_layout"] = "Et*3|(tt|)*29,m|L";
  p["global_batch_size"] = "16384";
  // The example's selective recompute (layernorm, mla_up_proj, moe_act: DeepSeek's own) does not fit this
  // layout's 46 in-flight chunk passes on stage 0 (99.2 GiB); block recompute of 2 layers per stage does.
  p.erase("recompute_modules");
  p["recompute_granularity"] = "full";
  p["recompute_method"] = "block";
  p["recompute_num_layers"] = "2";
  const GptConfig c = gpt_config_from_params(p, "t");
  CHECK(c.vp() == 2);
  CHECK(c.mtp_virtual_stage() == 30);
  CHECK(c.mtp_standalone());
  const Trace t = gen(p);
  // The MTP layer is an MoE layer (DeepSeek-V3's last layer is): its experts between its own dispatch and combine.
  CHECK(count_ops(t.ranks[14], ".mtp0.fwd.moe.experts") == 128);
  CHECK(count_ops(t.ranks[14], ".mtp0.bwd.moe.experts") == 128);
  CHECK(count_ops(t.ranks[15], ".mtp.heads.fwd") == 128);
  CHECK_FALSE(has_op(t.ranks[15], ".mtp0.fwd"));
  const double gib = 1073741824.0;
  for (std::int64_t st : {0, 1, 14, 15}) {
    const GptMemory m = gpt_memory_of_stage(c, st);
    MESSAGE("layout stage " << st << ": " << m.total_bytes() / gib << " GiB (weights " << m.weights_bytes / gib
                            << ", activations " << m.activations_bytes / gib << ")");
  }
  MESSAGE("layout peak " << gpt_memory_per_gpu(c).total_bytes() / gib << " GiB on stage " << gpt_memory_per_gpu(c).stage
                         << "; DualPipe example peak " << gpt_memory_per_gpu(dual).total_bytes() / gib << " GiB on stage "
                         << gpt_memory_per_gpu(dual).stage);
  // Against the MTP with the loss (Et*3|(tt|)*29,|mL): rank 14 gains the MTP layer (an MoE layer with its
  // experts) and a copy of the word embeddings, rank 15 loses the MTP layer.
  p["pipeline_model_parallel_layout"] = "Et*3|(tt|)*29,|mL";
  const GptConfig last = gpt_config_from_params(p, "t");
  CHECK_FALSE(last.mtp_standalone());
  CHECK(gpt_memory_of_stage(c, 14).weights_bytes > gpt_memory_of_stage(last, 14).weights_bytes);
  CHECK(gpt_memory_of_stage(c, 15).weights_bytes < gpt_memory_of_stage(last, 15).weights_bytes);
  MESSAGE("MTP with the loss: stage 14 " << gpt_memory_of_stage(last, 14).total_bytes() / gib << " GiB, stage 15 "
                                         << gpt_memory_of_stage(last, 15).total_bytes() / gib << " GiB");
}

TEST_CASE("gpt memory: in-flight activations per chunk from the schedule's order where chunks differ") {
  // PP 4 x VP 2, 8 micro-batches, N = 4, no recompute. Rank 0 holds "Ettt" (chunk 0, 3 layers) and "t" (chunk 1).
  // It warms up (4 - 0 - 1) x 2 + 4 = 10 chunk passes: micro-batches 0-3 through chunk 0 and chunk 1, 4-5
  // through chunk 0. The steady state then runs F(6, c0) B(0, c1) F(7, c0) B(1, c1) F(4, c1) ...: after
  // F(7, c0) 8 chunk-0 passes (24 layers) and 3 chunk-1 passes are in flight, 27 layers, the peak. The mean
  // chunk (2 layers) over the 11 in-flight passes gave 22.
  const GptConfig c = gpt_config_from_params(
      small_dense({{"num_layers", "10"}, {"pipeline_model_parallel_layout", "Ettt|t|t|t|t|t|t|tL"}}), "t");
  // Rank 1 (one layer in each chunk: even) keeps the count: (4 - 1 - 1) x 2 + 4 + 1 = 9 passes of one layer.
  const double layer = gpt_memory_of_stage(c, 1).activations_bytes / 9.0;
  REQUIRE(layer > 0);
  CHECK(gpt_memory_of_stage(c, 0).activations_bytes / layer == doctest::Approx(27.0).epsilon(1e-12));
}

namespace {
// The interleaved order before N existed (N = PP, m a multiple of PP): the k-th forward runs micro-batch
// (k / (p v)) p + k mod p through chunk (k / p) mod v, the k-th backward the same micro-batch through chunk
// v - 1 - that.
std::vector<gpt_detail::GptSlot> order_n_equals_p(std::int64_t p, std::int64_t v, std::int64_t m, std::int64_t st) {
  std::vector<gpt_detail::GptSlot> o;
  auto f = [&](std::int64_t k) { return gpt_detail::GptSlot{true, (k / (p * v)) * p + k % p, (k / p) % v}; };
  auto b = [&](std::int64_t k) { return gpt_detail::GptSlot{false, (k / (p * v)) * p + k % p, v - 1 - (k / p) % v}; };
  const std::int64_t total = m * v, warm = std::min((p - st - 1) * 2 + (v - 1) * p, total);
  for (std::int64_t k = 0; k < warm; ++k) o.push_back(f(k));
  for (std::int64_t k = 0; k < total - warm; ++k) o.push_back(f(warm + k)), o.push_back(b(k));
  for (std::int64_t k = total - warm; k < total; ++k) o.push_back(b(k));
  return o;
}
std::string show(const std::vector<gpt_detail::GptSlot>& o) {
  std::string s;
  for (const auto& x : o) s += (s.empty() ? "" : " ") + std::string(x.fwd ? "F" : "B") + std::to_string(x.mb) + "." + std::to_string(x.chunk);
  return s;
}
}  // namespace

TEST_CASE("gpt microbatch_group_size_per_vp_stage: N = PP is the order before; N != PP as Megatron's table") {
  for (std::int64_t p : {2, 4, 8})
    for (std::int64_t v : {2, 3, 4})
      for (std::int64_t m : {p, 2 * p, 4 * p})
        for (std::int64_t st = 0; st < p; ++st) {
          CAPTURE(p);
          CAPTURE(v);
          CAPTURE(m);
          CAPTURE(st);
          CHECK(show(gpt_detail::pipeline_order(p, v, m, st, p)) == show(order_n_equals_p(p, v, m, st)));
        }
  // schedules.py's own example, PP 2, VP 2, N 3, M 5 (m not a multiple of N): the forward table is
  // 0.0 1.0 2.0 0.1 1.1 2.1 3.0 4.0 3.1 4.1; stage 0 warms up (2 - 0 - 1) * 2 + (2 - 1) * 3 = 5 forwards, stage 1 3.
  CHECK(show(gpt_detail::pipeline_order(2, 2, 5, 0, 3)) ==
        "F0.0 F1.0 F2.0 F0.1 F1.1 F2.1 B0.1 F3.0 B1.1 F4.0 B2.1 F3.1 B0.0 F4.1 B1.0 B2.0 B3.1 B4.1 B3.0 B4.0");
  CHECK(show(gpt_detail::pipeline_order(2, 2, 5, 1, 3)) ==
        "F0.0 F1.0 F2.0 F0.1 B0.1 F1.1 B1.1 F2.1 B2.1 F3.0 B0.0 F4.0 B1.0 F3.1 B2.0 F4.1 B3.1 B4.1 B3.0 B4.0");
  // PP 4, VP 2, N 5, m 9 (the last group holds 4 = PP micro-batches): stage 3 warms up (2 - 1) * 5 = 5 forwards.
  const auto o = gpt_detail::pipeline_order(4, 2, 9, 3, 5);
  CHECK(show({o.begin(), o.begin() + 6}) == "F0.0 F1.0 F2.0 F3.0 F4.0 F0.1");
  CHECK(show({o.begin() + 5, o.begin() + 9}) == "F0.1 B0.1 F1.1 B1.1");
  CHECK(o.size() == 36);
}

TEST_CASE("gpt microbatch_group_size_per_vp_stage: in-flight activations follow the warm-up of N") {
  auto act = [](std::int64_t n) {
    ParamMap p = small_dense({{"virtual_pipeline_model_parallel_size", "2"}, {"global_batch_size", "64"}});
    if (n) p["microbatch_group_size_per_vp_stage"] = std::to_string(n);
    return gpt_memory_of_stage(gpt_config_from_params(p, "--param"), 1).activations_bytes;
  };
  // 16 micro-batches, PP 4, VP 2: stage 1 holds (4 - 1 - 1) * 2 + N + 1 chunk passes: 9, 13, 21 for N 4, 8, 16.
  CHECK(act(0) == act(4));
  const double a4 = act(4), a8 = act(8), a16 = act(16);
  CHECK(a8 > a4);
  CHECK(a16 - a8 == doctest::Approx(2.0 * (a8 - a4)));
  auto err = [](ParamMap over) {
    ParamMap p = small_dense({{"virtual_pipeline_model_parallel_size", "2"}, {"global_batch_size", "64"}});
    for (const auto& [k, v] : over) p[k] = v;
    return error_of([&] { gpt_config_from_params(p, "--param"); });
  };
  CHECK(err({{"microbatch_group_size_per_vp_stage", "2"}}).find("must be at least pipeline_model_parallel_size (4)") !=
        std::string::npos);
  CHECK(err({{"microbatch_group_size_per_vp_stage", "17"}}).find("must not exceed the 16 micro-batches") != std::string::npos);
  CHECK(err({{"microbatch_group_size_per_vp_stage", "7"}}).find("multiple of the micro-batch group N = 7") != std::string::npos);
  CHECK(err({{"microbatch_group_size_per_vp_stage", "0"}}).find("expected an integer >= 1") != std::string::npos);
  CHECK(err({{"microbatch_group_size_per_vp_stage", "12"}}).empty());  // 16 mod 12 = 4 >= PP
  CHECK(error_of([] { gpt_config_from_params(small_dense({{"microbatch_group_size_per_vp_stage", "4"}}), "--param"); })
            .find("needs virtual pipeline stages") != std::string::npos);
  // N above PP: every chunk pass still runs once per micro-batch.
  const Trace t = gen(small_dense({{"virtual_pipeline_model_parallel_size", "2"}, {"global_batch_size", "64"},
                                   {"microbatch_group_size_per_vp_stage", "8"}}));
  CHECK(count_ops(t.ranks[0], ".l0.fwd.attn") == 16);
}
