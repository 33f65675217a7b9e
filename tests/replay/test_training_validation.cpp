// Validation against published training throughput (docs/validation.md, "Training"):
//  - Megatron-LM SC'21 Table 1: achieved TFLOP/s per GPU within 10 % on every row, median within 5 %.
//    Compute efficiencies come from tests/data/training/megatron_fit.json, fitted on 3 rows only
//    (1.7B, 145B, 1T) by tests/data/training/fit_megatron.py; the other 7 rows are predictions.
//  - NVIDIA distributed-embeddings synthetic models: step time within 15 % on 1, 8 and 16 A100, with
//    tests/data/training/dlrm_fit.json fitted on 3 rows (see that file).
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

#include "sim/replay/run_scenario.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;

namespace {
const std::string kData = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/training/";

std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  auto split = [](const std::string& line) {
    std::vector<std::string> out;
    std::string cur;
    bool q = false;
    for (char ch : line) {
      if (ch == '"') q = !q;
      else if (ch == ',' && !q) {
        out.push_back(cur);
        cur.clear();
      } else cur += ch;
    }
    out.push_back(cur);
    return out;
  };
  std::string line;
  std::getline(in, line);
  auto header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto f = split(line);
    std::map<std::string, std::string> r;
    for (std::size_t i = 0; i < header.size() && i < f.size(); ++i) r[header[i]] = f[i];
    rows.push_back(r);
  }
  return rows;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}
}  // namespace

TEST_CASE("validation: Megatron-LM SC'21 Table 1 achieved TFLOP/s per GPU") {
  Json fit = load_json_file(kData + "megatron_fit.json");
  std::vector<double> errs;
  std::string table = "model   GPUs  paper  sim    error  (fit row *)\n";
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
              {"recompute_granularity", "full"}};
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
    CHECK_MESSAGE(std::abs(err) <= 0.10, "row " << r.at("model_size_label") << " error " << 100 * err << " %");
    errs.push_back(std::abs(err));
  }
  REQUIRE(errs.size() == 10);
  MESSAGE(table);
  CHECK(median(errs) <= 0.05);
}
