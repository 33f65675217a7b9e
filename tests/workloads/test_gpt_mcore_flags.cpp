// Megatron-Core flags of 2025-2026 recipes that change memory and step time (docs/workloads.md): the
// precision-aware optimizer, FP8 parameters (fp8_param_gather). Memory deltas are computed by hand from the
// byte counts; refusals name the key.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <set>
#include <string>
#include <vector>

#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/gpt_models.hpp"
#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "workloads/megatron_args.hpp"
#include "workloads/nemo_config.hpp"
#include "workloads/torchtitan_config.hpp"
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

using workloads_test::import_small;
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

namespace {
// Summed durations of rank 0's compute ops of layer 0, micro-batch 0, whose names start with `prefix`
// (`mb0.l0.fwd`, `mb0.l0.bwd`).
double block_s(const Trace& t, const std::string& prefix) {
  double s = 0;
  for (const Op& op : t.ranks.at(0).ops)
    if (op.name.rfind(prefix, 0) == 0 && op.category == "compute") s += op.duration_s;
  return s;
}
double norm_kernel_s(const models::ComputeModel& cm, double bytes) {
  return cm.kernel_time_s(models::KernelDesc::memory(models::MemoryKernel::Norm, bytes, models::Precision::FP16));
}
std::string notes_of(const Json& scenario) {
  std::string s;
  for (const auto& n : scenario["workload"]["notes"]) s += n.get<std::string>() + "\n";
  return s;
}
}  // namespace

TEST_CASE("qk_layernorm: per-head norms of Q and K -- two kernels each way, their saved inputs, 2 x kv_channels weights") {
  // flat(): TP 2, PP 1, h 1024, 16 heads of 64 (MHA), seq 2048, micro-batch 1, 4 layers, fp16.
  const ParamMap off = flat({{"normalization", "RMSNorm"}}), on = flat({{"normalization", "RMSNorm"}, {"qk_layernorm", "true"}});
  const double T = 2048, d = 64, heads_t = 16.0 / 2;  // a / t = g / t = 8
  // Parameters: an RMSNorm weight of kv_channels for Q and one for K per layer (replicated over TP); LayerNorm
  // adds the biases.
  CHECK(gpt_num_parameters(cfg(on)) - gpt_num_parameters(cfg(off)) == doctest::Approx(4 * 2 * d));
  CHECK(gpt_num_parameters(cfg(flat({{"qk_layernorm", "true"}}))) - gpt_num_parameters(cfg(flat())) ==
        doctest::Approx(4 * 4 * d));
  // Activations: per token and layer the norms' inputs (Q and K heads of this rank, 2 bytes) and one fp32
  // rsigma per head; one micro-batch in flight without PP.
  CHECK(mem(on).activations_bytes - mem(off).activations_bytes == doctest::Approx(4 * T * 2 * heads_t * (2 * d + 4)));
  // Time: one norm kernel over Q and one over K in the forward (read + write), twice the bytes backward.
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec("h100");
  const double el = T * heads_t * d;
  const Trace t0 = workloads_test::gen(off), t1 = workloads_test::gen(on);
  CHECK(block_s(t1, "mb0.l0.fwd") - block_s(t0, "mb0.l0.fwd") == doctest::Approx(2 * norm_kernel_s(cm, 4 * el)).epsilon(1e-3));
  CHECK(block_s(t1, "mb0.l0.bwd") - block_s(t0, "mb0.l0.bwd") == doctest::Approx(2 * norm_kernel_s(cm, 8 * el)).epsilon(1e-3));
  // Megatron-Core's FLOP count has no norms.
  CHECK(gpt_model_flops(cfg(on)) == gpt_model_flops(cfg(off)));
}

TEST_CASE("add_qkv_bias: the QKV projection's bias on a bias-free model; no kernel (GEMM epilogue)") {
  const ParamMap off = flat({{"normalization", "RMSNorm"}}), on = flat({{"normalization", "RMSNorm"}, {"add_qkv_bias", "true"}});
  // (a + 2g) d = 48 x 64 per layer, 4 layers.
  CHECK(gpt_num_parameters(cfg(on)) - gpt_num_parameters(cfg(off)) == doctest::Approx(4 * 48 * 64));
  // Per GPU (TP 2 splits the bias with the QKV output): weights 2 bytes, fp32 main gradient 4, Adam state 12.
  const GptMemory m0 = mem(off), m1 = mem(on);
  const double per_gpu = 4 * 48 * 64 / 2.0;
  CHECK(m1.weights_bytes - m0.weights_bytes == doctest::Approx(2 * per_gpu));
  CHECK(m1.params_bytes() - m0.params_bytes() > 2 * per_gpu);
  CHECK(block_s(workloads_test::gen(on), "mb0.l0.fwd") == block_s(workloads_test::gen(off), "mb0.l0.fwd"));
  // A model with linear biases (LayerNorm) has the QKV bias already.
  CHECK(gpt_num_parameters(cfg(flat({{"add_qkv_bias", "true"}}))) == gpt_num_parameters(cfg(flat())));
}

