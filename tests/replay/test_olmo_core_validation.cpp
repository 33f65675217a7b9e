// Validation of the dense step against OLMo-core's published H100 throughput (tests/data/training-modern/
// olmo_core_h100.csv: allenai/OLMo-core README @7e58d1289b, tokens/s per device, BF16 and BF16/FP8 for OLMo-2
// 1B/7B/13B and Llama 8B; docs/validation.md, "Modern dense training"). Nothing is fitted to these rows.
//
// What the README does not print is taken from the training scripts and library at the same commit
// (allenai/OLMo-core@7e58d1289b): src/scripts/train/{OLMo2-1B,OLMo2-7B,OLMo2-13B,Llama3-8B}.py (per-rank
// micro-batch 8/2/1/2 sequences of 4096, global batch 1024 sequences (2048 for 13B), HSDP with bf16 params and
// fp32 reduction, torch.compile, no activation checkpointing, float8 via torchao with dynamic scaling),
// src/olmo_core/nn/transformer/config.py (olmo2_1B = llama2_1B: d 2048, 18 layers, 16 heads; olmo2_7B =
// llama2_7B: d 4096, 32 layers, 32 heads; olmo2_13B = llama2_13B: d 5120, 40 layers, 40 heads; FFN
// int(8d/3) rounded up to 256: 5632 / 11008 / 13824; llama3_8B: d 4096, 32 layers, 32 heads, 8 kv heads, FFN
// 14336; untied output layer, RMSNorm, SwiGLU), src/olmo_core/data/tokenizer.py (dolma2: 100278 padded to a
// multiple of 128 = 100352, also for the Llama 8B script) and src/olmo_core/distributed/parallel/__init__.py
// (HSDP: one replica per node, sharded over the node's GPUs). The loss: the model is called with the labels
// and its LM head computes the cross entropy itself (src/olmo_core/nn/lm_head.py, LMHead.forward with the
// default loss_implementation: w_out, then olmo_core.nn.functional.cross_entropy_loss = F.cross_entropy on the
// fp32-upcast logits plus the z-loss), and apply_compile compiles the LM head with the blocks
// (src/olmo_core/nn/transformer/model.py, Transformer.apply_compile: self.lm_head.compile(fullgraph=False);
// compile_model=True in every script): the compiled loss, cross_entropy_impl torch_compiled. FSDP units
// (model.py apply_fsdp): each block, the embeddings (resharded after forward) and the LM head (not resharded
// after forward, reduced after its backward) -- fsdp_embeddings_in_root false; the final norm is the LM
// head's, compiled with it (final_norm_eager false).
//
// The GPU count is not printed. With HSDP the per-device throughput barely depends on it (each node shards
// the model alone; only the gradient all-reduce between replicas and the number of accumulation steps
// change), so the test assumes 4 nodes (32 H100) and reports 1 and 16 nodes as the sensitivity.
//
// Run with
//   build/tests/test_replay -tc="validation: olmo-core*" -s
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "replay_test_util.hpp"
#include "tests/doc_table_util.hpp"
#include "replay/run_scenario.hpp"
#include "sim/base/error.hpp"
#include "workloads/gpt.hpp"
#include "workloads/params.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;

namespace {
const std::string kData = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/training-modern/";

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// One README row as gpt parameters on `nodes` DGX H100 servers.
Json olmo_params(const std::map<std::string, std::string>& r, int nodes) {
  const std::string m = r.at("model");
  struct Shape {
    int layers, hidden, ffn, heads, kv;
  };
  const Shape sh = has(m, "1B")    ? Shape{18, 2048, 5632, 16, 16}
                   : has(m, "13B") ? Shape{40, 5120, 13824, 40, 40}
                   : has(m, "7B")  ? Shape{32, 4096, 11008, 32, 32}
                                   : Shape{32, 4096, 14336, 32, 8};  // Llama 8B
  const int gpus = 8 * nodes, mbs = std::stoi(r.at("micro_batch")), gbs = std::stoi(r.at("global_batch_seqs"));
  Json p = {{"gpu", "h100"}, {"num_layers", sh.layers}, {"hidden_size", sh.hidden}, {"ffn_hidden_size", sh.ffn},
            {"num_attention_heads", sh.heads}, {"num_query_groups", sh.kv}, {"kv_channels", 128},
            {"padded_vocab_size", 100352}, {"seq_length", std::stoi(r.at("seq_len"))}, {"swiglu", true},
            {"normalization", "RMSNorm"}, {"position_embedding_type", "rope"},
            {"untie_embeddings_and_output_weights", true}, {"world_size", gpus},
            {"tensor_model_parallel_size", 1}, {"pipeline_model_parallel_size", 1},
            {"micro_batch_size", mbs}, {"global_batch_size", gbs}, {"use_torch_fsdp2", true},
            {"num_distributed_optimizer_instances", nodes}, {"grad_reduce_in_fp32", true},
            {"recompute_granularity", "none"}, {"attention_backend", "flash"},
            {"cross_entropy_impl", "torch_compiled"}};
  if (has(r.at("precision"), "fp8")) {
    p["precision"] = "fp8";
    p["fp8_recipe"] = "tensorwise";  // torchao float8, dynamic scaling of inputs, weights and output gradients
    // The README's --train_module.float8_config.enabled=true keeps Float8Config's other defaults
    // (src/olmo_core/float8/__init__.py at 7e58d1289b): enable_fsdp_float8_all_gather,
    // precompute_float8_dynamic_scale_for_fsdp and force_recompute_fp8_weight_in_bwd all True.
    p["enable_fsdp_float8_all_gather"] = true;
    p["force_recompute_fp8_weight_in_bwd"] = true;
  } else {
    p["precision"] = "bf16";
  }
  return p;
}

double simulate(const Json& params, int nodes, const std::string& label) {
  Json sc = {{"topology", {{"preset", "superpod"}, {"params", {{"nodes", nodes}, {"node", "dgx-h100"}}}}},
             {"workload", {{"generator", "gpt"}, {"params", params}}}};
  auto s = workloads::scenario_from_json(sc, label);
  sim::ScenarioRunOptions opt;
  opt.comm_model = "engine";
  opt.engine.collect_link_stats = false;
  opt.replay.record_ops = false;
  const auto r = sim::run_scenario(s, opt).result;
  return r.tokens_per_s / (8.0 * nodes);
}

// The memory model's peak per GPU for one row (GiB), term by term.
workloads::GptMemory memory(const Json& params, const std::string& label) {
  return workloads::gpt_memory_per_gpu(
      workloads::gpt_config_from_params(workloads::params_from_json(params, JsonPath()), label));
}
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}  // namespace

