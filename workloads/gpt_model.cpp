#include "workloads/gpt.hpp"

// Layer 1, model description (derived quantities): parameters per rank and per model, model FLOPs in
// Megatron's conventions, and the memory per GPU (weights, gradients, optimizer state, activations).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>
#include <tuple>

#include "models/gpu.hpp"
#include "sim/base/error.hpp"
#include "workloads/gpt_detail.hpp"

namespace fabricsim::workloads {

namespace gpt_detail {

namespace {
double layer_params_per_rank_dense(const GptConfig& c);
// qk_layernorm's two per-head norms (GptConfig::qk_layernorm), replicated over TP: kv_channels weights each, and
// as many biases for LayerNorm (Transformer Engine's TENorm: RMSNorm has a weight, LayerNorm a weight and a bias).
// MLA's latent norms are in its own count.
double qk_norm_params(const GptConfig& c) {
  if (!c.qk_layernorm || c.moe.multi_latent_attention) return 0.0;
  return (c.normalization == "LayerNorm" ? 4.0 : 2.0) * double(c.head_dim());
}
}  // namespace

// Parameter elements of one transformer layer held by one TP rank. Integer sums first so the value is
// exact (and bit-identical to the SC'21 formula 4h^2 + 2hf + 3h + h + f + h for MHA / GELU / biases).
// MoE / MLA models: the non-expert parameters of one layer on one TP rank (attention, norms, the dense MLP
// of a dense layer; the router and shared expert of an MoE layer). MLA (DeepSeek-V2 arXiv:2405.04434
// Sec. 2.1): the down-projections (h -> q_lora_rank, h -> kv_lora_rank + rope dim) and their norms are
// replicated over TP (Megatron-Core's MLA keeps them duplicated), the up-projections and the output
// projection are split. No biases (RMSNorm models).
// A Gated DeltaNet layer (gdn_layer; GatedDeltaNet in megatron/core/ssm/gated_delta_net/common.py at
// NVIDIA/Megatron-LM@d98e8a64): in_proj h x (2 qk + 2 v + 2 value heads), the depthwise conv1d (2 qk + v) x
// kernel taps (conv_bias False by default), A_log and dt_bias (one per value head), these split over TP; out_norm
// (value_head_dim weights) and out_proj v x h (split). qk = key heads x key dim, v = value heads x value dim.
double gdn_attention_params(const GptConfig& c) {
  const double h = double(c.hidden_size), t = double(c.tensor_model_parallel_size);
  const double qk = double(c.linear_num_key_heads * c.linear_key_head_dim);
  const double v = double(c.linear_num_value_heads * c.linear_value_head_dim), nv = double(c.linear_num_value_heads);
  return (h * (2.0 * qk + 2.0 * v + 2.0 * nv) + (2.0 * qk + v) * double(c.linear_conv_kernel_dim) + 2.0 * nv + v * h) / t +
         double(c.linear_value_head_dim);
}
// A hybrid model's sublayer (sym, GptConfig::hybrid_layer_pattern) has one block and one pre-norm: M the Mamba-2
// mixer (gpt_hybrid.cpp), * the attention, G the Gated DeltaNet, + the MLA attention, - the dense MLP, E the router
// and shared expert.
double layer_params_moe_model(const GptConfig& c, bool moe_layer, bool gdn_layer, char sym) {
  const double h = double(c.hidden_size), t = double(c.tensor_model_parallel_size), a = double(c.num_attention_heads);
  if (sym == 'M') return mamba_params_per_rank(c) + h;
  const auto& e = c.moe;
  double attn;
  if (e.multi_latent_attention) {
    const double qk = double(e.qk_head_dim + e.qk_pos_emb_head_dim), ql = double(e.q_lora_rank),
                 kvl = double(e.kv_lora_rank);
    const double q = ql > 0 ? h * ql + ql + ql * a * qk / t : h * a * qk / t;
    const double kv = h * (kvl + double(e.qk_pos_emb_head_dim)) + kvl + kvl * a * double(e.qk_head_dim + e.v_head_dim) / t;
    attn = q + kv + a * double(e.v_head_dim) * h / t;
  } else {
    const double d = double(c.head_dim()), g = double(c.query_groups());
    attn = h * (a + 2.0 * g) * d / t + a * d * h / t + qk_norm_params(c);
    if (c.add_qkv_bias) attn += (a + 2.0 * g) * d / t;  // add_qkv_bias: the QKV projection's bias, split as its output
    if (c.attention_output_gate) attn += h * a * d / t;  // the gate's columns of linear_qkv
  }
  if (gdn_layer) attn = gdn_attention_params(c);
  const double gate = c.swiglu ? 2.0 : 1.0;
  double mlp;
  if (moe_layer) {
    const double S = double(e.moe_shared_expert_intermediate_size);
    mlp = h * double(e.num_experts) + (gate + 1.0) * h * S / t;
    // moe_shared_expert_gate: a 1 x h weight (shared_experts.py @d98e8a64, gate_weight), not TP-split.
    if (S > 0 && e.moe_shared_expert_gate) mlp += h;
    // Latent MoE: fc1_latent_proj (h -> latent) and fc2_latent_proj (latent -> h), parallel_mode "duplicated"
    // (moe_layer.py @d98e8a64): whole on every TP rank, dense (not expert) parameters.
    if (e.moe_latent_size) mlp += 2.0 * h * double(e.moe_latent_size);
  } else {
    mlp = (gate + 1.0) * h * double(c.ffn()) / t;
  }
  if (sym == '*' || sym == 'G') return attn + h;
  // '+': the hybrid MLA layer has no norms on the q / kv latents (q_layernorm and kv_layernorm IdentityOp in
  // hybrid_stack_spec's mla_layer, megatron/core/models/hybrid/hybrid_layer_specs.py @d98e8a64).
  if (sym == '+') return attn + h - double(e.q_lora_rank > 0 ? e.q_lora_rank : 0) - double(e.kv_lora_rank);
  if (sym == '-' || sym == 'E') return mlp + h;
  return attn + mlp + 2.0 * h;  // two RMSNorms
}
// Expert parameters of one MoE layer on one GPU: E / EP local experts, each split over ETP.
double expert_params_per_gpu(const GptConfig& c) {
  const double gate = c.swiglu ? 2.0 : 1.0;
  return double(c.moe.num_experts / c.moe.expert_model_parallel_size) * (gate + 1.0) * double(c.moe_width()) *
         double(c.moe_ffn()) / double(c.etp());
}
// MoE, MLA or a hybrid / gated-attention model: the models whose layers are counted one by one.
bool moe_model(const GptConfig& c) {
  return c.moe.enabled() || c.moe.multi_latent_attention || c.gdn() || c.attention_output_gate || c.hybrid();
}
std::vector<bool> moe_layers_of(const GptConfig& c) {
  if (c.hybrid()) {  // the pattern's E sublayers
    std::vector<bool> out;
    for (char ch : c.hybrid_layers()) out.push_back(ch == 'E');
    return out;
  }
  if (!c.moe.enabled()) return std::vector<bool>(c.num_layers, false);
  return moe_layer_pattern(c.moe.moe_layer_freq, c.num_layers, "gpt");
}
// Mean non-expert parameters per layer over the model (DP gradient buckets of MoE models).
double mean_layer_params_moe_model(const GptConfig& c) {
  double sum = 0;
  const auto gdn = c.gdn_layers();
  const auto moe = moe_layers_of(c);
  for (std::size_t l = 0; l < moe.size(); ++l)
    sum += layer_params_moe_model(c, moe[l], gdn[l], hybrid_symbol(c, static_cast<std::int64_t>(l)));
  return sum / double(c.num_layers);
}
// A Gated DeltaNet layer's forward FLOPs per token, as gdn_layer_flops (megatron/training/training.py:939-962 at
// NVIDIA/Megatron-LM@d98e8a64; num_floating_point_operations' linear_self_attn_term and hybrid_flops use it) counts
// them: 2 x (h in_proj_dim + conv taps x (2 qk + v) + 4 value heads x value dim^2 + h v), no term in s.
double gdn_flops_per_token(const GptConfig& c) {
  const double h = double(c.hidden_size);
  const double qk = double(c.linear_num_key_heads * c.linear_key_head_dim),
               vd = double(c.linear_num_value_heads * c.linear_value_head_dim),
               nv = double(c.linear_num_value_heads), dv = double(c.linear_value_head_dim);
  return 2.0 * (h * (2.0 * qk + 2.0 * vd + 2.0 * nv) + double(c.linear_conv_kernel_dim) * (2.0 * qk + vd) +
                4.0 * nv * dv * dv + h * vd);
}

std::array<std::int64_t, 2> gdn_cp_widths(const GptConfig& c) {
  const std::int64_t t = c.tensor_model_parallel_size, nv = c.linear_num_value_heads / t;
  const std::int64_t qk = (c.linear_num_key_heads / t) * c.linear_key_head_dim, v = nv * c.linear_value_head_dim;
  return {2 * qk + 2 * v + 2 * nv, v};
}
// Model FLOPs of MoE / MLA models in Megatron-Core's convention (num_floating_point_operations, which
// counts MoE layers with topk x moe_ffn + shared expert widths, MLA's projections, MTP layers): 3 x (2 x
// GEMM weights seen per token + non-causal attention 2 s a (qk + v) per token per layer, halved with
// megatron-core-causal) per token, logits
// 6 h V per token (plus one more per MTP layer).
double moe_model_flops(const GptConfig& c) {
  const double B = double(c.global_batch_size), s = double(c.seq_length), h = double(c.hidden_size),
               a = double(c.num_attention_heads), V = double(c.padded_vocab_size);
  const auto& e = c.moe;
  const double gate = c.swiglu ? 3.0 : 2.0;
  double attn_w, attn_sc;
  if (e.multi_latent_attention) {
    const double qk = double(e.qk_head_dim + e.qk_pos_emb_head_dim), ql = double(e.q_lora_rank),
                 kvl = double(e.kv_lora_rank), v = double(e.v_head_dim);
    attn_w = (ql > 0 ? h * ql + ql * a * qk : h * a * qk) + h * (kvl + double(e.qk_pos_emb_head_dim)) +
             kvl * a * (double(e.qk_head_dim) + v) + a * v * h;
    attn_sc = s * a * (qk + v);
  } else {
    const double d = double(c.head_dim()), g = double(c.query_groups());
    attn_w = h * (a + 2.0 * g) * d + a * d * h + (c.attention_output_gate ? h * a * d : 0.0);
    attn_sc = 2.0 * s * a * d;
  }
  // megatron-core-causal: Megatron-LM from 8873b55d6a (2025-03-06) halves the core attention for the causal mask.
  if (gpt_flops_convention(c) == "megatron-core-causal") attn_sc *= 0.5;
  const double gdn_w = gdn_flops_per_token(c) / 2.0;
  auto layer = [&](bool moe, bool gdn) {
    double w = gdn ? gdn_w : attn_w;
    // Latent MoE as num_floating_point_operations counts it (training.py @d98e8a64: routed experts at
    // moe_latent_size, plus "2 * moe_latent_size  # Up proj and down proj" per hidden unit).
    const double rw = double(c.moe_width());
    if (moe) w += gate * rw * double(e.moe_router_topk) * double(c.moe_ffn()) + gate * h * double(e.moe_shared_expert_intermediate_size) +
                  (e.moe_latent_size ? 2.0 * h * rw : 0.0) + h * double(e.num_experts);
    else w += gate * h * double(c.ffn());
    return 6.0 * (w + (gdn ? 0.0 : attn_sc));  // per token: 2 FLOPs per weight forward, x3 with backward
  };
  double per_token = 0;
  const auto pattern = moe_layers_of(c);
  const auto gdn = c.gdn_layers();
  for (std::size_t l = 0; l < pattern.size(); ++l) per_token += layer(pattern[l], gdn[l]);
  // Megatron-LM lays linear_attention_freq over num_layers + mtp_num_layers when it is an integer (training.py
  // at @d98e8a64: num_layers is extended by the MTP layers before the pattern is built), so an MTP layer counts
  // as GDN where its index falls on one; the MTP layers themselves are built with full attention
  // (gpt_kernels.cpp prices them so).
  auto mtp_gdn = [&](std::int64_t k) {
    const std::string& f = c.linear_attention_freq;
    if (!c.gdn() || f.empty() || !std::all_of(f.begin(), f.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); }))
      return false;
    return (c.num_layers + k + 1) % std::stoll(f) != 0;
  };
  // MTP module (DeepSeek-V3 Sec. 2.2): per depth a projection 2h -> h, one transformer layer (MoE like the
  // last layer) and the shared output head.
  for (std::int64_t k = 0; k < e.mtp_num_layers; ++k)
    per_token += 6.0 * 2.0 * h * h + layer(pattern.empty() ? false : pattern.back(), mtp_gdn(k)) + 6.0 * h * V;
  per_token += 6.0 * h * V;
  return B * s * per_token;
}