TEST_CASE("squared_relu: the non-gated MLP's activation, as GELU's kernel; fc1's bias added apart; refused with swiglu") {
  const ParamMap rms = flat({{"normalization", "RMSNorm"}});
  ParamMap sq = rms;
  sq["squared_relu"] = "true";
  // Two MLP GEMMs, one activation kernel of GELU's bytes: the same step and parameters.
  CHECK(block_s(workloads_test::gen(sq), "mb0.l0.fwd") == block_s(workloads_test::gen(rms), "mb0.l0.fwd"));
  CHECK(gpt_num_parameters(cfg(sq)) == gpt_num_parameters(cfg(rms)));
  // With linear biases: fc1's bias added by its own kernel (read + write T f / t elements), its gradient a
  // reduction (read once).
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec("h100");
  const double el = 2048.0 * 2816 / 2;
  auto elementwise = [&](double bytes) {
    return cm.kernel_time_s(models::KernelDesc::memory(models::MemoryKernel::Elementwise, bytes, models::Precision::FP16));
  };
  const Trace g = workloads_test::gen(flat()), s = workloads_test::gen(flat({{"squared_relu", "true"}}));
  CHECK(block_s(s, "mb0.l0.fwd") - block_s(g, "mb0.l0.fwd") == doctest::Approx(elementwise(4 * el)).epsilon(1e-3));
  CHECK(block_s(s, "mb0.l0.bwd") - block_s(g, "mb0.l0.bwd") == doctest::Approx(elementwise(2 * el)).epsilon(1e-3));
  CHECK(error_of([] { cfg(flat({{"squared_relu", "true"}, {"swiglu", "true"}})); })
            .find("squared_relu: is the activation of the non-gated MLP") != std::string::npos);
}

TEST_CASE("qk_layernorm, add_qkv_bias, squared_relu: Megatron-LM's and NeMo's settings import as modelled") {
  const MegatronImport im = import_megatron_args(
      read_megatron_launch("torchrun pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16"
                           " --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --bf16"
                           " --tokenizer-type GPT2BPETokenizer --normalization RMSNorm --disable-bias-linear"
                           " --qk-layernorm --add-qkv-bias --squared-relu",
                           "job.sh", {}),
      8, {});
  CHECK(im.not_modelled.empty());
  CHECK(im.params["qk_layernorm"] == true);
  CHECK(im.params["add_qkv_bias"] == true);
  CHECK(im.params["squared_relu"] == true);
  const std::string path = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nemo-configs/megatron_gpt_config.yaml";
  std::string text = read_input_file(path);
  const auto at = text.find("activation: 'gelu'");
  REQUIRE(at != std::string::npos);
  text.replace(at, std::string("activation: 'gelu'").size(), "activation: 'squared-relu'");
  const Json sc = scenario_for_nemo(path, text, "dgx-h100", {}, false);
  CHECK(sc["workload"]["params"]["squared_relu"] == true);
  CHECK(notes_of(sc).find("squared") == std::string::npos);
}

TEST_CASE("catalogue: Qwen3 models have qk_layernorm, Qwen2-57B-A14B the QKV bias") {
  for (const char* m : {"qwen3-30b-a3b", "qwen3-235b-a22b"}) {
    CHECK(find_gpt_model(m)->qk_layernorm);
    CHECK_FALSE(find_gpt_model(m)->add_qkv_bias);
  }
  CHECK(find_gpt_model("qwen2-57b-a14b")->add_qkv_bias);
  CHECK_FALSE(find_gpt_model("qwen2-57b-a14b")->qk_layernorm);
  CHECK_FALSE(find_gpt_model("llama3-70b")->qk_layernorm);
  // The catalogue's settings reach the config, and an explicit parameter overrides them.
  ParamMap p = {{"model", "qwen3-30b-a3b"}, {"gpu", "h100"}, {"world_size", "64"}, {"global_batch_size", "64"},
                {"tensor_model_parallel_size", "1"}, {"pipeline_model_parallel_size", "1"},
                {"expert_model_parallel_size", "8"}};
  CHECK(cfg(p).qk_layernorm);
  p["qk_layernorm"] = "false";
  CHECK_FALSE(cfg(p).qk_layernorm);
}

