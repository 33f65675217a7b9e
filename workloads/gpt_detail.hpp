#pragma once
// Internal layers of the `gpt` generator (workloads/gpt.hpp), each in its own file; a new feature lands in
// the one layer it changes:
//   1. model description   gpt.cpp (GptConfig: shape, precision, options, validation), gpt_model.cpp
//                          (parameter counts, model FLOPs, memory per GPU);
//   2. kernels             gpt_kernels.cpp: the kernels of one layer / micro-batch with their shapes, FLOPs and
//                          bytes, priced by the compute model (GptStepKernels);
//   3. parallel layout     gpt_layout.cpp: rank numbering and the TP / CP / DP / PP / EP / ETP / EDP groups as
//                          trace communicators (GptParallelLayout);
//   4. schedule            gpt_schedule.cpp: the per-stage order of forward / backward slots (1F1B,
//                          interleaved) and which slots overlap (GptSchedule);
//   5. trace               gpt_trace.cpp: turns the schedule into ops with dependencies (generate_gpt).
// Not part of the public API: only the gpt_*.cpp files include this header.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/compute.hpp"
#include "models/kernel.hpp"
#include "workloads/gpt.hpp"
#include "workloads/moe.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::workloads::gpt_detail {

// ---- 1. Model description (gpt.cpp, gpt_model.cpp).
bool is_blackwell(const std::string& gpu);
bool pre_hopper(const std::string& gpu);
// attention_backend as the configuration runs it on `gpu` ("" = the default, "auto" = Transformer Engine's choice).
std::string resolved_attention_backend(const std::string& backend, const std::string& gpu);
bool moe_model(const GptConfig& c);                    // MoE or multi-latent attention
std::vector<bool> moe_layers_of(const GptConfig& c);   // per decoder layer: is it an MoE layer
double layer_params_per_rank(const GptConfig& c);      // mean parameters of one layer on one TP rank
double layer_params_moe_model(const GptConfig& c, bool moe_layer, bool gdn_layer = false, char sym = 0);
double expert_params_per_gpu(const GptConfig& c);      // expert parameters of one MoE layer on one GPU
double embedding_params_per_rank(const GptConfig& c);
double mtp_params_per_rank(const GptConfig& c);         // the MTP layers on their rank, without their experts
bool last_stage_has_output(const GptConfig& c);
double moe_model_flops(const GptConfig& c);
double gdn_flops_per_token(const GptConfig& c);  // one Gated DeltaNet layer's forward (Megatron's gdn_layer_flops / T)
// Elements per token on one TP rank of a Gated DeltaNet layer's two exchanges under context parallelism: in_proj's
// output (q, k, v, z, beta, alpha: 2 qk + 2 v + 2 value heads; also in_proj's GEMM width) and the gated norm's (v).
std::array<std::int64_t, 2> gdn_cp_widths(const GptConfig& c);
// First global layer of each model chunk in Megatron's interleaved order: chunk (stage st, virtual chunk ch)
// holds layers [offset[ch * p + st], offset[ch * p + st] + layout[st][ch]).
std::vector<std::int64_t> chunk_offsets(const GptConfig& c, const std::vector<std::vector<std::int64_t>>& layout);

