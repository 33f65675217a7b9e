// MoE Parallel Folding (Liu et al., arXiv:2504.14960) rows 0-92 of tests/data/training-modern/moe_h100.csv
// (docs/validation.md, "Mixture of experts", "MoE Parallel Folding"): Tables 1/3 (best mapping per method,
// GBS 256), 2 (TFLOPS, BF16 vs FP8), 4 (strong scaling to 1,024 GPUs, GBS 1024) and 5 (context scaling with
// CP to 128K). Every scenario is built here from the row's own columns by one rule per method label (below);
// nothing is fitted to any of these rows: the compute is the per-kernel model fitted on single-kernel
// measurements (validate/compute_calibrations/h100.json), communication the `engine` model, so every row is
// held out. Simulated MFU = simulated model TFLOP/s per GPU / 989.5 TF (the paper's BF16 peak, Sec. 4.1), the
// TFLOP/s in Megatron-Core's FLOP count with causal attention counted as half of the s x s product (the count
// of megatron/training/training.py num_floating_point_operations since NVIDIA/Megatron-LM 8873b55d6a,
// 2025-03-06, about six weeks before the paper appeared (the paper does not say which Megatron-Core commit its
// runs used); the same count the authors' Megatron-MoE-ModelZoo tables log, see
// test_moe_validation_qwen3.cpp), not the result's non-causal `megatron-core` count. Table 5 alone does not
// decide it: FlashAttention in the non-causal count fits it about as well (median 5.7 %, max 10.8 %) as cuDNN in
// the causal count (6.7 %, 13.7 %), while cuDNN non-causal (36.5 %, 54.4 %) and flash causal (18.6 %, 31.4 %,
// falling from -2 % at 16K to -31 % at 128K) do not; the kernel is decided by Transformer Engine's source
// (cuDNN on Hopper), the count by the dates above.
//
// Attention: cuDNN fused (`attention_backend` fused), what Transformer Engine selects on Hopper
// (docs/workloads.md "Attention"), as for every Megatron-LM scenario; context parallelism as TE's p2p ring
// (cp kernels per pass, workloads/gpt_kernels.cpp attention_ring).
//
// Mapping (the paper prints GPUs, CP, TP, EP, PP, ETP, GBS and sequence length per row; the rest is stated
// here once and is the same for every row):
//   FSDP, FSDP + EP   Megatron FSDP (data_parallel_sharding_strategy optim_grads_params: ZeRO-3), no PP
//   TP + EP + DP      no PP, distributed optimizer (ZeRO-1, paper Sec. 4.2)
//   MCore             TP x CP x DP x PP with ETP = TP (the expert grid is a sub-grid of DP, Megatron default)
//   MCore w/ Folding  ETP 1 (the printed ETP; Llama3-8x70B's rows leave it blank, ETP 1 is assumed for them:
//                     with TP 8 and 128-256 GPUs at PP 16, ETP 8 x EP 8 does not fit the TP x DP grid)
//   every row         micro-batch 1, no recompute, no virtual pipeline stages (none printed) except where
//                     the ModelZoo's runtime configuration runs the row's pipeline (below), sequence
//                     parallelism with TP (Megatron requires it with EP), alltoall dispatcher, grouped GEMM,
//                     token drop at capacity factor 1 (paper Sec. 4.2) with the uniform router load, overlapped
//                     gradient reduce / parameter gather, the load-balancing loss (coefficient 1e-2) and the
//                     fused permutation of the ModelZoo's configurations (scenario_json; Mixtral-8x22B's also its
//                     TP communication overlap where TP > 1), BF16; Table 2's rows take Table 3's Mixtral-8x22B
//                     mappings (the README: its BF16 TFLOPS equal Table 3's MFU x 989.5), FP8 with delayed
//                     scaling as printed.
//   Qwen2-57B-A14B    the ModelZoo's first commit (yanring/Megatron-MoE-ModelZoo@78fd4d6, 2025-04-03) runs it
//                     as TP 2, PP 4, EP 4, VPP 7 on 8 nodes with GBS 256 (runtime_configs/benchmarking/
//                     runtime.conf; Qwen2-57B-A14B.yaml passes --num-layers-per-virtual-pipeline-stage
//                     LAYERS_PER_VP = 28 / PP / VPP = 1, and ETP 1): the layout of its MCore and folding rows
//                     (TP 2, PP 4, EP 4), which therefore run 7 virtual stages of one layer each; its Mixtral-8x22B
//                     configuration there (TP 2, PP 8, EP 8) has VPP 1, as assumed for the others. The same
//                     Qwen2 yaml sets --moe-shared-expert-overlap (the shared expert beside the token
//                     dispatch), given to every Qwen2-57B-A14B row as its other MoE settings are.
//   EP blank = 1, PP blank = 1, CP blank = 1 (the paper leaves FSDP's EP blank for Mixtral).
// The simulated rank count and micro-batches grow with GPUs and GBS, so the normal suite runs the 20 Table 3
// rows and Table 2; Tables 4 and 5 (69 rows) run under the `long` label (tests/CMakeLists.txt,
// replay_folding_long).
//   build/tests/test_replay -tc="validation: parallel folding*" -s
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
#include "workloads/gpt.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {
const std::string kCsv = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/training-modern/moe_h100.csv";
constexpr double kPeak = 989.5;  // TF/s BF16 per H100, MoE Parallel Folding Sec. 4.1