double layer_params_per_rank(const GptConfig& c) {
  if (moe_model(c)) return mean_layer_params_moe_model(c);
  return layer_params_per_rank_dense(c);
}
namespace {
double layer_params_per_rank_dense(const GptConfig& c) {
  const std::int64_t h = c.hidden_size, f = c.ffn(), d = c.head_dim(), a = c.num_attention_heads,
                     g = c.query_groups();
  const double t = double(c.tensor_model_parallel_size);
  const std::int64_t fc1 = c.swiglu ? 2 * f : f;
  const std::int64_t gemm_w = h * (a + 2 * g) * d + a * d * h + h * fc1 + f * h;
  const bool bias = c.normalization == "LayerNorm";  // Megatron GPT: biases on; Llama-style configs disable them
  const std::int64_t biases = bias ? (a + 2 * g) * d + h + fc1 + h : c.add_qkv_bias ? (a + 2 * g) * d : 0;
  // (the parallel block, GptConfig::parallel_block: one norm a layer)
  const double norms = (c.normalization == "LayerNorm" ? 4.0 * double(h) : 2.0 * double(h)) / (c.parallel_block() ? 2.0 : 1.0) +
                       qk_norm_params(c);
  return double(gemm_w + biases) / t + norms;
}
}  // namespace

double embedding_params_per_rank(const GptConfig& c) {
  const double h = double(c.hidden_size), V = double(c.padded_vocab_size), t = double(c.tensor_model_parallel_size);
  return V * h / t + (c.position_embedding_type == "learned_absolute" ? double(c.seq_length) * h : 0.0);
}
double mtp_params_per_rank(const GptConfig& c) {
  // Megatron-Core MultiTokenPredictionLayer (multi_token_prediction.py at NVIDIA/Megatron-LM@d98e8a64dd): enorm,
  // hnorm and final_layernorm (h each), eh_proj (2h -> h, column-parallel) and one transformer layer built like
  // the decoder's last; its experts are counted by expert_params_per_gpu.
  if (c.moe.mtp_num_layers <= 0) return 0.0;
  const double h = double(c.hidden_size), t = double(c.tensor_model_parallel_size);
  // A hybrid model's MTP layer runs its pattern's MTP part as a HybridStack without a final norm (the layer's own
  // final_layernorm follows: MultiTokenPredictionLayer, multi_token_prediction.py:1197-1213 @d98e8a64).
  const std::string mtp_pat = hybrid_mtp_pattern(c);
  if (!mtp_pat.empty()) {
    double layers = 0;
    for (char sym : mtp_pat) layers += layer_params_moe_model(c, sym == 'E', sym == 'G', sym);
    return double(c.moe.mtp_num_layers) * (3.0 * h + 2.0 * h * h / t + layers);
  }
  const auto pattern = moe_layers_of(c);
  const double layer = moe_model(c) ? layer_params_moe_model(c, !pattern.empty() && pattern.back()) : layer_params_per_rank(c);  // full attention
  return double(c.moe.mtp_num_layers) * (3.0 * h + 2.0 * h * h / t + layer);
}
bool last_stage_has_output(const GptConfig& c) {
  return c.untie_embeddings_and_output_weights || c.pipeline_model_parallel_size > 1;
}
std::vector<std::int64_t> chunk_offsets(const GptConfig& c, const std::vector<std::vector<std::int64_t>>& layout) {
  const std::int64_t p = c.pipeline_model_parallel_size, v = c.vp();
  std::vector<std::int64_t> off(p * v + 1, 0);
  for (std::int64_t mc = 0; mc < p * v; ++mc) off[mc + 1] = off[mc] + layout[mc % p][mc / p];
  return off;
}

}  // namespace gpt_detail

using namespace gpt_detail;

double gpt_num_parameters(const GptConfig& c) {
  GptConfig one = c;
  one.tensor_model_parallel_size = 1;
  const double h = double(c.hidden_size), V = double(c.padded_vocab_size);
  double n = double(c.num_layers) * layer_params_per_rank(one) + embedding_params_per_rank(one);
  if (c.moe.enabled()) {
    GptConfig all = one;
    all.moe.expert_model_parallel_size = 1, all.moe.expert_tensor_parallel_size = 1;
    for (bool m : moe_layers_of(c)) n += m ? expert_params_per_gpu(all) : 0.0;
  }
  if (c.untie_embeddings_and_output_weights) n += V * h;
  n += c.normalization == "LayerNorm" ? 2.0 * h : h;  // final norm
  return n;
}

// The optimizer state per parameter. Without the precision-aware optimizer: fp32 master weight + two fp32
// Adam moments, 12 bytes. With it (Transformer Engine's FusedAdam, transformer_engine/pytorch/optimizers/
// fused_adam.py at NVIDIA/TransformerEngine@d0067d0da): each moment in exp_avg_dtype / exp_avg_sq_dtype (fp8 is a
// uint8 E4M3 tensor, 1 byte). The master weight: FusedAdam holds it (master_weights=True, master_weight_dtype =
// main_params_dtype) unless the run is FP8 with a recipe other than delayed and fp32 main params, where
// Megatron-Core keeps its own fp32 copy (megatron/core/optimizer/__init__.py and optimizer_config.py
// use_precision_aware_optimizer_no_fp8_or_ds_fp8 at NVIDIA/Megatron-LM@d98e8a64). FusedAdam's fp32 master of a
// bf16 parameter stores only the 16 trailing bits (store_param_remainders: Megatron-Core's OptimizerConfig
// default True, no command-line flag; "Works only when param type is BF16 and master weight type is FP32"):
// 2 bytes. An fp16 master is 2 bytes; fp16 parameters and FP8 parameters (fp8_param_gather) keep a 4-byte master.
double GptConfig::adam_state_bytes() const {
  // SGD: the fp32 master weight and, with momentum, its fp32 momentum buffer (torch.optim.SGD / TE FusedSGD keep
  // momentum_buffer in the dtype of the fp32 main parameters they step).
  if (optimizer == "sgd") return 4.0 + (sgd_momentum != 0.0 ? 4.0 : 0.0);
  // optimizer_cpu_offload: HybridDeviceOptimizer's GPU part is Transformer Engine's FusedAdam built with lr, weight
  // decay, betas and eps only -- none of the precision-aware dtypes (megatron/core/optimizer/__init__.py:520-544 at
  // NVIDIA/Megatron-LM@d98e8a64) -- over fp32 copies of the parameter shards (param_update_in_fp32=True: hybrid_
  // optimizer.py:277-281): an fp32 master and two fp32 moments, 12 bytes, whatever the dtypes above say.
  if (optimizer_cpu_offload) return 12.0;
  if (!use_precision_aware_optimizer) return 12.0;
  auto bytes = [](const std::string& d) { return d == "fp32" ? 4.0 : d == "fp8" ? 1.0 : 2.0; };
  const bool te_master = main_params_dtype != "fp32" || !fp8() || fp8_recipe == "delayed";
  const bool bf16_params = precision != "fp16" && !(fp8() && fp8_param_gather) && !(fp4() && fp4_param_gather);
  const double master = !te_master ? 4.0 : main_params_dtype == "fp16" ? 2.0 : bf16_params ? 2.0 : 4.0;
  return master + bytes(exp_avg_dtype) + bytes(exp_avg_sq_dtype);
}

std::string GptMemory::largest_term() const {
  std::pair<double, const char*> terms[] = {{weights_bytes, "weights"}, {grads_bytes, "gradients"},
                                            {optimizer_bytes, "optimizer state"}, {activations_bytes, "activations"}};
  return std::max_element(std::begin(terms), std::end(terms))->second;
}

std::int64_t OptimizerStateOffload::chunks() const {
  std::int64_t n = 0;
  for (const auto& ch : children) n += static_cast<std::int64_t>(ch.chunks.size());
  return n;
}
double OptimizerStateOffload::selected_elements() const {
  double el = 0;
  for (const auto& ch : children) el += ch.selected;
  return el;
}
double OptimizerStateOffload::staging_bytes() const {
  double peak = 0;
  for (std::size_t i = 0; i < children.size(); ++i) {
    double el = children[i].slot[0] + children[i].slot[1];
    for (std::size_t j = i + 1; j < children.size(); ++j) el += children[j].chunks.empty() ? 0.0 : children[j].chunks.front();
    peak = std::max(peak, el);
  }
  return peak * moment_bytes;
}

namespace gpt_detail {
// Megatron-LM's chunked optimizer-state offload of one rank (ChunkedOptimizerStateOffloader, megatron/core/optimizer/
// cpu_offloading/chunked_optimizer_state_offload.py at NVIDIA/Megatron-LM dev @d48bd6be), per distributed optimizer
// (`children`: its shard's elements and the elements of one parameter piece; each DistributedOptimizer of the
// ChainedOptimizer has its own offloader, distrib_optimizer.py:812-847).
// - Selection (_select_params_for_offload, lines 205-226): fraction 1 selects every parameter, otherwise parameters
//   in optimizer order, those with a separate master first, until their bytes (moments + master,
//   _estimated_bundle_bytes, lines 189-197) reach ceil(fraction x the total): whole parameters, so the last may
//   overshoot. Every element is modelled with a master (bf16 / fp16 parameters; the fp32 ones of the shard are not
//   told apart).
// - Chunks (_build_chunks, lines 231-270): the selected parameters in order, a chunk closed before the parameter
//   that would take it past chunk_size_mb MiB of moments (_estimated_state_bytes: numel x the moments' dtype sizes,
//   lines 228-229; the masters are not counted); a parameter larger than that is a chunk of its own; chunk size 0 is
//   one chunk of everything.
// - Staging (_state_staging_views, lines 712-756): chunks alternate between two reusable slots, each as large as its
//   largest chunk (the 256-byte alignment of each tensor is not counted).
// The model's parameter pieces (gpt_memory_of_stage): a distributed optimizer's shard of a rank is a contiguous range
// of each gradient bucket, so its optimizer parameters are whole parameters and pieces of them; the model takes the
// word embedding and the output layer as one piece each and the decoder layers' parameters as pieces as large as the
// largest of them, each split evenly over the shard group. With chunks much larger than a piece the chunk count and
// sizes do not depend on it.
OptimizerStateOffload plan_state_offload(const GptConfig& c, const std::vector<std::vector<double>>& children) {
  OptimizerStateOffload plan;
  auto bytes = [](const std::string& d) { return d == "fp32" ? 4.0 : d == "fp8" ? 1.0 : 2.0; };
  // state_dtypes: the precision-aware optimizer's exp_avg / exp_avg_sq dtypes, else fp32 (distrib_optimizer.py:838-842).
  plan.moment_bytes = c.use_precision_aware_optimizer ? bytes(c.exp_avg_dtype) + bytes(c.exp_avg_sq_dtype) : 8.0;
  plan.master_bytes = c.adam_state_bytes() - plan.moment_bytes;
  const double f = c.optimizer_state_offload_fraction;
  const double chunk_el = double(c.optimizer_state_offload_chunk_size_mb) * 1048576.0 / plan.moment_bytes;
  for (const auto& pieces : children) {
    OptimizerStateOffload::Child ch;
    for (double p : pieces) ch.elements += p, ch.piece = std::max(ch.piece, p);
    // Selection: every piece at fraction 1, else pieces in order until they reach ceil(f x the bytes) (the bytes
    // per element are the same for every piece).
    std::size_t n = pieces.size();
    if (f < 1.0) {
      const double target = f * ch.elements;
      double sel = 0;
      n = 0;
      while (n < pieces.size() && sel < target * (1 - 1e-12)) sel += pieces[n++];
    }
    double cur = 0;
    for (std::size_t k = 0; k < n; ++k) {
      ch.selected += pieces[k];
      if (chunk_el > 0 && cur > 0 && cur + pieces[k] > chunk_el * (1 + 1e-12)) ch.chunks.push_back(cur), cur = 0;
      cur += pieces[k];
    }
    if (cur > 0) ch.chunks.push_back(cur);
    for (std::size_t k = 0; k < ch.chunks.size(); ++k) ch.slot[k % 2] = std::max(ch.slot[k % 2], ch.chunks[k]);
    plan.children.push_back(ch);
  }
  return plan;
}
}  // namespace gpt_detail