TEST_CASE("use_tp_pp_dp_mapping: pipeline before data -- PP sends stay in the server, DP collectives cross servers") {
  // 16 GPUs on two 8-GPU servers: TP 2, PP 2, DP 4. Megatron's default order puts stage 0 on server 0 and stage
  // 1 on server 1 (the pipeline crosses the network, DP stays on NVLink); tp-cp-ep-pp-dp puts each DP replica's
  // two stages on 4 neighbouring GPUs (the pipeline on NVLink, the DP group over both servers).
  auto layout = [](bool pp_inner) {
    ParamMap p = small({{"gpus_per_host", "8"}});
    if (pp_inner) p["use_tp_pp_dp_mapping"] = "true";
    return workloads_test::gen(p);
  };
  auto host = [](std::int32_t r) { return r / 8; };
  for (bool pp_inner : {false, true}) {
    CAPTURE(pp_inner);
    const Trace t = layout(pp_inner);
    REQUIRE(t.ranks.size() == 2);
    CHECK(t.ranks[0].rank == 0);
    CHECK(t.ranks[1].rank == (pp_inner ? 2 : 8));
    std::set<std::int32_t> send_hosts;
    for (const Op& op : t.ranks[0].ops)
      if (op.kind == OpKind::Send) send_hosts.insert(host(op.peer));
    CHECK(send_hosts == std::set<std::int32_t>{pp_inner ? 0 : 1});
    const Communicator* dp = nullptr;
    for (const auto& cm : t.comms)
      if (cm.name == "dp.stage0") dp = &cm;
    REQUIRE(dp != nullptr);
    CHECK(dp->ranks == (pp_inner ? std::vector<std::int32_t>{0, 4, 8, 12} : std::vector<std::int32_t>{0, 2, 4, 6}));
    std::set<std::int32_t> dp_hosts;
    for (auto r : dp->ranks) dp_hosts.insert(host(r));
    CHECK(dp_hosts.size() == (pp_inner ? 2u : 1u));
    // The TP group is the same pair either way.
    for (const auto& cm : t.comms)
      if (cm.name == "tp.stage1") CHECK(cm.ranks == (pp_inner ? std::vector<std::int32_t>{2, 3} : std::vector<std::int32_t>{8, 9}));
  }
  // MoE: the expert grid's pipeline groups must match the dense grid's (ETP x EP = TP x CP).
  CHECK(error_of([] {
          cfg(small({{"use_tp_pp_dp_mapping", "true"}, {"num_experts", "8"}, {"expert_model_parallel_size", "4"}}));
        }).find("use_tp_pp_dp_mapping: with pipeline parallelism needs expert tensor x expert parallel size (8)") !=
        std::string::npos);
}

TEST_CASE("fsdp_reshard_after_forward never: no parameter all-gather in the backward, the stage's layers held gathered") {
  // torch FSDP2 over DP 4 (TP 2, no PP), 4 layers, 2 micro-batches per step.
  auto fsdp = [](const char* policy) {
    return flat({{"use_distributed_optimizer", "false"}, {"use_torch_fsdp2", "true"}, {"precision", "bf16"},
                 {"fsdp_reshard_after_forward", policy}});
  };
  auto count = [](const Trace& t, const std::string& part) {
    int n = 0;
    for (const Op& op : t.ranks.at(0).ops) n += op.kind == OpKind::Collective && op.name.find(part) != std::string::npos;
    return n;
  };
  const Trace d = workloads_test::gen(fsdp("default")), n = workloads_test::gen(fsdp("never"));
  const int fwd_d = count(d, ".fsdp.ag") - count(d, ".bwd.fsdp.ag"), fwd_n = count(n, ".fsdp.ag") - count(n, ".bwd.fsdp.ag");
  CHECK(count(d, ".bwd.fsdp.ag") == 2 * 4);  // every layer, every micro-batch
  CHECK(count(n, ".bwd.fsdp.ag") == 0);
  CHECK(fwd_n == fwd_d);
  CHECK(count(n, ".fsdp.rs") == count(d, ".fsdp.rs"));
  // "always" is the default policy without PP.
  CHECK(count(workloads_test::gen(fsdp("always")), ".bwd.fsdp.ag") == 2 * 4);
  // Memory: all 4 layers' bf16 weights gathered at the start of the backward instead of the running and the
  // prefetched one.
  const GptConfig c = cfg(fsdp("never"));
  const double Pl = gpt_detail::layer_params_per_rank(c);
  CHECK(mem(fsdp("never")).weights_bytes - mem(fsdp("default")).weights_bytes == doctest::Approx(2.0 * (4 - 2) * Pl));
  // Refusals name the key.
  CHECK(error_of([] { cfg(flat({{"fsdp_reshard_after_forward", "never"}})); })
            .find("fsdp_reshard_after_forward: describes torch FSDP2's units") != std::string::npos);
  // Megatron-LM's --torch-fsdp2-no-reshard-after-forward.
  const MegatronImport im = import_megatron_args(
      read_megatron_launch("torchrun pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16"
                           " --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --bf16"
                           " --tokenizer-type GPT2BPETokenizer --use-torch-fsdp2 --torch-fsdp2-no-reshard-after-forward",
                           "job.sh", {}),
      8, {});
  CHECK(im.not_modelled.empty());
  CHECK(im.params["fsdp_reshard_after_forward"] == "never");
}

