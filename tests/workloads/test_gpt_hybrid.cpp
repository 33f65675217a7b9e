// Megatron-LM's hybrid model (Mamba-2 mixers with attention, MLP and MoE sublayers; hybrid_layer_pattern) in the
// `gpt` generator: parameters against the cited model sizes and by hand, Megatron-LM's hybrid_flops by hand, the
// per-sublayer step (more M: less attention time, more mixer time; TP halves the mixer's GEMMs), the pipeline split
// of the '|' segments, and the refusals (docs/workloads.md "Hybrid Mamba models").
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <map>
#include <string>
#include <vector>

#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/megatron_args.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

// A small hybrid model on 8 H100s: TP 2, PP 1, pattern M*M- (h 1024, 16 heads of 64, squared-ReLU MLP 2816), Mamba-2
// with 16 heads of 64 (d_inner 1024), 2 groups, state 64.
ParamMap hy(ParamMap over = {}) {
  ParamMap p = workloads_test::small_llama(8, 8, {{"pipeline_model_parallel_size", "1"}, {"squared_relu", "true"},
                                                  {"normalization", "RMSNorm"}, {"position_embedding_type", "none"},
                                                  {"untie_embeddings_and_output_weights", "true"},
                                                  {"hybrid_layer_pattern", "M*M-"}, {"mamba_num_heads", "16"},
                                                  {"mamba_head_dim", "64"}, {"mamba_num_groups", "2"},
                                                  {"mamba_state_dim", "64"}});
  p.erase("num_layers");
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}
GptConfig cfg(const ParamMap& p) { return gpt_config_from_params(p, "--param"); }
models::ComputeModel h100() { return workloads_test::compute_of("h100"); }
// Compute seconds of rank 0's trace per sublayer symbol (ops named mb<i>.l<layer>.*).
std::map<char, double> compute_by_symbol(const GptConfig& c) {
  const Trace tr = generate_gpt(c, h100(), "t");
  const std::string L = c.hybrid_layers();
  std::map<char, double> out;
  for (const Op& op : tr.ranks.at(0).ops) {
    if (op.category != "compute") continue;
    const auto at = op.name.find(".l");
    if (at == std::string::npos || op.name.rfind("mb", 0) != 0) continue;
    const std::size_t end = op.name.find('.', at + 2);
    const std::string num = op.name.substr(at + 2, end - at - 2);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) continue;
    out[L[std::stoul(num)]] += op.duration_s;
  }
  return out;
}

}  // namespace

TEST_CASE("hybrid: the catalogue's Nemotron models have their published sizes") {
  auto params = [](const std::string& model, ParamMap over = {}) {
    ParamMap p = {{"model", model}, {"gpu", "h100"}, {"world_size", "8"}, {"global_batch_size", "8"},
                  {"micro_batch_size", "1"}, {"tensor_model_parallel_size", "8"}, {"pipeline_model_parallel_size", "1"}};
    for (const auto& [k, v] : over) p[k] = v;
    return gpt_num_parameters(cfg(p));
  };
  // Nemotron-H 8B and 56B (arXiv:2504.03624, the sizes in their names), Nemotron-3 Nano 31.6B total (its model
  // card: "31.6 billion total parameters"). Tolerances: 3% for the nominal sizes, 1% for the stated 31.6B.
  const double h8 = params("nemotron-h-8b"), h56 = params("nemotron-h-56b");
  const double nano = params("nemotron-3-nano-30b-a3b", {{"expert_model_parallel_size", "8"}, {"tensor_model_parallel_size", "1"}});
  MESSAGE("nemotron-h-8b " << h8 / 1e9 << "B, nemotron-h-56b " << h56 / 1e9 << "B, nemotron-3-nano " << nano / 1e9 << "B");
  CHECK(h8 == doctest::Approx(8e9).epsilon(0.03));
  CHECK(h56 == doctest::Approx(56e9).epsilon(0.03));
  CHECK(nano == doctest::Approx(31.6e9).epsilon(0.01));
  const GptConfig n = cfg({{"model", "nemotron-3-nano-30b-a3b"}, {"gpu", "h100"}, {"world_size", "8"},
                           {"global_batch_size", "8"}, {"micro_batch_size", "1"}, {"expert_model_parallel_size", "8"},
                           {"tensor_model_parallel_size", "1"}, {"pipeline_model_parallel_size", "1"}});
  CHECK(n.num_layers == 52);
  CHECK(gpt_detail::moe_layers_of(n).size() == 52);
  CHECK(n.moe.num_experts == 128);
}

