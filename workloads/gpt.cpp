#include "workloads/gpt.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "models/gpu.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace fabricsim::workloads {

using models::OpClass;

GptConfig gpt_config_from_params(const ParamMap& p, const std::string& where) {
  ParamReader r(p, where);
  GptConfig c;
  c.num_layers = r.integer("num_layers", c.num_layers, 1);
  c.hidden_size = r.integer("hidden_size", c.hidden_size, 1);
  c.num_attention_heads = r.integer("num_attention_heads", c.num_attention_heads, 1);
  c.ffn_hidden_size = r.integer("ffn_hidden_size", 0, 0);
  c.seq_length = r.integer("seq_length", c.seq_length, 1);
  c.padded_vocab_size = r.integer("padded_vocab_size", c.padded_vocab_size, 1);
  c.micro_batch_size = r.integer("micro_batch_size", c.micro_batch_size, 1);
  c.global_batch_size = r.integer("global_batch_size", c.global_batch_size, 1);
  c.tensor_model_parallel_size = r.integer("tensor_model_parallel_size", c.tensor_model_parallel_size, 1);
  c.pipeline_model_parallel_size = r.integer("pipeline_model_parallel_size", c.pipeline_model_parallel_size, 1);
  c.num_layers_per_virtual_pipeline_stage = r.integer("num_layers_per_virtual_pipeline_stage", 0, 0);
  c.world_size = r.integer("world_size", c.world_size, 1);
  c.sequence_parallel = r.boolean("sequence_parallel", false);
  c.recompute_granularity = r.string("recompute_granularity", c.recompute_granularity);
  c.use_distributed_optimizer = r.boolean("use_distributed_optimizer", false);
  c.overlap_grad_reduce = r.boolean("overlap_grad_reduce", false);
  c.bucket_size = r.integer("bucket_size", c.bucket_size, 1);
  c.grad_reduce_in_fp32 = r.boolean("grad_reduce_in_fp32", false);
  c.overlap_p2p_comm = r.boolean("overlap_p2p_comm", false);
  c.gpu = r.string("gpu", c.gpu);
  c.precision = r.string("precision", c.precision);
  c.gpus_per_host = r.integer("gpus_per_host", c.gpus_per_host, 1);
  r.finish();
  auto fail = [&](const std::string& k, const std::string& w) { r.fail(k, w); };
  if (c.recompute_granularity != "full" && c.recompute_granularity != "selective" && c.recompute_granularity != "none")
    fail("recompute_granularity", "expected full, selective or none");
  if (c.precision != "fp16" && c.precision != "bf16") fail("precision", "expected fp16 or bf16");
  models::gpu_spec(c.gpu, where + " gpu");
  const auto t = c.tensor_model_parallel_size, pp = c.pipeline_model_parallel_size;
  if (c.world_size % (t * pp) != 0)
    fail("tensor_model_parallel_size", "tensor (" + std::to_string(t) + ") x pipeline (" + std::to_string(pp) +
                                           ") parallel size must divide world_size " + std::to_string(c.world_size));
  if (c.num_attention_heads % t) fail("tensor_model_parallel_size", "must divide num_attention_heads (" + std::to_string(c.num_attention_heads) + ")");
  if (c.hidden_size % c.num_attention_heads) fail("hidden_size", "must be a multiple of num_attention_heads");
  if (c.padded_vocab_size % t) fail("padded_vocab_size", "must be a multiple of tensor_model_parallel_size");
  if (c.num_layers % pp) fail("num_layers", "must be a multiple of pipeline_model_parallel_size (" + std::to_string(pp) + ")");
  const auto dp = c.data_parallel();
  if (c.global_batch_size % (c.micro_batch_size * dp))
    fail("global_batch_size", "must be a multiple of micro_batch_size x data-parallel size (" +
                                  std::to_string(c.micro_batch_size) + " x " + std::to_string(dp) + ")");
  if (c.num_layers_per_virtual_pipeline_stage) {
    if (pp < 2) fail("num_layers_per_virtual_pipeline_stage", "needs pipeline_model_parallel_size > 1");
    if ((c.num_layers / pp) % c.num_layers_per_virtual_pipeline_stage)
      fail("num_layers_per_virtual_pipeline_stage", "must divide the layers per pipeline stage (" + std::to_string(c.num_layers / pp) + ")");
    std::int64_t m = c.global_batch_size / (c.micro_batch_size * dp);
    if (m % pp)
      fail("global_batch_size", "the interleaved schedule needs the number of micro-batches (" + std::to_string(m) +
                                    ") to be a multiple of pipeline_model_parallel_size");
  }
  if (c.sequence_parallel && t == 1) c.sequence_parallel = false;  // Megatron turns it off for TP=1
  return c;
}

