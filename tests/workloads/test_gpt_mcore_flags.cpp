// Megatron-Core flags of 2025-2026 recipes that change memory and step time (docs/workloads.md): the
// precision-aware optimizer, FP8 parameters (fp8_param_gather). Memory deltas are computed by hand from the
// byte counts; refusals name the key.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <string>

#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/megatron_args.hpp"
#include "workloads/nemo_config.hpp"
#include "sim/base/input_file.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

// A small Llama-shaped model on two H100 nodes: TP 2, PP 2, DP 4, the distributed optimizer.
ParamMap small(ParamMap over = {}) {
  ParamMap p = workloads_test::small_llama(16, 16, {{"use_distributed_optimizer", "true"}});
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}

GptConfig cfg(const ParamMap& p) { return gpt_config_from_params(p, "--param"); }
GptMemory mem(const ParamMap& p) { return gpt_memory_per_gpu(cfg(p)); }

const Op& op_named(const Trace& t, const std::string& name) {
  for (const Op& op : t.ranks.at(0).ops)
    if (op.name == name) return op;
  FAIL("no op " << name);
  return t.ranks.at(0).ops.at(0);
}

// Bytes of rank 0's DP collectives whose name starts with `prefix` and contains `part`.
double dp_bytes(const Trace& t, const std::string& part) {
  double b = 0;
  for (const Op& op : t.ranks.at(0).ops)
    if (op.name.rfind("dp.bucket", 0) == 0 && op.name.find(part) != std::string::npos) b += op.bytes;
  return b;
}

ParamMap pao(ParamMap over) {
  over["use_precision_aware_optimizer"] = "true";
  return small(over);
}

}  // namespace

TEST_CASE("precision-aware optimizer: optimizer-state bytes per parameter as Transformer Engine's FusedAdam keeps them") {
  CHECK(cfg(small()).adam_state_bytes() == 12.0);
  // bf16 parameters: the fp32 master is kept as 16 remainder bits (store_param_remainders), moments fp32.
  CHECK(cfg(pao({})).adam_state_bytes() == 10.0);
  CHECK(cfg(pao({{"exp_avg_dtype", "bf16"}, {"exp_avg_sq_dtype", "bf16"}})).adam_state_bytes() == 6.0);
  CHECK(cfg(pao({{"exp_avg_dtype", "fp8"}, {"exp_avg_sq_dtype", "fp16"}})).adam_state_bytes() == 5.0);
  CHECK(cfg(pao({{"main_params_dtype", "fp16"}})).adam_state_bytes() == 10.0);
  // fp16 parameters: no remainders, a full fp32 master.
  CHECK(cfg(pao({{"precision", "fp16"}})).adam_state_bytes() == 12.0);
  // FP8 with a recipe other than delayed and fp32 main params: Megatron-Core keeps its own fp32 master.
  CHECK(cfg(pao({{"precision", "fp8"}, {"fp8_recipe", "tensorwise"}, {"exp_avg_dtype", "bf16"},
                 {"exp_avg_sq_dtype", "bf16"}})).adam_state_bytes() == 8.0);
  CHECK(cfg(pao({{"precision", "fp8"}, {"fp8_recipe", "delayed"}})).adam_state_bytes() == 10.0);
}