TEST_CASE("fsdp_reshard_after_forward always with PP: each backward after a forward gathers its layers again") {
  // torch FSDP2 over DP 4, TP 2, PP 2 (2 layers per stage), 4 micro-batches in 1F1B. Stage 0 (rank 0) runs
  // F0 F1 B0 F2 B1 F3 B2 B3. torch's pipelining keeps a stage gathered after every backward but the last
  // (set_reshard_after_backward(False)); "always" reshards after each forward: F0 and F1 gather (nothing
  // gathered yet / F0 resharded), B0 B1 B2 gather (a forward resharded), F2 F3 and B3 do not.
  auto fsdp = [](const char* policy) {
    return small({{"use_distributed_optimizer", "false"}, {"use_torch_fsdp2", "true"}, {"precision", "bf16"},
                  {"fsdp_reshard_after_forward", policy}});
  };
  auto count = [](const Trace& t, int rank, const std::string& part) {
    int n = 0;
    for (const Op& op : t.ranks.at(rank).ops) n += op.kind == OpKind::Collective && op.name.find(part) != std::string::npos;
    return n;
  };
  const Trace d = workloads_test::gen(fsdp("default")), a = workloads_test::gen(fsdp("always"));
  const int last = static_cast<int>(a.ranks.size()) - 1;  // a stage-1 rank: F0 B0 F1 B1 ...
  CHECK(count(d, 0, ".bwd.fsdp.ag") == 0);
  CHECK(count(d, 0, ".fsdp.ag") == 2);  // the first forward only
  CHECK(count(a, 0, ".fsdp.ag") - count(a, 0, ".bwd.fsdp.ag") == 2 * 2);
  CHECK(count(a, 0, ".bwd.fsdp.ag") == 3 * 2);
  CHECK(count(a, last, ".fsdp.ag") - count(a, last, ".bwd.fsdp.ag") == 1 * 2);
  CHECK(count(a, last, ".bwd.fsdp.ag") == 4 * 2);
  // Gradients still reduce once, after the last micro-batch; the memory is the default's.
  CHECK(count(a, 0, ".fsdp.rs") == count(d, 0, ".fsdp.rs"));
  CHECK(mem(fsdp("always")).weights_bytes == mem(fsdp("default")).weights_bytes);
}

