#include "workloads/gpt.hpp"

// Layer 2, kernels: what one decoder layer, the embedding, the logits / loss, the MTP heads, the MoE
// router / experts and the optimizer compute per micro-batch, each kernel described by its shape (GEMM M/N/K
// and precision, attention batch/heads/sequence, memory-bound bytes) and priced by the compute model.
#include <algorithm>
#include <cmath>

#include "models/gpu.hpp"
#include "workloads/gpt_detail.hpp"

namespace fabricsim::workloads::gpt_detail {

using models::KernelDesc;
using models::OpClass;
using models::Precision;

namespace {
// The precision of activations and of the kernels that stay in it (bf16 unless the run is fp16; FP8 / FP4 runs keep
// bf16 activations).
Precision act_precision(const GptConfig& c) { return c.precision == "fp16" ? Precision::FP16 : Precision::BF16; }

// The bias + dropout + residual add after a block (TransformerLayer's self_attn_bda / mlp_bda,
// megatron/core/transformer/transformer_layer.py:753-756 and 1104-1107 at NVIDIA/Megatron-LM@d98e8a64; MambaLayer's
// mamba_bda, megatron/core/ssm/mamba_layer.py:176-179), in bytes per element of the block's output, one entry per
// kernel. The block output x is in the activation dtype (e bytes), the residual and the sum in the residual
// stream's (GptConfig::residual_bytes); with dropout a 1-byte mask is written. Fused (bias_dropout_fusion, the
// default): _bias_dropout_add_func under torch.compile (jit_fuser, megatron/core/jit.py:16-24;
// get_bias_dropout_add, megatron/core/fusions/fused_bias_dropout.py:83-94) is one kernel reading x and the
// residual and writing the sum and the mask; its backward is priced as every memory-bound kernel's, twice the
// forward bytes. Unfused, the same function runs eagerly (fused_bias_dropout.py:33-58), one kernel per op: x cast
// to the residual's dtype when they differ (read e, write 4), x + bias (read and write), F.dropout (read, write,
// mask; none at p = 0: PyTorch returns its input), residual + out (read both, write); in the backward the dropout
// gradient is the fused kernel's, and the cast's gradient (read 4, write e) and the bias gradient (a reduction over
// the tokens: read the gradient once) are kernels of their own.
struct BiasDropoutAdd {
  std::vector<double> fwd, bwd;
};
BiasDropoutAdd bias_dropout_add(const GptConfig& c, double e, bool dropout, bool bias) {
  const double er = c.fp32_residual_connection ? c.residual_bytes() : e, mask = dropout ? 1.0 : 0.0;
  const double fused = e + 2.0 * er + mask;
  if (c.bias_dropout_fusion) return {{fused}, {2.0 * fused}};
  BiasDropoutAdd k{{}, {2.0 * fused}};
  double xb = e;  // bytes per element of x as the ops after the cast see it
  if (er != e) k.fwd.push_back(e + er), k.bwd.push_back(er + e), xb = er;
  if (bias) k.fwd.push_back(2.0 * xb), k.bwd.push_back(xb);
  if (dropout) k.fwd.push_back(2.0 * xb + 1.0);
  k.fwd.push_back(xb + 2.0 * er);
  return k;
}
}  // namespace

// Eager FP8 casts (torchao float8 without compile: abs, amax, scale, multiply, clamp, convert as separate ops)
// take 3.28x the time of the compiled cast: geometric mean of 305.4 / 64.1 us (8192x4096) and 1116.2 / 493.2 us
// (16384x8192), tests/data/hardware/h200-kernels/kernels2.csv fp8_cast_with_amax_eager / _compiled.
constexpr double kEagerFp8CastFactor = 3.28;

void Costs::add(const models::ComputeModel& cm, const Kernel& k, double times) {
  add_time(cm.time_s(k.cls, k.flops * times, k.bytes * times, 1));
  flops += k.flops * times;
  ++kernels;
}
void Costs::add(const models::ComputeModel& cm, const KernelDesc& k, double time_factor) {
  add_time(cm.kernel_time_s(k) * time_factor);
  flops += k.flops();
  ++kernels;
}

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
  // The bias + dropout + residual add (bias_dropout_add: the GPT-3 layer has linear biases); the norm reads the
  // residual stream, cast first to the activation dtype with fp32_residual_connection (layer_costs_fused says why).
  const BiasDropoutAdd bda = bias_dropout_add(c, B2, c.hidden_dropout > 0, true);
  auto add_bda = [&](Costs& out, const std::vector<double>& per_el) {
    for (double bytes : per_el) out.add(cm, Kernel{OpClass::Elementwise, 0, bytes * Te * h});
  };
  const Kernel ln_cast{OpClass::Elementwise, 0, c.fp32_residual_connection ? (c.residual_bytes() + B2) * Te * h : 0.0};
  Kernel fc1 = gemm(T, h, fc1_w / t);
  Kernel gelu{OpClass::Elementwise, 0, c.swiglu ? B2 * (fc1_w + f) / t * T : B2 * 2.0 * T * f / t};
  Kernel fc2 = gemm(T, f / t, h);
  // qk_layernorm: the per-head norms of Q and K (read and write each), as layer_costs_fused.
  const double qk_el = c.qk_layernorm ? T * double((c.num_attention_heads + c.query_groups()) * c.head_dim()) / t : 0.0;
  Kernel qk_norm{OpClass::Elementwise, 0, B2 * 2.0 * qk_el};
  // squared_relu with biases: fc1's bias added by its own kernel (layer_costs_fused says why).
  Kernel sq_bias{OpClass::Elementwise, 0, c.squared_relu && c.normalization == "LayerNorm" ? B2 * 2.0 * T * f / t : 0.0};
  LayerCosts L;
  // The GEMMs tp_comm_overlap takes SMs from (add_tp_gemm; which ones: layer_costs_fused): the row-parallel
  // forward GEMMs (proj, fc2) and the input projections' (qkv, fc1) dgrad and, with tp_comm_bulk_wgrad, wgrad.
  // (the dgrad beside the bulk all-gather, tp_comm_bulk_dgrad, or the pipelined reduce-scatter, tp_comm_overlap_rs_dgrad)
  const bool dg = c.tp_comm_bulk_dgrad || c.tp_comm_overlap_rs_dgrad;
  const double in_share = (dg ? 0.5 : 0.0) + (c.tp_comm_bulk_wgrad ? 0.5 : 0.0);  // of an input projection's dgrad + wgrad
  const double w_share = c.tp_comm_bulk_wgrad ? 1.0 : 0.0, d_share = dg ? 1.0 : 0.0;
  auto add = [&](Costs& out, const Kernel& k, double times, double tp_share) {
    out.add_tp_gemm(cm, k, times, tp_share);
  };
  if (ln_cast.bytes > 0) L.fwd_attn.add(cm, ln_cast);
  for (const Kernel& k : {ln, qkv}) L.fwd_attn.add(cm, k);
  if (qk_el > 0) L.fwd_attn.add(cm, qk_norm);
  for (const Kernel& k : {qk, softmax, attn_dropout, av}) L.fwd_attn.add(cm, k);
  add(L.fwd_attn, proj, 1.0, 1.0);
  add_bda(L.fwd_attn, bda.fwd);
  // The parallel block (GptConfig::parallel_block): the MLP reads the attention's normalised input, no norm of its own.
  const bool mlp_norm = !c.parallel_block();
  if (mlp_norm && ln_cast.bytes > 0) L.fwd_mlp.add(cm, ln_cast);
  if (mlp_norm) L.fwd_mlp.add(cm, ln);
  L.fwd_mlp.add(cm, fc1);
  if (sq_bias.bytes > 0) L.fwd_mlp.add(cm, sq_bias);
  L.fwd_mlp.add(cm, gelu);
  add(L.fwd_mlp, fc2, 1.0, 1.0);
  add_bda(L.fwd_mlp, bda.fwd);
  // Backward: each GEMM becomes two GEMMs of the same size (input and weight gradients); elementwise
  // backward kernels move about twice the bytes (read output grad and saved input, write input grad).
  add(L.bwd_attn, qkv, 2.0, in_share);
  for (const Kernel& k : {qk, av, proj}) L.bwd_attn.add(cm, k, 2.0);
  for (const Kernel& k : {ln, softmax, attn_dropout}) L.bwd_attn.add(cm, k, 2.0);
  add_bda(L.bwd_attn, bda.bwd);
  if (ln_cast.bytes > 0) L.bwd_attn.add(cm, ln_cast);
  if (qk_el > 0) L.bwd_attn.add(cm, qk_norm, 2.0);
  add(L.bwd_mlp, fc1, 2.0, in_share);
  L.bwd_mlp.add(cm, fc2, 2.0);
  if (mlp_norm) L.bwd_mlp.add(cm, ln, 2.0);
  if (mlp_norm && ln_cast.bytes > 0) L.bwd_mlp.add(cm, ln_cast);
  L.bwd_mlp.add(cm, gelu, 2.0);
  add_bda(L.bwd_mlp, bda.bwd);
  if (sq_bias.bytes > 0) L.bwd_mlp.add(cm, sq_bias, 0.5);
  add(L.wgrad_attn, qkv, 1.0, w_share), L.wgrad_attn.add(cm, proj);  // the weight half of the GEMMs' backward
  add(L.wgrad_mlp, fc1, 1.0, w_share), L.wgrad_mlp.add(cm, fc2);
  add(L.dgrad_attn_in, qkv, 1.0, d_share), add(L.wgrad_attn_in, qkv, 1.0, w_share);
  add(L.dgrad_mlp_in, fc1, 1.0, d_share), add(L.wgrad_mlp_in, fc1, 1.0, w_share);
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
// nvfp4 (precision fp4: NVFP4BlockScaling, transformer_engine/common/recipe/__init__.py at
// NVIDIA/TransformerEngine@d0067d0da): the GEMM inputs and the output gradients are quantised with a random
// Hadamard transform on the column-wise copy (the wgrad GEMM's operand) and the gradients with stochastic
// rounding; NVFP4Quantizer::quantize_impl (transformer_engine/pytorch/csrc/quantizer.cpp) first takes the
// row-wise amax and the post-RHT column-wise amax in one pass (nvte_hadamard_transform_amax: read 2), then one
// fused kernel (nvte_quantize_with_hadamard_transform) reads the tensor again and writes both copies, each
// 4-bit data + one E4M3 scale per 16 elements: 2 + 2 + 2 x (0.5 + 1/16) = 5.125. The Hadamard product runs
// on the tensor cores inside that kernel ("we are using MMA hardware for computing RHT"): priced as the memory
// pass it is.
double fp8_cast_bytes_per_element(const std::string& recipe) {
  if (recipe == "nvfp4") return 2.0 + 2.0 + 2.0 * (0.5 + 1.0 / 16.0);
  if (recipe == "tensorwise") return 6.0;
  if (recipe == "rowwise") return 10.0;
  if (recipe == "mxfp8") return 2.0 + 2.0 * (1.0 + 1.0 / 32.0);
  if (recipe == "blockwise") return 2.0 + 2.0 * (1.0 + 4.0 / 128.0);
  return 4.0;
}

// Bytes per element of an FP8 tensor all-gathered over TP (GptConfig::tp_gathers_fp8): the 1-byte data plus
// its scales -- one fp32 scale-inverse per tensor for delayed / tensorwise (negligible), one E8M0 byte per 32
// elements for mxfp8, one fp32 per 128 (1x128 blocks) for blockwise (the recipes as in
// fp8_cast_bytes_per_element); nvfp4: the 4-bit data and one E4M3 scale per 16 elements (_all_gather_nvfp4,
// transformer_engine/pytorch/distributed.py at @d0067d0da, gathers both).
double fp8_gather_bytes_per_element(const std::string& recipe) {
  if (recipe == "nvfp4") return 0.5 + 1.0 / 16.0;
  if (recipe == "mxfp8") return 1.0 + 1.0 / 32.0;
  if (recipe == "blockwise") return 1.0 + 4.0 / 128.0;
  return 1.0;
}

// Flash / fused attention (Megatron-Core with Transformer Engine): each kernel described by its shape and
// priced by the per-kernel compute model (models/compute.hpp). Tokens on this rank: b s / cp.
LayerCosts layer_costs_fused(const GptConfig& c, const models::ComputeModel& cm, bool gdn, bool mamba) {
  const bool mixer = gdn || mamba;  // a linear-time mixer in place of softmax attention
  const std::int64_t b = c.micro_batch_size, cp = c.context_parallel_size, t = c.tensor_model_parallel_size;
  const std::int64_t s = c.seq_length, sl = s / cp, T = b * sl, h = c.hidden_size, f = c.ffn(), d = c.head_dim();
  const std::int64_t a_t = c.num_attention_heads / t, g_t = std::max<std::int64_t>(1, c.query_groups() / t);
  const std::int64_t Te = c.sequence_parallel ? T / t : T;
  const std::int64_t fc1 = c.swiglu ? 2 * f : f;
  const Precision act = act_precision(c);
  // The decoder linears' GEMMs: FP8, or NVFP4 under precision fp4 -- the NVFP4 recipe quantises all three
  // GEMMs of a linear (fprop, dgrad, wgrad: fp4_quant_fwd_inp / fwd_weight / bwd_grad in NVFP4BlockScaling at
  // NVIDIA/TransformerEngine@d0067d0da), priced at the GPU's dense FP4 peak with the FP8 GEMM efficiency
  // (models/compute_calibration.cpp: no FP4 kernel is measured; unvalidated, docs/workloads.md).
  const Precision gp = c.fp8() ? Precision::FP8 : c.fp4() ? Precision::FP4 : act;
  const Precision wgp = c.bf16_wgrad() ? act : gp;  // the weight-gradient GEMMs (fp8_wgrad false: bf16)
  const double e = 2.0;  // bytes per activation element
  using models::MemoryKernel;
  auto mem = [&](MemoryKernel k, double bytes) { return KernelDesc::memory(k, bytes, act); };
  const double cast = fp8_cast_bytes_per_element(c.quant_recipe());
  struct G {
    std::int64_t k, n;  // input width, output width (per TP rank)
  };
  const G qkv{h, (a_t + 2 * g_t) * d}, proj{a_t * d, h}, up{h, fc1 / t}, down{f / t, h};
  // Rowwise-scaled FP8 GEMMs (torch._scaled_mm with per-row / per-column scales) take 1.12x the time of
  // tensorwise ones: median of 12 Llama-3 8B/70B shapes, 1.04-1.42x, measured on an H100 SXM
  // (tests/data/hardware/h100-fp8-rowwise/scaled_mm.csv).
  const double gemm_factor = c.fp8() && c.fp8_recipe == "rowwise" ? 1.12 : 1.0;
  // torchtitan's Llama block (torch_compile set; pytorch/torchtitan@9dec370 torchtitan/models/llama/model.py
  // and models/norms.py, the code of the Dec 2024 benchmark runs): eager runs each op as its own kernel,
  // torch.compile (Inductor) fuses each elementwise chain into one.
  const bool titan = !c.torch_compile.empty(), eager = c.torch_compile == "eager";
  const double cast_factor = eager ? kEagerFp8CastFactor : 1.0;
  // FP8 under sequence parallelism (GptConfig::tp_gathers_fp8): the column-parallel input projections'
  // input (the norm output) and the row-parallel projections' output gradient are quantised on the local
  // sequence shard (Te tokens) and the FP8 shards all-gathered. Per-tensor recipes (delayed, tensorwise) gather
  // only the row-wise FP8 copy, so the local cast writes that copy alone (1 byte per element less than the
  // recipe's cast + transpose) and the transposed copy for the weight-gradient GEMM is made from the gathered
  // FP8 tensor in the backward (tex.fp8_transpose: read 1 + write 1 byte per element; layernorm_linear.py /
  // linear.py backward and base.py grad_output_preprocess at NVIDIA/TransformerEngine@0004dbd0; update_usage
  // (columnwise_usage=True) after the gather at @d0067d0da). MXFP8 / blockwise quantise both copies on the shard
  // and gather the one each GEMM needs (layernorm_linear.py at @d0067d0da: the forward gathers the row-wise
  // data, the backward the saved column-wise data).
  const bool gather8 = c.tp_gathers_fp8();
  const bool per_tensor = c.fp8() && (c.fp8_recipe == "delayed" || c.fp8_recipe == "tensorwise");
  const double cast_local = per_tensor ? cast - 1.0 : cast;
  const double transpose = per_tensor ? 2.0 : 0.0;
  // tp_comm_overlap's SM cost lands on the GEMMs that run beside a communication kernel on SMs
  // (Costs::add_tp_gemm). Transformer Engine's userbuffers defaults (initialize_ub, module/base.py at
  // NVIDIA/TransformerEngine@d0067d0da; the same method lists at @0004dbd0) overlap every TP GEMM of a layer,
  // but by three methods: "ring_exchange" for qkv_fprop / fc1_fprop / proj_dgrad / fc2_dgrad moves the
  // all-gather chunks with the copy engines (use_ce; num_sm 1 and no SM margin for the GEMM at @d0067d0da,
  // UbufP2PCommOverlap sets use_ce = 1 at @0004dbd0, csrc/comm_gemm_overlap.h), so those GEMMs keep their SMs;
  // "pipeline" (proj_fprop, fc2_fprop: the reduce-scatter of the row-parallel output) and "bulk" (qkv_dgrad /
  // fc1_dgrad: the input all-gather beside the input projection's dgrad GEMM; qkv_wgrad / fc1_wgrad: the
  // input-gradient reduce-scatter beside its wgrad GEMM, tp_comm_bulk_wgrad) run 16-SM communication kernels
  // and give the GEMM the rest (set_sm_margin). The row-parallel wgrad GEMMs ("external", beside the
  // ring-exchange dgrad), attention, norms, casts and elementwise kernels pay nothing.
  enum class Tp { Row, Column, ColumnGathered };  // ColumnGathered: the input is the block's SP all-gather
  auto fwd_gemm = [&](Costs& out, G g, Tp tp) {
    if (c.quantized()) {
      const double el = tp == Tp::ColumnGathered && gather8 ? cast_local * double(Te) : cast * double(T);
      out.add(cm, mem(MemoryKernel::Cast, el * double(g.k)), cast_factor);
    }
    const KernelDesc k = KernelDesc::gemm(T, g.n, g.k, gp);
    tp == Tp::Row ? out.add_tp_gemm(cm, k, gemm_factor) : out.add(cm, k, gemm_factor);
  };
  // din / win (optional): also record the input- / weight-gradient GEMM there (the input projections'; the
  // input is the block's gathered input when its width is h). Without them the GEMM is row-parallel, its output
  // gradient all-gathered under sequence parallelism.
  auto bwd_gemm = [&](Costs& out, G g, Costs& w, Costs* din = nullptr, Costs* win = nullptr) {
    const bool input_proj = din != nullptr, bulk_w = input_proj && c.tp_comm_bulk_wgrad;
    const bool ub_d = input_proj && (c.tp_comm_bulk_dgrad || c.tp_comm_overlap_rs_dgrad);  // dgrad beside userbuffers
    if (c.quantized()) {
      if (!input_proj && gather8) {  // output gradient: cast on the shard, transposed after the gather
        out.add(cm, mem(MemoryKernel::Cast, cast_local * double(Te) * double(g.n)), cast_factor);
        if (transpose > 0) out.add(cm, mem(MemoryKernel::Cast, transpose * double(T) * double(g.n)));
      } else {
        out.add(cm, mem(MemoryKernel::Cast, cast * double(T) * double(g.n)), cast_factor);  // output gradient
      }
    }
    const KernelDesc dg = KernelDesc::gemm(T, g.k, g.n, gp);
    ub_d ? out.add_tp_gemm(cm, dg, gemm_factor) : out.add(cm, dg, gemm_factor);  // dgrad
    if (input_proj && gather8 && transpose > 0 && g.k == h) {
      // the re-gathered FP8 input transposed for the wgrad GEMM (runs with it)
      const KernelDesc tr = mem(MemoryKernel::Cast, transpose * double(T) * double(g.k));
      out.add(cm, tr), w.add(cm, tr);
      if (win) win->add(cm, tr);
    }
    const KernelDesc wg = KernelDesc::gemm(g.k, g.n, T, wgp);
    bulk_w ? out.add_tp_gemm(cm, wg, gemm_factor) : out.add(cm, wg, gemm_factor);  // wgrad
    bulk_w ? w.add_tp_gemm(cm, wg, gemm_factor) : w.add(cm, wg, gemm_factor);
    if (din) ub_d ? din->add_tp_gemm(cm, dg, gemm_factor) : din->add(cm, dg, gemm_factor);
    if (win) bulk_w ? win->add_tp_gemm(cm, wg, gemm_factor) : win->add(cm, wg, gemm_factor);
  };
  const auto impl = c.attention_backend == "flash" ? models::AttentionImpl::Flash : models::AttentionImpl::Cudnn;
  // Causal attention of this rank's s/cp queries over the whole sequence: with load-balanced chunks (2 cp
  // pieces, Megatron-Core / TE ring attention) every rank does 1/cp of the causal work. Without context
  // parallelism, and with cp_comm_type all_gather (its queries over the gathered keys), it is one sl x s
  // kernel; a2a runs the same FLOPs as one s x s kernel over a_t/cp heads; the p2p ring splits it into cp
  // kernels (attention_ring).
  // Ring attention (cp_comm_type p2p), as Transformer Engine runs it (AttnFuncWithCPAndKVP2P in
  // transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py, NVIDIA/TransformerEngine
  // @d0067d0da): each rank holds chunks r and 2cp-1-r of the 2cp sequence chunks (sl = s/cp tokens) and runs
  // cp steps, one attention kernel each, while the KV of the next step arrives:
  //   step 0      its own chunks, causal                          sl   queries x sl   keys, causal
  //   steps <= r  all its queries against the first received chunk  sl   x sl/2, not causal
  //   steps >  r  its second query chunk against both received ones sl/2 x sl,   not causal
  // (the cp - 1 off-diagonal steps are priced as the mean of the two kinds: over the ring's ranks half of
  // them are each). Together they do the FLOPs of the single causal sl x s kernel, but as cp kernels with
  // more, shorter CTAs (each paying its fixed cost, models/compute_calibration.hpp), fewer CTAs per kernel
  // to fill the SMs, and a fixed time each. Between steps, the forward merges
  // each step's partial output into an fp32 output with the softmax statistics (flash_attn_fwd_out_correction
  // + flash_attn_fwd_softmax_lse_correction: out_per_step cast to fp32, read, output read and written:
  // 2 + 4 + 4 + 4 + 4 = 18 bytes per output element, two kernels a step); the backward accumulates each step's
  // dq into dq and dk/dv into the dkv buffer that travels the ring (dq.add_, dk.add_, dv.add_: 3 x 2 bytes per
  // element, bf16). The off-diagonal steps touch half of the queries (steps > r) or of the keys (steps <= r):
  // 3/4 of the elements on average.
  // (PyTorch's own context parallelism, context_parallel_rotate_method, is priced apart below.)
  // a2a+p2p (the same function with cp_group = [a2a group, p2p group]): after the all-to-all over the inner
  // group of n ranks each rank holds heads / n heads of n consecutive chunks pairs, s / (cp / n) tokens, and
  // runs the ring above over the cp / n outer ranks with them: cp / n steps of heads / n.
  const std::string cpt = c.cp_impl();
  const bool ring = cp > 1 && (cpt == "p2p" || cpt == "a2a+p2p") && c.context_parallel_rotate_method.empty();
  const std::int64_t ring_n = ring ? c.cp_ring_size() : cp, ring_a2a = ring ? c.cp_a2a_size() : 1;
  const std::int64_t rsl = s / ring_n;  // the ring's local tokens (sl for p2p)
  // Sliding-window attention (window_size (W, 0), on the share of layers window_layers() marks; no context
  // parallelism): each query attends to itself and the W tokens before it, so the flash kernel visits only the
  // band's blocks: W - W^2 / (2 s) keys per query on average (s / 2 for the full causal kernel), priced as a
  // non-causal kernel over that many keys (its FLOPs are the band's; its efficiency that of the band's key
  // length). The layer costs are one per model, so the attention is the layers' mean: (1 - f) x causal +
  // f x windowed, with f the windowed share.
  double win_share = 0, win_keys = 0;
  if (c.window_left >= 0 && c.window_left < s) {
    for (bool wl : c.window_layers()) win_share += wl ? 1.0 : 0.0;
    win_share /= double(c.num_layers);
    const double W = double(c.window_left);
    win_keys = std::max(1.0, W - W * W / (2.0 * double(s)));
  }
  // cp_comm_type a2a: after the all-to-all each rank holds heads / cp heads of the whole sequence, so its kernel
  // is s x s over heads / cp heads (as many CTAs forward as the sl x s form, which all_gather runs, but the
  // backward's key tiles span the whole sequence).
  const bool a2a_heads = cp > 1 && cpt == "a2a" && c.context_parallel_rotate_method.empty();
  auto attention_ring = [&](Costs& out, std::int64_t heads, std::int64_t kv_heads, std::int64_t dh, bool bwd) {
    if (!ring) {
      const KernelDesc full =
          a2a_heads && heads % cp == 0
              ? KernelDesc::attention(b, heads / cp, std::max<std::int64_t>(1, kv_heads / cp), s, s, dh, true, bwd, act, impl)
              : KernelDesc::attention(b, heads, kv_heads, sl, s, dh, true, bwd, act, impl);
      if (win_share <= 0) return out.add(cm, full);
      const KernelDesc win = KernelDesc::attention(b, heads, kv_heads, sl, std::int64_t(std::llround(win_keys)), dh,
                                                   false, bwd, act, impl);
      out.add_time((1.0 - win_share) * cm.kernel_time_s(full) + win_share * cm.kernel_time_s(win));
      out.flops += (1.0 - win_share) * full.flops() + win_share * win.flops();
      out.kernels += 1;
      return;
    }
    heads /= ring_a2a, kv_heads = std::max<std::int64_t>(1, kv_heads / ring_a2a);
    out.add(cm, KernelDesc::attention(b, heads, kv_heads, rsl, rsl, dh, true, bwd, act, impl));
    const KernelDesc lower = KernelDesc::attention(b, heads, kv_heads, rsl, rsl / 2, dh, false, bwd, act, impl);
    const KernelDesc upper = KernelDesc::attention(b, heads, kv_heads, rsl / 2, rsl, dh, false, bwd, act, impl);
    const double steps = double(ring_n - 1);
    out.add_time(0.5 * (cm.kernel_time_s(lower) + cm.kernel_time_s(upper)), steps);
    out.flops += steps * lower.flops();
    out.kernels += int(ring_n - 1);
    const double q_el = double(b) * double(rsl) * double(heads) * double(dh);
    const double kv_el = 2.0 * double(b) * double(rsl) * double(kv_heads) * double(dh);
    for (std::int64_t i = 1; i < ring_n; ++i) {
      if (!bwd) {
        out.add(cm, mem(MemoryKernel::Elementwise, 18.0 * 0.75 * q_el));
        out.add(cm, mem(MemoryKernel::Elementwise, 3.0 * 4.0 * double(b) * double(rsl) * double(heads) * 0.75));
      } else {
        out.add(cm, mem(MemoryKernel::Elementwise, 6.0 * 0.75 * q_el));
        out.add(cm, mem(MemoryKernel::Elementwise, 6.0 * 0.75 * kv_el));
      }
    }
  };
  const double norm = 2.0 * e * double(Te) * double(h);
  // The bias + dropout + residual add after each block (bias_dropout_add; linear biases with LayerNorm, as
  // gpt_model.cpp counts them), forward and backward kernels.
  const BiasDropoutAdd bda = bias_dropout_add(c, e, c.hidden_dropout > 0, c.normalization == "LayerNorm");
  auto add_bda = [&](Costs& out, const std::vector<double>& per_el) {
    for (double bytes : per_el) out.add(cm, mem(MemoryKernel::Elementwise, bytes * double(Te) * double(h)));
  };
  // fp32_residual_connection: each norm reads the fp32 residual stream through a cast to the activation dtype
  // first -- Transformer Engine's LayerNormLinear / LayerNormMLP cast their input (cast_if_needed(inputmat,
  // activation_dtype), transformer_engine/pytorch/module/layernorm_linear.py:186-191 at
  // NVIDIA/TransformerEngine@d0067d0da) and save the cast copy; MambaLayer the same
  // (hidden_states.to(params_dtype), megatron/core/ssm/mamba_layer.py:163 @d98e8a64) -- read 4, write e bytes per
  // element; its backward casts the gradient back (read e, write 4).
  const double norm_cast = c.fp32_residual_connection ? (c.residual_bytes() + e) * double(Te) * double(h) : 0.0;
  const double rope =
      c.position_embedding_type == "rope" && !mixer ? 2.0 * e * double(T) * double((a_t + g_t) * d) : 0.0;
  const double actv = e * double(T) * double(fc1 + f) / double(t);
  // qk_layernorm (GptConfig::qk_layernorm; not with MLA, whose latent norms are priced below): one norm kernel
  // over the local Q heads and one over the K heads, each reading and writing bf16 (2 x the backward).
  const bool qk_norm = c.qk_layernorm && !c.moe.multi_latent_attention && !mixer;
  auto add_qk_norms = [&](Costs& out, double factor) {
    if (!qk_norm) return;
    for (std::int64_t heads : {a_t, g_t}) out.add(cm, mem(MemoryKernel::Norm, factor * 2.0 * e * double(T) * double(heads * d)));
  };
  // add_qkv_bias adds no kernel: Transformer Engine adds a linear's bias in the GEMM's epilogue and computes its
  // gradient with the weight-gradient GEMM (transformer_engine/pytorch/module/layernorm_linear.py at
  // NVIDIA/TransformerEngine@d0067d0da: gemm(..., bias=bias), "wgrad GEMM ... May be fused with bgrad
  // computation"); it costs parameters, gradients and optimizer state (workloads/gpt_model.cpp).
  // squared_relu with linear biases (normalization LayerNorm): Megatron-Core's bias + activation fusion takes
  // gelu / swiglu / quick_geglu only (TransformerConfig.__post_init__ @d98e8a64 raises otherwise), so fc1's
  // bias (skip_bias_add, mlp.py) is added by its own kernel before the compiled relu(x)^2 (read and write the
  // fc1 output); its gradient is a reduction over the tokens (read the output gradient once). GELU's fused
  // bias + activation and the bias-free MLPs have no such kernel.
  const double sq_relu_bias = c.squared_relu && c.normalization == "LayerNorm" ? e * double(T) * double(f) / double(t) : 0.0;
  // The memory-bound kernels of the block, `factor` times their forward bytes (2 in the backward: read the
  // output gradient and the saved input, write the input gradient).
  // Norm: fused (one kernel reading and writing bf16), or torchtitan's eager RMSNorm (norms.py: x.float(),
  // pow(2), mean(-1), + eps, rsqrt, multiply, type_as, * weight): bytes per element 2+4 (upcast), 4+4 (pow),
  // 4 (mean), 4+4 (multiply), 4+2 (downcast), 2+2 (weight), each a streaming kernel priced at the copy rate;
  // + eps and rsqrt touch one fp32 value per row. norm_type fused_rmsnorm (torchtitan's Triton kernel,
  // norms.py TritonFusedRMSNorm) and LayerNorm (nn.LayerNorm): one kernel, as the fused norm.
  auto add_norm = [&](Costs& out, double factor) {
    if (norm_cast > 0 && factor == 1.0) out.add(cm, mem(MemoryKernel::Cast, norm_cast));
    if (!eager || c.norm_type == "fused_rmsnorm" || c.normalization != "RMSNorm") {
      out.add(cm, mem(MemoryKernel::Norm, factor * norm));
      if (norm_cast > 0 && factor != 1.0) out.add(cm, mem(MemoryKernel::Cast, norm_cast));
      return;
    }
    const double el = double(Te) * double(h), rows = double(Te);
    for (double per_el : {6.0, 8.0, 4.0, 8.0, 6.0, 4.0}) out.add(cm, mem(MemoryKernel::Copy, factor * per_el * el));
    for (int k = 0; k < 2; ++k) out.add(cm, mem(MemoryKernel::Copy, factor * 8.0 * rows));
  };
  // RoPE on Q and K: fused (read and write bf16), or torchtitan's eager apply_rotary_emb (xq.float(),
  // view_as_complex, complex multiply by freqs_cis, view_as_real, type_as): per element 2+4, 4+4, 4+2, for Q
  // and K apart.
  // Megatron without apply_rope_fusion (--no-rope-fusion): _apply_rotary_pos_emb_bshd on Q and on K apart
  // (megatron/core/models/common/embeddings/rope_utils.py at NVIDIA/Megatron-LM@d98e8a64): _rotate_half's negation
  // of one half and cat, t * cos, rotate_half(t) * sin, their sum, the cat with the unrotated part -- per element
  // 2, 4, 4, 4, 6, 4 bytes in bf16, each a streaming kernel at the copy rate; its backward the same kernels.
  auto add_megatron_rope = [&](Costs& out) {
    for (std::int64_t heads : {a_t, g_t})
      for (double per_el : {2.0, 4.0, 4.0, 4.0, 6.0, 4.0})
        out.add(cm, mem(MemoryKernel::Copy, per_el * double(T) * double(heads * d)));
  };
  auto add_rope = [&](Costs& out, double factor) {
    if (rope <= 0) return;
    if (!titan && !c.apply_rope_fusion) return add_megatron_rope(out);
    if (!eager) return out.add(cm, mem(MemoryKernel::Elementwise, factor * rope));
    for (std::int64_t heads : {a_t, g_t})
      for (double per_el : {6.0, 8.0, 6.0})
        out.add(cm, mem(MemoryKernel::Copy, factor * per_el * double(T) * double(heads * d)));
  };
  // torchtitan's repeat_kv (expand + reshape before SDPA) copies K and V to every local query head (read the
  // g heads, write the a heads; its backward sums them back): eager and compiled alike. Megatron / TE pass
  // the grouped K and V to the kernel.
  const double repeat = titan && g_t < a_t ? 2.0 * e * double(T) * double((a_t + g_t) * d) : 0.0;
  // SwiGLU in torchtitan's block: the Activation rate is eager PyTorch's silu(g) * up, two kernels
  // (tests/data/hardware/h100-kernels/memory_bound.csv swiglu_fwd, 3 tensors of bytes counted); torch.compile
  // fuses the two into one pointwise kernel streaming the same 3 tensors at the copy rate. Without
  // torch_compile: the fused activation kernel Megatron / TE run (priced as elementwise).
  // Megatron without bias_swiglu_fusion (--no-bias-swiglu-fusion): mlp.py's glu, torch.chunk then
  // activation_func(x_glu) * x_linear -- the same two eager kernels (megatron/core/transformer/mlp.py @d98e8a64).
  const MemoryKernel actv_kind = !titan ? (c.swiglu && !c.bias_swiglu_fusion ? MemoryKernel::Activation : MemoryKernel::Elementwise)
                                 : eager ? MemoryKernel::Activation
                                         : MemoryKernel::Copy;
  // Megatron without bias_gelu_fusion (--no-bias-gelu-fusion) and with linear biases (Megatron turns the fusion off
  // without them, arguments.py): fc1's bias added by its own kernel before F.gelu (read and write fc1's output),
  // its gradient a reduction over the tokens in the backward (mlp.py @d98e8a64).
  const double gelu_bias = !titan && !c.swiglu && !c.bias_gelu_fusion && c.normalization == "LayerNorm" && !c.squared_relu
                               ? e * double(T) * double(f) / double(t)
                               : 0.0;
  LayerCosts L;
  // PyTorch's async TP (tp_comm_overlap_impl symmetric_memory; LayerCosts::tp_fused, the trace arranges the
  // ops in gpt_trace.cpp). What Inductor's micro-pipeline TP pass fuses (torch/_inductor/fx_passes/
  // micro_pipeline_tp.py, pytorch/pytorch@5f65158a; the mid-2024 version @00122fb1, torch.distributed._cuda_p2p,
  // matches the same two patterns for aten.mm): an all-gather with every matmul that takes its result as the
  // left operand (_find_consumer_matmuls), a reduce-scatter with the one matmul whose output is its only input
  // (_find_producer_matmul; the result must have one user). In torchtitan's Llama block (apply_tp in
  // parallelize_llama.py at pytorch/torchtitan@9dec370 and @820504e: SequenceParallel norms, ColwiseParallel
  // wq / wk / wv and w1 / w3, RowwiseParallel wo / w2 with output Shard(1)) that is, forward: the norm output's
  // all-gather with the QKV (w1 / w3) GEMMs, the reduce-scatter of wo's (w2's) output with that GEMM; backward:
  // the all-gather of the output gradient with wo's (w2's) input-gradient GEMM (its weight-gradient GEMM takes
  // the transpose, so the gathered tensor is kept: return_A). The backward reduce-scatter of the input
  // gradient is the sum of the wq / wk / wv (w1 / w3) input gradients, not one matmul's output: not fused
  // (NCCL's). FP8: torchtitan applies torchao's Float8ColwiseParallel / Float8RowwiseParallel only for the
  // tensorwise recipe (enable_float8_tensorwise_tp at @820504e), which gather the FP8 shard straight into
  // _scaled_mm (fused: micro_pipeline_tp's _ScaledMatmul); with the rowwise recipe the gathered bf16 tensor goes
  // into the FP8 cast first, not into a matmul, so its all-gathers stay NCCL's (GptConfig::tp_gathers_fp8
  // tells the two apart); the reduce-scatters of _scaled_mm's bf16 output fuse either way.
  // The fused ops (torch/distributed/_symmetric_memory/__init__.py at pytorch/pytorch@006b161f,
  // _pipelined_multi_all_gather_and_consume / _pipelined_produce_and_all2all): each GEMM runs once per shard
  // (M/t rows, priced at that shape); the local shard is copied into the p2p buffer (a copy of Te x h
  // elements, read and written) between barriers; the sum of the t partial chunks of a reduce-scatter is one
  // streaming kernel (reduce_partials: read t chunks, write one). A symm_mem.barrier is one kernel that
  // signals each peer over NVLink and waits for theirs: priced as one kernel of the compute model (its
  // per-kernel cost; the topology's NVLink hop, 150 ns, is below it).
  const bool symm = c.symm_mem_tp() && t > 1;
  const bool fuse_ag = !c.quantized() || gather8;
  auto fuse = [&](TpFusedGemms& z, bool ag, std::int64_t n, std::int64_t k) {
    if (!symm || (ag && !fuse_ag)) return;
    (ag ? z.ag_full : z.rs_full).add(cm, KernelDesc::gemm(T, n, k, gp), gemm_factor);
    (ag ? z.ag_shard : z.rs_shard).add(cm, KernelDesc::gemm(Te, n, k, gp), gemm_factor);
  };
  if (symm) {
    const double ag_el = gather8 ? fp8_gather_bytes_per_element(c.quant_recipe()) : e;
    for (auto& pair : L.tp_fused)
      for (TpFusedGemms& z : pair) {
        z.barrier.add(cm, mem(MemoryKernel::Copy, 4.0 * double(t)));
        z.shard_copy.add(cm, mem(MemoryKernel::Copy, 2.0 * ag_el * double(Te) * double(h)));
        z.reduce.add(cm, mem(MemoryKernel::Copy, double(t + 1) * e * double(Te) * double(h)));
      }
  }
  // Multi-latent attention (DeepSeek-V2 arXiv:2405.04434 Sec. 2.1): down-projections to the q / kv latents
  // (replicated over TP) with their RMSNorms, up-projections to per-head Q (qk + rope dims), K and V, and
  // the output projection from v_head_dim per head. The attention kernel's FLOPs use head dim (qk + rope +
  // v) / 2, which gives QK^T over qk + rope and PV over v exactly.
  const bool mla = c.moe.multi_latent_attention;
  // Gated DeltaNet widths on this TP rank (GptConfig::experimental_attention_variant).
  const std::int64_t gdn_nv = c.linear_num_value_heads / t, gdn_dv = c.linear_value_head_dim;
  const std::int64_t gdn_qk = (c.linear_num_key_heads / t) * c.linear_key_head_dim, gdn_v = gdn_nv * gdn_dv;
  std::vector<G> attn_in;  // input-side projections of the attention block
  G attn_out = proj;
  std::int64_t fa_heads = a_t, fa_kv = g_t, fa_dh = d;
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
    fa_kv = a_t, fa_dh = dh;
    // The hybrid model's MLA layer ('+') has none (q_layernorm / kv_layernorm IdentityOp in hybrid_stack_spec,
    // megatron/core/models/hybrid/hybrid_layer_specs.py @d98e8a64).
    if (!c.hybrid()) latent_norm = 2.0 * e * double(T) * double(ql + kvl);
  } else if (mamba) {
    // Mamba-2 mixer (MambaMixer, megatron/core/ssm/mamba_mixer.py:281-450 at @d98e8a64): in_proj (the layer's norm and
    // one column-parallel GEMM) to z, x (local d_inner each), B, C (local groups x state each) and dt (local heads);
    // out_proj row-parallel from the local d_inner. Heads and groups split over TP (in_proj_partition_sizes).
    attn_in.push_back(G{h, 2 * (c.mamba_d_inner() / t) + 2 * (c.mamba_num_groups / t) * c.mamba_state_dim +
                               c.mamba_heads() / t});
    attn_out = G{c.mamba_d_inner() / t, h};
  } else if (gdn) {
    // Gated DeltaNet (GatedDeltaNet in megatron/core/ssm/gated_delta_net/gdn.py at NVIDIA/Megatron-LM@d98e8a64):
    // in_proj (TELayerNormColumnParallelLinear: the norm and one column-parallel GEMM) to q, k (local key heads x
    // key dim each), v, z (local value heads x value dim each), beta and alpha (local value heads each); out_proj
    // row-parallel from the local value width. Heads split over TP as Megatron's in_proj_split_sections.
    attn_in.push_back(G{h, gdn_cp_widths(c)[0]});
    attn_out = G{gdn_v, h};
  } else {
    // attention_output_gate: linear_qkv also produces the gate, the query's width (attention.py at @d98e8a64).
    attn_in.push_back(c.attention_output_gate ? G{h, (2 * a_t + 2 * g_t) * d} : qkv);
  }
  add_norm(L.fwd_attn, 1.0);
  add_norm(L.recompute_norm, 1.0);
  for (const G& g : attn_in) {
    fwd_gemm(L.fwd_attn, g, g.k == h ? Tp::ColumnGathered : Tp::Column);
    if (g.k == h) fuse(L.tp_fused[1][0], true, g.n, g.k);
  }
  if (latent_norm > 0) L.fwd_attn.add(cm, mem(MemoryKernel::Norm, latent_norm));
  add_qk_norms(L.fwd_attn, 1.0);
  add_rope(L.fwd_attn, 1.0);
  if (mla) {
    // recompute_modules mla_up_proj (MultiLatentAttention.get_query_key_value_tensors, multi_latent_attention.py
    // :862-991 at NVIDIA/Megatron-LM@d98e8a64): qkv_up_proj_and_rope_apply -- linear_q_up_proj and
    // linear_kv_up_proj (Transformer Engine LayerNormColumnParallelLinear: the latent norm fused with the GEMM) and
    // RoPE on Q and K -- runs under CheckpointWithoutOutput, its outputs (Q, K, V) discarded after the core
    // attention's forward and computed again before its backward.
    if (latent_norm > 0) L.recompute_mla_up.add(cm, mem(MemoryKernel::Norm, latent_norm));
    // Without q_lora_rank, linear_q_proj on the layer's input is inside the checkpoint (gpt.cpp refuses it with
    // TP > 1, whose recompute would gather the input again).
    const bool ql = c.moe.q_lora_rank > 0;
    fwd_gemm(L.recompute_mla_up, attn_in[ql ? 1 : 0], ql ? Tp::Column : Tp::ColumnGathered);
    fwd_gemm(L.recompute_mla_up, attn_in[ql ? 3 : 2], Tp::Column);
    add_rope(L.recompute_mla_up, 1.0);
  }
  if (repeat > 0) L.fwd_attn.add(cm, mem(MemoryKernel::Copy, repeat));
  // PyTorch's context parallelism (context_parallel_rotate_method; torch/distributed/tensor/experimental/
  // _attention.py, _templated_ring_attention and its backward, pytorch/pytorch@0123248a): the rank's s/cp
  // tokens are two load-balanced chunks (enable_load_balance, default True); step 0 runs SDPA causally on
  // the local Q/K/V, each of the cp - 1 other steps on the K/V of another rank without the mask, over half
  // of K/V or half of Q (sl x sl/2: the causal work is 1/cp per rank, as one kernel would do, but in cp
  // kernels). K/V are the heads SDPA receives: torchtitan's repeat_kv has copied them to every query head.
  // Outputs merge in fp32 (convert_to_f32, default True) by log-sum-exp after each step (_SDPAMerger: upcast,
  // out - sigmoid(lse_b - lse) * (out - out_b), lse update, torch.cat for the half-Q steps); the backward
  // accumulates dQ/dK/dV in fp32, concatenates dK and dV for the send and adds the half chunks with
  // torch.cat. Bytes per element of Q (O) / of K (KV), eager: forward 6 (upcast of step 0) + per other step
  // 38 + 4 (half of the steps concatenate 8) + 6 (downcast at the end); backward: zeroed fp32 accumulators
  // 4 per Q, K and V element, per step dK and dV 10 (add) + 8 (concatenate to send) + 4 (half-chunk
  // concatenation, half the steps) and dQ 10 + 4, at the end downcasts 6 each; compiled (Inductor fuses
  // each step's elementwise ops into one kernel): forward 10 per step (read out fp32 and out_b, write out),
  // backward 10 per element of dQ, dK and dV per step. All streaming kernels at the copy rate.
  const bool torch_cp = !c.context_parallel_rotate_method.empty() && cp > 1;
  if (torch_cp) {
    const std::int64_t kvh = titan ? a_t : g_t;
    const double O = double(T) * double(a_t * d), KV = double(T) * double(kvh * d);
    const bool fused_merge = c.torch_compile == "compiled";
    auto copy = [&](Costs& out, double bytes) { out.add(cm, mem(MemoryKernel::Copy, bytes)); };
    const KernelDesc s0f = KernelDesc::attention(b, a_t, kvh, sl, sl, d, true, false, act, impl);
    const KernelDesc s0b = KernelDesc::attention(b, a_t, kvh, sl, sl, d, true, true, act, impl);
    const KernelDesc sif = KernelDesc::attention(b, a_t, kvh, sl, sl / 2, d, false, false, act, impl);
    const KernelDesc sib = KernelDesc::attention(b, a_t, kvh, sl, sl / 2, d, false, true, act, impl);
    // K and V are concatenated for the exchange (torch.cat of the flattened K and V: read and write 2 bytes
    // each) before every step but the last, forward and backward alike: with alltoall each concatenation
    // feeds that step's permute; with allgather only the first feeds the all-gather, and Inductor drops the
    // unused others (dead code in the compiled graph) while eager PyTorch runs them all.
    const double cats = c.context_parallel_rotate_method == "alltoall" || !fused_merge ? double(cp - 1) : 1.0;
    // The ring first makes K and V contiguous (key.contiguous() in _templated_ring_attention and its
    // backward): torchtitan's block hands SDPA transposed views of repeat_kv's output (models/llama/model.py
    // at 9dec370), so eager PyTorch copies both once more; under torch.compile the two pointwise copies fuse
    // into repeat_kv's kernel (priced above).
    const double kv_contiguous = eager ? 2.0 * 2.0 * e * KV : 0.0;
    // Forward: the first concatenation, step 0, the other steps (and the other concatenations).
    if (kv_contiguous > 0) copy(L.cp_fwd_first, kv_contiguous);
    copy(L.cp_fwd_first, 2.0 * 2.0 * e * KV);
    L.cp_fwd_first.add(cm, s0f);
    if (!fused_merge) copy(L.cp_fwd_first, 6.0 * O);
    for (std::int64_t i = 1; i < cp; ++i) {
      L.cp_fwd_rest.add(cm, sif);
      copy(L.cp_fwd_rest, (fused_merge ? 10.0 : 42.0) * O);
      if (double(i) < cats) copy(L.cp_fwd_rest, 2.0 * 2.0 * e * KV);
    }
    if (!fused_merge) copy(L.cp_fwd_rest, 6.0 * O);
    // Backward: K and V made contiguous and concatenated again for the exchange, the accumulators zeroed,
    // step 0, the others.
    if (kv_contiguous > 0) copy(L.cp_bwd_first, kv_contiguous);
    copy(L.cp_bwd_first, 2.0 * 2.0 * e * KV);
    if (!fused_merge) copy(L.cp_bwd_first, 4.0 * (O + 2.0 * KV));
    L.cp_bwd_first.add(cm, s0b);
    copy(L.cp_bwd_first, fused_merge ? 10.0 * (O + 2.0 * KV) : 10.0 * O + 2.0 * 18.0 * KV);
    for (std::int64_t i = 1; i < cp; ++i) {
      L.cp_bwd_rest.add(cm, sib);
      copy(L.cp_bwd_rest, fused_merge ? 10.0 * (O + 2.0 * KV) : 14.0 * O + 2.0 * 22.0 * KV);
      if (double(i) < cats) copy(L.cp_bwd_rest, 2.0 * 2.0 * e * KV);
    }
    if (!fused_merge) copy(L.cp_bwd_rest, 6.0 * (O + 2.0 * KV));
  }
  // attention_output_gate: o * sigmoid(gate) before the output projection, one elementwise kernel reading the
  // attention output and the gate and writing the product (2 x the bytes backward).
  const double out_gate = c.attention_output_gate && !mixer ? 3.0 * e * double(T) * double(a_t * d) : 0.0;
  // The Gated DeltaNet core between in_proj and out_proj (gdn.py forward at @d98e8a64), per kernel:
  //   causal conv1d with SiLU over the q, k, v channels (FLA's causal_conv1d): read and write them;
  //   the gates, g = -exp(A_log) softplus(alpha + dt_bias) in fp32 and beta = sigmoid(beta): read alpha and beta,
  //   write g (4 bytes) and beta;
  //   l2norm of q and k: a norm kernel over them;
  //   the chunked gated delta rule (FLA's chunk_gated_delta_rule): its FLOPs as Megatron-LM counts them
  //   (gdn_layer_flops in megatron/training/training.py at @d98e8a64: 2 x 4 x value heads x value dim^2 per
  //   token -- K K^T, V K^T, S(a(I - b K K^T)) and S Q), priced as four GEMMs of (tokens x local value heads) x
  //   value dim x key dim through the GEMM fit, the backward twice the forward. No kernel of this class is
  //   measured (tests/data has no linear-attention timing): the rate is the GEMM fit's at that shape,
  //   unvalidated, and Megatron's count is its own "best-case" lower bound of the kernel's work;
  //   the gated RMSNorm, norm(o) x SiLU(z): read o and z, write the product.
  // Each memory-bound kernel moves twice its forward bytes backward. No s x s term: the state is per chunk.
  auto add_gdn_core = [&](Costs& out, bool bwd) {
    const double f = bwd ? 2.0 : 1.0;
    const double conv_ch = double(2 * gdn_qk + gdn_v);
    out.add(cm, mem(MemoryKernel::Elementwise, f * 2.0 * e * double(T) * conv_ch));
    out.add(cm, mem(MemoryKernel::Elementwise, f * (2.0 * e + 4.0 + e) * double(T) * double(gdn_nv)));
    out.add(cm, mem(MemoryKernel::Norm, f * 2.0 * e * double(T) * double(2 * gdn_qk)));
    const KernelDesc chunk = KernelDesc::gemm(T * gdn_nv, gdn_dv, c.linear_key_head_dim, act);
    out.add(cm, chunk, bwd ? 8.0 : 4.0);
    out.flops += (bwd ? 7.0 : 3.0) * chunk.flops();
    out.add(cm, mem(MemoryKernel::Norm, f * 3.0 * e * double(T) * double(gdn_v)));
  };
  // A Gated DeltaNet layer under context parallelism (GatedDeltaNet.forward, gdn.py @d98e8a64, with a2a_cp_to_hp /
  // a2a_hp_to_cp in megatron/core/ssm/gated_delta_net/common.py): in_proj's output (q, k, v, z, beta, alpha: W =
  // 2 qk + 2 v + 2 value heads per TP rank) goes by one all-to-all from sequence to head sharding, the conv1d and
  // delta rule run over the whole sequence for value heads / CP, and the gated norm's output (v) comes back by a
  // second all-to-all before out_proj. The core's kernels are those at CP 1 (tokens x heads per rank unchanged:
  // cp times the tokens, 1 / cp of the heads). Around the exchanges, copies (read + write): the head permutation
  // (index_select, so one unsectioned exchange serves every section) and all_to_all_sp2hp's split + cat before the
  // first; attention's load-balanced chunk order undone after it and redone before the second
  // (_undo / _redo_attention_load_balancing); all_to_all_hp2sp's split + cat after the second. The backward runs
  // the gradients' copies, as many bytes. LayerCosts::mamba_* hold the split (GDN has no Mamba fields of its own).
  auto add_gdn = [&](Costs& out, bool bwd) {
    if (cp == 1) return add_gdn_core(out, bwd);
    Costs& pre = bwd ? L.mamba_bwd_pre : L.mamba_fwd_pre;
    Costs& scan = bwd ? L.mamba_bwd_scan : L.mamba_fwd_scan;
    Costs rest;
    Costs& first = bwd ? pre : rest;  // the output side: after the second exchange forward, before it backward
    Costs& last = bwd ? rest : pre;   // the input side
    auto copy = [&](Costs& part, double bytes) {
      out.add(cm, mem(MemoryKernel::Copy, bytes));
      part.add(cm, mem(MemoryKernel::Copy, bytes));
    };
    const auto w = gdn_cp_widths(c);
    const double w_in = 2.0 * e * double(T) * double(w[0]), w_out = 2.0 * e * double(T) * double(w[1]);
    copy(last, w_in);
    copy(last, w_in);
    copy(scan, w_in);
    Costs core;
    add_gdn_core(core, bwd);
    out += core, scan += core;
    copy(scan, w_out);
    copy(first, w_out);
  };
  auto add_attention = [&](Costs& out, bool bwd) {
    if (gdn) return add_gdn(out, bwd);
    if (mamba)
      return add_mamba_core(out, c, cm, bwd, bwd ? L.mamba_bwd_pre : L.mamba_fwd_pre, bwd ? L.mamba_bwd_scan : L.mamba_fwd_scan);
    if (!torch_cp) return attention_ring(out, fa_heads, fa_kv, fa_dh, bwd);
    out += bwd ? L.cp_bwd_first : L.cp_fwd_first;
    out += bwd ? L.cp_bwd_rest : L.cp_fwd_rest;
  };
  const Costs fwd_in = L.fwd_attn;  // a Mamba block's kernels before its CP exchanges (LayerCosts::mamba_fwd_pre)
  add_attention(L.fwd_attn, false);
  if (mamba || (gdn && cp > 1)) L.mamba_fwd_pre += fwd_in;
  if (out_gate > 0) L.fwd_attn.add(cm, mem(MemoryKernel::Elementwise, out_gate));
  fwd_gemm(L.fwd_attn, attn_out, Tp::Row);
  fuse(L.tp_fused[1][0], false, attn_out.n, attn_out.k);
  add_bda(L.fwd_attn, bda.fwd);
  // The parallel block (GptConfig::parallel_block): fc1 reads the attention's normalised input, one norm a layer.
  const bool mlp_norm = !c.parallel_block();
  if (mlp_norm) add_norm(L.fwd_mlp, 1.0);
  fwd_gemm(L.fwd_mlp, up, Tp::ColumnGathered);
  fuse(L.tp_fused[0][0], true, up.n, up.k);
  if (sq_relu_bias > 0) L.fwd_mlp.add(cm, mem(MemoryKernel::Elementwise, 2.0 * sq_relu_bias));
  if (gelu_bias > 0) L.fwd_mlp.add(cm, mem(MemoryKernel::Elementwise, 2.0 * gelu_bias));
  L.fwd_mlp.add(cm, mem(actv_kind, actv));
  fwd_gemm(L.fwd_mlp, down, Tp::Row);
  fuse(L.tp_fused[0][0], false, down.n, down.k);
  // recompute_modules mlp (TransformerLayer._run_mlp, transformer_layer.py:992-1012 @d98e8a64): the dense MLP
  // module under tensor_parallel.checkpoint / te_checkpoint -- its forward again before its backward; the
  // bias-dropout-add after it is outside the checkpoint.
  L.recompute_mlp = L.fwd_mlp;
  add_bda(L.fwd_mlp, bda.fwd);
  // Backward: memory-bound kernels move twice their forward bytes (read the output gradient and the saved
  // input, write the input gradient).
  add_bda(L.bwd_mlp, bda.bwd);
  bwd_gemm(L.bwd_mlp, down, L.wgrad_mlp);
  fuse(L.tp_fused[0][1], true, down.k, down.n);  // the input-gradient GEMM (M x k x n)
  L.bwd_mlp.add(cm, mem(actv_kind, 2.0 * actv));
  if (sq_relu_bias > 0) L.bwd_mlp.add(cm, mem(MemoryKernel::Elementwise, sq_relu_bias));
  if (gelu_bias > 0) L.bwd_mlp.add(cm, mem(MemoryKernel::Elementwise, gelu_bias));
  bwd_gemm(L.bwd_mlp, up, L.wgrad_mlp, &L.dgrad_mlp_in, &L.wgrad_mlp_in);
  if (mlp_norm) add_norm(L.bwd_mlp, 2.0);
  add_bda(L.bwd_attn, bda.bwd);
  bwd_gemm(L.bwd_attn, attn_out, L.wgrad_attn);
  fuse(L.tp_fused[1][1], true, attn_out.k, attn_out.n);
  if (out_gate > 0) L.bwd_attn.add(cm, mem(MemoryKernel::Elementwise, 2.0 * out_gate));
  const Costs bwd_out = L.bwd_attn;  // out_proj's backward (LayerCosts::mamba_bwd_pre)
  add_attention(L.bwd_attn, true);
  if (mamba || (gdn && cp > 1)) L.mamba_bwd_pre += bwd_out, L.mamba_bwd_pre_w = L.wgrad_attn;
  if (repeat > 0) L.bwd_attn.add(cm, mem(MemoryKernel::Copy, repeat));
  if (titan) add_rope(L.bwd_attn, 2.0);
  else if (rope > 0 && !c.apply_rope_fusion) add_megatron_rope(L.bwd_attn);
  else if (rope > 0) L.bwd_attn.add(cm, mem(MemoryKernel::Elementwise, rope));
  add_qk_norms(L.bwd_attn, 2.0);
  if (latent_norm > 0) L.bwd_attn.add(cm, mem(MemoryKernel::Norm, 2.0 * latent_norm));
  for (auto it = attn_in.rbegin(); it != attn_in.rend(); ++it)
    bwd_gemm(L.bwd_attn, *it, L.wgrad_attn, &L.dgrad_attn_in, &L.wgrad_attn_in);
  add_norm(L.bwd_attn, 2.0);
  if (c.selective_ac_option == "op") {
    // torchtitan's per-op selective checkpointing (layer_activation_bytes_op_sac): the flash / efficient
    // SDPA output is saved, so attention is not recomputed; the backward recomputes what was not saved --
    // the two norms, RoPE, the 2nd, 4th and 6th matmuls in forward order (wk, wo, w3 of a Llama block) and
    // the SwiGLU product -- before the layer's backward.
    add_norm(L.recompute_attn_extra, 1.0);
    fwd_gemm(L.recompute_attn_extra, G{h, g_t * d}, Tp::ColumnGathered);
    add_rope(L.recompute_attn_extra, 1.0);
    if (repeat > 0) L.recompute_attn_extra.add(cm, mem(MemoryKernel::Copy, repeat));
    fwd_gemm(L.recompute_attn_extra, attn_out, Tp::Row);
    add_bda(L.recompute_attn_extra, bda.fwd);
    add_norm(L.bwd_mlp, 1.0);
    fwd_gemm(L.bwd_mlp, G{h, f / t}, Tp::ColumnGathered);
    L.bwd_mlp.add(cm, mem(actv_kind, actv));
    // cuDNN attention (attention_backend fused) is not in the save list (only the flash and efficient SDPA
    // ops are; torchtitan _save_list): its forward runs again before its backward.
    if (c.attention_backend == "fused") add_attention(L.recompute_attn_extra, false);
  } else if (!mixer) {
    // Selective recompute (Megatron-Core "core_attn"): the attention forward again before its backward. A Gated
    // DeltaNet layer has no core attention to checkpoint (gdn.py checkpoints only its gated norm, with
    // recompute_modules naming it, which is not modelled): nothing.
    add_attention(L.recompute_attn_extra, false);
  }
  return L;
}

