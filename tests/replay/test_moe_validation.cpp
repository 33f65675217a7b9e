// MoE validation rows (docs/validation.md, "Mixture of experts"): Qwen3-235B-A22B on 256 H100 from
// tests/data/training-modern/moe_h100.csv, expressed as scenarios in tests/data/training-modern/moe/.
// and Mixtral-8x22B on 128 H100 (Megatron-MoE-ModelZoo run-script rows). Nothing is fitted to these rows: the
// compute is the per-kernel model fitted on single-kernel measurements (validate/compute_calibrations/h100.json),
// so all 9 rows are held out. Attention is cuDNN fused (`attention_backend: fused`, as Transformer Engine picks on
// Hopper: docs/workloads.md "Attention"); gradients reduced in fp32 (Megatron-LM's bf16 rule, docs/workloads.md).
// The Mixtral rows run the ModelZoo configuration they cite: expert TP 1 (`--expert-tensor-parallel-size: 1` in
// every version of model_configs/benchmarking/Mixtral-8x22B.yaml, yanring/Megatron-MoE-ModelZoo 78fd4d6 ..
// e8650517) and the fused cross-entropy it sets, and their TFLOP/s are compared in the count the source logs
// (Megatron-LM's causal count, `flops_convention` megatron-core-causal; docs/validation.md "Mixture of experts").
// Current errors: -13.3, -16.1, +23.0, -27.5, -49.7 % (Qwen3 rows 93-97) and +16.4, +11.3, +22.0, +10.2 % (Mixtral
// rows 111-114): median 16.4 %, max 49.7 %.
// Run with
//   build/tests/test_replay -tc="validation: moe*" -s
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
using namespace fabricsim::workloads;

namespace {
const std::string kData = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/training-modern/";

// Column `col` of 0-based data row `row` of a CSV with quoted fields.
std::string csv_cell(const std::string& file, int row, const std::string& col) {
  const auto rows = replay_test::read_csv(file);
  REQUIRE(row < static_cast<int>(rows.size()));
  REQUIRE(rows[row].count(col));
  return rows[row].at(col);
}
}  // namespace

TEST_CASE("validation: moe, Qwen3-235B-A22B (256 H100) and Mixtral-8x22B (128 H100) held out: median <= 17 %, max <= 52 %") {
  std::vector<double> abs_errors;  // |simulated / measured - 1| of every row, both tables
  std::printf("row  measured_s  simulated_s  error\n");
  // The layouts as docs/validation.md describes them (the scenario files hold the settings).
  const std::map<int, std::string> layout = {
      {93, "TP 2, PP 8 \u00d7 VPP 4, EP 32, DeepEP (flex)"}, {94, "row 93 + 1F1B A2A overlap"},
      {95, "TP 2, PP 1, EP 8, Megatron FSDP, micro-batch 4, full recompute"}, {96, "TP 2, PP 32 \u00d7 VPP 3, EP 8, all-to-all"},
      {97, "TP 4, PP 8 \u00d7 VPP 4, EP 8, DeepEP (flex)"}, {111, "dropless (load modelled uniform)"},
      {112, "dropless + forced balance"}, {113, "FP8 blockwise + forced balance"}, {114, "capacity factor 1, padded"}};
  test::DocTable qwen{"moe-qwen3-h100", {"row", "layout", "measured s/step", "simulated", "error"},
                      {false, false, true, true, true}, {}};
  test::DocTable mixtral{"moe-mixtral-h100", {"row", "variant", "published TFLOPS/GPU", "simulated", "error"},
                         {false, false, true, true, true}, {}};
  for (int row : {93, 94, 95, 96, 97}) {
    CAPTURE(row);
    const double measured = std::stod(csv_cell(kData + "moe_h100.csv", row, "iteration_s"));
    const std::string f = kData + "moe/qwen3_235b_h100_row" + std::to_string(row) + ".json";
    Scenario s = load_scenario(f);
    auto r = sim::run_scenario(s, {"engine", {}, {}}).result;
    CHECK(r.iteration_s > 0);
    abs_errors.push_back(std::fabs(r.iteration_s / measured - 1.0));
    std::printf("%-4d %10.1f  %11.2f  %+6.1f %%\n", row, measured, r.iteration_s, 100.0 * (r.iteration_s / measured - 1.0));
    qwen.add({std::to_string(row), layout.at(row), test::fmt("%.1f", measured), test::fmt("%.2f", r.iteration_s),
              test::signed_pct(r.iteration_s / measured - 1.0)});
  }
  std::printf("row  measured_TFLOPS  simulated  error\n");
  for (int row : {111, 112, 113, 114}) {
    CAPTURE(row);
    const double measured = std::stod(csv_cell(kData + "moe_h100.csv", row, "tflops_per_gpu"));
    const std::string f = kData + "moe/mixtral_8x22b_h100_row" + std::to_string(row) + ".json";
    Scenario s = load_scenario(f);
    auto r = sim::run_scenario(s, {"engine", {}, {}}).result;
    CHECK(r.tflops_per_gpu > 0);
    abs_errors.push_back(std::fabs(r.tflops_per_gpu / measured - 1.0));
    std::printf("%-4d %15.1f  %9.1f  %+6.1f %%\n", row, measured, r.tflops_per_gpu, 100.0 * (r.tflops_per_gpu / measured - 1.0));
    mixtral.add({std::to_string(row), layout.at(row), test::fmt("%.0f", measured), test::fmt("%.1f", r.tflops_per_gpu),
                 test::signed_pct(r.tflops_per_gpu / measured - 1.0)});
  }
  test::check_doc_table(qwen, "build/tests/test_replay -tc='validation: moe? Qwen3-235B-A22B (256 H100)*'");
  test::check_doc_table(mixtral, "build/tests/test_replay -tc='validation: moe? Qwen3-235B-A22B (256 H100)*'");
  REQUIRE(abs_errors.size() == 9);
  const double med = replay_test::median(abs_errors);
  const double worst = *std::max_element(abs_errors.begin(), abs_errors.end());
  MESSAGE("MoE rows: median |error| " << 100 * med << " %, max " << 100 * worst << " %");
  // Bounds: the current figures (median 16.4 %, max 49.7 %, row 97) rounded up to the next whole percent
  // (docs/validation.md "Mixture of experts"). The median bound is 17 % rather than the 16 % these rows had when
  // the Mixtral scenarios ran expert TP 2 and the non-causal count: the scenarios were corrected to the cited
  // configuration, not the model. 4 of the 9 rows sit between 10 and 17 %, so small model changes move the median far.
  CHECK(med <= 0.17);
  CHECK(worst <= 0.52);
}
