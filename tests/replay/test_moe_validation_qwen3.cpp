// MoE validation, the Megatron-MoE-ModelZoo Qwen3-235B-A22B rows beyond the H100 table
// (docs/validation.md, "Mixture of experts": long context and GB200 / GB300) and the Qwen3-Next-80B-A3B row (98,
// hybrid Gated DeltaNet), from tests/data/training-modern/moe_h100.csv, 0-based data rows 98-110, as scenarios in
// tests/data/training-modern/moe/ (mapping in tests/data/training-modern/PROVENANCE.md). Nothing is fitted to
// these rows: compute is the per-kernel model (the shipped H100 fit; Blackwell borrows the H200 fit at its
// peaks), communication the `engine` model.
//
// The metric is the source's: Megatron-Core's logged TFLOP/s per GPU, whose FLOP count
// (megatron/training/training.py num_floating_point_operations, NVIDIA/Megatron-LM@001b00c) counts causal
// core attention as half of the s x s product. The ModelZoo H100 table confirms that count: its row 93 implies
// 147.3 GFLOP per token (the CSV's `derived` column) and the causal count gives 148.0, the non-causal one
// (fabricsim's `megatron-core` convention, the 2024 formula) 167.0. So the simulated TFLOP/s below are the
// causal count over the simulated step, not the result's tflops_per_gpu.
//
// Run with
//   build/tests/test_replay -tc="validation: moe-qwen3*" -s
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "replay_test_util.hpp"
#include "tests/doc_table_util.hpp"
#include "replay/run_scenario.hpp"
#include "sim/base/error.hpp"
#include "models/gpu.hpp"
#include "workloads/gpt.hpp"
#include "workloads/moe.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {
const std::string kData = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/training-modern/";

// Megatron-Core's model FLOPs per token (training.py transformer_flops, GQA branch, no MTP): 3 (fwd, dgrad,
// wgrad) x 2 (FMA) x [h (q + 2 kv) + q s/2 x 2 + q h per layer (QKV, causal QK^T and PV, output projection),
// h x moe_ffn x topk x 3 (SwiGLU) per MoE layer, h x V (logits)].
double megatron_flops_per_token(const GptConfig& c) {
  const double h = double(c.hidden_size), s = double(c.seq_length), L = double(c.num_layers);
  const double q = double(c.num_attention_heads * c.head_dim()), kv = double(c.query_groups() * c.head_dim());
  const double ffn_x = c.swiglu ? 3.0 : 2.0;
  const double attn = h * (q + 2.0 * kv) + q * s / 2.0 * 2.0 + q * h;
  const double mlp = h * double(c.moe_ffn()) * double(c.moe.moe_router_topk) * ffn_x;
  return 6.0 * (L * (attn + mlp) + h * double(c.padded_vocab_size));
}

struct Measured {
  double tokens_per_s_per_gpu = 0, flops_per_token = 0;
};

// Runs a scenario (a single workload, or a one-job cluster scenario that places the job on chosen GPUs).
Measured run(const std::string& file) {
  Scenario s = load_scenario(file);
  const WorkloadSpec& w = s.jobs.empty() ? s.workload : s.jobs[0].workload;
  ParamMap p = w.params;
  const auto& tp = s.topology_params;
  const std::string node = tp.count("node") ? tp.at("node") : "";
  p["gpu"] = tp.count("gpu") ? tp.at("gpu") : node == "gb300-nvl72" ? "gb300" : "h100";
  const GptConfig c = gpt_config_from_params(p, file);
  sim::ScenarioRunOptions opt;
  opt.comm_model = "engine";
  opt.engine.collect_link_stats = false;
  opt.replay.record_ops = false;
  const auto r = sim::run_scenario(s, opt).result;
  Measured m;
  const double tps = s.jobs.empty() ? r.tokens_per_s : r.jobs.at(0).tokens_per_s;
  m.tokens_per_s_per_gpu = tps / double(c.world_size);
  m.flops_per_token = megatron_flops_per_token(c);
  return m;
}