TEST_CASE("optimizer sgd: a momentum buffer instead of two Adam moments; the step moves less state") {
  const ParamMap adam = small(), sgd = small({{"optimizer", "sgd"}}), plain = small({{"optimizer", "sgd"}, {"sgd_momentum", "0"}});
  CHECK(cfg(sgd).adam_state_bytes() == 8.0);
  CHECK(cfg(plain).adam_state_bytes() == 4.0);
  // Stage 0's parameters P over the shard group DP 4: 12 P / 4 -> 8 P / 4 -> 4 P / 4; weights and gradients alike.
  const GptMemory a = mem(adam), s = mem(sgd), n = mem(plain);
  const double P = a.optimizer_bytes * 4.0 / 12.0;
  CHECK(s.optimizer_bytes == doctest::Approx(8.0 * P / 4.0));
  CHECK(n.optimizer_bytes == doctest::Approx(4.0 * P / 4.0));
  CHECK(s.weights_bytes == a.weights_bytes);
  CHECK(s.grads_bytes == a.grads_bytes);
  // The optimizer step reads and writes the state: 8 + 2 x 12 = 32 bytes per parameter -> 8 + 2 x 8 = 24.
  const double d32 = op_named(workloads_test::gen(adam), "optimizer.step").duration_s;
  const double d24 = op_named(workloads_test::gen(sgd), "optimizer.step").duration_s;
  CHECK(d24 / d32 == doctest::Approx(24.0 / 32.0).epsilon(0.02));
  // torch FSDP2: the fp32 shard is the master weight; SGD keeps one fp32 momentum shard where Adam keeps two.
  auto fsdp = [](const char* o) {
    return mem(flat({{"use_distributed_optimizer", "false"}, {"use_torch_fsdp2", "true"}, {"precision", "bf16"}, {"optimizer", o}}));
  };
  CHECK(fsdp("sgd").optimizer_bytes == doctest::Approx(fsdp("adam").optimizer_bytes / 2.0));
  CHECK(error_of([] { cfg(small({{"optimizer", "lion"}})); }).find("optimizer: expected one of adam, sgd") != std::string::npos);
  CHECK(error_of([] { cfg(pao({{"optimizer", "sgd"}})); }).find("optimizer: sgd with use_precision_aware_optimizer is not modelled") !=
        std::string::npos);
  // Megatron-LM: --optimizer sgd and --sgd-momentum are modelled, --optimizer lion is listed as not modelled.
  auto import = [](const std::string& extra) {
    return import_megatron_args(
        read_megatron_launch("torchrun pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16"
                             " --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --bf16"
                             " --tokenizer-type GPT2BPETokenizer" + extra,
                             "job.sh", {}),
        8, {});
  };
  const MegatronImport im = import(" --optimizer sgd --sgd-momentum 0");
  CHECK(im.not_modelled.empty());
  CHECK(im.params["optimizer"] == "sgd");
  CHECK(im.params["sgd_momentum"] == 0.0);
  CHECK(import(" --optimizer lion").not_modelled == std::vector<std::string>{"--optimizer lion"});
}

TEST_CASE("fsdp_reshard_after_forward: torchtitan's parallelism.fsdp_reshard_after_forward imports") {
  const std::string path = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/torchtitan-configs/llama3_8b-8a2686c4a.toml";
  const std::string text = read_input_file(path);
  auto with = [&](const std::string& policy, const std::string& pp) {
    TorchtitanOptions o;
    o.gpus = 16;
    o.overrides = {{"parallelism.fsdp_reshard_after_forward", policy}, {"parallelism.pipeline_parallel_degree", pp}};
    return scenario_for_torchtitan(path, text, "dgx-h100", {}, o);
  };
  CHECK(with("never", "1")["workload"]["params"]["fsdp_reshard_after_forward"] == "never");
  CHECK(with("never", "2")["workload"]["params"]["fsdp_reshard_after_forward"] == "never");
  CHECK(with("always", "1")["workload"]["params"]["fsdp_reshard_after_forward"] == "always");
  CHECK(with("always", "2")["workload"]["params"]["fsdp_reshard_after_forward"] == "always");
  CHECK_FALSE(with("default", "1")["workload"]["params"].contains("fsdp_reshard_after_forward"));
}

namespace {
// Rank 0's TP collectives of the decoder layers' attention and MLP blocks: count and bytes, by kind.
struct TpColls {
  int ag = 0, rs = 0, ar = 0;
  double bytes = 0;
};
TpColls layer_tp(const Trace& t) {
  TpColls n;
  for (const Op& op : t.ranks.at(0).ops) {
    if (op.category != "tp" || (op.name.find(".attn.") == std::string::npos && op.name.find(".mlp.") == std::string::npos))
      continue;
    if (op.kind != OpKind::Collective) continue;
    n.ag += op.coll == CollOp::AllGather, n.rs += op.coll == CollOp::ReduceScatter, n.ar += op.coll == CollOp::AllReduce;
    n.bytes += op.bytes;
  }
  return n;
}
}  // namespace

