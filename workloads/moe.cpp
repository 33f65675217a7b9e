#include "workloads/moe.hpp"

#include <algorithm>
#include <functional>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>

#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"

namespace fabricsim::workloads {

bool moe_catalogue_defaults(const std::string& model, MoeConfig& m) {
  MoeConfig c;
  if (model == "deepseek-v3") {
    // DeepSeek-V3 Technical Report (arXiv:2412.19437) Sec. 4.2: 61 layers, all FFNs MoE except the first
    // three; 1 shared + 256 routed experts of intermediate size 2048, 8 activated per token; MLA with 128
    // heads, d_c (kv_lora_rank) 512, d_c' (q_lora_rank) 1536, per-head dim 128, decoupled RoPE dim 64;
    // MTP depth 1. Released config.json (deepseek-ai/DeepSeek-V3): n_routed_experts 256, n_shared_experts 1,
    // moe_intermediate_size 2048, first_k_dense_replace 3, num_experts_per_tok 8, v_head_dim 128.
    c.num_experts = 256, c.moe_router_topk = 8, c.moe_ffn_hidden_size = 2048;
    c.moe_shared_expert_intermediate_size = 2048, c.moe_layer_freq = "([0]*3+[1]*58)";
    c.moe_router_load_balancing_type = "seq_aux_loss";  // Sec. 2.1.2: aux-loss-free bias + sequence-wise loss
    // Node-limited routing (Sec. 2.1.2 / 3.2.2: each token to at most 4 nodes); config.json n_group 8,
    // topk_group 4 -> Megatron --moe-router-num-groups 8 --moe-router-group-topk 4.
    c.moe_router_num_groups = 8, c.moe_router_group_topk = 4;
    c.multi_latent_attention = true, c.q_lora_rank = 1536, c.kv_lora_rank = 512;
    c.qk_head_dim = 128, c.qk_pos_emb_head_dim = 64, c.v_head_dim = 128, c.mtp_num_layers = 1;
  } else if (model == "qwen3-30b-a3b" || model == "qwen3-235b-a22b") {
    // Qwen3 Technical Report (arXiv:2505.09388) Table 2: 128 experts, 8 activated, no shared experts;
    // config.json (Qwen/Qwen3-30B-A3B, Qwen/Qwen3-235B-A22B): moe_intermediate_size 768 / 1536,
    // decoder_sparse_step 1 (every layer MoE).
    c.num_experts = 128, c.moe_router_topk = 8;
    c.moe_ffn_hidden_size = model == "qwen3-30b-a3b" ? 768 : 1536;
    c.moe_router_load_balancing_type = "aux_loss";  // global-batch load balancing loss (report Sec. 2)
  } else if (model == "qwen3-next-80b-a3b") {
    // yanring/Megatron-MoE-ModelZoo@e8650517 model_configs/benchmarking/Qwen3-Next-80B-A3B.yaml: 512 experts, top-10,
    // moe_ffn_hidden_size 512, one shared expert of 512 with its sigmoid gate (--moe-shared-expert-gate: "Qwen3-Next
    // have a shared expert gate"), aux-loss load balancing, one MTP layer (--mtp-num-layers 1).
    c.num_experts = 512, c.moe_router_topk = 10, c.moe_ffn_hidden_size = 512;
    c.moe_shared_expert_intermediate_size = 512, c.mtp_num_layers = 1, c.moe_shared_expert_gate = true;
    c.moe_router_load_balancing_type = "aux_loss";
  } else if (model == "gpt-oss-120b") {
    // gpt-oss-120b & gpt-oss-20b model card (arXiv:2508.10925) Table 1 / config.json (openai/gpt-oss-120b):
    // 128 experts, top-4, intermediate_size 2880 per expert, every layer MoE, no shared expert.
    c.num_experts = 128, c.moe_router_topk = 4, c.moe_ffn_hidden_size = 2880;
  } else if (model == "llama4-scout") {
    // Llama 4 Scout: 16 routed experts, top-1, one shared expert, both of hidden size 8192, every layer MoE
    // (torchtitan llama4 "17bx16e" with MoEArgs defaults top_k 1, use_shared_expert; workloads/gpt_models.cpp).
    c.num_experts = 16, c.moe_router_topk = 1, c.moe_ffn_hidden_size = 8192;
    c.moe_shared_expert_intermediate_size = 8192;
  } else if (model == "llama4-maverick") {
    // Llama 4 Maverick: torchtitan llama4 "17bx128e" (pytorch/torchtitan@4a950eaab torchtitan/models/llama4/
    // __init__.py: MoEArgs(num_experts=128), top_k default 1, num_shared_experts default 1 (models/moe/moe.py);
    // model/model.py: MoE hidden int(int(1.2 x int(2 x 4 x 5120 / 3)) / (top_k + shared 1)) rounded up to
    // multiple_of 2048 = 8192, the shared expert the same), on layers with (layer_id + 1) %
    // interleave_moe_layer_step (default 2, model/args.py) == 0: dense, MoE, dense, MoE, ...
    c.num_experts = 128, c.moe_router_topk = 1, c.moe_ffn_hidden_size = 8192;
    c.moe_shared_expert_intermediate_size = 8192, c.moe_layer_freq = "([0,1]*24)";
  } else if (model == "deepseek-v3-16b") {
    // torchtitan deepseek_v3 "16B" (pytorch/torchtitan@4a950eaab torchtitan/models/deepseek_v3/__init__.py):
    // n_dense_layers 1 of 27, 64 routed experts of moe_inter_dim 1408, num_shared_experts 2 (one MLP of 2 x 1408,
    // models/moe/moe.py FeedForward(hidden_dim x num_shared_experts)), top_k 6, score_func softmax; MLA with
    // q_lora_rank 0 (no query compression), kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64,
    // v_head_dim 128. No MTP (torchtitan has none for this flavor).
    c.num_experts = 64, c.moe_router_topk = 6, c.moe_ffn_hidden_size = 1408;
    c.moe_shared_expert_intermediate_size = 2816, c.moe_layer_freq = "([0]*1+[1]*26)";
    c.multi_latent_attention = true, c.q_lora_rank = 0, c.kv_lora_rank = 512;
    c.qk_head_dim = 128, c.qk_pos_emb_head_dim = 64, c.v_head_dim = 128;
  } else if (model == "mixtral-8x7b" || model == "mixtral-8x22b") {
    // Mixtral of Experts (arXiv:2401.04088) Table 1: 8 experts, top-2, every layer; expert hidden = the
    // model's hidden_dim (14336 for 8x7B; 16384 for 8x22B per its config.json, mistralai/Mixtral-8x22B-v0.1).
    c.num_experts = 8, c.moe_router_topk = 2;
  } else if (model == "mixtral-8x22b-g8t8") {
    // MoE Parallel Folding (arXiv:2504.14960) Sec. 4.1: 64 experts, 8 active per token, each expert's hidden
    // size one-eighth of Mixtral 8x22B's 16384 (moe_h100.csv row 10: moe_expert_ffn 2048).
    c.num_experts = 64, c.moe_router_topk = 8, c.moe_ffn_hidden_size = 2048;
  } else if (model == "llama3-8x70b") {
    // MoE Parallel Folding (arXiv:2504.14960) Sec. 4.1: Llama3-70B upcycled to 8 experts of the dense FFN
    // (28672). The paper does not print top-k; top-2 is assumed, the choice of the coarse-grained models it
    // is grouped with (Mixtral 8x22B, Table 1 "Coarse-grained") and of "8xN" upcycled models (Mixtral).
    c.num_experts = 8, c.moe_router_topk = 2;
  } else if (model == "qwen2-57b-a14b") {
    // Qwen2 Technical Report (arXiv:2407.10671) Table 1: 64 routed experts of intermediate size 2560, 8
    // activated, 8 shared experts (one always-on MLP of 8 x 2560 = 20480, config.json
    // shared_expert_intermediate_size; moe_h100.csv row 5: moe_shared_expert_ffn 20480); every layer MoE.
    c.num_experts = 64, c.moe_router_topk = 8, c.moe_ffn_hidden_size = 2560;
    c.moe_shared_expert_intermediate_size = 20480;
  } else {
    return false;
  }
  m = c;
  return true;
}

void read_moe_params(ParamReader& r, MoeConfig& m) {
  m.num_experts = r.integer("num_experts", m.num_experts, 0);
  m.moe_router_topk = r.integer("moe_router_topk", m.moe_router_topk, 1);
  m.moe_ffn_hidden_size = r.integer("moe_ffn_hidden_size", m.moe_ffn_hidden_size, 0);
  m.moe_shared_expert_intermediate_size =
      r.integer("moe_shared_expert_intermediate_size", m.moe_shared_expert_intermediate_size, 0);
  m.moe_shared_expert_overlap = r.boolean("moe_shared_expert_overlap", m.moe_shared_expert_overlap);
  m.moe_shared_expert_gate = r.boolean("moe_shared_expert_gate", m.moe_shared_expert_gate);
  m.moe_latent_size = r.integer("moe_latent_size", m.moe_latent_size, 0);
  m.moe_router_dtype = r.string("moe_router_dtype", m.moe_router_dtype);
  // moe_router_padding_for_fp8 is Megatron-Core's older name: transformer_config.py @d98e8a64 (__post_init__,
  // "if self.moe_router_padding_for_fp8") sets moe_router_padding_for_quantization from it.
  m.moe_router_padding_for_quantization = r.boolean("moe_router_padding_for_quantization", m.moe_router_padding_for_quantization);
  if (r.boolean("moe_router_padding_for_fp8", false)) m.moe_router_padding_for_quantization = true;
  m.moe_layer_freq = r.string("moe_layer_freq", m.moe_layer_freq);
  m.expert_model_parallel_size = r.integer("expert_model_parallel_size", m.expert_model_parallel_size, 1);
  m.expert_tensor_parallel_size = r.integer("expert_tensor_parallel_size", m.expert_tensor_parallel_size, 0);
  m.moe_token_dispatcher_type = r.string("moe_token_dispatcher_type", m.moe_token_dispatcher_type);
  m.moe_grouped_gemm = r.boolean("moe_grouped_gemm", m.moe_grouped_gemm);
  m.moe_router_num_groups = r.integer("moe_router_num_groups", m.moe_router_num_groups, 0);
  m.moe_router_group_topk = r.integer("moe_router_group_topk", m.moe_router_group_topk, 0);
  m.moe_router_load_balancing_type = r.string("moe_router_load_balancing_type", m.moe_router_load_balancing_type);
  m.moe_expert_capacity_factor = r.number("moe_expert_capacity_factor", m.moe_expert_capacity_factor, 0);
  m.moe_pad_expert_input_to_capacity = r.boolean("moe_pad_expert_input_to_capacity", m.moe_pad_expert_input_to_capacity);
  m.moe_permute_fusion = r.boolean("moe_permute_fusion", m.moe_permute_fusion);
  m.moe_router_fusion = r.boolean("moe_router_fusion", m.moe_router_fusion);
  m.moe_router_score_function = r.string("moe_router_score_function", m.moe_router_score_function);
  m.moe_aux_loss_coeff = r.number("moe_aux_loss_coeff", m.moe_aux_loss_coeff, 0);
  m.moe_z_loss_coeff = r.number("moe_z_loss_coeff", m.moe_z_loss_coeff, 0);
  m.moe_router_enable_expert_bias = r.boolean("moe_router_enable_expert_bias", m.moe_router_enable_expert_bias);
  m.moe_router_force_load_balancing = r.boolean("moe_router_force_load_balancing", m.moe_router_force_load_balancing);
  if (r.has("moe_input_jitter_eps")) {
    m.moe_input_jitter_eps = r.number("moe_input_jitter_eps", 0, 0);
    // torch.distributions.Uniform validates low < high: eps 0 raises in Megatron-LM.
    if (!(m.moe_input_jitter_eps > 0)) r.fail("moe_input_jitter_eps", "must be > 0 (torch's Uniform(1 - eps, 1 + eps) needs low < high)");
  }
  m.overlap_moe_expert_parallel_comm = r.boolean("overlap_moe_expert_parallel_comm", m.overlap_moe_expert_parallel_comm);
  m.delay_wgrad_compute = r.boolean("delay_wgrad_compute", m.delay_wgrad_compute);
  m.moe_load = r.string("moe_load", m.moe_load);
  m.moe_load_skew = r.number("moe_load_skew", m.moe_load_skew, 0);
  m.moe_load_seed = r.integer("moe_load_seed", m.moe_load_seed, 0);
  m.moe_expert_token_counts_file = r.string("moe_expert_token_counts_file", m.moe_expert_token_counts_file);
  m.multi_latent_attention = r.boolean("multi_latent_attention", m.multi_latent_attention);
  m.q_lora_rank = r.integer("q_lora_rank", m.q_lora_rank, 0);
  m.kv_lora_rank = r.integer("kv_lora_rank", m.kv_lora_rank, 1);
  m.qk_head_dim = r.integer("qk_head_dim", m.qk_head_dim, 1);
  m.qk_pos_emb_head_dim = r.integer("qk_pos_emb_head_dim", m.qk_pos_emb_head_dim, 0);
  m.v_head_dim = r.integer("v_head_dim", m.v_head_dim, 1);
  m.mtp_num_layers = r.integer("mtp_num_layers", m.mtp_num_layers, 0);
  auto one_of = [&](const char* k, const std::string& v, std::initializer_list<const char*> ok) {
    std::string list;
    for (const char* o : ok) {
      if (v == o) return;
      list += (list.empty() ? "" : ", ") + std::string(o);
    }
    r.fail(k, "expected one of " + list + ", got '" + v + "'");
  };
  one_of("moe_token_dispatcher_type", m.moe_token_dispatcher_type, {"allgather", "alltoall", "flex"});
  one_of("moe_router_load_balancing_type", m.moe_router_load_balancing_type,
         {"aux_loss", "seq_aux_loss", "sinkhorn", "none"});
  one_of("moe_load", m.moe_load, {"uniform", "zipf", "dirichlet", "file"});
  one_of("moe_router_score_function", m.moe_router_score_function, {"softmax", "sigmoid", "sqrtsoftplus"});
  // Megatron-Core's checks (megatron/core/transformer/transformer_config.py and router.py @d98e8a64): sinkhorn
  // routing refuses an aux loss; the expert bias needs a sigmoid or sqrtsoftplus score function.
  if (m.moe_router_load_balancing_type == "sinkhorn" && m.moe_aux_loss_coeff > 0)
    r.fail("moe_aux_loss_coeff", "sinkhorn routing does not support an aux loss (Megatron-LM asserts moe_aux_loss_coeff == 0)");
  if (m.moe_router_enable_expert_bias && m.moe_router_score_function == "softmax")
    r.fail("moe_router_enable_expert_bias", "needs moe_router_score_function sigmoid or sqrtsoftplus (Megatron-LM raises the same)");
  // Random logits route every token uniformly at random (apply_random_logits, moe_utils.py @d98e8a64): the load
  // is the uniform one.
  if (m.moe_router_force_load_balancing && m.moe_load != "uniform")
    r.fail("moe_router_force_load_balancing", "routes at random (a uniform load): moe_load must be 'uniform', got '" + m.moe_load + "'");
  // Megatron-Core's moe_router_dtype: Literal['fp32', 'fp64'] (transformer_config.py @d98e8a64); router.py
  // gating() runs the router GEMM (router_gating_linear) and the scores in that dtype. fp64 has no GPU rate here.
  if (!m.moe_router_dtype.empty()) {
    one_of("moe_router_dtype", m.moe_router_dtype, {"fp32", "fp64"});
    if (m.moe_router_dtype == "fp64")
      r.fail("moe_router_dtype", "fp64 is not modelled (no FP64 GEMM rate in the GPU models; modelled: fp32)");
  }
  if (m.moe_load == "file" && m.moe_expert_token_counts_file.empty())
    r.fail("moe_load", "'file' needs moe_expert_token_counts_file");
  if (m.moe_load == "dirichlet" && m.moe_load_skew <= 0)
    r.fail("moe_load_skew", "the dirichlet concentration must be > 0");
  if (m.enabled()) {
    if (m.moe_router_topk > m.num_experts) r.fail("moe_router_topk", "must be <= num_experts");
    if (m.num_experts % m.expert_model_parallel_size)
      r.fail("expert_model_parallel_size", "must divide num_experts (" + std::to_string(m.num_experts) + ")");
    if (m.moe_router_num_groups && (m.num_experts % m.moe_router_num_groups))
      r.fail("moe_router_num_groups", "must divide num_experts");
    if (m.moe_router_group_topk > m.moe_router_num_groups)
      r.fail("moe_router_group_topk", "must be <= moe_router_num_groups");
    if (m.moe_router_group_topk > m.moe_router_topk)
      r.fail("moe_router_group_topk", "must be <= moe_router_topk (Megatron scores a group by its top topk / group_topk experts)");
    if (m.moe_router_num_groups && m.moe_router_group_topk * (m.num_experts / m.moe_router_num_groups) < m.moe_router_topk)
      r.fail("moe_router_group_topk", "the selected groups hold fewer than moe_router_topk experts");
    // Megatron-Core transformer_config.py @d98e8a64 __post_init__: "allgather and alltoall_seq dispatcher does
    // not support moe_router_padding_for_quantization".
    if (m.moe_router_padding_for_quantization && m.moe_token_dispatcher_type == "allgather")
      r.fail("moe_router_padding_for_quantization", "needs moe_token_dispatcher_type alltoall or flex (Megatron-LM refuses allgather)");
    if (m.moe_pad_expert_input_to_capacity && m.moe_expert_capacity_factor <= 0)
      r.fail("moe_pad_expert_input_to_capacity", "needs moe_expert_capacity_factor (Megatron-LM asserts the same)");
  }
}

std::vector<bool> moe_layer_pattern(const std::string& freq, std::int64_t L, const std::string& where,
                                    const std::string& key) {
  auto bad = [&](const std::string& why) -> void { throw InputError(where + " " + key, why); };
  std::string s;
  for (char ch : freq)
    if (!std::isspace(static_cast<unsigned char>(ch))) s += ch;
  std::vector<bool> out;
  if (!s.empty() && std::all_of(s.begin(), s.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
    const long long n = std::stoll(s);
    if (n < 1) bad("an integer frequency must be >= 1");
    for (std::int64_t i = 0; i < L; ++i) out.push_back(i % n == 0);
    return out;
  }
  // Sum of terms; the whole may be wrapped in parentheses (stripped when the first one closes at the end).
  if (s.size() >= 2 && s.front() == '(' && s.back() == ')') {
    int depth = 0;
    std::size_t close = 0;
    for (std::size_t k = 0; k < s.size() && !close; ++k) {
      depth += s[k] == '(' ? 1 : s[k] == ')' ? -1 : 0;
      if (depth == 0) close = k;
    }
    if (close == s.size() - 1) s = s.substr(1, s.size() - 2);
  }
  std::size_t i = 0;
  auto number = [&]() {
    std::size_t st = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (st == i) bad("expected a number at character " + std::to_string(st + 1) + " of '" + freq + "'");
    return std::stoll(s.substr(st, i - st));
  };
  // A term is [a,b,...] or a parenthesised sum (Megatron's "([1]*3+[0]*1)*12"), optionally followed by *k.
  std::function<std::vector<bool>(bool)> sum = [&](bool nested) {
    std::vector<bool> acc;
    while (i < s.size() && !(nested && s[i] == ')')) {
      std::vector<bool> term;
      if (s[i] == '(') {
        ++i;
        term = sum(true);
        if (i >= s.size() || s[i] != ')') bad("expected ')' in '" + freq + "'");
        ++i;
      } else {
        if (s[i] != '[') bad("expected '[' at character " + std::to_string(i + 1) + " of '" + freq + "'");
        ++i;
        while (true) {
          const long long v = number();
          if (v != 0 && v != 1) bad(key == "moe_layer_freq" ? "list entries must be 0 (dense) or 1 (MoE)" : "list entries must be 0 or 1");
          term.push_back(v == 1);
          if (i < s.size() && s[i] == ',') { ++i; continue; }
          if (i < s.size() && s[i] == ']') { ++i; break; }
          bad("expected ',' or ']' in '" + freq + "'");
        }
      }
      long long rep = 1;
      if (i < s.size() && s[i] == '*') {
        ++i;
        rep = number();
      }
      for (long long k = 0; k < rep; ++k) acc.insert(acc.end(), term.begin(), term.end());
      if (i < s.size() && !(nested && s[i] == ')')) {
        if (s[i] != '+') bad("expected '+' at character " + std::to_string(i + 1) + " of '" + freq + "'");
        ++i;
      }
    }
    return acc;
  };
  out = sum(false);
  if (static_cast<std::int64_t>(out.size()) != L)
    bad("the list has " + std::to_string(out.size()) + " entries but the model has " + std::to_string(L) + " layers");
  return out;
}

namespace {

// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014): our own
// generator and distributions so that a seed gives the same loads with every standard library.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform() { return (double(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }  // (0, 1)
  double normal() {  // Box-Muller
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Marsaglia & Tsang, "A simple method for generating gamma variables" (ACM TOMS 2000); alpha < 1 via
  // Gamma(alpha + 1) * U^(1/alpha).
  double gamma(double a) {
    if (a < 1.0) return gamma(a + 1.0) * std::pow(uniform(), 1.0 / a);
    const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    while (true) {
      double x, v;
      do {
        x = normal();
        v = 1.0 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const double u = uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }
};

std::vector<double> normalised(std::vector<double> v) {
  const double s = std::accumulate(v.begin(), v.end(), 0.0);
  for (auto& x : v) x = s > 0 ? x / s : 1.0 / double(v.size());
  return v;
}

}  // namespace

std::vector<std::vector<double>> moe_expert_shares(const MoeConfig& m, std::int64_t layers, const std::string& where) {
  const std::size_t E = static_cast<std::size_t>(m.num_experts);
  std::vector<std::vector<double>> out;
  if (m.moe_load == "file") {
    const std::string& f = m.moe_expert_token_counts_file;
    const Json doc = load_json_file(f);
    ObjectReader r(doc, JsonPath{f, ""});
    const Json& rows = r.array("expert_token_counts");
    r.finish();
    const JsonPath rp = r.path_of("expert_token_counts");
    if (rows.size() != 1 && static_cast<std::int64_t>(rows.size()) != layers)
      json_fail(rp, "expected 1 row or one row per MoE layer (" + std::to_string(layers) + "), got " +
                        std::to_string(rows.size()));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (!rows[i].is_array() || rows[i].size() != E)
        json_fail(rp.index(i), "expected an array of " + std::to_string(E) + " token counts (one per expert)");
      std::vector<double> v;
      for (std::size_t e = 0; e < E; ++e) {
        if (!rows[i][e].is_number() || rows[i][e].get<double>() < 0)
          json_fail(rp.index(i).index(e), "expected a token count >= 0");
        v.push_back(rows[i][e].get<double>());
      }
      if (std::accumulate(v.begin(), v.end(), 0.0) <= 0) json_fail(rp.index(i), "all counts are zero");
      out.push_back(normalised(std::move(v)));
    }
    while (static_cast<std::int64_t>(out.size()) < layers) out.push_back(out.front());
    return out;
  }
  (void)where;
  Rng rng{static_cast<std::uint64_t>(m.moe_load_seed) * 0x2545F4914F6CDD1DULL + 1};
  for (std::int64_t l = 0; l < layers; ++l) {
    std::vector<double> v(E, 1.0);
    if (m.moe_load == "zipf") {
      // Ranks 1..E placed on experts by a seeded Fisher-Yates shuffle.
      std::vector<std::size_t> perm(E);
      std::iota(perm.begin(), perm.end(), 0);
      for (std::size_t i = E; i > 1; --i) std::swap(perm[i - 1], perm[rng.next() % i]);
      for (std::size_t i = 0; i < E; ++i) v[perm[i]] = std::pow(double(i + 1), -m.moe_load_skew);
    } else if (m.moe_load == "dirichlet") {
      for (auto& x : v) x = rng.gamma(m.moe_load_skew);
    }
    out.push_back(normalised(std::move(v)));
  }
  return out;
}

MoeTokenSpread::MoeTokenSpread(const MoeConfig& m) : E_(m.num_experts), k_(m.moe_router_topk) {
  const std::int64_t ng = m.moe_router_num_groups, M = m.moe_router_group_topk;
  if (ng <= 0 || M <= 0 || M >= ng) {
    groups_ = 1, group_size_ = E_;
    profiles_.push_back({{k_}, 1.0});
    return;
  }
  groups_ = ng, group_size_ = E_ / ng;
  const std::int64_t G = group_size_, q = k_ / M, top = std::min(k_, G);
  constexpr std::int64_t samples = 32768;
  Rng rng{0x6D6F655F73707264ULL};
  std::vector<std::vector<double>> v(static_cast<std::size_t>(ng), std::vector<double>(static_cast<std::size_t>(top)));
  std::vector<std::pair<double, std::int64_t>> score(static_cast<std::size_t>(ng));
  std::vector<std::pair<double, std::int64_t>> pool;
  std::map<std::vector<std::int64_t>, std::int64_t> count;
  for (std::int64_t t = 0; t < samples; ++t) {
    for (std::int64_t g = 0; g < ng; ++g) {
      // The largest `top` of G i.i.d. uniforms, in decreasing order: U_(G) = U^(1/G), U_(j) = U_(j+1) U^(1/j).
      auto& x = v[static_cast<std::size_t>(g)];
      double cur = 1.0, sum = 0.0;
      for (std::int64_t j = 0; j < top; ++j) {
        cur *= std::exp(std::log(rng.uniform()) / double(G - j));
        x[static_cast<std::size_t>(j)] = cur;
        if (j < q) sum += cur;
      }
      score[static_cast<std::size_t>(g)] = {-sum, g};
    }
    std::partial_sort(score.begin(), score.begin() + M, score.end());
    pool.clear();
    for (std::int64_t i = 0; i < M; ++i)
      for (double x : v[static_cast<std::size_t>(score[static_cast<std::size_t>(i)].second)]) pool.push_back({-x, i});
    std::partial_sort(pool.begin(), pool.begin() + k_, pool.end());
    std::vector<std::int64_t> prof(static_cast<std::size_t>(M), 0);
    for (std::int64_t i = 0; i < k_; ++i) ++prof[static_cast<std::size_t>(pool[static_cast<std::size_t>(i)].second)];
    std::sort(prof.begin(), prof.end());
    ++count[prof];
  }
  for (const auto& [prof, n] : count) profiles_.push_back({prof, double(n) / double(samples)});
}

double MoeTokenSpread::reach(std::int64_t first, std::int64_t last) const {
  first = std::clamp<std::int64_t>(first, 0, E_), last = std::clamp<std::int64_t>(last, first, E_);
  // Experts of the set in each group that holds any.
  std::vector<std::int64_t> in;
  for (std::int64_t g = 0; g < groups_; ++g) {
    const std::int64_t n = std::min(last, (g + 1) * group_size_) - std::max(first, g * group_size_);
    if (n > 0) in.push_back(n);
  }
  // C(G - n, c) / C(G, c): a group's c chosen experts (uniform c-subset of its G) avoid n of them.
  auto avoid = [&](std::int64_t n, std::int64_t c) {
    double p = 1.0;
    for (std::int64_t i = 0; i < c; ++i) p *= std::max<double>(0.0, double(group_size_ - n - i)) / double(group_size_ - i);
    return p;
  };
  // The profile's entries go to a uniformly random ordered choice of distinct groups: taking the set's groups
  // one by one with `left` groups not yet placed and the entries `rem` still to place, the next group gets
  // each remaining entry with probability 1 / left and none with probability (left - |rem|) / left.
  double miss = 0.0;
  for (const auto& [prof, w] : profiles_) {
    std::vector<std::int64_t> rem = prof;
    auto rec = [&](auto&& self, std::size_t i, std::int64_t left) -> double {
      if (i == in.size() || rem.empty()) return 1.0;
      const double r = double(rem.size());
      double p = (double(left) - r) / double(left) * (double(left) > r ? self(self, i + 1, left - 1) : 0.0);
      for (std::size_t e = 0; e < rem.size(); ++e) {
        if (e > 0 && rem[e] == rem[e - 1]) {  // equal entries: same branch
          continue;
        }
        std::size_t same = 1;
        while (e + same < rem.size() && rem[e + same] == rem[e]) ++same;
        const std::int64_t c = rem[e];
        rem.erase(rem.begin() + static_cast<std::ptrdiff_t>(e));
        p += double(same) / double(left) * avoid(in[i], c) * self(self, i + 1, left - 1);
        rem.insert(rem.begin() + static_cast<std::ptrdiff_t>(e), c);
      }
      return p;
    };
    miss += w * rec(rec, 0, groups_);
  }
  return 1.0 - miss;
}

double MoeTokenSpread::copies_per_slot(std::int64_t first, std::int64_t last) const {
  const double slots = double(k_) * double(std::max<std::int64_t>(0, last - first)) / double(E_);
  return slots > 0 ? std::min(1.0, reach(first, last) / slots) : 1.0;
}

MoeLayerLoad moe_layer_load(const MoeConfig& m, const std::vector<double>& shares, double T, std::int64_t ep,
                            std::int64_t sources) {
  const std::int64_t E = m.num_experts, local = E / ep;
  const double slots = T * double(m.moe_router_topk);  // routed slots per source rank
  const double cap = m.moe_expert_capacity_factor > 0
                         ? std::ceil(slots / double(E) * m.moe_expert_capacity_factor)
                         : 0.0;
  MoeLayerLoad out;
  out.expert_tokens.assign(E, 0.0);
  out.rank_tokens.assign(ep, 0.0);
  out.recv_share.assign(ep, 0.0);
  double dropped = 0;
  for (std::int64_t e = 0; e < E; ++e) {
    double per_src = slots * shares[e];
    if (cap > 0) {
      if (per_src > cap) dropped += per_src - cap;
      per_src = m.moe_pad_expert_input_to_capacity ? cap : std::min(per_src, cap);
    }
    // moe_router_padding_for_quantization: pad_routing_map (megatron/core/transformer/moe/moe_utils.py
    // @d98e8a64) turns zeros of a routing map into ones until every expert's count is a multiple of the
    // alignment. The alltoall dispatcher pads each source's map before the dispatch (token_dispatcher.py
    // MoEAlltoAllTokenDispatcher.dispatch_preprocess), so the extra slots are sent, computed and combined like
    // routed ones; the flex dispatcher pads the received map on the expert's rank (_pad_routing_map after the
    // dispatch): computed, not sent. A micro-batch's count varies around the load model's mean by more than the
    // alignment (binomial: about sqrt(mean) tokens), so its residue is taken as uniform: (a - 1) / 2 padded
    // slots per padded count on average, none for an expert the load gives no tokens, and a source never pads
    // beyond its tokens (no zeros left to flip).
    const bool pad = m.moe_router_padding_for_quantization && m.moe_router_pad_multiple > 1 && per_src > 0;
    const double pad_slots = pad ? 0.5 * double(m.moe_router_pad_multiple - 1) : 0.0;
    if (pad && m.moe_token_dispatcher_type != "flex") per_src = std::min(per_src + pad_slots, std::max(T, per_src));
    out.expert_tokens[e] = per_src * double(sources) + (pad && m.moe_token_dispatcher_type == "flex" ? pad_slots : 0.0);
    out.rank_tokens[e / local] += out.expert_tokens[e];
    out.recv_share[e / local] += slots > 0 ? per_src / slots : 0.0;
  }
  out.dropped_fraction = slots > 0 ? dropped / slots : 0.0;
  out.mean_rank_tokens = std::accumulate(out.rank_tokens.begin(), out.rank_tokens.end(), 0.0) / double(ep);
  for (std::int64_t r = 0; r < ep; ++r)
    if (out.rank_tokens[r] > out.max_rank_tokens) out.max_rank_tokens = out.rank_tokens[r], out.busiest_rank = r;
  return out;
}

}  // namespace fabricsim::workloads