TEST_CASE("precision-aware optimizer: memory deltas by hand and the optimizer step's traffic") {
  const GptMemory base = mem(small()), half = mem(pao({{"exp_avg_dtype", "bf16"}, {"exp_avg_sq_dtype", "bf16"}}));
  REQUIRE(base.optimizer_bytes > 0);
  // Stage 0's parameters P over the shard group DP 4: 12 P / 4 -> 6 P / 4.
  const double P = base.optimizer_bytes * 4.0 / 12.0;
  CHECK(half.optimizer_bytes == doctest::Approx(6.0 * P / 4.0));
  CHECK(base.optimizer_bytes - half.optimizer_bytes == doctest::Approx(1.5 * P));
  CHECK(half.weights_bytes == base.weights_bytes);
  CHECK(half.grads_bytes == base.grads_bytes);
  // The optimizer step reads and writes the state: 8 + 2 x 12 = 32 bytes per parameter -> 8 + 2 x 6 = 20.
  const double d32 = op_named(workloads_test::gen(small()), "optimizer.step").duration_s;
  const double d20 =
      op_named(workloads_test::gen(pao({{"exp_avg_dtype", "bf16"}, {"exp_avg_sq_dtype", "bf16"}})), "optimizer.step")
          .duration_s;
  REQUIRE(d32 > 0);
  CHECK(d20 / d32 == doctest::Approx(20.0 / 32.0).epsilon(0.02));
}

TEST_CASE("precision-aware optimizer: bf16 main gradients halve the gradient buffer and the reduce-scatter bytes") {
  const ParamMap f32 = pao({}), b16 = pao({{"main_grads_dtype", "bf16"}});
  CHECK(cfg(f32).grad_reduce_in_fp32);
  CHECK_FALSE(cfg(b16).grad_reduce_in_fp32);
  CHECK(mem(f32).grads_bytes == doctest::Approx(2.0 * mem(b16).grads_bytes));
  const double rs32 = dp_bytes(workloads_test::gen(f32), ".rs"), rs16 = dp_bytes(workloads_test::gen(b16), ".rs");
  REQUIRE(rs16 > 0);
  CHECK(rs32 == doctest::Approx(2.0 * rs16));
}

TEST_CASE("precision-aware optimizer: invalid combinations are one error naming the key") {
  CHECK(error_of([] { cfg(small({{"use_distributed_optimizer", "false"}, {"use_precision_aware_optimizer", "true"}})); })
            .find("use_precision_aware_optimizer: needs use_distributed_optimizer") != std::string::npos);
  CHECK(error_of([] { cfg(small({{"exp_avg_dtype", "bf16"}})); }).find("exp_avg_dtype: 'bf16' needs use_precision_aware_optimizer") !=
        std::string::npos);
  CHECK(error_of([] { cfg(pao({{"exp_avg_sq_dtype", "int4"}})); }).find("exp_avg_sq_dtype: expected one of fp32, fp16, bf16, fp8") !=
        std::string::npos);
  CHECK(error_of([] { cfg(pao({{"main_params_dtype", "bf16"}})); }).find("main_params_dtype: expected one of fp32, fp16") !=
        std::string::npos);
  CHECK(error_of([] { cfg(pao({{"main_grads_dtype", "bf16"}, {"accumulate_allreduce_grads_in_fp32", "true"}})); })
            .find("main_grads_dtype: bf16 contradicts accumulate_allreduce_grads_in_fp32") != std::string::npos);
}

TEST_CASE("precision-aware optimizer: Megatron-LM's flags import as modelled") {
  const MegatronImport im = import_megatron_args(
      read_megatron_launch("torchrun pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16"
                           " --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --bf16"
                           " --tokenizer-type GPT2BPETokenizer --use-distributed-optimizer"
                           " --use-precision-aware-optimizer --main-grads-dtype bf16 --exp-avg-dtype bf16"
                           " --exp-avg-sq-dtype fp8 --main-params-dtype fp16",
                           "job.sh", {}),
      8, {});
  CHECK(im.not_modelled.empty());
  CHECK(im.params["use_precision_aware_optimizer"] == true);
  CHECK(im.params["exp_avg_sq_dtype"] == "fp8");
  ParamMap pm = params_from_json(im.params, JsonPath{"job.sh", "/workload/params"});
  pm["gpu"] = "h100";
  const GptConfig c = gpt_config_from_params(pm, "job.sh");
  CHECK(c.adam_state_bytes() == 2.0 + 2.0 + 1.0);
  CHECK_FALSE(c.grad_reduce_in_fp32);
}

