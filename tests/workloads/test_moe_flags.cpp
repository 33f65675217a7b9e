// The MoE settings of 2025-2026 Megatron-LM recipes (issue 19): latent MoE (--moe-latent-size), NVFP4 experts
// (--fp4-format with MoE), the shared expert's gate (--moe-shared-expert-gate), the router's dtype
// (--moe-router-dtype), the routing map padded for FP8 / FP4 grouped GEMMs (--moe-router-padding-for-quantization /
// -for-fp8) and --moe-layer-recompute. docs/workloads.md, "Mixture of experts".
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <numeric>
#include <string>

#include "models/compute.hpp"
#include "models/compute_calibration.hpp"
#include "models/gpu.hpp"
#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/megatron_args.hpp"
#include "workloads/moe.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;
using workloads_test::gen;

namespace {

// 16 experts of 1024, top-4, hidden 2048, one shared expert of 2048, on 16 GPUs: PP 2, EP 8, alltoall, grouped GEMM.
ParamMap moe(ParamMap over = {}) {
  ParamMap p = {{"num_layers", "4"},          {"hidden_size", "2048"},        {"num_attention_heads", "16"},
                {"num_query_groups", "4"},    {"ffn_hidden_size", "5632"},    {"swiglu", "true"},
                {"normalization", "RMSNorm"}, {"position_embedding_type", "rope"},
                {"untie_embeddings_and_output_weights", "true"},
                {"seq_length", "4096"},       {"padded_vocab_size", "32000"}, {"micro_batch_size", "1"},
                {"global_batch_size", "16"},  {"tensor_model_parallel_size", "1"},
                {"pipeline_model_parallel_size", "2"}, {"world_size", "16"}, {"gpu", "h100"},
                {"recompute_granularity", "none"}, {"num_experts", "16"}, {"moe_router_topk", "4"},
                {"moe_ffn_hidden_size", "1024"}, {"moe_shared_expert_intermediate_size", "2048"},
                {"expert_model_parallel_size", "8"}, {"moe_token_dispatcher_type", "alltoall"},
                {"moe_grouped_gemm", "true"}, {"use_distributed_optimizer", "true"}};
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}

GptConfig cfg(const ParamMap& p) { return gpt_config_from_params(p, "--param"); }

models::ComputeModel cm_of(const GptConfig& c) {
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec(c.gpu);
  return cm;
}

// The first MoE layer's priced kernels.
gpt_detail::MoeCosts moe_costs_of(const ParamMap& p) {
  const GptConfig c = cfg(p);
  const auto K = gpt_detail::gpt_step_kernels(c, cm_of(c), "test");
  REQUIRE(!K.moe.empty());
  return K.moe.front();
}

const Op& first_op(const Trace& t, const std::string& part) {
  for (const auto& op : t.ranks.at(0).ops)
    if (op.name.find(part) != std::string::npos) return op;
  FAIL("no op containing " << part);
  static Op none;
  return none;
}

double row_sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

}  // namespace

TEST_CASE("moe_latent_size: the dispatch moves latent-wide tokens, the experts run in the latent width") {
  const ParamMap lat = {{"moe_latent_size", "512"}};
  const Trace base = gen(moe()), t = gen(moe(lat));
  // The all-to-all carries moe_latent_size / hidden_size of the bytes (4096 tokens x top-4 x width x 2 B).
  CHECK(first_op(base, ".moe.dispatch").bytes == doctest::Approx(4096.0 * 4 * 2048 * 2));
  CHECK(first_op(t, ".moe.dispatch").bytes == doctest::Approx(4096.0 * 4 * 512 * 2));
  CHECK(first_op(t, ".moe.combine").bytes == doctest::Approx(first_op(base, ".moe.combine").bytes / 4.0));
  // The experts' GEMMs have K (fc1) and N (fc2) = 512 instead of 2048: a quarter of the FLOPs.
  const auto M0 = moe_costs_of(moe()), M1 = moe_costs_of(moe(lat));
  CHECK(M1.experts_f.flops == doctest::Approx(M0.experts_f.flops / 4.0));
  CHECK(M1.experts_b.flops == doctest::Approx(M0.experts_b.flops / 4.0));
  // The router keeps the hidden width; the two latent projections (4096 x 512 x 2048, forward) are added.
  CHECK(M1.pre_f.flops - M0.pre_f.flops == doctest::Approx(2.0 * 4096 * 512 * 2048));
  CHECK(M1.post_f.flops - M0.post_f.flops == doctest::Approx(2.0 * 4096 * 512 * 2048));
  // Parameters: the experts shrink to the latent width, each MoE layer gains the two h x latent projections.
  const double E = 16, h = 2048, F = 1024, L = 512;
  CHECK(gpt_num_parameters(cfg(moe())) - gpt_num_parameters(cfg(moe(lat))) ==
        doctest::Approx(4 * (E * 3 * F * (h - L) - 2 * h * L)));
  // Megatron's FLOP count (training.py num_floating_point_operations): the routed experts at the latent width,
  // plus 2 x latent per hidden unit for the projections (x 6 per token per MoE layer).
  const double tokens = 16.0 * 4096;
  CHECK(gpt_model_flops(cfg(moe())) - gpt_model_flops(cfg(moe(lat))) ==
        doctest::Approx(4 * 6 * tokens * (3 * 4 * F * (h - L) - 2 * h * L)));
  // Memory: the routed slots' saved inputs are latent-wide.
  CHECK(gpt_memory_per_gpu(cfg(moe(lat))).activations_bytes < gpt_memory_per_gpu(cfg(moe())).activations_bytes);
  // Megatron refuses the shared-expert overlap with latent projections in training.
  CHECK(error_of([] { cfg(moe({{"moe_latent_size", "512"}, {"moe_shared_expert_overlap", "true"}})); })
            .find("moe_latent_size: with moe_shared_expert_overlap fails") != std::string::npos);
  CHECK(error_of([] { cfg(moe({{"num_experts", "0"}, {"moe_latent_size", "512"}})); }).find("moe_latent_size: needs num_experts") !=
        std::string::npos);
}

