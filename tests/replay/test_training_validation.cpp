// Validation against published training throughput (docs/validation.md, "Training"):
//  - Megatron-LM SC'21 Table 1: achieved TFLOP/s per GPU within 10 % on every row, median within 5 %.
//    Compute efficiencies come from tests/data/training/megatron_fit.json, fitted on 3 rows only
//    (1.7B, 145B, 1T) by tests/data/training/fit_megatron.py; the other 7 rows are predictions.
//  - NVIDIA distributed-embeddings synthetic models: step time within 15 % on 1, 8 and 16 A100, with
//    tests/data/training/dlrm_fit.json's compute parameters fitted on 3 rows (Tiny/1, Small/1, Small/8)
//    by tests/data/training/fit_dlrm.py; the other 5 rows are predictions.
// Print the tables with: test_replay -tc="*validation*" -s
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "replay_test_util.hpp"
#include "tests/doc_table_util.hpp"
#include "replay/run_scenario.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;

namespace {
const std::string kData = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/training/";

using replay_test::median;
using replay_test::read_csv;
}  // namespace

TEST_CASE("validation: Megatron-LM SC'21 Table 1 achieved TFLOP/s per GPU") {
  Json fit = load_json_file(kData + "megatron_fit.json");
  std::vector<double> errs;
  std::string table = "model   GPUs  paper  sim    error  (fit row *)\n";
  test::DocTable doc{"sc21-table1", {"model", "GPUs", "paper TFLOP/s", "simulated", "error"}, {false, true, true, true, true}, {}};
  for (const auto& r : read_csv(kData + "megatron_sc21_table1_a100.csv")) {
    Json p = {{"num_layers", std::stoi(r.at("num_layers"))},
              {"hidden_size", std::stoi(r.at("hidden_size"))},
              {"num_attention_heads", std::stoi(r.at("attention_heads"))},
              {"seq_length", std::stoi(r.at("seq_len"))},
              {"padded_vocab_size", std::stoi(r.at("vocab_size"))},
              {"micro_batch_size", std::stoi(r.at("micro_batch_size"))},
              {"global_batch_size", std::stoi(r.at("global_batch_size"))},
              {"tensor_model_parallel_size", std::stoi(r.at("tensor_parallel"))},
              {"pipeline_model_parallel_size", std::stoi(r.at("pipeline_parallel"))},
              {"recompute_granularity", "full"},
              // The SC'21 runs are fp16 (NVIDIA/Megatron-LM@79a3bb6b examples/sc21/CONFIG.sh: --fp16
              // --loss-scale 8192), so gradients are reduced in fp16 (Megatron's fp32 rule is for bf16).
              {"fp16", true},
              // The SC'21 code had no asynchronous TP all-reduce (Megatron-LM added it on 2021-08-30,
              // NVIDIA/Megatron-LM@cf7efd4f5a, after the paper's runs).
              {"async_tensor_model_parallel_allreduce", false}};
    if (!r.at("virtual_pipeline_layers_per_stage").empty())
      p["num_layers_per_virtual_pipeline_stage"] = std::stoi(r.at("virtual_pipeline_layers_per_stage"));
    Json sc = {{"topology", {{"preset", "superpod"}, {"params", {{"nodes", std::stoi(r.at("num_gpus")) / 8}, {"node", "dgx-a100"}}}}},
               {"workload", {{"generator", "gpt"}, {"params", p}}},
               {"compute", fit.at("compute")}};
    auto s = workloads::scenario_from_json(sc, "megatron row " + r.at("model_size_label"));
    sim::ScenarioRunOptions opt;
    opt.replay.record_ops = false;
    auto res = sim::run_scenario(s, opt).result;
    double paper = std::stod(r.at("achieved_tflops_per_gpu"));
    double err = (res.tflops_per_gpu - paper) / paper;
    bool fitted = false;
    for (const auto& f : fit.at("fit_rows")) fitted = fitted || f.get<std::string>() == r.at("model_size_label");
    char buf[160];
    std::snprintf(buf, sizeof buf, "%-6s %5s  %5.1f  %5.1f  %+5.1f%% %s\n", r.at("model_size_label").c_str(),
                  r.at("num_gpus").c_str(), paper, res.tflops_per_gpu, 100 * err, fitted ? "*" : "");
    table += buf;
    doc.add({r.at("model_size_label") + (fitted ? " (fit)" : ""), r.at("num_gpus"), r.at("achieved_tflops_per_gpu"),
             test::fmt("%.1f", res.tflops_per_gpu), test::signed_pct(err)});
    CHECK_MESSAGE(std::abs(err) <= 0.10, "row " << r.at("model_size_label") << " error " << 100 * err << " %");
    errs.push_back(std::abs(err));
  }
  REQUIRE(errs.size() == 10);
  MESSAGE(table);
  test::check_doc_table(doc, "build/tests/test_replay -tc='validation: Megatron-LM SC*'");
  CHECK(median(errs) <= 0.05);
}

