#include "workloads/gpt.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "models/gpu.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "workloads/gpt_models.hpp"

namespace fabricsim::workloads {

using models::KernelDesc;
using models::OpClass;
using models::Precision;

namespace {

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

double gpt_model_flops(const GptConfig& c) {
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
double layer_params_per_rank(const GptConfig& c) {
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
double layer_activation_bytes(const GptConfig& c, bool drop_scores) {
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
  double mlp = (2.0 * h + gemm_in * h + mask) * rep + 2.0 * fc1 / t + gemm_in * f / t;
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
  const double Pl = layer_params_per_rank(c);
  double P = double(layers) * Pl;
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
  // Activations: in-flight micro-batches of this stage (1F1B: p - st; interleaved: Megatron's warm-up
  // count (p - st - 1) * 2 + (v - 1) p, + 1, in chunk units) times the stored bytes per layer.
  const double m = double(c.global_batch_size / (c.micro_batch_size * c.data_parallel()));
  const double full = layer_activation_bytes(c, false);
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
    per_chunk_mb = lpc * layer_activation_bytes(c, c.recompute_granularity == "selective");
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
  L.fwd_attn.add(cm, mem(MemoryKernel::Norm, norm));
  fwd_gemm(L.fwd_attn, qkv);
  if (rope > 0) L.fwd_attn.add(cm, mem(MemoryKernel::Elementwise, rope));
  L.fwd_attn.add(cm, fa);
  fwd_gemm(L.fwd_attn, proj);
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
  bwd_gemm(L.bwd_attn, proj);
  L.bwd_attn.add(cm, fa_b);
  if (rope > 0) L.bwd_attn.add(cm, mem(MemoryKernel::Elementwise, rope));
  bwd_gemm(L.bwd_attn, qkv);
  L.bwd_attn.add(cm, mem(MemoryKernel::Norm, 2.0 * norm));
  if (c.selective_ac_option == "op") {
    // torchtitan's per-op selective checkpointing (layer_activation_bytes_op_sac): the SDPA output is
    // saved, so attention is not recomputed; the backward recomputes what was not saved -- the two norms,
    // RoPE, the 2nd, 4th and 6th matmuls in forward order (wk, wo, w3 of a Llama block) and the SwiGLU
    // product -- before the layer's backward.
    L.recompute_attn_extra.add(cm, mem(MemoryKernel::Norm, norm));
    fwd_gemm(L.recompute_attn_extra, G{h, g_t * d});
    if (rope > 0) L.recompute_attn_extra.add(cm, mem(MemoryKernel::Elementwise, rope));
    fwd_gemm(L.recompute_attn_extra, proj);
    L.recompute_attn_extra.add(cm, mem(MemoryKernel::Elementwise, resid));
    L.bwd_mlp.add(cm, mem(MemoryKernel::Norm, norm));
    fwd_gemm(L.bwd_mlp, G{h, f / t});
    L.bwd_mlp.add(cm, mem(MemoryKernel::Elementwise, actv));
  } else {
    // Selective recompute (Megatron-Core "core_attn"): the attention forward again before its backward.
    L.recompute_attn_extra.add(cm, fa);
  }
  return L;
}

std::int64_t to_ns(double s) { return static_cast<std::int64_t>(std::llround(s * 1e9)); }

class RankBuilder {
 public:
  RankBuilder(RankTrace& rt) : rt_(rt) {
    rt_.streams = {"compute", "comm.tp", "pp.recv.fwd", "pp.recv.bwd", "pp.send.fwd", "pp.send.bwd", "comm.dp"};
  }
  enum Stream : std::uint16_t { kCompute = 0, kTp = 1, kRecvF = 2, kRecvB = 3, kSendF = 4, kSendB = 5, kDp = 6, kCp = 7, kFsdp = 8 };
  void add_stream(const char* name) { rt_.streams.push_back(name); }

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
  std::vector<std::int32_t> tp_comm(p), dp_comm(p), cp_comm(p, -1), rep_comm(p, -1);
  for (std::int64_t st = 0; st < p; ++st) {
    Communicator tc;
    tc.name = "tp.stage" + std::to_string(st);
    for (std::int64_t k = 0; k < t; ++k) tc.ranks.push_back(rank_of(st, 0, 0, k));
    tc.category = "tp";
    tp_comm[st] = static_cast<std::int32_t>(tr.comms.size());
    tr.comms.push_back(std::move(tc));
    Communicator dc;
    dc.name = "dp.stage" + std::to_string(st);
    for (std::int64_t d = 0; d < dp; ++d)
      for (std::int64_t k = 0; k < cp; ++k)
        if (d * cp + k < shard_n) dc.ranks.push_back(rank_of(st, d, k, 0));
    dc.category = "dp";
    dc.mirrors = static_cast<std::int32_t>(dp_mirrors);
    dp_comm[st] = static_cast<std::int32_t>(tr.comms.size());
    tr.comms.push_back(std::move(dc));
    if (cp > 1) {
      Communicator cc;
      cc.name = "cp.stage" + std::to_string(st);
      for (std::int64_t k = 0; k < cp; ++k) cc.ranks.push_back(rank_of(st, 0, k, 0));
      cc.category = "cp";
      cc.mirrors = static_cast<std::int32_t>(dp_mirrors);
      cp_comm[st] = static_cast<std::int32_t>(tr.comms.size());
      tr.comms.push_back(std::move(cc));
    }
    if (R > 1) {
      Communicator rc;
      rc.name = "dp.replica.stage" + std::to_string(st);
      for (std::int64_t r = 0; r < R; ++r) {
        const std::int64_t i = r * shard_n;
        rc.ranks.push_back(rank_of(st, i / cp, i % cp, 0));
      }
      rc.category = "dp";
      rc.mirrors = static_cast<std::int32_t>(dp_mirrors);
      rep_comm[st] = static_cast<std::int32_t>(tr.comms.size());
      tr.comms.push_back(std::move(rc));
    }
  }
  std::int32_t emb_comm = -1;
  if (p > 1 && !c.untie_embeddings_and_output_weights) {
    Communicator ec;
    ec.name = "embedding";
    ec.ranks = {rank_of(0, 0, 0, 0), rank_of(p - 1, 0, 0, 0)};
    ec.category = "dp";
    emb_comm = static_cast<std::int32_t>(tr.comms.size());
    tr.comms.push_back(std::move(ec));
  }
  const double grad_elem_bytes = c.grad_reduce_in_fp32 ? 4.0 : 2.0;
  // Pipeline sends use the scatter/gather optimisation (each TP rank sends 1/t of the activation; Narayanan
  // et al. SC'21 Sec. 4.1), on by default in Megatron-LM.
  const double pp_bytes = act_bytes / double(t);
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
    auto fwd_layer = [&](const std::string& nm, bool recompute, std::vector<std::uint32_t> extra) {
      block(nm + ".attn", nm + (recompute ? ".recompute.attn" : ".fwd.attn"), L.fwd_attn, true, false, extra);
      block(nm + ".mlp", nm + (recompute ? ".recompute.mlp" : ".fwd.mlp"), L.fwd_mlp, false, false);
    };
    auto recomputed = [&](std::int64_t l, std::int64_t n_chunk) {
      if (!full) return false;
      if (c.recompute_method == "block" && c.recompute_num_layers) return l < std::min(c.recompute_num_layers, n_chunk);
      return true;
    };
    for (const Slot& sl : order) {
      const std::int64_t mb = sl.mb, ch = sl.chunk, nl = layout[st][ch], base = offset[ch * p + st];
      const bool first_chunk = first_stage && ch == 0, last_chunk = last_stage && ch == v - 1;
      const std::string mbs = "mb" + std::to_string(mb) + (v > 1 ? ".c" + std::to_string(ch) : "");
      if (sl.fwd) {
        if (!first_chunk) {
          Op r;
          r.kind = OpKind::Recv;
          r.stream = RankBuilder::kRecvF;
          r.name = mbs + ".recv.fwd";
          r.category = "pp";
          r.peer = rank_of(st == 0 ? p - 1 : st - 1, 0, 0, 0);
          r.tag = tag(mb, ch, 0);
          r.bytes = pp_bytes;
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
          fwd_layer(nm, false, extra);
        }
        if (last_chunk) rb.chain(compute_op(mbs + ".logits.fwd", logits_fwd));
        if (!last_chunk) {
          Op snd;
          snd.kind = OpKind::Send;
          snd.stream = RankBuilder::kSendF;
          snd.name = mbs + ".send.fwd";
          snd.category = "pp";
          snd.peer = rank_of(st == p - 1 ? 0 : st + 1, 0, 0, 0);
          snd.tag = tag(mb, st == p - 1 ? ch + 1 : ch, 0);
          snd.bytes = pp_bytes;
          if (c.overlap_p2p_comm) {
            snd.deps.push_back(rb.last());
            rb.push(std::move(snd));
          } else {
            rb.chain(std::move(snd));  // Megatron waits for its p2p requests before computing on
          }
        }
      } else {
        if (!last_chunk) {
          Op r;
          r.kind = OpKind::Recv;
          r.stream = RankBuilder::kRecvB;
          r.name = mbs + ".recv.bwd";
          r.category = "pp";
          r.peer = rank_of(st == p - 1 ? 0 : st + 1, 0, 0, 0);
          r.tag = tag(mb, ch, 1);
          r.bytes = pp_bytes;
          std::uint32_t ri = rb.push(std::move(r));
          rb.chain(wait_op(mbs + ".bwd.wait"), {ri});
        } else {
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
          if (recomputed(l, nl)) fwd_layer(nm, true, extra), extra.clear();
          Costs ba = L.bwd_attn;
          if (selective) ba += L.recompute_attn_extra;
          block(nm + ".mlp", nm + ".bwd.mlp", L.bwd_mlp, false, true, extra);
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
          Op snd;
          snd.kind = OpKind::Send;
          snd.stream = RankBuilder::kSendB;
          snd.name = mbs + ".send.bwd";
          snd.category = "pp";
          snd.peer = rank_of(st == 0 ? p - 1 : st - 1, 0, 0, 0);
          snd.tag = tag(mb, st == 0 ? ch - 1 : ch, 1);
          snd.bytes = pp_bytes;
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
    const double shard = (shard_opt || c.fsdp()) ? local_params / double(shard_n) : local_params;
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