TEST_CASE("fp4 with MoE: NVFP4 grouped expert GEMMs on Blackwell, refused on Hopper and with MLA") {
  // Experts of 8192 x 8192 (fc1 2 x 8192 with SwiGLU) so that the GEMMs, not the quantisation passes, dominate.
  const ParamMap gb = {{"gpu", "gb200"}, {"precision", "fp8"}, {"fp8_recipe", "mxfp8"}, {"hidden_size", "8192"},
                       {"num_attention_heads", "64"}, {"moe_ffn_hidden_size", "8192"}};
  ParamMap fp4 = gb;
  fp4["precision"] = "fp4";
  ParamMap bf = gb;
  bf["precision"] = "bf16";
  const auto M8 = moe_costs_of(moe(gb)), M4 = moe_costs_of(moe(fp4)), Mb = moe_costs_of(moe(bf));
  // The same GEMMs (FLOPs), faster at the FP4 rate than FP8, FP8 faster than bf16.
  CHECK(M4.experts_f.flops == doctest::Approx(M8.experts_f.flops));
  CHECK(M4.experts_f.seconds < M8.experts_f.seconds);
  CHECK(M4.experts_b.seconds < M8.experts_b.seconds);
  CHECK(M8.experts_f.seconds < Mb.experts_f.seconds);
  // The quantisation passes are extra kernels per projection input: NVFP4's one fused grouped kernel (K = 8192, a
  // multiple of 128), mxfp8's one per local expert (2 here; Transformer Engine's split_quantize).
  CHECK(M4.experts_f.kernels == Mb.experts_f.kernels + 2);
  CHECK(M8.experts_f.kernels == Mb.experts_f.kernels + 2 * 2);
  // NVFP4 expert weight copies: 2 x 0.5625 bytes per expert weight instead of FP8's 2 x 1.
  CHECK(gpt_memory_per_gpu(cfg(moe(fp4))).weights_bytes < gpt_memory_per_gpu(cfg(moe(gb))).weights_bytes);
  CHECK(error_of([] { cfg(moe({{"precision", "fp4"}})); }).find("fp4 needs FP4 tensor cores") != std::string::npos);
  CHECK(error_of([] { cfg(moe({{"gpu", "gb200"}, {"precision", "fp4"}, {"multi_latent_attention", "true"}})); })
            .find("fp4 is not modelled with multi_latent_attention") != std::string::npos);
  // The whole step generates.
  CHECK(gen(moe(fp4)).ranks.size() == gen(moe(gb)).ranks.size());
}

TEST_CASE("moe_router_dtype fp32: the router's backward GEMMs at the TF32 rate with their casts") {
  const auto M0 = moe_costs_of(moe()), M1 = moe_costs_of(moe({{"moe_router_dtype", "fp32"}}));
  // Forward unchanged (bf16 GEMM with an fp32 output; the fp32 scores were priced already).
  CHECK(M1.pre_f.seconds == doctest::Approx(M0.pre_f.seconds));
  // Backward: same GEMM FLOPs at half the bf16 tensor rate, plus two casts over T x h.
  CHECK(M1.pre_b.flops == doctest::Approx(M0.pre_b.flops));
  CHECK(M1.pre_b.kernels == M0.pre_b.kernels + 2);
  const models::ComputeModel cm = cm_of(cfg(moe()));
  const double tf32 = cm.kernel_time_s(models::KernelDesc::gemm(4096, 2048, 16, models::Precision::TF32)) +
                      cm.kernel_time_s(models::KernelDesc::gemm(2048, 16, 4096, models::Precision::TF32));
  const double bf16 = cm.kernel_time_s(models::KernelDesc::gemm(4096, 2048, 16, models::Precision::BF16)) +
                      cm.kernel_time_s(models::KernelDesc::gemm(2048, 16, 4096, models::Precision::BF16));
  CHECK(tf32 > bf16);
  CHECK(M1.pre_b.seconds - M0.pre_b.seconds > tf32 - bf16);
  CHECK(M1.pre_w.seconds > M0.pre_w.seconds);
  CHECK(error_of([] { cfg(moe({{"moe_router_dtype", "fp64"}})); }).find("moe_router_dtype: fp64 is not modelled") !=
        std::string::npos);
  CHECK(error_of([] { cfg(moe({{"moe_router_dtype", "fp16"}})); }).find("expected one of fp32, fp64") != std::string::npos);
}

