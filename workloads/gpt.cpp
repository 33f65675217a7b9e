#include "workloads/gpt.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

#include "models/gpu.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "workloads/gpt_models.hpp"

namespace fabricsim::workloads {

using models::KernelDesc;
using models::OpClass;
using models::Precision;

namespace {

// Micro-batches x layers per iteration the generator builds a trace for (issue 24 resource bound): about 8 ops
// per micro-batch and layer (measured: 131,074 ops for 8,192 micro-batches of 2 layers, `fabricsim gen gpt`),
// so the limit is about 8.4 million ops; a run at 1/8 of it (65,536 micro-batches of 2 layers: 1,048,578 ops)
// peaked at 705 MB and 14 s (`fabricsim run`, shared 2-core machine), so the limit is about 6 GB. Real runs are
// far below it (the 405B / 16k-GPU example: 16 micro-batches x 126 layers).
constexpr std::int64_t kMaxGptMicroBatchLayers = 1 << 20;

bool is_blackwell(const std::string& gpu) {
  return gpu == "b200" || gpu == "gb200" || gpu == "b300" || gpu == "gb300";
}
bool pre_hopper(const std::string& gpu) { return gpu.rfind("a100", 0) == 0 || gpu.rfind("v100", 0) == 0; }

// Layout with a failure callback (config validation) -- see gpt_layer_layout.
template <class Fail>
std::vector<std::vector<std::int64_t>> layout_of(const GptConfig& c, Fail&& fail) {
  const std::int64_t p = c.pipeline_model_parallel_size, v = c.vp(), L = c.num_layers;
  std::vector<std::vector<std::int64_t>> out(p, std::vector<std::int64_t>(v, 0));
  const bool acc = c.account_for_embedding_in_pipeline_split || c.account_for_loss_in_pipeline_split;
  const bool uneven = c.decoder_first_pipeline_num_layers || c.decoder_last_pipeline_num_layers;
  if (acc && uneven)
    fail("account_for_embedding_in_pipeline_split",
         "cannot be combined with decoder_first/last_pipeline_num_layers (Megatron-LM allows one of them)");
  if (acc) {
    // Megatron-Core: the embedding and/or the loss count as one layer each in the split (Llama-3.1-405B's
    // 126 layers + 2 over PP 8 x VP 8 = 2 per chunk).
    const std::int64_t e = c.account_for_embedding_in_pipeline_split, l = c.account_for_loss_in_pipeline_split;
    const std::int64_t total = L + e + l;
    if (total % (p * v))
      fail("num_layers", "num_layers (" + std::to_string(L) + ") plus the embedding/loss counted as layers must be a "
                         "multiple of pipeline x virtual stages (" + std::to_string(p * v) + ")");
    const std::int64_t per = total / (p * v);
    for (auto& st : out) std::fill(st.begin(), st.end(), per);
    out[0][0] -= e;
    out[p - 1][v - 1] -= l;
    if (out[0][0] < 0 || out[p - 1][v - 1] < 0) fail("num_layers", "too few layers for the pipeline split");
    return out;
  }
  std::vector<std::int64_t> stage(p, 0);
  if (uneven) {
    const std::int64_t f = c.decoder_first_pipeline_num_layers, la = c.decoder_last_pipeline_num_layers;
    std::int64_t rest = L - f - la, middle = p - (f ? 1 : 0) - (la ? 1 : 0);
    if (p < 2) fail("decoder_first_pipeline_num_layers", "needs pipeline_model_parallel_size > 1");
    if (rest < 0 || (middle == 0 && rest != 0) || (middle > 0 && rest % middle))
      fail("decoder_first_pipeline_num_layers",
           "the layers left after the first/last stages (" + std::to_string(rest) + ") must split evenly over the " +
               std::to_string(middle) + " other stages");
    for (std::int64_t s = 0; s < p; ++s) stage[s] = middle ? rest / middle : 0;
    if (f) stage[0] = f;
    if (la) stage[p - 1] = la;
  } else {
    if (L % p) fail("num_layers", "must be a multiple of pipeline_model_parallel_size (" + std::to_string(p) + ")");
    std::fill(stage.begin(), stage.end(), L / p);
  }
  for (std::int64_t s = 0; s < p; ++s) {
    if (stage[s] % v) {
      if (c.num_layers_per_virtual_pipeline_stage)
        fail("num_layers_per_virtual_pipeline_stage",
             "must divide the layers per pipeline stage (" + std::to_string(stage[s]) + ")");
      fail("virtual_pipeline_model_parallel_size",
           "must divide the layers of pipeline stage " + std::to_string(s) + " (" + std::to_string(stage[s]) + ")");
    }
    std::fill(out[s].begin(), out[s].end(), stage[s] / v);
  }
  return out;
}

}  // namespace

std::int64_t GptConfig::vp() const {
  if (virtual_pipeline_model_parallel_size) return virtual_pipeline_model_parallel_size;
  if (num_layers_per_virtual_pipeline_stage) {
    const std::int64_t per_stage = num_layers / pipeline_model_parallel_size;
    return std::max<std::int64_t>(1, per_stage / num_layers_per_virtual_pipeline_stage);
  }
  return 1;
}

std::vector<std::vector<std::int64_t>> gpt_layer_layout(const GptConfig& c) {
  return layout_of(c, [](const std::string& k, const std::string& w) -> void { throw InputError("gpt " + k, w); });
}

GptConfig gpt_config_from_params(const ParamMap& p, const std::string& where) {
  ParamReader r(p, where);
  GptConfig c;
  c.model = r.string("model", "");
  if (!c.model.empty()) {
    const GptModelShape* m = find_gpt_model(c.model);
    if (!m) r.fail("model", "unknown model '" + c.model + "' (expected one of " + gpt_model_names() + ")");
    c.num_layers = m->num_layers, c.hidden_size = m->hidden_size, c.ffn_hidden_size = m->ffn_hidden_size;
    c.num_attention_heads = m->num_attention_heads, c.num_query_groups = m->num_query_groups;
    c.kv_channels = m->kv_channels, c.seq_length = m->seq_length, c.padded_vocab_size = m->padded_vocab_size;
    c.swiglu = m->swiglu, c.untie_embeddings_and_output_weights = m->untie_embeddings_and_output_weights;
    c.normalization = m->normalization, c.position_embedding_type = m->position_embedding_type;
    c.hidden_dropout = m->hidden_dropout, c.attention_dropout = m->attention_dropout;
    moe_catalogue_defaults(c.model, c.moe);
  }
  c.num_layers = r.integer("num_layers", c.num_layers, 1);
  c.hidden_size = r.integer("hidden_size", c.hidden_size, 1);
  c.num_attention_heads = r.integer("num_attention_heads", c.num_attention_heads, 1);
  c.num_query_groups = r.integer("num_query_groups", c.num_query_groups, 0);
  c.kv_channels = r.integer("kv_channels", c.kv_channels, 0);
  c.ffn_hidden_size = r.integer("ffn_hidden_size", c.ffn_hidden_size, 0);
  c.seq_length = r.integer("seq_length", c.seq_length, 1);
  c.padded_vocab_size = r.integer("padded_vocab_size", c.padded_vocab_size, 1);
  c.swiglu = r.boolean("swiglu", c.swiglu);
  c.untie_embeddings_and_output_weights = r.boolean("untie_embeddings_and_output_weights",
                                                    c.untie_embeddings_and_output_weights);
  c.normalization = r.string("normalization", c.normalization);
  c.position_embedding_type = r.string("position_embedding_type", c.position_embedding_type);
  c.hidden_dropout = r.number("hidden_dropout", c.hidden_dropout, 0);
  c.attention_dropout = r.number("attention_dropout", c.attention_dropout, 0);
  c.micro_batch_size = r.integer("micro_batch_size", c.micro_batch_size, 1);
  c.global_batch_size = r.integer("global_batch_size", c.global_batch_size, 1);
  c.tensor_model_parallel_size = r.integer("tensor_model_parallel_size", c.tensor_model_parallel_size, 1);
  c.pipeline_model_parallel_size = r.integer("pipeline_model_parallel_size", c.pipeline_model_parallel_size, 1);
  c.context_parallel_size = r.integer("context_parallel_size", 1, 1);
  c.cp_comm_type = r.string("cp_comm_type", c.cp_comm_type);
  c.num_layers_per_virtual_pipeline_stage = r.integer("num_layers_per_virtual_pipeline_stage", 0, 0);
  c.virtual_pipeline_model_parallel_size = r.integer("virtual_pipeline_model_parallel_size", 0, 0);
  c.decoder_first_pipeline_num_layers = r.integer("decoder_first_pipeline_num_layers", 0, 0);
  c.decoder_last_pipeline_num_layers = r.integer("decoder_last_pipeline_num_layers", 0, 0);
  c.account_for_embedding_in_pipeline_split = r.boolean("account_for_embedding_in_pipeline_split", false);
  c.account_for_loss_in_pipeline_split = r.boolean("account_for_loss_in_pipeline_split", false);
  c.world_size = r.integer("world_size", c.world_size, 1);
  c.sequence_parallel = r.boolean("sequence_parallel", false);
  c.recompute_granularity = r.string("recompute_granularity", c.recompute_granularity);
  c.recompute_method = r.string("recompute_method", c.recompute_method);
  c.recompute_num_layers = r.integer("recompute_num_layers", 0, 0);
  c.selective_ac_option = r.string("selective_ac_option", "");
  c.use_distributed_optimizer = r.boolean("use_distributed_optimizer", false);
  c.overlap_grad_reduce = r.boolean("overlap_grad_reduce", false);
  c.overlap_param_gather = r.boolean("overlap_param_gather", false);
  c.tp_comm_overlap = r.boolean("tp_comm_overlap", false);
  c.tp_comm_bulk_wgrad = r.boolean("tp_comm_bulk_wgrad", true);
  c.use_torch_fsdp2 = r.boolean("use_torch_fsdp2", false);
  c.data_parallel_sharding_strategy = r.string("data_parallel_sharding_strategy", c.data_parallel_sharding_strategy);
  c.num_distributed_optimizer_instances = r.integer("num_distributed_optimizer_instances", 1, 1);
  c.bucket_size = r.integer("bucket_size", c.bucket_size, 1);
  c.grad_reduce_in_fp32 = r.boolean("grad_reduce_in_fp32", false);
  c.overlap_p2p_comm = r.boolean("overlap_p2p_comm", false);
  c.cross_entropy_loss_fusion = r.boolean("cross_entropy_loss_fusion", false);
  c.gpu = r.string("gpu", c.gpu);
  // Precision: "precision", or Megatron-LM's flags --bf16 / --fp16 / --fp8-format {e4m3, hybrid}.
  const bool has_prec = r.has("precision");
  c.precision = r.string("precision", pre_hopper(models::gpu_spec(c.gpu, where + " gpu").name) ? "fp16" : "bf16");
  const bool bf16 = r.boolean("bf16", false), fp16 = r.boolean("fp16", false);
  const std::string fp8_format = r.string("fp8_format", "");
  if (!fp8_format.empty() && fp8_format != "e4m3" && fp8_format != "hybrid")
    r.fail("fp8_format", "expected e4m3 or hybrid, got '" + fp8_format + "'");
  if (int(bf16) + int(fp16) > 1) r.fail("bf16", "bf16 and fp16 are exclusive");
  if (bf16 || fp16 || !fp8_format.empty()) {
    std::string flag = !fp8_format.empty() ? "fp8" : bf16 ? "bf16" : "fp16";
    if (has_prec && c.precision != flag)
      r.fail("precision", "'" + c.precision + "' contradicts the Megatron flag that selects " + flag);
    c.precision = flag;
  }
  c.fp8_recipe = r.string("fp8_recipe", c.fp8_recipe);
  c.attention_backend = r.string("attention_backend", "");
  c.flops_convention = r.string("flops_convention", "");
  c.gpus_per_host = r.integer("gpus_per_host", c.gpus_per_host, 1);
  c.gpus_per_nvlink_domain = r.integer("gpus_per_nvlink_domain", c.gpus_per_host, 1);
  read_moe_params(r, c.moe);
  r.finish();
  auto fail = [&](const std::string& k, const std::string& w) { r.fail(k, w); };
  auto one_of = [&](const std::string& k, const std::string& v, std::initializer_list<const char*> ok) {
    std::string list;
    for (const char* o : ok) {
      if (v == o) return;
      list += (list.empty() ? "" : ", ") + std::string(o);
    }
    fail(k, "expected one of " + list + ", got '" + v + "'");
  };
  one_of("recompute_granularity", c.recompute_granularity, {"full", "selective", "none"});
  one_of("recompute_method", c.recompute_method, {"uniform", "block"});
  one_of("precision", c.precision, {"fp16", "bf16", "fp8"});
  one_of("fp8_recipe", c.fp8_recipe, {"delayed", "tensorwise", "rowwise", "mxfp8", "blockwise"});
  one_of("normalization", c.normalization, {"LayerNorm", "RMSNorm"});
  one_of("position_embedding_type", c.position_embedding_type, {"learned_absolute", "rope"});
  one_of("cp_comm_type", c.cp_comm_type, {"p2p", "all_gather", "a2a"});
  one_of("data_parallel_sharding_strategy", c.data_parallel_sharding_strategy,
         {"no_shard", "optim", "optim_grads", "optim_grads_params"});
  const auto& gpu = models::gpu_spec(c.gpu, where + " gpu");
  c.gpu = gpu.name;
  if (c.attention_backend.empty()) c.attention_backend = pre_hopper(gpu.name) ? "unfused" : "flash";
  one_of("attention_backend", c.attention_backend, {"flash", "fused", "unfused"});
  if (c.fp8()) {
    if (gpu.peak_fp8_flops <= 0)
      fail("precision", "fp8 needs FP8 tensor cores; " + gpu.name + " has none (Hopper or Blackwell GPUs do)");
    if (c.fp8_recipe == "mxfp8" && !is_blackwell(gpu.name))
      fail("fp8_recipe", "mxfp8 needs Blackwell tensor cores (b200, gb200, b300); " + gpu.name + " has none");
  }
  if (c.precision == "bf16" && gpu.peak_bf16_flops <= 0) fail("precision", gpu.name + " has no bf16 tensor cores");
  const auto t = c.tensor_model_parallel_size, pp = c.pipeline_model_parallel_size, cp = c.context_parallel_size;
  if (c.world_size % (t * pp * cp) != 0)
    fail("tensor_model_parallel_size", "tensor (" + std::to_string(t) + ") x pipeline (" + std::to_string(pp) +
                                           ") x context (" + std::to_string(cp) + ") parallel size must divide world_size " +
                                           std::to_string(c.world_size));
  if (c.num_attention_heads % t) fail("tensor_model_parallel_size", "must divide num_attention_heads (" + std::to_string(c.num_attention_heads) + ")");
  const auto g = c.query_groups();
  if (c.num_attention_heads % g) fail("num_query_groups", "must divide num_attention_heads");
  if (g % t && t % g) fail("num_query_groups", "must be a multiple or a divisor of tensor_model_parallel_size");
  if (!c.kv_channels && c.hidden_size % c.num_attention_heads) fail("hidden_size", "must be a multiple of num_attention_heads");
  if (c.padded_vocab_size % t) fail("padded_vocab_size", "must be a multiple of tensor_model_parallel_size");
  if (c.seq_length % (2 * cp) && cp > 1)
    fail("seq_length", "must be a multiple of 2 x context_parallel_size (load-balanced causal chunks)");
  if (c.num_layers_per_virtual_pipeline_stage && c.virtual_pipeline_model_parallel_size)
    fail("virtual_pipeline_model_parallel_size", "give it or num_layers_per_virtual_pipeline_stage, not both");
  if (c.num_layers_per_virtual_pipeline_stage && c.num_layers % pp == 0 &&
      (c.num_layers / pp) % c.num_layers_per_virtual_pipeline_stage)
    fail("num_layers_per_virtual_pipeline_stage", "must divide the layers per pipeline stage (" + std::to_string(c.num_layers / pp) + ")");
  layout_of(c, fail);
  const auto dp = c.data_parallel();
  // Resource bound (docs/reliability.md), checked before anything is allocated: each simulated rank holds a
  // few ops per layer and micro-batch, so micro-batches x layers bounds the trace.
  if (double(c.global_batch_size) / (double(c.micro_batch_size) * double(dp)) * double(c.num_layers) >
      double(kMaxGptMicroBatchLayers))
    fail("global_batch_size", "gives " + std::to_string(c.global_batch_size / (c.micro_batch_size * dp)) +
                                  " micro-batches (global_batch_size / (micro_batch_size x data-parallel size " +
                                  std::to_string(dp) + ")) of " + std::to_string(c.num_layers) + " layers; at most " +
                                  std::to_string(kMaxGptMicroBatchLayers) +
                                  " micro-batch x layer steps are simulated (raise micro_batch_size or the data-parallel size)");
  if (c.global_batch_size % (c.micro_batch_size * dp))
    fail("global_batch_size", "must be a multiple of micro_batch_size x data-parallel size (" +
                                  std::to_string(c.micro_batch_size) + " x " + std::to_string(dp) + ")");
  if (c.vp() > 1) {
    if (pp < 2) fail(c.virtual_pipeline_model_parallel_size ? "virtual_pipeline_model_parallel_size" : "num_layers_per_virtual_pipeline_stage",
                     "needs pipeline_model_parallel_size > 1");
    std::int64_t m = c.global_batch_size / (c.micro_batch_size * dp);
    if (m % pp)
      fail("global_batch_size", "the interleaved schedule needs the number of micro-batches (" + std::to_string(m) +
                                    ") to be a multiple of pipeline_model_parallel_size");
  }
  if (c.sequence_parallel && t == 1) c.sequence_parallel = false;  // Megatron turns it off for TP=1
  if (c.tp_comm_overlap && t > 1 && !c.sequence_parallel)
    fail("tp_comm_overlap", "needs sequence_parallel (Megatron-LM asserts the same)");
  if (c.overlap_param_gather && !c.use_distributed_optimizer && !c.fsdp())
    fail("overlap_param_gather", "needs use_distributed_optimizer (Megatron-LM asserts the same)");
  if (c.num_distributed_optimizer_instances > 1 && (dp * cp) % c.num_distributed_optimizer_instances)
    fail("num_distributed_optimizer_instances", "must divide the data-parallel x context-parallel size");
  if (c.recompute_num_layers && c.recompute_granularity != "full")
    fail("recompute_num_layers", "needs recompute_granularity full");
  if (c.moe.enabled() || c.moe.multi_latent_attention) {
    if (c.attention_backend == "unfused")
      fail("attention_backend", "MoE / multi-latent attention models need flash or fused attention");
    if (c.moe.multi_latent_attention && c.num_attention_heads % t)
      fail("tensor_model_parallel_size", "must divide num_attention_heads");
  }
  if (c.moe.overlap_moe_expert_parallel_comm && !c.moe.enabled())
    fail("overlap_moe_expert_parallel_comm", "needs num_experts");
  if (c.moe.enabled()) {
    const auto ep = c.moe.expert_model_parallel_size, etp = c.etp();
    if ((t * cp * dp) % (etp * ep))
      fail("expert_model_parallel_size", "expert tensor (" + std::to_string(etp) + ") x expert parallel (" +
                                             std::to_string(ep) + ") size must divide tensor x context x data "
                                             "parallel size (" + std::to_string(t * cp * dp) + ")");
    if (c.moe_ffn() % etp) fail("expert_tensor_parallel_size", "must divide moe_ffn_hidden_size");
    if (t > 1 && ep > 1 && !c.sequence_parallel)
      fail("sequence_parallel", "expert and tensor parallelism together need sequence_parallel (Megatron-LM asserts the same)");
    if (c.moe.overlap_moe_expert_parallel_comm) {
      if (c.moe.moe_token_dispatcher_type == "allgather")
        fail("overlap_moe_expert_parallel_comm", "needs moe_token_dispatcher_type alltoall or flex");
      if (c.vp() > 1 || c.fsdp() || cp > 1)
        fail("overlap_moe_expert_parallel_comm",
             "is modelled without virtual pipeline stages, FSDP and context parallelism");
    }
    if (c.moe.moe_shared_expert_overlap && !c.moe.moe_shared_expert_intermediate_size)
      fail("moe_shared_expert_overlap", "needs moe_shared_expert_intermediate_size");
    moe_layer_pattern(c.moe.moe_layer_freq, c.num_layers, where);
  }
  if (!c.selective_ac_option.empty()) {
    if (c.selective_ac_option != "op")
      fail("selective_ac_option", "expected op (torchtitan's per-op policy; for every N-th layer use "
                                  "recompute_granularity full with recompute_method/recompute_num_layers), got '" +
                                      c.selective_ac_option + "'");
    if (c.recompute_granularity != "selective") fail("selective_ac_option", "needs recompute_granularity selective");
    if (c.attention_backend == "unfused") fail("selective_ac_option", "needs flash or fused attention");
  }
  if (c.flops_convention.empty()) c.flops_convention = gpt_flops_convention(c);
  one_of("flops_convention", c.flops_convention, {"megatron-sc21", "megatron-core"});
  return c;
}

ParamMap gpt_config_to_params(const GptConfig& c) {
  ParamMap m;
  auto I = [&](const char* k, std::int64_t v) { m[k] = std::to_string(v); };
  auto B = [&](const char* k, bool v) { m[k] = v ? "true" : "false"; };
  if (!c.model.empty()) m["model"] = c.model;
  I("num_layers", c.num_layers);
  I("hidden_size", c.hidden_size);
  I("num_attention_heads", c.num_attention_heads);
  I("num_query_groups", c.query_groups());
  I("kv_channels", c.head_dim());
  I("ffn_hidden_size", c.ffn());
  I("seq_length", c.seq_length);
  I("padded_vocab_size", c.padded_vocab_size);
  B("swiglu", c.swiglu);
  B("untie_embeddings_and_output_weights", c.untie_embeddings_and_output_weights);
  m["normalization"] = c.normalization;
  m["position_embedding_type"] = c.position_embedding_type;
  m["attention_backend"] = c.attention_backend;
  I("micro_batch_size", c.micro_batch_size);
  I("global_batch_size", c.global_batch_size);
  I("tensor_model_parallel_size", c.tensor_model_parallel_size);
  I("pipeline_model_parallel_size", c.pipeline_model_parallel_size);
  I("context_parallel_size", c.context_parallel_size);
  if (c.context_parallel_size > 1) m["cp_comm_type"] = c.cp_comm_type;
  I("num_layers_per_virtual_pipeline_stage", c.num_layers_per_virtual_pipeline_stage);
  I("virtual_pipeline_model_parallel_size", c.vp());
  I("world_size", c.world_size);
  I("data_parallel_size", c.data_parallel());
  B("sequence_parallel", c.sequence_parallel);
  m["recompute_granularity"] = c.recompute_granularity;
  if (!c.selective_ac_option.empty()) m["selective_ac_option"] = c.selective_ac_option;
  B("use_distributed_optimizer", c.use_distributed_optimizer);
  B("overlap_grad_reduce", c.overlap_grad_reduce);
  B("overlap_param_gather", c.overlap_param_gather);
  B("tp_comm_overlap", c.tp_comm_overlap);
  if (c.tp_comm_overlap && !c.tp_comm_bulk_wgrad) B("tp_comm_bulk_wgrad", false);
  B("fsdp", c.fsdp());
  B("overlap_p2p_comm", c.overlap_p2p_comm);
  I("bucket_size", c.bucket_size);
  m["gpu"] = c.gpu;
  m["precision"] = c.precision;
  if (c.fp8()) m["fp8_recipe"] = c.fp8_recipe;
  m["flops_convention"] = c.flops_convention;
  if (c.moe.enabled()) {
    const auto& e = c.moe;
    I("num_experts", e.num_experts);
    I("moe_router_topk", e.moe_router_topk);
    I("moe_ffn_hidden_size", c.moe_ffn());
    I("moe_shared_expert_intermediate_size", e.moe_shared_expert_intermediate_size);
    B("moe_shared_expert_overlap", e.moe_shared_expert_overlap);
    m["moe_layer_freq"] = e.moe_layer_freq;
    I("expert_model_parallel_size", e.expert_model_parallel_size);
    I("expert_tensor_parallel_size", c.etp());
    I("expert_data_parallel_size", c.expert_data_parallel());
    m["moe_token_dispatcher_type"] = e.moe_token_dispatcher_type;
    if (e.moe_router_num_groups) I("moe_router_num_groups", e.moe_router_num_groups), I("moe_router_group_topk", e.moe_router_group_topk);
    B("moe_grouped_gemm", e.moe_grouped_gemm);
    m["moe_router_load_balancing_type"] = e.moe_router_load_balancing_type;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", e.moe_expert_capacity_factor);
    m["moe_expert_capacity_factor"] = buf;
    B("moe_pad_expert_input_to_capacity", e.moe_pad_expert_input_to_capacity);
    B("moe_permute_fusion", e.moe_permute_fusion);
    B("overlap_moe_expert_parallel_comm", e.overlap_moe_expert_parallel_comm);
    m["moe_load"] = e.moe_load;
    if (e.moe_load == "zipf" || e.moe_load == "dirichlet") {
      std::snprintf(buf, sizeof buf, "%g", e.moe_load_skew);
      m["moe_load_skew"] = buf;
      I("moe_load_seed", e.moe_load_seed);
    }
  }
  if (c.moe.multi_latent_attention) {
    B("multi_latent_attention", true);
    I("q_lora_rank", c.moe.q_lora_rank);
    I("kv_lora_rank", c.moe.kv_lora_rank);
    I("qk_head_dim", c.moe.qk_head_dim);
    I("qk_pos_emb_head_dim", c.moe.qk_pos_emb_head_dim);
    I("v_head_dim", c.moe.v_head_dim);
  }
  if (c.moe.mtp_num_layers) I("mtp_num_layers", c.moe.mtp_num_layers);
  return m;
}

std::string gpt_flops_convention(const GptConfig& c) {
  if (!c.flops_convention.empty()) return c.flops_convention;
  // The SC'21 convention for the SC'21-shaped model (unfused attention, MHA, GELU, tied embeddings);
  // Megatron-Core's for everything else.
  const std::string backend = !c.attention_backend.empty() ? c.attention_backend
                              : pre_hopper(c.gpu)         ? "unfused"
                                                          : "flash";
  const bool sc21 = backend == "unfused" && c.query_groups() == c.num_attention_heads && !c.swiglu &&
                    !c.untie_embeddings_and_output_weights &&
                    c.head_dim() * c.num_attention_heads == c.hidden_size;
  return sc21 ? "megatron-sc21" : "megatron-core";
}

namespace {
double moe_model_flops(const GptConfig& c);
}

double gpt_model_flops(const GptConfig& c) {
  if (c.moe.enabled() || c.moe.multi_latent_attention) return moe_model_flops(c);
  const double B = double(c.global_batch_size), s = double(c.seq_length), l = double(c.num_layers),
               h = double(c.hidden_size), V = double(c.padded_vocab_size);
  if (gpt_flops_convention(c) == "megatron-sc21") {
    const double k = c.recompute_granularity == "full" ? 96.0 : 72.0;
    return k * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
  }
  const double a = double(c.num_attention_heads), g = double(c.query_groups()), f = double(c.ffn());
  const double q_ratio = double(c.head_dim()) * a / h;
  const double gated = c.swiglu ? 1.5 : 1.0;
  return 12.0 * B * s * l * h * h * ((1.0 + g / a + s / h) * q_ratio + (f / h) * gated + V / (2.0 * l * h));
}

namespace {

// Parameter elements of one transformer layer held by one TP rank. Integer sums first so the value is
// exact (and bit-identical to the SC'21 formula 4h^2 + 2hf + 3h + h + f + h for MHA / GELU / biases).
double layer_params_per_rank_dense(const GptConfig& c);
// MoE / MLA models: the non-expert parameters of one layer on one TP rank (attention, norms, the dense MLP
// of a dense layer; the router and shared expert of an MoE layer). MLA (DeepSeek-V2 arXiv:2405.04434
// Sec. 2.1): the down-projections (h -> q_lora_rank, h -> kv_lora_rank + rope dim) and their norms are
// replicated over TP (Megatron-Core's MLA keeps them duplicated), the up-projections and the output
// projection are split. No biases (RMSNorm models).
double layer_params_moe_model(const GptConfig& c, bool moe_layer) {
  const double h = double(c.hidden_size), t = double(c.tensor_model_parallel_size), a = double(c.num_attention_heads);
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
    attn = h * (a + 2.0 * g) * d / t + a * d * h / t;
  }
  const double gate = c.swiglu ? 2.0 : 1.0;
  double mlp;
  if (moe_layer) {
    const double S = double(e.moe_shared_expert_intermediate_size);
    mlp = h * double(e.num_experts) + (gate + 1.0) * h * S / t;
  } else {
    mlp = (gate + 1.0) * h * double(c.ffn()) / t;
  }
  return attn + mlp + 2.0 * h;  // two RMSNorms
}
// Expert parameters of one MoE layer on one GPU: E / EP local experts, each split over ETP.
double expert_params_per_gpu(const GptConfig& c) {
  const double gate = c.swiglu ? 2.0 : 1.0;
  return double(c.moe.num_experts / c.moe.expert_model_parallel_size) * (gate + 1.0) * double(c.hidden_size) *
         double(c.moe_ffn()) / double(c.etp());
}
bool moe_model(const GptConfig& c) { return c.moe.enabled() || c.moe.multi_latent_attention; }
std::vector<bool> moe_layers_of(const GptConfig& c) {
  if (!c.moe.enabled()) return std::vector<bool>(c.num_layers, false);
  return moe_layer_pattern(c.moe.moe_layer_freq, c.num_layers, "gpt");
}
// Mean non-expert parameters per layer over the model (DP gradient buckets of MoE models).
double mean_layer_params_moe_model(const GptConfig& c) {
  double sum = 0;
  for (bool m : moe_layers_of(c)) sum += layer_params_moe_model(c, m);
  return sum / double(c.num_layers);
}
// Model FLOPs of MoE / MLA models in Megatron-Core's convention (num_floating_point_operations, which
// counts MoE layers with topk x moe_ffn + shared expert widths, MLA's projections, MTP layers): 3 x (2 x
// GEMM weights seen per token + non-causal attention 2 s a (qk + v) per token per layer) per token, logits
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
    attn_w = h * (a + 2.0 * g) * d + a * d * h;
    attn_sc = 2.0 * s * a * d;
  }
  auto layer = [&](bool moe) {
    double w = attn_w;
    if (moe) w += gate * h * (double(e.moe_router_topk) * double(c.moe_ffn()) + double(e.moe_shared_expert_intermediate_size)) +
                  h * double(e.num_experts);
    else w += gate * h * double(c.ffn());
    return 6.0 * (w + attn_sc);  // per token: 2 FLOPs per weight forward, x3 with backward
  };
  double per_token = 0;
  const auto pattern = moe_layers_of(c);
  for (bool m : pattern) per_token += layer(m);
  // MTP module (DeepSeek-V3 Sec. 2.2): per depth a projection 2h -> h, one transformer layer (MoE like the
  // last layer) and the shared output head.
  per_token += double(e.mtp_num_layers) * (6.0 * 2.0 * h * h + layer(pattern.empty() ? false : pattern.back()) + 6.0 * h * V);
  per_token += 6.0 * h * V;
  return B * s * per_token;
}

