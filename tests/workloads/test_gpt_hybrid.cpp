// Megatron-LM's hybrid model (Mamba-2 mixers with attention, MLP and MoE sublayers; hybrid_layer_pattern) in the
// `gpt` generator: parameters against the cited model sizes and by hand, Megatron-LM's hybrid_flops by hand, the
// per-sublayer step (more M: less attention time, more mixer time; TP halves the mixer's GEMMs), the pipeline split
// of the '|' segments, and the refusals (docs/workloads.md "Hybrid Mamba models").
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <algorithm>
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
  CHECK(err(hy({{"hybrid_layer_pattern", "M*D-"}})).find("hybrid_layer_pattern: position 2: 'D' (Megatron's DSA layer") !=
        std::string::npos);
  // Megatron's _validate_pattern refuses '*' beside '+' (hybrid_layer_allocation.py @d98e8a64).
  CHECK(err(hy({{"hybrid_layer_pattern", "M*+-"}})).find("hybrid_layer_pattern: has both '*' attention and '+' MLA layers") !=
        std::string::npos);
  CHECK(err(hy({{"multi_latent_attention", "true"}})).find("multi_latent_attention: in a hybrid model applies to its '+' (MLA) layers") !=
        std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "MG*-"}, {"experimental_attention_variant", "gated_delta_net"}, {"linear_attention_freq", "4"}}))
            .find("experimental_attention_variant: cannot be combined with hybrid_layer_pattern: its 'G' symbols") != std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "MG*-"}, {"linear_attention_freq", "4"}}))
            .find("linear_attention_freq: is not read by hybrid models") != std::string::npos);
  // The GDN layers' shape checks (TransformerConfig.__post_init__ @d98e8a64) hold for 'G' too; CP is refused.
  CHECK(err(hy({{"hybrid_layer_pattern", "MG*-"}, {"linear_num_key_heads", "3"}, {"linear_num_value_heads", "6"}}))
            .find("linear_num_key_heads: linear_num_key_heads and linear_num_value_heads must be multiples of") != std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "G*G-"}, {"context_parallel_size", "4"}, {"world_size", "16"}, {"global_batch_size", "16"},
                {"linear_num_key_heads", "4"}, {"linear_num_value_heads", "8"}}))
            .find("linear_num_key_heads: linear_num_key_heads and linear_num_value_heads must be multiples of "
                  "tensor_model_parallel_size x context_parallel_size (8)") != std::string::npos);
  // MTP patterns (parse_hybrid_pattern, hybrid_layer_allocation.py; arguments.py:870-884 @d98e8a64).
  CHECK(err(hy({{"hybrid_layer_pattern", "M*M-/*-/-*"}})).find("hybrid_layer_pattern: MTP pattern 2 ('-*') differs from MTP pattern 1 ('*-')") !=
        std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "M*M-/*|-"}})).find("hybrid_layer_pattern: position 6: '|' in an MTP pattern") != std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "M*M-/*-/*-"}, {"mtp_num_layers", "3"}}))
            .find("mtp_num_layers: (3) differs from the 2 MTP patterns after '/'") != std::string::npos);
  CHECK(err(hy({{"mtp_num_layers", "1"}})).find("mtp_num_layers: with hybrid_layer_pattern needs the MTP layers' pattern after '/'") !=
        std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "M*M-/*E"}, {"num_experts", "4"}})).find("has MoE layers E in its MTP pattern only") !=
        std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "M*ME"}})).find("has MoE layers E but num_experts is not set") != std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "M*M|-|M"}, {"pipeline_model_parallel_size", "2"}})).find("not a multiple of pipeline_model_parallel_size") !=
        std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "M*||M-"}, {"pipeline_model_parallel_size", "3"}})).find("is empty") != std::string::npos);
  CHECK(err(hy({{"hybrid_layer_pattern", "M*M-M*M-"}, {"pipeline_model_parallel_size", "2"}, {"virtual_pipeline_model_parallel_size", "2"}}))
            .find("needs '|' segments") != std::string::npos);
  CHECK(err(hy({{"mamba_num_groups", "3"}})).find("mamba_num_groups: must be a multiple of tensor_model_parallel_size") !=
        std::string::npos);
  // MambaContextParallel's divisibility (mamba_context_parallel.py:106, :120, :128 @d98e8a64).
  CHECK(err(hy({{"context_parallel_size", "4"}, {"mamba_num_heads", "12"}})).find("context_parallel_size: Mamba heads per TP rank (6) must be a multiple of context_parallel_size (4)") !=
        std::string::npos);
  CHECK(err(hy({{"context_parallel_size", "2"}, {"mamba_num_heads", "24"}, {"mamba_num_groups", "6"}}))
            .find("mamba_num_groups: Mamba groups per TP rank (3) must be a multiple of context_parallel_size (2)") != std::string::npos);
  CHECK(err(hy({{"context_parallel_size", "3"}, {"world_size", "6"}, {"global_batch_size", "6"}, {"seq_length", "3072"},
                {"mamba_num_heads", "24"}, {"mamba_num_groups", "4"}}))
            .find("context_parallel_size: must be a multiple of the Mamba groups per TP rank (2) when larger") != std::string::npos);
  CHECK(err(hy({{"context_parallel_size", "2"}, {"context_parallel_rotate_method", "allgather"}}))
            .find("context_parallel_rotate_method: is PyTorch's context parallelism") != std::string::npos);
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