ParamMap gpt_config_to_params(const GptConfig& c) {
  ParamMap m;
  auto I = [&](const char* k, std::int64_t v) { m[k] = std::to_string(v); };
  I("num_layers", c.num_layers);
  I("hidden_size", c.hidden_size);
  I("num_attention_heads", c.num_attention_heads);
  I("ffn_hidden_size", c.ffn());
  I("seq_length", c.seq_length);
  I("padded_vocab_size", c.padded_vocab_size);
  I("micro_batch_size", c.micro_batch_size);
  I("global_batch_size", c.global_batch_size);
  I("tensor_model_parallel_size", c.tensor_model_parallel_size);
  I("pipeline_model_parallel_size", c.pipeline_model_parallel_size);
  I("num_layers_per_virtual_pipeline_stage", c.num_layers_per_virtual_pipeline_stage);
  I("world_size", c.world_size);
  I("data_parallel_size", c.data_parallel());
  m["sequence_parallel"] = c.sequence_parallel ? "true" : "false";
  m["recompute_granularity"] = c.recompute_granularity;
  m["use_distributed_optimizer"] = c.use_distributed_optimizer ? "true" : "false";
  m["overlap_grad_reduce"] = c.overlap_grad_reduce ? "true" : "false";
  m["overlap_p2p_comm"] = c.overlap_p2p_comm ? "true" : "false";
  I("bucket_size", c.bucket_size);
  m["gpu"] = c.gpu;
  m["precision"] = c.precision;
  return m;
}

double gpt_model_flops(const GptConfig& c) {
  const double B = double(c.global_batch_size), s = double(c.seq_length), l = double(c.num_layers),
               h = double(c.hidden_size), V = double(c.padded_vocab_size);
  const double k = c.recompute_granularity == "full" ? 96.0 : 72.0;
  return k * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double gpt_num_parameters(const GptConfig& c) {
  const double l = double(c.num_layers), h = double(c.hidden_size), V = double(c.padded_vocab_size),
               s = double(c.seq_length);
  return 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (V + s) / (12.0 * l * h));
}

namespace {

// Parameter elements of one transformer layer held by one TP rank.
double layer_params_per_rank(const GptConfig& c) {
  const double h = double(c.hidden_size), f = double(c.ffn()), t = double(c.tensor_model_parallel_size);
  // QKV (3h^2 + 3h), proj (h^2 + h), fc1 (h f + f), fc2 (f h + h) split over TP; 2 layernorms (4h) replicated.
  return (4.0 * h * h + 2.0 * h * f + 3.0 * h + h + f + h) / t + 4.0 * h;
}

// Bytes per parameter of weights + gradients + Adam state (mixed precision): fp16/bf16 weight 2, gradient 2,
// fp32 master weight, momentum and variance 12 -> 16 bytes (Rajbhandari et al., ZeRO, SC'20, Sec. 3.1).
// The distributed optimizer shards the 12 bytes over DP ranks (Megatron-LM docs, distrib_optimizer.md).
double state_bytes_per_param(const GptConfig& c) {
  double grad = c.grad_reduce_in_fp32 ? 4.0 : 2.0;
  return 2.0 + grad + (c.use_distributed_optimizer ? 12.0 / double(c.data_parallel()) : 12.0);
}

}  // namespace