// Megatron-LM's hybrid model (GptConfig::hybrid_layer_pattern; gpt_hybrid.cpp).
constexpr std::int64_t kMambaConvKernel = 4;  // MambaMixer's d_conv (megatron/core/ssm/mamba_mixer.py:179 @d98e8a64)
std::string hybrid_pattern_from_ratios(std::int64_t n, double attention_ratio, double mlp_ratio);
void check_hybrid(const GptConfig& c, const std::function<void(const std::string&, const std::string&)>& fail);
// [stage][chunk] decoder layers from the pattern's '|' segments (segment k: stage k % PP, chunk k / PP).
std::vector<std::vector<std::int64_t>> hybrid_segment_layout(const GptConfig& c);
char hybrid_symbol(const GptConfig& c, std::int64_t gl);  // the global layer's symbol; 0 if not hybrid
// One MTP depth's sublayers: the hybrid pattern's part after '/' ("M*M*/*E/*E": "*E"); "" without one.
std::string hybrid_mtp_pattern(const GptConfig& c);
std::int64_t hybrid_mtp_depths(const GptConfig& c);  // the pattern's MTP parts (0 without '/')
// MoE layers of one MTP depth: the E sublayers of the hybrid MTP pattern, else one when the last decoder layer is
// an MoE layer (an MTP layer is built like it); over all depths, mtp_num_layers times that.
std::int64_t mtp_moe_layers_per_depth(const GptConfig& c);
std::int64_t mtp_moe_layers(const GptConfig& c);
double mamba_params_per_rank(const GptConfig& c);       // one Mamba-2 mixer on one TP rank (without the pre-norm)
// What one rank's SSD scan runs on (MambaContextParallel, megatron/core/ssm/mamba_context_parallel.py @d98e8a64):
// `batch` sequences of the whole `seqlen` (under CP the all-to-alls gather the sequence and split the heads), `heads`
// of `head_dim` = heads / (TP x CP), `groups` of `state` (groups / (TP x CP), or 1 when CP exceeds the TP rank's
// groups: each group's B and C `repeat`ed to CP / groups ranks).
struct MambaShard {
  std::int64_t batch = 0, seqlen = 0, heads = 0, head_dim = 0, groups = 0, state = 0, repeat = 1, chunk = 0;
  std::int64_t tokens() const { return batch * seqlen; }
  std::int64_t d_inner() const { return heads * head_dim; }
  std::int64_t chunks() const { return (seqlen + chunk - 1) / chunk; }
};
MambaShard mamba_shard(const GptConfig& c);
// The per-rank buffers (bytes) of the Mamba CP all-to-alls (mamba_context_parallel.py pre_conv_ssm / post_conv_ssm):
// z, x, B, C, dt before the conv and scan, then y after; the backward moves the same tensors' gradients.
constexpr int kMambaCpExchanges = 6;
std::array<double, kMambaCpExchanges> mamba_cp_a2a_bytes(const GptConfig& c);
extern const char* const kMambaCpTensors[kMambaCpExchanges];  // "z", "x", "B", "C", "dt", "y"
double mamba_activation_bytes_per_token(const GptConfig& c, double gemm_in, double mask, double rep);
double hybrid_model_flops(const GptConfig& c);
std::string hybrid_note(const GptConfig& c);
void hybrid_catalogue_defaults(GptConfig& c);  // pattern, Mamba shape, MoE of the catalogue's hybrid models
// The userbuffers switches, tp_comm_overlap_cfg, fp8_wgrad and the deferred output-layer wgrad checked against the
// rest of the configuration (reads tp_comm_overlap_cfg into c.ub_gemms).
void check_tp_overlap_settings(GptConfig& c, const std::string& where,
                               const std::function<void(const std::string&, const std::string&)>& fail);

// ---- 2. Kernels (gpt_kernels.cpp).
// A kernel described by its op class with FLOPs and bytes (the SC'21 roofline path of unfused attention).
struct Kernel {
  models::OpClass cls;
  double flops, bytes;
};