using Row = std::map<std::string, std::string>;

const std::vector<Row>& csv() {
  static const std::vector<Row> rows = replay_test::read_csv(kCsv);
  return rows;
}

// The method of a row label ("MCore w/ Folding 512 GPUs" -> "MCore w/ Folding").
std::string method_of(const std::string& label) {
  for (const char* m : {"MCore w/ Folding", "MCore", "FSDP + EP", "FSDP", "TP + EP + DP"})
    if (label.rfind(m, 0) == 0) return m;
  FAIL("unknown method in row label '" << label << "'");
  return "";
}

std::string catalogue_name(const std::string& model) {
  static const std::map<std::string, std::string> m = {{"Mixtral-8x22B", "mixtral-8x22b"},
                                                      {"Mixtral-8x22B-G8T8", "mixtral-8x22b-g8t8"},
                                                      {"Qwen2-57B-A14B", "qwen2-57b-a14b"},
                                                      {"Llama3-8x70B", "llama3-8x70b"}};
  REQUIRE(m.count(model));
  return m.at(model);
}

int num_or(const Row& r, const std::string& col, int dflt) {
  const std::string& v = r.at(col);
  return v.empty() ? dflt : std::stoi(v);
}

// The row whose layout a row uses: itself, or for Table 2 the Table 3 row of the same model and method.
const Row& layout_row(int i) {
  const Row& r = csv()[i];
  if (r.at("table").rfind("Table 2", 0) != 0) return r;
  const std::string method = method_of(r.at("row_label"));
  for (const Row& o : csv())
    if (o.at("table").rfind("Table 3", 0) == 0 && o.at("model") == r.at("model") && o.at("row_label") == method) return o;
  FAIL("no Table 3 row for Table 2 row " << i);
  return r;
}

