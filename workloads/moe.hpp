#pragma once
// Mixture-of-experts and multi-latent-attention parameters of the `gpt` generator (workloads/gpt.hpp), with
// Megatron-LM's argument names (docs/workloads.md, "Mixture of experts"), and the routing model: how the
// router spreads each MoE layer's tokens over the experts (uniform, a seeded Zipf or Dirichlet sample, or
// measured per-expert token counts from a file), what each expert-parallel rank receives after capacity
// dropping / padding, and the all_to_allv matrices that carry it.
#include <cstdint>
#include <string>
#include <vector>

#include "workloads/params.hpp"

namespace fabricsim::workloads {

struct MoeConfig {
  // Experts (0 = dense model).
  std::int64_t num_experts = 0;
  std::int64_t moe_router_topk = 2;
  std::int64_t moe_ffn_hidden_size = 0;                   // 0 = ffn_hidden_size
  std::int64_t moe_shared_expert_intermediate_size = 0;   // 0 = no shared expert
  bool moe_shared_expert_overlap = false;                 // shared expert runs beside the dispatch/combine
  bool moe_shared_expert_gate = false;                    // sigmoid gate (h -> 1) scaling the shared expert's output
  std::int64_t moe_latent_size = 0;                       // latent MoE: experts run in this width (0 = hidden_size)
  std::string moe_router_dtype;                           // "" (activation dtype) | fp32 (router GEMM + scores in fp32)
  bool moe_router_padding_for_quantization = false;       // routing map padded to the FP8 / FP4 GEMM alignment
  std::int64_t moe_router_pad_multiple = 0;               // that alignment (set by the gpt generator from the recipe)
  std::string moe_layer_freq = "1";                       // N (every N-th layer) or "([0]*3+[1]*58)" / "[1,0,1]"
  std::int64_t expert_model_parallel_size = 1;
  std::int64_t expert_tensor_parallel_size = 0;           // 0 = tensor_model_parallel_size (Megatron default)
  std::string moe_token_dispatcher_type = "allgather";    // allgather | alltoall | flex (Megatron default allgather)
  std::int64_t moe_router_num_groups = 0;                 // device/node-limited routing: expert groups (0 = off)
  std::int64_t moe_router_group_topk = 0;                 // groups a token may use
  bool moe_grouped_gemm = false;
  std::string moe_router_load_balancing_type = "aux_loss";  // aux_loss | seq_aux_loss | sinkhorn | none
  double moe_expert_capacity_factor = 0;                  // 0 = dropless
  bool moe_pad_expert_input_to_capacity = false;
  bool moe_permute_fusion = false;
  bool moe_router_fusion = false;                         // TE's fused score function + top-k (one kernel)
  std::string moe_router_score_function = "softmax";      // softmax | sigmoid | sqrtsoftplus
  double moe_aux_loss_coeff = 0;                          // load-balancing loss (aux_loss / seq_aux_loss), 0 = none
  double moe_z_loss_coeff = 0;                            // router z-loss (ST-MoE), 0 = none (Megatron's None)
  bool moe_router_enable_expert_bias = false;             // aux-loss-free balancing: per-expert bias before top-k
  bool moe_router_force_load_balancing = false;           // random router logits (benchmark mode): uniform load
  // Megatron's --moe-input-jitter-eps (Switch Transformer's input jitter): the router's input times uniform noise in
  // [1 - eps, 1 + eps] (TopKRouter.apply_input_jitter, megatron/core/transformer/moe/router.py @d98e8a64); < 0 = None.
  double moe_input_jitter_eps = -1;
  bool overlap_moe_expert_parallel_comm = false;          // 1F1B A2A overlap with the other micro-batch
  bool delay_wgrad_compute = false;                       // weight-gradient GEMMs after the input gradient's A2A / p2p
  // Load model (fabricsim's own keys; Megatron has no equivalent): how routed tokens spread over experts.
  std::string moe_load = "uniform";                       // uniform | zipf | dirichlet | file
  double moe_load_skew = 1.0;                             // zipf exponent s, or dirichlet concentration alpha
  std::int64_t moe_load_seed = 1;
  std::string moe_expert_token_counts_file;               // moe_load=file: JSON, see docs/workloads.md
  // Multi-latent attention (DeepSeek-V2/V3).
  bool multi_latent_attention = false;
  std::int64_t q_lora_rank = 0;  // 0 = no query compression (q projected directly from the hidden state)
  std::int64_t kv_lora_rank = 512, qk_head_dim = 128, qk_pos_emb_head_dim = 64, v_head_dim = 128;
  // Multi-token prediction (DeepSeek-V3): extra layers + output heads on the last pipeline stage.
  std::int64_t mtp_num_layers = 0;