TEST_CASE("hybrid: parameters and Megatron-LM's hybrid_flops, by hand") {
  const GptConfig c = cfg(hy());
  CHECK(c.num_layers == 4);  // the pattern's length
  CHECK(c.hybrid_layers() == "M*M-");
  const double h = 1024, di = 1024, gn = 2 * 64, nh = 16, V = 32000, f = 2816;
  const double mamba = h * (2 * di + 2 * gn + nh) + (di + 2 * gn) * 4 + (di + 2 * gn) + 3 * nh + di + di * h + h;
  const double attn = h * (16 + 2 * 16) * 64 + 16 * 64 * h + h;
  const double mlp = 2 * h * f + h;
  CHECK(gpt_num_parameters(c) == doctest::Approx(2 * mamba + attn + mlp + 2 * V * h + h).epsilon(1e-12));
  // training.py hybrid_flops at NVIDIA/Megatron-LM@d98e8a64, forward x 3 (d_in = 2 h in mamba_layer_flops).
  const double B = 8, s = 2048, T = B * s;
  const double f_attn = 4 * T * h * (h + h) + 2 * B * s * s * h;
  const double f_mamba = 2 * T * h * (2 * 2 * h + 2 * 2 * 64 + nh) + 7 * T * 2 * h * 64 + 2 * T * 2 * h * h;
  const double f_mlp = 4 * T * h * f;
  CHECK(gpt_model_flops(c) == doctest::Approx(3 * (2 * f_mamba + f_attn + f_mlp + 2 * T * h * V)).epsilon(1e-12));
  CHECK(gpt_flops_convention(c) == "megatron-core-causal");
}

TEST_CASE("hybrid: more Mamba sublayers shrink the attention time and grow the mixer time") {
  const auto a = compute_by_symbol(cfg(hy({{"hybrid_layer_pattern", "M**-"}})));
  const auto b = compute_by_symbol(cfg(hy({{"hybrid_layer_pattern", "MMM-"}})));
  MESSAGE("M**-: M " << a.at('M') << " s, * " << a.at('*') << " s; MMM-: M " << b.at('M') << " s");
  CHECK(a.at('*') > 0);
  CHECK(b.count('*') == 0);
  CHECK(b.at('M') > a.at('M'));
  CHECK(b.at('M') == doctest::Approx(3.0 * a.at('M')).epsilon(1e-9));  // three mixers instead of one, the same each
  CHECK(b.at('-') == doctest::Approx(a.at('-')).epsilon(1e-9));        // the MLP sublayer is unchanged
  // A Mamba sublayer has no MLP block and an MLP sublayer no attention block: no TP collective for a missing block.
  const Trace tr = generate_gpt(cfg(hy({{"hybrid_layer_pattern", "MMM-"}})), h100(), "t");
  int mlp_ops = 0, attn_ops = 0;
  for (const Op& op : tr.ranks.at(0).ops) {
    if (op.name.rfind("mb0.l0.", 0) == 0 && op.name.find(".mlp") != std::string::npos) ++mlp_ops;
    if (op.name.rfind("mb0.l3.", 0) == 0 && op.name.find(".attn") != std::string::npos) ++attn_ops;
  }
  CHECK(mlp_ops == 0);
  CHECK(attn_ops == 0);
}