// The scenario of data row i, by the rules in the header.
Json scenario_json(int i) {
  const Row& r = csv()[i];
  const Row& L = layout_row(i);
  const std::string method = method_of(L.at("row_label"));
  const int gpus = std::stoi(L.at("num_gpus")), tp = num_or(L, "tp", 1), pp = num_or(L, "pp", 1),
            cp = num_or(L, "cp", 1), ep = num_or(L, "ep", 1);
  Json p = {{"model", catalogue_name(r.at("model"))},
            {"seq_length", std::stoi(L.at("seq_len"))},
            {"global_batch_size", std::stoi(L.at("global_batch_seqs"))},
            {"micro_batch_size", 1},
            {"tensor_model_parallel_size", tp},
            {"pipeline_model_parallel_size", pp},
            {"context_parallel_size", cp},
            {"expert_model_parallel_size", ep},
            {"sequence_parallel", tp > 1},
            {"moe_token_dispatcher_type", "alltoall"},
            {"attention_backend", "fused"},  // cuDNN: Transformer Engine's choice on Hopper (header)
            {"moe_grouped_gemm", true},
            {"moe_expert_capacity_factor", 1.0},
            {"recompute_granularity", "none"},
            {"overlap_grad_reduce", true},
            // Megatron-LM's bf16 rule (megatron/training/arguments.py: with --bf16, fp32 main grads and no
            // --grad-reduce-in-bf16, accumulate_allreduce_grads_in_fp32 is forced on, which becomes
            // DistributedDataParallelConfig.grad_reduce_in_fp32, also read by Megatron's FSDP buffer); the
            // paper's run configuration (yanring/Megatron-MoE-ModelZoo model_configs/benchmarking/*.yaml)
            // sets --bf16 and not --grad-reduce-in-bf16, so gradients are reduced in fp32 (4 bytes).
            {"grad_reduce_in_fp32", true},
            // The same configurations at the ModelZoo's first commit (yanring/Megatron-MoE-ModelZoo@78fd4d6,
            // 2025-04-03: Mixtral-8x22B.yaml, Qwen2-57B-A14B.yaml) train with the load-balancing loss
            // (--moe-router-load-balancing-type aux_loss, --moe-aux-loss-coeff 1e-2) and the fused permutation
            // (--moe-permute-fusion); Llama3-8x70B has no configuration there and is given the same.
            {"moe_aux_loss_coeff", 0.01},
            {"moe_permute_fusion", true}};
  // Mixtral-8x22B.yaml at that commit also sets --tp-comm-overlap (Transformer Engine's userbuffers overlap, which
  // Megatron-LM allows only with sequence parallelism, so with TP > 1); Table 2's rows are Mixtral-8x22B's.
  if (r.at("model") == "Mixtral-8x22B" && tp > 1) p["tp_comm_overlap"] = true;
  // Qwen2-57B-A14B.yaml and runtime.conf at the same commit (header): the shared expert beside the dispatch, and
  // 7 virtual stages of one layer on the configuration's 4-stage pipeline.
  if (r.at("model") == "Qwen2-57B-A14B") {
    p["moe_shared_expert_overlap"] = true;
    if (pp == 4) p["num_layers_per_virtual_pipeline_stage"] = 1;
  }
  if (method == "MCore w/ Folding") p["expert_tensor_parallel_size"] = 1;
  else if (!L.at("etp").empty()) p["expert_tensor_parallel_size"] = std::stoi(L.at("etp"));
  if (method == "FSDP" || method == "FSDP + EP") {
    p["data_parallel_sharding_strategy"] = "optim_grads_params";
  } else {
    p["use_distributed_optimizer"] = true;
    p["overlap_param_gather"] = true;
  }
  if (r.at("precision").rfind("fp8", 0) == 0) {
    p["precision"] = "fp8";
    p["fp8_recipe"] = "delayed";
  } else {
    p["precision"] = "bf16";
  }
  return Json{{"topology", {{"preset", "superpod"}, {"params", {{"nodes", gpus / 8}, {"node", "dgx-h100"}}}}},
              {"workload", {{"generator", "gpt"}, {"params", p}}}};
}

struct Outcome {
  int row = 0;
  bool fits = true;
  double measured = 0;   // MFU % (Tables 1/3, 4, 5) or TFLOPS/GPU (Table 2); 0 = printed OOM
  double simulated = 0;  // same unit
  double mem_gib = 0;    // memory model's peak per GPU
  sim::RunResult res;
};