  bool enabled() const { return num_experts > 0; }
  // Megatron-Core computes the load-balancing loss only for these types with a positive coefficient
  // (TopKRouter.get_aux_loss_coeff / is_aux_loss_enabled, megatron/core/transformer/moe/router.py @d98e8a64).
  bool aux_loss_on() const {
    return moe_aux_loss_coeff > 0 &&
           (moe_router_load_balancing_type == "aux_loss" || moe_router_load_balancing_type == "seq_aux_loss");
  }
};

// Catalogue defaults for a named model (false when the model has no MoE/MLA entry).
bool moe_catalogue_defaults(const std::string& model, MoeConfig& out);

// Reads the MoE / MLA keys (call before ParamReader::finish). `m` holds the defaults on entry.
void read_moe_params(ParamReader& r, MoeConfig& m);

// Which layers are MoE layers (Megatron-LM --moe-layer-freq: an integer N means layers 0, N, 2N, ...; a
// Python-style list expression such as "([0]*3+[1]*58)" or "[0,1,1]" gives one entry per layer).
// Throws InputError naming `where` and `key` for malformed expressions or a length other than num_layers. The
// list form serves Megatron's other per-layer patterns too (--window-attn-skip-freq: gpt_model.cpp).
std::vector<bool> moe_layer_pattern(const std::string& freq, std::int64_t num_layers, const std::string& where,
                                    const std::string& key = "moe_layer_freq");

// Per MoE layer, the fraction of routed token slots each expert gets (sums to 1). uniform: 1/E; zipf:
// p ~ rank^-skew over a seeded random placement of the ranks; dirichlet: normalised Gamma(skew) samples;
// file: the file's counts (one row per MoE layer, or one row for all). Deterministic for a seed.
std::vector<std::vector<double>> moe_expert_shares(const MoeConfig& m, std::int64_t moe_layers,
                                                   const std::string& where);

// Token counts of one MoE layer and one micro-batch. `tokens_per_rank` tokens enter the layer on each
// attention rank; each of the `sources` ranks of an expert-parallel group sends its top-k slots. Dropping /
// padding per Megatron-Core: capacity per expert and source = ceil(tokens * topk / E * capacity_factor).
struct MoeLayerLoad {
  std::vector<double> expert_tokens;   // tokens each expert processes (all sources, after dropping/padding)
  std::vector<double> rank_tokens;     // tokens each EP rank processes (sum over its local experts)
  std::vector<double> recv_share;      // per EP rank: its tokens / (tokens_per_rank x topk) from one source
  double mean_rank_tokens = 0, max_rank_tokens = 0;
  std::int64_t busiest_rank = 0;
  double dropped_fraction = 0;         // routed slots dropped by the capacity factor
};
// How many distinct copies of a token a set of experts receives under uniform routing, for dispatchers that
// send a token once per destination GPU or node rather than once per routed slot (DeepEP, `flex`).
// "Uniform routing" is the router of the uniform load: every token's scores are i.i.d. over the experts, so
// every expert gets 1/E of the slots and a token's k experts are k distinct ones (Megatron's top-k).
// * No group limit: the k experts are a uniformly random k-subset of the E, so a token misses a set of n
//   experts with probability C(E - n, k) / C(E, k) (the hypergeometric probability of no success; for sets
//   of E/N experts each, the expected distinct sets of a token are N (1 - C(E - E/N, k) / C(E, k))).
// * Group-limited routing (moe_router_num_groups > 0, 0 < moe_router_group_topk < num_groups): Megatron-LM's
//   group_limited_topk (megatron/core/transformer/moe/moe_utils.py @1e057005) keeps the group_topk groups
//   with the largest sum of their top (topk / group_topk) scores and takes the top-k experts of those groups.
//   The scores are exchangeable within a group and the groups exchangeable among themselves, so a token's
//   routing is described by its profile -- how many of its k experts each selected group holds -- and, given
//   the profile, the selected groups are a uniformly random ordered choice of group_topk of the groups and
//   each group's experts a uniformly random subset of its experts of the profile's size. The miss
//   probability of a set is then exact given the profile distribution, which has no closed form (it depends
//   on the score values through the group sums) and is sampled once: 32768 tokens of i.i.d. uniform scores,
//   each group's top min(k, group size) scores drawn as order statistics, fixed seed (same inputs, same
//   result). For DeepSeek-V3 (256 experts, 8 groups, 4 used, top-8) a token reaches 3.95 of its 4 groups;
//   a uniformly random choice of 8 of the 4 groups' 128 experts would reach 3.63.
class MoeTokenSpread {
 public:
  explicit MoeTokenSpread(const MoeConfig& m);
  // Probability that a token has at least one of its routed slots on experts [first, last).
  double reach(std::int64_t first, std::int64_t last) const;
  // Copies of a token sent to experts [first, last) per routed slot they receive: reach / (k (last - first) / E).
  double copies_per_slot(std::int64_t first, std::int64_t last) const;

 private:
  std::int64_t E_ = 1, k_ = 1, groups_ = 1, group_size_ = 1;
  std::vector<std::pair<std::vector<std::int64_t>, double>> profiles_;  // experts per selected group, weight
};

MoeLayerLoad moe_layer_load(const MoeConfig& m, const std::vector<double>& shares, double tokens_per_rank,
                            std::int64_t ep, std::int64_t sources);

}  // namespace fabricsim::workloads