TEST_CASE("fp8_param_gather: FP8 weights drop the bf16 copy and halve the layers' parameter all-gather bytes") {
  const ParamMap f8 = small({{"precision", "fp8"}, {"fp8_recipe", "tensorwise"}});
  ParamMap pg = f8;
  pg["fp8_param_gather"] = "true";
  const GptConfig c = cfg(pg);
  // Stage 0 holds 2 of the 4 layers (and the embedding, which stays bf16).
  const double Pl = gpt_detail::layer_params_per_rank(c), layers_el = 2.0 * Pl;
  const GptMemory m0 = mem(f8), m1 = mem(pg);
  CHECK(m0.weights_bytes - m1.weights_bytes == doctest::Approx(2.0 * layers_el));
  CHECK(m1.optimizer_bytes == m0.optimizer_bytes);
  // The distributed optimizer's all-gathers at the step's end: 2 bytes per element -> 1 for the layers' weights.
  const Trace t0 = workloads_test::gen(f8), t1 = workloads_test::gen(pg);
  const double ag0 = dp_bytes(t0, ".ag"), ag1 = dp_bytes(t1, ".ag");
  REQUIRE(ag1 > 0);
  CHECK(ag0 - ag1 == doctest::Approx(layers_el));
  CHECK(ag1 == doctest::Approx(2.0 * gpt_detail::embedding_params_per_rank(c) + layers_el));
  // The same with overlap_param_gather (the gathers issued at the step's start).
  ParamMap f8o = f8, pgo = pg;
  f8o["overlap_param_gather"] = pgo["overlap_param_gather"] = "true";
  CHECK(dp_bytes(workloads_test::gen(f8o), ".ag") - dp_bytes(workloads_test::gen(pgo), ".ag") ==
        doctest::Approx(layers_el));
  // After the optimizer step: the shard's quantisation and one fp32 amax per TE linear (4 per layer) all-reduced.
  CHECK(op_named(t1, "fp8_param_gather.cast").duration_s > 0);
  CHECK(op_named(t1, "fp8_param_gather.amax.ar").bytes == 4.0 * 4.0 * 2.0);
  for (const Op& op : t0.ranks.at(0).ops) CHECK(op.name.rfind("fp8_param_gather", 0) != 0);
}

TEST_CASE("fp8_param_gather: MXFP8 gathers its block scales too; invalid combinations name the key") {
  const ParamMap mx = small({{"gpu", "b200"}, {"precision", "fp8"}, {"fp8_recipe", "mxfp8"}, {"fp8_param_gather", "true"}});
  ParamMap bf = mx;
  bf.erase("fp8_param_gather");
  const GptConfig c = cfg(mx);
  const double layers_el = 2.0 * gpt_detail::layer_params_per_rank(c);
  CHECK(dp_bytes(workloads_test::gen(bf), ".ag") - dp_bytes(workloads_test::gen(mx), ".ag") ==
        doctest::Approx((2.0 - (1.0 + 1.0 / 32.0)) * layers_el));
  CHECK(error_of([] { cfg(small({{"fp8_param_gather", "true"}})); }).find("fp8_param_gather: needs precision fp8") !=
        std::string::npos);
  CHECK(error_of([] {
          cfg(small({{"precision", "fp8"}, {"fp8_param_gather", "true"}, {"use_distributed_optimizer", "false"}}));
        }).find("fp8_param_gather: needs use_distributed_optimizer") != std::string::npos);
  CHECK(error_of([] {
          cfg(small({{"precision", "fp8"}, {"fp8_recipe", "rowwise"}, {"fp8_param_gather", "true"}}));
        }).find("fp8_param_gather: is Transformer Engine's") != std::string::npos);
}

namespace {
// One DGX H100-sized job without pipeline parallelism (activation offloading refuses PP and recompute).
ParamMap flat(ParamMap over = {}) {
  ParamMap p = small({{"pipeline_model_parallel_size", "1"}, {"world_size", "8"}, {"global_batch_size", "8"}});
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}
}  // namespace