namespace {
// Nemotron-H 8B (h 4096, 128 Mamba heads of 64: d_inner 8192, 8 groups of state 128) at sequence 8192, TP 2, over
// `cp` x 4 H100s (DP 2, PP 1), micro-batch 1.
ParamMap nemotron8(int cp, ParamMap over = {}) {
  ParamMap p = {{"model", "nemotron-h-8b"}, {"gpu", "h100"}, {"world_size", std::to_string(4 * cp)},
                {"global_batch_size", "8"}, {"micro_batch_size", "1"}, {"tensor_model_parallel_size", "2"},
                {"context_parallel_size", std::to_string(cp)}, {"pipeline_model_parallel_size", "1"},
                {"sequence_parallel", "true"}, {"seq_length", "8192"}, {"recompute_granularity", "none"},
                {"use_distributed_optimizer", "true"}};
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}
}  // namespace

TEST_CASE("hybrid: Mamba layers under CP 2 exchange z, x, B, C, dt and y by all-to-all with the bytes Megatron moves") {
  const GptConfig c = cfg(nemotron8(2));
  const Trace tr = generate_gpt(c, h100(), "t");
  // By hand (mamba_context_parallel.py pre_conv_ssm / post_conv_ssm @d98e8a64): this rank's 8192 / 2 = 4096 tokens
  // of one sequence; a TP rank holds d_inner 8192 / 2 = 4096, 8 / 2 = 4 groups of state 128, 128 / 2 = 64 heads;
  // bf16. z, x and y: 4096 x 4096 x 2 B; B and C: 4096 x 4 x 128 x 2 B (no repeat: 4 groups >= CP 2); dt: 4096 x 64 x 2 B.
  const double tok = 4096, zx = tok * 4096 * 2, bc = tok * 4 * 128 * 2, dt = tok * 64 * 2;
  const std::map<std::string, double> want = {{"z", zx}, {"x", zx}, {"B", bc}, {"C", bc}, {"dt", dt}, {"y", zx}};
  std::vector<std::string> order;  // layer 0's ops in emission order
  std::map<std::string, double> got;
  bool attn_cp = false;
  for (const Op& op : tr.ranks.at(0).ops) {
    if (op.name.rfind("mb0.l7.attn.cp.", 0) == 0) attn_cp = true;  // pattern position 7 is '*'
    if (op.name.rfind("mb0.l0.", 0) != 0) continue;
    order.push_back(op.name);
    if (op.kind == OpKind::Collective && op.coll == CollOp::AllToAll) {
      CHECK(op.category == "cp");
      got[op.name] = op.bytes;
    }
  }
  CHECK(got.size() == 12);  // six forward, six backward
  for (const auto& [tensor, bytes] : want) {
    CAPTURE(tensor);
    CHECK(got.at("mb0.l0.attn.cp.a2a." + tensor) == doctest::Approx(bytes).epsilon(1e-12));
    CHECK(got.at("mb0.l0.attn.bwd.cp.a2a.d" + tensor) == doctest::Approx(bytes).epsilon(1e-12));
  }
  // Where they sit: in_proj, the five exchanges, the scan, y's exchange, then the norm and out_proj.
  auto at = [&](const std::string& n) { return std::find(order.begin(), order.end(), n) - order.begin(); };
  CHECK(at("mb0.l0.fwd.attn.in") < at("mb0.l0.attn.cp.a2a.z"));
  CHECK(at("mb0.l0.attn.cp.a2a.dt") < at("mb0.l0.fwd.attn.scan"));
  CHECK(at("mb0.l0.fwd.attn.scan") < at("mb0.l0.attn.cp.a2a.y"));
  CHECK(at("mb0.l0.attn.cp.a2a.y") < at("mb0.l0.fwd.attn"));
  CHECK(at("mb0.l0.bwd.attn.out") < at("mb0.l0.attn.bwd.cp.a2a.dy"));
  CHECK(at("mb0.l0.attn.bwd.cp.a2a.dy") < at("mb0.l0.bwd.attn.scan"));
  CHECK(at("mb0.l0.bwd.attn.scan") < at("mb0.l0.attn.bwd.cp.a2a.dz"));
  // The attention sublayers keep the attention's CP exchange (cp_comm_type p2p: the K/V ring).
  CHECK(attn_cp);
  // CP 1 has no Mamba exchange; its per-token compute bounds CP 2's: half the tokens per rank, the scan's work
  // split by heads, plus the copies the exchanges need.
  const Trace one = generate_gpt(cfg(nemotron8(1)), h100(), "t");
  for (const Op& op : one.ranks.at(0).ops) CHECK(op.name.find(".cp.a2a") == std::string::npos);
  const auto m1 = compute_by_symbol(cfg(nemotron8(1))), m2 = compute_by_symbol(c);
  MESSAGE("Mamba sublayers' compute per rank: CP 1 " << m1.at('M') << " s, CP 2 " << m2.at('M') << " s");
  CHECK(m2.at('M') > 0.5 * m1.at('M'));
  CHECK(m2.at('M') < 0.6 * m1.at('M'));
}