namespace {
// The router's load-balancing loss, z-loss and expert bias, on the rank's Te tokens x E experts (fp32 scores),
// as Megatron-Core runs them in training (megatron/core/transformer/moe/router.py TopKRouter.routing and
// moe_utils.py @d98e8a64; bytes per kernel as in PyTorch's eager kernels, the rates of the memory-bound model).
// Forward kernels go to the router step (pre_f), backward ones to the router's backward (pre_b). The all-reduce of
// the tokens per expert over the TP x CP group is a collective of the trace (gpt_trace.cpp, `.moe.aux.ar`).
void router_losses(MoeCosts& M, const models::ComputeModel& cm, const GptConfig& c, double Te) {
  using models::KernelDesc;
  using models::MemoryKernel;
  const auto& me = c.moe;
  const Precision act = act_precision(c);
  const double E = double(me.num_experts), TE = Te * E;
  auto add = [&](Costs& out, MemoryKernel kind, double bytes) { out.add(cm, KernelDesc::memory(kind, bytes, act)); };
  // Ops on an E-long vector or a scalar: one launch each.
  auto small = [&](Costs& out, int n) {
    for (int i = 0; i < n; ++i) add(out, MemoryKernel::Elementwise, 3.0 * 4.0 * E);
  };
  // Expert bias (aux-loss-free balancing): unfused, scores + bias before torch.topk and a gather of the k scores
  // per token (topk_routing_with_score_function); fused, TE's kernel takes the bias. Then _apply_expert_bias
  // counts the routing map per expert into local_tokens_per_expert (one compiled reduction + add).
  if (me.moe_router_enable_expert_bias) {
    if (!me.moe_router_fusion) {
      add(M.pre_f, MemoryKernel::Elementwise, 2.0 * 4.0 * TE);
      add(M.pre_f, MemoryKernel::Elementwise, 3.0 * 4.0 * Te * double(me.moe_router_topk));
    }
    add(M.pre_f, MemoryKernel::Elementwise, TE);
  }
  if (me.aux_loss_on()) {
    // compute_routing_scores_for_aux_loss: fused, TE's fused_compute_score_for_moe_aux_loss (one pass over the
    // logits, the softmax rate); unfused, the score function and torch.topk (the measured router kernel) and the
    // routing map built as zeros_like(logits).int().scatter(1, top, 1).bool() (four kernels).
    if (me.moe_router_fusion) {
      add(M.pre_f, MemoryKernel::Softmax, 4.0 * TE);
    } else {
      add(M.pre_f, MemoryKernel::TopK, 4.0 * TE);
      add(M.pre_f, MemoryKernel::Elementwise, 4.0 * TE);
      add(M.pre_f, MemoryKernel::Elementwise, 2.0 * 4.0 * TE);
      add(M.pre_f, MemoryKernel::Elementwise, 3.0 * 4.0 * Te * double(me.moe_router_topk));
      add(M.pre_f, MemoryKernel::Elementwise, 5.0 * TE);
    }
    // routing_map.sum(dim=0) (get_tokens_per_expert_and_token_count), then switch_load_balancing_loss_func:
    // fused, TE's fused_moe_aux_loss over the scores; unfused, scores.sum(dim=0) and three E-long ops. The
    // loss is attached to the probabilities (MoEAuxLossAutoScaler) and logged (a division and the tracker's add);
    // seq_aux_loss divides by the micro-batch size once more.
    add(M.pre_f, MemoryKernel::Elementwise, TE);
    add(M.pre_f, MemoryKernel::Elementwise, 4.0 * TE);
    small(M.pre_f, (me.moe_router_fusion ? 0 : 3) + 2 + (me.moe_router_load_balancing_type == "seq_aux_loss" ? 1 : 0));
    // Backward: the autoscaler's scaled ones (two), the loss's scalar and E-long steps (fused: none), the
    // gradient of the summed scores broadcast over the tokens through the score function's backward (fused: the
    // aux-loss kernel's backward writes it, then the score kernel's backward), and its sum into the logits'
    // gradient (the logits feed the routing too).
    small(M.pre_b, 2 + (me.moe_router_fusion ? 0 : 2));
    if (me.moe_router_fusion) add(M.pre_b, MemoryKernel::Elementwise, 4.0 * TE);
    add(M.pre_b, MemoryKernel::Softmax, 2.0 * 4.0 * TE);
    add(M.pre_b, MemoryKernel::Elementwise, 3.0 * 4.0 * TE);
  }
  if (me.moe_z_loss_coeff > 0) {
    // z_loss_func: torch.logsumexp over the experts (amax, subtract, exp_, sum over T x E; masked_fill, log_, add_
    // on T), square, mean, the coefficient; attached and logged as the aux loss. Backward: the scalar steps,
    // the square's, then logsumexp's gradient (subtract, exp, multiply over T x E) summed into the logits'.
    add(M.pre_f, MemoryKernel::Elementwise, 4.0 * TE);
    add(M.pre_f, MemoryKernel::Elementwise, 2.0 * 4.0 * TE);
    add(M.pre_f, MemoryKernel::Elementwise, 2.0 * 4.0 * TE);
    add(M.pre_f, MemoryKernel::Elementwise, 4.0 * TE);
    small(M.pre_f, 3 + 3 + 2);
    small(M.pre_b, 2 + 1 + 2 + 1);
    for (int i = 0; i < 3; ++i) add(M.pre_b, MemoryKernel::Elementwise, 2.0 * 4.0 * TE);
    add(M.pre_b, MemoryKernel::Elementwise, 3.0 * 4.0 * TE);
  }
}

// Without gradient-accumulation fusion (Megatron-LM's --no-gradient-accumulation-fusion) the weight-gradient GEMMs
// write a bf16 gradient instead of accumulating into the fp32 main gradient, and Megatron's DDP adds it in the
// parameter's backward hook, one kernel per parameter tensor: param.main_grad.add_(param.grad.data)
// (megatron/core/distributed/distributed_data_parallel.py _make_backward_post_hook; the linears'
// LinearWithGradAccumulationAndAsyncCommunication / Transformer Engine's fuse_wgrad_accumulation otherwise, at
// NVIDIA/Megatron-LM@d98e8a64). Each add reads the main gradient and the bf16 gradient and writes the main gradient:
// 2 g + 2 bytes per element, g = 4 with fp32 main gradients (grad_reduce_in_fp32), else 2. Priced in every backward
// of a micro-batch, in the weight-gradient part of each block (so the split-backward schedules move it with the
// GEMMs): the attention block's parameters (with its norm), the MLP's (dense; or the MoE layer's router, shared
// expert, latent projections and local experts, in the router's backward); with `embedding`, only the embedding
// and the output layer (called once the MTP costs, which reuse their backward, are built).
// Tensors per block: QKV, projection, norm (+ QK norms, + QKV bias); MLA's eight; a Mamba or Gated DeltaNet
// mixer eight; fc1, fc2, norm (+ their biases with LayerNorm); MoE router, norm, fc1 and fc2 per local expert
// (+ the shared expert's two or three, the latent projections' two).
void add_grad_accumulation(GptStepKernels& K, const GptConfig& c, const models::ComputeModel& cm, bool embedding) {
  using models::MemoryKernel;
  const Precision act = act_precision(c);
  const double bytes = 2.0 * (c.grad_reduce_in_fp32 ? 4.0 : 2.0) + 2.0;
  auto acc = [&](double elements, int tensors) {
    Costs a;
    for (int i = 0; i < tensors; ++i) a.add(cm, KernelDesc::memory(MemoryKernel::Elementwise, bytes * elements / tensors, act));
    return a;
  };
  auto both = [](Costs& bwd, Costs& w, const Costs& a) { bwd += a, w += a; };
  if (embedding) {
    // The embedding and the output layer: one add each per micro-batch, also where the MTP layers use them again
    // (autograd sums a parameter's uses before its accumulation hook runs), so priced after the MTP costs are
    // built from embed_bwd / logits_bwd.
    K.embed_bwd += acc(embedding_params_per_rank(c), c.position_embedding_type == "learned_absolute" ? 2 : 1);
    if (last_stage_has_output(c))
      both(K.logits_bwd, K.logits_wgrad,
           acc(double(c.padded_vocab_size) * double(c.hidden_size) / double(c.tensor_model_parallel_size), 1));
    return;
  }
  const auto& e = c.moe;
  const bool bias = c.normalization == "LayerNorm";
  const int attn_tensors = e.multi_latent_attention ? 8 : 3 + (c.qk_layernorm ? 2 : 0) + (c.add_qkv_bias ? 1 : 0);
  const Costs attn = acc(layer_params_moe_model(c, false, false, '*'), attn_tensors);
  const Costs mlp = acc(layer_params_moe_model(c, false, false, '-'), 3 + (bias ? 2 : 0));
  const Costs mixer_gdn = acc(layer_params_moe_model(c, false, true, 'G'), 8);
  auto dense = [&](LayerCosts& L, const Costs& a, bool with_mlp) {
    both(L.bwd_attn, L.wgrad_attn, a);
    if (with_mlp) both(L.bwd_mlp, L.wgrad_mlp, mlp);
  };
  if (K.hybrid_layers.empty()) {
    dense(K.layer, attn, true);
    if (K.has_bf16_layers()) dense(K.layer_bf16, attn, true);
    if (!K.gdn_layers.empty()) dense(K.layer_gdn, mixer_gdn, true), dense(K.layer_gdn_bf16, mixer_gdn, true);
    for (auto& [type, L] : K.layer_of_cp) dense(L, attn, true);
  } else {
    dense(K.layer_attn_only, attn, false);
    for (auto& [type, L] : K.layer_of_cp) dense(L, attn, false);
    dense(K.layer_mamba, acc(layer_params_moe_model(c, false, false, 'M'), 8), false);
    if (!K.gdn_layers.empty()) dense(K.layer_gdn, mixer_gdn, false);
    both(K.layer_mlp_only.bwd_mlp, K.layer_mlp_only.wgrad_mlp, mlp);
  }
  if (e.enabled()) {
    const std::int64_t local = e.num_experts / e.expert_model_parallel_size;
    const int tensors = 2 + 2 * static_cast<int>(local) +
                        (e.moe_shared_expert_intermediate_size > 0 ? 2 + (e.moe_shared_expert_gate ? 1 : 0) : 0) +
                        (e.moe_latent_size ? 2 : 0);
    const Costs m = acc(layer_params_moe_model(c, true, false, 'E') + expert_params_per_gpu(c), tensors);
    for (MoeCosts& M : K.moe) both(M.pre_b, M.pre_w, m);
  }
}
}  // namespace