std::string GptMemory::largest_host_term() const {
  std::pair<double, const char*> terms[] = {{host_optimizer_bytes, "optimizer_cpu_offload's optimizer shard"},
                                            {optimizer_offloaded_bytes, "chunked_optimizer_state_offload's optimizer state"},
                                            {activations_offloaded_bytes, "offloaded activations"}};
  return std::max_element(std::begin(terms), std::end(terms))->second;
}

namespace {

// Stored activation bytes of one layer for one micro-batch on one GPU, no recompute. Korthikanti et al.,
// "Reducing Activation Recomputation in Large Transformer Models" (MLSys'23) Sec. 4.1 / Table 2, term by
// term, generalised: per token, attention block 2h (norm input) + 2h (QKV input) + 2(a+2g)d/t (Q, K, V)
// + 2ad/t (projection input) + h (dropout mask, when hidden_dropout > 0); unfused attention adds the
// score terms 5as/t (softmax output, dropout mask and output; 2as/t without attention dropout), flash /
// fused attention stores only the fp32 log-sum-exp (4a/t). MLP block 2h (norm input) + 2h (fc1 input)
// + 2 fc1_width/t (activation input) + 2f/t (fc2 input) + h (dropout mask). With sequence parallelism the
// replicated terms (norm/fc inputs, masks) are split over TP too (Sec. 4.2.2); MHA/GELU/dropout gives
// 34 sbh/t + 5as^2b/t, the paper's formula. FP8 (Transformer Engine) saves the four GEMM inputs as FP8
// copies (1 byte instead of 2); NVFP4 (precision fp4) saves the column-wise NVFP4 copy the wgrad GEMM reads,
// 4-bit data + one E4M3 scale per 16 elements: 0.5625 bytes (fp8_gather_bytes_per_element("nvfp4")).
double layer_activation_bytes(const GptConfig& c, bool drop_scores, bool moe_layer = false,
                              double load_factor = 1.0, bool gdn_layer = false, char sym = 0) {
  const double h = double(c.hidden_size), a = double(c.num_attention_heads), d = double(c.head_dim()),
               t = double(c.tensor_model_parallel_size), f = double(c.ffn()),
               s = double(c.seq_length), cp = double(c.context_parallel_size);
  const double g_t = std::max(1.0, double(c.query_groups()) / t);
  const double rep = c.sequence_parallel ? 1.0 / t : 1.0;
  const double mask = c.hidden_dropout > 0 ? h : 0.0;
  const double fc1 = c.swiglu ? 2.0 * f : f;
  const double gemm_in = c.fp4() ? fp8_gather_bytes_per_element("nvfp4") : c.fp8() ? 1.0 : 2.0;
  double attn = (2.0 * h + gemm_in * h + mask) * rep + 2.0 * (a / t + 2.0 * g_t) * d + gemm_in * a * d / t;
  if (c.attention_backend == "unfused") {
    if (!drop_scores) attn += (c.attention_dropout > 0 ? 5.0 : 2.0) * a * (s / cp) / t;
  } else {
    attn += 4.0 * a / t;
  }
  // qk_layernorm: the two per-head norms keep their inputs (Q and K as the QKV projection wrote them) and their
  // fp32 row statistics, one row per head and token (rsigma; LayerNorm also mu) for the backward, as Transformer
  // Engine's norms do (transformer_engine/pytorch/ops/basic/rmsnorm.py: save_for_backward(x, rstdevs), and
  // layer_norm.py the same with the means, at NVIDIA/TransformerEngine@d0067d0da); the normed Q and K are the
  // attention's inputs, counted above.
  if (c.qk_layernorm) attn += (a / t + g_t) * (2.0 * d + (c.normalization == "LayerNorm" ? 8.0 : 4.0));
  if (c.moe.multi_latent_attention) {
    // MLA: Q, K (qk + rope dims) and V per head instead of the GQA widths, the compressed latents
    // (q_lora_rank + kv_lora_rank + rope dim, replicated over TP) and the projection input (v_head_dim).
    const auto& e = c.moe;
    const double qk = double(e.qk_head_dim + e.qk_pos_emb_head_dim), v = double(e.v_head_dim);
    attn = (2.0 * h + gemm_in * h + mask) * rep + 2.0 * (a / t) * (2.0 * qk + v) +
           2.0 * double(e.q_lora_rank + e.kv_lora_rank + e.qk_pos_emb_head_dim) + gemm_in * a * v / t + 4.0 * a / t;
    // recompute_modules mla_up_proj (multi_latent_attention.py:983-991 and 455-458 @d98e8a64): the up-projections
    // and RoPE run under CheckpointWithoutOutput, which keeps its inputs (the latents, counted above) and frees
    // its outputs -- Q, K, V, the tensors the core attention saves -- once the core attention has run.
    if (drop_scores && c.recomputes("mla_up_proj")) attn -= 2.0 * (a / t) * (2.0 * qk + v);
  }
  // attention_output_gate: the gate (query width) and the gated product's input are kept for the sigmoid-multiply's
  // backward: 2 x a d / t more (the attention output itself is counted above).
  if (c.attention_output_gate) attn += 2.0 * a * d / t;
  if (gdn_layer) {
    // A Gated DeltaNet layer saves, per token on one TP rank (gdn.py forward at NVIDIA/Megatron-LM@d98e8a64 and the
    // FLA autograd functions it calls, fla-org/flash-linear-attention@bc3b101dcb fla/ops/gated_delta_rule/chunk.py
    // ChunkGatedDeltaRuleFunction, fla/modules/convolution.py, fla/modules/l2norm.py): the norm's input and
    // in_proj's input as the attention block does; the conv1d's input and output (2 qk + v channels, bf16 each;
    // the output is the l2norm's input); the l2-normed q and k; the fp32 gate g and beta (value heads); the
    // chunk kernel's WY matrix A (chunk size 64 entries per token and value head, bf16) -- its chunk states are
    // recomputed in the backward, so there is no s x s or per-token state term; the gated norm's inputs o and z
    // (v each) and out_proj's input (v).
    const double qk = double(c.linear_num_key_heads * c.linear_key_head_dim) / t,
                 vd = double(c.linear_num_value_heads * c.linear_value_head_dim) / t,
                 nv = double(c.linear_num_value_heads) / t;
    attn = (2.0 * h + gemm_in * h + mask) * rep + 2.0 * 2.0 * (2.0 * qk + vd) + 2.0 * 2.0 * qk + (4.0 + 2.0) * nv +
           2.0 * 64.0 * nv + 2.0 * 2.0 * vd + gemm_in * vd;
  }
  double mlp = (2.0 * h + gemm_in * h + mask) * rep + 2.0 * fc1 / t + gemm_in * f / t;
  if (c.use_torch_fsdp2 && !moe_layer && !c.moe.multi_latent_attention && c.attention_backend != "unfused") {
    // torch runtime (torchtitan's Llama, torchtitan/models/llama/model.py and parallelisms/parallelize_llama.py
    // at pytorch/torchtitan@9dec370): (1) the DTensor TP plan all-gathers the sequence-parallel norm output at
    // the attention and feed-forward inputs (PrepareModuleInput / PrepareFloat8ModuleInput, desired layout
    // Replicate) and the column-parallel linears save that replicated tensor for their weight gradient --
    // gemm_in x h per token on every TP rank, not split (Megatron saves the shard and gathers again in the
    // backward); (2) repeat_kv expands K and V to every local query head (expand + reshape copies) and SDPA
    // saves its inputs: 2 x 2 (a/t - g) d more than the grouped K and V; (3) SDPA saves its bf16 output for the
    // backward, which with float8 is a different tensor from the projection's fp8 input: + 2 a d / t.
    attn += (1.0 - rep) * gemm_in * h + 4.0 * std::max(0.0, a / t - g_t) * d + (c.fp8() ? 2.0 * a * d / t : 0.0);
    mlp += (1.0 - rep) * gemm_in * h;
  }
  if (moe_layer) {
    // MoE layer: norm/router input, then per routed slot (topk per token, x the busiest rank's load over the
    // mean) the permuted input (fc1 GEMM input, h), the expert fc1 output and activation input (2 fc1/etp' widths over
    // the gathered ETP tokens) and the fc2 input; the shared expert as a TP-split dense MLP.
    const double F = double(c.moe_ffn()), fc1m = c.swiglu ? 2.0 * F : F, etp = double(c.etp());
    const double t_sp = c.sequence_parallel ? t : 1.0;
    const double S = double(c.moe.moe_shared_expert_intermediate_size), fc1s = c.swiglu ? 2.0 * S : S;
    // recompute_modules (drop_scores = the selective pass): moe_act drops the activation output (the fc2
    // input), moe keeps only the checkpointed MoE layer's input (the norm output).
    const double fc2_in = drop_scores && c.recomputes("moe_act") ? 0.0 : gemm_in * F;
    // Latent MoE: the routed slots are moe_latent_size wide and fc2_latent_proj keeps its (latent) input; with
    // moe_shared_expert_gate the gating multiply keeps the shared expert's output (h) and its score.
    const double rw = double(c.moe_width());
    mlp = (2.0 * h + gemm_in * h + mask) * rep +
          double(c.moe.moe_router_topk) * load_factor * (gemm_in * rw * etp + 2.0 * fc1m + fc2_in) / t_sp +
          (S > 0 && !(drop_scores && c.recomputes("shared_experts")) ? 2.0 * fc1s / t + gemm_in * S / t : 0.0);
    if (c.moe.moe_latent_size) mlp += gemm_in * rw / t_sp;
    if (S > 0 && c.moe.moe_shared_expert_gate) mlp += (2.0 * h + 2.0) / t_sp;
    // The load-balancing loss keeps its fp32 scores for the score function's backward (router.py @d98e8a64:
    // scores_for_aux_loss); the z-loss's logsumexp keeps one value per token (not counted).
    if (c.moe.aux_loss_on()) mlp += 4.0 * double(c.moe.num_experts) / t_sp;
    // moe_input_jitter_eps: the noise (kept for the product's backward) and the jittered input (the router GEMM's
    // saved input), bf16 each.
    if (c.moe.moe_input_jitter_eps > 0) mlp += 2.0 * 2.0 * h * rep;
    if (drop_scores && c.recomputes("moe")) mlp = (2.0 * h + gemm_in * h + mask) * rep;
  }
  // recompute_modules layernorm: the two norms' outputs (the QKV and the MLP / router inputs) are not kept.
  if (drop_scores && c.recomputes("layernorm")) attn -= gemm_in * h * rep, mlp -= gemm_in * h * rep;
  // recompute_modules mlp (a dense layer's MLP under tensor_parallel.checkpoint, transformer_layer.py:992-1012
  // @d98e8a64; Transformer Engine fuses the pre-MLP norm into fc1, so the checkpoint's input is the norm's input):
  // the MLP keeps that input alone; the dropout mask of the bias-dropout-add after it stays.
  if (drop_scores && c.recomputes("mlp") && !moe_layer) mlp = (2.0 * h + mask) * rep;
  // The parallel block (GptConfig::parallel_block): the MLP shares the attention's norm, so neither the MLP's
  // norm input (2h) nor fc1's input (the attention's QKV input, counted above) is kept a second time.
  if (c.parallel_block()) mlp -= (2.0 * h + (drop_scores && c.recomputes("layernorm") ? 0.0 : gemm_in * h)) * rep;
  // A hybrid sublayer keeps one block's tensors; a Mamba-2 mixer its own (gpt_hybrid.cpp).
  if (sym == 'M') attn = mamba_activation_bytes_per_token(c, gemm_in, mask, rep) -
                         (drop_scores && c.recomputes("layernorm") ? gemm_in * h * rep : 0.0);
  if (sym == 'M' || sym == '*' || sym == 'G' || sym == '+') mlp = 0;
  if (sym == '-' || sym == 'E') attn = 0;
  const double tokens = double(c.micro_batch_size) * s / cp;
  return tokens * (attn + mlp);
}

// Stored bytes of one layer for one micro-batch under torchtitan's per-op selective checkpointing
// (selective_ac_option "op"; torchtitan/models/llama3/infra/parallelize.py at pytorch/torchtitan@9dec370,
// _save_list and _custom_policy): the checkpointed block keeps its input (2h per token, split by SP), the
// outputs of the ops in its save list -- every other matmul (the 1st, 3rd, ... in forward order: wq, wv, w1,
// w2 of a Llama block; w2's output before the TP reduce-scatter is h wide on every TP rank) and the SDPA
// output (2ad/t) with its fp32 log-sum-exp (4a/t) -- and recomputes the rest. FP8 GEMM outputs are bf16 as
// well (torchao float8 returns the high-precision dtype), so the bytes do not depend on the precision.
double layer_activation_bytes_op_sac(const GptConfig& c) {
  const double h = double(c.hidden_size), a = double(c.num_attention_heads), d = double(c.head_dim()),
               t = double(c.tensor_model_parallel_size), f = double(c.ffn()), s = double(c.seq_length),
               cp = double(c.context_parallel_size);
  const double g_t = std::max(1.0, double(c.query_groups()) / t);
  const double rep = c.sequence_parallel ? 1.0 / t : 1.0;
  // The save list names the flash and memory-efficient SDPA ops only (torchtitan _save_list at 9dec370 and
  // at 6fc499f6): with cuDNN attention (attention_backend fused; torchtitan puts cuDNN first on compute
  // capability 10.0 from pytorch/torchtitan@5de055e30, models/attention.py ScaledDotProductAttention) the
  // attention output and log-sum-exp are not saved but recomputed.
  const double sdpa_saved = c.attention_backend == "fused" ? 0.0 : 2.0 * a * d / t + 4.0 * a / t;
  const double per_token = 2.0 * h * rep + 2.0 * a * d / t + 2.0 * g_t * d + 2.0 * f / t + 2.0 * h + sdpa_saved;
  return double(c.micro_batch_size) * (s / cp) * per_token;
}


}  // namespace