// Priced work of a group of kernels.
// tp_gemm_seconds: the part of `seconds` spent in the GEMMs that tp_comm_overlap runs beside a TP
// communication chunk (added with add_tp_gemm), the only kernels that lose SMs to it.
// sq_seconds: the sum of the kernels' squared times, for the start delay of a communication kernel launched
// beside them (models::kernel_residual_s).
struct Costs {
  double seconds = 0, flops = 0, tp_gemm_seconds = 0, sq_seconds = 0;
  int kernels = 0;
  void add(const models::ComputeModel& cm, const Kernel& k, double times = 1.0);
  void add(const models::ComputeModel& cm, const models::KernelDesc& k, double time_factor = 1.0);
  // `count` kernels of `s` seconds each (their time and squared time; the caller counts kernels and FLOPs).
  void add_time(double s, double count = 1.0) { seconds += count * s, sq_seconds += count * s * s; }
  // `share`: the part of this kernel's time that runs beside the communication (1 = all of it).
  template <class K>
  void add_tp_gemm(const models::ComputeModel& cm, const K& k, double time_factor = 1.0, double share = 1.0) {
    const double before = seconds;
    add(cm, k, time_factor);
    tp_gemm_seconds += share * (seconds - before);
  }
  void operator+=(const Costs& o) {
    seconds += o.seconds, flops += o.flops, tp_gemm_seconds += o.tp_gemm_seconds, kernels += o.kernels;
    sq_seconds += o.sq_seconds;
  }
};

// One decoder layer (one micro-batch, one TP rank), split where the communication sits.
// wgrad_*: the weight-gradient GEMMs inside bwd_* (what a split backward defers: DualPipe's zero-bubble W,
// Megatron's delay_wgrad_compute).
// recompute_norm: one norm's forward (recompute_modules layernorm runs it again, twice per layer, in the
// backward).
// recompute_mla_up: MLA's up-projection part again before the attention's backward (recompute_modules
// mla_up_proj): the latent norms, the q / kv up-projection GEMMs and RoPE.
// recompute_mlp: the dense MLP's forward again before its backward (recompute_modules mlp): norm, fc1,
// activation, fc2 (not the bias-dropout-add after it); the trace adds the block's TP collectives.
// cp_*: with PyTorch's context parallelism (context_parallel_rotate_method), the part of fwd_attn / bwd_attn
// that is the ring attention: `first` the local chunk's step (what the all-gathered K/V overlaps), `rest` the
// other cp - 1 steps with the merges / gradient accumulation.
// dgrad_*_in / wgrad_*_in: the input- and weight-gradient GEMMs of the block's column-parallel input
// projections (QKV, or MLA's q / kv projections; fc1), inside bwd_* -- what Megatron's backward overlaps with
// the re-gather of the input and the reduction of the input gradient.
// PyTorch's async TP (GptConfig::symm_mem_tp) in one TP block: the GEMMs Inductor's micro-pipeline TP pass
// fuses with the block's sequence-parallel collectives, and the kernels of the fused ops
// (torch/distributed/_symmetric_memory/__init__.py; layer_costs_fused says which GEMMs and why).
// ag: the GEMMs consuming the all-gathered tensor (fused_all_gather_matmul: each runs once per shard, M/t
// rows); `ag_full` the same GEMMs at their whole M (what the block's cost holds and the decomposition
// replaces). rs: the one GEMM producing the reduce-scattered tensor (fused_matmul_reduce_scatter: one
// M/t-row chunk per destination rank). Empty (kernels 0) where the pass fuses nothing: that collective stays
// NCCL's. barrier: one symm_mem.barrier kernel; shard_copy: a copy of the local shard (into the p2p buffer,
// and into the all-gather output); reduce: the sum of the t partial chunks after the reduce-scatter.
struct TpFusedGemms {
  Costs ag_shard, ag_full, rs_shard, rs_full;
  Costs barrier, shard_copy, reduce;
  bool ag() const { return ag_full.kernels > 0; }
  bool rs() const { return rs_full.kernels > 0; }
};