MoeCosts moe_costs(const GptConfig& c, const models::ComputeModel& cm, const MoeLayerLoad& ld, double T_local) {
  using models::MemoryKernel;
  const Precision act = act_precision(c);
  // The expert, shared-expert and latent-projection GEMMs in the run's GEMM precision: FP8, or NVFP4 under
  // precision fp4 (Transformer Engine's TEGroupedLinear / TELinear quantise all three GEMMs of each, as the dense
  // linears: layer_costs_fused), with the recipe's quantisation pass over each GEMM input.
  const Precision gp = c.fp8() ? Precision::FP8 : c.fp4() ? Precision::FP4 : act;
  const Precision wgp = c.bf16_wgrad() ? act : gp;  // the weight-gradient GEMMs (fp8_wgrad false: bf16)
  const bool quant = c.quantized();
  const auto& me = c.moe;
  const std::int64_t h = c.hidden_size, E = me.num_experts, k = me.moe_router_topk, t = c.tensor_model_parallel_size;
  const std::int64_t ep = me.expert_model_parallel_size, El = E / ep, etp = c.etp(), F = c.moe_ffn();
  const std::int64_t fc1 = c.swiglu ? 2 * F : F;
  // Routed width: hidden_size, or moe_latent_size under latent MoE (GptConfig::moe_width).
  const std::int64_t rw = c.moe_width(), L = me.moe_latent_size;
  const std::int64_t Tl = std::max<std::int64_t>(1, std::llround(T_local));
  // Routed slots per token: topk, plus moe_router_padding_for_quantization's padded slots (moe_layer_load).
  double slot_share = 1.0;
  if (me.moe_router_padding_for_quantization) {
    slot_share = 0.0;
    for (double r : ld.recv_share) slot_share += r;
  }
  const double e = 2.0, slots = double(Tl) * double(k) * slot_share;
  auto mem = [&](MemoryKernel kind, double bytes) { return KernelDesc::memory(kind, bytes, act); };
  const double cast = fp8_cast_bytes_per_element(c.quant_recipe());
  MoeCosts M;
  // Norm, router GEMM (h -> E logits), softmax + top-k over T x E fp32 scores, permutation of the routed
  // slots (read + write k x h per token). Byte counts as measured in tests/data/hardware/h200-kernels/
  // kernels2.csv (router_softmax_topk T*E*4, moe_permute_gather 2*T*k*h*2, moe_unpermute_index_add 3*T*k*h*2).
  const double Te = double(Tl);
  // Latent MoE (moe_layer.py @d98e8a64): fc1_latent_proj (h -> moe_latent_size) before the dispatch and
  // fc2_latent_proj (latent -> h) after the combine, TELinear with parallel_mode "duplicated": whole GEMMs on the
  // rank's tokens, in the run's GEMM precision. Forward, then input gradient + weight gradient.
  // One dense linear of `rows` tokens (kin -> nout) in the GEMM precision: the quantisation pass over its input
  // (forward) or output gradient (backward), then the forward GEMM, or the input- and weight-gradient GEMMs
  // (the weight gradient also recorded in `wgrad`, for the split-backward schedules).
  auto linear = [&](Costs& out, std::int64_t rows, std::int64_t kin, std::int64_t nout, bool fwd, Costs* wgrad) {
    if (quant) out.add(cm, mem(MemoryKernel::Cast, cast * double(rows) * double(fwd ? kin : nout)));
    if (fwd) return out.add(cm, KernelDesc::gemm(rows, nout, kin, gp));
    out.add(cm, KernelDesc::gemm(rows, kin, nout, gp));
    out.add(cm, KernelDesc::gemm(kin, nout, rows, wgp));
    wgrad->add(cm, KernelDesc::gemm(kin, nout, rows, wgp));
  };
  auto latent = [&](Costs& out, std::int64_t kin, std::int64_t nout, bool fwd, Costs* wgrad) {
    linear(out, Tl, kin, nout, fwd, wgrad);
  };
  // fp32_residual_connection: the norm's input cast (layer_costs_fused's norm_cast), forward and backward.
  const double norm_cast = c.fp32_residual_connection ? (c.residual_bytes() + e) * Te * double(h) : 0.0;
  if (norm_cast > 0) M.pre_f.add(cm, mem(MemoryKernel::Cast, norm_cast));
  M.pre_f.add(cm, mem(MemoryKernel::Norm, 2.0 * e * Te * double(h)));
  if (me.moe_input_jitter_eps > 0) {
    // Input jitter: Uniform(1 - eps, 1 + eps).rsample in the input's dtype -- the scalar high - low, torch.rand
    // (writes), the scaling and the shift (read and write each) -- then input * noise; backward: the gradient
    // times the noise (torch/distributions/uniform.py rsample; router.py apply_input_jitter @d98e8a64).
    const double n = double(Tl) * double(h);
    M.pre_f.add(cm, mem(MemoryKernel::Elementwise, 3.0 * e));
    M.pre_f.add(cm, mem(MemoryKernel::Elementwise, e * n));
    M.pre_f.add(cm, mem(MemoryKernel::Elementwise, 2.0 * e * n));
    M.pre_f.add(cm, mem(MemoryKernel::Elementwise, 2.0 * e * n));
    M.pre_f.add(cm, mem(MemoryKernel::Elementwise, 3.0 * e * n));
    M.pre_b.add(cm, mem(MemoryKernel::Elementwise, 3.0 * e * n));
  }
  M.pre_f.add(cm, KernelDesc::gemm(Tl, E, h, act));
  // The score function and top-k: unfused (Megatron's default, topk_routing_with_score_function in
  // megatron/core/transformer/moe/moe_utils.py @d98e8a64) torch's softmax / sigmoid and torch.topk, at the rate
  // measured for them (MemoryKernel::TopK: 72-75 GB/s on an H200, tests/data/hardware/h200-kernels/kernels2.csv
  // router_softmax_topk); with moe_router_fusion Transformer Engine's fused_topk_with_score_function, one warp per
  // token reading the logits once (transformer_engine/common/fused_router/fused_topk_with_score_function.cu
  // @d0067d0da), priced as one softmax pass.
  const double TE = Te * double(E);
  // moe_router_force_load_balancing: RandomSTE replaces the logits by logits.clone().normal_() before the
  // routing (moe_utils.py apply_random_logits @d98e8a64); its backward passes the gradient through.
  if (me.moe_router_force_load_balancing) {
    M.pre_f.add(cm, mem(MemoryKernel::Copy, 2.0 * 4.0 * TE));
    M.pre_f.add(cm, mem(MemoryKernel::Elementwise, 4.0 * TE));
  }
  M.pre_f.add(cm, mem(me.moe_router_fusion ? MemoryKernel::Softmax : MemoryKernel::TopK, 4.0 * TE));
  router_losses(M, cm, c, Te);
  if (L) latent(M.pre_f, h, L, true, nullptr);
  M.pre_f.add(cm, mem(MemoryKernel::Copy, 2.0 * e * slots * double(rw)));
  // Unpermute: gather-reduce of the k slots per token weighted by the router probabilities; without
  // moe_permute_fusion the probability scaling is a separate elementwise pass over the slots.
  M.post_f.add(cm, mem(MemoryKernel::Elementwise, 3.0 * e * slots * double(rw)));
  if (!me.moe_permute_fusion) M.post_f.add(cm, mem(MemoryKernel::Elementwise, 2.0 * e * slots * double(rw)));
  if (L) latent(M.post_f, L, h, true, nullptr);
  // The residual add (read the output and the residual, write the sum; the residual and the sum in the residual
  // stream's dtype, GptConfig::residual_bytes): priced without dropout or bias, fused or not (the same one add).
  const double er = c.fp32_residual_connection ? c.residual_bytes() : e;
  M.post_f.add(cm, mem(MemoryKernel::Elementwise, (e + 2.0 * er) * Te * double(h)));
  M.pre_b.add(cm, mem(MemoryKernel::Copy, 2.0 * e * slots * double(rw)));
  if (L) latent(M.pre_b, h, L, false, &M.pre_w);
  M.pre_b.add(cm, mem(MemoryKernel::Softmax, 2.0 * 4.0 * Te * double(E)));
  // moe_router_dtype fp32 (RouterGatingLinearFunction, megatron/core/transformer/moe/moe_utils.py @d98e8a64):
  // the forward is Transformer Engine's bf16 GEMM with an fp32 output (the fp32 scores priced above); the
  // backward casts the saved input and the weight to fp32 (read 2, write 4 bytes per element), runs both GEMMs
  // on fp32 operands -- TF32 tensor cores: cublaslt_gemm.cu at NVIDIA/TransformerEngine@d0067d0da picks
  // CUBLAS_COMPUTE_32F_FAST_TF32 for pure FP32 GEMMs -- and casts the input gradient back (read 4, write 2).
  const bool fp32_router = me.moe_router_dtype == "fp32";
  const Precision rp = fp32_router ? Precision::TF32 : act;
  const KernelDesc router_cast = KernelDesc::memory(MemoryKernel::Cast, 6.0 * Te * double(h), Precision::FP32);
  if (fp32_router) M.pre_b.add(cm, router_cast);
  M.pre_b.add(cm, KernelDesc::gemm(Tl, h, E, rp));
  M.pre_b.add(cm, KernelDesc::gemm(h, E, Tl, rp));
  M.pre_w.add(cm, KernelDesc::gemm(h, E, Tl, rp));
  if (fp32_router) M.pre_b.add(cm, router_cast);
  M.pre_b.add(cm, mem(MemoryKernel::Norm, 2.0 * 2.0 * e * Te * double(h)));
  if (norm_cast > 0) M.pre_b.add(cm, mem(MemoryKernel::Cast, norm_cast));
  M.post_b.add(cm, mem(MemoryKernel::Elementwise, 2.0 * 3.0 * e * Te * double(h)));
  // fc1_latent_proj's weight gradient leaves with the router's in the split-backward schedules (pre_w);
  // fc2_latent_proj's stays in the unpermute step (not split: Megatron runs it on the communication stream).
  Costs post_w;
  if (L) latent(M.post_b, L, h, false, &post_w);
  M.post_b.add(cm, mem(MemoryKernel::Elementwise, 3.0 * e * slots * double(rw)));
  if (!me.moe_permute_fusion) M.post_b.add(cm, mem(MemoryKernel::Elementwise, 2.0 * e * slots * double(rw)));
  // Experts: per local expert m_e rows (tokens after dropping/padding, gathered over ETP), fc1 h -> fc1/etp,
  // activation, fc2 F/etp -> h. moe_grouped_gemm: one grouped GEMM per projection with the mean rows per
  // local expert; otherwise one GEMM per expert (sequential loop, SequentialMLP).
  auto experts = [&](const std::vector<double>& rows, Costs& f, Costs& bw, Costs& w) {
    double total = 0;
    for (double r : rows) total += r;
    // The quantisation of a projection's input (forward) or output gradient (backward): TEGroupedLinear splits it
    // per local expert and quantises the splits with tex.split_quantize (transformer_engine/pytorch/module/
    // grouped_linear.py:820 and :1315, _split_quantization.py:226-232 at NVIDIA/TransformerEngine@d0067d0da), whose
    // multi_tensor_quantize_impl (pytorch/csrc/extensions/cast.cpp:894-941) runs one fused kernel for delayed
    // scaling (nvte_multi_cast_transpose) and one quantize kernel per split otherwise (current scaling, blockwise,
    // mxfp8); NVFP4 has one fused grouped kernel when the inner dimension is a multiple of 128 (split_quantize,
    // cast.cpp:1895-2040: split_quantize_nvfp4_impl). The bytes are the same either way (the recipe's per-element
    // bytes over all rows); per-split kernels add their launches. Without moe_grouped_gemm each expert's linear
    // quantises its own input. Not the CuTe DSL fused grouped MLP (Transformer Engine's ops/fused/grouped_mlp.py,
    // Megatron's use_transformer_engine_op_fuser with NVTE_CUTEDSL_FUSED_GROUPED_MLP on sm100), which folds the
    // activation and fc2's input quantisation into fc1's epilogue.
    auto quantise = [&](Costs& out, std::int64_t width) {
      const std::string& r = c.quant_recipe();
      const bool one_kernel = me.moe_grouped_gemm && (r == "delayed" || (r == "nvfp4" && width % 128 == 0));
      if (one_kernel) return out.add(cm, mem(MemoryKernel::Cast, cast * total * double(width)));
      for (double r_e : rows)
        if (r_e > 0) out.add(cm, mem(MemoryKernel::Cast, cast * r_e * double(width)));
    };
    auto proj = [&](std::int64_t kin, std::int64_t nout, bool fwd) {
      Costs& out = fwd ? f : bw;
      if (quant) quantise(out, fwd ? kin : nout);
      if (me.moe_grouped_gemm) {
        const std::int64_t m = std::max<std::int64_t>(1, std::llround(total / double(rows.size())));
        if (fwd) {
          out.add(cm, KernelDesc::grouped_gemm(El, m, nout, kin, gp));
        } else {
          out.add(cm, KernelDesc::grouped_gemm(El, m, kin, nout, gp));   // dgrad
          out.add(cm, KernelDesc::grouped_gemm(El, kin, nout, m, wgp));   // wgrad
          w.add(cm, KernelDesc::grouped_gemm(El, kin, nout, m, wgp));
        }
      } else {
        for (double r : rows) {
          const std::int64_t m = std::max<std::int64_t>(1, std::llround(r));
          if (fwd) {
            out.add(cm, KernelDesc::gemm(m, nout, kin, gp));
          } else {
            out.add(cm, KernelDesc::gemm(m, kin, nout, gp));
            out.add(cm, KernelDesc::gemm(kin, nout, m, wgp));
            w.add(cm, KernelDesc::gemm(kin, nout, m, wgp));
          }
        }
      }
    };
    const double actv = e * total * double(fc1 + F) / double(etp);
    // The experts' activation: the fused bias + SwiGLU kernel, or without bias_swiglu_fusion the MLP's eager glu
    // (the dense layer's rule, layer_costs_fused).
    const MemoryKernel ak = c.swiglu && !c.bias_swiglu_fusion && c.torch_compile.empty() ? MemoryKernel::Activation
                                                                                         : MemoryKernel::Elementwise;
    proj(rw, fc1 / etp, true);
    f.add(cm, mem(ak, actv));
    proj(F / etp, rw, true);
    proj(F / etp, rw, false);
    bw.add(cm, mem(ak, 2.0 * actv));
    // recompute_modules moe_act: the activation's forward again before its backward.
    if (c.recomputes("moe_act") && !c.recomputes("moe")) bw.add(cm, mem(ak, actv));
    proj(rw, fc1 / etp, false);
  };
  std::vector<double> busiest(ld.expert_tokens.begin() + ld.busiest_rank * El,
                              ld.expert_tokens.begin() + (ld.busiest_rank + 1) * El);
  experts(busiest, M.experts_f, M.experts_b, M.experts_w);
  Costs unused_w;
  experts(std::vector<double>(El, ld.mean_rank_tokens / double(El)), M.experts_f_mean, M.experts_b_mean, unused_w);
  // Shared expert: a dense gated MLP of moe_shared_expert_intermediate_size, split over TP.
  const std::int64_t S = me.moe_shared_expert_intermediate_size;
  if (S > 0) {
    const std::int64_t fs = c.swiglu ? 2 * S : S, Tt = c.sequence_parallel ? Tl * t : Tl;
    auto g = [&](Costs& out, std::int64_t kin, std::int64_t nout, bool fwd) { linear(out, Tt, kin, nout, fwd, &M.shared_w); };
    const double sact = e * double(Tt) * double(fs + S) / double(t);
    g(M.shared_f, h, fs / t, true);
    M.shared_f.add(cm, mem(MemoryKernel::Elementwise, sact));
    g(M.shared_f, S / t, h, true);
    g(M.shared_b, S / t, h, false);
    M.shared_b.add(cm, mem(MemoryKernel::Elementwise, 2.0 * sact));
    g(M.shared_b, h, fs / t, false);
    if (me.moe_shared_expert_gate) {
      // moe_shared_expert_gate (SharedExpertMLP, megatron/core/transformer/moe/shared_experts.py @d98e8a64): a
      // bf16 1 x h gate_weight on the shared expert's input (the rank's Tl tokens: torch.nn.functional.linear,
      // not quantised), sigmoid, and the output scaled by it (read output + score, write). Backward: the
      // multiply's two gradients (read the output gradient, the output and the score; write both gradients),
      // the sigmoid's, the gate's input- and weight-gradient GEMMs.
      M.shared_f.add(cm, KernelDesc::gemm(Tl, 1, h, act));
      M.shared_f.add(cm, mem(MemoryKernel::Elementwise, 2.0 * e * Te));
      M.shared_f.add(cm, mem(MemoryKernel::Elementwise, e * Te * (2.0 * double(h) + 1.0)));
      M.shared_b.add(cm, mem(MemoryKernel::Elementwise, e * Te * (3.0 * double(h) + 2.0)));
      M.shared_b.add(cm, mem(MemoryKernel::Elementwise, 3.0 * e * Te));
      M.shared_b.add(cm, KernelDesc::gemm(Tl, h, 1, act));
      M.shared_b.add(cm, KernelDesc::gemm(h, 1, Tl, act));
      M.shared_w.add(cm, KernelDesc::gemm(h, 1, Tl, act));
    }
  }
  return M;
}