double published(int row) {
  const auto rows = replay_test::read_csv(kData + "moe_h100.csv");
  REQUIRE(row < static_cast<int>(rows.size()));
  return std::stod(rows[row].at("tflops_per_gpu"));
}
}  // namespace

TEST_CASE("validation: moe-qwen3 ModelZoo FLOP count reproduces the H100 table's implied FLOPs/token") {
  // Row 93's derived FLOPs/token (TFLOP/s x GPUs / tokens/s) is 147.3 GFLOP; the causal count must match it
  // within its rounding (TFLOP/s printed to 3 digits: 245 +- 0.5 -> +-0.2 %), the non-causal would be 13 % off.
  Scenario s = load_scenario(kData + "moe/qwen3_235b_h100_row93.json");
  ParamMap p = s.workload.params;
  p["gpu"] = "h100";
  const GptConfig c = gpt_config_from_params(p, "row 93");
  const double per_token = megatron_flops_per_token(c);
  // TFLOP/s per GPU x GPUs / (global batch x seq / step time): the row's own printed figures.
  const auto rows = replay_test::read_csv(kData + "moe_h100.csv");
  const auto& r = rows.at(93);
  const double implied = std::stod(r.at("tflops_per_gpu")) * 1e12 * std::stod(r.at("num_gpus")) /
                         (std::stod(r.at("global_batch_tokens")) / std::stod(r.at("iteration_s")));
  MESSAGE("causal count " << per_token / 1e9 << " GFLOP/token, implied by row 93 " << implied / 1e9);
  CHECK(std::fabs(per_token / implied - 1.0) < 0.01);
}

