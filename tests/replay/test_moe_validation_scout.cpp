// torchtitan's Llama 4 Scout MoE rows on GB200 (tests/data/training-modern/torchtitan_moe.csv, from
// torchtitan.csv: pytorch/torchtitan@b5bcd76c66 torchtitan/components/quantization/mxfp8.md, "MoE models";
// docs/validation.md, "Mixture of experts"): tokens/s per GPU, bf16 and MXFP8, 64 nodes of 4 GB200 = 256 GPUs,
// FSDP 256 on the dense parts, EP 16 on the routed experts, seq 8192, no activation checkpointing,
// torch.compile. Scenarios: tests/data/training-modern/moe/llama4_scout_gb200_{bf16,mxfp8}.json (catalogue
// model llama4-scout; the torchtitan conventions of the dense rows: use_torch_fsdp2, fp32 gradient reduction,
// the compiled loss of torchtitan from bbb1b616e, cuDNN attention on compute capability 10.0 from 5de055e30;
// EP as an all-to-all dispatcher with grouped GEMMs; the load uniform -- the router's balance is not printed).
// Nothing is fitted to these rows.
//
// The source gives two local batch sizes (10 in torchtitan's mxfp8.md, 1 in torchao's moe_training README) and
// "512 GPU" beside "64 nodes of 4 devices each = 256 chips". 256 GPUs is what the layout adds up to; local batch
// 10 does not fit a GB200 without activation checkpointing (the test checks the refusal), so the scenarios use 1.
//
// Run with
//   build/tests/test_replay -tc="validation: moe-scout*" -s
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "replay_test_util.hpp"
#include "tests/doc_table_util.hpp"
#include "replay/run_scenario.hpp"
#include "sim/base/error.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {
const std::string kData = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/training-modern/";

double tps_per_gpu(const Scenario& s) {
  sim::ScenarioRunOptions opt;
  opt.comm_model = "engine";
  opt.engine.collect_link_stats = false;
  opt.replay.record_ops = false;
  return sim::run_scenario(s, opt).result.tokens_per_s / 256.0;
}
}  // namespace