TEST_CASE("moe_router_padding_for_quantization: tokens per expert padded to the FP8 / FP4 alignment") {
  // The alignment Megatron takes from the recipe (get_align_size_for_quantization).
  CHECK(cfg(moe({{"precision", "fp8"}})).moe.moe_router_pad_multiple == 16);
  CHECK(cfg(moe({{"gpu", "gb200"}, {"precision", "fp8"}, {"fp8_recipe", "mxfp8"}})).moe.moe_router_pad_multiple == 32);
  CHECK(cfg(moe({{"gpu", "gb200"}, {"precision", "fp4"}})).moe.moe_router_pad_multiple == 128);
  // alltoall: each source's count per expert gains (a - 1) / 2 slots on average, and they are dispatched.
  MoeConfig m;
  m.num_experts = 16, m.moe_router_topk = 4, m.expert_model_parallel_size = 8, m.moe_token_dispatcher_type = "alltoall";
  m.moe_router_padding_for_quantization = true, m.moe_router_pad_multiple = 16;
  const std::vector<double> uniform(16, 1.0 / 16);
  const MoeLayerLoad a = moe_layer_load(m, uniform, 4096, 8, 8);
  CHECK(a.expert_tokens[0] == doctest::Approx((4096.0 * 4 / 16 + 7.5) * 8));
  CHECK(row_sum(a.recv_share) == doctest::Approx(1.0 + 16 * 7.5 / (4096.0 * 4)));
  // flex: padded on the receiving rank after the dispatch -- computed, not sent.
  m.moe_token_dispatcher_type = "flex";
  const MoeLayerLoad f = moe_layer_load(m, uniform, 4096, 8, 8);
  CHECK(f.expert_tokens[0] == doctest::Approx(4096.0 * 4 / 16 * 8 + 7.5));
  CHECK(row_sum(f.recv_share) == doctest::Approx(1.0));
  // An expert the load gives no tokens is not padded; a source never pads beyond its tokens.
  m.moe_token_dispatcher_type = "alltoall";
  std::vector<double> skew(16, 0.0);
  skew[0] = 1.0;
  const MoeLayerLoad s = moe_layer_load(m, skew, 8, 8, 8);
  CHECK(s.expert_tokens[1] == 0.0);
  CHECK(s.expert_tokens[0] == doctest::Approx(32.0 * 8));  // 8 tokens x top-4 = 32 slots, + 7.5 capped at max(8, 32)
  // In the trace: the dispatch matrix rows carry the padded slots, the experts compute them.
  const ParamMap p8 = {{"precision", "fp8"}, {"moe_router_padding_for_quantization", "true"}};
  const Trace t0 = gen(moe({{"precision", "fp8"}})), t1 = gen(moe(p8));
  const auto& W = t1.comms.at(first_op(t1, ".moe.dispatch").comm).a2a_matrix;
  CHECK(row_sum(W[0]) == doctest::Approx(1.0 + 16 * 7.5 / (4096.0 * 4)));
  CHECK(first_op(t1, ".fwd.moe.experts").duration_s > first_op(t0, ".fwd.moe.experts").duration_s);
  // The older name sets the same.
  CHECK(cfg(moe({{"precision", "fp8"}, {"moe_router_padding_for_fp8", "true"}})).moe.moe_router_padding_for_quantization);
  // Megatron's refusals.
  CHECK(error_of([] { cfg(moe({{"moe_router_padding_for_quantization", "true"}})); })
            .find("moe_router_padding_for_quantization: needs precision fp8 or fp4") != std::string::npos);
  CHECK(error_of([] {
          cfg(moe({{"precision", "fp8"}, {"moe_router_padding_for_quantization", "true"}, {"moe_token_dispatcher_type", "allgather"}}));
        }).find("needs moe_token_dispatcher_type alltoall or flex") != std::string::npos);
}

TEST_CASE("moe_shared_expert_gate: an h x 1 GEMM, a sigmoid and a multiply on the shared expert") {
  const auto M0 = moe_costs_of(moe()), M1 = moe_costs_of(moe({{"moe_shared_expert_gate", "true"}}));
  CHECK(M1.shared_f.flops - M0.shared_f.flops == doctest::Approx(2.0 * 4096 * 2048));
  CHECK(M1.shared_f.kernels == M0.shared_f.kernels + 3);
  CHECK(M1.shared_f.seconds > M0.shared_f.seconds);
  CHECK(M1.shared_b.seconds > M0.shared_b.seconds);
  // One 1 x h weight per MoE layer (4 layers).
  CHECK(gpt_num_parameters(cfg(moe({{"moe_shared_expert_gate", "true"}}))) - gpt_num_parameters(cfg(moe())) ==
        doctest::Approx(4 * 2048.0));
  CHECK(error_of([] { cfg(moe({{"moe_shared_expert_intermediate_size", "0"}, {"moe_shared_expert_gate", "true"}})); })
            .find("moe_shared_expert_gate: needs moe_shared_expert_intermediate_size") != std::string::npos);
}

TEST_CASE("moe_layer_recompute: Megatron's older spelling of recompute_modules moe") {
  const Trace a = gen(moe({{"moe_layer_recompute", "true"}}));
  const Trace b = gen(moe({{"recompute_granularity", "selective"}, {"recompute_modules", "core_attn moe"}}));
  CHECK(trace_to_json(a).dump() == trace_to_json(b).dump());
  const GptConfig c = cfg(moe({{"moe_layer_recompute", "true"}}));
  CHECK(c.recomputes("moe"));
  CHECK(c.recomputes("core_attn"));
  // The MoE forward again in the backward, its activations not kept.
  CHECK(gpt_memory_per_gpu(c).activations_bytes < gpt_memory_per_gpu(cfg(moe())).activations_bytes);
  const GptConfig l = cfg(moe({{"moe_layer_recompute", "true"}, {"recompute_granularity", "selective"}, {"recompute_modules", "layernorm"}}));
  CHECK(l.recomputes("moe"));
  CHECK(l.recomputes("layernorm"));
  CHECK_FALSE(l.recomputes("core_attn"));
  CHECK(error_of([] { cfg(moe({{"moe_layer_recompute", "true"}, {"recompute_granularity", "full"}, {"recompute_method", "uniform"}, {"recompute_num_layers", "1"}})); })
            .find("moe_layer_recompute: cannot be used with recompute_granularity full") != std::string::npos);
}