struct LayerCosts {
  Costs fwd_attn, fwd_mlp, bwd_attn, bwd_mlp, recompute_attn_extra, wgrad_attn, wgrad_mlp, recompute_norm;
  Costs recompute_mla_up, recompute_mlp;
  Costs dgrad_attn_in, wgrad_attn_in, dgrad_mlp_in, wgrad_mlp_in;
  Costs cp_fwd_first, cp_fwd_rest, cp_bwd_first, cp_bwd_rest;
  // A Mamba-2 mixer's block (hybrid 'M') split where its context-parallel all-to-alls sit: mamba_*_pre the kernels
  // before the first exchange (forward: norm, in_proj and the copies feeding the all-to-alls; backward: out_proj's
  // backward, the gated norm's, the copies; mamba_bwd_pre_w the out_proj wgrad inside it), mamba_*_scan the
  // head-sharded part between the exchanges (conv1d, SSD scan, gate, their copies); the rest of fwd_attn /
  // bwd_attn follows the last exchange.
  Costs mamba_fwd_pre, mamba_fwd_scan, mamba_bwd_pre, mamba_bwd_pre_w, mamba_bwd_scan;
  TpFusedGemms tp_fused[2][2];  // [attention block][backward]
};

// One MoE layer's MLP side for one micro-batch on the simulated rank, split where the dispatch / combine
// communication sits. Expert GEMMs are priced for the busiest expert-parallel rank of the layer (the
// all-to-all makes every rank wait for it); `experts_*_mean` prices the same work spread evenly (the
// difference is the time lost to imbalance).
// pre_w, experts_w, shared_w: the weight-gradient GEMMs inside pre_b (router), experts_b, shared_b.
struct MoeCosts {
  Costs pre_f, experts_f, post_f, shared_f, pre_b, experts_b, post_b, shared_b, experts_f_mean, experts_b_mean;
  Costs pre_w, experts_w, shared_w;
};

LayerCosts layer_costs_unfused(const GptConfig& c, const models::ComputeModel& cm);
// gdn: the Gated DeltaNet layer of a hybrid model (GptConfig::gdn_layers) instead of the attention layer.
// mamba: the Mamba-2 mixer of a hybrid model (GptConfig::hybrid_layer_pattern 'M') instead of the attention.
LayerCosts layer_costs_fused(const GptConfig& c, const models::ComputeModel& cm, bool gdn = false, bool mamba = false);
// The Mamba-2 mixer between in_proj and out_proj on one rank (gpt_hybrid.cpp), every kernel into `out`, those of
// the head-sharded part also into `scan` and those before the first CP exchange also into `pre`.
void add_mamba_core(Costs& out, const GptConfig& c, const models::ComputeModel& cm, bool bwd, Costs& pre, Costs& scan);
// A hybrid sublayer's costs: the decoder layer's with the block it lacks emptied (gpt_hybrid.cpp).
LayerCosts hybrid_sublayer(LayerCosts L, char sym);
MoeCosts moe_costs(const GptConfig& c, const models::ComputeModel& cm, const MoeLayerLoad& ld, double T_local);
double fp8_cast_bytes_per_element(const std::string& recipe);
double fp8_gather_bytes_per_element(const std::string& recipe);

// torch FSDP2's memory-bound kernels around one unit's collectives (GptConfig::fsdp2_copies), for a unit of
// `el` parameters on this rank (unsharded over the shard group of `shard_n` ranks). Where each runs, and the
// bytes (workloads/gpt_kernels.cpp, fsdp_copy_costs):
//   copy_in     all-gather copy-in stream, before the all-gather: the shard in the all-gather dtype copied
//               into the flat all-gather input;
//   copy_out    compute stream, after the all-gather, before the unit's compute: the gathered flat buffer
//               copied into the parameters (split_with_sizes_copy);
//   chunk_cat   compute stream, after the unit's backward, before its reduce-scatter: the gradients into
//               the flat reduce-scatter input, in the reduce dtype;
//   post_reduce reduce-scatter stream, after it: the reduced shard cast back to the fp32 parameter dtype
//               (a bf16 reduce only);
//   upcast, accumulate   compute stream, without a reduce-scatter (pipeline micro-batches before the last):
//               the first micro-batch's unsharded gradient cast to the fp32 reduce dtype, the later ones
//               added to it (fp32 reduce only).
struct FsdpCopyCosts {
  Costs copy_in, copy_out, chunk_cat, post_reduce, upcast, accumulate, chunk_cat_accumulated;
};
FsdpCopyCosts fsdp_copy_costs(const GptConfig& c, const models::ComputeModel& cm, double el, double shard_n,
                              double grad_elem_bytes);