double layer_params_per_rank(const GptConfig& c) {
  if (moe_model(c)) return mean_layer_params_moe_model(c);
  return layer_params_per_rank_dense(c);
}
double layer_params_per_rank_dense(const GptConfig& c) {
  const std::int64_t h = c.hidden_size, f = c.ffn(), d = c.head_dim(), a = c.num_attention_heads,
                     g = c.query_groups();
  const double t = double(c.tensor_model_parallel_size);
  const std::int64_t fc1 = c.swiglu ? 2 * f : f;
  const std::int64_t gemm_w = h * (a + 2 * g) * d + a * d * h + h * fc1 + f * h;
  const bool bias = c.normalization == "LayerNorm";  // Megatron GPT: biases on; Llama-style configs disable them
  const std::int64_t biases = bias ? (a + 2 * g) * d + h + fc1 + h : 0;
  const double norms = c.normalization == "LayerNorm" ? 4.0 * double(h) : 2.0 * double(h);
  return double(gemm_w + biases) / t + norms;
}

double embedding_params_per_rank(const GptConfig& c) {
  const double h = double(c.hidden_size), V = double(c.padded_vocab_size), t = double(c.tensor_model_parallel_size);
  return V * h / t + (c.position_embedding_type == "learned_absolute" ? double(c.seq_length) * h : 0.0);
}
bool last_stage_has_output(const GptConfig& c) {
  return c.untie_embeddings_and_output_weights || c.pipeline_model_parallel_size > 1;
}

}  // namespace

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