TEST_CASE("validation: moe-qwen3 long context (256 H100) and GB200/GB300 held out") {
  std::vector<double> err_forced, err_dropless, err_gb;
  std::printf("row  published_TFLOPS  simulated  error\n");
  // H100 long context: one scenario per sequence length; the forced-balance row (odd index) and the dropless
  // row (the next one) share it (the load is modelled uniform: the dropless router's imbalance is not known).
  const int seqs[] = {16384, 32768, 65536, 131072};
  std::vector<double> sim_forced;
  // The rows as docs/validation.md describes them (the scenario files hold the settings): GPUs and precision,
  // layout.
  const std::map<int, std::pair<std::string, std::string>> what = {
      {99, {"256 H100, bf16, seq 16K, forced balance", "TP 4, CP 1, PP 8 \u00d7 VPP 4, EP 8"}},
      {101, {"seq 32K, forced balance", "CP 2"}}, {103, {"seq 64K, forced balance", "CP 4"}},
      {105, {"seq 128K, forced balance", "CP 8"}}, {100, {"seq 16K, dropless", "as 99"}},
      {102, {"seq 32K, dropless", "as 101"}}, {104, {"seq 64K, dropless", "as 103"}},
      {106, {"seq 128K, dropless", "as 105"}},
      {107, {"256 GB200, bf16, seq 4K", "TP 1, PP 8, EP 8, MBS 1, GBS 8192"}},
      {108, {"256 GB200, MXFP8, seq 4K, expert_fc1 + moe_act offloaded", "TP 1, PP 4 \u00d7 VPP 6, EP 64, MBS 3, GBS 3072"}},
      {109, {"128 GB200, MXFP8, seq 128K", "TP 4, CP 4, PP 4 \u00d7 VPP 12, EP 32, GBS 1024"}},
      {110, {"64 GB300, MXFP8, seq 4K", "TP 1, PP 1, EP 64, GBS 8192"}}};
  test::DocTable doc{"moe-qwen3-long-context",
                     {"row", "GPUs, precision", "layout", "published TFLOP/s", "simulated", "error"},
                     {false, false, false, true, true, true}, {}};
  std::vector<std::vector<std::string>> dropless_rows;
  auto doc_row = [&](int row, double pub, double sim_tf) {
    return std::vector<std::string>{std::to_string(row), what.at(row).first, what.at(row).second,
                                    test::fmt("%.0f", pub), test::fmt("%.1f", sim_tf), test::signed_pct(sim_tf / pub - 1.0)};
  };
  for (int i = 0; i < 4; ++i) {
    const int row = 99 + 2 * i;
    CAPTURE(row);
    const Measured m = run(kData + "moe/qwen3_235b_h100_longctx_seq" + std::to_string(seqs[i]) + ".json");
    const double sim_tf = m.tokens_per_s_per_gpu * m.flops_per_token / 1e12;
    CHECK(sim_tf > 0);
    sim_forced.push_back(sim_tf);
    for (int k = 0; k < 2; ++k) {
      const double pub = published(row + k);
      (k == 0 ? err_forced : err_dropless).push_back(sim_tf / pub - 1.0);
      std::printf("%-4d %16.0f  %9.1f  %+6.1f %%  (seq %d, %s)\n", row + k, pub, sim_tf, 100.0 * (sim_tf / pub - 1.0),
                  seqs[i], k == 0 ? "forced balance" : "dropless");
      if (k == 0) doc.add(doc_row(row, pub, sim_tf));
      else dropless_rows.push_back(doc_row(row + 1, pub, sim_tf));
    }
  }
  // The published forced-balance TFLOP/s rise with the sequence length (attention's share grows); so must the
  // simulated ones.
  for (int i = 1; i < 4; ++i) CHECK(sim_forced[i] > sim_forced[i - 1]);
  for (auto& r : dropless_rows) doc.add(r);
  for (const auto& [row, file] : std::vector<std::pair<int, std::string>>{
           {107, "qwen3_235b_gb200_row107.json"}, {108, "qwen3_235b_gb200_row108.json"}, {109, "qwen3_235b_gb200_row109.json"}, {110, "qwen3_235b_gb300_row110.json"}}) {
    CAPTURE(row);
    const Measured m = run(kData + "moe/" + file);
    const double sim_tf = m.tokens_per_s_per_gpu * m.flops_per_token / 1e12, pub = published(row);
    err_gb.push_back(sim_tf / pub - 1.0);
    std::printf("%-4d %16.0f  %9.1f  %+6.1f %%\n", row, pub, sim_tf, 100.0 * (sim_tf / pub - 1.0));
    doc.add(doc_row(row, pub, sim_tf));
  }
  test::check_doc_table(doc, "build/tests/test_replay -tc='validation: moe-qwen3 long context*'");
  auto abs_median = [](std::vector<double> v) {
    for (double& x : v) x = std::fabs(x);
    return replay_test::median(v);
  };
  auto abs_max = [](const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m = std::max(m, std::fabs(x));
    return m;
  };
  std::vector<double> matched = err_forced;  // the rows whose load the scenario states: forced balance
  matched.insert(matched.end(), err_gb.begin(), err_gb.end());
  MESSAGE("forced balance + GB200/GB300 (" << matched.size() << " rows): median |error| " << 100 * abs_median(matched)
          << " %, max " << 100 * abs_max(matched) << " %; H100 forced balance alone " << 100 * abs_median(err_forced)
          << " % / " << 100 * abs_max(err_forced) << " %; dropless (load modelled uniform): median "
          << 100 * abs_median(err_dropless) << " %, max " << 100 * abs_max(err_dropless) << " %");
  REQUIRE(matched.size() == 8);
  REQUIRE(err_dropless.size() == 4);
  // Bounds: the figures measured 2026-11-27 (docs/validation.md) rounded up to the next whole percent; the
  // simulation is deterministic, the margin only absorbs floating-point differences between builds.
  // Forced balance and GB200/GB300 rows (8, with row 108 and its activation offloading): median 12.7 %, max
  // 25.6 % (row 107, GB200); without row 108 (7 rows) 11.9 % / 25.6 % (2026-11-28, after the attention kernel model
  // lost its fitted 37-140 us fixed time: 11.2 % / 24.8 % before, docs/validation.md "Current accuracy").
  CHECK(abs_median(matched) <= 0.13);
  CHECK(abs_max(matched) <= 0.27);
  // Dropless rows: the simulated router is uniform, so the simulation must be faster than every dropless
  // measurement (the published forced-balance / dropless gap, 9-24 %, is the imbalance the model is not
  // given); measured up to +43.7 %.
  for (double e : err_dropless) CHECK(e > 0);
  CHECK(abs_max(err_dropless) <= 0.44);
}

