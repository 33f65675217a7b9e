// Hybrid linear attention (Gated DeltaNet, Megatron-Core's experimental_attention_variant gated_delta_net) in the
// `gpt` generator: which layers are GDN, Megatron-LM's FLOP count (computed by hand here), no s^2 growth of the
// GDN layer, and the refusals (docs/workloads.md "Hybrid linear attention").
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <string>
#include <vector>

#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/megatron_args.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

// A small hybrid model on 8 H100s: TP 2, PP 1, 4 layers (h 1024, 16 heads of 64, SwiGLU 2816), GDN with
// 4 key heads and 8 value heads of 64, conv kernel 4, linear_attention_freq 2 (layers 0 and 2 GDN).
ParamMap hybrid(ParamMap over = {}) {
  ParamMap p = workloads_test::small_llama(8, 8, {{"pipeline_model_parallel_size", "1"}, {"swiglu", "true"},
                                                   {"normalization", "RMSNorm"}, {"position_embedding_type", "rope"},
                                                   {"experimental_attention_variant", "gated_delta_net"},
                                                   {"linear_attention_freq", "2"}, {"linear_num_key_heads", "4"},
                                                   {"linear_num_value_heads", "8"}, {"linear_key_head_dim", "64"},
                                                   {"linear_value_head_dim", "64"}, {"linear_conv_kernel_dim", "4"}});
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}
GptConfig cfg(const ParamMap& p) { return gpt_config_from_params(p, "--param"); }
models::ComputeModel h100() {
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec("h100");
  return cm;
}

}  // namespace

TEST_CASE("gdn: linear_attention_freq picks the GDN layers as Megatron-LM does; the step prices them apart") {
  // Integer N: layer i (0-based) is GDN unless (i + 1) % N == 0.
  CHECK(cfg(hybrid()).gdn_layers() == std::vector<bool>{true, false, true, false});
  CHECK(cfg(hybrid({{"linear_attention_freq", "4"}})).gdn_layers() == std::vector<bool>{true, true, true, false});
  CHECK(cfg(hybrid({{"linear_attention_freq", "1"}})).gdn_layers() == std::vector<bool>{false, false, false, false});
  CHECK(cfg(hybrid({{"linear_attention_freq", "[0,1,1,0]"}})).gdn_layers() == std::vector<bool>{false, true, true, false});
  CHECK(cfg(hybrid({{"linear_attention_freq", "[1,0]*2"}})).gdn_layers() == std::vector<bool>{true, false, true, false});
  // Megatron's help examples nest parenthesised sums: "([1]*3+[0]*1)*3" is [1,1,1,0] three times.
  const std::vector<bool> t3{true, true, true, false};
  CHECK(moe_layer_pattern("([1]*3+[0]*1)*3", 12, "t", "linear_attention_freq") ==
        std::vector<bool>{true, true, true, false, true, true, true, false, true, true, true, false});
  CHECK(cfg(hybrid({{"linear_attention_freq", "([1]*3+[0]*1)"}})).gdn_layers() == t3);
  CHECK(cfg(hybrid({{"linear_attention_freq", "([1]*2)+([1]+[0])"}})).gdn_layers() == t3);
  CHECK(cfg(hybrid({{"linear_attention_freq", "[1]*2+([1,0])*1"}})).gdn_layers() == t3);
  CHECK(error_of([] { moe_layer_pattern("([1]*3+[0]", 4, "t", "linear_attention_freq"); }).find("expected ')'") !=
        std::string::npos);
  // No variant: no GDN layer.
  ParamMap plain = hybrid();
  plain.erase("experimental_attention_variant"), plain.erase("linear_attention_freq");
  CHECK(cfg(plain).gdn_layers() == std::vector<bool>{false, false, false, false});
  // The step's kernels: layer 0 and 2 are the GDN layer, 1 and 3 the attention layer of the plain model.
  const models::ComputeModel cm = h100();
  const auto k = gpt_detail::gpt_step_kernels(cfg(hybrid()), cm, "t");
  const auto kp = gpt_detail::gpt_step_kernels(cfg(plain), cm, "t");
  CHECK(k.layer_at(1).fwd_attn.seconds == kp.layer.fwd_attn.seconds);
  CHECK(k.layer_at(0).fwd_attn.seconds == k.layer_gdn.fwd_attn.seconds);
  CHECK(k.layer_at(0).fwd_attn.seconds != k.layer_at(1).fwd_attn.seconds);
  CHECK(k.layer_at(2).bwd_attn.seconds == k.layer_gdn.bwd_attn.seconds);
  // The MLP side is the same in both kinds of layer.
  CHECK(k.layer_gdn.fwd_mlp.seconds == k.layer.fwd_mlp.seconds);
  // The generated trace holds both: its compute differs from the all-attention model's.
  const Trace th = generate_gpt(cfg(hybrid()), cm, "t"), tp = generate_gpt(cfg(plain), cm, "t");
  double sh = 0, sp = 0;
  for (const Op& op : th.ranks.at(0).ops) sh += op.category == "compute" ? op.duration_s : 0.0;
  for (const Op& op : tp.ranks.at(0).ops) sp += op.category == "compute" ? op.duration_s : 0.0;
  CHECK(sh > 0);
  CHECK(sh != sp);
}

