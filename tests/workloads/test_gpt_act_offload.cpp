// Megatron-Core's fine-grained activation offloading (docs/workloads.md, fine_grained_activation_offloading):
// the offloaded modules' bytes leave the activation term (by hand from the per-token widths), the refusals
// Megatron-Core makes, the copies in the trace, and the Megatron-LM importer's mapping.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <string>

#include "workloads/gpt.hpp"
#include "workloads/megatron_args.hpp"
#include "sim/base/error.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

// A small MoE model without pipeline parallelism: 8 layers, h 1024, 8 experts of 512 (SwiGLU), top-2, EP 8 on
// one H100 node, bf16, seq 2048, MBS 1, forced balance (uniform load).
ParamMap moe(ParamMap over = {}) {
  ParamMap p = workloads_test::small_llama(8, 8, {{"num_layers", "8"}, {"tensor_model_parallel_size", "1"},
                                                  {"pipeline_model_parallel_size", "1"}, {"swiglu", "true"},
                                                  {"num_experts", "8"}, {"moe_router_topk", "2"},
                                                  {"moe_ffn_hidden_size", "512"}, {"expert_model_parallel_size", "8"},
                                                  {"sequence_parallel", "false"}});
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}

GptConfig cfg(const ParamMap& p) { return gpt_config_from_params(p, "--param"); }
GptMemory mem(const ParamMap& p) { return gpt_memory_per_gpu(cfg(p)); }

std::string refusal(const ParamMap& p) { return ::error_of([&] { cfg(p); }); }

// Per layer and micro-batch, by hand: expert_fc1 saves the permuted tokens (top-2 x 2048 tokens x h 1024, bf16)
// and moe_act the fc1 output (top-2 x 2048 x 2 x 512, bf16).
const double kTokens = 2048, kFc1In = 2.0 * kTokens * 2 * 1024, kActIn = 2.0 * kTokens * 2 * 2 * 512;

}  // namespace

TEST_CASE("fine-grained activation offloading: memory drops by the offloaded layers' bytes, by hand") {
  const ParamMap on = moe({{"fine_grained_activation_offloading", "true"}, {"offload_modules", "expert_fc1 moe_act"}});
  const GptMemory base = mem(moe()), off = mem(on);
  // Without PP one micro-batch is in flight: of its 8 layers, 2 are back in HBM during its backward (the running
  // layer's reload and the prefetched one) and 1 is kept by post_warmup_callback: 5 layers' bytes are on the host.
  const double layer = kFc1In + kActIn;
  CHECK(off.activations_offloaded_bytes == doctest::Approx(5.0 * layer));
  CHECK(base.activations_bytes - off.activations_bytes == doctest::Approx(5.0 * layer));
  CHECK(base.activations_offloaded_bytes == 0.0);
  CHECK(off.weights_bytes == base.weights_bytes);
  // Only expert_fc1: its share alone.
  const GptMemory fc1 = mem(moe({{"fine_grained_activation_offloading", "true"}, {"offload_modules", "expert_fc1"}}));
  CHECK(base.activations_bytes - fc1.activations_bytes == doctest::Approx(5.0 * kFc1In));
  // activation_offload_fraction 0.5 keeps the chunk's later 4 layers: 4 offloaded, 2 back, 1 kept -> 1 layer.
  const GptMemory half = mem(moe({{"fine_grained_activation_offloading", "true"}, {"offload_modules", "expert_fc1 moe_act"},
                                  {"activation_offload_fraction", "0.5"}}));
  CHECK(base.activations_bytes - half.activations_bytes == doctest::Approx(1.0 * layer));
  // Tensors under min_offloaded_tensor_size elements stay: the permuted input has 4.2 M elements.
  const GptMemory big = mem(moe({{"fine_grained_activation_offloading", "true"}, {"offload_modules", "expert_fc1"},
                                 {"min_offloaded_tensor_size", "5000000"}}));
  CHECK(big.activations_bytes == base.activations_bytes);
  // delta_offload_bytes_across_pp_ranks keeps nothing more on pipeline rank 0 (r x delta = 0).
  const GptMemory delta = mem(moe({{"fine_grained_activation_offloading", "true"}, {"offload_modules", "expert_fc1 moe_act"},
                                   {"delta_offload_bytes_across_pp_ranks", "1000000000"}}));
  CHECK(delta.activations_bytes == off.activations_bytes);
}