TEST_CASE("validation: moe-qwen3 GB200 MXFP8 row 108 fits with its activation offloading and not without") {
  // The source's command offloads the experts' fc1 inputs and activation inputs to the host
  // (--fine-grained-activation-offloading --offload-modules expert_fc1 moe_act): with it the layout fits in a
  // GB200's HBM, without it the run is refused.
  Scenario s = load_scenario(kData + "moe/qwen3_235b_gb200_row108.json");
  ParamMap p = s.jobs.at(0).workload.params;
  p["gpu"] = s.topology_params.at("gpu");
  const GptConfig on = gpt_config_from_params(p, "row108");
  const GptMemory m = gpt_memory_per_gpu(on);
  const double hbm = models::gpu_spec(on.gpu).hbm_capacity_bytes;
  MESSAGE("row 108 with offloading: " << m.total_bytes() / 1073741824.0 << " GiB per GPU on stage " << m.stage << " (activations "
          << m.activations_bytes / 1073741824.0 << " GiB, " << m.activations_offloaded_bytes / 1073741824.0
          << " GiB offloaded) of " << hbm / 1073741824.0);
  CHECK(m.total_bytes() <= hbm);
  CHECK(m.activations_offloaded_bytes > 0);
  GptConfig off = on;
  off.fine_grained_activation_offloading = false;
  CHECK(gpt_memory_per_gpu(off).total_bytes() > hbm);
  // On the peak stage the activation term drops by exactly what the result reports as offloaded.
  const GptMemory m0 = gpt_memory_of_stage(off, m.stage);
  MESSAGE("the same stage without offloading: " << m0.total_bytes() / 1073741824.0 << " GiB (activations "
          << m0.activations_bytes / 1073741824.0 << " GiB)");
  CHECK(m0.activations_bytes - m.activations_bytes == doctest::Approx(m.activations_offloaded_bytes));
}

namespace {
// Megatron-LM's model FLOPs per token for a hybrid Gated DeltaNet MoE model (num_floating_point_operations,
// transformer_flops branch, megatron/training/training.py at NVIDIA/Megatron-LM@d98e8a64), written out here apart
// from fabricsim's count: 3 (fwd, dgrad, wgrad) x 2 (FMA) x per layer
//   full attention: h (q + 2 kv + gate) + q h, causal core q s / 2 x 2;
//   GDN (linear_self_attn_term): h (2 qk + 2 v + 2 value heads) + conv (2 qk + v) + 4 value heads dv^2 + h v;
//   MoE: h (moe_ffn x topk + shared) x 3 (SwiGLU); the router is not counted;
// with the MTP layers counted as decoder layers (num_layers + mtp; the integer linear_attention_freq laid over all
// of them), the MTP norms and projection 3h + 2h^2 per MTP layer, and the logits h V x (mtp + 1).
double megatron_hybrid_flops_per_token(const GptConfig& c) {
  const double h = double(c.hidden_size), s = double(c.seq_length), V = double(c.padded_vocab_size);
  const double q = double(c.num_attention_heads * c.head_dim()), kv = double(c.query_groups() * c.head_dim());
  const double gate = c.attention_output_gate ? q : 0.0;
  const double full = h * (q + 2.0 * kv + gate) + q * h + q * s / 2.0 * 2.0;
  const double qk = double(c.linear_num_key_heads * c.linear_key_head_dim);
  const double v = double(c.linear_num_value_heads * c.linear_value_head_dim), nv = double(c.linear_num_value_heads);
  const double dv = double(c.linear_value_head_dim);
  const double gdn = h * (2.0 * qk + 2.0 * v + 2.0 * nv) + double(c.linear_conv_kernel_dim) * (2.0 * qk + v) +
                     nv * dv * dv * 4.0 + h * v;
  const double moe = h * (double(c.moe_ffn()) * double(c.moe.moe_router_topk) +
                          double(c.moe.moe_shared_expert_intermediate_size)) * 3.0;
  const std::int64_t mtp = c.moe.mtp_num_layers, n = c.num_layers + mtp, freq = std::stoll(c.linear_attention_freq);
  double per = 0;
  for (std::int64_t i = 0; i < n; ++i) per += ((i + 1) % freq == 0 ? full : gdn) + moe;
  per += double(mtp) * (3.0 * h + 2.0 * h * h) + h * V * double(mtp + 1);
  return 6.0 * per;
}
}  // namespace