TEST_CASE("gdn: model FLOPs are Megatron-LM's num_floating_point_operations with gdn_layer_flops, by hand") {
  const GptConfig c = cfg(hybrid());
  CHECK(gpt_flops_convention(c) == "megatron-core-causal");
  // Per token, megatron/training/training.py at NVIDIA/Megatron-LM@d98e8a64 (forward + backward 3 x FMA 2):
  const double h = 1024, s = 2048, V = 32000, q = 16 * 64;  // MHA: q = k = v = 1024
  const double attn_w = h * (q + q + q) + q * h;           // QKV + output projection
  const double attn_core = q / 2.0 * 2.0 * s;              // causal QK^T and PV
  const double qk = 4 * 64, v = 8 * 64, nv = 8;
  const double gdn = h * (2 * qk + 2 * v + 2 * nv)         // in_proj
                     + 4 * (2 * qk + v)                    // conv1d
                     + nv * 64 * 64 * 4                    // gated delta rule
                     + h * v;                              // out_proj
  const double mlp = 3.0 * h * 2816;                       // SwiGLU
  const double per_token = 6.0 * (2 * (attn_w + attn_core) + 2 * gdn + 4 * mlp + h * V);
  const double B = 8;
  CHECK(gpt_model_flops(c) == doctest::Approx(B * s * per_token).epsilon(1e-12));
  // attention_output_gate adds the gate's columns of the QKV projection to the two attention layers.
  const GptConfig g = cfg(hybrid({{"attention_output_gate", "true"}}));
  CHECK(gpt_model_flops(g) - gpt_model_flops(c) == doctest::Approx(B * s * 6.0 * 2 * h * q).epsilon(1e-12));
}

TEST_CASE("gdn: a GDN layer's time and activations grow linearly with the sequence, attention's faster") {
  const models::ComputeModel cm = h100();
  // Long enough that the kernels' fixed costs are small against their work (at 8K -> 16K the GDN block grows
  // 1.5x, its kernels partly launch-bound at this small width).
  const GptConfig c1 = cfg(hybrid({{"seq_length", "32768"}})), c2 = cfg(hybrid({{"seq_length", "65536"}}));
  const auto k1 = gpt_detail::gpt_step_kernels(c1, cm, "t"), k2 = gpt_detail::gpt_step_kernels(c2, cm, "t");
  const double g_f = k2.layer_gdn.fwd_attn.seconds / k1.layer_gdn.fwd_attn.seconds;
  const double g_b = k2.layer_gdn.bwd_attn.seconds / k1.layer_gdn.bwd_attn.seconds;
  const double a_f = k2.layer.fwd_attn.seconds / k1.layer.fwd_attn.seconds;
  MESSAGE("seq 32K -> 64K: GDN block forward x" << g_f << ", backward x" << g_b << "; attention block forward x" << a_f);
  CHECK(g_f > 1.8);
  CHECK(g_f < 2.2);
  CHECK(g_b > 1.8);
  CHECK(g_b < 2.2);
  CHECK(a_f > 3.0);  // the s x s term dominates
  // FLOPs of the GDN block double exactly (no s^2 term).
  CHECK(k2.layer_gdn.fwd_attn.flops == doctest::Approx(2.0 * k1.layer_gdn.fwd_attn.flops).epsilon(1e-12));
  // Memory: the activations of the all-GDN model double with the sequence.
  const GptConfig a1 = cfg(hybrid({{"seq_length", "8192"}, {"linear_attention_freq", "[1,1,1,1]"}}));
  const GptConfig a2 = cfg(hybrid({{"seq_length", "16384"}, {"linear_attention_freq", "[1,1,1,1]"}}));
  CHECK(a2.gdn_layers() == std::vector<bool>{true, true, true, true});
  const double m1 = gpt_memory_per_gpu(a1).activations_bytes, m2 = gpt_memory_per_gpu(a2).activations_bytes;
  CHECK(m2 / m1 == doctest::Approx(2.0).epsilon(0.05));
}