TEST_CASE("fine-grained activation offloading: with pipeline parallelism every in-flight micro-batch offloads") {
  ParamMap pp = moe({{"pipeline_model_parallel_size", "2"}, {"world_size", "16"}, {"global_batch_size", "16"}});
  ParamMap pp_on = pp;
  pp_on["fine_grained_activation_offloading"] = "true";
  pp_on["offload_modules"] = "expert_fc1 moe_act";
  const GptMemory a = gpt_memory_of_stage(cfg(pp), 0), b = gpt_memory_of_stage(cfg(pp_on), 0);
  // Stage 0 of 2 (1F1B): 2 micro-batches of 4 layers in flight, one in its backward (2 layers back), 1 kept.
  CHECK(a.activations_bytes - b.activations_bytes == doctest::Approx((4.0 + 4.0 - 2.0 - 1.0) * (kFc1In + kActIn)));
  // Pipeline rank 1 keeps 1 x delta bytes on the GPU.
  pp_on["delta_offload_bytes_across_pp_ranks"] = std::to_string(static_cast<long long>(kFc1In));
  const GptMemory c1 = gpt_memory_of_stage(cfg(pp_on), 1);
  pp_on.erase("delta_offload_bytes_across_pp_ranks");
  const GptMemory c0 = gpt_memory_of_stage(cfg(pp_on), 1);
  CHECK(c1.activations_bytes - c0.activations_bytes == doctest::Approx(kFc1In));
}

TEST_CASE("fine-grained activation offloading: Megatron-Core's refusals, naming the key") {
  auto on = [](ParamMap over) {
    over["fine_grained_activation_offloading"] = "true";
    if (!over.count("offload_modules")) over["offload_modules"] = "expert_fc1";
    return moe(over);
  };
  CHECK(refusal(on({})).empty());
  CHECK(refusal(on({{"offload_modules", ""}})).find("offload_modules") != std::string::npos);
  CHECK(refusal(on({{"offload_modules", "mlp"}})).find("got 'mlp'") != std::string::npos);
  CHECK(refusal(on({{"offload_modules", "attn_proj"}})).find("without core_attn") != std::string::npos);
  CHECK(refusal(on({{"offload_modules", "core_attn attn_proj"}})).empty());
  CHECK(refusal(on({{"recompute_granularity", "selective"}, {"recompute_modules", "moe"}})).find("entire MoE layer") !=
        std::string::npos);
  CHECK(refusal(on({{"recompute_granularity", "selective"}, {"recompute_modules", "moe_act layernorm"}})).empty());
  CHECK(refusal(on({{"activation_offload_fraction", "1.5"}})).find("[0, 1]") != std::string::npos);
  CHECK(refusal(on({{"cpu_offloading_num_layers", "1"}})).find("cpu_offloading_num_layers") != std::string::npos);
  CHECK(refusal(on({{"offload_modules", "fused_group_mlp"}})).find("fused_group_mlp") != std::string::npos);
  CHECK(refusal(on({{"recompute_granularity", "full"}})).find("full") != std::string::npos);
  // The module settings without the switch.
  CHECK(refusal(moe({{"offload_modules", "expert_fc1"}})).find("need fine_grained_activation_offloading") != std::string::npos);
  // expert_fc1 on a dense model.
  ParamMap dense = workloads_test::small_llama(16, 16, {{"fine_grained_activation_offloading", "true"},
                                                        {"offload_modules", "expert_fc1"}});
  CHECK(refusal(dense).find("needs num_experts") != std::string::npos);
}