TEST_CASE("validation: moe-scout Llama 4 Scout on 256 GB200 (torchtitan), bf16 and MXFP8 tokens/s per GPU") {
  const auto rows = replay_test::read_csv(kData + "torchtitan_moe.csv");
  REQUIRE(rows.size() == 2);
  double sim[2] = {0, 0};
  test::DocTable doc{"moe-scout", {"row", "published tokens/s/GPU", "simulated", "error"}, {false, true, true, true}, {}};
  for (int i = 0; i < 2; ++i) {
    const std::string prec = i == 0 ? "bf16" : "mxfp8";
    CAPTURE(prec);
    const double pub = std::stod(rows[i].at("tokens_per_s_per_gpu"));
    sim[i] = tps_per_gpu(load_scenario(kData + "moe/llama4_scout_gb200_" + prec + ".json"));
    std::printf("%-6s published %6.0f  simulated %7.1f  %+6.1f %%\n", prec.c_str(), pub, sim[i], 100.0 * (sim[i] / pub - 1.0));
    doc.add({i == 0 ? "bf16" : "MXFP8", test::fmt("%.0f", pub), test::fmt("%.1f", sim[i]), test::signed_pct(sim[i] / pub - 1.0)});
    // Regression guards at the measured error rounded up to the next whole percent. Measured 2026-11-26: bf16
    // +11.3 %, MXFP8 -3.9 % (+8.9 / -6.0 % with the loss at 24 B per logit element); guards 12 / 4 %. Re-set
    // 2026-11-27 when torch FSDP2's copy kernels were priced (sourced and tested on their own in
    // tests/workloads, "gpt torch FSDP2 copies"): both rows slower, bf16 +11.2 -> +9.5 %, MXFP8 -4.0 -> -4.8 %;
    // guards 10 / 5 % (one tightened, one loosened by the moved figure; docs/validation.md says so).
    // Re-set 2026-11-28 (docs/validation.md says what moved and why; the lead reviews): NCCL's MNNVL rack as one
    // node with its 16 ring channels (docs/collectives.md) took the rows to +38.7 / +33.7 %, torchtitan's
    // per-layer expert FSDP2 units to +43.2 / +19.9 %; guards 44 / 20 %, the measured errors rounded up.
    // Re-set 2026-11-29 when the scenarios' input changed: GB200 racks take the b200 network calibration
    // (models/calibration_presets.cpp; before, the built-in defaults), its fitted InfiniBand (network_efficiency
    // 0.871, Simple network step 22.4 us) slowing the inter-rack FSDP and EP calls: bf16 +35.0 -> +24.3 %, MXFP8
    // +17.5 -> +7.8 %; guards 25 / 8 %, the measured errors rounded up.
    CHECK(std::fabs(sim[i] / pub - 1.0) <= (i == 0 ? 0.25 : 0.08));
  }
  test::check_doc_table(doc, "build/tests/test_replay -tc='validation: moe-scout*'");
  // The structure, measured: torchtitan's per-layer expert FSDP2 units (the scenarios' fsdp_expert_units; what
  // torchtitan runs with EP, pytorch/torchtitan@01f4e5022 and later) against reducing the expert gradients once
  // at the step's end (fabricsim's structure before the units were modelled).
  test::DocTable st{"moe-scout-structure", {"row", "expert FSDP2", "simulated tokens/s/GPU", "error"}, {false, false, true, true}, {}};
  for (int i = 0; i < 2; ++i) {
    const std::string prec = i == 0 ? "bf16" : "mxfp8";
    const double pub = std::stod(rows[i].at("tokens_per_s_per_gpu"));
    Scenario s = load_scenario(kData + "moe/llama4_scout_gb200_" + prec + ".json");
    s.workload.params["fsdp_expert_units"] = "false";
    const double once = tps_per_gpu(s);
    std::printf("%-6s without expert units %7.1f  %+6.1f %%\n", prec.c_str(), once, 100.0 * (once / pub - 1.0));
    st.add({i == 0 ? "bf16" : "MXFP8", "per-layer units over EDP 16 (torchtitan)", test::fmt("%.1f", sim[i]),
            test::signed_pct(sim[i] / pub - 1.0)});
    st.add({i == 0 ? "bf16" : "MXFP8", "reduced once at the step's end", test::fmt("%.1f", once), test::signed_pct(once / pub - 1.0)});
    // Measured 2026-11-28: bf16 8557.3 (+38.7 %), MXFP8 9893.6 (+33.7 %) without the units. The units cost the
    // MXFP8 step its per-layer gathers (exposed beside the shorter compute) and save the bf16 step its
    // step-end expert reduce-scatter (overlapped per layer instead). Re-set 2026-11-29 when the replay began
    // pricing each communicator over the slowest placement class of its groups (replay/placement_classes.hpp):
    // packed on 72-GPU racks the EP group of ranks 64-79 straddles two racks, its all-to-alls cross InfiniBand
    // (ep calls 23.2 -> 170.3 ms per step on MXFP8), and with that exposed all-to-all the units are faster in
    // both precisions: bf16 8326.3 vs 7441.1 without, MXFP8 8694.9 vs 8438.3 (docs/validation.md). Re-set
    // 2026-11-29 with the b200 network calibration of GB200 racks (above): bf16 7665.6 vs 7084.3 without (the
    // units faster), MXFP8 7975.6 vs 7982.4 (a tie: the per-layer gathers exposed beside MXFP8's shorter compute
    // cost what the overlapped step-end reduce-scatter saves). Asserted as measured: bf16 faster with the units,
    // MXFP8 within 0.5 % either way.
    if (i == 0) CHECK(once < sim[i]);
    else CHECK(std::fabs(once / sim[i] - 1.0) < 0.005);
  }
  test::check_doc_table(st, "build/tests/test_replay -tc='validation: moe-scout*'");
  // MXFP8 over bf16: published +20.0 %; simulated +4.0 % (the backward's per-layer gathers and fp32
  // reduce-scatters, in high precision in both runs -- "All distributed communication for MXFP8 training is
  // currently done in high precision" -- take about the layer's backward compute). The direction must hold.
  MESSAGE("MXFP8 / bf16: published 1.200, simulated " << sim[1] / sim[0]);
  CHECK(sim[1] > sim[0]);
  // Local batch 10 (torchtitan's mxfp8.md) without activation checkpointing needs several times a GB200's
  // memory.
  Scenario s = load_scenario(kData + "moe/llama4_scout_gb200_bf16.json");
  s.workload.params["micro_batch_size"] = "10";
  s.workload.params["global_batch_size"] = "2560";
  CHECK_THROWS_AS(tps_per_gpu(s), DoesNotFitError);
}
