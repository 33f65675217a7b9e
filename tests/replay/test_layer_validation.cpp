// One 22B transformer layer on 8 A100s (TP 8, seq 2048, micro-batch 4), Korthikanti et al. 2022 Table 4
// (tests/data/training-modern/korthikanti_22b_layer_times.csv): forward and backward time of one layer
// without recompute, with sequence parallelism, full recompute, selective recompute and both, against the
// same layer in a simulated step. The step is the gpt generator's (one layer, one micro-batch, no data or
// pipeline parallelism) on one DGX A100 with the megatron-sc21 compute preset, replayed by the engine; the
// layer's forward is the span of its ops (compute and TP collectives) before the logits, its backward the
// span of its ops after them (with the recomputed forward). Nothing was fitted to these rows (the preset was
// fitted on 3 rows of SC'21 Table 1). The table is printed with
// `build/tests/test_replay -tc='validation: whole layers*' -s` and copied into docs/validation.md.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/csv_test_util.hpp"
#include "tests/doc_table_util.hpp"
#include "replay/run_scenario.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;

namespace {

using test::read_csv_rows;

struct LayerTimes {
  double fwd_s = 0, bwd_s = 0;
};

// The forward / backward span of decoder layer 0 of micro-batch 0 on rank 0 of a simulated step.
LayerTimes simulated_layer(const Json& params, const std::string& label) {
  Json sc = {{"topology", {{"preset", "superpod"}, {"params", {{"nodes", 1}, {"node", "dgx-a100"}}}}},
             {"workload", {{"generator", "gpt"}, {"params", params}}},
             {"compute", {{"preset", "megatron-sc21"}}}};
  auto s = workloads::scenario_from_json(sc, label);
  sim::ScenarioRunOptions opt;
  opt.comm_model = "engine";
  const auto res = sim::run_scenario(s, opt).result;
  // The logits / loss ops separate the layer's forward from its backward.
  double logits_start = -1, logits_end = -1;
  for (const auto& op : res.ops) {
    if (op.rank != 0 || op.name.find("logits") == std::string::npos) continue;
    logits_start = logits_start < 0 ? op.start_s : std::min(logits_start, op.start_s);
    logits_end = std::max(logits_end, op.end_s);
  }
  REQUIRE(logits_start >= 0);  // the step has its logits / loss ops
  double f0 = 1e300, f1 = -1, b0 = 1e300, b1 = -1;
  for (const auto& op : res.ops) {
    if (op.rank != 0 || op.name.rfind("mb0.l0.", 0) != 0) continue;
    if (op.end_s <= logits_start) f0 = std::min(f0, op.start_s), f1 = std::max(f1, op.end_s);
    else if (op.start_s >= logits_end) b0 = std::min(b0, op.start_s), b1 = std::max(b1, op.end_s);
    else FAIL(label << ": op " << op.name << " overlaps the logits");
  }
  REQUIRE(f1 > f0);
  REQUIRE(b1 > b0);
  return {f1 - f0, b1 - b0};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

TEST_CASE("validation: whole layers (Korthikanti et al. Table 4, one 22B layer on A100)") {
  const std::string path = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/training-modern/korthikanti_22b_layer_times.csv";
  std::vector<double> fwd_err, bwd_err, tot_err;
  std::string table = "experiment | published fwd ms | sim fwd ms | error | published bwd ms | sim bwd ms | error | published fwd+bwd ms | sim | error\n";
  for (const auto& r : read_csv_rows(path)) {
    const std::string ex = r.at("experiment");
    const bool sp = ex.find("Sequence") != std::string::npos;
    const std::string rc = ex.find("Selective") != std::string::npos ? "selective"
                           : ex == "Baseline with recompute"          ? "full"
                                                                      : "none";
    const int mb = std::stoi(r.at("micro_batch")), tp = std::stoi(r.at("tp"));
    // Table 3's 22B model (h 6144, 64 heads, 48 layers, vocab 51200 as in the Table 5 rows), one layer.
    Json p = {{"num_layers", 1}, {"hidden_size", 6144}, {"num_attention_heads", 64},
              {"seq_length", std::stoi(r.at("seq_len"))}, {"padded_vocab_size", 51200},
              {"micro_batch_size", mb}, {"global_batch_size", mb}, {"tensor_model_parallel_size", tp},
              {"pipeline_model_parallel_size", 1}, {"recompute_granularity", rc}, {"sequence_parallel", sp}};
    const LayerTimes sim = simulated_layer(p, ex);
    const double pf = std::stod(r.at("forward_ms")) * 1e-3, pb = std::stod(r.at("backward_ms")) * 1e-3;
    const double ef = (sim.fwd_s - pf) / pf, eb = (sim.bwd_s - pb) / pb;
    const double et = (sim.fwd_s + sim.bwd_s - pf - pb) / (pf + pb);
    fwd_err.push_back(ef);
    bwd_err.push_back(eb);
    tot_err.push_back(et);
    char buf[300];
    std::snprintf(buf, sizeof buf, "%s | %.1f | %.2f | %+.1f %% | %.1f | %.2f | %+.1f %% | %.1f | %.2f | %+.1f %%\n",
                  ex.c_str(), pf * 1e3, sim.fwd_s * 1e3, 100 * ef, pb * 1e3, sim.bwd_s * 1e3, 100 * eb,
                  (pf + pb) * 1e3, (sim.fwd_s + sim.bwd_s) * 1e3, 100 * et);
    table += buf;
  }
  MESSAGE(table);
  test::check_doc_table(test::table_from_pipes("korthikanti-22b-layer", table,
                                               {false, true, true, true, true, true, true, true, true, true}),
                        "build/tests/test_replay -tc='validation: whole layers*'");
  REQUIRE(fwd_err.size() == 5);
  auto max_abs = [](const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m = std::max(m, std::abs(x));
    return m;
  };
  auto med_abs = [](std::vector<double> v) {
    for (double& x : v) x = std::abs(x);
    return median(v);
  };
  MESSAGE("forward: median |error| " << 100 * med_abs(fwd_err) << " %, max " << 100 * max_abs(fwd_err) << " %");
  MESSAGE("backward: median |error| " << 100 * med_abs(bwd_err) << " %, max " << 100 * max_abs(bwd_err) << " %");
  MESSAGE("forward+backward: median |error| " << 100 * med_abs(tot_err) << " %, max " << 100 * max_abs(tot_err) << " %");
  // Bounds: the figures measured on 2026-11-27 (docs/validation.md "Whole layers") rounded up to the next whole
  // percent. The backward overlaps the input-gradient all-reduce / reduce-scatter with the weight-gradient GEMM
  // (and with SP the input re-gather with the dgrad GEMM) as Megatron-LM does; chaining them after the GEMMs
  // instead puts every backward +4.9 .. +16.0 % slow.
  CHECK(max_abs(fwd_err) <= 0.01);   // measured 0.6 %
  CHECK(med_abs(bwd_err) <= 0.02);   // measured 1.1 %
  CHECK(max_abs(bwd_err) <= 0.03);   // measured 2.7 %
  CHECK(med_abs(tot_err) <= 0.01);   // measured 0.9 %
  CHECK(max_abs(tot_err) <= 0.02);   // measured 1.7 %
}