TEST_CASE("hybrid: CP beyond a TP rank's Mamba groups repeats B and C to the ranks sharing a group") {
  // hy(): 16 heads, 2 groups, TP 2 -> one group per TP rank; CP 2 gives each CP rank that group's B and C
  // (group_repeat_count 2, mamba_context_parallel.py:119-125): B and C exchange 2 x the group's width.
  const GptConfig c = cfg(hy({{"context_parallel_size", "2"}}));
  CHECK(gpt_detail::mamba_shard(c).repeat == 2);
  CHECK(gpt_detail::mamba_shard(c).groups == 1);
  CHECK(gpt_detail::mamba_shard(c).heads == 4);
  const auto b = gpt_detail::mamba_cp_a2a_bytes(c);
  const double tok = 2048 / 2;  // this rank's tokens
  CHECK(b[2] == doctest::Approx(tok * 2 * 64 * 2).epsilon(1e-12));  // B: 1 group x 2 replicas x state 64, bf16
  CHECK(b[0] == doctest::Approx(tok * 512 * 2).epsilon(1e-12));     // z: d_inner 1024 / TP 2
  CHECK(b[4] == doctest::Approx(tok * 8 * 2).epsilon(1e-12));       // dt: 8 heads per TP rank
}

TEST_CASE("hybrid: the SSD scan is priced kernel by kernel; its FLOPs by hand from the chunk shapes") {
  // Nemotron-H 8B's mixer at TP 2, sequence 8192, micro-batch 1: the scan runs 64 heads of 64, 4 groups of state
  // 128, in 8192 / 128 = 64 chunks (MambaMixer's chunk_size 128).
  auto layer = [](const char* seq) {
    const GptConfig c = cfg(hy({{"hidden_size", "4096"}, {"num_attention_heads", "32"}, {"ffn_hidden_size", "21504"},
                                {"seq_length", seq}, {"mamba_num_heads", "128"}, {"mamba_num_groups", "8"},
                                {"mamba_state_dim", "128"}}));
    return gpt_detail::gpt_step_kernels(c, h100(), "t").layer_mamba;
  };
  const gpt_detail::LayerCosts L = layer("8192");
  const double C = 64, H = 64, G = 4, P = 64, N = 128, Q = 128;
  // Forward (_mamba_chunk_scan_combined_fwd): chunk states P x N x Q per chunk and head, C B^T Q x Q x N per chunk
  // and group, the chunk scan Q x P x (N + Q / 2) per chunk and head (the causal half of the chunk).
  const double fwd = 2 * C * H * P * N * Q + 2 * C * G * Q * Q * N + 2 * C * H * Q * P * (N + Q / 2);
  // Backward (_mamba_chunk_scan_combined_bwd): C B^T and the chunk states again, dstates, dx, dB, dC, dCB (causal),
  // the two _bmm_chunk_bwd, ddA (causal).
  const double bwd = 2 * C * G * Q * Q * N + 2 * C * H * P * N * Q + 2 * C * H * P * N * Q + 2 * C * H * Q * P * (N + Q / 2) +
                     2 * 2 * C * H * Q * N * P + 2 * 2 * C * H * Q * (Q / 2) * P + 2 * 2 * C * G * Q * N * Q;
  CHECK(L.mamba_fwd_scan.flops == doctest::Approx(fwd).epsilon(1e-12));
  CHECK(L.mamba_bwd_scan.flops == doctest::Approx(bwd).epsilon(1e-12));
  // Kernels between in_proj and the norm: the layout copy, conv1d, 5 SSD kernels (cumsum, chunk state, state
  // passing, C B^T, chunk scan), the gate, the output copy; backward: copy, conv1d again, 15 SSD kernels, the
  // conv1d backward, copy.
  CHECK(L.mamba_fwd_scan.kernels == 9);
  CHECK(L.mamba_bwd_scan.kernels == 19);
  // Megatron-LM's mamba_layer_flops counts 7 x d_inner x state per token (training.py @d98e8a64); the kernels' own
  // products are 3/4 of that here (43008 vs 57344 per token and head).
  const double megatron = 7.0 * 8192 * (H * P) * N;
  MESSAGE("SSD forward FLOPs / Megatron's count: " << L.mamba_fwd_scan.flops / megatron << "; backward / forward "
                                                   << L.mamba_bwd_scan.flops / L.mamba_fwd_scan.flops << "; mixer core "
                                                   << L.mamba_fwd_scan.seconds * 1e3 << " ms forward, "
                                                   << L.mamba_bwd_scan.seconds * 1e3 << " ms backward");
  CHECK(L.mamba_fwd_scan.flops / megatron == doctest::Approx(0.75).epsilon(1e-12));
  // Linear in the sequence: twice the chunks, twice the work and (kernel overheads aside) the time.
  const gpt_detail::LayerCosts L2 = layer("16384");
  CHECK(L2.mamba_fwd_scan.flops == doctest::Approx(2 * fwd).epsilon(1e-12));
  CHECK(L2.mamba_fwd_scan.seconds / L.mamba_fwd_scan.seconds > 1.9);
  CHECK(L2.mamba_fwd_scan.seconds / L.mamba_fwd_scan.seconds <= 2.0);
}