TEST_CASE("gpt_j_residual + gpt_j_tied (parallel block): half the TP collectives of a layer, one norm, same FLOPs") {
  // flat(): TP 2 with sequence parallelism, PP 1, 4 layers of h 1024, seq 2048, micro-batch 1.
  const ParamMap base = flat(), pb = flat({{"gpt_j_residual", "true"}, {"gpt_j_tied", "true"}});
  const Trace tb = workloads_test::gen(base), tp = workloads_test::gen(pb);
  const TpColls b = layer_tp(tb), p = layer_tp(tp);
  // Sequential block: per layer and micro-batch, forward 2 all-gathers + 2 reduce-scatters, backward 2 gathers of
  // the output gradient, 2 regathers of the input and 2 reduce-scatters. Parallel block: one of each.
  REQUIRE(b.ag > 0);
  CHECK(b.ag == 2 * p.ag);
  CHECK(b.rs == 2 * p.rs);
  CHECK(b.bytes == doctest::Approx(2.0 * p.bytes));
  CHECK(p.ar == 0);
  // Without sequence parallelism: all-reduces, one per layer and direction instead of two.
  const TpColls b_ar = layer_tp(workloads_test::gen(flat({{"sequence_parallel", "false"}}))),
                p_ar = layer_tp(workloads_test::gen(flat({{"sequence_parallel", "false"}, {"gpt_j_residual", "true"},
                                                          {"gpt_j_tied", "true"}})));
  REQUIRE(b_ar.ar > 0);
  CHECK(b_ar.ar == 2 * p_ar.ar);
  // One norm kernel a layer fewer each way; FLOPs (model and kernel) unchanged; the step's compute shorter.
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec("h100");
  const auto kb = gpt_detail::gpt_step_kernels(cfg(base), cm, "t"), kp = gpt_detail::gpt_step_kernels(cfg(pb), cm, "t");
  CHECK(kp.layer.fwd_mlp.kernels == kb.layer.fwd_mlp.kernels - 1);
  CHECK(kp.layer.bwd_mlp.kernels == kb.layer.bwd_mlp.kernels - 1);
  CHECK(kp.layer.fwd_mlp.flops + kp.layer.fwd_attn.flops == kb.layer.fwd_mlp.flops + kb.layer.fwd_attn.flops);
  CHECK(gpt_model_flops(cfg(pb)) == gpt_model_flops(cfg(base)));
  CHECK(workloads_test::compute_s(tp.ranks.at(0)) < workloads_test::compute_s(tb.ranks.at(0)));
  // Activations: the MLP's norm input and fc1 input (2h + 2h bytes per token, split over TP by SP) are not kept
  // a second time: 4 layers x 2048 tokens x 4 x 1024 / 2. Parameters: one LayerNorm (2h) a layer fewer.
  CHECK(mem(base).activations_bytes - mem(pb).activations_bytes == doctest::Approx(4.0 * 2048 * 4.0 * 1024 / 2));
  CHECK(gpt_num_parameters(cfg(base)) - gpt_num_parameters(cfg(pb)) == doctest::Approx(4.0 * 2.0 * 1024));
  // Refusals name the key.
  CHECK(error_of([] { cfg(flat({{"gpt_j_residual", "true"}})); }).find("gpt_j_residual: is modelled with gpt_j_tied true") !=
        std::string::npos);
  CHECK(error_of([] { cfg(flat({{"gpt_j_tied", "true"}})); }).find("gpt_j_tied: needs gpt_j_residual") != std::string::npos);
  CHECK(error_of([] { cfg(flat({{"gpt_j_residual", "true"}, {"gpt_j_tied", "true"}, {"num_experts", "4"}})); })
            .find("gpt_j_residual: is modelled on dense Megatron-LM layers only") != std::string::npos);
  CHECK(error_of([] { cfg(flat({{"gpt_j_residual", "yes"}})); }).find("gpt_j_residual") != std::string::npos);
}

TEST_CASE("optimizer lamb: Adam's state, the step moves 20 bytes per parameter more (apex FusedLAMB's passes)") {
  const ParamMap adam = small(), lamb = small({{"optimizer", "lamb"}});
  CHECK(cfg(lamb).adam_state_bytes() == 12.0);
  const GptMemory a = mem(adam), l = mem(lamb);
  CHECK(l.optimizer_bytes == a.optimizer_bytes);
  CHECK(l.weights_bytes == a.weights_bytes);
  CHECK(l.grads_bytes == a.grads_bytes);
  CHECK(l.activations_bytes == a.activations_bytes);
  // 32 -> 52 bytes per parameter of this rank's shard.
  const double da = op_named(workloads_test::gen(adam), "optimizer.step").duration_s;
  const double dl = op_named(workloads_test::gen(lamb), "optimizer.step").duration_s;
  CHECK(dl / da == doctest::Approx(52.0 / 32.0).epsilon(0.02));
  CHECK(error_of([] { cfg(pao({{"optimizer", "lamb"}})); }).find("optimizer: lamb with use_precision_aware_optimizer is not modelled") !=
        std::string::npos);
  CHECK(error_of([] { cfg(small({{"optimizer", "LAMB"}})); }).find("optimizer: expected one of adam, sgd, lamb") !=
        std::string::npos);
  // Megatron-LM has no LAMB (--optimizer choices at d98e8a64: adam, sgd, muon, ...): its importer lists it as not
  // modelled rather than mapping it.
  const MegatronImport im = import_megatron_args(
      read_megatron_launch("torchrun pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16"
                           " --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --bf16"
                           " --tokenizer-type GPT2BPETokenizer --optimizer lamb",
                           "job.sh", {}),
      8, {});
  CHECK(im.not_modelled == std::vector<std::string>{"--optimizer lamb"});
  CHECK_FALSE(im.params.contains("optimizer"));
}