// torchao float8 (tensorwise, torch FSDP2; GptConfig::torchao_float8_weights) around one layer's linear weights,
// `linear_el` elements on this rank once gathered, and the step's scale precompute (workloads/gpt_kernels.cpp,
// torchao_float8_weight_costs):
//   fwd         compute stream, each forward: the gathered bf16 weight's amax and cast to fp8 (none with the
//               float8 all-gather: the shard was cast before the gather, FsdpCopyCosts::copy_in);
//   bwd         compute stream, each backward: the fp8 weight made column-major for the input-gradient GEMM,
//               and with force_recompute_fp8_weight_in_bwd (bf16 all-gather) its cast again;
//   precompute  compute stream, once after the optimizer step with the float8 all-gather
//               (precompute_float8_dynamic_scale_for_fsdp): the amax of every fp8 weight shard and the scale
//               kernels; precompute_amaxes fp32 amaxes are then all-reduced over the shard group.
struct Float8WeightCosts {
  Costs fwd, bwd, precompute;
  double precompute_amaxes = 0;
};
Float8WeightCosts torchao_float8_weight_costs(const GptConfig& c, const models::ComputeModel& cm, double linear_el,
                                              double shard_n, double stage_linear_el, double stage_linears);

// Megatron's fp8_param_gather after the optimizer step (workloads/gpt_kernels.cpp, fp8_param_cast_costs): the
// quantisation of this rank's fp32 main-parameter shard of the `linear_el` FP8 weight elements (the stage's, this
// rank's TP slices) into the FP8 parameters, and the bytes of the amaxes then all-reduced over the shard group
// (`tensors` FP8 weight tensors).
struct Fp8ParamCast {
  Costs cast;
  double amax_bytes = 0;
};
Fp8ParamCast fp8_param_cast_costs(const GptConfig& c, const models::ComputeModel& cm, double linear_el, double shard_n,
                                  double tensors);

// Activation offloading (cpu_offloading_num_layers; workloads/gpt_model.cpp): the GPU's pinned host-copy rate
// (bytes/s per direction) and one layer's saved activations (one micro-batch) over it.
double host_copy_Bps(const std::string& gpu);
double offload_copy_seconds(const GptConfig& c);
// Optimizer CPU offload (optimizer_cpu_offload; workloads/gpt_model.cpp): the host DRAM bandwidth per GPU of the
// GPU's server (bytes/s), and the host work for a number of offloaded shard elements: the gradients' copy to the
// host, the CPU AdamW, the parameters' copy back (seconds each, whole), and the parameters they are in.
double host_dram_Bps(const std::string& gpu);
double host_dram_Bps(const GptConfig& c);  // host_memory_bandwidth_per_gpu when given, else by GPU
struct OptimizerOffloadTimes {
  double d2h_s = 0, cpu_s = 0, h2d_s = 0;
  std::int64_t pieces = 1;
};
OptimizerOffloadTimes optimizer_offload_times(const GptConfig& c, double elements);
// Chunked optimizer-state offload (GptConfig::state_offload; workloads/gpt_model.cpp): the selection and chunk plan
// of a rank's distributed optimizers, each given as its parameter pieces' elements in optimizer order.
OptimizerStateOffload plan_state_offload(const GptConfig& c, const std::vector<std::vector<double>>& children);
// Fine-grained activation offloading (offload_modules): the bytes of one layer, one micro-batch, that leave HBM
// (`load_factor`: an MoE layer's routed tokens on this rank over the mean).
double layer_offload_bytes(const GptConfig& c, bool moe_layer, double load_factor);

