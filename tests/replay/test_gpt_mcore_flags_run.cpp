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

TEST_CASE("gpt replay: fine-grained activation offloading hides behind compute unless the copies are capped or the layer is small") {
  const std::string mods = R"(,"fine_grained_activation_offloading":true,
      "offload_modules":"attn_norm qkv_linear core_attn attn_proj mlp_norm")";
  const auto r0 = run_json(kOne + "}}}");
  const auto r_off = run_json(kOne + mods + "}}}");
  const auto r_cap = run_json(kOne + mods + R"(,"fine_grained_offloading_max_inflight_offloads":0}}})");
  ParamMap p = {{"num_layers", "4"}, {"hidden_size", "4096"}, {"num_attention_heads", "32"}, {"num_query_groups", "8"},
                {"ffn_hidden_size", "14336"}, {"swiglu", "true"}, {"seq_length", "4096"},
                {"padded_vocab_size", "32000"}, {"micro_batch_size", "1"}, {"global_batch_size", "2"},
                {"tensor_model_parallel_size", "8"}, {"pipeline_model_parallel_size", "1"}, {"world_size", "8"},
                {"sequence_parallel", "true"}, {"recompute_granularity", "none"}, {"gpu", "h100"},
                {"fine_grained_activation_offloading", "true"},
                {"offload_modules", "attn_norm qkv_linear core_attn attn_proj mlp_norm"}};
  const GptConfig c = gpt_config_from_params(p, "t");
  const double copy = gpt_detail::layer_offload_bytes(c, false, 1.0) / gpt_detail::host_copy_Bps("h100");
  REQUIRE(copy > 0);
  MESSAGE("copy " << copy * 1e3 << " ms; step " << r0.iteration_s * 1e3 << " -> " << r_off.iteration_s * 1e3
          << " ms, capped " << r_cap.iteration_s * 1e3 << " ms");
  // Uncapped, a layer's reload runs under the next layer's backward: at most a small part of the copies shows.
  CHECK(r_off.iteration_s >= r0.iteration_s);
  CHECK(r_off.iteration_s - r0.iteration_s < 0.25 * 16.0 * copy);
  // max_inflight_offloads 0: every copy out (4 layers x 2 micro-batches) stops the compute stream from the
  // layer's last compute kernel on; the layer's closing sequence-parallel reduce-scatter (comm.tp) runs beside
  // it, so part of each copy hides (measured 0.77 of the 8 copies).
  const double capped = r_cap.iteration_s - r_off.iteration_s;
  CHECK(capped > 0.6 * 8.0 * copy);
  CHECK(capped <= 8.0 * copy * (1.0 + 1e-9));
  // A small layer (h 512, 8 heads, TP 1, 8 x 1024 tokens; threshold 0): one layer's backward is shorter than the
  // next layer's reload, which the compute stream then waits for.
  const std::string tiny = R"({"topology":{"preset":"dgx-h100"},
    "workload":{"generator":"gpt","params":{"num_layers":4,"hidden_size":512,"num_attention_heads":8,
    "ffn_hidden_size":1536,"swiglu":true,"seq_length":1024,"padded_vocab_size":32000,
    "micro_batch_size":8,"global_batch_size":128,"tensor_model_parallel_size":1,"pipeline_model_parallel_size":1,
    "recompute_granularity":"none")";
  const auto t0 = run_json(tiny + "}}}");
  const auto t_off = run_json(tiny + mods + R"(,"min_offloaded_tensor_size":0}}})");
  p["hidden_size"] = "512", p["num_attention_heads"] = "8", p["num_query_groups"] = "8", p["ffn_hidden_size"] = "1536";
  p["seq_length"] = "1024", p["micro_batch_size"] = "8", p["global_batch_size"] = "128";
  p["tensor_model_parallel_size"] = "1";
  p["sequence_parallel"] = "false";
  p["min_offloaded_tensor_size"] = "0";
  const double tiny_copy = gpt_detail::layer_offload_bytes(gpt_config_from_params(p, "t"), false, 1.0) /
                           gpt_detail::host_copy_Bps("h100");
  MESSAGE("tiny: copy " << tiny_copy * 1e3 << " ms; step " << t0.iteration_s * 1e3 << " -> " << t_off.iteration_s * 1e3 << " ms");
  // Layers 2, 1, 0 of each micro-batch wait for their reloads (layer 3's starts before the logits' backward), each
  // by less than a whole copy (the previous layer's backward ran beside it).
  CHECK(t_off.iteration_s - t0.iteration_s > 0.0);
  CHECK(t_off.iteration_s - t0.iteration_s < 6.0 * tiny_copy);
}