TEST_CASE("gradient_accumulation_fusion false: every weight gradient added into the main gradient in each backward") {
  const GptConfig c0 = cfg(small()), c1 = cfg(small({{"gradient_accumulation_fusion", "false"}}));
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec(c0.gpu);
  const auto K0 = gpt_detail::gpt_step_kernels(c0, cm, "t"), K1 = gpt_detail::gpt_step_kernels(c1, cm, "t");
  // main_grad.add_(grad): read the main gradient and the bf16 gradient, write the main gradient.
  const double per = 2.0 * (c1.grad_reduce_in_fp32 ? 4.0 : 2.0) + 2.0;
  auto t = [&](double bytes) {
    return cm.kernel_time_s(models::KernelDesc::memory(models::MemoryKernel::Elementwise, bytes, models::Precision::BF16));
  };
  const double Pa = gpt_detail::layer_params_moe_model(c1, false, false, '*'),
               Pm = gpt_detail::layer_params_moe_model(c1, false, false, '-');
  // Attention block: QKV, projection, norm (3 tensors); MLP: fc1, fc2, norm and, with LayerNorm, the two biases.
  const int mlp_tensors = c1.normalization == "LayerNorm" ? 5 : 3;
  CHECK(K1.layer.bwd_attn.kernels == K0.layer.bwd_attn.kernels + 3);
  CHECK(K1.layer.bwd_attn.seconds - K0.layer.bwd_attn.seconds == doctest::Approx(3 * t(per * Pa / 3)).epsilon(1e-9));
  CHECK(K1.layer.wgrad_attn.seconds - K0.layer.wgrad_attn.seconds == doctest::Approx(3 * t(per * Pa / 3)).epsilon(1e-9));
  CHECK(K1.layer.bwd_mlp.kernels == K0.layer.bwd_mlp.kernels + mlp_tensors);
  CHECK(K1.layer.bwd_mlp.seconds - K0.layer.bwd_mlp.seconds ==
        doctest::Approx(mlp_tensors * t(per * Pm / mlp_tensors)).epsilon(1e-9));
  CHECK(K1.layer.fwd_attn.seconds == K0.layer.fwd_attn.seconds);
  CHECK(K1.layer.fwd_mlp.seconds == K0.layer.fwd_mlp.seconds);
  // The embedding (V h / t word embeddings, plus the learned position table when there is one) and the output layer.
  const double V = 32000, h = 1024;
  CHECK(K1.logits_bwd.seconds - K0.logits_bwd.seconds == doctest::Approx(t(per * V * h / 2)).epsilon(1e-9));
  CHECK(K1.embed_bwd.seconds > K0.embed_bwd.seconds);
  // An MTP layer adds its own layer's accumulation, not the shared embedding's and output layer's again (autograd
  // sums a parameter's uses before the hook).
  {
    const ParamMap mtp = {{"mtp_num_layers", "1"}, {"untie_embeddings_and_output_weights", "true"}};
    ParamMap mtp1 = mtp;
    mtp1["gradient_accumulation_fusion"] = "false";
    const auto M0 = gpt_detail::gpt_step_kernels(cfg(small(mtp)), cm, "t"), M1 = gpt_detail::gpt_step_kernels(cfg(small(mtp1)), cm, "t");
    const double layer = (M1.layer.bwd_attn.seconds - M0.layer.bwd_attn.seconds) + (M1.layer.bwd_mlp.seconds - M0.layer.bwd_mlp.seconds);
    CHECK(layer > 0);
    CHECK(M1.mtp_b.seconds - M0.mtp_b.seconds == doctest::Approx(layer).epsilon(1e-9));
  }
  // In the trace: each layer's attention backward is longer by the same time.
  auto first_bwd_attn = [](const Trace& tr) {
    for (const Op& op : tr.ranks.at(0).ops)
      if (op.name.find(".bwd.attn") != std::string::npos && op.kind == OpKind::Compute) return op.duration_s;
    return -1.0;
  };
  CHECK(first_bwd_attn(workloads_test::gen(small({{"gradient_accumulation_fusion", "false"}}))) -
            first_bwd_attn(workloads_test::gen(small())) ==
        doctest::Approx(3 * t(per * Pa / 3)).epsilon(1e-3));
  // Megatron-LM's rule with the deferred output-layer gradient.
  CHECK(error_of([] { cfg(small({{"gradient_accumulation_fusion", "false"}, {"defer_embedding_wgrad_compute", "true"}})); })
            .find("needs gradient_accumulation_fusion") != std::string::npos);
  // --no-gradient-accumulation-fusion imports as the key (modelled, not a note).
  const auto imp = import_small("--no-gradient-accumulation-fusion");
  CHECK(imp.params.at("gradient_accumulation_fusion") == false);
  CHECK(imp.not_modelled.empty());
}