std::string GptMemory::largest_term() const {
  std::pair<double, const char*> terms[] = {{weights_bytes, "weights"}, {grads_bytes, "gradients"},
                                            {optimizer_bytes, "optimizer state"}, {activations_bytes, "activations"}};
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
// copies (1 byte instead of 2).
double layer_activation_bytes(const GptConfig& c, bool drop_scores, bool moe_layer = false,
                              double load_factor = 1.0) {
  const double h = double(c.hidden_size), a = double(c.num_attention_heads), d = double(c.head_dim()),
               t = double(c.tensor_model_parallel_size), f = double(c.ffn()),
               s = double(c.seq_length), cp = double(c.context_parallel_size);
  const double g_t = std::max(1.0, double(c.query_groups()) / t);
  const double rep = c.sequence_parallel ? 1.0 / t : 1.0;
  const double mask = c.hidden_dropout > 0 ? h : 0.0;
  const double fc1 = c.swiglu ? 2.0 * f : f;
  const double gemm_in = c.fp8() ? 1.0 : 2.0;
  double attn = (2.0 * h + gemm_in * h + mask) * rep + 2.0 * (a / t + 2.0 * g_t) * d + gemm_in * a * d / t;
  if (c.attention_backend == "unfused") {
    if (!drop_scores) attn += (c.attention_dropout > 0 ? 5.0 : 2.0) * a * (s / cp) / t;
  } else {
    attn += 4.0 * a / t;
  }
  if (c.moe.multi_latent_attention) {
    // MLA: Q, K (qk + rope dims) and V per head instead of the GQA widths, the compressed latents
    // (q_lora_rank + kv_lora_rank + rope dim, replicated over TP) and the projection input (v_head_dim).
    const auto& e = c.moe;
    const double qk = double(e.qk_head_dim + e.qk_pos_emb_head_dim), v = double(e.v_head_dim);
    attn = (2.0 * h + gemm_in * h + mask) * rep + 2.0 * (a / t) * (2.0 * qk + v) +
           2.0 * double(e.q_lora_rank + e.kv_lora_rank + e.qk_pos_emb_head_dim) + gemm_in * a * v / t + 4.0 * a / t;
  }
  double mlp = (2.0 * h + gemm_in * h + mask) * rep + 2.0 * fc1 / t + gemm_in * f / t;
  if (moe_layer) {
    // MoE layer: norm/router input, then per routed slot (topk per token, x the busiest rank's load over the
    // mean) the permuted input (fc1 GEMM input, h), the expert fc1 output and activation input (2 fc1/etp' widths over
    // the gathered ETP tokens) and the fc2 input; the shared expert as a TP-split dense MLP.
    const double F = double(c.moe_ffn()), fc1m = c.swiglu ? 2.0 * F : F, etp = double(c.etp());
    const double t_sp = c.sequence_parallel ? t : 1.0;
    const double S = double(c.moe.moe_shared_expert_intermediate_size), fc1s = c.swiglu ? 2.0 * S : S;
    mlp = (2.0 * h + gemm_in * h + mask) * rep +
          double(c.moe.moe_router_topk) * load_factor * (gemm_in * h * etp + 2.0 * fc1m + gemm_in * F) / t_sp +
          (S > 0 ? 2.0 * fc1s / t + gemm_in * S / t : 0.0);
  }
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
  const double per_token = 2.0 * h * rep + 2.0 * a * d / t + 2.0 * g_t * d + 2.0 * f / t + 2.0 * h +
                           2.0 * a * d / t + 4.0 * a / t;
  return double(c.micro_batch_size) * (s / cp) * per_token;
}

}  // namespace

GptMemory gpt_memory_of_stage(const GptConfig& c, std::int64_t st) {
  const auto layout = gpt_layer_layout(c);
  const std::int64_t p = c.pipeline_model_parallel_size, v = c.vp();
  std::int64_t layers = 0;
  for (auto n : layout[st]) layers += n;
  const double h = double(c.hidden_size), s = double(c.seq_length), b = double(c.micro_batch_size),
               t = double(c.tensor_model_parallel_size), V = double(c.padded_vocab_size),
               cp = double(c.context_parallel_size);
  const double dpcp = double(c.data_parallel() * c.context_parallel_size);
  double Pl = layer_params_per_rank(c);
  double P = double(layers) * Pl;
  // MoE / MLA: the stage's own layers; expert weights separately (sharded over EDP by the distributed
  // optimizer / FSDP instead of DP x CP).
  double Pe = 0, act_mean = 0, act_max = 0, act_mean_sel = 0;
  const bool moe = moe_model(c);
  if (moe) {
    const auto pattern = moe_layers_of(c);
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
        if (ld.mean_rank_tokens > 0) lf = std::max(lf, ld.max_rank_tokens / ld.mean_rank_tokens);
      }
    }
    std::vector<std::int64_t> off(p * v + 1, 0);
    for (std::int64_t mc = 0; mc < p * v; ++mc) off[mc + 1] = off[mc] + layout[mc % p][mc / p];
    P = 0;
    for (std::int64_t ch = 0; ch < v; ++ch)
      for (std::int64_t l = 0; l < layout[st][ch]; ++l) {
        const bool m = pattern[off[ch * p + st] + l];
        P += layer_params_moe_model(c, m);
        if (m) Pe += expert_params_per_gpu(c);
        const double a_full = layer_activation_bytes(c, false, m, lf);
        act_mean += a_full, act_max = std::max(act_max, a_full);
        act_mean_sel += layer_activation_bytes(c, c.recompute_granularity == "selective", m, lf);
      }
    if (layers) act_mean /= double(layers), act_mean_sel /= double(layers);
    Pl = layers ? P / double(layers) : 0.0;
  }
  if (st == 0) P += embedding_params_per_rank(c);
  if (st == p - 1 && last_stage_has_output(c)) P += V * h / t;
  GptMemory mem;
  mem.stage = st;
  // Mixed precision (ZeRO, Rajbhandari et al. SC'20 Sec. 3.1): 2-byte weights, 2-byte gradients (4 with
  // grad_reduce_in_fp32), 12 bytes of fp32 master weight + Adam moments; the distributed optimizer shards
  // the 12 bytes over the DP x CP group (Megatron-LM docs, distrib_optimizer.md), FSDP / ZeRO-3 shards all
  // of it, keeping the gathered weights (and gradients) of the running and the prefetched layer.
  const double grad = c.grad_reduce_in_fp32 ? 4.0 : 2.0;
  // FP8 (Transformer Engine): an FP8 copy of each linear weight and its transpose (2 x 1 byte) kept for
  // the micro-batches of a step.
  const double fp8_w = c.fp8() ? 2.0 * double(layers) * Pl : 0.0;
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
    // backward_maybe_with_nosync), so FSDP2 accumulates unsharded gradients in reduce_dtype
    // (FSDPParam.to_accumulated_grad_if_needed: fp32 for the whole parameter, not the shard).
    const double shard = dpcp / double(c.num_distributed_optimizer_instances);
    mem.weights_bytes = 4.0 * P / shard + fp8_w / shard + (p > 1 ? 2.0 * P : 2.0 * 2.0 * Pl);
    mem.grads_bytes = 4.0 * P / shard + (p > 1 ? grad * P : grad * Pl);
    mem.optimizer_bytes = 8.0 * P / shard;
  } else if (c.fsdp()) {
    const double shard = dpcp / double(c.num_distributed_optimizer_instances);
    mem.weights_bytes = 2.0 * P / shard + 2.0 * 2.0 * Pl + fp8_w / shard;
    mem.grads_bytes = grad * P / shard + grad * Pl;
    mem.optimizer_bytes = 12.0 * P / shard;
  } else {
    mem.weights_bytes = 2.0 * P + fp8_w;
    mem.grads_bytes = grad * P;
    const bool sharded = c.use_distributed_optimizer || c.data_parallel_sharding_strategy != "no_shard";
    mem.optimizer_bytes = 12.0 * P / (sharded ? dpcp / double(c.num_distributed_optimizer_instances) : 1.0);
  }
  if (Pe > 0) {
    const double edp = double(c.expert_data_parallel());
    const bool sharded = c.fsdp() || c.use_distributed_optimizer || c.data_parallel_sharding_strategy != "no_shard";
    mem.weights_bytes += (c.fsdp() ? 2.0 / edp : 2.0) * Pe + (c.fp8() ? 2.0 * Pe : 0.0);
    mem.grads_bytes += (c.fsdp() ? grad / edp : grad) * Pe;
    mem.optimizer_bytes += 12.0 * Pe / (sharded ? edp : 1.0);
  }
  // Activations: in-flight micro-batches of this stage (1F1B: p - st; interleaved: Megatron's warm-up
  // count (p - st - 1) * 2 + (v - 1) p, + 1, in chunk units) times the stored bytes per layer.
  const double m = double(c.global_batch_size / (c.micro_batch_size * c.data_parallel()));
  const double full = moe ? act_max : layer_activation_bytes(c, false);
  const double rep = c.sequence_parallel ? 1.0 / t : 1.0;
  const double input_only = 2.0 * b * (s / cp) * h * rep;
  // The micro-batch in its backward peaks while a recomputed layer (group) holds its full activations:
  // block -- the first N layers are recomputed after the stored ones were freed: (N-1) inputs + 1 layer;
  // uniform -- groups of G layers: (groups-1) inputs + G layers.
  double per_chunk_mb = 0;  // stored bytes of one micro-batch through one chunk of this stage
  double mb_peak = 0;
  const double lpc = double(layers) / double(v);
  if (c.recompute_granularity == "full") {
    double n_re = c.recompute_num_layers ? std::min<double>(double(c.recompute_num_layers), lpc) : lpc;
    if (c.recompute_method == "block") {
      per_chunk_mb = n_re * input_only + (lpc - n_re) * full;
      mb_peak = std::max(per_chunk_mb, (n_re - 1.0) * input_only + full);
    } else {
      const double group = c.recompute_num_layers ? n_re : 1.0;
      const double groups = std::ceil(lpc / group);
      per_chunk_mb = groups * input_only;
      mb_peak = std::max(per_chunk_mb, (groups - 1.0) * input_only + group * full);
    }
  } else if (c.selective_ac_option == "op") {
    // The layer in its backward holds its recomputed activations on top of what was saved.
    per_chunk_mb = lpc * layer_activation_bytes_op_sac(c);
    mb_peak = per_chunk_mb + std::max(0.0, layer_activation_bytes(c, true) - layer_activation_bytes_op_sac(c));
  } else {
    per_chunk_mb = lpc * (moe ? act_mean_sel : layer_activation_bytes(c, c.recompute_granularity == "selective"));
    mb_peak = per_chunk_mb;
  }
  double inflight;
  if (v == 1) inflight = std::min(m, double(p - st));
  else inflight = std::min(m * double(v), double((p - st - 1) * 2 + (v - 1) * p + 1));
  double act = per_chunk_mb * (inflight - 1.0) + mb_peak;
  // Loss buffers on the last stage, per logit element (s b V / (t cp) of them): Megatron-Core's
  // vocab-parallel cross entropy (megatron/core/tensor_parallel/cross_entropy.py) keeps the bf16 logits
  // (2 bytes), upcasts them to fp32 (4), saves the fp32 softmax for the backward (4) and produces an fp32
  // gradient (4): 14 bytes; the fused version (cross_entropy_loss_fusion, fused_cross_entropy.py) works in
  // place on the fp32 softmax: 2 + 4 = 6 bytes.
  if (st == p - 1) act += (c.cross_entropy_loss_fusion ? 6.0 : 14.0) * (s / cp) * b * V / t;
  mem.activations_bytes = act;
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