// Everything the step computes, priced once: per decoder layer, the first stage's embedding, the last
// stage's logits / loss and MTP heads, per MoE layer its routing load and costs, and the optimizer rate.
struct GptStepKernels {
  bool legacy = false;              // unfused attention (SC'21 roofline pricing)
  LayerCosts layer;
  // first_last_layers_bf16: the decoder layer priced in bf16 (GptConfig::bf16_layers_config), for the layers
  // GptConfig::bf16_layer marks; layer_at picks the one of a global layer.
  LayerCosts layer_bf16;
  std::vector<bool> bf16_layers;    // per global layer; empty without bf16 layers
  bool has_bf16_layers() const { return !bf16_layers.empty(); }
  // Hybrid linear attention (GptConfig::gdn_layers): the Gated DeltaNet layer (and its bf16 twin), per global
  // layer whether it is one; empty without experimental_attention_variant.
  LayerCosts layer_gdn, layer_gdn_bf16;
  std::vector<bool> gdn_layers;
  // Hybrid model (GptConfig::hybrid_layers): per global layer its symbol, and the sublayers' costs (M a Mamba-2
  // mixer, * attention, - / E the MLP block); empty when not hybrid. A sublayer runs one block: has_block.
  std::string hybrid_layers;
  LayerCosts layer_mamba, layer_attn_only, layer_mlp_only;
  // G uses layer_gdn (the Gated DeltaNet sublayer), + layer_attn_only (priced as MLA: '+' turns
  // multi_latent_attention on, and Megatron refuses '*' beside it).
  bool has_block(std::int64_t gl, bool attn) const {
    if (hybrid_layers.empty()) return true;
    const char s = hybrid_layers[static_cast<std::size_t>(gl)];
    return attn ? (s == 'M' || s == '*' || s == 'G' || s == '+') : (s == '-' || s == 'E');
  }
  // cp_comm_type per layer (GptConfig::cp_comm_types): the layer's type, and the attention layer (the hybrid
  // model's attention sublayer) priced with each type; empty with one type.
  std::vector<std::string> cp_types;
  std::map<std::string, LayerCosts> layer_of_cp;
  const LayerCosts& layer_at(std::int64_t gl) const {
    const auto g = static_cast<std::size_t>(gl);
    if (!hybrid_layers.empty()) {
      const char s = hybrid_layers[g];
      if ((s == '*' || s == '+') && !cp_types.empty()) return layer_of_cp.at(cp_types[g]);
      return s == 'M' ? layer_mamba : s == 'G' ? layer_gdn : (s == '*' || s == '+') ? layer_attn_only : layer_mlp_only;
    }
    const bool bf = has_bf16_layers() && bf16_layers[g];
    if (!gdn_layers.empty() && gdn_layers[g]) return bf ? layer_gdn_bf16 : layer_gdn;
    if (!cp_types.empty()) return layer_of_cp.at(cp_types[g]);
    return bf ? layer_bf16 : layer;
  }
  Costs logits_fwd, logits_bwd, embed_fwd, embed_bwd, mtp, mtp_b;
  Costs logits_wgrad;  // the output layer's weight-gradient GEMM (inside logits_bwd; defer_embedding_wgrad_compute)
  // The MTP work split where a standalone MTP stage splits it (mtp = layers + heads): the MTP layers (per depth
  // the embedding of the shifted tokens, norms, projection 2h -> h, one transformer layer) on the MTP stage,
  // the heads (the shared output layer and loss per depth) on the loss stage.
  Costs mtp_layers, mtp_layers_b, mtp_heads, mtp_heads_b;
  // MTP layers built as an MoE layer (the decoder's last layer is MoE): one depth's work outside its MoE block
  // (embedding, projection, attention; forward and backward), the MoE block run as the MoE steps of layer
  // num_layers (moe_index has num_layers + 1 entries, the last the last decoder layer's costs).
  bool mtp_moe = false;
  Costs mtp_layer_f, mtp_layer_b;
  // MoE: index of each decoder layer among the MoE layers (-1 = dense), per MoE layer its load and costs.
  std::vector<bool> moe_pattern;
  std::vector<std::int64_t> moe_index;
  std::int64_t n_moe = 0;
  double T_local = 0;               // tokens entering an MoE layer on one rank per micro-batch
  std::vector<MoeLayerLoad> loads;
  std::vector<MoeCosts> moe;
  double adam_state_bytes = 12.0;   // GptConfig::adam_state_bytes
  double optimizer_extra_bytes = 0;  // per parameter, beyond Adam's passes (LAMB's norms and second stage)
  // Optimizer step over `elements` parameters (Adam, memory bound).
  Costs optimizer(const models::ComputeModel& cm, double elements) const;
  // One streaming pass of `bytes` (read + written) of the given kind: at the class roofline (Elementwise) under the
  // SC'21 pricing (legacy), else the kind's calibrated memory-bound rate.
  Costs memory_pass(const models::ComputeModel& cm, models::MemoryKernel kind, double bytes, models::Precision p) const;
};
GptStepKernels gpt_step_kernels(const GptConfig& c, const models::ComputeModel& cm, const std::string& where);

