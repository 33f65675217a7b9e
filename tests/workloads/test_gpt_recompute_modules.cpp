// Megatron-Core's recompute_modules mla_up_proj, mlp and shared_experts (multi_latent_attention.py,
// transformer_layer.py, moe/moe_layer.py at NVIDIA/Megatron-LM@d98e8a64) and fp8_param_gather with multi-latent
// attention: the recomputed forwards in the trace, and the stored activations they save, against hand-computed
// amounts.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <string>

#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/params.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;
using workloads_test::gen;

namespace {

// A small DeepSeek-shaped model on 8 H100s (TP 1, PP 1, EP 8, DP 8, one micro-batch of 4096 tokens per rank):
// 4 layers, the first dense; MLA with 16 heads, q / kv latents 512 / 256, per-head dims qk 64 + RoPE 32, v 64;
// 16 experts of 1024 (top 4) and a shared expert of 1024.
ParamMap mla(ParamMap over = {}) {
  ParamMap p = {{"num_layers", "4"},          {"hidden_size", "2048"},        {"num_attention_heads", "16"},
                {"ffn_hidden_size", "5632"},  {"swiglu", "true"},             {"normalization", "RMSNorm"},
                {"position_embedding_type", "rope"}, {"untie_embeddings_and_output_weights", "true"},
                {"seq_length", "4096"},       {"padded_vocab_size", "32000"}, {"micro_batch_size", "1"},
                {"global_batch_size", "8"},   {"tensor_model_parallel_size", "1"},
                {"pipeline_model_parallel_size", "1"}, {"world_size", "8"}, {"gpu", "h100"},
                {"recompute_granularity", "selective"}, {"recompute_modules", "core_attn"},
                {"multi_latent_attention", "true"}, {"q_lora_rank", "512"}, {"kv_lora_rank", "256"},
                {"qk_head_dim", "64"}, {"qk_pos_emb_head_dim", "32"}, {"v_head_dim", "64"},
                {"num_experts", "16"}, {"moe_router_topk", "4"}, {"moe_ffn_hidden_size", "1024"},
                {"moe_shared_expert_intermediate_size", "1024"}, {"moe_layer_freq", "[0,1,1,1]"},
                {"expert_model_parallel_size", "8"}, {"moe_token_dispatcher_type", "alltoall"},
                {"moe_grouped_gemm", "true"}, {"use_distributed_optimizer", "true"}};
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}

GptConfig cfg(const ParamMap& p) { return gpt_config_from_params(p, "--param"); }

gpt_detail::GptStepKernels kernels(const ParamMap& p) {
  const GptConfig c = cfg(p);
  return gpt_detail::gpt_step_kernels(c, workloads_test::compute_of(c.gpu), "test");
}

int count(const Trace& t, const std::string& part) {
  int n = 0;
  for (const auto& op : t.ranks.at(0).ops) n += op.name.find(part) != std::string::npos;
  return n;
}

const Op& op_named(const Trace& t, const std::string& name) {
  for (const auto& op : t.ranks.at(0).ops)
    if (op.name == name) return op;
  FAIL("no op " << name);
  static Op none;
  return none;
}

double activations(const ParamMap& p) { return gpt_memory_per_gpu(cfg(p)).activations_bytes; }

constexpr double kTokens = 4096;  // one micro-batch of one sequence, no TP / CP

}  // namespace

TEST_CASE("recompute_modules mla_up_proj: the up-projections again before the attention's backward, Q/K/V not stored") {
  ParamMap up = mla();
  up["recompute_modules"] = "core_attn mla_up_proj";
  const auto K = kernels(up);
  // The recomputed part: the two latent norms and the q / kv up-projection GEMMs (4096 tokens: 512 -> 16 x 96 and
  // 256 -> 16 x 128) and RoPE. Its GEMM FLOPs by hand: 2 x T x (512 x 1536 + 256 x 2048).
  CHECK(K.layer.recompute_mla_up.kernels >= 4);
  const double gemm_flops = 2.0 * kTokens * (512.0 * 1536 + 256.0 * 2048);
  CHECK(K.layer.recompute_mla_up.flops >= gemm_flops);
  CHECK(K.layer.recompute_mla_up.flops < 1.01 * gemm_flops);  // the norms and RoPE add no GEMM-sized work
  // In the trace: each layer's attention backward is longer by exactly that part.
  const Trace base = gen(mla()), t = gen(up);
  for (const char* l : {"mb0.l0.bwd.attn", "mb0.l3.bwd.attn"}) {
    CAPTURE(l);
    CHECK(op_named(t, l).duration_s - op_named(base, l).duration_s ==
          doctest::Approx(K.layer.recompute_mla_up.seconds).epsilon(1e-9));
  }
  // Memory, one micro-batch in flight (PP 1): the core attention's saved Q, K (96 per head) and V (64 per head),
  // bf16, are gone from every layer but the one whose backward holds them again:
  // (4 - 1) layers x 4096 tokens x 2 B x 16 x (96 + 96 + 64).
  CHECK(activations(mla()) - activations(up) == doctest::Approx(3.0 * kTokens * 2.0 * 16.0 * (96 + 96 + 64)));
  // Megatron-Core's rule: only with multi-latent attention.
  ParamMap gqa = up;
  gqa["multi_latent_attention"] = "false";
  CHECK(error_of([&] { cfg(gqa); }).find("'mla_up_proj' needs multi_latent_attention") != std::string::npos);
}