TEST_CASE("cpu_offloading_num_layers: the offloaded layers' activations leave HBM and cross the host link") {
  const GptConfig c0 = cfg(flat()), c2 = cfg(flat({{"cpu_offloading_num_layers", "2"}}));
  // One layer's saved activations (one micro-batch: no PP) over the H100's PCIe Gen5 pinned-copy rate.
  const double layer_bytes = gpt_detail::offload_copy_seconds(c2) * gpt_detail::host_copy_Bps("h100");
  REQUIRE(layer_bytes > 0);
  CHECK(gpt_detail::host_copy_Bps("h100") == doctest::Approx(64e9 * 26.28 / 32.0));
  CHECK(gpt_detail::host_copy_Bps("gb200") == doctest::Approx(450e9 * 26.28 / 32.0));
  const GptMemory m0 = gpt_memory_per_gpu(c0), m2 = gpt_memory_per_gpu(c2);
  CHECK(m0.activations_bytes - m2.activations_bytes == doctest::Approx(2.0 * layer_bytes));
  // Each micro-batch copies layers 0 and 1 out and back on the offload stream.
  const Trace t = workloads_test::gen(flat({{"cpu_offloading_num_layers", "2"}}));
  const auto& ops = t.ranks.at(0).ops;
  int d2h = 0, h2d = 0;
  for (const Op& op : ops) {
    if (op.category != "offload") continue;
    CHECK(op.duration_s == doctest::Approx(layer_bytes / gpt_detail::host_copy_Bps("h100")).epsilon(1e-6));
    d2h += op.name.find(".offload.d2h") != std::string::npos;
    h2d += op.name.find(".offload.h2d") != std::string::npos;
  }
  const int mbs = 8 / 4;  // global batch 8 over DP 4
  CHECK(d2h == 2 * mbs);
  CHECK(h2d == 2 * mbs);
  // Layer 0's copy out must be done before layer 2's forward (L - N + 0), its copy back before its backward.
  const Op& out0 = op_named(t, "mb0.l0.offload.d2h");
  const auto idx = [&](const std::string& n) { return std::uint32_t(&op_named(t, n) - &ops[0]); };
  bool fwd_waits = false, bwd_waits = false;
  for (const Op& op : ops) {
    if (op.name.rfind("mb0.l2.", 0) == 0 && op.name.find("bwd") == std::string::npos)
      for (auto d : op.deps) fwd_waits = fwd_waits || d == idx("mb0.l0.offload.d2h");
    if (op.name.rfind("mb0.l0.", 0) == 0 && op.name.find("bwd") != std::string::npos)
      for (auto d : op.deps) bwd_waits = bwd_waits || d == idx("mb0.l0.offload.h2d");
  }
  CHECK(out0.stream == op_named(t, "mb0.l0.offload.h2d").stream);
  CHECK(fwd_waits);
  CHECK(bwd_waits);
  // Refusals, as Megatron-Core's TransformerConfig checks.
  CHECK(error_of([] { cfg(flat({{"cpu_offloading_num_layers", "4"}})); }).find("cpu_offloading_num_layers: must be less than num_layers") !=
        std::string::npos);
  CHECK(error_of([] { cfg(small({{"cpu_offloading_num_layers", "1"}})); }).find("cpu_offloading_num_layers: needs pipeline_model_parallel_size 1") !=
        std::string::npos);
  CHECK(error_of([] { cfg(flat({{"cpu_offloading_num_layers", "1"}, {"recompute_granularity", "selective"}})); })
            .find("cpu_offloading_num_layers: needs recompute_granularity none") != std::string::npos);
}