TEST_CASE("moe 2025-2026 flags: Megatron-LM's flags import as modelled") {
  const MegatronImport im = import_megatron_args(
      read_megatron_launch("torchrun pretrain_gpt.py --num-layers 4 --hidden-size 2048 --num-attention-heads 16"
                           " --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --bf16"
                           " --tokenizer-type GPT2BPETokenizer --use-distributed-optimizer --fp8-format e4m3"
                           " --num-experts 16 --moe-router-topk 4 --moe-ffn-hidden-size 1024"
                           " --moe-shared-expert-intermediate-size 2048 --moe-shared-expert-gate --moe-latent-size 512"
                           " --moe-router-dtype fp32 --moe-router-padding-for-fp8 --moe-token-dispatcher-type alltoall"
                           " --moe-grouped-gemm --moe-layer-recompute --expert-model-parallel-size 8",
                           "job.sh", {}),
      16, {});
  CHECK(im.not_modelled.empty());
  ParamMap pm = params_from_json(im.params, JsonPath{"job.sh", "/workload/params"});
  pm["gpu"] = "h100";
  const GptConfig c = gpt_config_from_params(pm, "job.sh");
  CHECK(c.moe.moe_latent_size == 512);
  CHECK(c.moe.moe_shared_expert_gate);
  CHECK(c.moe.moe_router_dtype == "fp32");
  CHECK(c.moe.moe_router_padding_for_quantization);
  CHECK(c.recomputes("moe"));
}

TEST_CASE("nemotron-3-super-120b-a12b: the catalogue's latent-MoE hybrid model has its published size") {
  ParamMap p = {{"model", "nemotron-3-super-120b-a12b"}, {"gpu", "gb200"}, {"world_size", "64"},
                {"global_batch_size", "64"}, {"micro_batch_size", "1"}, {"tensor_model_parallel_size", "1"},
                {"pipeline_model_parallel_size", "1"}, {"expert_model_parallel_size", "64"}};
  const GptConfig c = cfg(p);
  CHECK(c.hybrid_layers().size() == 88);
  CHECK(c.moe.moe_latent_size == 1024);
  CHECK(c.moe.moe_router_dtype == "fp32");
  // 120 B total parameters (the size in its name; 3 %, the tolerance of the other Nemotron entries).
  const double P = gpt_num_parameters(c);
  MESSAGE("nemotron-3-super " << P / 1e9 << "B");
  CHECK(P == doctest::Approx(120e9).epsilon(0.03));
  // Megatron-LM's hybrid_flops with the latent (moe_layer_flops): 40 MoE sublayers of routed 4 T L k F + 4 T h L
  // instead of 4 T h k F (squared ReLU: no 1.5), forward x 3.
  ParamMap q = p;
  q["moe_latent_size"] = "0";
  const double T = 64.0 * 8192, h = 4096, L = 1024, k = 22, F = 2688;
  CHECK(gpt_model_flops(cfg(q)) - gpt_model_flops(c) == doctest::Approx(3.0 * 40 * (4 * T * k * F * (h - L) - 4 * T * h * L)));
}

TEST_CASE("first_last_layers_bf16 with MoE: the end layers' MoE blocks in bf16, their experts without FP8 copies") {
  // 4 MoE layers on PP 2, the first and the last in bf16 (Megatron's defaults: one at each end); flex dispatcher,
  // whose FP8 runs dispatch FP8 tokens.
  const ParamMap q = {{"precision", "fp8"}, {"fp8_recipe", "mxfp8"}, {"gpu", "gb200"}, {"moe_token_dispatcher_type", "flex"}};
  ParamMap e = q, bf = q;
  e["first_last_layers_bf16"] = "true";
  bf["precision"] = "bf16";
  const GptConfig c8 = cfg(moe(q)), ce = cfg(moe(e)), cb = cfg(moe(bf));
  const auto K8 = gpt_detail::gpt_step_kernels(c8, cm_of(c8), "test"), Ke = gpt_detail::gpt_step_kernels(ce, cm_of(ce), "test"),
             Kb = gpt_detail::gpt_step_kernels(cb, cm_of(cb), "test");
  REQUIRE(Ke.moe.size() == 4);
  // Layers 0 and 3 priced as the bf16 run's (no quantisation passes, bf16 GEMMs), 1 and 2 as the FP8 run's.
  for (std::size_t i : {0u, 3u}) {
    CHECK(Ke.moe[i].experts_f.seconds == doctest::Approx(Kb.moe[i].experts_f.seconds));
    CHECK(Ke.moe[i].experts_b.seconds == doctest::Approx(Kb.moe[i].experts_b.seconds));
    CHECK(Ke.moe[i].shared_f.kernels == Kb.moe[i].shared_f.kernels);
    CHECK(Ke.moe[i].experts_f.kernels < K8.moe[i].experts_f.kernels);  // the casts are gone
  }
  for (std::size_t i : {1u, 2u}) CHECK(Ke.moe[i].experts_f.seconds == doctest::Approx(K8.moe[i].experts_f.seconds));
  // Dispatch: the bf16 layer (global 0) sends bf16 tokens, the FP8 layer (global 1) FP8 with 1x128 scales.
  const Trace t = gen(moe(e));
  CHECK(first_op(t, ".l0.fwd.moe.dispatch").bytes == doctest::Approx(4096.0 * 4 * 2048 * 2));
  CHECK(first_op(t, ".l1.fwd.moe.dispatch").bytes == doctest::Approx(4096.0 * 4 * 2048 * (1.0 + 4.0 / 128.0)));
  // Weights: each stage holds one bf16 layer, which keeps no FP8 copies (data + transpose, 2 bytes per weight) of
  // its dense part or of its experts.
  const double saved = 2.0 * (gpt_detail::layer_params_moe_model(c8, true) + gpt_detail::expert_params_per_gpu(c8));
  CHECK(gpt_memory_of_stage(c8, 0).weights_bytes - gpt_memory_of_stage(ce, 0).weights_bytes == doctest::Approx(saved));
  CHECK(gpt_memory_of_stage(ce, 1).activations_bytes > gpt_memory_of_stage(c8, 1).activations_bytes);  // bf16 inputs saved
  // MLA layers in bf16 are not priced.
  CHECK(error_of([] {
          cfg(moe({{"precision", "fp8"}, {"fp8_recipe", "mxfp8"}, {"first_last_layers_bf16", "true"},
                   {"multi_latent_attention", "true"}}));
        }).find("first_last_layers_bf16: is not modelled with multi_latent_attention") != std::string::npos);
}