GptStepKernels gpt_step_kernels(const GptConfig& c, const models::ComputeModel& cm, const std::string& where) {
  GptStepKernels K;
  const auto t = c.tensor_model_parallel_size, cp = c.context_parallel_size;
  const bool legacy = c.attention_backend == "unfused";
  K.legacy = legacy;
  K.adam_state_bytes = c.adam_state_bytes();
  // LAMB as apex's FusedLAMB runs it (csrc/multi_tensor_lamb.cu at NVIDIA/apex@325f5a0b): besides Adam's pass
  // (stage 1 reads the gradient, master weight and moments and writes the moments and the update -- into the
  // gradient, where Adam writes the weight), per-tensor L2 norms of the master weights and of the update (read
  // 4 + 4) and stage 2 (read the update and the weight, write the weight: 12): 20 fp32 bytes more per parameter.
  if (c.optimizer == "lamb") K.optimizer_extra_bytes = 20.0;
  const double h = double(c.hidden_size), s = double(c.seq_length) / double(cp), b = double(c.micro_batch_size),
               V = double(c.padded_vocab_size);
  K.layer = legacy ? layer_costs_unfused(c, cm) : layer_costs_fused(c, cm);
  if (c.has_bf16_layers() && !legacy) {
    K.layer_bf16 = layer_costs_fused(c.bf16_layers_config(), cm);
    for (std::int64_t gl = 0; gl < c.num_layers; ++gl) K.bf16_layers.push_back(c.bf16_layer(gl));
  }
  if (c.gdn()) {
    K.gdn_layers = c.gdn_layers();
    K.layer_gdn = layer_costs_fused(c, cm, true);
    if (c.has_bf16_layers()) K.layer_gdn_bf16 = layer_costs_fused(c.bf16_layers_config(), cm, true);
  }
  if (!c.cp_comm_types.empty() && cp > 1 && !legacy) {
    K.cp_types = c.cp_comm_types;
    for (const auto& type : K.cp_types) {
      if (K.layer_of_cp.count(type)) continue;
      GptConfig one = c;
      one.cp_comm_type = type, one.cp_comm_types.clear();
      K.layer_of_cp[type] = c.hybrid() ? hybrid_sublayer(layer_costs_fused(one, cm), '*') : layer_costs_fused(one, cm);
    }
  }
  if (c.hybrid()) {
    K.hybrid_layers = c.hybrid_layers();
    K.layer_mamba = hybrid_sublayer(layer_costs_fused(c, cm, false, true), 'M');
    K.layer_attn_only = hybrid_sublayer(K.layer, '*');
    K.layer_mlp_only = hybrid_sublayer(K.layer, '-');
    if (K.hybrid_layers.find('G') != std::string::npos) {
      K.layer_gdn = hybrid_sublayer(layer_costs_fused(c, cm, true), 'G');
      K.gdn_layers = c.gdn_layers();
    }
  }
  const LayerCosts& L = K.layer;
  // Logits and loss (last stage), embedding lookup (first stage), per micro-batch.
  {
    const double T = b * s, tt = double(t);
    if (legacy) {
      // fp32 softmax cross-entropy: read, write, grad (12 B per logit element per pass) at the elementwise rate;
      // the megatron-sc21 preset's GEMM / attention efficiencies were fitted with this charge in the step.
      const Kernel ce{OpClass::Elementwise, 0, 3.0 * 4.0 * T * V / tt};
      Kernel lg{OpClass::Gemm, 2.0 * T * h * V / tt, 2.0 * (T * h + h * V / tt + T * V / tt)};
      K.logits_fwd.add(cm, lg);
      K.logits_fwd.add(cm, ce);
      K.logits_bwd.add(cm, lg, 2.0);
      K.logits_bwd.add(cm, ce);
      K.logits_wgrad.add(cm, lg);
      Kernel emb{OpClass::Embedding, 0, 2.0 * 2.0 * T * h};  // gather rows + position add, 2-byte elements
      K.embed_fwd.add(cm, emb);
      K.embed_bwd.add(cm, emb, 2.0);
    } else {
      // The output layer stays in bf16 under FP8 (Transformer Engine recipes quantise the decoder linears).
      const Precision ap = act_precision(c);
      const std::int64_t Ti = c.micro_batch_size * (c.seq_length / cp), Vt = c.padded_vocab_size / t;
      K.logits_fwd.add(cm, KernelDesc::gemm(Ti, Vt, c.hidden_size, ap));
      // The loss in the byte convention its efficiency (memory_bound cross_entropy) was fitted in:
      // tests/data/hardware/h{100,200}-kernels/memory_bound.csv rows cross_entropy_fwd_bwd count
      // 4 x elements x 2 = 8 B per logit element for forward and backward together (kernels.py: fp32 logits read
      // once, their gradient written once), whatever the kernels of the measured eager
      // F.cross_entropy(logits.float()) + autograd really move. Split as read (forward) + write (backward), 4 B
      // each: the measurement times only the pair. Every cross_entropy_impl (megatron vocab-parallel, torch,
      // torch_compiled) runs one loss forward and one backward per micro-batch and is priced at this measured rate
      // (only the eager torch sequence is measured).
      const double ce_pass_bytes = 4.0 * T * V / tt;
      K.logits_fwd.add(cm, KernelDesc::memory(models::MemoryKernel::CrossEntropy, ce_pass_bytes, ap));
      K.logits_bwd.add(cm, KernelDesc::memory(models::MemoryKernel::CrossEntropy, ce_pass_bytes, ap));
      K.logits_bwd.add(cm, KernelDesc::gemm(Ti, c.hidden_size, Vt, ap));
      K.logits_bwd.add(cm, KernelDesc::gemm(c.hidden_size, Vt, Ti, ap));
      K.logits_wgrad.add(cm, KernelDesc::gemm(c.hidden_size, Vt, Ti, ap));
      const double eb = (c.position_embedding_type == "learned_absolute" ? 2.0 : 1.0) * 2.0 * T * h;
      K.embed_fwd.add(cm, KernelDesc::memory(models::MemoryKernel::Embedding, eb, ap));
      K.embed_bwd.add(cm, KernelDesc::memory(models::MemoryKernel::Embedding, 2.0 * eb, ap));
      // fp32_residual_connection: the embedding output cast to fp32 (embeddings.float(),
      // megatron/core/models/common/embeddings/language_model_embedding.py:138-140 @d98e8a64) on the rank's tokens
      // (split over TP under sequence parallelism), read e and write 4 bytes per element; the backward casts the
      // gradient back.
      if (c.fp32_residual_connection) {
        const double cast_el = (c.sequence_parallel ? T / tt : T) * h;
        const KernelDesc up = KernelDesc::memory(models::MemoryKernel::Cast, (c.residual_bytes() + 2.0) * cast_el, ap);
        K.embed_fwd.add(cm, up);
        K.embed_bwd.add(cm, up);
      }
    }
  }
  // The MTP layers are built from the decoder's last layer spec (get_gpt_mtp_block_spec_for_backend,
  // megatron/core/models/gpt/gpt_layer_specs.py:755-775 @d98e8a64: "get the spec for the last layer of decoder
  // block"): after an MoE last layer each is an MoE layer with its own dispatch and combine over the EP group
  // (mtp_moe: the trace runs it as the MoE steps of a layer, mtp_layer_f / _b holding the rest of one depth; its
  // router load is the last decoder layer's). A hybrid model's MTP runs its pattern's MTP part instead (below).
  if (c.moe.mtp_num_layers > 0 && !legacy && !c.hybrid()) {
    const auto mpat = moe_layers_of(c);
    K.mtp_moe = c.moe.enabled() && !mpat.empty() && mpat.back();
  }
  // Mixture of experts: routing per MoE layer (who gets how many tokens) and the priced MoE kernels.
  K.moe_pattern = moe_layers_of(c);
  K.moe_index.assign(c.num_layers, -1);
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    if (K.moe_pattern[l]) K.moe_index[l] = K.n_moe++;
  // Tokens entering an MoE layer on one rank per micro-batch (sequence-parallel split over TP).
  K.T_local = b * s / (c.sequence_parallel ? double(t) : 1.0);
  if (c.moe.enabled()) {
    const std::int64_t ep = c.moe.expert_model_parallel_size, etp = c.etp();
    const auto shares = moe_expert_shares(c.moe, K.n_moe, where);
    // first_last_layers_bf16: an MoE layer among the bf16 layers runs its whole MoE block in bf16 (Megatron-LM's
    // get_fp8_context / get_fp4_context wrap the whole TransformerLayer: is_first_last_bf16_layer,
    // megatron/core/fp8_utils.py:710-727 @d98e8a64): its router, experts and shared expert priced with
    // bf16_layers_config.
    const GptConfig hp = c.bf16_layers_config();
    for (std::int64_t l = 0; l < c.num_layers; ++l) {
      if (!K.moe_pattern[l]) continue;
      const std::int64_t i = K.moe_index[l];
      K.loads.push_back(moe_layer_load(c.moe, shares[i], K.T_local, ep, ep * etp));
      K.moe.push_back(moe_costs(c.bf16_layer(l) ? hp : c, cm, K.loads.back(), K.T_local));
    }
    // The MTP layers' MoE blocks (mtp_moe), at index num_layers: priced as the last decoder layer's.
    if (K.mtp_moe) K.moe_index.push_back(K.moe_index[static_cast<std::size_t>(c.num_layers - 1)]);
  }
  const bool unfused_accumulation = !c.gradient_accumulation_fusion && !c.use_torch_fsdp2;
  if (unfused_accumulation) add_grad_accumulation(K, c, cm, false);
  // Multi-token prediction (DeepSeek-V3 Sec. 2.2), per micro-batch: per depth the embedding of the shifted
  // tokens (MultiTokenPredictionLayer._get_embeddings, Megatron-Core multi_token_prediction.py at
  // NVIDIA/Megatron-LM@d98e8a64dd), a projection 2h -> h, one transformer layer (as an MoE layer: its attention
  // here, its MoE block as the trace's MoE steps, mtp_moe above) -- the MTP layers -- and the shared output head
  // with its loss (process_mtp_loss, on the loss stage) -- the heads. With the MTP in the loss's stage both run as
  // one op (mtp). A hybrid model's MTP layer runs its pattern's MTP part instead of the transformer layer
  // (hybrid_mtp_pattern; a HybridStack, multi_token_prediction.py:1197-1213): each sublayer's block, an E
  // sublayer's MoE block as the last decoder MoE layer's kernels at the mean load (compute only: its dispatch is
  // not simulated).
  if (c.moe.mtp_num_layers > 0 && !legacy) {
    const Precision ap = act_precision(c);
    const std::int64_t Ti = c.micro_batch_size * (c.seq_length / cp);
    std::vector<const Costs*> fwd = {&L.fwd_attn}, bwd = {&L.bwd_attn};
    if (!K.mtp_moe) fwd.push_back(&L.fwd_mlp), bwd.insert(bwd.begin(), &L.bwd_mlp);
    // The MTP layer's transformer layer has the decoder's config (multi_token_prediction.py @d98e8a64): its
    // recompute_modules mla_up_proj / mlp recomputes run in its backward too.
    if (c.recomputes("mla_up_proj")) bwd.push_back(&L.recompute_mla_up);
    if (!K.mtp_moe && c.recomputes("mlp")) bwd.push_back(&L.recompute_mlp);
    if (c.hybrid()) {
      fwd.clear(), bwd.clear();
      const std::string mtp = hybrid_mtp_pattern(c);
      // A sublayer's blocks, forward in pattern order, backward in reverse.
      auto add = [&](std::vector<const Costs*>& out, char sym, bool b) {
        if (sym == 'E') {
          const MoeCosts& m = K.moe.back();
          if (b) out.insert(out.end(), {&m.shared_b, &m.post_b, &m.experts_b_mean, &m.pre_b});
          else out.insert(out.end(), {&m.pre_f, &m.experts_f_mean, &m.post_f, &m.shared_f});
          return;
        }
        const LayerCosts& sl = sym == 'M' ? K.layer_mamba : sym == 'G' ? K.layer_gdn : sym == '-' ? K.layer_mlp_only : K.layer_attn_only;
        out.push_back(sym == '-' ? (b ? &sl.bwd_mlp : &sl.fwd_mlp) : (b ? &sl.bwd_attn : &sl.fwd_attn));
      };
      for (char sym : mtp) add(fwd, sym, false);
      for (auto it = mtp.rbegin(); it != mtp.rend(); ++it) add(bwd, *it, true);
    }
    for (std::int64_t k = 0; k < c.moe.mtp_num_layers; ++k) {
      K.mtp_layers += K.embed_fwd;
      K.mtp_layers.add(cm, KernelDesc::gemm(Ti, c.hidden_size / t, 2 * c.hidden_size, ap));
      for (const Costs* x : fwd) K.mtp_layers += *x;
      K.mtp_heads += K.logits_fwd;
      K.mtp_heads_b += K.logits_bwd;
      for (const Costs* x : bwd) K.mtp_layers_b += *x;
      K.mtp_layers_b.add(cm, KernelDesc::gemm(Ti, 2 * c.hidden_size, c.hidden_size / t, ap));
      K.mtp_layers_b.add(cm, KernelDesc::gemm(2 * c.hidden_size, c.hidden_size / t, Ti, ap));
      K.mtp_layers_b += K.embed_bwd;
      if (k == 0) K.mtp_layer_f = K.mtp_layers, K.mtp_layer_b = K.mtp_layers_b;
    }
    K.mtp = K.mtp_layers, K.mtp += K.mtp_heads;
    K.mtp_b = K.mtp_heads_b, K.mtp_b += K.mtp_layers_b;
  }
  if (unfused_accumulation) add_grad_accumulation(K, c, cm, true);
  return K;
}