TEST_CASE("window_size: attention FLOPs and time over the causal band; Megatron's FLOP count keeps full attention") {
  const ParamMap full = flat({{"seq_length", "4096"}});
  ParamMap win = full;
  win["window_size"] = "(512, 0)";
  ParamMap half = win;
  half["window_attn_skip_freq"] = "2";
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec("h100");
  const GptConfig cf = cfg(full), cw = cfg(win), ch = cfg(half);
  const auto kf = gpt_detail::gpt_step_kernels(cf, cm, "t"), kw = gpt_detail::gpt_step_kernels(cw, cm, "t"),
             kh = gpt_detail::gpt_step_kernels(ch, cm, "t");
  // Per query 512 - 512^2 / (2 x 4096) = 480 keys instead of 4096 / 2 = 2048: forward FLOPs
  // 4 b (a / t) s d x keys, a / t = 8 heads of d 64 on this rank.
  const double per_key = 4.0 * 1.0 * 8.0 * 4096.0 * 64.0;
  CHECK(kf.layer.fwd_attn.flops - kw.layer.fwd_attn.flops == doctest::Approx(per_key * (2048.0 - 480.0)));
  CHECK(kf.layer.bwd_attn.flops - kw.layer.bwd_attn.flops == doctest::Approx(2.5 * per_key * (2048.0 - 480.0)));
  CHECK(kw.layer.fwd_attn.seconds < kf.layer.fwd_attn.seconds);
  // window_attn_skip_freq 2: layers 2 and 4 (1-based) keep full attention, half the saving.
  CHECK(cw.window_layers() == std::vector<bool>{true, true, true, true});
  CHECK(ch.window_layers() == std::vector<bool>{true, false, true, false});
  CHECK(kf.layer.fwd_attn.flops - kh.layer.fwd_attn.flops == doctest::Approx(0.5 * per_key * (2048.0 - 480.0)));
  ParamMap pat = win;
  pat["window_attn_skip_freq"] = "[1,1,1,0]";
  CHECK(cfg(pat).window_layers() == std::vector<bool>{true, true, true, false});
  CHECK(gpt_model_flops(cw) == gpt_model_flops(cf));
  // A window as long as the sequence is full causal attention.
  ParamMap wide = full;
  wide["window_size"] = "4096,0";
  CHECK(gpt_detail::gpt_step_kernels(cfg(wide), cm, "t").layer.fwd_attn.flops == kf.layer.fwd_attn.flops);
  CHECK(error_of([&] { ParamMap p = full; p["window_size"] = "(512, 8)"; cfg(p); }).find("window_size: the right window") !=
        std::string::npos);
  CHECK(error_of([&] { ParamMap p = full; p["window_size"] = "512"; cfg(p); }).find("window_size: expected") != std::string::npos);
  CHECK(error_of([&] { ParamMap p = full; p["window_attn_skip_freq"] = "2"; cfg(p); }).find("window_attn_skip_freq: needs window_size") !=
        std::string::npos);
  CHECK(error_of([&] { ParamMap p = win; p["window_attn_skip_freq"] = "[1,1]"; cfg(p); }).find("window_attn_skip_freq") !=
        std::string::npos);
  CHECK(error_of([&] { ParamMap p = win; p["attention_backend"] = "unfused"; cfg(p); }).find("window_size: needs flash or fused") !=
        std::string::npos);
}

TEST_CASE("cpu_offloading_num_layers: NeMo's cpu_offloading gates its cpu_offloading_num_layers") {
  const std::string path = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nemo-configs/megatron_gpt_config.yaml";
  std::string text = read_input_file(path);
  const Json off = scenario_for_nemo(path, text, "dgx-h100", {}, false);
  CHECK_FALSE(off["workload"]["params"].contains("cpu_offloading_num_layers"));
  const auto at = text.find("cpu_offloading: False");
  REQUIRE(at != std::string::npos);
  text.replace(at, std::string("cpu_offloading: False").size(), "cpu_offloading: True");
  const auto n = text.find("cpu_offloading_num_layers: ");
  text.replace(n, text.find('\n', n) - n, "cpu_offloading_num_layers: 3");
  const Json on = scenario_for_nemo(path, text, "dgx-h100", {}, false);
  CHECK(on["workload"]["params"]["cpu_offloading_num_layers"] == 3);
}