// ---- 3. Parallel layout (gpt_layout.cpp).
// One model chunk held by a pipeline rank: its decoder layers, whether it starts (embedding) or ends (loss)
// the model, and where its activations come from and go to.
struct GptChunkPlace {
  std::int64_t base = 0, nl = 0;      // global layers [base, base + nl)
  bool first = false, last = false;   // holds the embedding / the output layer and loss
  std::int32_t from = 0, to = 0;      // ranks the forward input comes from / the output goes to
  std::int64_t to_chunk = 0, from_chunk = 0;  // the neighbours' chunk indices of this micro-batch (message tags)
  bool mtp = false;                   // runs the MTP layers (after its decoder layers)
  // Hidden states per pipeline message received from `from` / sent to `to` (the gradients the same way back):
  // 1, or 1 + mtp_num_layers after a standalone MTP stage, whose output is the decoder's hidden states and
  // every MTP layer's concatenated along the sequence (Megatron-Core MultiTokenPredictionBlock.forward).
  double in_hidden = 1, out_hidden = 1;
};

struct GptParallelLayout {
  std::int64_t t = 1, p = 1, dp = 1, cp = 1, v = 1;
  std::int64_t chunks = 1;           // model chunks per rank: v, or 2 with DualPipe (one per direction)
  std::vector<std::vector<GptChunkPlace>> places;  // places[stage][chunk]
  std::int64_t ep = 1, etp = 1, edp = 1;
  std::int64_t R = 1, shard_n = 1;   // HSDP replicas, ranks per shard group (DP x CP / R)
  std::int64_t dp_mirrors = 0;
  bool a2a = false;                  // dispatcher alltoall / flex (else allgather)
  // Rank order (Megatron-Core's RankGenerator, megatron/core/parallel_state.py; megatron/training/initialize.py
  // at NVIDIA/Megatron-LM@d98e8a64 passes order 'tp-cp-ep-dp-pp', or 'tp-cp-ep-pp-dp' with
  // --use-tp-pp-dp-mapping): tensor fastest, then context, then data, then pipeline (pp_inner false) -- or
  // tensor, context, pipeline, data (pp_inner true: a DP replica's stages are neighbours, its DP peers far).
  bool pp_inner = false;
  // The global rank of index j (< dp * cp * t, data-parallel index outermost) among the ranks of `stage`.
  std::int32_t stage_rank(std::int64_t stage, std::int64_t j) const {
    const std::int64_t block = cp * t;
    return static_cast<std::int32_t>(pp_inner ? (j / block) * p * block + stage * block + j % block
                                              : stage * dp * block + j);
  }
  std::int32_t rank_of(std::int64_t stage, std::int64_t d, std::int64_t k, std::int64_t tp) const {
    return stage_rank(stage, d * cp * t + k * t + tp);
  }
  // Communicator indices into the trace: per stage, per decoder layer (EP dispatch / combine).
  std::vector<std::int32_t> tp_comm, dp_comm, cp_comm, rep_comm, epag_comm, etp_comm, edp_comm;
  // a2a+p2p context parallelism (GptConfig::cp_impl): the stage's all-to-all (inner) and ring (outer) groups.
  std::vector<std::int32_t> cp_a2a_comm, cp_ring_comm;
  // The stage's TP x CP group (Megatron's tp_cp_group: the MoE router's load-balancing loss sums the tokens per
  // expert over it); the TP group where CP is 1, -1 where nothing uses it.
  std::vector<std::int32_t> tpcp_comm;
  std::vector<std::vector<std::int32_t>> disp_comm, comb_comm;  // [stage][global layer]
  // flex dispatcher over several NVLink domains: the forwarding inside the destination domain (DeepEP's
  // NVLink leg) as its own all_to_allv per layer.
  bool flex_forwarding = false;
  std::vector<std::vector<std::int32_t>> fwd_disp_comm, fwd_comb_comm;
  std::int32_t emb_comm = -1;
  std::vector<bool> emb_stage;       // per stage: in emb_comm (holds a copy of the word embeddings)
};
// Appends the communicators to `tr`.
GptParallelLayout gpt_parallel_layout(const GptConfig& c, const std::vector<std::vector<std::int64_t>>& layout,
                                      const GptStepKernels& k, Trace& tr);