Outcome run_row(int i) {
  const Row& r = csv()[i];
  Outcome o;
  o.row = i;
  const bool table2 = r.at("table").rfind("Table 2", 0) == 0;
  const std::string& printed = table2 ? r.at("tflops_per_gpu") : r.at("mfu_pct");
  o.measured = printed == "OOM" ? 0.0 : std::stod(printed);
  const Scenario s = scenario_from_json(scenario_json(i), "moe_h100.csv row " + std::to_string(i));
  ParamMap pm;
  for (const auto& [k, v] : s.workload.params) pm[k] = v;
  pm["world_size"] = std::to_string(std::stoi(layout_row(i).at("num_gpus")));
  pm["gpu"] = "h100";
  const GptConfig cfg = gpt_config_from_params(pm, "row");
  o.mem_gib = gpt_memory_per_gpu(cfg).total_bytes() / 1073741824.0;
  // The paper's count halves the s x s attention term (causal; see the header): 6 B s^2 l q less than the
  // result's non-causal megatron-core count 12 B s l h^2 (... + (s/h) q/h ...).
  const double B = double(cfg.global_batch_size), sq = double(cfg.seq_length), q = double(cfg.num_attention_heads * cfg.head_dim());
  const double causal = 1.0 - 6.0 * B * sq * sq * double(cfg.num_layers) * q / gpt_model_flops(cfg);
  try {
    o.res = sim::run_scenario(s, {"engine", {}, {}}).result;
  } catch (const DoesNotFitError&) {
    o.fits = false;
    return o;
  }
  o.simulated = causal * (table2 ? o.res.tflops_per_gpu : 100.0 * o.res.tflops_per_gpu / kPeak);
  return o;
}

// Seconds the FSDP stream is busy per simulated rank (its gathers and reduce-scatters back to back).
double fsdp_busy(const sim::RunResult& r) {
  double busy = 0;
  std::map<std::int32_t, int> ranks;
  for (const auto& op : r.ops) {
    ranks[op.rank] = 1;
    if (op.stream == "comm.fsdp") busy += op.end_s - op.start_s;
  }
  return ranks.empty() ? 0.0 : busy / double(ranks.size());
}