TEST_CASE("bias_swiglu_fusion, bias_gelu_fusion, apply_rope_fusion false: Megatron's unfused activation and RoPE") {
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec("h100");
  auto K = [&](const ParamMap& p) { return gpt_detail::gpt_step_kernels(cfg(p), cm, "t"); };
  // A Llama-style layer (SwiGLU, RMSNorm, RoPE, no biases).
  const ParamMap llama = {{"swiglu", "true"}, {"normalization", "RMSNorm"}, {"position_embedding_type", "rope"}};
  ParamMap sw = llama, rp = llama;
  sw["bias_swiglu_fusion"] = "false";
  rp["apply_rope_fusion"] = "false";
  const auto K0 = K(small(llama)), Ks = K(small(sw)), Kr = K(small(rp));
  // SwiGLU: the same bytes at the eager silu(g) * up rate (tests/data/hardware/h100-kernels/memory_bound.csv
  // swiglu_fwd), slower than the fused kernel; one kernel still counted per pass.
  CHECK(Ks.layer.fwd_mlp.kernels == K0.layer.fwd_mlp.kernels);
  CHECK(Ks.layer.fwd_mlp.seconds > K0.layer.fwd_mlp.seconds);
  CHECK(Ks.layer.bwd_mlp.seconds > K0.layer.bwd_mlp.seconds);
  CHECK(Ks.layer.fwd_attn.seconds == K0.layer.fwd_attn.seconds);
  // RoPE: six streaming kernels each for Q and K instead of one fused kernel, forward and backward.
  CHECK(Kr.layer.fwd_attn.kernels == K0.layer.fwd_attn.kernels + 11);
  CHECK(Kr.layer.bwd_attn.kernels == K0.layer.bwd_attn.kernels + 11);
  CHECK(Kr.layer.fwd_attn.seconds > K0.layer.fwd_attn.seconds);
  CHECK(Kr.layer.fwd_mlp.seconds == K0.layer.fwd_mlp.seconds);
  // GELU with linear biases (LayerNorm): the bias add before F.gelu and its gradient's reduction; without biases
  // (RMSNorm) F.gelu alone is the fused kernel's cost.
  const ParamMap gpt = {{"normalization", "LayerNorm"}}, gpt_rms = {{"normalization", "RMSNorm"}};
  ParamMap gu = gpt, gr = gpt_rms;
  gu["bias_gelu_fusion"] = "false", gr["bias_gelu_fusion"] = "false";
  const auto Kg0 = K(small(gpt)), Kg = K(small(gu));
  CHECK(Kg.layer.fwd_mlp.kernels == Kg0.layer.fwd_mlp.kernels + 1);
  CHECK(Kg.layer.bwd_mlp.kernels == Kg0.layer.bwd_mlp.kernels + 1);
  CHECK(K(small(gr)).layer.fwd_mlp.seconds == K(small(gpt_rms)).layer.fwd_mlp.seconds);
  // torchtitan's block is described by torch_compile.
  CHECK(error_of([] {
          cfg(small({{"use_torch_fsdp2", "true"}, {"torch_compile", "false"}, {"apply_rope_fusion", "false"},
                     {"pipeline_model_parallel_size", "1"}, {"untie_embeddings_and_output_weights", "true"}}));
        }).find("apply_rope_fusion: is Megatron-LM's") != std::string::npos);
  // The three flags import as the keys.
  const auto imp = import_small("--swiglu --position-embedding-type rope --no-bias-swiglu-fusion --no-rope-fusion "
                                 "--no-bias-gelu-fusion");
  CHECK(imp.params.at("bias_swiglu_fusion") == false);
  CHECK(imp.params.at("apply_rope_fusion") == false);
  CHECK(imp.params.at("bias_gelu_fusion") == false);
  CHECK(imp.not_modelled.empty());
}