GptMemory gpt_memory_per_gpu(const GptConfig& c) {
  const double h = double(c.hidden_size), s = double(c.seq_length), b = double(c.micro_batch_size),
               a = double(c.num_attention_heads), t = double(c.tensor_model_parallel_size),
               V = double(c.padded_vocab_size);
  const auto pp = c.pipeline_model_parallel_size;
  const double layers = double(c.num_layers / pp);
  const double m = double(c.global_batch_size / (c.micro_batch_size * c.data_parallel()));
  double first_params = layers * layer_params_per_rank(c) + V * h / t + s * h;
  double last_params = layers * layer_params_per_rank(c) + (pp > 1 ? V * h / t : 0.0);
  double params = std::max(first_params, last_params) * state_bytes_per_param(c);
  // Activation bytes per layer per micro-batch: Korthikanti et al., "Reducing Activation Recomputation in
  // Large Transformer Models" (MLSys'23), Table 2.
  const double sbh = s * b * h;
  double full_layer = c.sequence_parallel ? sbh * (34.0 / t + 5.0 * a * s / (h * t))
                                          : sbh * (10.0 + 24.0 / t + 5.0 * a * s / (h * t));
  double per_layer;
  if (c.recompute_granularity == "full") per_layer = 2.0 * sbh / (c.sequence_parallel ? t : 1.0);
  else if (c.recompute_granularity == "selective") per_layer = c.sequence_parallel ? sbh * 34.0 / t : sbh * (10.0 + 24.0 / t);
  else per_layer = full_layer;
  double inflight = std::min(m, double(pp));
  double v = c.num_layers_per_virtual_pipeline_stage ? layers / double(c.num_layers_per_virtual_pipeline_stage) : 1.0;
  double interleave = v > 1 ? 1.0 + double(pp - 1) / (double(pp) * v) : 1.0;  // Narayanan et al. SC'21 Sec 2.2.2
  double act = per_layer * layers * inflight * interleave;
  if (c.recompute_granularity == "full") act += full_layer;  // one layer recomputed at a time
  // Logits on the last stage: fp32 s*b*V/t (cross-entropy input and its gradient).
  act = std::max(act, per_layer * layers * 1.0 + 2.0 * 4.0 * s * b * V / t);
  return {params, act};
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
};

struct LayerCosts {
  Costs fwd_attn, fwd_mlp, bwd_attn, bwd_mlp, recompute_attn_extra;
};