// Seconds of attention-block compute (QKV / projection GEMMs and the attention kernel, forward and backward;
// with TP, Megatron's backward runs the QKV GEMMs as ops of their own, .bwd.attn.dgrad_in / .wgrad_in) per
// simulated rank.
double attention_compute(const sim::RunResult& r) {
  double busy = 0;
  std::map<std::int32_t, int> ranks;
  auto ends = [](const std::string& n, const std::string& suffix) {
    return n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (const auto& op : r.ops) {
    ranks[op.rank] = 1;
    const std::string& n = op.name;
    if (op.kind == "compute" && (ends(n, ".fwd.attn") || ends(n, ".bwd.attn") || ends(n, ".bwd.attn.dgrad_in") ||
                                 ends(n, ".bwd.attn.wgrad_in")))
      busy += op.end_s - op.start_s;
  }
  return ranks.empty() ? 0.0 : busy / double(ranks.size());
}

double exposed(const sim::RunResult& r, const char* cat) {
  auto it = r.breakdown.exposed_comm_s.find(cat);
  return it == r.breakdown.exposed_comm_s.end() ? 0.0 : it->second;
}

struct TableResult {
  std::vector<double> errs;  // |simulated / measured - 1| of the rows with a printed number that fit
  int oom_disagree = 0;      // rows where printed OOM and the memory model's verdict differ
  std::map<int, double> simulated;  // row -> simulated MFU % / TFLOPS
};

// Runs rows [lo, hi], prints one line each (per-rank average breakdown, seconds: compute, exposed TP / CP /
// EP all-to-all / DP / PP communication, bubble; the memory model's peak per GPU).
// The rows also become docs/validation.md's table `doc_name` (checked, or rewritten with FABRICSIM_UPDATE_DOCS=1).
TableResult run_rows(int lo, int hi, const std::string& doc_name, const std::string& refresh) {
  const bool table2 = csv()[lo].at("table").rfind("Table 2", 0) == 0;
  test::DocTable doc{doc_name,
                     {"row", "model", "method", "precision", "GPUs", "seq", "CP/TP/EP/PP/ETP",
                      table2 ? "published TFLOPS/GPU" : "published MFU", "simulated", "error", "step s", "compute",
                      "of which attention blocks", "exposed CP", "exposed MoE comm", "exposed DP", "FSDP stream busy",
                      "bubble", "GiB/GPU"},
                     {true, false, false, false, true, true, false, true, true, true, true, true, true, true, true, true,
                      true, true, true},
                     {}};
  auto layout = [](int i) {
    const Row& L = layout_row(i);
    auto n = [&](const char* c) { return L.at(c).empty() ? std::string("1") : L.at(c); };
    const std::string etp = method_of(L.at("row_label")) == "MCore w/ Folding" ? "1" : L.at("etp").empty() ? "TP" : L.at("etp");
    return n("cp") + "/" + n("tp") + "/" + n("ep") + "/" + n("pp") + "/" + etp;
  };
  auto value = [&](double v) { return table2 ? test::fmt("%.1f", v) : test::fmt("%.1f %%", v); };
  std::printf("row  table      method              model               GPUs  measured  simulated  error    "
              "step_s  compute  tp     cp     ep/a2a dp     pp     bubble mem_GiB fsdp_busy attn_s\n");
  TableResult out;
  std::vector<double>& errs = out.errs;
  for (int i = lo; i <= hi; ++i) {
    CAPTURE(i);
    const Row& r = csv()[i];
    const Outcome o = run_row(i);
    const std::string method = method_of(layout_row(i).at("row_label"));
    if (!o.fits || o.measured == 0) {
      std::printf("%-4d %-10.10s %-19s %-19s %5s  %8s  %9s  %s  mem %.1f GiB\n", i, r.at("table").c_str(), method.c_str(),
                  r.at("model").c_str(), layout_row(i).at("num_gpus").c_str(), o.measured == 0 ? "OOM" : "-",
                  o.fits ? "fits" : "OOM", o.fits == (o.measured != 0) ? "agree" : "DISAGREE", o.mem_gib);
      out.oom_disagree += o.fits != (o.measured != 0);
      doc.add({std::to_string(i), r.at("model"), method, r.at("precision"), layout_row(i).at("num_gpus"),
               layout_row(i).at("seq_len"), layout(i), o.measured == 0 ? "OOM" : value(o.measured),
               test::fmt(o.fits ? "fits (%.1f GiB)" : "does not fit (%.1f GiB)", o.mem_gib), "", "", "", "", "", "", "",
               "", "", ""});
      continue;
    }
    const double e = o.simulated / o.measured - 1.0;
    errs.push_back(std::fabs(e));
    out.simulated[i] = o.simulated;
    const auto& b = o.res.breakdown;
    std::printf("%-4d %-10.10s %-19s %-19s %5s  %8.1f  %9.1f  %+6.1f%%  %6.2f  %6.2f  %5.2f  %5.2f  %5.2f  %5.2f  %5.2f  %5.2f  %5.1f   %5.2f  %6.2f\n",
                i, r.at("table").c_str(), method.c_str(), r.at("model").c_str(), layout_row(i).at("num_gpus").c_str(),
                o.measured, o.simulated, 100 * e, o.res.iteration_s, b.compute_s, exposed(o.res, "tp"),
                exposed(o.res, "cp"), exposed(o.res, "ep") + exposed(o.res, "all_to_all"), exposed(o.res, "dp"),
                exposed(o.res, "pp"), b.bubble_s, o.mem_gib, fsdp_busy(o.res), attention_compute(o.res));
    doc.add({std::to_string(i), r.at("model"), method, r.at("precision"), layout_row(i).at("num_gpus"),
             layout_row(i).at("seq_len"), layout(i), value(o.measured), value(o.simulated), test::signed_pct(e),
             test::fmt("%.2f", o.res.iteration_s), test::fmt("%.2f", b.compute_s),
             test::fmt("%.2f", attention_compute(o.res)), test::fmt("%.2f", exposed(o.res, "cp")),
             test::fmt("%.2f", exposed(o.res, "ep") + exposed(o.res, "all_to_all")),
             test::fmt("%.2f", exposed(o.res, "dp")), test::fmt("%.2f", fsdp_busy(o.res)), test::fmt("%.2f", b.bubble_s),
             test::fmt("%.1f", o.mem_gib)});
  }
  test::check_doc_table(doc, refresh);
  return out;
}

void summarise(const char* what, const TableResult& t, std::size_t rows, double med_bound, double max_bound,
               int oom_disagree) {
  const auto& errs = t.errs;
  REQUIRE(errs.size() == rows);
  const double med = replay_test::median(errs), worst = *std::max_element(errs.begin(), errs.end());
  MESSAGE(std::string(what) << ": " << errs.size() << " rows, median |error| " << 100 * med << " %, max " << 100 * worst
                            << " %, OOM verdicts that differ from the source: " << t.oom_disagree);
  CHECK(med <= med_bound);
  CHECK(worst <= max_bound);
  CHECK(t.oom_disagree <= oom_disagree);
}
}  // namespace

