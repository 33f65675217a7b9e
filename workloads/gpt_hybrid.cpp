#include "workloads/gpt.hpp"

// Megatron-LM's hybrid model (Mamba-2 mixers mixed with attention, MLP and MoE sublayers: Nemotron-H, Nemotron-3)
// in the `gpt` generator: the layer pattern, its checks and pipeline split (layer 1, model description), the
// Mamba-2 mixer's parameters, saved activations and FLOPs, and its kernels (layer 2). Everything cites
// NVIDIA/Megatron-LM@d98e8a64 unless it says otherwise.
#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

#include "sim/base/error.hpp"
#include "workloads/gpt_detail.hpp"

namespace fabricsim::workloads {

namespace {
// The symbols of a hybrid layer pattern (Symbols in megatron/core/models/hybrid/hybrid_layer_allocation.py); all
// but D (DSA attention).
bool modelled_symbol(char ch) { return ch == 'M' || ch == '*' || ch == 'G' || ch == '+' || ch == '-' || ch == 'E'; }

// The main pattern of a unified hybrid pattern: up to the first '/' (the MTP patterns follow it), its '|' kept.
std::string_view main_pattern(const std::string& pattern) {
  return std::string_view(pattern).substr(0, pattern.find('/'));
}
}  // namespace

std::string GptConfig::hybrid_layers() const {
  std::string out;
  for (char ch : main_pattern(hybrid_layer_pattern))
    if (ch != '|') out += ch;
  return out;
}

namespace gpt_detail {

namespace {
// The unified pattern's parts (parse_hybrid_pattern in hybrid_layer_allocation.py): the main pattern, then one MTP
// pattern per depth after each '/'.
std::vector<std::string> pattern_parts(const std::string& pat) {
  std::vector<std::string> out(1);
  for (char ch : pat) {
    if (ch == '/') out.emplace_back();
    else out.back() += ch;
  }
  return out;
}
}  // namespace

std::string hybrid_mtp_pattern(const GptConfig& c) {
  const auto parts = pattern_parts(c.hybrid_layer_pattern);
  return parts.size() > 1 ? parts[1] : std::string();
}
std::int64_t hybrid_mtp_depths(const GptConfig& c) {
  const auto parts = pattern_parts(c.hybrid_layer_pattern);
  // Megatron: a '/' with only empty parts after it is no MTP (parse_hybrid_pattern).
  if (std::all_of(parts.begin() + 1, parts.end(), [](const std::string& x) { return x.empty(); })) return 0;
  return static_cast<std::int64_t>(parts.size()) - 1;
}
std::int64_t mtp_moe_layers_per_depth(const GptConfig& c) {
  if (c.moe.mtp_num_layers <= 0) return 0;
  const std::string mtp = hybrid_mtp_pattern(c);
  if (c.hybrid()) return static_cast<std::int64_t>(std::count(mtp.begin(), mtp.end(), 'E'));
  const auto moe = moe_layers_of(c);
  return !moe.empty() && moe.back() ? 1 : 0;
}
std::int64_t mtp_moe_layers(const GptConfig& c) { return c.moe.mtp_num_layers * mtp_moe_layers_per_depth(c); }

// Megatron's pattern_from_ratios (hybrid_layer_allocation.py): round(n x attention_ratio) attention layers spread
// evenly between Mamba layers (the pattern starts and ends with Mamba), then round(n x mlp_ratio) of the remaining
// Mamba layers turned into MLP layers, evenly. The same walk, written here; Python's round() rounds halves to even,
// as std::nearbyint does in the default rounding mode.
std::string hybrid_pattern_from_ratios(std::int64_t n, double attention_ratio, double mlp_ratio) {
  std::string out(static_cast<std::size_t>(n), 'M');
  const auto n_attn = static_cast<std::int64_t>(std::nearbyint(double(n) * attention_ratio));
  std::int64_t n_mamba = n - n_attn;
  const double section = double(n_mamba) / double(n_attn + 1);
  double x = section;
  for (std::int64_t i = 0; i < n; ++i) {
    if (x < 0.5) out[static_cast<std::size_t>(i)] = '*', x += section;
    else x -= 1.0;
  }
  const auto n_mlp = static_cast<std::int64_t>(std::nearbyint(double(n) * mlp_ratio));
  if (n_mlp > 0) {
    n_mamba -= n_mlp;
    const double ratio = double(n_mamba) / double(n_mlp);
    x = ratio;
    for (std::int64_t i = 0; i < n; ++i) {
      if (out[static_cast<std::size_t>(i)] != 'M') continue;
      if (x < 0.5) out[static_cast<std::size_t>(i)] = '-', x += ratio;
      else x -= 1.0;
    }
  }
  return out;
}

void check_hybrid(const GptConfig& c, const std::function<void(const std::string&, const std::string&)>& fail) {
  const char* K = "hybrid_layer_pattern";
  const std::string& full = c.hybrid_layer_pattern;
  const std::string pat(main_pattern(full));
  for (std::size_t i = 0; i < full.size(); ++i) {
    const char ch = full[i];
    const std::string at = "position " + std::to_string(i) + ": '" + std::string(1, ch) + "' ";
    if (modelled_symbol(ch) || ch == '/' || (ch == '|' && i < pat.size())) continue;
    if (ch == '|') fail(K, at + "in an MTP pattern (after '/'): pipeline boundaries belong to the main pattern (Megatron's _validate_pattern)");
    if (ch == 'D')
      fail(K, at + "(Megatron's DSA layer: MLA with DeepSeek sparse attention and its lightning indexer) is not "
                  "modelled: fabricsim has no indexer or sparse-attention kernels; expected M, *, G, +, - or E");
    fail(K, at + "is not a layer symbol (expected M Mamba, * attention, G Gated DeltaNet, + MLA, - MLP, E MoE, | "
                 "pipeline boundary)");
  }
  const std::string layers = c.hybrid_layers();
  if (layers.empty()) fail(K, "has no layers");
  const auto parts = pattern_parts(full);
  for (const std::string& part : parts)
    if (part.find('*') != std::string::npos && part.find('+') != std::string::npos)
      fail(K, "has both '*' attention and '+' MLA layers (Megatron refuses attention beside MLA in one model: "
              "_validate_pattern in hybrid_layer_allocation.py)");
  // MTP (parse_hybrid_pattern in hybrid_layer_allocation.py; megatron/training/arguments.py:870-884 @d98e8a64 takes
  // mtp_num_layers from the pattern's depths, warning where a given value differs; HybridModel builds the MTP block
  // only from an MTP pattern, hybrid_model.py:219-230).
  const std::string mtp = hybrid_mtp_pattern(c);
  const std::int64_t depths = hybrid_mtp_depths(c);
  for (std::size_t k = 2; k < parts.size(); ++k)
    if (parts[k] != mtp)
      fail(K, "MTP pattern " + std::to_string(k) + " ('" + parts[k] + "') differs from MTP pattern 1 ('" + mtp +
                  "'): Megatron needs every depth's pattern identical");
  if (depths > 0 && c.moe.mtp_num_layers != depths)
    fail("mtp_num_layers", "(" + std::to_string(c.moe.mtp_num_layers) + ") differs from the " + std::to_string(depths) +
                               " MTP patterns after '/' in hybrid_layer_pattern (Megatron warns and takes the pattern's)");
  if (depths == 0 && c.moe.mtp_num_layers > 0)
    fail("mtp_num_layers", "with hybrid_layer_pattern needs the MTP layers' pattern after '/', one per depth (e.g. "
                           "M*M-/*-/*-): Megatron's hybrid model builds no MTP layers without it");
  if (mtp.find('E') != std::string::npos && layers.find('E') == std::string::npos)
    fail(K, "has MoE layers E in its MTP pattern only: fabricsim prices an MTP MoE block as the decoder's MoE layers "
            "(put E in the main pattern too)");
  const bool has_moe = layers.find('E') != std::string::npos;
  if (has_moe && !c.moe.enabled()) fail(K, "has MoE layers E but num_experts is not set");
  if (!has_moe && c.moe.enabled()) fail("num_experts", "is set but hybrid_layer_pattern has no MoE layer E");
  if (c.moe.enabled() && c.moe.moe_layer_freq != "1")
    fail("moe_layer_freq", "is not read by Megatron's hybrid model: the E symbols of hybrid_layer_pattern place the MoE layers");
  // MambaMixer.__init__ (megatron/core/ssm/mamba_mixer.py:241-274): positive shapes, heads and groups split over TP,
  // heads a multiple of groups; d_inner = heads x head dim.
  const std::int64_t t = c.tensor_model_parallel_size, nh = c.mamba_heads(), ng = c.mamba_num_groups;
  if (c.mamba_num_heads <= 0 && (2 * c.hidden_size) % c.mamba_head_dim != 0)
    fail("mamba_head_dim", "must divide 2 x hidden_size (d_inner) when mamba_num_heads is not set (mamba_mixer.py:250)");
  if (nh % t != 0) fail("mamba_num_heads", "Mamba heads (" + std::to_string(nh) + ") must be a multiple of tensor_model_parallel_size (mamba_mixer.py:262)");
  if (ng % t != 0) fail("mamba_num_groups", "must be a multiple of tensor_model_parallel_size (mamba_mixer.py:270)");
  if (nh % ng != 0) fail("mamba_num_heads", "Mamba heads (" + std::to_string(nh) + ") must be a multiple of mamba_num_groups (mamba_mixer.py:274)");
  // Context parallelism of the Mamba layers (MambaContextParallel.__init__, megatron/core/ssm/mamba_context_parallel.py
  // :105-133): every CP rank gets whole heads and whole (or replicated) groups of this TP rank's.
  const std::int64_t cp = c.context_parallel_size;
  if (cp > 1 && layers.find('M') != std::string::npos) {
    const std::int64_t nh_t = nh / t, ng_t = ng / t;
    if (nh_t % cp != 0)
      fail("context_parallel_size", "Mamba heads per TP rank (" + std::to_string(nh_t) + ") must be a multiple of "
                                    "context_parallel_size (" + std::to_string(cp) + ") (mamba_context_parallel.py:106)");
    if (ng_t < cp && cp % ng_t != 0)
      fail("context_parallel_size", "must be a multiple of the Mamba groups per TP rank (" + std::to_string(ng_t) +
                                        ") when larger (mamba_context_parallel.py:120)");
    if (ng_t >= cp && ng_t % cp != 0)
      fail("mamba_num_groups", "Mamba groups per TP rank (" + std::to_string(ng_t) + ") must be a multiple of "
                               "context_parallel_size (" + std::to_string(cp) + ") (mamba_context_parallel.py:128)");
    if (!c.context_parallel_rotate_method.empty())
      fail("context_parallel_rotate_method", "is PyTorch's context parallelism; Megatron's hybrid model runs its Mamba "
                                             "layers under CP with MambaContextParallel's all-to-alls (cp_comm_type for attention)");
  }
  if (c.moe.multi_latent_attention && layers.find('+') == std::string::npos)
    fail("multi_latent_attention", "in a hybrid model applies to its '+' (MLA) layers; hybrid_layer_pattern has none");
  if (c.attention_backend == "unfused" || !c.torch_compile.empty() || c.use_torch_fsdp2 || c.window_left >= 0 ||
      c.first_last_layers_bf16 || c.cpu_offloading_num_layers > 0 || c.dualpipe() || c.symm_mem_tp() ||
      !c.selective_ac_option.empty() || c.attention_output_gate)
    fail(K, "hybrid models are modelled as Megatron-Core runs them with fused attention (not with unfused attention, "
            "torch_compile / use_torch_fsdp2, window_size, first_last_layers_bf16, cpu_offloading_num_layers, DualPipe, "
            "symmetric-memory TP, selective_ac_option or attention_output_gate)");
  // Pipeline split (megatron/training/arguments.py:787-858 and select_pipeline_segment in hybrid_layer_allocation.py):
  // with '|' the segments are the virtual stages (segment k on pipeline rank k % PP, chunk k / PP) and the other split
  // keys are refused; without, the layers split evenly (or by decoder_first/last_pipeline_num_layers), no VPP.
  const std::int64_t p = c.pipeline_model_parallel_size;
  const std::int64_t segments = static_cast<std::int64_t>(std::count(pat.begin(), pat.end(), '|')) + 1;
  if (c.num_layers_per_virtual_pipeline_stage)
    fail("num_layers_per_virtual_pipeline_stage", "should not be used with hybrid_layer_pattern: describe the virtual "
                                                  "stages with '|' segments (arguments.py:813)");
  if (!c.pipeline_layout.empty())
    fail("pipeline_model_parallel_layout", "should not be used with hybrid_layer_pattern: '|' separators give the split (arguments.py:825)");
  if (c.account_for_embedding_in_pipeline_split || c.account_for_loss_in_pipeline_split)
    fail("account_for_embedding_in_pipeline_split", "should not be used with hybrid_layer_pattern (arguments.py:829-838)");
  if (segments > 1) {
    if (c.decoder_first_pipeline_num_layers || c.decoder_last_pipeline_num_layers)
      fail("decoder_first_pipeline_num_layers", "should not be set when hybrid_layer_pattern has '|' separators (arguments.py:803-811)");
    if (segments % p != 0)
      fail(K, "has " + std::to_string(segments) + " '|' segments, not a multiple of pipeline_model_parallel_size (" +
                  std::to_string(p) + ") (arguments.py:847)");
    std::size_t start = 0;
    for (std::int64_t k = 0; k < segments; ++k) {
      const std::size_t end = std::min(pat.find('|', start), pat.size());
      if (end == start) fail(K, "segment " + std::to_string(k) + " (between '|' separators) is empty");
      start = end + 1;
    }
    if (c.virtual_pipeline_model_parallel_size && c.virtual_pipeline_model_parallel_size != segments / p)
      fail("virtual_pipeline_model_parallel_size", "is derived from the '|' segments of hybrid_layer_pattern (" +
                                                       std::to_string(segments / p) + " per pipeline rank)");
  } else if (c.virtual_pipeline_model_parallel_size > 1) {
    fail("virtual_pipeline_model_parallel_size", "needs '|' segments in hybrid_layer_pattern (Megatron raises without them: "
                                                 "select_pipeline_segment in hybrid_layer_allocation.py)");
  }
}

std::vector<std::vector<std::int64_t>> hybrid_segment_layout(const GptConfig& c) {
  const std::int64_t p = c.pipeline_model_parallel_size;
  std::vector<std::int64_t> seg(1, 0);
  for (char ch : main_pattern(c.hybrid_layer_pattern)) {
    if (ch == '|') seg.push_back(0);
    else ++seg.back();
  }
  const std::int64_t n = static_cast<std::int64_t>(seg.size()), v = std::max<std::int64_t>(1, n / p);
  if (n % p != 0)
    throw InputError("gpt hybrid_layer_pattern", "has " + std::to_string(n) + " '|' segments, not a multiple of "
                                                 "pipeline_model_parallel_size (" + std::to_string(p) + ")");
  std::vector<std::vector<std::int64_t>> out(p, std::vector<std::int64_t>(v, 0));
  for (std::int64_t k = 0; k < n; ++k) out[k % p][k / p] = seg[static_cast<std::size_t>(k)];
  return out;
}

// The gl-th layer symbol of the main pattern, found by walking it (no copy of the pattern: the memory and parameter
// sums call this per layer).
char hybrid_symbol(const GptConfig& c, std::int64_t gl) {
  for (char ch : main_pattern(c.hybrid_layer_pattern))
    if (ch != '|' && gl-- == 0) return ch;
  return 0;
}

// One Mamba-2 mixer on one TP rank (MambaMixer.__init__, mamba_mixer.py:281-450): in_proj h x (2 d_inner + 2 groups x
// state + heads) (z, x, B, C, dt; no bias), the depthwise conv1d over x, B, C with d_conv 4 taps and a bias
// (mamba_mixer.py:179 d_conv=4, :321-340), dt_bias, A_log and D (one per head), the gated RMSNorm's weight (d_inner),
// all split over TP, and out_proj d_inner x h (row-parallel). The layer's pre-norm (its h weights) is the caller's.
double mamba_params_per_rank(const GptConfig& c) {
  const double h = double(c.hidden_size), t = double(c.tensor_model_parallel_size);
  const double di = double(c.mamba_d_inner()), gn = double(c.mamba_num_groups * c.mamba_state_dim),
               nh = double(c.mamba_heads());
  const double conv = di + 2.0 * gn;
  return (h * (2.0 * di + 2.0 * gn + nh) + conv * double(kMambaConvKernel) + conv + 3.0 * nh + di + di * h) / t;
}

// MambaMixer's chunk_size (mamba_mixer.py:194 @d98e8a64): the SSD kernels' chunk; no Megatron flag sets it (the
// hybrid layer specs build the mixer with the default).
constexpr std::int64_t kMambaChunkSize = 128;

MambaShard mamba_shard(const GptConfig& c) {
  const std::int64_t t = c.tensor_model_parallel_size, cp = c.context_parallel_size;
  const std::int64_t ng_t = c.mamba_num_groups / t;
  MambaShard m;
  m.batch = c.micro_batch_size, m.seqlen = c.seq_length, m.head_dim = c.mamba_head_dim, m.state = c.mamba_state_dim;
  m.heads = c.mamba_heads() / t / cp;
  m.repeat = ng_t < cp ? cp / ng_t : 1;  // group_repeat_count (mamba_context_parallel.py:119-133)
  m.groups = ng_t < cp ? 1 : ng_t / cp;
  m.chunk = kMambaChunkSize;
  return m;
}

const char* const kMambaCpTensors[kMambaCpExchanges] = {"z", "x", "B", "C", "dt", "y"};

// pre_conv_ssm all-to-alls each of z, x (d_inner / TP), B, C (groups / TP x repeat x state) and dt (heads / TP) from
// [s / cp, b, width] to [s, b, width / cp] (_all_to_all_cp2hp over all_to_all_sp2hp, mappings.py); post_conv_ssm
// sends y back ([s, b, d_inner / (TP cp)] to [s / cp, b, d_inner / TP]). Each rank's buffer is its local tensor.
std::array<double, kMambaCpExchanges> mamba_cp_a2a_bytes(const GptConfig& c) {
  const MambaShard m = mamba_shard(c);
  const std::int64_t cp = c.context_parallel_size;
  const double local = double(m.batch) * double(m.seqlen) / double(cp) * 2.0;  // tokens x bf16 bytes
  const double di = double(m.d_inner() * cp), bc = double(m.groups * m.state * cp), nh = double(m.heads * cp);
  return {local * di, local * di, local * bc, local * bc, local * nh, local * di};
}

// Saved activation bytes per token of a Mamba sublayer on one TP rank, training path (MambaMixer._ssm_training,
// mamba_mixer.py:679-733): the norm's input and in_proj's input as an attention block keeps them (split by sequence
// parallelism); mamba_split_conv1d_scan_combined saves its input zxBCdt and the scan output out_x (state-spaces/mamba
// mamba_ssm/ops/triton/ssd_combined.py, MambaSplitConv1dScanCombinedFn.forward: save_for_backward(zxbcdt, ...,
// out_x, ...); the conv output and chunk states are recomputed in its backward, so no s x s or per-token state term);
// the gated RMSNorm keeps its input (d_inner) and fp32 1/rms per group; out_proj keeps its input.
// Under CP the kernel's tensors are head-sharded over the whole sequence (cp times this rank's tokens), B and C
// replicated where CP exceeds the TP rank's groups (MambaShard::repeat).
double mamba_activation_bytes_per_token(const GptConfig& c, double gemm_in, double mask, double rep) {
  const double h = double(c.hidden_size), t = double(c.tensor_model_parallel_size);
  const MambaShard m = mamba_shard(c);
  const double cp = double(c.context_parallel_size);
  const double di = double(c.mamba_d_inner()) / t, ng = double(c.mamba_num_groups) / t;
  const double kernel = cp * (2.0 * double(m.d_inner()) + 2.0 * double(m.groups * m.state) + double(m.heads));
  return (2.0 * h + gemm_in * h + mask) * rep + 2.0 * kernel + 2.0 * cp * double(m.d_inner()) + 2.0 * di + 4.0 * ng +
         gemm_in * di;
}

// Megatron-LM's hybrid_flops (megatron/training/training.py:964-1002, called at :1332-1380): per pattern symbol,
// forward x 3, over the global batch's tokens T = B s and sum of squared lengths B s^2:
//   attention  4 T h p (h + h g / a) + 2 B s^2 h p, p = kv_channels a / h (the causal core counted halved);
//   Mamba      2 T h (2 d_in + 2 groups state + heads) + 7 T d_in state + 2 T d_in h, with d_in = 2 h as Megatron
//              writes it (mamba_layer_flops) even where mamba_num_heads x mamba_head_dim differs;
//   MLP        4 T h ffn (x 1.5 with SwiGLU);
//   MoE        4 T h (topk moe_ffn + shared) (x 1.5 with SwiGLU; the router is not counted); with
//              moe_latent_size L the routed part is 4 T L topk moe_ffn (x 1.5) + 4 T h L (moe_layer_flops);
//   Gated DeltaNet  T x gdn_layer_flops per token (gdn_flops_per_token, gpt_model.cpp);
//   MLA '+'    not counted: hybrid_flops takes the counts of M, G, *, - and E only (training.py:1340-1384), so
//              Megatron's reported TFLOP/s leaves the MLA layers out, and so do these model FLOPs;
//   logits     2 T h V, once more per MTP depth;
//   MTP        each depth's pattern sublayers as above (get_hybrid_layer_counts counts them once per depth; the
//              MTP layer's eh_proj and norms are not counted).
double hybrid_model_flops(const GptConfig& c) {
  const double B = double(c.global_batch_size), s = double(c.seq_length), h = double(c.hidden_size),
               V = double(c.padded_vocab_size), a = double(c.num_attention_heads), g = double(c.query_groups());
  const double T = B * s, T2 = B * s * s;
  const double p = double(c.head_dim()) * a / h, scale = c.swiglu ? 1.5 : 1.0;
  const double attn = 4.0 * T * h * p * (h + h * g / a) + 2.0 * T2 * h * p;
  const double d_in = 2.0 * h, n = double(c.mamba_state_dim);
  const double mamba = 2.0 * T * h * (2.0 * d_in + 2.0 * double(c.mamba_num_groups) * n + double(c.mamba_heads())) +
                       7.0 * T * d_in * n + 2.0 * T * d_in * h;
  const double mlp = 4.0 * scale * T * h * double(c.ffn());
  const double L = double(c.moe.moe_latent_size), routed = double(c.moe.moe_router_topk) * double(c.moe_ffn());
  const double moe = L > 0 ? 4.0 * scale * T * (L * routed + h * double(c.moe.moe_shared_expert_intermediate_size)) + 4.0 * T * h * L
                           : 4.0 * scale * T * h * (routed + double(c.moe.moe_shared_expert_intermediate_size));
  const double gdn = T * gdn_flops_per_token(c);
  const auto sym = [&](char ch) {
    return ch == 'M' ? mamba : ch == '*' ? attn : ch == '-' ? mlp : ch == 'E' ? moe : ch == 'G' ? gdn : 0.0;
  };
  double fwd = 2.0 * T * h * V;
  for (char ch : c.hybrid_layers()) fwd += sym(ch);
  const std::int64_t depths = std::max<std::int64_t>(0, c.moe.mtp_num_layers);
  for (std::int64_t k = 0; k < depths; ++k) {
    for (char ch : hybrid_mtp_pattern(c)) fwd += sym(ch);
    fwd += 2.0 * T * h * V;
  }
  return 3.0 * fwd;
}

namespace {
// The SSD chunked scan of Mamba-2 kernel by kernel (_mamba_chunk_scan_combined_fwd / _bwd in mamba_ssm/ops/triton/
// ssd_combined.py at state-spaces/mamba@e9594ce; the kernels in ssd_chunk_state.py, ssd_state_passing.py,
// ssd_bmm.py, ssd_chunk_scan.py there). Per chunk of Q tokens and head (or group) each GEMM-like kernel is a small
// matrix product; one launch runs all batch x chunks x heads of them (KernelDesc::batched_gemm, priced by the dense
// GEMM fit at its own M, N, K, tile padding included). Products under the causal mask count the half of the chunk
// the kernels visit (their K loops stop at the diagonal: _chunk_scan_fwd_kernel's K_MAX, the dx kernel's K_MIN, the
// dcb / ddAcs kernels skip the blocks above it). The state passing walks the chunks one after another per head
// (ssd_state_passing.py, `for c in range(nchunks)`): memory-bound, priced at the HBM model by its bytes (fp32 chunk
// states read, states written in the model's dtype forward, fp32 in the backward's recomputation). dt's cumulative
// sums are memory-bound too. Per token the forward is 2 P N (chunk states) + 2 Q N / (H / G) (C B^T) + 2 P (N + Q / 2)
// (chunk scan) FLOPs per head; Megatron-LM's mamba_layer_flops counts 7 P N. Not validated: no SSD kernel time is
// measured (bench/compute/ssd_kernels.py says what a GPU run would record).
template <class Add>
void add_ssd_scan(const Add& add, const MambaShard& m, models::Precision act, bool bwd) {
  using models::KernelDesc;
  using models::MemoryKernel;
  const std::int64_t b = m.batch, C = m.chunks(), H = m.heads, P = m.head_dim, G = m.groups, N = m.state, Q = m.chunk;
  const double e = 2.0, T = double(m.tokens()), states = double(b * C * H * P * N), th = T * double(H);
  auto per_head = [&](std::int64_t mm, std::int64_t nn, std::int64_t kk) { add(KernelDesc::batched_gemm(b * C * H, mm, nn, kk, act)); };
  auto per_group = [&](std::int64_t mm, std::int64_t nn, std::int64_t kk) { add(KernelDesc::batched_gemm(b * C * G, mm, nn, kk, act)); };
  auto mem = [&](MemoryKernel k, double bytes) { add(KernelDesc::memory(k, bytes, act)); };
  mem(MemoryKernel::Elementwise, (e + 8.0) * th);  // _chunk_cumsum_fwd: dt in, dA_cumsum and dt out in fp32
  if (!bwd) {
    per_head(P, N, Q);                                   // _chunk_state_fwd: x^T (B decay dt) per chunk
    mem(MemoryKernel::Elementwise, (4.0 + e) * states);  // _state_passing_fwd: fp32 in, states out
    per_group(Q, Q, N);                                  // _bmm_chunk_fwd: C B^T per chunk and group
    per_head(Q, P, N + Q / 2);                           // _chunk_scan_fwd: C states + causal (C B^T) x
    return;
  }
  per_group(Q, Q, N);                                    // _bmm_chunk_fwd (recomputed)
  per_head(P, N, Q);                                     // _chunk_state_fwd (recomputed)
  mem(MemoryKernel::Elementwise, 8.0 * states);          // _state_passing_fwd, fp32 out
  mem(MemoryKernel::Elementwise, 6.0 * e * th * double(P));  // _chunk_scan_bwd_dz: x, z, out_x, dout in; dz, dout out
  per_head(P, N, Q);                                     // _chunk_scan_bwd_dstates: dout^T (C decay)
  mem(MemoryKernel::Elementwise, 12.0 * states);         // _state_passing_bwd: states, dstates (fp32) in, both out
  per_head(Q, P, N + Q / 2);                             // _chunk_scan_chunk_state_bwd_dx: B dstates + causal CB^T dout
  per_head(Q, N, P);                                     // _chunk_state_bwd_db: (x dt decay) dstates^T
  per_head(Q, N, P);                                     // _chunk_scan_bwd_dC: dout states^T
  per_head(Q, Q / 2, P);                                 // _chunk_scan_bwd_dcb: causal dout x^T
  per_group(Q, N, Q);                                    // _bmm_chunk_bwd for dB
  per_group(Q, N, Q);                                    // _bmm_chunk_bwd for dC
  per_head(Q, Q / 2, P);                                 // _chunk_scan_bwd_ddAcs_stable: causal, as dcb
  mem(MemoryKernel::Elementwise, (4.0 + 2.0 * e) * th);  // _chunk_cumsum_bwd: fp32 ddA and dt in, ddt out
}
}  // namespace

// The Mamba-2 mixer between in_proj and out_proj on one rank (MambaMixer.forward and _ssm_training,
// mamba_mixer.py:510-528 and :679-733 @d98e8a64), per kernel, over the shard the scan runs on (mamba_shard: T
// tokens, `batch` sequences of `seqlen`, H heads of P, G groups of state N, chunks of Q):
//   zxBCdt made contiguous (rearrange ... .contiguous(): read and write the in_proj output);
//   mamba_split_conv1d_scan_combined (MambaSplitConv1dScanCombinedFn, mamba_ssm/ops/triton/ssd_combined.py at
//   state-spaces/mamba@e9594ce): the depthwise causal conv1d + SiLU over x, B, C (read and write them), then the SSD
//   chunked scan kernel by kernel (add_ssd_scan), its output gated by SiLU(z) in the last kernel's epilogue (read z,
//   write out and out_x: the gate's bytes as their own memory-bound kernel);
//   the output made contiguous again (read and write d_inner); then, on this rank's tokens, the grouped RMSNorm
//   over d_inner (read, write).
// The backward (MambaSplitConv1dScanCombinedFn.backward): the conv1d again (recomputed), the scan's backward
// kernels, and causal_conv1d_bwd (read xBC and its gradient, write the input gradient); the copies and the norm
// move twice their forward bytes.
// Context parallelism (mamba_context_parallel.py, cp > 1) adds copies around its all-to-alls, on this rank's
// T / cp tokens (`Tl`) and the in_proj widths: B and C repeated to the CP ranks sharing a group (einops repeat,
// :171-184); all_to_all_sp2hp's split + cat of each tensor before its exchange (megatron/core/tensor_parallel/
// mappings.py:566-592); after the exchanges the cat of z, x, B, C, dt and the undoing of attention's load-balanced
// chunk order (torch.cat of the 2 cp chunks, :195-197, :359-375); around y's exchange the chunk order redone
// (:397-413) and all_to_all_hp2sp's split + cat (mappings.py:595-622). Each is a copy (read + write); the
// backward runs their gradients' copies (the repeat's a sum over the replicas), as many bytes.
void add_mamba_core(Costs& out, const GptConfig& c, const models::ComputeModel& cm, bool bwd, Costs& pre, Costs& scan) {
  using models::KernelDesc;
  using models::MemoryKernel;
  const models::Precision act = c.precision == "fp16" ? models::Precision::FP16 : models::Precision::BF16;
  const MambaShard m = mamba_shard(c);
  const std::int64_t t = c.tensor_model_parallel_size, cp = c.context_parallel_size;
  const std::int64_t di = m.d_inner(), gn = m.groups * m.state, nh = m.heads, T = m.tokens();
  const double e = 2.0, f = bwd ? 2.0 : 1.0, Td = double(T), Tl = Td / double(cp);
  auto add = [&](Costs& part, const KernelDesc& k) {
    out.add(cm, k);
    part.add(cm, k);
  };
  auto mem = [&](Costs& part, MemoryKernel k, double bytes) { add(part, KernelDesc::memory(k, bytes, act)); };
  Costs rest;  // the kernels after the last exchange (forward) or before the first (backward)
  Costs& first = bwd ? pre : rest;  // the output side: after y's exchange forward, before it backward
  Costs& last = bwd ? rest : pre;   // the input side
  if (cp > 1) {
    const double w_rep = double(2 * di + 2 * gn + nh) * double(cp);  // in_proj width per TP rank, B / C repeated
    if (m.repeat > 1) mem(last, MemoryKernel::Copy, e * Tl * double(2 * m.state * (c.mamba_num_groups / t)) * double(1 + m.repeat));
    mem(last, MemoryKernel::Copy, 2.0 * e * Tl * w_rep);
    mem(scan, MemoryKernel::Copy, 2.0 * e * Tl * w_rep);
    mem(scan, MemoryKernel::Copy, 2.0 * e * Tl * w_rep);
    mem(scan, MemoryKernel::Copy, 2.0 * e * Td * double(di));
    mem(first, MemoryKernel::Copy, 2.0 * e * Tl * double(di * cp));
  }
  mem(scan, MemoryKernel::Copy, f * 2.0 * e * Td * double(2 * di + 2 * gn + nh));
  const double conv = 2.0 * e * Td * double(di + 2 * gn);  // read + write x, B, C
  mem(scan, MemoryKernel::Elementwise, conv);
  add_ssd_scan([&](const KernelDesc& k) { add(scan, k); }, m, act, bwd);
  if (bwd) mem(scan, MemoryKernel::Elementwise, 1.5 * conv);  // causal_conv1d_bwd: x, B, C, their gradient, write
  else mem(scan, MemoryKernel::Elementwise, 3.0 * e * Td * double(di));  // the gate: read z, write out and out_x
  mem(scan, MemoryKernel::Copy, f * 2.0 * e * Td * double(di));
  mem(first, MemoryKernel::Norm, f * 2.0 * e * Tl * double(di * cp));
}

// A sublayer of the pattern: the decoder layer's costs with the half it lacks emptied (M, *, G and + keep the
// attention block, - and E the MLP block; an E layer's MoE work is priced apart, MoeCosts).
LayerCosts hybrid_sublayer(LayerCosts L, char sym) {
  const bool attn = sym == 'M' || sym == '*' || sym == 'G' || sym == '+';
  if (attn) {
    L.fwd_mlp = L.bwd_mlp = L.wgrad_mlp = L.dgrad_mlp_in = L.wgrad_mlp_in = Costs{};
  } else {
    L.fwd_attn = L.bwd_attn = L.recompute_attn_extra = L.wgrad_attn = L.dgrad_attn_in = L.wgrad_attn_in = Costs{};
  }
  const int drop = attn ? 0 : 1;  // LayerCosts::tp_fused[attention block][backward]
  L.tp_fused[drop][0] = L.tp_fused[drop][1] = TpFusedGemms{};
  return L;
}

std::string hybrid_note(const GptConfig& c) {
  const std::string L = c.hybrid_layers();
  auto n = [&](char ch) { return std::to_string(std::count(L.begin(), L.end(), ch)); };
  const bool gdn = L.find('G') != std::string::npos, mla = L.find('+') != std::string::npos;
  return "gpt: hybrid model, " + std::to_string(L.size()) + " sublayers (" + n('M') + " Mamba-2, " + n('*') +
         " attention, " + (gdn ? n('G') + " Gated DeltaNet, " : "") + (mla ? n('+') + " MLA, " : "") + n('-') +
         " MLP, " + n('E') +
         " MoE): the Mamba-2 SSD chunked scan is priced kernel by kernel (its per-chunk products as batched GEMMs at "
         "the GEMM fit, the state passing at the HBM model; no measurement of these kernels: unvalidated)" +
         (gdn ? "; the Gated DeltaNet chunked delta rule is priced from gdn_layer_flops at the GEMM fit's rate (no "
                "linear-attention kernel is measured: unvalidated)"
              : "") +
         (c.moe.mtp_num_layers > 0 ? "; " + std::to_string(c.moe.mtp_num_layers) + " MTP depths of '" +
                                         hybrid_mtp_pattern(c) + "' (their MoE blocks' compute only, no dispatch)"
                                   : std::string()) +
         "; model FLOPs follow Megatron-LM's hybrid_flops" + (mla ? " (which has no term for the MLA layers)" : "");
}

// The catalogue's hybrid models (gpt_models.cpp holds their shapes), from the launch scripts of
// examples/post_training/modelopt/conf/nvidia/ at NVIDIA/Megatron-LM@d98e8a64:
//   nemotron-h-8b (Nemotron-H-8B-Base-8K.sh): --hybrid-layer-pattern as below, --mamba-head-dim 64,
//     --mamba-num-heads 128, --mamba-num-groups 8, --mamba-state-dim 128, --squared-relu;
//   nemotron-h-56b (Nemotron-H-56B-Base-8K.sh): its pattern, --mamba-state-dim 256 (heads, head dim and groups
//     Megatron's defaults: 2 x 8192 / 64 = 256 heads, 8 groups), --squared-relu;
//   nemotron-3-nano-30b-a3b (NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.sh): its pattern, --mamba-num-heads 64,
//     --mamba-head-dim 64, --squared-relu, --num-experts 128, --moe-router-topk 6, experts of --ffn-hidden-size
//     1856, --moe-shared-expert-intermediate-size 3712, --moe-grouped-gemm, --moe-permute-fusion,
//     --moe-token-dispatcher-type alltoall (its sigmoid router with expert bias is priced as the softmax router);
//   nemotron-3-super-120b-a12b (NVIDIA-Nemotron-3-Super-120B-A12B-BF16.sh): its pattern (88 sublayers: 40 Mamba-2,
//     40 MoE, 8 attention), --mamba-num-heads 128, --mamba-head-dim 64, --squared-relu, --num-experts 512,
//     --moe-router-topk 22, experts of --ffn-hidden-size 2688 in --moe-latent-size 1024, one shared expert of
//     --moe-shared-expert-intermediate-size 5376, --moe-router-dtype fp32, --moe-grouped-gemm,
//     --moe-permute-fusion, --moe-token-dispatcher-type alltoall (sigmoid router priced as above).
void hybrid_catalogue_defaults(GptConfig& c) {
  if (c.model == "nemotron-h-8b") {
    c.hybrid_layer_pattern = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-";
    c.mamba_num_heads = 128;
  } else if (c.model == "nemotron-h-56b") {
    c.hybrid_layer_pattern =
        "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-"
        "M-M-M-M-M-";
    c.mamba_state_dim = 256;
  } else if (c.model == "nemotron-3-nano-30b-a3b") {
    c.hybrid_layer_pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME";
    c.mamba_num_heads = 64;
    c.moe.num_experts = 128, c.moe.moe_router_topk = 6, c.moe.moe_shared_expert_intermediate_size = 3712;
    c.moe.moe_grouped_gemm = true, c.moe.moe_permute_fusion = true, c.moe.moe_token_dispatcher_type = "alltoall";
  } else if (c.model == "nemotron-3-super-120b-a12b") {
    c.hybrid_layer_pattern = "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME";
    c.mamba_num_heads = 128;
    c.moe.num_experts = 512, c.moe.moe_router_topk = 22, c.moe.moe_shared_expert_intermediate_size = 5376;
    c.moe.moe_latent_size = 1024, c.moe.moe_router_dtype = "fp32";
    c.moe.moe_grouped_gemm = true, c.moe.moe_permute_fusion = true, c.moe.moe_token_dispatcher_type = "alltoall";
  } else {
    return;
  }
  c.squared_relu = true;
}

}  // namespace gpt_detail

}  // namespace fabricsim::workloads