namespace {
// Megatron's per-layer patterns of the form "every N-th layer is the exception" (layer_number 1-based): an integer
// N -> layer i (0-based) is marked unless (i + 1) % N == 0; a list -> its entry (1 = marked), one per layer
// (moe_layer_pattern's syntax). `key` names the parameter in errors.
std::vector<bool> skip_freq_pattern(const std::string& f, std::int64_t num_layers, const std::string& key) {
  if (std::all_of(f.begin(), f.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
    const long long n = f.size() > 9 ? 0 : std::stoll(f);
    if (n < 1) throw InputError(key, "an integer frequency must be >= 1 (at most 9 digits), got " + f);
    std::vector<bool> w(static_cast<std::size_t>(num_layers));
    for (std::int64_t i = 0; i < num_layers; ++i) w[static_cast<std::size_t>(i)] = (i + 1) % n != 0;
    return w;
  }
  return moe_layer_pattern(f, num_layers, "gpt", key);
}
}  // namespace

// Megatron-Core's is_layer_window_attention (megatron/core/transformer/utils.py @d98e8a64; layer_number is
// 1-based): no window_size -> none; no window_attn_skip_freq -> every layer; an integer N -> layer_number % N != 0
// (one full-attention layer after N - 1 windowed ones); a list -> its entry (1 = windowed).
std::vector<bool> GptConfig::window_layers() const {
  if (window_left < 0 || window_attn_skip_freq.empty())
    return std::vector<bool>(static_cast<std::size_t>(num_layers), window_left >= 0);
  return skip_freq_pattern(window_attn_skip_freq, num_layers, "window_attn_skip_freq");
}

// Megatron-Core's linear attention pattern (num_floating_point_operations in megatron/training/training.py and
// the layer specs' use of linear_attention_freq at NVIDIA/Megatron-LM@d98e8a64): the same rule, 1 = a Gated
// DeltaNet layer (N - 1 GDN layers, then one full-attention layer). All false without
// experimental_attention_variant. A hybrid model's GDN layers are its pattern's 'G' sublayers (HybridStack builds
// gdn_layer for them, megatron/core/models/hybrid/hybrid_block.py @d98e8a64; linear_attention_freq is unused there).
std::vector<bool> GptConfig::gdn_layers() const {
  if (hybrid()) {
    std::vector<bool> out;
    for (char ch : hybrid_layers()) out.push_back(ch == 'G');
    return out;
  }
  if (!gdn() || linear_attention_freq.empty()) return std::vector<bool>(static_cast<std::size_t>(num_layers), false);
  return skip_freq_pattern(linear_attention_freq, num_layers, "linear_attention_freq");
}

namespace gpt_detail {
// The GPU's link to host memory, bytes/s per direction: PCIe x16 of its generation (Gen3 16, Gen4 32, Gen5 64,
// Gen6 128 GB/s, as topologies/presets.cpp's kPcie*Bps, with their sources there), or NVLink-C2C to the Grace CPU on
// GB200 / GB300 (900 GB/s bidirectional: NVIDIA GB200 NVL72 datasheet, "NVLink-C2C ... 900 GB/s"), times the
// share a pinned copy reaches: 26.28 of 32 GB/s host-to-device measured on an A100 (Gen4) with nvbandwidth
// (shared/data/hardware/hardware_specs.json, "measured nvbandwidth host<->device"). For NVLink-C2C that share is
// an assumption, not a measurement: no GB200 / GB300 host-copy rate is in tests/data (docs/workloads.md says so).
double host_copy_Bps(const std::string& gpu) {
  const double eff = 26.28 / 32.0;
  // h100, h100-96gb, h200, b200, and mi300x (PCIe gen5 x16: ROCm docs, MI300 node-level architecture): PCIe Gen5
  double link = 64e9;
  if (gpu == "v100") link = 16e9;
  else if (gpu.rfind("a100", 0) == 0) link = 32e9;
  else if (gpu == "b300") link = 128e9;
  else if (gpu == "gb200" || gpu == "gb300") link = 450e9;
  return link * eff;
}

double offload_copy_seconds(const GptConfig& c) {
  return layer_activation_bytes(c, false) / host_copy_Bps(c.gpu);
}

// Host DRAM bandwidth per GPU, bytes/s: the theoretical peak of the CPU socket (or Grace) the GPU hangs off, shared
// by the GPUs on it (every rank steps its CPU optimizer at the same time). Channels x transfer rate x 8 bytes:
//   v100 (DGX-1): Xeon E5-2698 v4, 4 x DDR4-2400 = 76.8 GB/s per socket (Intel ARK "Max Memory Bandwidth
//     76.8 GB/s"), 4 GPUs per socket;
//   a100 (DGX A100): AMD EPYC 7742 (tests/data/hardware/hardware_specs.json, "DGX A100": "2x AMD EPYC 7742"),
//     8 x DDR4-3200 = 204.8 GB/s per socket (AMD EPYC 7742 product page, "Per Socket Mem BW 204.8 GB/s"), 4 GPUs;
//   h100, h100-96gb, h200 (DGX H100 / H200, and Meta's Grand Teton assumed alike): Xeon Platinum 8462Y+ / 8480C
//     (hardware_specs.json "DGX H100 (NVIDIA Eos)"; NVIDIA DGX H100 datasheet), Sapphire Rapids with
//     8 x DDR5-4800 = 307.2 GB/s per socket (Intel ARK: 8 channels, DDR5-4800), 4 GPUs;
//   b200 (DGX B200): Xeon Platinum 8570 (NVIDIA DGX B200 datasheet), 8 x DDR5-5600 = 358.4 GB/s, 4 GPUs;
//   b300 (DGX B300): Xeon 6776P (NVIDIA DGX B300 datasheet), 8 x DDR5-6400 = 409.6 GB/s, 4 GPUs (assumed);
//   gb200, gb300: Grace LPDDR5X, 18.4 TB/s over the 36 Grace CPUs of a GB200 NVL72 (NVIDIA GB200 NVL72
//     datasheet, "CPU memory ... up to 18.4 TB/s"), 2 GPUs per Grace; GB300 assumed alike.
// A peak, not a measured CPU AdamW rate (no host optimizer run is measured): the priced CPU step is a lower bound.
double host_dram_Bps(const std::string& gpu) {
  if (gpu == "v100") return 76.8e9 / 4.0;
  if (gpu.rfind("a100", 0) == 0) return 204.8e9 / 4.0;
  if (gpu == "b200") return 358.4e9 / 4.0;
  if (gpu == "b300") return 409.6e9 / 4.0;
  if (gpu == "gb200" || gpu == "gb300") return 18.4e12 / 36.0 / 2.0;
  return 307.2e9 / 4.0;  // h100, h100-96gb, h200; mi300x assumed alike (no MI300X server's CPU is in the data)
}

double host_dram_Bps(const GptConfig& c) {
  return c.host_memory_bandwidth_per_gpu > 0 ? c.host_memory_bandwidth_per_gpu : host_dram_Bps(c.gpu);
}

// optimizer_cpu_offload's host work for `elements` offloaded elements of one rank's shard, per direction of the
// host link (gpt_detail::host_copy_Bps) and at the host DRAM rate:
//   d2h  the gradients into the pinned fp32 buffers, 4 bytes per element (hybrid_optimizer.py:108-114 at
//        NVIDIA/Megatron-LM@d98e8a64; a bf16 main gradient is converted on the GPU before the copy: a non-blocking
//        copy converts on the GPU side, pytorch/pytorch@007aa8ae aten/src/ATen/native/cuda/Copy.cu copy_kernel_cuda);
//   cpu  torch's fused CPU AdamW (megatron/core/optimizer/__init__.py:11, 520-527: torch.optim.AdamW, fused=True)
//        reads the fp32 parameter, gradient and two moments and writes the parameter and moments: 28 bytes of
//        DRAM traffic per element;
//   h2d  the updated fp32 parameters into the GPU's parameter shard (the post-step hook, hybrid_optimizer.py:
//        117-125), 4 bytes per element (the non-blocking copy moves the fp32 data and converts on the GPU: Copy.cu).
// `pieces`: the parameters the offloaded elements are in, each its own CPU optimizer with
// overlap_cpu_optimizer_d2h_h2d (build_cpu_optimizer_list, lines 226-249): taken as pieces of a quarter of one
// decoder layer's parameters on this TP rank (its four linear weights dominate it).
OptimizerOffloadTimes optimizer_offload_times(const GptConfig& c, double elements) {
  OptimizerOffloadTimes t;
  const double link = host_copy_Bps(c.gpu);
  const double dram = host_dram_Bps(c);
  t.d2h_s = 4.0 * elements / link;
  t.cpu_s = 28.0 * elements / dram;
  t.h2d_s = 4.0 * elements / link;
  const double piece = std::max(1.0, layer_params_per_rank(c) / 4.0);
  t.pieces = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(elements / piece)));
  return t;
}

// Bytes of one layer for one micro-batch on one GPU that fine-grained activation offloading moves to host memory
// (offload_modules; megatron/core/pipeline_parallel/fine_grained_activation_offload.py at NVIDIA/Megatron-LM@d98e8a64):
// each named module's input and what autograd saves inside it, in layer_activation_bytes' terms per token --
// attn_norm and mlp_norm the norm input (2h, split by SP); qkv_linear the QKV GEMM's saved input (none when
// recompute_modules layernorm drops it); core_attn Q, K, V and the fp32 log-sum-exp; attn_proj the projection's
// saved input; expert_fc1 the permuted tokens' fc1 input and moe_act the fc1 output the activation saves, per
// routed slot (moe/experts.py:928-1038: the groups around linear_fc1 and the activation; fc2's input is not in
// either). A tensor under min_offloaded_tensor_size elements stays (tensor_need_offloading_checker, :1077).
double layer_offload_bytes(const GptConfig& c, bool moe_layer, double load_factor) {
  if (!c.fine_grained_activation_offloading) return 0.0;
  const double h = double(c.hidden_size), a = double(c.num_attention_heads), d = double(c.head_dim()),
               t = double(c.tensor_model_parallel_size);
  const double g_t = std::max(1.0, double(c.query_groups()) / t);
  const double rep = c.sequence_parallel ? 1.0 / t : 1.0;
  const double gemm_in = c.fp4() ? fp8_gather_bytes_per_element("nvfp4") : c.fp8() ? 1.0 : 2.0;
  const double tokens = double(c.micro_batch_size) * double(c.seq_length) / double(c.context_parallel_size);
  // One tensor of `width` elements per token, `bytes` per element: its bytes if it is offloaded.
  auto tensor = [&](double width, double bytes) {
    return tokens * width >= double(c.min_offloaded_tensor_size) ? tokens * width * bytes : 0.0;
  };
  double off = 0;
  if (c.offloads("attn_norm")) off += tensor(h * rep, 2.0);
  if (c.offloads("qkv_linear") && !c.recomputes("layernorm")) off += tensor(h * rep, gemm_in);
  if (c.offloads("core_attn"))
    off += tensor(a / t * d, 2.0) + 2.0 * tensor(g_t * d, 2.0) + tensor(a / t, 4.0);
  if (c.offloads("attn_proj")) off += tensor(a * d / t, gemm_in);
  if (c.offloads("mlp_norm")) off += tensor(h * rep, 2.0);
  if (moe_layer) {
    const double F = double(c.moe_ffn()), fc1m = c.swiglu ? 2.0 * F : F, etp = double(c.etp());
    const double slots = double(c.moe.moe_router_topk) * load_factor / (c.sequence_parallel ? t : 1.0);
    if (c.offloads("expert_fc1")) off += tensor(slots * double(c.moe_width()) * etp, gemm_in);
    if (c.offloads("moe_act")) off += tensor(slots * fc1m, 2.0);
  }
  return off;
}
}  // namespace gpt_detail

