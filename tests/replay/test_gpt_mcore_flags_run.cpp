// Megatron-Core flags of 2025-2026 recipes replayed (docs/workloads.md, "Optimizer state, FP8 parameters,
// activation offloading, sliding windows"): the step moves the way and by about as much as the real system.
#include <doctest/doctest.h>

#include <string>

#include "replay/run_scenario.hpp"
#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {
sim::RunResult run_json(const std::string& text) {
  Scenario s = scenario_from_json(Json::parse(text), "sc.json");
  return sim::run_scenario(s, {"analytic", {}, {}}).result;
}

// A Llama-shaped model of 4 layers on one DGX H100, TP 8, no PP, no recompute.
const std::string kOne = R"({"topology":{"preset":"dgx-h100"},
    "workload":{"generator":"gpt","params":{"num_layers":4,"hidden_size":4096,"num_attention_heads":32,
    "num_query_groups":8,"ffn_hidden_size":14336,"swiglu":true,"seq_length":4096,"padded_vocab_size":32000,
    "micro_batch_size":1,"global_batch_size":2,"tensor_model_parallel_size":8,"pipeline_model_parallel_size":1,
    "sequence_parallel":true,"recompute_granularity":"none")";
}  // namespace

TEST_CASE("gpt replay: activation offloading of all but the last layer exposes every copy; one layer hides") {
  const auto r0 = run_json(kOne + "}}}");
  const auto r1 = run_json(kOne + R"(,"cpu_offloading_num_layers":1}}})");
  const auto r3 = run_json(kOne + R"(,"cpu_offloading_num_layers":3}}})");
  ParamMap p = {{"num_layers", "4"}, {"hidden_size", "4096"}, {"num_attention_heads", "32"}, {"num_query_groups", "8"},
                {"ffn_hidden_size", "14336"}, {"swiglu", "true"}, {"seq_length", "4096"},
                {"padded_vocab_size", "32000"}, {"micro_batch_size", "1"}, {"global_batch_size", "2"},
                {"tensor_model_parallel_size", "8"}, {"pipeline_model_parallel_size", "1"}, {"world_size", "8"},
                {"sequence_parallel", "true"}, {"recompute_granularity", "none"}, {"gpu", "h100"},
                {"cpu_offloading_num_layers", "3"}};
  const double copy = gpt_detail::offload_copy_seconds(gpt_config_from_params(p, "t"));
  REQUIRE(copy > 0);
  // N = L - 1: layer i's copy out starts with layer i + 1's forward, which waits for it; its copy back starts
  // before its own backward: 6 exposed copies per micro-batch, 2 micro-batches.
  CHECK(r3.iteration_s - r0.iteration_s == doctest::Approx(12.0 * copy).epsilon(0.1));
  // N = 1: layer 0's copies have two layers' compute to hide behind.
  CHECK(r1.iteration_s - r0.iteration_s < 0.1 * 4.0 * copy);
  CHECK(r1.iteration_s >= r0.iteration_s);
}

TEST_CASE("gpt replay: fp8_param_gather shortens the exposed parameter all-gather; window_size the attention") {
  const std::string dp = R"({"topology":{"preset":"superpod","params":{"nodes":2,"node":"dgx-h100"}},
      "workload":{"generator":"gpt","params":{"model":"llama3-8b","num_layers":8,"pipeline_model_parallel_size":1,
      "tensor_model_parallel_size":2,"micro_batch_size":1,"global_batch_size":8,"sequence_parallel":true,
      "use_distributed_optimizer":true,"recompute_granularity":"none","precision":"fp8","fp8_recipe":"tensorwise")";
  const auto b = run_json(dp + "}}}");
  const auto f = run_json(dp + R"(,"fp8_param_gather":true}}})");
  REQUIRE(b.breakdown.exposed_comm_s.count("dp"));
  const double dp_b = b.breakdown.exposed_comm_s.at("dp"), dp_f = f.breakdown.exposed_comm_s.at("dp");
  CHECK(dp_f < dp_b);
  CHECK(f.iteration_s < b.iteration_s);
  // Sliding window 512 on a 4096-token sequence: less attention compute, the same model FLOPs.
  const auto w = run_json(kOne + R"x(,"window_size":"(512, 0)"}}})x");
  const auto r0 = run_json(kOne + "}}}");
  CHECK(w.breakdown.compute_s < r0.breakdown.compute_s);
  CHECK(w.iteration_s < r0.iteration_s);
  CHECK(w.tflops_per_gpu > r0.tflops_per_gpu);  // the same model FLOPs in less time
}