TEST_CASE("mtp_num_layers with MoE: the MTP layer is an MoE layer with its own dispatch and combine") {
  // moe(): 4 MoE layers on PP 2, EP 8, 2 micro-batches per rank; the MTP layers run on the last stage.
  const Trace base = gen(moe()), t1 = gen(moe({{"mtp_num_layers", "1"}})), t2 = gen(moe({{"mtp_num_layers", "2"}}));
  const RankTrace& last = t1.ranks.back();
  auto count = [](const RankTrace& r, const std::string& part) {
    int n = 0;
    for (const auto& op : r.ops) n += op.name.find(part) != std::string::npos;
    return n;
  };
  auto find = [](const RankTrace& r, const std::string& part) -> const Op& {
    for (const auto& op : r.ops)
      if (op.name.find(part) != std::string::npos) return op;
    FAIL("no op containing " << part);
    return r.ops.front();
  };
  // Per micro-batch one forward and one backward dispatch / combine of the MTP depth, tokens x top-4 x h x 2 B,
  // on the MTP layer's own EP communicator (uniform router: the last decoder layer's matrix).
  CHECK(count(last, ".mtp0.fwd.moe.experts") == 2);
  CHECK(count(last, ".mtp0.bwd.moe.experts") == 2);
  CHECK(count(t1.ranks.front(), ".mtp0.") == 0);
  const Op& d = find(last, "mb0.mtp0.fwd.moe.dispatch");
  CHECK(d.bytes == doctest::Approx(4096.0 * 4 * 2048 * 2));
  CHECK(t1.comms.at(d.comm).name.find("ep.mtp.dispatch") != std::string::npos);
  CHECK(find(last, "mb0.mtp0.bwd.moe.combine").bytes == doctest::Approx(d.bytes));
  // Its experts are priced as the last decoder layer's (same load), its attention part without a dense MLP.
  CHECK(find(last, "mb0.mtp0.fwd.moe.experts").duration_s == doctest::Approx(find(last, "mb0.l3.fwd.moe.experts").duration_s));
  const GptConfig c = cfg(moe({{"mtp_num_layers", "1"}}));
  const auto K = gpt_detail::gpt_step_kernels(c, cm_of(c), "test");
  CHECK(K.mtp_moe);
  // One depth: embedding, the 2h -> h projection (4096 tokens) and the attention block; no dense MLP.
  CHECK(K.mtp_layer_f.flops == doctest::Approx(K.embed_fwd.flops + 2.0 * 4096 * 2048 * 4096 + K.layer.fwd_attn.flops));
  CHECK(K.mtp_layers.flops == doctest::Approx(K.mtp_layer_f.flops));
  // Two depths: two MoE blocks per micro-batch, one communicator pair.
  CHECK(count(t2.ranks.back(), ".mtp1.fwd.moe.experts") == 2);
  int mtp_comms = 0;
  for (const auto& cm : t2.comms) mtp_comms += cm.name.find("ep.mtp.") != std::string::npos;
  CHECK(mtp_comms == 2);
  CHECK(count(base.ranks.back(), ".mtp") == 0);
  // A dense model's MTP layer keeps its dense MLP (one op per micro-batch on the loss stage).
  ParamMap dp = moe({{"mtp_num_layers", "1"}});
  for (const char* k : {"num_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size",
                        "expert_model_parallel_size", "moe_token_dispatcher_type", "moe_grouped_gemm"})
    dp.erase(k);
  const Trace dense = gen(dp);
  CHECK(count(dense.ranks.back(), ".mtp.fwd") == 2);
  CHECK(count(dense.ranks.back(), ".mtp0.") == 0);
}