// torch FSDP2's copies around a unit's collectives (FsdpCopyCosts), as the torch of torchtitan's Dec 2024 runs
// (pytorch/pytorch@1963fc8, a Dec 2024 main commit) runs them: torch/distributed/fsdp/_fully_shard/
// _fsdp_collectives.py and _fsdp_param_group.py (torch/distributed/_composable/fsdp/ before Dec 2024), the
// code paths below introduced by the cited PRs (all merged before the runs) and unchanged in the 2025 file.
// Parameters are sharded in fp32 and all-gathered in bf16 (torchtitan's mixed_precision_param), gradients
// reduced in grad_elem_bytes' dtype (mixed_precision_reduce, fp32 by default).
// - All-gather copy-in, on the all-gather copy-in stream (foreach_all_gather under
//   `stream(all_gather_copy_in_stream)`; FSDPParamGroup's implicit prefetch in forward and backward):
//   _get_param_all_gather_inputs casts the fp32 shards into one bf16 temporary with _foreach_copy_ (fast path
//   of pytorch/pytorch#133369, Aug 2024: read 4 + write 2 bytes per shard element), then
//   torch.ops.fsdp.all_gather_copy_in copies them into this rank's slice of the flat all-gather buffer
//   (_foreach_copy_: 2 + 2). With torchao's float8 all-gather (GptConfig::fsdp_float8_all_gather) a weight's
//   fsdp_pre_all_gather casts its fp32 shard to fp8 with the scale precomputed after the optimizer step
//   (torchao/float8/fsdp_utils.py; torchtitan sets precompute_float8_dynamic_scale_for_fsdp: 4 + 1) and the
//   copy-in copies 1 + 1; the once-per-step amax precompute is torchao_float8_weight_costs'.
// - All-gather copy-out, on the compute stream (FSDPParamGroup.wait_for_unshard calls
//   foreach_all_gather_copy_out in the current stream after waiting for the all-gather's event):
//   torch.ops.fsdp.split_with_sizes_copy reads the gathered buffer and writes the unsharded parameters, the
//   gathered bytes twice (2 + 2 per element in bf16, 1 + 1 in fp8: fsdp_post_all_gather wraps the gathered
//   fp8 data without copying).
// - Reduce-scatter copy-in, on the compute stream since pytorch/pytorch#129721 (Jun 2024: foreach_reduce runs
//   foreach_reduce_scatter_copy_in before reduce_scatter_stream.wait_stream(current_stream)):
//   torch.ops.fsdp.chunk_cat reads the unsharded bf16 gradients and writes the flat input in the reduce dtype
//   (2 + grad_elem_bytes per element; the accumulated fp32 gradient under pipeline parallelism: 4 + 4).
// - No division kernel: fp32 and bf16 reductions use ReduceOp.AVG (pytorch/pytorch#120919, #123362, 2024).
//   After a bf16 reduce, _to_dtype_if_needed casts the reduced shard to the fp32 parameter dtype on the
//   reduce-scatter stream (2 + 4 per shard element); an fp32 reduce has none.
// - Without a reduce-scatter (the pipeline schedule's micro-batches before the last: no gradient sync),
//   FSDPParam.to_accumulated_grad_if_needed casts the first micro-batch's unsharded bf16 gradient to the fp32
//   reduce dtype (2 + 4) and accumulate_unsharded_grad_if_needed adds the later ones to it (4 + 2 read,
//   4 written), in FSDPParamGroup.post_backward on the compute stream; with a bf16 reduce dtype neither runs.
// Each is priced as one memory-bound kernel of the measured copy / cast / elementwise rate.
FsdpCopyCosts fsdp_copy_costs(const GptConfig& c, const models::ComputeModel& cm, double el, double shard_n,
                              double grad_elem_bytes) {
  using models::MemoryKernel;
  FsdpCopyCosts f;
  if (!c.fsdp2_copies()) return f;
  const double shard = el / shard_n, gb = c.fsdp_layer_gather_bytes();
  f.copy_in.add(cm, KernelDesc::memory(MemoryKernel::Cast, (4.0 + gb) * shard));
  f.copy_in.add(cm, KernelDesc::memory(MemoryKernel::Copy, 2.0 * gb * shard));
  f.copy_out.add(cm, KernelDesc::memory(MemoryKernel::Copy, 2.0 * gb * el));
  f.chunk_cat.add(cm, KernelDesc::memory(MemoryKernel::Copy, (2.0 + grad_elem_bytes) * el));
  if (grad_elem_bytes > 2.0) {
    f.upcast.add(cm, KernelDesc::memory(MemoryKernel::Cast, (2.0 + grad_elem_bytes) * el));
    f.accumulate.add(cm, KernelDesc::memory(MemoryKernel::Elementwise, (2.0 + 2.0 * grad_elem_bytes) * el));
    f.chunk_cat_accumulated.add(cm, KernelDesc::memory(MemoryKernel::Copy, 2.0 * grad_elem_bytes * el));
  } else {
    f.post_reduce.add(cm, KernelDesc::memory(MemoryKernel::Cast, (2.0 + 4.0) * shard));
    f.chunk_cat_accumulated = f.chunk_cat;
  }
  return f;
}

