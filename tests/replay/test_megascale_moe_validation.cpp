// MegaScale-MoE (Jin et al., EuroSys'26, arXiv 2505.11432) Table 3: a 352B MoE (60 layers, hidden 4096, 32
// heads in 8 key-value groups, 32 experts of FFN 14336, top-3, vocabulary 65536, seq 8192; Table 2 / Sec. 6.1;
// Table 2's column m = 4 is, by the paper's Table 1, query heads per key-value head; plus one shared expert of
// FFN 14336 per layer, which Table 2 has no column for: kSharedFfn below) trained on 240-1440
// H800 with GBS 720 and PP 15, by Megatron-LM and by MegaScale-MoE (tests/data/training-modern/
// megascale_moe_h800.csv; docs/validation.md, "Mixture of experts"). Nothing is fitted to these rows.
//
// The intra-node layout is not printed. Megatron-LM rows ("TP within node"): the most plausible layout, stated
// once, is TP 8 with sequence parallelism for attention and experts (expert_tensor_parallel_size = TP, EP 1,
// Megatron's default), PP 15, DP = GPUs / 120, micro-batch 1, distributed optimizer with overlapped gradient
// reduce / parameter gather and overlapped pipeline sends ("MegaScale DP/PP overlap enabled"). The other
// intra-node layouts the row allows are run at 240 GPUs as the sensitivity (TP 8 with EP 8 over the experts;
// TP 4 with EP 2; TP 4 with EP 1 does not fit 80 GB without recompute). MegaScale-MoE rows: its sequence-
// parallel attention as Ulysses-style context parallelism within the node (context_parallel_size 8,
// cp_comm_type a2a) and EP 8 within the node (ETP 1), its BF16 gradient compression as grad_reduce_in_bf16; its
// inter- and intra-operator communication overlap is not expressed (overlap_moe_expert_parallel_comm is modelled
// without context parallelism). The Megatron-LM rows (bf16) reduce gradients in fp32, Megatron-LM's rule
// (docs/workloads.md "Gradient reduction precision"). H800: the h100 GPU (same compute, 80 GB) with
// NVLink 400 GB/s bidirectional (paper Table 4) = 200 GB/s per direction, 400 Gb/s per GPU on InfiniBand (not
// printed; the DGX H800 default).
//
// Run with
//   build/tests/test_replay -tc="validation: megascale-moe*" -s
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
#include "workloads/scenario.hpp"

using namespace fabricsim;

namespace {
const std::string kData = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/training-modern/";

// One always-active expert of Table 2's h_ffn per layer (moe_shared_expert_intermediate_size): Table 2 prints
// no shared experts for any model, and two of its rows have them (DeepSeekMoE 16B: 2 shared + 64 routed, top-6 --
// DeepSeekMoE, arXiv:2401.06066, Sec. 5 / deepseek-ai/deepseek-moe-16b-base config.json n_shared_experts 2;
// Hunyuan-Large: 1 shared + 16 routed, top-1 -- arXiv:2411.02265 Table 1); Table 2 lists them as 64 / top-6
// and 16 / top-1. With it this model has the paper's two printed totals: 351.9B parameters (352B: title,
// abstract, Sec. 6.1) and 282.5 GFLOP per token (6 x 45.1B active + causal attention), the count the printed
// MFU implies (32.48 % of 989 TFLOP/s at 1137.1 tokens/s per GPU, 240 GPUs: 282.5; 27.89 % at 977.6, 1440
// GPUs: 282.2); Table 2's shapes alone give 341.3B and 219.1 GFLOP.
constexpr int kSharedFfn = 14336;

struct Layout {
  const char* name;
  int tp, cp, ep, etp;  // etp 0: Megatron's default (= TP)
  int shared = kSharedFfn;  // moe_shared_expert_intermediate_size (0: Table 2's shapes alone)
  bool bf16_grads = false;  // grad_reduce_in_bf16 (MegaScale-MoE's BF16 gradient compression)
  const char* dispatcher = "alltoall";  // moe_token_dispatcher_type
};

Json megascale_params(int gpus, const Layout& l) {
  // Grouped-query attention: Table 2 prints m = 4 for this model, m being "the ratio between the number of query
  // heads and that of key-value heads" (Table 1): 32 / 4 = 8 groups (the same column gives Mixtral-8x7B 4 and
  // DeepSeekMoE 1, their published 32 / 8 and 16 / 16).
  Json p = {{"num_layers", 60}, {"hidden_size", 4096}, {"num_attention_heads", 32}, {"num_query_groups", 8}, {"kv_channels", 128},
            {"ffn_hidden_size", 14336}, {"num_experts", 32}, {"moe_router_topk", 3}, {"moe_ffn_hidden_size", 14336},
            {"padded_vocab_size", 65536}, {"seq_length", 8192}, {"swiglu", true}, {"normalization", "RMSNorm"},
            {"position_embedding_type", "rope"}, {"untie_embeddings_and_output_weights", true}, {"precision", "bf16"},
            {"world_size", gpus}, {"micro_batch_size", 1}, {"global_batch_size", 720},
            {"pipeline_model_parallel_size", 15}, {"tensor_model_parallel_size", l.tp},
            {"sequence_parallel", l.tp > 1}, {"expert_model_parallel_size", l.ep},
            {"use_distributed_optimizer", true}, {"overlap_grad_reduce", true}, {"overlap_param_gather", true},
            {"overlap_p2p_comm", true}, {"moe_grouped_gemm", true}, {"moe_token_dispatcher_type", l.dispatcher},
            {"recompute_granularity", "none"}};
  if (l.etp) p["expert_tensor_parallel_size"] = l.etp;
  if (l.shared) p["moe_shared_expert_intermediate_size"] = l.shared;
  if (l.bf16_grads) p["grad_reduce_in_bf16"] = true;
  if (l.cp > 1) p["context_parallel_size"] = l.cp, p["cp_comm_type"] = "a2a";
  // The Megatron-LM layouts (TP within the node, no CP) run Transformer Engine's cuDNN attention, what TE selects
  // on Hopper (docs/workloads.md "Attention"); MegaScale-MoE's own system keeps the generator's default (flash).
  if (l.cp == 1) p["attention_backend"] = "fused";
  return p;
}

double step_s(int gpus, const Layout& l) {
  Json sc = {{"topology",
              {{"preset", "superpod"},
               {"params", {{"nodes", gpus / 8}, {"node", "dgx-h100"}, {"nvlink_bandwidth", "200GB/s"}, {"nic_bandwidth", "400Gbps"}}}}},
             {"workload", {{"generator", "gpt"}, {"params", megascale_params(gpus, l)}}}};
  auto s = workloads::scenario_from_json(sc, std::string(l.name) + " on " + std::to_string(gpus) + " GPUs");
  sim::ScenarioRunOptions opt;
  opt.comm_model = "engine";
  opt.engine.collect_link_stats = false;
  opt.replay.record_ops = false;
  return sim::run_scenario(s, opt).result.iteration_s;
}
}  // namespace