TEST_CASE("recompute_modules mlp: a dense layer's MLP forward again with its TP collectives; MoE layers untouched") {
  ParamMap m = mla({{"recompute_modules", "mlp"}});
  const Trace base = gen(mla({{"recompute_modules", "layernorm"}})), t = gen(m);
  // Layer 0 is the only dense layer: one recomputed MLP per micro-batch, just before that layer's MLP backward.
  CHECK(count(base, ".recompute.mlp") == 0);
  CHECK(count(t, ".recompute.mlp") == 1);
  CHECK(op_named(t, "mb0.l0.recompute.mlp").duration_s == doctest::Approx(kernels(m).layer.recompute_mlp.seconds));
  CHECK(count(t, ".recompute.moe") == 0);
  // Memory: the dense MLP keeps only its input (2h) where it kept the norm input (2h), fc1's input (2h), the
  // activation's input (2 x 2 x 5632) and fc2's input (2 x 5632) -- only layer 0, and during its backward the
  // recomputed tensors are back: no saving with one micro-batch and one dense layer ...
  CHECK(activations(m) == doctest::Approx(activations(mla({{"recompute_modules", "core_attn"}}))));
  // ... but with two micro-batches in flight the stored first one keeps only the input (PP 2, 1F1B: stage 0 holds
  // two micro-batches at its peak).
  const ParamMap pp = {{"pipeline_model_parallel_size", "2"}, {"world_size", "16"}, {"global_batch_size", "32"}};
  ParamMap m2 = mla(pp), c2 = mla(pp);
  m2["recompute_modules"] = "mlp";
  const double saved = kTokens * (2.0 * 2048 + 2.0 * 2.0 * 5632 + 2.0 * 5632);
  CHECK(gpt_memory_of_stage(cfg(c2), 0).activations_bytes - gpt_memory_of_stage(cfg(m2), 0).activations_bytes ==
        doctest::Approx(saved));
  // A dense model: every layer's MLP recomputed, in the trace's backward order.
  ParamMap dense = workloads_test::small_llama(8, 8, {{"recompute_granularity", "selective"}, {"recompute_modules", "mlp"}});
  const Trace d = gen(dense);
  int mlp_bwd = 0;  // the MLP blocks' backward compute ops (not their TP collectives or split GEMMs)
  for (const auto& op : d.ranks.at(0).ops) {
    const std::string& n = op.name;
    mlp_bwd += n.size() > 8 && n.compare(n.size() - 8, 8, ".bwd.mlp") == 0;
  }
  CHECK(mlp_bwd == 4 * 2);  // 4 micro-batches (DP 2) x the stage's 2 layers
  CHECK(count(d, ".recompute.mlp") == mlp_bwd);
}

TEST_CASE("recompute_modules shared_experts: the shared expert's forward again before its backward") {
  ParamMap s = mla({{"recompute_modules", "shared_experts"}});
  const Trace base = gen(mla()), t = gen(s);
  // Three MoE layers, one micro-batch: three recomputed shared experts, priced as the forward's.
  CHECK(count(base, ".recompute.moe.shared") == 0);
  CHECK(count(t, ".recompute.moe.shared") == 3);
  CHECK(op_named(t, "mb0.l1.recompute.moe.shared").duration_s == doctest::Approx(op_named(t, "mb0.l1.fwd.moe.shared").duration_s));
  // Memory: the shared expert's fc1 output (2 x 2 x 1024 per token) and fc2 input (2 x 1024) are not stored in the
  // two MoE layers that are not in their backward.
  CHECK(activations(mla()) - activations(s) == doctest::Approx(2.0 * kTokens * (2.0 * 2.0 * 1024 + 2.0 * 1024)));
  // Megatron-Core refuses it with the shared expert beside the dispatch.
  ParamMap ovl = s;
  ovl["moe_shared_expert_overlap"] = "true";
  CHECK(error_of([&] { cfg(ovl); }).find("cannot be used with moe_shared_expert_overlap") != std::string::npos);
}

TEST_CASE("fp8_param_gather with multi-latent attention: MLA's five linears are FP8 parameters") {
  const ParamMap q = {{"precision", "fp8"}, {"fp8_recipe", "tensorwise"}, {"world_size", "16"}, {"global_batch_size", "16"},
                      {"expert_model_parallel_size", "8"}};
  ParamMap g = q;
  g["fp8_param_gather"] = "true";
  const Trace t8 = gen(mla(q)), tg = gen(mla(g));
  // tensorwise: one fp32 amax per FP8 linear, all-reduced over DP after the step -- per layer MLA's q down / up,
  // kv down / up and output projection and the MLP's (or shared expert's) fc1 / fc2: 7 x 4 layers.
  CHECK(count(t8, "fp8_param_gather") == 0);
  double amax = -1;
  for (const auto& op : tg.ranks.at(0).ops)
    if (op.name == "fp8_param_gather.amax.ar") amax = op.bytes;
  CHECK(amax == doctest::Approx(4.0 * 7 * 4));
  // The decoder layers' parameters are gathered as 1-byte FP8 data: the step's parameter all-gathers move less.
  auto ag_bytes = [](const Trace& t) {
    double b = 0;
    for (const auto& op : t.ranks.at(0).ops)
      if (op.name.rfind("dp.bucket", 0) == 0 && op.name.size() > 3 && op.name.compare(op.name.size() - 3, 3, ".ag") == 0)
        b += op.bytes;
    return b;
  };
  CHECK(ag_bytes(t8) > 0);
  CHECK(ag_bytes(tg) < ag_bytes(t8));
  // Memory: no bf16 copy of the dense layers' weights.
  CHECK(gpt_memory_per_gpu(cfg(mla(g))).weights_bytes < gpt_memory_per_gpu(cfg(mla(q))).weights_bytes);
}