// Bounds: the measured figures (2026-11-26, docs/validation.md) plus about 2 points on the median and 8 % of the
// maximum. The simulation is deterministic; the margin only absorbs small moves of the shared compute and
// collective models. Measured (cuDNN attention, p2p ring attention for CP, causal FLOP count, gradients reduced
// in fp32, the loss at its calibration's 8 B per logit element): Tables 1/3 median 17.0 %, max 80.3 %; Table 2
// 2.2 %, 5.3 %; Table 4 12.3 %, 80.5 %; Table 5 8.1 %, 15.6 % (14.8 / 80.0, 4.1 / 6.8, 13.2 / 80.3, 6.7 / 13.7 %
// with the loss at 24 B). The large errors are the FSDP + EP rows (docs: known limits).
// OOM: row 17 is refused as printed; row 15 (FSDP, CP 8) fits at 39.3 GiB per GPU here although the paper
// printed OOM; row 82 (FSDP + EP on 128 GPUs) needs 89.6 GiB and row 79 (folding, Llama3-8x70B on 128 GPUs)
// 81.1 GiB here although the paper ran both (the fp32 gradient buffer of the distributed optimizer, 4 bytes per
// local parameter, moved row 79 over the 80 GB).
TEST_CASE("validation: parallel folding tables 1-3 (MoE Parallel Folding on 64-256 H100) held out") {
  const std::string refresh = "build/tests/test_replay -tc='validation: parallel folding tables 1-3*'";
  const TableResult t3 = run_rows(0, 19, "folding-table3", refresh);
  summarise("Tables 1/3 (rows 0-19)", t3, 18, 0.19, 0.87, 1);
  // The paper's finding, not fitted: with the same attention layout, folding the expert grid beats MCore's
  // coupled one for every model (rows 3/4, 8/9, 13/14, 18/19).
  for (int mcore : {3, 8, 13, 18}) {
    CAPTURE(mcore);
    CHECK(t3.simulated.at(mcore + 1) > t3.simulated.at(mcore));
  }
  summarise("Table 2 (rows 20-23)", run_rows(20, 23, "folding-table2", refresh), 4, 0.045, 0.06, 0);
}

TEST_CASE("validation: parallel folding tables 4-5 (strong and context scaling to 1024 H100) held out") {
  const std::string refresh = "build/tests/test_replay -tc='validation: parallel folding tables 4-5*'";
  summarise("Table 4 (rows 24-84)", run_rows(24, 84, "folding-table4", refresh), 59, 0.15, 0.87, 2);
  // Table 5: median 12.7 %, max 19.3 % with Mixtral-8x22B.yaml's --tp-comm-overlap (10.8 % / 18.2 % without it;
  // 6.9 % / 15.5 % while every attention kernel carried a fitted 37-58 us fixed time, which the CP ring's
  // per-step kernels paid each; issue 19). Bounds by the rule of the other tables: + 2 points, + 8 % of the max.
  summarise("Table 5 (rows 85-92)", run_rows(85, 92, "folding-table5", refresh), 8, 0.15, 0.21, 0);
}