// torchao float8 with tensorwise dynamic scaling around the layer linears' weights under torch FSDP2, as the
// rows' torchao runs it (pytorch/ao@eab345c, Dec 2024, and @6243040, June 2025: torchao/float8/float8_linear.py,
// float8_ops.py, fsdp_utils.py; the paths below are the same at both commits):
// - Forward (Float8Linear.forward): get_weight_scale takes the gathered bf16 weight's amax (read 2 bytes per
//   element) and cast_weight_to_float8_t casts it (read 2, write 1): 5 per element and forward. With the
//   float8 all-gather the gathered weight is already a Float8Tensor (tensor_already_casted_to_fp8): nothing.
// - Backward: the input gradient is grad_output @ weight_fp8_t.t(), whose second operand is the row-major fp8
//   weight; preprocess_addmm makes it column-major for torch._scaled_mm (b_data.t().contiguous().t(): read 1,
//   write 1) -- with either all-gather. With force_recompute_fp8_weight_in_bwd and the bf16 all-gather the
//   checkpointed cast_weight_to_float8_t runs again (read 2, write 1; the scale is saved).
// - precompute_float8_dynamic_scale_for_fsdp (with the float8 all-gather; torchtitan and OLMo-core call it
//   after the optimizer step): torch._foreach_norm(ord=inf) over every float8 weight's fp32 shard (read 4 bytes
//   per element), torch.stack of the amaxes, the clamp that all-reduces them (one fp32 per weight, the DTensor
//   Partial -> Replicate over the shard group), the cast to float64, the division finfo.max / amax and the
//   cast back to float32: one reduction kernel and five kernels over a few hundred elements. Priced whenever
//   the float8 all-gather is on (every validated float8-gather run sets it; without it fsdp_pre_all_gather
//   would reduce each weight's amax at every gather instead).
// Casts run eagerly kEagerFp8CastFactor slower than compiled; the copy is one kernel either way.
Float8WeightCosts torchao_float8_weight_costs(const GptConfig& c, const models::ComputeModel& cm, double linear_el,
                                              double shard_n, double stage_linear_el, double stage_linears) {
  using models::MemoryKernel;
  Float8WeightCosts f;
  if (!c.torchao_float8_weights()) return f;
  const double cast_factor = c.torch_compile == "eager" ? kEagerFp8CastFactor : 1.0;
  const bool f8_gather = c.fsdp_float8_all_gather();
  if (!f8_gather) f.fwd.add(cm, KernelDesc::memory(MemoryKernel::Cast, 5.0 * linear_el), cast_factor);
  f.bwd.add(cm, KernelDesc::memory(MemoryKernel::Copy, 2.0 * linear_el));
  if (c.force_recompute_fp8_weight_in_bwd && !f8_gather)
    f.bwd.add(cm, KernelDesc::memory(MemoryKernel::Cast, 3.0 * linear_el), cast_factor);
  if (f8_gather) {
    f.precompute.add(cm, KernelDesc::memory(MemoryKernel::Elementwise, 4.0 * stage_linear_el / shard_n, Precision::FP32));
    const double small = 8.0 * stage_linears;  // read + write one fp32 per weight
    for (int k = 0; k < 5; ++k) f.precompute.add(cm, KernelDesc::memory(MemoryKernel::Elementwise, small, Precision::FP32));
    f.precompute_amaxes = stage_linears;
  }
  return f;
}

