// Hybrid Mamba models (docs/workloads.md "Hybrid Mamba models") replayed end to end: context parallelism of the
// Mamba layers costs time and never buys compute.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "replay/run_scenario.hpp"
#include "workloads/gpt.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {
sim::RunResult run_example(const std::string& name) {
  Scenario s = load_scenario(std::string(FABRICSIM_SOURCE_DIR) + "/examples/workloads/" + name);
  return sim::run_scenario(s, {"analytic", {}, {}}).result;
}
}  // namespace

TEST_CASE("hybrid run: Nemotron-H 8B with CP 2 on the same 32 H100 is no faster than CP 1's compute") {
  // The same GPUs, global batch and sequence: CP 2 (DP 2) gives each rank the tokens CP 1 (DP 4) does, half a
  // sequence per micro-batch, twice the micro-batches. The Mamba scan's work per rank is the same (the all-to-alls
  // trade tokens for heads), the attention's too; the exchanges and their copies only add.
  const sim::RunResult one = run_example("nemotron-h-8b-32-h100.json");
  const sim::RunResult two = run_example("nemotron-h-8b-cp2-32-h100.json");
  const double cp_exposed = two.breakdown.exposed_comm_s.count("cp") ? two.breakdown.exposed_comm_s.at("cp") : 0.0;
  MESSAGE("CP 1: step " << one.iteration_s * 1e3 << " ms, compute " << one.breakdown.compute_s * 1e3 << " ms; CP 2: step "
                        << two.iteration_s * 1e3 << " ms, compute " << two.breakdown.compute_s * 1e3
                        << " ms, exposed CP " << cp_exposed * 1e3 << " ms");
  CHECK(two.breakdown.compute_s >= one.breakdown.compute_s);
  CHECK(two.iteration_s >= one.breakdown.compute_s);
  CHECK(cp_exposed > 0);
}

TEST_CASE("hybrid run: Nemotron-H 8B's pattern with G (Gated DeltaNet) or + (MLA) sublayers, or an MTP depth, replays end to end") {
  // What-ifs on the 32-H100 example (no published model): every Mamba mixer M swapped for a Gated DeltaNet layer G
  // (Megatron's GDN defaults: 16 key heads, 32 value heads of 128), or every attention sublayer * for MLA +.
  Scenario base = load_scenario(std::string(FABRICSIM_SOURCE_DIR) + "/examples/workloads/nemotron-h-8b-32-h100.json");
  const std::string pattern = base.workload.params.at("hybrid_layer_pattern");
  auto run = [&](char from, char to, const std::string& mtp = "") {
    Scenario s = base;
    std::string p = pattern;
    std::replace(p.begin(), p.end(), from, to);
    p += mtp;
    s.workload.params["hybrid_layer_pattern"] = p;
    const sim::RunResult r = sim::run_scenario(s, {"analytic", {}, {}}).result;
    ParamMap wp = s.workload.params;
    wp["world_size"] = "32", wp["gpu"] = "h100";  // the topology's GPUs (4 DGX H100)
    const double flops = gpt_model_flops(gpt_config_from_params(wp, "t"));
    MESSAGE(p << ": step " << r.iteration_s * 1e3 << " ms, compute " << r.breakdown.compute_s * 1e3 << " ms, "
              << r.tflops_per_gpu << " TFLOP/s per GPU");
    CHECK(r.breakdown.compute_s > 0);
    CHECK(r.iteration_s >= r.breakdown.compute_s);
    // The reported rate is hybrid_flops over the step.
    CHECK(r.tflops_per_gpu * 1e12 * r.iteration_s * 32 == doctest::Approx(flops).epsilon(1e-9));
    return r;
  };
  const sim::RunResult m = run('G', 'G'), g = run('M', 'G'), plus = run('*', '+');
  CHECK(g.iteration_s != m.iteration_s);
  CHECK(plus.iteration_s != m.iteration_s);
  // One MTP depth of an attention and an MLP sublayer (Megatron's unified pattern "main/*-") on the last stage: more
  // compute, a longer step.
  const sim::RunResult mtp = run('G', 'G', "/*-");
  CHECK(mtp.breakdown.compute_s > m.breakdown.compute_s);
  CHECK(mtp.iteration_s > m.iteration_s);
}

TEST_CASE("GDN run: Qwen3-Next (row 98) with CP 2 on the same 128 H100 adds exposed all-to-all time, no compute saved") {
  // The ModelZoo run's configuration with context_parallel_size 2 (DP 16 instead of 32): its 36 Gated DeltaNet
  // layers exchange in_proj's and the norm's outputs by all-to-all, its 12 attention layers run cp_comm_type p2p.
  Scenario s = load_scenario(std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/training-modern/moe/qwen3_next_80b_h100_row98.json");
  const sim::RunResult one = sim::run_scenario(s, {"analytic", {}, {}}).result;
  s.workload.params["context_parallel_size"] = "2";
  const sim::RunResult two = sim::run_scenario(s, {"analytic", {}, {}}).result;
  const double cp_exposed = two.breakdown.exposed_comm_s.count("cp") ? two.breakdown.exposed_comm_s.at("cp") : 0.0;
  MESSAGE("CP 1: step " << one.iteration_s * 1e3 << " ms, compute " << one.breakdown.compute_s * 1e3 << " ms; CP 2: step "
                        << two.iteration_s * 1e3 << " ms, compute " << two.breakdown.compute_s * 1e3
                        << " ms, exposed CP " << cp_exposed * 1e3 << " ms");
  CHECK(cp_exposed > 0);
  CHECK(two.breakdown.compute_s >= one.breakdown.compute_s);
}