namespace {

struct Kernel {
  OpClass cls;
  double flops, bytes;
};

struct Costs {
  double seconds = 0, flops = 0;
  int kernels = 0;
  void add(const models::ComputeModel& cm, const Kernel& k, double times = 1.0) {
    seconds += cm.time_s(k.cls, k.flops * times, k.bytes * times, 1);
    flops += k.flops * times;
    ++kernels;
  }
  void add(const models::ComputeModel& cm, const KernelDesc& k, double time_factor = 1.0) {
    seconds += cm.kernel_time_s(k) * time_factor;
    flops += k.flops();
    ++kernels;
  }
  void operator+=(const Costs& o) {
    seconds += o.seconds, flops += o.flops, kernels += o.kernels;
  }
};

struct LayerCosts {
  Costs fwd_attn, fwd_mlp, bwd_attn, bwd_mlp, recompute_attn_extra;
};

// Unfused attention (SC'21-era Megatron-LM). Per-TP-rank kernels of one transformer layer for one
// micro-batch. FLOP counts follow Narayanan et al. SC'21 Sec. 5.1 (24 b s h^2 + 4 b s^2 h forward, without
// logits) generalised to GQA / SwiGLU widths; byte counts assume 2-byte activations and that each kernel
// reads its inputs and writes its outputs once (no cache reuse across kernels).
LayerCosts layer_costs_unfused(const GptConfig& c, const models::ComputeModel& cm) {
  const double b = double(c.micro_batch_size), s = double(c.seq_length) / double(c.context_parallel_size),
               h = double(c.hidden_size), t = double(c.tensor_model_parallel_size), f = double(c.ffn()),
               a = double(c.num_attention_heads), skv = double(c.seq_length);
  const double T = b * s;                                  // tokens per micro-batch
  const double Te = c.sequence_parallel ? T / t : T;       // tokens in replicated elementwise regions
  const double E = b * (a / t) * s * skv;                  // attention score elements per rank
  const double B2 = 2.0;                                   // bytes per activation element
  // Integer widths (exact, so MHA/GELU reproduce 3h/t and f/t bit for bit).
  const double qkv_w = double((c.num_attention_heads + 2 * c.query_groups()) * c.head_dim());
  const double q_w = double(c.num_attention_heads * c.head_dim());
  const double fc1_w = double(c.swiglu ? 2 * c.ffn() : c.ffn());
  auto gemm = [&](double m, double k, double n) {
    return Kernel{OpClass::Gemm, 2.0 * m * k * n, B2 * (m * k + k * n + m * n)};
  };
  Kernel ln{OpClass::Elementwise, 0, B2 * 2.0 * Te * h};
  Kernel qkv = gemm(T, h, qkv_w / t);
  Kernel qk{OpClass::Attention, 2.0 * T * skv * q_w / t, B2 * (2.0 * T * q_w / t + E)};
  Kernel softmax{OpClass::Elementwise, 0, B2 * 2.0 * E};               // fused scale-mask-softmax: read+write
  Kernel attn_dropout{OpClass::Elementwise, 0, c.attention_dropout > 0 ? (B2 * 2.0 + 1.0) * E : 0.0};
  Kernel av{OpClass::Attention, 2.0 * T * skv * q_w / t, B2 * (E + 2.0 * T * q_w / t)};
  Kernel proj = gemm(T, q_w / t, h);
  Kernel drop_add{OpClass::Elementwise, 0, (B2 * 3.0 + (c.hidden_dropout > 0 ? 1.0 : 0.0)) * Te * h};
  Kernel fc1 = gemm(T, h, fc1_w / t);
  Kernel gelu{OpClass::Elementwise, 0, c.swiglu ? B2 * (fc1_w + f) / t * T : B2 * 2.0 * T * f / t};
  Kernel fc2 = gemm(T, f / t, h);
  LayerCosts L;
  for (const Kernel& k : {ln, qkv, qk, softmax, attn_dropout, av, proj, drop_add}) L.fwd_attn.add(cm, k);
  for (const Kernel& k : {ln, fc1, gelu, fc2, drop_add}) L.fwd_mlp.add(cm, k);
  // Backward: each GEMM becomes two GEMMs of the same size (input and weight gradients); elementwise
  // backward kernels move about twice the bytes (read output grad and saved input, write input grad).
  for (const Kernel& k : {qkv, qk, av, proj}) L.bwd_attn.add(cm, k, 2.0);
  for (const Kernel& k : {ln, softmax, attn_dropout, drop_add}) L.bwd_attn.add(cm, k, 2.0);
  for (const Kernel& k : {fc1, fc2}) L.bwd_mlp.add(cm, k, 2.0);
  for (const Kernel& k : {ln, gelu, drop_add}) L.bwd_mlp.add(cm, k, 2.0);
  for (const Kernel& k : {qk, softmax, attn_dropout, av}) L.recompute_attn_extra.add(cm, k);
  return L;
}

// Bytes an FP8 recipe moves per element it quantises (read the bf16 tensor, write the FP8 data):
// delayed scaling (Transformer Engine default, amax fused into the cast; Hopper FP8 GEMMs need a
// transposed copy for the other operand layout, written in the same pass): 2 + 1 + 1 = 4;
// tensorwise current scaling (torchao float8 tensorwise / TE Float8CurrentScaling): an extra amax pass
// reads the tensor once more: 6; mxfp8 (32-element blocks, one 1-byte E8M0 scale each, row- and
// column-wise copies): 2 + 2 x (1 + 1/32); blockwise (1x128 / 128x128 blocks, fp32 scales, both layouts):
// 2 + 2 x (1 + 4/128). Recipes: NVIDIA Transformer Engine user guide, "Using FP8 with Transformer Engine"
// (recipes DelayedScaling, Float8CurrentScaling, MXFP8BlockScaling, Float8BlockScaling).
// rowwise (torchao float8 rowwise: a scale per row of each operand): a row-scaled tensor cannot serve as
// the column-scaled operand of the other GEMMs, so each tensor is quantised twice, each time with its own
// amax pass: 2 x (2 + 2 + 1) = 10 (torchao/float8/float8_linear.py, ScalingGranularity.AXISWISE).
double fp8_cast_bytes_per_element(const std::string& recipe) {
  if (recipe == "tensorwise") return 6.0;
  if (recipe == "rowwise") return 10.0;
  if (recipe == "mxfp8") return 2.0 + 2.0 * (1.0 + 1.0 / 32.0);
  if (recipe == "blockwise") return 2.0 + 2.0 * (1.0 + 4.0 / 128.0);
  return 4.0;
}

// Flash / fused attention (Megatron-Core with Transformer Engine): each kernel described by its shape and
// priced by the per-kernel compute model (models/compute.hpp). Tokens on this rank: b s / cp.
LayerCosts layer_costs_fused(const GptConfig& c, const models::ComputeModel& cm) {
  const std::int64_t b = c.micro_batch_size, cp = c.context_parallel_size, t = c.tensor_model_parallel_size;
  const std::int64_t s = c.seq_length, sl = s / cp, T = b * sl, h = c.hidden_size, f = c.ffn(), d = c.head_dim();
  const std::int64_t a_t = c.num_attention_heads / t, g_t = std::max<std::int64_t>(1, c.query_groups() / t);
  const std::int64_t Te = c.sequence_parallel ? T / t : T;
  const std::int64_t fc1 = c.swiglu ? 2 * f : f;
  const Precision act = c.precision == "fp16" ? Precision::FP16 : Precision::BF16;
  const Precision gp = c.fp8() ? Precision::FP8 : act;
  const double e = 2.0;  // bytes per activation element
  using models::MemoryKernel;
  auto mem = [&](MemoryKernel k, double bytes) { return KernelDesc::memory(k, bytes, act); };
  const double cast = fp8_cast_bytes_per_element(c.fp8_recipe);
  struct G {
    std::int64_t k, n;  // input width, output width (per TP rank)
  };
  const G qkv{h, (a_t + 2 * g_t) * d}, proj{a_t * d, h}, up{h, fc1 / t}, down{f / t, h};
  // Rowwise-scaled FP8 GEMMs (torch._scaled_mm with per-row / per-column scales) take 1.12x the time of
  // tensorwise ones: median of 12 Llama-3 8B/70B shapes, 1.04-1.42x, measured on an H100 SXM
  // (tests/data/hardware/h100-fp8-rowwise/scaled_mm.csv).
  const double gemm_factor = c.fp8() && c.fp8_recipe == "rowwise" ? 1.12 : 1.0;
  auto fwd_gemm = [&](Costs& out, G g) {
    if (c.fp8()) out.add(cm, mem(MemoryKernel::Cast, cast * double(T) * double(g.k)));
    out.add(cm, KernelDesc::gemm(T, g.n, g.k, gp), gemm_factor);
  };
  auto bwd_gemm = [&](Costs& out, G g) {
    if (c.fp8()) out.add(cm, mem(MemoryKernel::Cast, cast * double(T) * double(g.n)));  // output gradient
    out.add(cm, KernelDesc::gemm(T, g.k, g.n, gp), gemm_factor);  // dgrad
    out.add(cm, KernelDesc::gemm(g.k, g.n, T, gp), gemm_factor);  // wgrad
  };
  const auto impl = c.attention_backend == "flash" ? models::AttentionImpl::Flash : models::AttentionImpl::Cudnn;
  // Causal attention of this rank's s/cp queries over the whole sequence: with load-balanced chunks (2 cp
  // pieces, Megatron-Core / TE ring attention) every rank does 1/cp of the causal work.
  const KernelDesc fa = KernelDesc::attention(b, a_t, g_t, sl, s, d, true, false, act, impl);
  const KernelDesc fa_b = KernelDesc::attention(b, a_t, g_t, sl, s, d, true, true, act, impl);
  const double norm = 2.0 * e * double(Te) * double(h);
  const double resid = (3.0 * e + (c.hidden_dropout > 0 ? 1.0 : 0.0)) * double(Te) * double(h);
  const double rope = c.position_embedding_type == "rope" ? 2.0 * e * double(T) * double((a_t + g_t) * d) : 0.0;
  const double actv = e * double(T) * double(fc1 + f) / double(t);
  LayerCosts L;
  // Multi-latent attention (DeepSeek-V2 arXiv:2405.04434 Sec. 2.1): down-projections to the q / kv latents
  // (replicated over TP) with their RMSNorms, up-projections to per-head Q (qk + rope dims), K and V, and
  // the output projection from v_head_dim per head. The attention kernel's FLOPs use head dim (qk + rope +
  // v) / 2, which gives QK^T over qk + rope and PV over v exactly.
  const bool mla = c.moe.multi_latent_attention;
  std::vector<G> attn_in;  // input-side projections of the attention block
  G attn_out = proj;
  KernelDesc fa_f = fa, fa_bw = fa_b;
  double latent_norm = 0;
  if (mla) {
    const auto& me = c.moe;
    const std::int64_t qk = me.qk_head_dim + me.qk_pos_emb_head_dim, ql = me.q_lora_rank, kvl = me.kv_lora_rank;
    if (ql > 0) attn_in.push_back({h, ql}), attn_in.push_back({ql, a_t * qk});
    else attn_in.push_back({h, a_t * qk});
    attn_in.push_back({h, kvl + me.qk_pos_emb_head_dim});
    attn_in.push_back({kvl, a_t * (me.qk_head_dim + me.v_head_dim)});
    attn_out = G{a_t * me.v_head_dim, h};
    const std::int64_t dh = (qk + me.v_head_dim) / 2;
    fa_f = KernelDesc::attention(b, a_t, a_t, sl, s, dh, true, false, act, impl);
    fa_bw = KernelDesc::attention(b, a_t, a_t, sl, s, dh, true, true, act, impl);
    latent_norm = 2.0 * e * double(T) * double(ql + kvl);
  } else {
    attn_in.push_back(qkv);
  }
  L.fwd_attn.add(cm, mem(MemoryKernel::Norm, norm));
  for (const G& g : attn_in) fwd_gemm(L.fwd_attn, g);
  if (latent_norm > 0) L.fwd_attn.add(cm, mem(MemoryKernel::Norm, latent_norm));
  if (rope > 0) L.fwd_attn.add(cm, mem(MemoryKernel::Elementwise, rope));
  L.fwd_attn.add(cm, fa_f);
  fwd_gemm(L.fwd_attn, attn_out);
  L.fwd_attn.add(cm, mem(MemoryKernel::Elementwise, resid));
  L.fwd_mlp.add(cm, mem(MemoryKernel::Norm, norm));
  fwd_gemm(L.fwd_mlp, up);
  L.fwd_mlp.add(cm, mem(MemoryKernel::Elementwise, actv));
  fwd_gemm(L.fwd_mlp, down);
  L.fwd_mlp.add(cm, mem(MemoryKernel::Elementwise, resid));
  // Backward: memory-bound kernels move twice their forward bytes (read the output gradient and the saved
  // input, write the input gradient).
  L.bwd_mlp.add(cm, mem(MemoryKernel::Elementwise, 2.0 * resid));
  bwd_gemm(L.bwd_mlp, down);
  L.bwd_mlp.add(cm, mem(MemoryKernel::Elementwise, 2.0 * actv));
  bwd_gemm(L.bwd_mlp, up);
  L.bwd_mlp.add(cm, mem(MemoryKernel::Norm, 2.0 * norm));
  L.bwd_attn.add(cm, mem(MemoryKernel::Elementwise, 2.0 * resid));
  bwd_gemm(L.bwd_attn, attn_out);
  L.bwd_attn.add(cm, fa_bw);
  if (rope > 0) L.bwd_attn.add(cm, mem(MemoryKernel::Elementwise, rope));
  if (latent_norm > 0) L.bwd_attn.add(cm, mem(MemoryKernel::Norm, 2.0 * latent_norm));
  for (auto it = attn_in.rbegin(); it != attn_in.rend(); ++it) bwd_gemm(L.bwd_attn, *it);
  L.bwd_attn.add(cm, mem(MemoryKernel::Norm, 2.0 * norm));
  if (c.selective_ac_option == "op") {
    // torchtitan's per-op selective checkpointing (layer_activation_bytes_op_sac): the SDPA output is
    // saved, so attention is not recomputed; the backward recomputes what was not saved -- the two norms,
    // RoPE, the 2nd, 4th and 6th matmuls in forward order (wk, wo, w3 of a Llama block) and the SwiGLU
    // product -- before the layer's backward.
    L.recompute_attn_extra.add(cm, mem(MemoryKernel::Norm, norm));
    fwd_gemm(L.recompute_attn_extra, G{h, g_t * d});
    if (rope > 0) L.recompute_attn_extra.add(cm, mem(MemoryKernel::Elementwise, rope));
    fwd_gemm(L.recompute_attn_extra, attn_out);
    L.recompute_attn_extra.add(cm, mem(MemoryKernel::Elementwise, resid));
    L.bwd_mlp.add(cm, mem(MemoryKernel::Norm, norm));
    fwd_gemm(L.bwd_mlp, G{h, f / t});
    L.bwd_mlp.add(cm, mem(MemoryKernel::Elementwise, actv));
  } else {
    // Selective recompute (Megatron-Core "core_attn"): the attention forward again before its backward.
    L.recompute_attn_extra.add(cm, fa_f);
  }
  return L;
}

// One MoE layer's MLP side for one micro-batch on the simulated rank, split where the dispatch / combine
// communication sits. Expert GEMMs are priced for the busiest expert-parallel rank of the layer (the
// all-to-all makes every rank wait for it); `experts_*_mean` prices the same work spread evenly (the
// difference is the time lost to imbalance).
struct MoeCosts {
  Costs pre_f, experts_f, post_f, shared_f, pre_b, experts_b, post_b, shared_b, experts_f_mean, experts_b_mean;
};

MoeCosts moe_costs(const GptConfig& c, const models::ComputeModel& cm, const MoeLayerLoad& ld, double T_local) {
  using models::MemoryKernel;
  const Precision act = c.precision == "fp16" ? Precision::FP16 : Precision::BF16;
  const Precision gp = c.fp8() ? Precision::FP8 : act;
  const auto& me = c.moe;
  const std::int64_t h = c.hidden_size, E = me.num_experts, k = me.moe_router_topk, t = c.tensor_model_parallel_size;
  const std::int64_t ep = me.expert_model_parallel_size, El = E / ep, etp = c.etp(), F = c.moe_ffn();
  const std::int64_t fc1 = c.swiglu ? 2 * F : F;
  const std::int64_t Tl = std::max<std::int64_t>(1, std::llround(T_local));
  const double e = 2.0, slots = double(Tl) * double(k);
  auto mem = [&](MemoryKernel kind, double bytes) { return KernelDesc::memory(kind, bytes, act); };
  const double cast = fp8_cast_bytes_per_element(c.fp8_recipe);
  MoeCosts M;
  // Norm, router GEMM (h -> E logits), softmax + top-k over T x E fp32 scores, permutation of the routed
  // slots (read + write k x h per token). Byte counts as measured in tests/data/hardware/h200-kernels/
  // kernels2.csv (router_softmax_topk T*E*4, moe_permute_gather 2*T*k*h*2, moe_unpermute_index_add 3*T*k*h*2).
  const double Te = double(Tl);
  M.pre_f.add(cm, mem(MemoryKernel::Norm, 2.0 * e * Te * double(h)));
  M.pre_f.add(cm, KernelDesc::gemm(Tl, E, h, act));
  M.pre_f.add(cm, mem(MemoryKernel::Softmax, 4.0 * Te * double(E)));
  M.pre_f.add(cm, mem(MemoryKernel::Copy, 2.0 * e * slots * double(h)));
  // Unpermute: gather-reduce of the k slots per token weighted by the router probabilities; without
  // moe_permute_fusion the probability scaling is a separate elementwise pass over the slots.
  M.post_f.add(cm, mem(MemoryKernel::Elementwise, 3.0 * e * slots * double(h)));
  if (!me.moe_permute_fusion) M.post_f.add(cm, mem(MemoryKernel::Elementwise, 2.0 * e * slots * double(h)));
  M.post_f.add(cm, mem(MemoryKernel::Elementwise, 3.0 * e * Te * double(h)));  // residual add
  M.pre_b.add(cm, mem(MemoryKernel::Copy, 2.0 * e * slots * double(h)));
  M.pre_b.add(cm, mem(MemoryKernel::Softmax, 2.0 * 4.0 * Te * double(E)));
  M.pre_b.add(cm, KernelDesc::gemm(Tl, h, E, act));
  M.pre_b.add(cm, KernelDesc::gemm(h, E, Tl, act));
  M.pre_b.add(cm, mem(MemoryKernel::Norm, 2.0 * 2.0 * e * Te * double(h)));
  M.post_b.add(cm, mem(MemoryKernel::Elementwise, 2.0 * 3.0 * e * Te * double(h)));
  M.post_b.add(cm, mem(MemoryKernel::Elementwise, 3.0 * e * slots * double(h)));
  if (!me.moe_permute_fusion) M.post_b.add(cm, mem(MemoryKernel::Elementwise, 2.0 * e * slots * double(h)));
  // Experts: per local expert m_e rows (tokens after dropping/padding, gathered over ETP), fc1 h -> fc1/etp,
  // activation, fc2 F/etp -> h. moe_grouped_gemm: one grouped GEMM per projection with the mean rows per
  // local expert; otherwise one GEMM per expert (sequential loop, SequentialMLP).
  auto experts = [&](const std::vector<double>& rows, Costs& f, Costs& bw) {
    double total = 0;
    for (double r : rows) total += r;
    auto proj = [&](std::int64_t kin, std::int64_t nout, bool fwd) {
      Costs& out = fwd ? f : bw;
      if (c.fp8()) out.add(cm, mem(MemoryKernel::Cast, cast * total * double(fwd ? kin : nout)));
      if (me.moe_grouped_gemm) {
        const std::int64_t m = std::max<std::int64_t>(1, std::llround(total / double(rows.size())));
        if (fwd) {
          out.add(cm, KernelDesc::grouped_gemm(El, m, nout, kin, gp));
        } else {
          out.add(cm, KernelDesc::grouped_gemm(El, m, kin, nout, gp));   // dgrad
          out.add(cm, KernelDesc::grouped_gemm(El, kin, nout, m, gp));   // wgrad
        }
      } else {
        for (double r : rows) {
          const std::int64_t m = std::max<std::int64_t>(1, std::llround(r));
          if (fwd) {
            out.add(cm, KernelDesc::gemm(m, nout, kin, gp));
          } else {
            out.add(cm, KernelDesc::gemm(m, kin, nout, gp));
            out.add(cm, KernelDesc::gemm(kin, nout, m, gp));
          }
        }
      }
    };
    const double actv = e * total * double(fc1 + F) / double(etp);
    proj(h, fc1 / etp, true);
    f.add(cm, mem(MemoryKernel::Elementwise, actv));
    proj(F / etp, h, true);
    proj(F / etp, h, false);
    bw.add(cm, mem(MemoryKernel::Elementwise, 2.0 * actv));
    proj(h, fc1 / etp, false);
  };
  std::vector<double> busiest(ld.expert_tokens.begin() + ld.busiest_rank * El,
                              ld.expert_tokens.begin() + (ld.busiest_rank + 1) * El);
  experts(busiest, M.experts_f, M.experts_b);
  experts(std::vector<double>(El, ld.mean_rank_tokens / double(El)), M.experts_f_mean, M.experts_b_mean);
  // Shared expert: a dense gated MLP of moe_shared_expert_intermediate_size, split over TP.
  const std::int64_t S = me.moe_shared_expert_intermediate_size;
  if (S > 0) {
    const std::int64_t fs = c.swiglu ? 2 * S : S, Tt = c.sequence_parallel ? Tl * t : Tl;
    auto g = [&](Costs& out, std::int64_t kin, std::int64_t nout, bool fwd) {
      if (c.fp8()) out.add(cm, mem(MemoryKernel::Cast, cast * double(Tt) * double(fwd ? kin : nout)));
      if (fwd) {
        out.add(cm, KernelDesc::gemm(Tt, nout, kin, gp));
      } else {
        out.add(cm, KernelDesc::gemm(Tt, kin, nout, gp));
        out.add(cm, KernelDesc::gemm(kin, nout, Tt, gp));
      }
    };
    const double sact = e * double(Tt) * double(fs + S) / double(t);
    g(M.shared_f, h, fs / t, true);
    M.shared_f.add(cm, mem(MemoryKernel::Elementwise, sact));
    g(M.shared_f, S / t, h, true);
    g(M.shared_b, S / t, h, false);
    M.shared_b.add(cm, mem(MemoryKernel::Elementwise, 2.0 * sact));
    g(M.shared_b, h, fs / t, false);
  }
  return M;
}

std::int64_t to_ns(double s) { return static_cast<std::int64_t>(std::llround(s * 1e9)); }

class RankBuilder {
 public:
  RankBuilder(RankTrace& rt) : rt_(rt) {
    rt_.streams = {"compute", "comm.tp", "pp.recv.fwd", "pp.recv.bwd", "pp.send.fwd", "pp.send.bwd", "comm.dp"};
  }
  enum Stream : std::uint16_t { kCompute = 0, kTp = 1, kRecvF = 2, kRecvB = 3, kSendF = 4, kSendB = 5, kDp = 6, kCp = 7, kFsdp = 8 };
  void add_stream(const char* name) { rt_.streams.push_back(name); }
  // The chain head, saved and restored to build two interleaved chains (MoE A2A overlap).
  std::pair<std::uint32_t, bool> head() const { return {last_, has_last_}; }
  void set_head(std::pair<std::uint32_t, bool> h) { last_ = h.first, has_last_ = h.second; }