TEST_CASE("hybrid: TP halves the mixer's GEMM work per GPU") {
  // Nemotron-H 8B's mixer (h 4096, 128 heads of 64, 8 groups, state 128) at TP 2 and TP 4.
  auto k = [](int tp) {
    const GptConfig c = cfg(hy({{"hidden_size", "4096"}, {"num_attention_heads", "32"}, {"ffn_hidden_size", "21504"},
                                {"seq_length", "8192"}, {"mamba_num_heads", "128"}, {"mamba_num_groups", "8"},
                                {"mamba_state_dim", "128"}, {"tensor_model_parallel_size", std::to_string(tp)}}));
    return gpt_detail::gpt_step_kernels(c, h100(), "t").layer_mamba;
  };
  const auto t2 = k(2), t4 = k(4);
  CHECK(t4.fwd_attn.flops == doctest::Approx(0.5 * t2.fwd_attn.flops).epsilon(1e-12));
  CHECK(t4.bwd_attn.flops == doctest::Approx(0.5 * t2.bwd_attn.flops).epsilon(1e-12));
  const double r = t4.fwd_attn.seconds / t2.fwd_attn.seconds;
  MESSAGE("mixer forward TP 4 / TP 2: x" << r);
  CHECK(r > 0.45);  // the norm's bytes (sequence-parallel) and kernel fixed costs keep it a little above half
  CHECK(r < 0.6);
  CHECK(t2.fwd_mlp.seconds == 0);  // a Mamba sublayer has no MLP block
}

TEST_CASE("hybrid: PP splits the pattern at its '|' segments as Megatron-LM does") {
  using L = std::vector<std::vector<std::int64_t>>;
  const GptConfig two = cfg(hy({{"hybrid_layer_pattern", "M*M|-"}, {"pipeline_model_parallel_size", "2"}}));
  CHECK(gpt_layer_layout(two) == L{{3}, {1}});
  // 4 segments over PP 2: virtual stages, segment k on rank k % 2, chunk k / 2 (select_pipeline_segment).
  const GptConfig four = cfg(hy({{"hybrid_layer_pattern", "M*|M-|MMM|E"}, {"pipeline_model_parallel_size", "2"},
                                 {"num_experts", "4"}, {"expert_model_parallel_size", "2"}}));
  CHECK(four.vp() == 2);
  CHECK(gpt_layer_layout(four) == L{{2, 3}, {2, 1}});
  CHECK(gpt_detail::moe_layers_of(four) == std::vector<bool>{false, false, false, false, false, false, false, true});
  // Without '|': an even split.
  CHECK(gpt_layer_layout(cfg(hy({{"hybrid_layer_pattern", "M*M-M*M-"}, {"pipeline_model_parallel_size", "2"}}))) == L{{4}, {4}});
  // The generated step runs: stage 1's first chunk holds layers 2-3.
  const Trace tr = generate_gpt(four, h100(), "t");
  CHECK(!tr.ranks.empty());
}

TEST_CASE("hybrid: bad patterns and unmodelled combinations are one-line errors naming the key and position") {
  auto err = [](const ParamMap& p) { return error_of([&] { cfg(p); }); };
  CHECK(err(hy({{"hybrid_layer_pattern", "M*X-"}})).find("hybrid_layer_pattern: position 2: 'X' is not a layer symbol") !=
        std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "M*G-"}})).find("position 2: 'G' (Megatron's Gated DeltaNet layer) is not modelled") !=
        std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "M*M-/MM"}})).find("position 4: '/' starts MTP patterns") != std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "M*ME"}})).find("has MoE layers E but num_experts is not set") != std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "M*M|-|M"}, {"pipeline_model_parallel_size", "2"}})).find("not a multiple of pipeline_model_parallel_size") !=
        std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "M*||M-"}, {"pipeline_model_parallel_size", "3"}})).find("is empty") != std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "M*M-M*M-"}, {"pipeline_model_parallel_size", "2"}, {"virtual_pipeline_model_parallel_size", "2"}}))
            .find("needs '|' segments") != std::string::npos);
  CHECK(err(hy({{"mamba_num_groups", "3"}})).find("mamba_num_groups: must be a multiple of tensor_model_parallel_size") !=
        std::string::npos);
  CHECK(err(hy({{"context_parallel_size", "2"}, {"world_size", "8"}})).find("context_parallel_size: with Mamba layers is not modelled") !=
        std::string::npos);
  CHECK(err(hy({{"hybrid_override_pattern", "M*M-"}})).find("hybrid_override_pattern: cannot be given with hybrid_layer_pattern") !=
        std::string::npos);
  // The deprecated alias alone is the pattern.
  ParamMap alias = hy();
  alias.erase("hybrid_layer_pattern");
  alias["hybrid_override_pattern"] = "MM*-";
  CHECK(cfg(alias).hybrid_layers() == "MM*-");
}