TEST_CASE("fp8_param_gather / fp4_param_gather with MoE: the experts' weights are FP8 (NVFP4), gathered so over EDP") {
  // 32 GPUs, PP 2: 16 per stage, EP 8 -> EDP 2; 2 MoE layers per stage of 2 local experts each.
  const ParamMap q = {{"world_size", "32"}, {"precision", "fp8"}, {"fp8_recipe", "tensorwise"}};
  ParamMap g = q;
  g["fp8_param_gather"] = "true";
  const GptConfig c8 = cfg(moe(q)), cg = cfg(moe(g));
  REQUIRE(cg.expert_data_parallel() == 2);
  const Trace t8 = gen(moe(q)), tg = gen(moe(g));
  const double Pe_layer = gpt_detail::expert_params_per_gpu(cg), stage_experts = 2.0 * Pe_layer;
  // The expert parameter all-gather moves the 1-byte FP8 data instead of bf16.
  CHECK(first_op(t8, "edp.experts.ag").bytes == doctest::Approx(2.0 * stage_experts));
  CHECK(first_op(tg, "edp.experts.ag").bytes == doctest::Approx(1.0 * stage_experts));
  // After the optimizer step the expert shard is cast to FP8 and the amaxes (tensorwise: one per weight tensor,
  // 2 local experts x fc1 / fc2 x 2 layers = 8) all-reduced over EDP.
  const Op& ar = first_op(tg, "fp8_param_gather.amax.ar.experts");
  CHECK(ar.bytes == doctest::Approx(4.0 * 8));
  CHECK(tg.comms.at(ar.comm).ranks.size() == 2);
  CHECK(first_op(tg, "fp8_param_gather.cast.experts").duration_s > 0);
  // Memory: neither the dense weights of the stage's 2 layers nor its experts keep a bf16 copy.
  CHECK(gpt_memory_of_stage(c8, 0).weights_bytes - gpt_memory_of_stage(cg, 0).weights_bytes ==
        doctest::Approx(2.0 * (2.0 * gpt_detail::layer_params_moe_model(c8, true) + stage_experts)));
  // With first_last_layers_bf16 the stage's bf16 layer's experts gather bf16: 2 + 1 bytes over the two layers.
  ParamMap e = g;
  e["first_last_layers_bf16"] = "true";
  CHECK(first_op(gen(moe(e)), "edp.experts.ag").bytes == doctest::Approx(3.0 * Pe_layer));
  // fp4_param_gather: the 4-bit data alone (0.5 bytes), every rank setting the block scales itself.
  ParamMap f = {{"world_size", "32"}, {"gpu", "gb200"}, {"precision", "fp4"}, {"fp4_param_gather", "true"}};
  CHECK(first_op(gen(moe(f)), "edp.experts.ag").bytes == doctest::Approx(0.5 * stage_experts));
  // (With multi-latent attention: tests/workloads/test_gpt_recompute_modules.cpp.)
}

TEST_CASE("MoE expert quantisation: one pass over every routed row, split per local expert as Transformer Engine does") {
  // 16 experts on EP 8 (2 local), uniform router: 4096 x 4 / 8 = 2048 rows per rank, hidden 2048, fc1 2 x 1024.
  const ParamMap h = {{"gpu", "gb200"}, {"hidden_size", "2048"}, {"num_attention_heads", "16"}};
  auto with = [&](const char* precision, const char* recipe) {
    ParamMap p = h;
    p["precision"] = precision;
    if (std::string(precision) == "fp8") p["fp8_recipe"] = recipe;
    return moe_costs_of(moe(p));
  };
  const auto bf = with("bf16", ""), dl = with("fp8", "delayed"), mx = with("fp8", "mxfp8"), ts = with("fp8", "tensorwise"),
             f4 = with("fp4", "");
  // Forward: the fc1 input (K 2048) and the fc2 input (K 1024). Delayed scaling: one multi-tensor cast-transpose
  // each; mxfp8 / tensorwise: one kernel per local expert each; NVFP4: one fused grouped kernel each (2048 and 1024
  // are multiples of 128).
  CHECK(dl.experts_f.kernels == bf.experts_f.kernels + 2);
  CHECK(mx.experts_f.kernels == bf.experts_f.kernels + 2 * 2);
  CHECK(ts.experts_f.kernels == bf.experts_f.kernels + 2 * 2);
  CHECK(f4.experts_f.kernels == bf.experts_f.kernels + 2);
  // Backward: the two output gradients (fc2's, 2048 wide; fc1's, 2 x 1024).
  CHECK(mx.experts_b.kernels == bf.experts_b.kernels + 2 * 2);
  // Same GEMMs (FP8 rate) for mxfp8 and delayed: the forward differs by the casts alone -- mxfp8's 2 + 2 x (1 + 1/32)
  // bytes per element in one kernel per expert (R rows each) against delayed's 4 bytes in one kernel over 2R rows.
  ParamMap p8 = h;
  p8["precision"] = "fp8";
  const GptConfig c8 = cfg(moe(p8));
  const models::ComputeModel cm = cm_of(c8);
  const double R = gpt_detail::gpt_step_kernels(c8, cm, "test").loads.front().expert_tokens.front();
  auto cast = [&](double bytes) {
    return cm.kernel_time_s(models::KernelDesc::memory(models::MemoryKernel::Cast, bytes, models::Precision::BF16));
  };
  const double mxb = 2.0 + 2.0 * (1.0 + 1.0 / 32.0);
  const double mx_casts = 2.0 * cast(mxb * R * 2048) + 2.0 * cast(mxb * R * 1024);
  const double dl_casts = cast(4.0 * 2.0 * R * 2048) + cast(4.0 * 2.0 * R * 1024);
  CHECK(mx.experts_f.seconds - dl.experts_f.seconds == doctest::Approx(mx_casts - dl_casts));
}

TEST_CASE("moe_router_fusion: Megatron's unfused softmax + torch.topk at their measured rate, fused one softmax pass") {
  // T = 4096 tokens per micro-batch (TP 1, no SP), E = 16 experts: the router's score function and top-k read
  // T x E fp32 scores, 262,144 bytes.
  const auto M0 = moe_costs_of(moe()), M1 = moe_costs_of(moe({{"moe_router_fusion", "true"}}));
  const models::ComputeModel cm = cm_of(cfg(moe()));
  const double bytes = 4096.0 * 16 * 4;
  const double unfused = cm.kernel_time_s(models::KernelDesc::memory(models::MemoryKernel::TopK, bytes));
  const double fused = cm.kernel_time_s(models::KernelDesc::memory(models::MemoryKernel::Softmax, bytes));
  // The H100's (kept from the H200's) topk fraction: 0.01531 of 3.35 TB/s, 51 GB/s -> 5.1 us + launch; softmax 0.4223.
  CHECK(unfused == doctest::Approx(bytes / (0.01531 * 3350e9) + models::default_compute_calibration("h100").launch_overhead_s).epsilon(0.01));
  CHECK(unfused > 2 * fused);
  CHECK(M0.pre_f.seconds - M1.pre_f.seconds == doctest::Approx(unfused - fused).epsilon(1e-9));
  CHECK(M0.pre_f.kernels == M1.pre_f.kernels);
  // Backward (the softmax gradient over the same scores) is the same either way.
  CHECK(M1.pre_b.seconds == doctest::Approx(M0.pre_b.seconds));
  // (--moe-router-fusion imports as the key: tests/workloads/test_megatron_args.cpp.)
}