  // Adds an op depending on the chain (and extra deps); returns its index and makes it the chain head.
  std::uint32_t chain(Op op, std::vector<std::uint32_t> extra = {}) {
    if (has_last_) op.deps.push_back(last_);
    for (auto d : extra) op.deps.push_back(d);
    std::uint32_t i = push(std::move(op));
    last_ = i;
    has_last_ = true;
    return i;
  }
  // Adds an op that starts with the chain head (depends on it) without becoming the head.
  std::uint32_t fork(Op op) {
    if (has_last_) op.deps.push_back(last_);
    return push(std::move(op));
  }
  std::uint32_t push(Op op) {
    rt_.ops.push_back(std::move(op));
    return static_cast<std::uint32_t>(rt_.ops.size() - 1);
  }
  std::uint32_t last() const { return last_; }
  bool has_last() const { return has_last_; }

 private:
  RankTrace& rt_;
  std::uint32_t last_ = 0;
  bool has_last_ = false;
};

Op compute_op(std::string name, const Costs& c) {
  Op op;
  op.kind = OpKind::Compute;
  op.stream = RankBuilder::kCompute;
  op.name = std::move(name);
  op.category = "compute";
  op.duration_s = static_cast<double>(to_ns(c.seconds)) * 1e-9;
  op.flops = c.flops;
  return op;
}

Op wait_op(std::string name) {
  Op w = compute_op(std::move(name), Costs{});
  w.duration_s = 0;
  return w;
}

Op coll_op(std::string name, CollOp kind, std::int32_t comm, double bytes, std::uint16_t stream, const char* cat) {
  Op op;
  op.kind = OpKind::Collective;
  op.stream = stream;
  op.name = std::move(name);
  op.category = cat;
  op.coll = kind;
  op.comm = comm;
  op.bytes = bytes;
  return op;
}

// tp_comm_overlap: Transformer Engine's userbuffers overlap runs the TP all-gather / reduce-scatter chunks
// while the GEMMs run; the GEMMs lose the SMs the communication kernels take. Cost: 16 of H100's 132 SMs
// (Transformer Engine's userbuffers default: add_ub(..., num_sm=16) for the ring-exchange, pipeline and bulk
// methods alike, NVIDIA/TransformerEngine@0004dbd0 transformer_engine/pytorch/module/base.py initialize_ub;
// 132 SMs: H100 SXM whitepaper) -> the overlapped compute runs 132 / 116 = 1.138x longer.
constexpr double kTpOverlapComputeFactor = 132.0 / 116.0;

}  // namespace