// ---- 4. Schedule (gpt_schedule.cpp).
// One forward or backward pass of a micro-batch through one model chunk of a stage.
// A backward with `input_only` computes the input gradient and leaves its weight-gradient GEMMs to a later
// `weight` slot of the same micro-batch and chunk (DualPipe's zero-bubble split: dualpipe.py enable_zb,
// WeightGradStore, FIFO).
struct GptSlot {
  bool fwd;
  std::int64_t mb, chunk;
  bool input_only = false, weight = false;
};
// Slots run one after the other; a group of two is emitted interleaved on two dependency chains so
// that each one's communication runs under the other's compute.
struct GptSlotGroup {
  std::vector<GptSlot> slots;  // 1 or 2
};
struct GptSchedule {
  std::vector<GptSlotGroup> groups;
};
// Warm-up forwards of pipeline stage `st` (1F1B for v = 1, Megatron's interleaved 1F1B with micro-batch groups
// of `n` otherwise, `extra_warm` more with overlap_moe_expert_parallel_comm): the schedule runs them, and the
// memory model's in-flight chunk passes are this count + 1 (at most m * v).
std::int64_t pipeline_warmup(std::int64_t p, std::int64_t v, std::int64_t m, std::int64_t st, std::int64_t n,
                             std::int64_t extra_warm = 0);
// Megatron's interleaved forward order: (micro-batch, chunk) of the k-th forward of a stage.
std::vector<std::pair<std::int64_t, std::int64_t>> interleaved_table(std::int64_t m, std::int64_t v, std::int64_t n);
// Slot order of pipeline stage `st` with `m` micro-batches: 1F1B (v = 1) or Megatron's interleaved 1F1B with
// micro-batch groups of `n` (microbatch_group_size_per_vp_stage; n = p is Megatron's default).
std::vector<GptSlot> pipeline_order(std::int64_t p, std::int64_t v, std::int64_t m, std::int64_t st, std::int64_t n,
                                    std::int64_t extra_warm = 0);
GptSchedule gpt_schedule(const GptConfig& c, std::int64_t st, std::int64_t m);

}  // namespace fabricsim::workloads::gpt_detail