TEST_CASE("fine-grained activation offloading: each offloaded layer's copy out and back in the trace") {
  const ParamMap p = moe({{"fine_grained_activation_offloading", "true"}, {"offload_modules", "expert_fc1 moe_act"},
                          {"activation_offload_fraction", "0.5"}});
  const Trace t = workloads_test::gen(p);
  const auto& ops = t.ranks.at(0).ops;
  int d2h = 0, h2d = 0;
  double copy_s = 0;
  for (const Op& op : ops) {
    if (op.category != "offload") continue;
    d2h += op.name.find(".offload.d2h") != std::string::npos;
    h2d += op.name.find(".offload.h2d") != std::string::npos;
    copy_s = op.duration_s;
  }
  // 1 micro-batch per rank (GBS 8 over DP 8), the chunk's first 4 of 8 layers offloaded: 4 out, 4 back.
  CHECK(d2h == 4);
  CHECK(h2d == 4);
  // Each copy: the layer's bytes at the H100's host link (PCIe Gen5 x16, 64 GB/s x 26.28 / 32).
  CHECK(copy_s == doctest::Approx((kFc1In + kActIn) / (64e9 * 26.28 / 32.0)).epsilon(1e-6));
  CHECK(t.metadata.at("memory_per_gpu_bytes.activations_offloaded") > 0);
  // The reload of layer 0 depends on its copy out; layer 0's backward waits for the reload.
  auto idx = [&](const std::string& n) {
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (ops[i].name == n) return static_cast<std::uint32_t>(i);
    FAIL("no op " << n);
    return 0u;
  };
  const std::uint32_t out0 = idx("mb0.l0.offload.d2h"), back0 = idx("mb0.l0.offload.h2d");
  bool reload_waits = false;
  for (auto d : ops[back0].deps) reload_waits = reload_waits || d == out0;
  CHECK(reload_waits);
  CHECK(ops[out0].stream != ops[back0].stream);
  CHECK(ops[out0].stream != 0);
  bool bwd_waits = false;
  for (const Op& op : ops)
    if (op.name.rfind("mb0.l0.", 0) == 0 && op.name.find("bwd") != std::string::npos)
      for (auto d : op.deps) bwd_waits = bwd_waits || d == back0;
  CHECK(bwd_waits);
  // Off: no copy stream, no copies.
  const Trace t0 = workloads_test::gen(moe());
  for (const Op& op : t0.ranks.at(0).ops) CHECK(op.category != "offload");
  CHECK(t0.ranks.at(0).streams.size() + 2 == t.ranks.at(0).streams.size());
}

TEST_CASE("megatron import: fine-grained activation offloading flags map to the generator's parameters") {
  const std::string text =
      "torchrun pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024"
      " --max-position-embeddings 1024 --micro-batch-size 1 --bf16 --tokenizer-type GPT2BPETokenizer"
      " --num-experts 8 --expert-model-parallel-size 8 --moe-grouped-gemm"
      " --fine-grained-activation-offloading --offload-modules expert_fc1 moe_act --activation-offload-fraction 0.5"
      " --min-offloaded-tensor-size 1000 --fine-grained-offloading-max-inflight-offloads 2"
      " --delta-offload-bytes-across-pp-ranks 4096 --delay-offload-until-cuda-graph";
  const MegatronImport im = import_megatron_args(read_megatron_launch(text, "job.sh", {}), 8, {});
  const Json& p = im.params;
  CHECK(p["fine_grained_activation_offloading"] == true);
  CHECK(p["offload_modules"] == "expert_fc1 moe_act");
  CHECK(p["activation_offload_fraction"] == 0.5);
  CHECK(p["min_offloaded_tensor_size"] == 1000);
  CHECK(p["fine_grained_offloading_max_inflight_offloads"] == 2);
  CHECK(p["delta_offload_bytes_across_pp_ranks"] == 4096);
  CHECK(im.not_modelled.empty());
  // The CUDA-graph timing switch leaves the step alone (CUDA graphs are not modelled).
  CHECK_FALSE(p.contains("delay_offload_until_cuda_graph"));
  ParamMap pm = params_from_json(p, JsonPath{"job.sh", "/workload/params"});
  pm["gpu"] = "h100";
  const GptConfig c = gpt_config_from_params(pm, "job.sh");
  CHECK(c.offloads("expert_fc1"));
  CHECK(c.offloads("moe_act"));
  CHECK_FALSE(c.offloads("core_attn"));
  CHECK(c.fine_grained_offloading_max_inflight_offloads == 2);
}