Trace generate_gpt(const GptConfig& c, const models::ComputeModel& cm_in, const std::string& where) {
  const auto t = c.tensor_model_parallel_size, p = c.pipeline_model_parallel_size, dp = c.data_parallel(),
             cp = c.context_parallel_size;
  const auto m = c.global_batch_size / (c.micro_batch_size * dp);
  const auto v = c.vp();
  const auto layout = gpt_layer_layout(c);
  const auto& gpu = models::gpu_spec(c.gpu, where + " gpu");
  models::ComputeModel cm = cm_in;
  cm.gpu = gpu;
  GptMemory mem = gpt_memory_per_gpu(c);
  if (mem.total_bytes() > gpu.hbm_capacity_bytes) {
    char buf[600];
    std::snprintf(buf, sizeof buf,
                  "model does not fit in GPU memory: needs %.1f GiB per GPU on pipeline stage %lld (weights %.1f GiB, "
                  "gradients %.1f GiB, optimizer %.1f GiB, activations %.1f GiB; largest: %s) but %s has %.1f GiB; "
                  "increase tensor/pipeline/context parallelism, enable use_distributed_optimizer or "
                  "recompute_granularity=full",
                  mem.total_bytes() / 1073741824.0, static_cast<long long>(mem.stage), mem.weights_bytes / 1073741824.0,
                  mem.grads_bytes / 1073741824.0, mem.optimizer_bytes / 1073741824.0,
                  mem.activations_bytes / 1073741824.0, mem.largest_term().c_str(), gpu.name.c_str(),
                  gpu.hbm_capacity_bytes / 1073741824.0);
    throw InputError(where, buf);
  }
  const bool legacy = c.attention_backend == "unfused";
  const double h = double(c.hidden_size), s = double(c.seq_length) / double(cp), b = double(c.micro_batch_size),
               V = double(c.padded_vocab_size);
  const double act_bytes = b * s * h * 2.0;  // one micro-batch's hidden states on this rank, 2-byte elements
  const LayerCosts L = legacy ? layer_costs_unfused(c, cm) : layer_costs_fused(c, cm);
  const bool full = c.recompute_granularity == "full", selective = c.recompute_granularity == "selective";
  // Logits and loss (last stage), embedding lookup (first stage), per micro-batch.
  Costs logits_fwd, logits_bwd, embed_fwd, embed_bwd;
  {
    const double T = b * s, tt = double(t);
    Kernel ce{OpClass::Elementwise, 0, 3.0 * 4.0 * T * V / tt};  // fp32 softmax cross-entropy: read, write, grad
    if (legacy) {
      Kernel lg{OpClass::Gemm, 2.0 * T * h * V / tt, 2.0 * (T * h + h * V / tt + T * V / tt)};
      logits_fwd.add(cm, lg);
      logits_fwd.add(cm, ce);
      logits_bwd.add(cm, lg, 2.0);
      logits_bwd.add(cm, ce);
      Kernel emb{OpClass::Embedding, 0, 2.0 * 2.0 * T * h};  // gather rows + position add, 2-byte elements
      embed_fwd.add(cm, emb);
      embed_bwd.add(cm, emb, 2.0);
    } else {
      // The output layer stays in bf16 under FP8 (Transformer Engine recipes quantise the decoder linears).
      const Precision ap = c.precision == "fp16" ? Precision::FP16 : Precision::BF16;
      const std::int64_t Ti = c.micro_batch_size * (c.seq_length / cp), Vt = c.padded_vocab_size / t;
      logits_fwd.add(cm, KernelDesc::gemm(Ti, Vt, c.hidden_size, ap));
      logits_fwd.add(cm, KernelDesc::memory(models::MemoryKernel::CrossEntropy, ce.bytes, ap));
      logits_bwd.add(cm, KernelDesc::memory(models::MemoryKernel::CrossEntropy, ce.bytes, ap));
      logits_bwd.add(cm, KernelDesc::gemm(Ti, c.hidden_size, Vt, ap));
      logits_bwd.add(cm, KernelDesc::gemm(c.hidden_size, Vt, Ti, ap));
      const double eb = (c.position_embedding_type == "learned_absolute" ? 2.0 : 1.0) * 2.0 * T * h;
      embed_fwd.add(cm, KernelDesc::memory(models::MemoryKernel::Embedding, eb, ap));
      embed_bwd.add(cm, KernelDesc::memory(models::MemoryKernel::Embedding, 2.0 * eb, ap));
    }
  }

  // Multi-token prediction (DeepSeek-V3 Sec. 2.2), per micro-batch on the last stage: per depth a norm +
  // projection 2h -> h, one transformer layer (compute only: its MoE dispatch is not simulated) and the
  // shared output head with its loss.
  Costs mtp, mtp_b;
  if (c.moe.mtp_num_layers > 0 && !legacy) {
    const Precision ap = c.precision == "fp16" ? Precision::FP16 : Precision::BF16;
    const std::int64_t Ti = c.micro_batch_size * (c.seq_length / cp);
    for (std::int64_t k = 0; k < c.moe.mtp_num_layers; ++k) {
      mtp.add(cm, KernelDesc::gemm(Ti, c.hidden_size / t, 2 * c.hidden_size, ap));
      mtp += L.fwd_attn;
      mtp += L.fwd_mlp;
      mtp += logits_fwd;
      mtp_b += logits_bwd;
      mtp_b += L.bwd_mlp;
      mtp_b += L.bwd_attn;
      mtp_b.add(cm, KernelDesc::gemm(Ti, 2 * c.hidden_size, c.hidden_size / t, ap));
      mtp_b.add(cm, KernelDesc::gemm(2 * c.hidden_size, c.hidden_size / t, Ti, ap));
    }
  }

  Trace tr;
  tr.name = "gpt";
  tr.world_size = static_cast<std::int32_t>(c.world_size);
  tr.gpu = gpu.name;
  tr.params = gpt_config_to_params(c);
  // Rank layout as Megatron-LM's default order (tensor fastest, then context, then data, then pipeline):
  //   rank = stage * (dp * cp * t) + dp_index * (cp * t) + cp_index * t + tp_index.
  auto rank_of = [&](std::int64_t stage, std::int64_t d, std::int64_t k, std::int64_t tp) {
    return static_cast<std::int32_t>(stage * dp * cp * t + d * cp * t + k * t + tp);
  };
  const std::int64_t dp_mirrors = std::min<std::int64_t>(t, c.gpus_per_host) - 1;
  // Gradient / parameter collectives run over the DP x CP group (Megatron-Core reduces gradients over
  // data- and context-parallel ranks together); HSDP (num_distributed_optimizer_instances R) shards over
  // DP x CP / R consecutive ranks and all-reduces across the R replicas.
  const std::int64_t R = c.num_distributed_optimizer_instances, shard_n = dp * cp / R;
  // Appends a communicator to the trace and returns its index.
  auto add_comm = [&](std::string name, const char* category, std::vector<std::int32_t> ranks,
                      std::int64_t mirrors = 0, std::int32_t mirror_stride = 1) {
    Communicator comm;
    comm.name = std::move(name);
    comm.category = category;
    comm.ranks = std::move(ranks);
    comm.mirrors = static_cast<std::int32_t>(mirrors);
    comm.mirror_stride = mirror_stride;
    tr.comms.push_back(std::move(comm));
    return static_cast<std::int32_t>(tr.comms.size() - 1);
  };
  std::vector<std::int32_t> tp_comm(p), dp_comm(p), cp_comm(p, -1), rep_comm(p, -1);
  for (std::int64_t st = 0; st < p; ++st) {
    const std::string sfx = ".stage" + std::to_string(st);
    std::vector<std::int32_t> ranks;
    for (std::int64_t k = 0; k < t; ++k) ranks.push_back(rank_of(st, 0, 0, k));
    tp_comm[st] = add_comm("tp" + sfx, "tp", std::move(ranks));
    ranks.clear();
    for (std::int64_t d = 0; d < dp; ++d)
      for (std::int64_t k = 0; k < cp; ++k)
        if (d * cp + k < shard_n) ranks.push_back(rank_of(st, d, k, 0));
    dp_comm[st] = add_comm("dp" + sfx, "dp", std::move(ranks), dp_mirrors);
    if (cp > 1) {
      ranks.clear();
      for (std::int64_t k = 0; k < cp; ++k) ranks.push_back(rank_of(st, 0, k, 0));
      cp_comm[st] = add_comm("cp" + sfx, "cp", std::move(ranks), dp_mirrors);
    }
    if (R > 1) {
      ranks.clear();
      for (std::int64_t r = 0; r < R; ++r) ranks.push_back(rank_of(st, r * shard_n / cp, r * shard_n % cp, 0));
      rep_comm[st] = add_comm("dp.replica" + sfx, "dp", std::move(ranks), dp_mirrors);
    }
  }
  // ---- Mixture of experts: routing per MoE layer, per-layer dispatch/combine communicators, costs.
  const bool moe_on = c.moe.enabled();
  const std::vector<bool> moe_pattern = moe_layers_of(c);
  std::vector<std::int64_t> moe_index(c.num_layers, -1);
  std::int64_t n_moe = 0;
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    if (moe_pattern[l]) moe_index[l] = n_moe++;
  const std::int64_t ep = c.moe.expert_model_parallel_size, etp = moe_on ? c.etp() : 1,
                     edp = moe_on ? c.expert_data_parallel() : 1;
  const bool a2a = c.moe.moe_token_dispatcher_type != "allgather";
  // Tokens entering an MoE layer on one rank per micro-batch (sequence-parallel split over TP).
  const double T_local = b * s / (c.sequence_parallel ? double(t) : 1.0);
  std::vector<MoeLayerLoad> loads;
  std::vector<MoeCosts> moe_cost;
  if (moe_on) {
    const auto shares = moe_expert_shares(c.moe, n_moe, where);
    for (std::int64_t i = 0; i < n_moe; ++i) {
      loads.push_back(moe_layer_load(c.moe, shares[i], T_local, ep, ep * etp));
      moe_cost.push_back(moe_costs(c, cm, loads.back(), T_local));
    }
  }
  const double a2a_bytes = T_local * double(c.moe.moe_router_topk) * h * 2.0;  // bf16 slots sent per rank
  const bool fp8_dispatch = c.moe.moe_token_dispatcher_type == "flex" && c.fp8();
  // Expert ranks of a stage: local index = etp_i + etp * (ep_i + ep * edp_i) (expert tensor fastest, as
  // Megatron-Core's expert grid); the simulated rank is local index 0.
  std::vector<std::int32_t> disp_comm(c.num_layers, -1), comb_comm(c.num_layers, -1), epag_comm(p, -1),
      etp_comm(p, -1), edp_comm(p, -1);
  double flex_dedup = 1.0;
  if (moe_on) {
    const std::int64_t gph = c.gpus_per_host;
    std::int32_t mir = 0, mstride = 1;
    if (etp > 1) mir = static_cast<std::int32_t>(std::min(etp, gph) - 1);
    else if (ep < gph) mir = static_cast<std::int32_t>(std::min(edp, gph / ep) - 1), mstride = static_cast<std::int32_t>(ep);
    std::vector<std::int64_t> off(p * v + 1, 0);
    for (std::int64_t mc = 0; mc < p * v; ++mc) off[mc + 1] = off[mc] + layout[mc % p][mc / p];
    // EP rank k sits on GPU k * etp of the stage; NVLink domains of gpus_per_nvlink_domain GPUs (a DGX
    // server, or a whole NVL72 rack).
    const std::int64_t dom = std::max(c.gpus_per_nvlink_domain, gph);
    auto host_of = [&](std::int64_t base, std::size_t k) { return (base + static_cast<std::int64_t>(k) * etp) / dom; };
    if (c.moe.moe_token_dispatcher_type == "flex") {
      // DeepEP-style dispatch (flex): a token crosses the scale-out network once per destination node and is
      // forwarded to that node's experts over NVLink; the combine reduces inside the node before sending
      // back. Scale-out bytes shrink from the token's remote slots to its distinct remote nodes. With k slots
      // spread uniformly over G usable nodes (node-limited routing: moe_router_group_topk groups of
      // num_experts / moe_router_num_groups experts, one group per node when groups == nodes), the expected
      // distinct nodes are G (1 - (1 - 1/G)^k); remote entries are scaled by that over k. The NVLink
      // forwarding traffic inside the destination node is not modelled.
      const double nodes = std::max<double>(1.0, double(ep * etp) / double(dom));
      double G = nodes;
      if (c.moe.moe_router_group_topk > 0) G = std::min(nodes, double(c.moe.moe_router_group_topk));
      const double k = double(c.moe.moe_router_topk);
      if (nodes > 1) flex_dedup = std::min(1.0, G * (1.0 - std::pow(1.0 - 1.0 / G, k)) / k);
    }
    for (std::int64_t st = 0; st < p; ++st) {
      const std::int32_t base = rank_of(st, 0, 0, 0);
      auto add = [&](const std::string& name, std::vector<std::int32_t> ranks, std::int32_t mirrors, std::int32_t stride) {
        return add_comm(name, "ep", std::move(ranks), mirrors, stride);
      };
      std::vector<std::int32_t> ep_ranks;
      for (std::int64_t k = 0; k < ep; ++k) ep_ranks.push_back(base + static_cast<std::int32_t>(k * etp));
      if (a2a && ep > 1) {
        for (std::int64_t ch = 0; ch < v; ++ch)
          for (std::int64_t l = 0; l < layout[st][ch]; ++l) {
            const std::int64_t gl = off[ch * p + st] + l;
            if (!moe_pattern[gl]) continue;
            const auto& ld = loads[moe_index[gl]];
            // Dispatch: every source sends recv_share[j] of its slots to EP rank j; combine: the transpose.
            const std::size_t n = static_cast<std::size_t>(ep);
            std::vector<std::vector<double>> W(n, std::vector<double>(n)), WT(n, std::vector<double>(n));
            for (std::size_t i = 0; i < n; ++i)
              for (std::size_t j = 0; j < n; ++j) {
                const double f = host_of(base, i) != host_of(base, j) ? flex_dedup : 1.0;
                W[i][j] = ld.recv_share[j] * f, WT[i][j] = ld.recv_share[i] * f;
              }
            disp_comm[gl] = add("ep.l" + std::to_string(gl) + ".dispatch", ep_ranks, mir, mstride);
            tr.comms.back().a2a_matrix = std::move(W);
            comb_comm[gl] = add("ep.l" + std::to_string(gl) + ".combine", ep_ranks, mir, mstride);
            tr.comms.back().a2a_matrix = std::move(WT);
          }
      }
      if (!a2a && ep * etp > 1) {
        std::vector<std::int32_t> r;
        for (std::int64_t k = 0; k < ep * etp; ++k) r.push_back(base + static_cast<std::int32_t>(k));
        const std::int32_t m2 = ep * etp < gph ? static_cast<std::int32_t>(std::min(edp, gph / (ep * etp)) - 1) : 0;
        epag_comm[st] = add("ep.allgather.stage" + std::to_string(st), r, m2, static_cast<std::int32_t>(ep * etp));
      }
      if (a2a && etp > 1) {
        std::vector<std::int32_t> r;
        for (std::int64_t k = 0; k < etp; ++k) r.push_back(base + static_cast<std::int32_t>(k));
        // The other EP ranks' ETP groups on the same server run the same gathers (co-located mirrors).
        const std::int64_t co = std::max<std::int64_t>(0, std::min(ep, gph / etp) - 1);
        etp_comm[st] = add("etp.stage" + std::to_string(st), r, static_cast<std::int32_t>(co), static_cast<std::int32_t>(etp));
      }
      if (edp > 1) {
        std::vector<std::int32_t> r;
        for (std::int64_t k = 0; k < edp; ++k) r.push_back(base + static_cast<std::int32_t>(k * ep * etp));
        edp_comm[st] = add("edp.stage" + std::to_string(st), r, static_cast<std::int32_t>(std::min(ep * etp, gph) - 1), 1);
        tr.comms.back().category = "dp";
      }
    }
  }
  std::int32_t emb_comm = -1;
  if (p > 1 && !c.untie_embeddings_and_output_weights) {
    emb_comm = add_comm("embedding", "dp", {rank_of(0, 0, 0, 0), rank_of(p - 1, 0, 0, 0)});
  }
  const double grad_elem_bytes = c.grad_reduce_in_fp32 ? 4.0 : 2.0;
  // Pipeline sends use the scatter/gather optimisation (each TP rank sends 1/t of the activation; Narayanan
  // et al. SC'21 Sec. 4.1), on by default in Megatron-LM.
  const double pp_bytes = act_bytes / double(t);
  // One pipeline send or receive of a micro-batch's activations (or their gradient).
  auto pp_op = [&](OpKind kind, std::uint16_t stream, std::string name, std::int32_t peer, std::int64_t msg_tag) {
    Op o;
    o.kind = kind;
    o.stream = stream;
    o.name = std::move(name);
    o.category = "pp";
    o.peer = peer;
    o.tag = msg_tag;
    o.bytes = pp_bytes;
    return o;
  };
  const double tp_bytes = act_bytes;
  // Context parallelism: K and V of this TP rank's key/value heads for the whole sequence (all-gather
  // output bytes; the ring of p2p exchanges moves the same (cp-1)/cp share); backward also returns dK, dV.
  const double g_t = std::max<double>(1.0, double(c.query_groups()) / double(t));
  const double kv_bytes = 2.0 * b * double(c.seq_length) * g_t * double(c.head_dim()) * 2.0;
  const double a_t = double(c.num_attention_heads / t);
  const double qkv_local = b * s * (a_t + 2.0 * g_t) * double(c.head_dim()) * 2.0, o_local = b * s * a_t * double(c.head_dim()) * 2.0;
  const double Pl = layer_params_per_rank(c);
  const double emb_el = embedding_params_per_rank(c), out_el = V * h / double(t);
  // Model chunk (stage st, chunk ch) holds global layers from offset[ch * p + st] (Megatron's interleaved order).
  std::vector<std::int64_t> offset(p * v + 1, 0);
  for (std::int64_t mc = 0; mc < p * v; ++mc) offset[mc + 1] = offset[mc] + layout[mc % p][mc / p];

  for (std::int64_t st = 0; st < p; ++st) {
    RankTrace rt;
    rt.rank = rank_of(st, 0, 0, 0);
    RankBuilder rb(rt);
    if (cp > 1 || c.fsdp()) rb.add_stream("comm.cp");
    if (c.fsdp()) rb.add_stream("comm.fsdp");
    const std::uint16_t kEp = static_cast<std::uint16_t>(rt.streams.size());
    if (moe_on) rb.add_stream("comm.ep");
    // Megatron schedule order of (forward?, micro-batch, chunk).
    struct Slot {
      bool fwd;
      std::int64_t mb, chunk;
    };
    std::vector<Slot> order;
    auto fslot = [&](std::int64_t k) {
      return Slot{true, (k / (p * v)) * p + k % p, (k / p) % v};
    };
    auto bslot = [&](std::int64_t k) {
      return Slot{false, (k / (p * v)) * p + k % p, v - 1 - (k / p) % v};
    };
    if (v == 1) {
      std::int64_t warm = std::min(p - st - 1, m);
      for (std::int64_t k = 0; k < warm; ++k) order.push_back({true, k, 0});
      for (std::int64_t k = 0; k < m - warm; ++k) {
        order.push_back({true, warm + k, 0});
        order.push_back({false, k, 0});
      }
      for (std::int64_t k = m - warm; k < m; ++k) order.push_back({false, k, 0});
    } else {
      const std::int64_t total = m * v;
      std::int64_t warm = std::min((p - st - 1) * 2 + (v - 1) * p, total);
      for (std::int64_t k = 0; k < warm; ++k) order.push_back(fslot(k));
      for (std::int64_t k = 0; k < total - warm; ++k) {
        order.push_back(fslot(warm + k));
        order.push_back(bslot(k));
      }
      for (std::int64_t k = total - warm; k < total; ++k) order.push_back(bslot(k));
    }
    const bool first_stage = st == 0, last_stage = st == p - 1;
    auto tag = [&](std::int64_t mb, std::int64_t chunk, int dir) { return (mb * v + chunk) * 2 + dir; };
    // Gradient buckets (backward order: last layer first) and, with overlap_param_gather, the parameter
    // all-gathers issued at the start of the step: bucket_of[chunk][layer].
    std::vector<std::vector<std::int64_t>> bucket_of(v);
    for (std::int64_t ch = 0; ch < v; ++ch) bucket_of[ch].assign(layout[st][ch], 0);
    struct Bucket {
      double elements = 0;
      std::uint32_t ready = 0;
    };
    std::vector<Bucket> buckets;
    {
      // (chunk, layer) in backward order, as the gradient buckets below.
      double acc = 0;
      for (std::int64_t ch = v - 1; ch >= 0; --ch)
        for (std::int64_t l = layout[st][ch] - 1; l >= 0; --l) {
          acc += Pl;
          bucket_of[ch][l] = static_cast<std::int64_t>(buckets.size());
          if (acc >= double(c.bucket_size)) {
            buckets.push_back({acc, 0});
            acc = 0;
          }
        }
      if (acc > 0 || buckets.empty()) buckets.push_back({acc, 0});
      if (first_stage) buckets.back().elements += emb_el;
      if (last_stage && last_stage_has_output(c)) buckets.front().elements += out_el;
    }
    const bool dist_opt_sharded = c.use_distributed_optimizer && !c.fsdp() && dp * cp > 1;
    // Megatron's overlap_param_gather: each bucket's parameter all-gather (the previous step's optimizer
    // update) is issued at the start of the forward, first layers first, and the bucket's layers wait for
    // it in the first micro-batch; only the first bucket's gather is exposed.
    std::vector<std::uint32_t> early_ag(buckets.size(), 0);
    if (c.overlap_param_gather && dist_opt_sharded)
      for (std::size_t k = buckets.size(); k-- > 0;)
        early_ag[k] = rb.push(coll_op("dp.bucket" + std::to_string(k) + ".ag", CollOp::AllGather, dp_comm[st],
                                      buckets[k].elements * 2.0, RankBuilder::kDp, "dp"));
    // Last backward op index per (chunk, layer) for the final micro-batch (DP bucket readiness).
    std::vector<std::vector<std::uint32_t>> final_bwd(v);
    for (std::int64_t ch = 0; ch < v; ++ch) final_bwd[ch].assign(layout[st][ch], 0);
    std::uint32_t final_embed_bwd = 0;
    // One TP block: [SP all-gather] compute [SP reduce-scatter | all-reduce], with the CP exchange of an
    // attention block. tp_comm_overlap runs the SP collectives beside the compute (which pays the SM
    // cost); p2p context parallelism runs the ring exchange beside the attention compute.
    auto block = [&](const std::string& nm, const std::string& cname, const Costs& cost, bool attn, bool bwd,
                     const std::vector<std::uint32_t>& extra = {}) {
      std::vector<std::uint32_t> par;
      const bool ovl = c.tp_comm_overlap && t > 1;
      const bool has_pre = rb.has_last();
      const std::uint32_t pre = rb.last();
      if (t > 1 && c.sequence_parallel) {
        Op ag = coll_op(nm + (bwd ? ".bwd.ag" : ".ag"), CollOp::AllGather, tp_comm[st], tp_bytes, RankBuilder::kTp, "tp");
        if (ovl) par.push_back(rb.fork(std::move(ag)));
        else rb.chain(std::move(ag));
      }
      if (attn && cp > 1) {
        const std::int32_t cc = cp_comm[st];
        if (c.cp_comm_type == "p2p") {
          par.push_back(rb.fork(coll_op(nm + (bwd ? ".bwd" : "") + ".cp.kv", CollOp::AllGather, cc, kv_bytes, RankBuilder::kCp, "cp")));
          if (bwd)
            par.push_back(rb.fork(coll_op(nm + ".bwd.cp.dkv", CollOp::ReduceScatter, cc, kv_bytes, RankBuilder::kCp, "cp")));
        } else if (c.cp_comm_type == "all_gather") {
          rb.chain(coll_op(nm + (bwd ? ".bwd" : "") + ".cp.kv", CollOp::AllGather, cc, kv_bytes, RankBuilder::kCp, "cp"));
        } else {
          rb.chain(coll_op(nm + (bwd ? ".bwd" : "") + ".cp.a2a", CollOp::AllToAll, cc, bwd ? o_local : qkv_local, RankBuilder::kCp, "cp"));
        }
      }
      Costs cc = cost;
      if (ovl) cc.seconds *= kTpOverlapComputeFactor;
      rb.chain(compute_op(cname, cc), extra);
      if (attn && cp > 1 && c.cp_comm_type == "all_gather" && bwd)
        rb.chain(coll_op(nm + ".bwd.cp.dkv", CollOp::ReduceScatter, cp_comm[st], kv_bytes, RankBuilder::kCp, "cp"));
      if (attn && cp > 1 && c.cp_comm_type == "a2a")
        rb.chain(coll_op(nm + (bwd ? ".bwd" : "") + ".cp.a2a2", CollOp::AllToAll, cp_comm[st], bwd ? qkv_local : o_local, RankBuilder::kCp, "cp"));
      if (t > 1) {
        Op red = c.sequence_parallel
                     ? coll_op(nm + (bwd ? ".bwd.rs" : ".rs"), CollOp::ReduceScatter, tp_comm[st], tp_bytes, RankBuilder::kTp, "tp")
                     : coll_op(nm + (bwd ? ".bwd.ar" : ".ar"), CollOp::AllReduce, tp_comm[st], tp_bytes, RankBuilder::kTp, "tp");
        // tp_comm_bulk_wgrad false: the backward reduce-scatter of the input gradient waits for the GEMMs
        // (torchtitan's async TP: torch/_inductor/fx_passes/micro_pipeline_tp.py fuses a reduce-scatter only
        // with the one matmul producing its input, and a Llama block's input gradient is the sum of the
        // wq/wk/wv (w1/w3) dgrads).
        if (ovl && (!bwd || c.tp_comm_bulk_wgrad)) {
          // Starts with the compute (the reduce-scatter of each GEMM chunk follows it).
          if (has_pre) red.deps.push_back(pre);
          par.push_back(rb.push(std::move(red)));
        } else {
          rb.chain(std::move(red));
        }
      }
      if (!par.empty()) rb.chain(wait_op(nm + (bwd ? ".bwd" : "") + ".join"), par);
    };
    // FSDP: per-layer parameter all-gathers (prefetched one layer ahead) and gradient reduce-scatters on
    // the FSDP stream, over the shard group.
    auto fsdp_ag = [&](const std::string& nm, double el) {
      return rb.fork(coll_op(nm, CollOp::AllGather, dp_comm[st], el * 2.0, RankBuilder::kFsdp, "dp"));
    };
    // torch FSDP2 under pipeline parallelism (torchtitan's default reshard_after_forward policy, see
    // gpt_memory_of_stage): each layer is gathered once, in its first forward, and stays gathered.
    const bool fsdp_keep_gathered = c.use_torch_fsdp2 && p > 1;
    auto layer_el = [&](std::int64_t gl) {
      double el = Pl;
      if (gl == 0) el += emb_el;
      if (gl == c.num_layers - 1 && last_stage_has_output(c)) el += out_el;
      return el;
    };
    // MoE layer, forward: router + permute, dispatch (all_to_allv over EP, or all-gather over EP x ETP),
    // [ETP all-gather], experts, [ETP reduce-scatter], combine, unpermute; the shared expert (TP-split, with
    // its SP all-gather / reduce-scatter) after, or beside the dispatch with moe_shared_expert_overlap.
    const bool shared_ovl = c.moe.moe_shared_expert_overlap;
    auto shared_expert = [&](const std::string& nm, const Costs& cost, const std::string& phase) {
      if (cost.kernels == 0) return;
      if (t > 1) rb.chain(coll_op(nm + phase + ".moe.shared.ag", CollOp::AllGather, tp_comm[st], tp_bytes, RankBuilder::kTp, "tp"));
      rb.chain(compute_op(nm + phase + ".moe.shared", cost));
      if (t > 1) rb.chain(coll_op(nm + phase + ".moe.shared.rs", CollOp::ReduceScatter, tp_comm[st], tp_bytes, RankBuilder::kTp, "tp"));
    };
    auto moe_layer = [&](const std::string& nm, const std::string& phase, std::int64_t gl, bool bwd,
                         std::vector<std::uint32_t> extra) {
      const MoeCosts& M = moe_cost[moe_index[gl]];
      const MoeLayerLoad& ld = loads[moe_index[gl]];
      const double rows = ld.max_rank_tokens / double(etp);  // rows this rank receives before the ETP gather
      // Forward order: pre, dispatch, experts, combine, post. Backward: post, combine^T, experts, dispatch^T, pre.
      rb.chain(compute_op(nm + phase + (bwd ? ".moe.unpermute" : ".moe.router"), bwd ? M.post_b : M.pre_f), extra);
      auto exchange = [&](bool first) {
        const bool to_experts = first;  // forward dispatch / backward combine-gradient: tokens to experts
        std::string what = nm + phase + (first ? ".moe.dispatch" : ".moe.combine");
        if (a2a && ep > 1) {
          std::int32_t cm_ = to_experts ? disp_comm[gl] : comb_comm[gl];
          // flex + FP8: the forward dispatch moves FP8 activations with 1x128 block scales (DeepSeek-V3
          // arXiv:2412.19437 Sec. 3.3.2: FP8 dispatch, BF16 combine): (1 + 4/128) / 2 of the BF16 bytes.
          const double scale = (fp8_dispatch && first && !bwd) ? (1.0 + 4.0 / 128.0) / 2.0 : 1.0;
          return rb.fork(coll_op(what, CollOp::AllToAllv, cm_, a2a_bytes * scale, kEp, "ep"));
        }
        if (!a2a && ep * etp > 1)
          return rb.fork(coll_op(what, first ? CollOp::AllGather : CollOp::ReduceScatter, epag_comm[st],
                                 T_local * h * 2.0 * double(ep * etp), kEp, "ep"));
        return rb.fork(wait_op(what));
      };
      std::uint32_t x = exchange(true);
      if (shared_ovl && !bwd) shared_expert(nm, M.shared_f, phase);
      rb.chain(wait_op(nm + phase + ".moe.dispatched"), {x});
      if (a2a && etp > 1)
        rb.chain(coll_op(nm + phase + ".moe.etp.ag", CollOp::AllGather, etp_comm[st], rows * h * 2.0 * double(etp), kEp, "ep"));
      rb.chain(compute_op(nm + phase + ".moe.experts", bwd ? M.experts_b : M.experts_f));
      if (a2a && etp > 1)
        rb.chain(coll_op(nm + phase + ".moe.etp.rs", CollOp::ReduceScatter, etp_comm[st], rows * h * 2.0 * double(etp), kEp, "ep"));
      x = exchange(false);
      if (shared_ovl && bwd) shared_expert(nm, M.shared_b, phase);
      rb.chain(wait_op(nm + phase + ".moe.combined"), {x});
      rb.chain(compute_op(nm + phase + (bwd ? ".moe.router" : ".moe.unpermute"), bwd ? M.pre_b : M.post_f));
      if (!shared_ovl) shared_expert(nm, bwd ? M.shared_b : M.shared_f, phase);
    };
    auto fwd_layer = [&](const std::string& nm, bool recompute, std::vector<std::uint32_t> extra, std::int64_t gl) {
      block(nm + ".attn", nm + (recompute ? ".recompute.attn" : ".fwd.attn"), L.fwd_attn, true, false, extra);
      if (moe_on && moe_pattern[gl]) moe_layer(nm, recompute ? ".recompute" : ".fwd", gl, false, {});
      else block(nm + ".mlp", nm + (recompute ? ".recompute.mlp" : ".fwd.mlp"), L.fwd_mlp, false, false);
    };
    auto recomputed = [&](std::int64_t l, std::int64_t n_chunk) {
      if (!full) return false;
      if (c.recompute_method == "block" && c.recompute_num_layers) return l < std::min(c.recompute_num_layers, n_chunk);
      return true;
    };
    // overlap_moe_expert_parallel_comm: the steps of two consecutive slots of opposite direction (a forward
    // and a backward of different micro-batches, 1F1B's steady state) are interleaved on two chain heads, so
    // each one's dispatch / combine runs while the other computes (Megatron-Core's combined 1F1B schedule
    // with EP A2A overlap). A step appends ops to the head current when it runs. Restricted to no virtual
    // pipeline and no FSDP (checked with the configuration).
    using Step = std::function<void()>;
    auto exchange = [&](const std::string& what, std::int64_t gl, bool first, bool bwd) -> std::uint32_t {
      if (a2a && ep > 1) {
        const double scale = (fp8_dispatch && first && !bwd) ? (1.0 + 4.0 / 128.0) / 2.0 : 1.0;
        return rb.fork(coll_op(what, CollOp::AllToAllv, first ? disp_comm[gl] : comb_comm[gl], a2a_bytes * scale, kEp, "ep"));
      }
      return rb.fork(wait_op(what));
    };
    auto moe_steps = [&](const std::string& nm, const std::string& phase, std::int64_t gl, bool bwd,
                         std::vector<Step>& out, Step before) {
      auto x = std::make_shared<std::uint32_t>(0);
      out.push_back([&, nm, phase, gl, bwd, x, before]() {
        if (before) before();
        const MoeCosts& M = moe_cost[moe_index[gl]];
        rb.chain(compute_op(nm + phase + (bwd ? ".moe.unpermute" : ".moe.router"), bwd ? M.post_b : M.pre_f));
        *x = exchange(nm + phase + ".moe.dispatch", gl, true, bwd);
        if (shared_ovl && !bwd) shared_expert(nm, M.shared_f, phase);
      });
      out.push_back([&, nm, phase, gl, bwd, x]() {
        const MoeCosts& M = moe_cost[moe_index[gl]];
        const double rows = loads[moe_index[gl]].max_rank_tokens / double(etp);
        rb.chain(wait_op(nm + phase + ".moe.dispatched"), {*x});
        if (etp > 1)
          rb.chain(coll_op(nm + phase + ".moe.etp.ag", CollOp::AllGather, etp_comm[st], rows * h * 2.0 * double(etp), kEp, "ep"));
        rb.chain(compute_op(nm + phase + ".moe.experts", bwd ? M.experts_b : M.experts_f));
        if (etp > 1)
          rb.chain(coll_op(nm + phase + ".moe.etp.rs", CollOp::ReduceScatter, etp_comm[st], rows * h * 2.0 * double(etp), kEp, "ep"));
        *x = exchange(nm + phase + ".moe.combine", gl, false, bwd);
        if (shared_ovl && bwd) shared_expert(nm, M.shared_b, phase);
      });
      out.push_back([&, nm, phase, gl, bwd, x]() {
        const MoeCosts& M = moe_cost[moe_index[gl]];
        rb.chain(wait_op(nm + phase + ".moe.combined"), {*x});
        rb.chain(compute_op(nm + phase + (bwd ? ".moe.router" : ".moe.unpermute"), bwd ? M.pre_b : M.post_f));
        if (!shared_ovl) shared_expert(nm, bwd ? M.shared_b : M.shared_f, phase);
      });
    };
    auto fwd_steps = [&](const std::string& nm, bool recompute, std::int64_t gl, std::vector<Step>& out) {
      Step attn = [&, nm, recompute]() {
        block(nm + ".attn", nm + (recompute ? ".recompute.attn" : ".fwd.attn"), L.fwd_attn, true, false);
      };
      if (moe_pattern[gl]) {
        moe_steps(nm, recompute ? ".recompute" : ".fwd", gl, false, out, attn);
      } else {
        out.push_back([&, nm, recompute, attn]() {
          attn();
          block(nm + ".mlp", nm + (recompute ? ".recompute.mlp" : ".fwd.mlp"), L.fwd_mlp, false, false);
        });
      }
    };
    auto slot_steps = [&](const Slot& sl, std::vector<Step>& out) {
      const std::int64_t mb = sl.mb, nl = layout[st][0], base = offset[st];
      const std::string mbs = "mb" + std::to_string(mb);
      if (sl.fwd) {
        out.push_back([&, mb, base, mbs]() {
          if (!first_stage) {
            Op r = pp_op(OpKind::Recv, RankBuilder::kRecvF, mbs + ".recv.fwd", rank_of(st - 1, 0, 0, 0), tag(mb, 0, 0));
            std::uint32_t ri = rb.push(std::move(r));
            rb.chain(wait_op(mbs + ".l" + std::to_string(base) + ".wait"), {ri});
          } else {
            rb.chain(compute_op(mbs + ".embed.fwd", embed_fwd));
          }
        });
        for (std::int64_t l = 0; l < nl; ++l) fwd_steps(mbs + ".l" + std::to_string(base + l), false, base + l, out);
        out.push_back([&, mb, mbs]() {
          if (last_stage) {
            rb.chain(compute_op(mbs + ".logits.fwd", logits_fwd));
            if (mtp.kernels) rb.chain(compute_op(mbs + ".mtp.fwd", mtp));
            return;
          }
          Op snd = pp_op(OpKind::Send, RankBuilder::kSendF, mbs + ".send.fwd", rank_of(st + 1, 0, 0, 0), tag(mb, 0, 0));
          if (c.overlap_p2p_comm) {
            snd.deps.push_back(rb.last());
            rb.push(std::move(snd));
          } else {
            rb.chain(std::move(snd));
          }
        });
      } else {
        out.push_back([&, mb, mbs]() {
          if (!last_stage) {
            Op r = pp_op(OpKind::Recv, RankBuilder::kRecvB, mbs + ".recv.bwd", rank_of(st + 1, 0, 0, 0), tag(mb, 0, 1));
            std::uint32_t ri = rb.push(std::move(r));
            rb.chain(wait_op(mbs + ".bwd.wait"), {ri});
          } else {
            if (mtp_b.kernels) rb.chain(compute_op(mbs + ".mtp.bwd", mtp_b));
            rb.chain(compute_op(mbs + ".logits.bwd", logits_bwd));
          }
        });
        for (std::int64_t l = nl - 1; l >= 0; --l) {
          const std::int64_t gl = base + l;
          const std::string nm = mbs + ".l" + std::to_string(gl);
          if (recomputed(l, nl)) fwd_steps(nm, true, gl, out);
          Costs ba = L.bwd_attn;
          if (selective) ba += L.recompute_attn_extra;
          if (moe_pattern[gl]) {
            moe_steps(nm, ".bwd", gl, true, out, {});
            out.push_back([&, nm, ba, l]() {
              block(nm + ".attn", nm + ".bwd.attn", ba, true, true);
              final_bwd[0][l] = rb.last();
            });
          } else {
            out.push_back([&, nm, ba, l]() {
              block(nm + ".mlp", nm + ".bwd.mlp", L.bwd_mlp, false, true);
              block(nm + ".attn", nm + ".bwd.attn", ba, true, true);
              final_bwd[0][l] = rb.last();
            });
          }
        }
        out.push_back([&, mb, mbs]() {
          if (first_stage) {
            rb.chain(compute_op(mbs + ".embed.bwd", embed_bwd));
            final_embed_bwd = rb.last();
            return;
          }
          Op snd = pp_op(OpKind::Send, RankBuilder::kSendB, mbs + ".send.bwd", rank_of(st - 1, 0, 0, 0), tag(mb, 0, 1));
          if (c.overlap_p2p_comm) {
            snd.deps.push_back(rb.last());
            rb.push(std::move(snd));
          } else {
            rb.chain(std::move(snd));
          }
        });
      }
    };
    const bool a2a_ovl = moe_on && c.moe.overlap_moe_expert_parallel_comm;
    for (std::size_t si = 0; si < order.size(); ++si) {
      const Slot& sl = order[si];
      // Pairs: (forward, backward) of different micro-batches; (backward, forward) only on the first stage,
      // whose forward waits for no pipeline message (elsewhere that forward's input needs this backward's
      // gradient to have gone upstream first: the pair would deadlock).
      const bool pairable = a2a_ovl && si + 1 < order.size() && order[si + 1].fwd != sl.fwd &&
                            order[si + 1].mb != sl.mb && (sl.fwd || first_stage);
      if (pairable) {
        std::vector<Step> sa, sb;
        slot_steps(sl, sa);
        slot_steps(order[si + 1], sb);
        auto ha = rb.head(), hb = rb.head();
        // The first slot's prologue and first layer step go first (so a backward's wait for its gradient
        // does not hold the forward's first layer), then one step of each in turn.
        std::size_t i = 0, j = 0;
        for (; i < std::min<std::size_t>(2, sa.size()); ++i) rb.set_head(ha), sa[i](), ha = rb.head();
        while (i < sa.size() || j < sb.size()) {
          if (j < sb.size()) rb.set_head(hb), sb[j++](), hb = rb.head();
          if (i < sa.size()) rb.set_head(ha), sa[i++](), ha = rb.head();
        }
        rb.set_head(ha);
        rb.chain(wait_op("mb" + std::to_string(sl.mb) + "+mb" + std::to_string(order[si + 1].mb) + ".a2a_overlap.join"),
                 {hb.first});
        ++si;
        continue;
      }
      const std::int64_t mb = sl.mb, ch = sl.chunk, nl = layout[st][ch], base = offset[ch * p + st];
      const bool first_chunk = first_stage && ch == 0, last_chunk = last_stage && ch == v - 1;
      const std::string mbs = "mb" + std::to_string(mb) + (v > 1 ? ".c" + std::to_string(ch) : "");
      if (sl.fwd) {
        if (!first_chunk) {
          Op r = pp_op(OpKind::Recv, RankBuilder::kRecvF, mbs + ".recv.fwd", rank_of(st == 0 ? p - 1 : st - 1, 0, 0, 0), tag(mb, ch, 0));
          std::uint32_t ri = rb.push(std::move(r));
          rb.chain(wait_op(mbs + ".l" + std::to_string(base) + ".wait"), {ri});
        }
        std::uint32_t fsdp_next = 0;
        const bool gather = c.fsdp() && (!fsdp_keep_gathered || mb == 0);
        if (gather) fsdp_next = fsdp_ag(mbs + ".l" + std::to_string(base) + ".fsdp.ag", layer_el(base));
        if (first_chunk) rb.chain(compute_op(mbs + ".embed.fwd", embed_fwd), gather ? std::vector<std::uint32_t>{fsdp_next} : std::vector<std::uint32_t>{});
        for (std::int64_t l = 0; l < nl; ++l) {
          const std::int64_t gl = base + l;
          std::string nm = mbs + ".l" + std::to_string(gl);
          std::vector<std::uint32_t> extra;
          if (gather) {
            extra.push_back(fsdp_next);
            if (l + 1 < nl) fsdp_next = fsdp_ag(mbs + ".l" + std::to_string(gl + 1) + ".fsdp.ag", layer_el(gl + 1));
          }
          if (c.overlap_param_gather && dist_opt_sharded && mb == 0 && !early_ag.empty())
            extra.push_back(early_ag[static_cast<std::size_t>(bucket_of[ch][l])]);
          fwd_layer(nm, false, extra, gl);
        }
        if (last_chunk) rb.chain(compute_op(mbs + ".logits.fwd", logits_fwd));
        if (last_chunk && mtp.kernels) rb.chain(compute_op(mbs + ".mtp.fwd", mtp));
        if (!last_chunk) {
          Op snd = pp_op(OpKind::Send, RankBuilder::kSendF, mbs + ".send.fwd", rank_of(st == p - 1 ? 0 : st + 1, 0, 0, 0), tag(mb, st == p - 1 ? ch + 1 : ch, 0));
          if (c.overlap_p2p_comm) {
            snd.deps.push_back(rb.last());
            rb.push(std::move(snd));
          } else {
            rb.chain(std::move(snd));  // Megatron waits for its p2p requests before computing on
          }
        }
      } else {
        if (!last_chunk) {
          Op r = pp_op(OpKind::Recv, RankBuilder::kRecvB, mbs + ".recv.bwd", rank_of(st == p - 1 ? 0 : st + 1, 0, 0, 0), tag(mb, ch, 1));
          std::uint32_t ri = rb.push(std::move(r));
          rb.chain(wait_op(mbs + ".bwd.wait"), {ri});
        } else {
          if (mtp_b.kernels) rb.chain(compute_op(mbs + ".mtp.bwd", mtp_b));
          rb.chain(compute_op(mbs + ".logits.bwd", logits_bwd));
        }
        std::uint32_t fsdp_next = 0;
        const bool gather = c.fsdp() && !fsdp_keep_gathered;
        if (gather && nl > 0)
          fsdp_next = fsdp_ag(mbs + ".l" + std::to_string(base + nl - 1) + ".bwd.fsdp.ag", layer_el(base + nl - 1));
        for (std::int64_t l = nl - 1; l >= 0; --l) {
          const std::int64_t gl = base + l;
          std::string nm = mbs + ".l" + std::to_string(gl);
          std::vector<std::uint32_t> extra;
          if (gather) {
            extra.push_back(fsdp_next);
            if (l > 0) fsdp_next = fsdp_ag(mbs + ".l" + std::to_string(gl - 1) + ".bwd.fsdp.ag", layer_el(gl - 1));
          }
          if (recomputed(l, nl)) fwd_layer(nm, true, extra, gl), extra.clear();
          Costs ba = L.bwd_attn;
          if (selective) ba += L.recompute_attn_extra;
          if (moe_on && moe_pattern[gl]) moe_layer(nm, ".bwd", gl, true, extra);
          else block(nm + ".mlp", nm + ".bwd.mlp", L.bwd_mlp, false, true, extra);
          block(nm + ".attn", nm + ".bwd.attn", ba, true, true);
          final_bwd[ch][l] = rb.last();
          if (c.fsdp() && (!fsdp_keep_gathered || mb == m - 1)) {
            // Gradient reduce-scatter of this layer (every micro-batch, as FSDP2 without no_sync; with
            // pipeline parallelism torch FSDP2 reduces once, after the last micro-batch).
            rb.fork(coll_op(nm + ".fsdp.rs", CollOp::ReduceScatter, dp_comm[st], layer_el(gl) * grad_elem_bytes,
                            RankBuilder::kFsdp, "dp"));
          }
        }
        if (first_chunk) {
          rb.chain(compute_op(mbs + ".embed.bwd", embed_bwd));
          final_embed_bwd = rb.last();
        }
        if (!first_chunk) {
          Op snd = pp_op(OpKind::Send, RankBuilder::kSendB, mbs + ".send.bwd", rank_of(st == 0 ? p - 1 : st - 1, 0, 0, 0), tag(mb, st == 0 ? ch - 1 : ch, 1));
          if (c.overlap_p2p_comm) {
            snd.deps.push_back(rb.last());
            rb.push(std::move(snd));
          } else {
            rb.chain(std::move(snd));
          }
        }
      }
    }
    const std::uint32_t backward_done = rb.last();
    // Expert gradients: reduced over the expert data-parallel group (reduce-scatter with a sharded
    // optimizer, else all-reduce) after the backward; the optimizer step waits for it.
    std::vector<std::uint32_t> expert_grad_done;
    double stage_expert_params = 0;
    if (moe_on) {
      for (std::int64_t ch = 0; ch < v; ++ch)
        for (std::int64_t l = 0; l < layout[st][ch]; ++l)
          if (moe_pattern[offset[ch * p + st] + l]) stage_expert_params += expert_params_per_gpu(c);
      if (edp > 1 && stage_expert_params > 0) {
        const bool sh = c.use_distributed_optimizer || c.data_parallel_sharding_strategy != "no_shard" || c.fsdp();
        Op op = coll_op(sh ? "edp.experts.rs" : "edp.experts.ar", sh ? CollOp::ReduceScatter : CollOp::AllReduce,
                        edp_comm[st], stage_expert_params * grad_elem_bytes, RankBuilder::kDp, "dp");
        op.deps.push_back(backward_done);
        expert_grad_done.push_back(rb.push(std::move(op)));
      }
    }
    // Gradient synchronisation: buckets of `bucket_size` elements in backward order (last layer first).
    std::vector<std::pair<std::uint32_t, double>> grad_buckets;  // (ready op, elements)
    {
      double acc = 0;
      std::uint32_t ready = 0;
      std::vector<std::pair<std::uint32_t, double>> items;  // in the order gradients become ready
      if (last_stage && last_stage_has_output(c)) {
        // Output layer: its gradient is ready with the last layer's backward (SC'21 ordering kept).
        std::uint32_t at = layout[st][v - 1] ? final_bwd[v - 1][layout[st][v - 1] - 1] : backward_done;
        items.push_back({at, out_el});
      }
      for (std::int64_t ch = v - 1; ch >= 0; --ch)
        for (std::int64_t l = layout[st][ch] - 1; l >= 0; --l) items.push_back({final_bwd[ch][l], Pl});
      if (first_stage) items.push_back({final_embed_bwd, emb_el});
      std::stable_sort(items.begin(), items.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      for (const auto& [op, el] : items) {
        acc += el;
        ready = op;
        if (acc >= double(c.bucket_size)) {
          grad_buckets.push_back({ready, acc});
          acc = 0;
        }
      }
      if (acc > 0) grad_buckets.push_back({ready, acc});
    }
    std::vector<std::uint32_t> grad_done;
    double local_params = 0;
    for (const auto& bk : grad_buckets) local_params += bk.second;
    const bool shard_opt = c.use_distributed_optimizer || c.data_parallel_sharding_strategy != "no_shard";
    if (dp * cp > 1 && !c.fsdp()) {
      for (std::size_t k = 0; k < grad_buckets.size(); ++k) {
        Op op = coll_op("dp.bucket" + std::to_string(k) + (shard_opt ? ".rs" : ".ar"),
                        shard_opt ? CollOp::ReduceScatter : CollOp::AllReduce, dp_comm[st],
                        grad_buckets[k].second * grad_elem_bytes, RankBuilder::kDp, "dp");
        op.deps.push_back(c.overlap_grad_reduce ? grad_buckets[k].first : backward_done);
        grad_done.push_back(rb.push(std::move(op)));
      }
    }
    if (R > 1) {
      // HSDP: the gradient shards are all-reduced across the replica groups.
      Op op = coll_op("dp.replica.ar", CollOp::AllReduce, rep_comm[st], local_params / double(shard_n) * grad_elem_bytes,
                      RankBuilder::kDp, "dp");
      op.deps = grad_done.empty() ? std::vector<std::uint32_t>{backward_done} : grad_done;
      grad_done = {rb.push(std::move(op))};
    }
    if (emb_comm >= 0 && (first_stage || last_stage)) {
      Op op = coll_op("embedding.grad.ar", CollOp::AllReduce, emb_comm, V * h / double(t) * grad_elem_bytes,
                      RankBuilder::kDp, "dp");
      op.deps.push_back(backward_done);
      grad_done.push_back(rb.push(std::move(op)));
    }
    // Optimizer step: Adam on this rank's (shard of) parameters, memory bound. Bytes per parameter: read
    // gradient (2), fp32 master weight, momentum, variance (12), write them back (12) and the 2-byte model
    // weight (2), plus the gradient-norm / unscale passes reading the gradient twice more (4) = 32 bytes.
    double shard = (shard_opt || c.fsdp()) ? local_params / double(shard_n) : local_params;
    shard += (shard_opt || c.fsdp()) ? stage_expert_params / double(edp) : stage_expert_params;
    for (auto d : expert_grad_done) grad_done.push_back(d);
    Costs opt;
    if (legacy) opt.add(cm, Kernel{OpClass::Elementwise, 0, 32.0 * shard});
    else opt.add(cm, KernelDesc::memory(models::MemoryKernel::Optimizer, 32.0 * shard, Precision::FP32));
    if (c.fsdp()) {
      // The optimizer waits for the last reduce-scatter: a zero-length join on the FSDP stream.
      Op j = wait_op("fsdp.rs.done");
      j.stream = RankBuilder::kFsdp;
      grad_done.push_back(rb.fork(std::move(j)));
    }
    Op optop = compute_op("optimizer.step", opt);
    rb.chain(std::move(optop), grad_done);
    if (moe_on && edp > 1 && stage_expert_params > 0 && c.use_distributed_optimizer && !c.fsdp()) {
      Op op = coll_op("edp.experts.ag", CollOp::AllGather, edp_comm[st], stage_expert_params * 2.0, RankBuilder::kDp, "dp");
      op.deps.push_back(rb.last());
      rb.push(std::move(op));
    }
    if (dist_opt_sharded && !c.overlap_param_gather) {
      for (std::size_t k = 0; k < grad_buckets.size(); ++k) {
        Op op = coll_op("dp.bucket" + std::to_string(k) + ".ag", CollOp::AllGather, dp_comm[st],
                        grad_buckets[k].second * 2.0, RankBuilder::kDp, "dp");
        op.deps.push_back(rb.last());
        rb.push(std::move(op));
      }
    }
    tr.ranks.push_back(std::move(rt));
  }
  tr.metadata["samples_per_iteration"] = double(c.global_batch_size);
  tr.metadata["tokens_per_iteration"] = double(c.global_batch_size) * double(c.seq_length);
  tr.metadata["model_flops_per_iteration"] = gpt_model_flops(c);
  tr.metadata["model_parameters"] = gpt_num_parameters(c);
  tr.metadata["micro_batches"] = double(m);
  tr.metadata["peak_dense_flops_per_gpu"] = gpu.peak_flops(c.fp8() ? Precision::FP8 : c.precision == "bf16" ? Precision::BF16 : Precision::FP16);
  tr.metadata["memory_per_gpu_bytes.max"] = mem.total_bytes();
  tr.metadata["memory_per_gpu_bytes.weights_grads_optimizer"] = mem.params_bytes();
  tr.metadata["memory_per_gpu_bytes.weights"] = mem.weights_bytes;
  tr.metadata["memory_per_gpu_bytes.gradients"] = mem.grads_bytes;
  tr.metadata["memory_per_gpu_bytes.optimizer"] = mem.optimizer_bytes;
  tr.metadata["memory_per_gpu_bytes.activations"] = mem.activations_bytes;
  if (moe_on) {
    // Imbalance: per MoE layer the busiest expert-parallel rank's tokens over the mean, and the expert
    // compute time it costs (busiest minus evenly spread, forward + backward (+ recompute), all micro-
    // batches) on the most loaded pipeline stage.
    double mx = 0, mean = 0, ratio = 0, dropped = 0, lost_max = 0, a2a_ratio = 0;
    std::vector<double> lost(p, 0.0);
    for (std::int64_t gl = 0; gl < c.num_layers; ++gl) {
      if (!moe_pattern[gl]) continue;
      const auto& ld = loads[moe_index[gl]];
      const auto& M = moe_cost[moe_index[gl]];
      mx = std::max(mx, ld.max_rank_tokens), mean += ld.mean_rank_tokens;
      ratio = std::max(ratio, ld.mean_rank_tokens > 0 ? ld.max_rank_tokens / ld.mean_rank_tokens : 1.0);
      dropped += ld.dropped_fraction;
      for (double r : ld.recv_share) a2a_ratio = std::max(a2a_ratio, r * double(ep));
      const double df = M.experts_f.seconds - M.experts_f_mean.seconds, db = M.experts_b.seconds - M.experts_b_mean.seconds;
      for (std::int64_t st = 0; st < p; ++st)
        for (std::int64_t ch = 0; ch < v; ++ch) {
          const std::int64_t first = offset[ch * p + st], nl = layout[st][ch], l = gl - first;
          if (l < 0 || l >= nl) continue;
          // Recomputed layers run the forward (and its experts) twice (full recompute; block: the first N).
          const bool re = full && !(c.recompute_method == "block" && c.recompute_num_layers &&
                                    l >= std::min(c.recompute_num_layers, nl));
          lost[st] += (df * (re ? 2.0 : 1.0) + db) * double(m);
        }
    }
    for (double x : lost) lost_max = std::max(lost_max, x);
    tr.metadata["moe.tokens_per_rank.max"] = mx;
    tr.metadata["moe.tokens_per_rank.mean"] = mean / double(n_moe);
    tr.metadata["moe.tokens_per_rank.max_over_mean"] = ratio;
    tr.metadata["moe.dropped_token_fraction"] = dropped / double(n_moe);
    // Bytes the busiest EP rank receives in a dispatch over the mean (worst layer): the factor by which a
    // receiver-bound all-to-all is slower than with a uniform router.
    tr.metadata["moe.all_to_all_max_over_mean_bytes"] = a2a_ratio;
    tr.metadata["moe.imbalance_compute_s"] = lost_max;
    tr.notes.push_back("gpt/moe: " + std::to_string(n_moe) + " MoE layers, EP " + std::to_string(ep) + " x ETP " +
                       std::to_string(etp) + " x EDP " + std::to_string(edp) + ", dispatcher " +
                       c.moe.moe_token_dispatcher_type + ", load " + c.moe.moe_load +
                       "; each layer's dispatch/combine is an all_to_allv with the routing's per-destination bytes; "
                       "expert compute priced for the busiest EP rank of each layer (the simulated rank stands in "
                       "for it)");
  }
  tr.notes.push_back("gpt: simulated one rank per pipeline stage (" + std::to_string(p) + " of " +
                     std::to_string(c.world_size) + " GPUs: data-parallel replica 0, context rank 0, tensor rank 0); its " +
                     std::to_string(t - 1) + " tensor-parallel peers, " + std::to_string(cp - 1) +
                     " context-parallel peers and the other " + std::to_string(dp - 1) +
                     " data-parallel replicas are symmetric stand-ins");
  tr.notes.push_back("gpt: tensor-parallel collectives priced over the real TP group; data-parallel collectives "
                     "over the full DP group of " + std::to_string(dp * cp / R) + " ranks with " + std::to_string(dp_mirrors) +
                     " concurrent co-located DP groups (mirrors)");
  tr.notes.push_back("gpt: model FLOPs (tflops_per_gpu) counted with the " + c.flops_convention +
                     " convention (docs/workloads.md); MFU = tflops_per_gpu / peak_dense_flops_per_gpu (" +
                     c.precision + ")");
  tr.notes.push_back("gpt: compute kernel durations from the compute model at generation time (GPU " + gpu.name +
                     ", attention " + c.attention_backend + ")");
  return tr;
}

}  // namespace fabricsim::workloads