// fp8_param_gather: Transformer Engine's cast_master_weights_to_fp8 (transformer_engine/pytorch/tensor/utils.py at
// NVIDIA/TransformerEngine@d0067d0da, called by Megatron's quantize_param_shard, megatron/core/fp8_utils.py
// @d98e8a64) on this rank's shard of the fp32 main parameters. Bytes per shard element: delayed scaling casts
// with the scale it has (read 4, write 1); current scaling (tensorwise) and blockwise first take the shard's
// amaxes (tex.compute_amax / fp8_block_scaling_compute_partial_amax: read 4), then cast (read 4, write 1 + the
// block scales); mxfp8 takes row- and column-block amaxes (read 4) and writes both the row- and the column-wise
// data (read 4, write 2). Net of the 2-byte bf16 parameter the optimizer step no longer writes (the FP8 cast
// replaces it; GptStepKernels::optimizer counts it): 3, 7, 7, 8. The amaxes all-reduced (MAX, fp32) over the
// data-parallel group: one per tensor (delayed: the amax-history entries; tensorwise), one per 128 x 128 block
// (blockwise weights), one per 32 elements of each of the row- and column-wise layouts (mxfp8; its amax buffer is
// the fp32 master dtype).
// fp4_param_gather (nvfp4): _cast_master_weights_to_nvfp4_2d (the same file) takes the shard's 16 x 16 block amaxes
// and the tensors' global amaxes (nvfp4_multi_tensor_compute_partial_amax: read 4), all-reduces both (MAX, fp32:
// one per 256 elements and one per tensor), then casts the shard into the row-wise 4-bit data alone
// (nvfp4_multi_tensor_2d_partial_cast: read 4, write 0.5): 8.5 - 2 = 6.5.
Fp8ParamCast fp8_param_cast_costs(const GptConfig& c, const models::ComputeModel& cm, double linear_el, double shard_n,
                                  double tensors) {
  Fp8ParamCast f;
  const std::string& r = c.quant_recipe();
  const double bytes = r == "nvfp4" ? 6.5 : r == "delayed" ? 3.0 : r == "mxfp8" ? 8.0 : 7.0;
  f.cast.add(cm, KernelDesc::memory(models::MemoryKernel::Cast, bytes * linear_el / shard_n, Precision::FP32));
  f.amax_bytes = r == "nvfp4"       ? 4.0 * linear_el / 256.0 + 4.0 * tensors
                 : r == "blockwise" ? 4.0 * linear_el / (128.0 * 128.0)
                 : r == "mxfp8"     ? 4.0 * 2.0 * linear_el / 32.0
                                    : 4.0 * tensors;
  return f;
}