TEST_CASE("gdn: bad values are one-line errors naming the key") {
  auto err = [](const ParamMap& p) { return error_of([&] { cfg(p); }); };
  CHECK(err(hybrid({{"experimental_attention_variant", "dsa"}})).find("experimental_attention_variant: expected gated_delta_net") !=
        std::string::npos);
  ParamMap nofreq = hybrid();
  nofreq.erase("linear_attention_freq");
  CHECK(err(nofreq).find("linear_attention_freq: must be set") != std::string::npos);
  ParamMap novar = hybrid();
  novar.erase("experimental_attention_variant");
  CHECK(err(novar).find("linear_attention_freq: needs experimental_attention_variant") != std::string::npos);
  CHECK(err(hybrid({{"linear_attention_freq", "[1,1]"}})).find("linear_attention_freq") != std::string::npos);
  CHECK(err(hybrid({{"linear_attention_freq", "0"}})).find("linear_attention_freq") != std::string::npos);
  CHECK(err(hybrid({{"linear_num_value_heads", "6"}})).find("linear_num_value_heads: must be a multiple") != std::string::npos);
  CHECK(err(hybrid({{"linear_num_key_heads", "1"}, {"linear_num_value_heads", "2"}, {"tensor_model_parallel_size", "2"}}))
            .find("linear_num_key_heads: ") != std::string::npos);
  // Under CP the heads split over TP x CP (the a2a to head sharding; TransformerConfig.__post_init__ @d98e8a64).
  CHECK(err(hybrid({{"context_parallel_size", "2"}, {"tensor_model_parallel_size", "1"}, {"linear_num_key_heads", "1"},
                    {"linear_num_value_heads", "2"}}))
            .find("multiples of tensor_model_parallel_size x context_parallel_size (2)") != std::string::npos);
  CHECK(err(hybrid({{"linear_conv_kernel_dim", "0"}})).find("linear_conv_kernel_dim") != std::string::npos);
  CHECK(err(hybrid({{"attention_output_gate", "maybe"}})).find("attention_output_gate") != std::string::npos);
  // A100's default attention is the SC'21 unfused layer, which has no GDN pricing.
  CHECK(err(hybrid({{"gpu", "a100-80gb"}})).find("experimental_attention_variant: needs flash or fused") != std::string::npos);
  CHECK(cfg(hybrid({{"gpu", "a100-80gb"}, {"attention_backend", "flash"}})).gdn());
}

TEST_CASE("gdn: the qwen3-next-80b-a3b catalogue entry is Qwen3-Next's ModelZoo configuration") {
  const GptConfig c = cfg({{"model", "qwen3-next-80b-a3b"}, {"gpu", "h100"}, {"world_size", "128"},
                           {"tensor_model_parallel_size", "1"}, {"pipeline_model_parallel_size", "4"},
                           {"expert_model_parallel_size", "32"}, {"global_batch_size", "256"},
                           {"recompute_granularity", "none"}});
  const auto g = c.gdn_layers();
  int n = 0;
  for (bool b : g) n += b;
  CHECK(g.size() == 48);
  CHECK(n == 36);
  CHECK(!g[3]);
  CHECK(g[0]);
  CHECK(c.attention_output_gate);
  CHECK(c.qk_layernorm);
  CHECK(c.moe.num_experts == 512);
  CHECK(c.moe.moe_router_topk == 10);
  CHECK(c.moe.mtp_num_layers == 1);
  // The two kinds of layer on an H100 at the row-98 layout (TP 1, seq 4096): the attention-side block times, and
  // the rate the chunked delta rule gets from the GEMM fit (docs/workloads.md quotes these).
  models::ComputeModel cm = h100();
  const auto k = gpt_detail::gpt_step_kernels(c, cm, "t");
  const auto chunk = models::KernelDesc::gemm(4096 * 32, 128, 128, models::Precision::BF16);
  MESSAGE("qwen3-next on H100: GDN block fwd " << k.layer_gdn.fwd_attn.seconds * 1e3 << " ms, bwd "
          << k.layer_gdn.bwd_attn.seconds * 1e3 << " ms; attention block fwd " << k.layer.fwd_attn.seconds * 1e3
          << " ms, bwd " << k.layer.bwd_attn.seconds * 1e3 << " ms; MLP fwd " << k.layer.fwd_mlp.seconds * 1e3
          << " ms; delta-rule GEMM " << chunk.flops() / cm.kernel_time_s(chunk) / 1e12 << " TFLOP/s");
  CHECK(k.layer_gdn.fwd_attn.seconds > 0);
  // About 80 B parameters (the model's name); the GDN layers are counted with their own weights.
  const double p = gpt_num_parameters(c);
  MESSAGE("qwen3-next-80b-a3b: " << p / 1e9 << " B parameters");
  CHECK(p > 78e9);
  CHECK(p < 82e9);
}

TEST_CASE("gdn: a Megatron-LM launch with the hybrid flags imports them as modelled") {
  const std::string text =
      "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16"
      " --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --bf16 --tokenizer-type GPT2BPETokenizer"
      " --experimental-attention-variant gated_delta_net --linear-attention-freq 2 --linear-num-key-heads 4"
      " --linear-num-value-heads 8 --attention-output-gate\n";
  const MegatronImport m = import_megatron_args(read_megatron_launch(text, "job.sh", {}), 8, {});
  CHECK(m.params.at("experimental_attention_variant").get<std::string>() == "gated_delta_net");
  CHECK(m.params.at("linear_attention_freq").get<std::string>() == "2");
  CHECK(m.params.at("linear_num_value_heads").get<std::int64_t>() == 8);
  CHECK(m.params.at("attention_output_gate").get<bool>());
  CHECK(m.not_modelled.empty());
}