TEST_CASE("validation: megascale-moe 352B on 240-1440 H800, Megatron-LM and MegaScale-MoE step times") {
  const auto rows = replay_test::read_csv(kData + "megascale_moe_h800.csv");
  const Layout megatron{"Megatron-LM TP 8 (EP 1, ETP 8)", 8, 1, 1, 0};
  const Layout megascale{"MegaScale-MoE SP 8 (a2a) + EP 8, no overlap", 1, 8, 8, 1, kSharedFfn, true};
  std::vector<double> err_megatron, err_megascale;
  std::printf("system          GPUs  measured_s  simulated_s  error\n");
  std::map<int, std::vector<std::string>> doc_row;  // by GPUs: Megatron-LM cells, then MegaScale-MoE cells
  for (int i = 0; i < 10; ++i) {
    const auto& r = rows.at(i);
    const bool is_megatron = r.at("row_label").rfind("Megatron-LM", 0) == 0;
    const int gpus = std::stoi(r.at("num_gpus"));
    const double measured = std::stod(r.at("iteration_s"));
    const double sim = step_s(gpus, is_megatron ? megatron : megascale);
    (is_megatron ? err_megatron : err_megascale).push_back(sim / measured - 1.0);
    std::printf("%-14s %5d  %10.2f  %11.2f  %+6.1f %%\n", is_megatron ? "Megatron-LM" : "MegaScale-MoE", gpus, measured,
                sim, 100.0 * (sim / measured - 1.0));
    auto& cells = doc_row[gpus];
    if (cells.empty()) cells = {std::to_string(gpus), "", "", "", "", "", ""};
    const int at = is_megatron ? 1 : 4;
    cells[at] = test::fmt("%.2f", measured), cells[at + 1] = test::fmt("%.2f", sim);
    cells[at + 2] = test::signed_pct(sim / measured - 1.0);
  }
  test::DocTable doc{"megascale-moe",
                     {"GPUs", "Megatron-LM measured s", "simulated (TP 8)", "error", "MegaScale-MoE measured s",
                      "simulated (SP 8 + EP 8, no overlap)", "error"},
                     {true, true, true, true, true, true, true}, {}};
  for (const auto& [g, cells] : doc_row) doc.add(cells);
  test::check_doc_table(doc, "build/tests/test_replay -tc='validation: megascale-moe*'");
  test::DocTable doc_layouts{"megascale-moe-layouts", {"Megatron-LM at 240 GPUs (measured 39.94 s)", "simulated", "error"},
                             {false, true, true}, {}};
  std::vector<std::vector<std::string>> layout_rows;
  REQUIRE(err_megatron.size() == 5);
  REQUIRE(err_megascale.size() == 5);
  // Sensitivity to the unprinted intra-node layout, 240 GPUs (measured Megatron-LM 39.94 s).
  std::printf("Megatron-LM layouts at 240 GPUs (measured 39.94 s):\n");
  const double base = step_s(240, megatron);
  double lo = base, hi = base;
  int refused = 0;
  // The dispatcher is not printed either: alltoall is stated, allgather (the default of Megatron-LM @f1f03922,
  // megatron/training/arguments.py) is run beside it.
  for (const Layout& l : {Layout{"TP 8 (EP 1), allgather dispatcher", 8, 1, 1, 0, kSharedFfn, false, "allgather"},
                          Layout{"TP 8 (EP 1), Table 2's shapes alone (no shared expert)", 8, 1, 1, 0, 0},
                          Layout{"TP 8 + EP 8 (ETP 1)", 8, 1, 8, 1}, Layout{"TP 4 + EP 2 (ETP 4)", 4, 1, 2, 0}}) {
    try {
      const double s = step_s(240, l);
      lo = std::min(lo, s), hi = std::max(hi, s);
      std::printf("  %-32s %8.2f s  %+6.1f %%\n", l.name, s, 100.0 * (s / 39.94 - 1.0));
      layout_rows.push_back({l.name, test::fmt("%.2f s", s), test::signed_pct(s / 39.94 - 1.0)});
    } catch (const DoesNotFitError& e) {
      // TP 4 + EP 2 needs 81.9 GiB with fp32 gradients (docs/validation.md): not a layout the run could use.
      ++refused;
      std::printf("  %-32s does not fit: %.120s\n", l.name, e.what());
      layout_rows.push_back({l.name, "does not fit", ""});
    }
  }
  CHECK(refused <= 1);
  std::printf("  %-32s %8.2f s  %+6.1f %%\n", megatron.name, base, 100.0 * (base / 39.94 - 1.0));
  doc_layouts.add({std::string(megatron.name) + " -- the stated layout", test::fmt("%.2f s", base),
                   test::signed_pct(base / 39.94 - 1.0)});
  for (auto& r : layout_rows) doc_layouts.add(r);
  test::check_doc_table(doc_layouts, "build/tests/test_replay -tc='validation: megascale-moe*'");
  // Table 5 (240 GPUs): MegaScale-MoE's TP attention + TP FFN baseline -> SP attention + EP FFN without overlap
  // is 1.13x the throughput. The same two layouts here:
  const double sp_ep = step_s(240, megascale), ratio = base / sp_ep;
  MESSAGE("Table 5 step 1 -> 2 (TP+TP -> SP+EP, no overlap): published 1.13x, simulated " << ratio << "x");
  CHECK(ratio > 1.0);
  // MegaScale-MoE with Table 2's shapes alone (no shared expert), beside the stated layout:
  {
    Layout l = megascale;
    l.name = "MegaScale-MoE SP+EP, Table 2's shapes alone", l.shared = 0;
    const double s = step_s(240, l);
    std::printf("  %-44s %8.2f s  %+6.1f %% (measured 21.61 s)\n", l.name, s, 100.0 * (s / 21.61 - 1.0));
  }
  auto stats = [](std::vector<double> v) {
    for (double& x : v) x = std::fabs(x);
    return std::make_pair(replay_test::median(v), *std::max_element(v.begin(), v.end()));
  };
  const auto [med_mlm, max_mlm] = stats(err_megatron);
  const auto [med_ms, max_ms] = stats(err_megascale);
  MESSAGE("Megatron-LM: median |error| " << 100 * med_mlm << " %, max " << 100 * max_mlm << " %; MegaScale-MoE: "
          << 100 * med_ms << " %, max " << 100 * max_ms << " %; layouts at 240 GPUs span " << lo << " - " << hi << " s");
  // Every simulated step is shorter than the measured one (see docs/validation.md for the evidence).
  for (double e : err_megatron) CHECK(e < 0);
  for (double e : err_megascale) CHECK(e < 0);
  // Bounds: the figures measured 2026-11-27 (docs/validation.md) rounded up to the next whole percent (the
  // simulation is deterministic): Megatron-LM median 32.4 %, max 36.3 %; MegaScale-MoE median 28.9 %, max 31.7 %
  // (with Table 2's shapes alone, no shared expert: 45.4 / 48.8 % and 40.9 / 43.2 %). Megatron-LM reduces its
  // gradients in fp32 (its bf16 rule) and prices the loss at the calibration's 8 B per logit element.
  CHECK(med_mlm <= 0.33);
  CHECK(max_mlm <= 0.37);
  CHECK(med_ms <= 0.29);
  CHECK(max_ms <= 0.32);
}