// Optimizer step: Adam on this rank's (shard of) parameters, memory bound. Bytes per parameter: read
// gradient (2), fp32 master weight, momentum, variance (12, GptConfig::adam_state_bytes), write them back (12)
// and the 2-byte model weight (2), plus the gradient-norm / unscale passes reading the gradient twice more (4)
// = 32 bytes (8 + 2 x the state bytes); LAMB adds optimizer_extra_bytes.
Costs GptStepKernels::optimizer(const models::ComputeModel& cm, double elements) const {
  Costs opt;
  const double bytes = 8.0 + 2.0 * adam_state_bytes + optimizer_extra_bytes;
  if (legacy) opt.add(cm, Kernel{OpClass::Elementwise, 0, bytes * elements});
  else opt.add(cm, KernelDesc::memory(models::MemoryKernel::Optimizer, bytes * elements, Precision::FP32));
  return opt;
}

Costs GptStepKernels::memory_pass(const models::ComputeModel& cm, models::MemoryKernel kind, double bytes,
                                  Precision p) const {
  Costs out;
  if (legacy) out.add(cm, Kernel{OpClass::Elementwise, 0, bytes});
  else out.add(cm, KernelDesc::memory(kind, bytes, p));
  return out;
}

}  // namespace fabricsim::workloads::gpt_detail