TEST_CASE("hybrid: the ratio flags build Megatron's pattern_from_ratios pattern") {
  // pattern_from_ratios(10, 0.2, 0.2) in hybrid_layer_allocation.py at NVIDIA/Megatron-LM@d98e8a64: two attention
  // layers spread between Mamba layers, then two MLP layers among the remaining Mamba layers (the function's walk,
  // by hand); 0.25 x 10 = 2.5 rounds to 2 as Python's round() does.
  CHECK(gpt_detail::hybrid_pattern_from_ratios(10, 0.2, 0.0) == "MMM*MM*MMM");
  CHECK(gpt_detail::hybrid_pattern_from_ratios(10, 0.2, 0.2) == "MMM*-M*MM-");
  CHECK(gpt_detail::hybrid_pattern_from_ratios(10, 0.25, 0.0) == "MMM*MM*MMM");
  ParamMap p = hy();
  p.erase("hybrid_layer_pattern");
  p["num_layers"] = "10", p["hybrid_attention_ratio"] = "0.2";
  CHECK(cfg(p).hybrid_layers() == "MMM*MM*MMM");
}

TEST_CASE("hybrid: a Mamba sublayer's activations have no s^2 term") {
  auto act = [](const char* s) {
    return gpt_memory_per_gpu(cfg(hy({{"hybrid_layer_pattern", "MMMM"}, {"seq_length", s}}))).activations_bytes;
  };
  CHECK(act("16384") / act("8192") == doctest::Approx(2.0).epsilon(1e-9));
}

TEST_CASE("hybrid: a pretrain_hybrid.py launch imports its pattern and Mamba flags; pretrain_gpt.py with a pattern is refused") {
  const std::string flags =
      " --hybrid-layer-pattern M*M- --mamba-num-heads 16 --mamba-num-groups 2 --mamba-state-dim 64 --hidden-size 1024"
      " --num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --bf16"
      " --tokenizer-type GPT2BPETokenizer";
  auto imp = [](const std::string& text) {
    return import_megatron_args(read_megatron_launch(text, "job.sh", {}), 8, {});
  };
  const MegatronImport m = imp("torchrun pretrain_hybrid.py" + flags);
  CHECK(m.params.at("hybrid_layer_pattern") == "M*M-");
  CHECK(m.params.at("mamba_num_heads") == 16);
  CHECK(m.params.at("mamba_state_dim") == 64);
  CHECK(!m.params.contains("num_layers"));  // the pattern sets it
  CHECK(imp("torchrun pretrain_mamba.py" + flags).params.at("mamba_num_groups") == 2);
  CHECK(error_of([&] { imp("torchrun pretrain_gpt.py --num-layers 4" + flags); })
            .find("pretrain_gpt.py builds a GPT model and does not read the hybrid pattern flags") != std::string::npos);
  CHECK(error_of([&] { imp("torchrun pretrain_hybrid.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16 "
                           "--seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --bf16"); })
            .find("pretrain_hybrid.py without --hybrid-layer-pattern") != std::string::npos);
}