TEST_CASE("moe_aux_loss_coeff: the load-balancing loss priced where Megatron computes it, its tokens per expert summed over TP x CP") {
  // T = 4096 tokens, E = 16 experts: every T x E pass is a memory-bound kernel over 65,536 elements.
  const auto M0 = moe_costs_of(moe());
  // Megatron's default coefficient 0 computes no loss whatever the type; sinkhorn / none have none either.
  CHECK(moe_costs_of(moe({{"moe_aux_loss_coeff", "0"}})).pre_f.kernels == M0.pre_f.kernels);
  CHECK(moe_costs_of(moe({{"moe_router_load_balancing_type", "none"}, {"moe_aux_loss_coeff", "0.01"}})).pre_f.kernels ==
        M0.pre_f.kernels);
  // Unfused (compute_routing_scores_for_aux_loss: score function + torch.topk, the routing map's four kernels;
  // the two reductions; three loss ops and two logging ops): 12 forward kernels; backward 6.
  const auto Mu = moe_costs_of(moe({{"moe_aux_loss_coeff", "0.01"}}));
  CHECK(Mu.pre_f.kernels == M0.pre_f.kernels + 12);
  CHECK(Mu.pre_b.kernels == M0.pre_b.kernels + 6);
  CHECK(moe_costs_of(moe({{"moe_aux_loss_coeff", "0.01"}, {"moe_router_load_balancing_type", "seq_aux_loss"}})).pre_f.kernels ==
        Mu.pre_f.kernels + 1);
  // Fused (TE's fused score kernel and fused_moe_aux_loss): 5 forward, 5 backward, and cheaper than unfused,
  // whose extra top-k runs at the measured 51 GB/s.
  const ParamMap fused = {{"moe_router_fusion", "true"}};
  ParamMap fused_aux = fused;
  fused_aux["moe_aux_loss_coeff"] = "0.01";
  const auto Mf0 = moe_costs_of(moe(fused)), Mf = moe_costs_of(moe(fused_aux));
  CHECK(Mf.pre_f.kernels == Mf0.pre_f.kernels + 5);
  CHECK(Mf.pre_b.kernels == Mf0.pre_b.kernels + 5);
  const models::ComputeModel cm = cm_of(cfg(moe()));
  const double TE = 4096.0 * 16;
  auto t = [&](models::MemoryKernel k, double bytes) { return cm.kernel_time_s(models::KernelDesc::memory(k, bytes)); };
  const double small = t(models::MemoryKernel::Elementwise, 12.0 * 16);
  CHECK(Mf.pre_f.seconds - Mf0.pre_f.seconds ==
        doctest::Approx(t(models::MemoryKernel::Softmax, 4 * TE) + t(models::MemoryKernel::Elementwise, TE) +
                        t(models::MemoryKernel::Elementwise, 4 * TE) + 2 * small)
            .epsilon(1e-9));
  CHECK(Mu.pre_f.seconds - M0.pre_f.seconds > Mf.pre_f.seconds - Mf0.pre_f.seconds + t(models::MemoryKernel::TopK, 4 * TE) / 2);
  // The trace: one all-reduce of E int64 counts per MoE layer forward over the TP group (TP 2 here), none with TP 1
  // (and CP 1) or without the loss.
  const ParamMap tp2 = {{"tensor_model_parallel_size", "2"}, {"sequence_parallel", "true"}, {"expert_tensor_parallel_size", "1"},
                        {"moe_aux_loss_coeff", "0.01"}};
  const Trace t2 = gen(moe(tp2));
  CHECK(first_op(t2, ".moe.aux.ar").bytes == doctest::Approx(16.0 * 8));
  CHECK(t2.comms.at(static_cast<std::size_t>(first_op(t2, ".moe.aux.ar").comm)).ranks.size() == 2);
  std::size_t n_ar = 0, n_router = 0;
  for (const auto& op : t2.ranks.at(0).ops) {
    n_ar += op.name.find(".moe.aux.ar") != std::string::npos;
    n_router += op.name.find("fwd.moe.router") != std::string::npos;
  }
  CHECK(n_ar > 0);
  CHECK(n_ar == n_router);
  for (const Trace& tr : {gen(moe({{"moe_aux_loss_coeff", "0.01"}})), gen(moe({{"tensor_model_parallel_size", "2"}, {"sequence_parallel", "true"}, {"expert_tensor_parallel_size", "1"}}))})
    for (const auto& op : tr.ranks.at(0).ops) CHECK(op.name.find(".moe.aux.ar") == std::string::npos);
  // CP 2 x TP 2: the group is TP x CP (4 ranks).
  ParamMap cp = tp2;
  cp["context_parallel_size"] = "2";
  cp["world_size"] = "32";
  const Trace t4 = gen(moe(cp));
  CHECK(t4.comms.at(static_cast<std::size_t>(first_op(t4, ".moe.aux.ar").comm)).ranks.size() == 4);
  // Memory: the loss keeps its fp32 scores, 4 E bytes per token, for every MoE layer a micro-batch holds.
  const double per_layer_mb = 4096.0 * 16 * 4;
  const double d = gpt_memory_of_stage(cfg(moe({{"moe_aux_loss_coeff", "0.01"}})), 0).activations_bytes -
                   gpt_memory_of_stage(cfg(moe()), 0).activations_bytes;
  CHECK(d > 0);
  CHECK(d / per_layer_mb == doctest::Approx(std::round(d / per_layer_mb)));
  // Megatron's checks.
  CHECK(error_of([] { cfg(moe({{"moe_router_load_balancing_type", "sinkhorn"}, {"moe_aux_loss_coeff", "0.01"}})); })
            .find("sinkhorn routing does not support an aux loss") != std::string::npos);
}