// Per-TP-rank kernels of one transformer layer for one micro-batch. FLOP counts follow Narayanan et al.
// SC'21 Sec. 5.1 (24 b s h^2 + 4 b s^2 h forward, without logits); byte counts assume 2-byte activations and
// that each kernel reads its inputs and writes its outputs once (no cache reuse across kernels).
LayerCosts layer_costs(const GptConfig& c, const models::ComputeModel& cm) {
  const double b = double(c.micro_batch_size), s = double(c.seq_length), h = double(c.hidden_size),
               t = double(c.tensor_model_parallel_size), f = double(c.ffn()), a = double(c.num_attention_heads);
  const double T = b * s;                                  // tokens per micro-batch
  const double Te = c.sequence_parallel ? T / t : T;       // tokens in replicated elementwise regions
  const double E = b * (a / t) * s * s;                    // attention score elements per rank
  const double B2 = 2.0;                                   // bytes per activation element
  auto gemm = [&](double m, double k, double n) {
    return Kernel{OpClass::Gemm, 2.0 * m * k * n, B2 * (m * k + k * n + m * n)};
  };
  Kernel ln{OpClass::Elementwise, 0, B2 * 2.0 * Te * h};
  Kernel qkv = gemm(T, h, 3.0 * h / t);
  Kernel qk{OpClass::Attention, 2.0 * T * s * h / t, B2 * (2.0 * T * h / t + E)};
  Kernel softmax{OpClass::Elementwise, 0, B2 * 2.0 * E};               // fused scale-mask-softmax: read+write
  Kernel attn_dropout{OpClass::Elementwise, 0, (B2 * 2.0 + 1.0) * E};  // read, write, 1-byte mask
  Kernel av{OpClass::Attention, 2.0 * T * s * h / t, B2 * (E + 2.0 * T * h / t)};
  Kernel proj = gemm(T, h / t, h);
  Kernel drop_add{OpClass::Elementwise, 0, (B2 * 3.0 + 1.0) * Te * h};  // dropout + residual add
  Kernel fc1 = gemm(T, h, f / t);
  Kernel gelu{OpClass::Elementwise, 0, B2 * 2.0 * T * f / t};
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

std::int64_t to_ns(double s) { return static_cast<std::int64_t>(std::llround(s * 1e9)); }

class RankBuilder {
 public:
  RankBuilder(RankTrace& rt) : rt_(rt) {
    rt_.streams = {"compute", "comm.tp", "pp.recv.fwd", "pp.recv.bwd", "pp.send.fwd", "pp.send.bwd", "comm.dp"};
  }
  enum Stream : std::uint16_t { kCompute = 0, kTp = 1, kRecvF = 2, kRecvB = 3, kSendF = 4, kSendB = 5, kDp = 6 };

  // Adds an op depending on the chain (and extra deps); returns its index and makes it the chain head.
  std::uint32_t chain(Op op, std::vector<std::uint32_t> extra = {}) {
    if (has_last_) op.deps.push_back(last_);
    for (auto d : extra) op.deps.push_back(d);
    std::uint32_t i = push(std::move(op));
    last_ = i;
    has_last_ = true;
    return i;
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

}  // namespace

Trace generate_gpt(const GptConfig& c, const models::ComputeModel& cm, const std::string& where) {
  const auto t = c.tensor_model_parallel_size, p = c.pipeline_model_parallel_size, dp = c.data_parallel();
  const auto m = c.global_batch_size / (c.micro_batch_size * dp);
  const auto v = c.num_layers_per_virtual_pipeline_stage ? (c.num_layers / p) / c.num_layers_per_virtual_pipeline_stage : 1;
  const auto layers_per_chunk = c.num_layers / (p * v);
  const auto& gpu = models::gpu_spec(c.gpu, where + " gpu");
  GptMemory mem = gpt_memory_per_gpu(c);
  if (mem.total_bytes() > gpu.hbm_capacity_bytes) {
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "model does not fit in GPU memory: needs %.1f GiB per GPU (weights+grads+optimizer %.1f GiB, "
                  "activations %.1f GiB) but %s has %.1f GiB; increase tensor/pipeline parallelism, enable "
                  "use_distributed_optimizer or recompute_granularity=full",
                  mem.total_bytes() / 1073741824.0, mem.params_bytes / 1073741824.0,
                  mem.activations_bytes / 1073741824.0, gpu.name.c_str(), gpu.hbm_capacity_bytes / 1073741824.0);
    throw InputError(where, buf);
  }
  const double h = double(c.hidden_size), s = double(c.seq_length), b = double(c.micro_batch_size),
               V = double(c.padded_vocab_size);
  const double act_bytes = b * s * h * 2.0;  // one micro-batch's hidden states, 2-byte elements
  const LayerCosts L = layer_costs(c, cm);
  const bool full = c.recompute_granularity == "full", selective = c.recompute_granularity == "selective";
  // Logits and loss (last stage), embedding lookup (first stage), per micro-batch.
  Costs logits_fwd, logits_bwd, embed_fwd, embed_bwd;
  {
    const double T = b * s, tt = double(t);
    Kernel lg{OpClass::Gemm, 2.0 * T * h * V / tt, 2.0 * (T * h + h * V / tt + T * V / tt)};
    Kernel ce{OpClass::Elementwise, 0, 3.0 * 4.0 * T * V / tt};  // fp32 softmax cross-entropy: read, write, grad
    logits_fwd.add(cm, lg);
    logits_fwd.add(cm, ce);
    logits_bwd.add(cm, lg, 2.0);
    logits_bwd.add(cm, ce);
    Kernel emb{OpClass::Embedding, 0, 2.0 * 2.0 * T * h};  // gather rows + position add, 2-byte elements
    embed_fwd.add(cm, emb);
    embed_bwd.add(cm, emb, 2.0);
  }

  Trace tr;
  tr.name = "gpt";
  tr.world_size = static_cast<std::int32_t>(c.world_size);
  tr.gpu = gpu.name;
  tr.params = gpt_config_to_params(c);
  // Rank layout as Megatron-LM's default order (tensor fastest, then data, then pipeline):
  //   rank = stage * (dp * t) + dp_index * t + tp_index.
  auto rank_of = [&](std::int64_t stage, std::int64_t d, std::int64_t tp) {
    return static_cast<std::int32_t>(stage * dp * t + d * t + tp);
  };
  const std::int64_t dp_mirrors = std::min<std::int64_t>(t, c.gpus_per_host) - 1;
  std::vector<std::int32_t> tp_comm(p), dp_comm(p);
  for (std::int64_t st = 0; st < p; ++st) {
    Communicator tc;
    tc.name = "tp.stage" + std::to_string(st);
    for (std::int64_t k = 0; k < t; ++k) tc.ranks.push_back(rank_of(st, 0, k));
    tc.category = "tp";
    tp_comm[st] = static_cast<std::int32_t>(tr.comms.size());
    tr.comms.push_back(std::move(tc));
    Communicator dc;
    dc.name = "dp.stage" + std::to_string(st);
    for (std::int64_t d = 0; d < dp; ++d) dc.ranks.push_back(rank_of(st, d, 0));
    dc.category = "dp";
    dc.mirrors = static_cast<std::int32_t>(dp_mirrors);
    dp_comm[st] = static_cast<std::int32_t>(tr.comms.size());
    tr.comms.push_back(std::move(dc));
  }
  std::int32_t emb_comm = -1;
  if (p > 1) {
    Communicator ec;
    ec.name = "embedding";
    ec.ranks = {rank_of(0, 0, 0), rank_of(p - 1, 0, 0)};
    ec.category = "dp";
    emb_comm = static_cast<std::int32_t>(tr.comms.size());
    tr.comms.push_back(std::move(ec));
  }
  const double grad_elem_bytes = c.grad_reduce_in_fp32 ? 4.0 : 2.0;
  // Pipeline sends use the scatter/gather optimisation (each TP rank sends 1/t of the activation; Narayanan
  // et al. SC'21 Sec. 4.1), on by default in Megatron-LM.
  const double pp_bytes = act_bytes / double(t);
  const double tp_bytes = act_bytes;

  for (std::int64_t st = 0; st < p; ++st) {
    RankTrace rt;
    rt.rank = rank_of(st, 0, 0);
    RankBuilder rb(rt);
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
    // Last backward op index per (chunk, layer) for the final micro-batch (DP bucket readiness).
    std::vector<std::uint32_t> final_bwd(v * layers_per_chunk, 0);
    std::uint32_t final_embed_bwd = 0;
    auto tp_pair = [&](const std::string& nm, bool before) {
      // Non-SP: one all-reduce after the block. SP: all-gather before, reduce-scatter after.
      if (t == 1) return;
      if (c.sequence_parallel) {
        rb.chain(coll_op(nm + (before ? ".ag" : ".rs"), before ? CollOp::AllGather : CollOp::ReduceScatter,
                         tp_comm[st], tp_bytes, RankBuilder::kTp, "tp"));
      } else if (!before) {
        rb.chain(coll_op(nm + ".ar", CollOp::AllReduce, tp_comm[st], tp_bytes, RankBuilder::kTp, "tp"));
      }
    };
    auto fwd_layer = [&](const std::string& nm, bool recompute) {
      tp_pair(nm + ".attn", true);
      Costs attn = L.fwd_attn;
      rb.chain(compute_op(nm + (recompute ? ".recompute.attn" : ".fwd.attn"), attn));
      tp_pair(nm + ".attn", false);
      tp_pair(nm + ".mlp", true);
      rb.chain(compute_op(nm + (recompute ? ".recompute.mlp" : ".fwd.mlp"), L.fwd_mlp));
      tp_pair(nm + ".mlp", false);
    };
    for (const Slot& sl : order) {
      const std::int64_t mb = sl.mb, ch = sl.chunk;
      const bool first_chunk = first_stage && ch == 0, last_chunk = last_stage && ch == v - 1;
      const std::string mbs = "mb" + std::to_string(mb) + (v > 1 ? ".c" + std::to_string(ch) : "");
      if (sl.fwd) {
        std::vector<std::uint32_t> extra;
        if (!first_chunk) {
          Op r;
          r.kind = OpKind::Recv;
          r.stream = RankBuilder::kRecvF;
          r.name = mbs + ".recv.fwd";
          r.category = "pp";
          r.peer = rank_of(st == 0 ? p - 1 : st - 1, 0, 0);
          r.tag = tag(mb, ch, 0);
          r.bytes = pp_bytes;
          extra.push_back(rb.push(std::move(r)));
        }
        if (first_chunk) rb.chain(compute_op(mbs + ".embed.fwd", embed_fwd), extra);
        else if (!extra.empty()) {
          // the first layer below depends on the recv
        }
        bool first_op = true;
        for (std::int64_t l = 0; l < layers_per_chunk; ++l) {
          std::string nm = mbs + ".l" + std::to_string(ch * layers_per_chunk + l + st * layers_per_chunk * v);
          if (first_op && !first_chunk && !extra.empty()) {
            // attach the recv as an extra dependency of the first op of this micro-batch
            Op dummy = compute_op(nm + ".wait", Costs{});
            dummy.duration_s = 0;
            rb.chain(std::move(dummy), extra);
          }
          first_op = false;
          fwd_layer(nm, false);
        }
        if (last_chunk) rb.chain(compute_op(mbs + ".logits.fwd", logits_fwd));
        if (!last_chunk) {
          Op snd;
          snd.kind = OpKind::Send;
          snd.stream = RankBuilder::kSendF;
          snd.name = mbs + ".send.fwd";
          snd.category = "pp";
          snd.peer = rank_of(st == p - 1 ? 0 : st + 1, 0, 0);
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
          r.peer = rank_of(st == p - 1 ? 0 : st + 1, 0, 0);
          r.tag = tag(mb, ch, 1);
          r.bytes = pp_bytes;
          std::uint32_t ri = rb.push(std::move(r));
          Op w = compute_op(mbs + ".bwd.wait", Costs{});
          w.duration_s = 0;
          rb.chain(std::move(w), {ri});
        } else {
          rb.chain(compute_op(mbs + ".logits.bwd", logits_bwd));
        }
        for (std::int64_t l = layers_per_chunk - 1; l >= 0; --l) {
          const std::int64_t gl = ch * layers_per_chunk + l + st * layers_per_chunk * v;
          std::string nm = mbs + ".l" + std::to_string(gl);
          if (full) fwd_layer(nm, true);
          Costs ba = L.bwd_attn;
          if (selective) {
            ba.seconds += L.recompute_attn_extra.seconds;
            ba.flops += L.recompute_attn_extra.flops;
          }
          if (c.sequence_parallel && t > 1)
            rb.chain(coll_op(nm + ".mlp.bwd.ag", CollOp::AllGather, tp_comm[st], tp_bytes, RankBuilder::kTp, "tp"));
          rb.chain(compute_op(nm + ".bwd.mlp", L.bwd_mlp));
          if (t > 1)
            rb.chain(coll_op(nm + (c.sequence_parallel ? ".mlp.bwd.rs" : ".mlp.bwd.ar"),
                             c.sequence_parallel ? CollOp::ReduceScatter : CollOp::AllReduce, tp_comm[st], tp_bytes,
                             RankBuilder::kTp, "tp"));
          if (c.sequence_parallel && t > 1)
            rb.chain(coll_op(nm + ".attn.bwd.ag", CollOp::AllGather, tp_comm[st], tp_bytes, RankBuilder::kTp, "tp"));
          rb.chain(compute_op(nm + ".bwd.attn", ba));
          if (t > 1)
            rb.chain(coll_op(nm + (c.sequence_parallel ? ".attn.bwd.rs" : ".attn.bwd.ar"),
                             c.sequence_parallel ? CollOp::ReduceScatter : CollOp::AllReduce, tp_comm[st], tp_bytes,
                             RankBuilder::kTp, "tp"));
          final_bwd[ch * layers_per_chunk + l] = rb.last();
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
          snd.peer = rank_of(st == 0 ? p - 1 : st - 1, 0, 0);
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
    std::vector<std::pair<std::uint32_t, double>> buckets;  // (ready op, elements)
    {
      double acc = 0;
      std::uint32_t ready = 0;
      std::vector<std::pair<std::uint32_t, double>> items;  // in the order gradients become ready
      if (last_stage && p > 1) items.push_back({final_bwd[v * layers_per_chunk - 1], V * h / double(t)});
      for (std::int64_t ch = v - 1; ch >= 0; --ch)
        for (std::int64_t l = layers_per_chunk - 1; l >= 0; --l)
          items.push_back({final_bwd[ch * layers_per_chunk + l], layer_params_per_rank(c)});
      if (first_stage) items.push_back({final_embed_bwd, V * h / double(t) + s * h});
      std::stable_sort(items.begin(), items.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      for (const auto& [op, el] : items) {
        acc += el;
        ready = op;
        if (acc >= double(c.bucket_size)) {
          buckets.push_back({ready, acc});
          acc = 0;
        }
      }
      if (acc > 0) buckets.push_back({ready, acc});
    }
    std::vector<std::uint32_t> grad_done;
    double local_params = 0;
    for (const auto& bk : buckets) local_params += bk.second;
    if (dp > 1) {
      for (std::size_t k = 0; k < buckets.size(); ++k) {
        Op op = coll_op("dp.bucket" + std::to_string(k) + (c.use_distributed_optimizer ? ".rs" : ".ar"),
                        c.use_distributed_optimizer ? CollOp::ReduceScatter : CollOp::AllReduce, dp_comm[st],
                        buckets[k].second * grad_elem_bytes, RankBuilder::kDp, "dp");
        op.deps.push_back(c.overlap_grad_reduce ? buckets[k].first : backward_done);
        grad_done.push_back(rb.push(std::move(op)));
      }
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
    double shard = c.use_distributed_optimizer ? local_params / double(dp) : local_params;
    Costs opt;
    opt.add(cm, Kernel{OpClass::Elementwise, 0, 32.0 * shard});
    Op optop = compute_op("optimizer.step", opt);
    rb.chain(std::move(optop), grad_done);
    if (c.use_distributed_optimizer && dp > 1) {
      for (std::size_t k = 0; k < buckets.size(); ++k) {
        Op op = coll_op("dp.bucket" + std::to_string(k) + ".ag", CollOp::AllGather, dp_comm[st],
                        buckets[k].second * 2.0, RankBuilder::kDp, "dp");
        op.deps.push_back(rb.last());
        rb.push(std::move(op));
      }
    }
    tr.ranks.push_back(std::move(rt));
  }
  // Drop the TP / DP communicators that no op uses (t == 1, dp == 1) to keep the trace small.
  tr.metadata["samples_per_iteration"] = double(c.global_batch_size);
  tr.metadata["tokens_per_iteration"] = double(c.global_batch_size) * s;
  tr.metadata["model_flops_per_iteration"] = gpt_model_flops(c);
  tr.metadata["model_parameters"] = gpt_num_parameters(c);
  tr.metadata["micro_batches"] = double(m);
  tr.metadata["memory_per_gpu_bytes.max"] = mem.total_bytes();
  tr.metadata["memory_per_gpu_bytes.weights_grads_optimizer"] = mem.params_bytes;
  tr.metadata["memory_per_gpu_bytes.activations"] = mem.activations_bytes;
  tr.notes.push_back("gpt: simulated one rank per pipeline stage (" + std::to_string(p) + " of " +
                     std::to_string(c.world_size) + " GPUs: data-parallel replica 0, tensor rank 0); its " +
                     std::to_string(t - 1) + " tensor-parallel peers and the other " + std::to_string(dp - 1) +
                     " data-parallel replicas are symmetric stand-ins");
  tr.notes.push_back("gpt: tensor-parallel collectives priced over the real TP group; data-parallel collectives "
                     "over the full DP group of " + std::to_string(dp) + " ranks with " + std::to_string(dp_mirrors) +
                     " concurrent co-located DP groups (mirrors)");
  tr.notes.push_back("gpt: compute kernel durations from the roofline model at generation time (GPU " + gpu.name + ")");
  return tr;
}

}  // namespace fabricsim::workloads