// Issue 5 asks for 15 % on every row. The scenario reproduces how the benchmark runs (distributed-embeddings'
// memory_balanced placement with the README's column_slice_threshold, host->device copy of the int64 ids,
// Horovod's cycle before each collective: dlrm_fit.json "workload", sources in fit_dlrm.py); the two compute
// parameters are fitted on Tiny/1, Small/1 and Small/8 only.
TEST_CASE("validation: distributed-embeddings synthetic model step times") {
  Json fit = load_json_file(kData + "dlrm_fit.json");
  std::string table = "model   GPUs  measured_ms  sim_ms   error  (fit row *)\n";
  int within = 0, rows = 0;
  test::DocTable doc{"distributed-embeddings", {"model", "GPUs", "measured ms", "simulated ms", "error"}, {false, true, true, true, true}, {}};
  for (const auto& r : read_csv(kData + "distributed_embeddings_benchmarks.csv")) {
    if (r.at("table") != "synthetic_step_time") continue;
    int n = std::stoi(r.at("num_gpus"));
    Json topo = n <= 8 ? Json{{"preset", "dgx-a100"}}
                       : Json{{"preset", "superpod"}, {"params", {{"nodes", n / 8}, {"node", "dgx-a100"}}}};
    std::string model = r.at("model");
    std::string lower = model;
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    Json params = {{"configs", kData + "distributed_embeddings_synthetic_configs.json"},
                   {"model", lower}, {"global_batch_size", std::stoi(r.at("global_batch_size"))},
                   {"world_size", n}};
    for (auto it = fit.at("workload").begin(); it != fit.at("workload").end(); ++it) params[it.key()] = it.value();
    Json sc = {{"topology", topo},
               {"workload", {{"generator", "dlrm"}, {"params", params}}},
               {"compute", fit.at("compute")}};
    auto s = workloads::scenario_from_json(sc, "dlrm row " + model + "/" + std::to_string(n));
    auto res = sim::run_scenario(s).result;
    double meas = std::stod(r.at("step_time_ms")), sim_ms = res.iteration_s * 1e3;
    double err = (sim_ms - meas) / meas;
    bool fitted = false;
    for (const auto& f : fit.at("fit_rows")) fitted = fitted || f.get<std::string>() == model + "/" + std::to_string(n);
    char buf[160];
    std::snprintf(buf, sizeof buf, "%-7s %3d  %8.2f  %8.2f  %+6.1f%% %s\n", model.c_str(), n, meas, sim_ms, 100 * err,
                  fitted ? "*" : "");
    table += buf;
    doc.add({model + (fitted ? " (fit)" : ""), std::to_string(n), test::fmt("%.2f", meas), test::fmt("%.2f", sim_ms),
             test::signed_pct(err)});
    ++rows;
    within += std::abs(err) <= 0.15;
    CHECK_MESSAGE(std::abs(err) <= 0.15, model << " on " << n << " GPUs: error " << 100 * err << " %");
  }
  MESSAGE(table);
  test::check_doc_table(doc, "build/tests/test_replay -tc='validation: distributed-embeddings*'");
  CHECK(rows == 8);
  MESSAGE(within << " of " << rows << " rows within 15 %");
  CHECK(fit.at("fit_rows").size() <= 3);
}