namespace {
double rank0_compute_s(const GptConfig& c) {
  double sum = 0;
  const Trace tr = generate_gpt(c, h100(), "t");
  for (const Op& op : tr.ranks.at(0).ops)
    if (op.category == "compute") sum += op.duration_s;
  return sum;
}
}  // namespace

TEST_CASE("hybrid: 'G' sublayers are Gated DeltaNet layers: G-G-G-*- is the GPT path's GDN model with linear_attention_freq 4") {
  // The same four decoder layers written two ways: Megatron's GPT model with experimental_attention_variant
  // gated_delta_net and linear_attention_freq 4 (three GDN layers, then one attention layer, each with its MLP) and
  // the hybrid pattern G-G-G-*- (each block its own sublayer with its own pre-norm). Same weights (a GPT layer's two
  // norms are the two sublayers' pre-norms), same kernels, same saved activations.
  const GptConfig gpt = cfg(workloads_test::small_llama(8, 8, {{"pipeline_model_parallel_size", "1"}, {"squared_relu", "true"},
                                                              {"normalization", "RMSNorm"}, {"position_embedding_type", "none"},
                                                              {"untie_embeddings_and_output_weights", "true"},
                                                              {"experimental_attention_variant", "gated_delta_net"},
                                                              {"linear_attention_freq", "4"}}));
  const GptConfig hyb = cfg(hy({{"hybrid_layer_pattern", "G-G-G-*-"}}));
  CHECK(hyb.num_layers == 8);
  CHECK(hyb.gdn_layers() == std::vector<bool>{true, false, true, false, true, false, false, false});
  CHECK(gpt_num_parameters(hyb) == doctest::Approx(gpt_num_parameters(gpt)).epsilon(1e-12));
  CHECK(gpt_memory_per_gpu(hyb).activations_bytes == doctest::Approx(gpt_memory_per_gpu(gpt).activations_bytes).epsilon(1e-12));
  const double cg = rank0_compute_s(gpt), ch = rank0_compute_s(hyb);
  MESSAGE("rank 0 compute: GPT GDN " << cg * 1e3 << " ms, hybrid G-G-G-*- " << ch * 1e3 << " ms");
  CHECK(ch == doctest::Approx(cg).epsilon(1e-9));
  // hybrid_flops (training.py:964-1006 @d98e8a64) by hand with Megatron's GDN defaults (16 key heads, 32 value heads
  // of 128, 4 conv taps): gdn_layer_flops = 2 T (h (2 qk + 2 v + 2 nv) + 4 (2 qk + v) + 4 nv dv^2 + h v).
  const double h = 1024, V = 32000, f = 2816, B = 8, s = 2048, T = B * s;
  const double qk = 16 * 128, v = 32 * 128, nv = 32, dv = 128;
  const double f_gdn = 2 * T * (h * (2 * qk + 2 * v + 2 * nv) + 4 * (2 * qk + v) + 4 * nv * dv * dv + h * v);
  const double f_attn = 4 * T * h * (h + h) + 2 * B * s * s * h, f_mlp = 4 * T * h * f;
  CHECK(gpt_model_flops(hyb) == doctest::Approx(3 * (3 * f_gdn + f_attn + 4 * f_mlp + 2 * T * h * V)).epsilon(1e-12));
  bool noted = false;
  for (const auto& n : generate_gpt(hyb, h100(), "t").notes)
    noted = noted || n.find("8 sublayers (0 Mamba-2, 1 attention, 3 Gated DeltaNet, 4 MLP, 0 MoE)") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("hybrid: '+' sublayers are MLA attention without latent norms; hybrid_flops does not count them") {
  // '+' turns multi_latent_attention on (arguments.py:918-923 @d98e8a64). The hybrid MLA layer's spec has
  // q_layernorm and kv_layernorm IdentityOp (hybrid_layer_specs.py mla_layer): the GPT path's MLA layer with its two
  // latent norms less -- q_lora_rank + kv_lora_rank weights per layer, and their norm kernels.
  const ParamMap mla = {{"q_lora_rank", "256"}, {"kv_lora_rank", "512"}, {"qk_head_dim", "64"},
                        {"qk_pos_emb_head_dim", "32"}, {"v_head_dim", "64"}};
  ParamMap g = workloads_test::small_llama(8, 8, {{"pipeline_model_parallel_size", "1"}, {"squared_relu", "true"},
                                                  {"normalization", "RMSNorm"}, {"position_embedding_type", "none"},
                                                  {"untie_embeddings_and_output_weights", "true"},
                                                  {"multi_latent_attention", "true"}, {"num_layers", "2"}});
  ParamMap hp = hy({{"hybrid_layer_pattern", "+-+-"}});
  for (const auto& [k, v] : mla) g[k] = v, hp[k] = v;
  const GptConfig gpt = cfg(g), hyb = cfg(hp);
  CHECK(hyb.moe.multi_latent_attention);
  CHECK(gpt_num_parameters(gpt) - gpt_num_parameters(hyb) == doctest::Approx(2.0 * (256 + 512)).epsilon(1e-12));
  const double cg = rank0_compute_s(gpt), ch = rank0_compute_s(hyb);
  MESSAGE("rank 0 compute: GPT MLA " << cg * 1e3 << " ms, hybrid +-+- " << ch * 1e3 << " ms");
  CHECK(ch < cg);                                  // no latent norm kernels
  CHECK(ch == doctest::Approx(cg).epsilon(0.02));  // otherwise the same layers
  // Megatron's hybrid_flops takes the counts of M, G, *, - and E only (training.py:1340-1384): two MLP sublayers and
  // the logits.
  const double h = 1024, V = 32000, f = 2816, T = 8 * 2048.0;
  CHECK(gpt_model_flops(hyb) == doctest::Approx(3 * (2 * 4 * T * h * f + 2 * T * h * V)).epsilon(1e-12));
}

TEST_CASE("hybrid: MTP patterns after '/' are Megatron's MTP layers: parameters, hybrid_flops, kernels, memory") {
  // "M*M-/*-/*-": the main pattern M*M-, two MTP depths each running the sublayers *- (a HybridStack without a final
  // norm; the MTP layer's enorm, hnorm, eh_proj 2h -> h and final_layernorm around it: multi_token_prediction.py
  // @d98e8a64). mtp_num_layers comes from the pattern (arguments.py:870-884).
  const GptConfig base = cfg(hy()), mtp = cfg(hy({{"hybrid_layer_pattern", "M*M-/*-/*-"}}));
  CHECK(mtp.num_layers == 4);
  CHECK(mtp.hybrid_layers() == "M*M-");
  CHECK(mtp.moe.mtp_num_layers == 2);
  CHECK(gpt_detail::hybrid_mtp_pattern(mtp) == "*-");
  CHECK(gpt_layer_layout(mtp) == gpt_layer_layout(base));
  const double h = 1024, t = 2, f = 2816, V = 32000;
  const double attn = (h * (16 + 2 * 16) * 64 + 16 * 64 * h) / t + h, mlp = 2 * h * f / t + h;
  CHECK(gpt_detail::mtp_params_per_rank(mtp) == doctest::Approx(2 * (3 * h + 2 * h * h / t + attn + mlp)).epsilon(1e-12));
  // hybrid_flops: the MTP sublayers counted once per depth (get_hybrid_layer_counts) and one more logits per depth.
  const double B = 8, s = 2048, T = B * s;
  const double f_attn = 4 * T * h * (h + h) + 2 * B * s * s * h, f_mlp = 4 * T * h * f;
  CHECK(gpt_model_flops(mtp) - gpt_model_flops(base) ==
        doctest::Approx(3 * 2 * (f_attn + f_mlp + 2 * T * h * V)).epsilon(1e-12));
  // Kernels: one depth of "*-" runs the attention sublayer's and the MLP sublayer's blocks; "-" alone one less
  // attention block per depth.
  const auto k2 = gpt_detail::gpt_step_kernels(mtp, h100(), "t");
  const auto k1 = gpt_detail::gpt_step_kernels(cfg(hy({{"hybrid_layer_pattern", "M*M-/-/-"}})), h100(), "t");
  CHECK(k2.mtp_layers.seconds - k1.mtp_layers.seconds == doctest::Approx(2 * k2.layer_attn_only.fwd_attn.seconds).epsilon(1e-9));
  CHECK(k2.mtp_layers_b.seconds - k1.mtp_layers_b.seconds == doctest::Approx(2 * k2.layer_attn_only.bwd_attn.seconds).epsilon(1e-9));
  CHECK(k2.mtp_heads.seconds == doctest::Approx(2 * k2.logits_fwd.seconds).epsilon(1e-12));
  // The trace runs them after the decoder's layers; memory holds their weights and activations.
  int mtp_ops = 0;
  const Trace tr = generate_gpt(mtp, h100(), "t");
  for (const Op& op : tr.ranks.at(0).ops) mtp_ops += op.name.find(".mtp.") != std::string::npos;
  CHECK(mtp_ops == 2 * 2);  // forward and backward of each of the rank's 2 micro-batches (global batch 8 over DP 4)
  CHECK(gpt_memory_per_gpu(mtp).activations_bytes > gpt_memory_per_gpu(base).activations_bytes);
  CHECK(gpt_memory_per_gpu(mtp).weights_bytes > gpt_memory_per_gpu(base).weights_bytes);
}

TEST_CASE("hybrid: an MTP pattern's E sublayers add the MoE layer's experts and compute") {
  const ParamMap moe = {{"num_experts", "4"}, {"expert_model_parallel_size", "2"}, {"moe_router_topk", "2"}};
  ParamMap a = hy({{"hybrid_layer_pattern", "M*ME/*-"}}), b = hy({{"hybrid_layer_pattern", "M*ME/*E"}});
  for (const auto& [k, v] : moe) a[k] = v, b[k] = v;
  const GptConfig ca = cfg(a), cb = cfg(b);
  CHECK(gpt_detail::mtp_moe_layers(ca) == 0);
  CHECK(gpt_detail::mtp_moe_layers(cb) == 1);
  const auto ka = gpt_detail::gpt_step_kernels(ca, h100(), "t"), kb = gpt_detail::gpt_step_kernels(cb, h100(), "t");
  const auto& m = kb.moe.back();
  CHECK(kb.mtp_layers.seconds - ka.mtp_layers.seconds ==
        doctest::Approx(m.pre_f.seconds + m.experts_f_mean.seconds + m.post_f.seconds + m.shared_f.seconds -
                        ka.layer_mlp_only.fwd_mlp.seconds).epsilon(1e-9));
  CHECK(gpt_memory_per_gpu(cb).weights_bytes > gpt_memory_per_gpu(ca).weights_bytes);
}

TEST_CASE("hybrid: Gated DeltaNet layers under CP 2 exchange in_proj's output and the norm's output by all-to-all") {
  // a2a_cp_to_hp / a2a_hp_to_cp (megatron/core/ssm/gated_delta_net/common.py @d98e8a64), by hand: this rank's
  // 2048 / 2 = 1024 tokens; a TP rank's in_proj output 2 x 2048 / 2 (q, k) + 2 x 4096 / 2 (v, z) + 2 x 32 / 2 (beta,
  // alpha) = 6176 wide, the norm's output 4096 / 2 = 2048; bf16.
  const GptConfig c = cfg(hy({{"hybrid_layer_pattern", "G*G-"}, {"context_parallel_size", "2"}}));
  const double in = 1024.0 * 6176 * 2, out = 1024.0 * 2048 * 2;
  std::vector<std::string> order;
  std::map<std::string, double> got;
  const Trace tr = generate_gpt(c, h100(), "t");
  for (const Op& op : tr.ranks.at(0).ops) {
    if (op.name.rfind("mb0.l0.", 0) != 0) continue;
    order.push_back(op.name);
    if (op.kind == OpKind::Collective && op.coll == CollOp::AllToAll) got[op.name] = op.bytes;
  }
  CHECK(got.size() == 4);
  CHECK(got.at("mb0.l0.attn.cp.a2a.qkvzba") == doctest::Approx(in).epsilon(1e-12));
  CHECK(got.at("mb0.l0.attn.cp.a2a.o") == doctest::Approx(out).epsilon(1e-12));
  CHECK(got.at("mb0.l0.attn.bwd.cp.a2a.dqkvzba") == doctest::Approx(in).epsilon(1e-12));
  CHECK(got.at("mb0.l0.attn.bwd.cp.a2a.do") == doctest::Approx(out).epsilon(1e-12));
  auto at = [&](const std::string& n) { return std::find(order.begin(), order.end(), n) - order.begin(); };
  CHECK(at("mb0.l0.fwd.attn.in") < at("mb0.l0.attn.cp.a2a.qkvzba"));
  CHECK(at("mb0.l0.attn.cp.a2a.qkvzba") < at("mb0.l0.fwd.attn.scan"));
  CHECK(at("mb0.l0.fwd.attn.scan") < at("mb0.l0.attn.cp.a2a.o"));
  CHECK(at("mb0.l0.attn.cp.a2a.o") < at("mb0.l0.fwd.attn"));
  CHECK(at("mb0.l0.attn.bwd.cp.a2a.do") < at("mb0.l0.bwd.attn.scan"));
  CHECK(at("mb0.l0.bwd.attn.scan") < at("mb0.l0.attn.bwd.cp.a2a.dqkvzba"));
  // The GDN block at CP 2 runs CP 1's kernels on the same local tokens (sequence 1024 at CP 1) plus five copies
  // (head permutation, split + cat, load balancing undone / redone, hp2sp split + cat); the same FLOPs.
  const auto k2 = gpt_detail::gpt_step_kernels(c, h100(), "t").layer_gdn;
  const auto k1 = gpt_detail::gpt_step_kernels(cfg(hy({{"hybrid_layer_pattern", "G*G-"}, {"seq_length", "1024"}})), h100(), "t").layer_gdn;
  CHECK(k2.fwd_attn.kernels - k1.fwd_attn.kernels == 5);
  CHECK(k2.bwd_attn.kernels - k1.bwd_attn.kernels == 5);
  CHECK(k2.fwd_attn.flops == doctest::Approx(k1.fwd_attn.flops).epsilon(1e-12));
  CHECK(k2.fwd_attn.seconds > k1.fwd_attn.seconds);
  CHECK(k2.mamba_fwd_scan.kernels > 0);
}

TEST_CASE("GDN under CP: the GPT path's Gated DeltaNet layers use the all-to-alls, its attention layers cp_comm_type's ring") {
  const GptConfig c = cfg(workloads_test::small_llama(16, 16, {{"pipeline_model_parallel_size", "1"}, {"context_parallel_size", "2"},
                                                              {"experimental_attention_variant", "gated_delta_net"},
                                                              {"linear_attention_freq", "4"}}));
  int gdn_a2a = 0, attn_ring = 0, other = 0;
  const Trace tr = generate_gpt(c, h100(), "t");
  for (const Op& op : tr.ranks.at(0).ops) {
    if (op.category != "cp" || op.name.rfind("mb0.", 0) != 0) continue;
    const bool l3 = op.name.rfind("mb0.l3.", 0) == 0;  // layer 4 of 4: full attention (linear_attention_freq 4)
    if (!l3 && op.name.find(".cp.a2a.") != std::string::npos) ++gdn_a2a;
    else if (l3 && op.name.find(".cp.a2a.") == std::string::npos) ++attn_ring;
    else ++other;
  }
  CHECK(gdn_a2a == 3 * 4);  // three GDN layers, two exchanges forward and two backward
  CHECK(attn_ring > 0);
  CHECK(other == 0);
}

TEST_CASE("cp_comm_type per layer: each attention layer runs its own entry's exchange and kernels") {
  // Megatron's list form (--cp-comm-type p2p p2p p2p a2a): TransformerLayer takes entry layer_number - 1
  // (transformer_layer.py:378-385 @d98e8a64). In a hybrid model the entries of non-attention sublayers are unused.
  auto names = [](const GptConfig& c, const std::string& layer) {
    std::vector<std::string> out;
    const Trace tr = generate_gpt(c, h100(), "t");
    for (const Op& op : tr.ranks.at(0).ops)
      if (op.name.rfind("mb0." + layer + ".", 0) == 0 && op.category == "cp") out.push_back(op.name);
    return out;
  };
  const GptConfig mixed = cfg(hy({{"hybrid_layer_pattern", "M*M*"}, {"context_parallel_size", "2"}, {"cp_comm_type", "p2p p2p p2p a2a"}}));
  CHECK(mixed.cp_comm_types == std::vector<std::string>{"p2p", "p2p", "p2p", "a2a"});
  const auto l1 = names(mixed, "l1"), l3 = names(mixed, "l3");
  CHECK(std::find(l1.begin(), l1.end(), "mb0.l1.attn.cp.kv") != l1.end());
  CHECK(std::find(l3.begin(), l3.end(), "mb0.l3.attn.cp.a2a") != l3.end());
  CHECK(std::find(l3.begin(), l3.end(), "mb0.l3.attn.cp.kv") == l3.end());
  // Each attention sublayer prices as in the model with its entry for every layer.
  auto attn = [](const GptConfig& c, std::int64_t gl) { return gpt_detail::gpt_step_kernels(c, h100(), "t").layer_at(gl).fwd_attn.seconds; };
  const GptConfig all_a2a = cfg(hy({{"hybrid_layer_pattern", "M*M*"}, {"context_parallel_size", "2"}, {"cp_comm_type", "a2a"}}));
  const GptConfig all_p2p = cfg(hy({{"hybrid_layer_pattern", "M*M*"}, {"context_parallel_size", "2"}}));
  CHECK(attn(mixed, 3) == attn(all_a2a, 3));
  CHECK(attn(mixed, 1) == attn(all_p2p, 1));
  CHECK(attn(mixed, 3) != attn(mixed, 1));
  // One type repeated is that type; the same trace.
  const GptConfig same = cfg(hy({{"hybrid_layer_pattern", "M*M*"}, {"context_parallel_size", "2"}, {"cp_comm_type", "a2a a2a a2a a2a"}}));
  CHECK(same.cp_comm_types.empty());
  CHECK(same.cp_comm_type == "a2a");
  CHECK(names(same, "l3") == names(all_a2a, "l3"));
  // Megatron asserts one entry per layer (transformer_config.py:3103-3110).
  auto err = [](const ParamMap& p) { return error_of([&] { cfg(p); }); };
  CHECK(err(hy({{"context_parallel_size", "2"}, {"cp_comm_type", "p2p a2a"}})).find("cp_comm_type: lists 2 types; a list needs one per decoder layer (4)") !=
        std::string::npos);
  CHECK(err(hy({{"context_parallel_size", "2"}, {"cp_comm_type", "p2p p2p p2p a2a+p2p"}, {"hierarchical_context_parallel_sizes", "2 1"}}))
            .find("cp_comm_type: a list of different types per layer is modelled for p2p, all_gather and a2a") != std::string::npos);
  // The GPT path: layer 0 all_gather, the others p2p.
  const GptConfig gpt = cfg(workloads_test::small_llama(16, 16, {{"pipeline_model_parallel_size", "1"}, {"context_parallel_size", "2"},
                                                                {"cp_comm_type", "all_gather p2p p2p p2p"}}));
  // Layer 0 prices as the all_gather model's, layer 1 as the p2p model's (all_gather runs one attention kernel over
  // the gathered K / V, p2p the ring's steps).
  auto gpt_with = [](const std::string& type) {
    return cfg(workloads_test::small_llama(16, 16, {{"pipeline_model_parallel_size", "1"}, {"context_parallel_size", "2"},
                                                    {"cp_comm_type", type}}));
  };
  CHECK(attn(gpt, 0) == attn(gpt_with("all_gather"), 0));
  CHECK(attn(gpt, 1) == attn(gpt_with("p2p"), 1));
  CHECK(attn(gpt, 0) != attn(gpt, 1));
}