TEST_CASE("moe_z_loss_coeff, moe_router_enable_expert_bias, moe_router_force_load_balancing") {
  const auto M0 = moe_costs_of(moe());
  // z-loss: logsumexp's four T x E kernels and eight small ones forward; six small and four T x E backward.
  const auto Mz = moe_costs_of(moe({{"moe_z_loss_coeff", "0.001"}}));
  CHECK(Mz.pre_f.kernels == M0.pre_f.kernels + 12);
  CHECK(Mz.pre_b.kernels == M0.pre_b.kernels + 10);
  CHECK(Mz.pre_f.seconds > M0.pre_f.seconds);
  // Expert bias (sigmoid scores, as Megatron requires): unfused, the bias add and the score gather before the
  // count; fused, the count only. Refused with softmax.
  const ParamMap sig = {{"moe_router_score_function", "sigmoid"}};
  ParamMap bias = sig;
  bias["moe_router_enable_expert_bias"] = "true";
  CHECK(moe_costs_of(moe(sig)).pre_f.seconds == doctest::Approx(M0.pre_f.seconds));
  CHECK(moe_costs_of(moe(bias)).pre_f.kernels == M0.pre_f.kernels + 3);
  ParamMap bias_fused = bias;
  bias_fused["moe_router_fusion"] = "true";
  CHECK(moe_costs_of(moe(bias_fused)).pre_f.kernels == M0.pre_f.kernels + 1);
  CHECK(moe_costs_of(moe(bias)).pre_b.kernels == M0.pre_b.kernels);
  CHECK(error_of([] { cfg(moe({{"moe_router_enable_expert_bias", "true"}})); })
            .find("needs moe_router_score_function sigmoid or sqrtsoftplus") != std::string::npos);
  CHECK(error_of([] { cfg(moe({{"moe_router_score_function", "tanh"}})); }).find("expected one of softmax, sigmoid, sqrtsoftplus") !=
        std::string::npos);
  // Forced balance: the random logits (a clone and normal_), a uniform load; refused with a skewed load.
  const auto Mr = moe_costs_of(moe({{"moe_router_force_load_balancing", "true"}}));
  CHECK(Mr.pre_f.kernels == M0.pre_f.kernels + 2);
  CHECK(Mr.pre_b.kernels == M0.pre_b.kernels);
  CHECK(error_of([] { cfg(moe({{"moe_router_force_load_balancing", "true"}, {"moe_load", "zipf"}})); })
            .find("routes at random (a uniform load)") != std::string::npos);
}

TEST_CASE("moe_input_jitter_eps: the router input times uniform noise, priced and kept as Megatron-LM runs it") {
  const auto M0 = moe_costs_of(moe());
  const auto Mj = moe_costs_of(moe({{"moe_input_jitter_eps", "0.01"}}));
  // Forward: the scalar high - low, torch.rand, the scaling, the shift and the product (five kernels, four over
  // the 4096 x 2048 router input); backward: the gradient times the noise.
  CHECK(Mj.pre_f.kernels == M0.pre_f.kernels + 5);
  CHECK(Mj.pre_b.kernels == M0.pre_b.kernels + 1);
  CHECK(Mj.pre_f.seconds > M0.pre_f.seconds);
  CHECK(Mj.pre_b.seconds > M0.pre_b.seconds);
  // The forward moves 8 bytes per element (2 + 4 + 4 + 6, bf16) against the backward's 3 x 2: at one memory
  // rate the added forward time is 8/6 of the backward's, less the scalar kernel's launch.
  const double df = Mj.pre_f.seconds - M0.pre_f.seconds, db = Mj.pre_b.seconds - M0.pre_b.seconds;
  CHECK(df > db);
  // Memory: the noise and the jittered input, bf16, per token of each MoE layer; each stage holds 2 MoE layers,
  // stage 0 of 2 in-flight micro-batches (1F1B on PP 2), stage 1 of 1, 4096 tokens of hidden 2048 each.
  for (std::int64_t st : {0, 1}) {
    const double added = gpt_memory_of_stage(cfg(moe({{"moe_input_jitter_eps", "0.01"}})), st).activations_bytes -
                         gpt_memory_of_stage(cfg(moe()), st).activations_bytes;
    CHECK(added == doctest::Approx(2.0 * 2.0 * 2048 * 4096 * 2 * (st == 0 ? 2 : 1)));
  }
  CHECK(error_of([] { cfg(moe({{"moe_input_jitter_eps", "0"}})); }).find("must be > 0") != std::string::npos);
  // Megatron-LM's flag imports as modelled.
  const MegatronImport m =
      workloads_test::import_small("--num-experts 8 --expert-model-parallel-size 8 --moe-input-jitter-eps 0.01");
  CHECK(m.params.at("moe_input_jitter_eps") == doctest::Approx(0.01));
  CHECK(m.not_modelled.empty());
}