TEST_CASE("validation: olmo-core H100 tokens/s per device (HSDP, 4 nodes assumed; 1 and 16 nodes as sensitivity)") {
  const auto rows = replay_test::read_csv(kData + "olmo_core_h100.csv");
  REQUIRE(rows.size() == 8);
  std::vector<double> err4, spread;
  std::vector<std::string> refused;
  test::DocTable doc{"olmo-core",
                     {"row", "published TPS/device", "1 node", "4 nodes (assumed)", "16 nodes", "error at 4 nodes",
                      "simulated GiB per GPU"},
                     {false, true, true, true, true, true, true}, {}};
  std::printf("row                    published  1 node  4 nodes  16 nodes  error(4 nodes)  GiB: weights grads "
              "optimizer activations reserve total\n");
  for (const auto& r : rows) {
    const std::string label = r.at("row_label");
    CAPTURE(label);
    const double pub = std::stod(r.at("tokens_per_s_per_gpu"));
    double sim[3];
    const int nodes[3] = {1, 4, 16};
    const workloads::GptMemory mem = memory(olmo_params(r, 4), label);
    char terms[160];
    std::snprintf(terms, sizeof terms, "%5.1f %5.1f %5.1f %5.1f %5.1f %5.1f", mem.weights_bytes / kGiB,
                  mem.grads_bytes / kGiB, mem.optimizer_bytes / kGiB, mem.activations_bytes / kGiB,
                  mem.allocator_reserve_bytes / kGiB, mem.total_bytes() / kGiB);
    try {
      for (int i = 0; i < 3; ++i) sim[i] = simulate(olmo_params(r, nodes[i]), nodes[i], label);
    } catch (const DoesNotFitError& e) {
      refused.push_back(label);
      std::printf("%-22s %9.0f  refused: %s  GiB: %s\n", label.c_str(), pub, e.what(), terms);
      doc.add({label, test::fmt("%.0f", pub), "refused", "refused", "refused", "\u2014",
               test::fmt("%.1f", mem.total_bytes() / kGiB)});
      continue;
    }
    err4.push_back(sim[1] / pub - 1.0);
    spread.push_back(std::max({sim[0], sim[1], sim[2]}) / std::min({sim[0], sim[1], sim[2]}) - 1.0);
    std::printf("%-22s %9.0f  %6.0f  %7.0f  %8.0f  %+6.1f %%         %s\n", label.c_str(), pub, sim[0], sim[1],
                sim[2], 100.0 * (sim[1] / pub - 1.0), terms);
    doc.add({label, test::fmt("%.0f", pub), test::fmt("%.0f", sim[0]), test::fmt("%.0f", sim[1]),
             test::fmt("%.0f", sim[2]), test::signed_pct(sim[1] / pub - 1.0), test::fmt("%.1f", mem.total_bytes() / kGiB)});
  }
  // Every row fits: the 1B script's micro-batch of 8 x 4096 tokens ran in 80 GB. With OLMo-core's compiled
  // loss (4 bytes per logit element, see olmo_params) the memory model puts it at 54.8 GiB (bf16) / 50.6 GiB
  // (fp8) per GPU; with the eager loss (12 bytes + a 2-byte allocator hole) it was 85.5 / 81.2 GiB, refused.
  test::check_doc_table(doc, "build/tests/test_replay -tc='validation: olmo-core*'");
  CHECK(refused.empty());
  REQUIRE(err4.size() == 8);
  std::vector<double> abs4;
  for (double e : err4) abs4.push_back(std::fabs(e));
  const double med = replay_test::median(abs4), worst = *std::max_element(abs4.begin(), abs4.end());
  const double max_spread = *std::max_element(spread.begin(), spread.end());
  MESSAGE("OLMo-core rows at 4 nodes: median |error| " << 100 * med << " %, max " << 100 * worst
          << " %; largest change between 1, 4 and 16 nodes " << 100 * max_spread << " %");
  // Bounds: the figures measured 2026-11-26 (docs/validation.md) rounded up to the next whole percent (the
  // simulation is deterministic; the margin absorbs floating-point differences between builds): median 17.4 %,
  // max 43.4 % over the 8 rows (15.7 / 39.6 % with the loss at 24 B per logit element), and at most 4.2 % between
  // 1, 4 and 16 nodes -- the assumed GPU count matters less than a tenth of the error.
  CHECK(med <= 0.18);
  CHECK(worst <= 0.44);
  // The spread was 4.2 % while the tuner chose CollNet (SHARP on by default) and fabricsim's own hierarchical for
  // the inter-node collectives; with NCCL's algorithms only (ring/tree, no SHARP unless asked for) it is 6.3 %
  // (2026-11-27), bounded at the next whole percent.
  CHECK(max_spread <= 0.07);
}