GptMemory gpt_memory_of_stage(const GptConfig& c, std::int64_t st) {
  const auto layout = gpt_layer_layout(c);
  const std::int64_t p = c.pipeline_model_parallel_size;
  // Model chunks on this rank (first layer, layers): the virtual chunks of stage st, or with DualPipe stage
  // st and stage p - 1 - st (two copies of the model's parameters, DeepSeek-V3 arXiv:2412.19437 Sec. 3.2.1).
  const std::vector<std::int64_t> off = chunk_offsets(c, layout);
  std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
  if (c.dualpipe()) {
    chunks = {{off[st], layout[st][0]}, {off[p - 1 - st], layout[p - 1 - st][0]}};
  } else {
    for (std::int64_t ch = 0; ch < c.vp(); ++ch) chunks.push_back({off[ch * p + st], layout[st][ch]});
  }
  const std::int64_t v = static_cast<std::int64_t>(chunks.size());
  const bool holds_first = st == 0 || (c.dualpipe() && st == p - 1);
  const bool holds_last = st == p - 1 || (c.dualpipe() && st == 0);
  // The chunk running the MTP layers (GptConfig::mtp_virtual_stage), -1 on a stage without them; with DualPipe
  // the chunk that ends the model.
  std::int64_t mtp_chunk = -1;
  const std::int64_t n_mtp = std::max<std::int64_t>(0, c.moe.mtp_num_layers);
  if (n_mtp > 0) {
    if (c.dualpipe()) mtp_chunk = st == 0 ? 1 : st == p - 1 ? 0 : -1;
    else if (c.mtp_virtual_stage() % p == st) mtp_chunk = c.mtp_virtual_stage() / p;
  }
  std::int64_t layers = 0, quantised_layers = 0;  // the stage's decoder layers; those in FP8 / FP4 (not bf16_layer)
  for (const auto& ch : chunks) {
    layers += ch.second;
    for (std::int64_t l = 0; l < ch.second; ++l) quantised_layers += c.bf16_layer(ch.first + l) ? 0 : 1;
  }
  const double h = double(c.hidden_size), s = double(c.seq_length), b = double(c.micro_batch_size),
               t = double(c.tensor_model_parallel_size), V = double(c.padded_vocab_size),
               cp = double(c.context_parallel_size);
  const double dpcp = double(c.data_parallel() * c.context_parallel_size);
  double Pl = layer_params_per_rank(c);
  double P = double(layers) * Pl;
  // MoE / MLA: the stage's own layers; expert weights separately (sharded over EDP by the distributed
  // optimizer / FSDP instead of DP x CP).
  double Pe = 0, Pe_bf16 = 0, act_mean = 0, act_max = 0, act_mean_sel = 0, act_max_sel = 0;
  const bool moe = moe_model(c);
  // recompute_modules mla_up_proj / mlp / shared_experts: a layer in its backward holds what its recompute made
  // again (MLA's Q, K, V; the dense MLP's or the shared expert's activations) on top of what was saved; the largest
  // such surplus over the stage's layers (act_max_mod) adds to the micro-batch's peak. `keep`: the config without
  // those three modules.
  GptConfig keep = c;
  {
    std::string mods;
    std::istringstream words(c.recompute_modules.empty() ? std::string("core_attn") : c.recompute_modules);
    for (std::string w; words >> w;) {
      for (char& ch : w) ch = ch == ',' ? ' ' : ch;
      std::istringstream parts(w);
      for (std::string m; parts >> m;)
        if (m != "mla_up_proj" && m != "mlp" && m != "shared_experts") mods += (mods.empty() ? "" : " ") + m;
    }
    keep.recompute_modules = mods.empty() ? "none" : mods;
  }
  const bool module_recompute = c.recompute_granularity == "selective" && c.selective_ac_option.empty() &&
                                (c.recomputes("mla_up_proj") || c.recomputes("mlp") || c.recomputes("shared_experts"));
  double act_max_mod = 0;
  // Layers whose activations a chunk stores per micro-batch: its decoder layers and the MTP layers (built like
  // the decoder's last layer) on the MTP chunk; for MoE models also the sum of their selective-recompute bytes.
  const auto pattern = moe_layers_of(c);
  const bool mtp_moe = !pattern.empty() && pattern.back();
  // A hybrid model's MTP depth is its pattern's MTP part, one activation unit per sublayer (hybrid_mtp_pattern).
  const std::string mtp_pat = hybrid_mtp_pattern(c);
  const std::int64_t mtp_units = mtp_pat.empty() ? n_mtp : n_mtp * static_cast<std::int64_t>(mtp_pat.size());
  std::vector<double> chunk_layers(chunks.size()), chunk_sel(chunks.size(), 0.0);
  for (std::size_t k = 0; k < chunks.size(); ++k)
    chunk_layers[k] = double(chunks[k].second + (static_cast<std::int64_t>(k) == mtp_chunk ? mtp_units : 0));
  const double act_layers = double(layers + (mtp_chunk >= 0 ? mtp_units : 0));
  double lf_act = 1.0;  // MoE: the busiest rank's routed tokens over the mean (below)
  if (moe) {
    double lf = 1.0;
    if (c.moe.enabled()) {
      // Busiest rank's tokens over the mean, worst MoE layer (activations of the dispatched tokens).
      std::int64_t nm = 0;
      for (bool b : pattern) nm += b;
      const auto shares = moe_expert_shares(c.moe, nm, "gpt");
      const double T = double(c.micro_batch_size * c.seq_length / c.context_parallel_size) /
                       (c.sequence_parallel ? t : 1.0);
      for (const auto& sh : shares) {
        const auto ld = moe_layer_load(c.moe, sh, T, c.moe.expert_model_parallel_size,
                                       c.moe.expert_model_parallel_size * c.etp());
        // moe_router_padding_for_quantization: over the routed (unpadded) mean, so the padded slots count.
        const double mean = c.moe.moe_router_padding_for_quantization
                                ? T * double(c.moe.moe_router_topk) * double(c.etp())
                                : ld.mean_rank_tokens;
        if (mean > 0) lf = std::max(lf, ld.max_rank_tokens / mean);
      }
    }
    P = 0;
    const auto gdn_pattern = c.gdn_layers();
    // first_last_layers_bf16: a bf16 layer (its MoE block included) saves bf16 GEMM inputs (bf16_layers_config).
    const GptConfig hp_moe = c.bf16_layers_config();
    auto add_act = [&](std::size_t k, bool m, bool g, char sym, bool bf16 = false) {
      const GptConfig& lc = bf16 ? hp_moe : c;
      const double a_full = layer_activation_bytes(lc, false, m, lf, g, sym);
      act_mean += a_full, act_max = std::max(act_max, a_full);
      const double a_sel = layer_activation_bytes(lc, c.recompute_granularity == "selective", m, lf, g, sym);
      act_mean_sel += a_sel, chunk_sel[k] += a_sel;
      if (m) act_max_sel = std::max(act_max_sel, a_full - a_sel);  // largest recomputed surplus
      if (module_recompute)
        act_max_mod = std::max(act_max_mod, layer_activation_bytes(bf16 ? keep.bf16_layers_config() : keep, true, m, lf, g, sym) -
                                                layer_activation_bytes(lc, true, m, lf, g, sym));
    };
    for (std::size_t k = 0; k < chunks.size(); ++k)
      for (std::int64_t l = 0; l < chunks[k].second; ++l) {
        const bool m = pattern[chunks[k].first + l], g = gdn_pattern[chunks[k].first + l];
        const char sym = hybrid_symbol(c, chunks[k].first + l);
        P += layer_params_moe_model(c, m, g, sym);
        if (m) Pe += expert_params_per_gpu(c);
        if (m && c.bf16_layer(chunks[k].first + l)) Pe_bf16 += expert_params_per_gpu(c);
        add_act(k, m, g, sym, c.bf16_layer(chunks[k].first + l));
      }
    Pl = layers ? P / double(layers) : 0.0;
    if (mtp_chunk >= 0)
      for (std::int64_t k = 0; k < n_mtp; ++k) {
        for (char sym : mtp_pat) add_act(static_cast<std::size_t>(mtp_chunk), sym == 'E', sym == 'G', sym);
        if (mtp_pat.empty()) add_act(static_cast<std::size_t>(mtp_chunk), mtp_moe, false, 0);
        Pe += double(mtp_moe_layers_per_depth(c)) * expert_params_per_gpu(c);
      }
    if (act_layers > 0) act_mean /= act_layers, act_mean_sel /= act_layers;
    lf_act = lf;
  }
  // Fine-grained activation offloading: per chunk, the bytes of its layers' offload groups (per micro-batch).
  std::vector<double> chunk_off(chunks.size(), 0.0);
  if (c.fine_grained_activation_offloading) {
    for (std::size_t k = 0; k < chunks.size(); ++k)
      for (std::int64_t l = 0; l < chunks[k].second; ++l)
        chunk_off[k] += layer_offload_bytes(c, !pattern.empty() && pattern[chunks[k].first + l], lf_act);
    if (mtp_chunk >= 0) chunk_off[static_cast<std::size_t>(mtp_chunk)] += double(n_mtp) * layer_offload_bytes(c, mtp_moe, lf_act);
  }
  const double P_layers = P;  // the stage's transformer layers (without embedding and output layer)
  if (holds_first) P += embedding_params_per_rank(c);
  if (holds_last && last_stage_has_output(c)) P += V * h / t;
  // The MTP layers' parameters (their experts are in Pe) and, on a stage without the embedding, the MTP's own
  // copy of the word embeddings (GPTModel builds `embedding` where mtp_process; with tied weights on the last
  // stage it is the output layer's weight).
  if (mtp_chunk >= 0) {
    P += mtp_params_per_rank(c);
    if (!holds_first && !(holds_last && !c.untie_embeddings_and_output_weights)) P += embedding_params_per_rank(c);
  }
  GptMemory mem;
  mem.stage = st;
  // Mixed precision (ZeRO, Rajbhandari et al. SC'20 Sec. 3.1): 2-byte weights, 2-byte gradients (4 with
  // grad_reduce_in_fp32), 12 bytes of fp32 master weight + Adam moments (GptConfig::adam_state_bytes with the
  // precision-aware optimizer); the distributed optimizer shards them over the DP x CP group (Megatron-LM docs, distrib_optimizer.md), FSDP / ZeRO-3 shards all
  // of it, keeping the gathered weights (and gradients) of the running and the prefetched layer.
  const double grad = c.grad_reduce_in_fp32 ? 4.0 : 2.0;
  // FP8 (Transformer Engine): an FP8 copy of each linear weight and its transpose (2 x 1 byte) kept for
  // the micro-batches of a step.
  // torchao float8 (the torch runtime) keeps no FP8 weight copies: Float8Linear casts the bf16 weight in every
  // forward and its autograd function saves the high-precision tensors for the backward
  // (torchao/float8/float8_linear.py, matmul_with_hp_or_float8_args); the casts are transient.
  // NVFP4 (precision fp4): the row-wise and the column-wise NVFP4 copy, 2 x 0.5625 bytes
  // (NVFP4Tensor holds both, transformer_engine/pytorch/tensor/nvfp4_tensor.py at NVIDIA/TransformerEngine@d0067d0da).
  // The bf16 layers of first_last_layers_bf16 keep none (quantised_layers).
  const double q_w_bytes = c.fp4() ? 2.0 * fp8_gather_bytes_per_element("nvfp4") : 2.0;
  const double fp8_w = c.quantized() && !c.use_torch_fsdp2 ? q_w_bytes * double(quantised_layers) * Pl : 0.0;
  if (c.use_torch_fsdp2) {
    // torch FSDP2 with torchtitan's MixedPrecisionPolicy (param_dtype bf16, reduce_dtype fp32): the sharded
    // parameters are fp32 and are the optimizer's master copy (4 bytes), their gradients are sharded fp32
    // (4), Adam keeps two fp32 moments (8) -- 16 bytes per parameter over the shard group, no separate
    // bf16 copy (torch/distributed/fsdp/_fully_shard/_fsdp_param.py: the bf16 weights exist only as
    // all-gather outputs). Unsharded on top: torchtitan's reshard_after_forward_policy "default" reshards
    // after forward only without pipeline parallelism (torchtitan parallelize.py apply_fsdp:
    // reshard_after_forward = not pp_enabled). Without PP: the bf16 weights of the running and the
    // prefetched layer and the running layer's gradient (upcast to reduce_dtype for the reduce-scatter).
    // With PP: the whole stage stays gathered in bf16 for the step, and the pipeline schedule turns
    // gradient sync off until the last micro-batch (torch.distributed.pipelining stage
    // backward_maybe_with_nosync, which also turns resharding after backward off: with
    // fsdp_reshard_after_forward always the layers are resharded after each forward, gathered again for
    // each backward and held from there, so at the end of a backward the whole stage is gathered all the
    // same), so FSDP2 accumulates unsharded gradients in reduce_dtype
    // (FSDPParam.to_accumulated_grad_if_needed: fp32 for the whole parameter, not the shard).
    // With torchao's float8 all-gather (fsdp_float8_all_gather) a gathered layer weight is its 1-byte
    // all-gather output (a Float8Tensor); the embedding and output layer stay bf16. Layer norms' weights
    // (2h per layer) are counted with the layer: < 0.01 % of it.
    const double shard = dpcp / double(c.num_distributed_optimizer_instances);
    const double gw = c.fsdp_layer_gather_bytes();
    // fsdp_reshard_after_forward never (without PP): every layer of the stage stays gathered from its forward
    // to its backward, all of them at the start of the backward.
    const double gathered_layers = c.fsdp_no_reshard() ? gw * P_layers : gw * 2.0 * Pl;
    mem.weights_bytes = 4.0 * P / shard + fp8_w / shard + (p > 1 ? 2.0 * (P - P_layers) + gw * P_layers : gathered_layers);
    mem.grads_bytes = 4.0 * P / shard + (p > 1 ? grad * P : grad * Pl);
    mem.optimizer_bytes = (c.adam_state_bytes() - 4.0) * P / shard;  // the moments (the fp32 master is the shard)
    // Without PP, the embedding and output layer's gathered weights depend on the phase: see the peak below.
  } else if (c.fsdp()) {
    const double shard = dpcp / double(c.num_distributed_optimizer_instances);
    mem.weights_bytes = 2.0 * P / shard + 2.0 * 2.0 * Pl + fp8_w / shard;
    mem.grads_bytes = grad * P / shard + grad * Pl;
    mem.optimizer_bytes = c.adam_state_bytes() * P / shard;
  } else {
    // fp8_param_gather: the decoder layers' weights are the FP8 tensors themselves (data + transpose, fp8_w),
    // no bf16 copy; the embedding and output layer stay bf16 (fp4_param_gather: NVFP4 the same way; the bf16
    // layers of first_last_layers_bf16 keep bf16 weights).
    const bool q_params = c.fp8_param_gather || c.fp4_param_gather;
    mem.weights_bytes = 2.0 * (q_params ? P - double(quantised_layers) * Pl : P) + fp8_w;
    mem.grads_bytes = grad * P;
    const bool sharded = c.use_distributed_optimizer || c.data_parallel_sharding_strategy != "no_shard";
    mem.optimizer_bytes = c.adam_state_bytes() * P / (sharded ? dpcp / double(c.num_distributed_optimizer_instances) : 1.0);
  }
  if (Pe > 0) {
    const double edp = double(c.expert_data_parallel());
    const bool sharded = c.fsdp() || c.use_distributed_optimizer || c.data_parallel_sharding_strategy != "no_shard";
    // The experts' quantised copies as the dense layers' (q_w_bytes): FP8 data + transpose, or NVFP4 row- and
    // column-wise (precision fp4, TEGroupedLinear's weights under the NVFP4 recipe); none for the experts of the
    // bf16 layers of first_last_layers_bf16 (Pe_bf16). With fp8_param_gather / fp4_param_gather (not with FSDP)
    // the quantised copies are the expert weights themselves: no bf16 copy but the bf16 layers'.
    const bool q_experts = (c.fp8_param_gather || c.fp4_param_gather) && !c.fsdp();
    mem.weights_bytes += (c.fsdp() ? 2.0 / edp : 2.0) * (q_experts ? Pe_bf16 : Pe) +
                         (c.fp8() || c.fp4() ? q_w_bytes * (Pe - Pe_bf16) : 0.0);
    mem.grads_bytes += (c.fsdp() ? grad / edp : grad) * Pe;
    if (c.fsdp() && (!c.use_torch_fsdp2 || c.fsdp_expert_units) && edp > 1) {
      // Megatron FSDP (and torch FSDP2's expert units, fsdp_expert_units) gathers an MoE layer's experts over
      // EDP like its dense part (gpt_trace.cpp fsdp_experts): the running and the prefetched layer's gathered
      // experts, the running one's gradient.
      mem.weights_bytes += 2.0 * (c.fsdp_no_reshard() ? Pe : 2.0 * expert_params_per_gpu(c));  // never: all gathered
      mem.grads_bytes += grad * expert_params_per_gpu(c);
    }
    mem.optimizer_bytes += c.adam_state_bytes() * Pe / (sharded ? edp : 1.0);
  }
  // optimizer_cpu_offload (HybridDeviceOptimizer._get_sub_optimizer_param_groups, hybrid_optimizer.py:251-302 at
  // NVIDIA/Megatron-LM@d98e8a64): whole parameters of the distributed optimizer's shard (the dense one and the
  // expert one, each its own optimizer) go to the host in group order until optimizer_offload_fraction of the
  // shard's elements -- the last may overshoot by less than one parameter, not modelled: exactly the fraction.
  // Their 12 bytes of GPU state leave HBM; the host holds per element the fp32 master (pinned, lines 274-280), the
  // CPU AdamW's two fp32 moments and the pinned fp32 gradient buffer (lines 108-112): 16 bytes.
  if (c.optimizer_cpu_offload) {
    const double el = mem.optimizer_bytes / c.adam_state_bytes() * c.optimizer_offload_fraction;
    mem.optimizer_bytes -= el * c.adam_state_bytes();
    mem.host_optimizer_elements = el;
    mem.host_optimizer_bytes = 16.0 * el;
  }
  // Chunked optimizer-state offload (chunked_optimizer_state_offload / offload_optimizer_states): plan_state_offload
  // below. The dense shard's optimizer and the experts' each select and chunk their own parameters.
  if (c.state_offload()) {
    const bool sharded = c.use_distributed_optimizer || c.data_parallel_sharding_strategy != "no_shard";
    const double dense_el = mem.optimizer_bytes / c.adam_state_bytes() - (Pe > 0 ? Pe / (sharded ? double(c.expert_data_parallel()) : 1.0) : 0.0);
    const double dense_shard = sharded ? dpcp / double(c.num_distributed_optimizer_instances) : 1.0;
    // The optimizer's parameters in model order as pieces: the word embedding on the first stage, the decoder
    // layers' parameters as pieces of the largest of them (the QKV, MLA's largest up-projection, the dense MLP's or
    // the shared expert's fc1 weight) on one TP rank, the output layer on the last stage; each split evenly over the
    // shard group.
    const double gate = c.swiglu ? 2.0 : 1.0;
    double largest = 0;
    if (c.moe.multi_latent_attention) {
      const double a = double(c.num_attention_heads);
      largest = std::max(double(c.moe.q_lora_rank > 0 ? c.moe.q_lora_rank : c.hidden_size) * a *
                             double(c.moe.qk_head_dim + c.moe.qk_pos_emb_head_dim) / t,
                         double(c.moe.kv_lora_rank) * a * double(c.moe.qk_head_dim + c.moe.v_head_dim) / t);
    } else {
      largest = h * double(c.num_attention_heads + 2 * c.query_groups()) * double(c.head_dim()) / t;
    }
    if (!c.moe.enabled() || c.moe.moe_layer_freq != "1") largest = std::max(largest, gate * h * double(c.ffn()) / t);
    if (c.moe.enabled() && c.moe.moe_shared_expert_intermediate_size > 0)
      largest = std::max(largest, gate * h * double(c.moe.moe_shared_expert_intermediate_size) / t);
    const double emb = holds_first ? V * h / t / dense_shard : 0.0, out = holds_last && last_stage_has_output(c) ? V * h / t / dense_shard : 0.0;
    std::vector<std::vector<double>> children(1);
    auto add_pieces = [](std::vector<double>& to, double elements, double piece) {
      if (elements <= 0 || piece <= 0) return;
      const double n = std::floor(elements / piece);
      for (double k = 0; k < n; ++k) to.push_back(piece);
      if (elements - n * piece > 1e-9 * piece) to.push_back(elements - n * piece);
    };
    if (emb > 0) children[0].push_back(emb);
    add_pieces(children[0], std::max(0.0, dense_el - emb - out), largest / dense_shard);
    if (out > 0) children[0].push_back(out);
    if (Pe > 0) {
      // One local expert's fc1 weight (TEGroupedLinear: one weight tensor per local expert).
      const double edp = sharded ? double(c.expert_data_parallel()) : 1.0;
      children.emplace_back();
      add_pieces(children[1], Pe / edp, gate * double(c.moe_width()) * double(c.moe_ffn()) / double(c.etp()) / edp);
    }
    mem.state_offload = plan_state_offload(c, children);
    mem.optimizer_offloaded_bytes = mem.state_offload.host_bytes();
    mem.optimizer_step_bytes = mem.state_offload.step_bytes();
    mem.optimizer_bytes -= mem.optimizer_offloaded_bytes;
  }
  // Activations: in-flight micro-batches of this stage (1F1B: p - st; interleaved: Megatron's warm-up
  // count (p - st - 1) * 2 + (v - 1) p, + 1, in chunk units) times the stored bytes per layer.
  const double m = double(c.global_batch_size / (c.micro_batch_size * c.data_parallel()));
  // first_last_layers_bf16: the stage's bf16 layers save bf16 GEMM inputs (bf16_layers_config); the stage's
  // per-layer bytes are the mean over its layers, the largest layer's for a recomputed layer's peak.
  const double bf16_share = layers && c.has_bf16_layers() ? double(layers - quantised_layers) / double(layers) : 0.0;
  const GptConfig hp = c.bf16_layers_config();
  if (!moe && module_recompute)
    act_max_mod = std::max(layer_activation_bytes(keep, true) - layer_activation_bytes(c, true),
                           layer_activation_bytes(keep.bf16_layers_config(), true) - layer_activation_bytes(hp, true));
  auto dense_act = [&](bool drop_scores) {
    const double q = layer_activation_bytes(c, drop_scores);
    return bf16_share > 0 ? (1.0 - bf16_share) * q + bf16_share * layer_activation_bytes(hp, drop_scores) : q;
  };
  const double full = moe ? act_max : bf16_share > 0 ? layer_activation_bytes(hp, false) : layer_activation_bytes(c, false);
  const double rep = c.sequence_parallel ? 1.0 / t : 1.0;
  // A checkpointed layer keeps its input, the residual stream: fp32 with fp32_residual_connection (the
  // norms' saved inputs are their bf16 cast copies either way: gpt_kernels.cpp norm_cast).
  const double input_only = c.residual_bytes() * b * (s / cp) * h * rep;
  // The micro-batch in its backward peaks while a recomputed layer (group) holds its full activations:
  // block -- the first N layers are recomputed after the stored ones were freed: (N-1) inputs + 1 layer;
  // uniform -- groups of G layers: (groups-1) inputs + G layers.
  // Stored bytes of one micro-batch through a chunk of `lpc` layers (MoE models: `sel_mean` selective bytes per
  // layer), and its peak during that chunk's backward.
  // `off_mean`: the bytes fine-grained activation offloading moves to the host per layer (0 = none).
  // distribute_saved_activations: a checkpoint keeps 1 / TP of its input (random.py:621-625 @d98e8a64).
  const double ckpt_input = c.distribute_saved_activations ? input_only / t : input_only;
  auto chunk_bytes = [&](double lpc, double sel_mean, double off_mean) -> std::pair<double, double> {
    double stored = 0, peak = 0;
    if (c.recompute_granularity == "full") {
      double n_re = c.recompute_num_layers ? std::min<double>(double(c.recompute_num_layers), lpc) : lpc;
      if (c.recompute_method == "block") {
        stored = n_re * ckpt_input + (lpc - n_re) * full;
        peak = std::max(stored, (n_re - 1.0) * ckpt_input + full);
      } else {
        const double group = c.recompute_num_layers ? n_re : 1.0;
        const double groups = std::ceil(lpc / group);
        stored = groups * ckpt_input;
        peak = std::max(stored, (groups - 1.0) * ckpt_input + group * full);
      }
    } else if (c.selective_ac_option == "op") {
      // The layer in its backward holds its recomputed activations on top of what was saved.
      stored = lpc * layer_activation_bytes_op_sac(c);
      peak = stored + std::max(0.0, layer_activation_bytes(c, true) - layer_activation_bytes_op_sac(c));
    } else {
      stored = lpc * (moe ? sel_mean : dense_act(c.recompute_granularity == "selective"));
      peak = stored;
      // recompute_modules moe: the MoE layer in its backward holds its recomputed activations on top; mla_up_proj,
      // mlp, shared_experts: their recomputed tensors (act_max_mod).
      if (moe && c.recomputes("moe")) peak += std::max(act_max_sel, act_max_mod);
      else peak += act_max_mod;
    }
    if (off_mean > 0) {
      // Fine-grained activation offloading (fine_grained_activation_offload.py at NVIDIA/Megatron-LM@d98e8a64):
      // activation_offload_fraction keeps a chunk's later groups on the GPU (post_warmup_callback, :652-668;
      // counted here in layers); in the chunk's backward each layer is reloaded while the one after it in
      // backward order runs (bulk_reload, :1271-1286): at most two layers' offloaded bytes are back at a time.
      const double kept = std::floor(lpc * (1.0 - c.activation_offload_fraction) + 1e-9);
      const double off = std::max(0.0, lpc - kept) * off_mean;
      stored -= off;
      peak -= off - std::min(off, 2.0 * off_mean);
    }
    return {stored, peak};
  };
  // The stage's mean chunk.
  const double lpc = act_layers / double(v);
  double off_total = 0;
  for (double o : chunk_off) off_total += o;
  const double off_layer = act_layers > 0 ? off_total / act_layers : 0.0;  // offloaded bytes of a mean layer
  double per_chunk_mb = 0, mb_peak = 0, inflight = 0;
  // The stored activations at the stage's peak, with (offload) or without fine-grained activation offloading.
  auto stored_peak = [&](bool offload) {
    std::tie(per_chunk_mb, mb_peak) = chunk_bytes(lpc, act_mean_sel, offload ? off_layer : 0.0);
    // Activation offloading (no PP, no recompute: one micro-batch in flight): Transformer Engine's default
    // synchronizer keeps the saved activations of at most L - N layers in HBM ("peak memory usage of saving
    // activations is (num_layers - num_offloaded_layers) * T", transformer_engine/pytorch/cpu_offload.py at
    // NVIDIA/TransformerEngine@d0067d0da); the offloaded layers' activations are in pinned host memory.
    if (c.cpu_offloading_num_layers > 0 && lpc > 0) {
      const double one_layer = per_chunk_mb / lpc;
      per_chunk_mb -= double(c.cpu_offloading_num_layers) * one_layer;
      mb_peak -= double(c.cpu_offloading_num_layers) * one_layer;
    }
    // DualPipe: PP + 1 micro-batches' activations of one stage-sized chunk per device (DeepSeek-V3
    // arXiv:2412.19437 Table 2), on every rank (an upper bound for the middle ranks).
    if (c.dualpipe()) inflight = std::min(m, double(p + 1));
    else {
      // The schedule's own warm-up count (gpt_schedule.cpp pipeline_warmup; one more warm-up forward with
      // overlap_moe_expert_parallel_comm and virtual stages): in flight at the first steady-state forward,
      // warm-up + 1 chunk passes, at most every pass of the step.
      const std::int64_t extra = c.moe.enabled() && c.moe.overlap_moe_expert_parallel_comm && v > 1 ? 1 : 0;
      const std::int64_t mi = static_cast<std::int64_t>(m);
      inflight = double(std::min(pipeline_warmup(p, v, mi, st, c.microbatch_group(), extra) + 1, mi * v));
    }
    double act = c.use_torch_fsdp2 ? per_chunk_mb * inflight : per_chunk_mb * (inflight - 1.0) + mb_peak;
    // Chunks that store different bytes (uneven layouts: empty, `E` / `L` only or MTP chunks, dense and MoE
    // layers in different chunks): the peak over the schedule's own order (gpt_schedule.cpp pipeline_order, the
    // order that gives the in-flight count above) of the in-flight chunk passes' stored bytes, a backward's own
    // chunk at its peak. With equal chunks this is the count above times the chunk.
    if (!c.dualpipe() && v > 1 && c.cpu_offloading_num_layers == 0) {
      std::vector<std::pair<double, double>> per(chunks.size());
      bool even = true;
      for (std::size_t k = 0; k < chunks.size(); ++k) {
        per[k] = chunk_layers[k] > 0 ? chunk_bytes(chunk_layers[k], moe ? chunk_sel[k] / chunk_layers[k] : 0.0,
                                                   offload ? chunk_off[k] / chunk_layers[k] : 0.0)
                                     : std::pair<double, double>{0.0, 0.0};
        even = even && per[k] == per[0];
      }
      if (!even) {
        const std::int64_t extra = c.moe.enabled() && c.moe.overlap_moe_expert_parallel_comm ? 1 : 0;
        double live = 0, peak = 0;
        for (const GptSlot& sl : pipeline_order(p, v, static_cast<std::int64_t>(m), st, c.microbatch_group(), extra)) {
          const auto& b = per[static_cast<std::size_t>(sl.chunk)];
          if (sl.fwd) {
            live += b.first;
            peak = std::max(peak, live);
          } else {
            if (!c.use_torch_fsdp2) peak = std::max(peak, live - b.first + b.second);
            live -= b.first;
          }
        }
        act = peak;
      }
    }
    return act;
  };
  // Groups kept on the GPU (fine_grained_activation_offload.py at NVIDIA/Megatron-LM@d98e8a64):
  // post_warmup_callback keeps the last group of each module name (:609-640), one layer's worth per rank;
  // delta_offload_bytes_across_pp_ranks keeps pipeline rank r's first r x delta bytes (:642-650).
  const double with_offload = off_total > 0 ? stored_peak(true) + off_layer : 0.0;
  double act = stored_peak(false);
  const double offloaded =
      off_total > 0 ? std::max(0.0, act - with_offload - double(st) * double(c.delta_offload_bytes_across_pp_ranks)) : 0.0;
  act -= offloaded;
  // torch.distributed.pipelining (the PP runtime under torch FSDP2): a stage keeps each forwarded
  // micro-batch's outputs in fwd_cache until that micro-batch's backward (torch/distributed/pipelining/
  // stage.py, forward_one_chunk: fwd_cache[fwd_chunk_id] = (output_tuple, input_values)), one chunk output
  // (2 b s h / cp bytes, split by SP) per in-flight micro-batch; Megatron frees the sent output's storage
  // (deallocate_pipeline_outputs). The last stage's output is the loss.
  if (c.use_torch_fsdp2 && p > 1) act += (holds_last ? inflight - 1.0 : inflight) * input_only;
  // torch FSDP2 under PP frees the unsharded gradients at the end of every step (the last backward's
  // post_backward reduce-scatters and drops them, torch/distributed/pipelining/stage.py
  // backward_maybe_with_nosync -> FSDPParamGroup.post_backward), so they are re-created by the step's first
  // backward. Where 1F1B's warm-up forwards every micro-batch before the first backward (Schedule1F1B:
  // warmup_chunks = min(n_microbatches, num_stages - stage_index); in-flight = m), the stored micro-batches
  // peak before any unsharded gradient exists and the gradients are complete only once the first
  // micro-batch's stored inputs and output are gone: peak = (m - 1) micro-batches + max(one micro-batch, the
  // unsharded gradients), i.e. the sum less the smaller of the two.
  if (c.use_torch_fsdp2 && p > 1 && !c.dualpipe() && v == 1 && inflight >= m) {
    const double first_mb = per_chunk_mb + (holds_last ? 0.0 : input_only);
    act -= std::min(first_mb, grad * P);
  }
  // Its receive buffers are allocated once per micro-batch and kept across steps (stage.py,
  // _prepare_forward_infra: one _make_tensor_from_meta buffer per chunk id on every stage that receives
  // activations; _prepare_backward_infra / _create_grad_recv_info: one per chunk id on every stage that
  // receives gradients). A gradient buffer is an output-sized tensor for each micro-batch on every virtual
  // stage but the last; an activation buffer of an in-flight micro-batch is that micro-batch's first stored
  // layer input (already counted), the others are extra. Virtual stages of this rank: ch * p + st.
  if (c.use_torch_fsdp2 && p > 1 && !c.dualpipe()) {
    const double per_chunk_inflight = inflight / double(v);
    for (std::int64_t ch = 0; ch < v; ++ch) {
      const std::int64_t vs = ch * p + st;
      if (vs != 0) act += std::max(0.0, m - per_chunk_inflight) * input_only;
      if (vs != p * v - 1) act += m * input_only;
    }
  }
  // Loss buffers on the last stage, per logit element (s b V / (t cp) of them): Megatron-Core's
  // vocab-parallel cross entropy (megatron/core/tensor_parallel/cross_entropy.py) keeps the bf16 logits
  // (2 bytes), upcasts them to fp32 (4), saves the fp32 softmax for the backward (4) and produces an fp32
  // gradient (4): 14 bytes; the fused version (cross_entropy_loss_fusion, fused_cross_entropy.py) works in
  // place on the fp32 softmax: 2 + 4 = 6 bytes. Its Transformer Engine form (cross_entropy_fusion_impl te:
  // parallel_cross_entropy, transformer_engine/pytorch/cross_entropy.py:53-62 and triton/cross_entropy.py:44-116 at
  // NVIDIA/TransformerEngine@d0067d0da) reads the bf16 logits (2) in its forward kernels, writes the fp32 gradient
  // (4: empty_like(input, float32)) and saves only that, scaling it in place in the backward: 6 bytes at the peak
  // too, so the two are priced alike (no measurement tells their speeds apart: both at the cross_entropy rate).
  //
  // PyTorch (cross_entropy_impl torch / torch_compiled; torchtitan's loss
  // torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), labels), torchtitan/components/loss.py,
  // with `del pred` before the backward, train.py): eager without TP, the bf16 logits (2), their fp32 copy
  // (4) and the log_softmax output (4, saved) in the forward; in the backward the saved output (4), the
  // nll_loss gradient (4, a dense zeros + scatter) and the log_softmax input gradient (4): 12 bytes at the
  // peak. Under TP the logits stay vocab-sharded and torch.distributed.tensor.parallel.loss_parallel runs
  // (torchtitan's default): its backward (torch/distributed/tensor/parallel/loss.py,
  // _nll_loss_and_log_softmax_backward) holds the saved output (4), a zeros_like gradient (4), exp of the
  // output (4) and their sum and product (4 each, two live at a time): 16 bytes. torch.compile'd (torchtitan
  // from pytorch/torchtitan@bbb1b616e, 2025-04-02, build_cross_entropy_loss with training.compile): one
  // fused kernel per pass; the backward needs the saved bf16 logits (2) and writes the bf16 gradient (2):
  // 4 bytes.
  double loss_bytes = c.cross_entropy_loss_fusion ? 6.0 : 14.0;
  if (c.cross_entropy_impl == "torch") loss_bytes = t > 1 ? 16.0 : 12.0;
  else if (c.cross_entropy_impl == "torch_compiled") loss_bytes = 4.0;
  double loss_phase = holds_last ? loss_bytes * (s / cp) * b * V / t : 0.0;
  // torch TP (DTensor plan, torchtitan parallelize_llama.py: "output": ColwiseParallel(input_layouts=Shard(1)))
  // all-gathers the sequence-parallel final-norm output and nn.Linear saves that replicated input for the
  // weight gradient: 2 b s h / cp bytes, not split over TP (Megatron-Core saves the sequence-parallel shard and
  // gathers it again in the backward).
  if (holds_last && c.use_torch_fsdp2 && c.cross_entropy_impl != "megatron" && t > 1)
    loss_phase += 2.0 * b * (s / cp) * h;
  // torchtitan's own RMSNorm (final_norm_eager; torchtitan/models/norms.py RMSNorm at pytorch/torchtitan@9dec370:
  // `self._norm(x.float()).type_as(x) * self.weight`, _norm = x * rsqrt(x.pow(2).mean(-1) + eps)) runs the
  // final norm eagerly -- torch.compile wraps only the transformer blocks (parallelize_llama.py apply_compile)
  // -- so autograd keeps the fp32 copy of its input (4 bytes, saved by pow and mul) and the bf16 normalized
  // output (2, saved by the weight multiply) per element of its sequence-parallel input, b s h / (t cp), from
  // the forward to the norm's backward, which runs after the output layer's: the loss phase.
  if (holds_last && c.final_norm_eager) loss_phase += 6.0 * b * (s / cp) * h * rep;
  // torch.distributed.pipelining keeps the last stage's output -- the bf16 logits, 2 bytes per logit element
  // -- of every micro-batch of the step in output_chunks, to merge them when the step ends (torch/distributed/
  // pipelining/stage.py, forward_one_chunk: `if self.is_last: self.output_chunks.append(output)`; the list is
  // cleared by clear_runtime_states at the next step). So with PP nothing like `del pred` frees the logits:
  // during the last micro-batch's loss all m of them are live. The eager losses above do not count the logits
  // (freed by `del pred` without PP); the compiled loss counts the current micro-batch's as its saved input.
  // (Before pytorch/pytorch#153383, 2025-05, every stage appended its outputs there, not only the last: up
  // to (m - in-flight) more stage outputs on the middle stages, never the peak stage of these schedules; not
  // modelled.)
  const bool pp_logits_kept = holds_last && c.use_torch_fsdp2 && p > 1 && c.cross_entropy_impl != "megatron";
  if (pp_logits_kept)
    loss_phase += 2.0 * (m - (c.cross_entropy_impl == "torch_compiled" ? 1.0 : 0.0)) * (s / cp) * b * V / t;
  // defer_embedding_wgrad_compute: the last stage keeps each deferred micro-batch's output-layer input (its
  // sequence-parallel shard, bf16) and logit gradient (bf16) until the flush (embedding_activation_buffer,
  // grad_output_buffer; megatron/core/tensor_parallel/layers.py at NVIDIA/Megatron-LM@d98e8a64).
  if (holds_last && c.defer_embedding_wgrad_compute) {
    const double deferred = c.wgrad_deferral_limit ? std::min(m, double(c.wgrad_deferral_limit)) : m;
    loss_phase += deferred * 2.0 * b * (s / cp) * (V / t + h / (c.sequence_parallel ? t : 1.0));
  }
  if (!c.use_torch_fsdp2) {
    // Megatron-Core path: the loss buffers are added to the recomputed layer's working set (an upper bound;
    // not checked against published memory).
    act += loss_phase;
  } else {
    // torch runtime (FSDP2, torchtitan): the peak is the larger of two phases that do not overlap in time.
    // Loss phase: the loss buffers and the output layer's saved input, freed by the output layer's backward
    // (torchtitan train.py: `del pred`, then loss.backward()). Layer-backward phase, after it: the layer
    // being recomputed and differentiated (mb_peak above its stored bytes), the CP ring buffers and, without
    // PP, the output layer's unsharded bf16 weight gradient, which FSDP2 keeps until the root unit's
    // reduce-scatter in the post-backward final callback (the root's inputs need no gradient;
    // torch/distributed/_composable/fsdp/_fsdp_state.py, _root_post_backward_final_callback).
    double bwd_phase = mb_peak - per_chunk_mb;
    // Without PP (with PP the whole stage is gathered, counted in the weights), the embedding and output
    // layer's FSDP2 units. torchtitan before pytorch/torchtitan@83e694105 (2025-07-28; fsdp_embeddings_in_root):
    // tok_embeddings, norm and output are left to the final fully_shard(model), the root unit
    // (parallelisms/parallelize_llama.py apply_fsdp at 9dec370), which FSDP2 never reshards after forward
    // (torch/distributed/_composable/fsdp/_fsdp_state.py, FSDPState._lazy_init: "For the root, do not reshard
    // after forward", post_forward_mesh_info = None): their bf16 weights (2 bytes each) are gathered in both
    // phases, and the output weight's unsharded bf16 gradient stays from the output layer's backward to the
    // root's reduce-scatter in the post-backward final callback (the root's inputs need no gradient;
    // _root_post_backward_final_callback). From 83e694105 (models/llama3/infra/parallelize.py apply_fsdp):
    // tok_embeddings is a unit resharded after forward, [norm, output] a unit that is not, and whose
    // gradient is reduce-scattered as soon as its backward ends: only the output layer is gathered, in the
    // loss phase.
    double unit_w_loss = 0, unit_w_bwd = 0;
    if (p == 1) {
      const double out_w = last_stage_has_output(c) ? V * h / t : 0.0, emb_w = embedding_params_per_rank(c);
      if (c.fsdp_embeddings_in_root) {
        unit_w_loss = unit_w_bwd = 2.0 * (emb_w + out_w);
        bwd_phase += 2.0 * (out_w > 0 ? out_w : emb_w);  // tied: the output's gradient lands on the embedding
      } else {
        unit_w_loss = 2.0 * (out_w > 0 ? out_w : emb_w);
      }
    }
    if (cp > 1 && c.attention_backend != "unfused") {
      // torch context parallelism (torch/distributed/tensor/experimental/_attention.py,
      // _templated_ring_attention_backward, the rotate method torchtitan defaults to: "allgather",
      // torchtitan config_manager.py at 9dec370). In the backward of one attention: the all-gathered K and V
      // of every CP rank in bf16 (_AllGatherRotater: 2 x 2 x cp units), the fp32 accumulators grad_query,
      // grad_key, grad_value (3 x 4), the dK/dV ring's fp32 send buffer and receive buffer (_AllToAllRotater
      // for the gradients: 2 x 8) and the fp32 copies of _partial_update's chunk + cat on the load-balanced
      // half (8): (4 cp + 36) units of one byte per element of b x s/cp x heads x head_dim. The kernel's own
      // bf16 dq/dk/dv are left out (a single-GPU SDPA backward has them too). K and V carry every query head:
      // torchtitan's Llama expands the GQA groups with repeat_kv before SDPA (torchtitan/models/llama/
      // model.py at 9dec370).
      const double unit = b * (s / cp) * double(c.num_attention_heads) / t * double(c.head_dim());
      bwd_phase += (4.0 * cp + 36.0) * unit;
    }
    // Reserved, not live, in the loss phase of torchtitan's eager loss (cross_entropy_impl torch): the caching
    // allocator serves a request from the smallest cached free block that fits (c10/cuda/
    // CUDACachingAllocator.cpp, get_free_block) and merges only adjacent free blocks. Without TP, the forward
    // allocates the bf16 logits (2 bytes per element), their fp32 copy (4) and the log_softmax output (4) one
    // after the other; the fp32 copy dies with the loss call and `del pred` frees the logits: one 6-byte
    // hole before the live 4-byte output. The backward's nll_loss gradient (4) takes 4 bytes of it and the
    // log_softmax input gradient (4) does not fit the 2 left, so the segment grows: reserved = allocated + 2.
    // Under TP (loss_parallel, torch/distributed/tensor/parallel/loss.py): logits (2), fp32 copy (4),
    // `shifted` (4), exp(shifted) (4, freed after its sum; the result (4) reuses its block); `shifted`, the
    // copy and the logits die: a 14-byte hole before the saved result. The fused backward allocates
    // zeros_like (4), exp (4) and their sum (4) into it (2 left); the product (4) reuses the freed exp's
    // block: allocated 16 at the peak, reserved 18 -- again 2 bytes per element. The compiled loss is one
    // kernel per pass and is not sized here.
    // With PP the logits stay (output_chunks above): without TP the 4-byte hole of the dead fp32 copy takes the
    // nll_loss gradient; under TP the copy and `shifted` leave an 8-byte hole that zeros_like and exp fill
    // exactly: no hole.
    const double loss_hole =
        holds_last && c.cross_entropy_impl == "torch" && !pp_logits_kept ? 2.0 * (s / cp) * b * V / t : 0.0;
    // The gathered unit weights are reported as weights, the rest of the phase as activations.
    const bool loss_peak = loss_phase + unit_w_loss + loss_hole >= bwd_phase + unit_w_bwd;
    mem.weights_bytes += loss_peak ? unit_w_loss : unit_w_bwd;
    act += loss_peak ? loss_phase : bwd_phase;
    // Reserved, not live: FSDP2 all-gathers a unit into one flat buffer allocated on its all-gather copy-in
    // stream (torch/distributed/_composable/fsdp/_fsdp_collectives.py, foreach_all_gather:
    // all_gather_copy_in under torch.cuda.stream(all_gather_copy_in_stream)), copies it out into the
    // parameters' own unsharded tensors on the compute stream (foreach_all_gather_copy_out,
    // split_with_sizes_copy), and frees the flat buffer only after the next unit's all-gather has been issued
    // (the previous AllGatherResult is kept in the all-gather state to avoid record_stream). The caching
    // allocator keeps freed blocks in the pool of the stream that allocated them, where the compute stream
    // cannot reuse them, so from the first step on the copy-in stream's pool holds the largest two
    // consecutive flat buffers: the largest unit (the root with fsdp_embeddings_in_root, else the embedding
    // or output unit; a layer where that is larger, as on a pipeline stage whose root holds only the output
    // layer or nothing) and a layer, in bf16 (a layer in fp8 with the float8 all-gather). torchtitan's figure
    // is reserved memory (torchtitan metrics.py: reserved_bytes.all.peak).
    const double emb_w = holds_first ? embedding_params_per_rank(c) : 0.0;
    const double out_w = holds_last && last_stage_has_output(c) ? V * h / t : 0.0;
    // The flat buffers hold each unit in its all-gather dtype: a layer in fp8 with the float8 all-gather, the
    // embedding / output units in bf16.
    const double unit = c.fsdp_embeddings_in_root ? emb_w + out_w : std::max(emb_w, out_w);
    const double gwl = c.fsdp_layer_gather_bytes();
    const double largest_bytes = std::max(2.0 * unit, gwl * Pl);
    mem.allocator_reserve_bytes = largest_bytes + gwl * Pl + (loss_peak ? loss_hole : 0.0);
    // Runtime buffers, live for the whole step, allocated through the caching allocator: (1) the cuBLAS
    // workspace of the compute stream, one per (handle, stream) (aten/src/ATen/cuda/CublasHandlePool.cpp,
    // parseChosenWorkspaceSize, "`:4096:2:16:8` default, 32MiB for Hopper": 4096 KiB x 8 on compute capability
    // 9.0, else 4096 KiB x 2 + 16 KiB x 8). (2) torchtitan's Llama registers its RoPE table as a buffer,
    // freqs_cis = complex64 [max_seq_len, head_dim / 2] with max_seq_len = the training seq_len
    // (torchtitan/models/llama/model.py precompute_freqs_cis and train.py at pytorch/torchtitan@9dec370):
    // 4 x seq x head_dim bytes, one per model chunk (each pipeline chunk is a deep copy of the model,
    // parallelisms/pipeline_llama.py _build_stage). Without PP, torch context parallelism shards it in place
    // and keeps a full clone to restore it after the step (torch/distributed/tensor/experimental/_attention.py
    // context_parallel: original_buffers = [... b.clone() ...], resize_ keeps the storage): two tables.
    const std::string gpu_name = models::gpu_spec(c.gpu, "gpu").name;
    const bool sm90 = gpu_name.rfind("h100", 0) == 0 || gpu_name == "h200";
    const double cublas_ws = sm90 ? 4096.0 * 1024 * 8 : 4096.0 * 1024 * 2 + 16.0 * 1024 * 8;
    const double rope_tables = c.position_embedding_type == "rope" ? double(v) * (p == 1 && cp > 1 ? 2.0 : 1.0) : 0.0;
    mem.buffers_bytes = cublas_ws + rope_tables * 4.0 * s * double(c.head_dim());
  }
  mem.activations_bytes = act;
  mem.activations_offloaded_bytes = offloaded;
  return mem;
}

GptMemory gpt_memory_per_gpu(const GptConfig& c) {
  GptMemory best;
  for (std::int64_t st = 0; st < c.pipeline_model_parallel_size; ++st) {
    GptMemory m = gpt_memory_of_stage(c, st);
    if (st == 0 || m.total_bytes() > best.total_bytes()) best = m;
  }
  return best;
}

}  // namespace fabricsim::workloads