TEST_CASE("validation: moe-qwen3 Qwen3-Next-80B-A3B row 98 (Gated DeltaNet hybrid) held out") {
  // Row 98: 128 H100, TP 1, PP 4 x VPP 3, EP 32, DeepEP, GBS 256, seq 4096; the ModelZoo yaml's hybrid layers
  // (36 Gated DeltaNet + 12 gated full attention) and one MTP layer. Nothing is fitted to it; the GDN kernel's
  // rate is the GEMM fit's (not validated: no linear-attention kernel is measured).
  const std::string file = kData + "moe/qwen3_next_80b_h100_row98.json";
  Scenario s = load_scenario(file);
  ParamMap p = s.workload.params;
  p["gpu"] = "h100";
  const GptConfig c = gpt_config_from_params(p, file);
  const double per_token = megatron_hybrid_flops_per_token(c);
  // fabricsim's own count is the same formula plus the router's h x experts per MoE layer, which Megatron-LM
  // leaves out, and without the MTP's three norms (3h per MTP layer; gpt_model.cpp moe_model_flops).
  const double h = double(c.hidden_size), n_mtp = double(c.moe.mtp_num_layers);
  const double router = 6.0 * h * double(c.moe.num_experts) * (double(c.num_layers) + n_mtp);
  const double tokens = double(c.global_batch_size) * double(c.seq_length);
  CHECK(gpt_model_flops(c) / tokens == doctest::Approx(per_token + router - 6.0 * 3.0 * h * n_mtp).epsilon(1e-12));
  // The row's implied count (TFLOP/s x GPUs / tokens/s) against this one: the source's code (dev bbc762d5) is not
  // the d98e8a64 formula; the difference is stated in docs/validation.md.
  const auto rows = replay_test::read_csv(kData + "moe_h100.csv");
  const auto& r = rows.at(98);
  REQUIRE(r.at("model") == "Qwen3-Next-80B-A3B");
  const double implied = std::stod(r.at("tflops_per_gpu")) * 1e12 * std::stod(r.at("num_gpus")) /
                         (std::stod(r.at("global_batch_tokens")) / std::stod(r.at("iteration_s")));
  const Measured m = run(file);
  const double sim_tf = m.tokens_per_s_per_gpu * per_token / 1e12, pub = published(98);
  const double sim_step = tokens / (m.tokens_per_s_per_gpu * double(c.world_size));
  MESSAGE("row 98: Megatron count " << per_token / 1e9 << " GFLOP/token (implied by the row " << implied / 1e9
          << "); published " << pub << " TFLOP/s, " << r.at("iteration_s") << " s/step; simulated " << sim_tf
          << " TFLOP/s, " << sim_step << " s/step (" << 100.0 * (sim_tf / pub - 1.0) << " %)");
  test::DocTable doc{"moe-qwen3-next",
                     {"row", "GPUs, precision", "layout", "published TFLOP/s", "simulated", "error"},
                     {false, false, false, true, true, true}, {}};
  doc.add({"98", "128 H100, bf16, seq 4K", "TP 1, PP 4 \u00d7 VPP 3, EP 32, GBS 256", test::fmt("%.0f", pub),
           test::fmt("%.1f", sim_tf), test::signed_pct(sim_tf / pub - 1.0)});
  test::check_doc_table(doc, "build/tests/test_replay -tc='validation: moe-qwen3 Qwen3-Next*'");
  // Bound: the error measured 2026-11-28 (+71.3 %, docs/validation.md) rounded up to the next whole percent; the
  // source calls this row "not well tuned", and the simulation is faster than it.
  CHECK(sim_tf > pub);
  CHECK(sim_tf / pub - 1.0 <= 0.72);
}
