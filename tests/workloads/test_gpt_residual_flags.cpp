// Megatron-LM flags that change the step through the residual stream or the gradient reduction (docs/workloads.md
// "Megatron-LM's kernel fusions", "The residual stream in fp32" and "Gradient averaging"): bias_dropout_fusion false
// (the bias + dropout + residual add as eager ops), fp32_residual_connection, ddp_average_in_collective. Each change
// is checked against the kernels it adds, priced by hand with the same compute model.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "models/compute.hpp"
#include "sim/base/input_file.hpp"
#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/nemo_config.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;
using models::KernelDesc;
using models::MemoryKernel;
using models::Precision;

namespace {

// The small Llama-shaped model (TP 2 with sequence parallelism, PP 2) in bf16 on 8 H100s.
ParamMap small(ParamMap over = {}) {
  return workloads_test::with(workloads_test::small_llama(8, 8, {{"precision", "bf16"}}), over);
}

GptConfig cfg(const ParamMap& p) { return gpt_config_from_params(p, "--param"); }

const models::ComputeModel& cm() { return workloads_test::h100(); }

gpt_detail::GptStepKernels kernels(const ParamMap& p) { return gpt_detail::gpt_step_kernels(cfg(p), cm(), "t"); }

// One memory-bound kernel of `bytes` priced by the compute model.
double kt(MemoryKernel k, double bytes) { return cm().kernel_time_s(KernelDesc::memory(k, bytes, Precision::BF16)); }

// Elements of the residual stream per micro-batch on a rank: 2048 tokens / TP 2 (sequence parallel) x 1024.
constexpr double kN = 2048.0 / 2.0 * 1024.0;

double bytes_of(const Trace& t, int rank, const std::string& name) {
  for (const Op& op : t.ranks.at(rank).ops)
    if (op.name == name) return op.bytes;
  FAIL("no op " << name);
  return 0;
}

}  // namespace

TEST_CASE("bias_dropout_fusion false: the bias add, dropout and residual add as separate kernels") {
  using MK = MemoryKernel;
  // GPT-style layer: LayerNorm (linear biases), hidden dropout 0.1 (the default).
  const auto K0 = kernels(small()), K1 = kernels(small({{"bias_dropout_fusion", "false"}}));
  // Fused: one kernel reading x and the residual, writing the sum and the mask (2 + 2 + 2 + 1 bytes per element).
  // Unfused: x + bias (2 + 2), dropout (2 + 2 + 1), residual + out (2 + 2 + 2): two kernels more per block.
  const double fwd = kt(MK::Elementwise, 4 * kN) + kt(MK::Elementwise, 5 * kN) + kt(MK::Elementwise, 6 * kN) -
                     kt(MK::Elementwise, 7 * kN);
  CHECK(fwd > 0);
  CHECK(K1.layer.fwd_attn.kernels == K0.layer.fwd_attn.kernels + 2);
  CHECK(K1.layer.fwd_mlp.kernels == K0.layer.fwd_mlp.kernels + 2);
  CHECK(K1.layer.fwd_attn.seconds - K0.layer.fwd_attn.seconds == doctest::Approx(fwd).epsilon(1e-9));
  CHECK(K1.layer.fwd_mlp.seconds - K0.layer.fwd_mlp.seconds == doctest::Approx(fwd).epsilon(1e-9));
  // Backward: the dropout gradient as before, and the bias gradient's reduction (read the gradient) on its own.
  CHECK(K1.layer.bwd_attn.kernels == K0.layer.bwd_attn.kernels + 1);
  CHECK(K1.layer.bwd_mlp.seconds - K0.layer.bwd_mlp.seconds == doctest::Approx(kt(MK::Elementwise, 2 * kN)).epsilon(1e-9));
  // Without biases (RMSNorm) and without dropout the eager function is the one residual add the fused kernel
  // costs: nothing changes.
  const ParamMap llama = {{"normalization", "RMSNorm"}, {"hidden_dropout", "0"}};
  ParamMap ul = llama;
  ul["bias_dropout_fusion"] = "false";
  CHECK(kernels(small(ul)).layer.fwd_attn.seconds == kernels(small(llama)).layer.fwd_attn.seconds);
  CHECK(kernels(small(ul)).layer.bwd_attn.seconds == kernels(small(llama)).layer.bwd_attn.seconds);
  // The step is longer by at least the forward kernels of 4 layers x 2 blocks of every micro-batch on a stage.
  const Trace t0 = workloads_test::gen(small()), t1 = workloads_test::gen(small({{"bias_dropout_fusion", "false"}}));
  CHECK(workloads_test::compute_s(t1.ranks[0]) - workloads_test::compute_s(t0.ranks[0]) >=
        doctest::Approx(2.0 * 2.0 * 4.0 * fwd).epsilon(1e-6));
  // The legacy layer (attention_backend unfused, SC'21): the same kernels.
  const auto U0 = kernels(small({{"attention_backend", "unfused"}}));
  const auto U1 = kernels(small({{"attention_backend", "unfused"}, {"bias_dropout_fusion", "false"}}));
  CHECK(U1.layer.fwd_attn.kernels == U0.layer.fwd_attn.kernels + 2);
  CHECK(U1.layer.fwd_attn.seconds > U0.layer.fwd_attn.seconds);
  // torchtitan's block is described by torch_compile.
  CHECK(error_of([] {
          cfg(small({{"use_torch_fsdp2", "true"}, {"torch_compile", "false"}, {"bias_dropout_fusion", "false"},
                     {"pipeline_model_parallel_size", "1"}, {"untie_embeddings_and_output_weights", "true"}}));
        }).find("bias_dropout_fusion: is Megatron-LM's") != std::string::npos);
  // The flag imports as the key, and NeMo's bias_dropout_add_fusion through it.
  const auto imp = workloads_test::import_small("--no-bias-dropout-fusion");
  CHECK(imp.params.at("bias_dropout_fusion") == false);
  CHECK(imp.not_modelled.empty());
  const std::string path = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nemo-configs/megatron_gpt_config.yaml";
  std::string text = read_input_file(path);
  const Json on = scenario_for_nemo(path, text, "dgx-h100", {}, false);
  CHECK_FALSE(on["workload"]["params"].contains("bias_dropout_fusion"));
  const std::string from = "bias_dropout_add_fusion: True";
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), "bias_dropout_add_fusion: False");
  const Json off = scenario_for_nemo(path, text, "dgx-h100", {}, false);
  CHECK(off["workload"]["params"]["bias_dropout_fusion"] == false);
}

TEST_CASE("fp32_residual_connection: fp32 residual adds, norm input casts, embedding cast, fp32 pipeline sends") {
  using MK = MemoryKernel;
  // Llama-style layer without biases or dropout: the fused residual add reads x (2) and the residual (4) and
  // writes the sum (4) instead of 2 + 2 + 2; each norm first casts its fp32 input to bf16 (read 4, write 2).
  const ParamMap llama = {{"normalization", "RMSNorm"}, {"hidden_dropout", "0"}, {"swiglu", "true"}};
  ParamMap f32 = llama;
  f32["fp32_residual_connection"] = "true";
  const auto K0 = kernels(small(llama)), K1 = kernels(small(f32));
  const double cast = kt(MK::Cast, 6 * kN);
  const double fwd = cast + kt(MK::Elementwise, 10 * kN) - kt(MK::Elementwise, 6 * kN);
  const double bwd = cast + kt(MK::Elementwise, 20 * kN) - kt(MK::Elementwise, 12 * kN);
  CHECK(K1.layer.fwd_attn.kernels == K0.layer.fwd_attn.kernels + 1);
  CHECK(K1.layer.fwd_attn.seconds - K0.layer.fwd_attn.seconds == doctest::Approx(fwd).epsilon(1e-9));
  CHECK(K1.layer.fwd_mlp.seconds - K0.layer.fwd_mlp.seconds == doctest::Approx(fwd).epsilon(1e-9));
  CHECK(K1.layer.bwd_attn.seconds - K0.layer.bwd_attn.seconds == doctest::Approx(bwd).epsilon(1e-9));
  CHECK(K1.layer.bwd_mlp.seconds - K0.layer.bwd_mlp.seconds == doctest::Approx(bwd).epsilon(1e-9));
  // The embedding output cast to fp32 (read 2, write 4) and its gradient back.
  CHECK(K1.embed_fwd.seconds - K0.embed_fwd.seconds == doctest::Approx(cast).epsilon(1e-9));
  CHECK(K1.embed_bwd.seconds - K0.embed_bwd.seconds == doctest::Approx(cast).epsilon(1e-9));
  // Unfused with it: x is cast to fp32 first, then the add in fp32 (the cast's gradient a kernel of its own).
  ParamMap f32u = f32;
  f32u["bias_dropout_fusion"] = "false";
  const auto K2 = kernels(small(f32u));
  CHECK(K2.layer.fwd_attn.seconds - K1.layer.fwd_attn.seconds ==
        doctest::Approx(kt(MK::Elementwise, 6 * kN) + kt(MK::Elementwise, 12 * kN) - kt(MK::Elementwise, 10 * kN)).epsilon(1e-9));
  CHECK(K2.layer.bwd_attn.seconds - K1.layer.bwd_attn.seconds == doctest::Approx(kt(MK::Elementwise, 6 * kN)).epsilon(1e-9));
  // Pipeline sends carry fp32 activations (and gradients): twice the bytes.
  const Trace t0 = workloads_test::gen(small(llama)), t1 = workloads_test::gen(small(f32));
  CHECK(bytes_of(t1, 0, "mb0.send.fwd") == 2.0 * bytes_of(t0, 0, "mb0.send.fwd"));
  CHECK(bytes_of(t1, 1, "mb0.send.bwd") == 2.0 * bytes_of(t0, 1, "mb0.send.bwd"));
  // Memory: a fully recomputed layer keeps its fp32 input. One stage (PP 1), one micro-batch in flight, 4 layers
  // of one checkpoint each: the peak holds 3 stored inputs + 1 recomputed layer, so 3 x 2 more bytes per element.
  ParamMap r0 = small(llama), r1 = small(f32);
  for (ParamMap* p : {&r0, &r1})
    (*p)["pipeline_model_parallel_size"] = "1", (*p)["world_size"] = "4", (*p)["recompute_granularity"] = "full";
  const GptMemory m0 = gpt_memory_per_gpu(cfg(r0)), m1 = gpt_memory_per_gpu(cfg(r1));
  CHECK(m1.activations_bytes - m0.activations_bytes == doctest::Approx(3.0 * 2.0 * kN));
  // The flag imports as the key, and NeMo's fp32_residual_connection through it.
  const auto imp = workloads_test::import_small("--fp32-residual-connection");
  CHECK(imp.params.at("fp32_residual_connection") == true);
  CHECK(imp.not_modelled.empty());
  const std::string path = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nemo-configs/megatron_gpt_config.yaml";
  std::string text = read_input_file(path);
  const std::string from = "fp32_residual_connection: False";
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), "fp32_residual_connection: True");
  CHECK(scenario_for_nemo(path, text, "dgx-h100", {}, false)["workload"]["params"]["fp32_residual_connection"] == true);
}

namespace {
int index_of(const RankTrace& r, const std::string& name) {
  for (std::size_t i = 0; i < r.ops.size(); ++i)
    if (r.ops[i].name == name) return static_cast<int>(i);
  return -1;
}
}  // namespace

TEST_CASE("ddp_average_in_collective: Megatron DDP's 1/DP gradient scale before each bucket's collective, or none") {
  // DP 2 (8 GPUs, TP 2, PP 2), several buckets: ddp_num_buckets 3 with overlap_grad_reduce.
  const ParamMap ov = small({{"overlap_grad_reduce", "true"}, {"ddp_num_buckets", "3"}});
  ParamMap avg = ov;
  avg["ddp_average_in_collective"] = "true";
  const Trace t0 = workloads_test::gen(ov), t1 = workloads_test::gen(avg);
  const RankTrace& r = t0.ranks.at(0);
  const double grad_b = cfg(ov).grad_reduce_in_fp32 ? 4.0 : 2.0;
  int buckets = 0;
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    const Op& coll = r.ops[i];
    if (coll.name.rfind("dp.bucket", 0) != 0 || coll.name.find(".scale") != std::string::npos ||
        coll.kind == OpKind::Compute)
      continue;
    ++buckets;
    CAPTURE(coll.name);
    const std::string scale = coll.name.substr(0, coll.name.rfind('.')) + ".scale";
    const int s = index_of(r, scale);
    REQUIRE(s >= 0);
    const Op& sc = r.ops[static_cast<std::size_t>(s)];
    // On the compute stream, in the collective's deps, right after the op that completed the bucket (its dep).
    CHECK(sc.stream == 0);
    CHECK(std::find(coll.deps.begin(), coll.deps.end(), static_cast<std::uint32_t>(s)) != coll.deps.end());
    REQUIRE(sc.deps.size() == 1);
    CHECK(sc.deps[0] == static_cast<std::uint32_t>(s - 1));
    // An in-place multiply over the bucket's gradients: read and write them.
    const double el = coll.bytes / grad_b;
    CHECK(sc.duration_s == doctest::Approx(kt(MemoryKernel::Elementwise, 2.0 * el * grad_b)).epsilon(1e-3));
    CHECK(sc.duration_s > 0);
    // Averaged in the collective: no scale; the collective is the same.
    CHECK(index_of(t1.ranks.at(0), scale) < 0);
    CHECK(t1.ranks.at(0).ops.at(static_cast<std::size_t>(index_of(t1.ranks.at(0), coll.name))).bytes == coll.bytes);
  }
  CHECK(buckets >= 2);
  CHECK(r.ops.size() == t1.ranks.at(0).ops.size() + static_cast<std::size_t>(buckets));
  CHECK(workloads_test::compute_s(r) > workloads_test::compute_s(t1.ranks.at(0)));
  // Without overlap_grad_reduce, finish_grad_sync runs bucket after bucket with synchronous collectives: each scale
  // after the previous bucket's collective.
  ParamMap sync = small({{"ddp_num_buckets", "3"}});
  const Trace ts = workloads_test::gen(sync);
  const RankTrace& rs = ts.ranks.at(0);
  const int s1 = index_of(rs, "dp.bucket1.scale"), c0 = index_of(rs, "dp.bucket0.ar");
  if (s1 >= 0) {  // one bucket per chunk without overlap_grad_reduce: PP 2 stages have one chunk each
    CHECK(std::find(rs.ops[s1].deps.begin(), rs.ops[s1].deps.end(), static_cast<std::uint32_t>(c0)) != rs.ops[s1].deps.end());
  }
  CHECK(index_of(rs, "dp.bucket0.scale") >= 0);
  CHECK(index_of(rs, "dp.bucket0.scale") < c0);
  // DP 1: no data-parallel collective, no scale.
  const Trace one = workloads_test::gen(small({{"world_size", "4"}, {"global_batch_size", "4"}, {"overlap_grad_reduce", "true"}}));
  CHECK(index_of(one.ranks.at(0), "dp.bucket0.scale") < 0);
  // The flag imports as the key; NeMo's mcore_distributed_optim averages by default (optim.average_in_collective True).
  const auto imp = workloads_test::import_small("--ddp-average-in-collective");
  CHECK(imp.params.at("ddp_average_in_collective") == true);
  CHECK(imp.not_modelled.empty());
  const std::string path = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nemo-configs/launcher-llama3_70b.yaml";
  std::string text = read_input_file(path);
  const ParamMap vocab = {{"padded_vocab_size", "128512"}};  // Llama 3's tokenizer, padded as NeMo pads it
  CHECK(scenario_for_nemo(path, text, "dgx-h100", vocab, false)["workload"]["params"]["ddp_average_in_collective"] == true);
  const std::string from = "name: mcore_distributed_optim";
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.insert(at + from.size(), "\n    average_in_collective: false");
  CHECK_FALSE(scenario_for_nemo(path, text, "dgx-h100", vocab, false)["workload"]["params"].contains("ddp_average_in_collective"));
}

TEST_CASE("ddp_pad_buckets_for_high_nccl_busbw: the distributed optimizer's buckets padded to lcm(DP, 128, 2^16)") {
  // DP 2 with the distributed optimizer: every bucket's reduce-scatter and all-gather move a multiple of
  // lcm(2, 128, 65536) = 65536 elements, the padding at most 65535 elements more than without the flag.
  const ParamMap base = small({{"use_distributed_optimizer", "true"}, {"overlap_grad_reduce", "true"}, {"ddp_num_buckets", "3"}});
  ParamMap pad = base;
  pad["ddp_pad_buckets_for_high_nccl_busbw"] = "true";
  const Trace t0 = workloads_test::gen(base), t1 = workloads_test::gen(pad);
  const double grad_b = cfg(base).grad_reduce_in_fp32 ? 4.0 : 2.0;
  int checked = 0;
  for (std::size_t ri = 0; ri < t0.ranks.size(); ++ri)
    for (const Op& op : t0.ranks[ri].ops) {
      if (op.kind == OpKind::Compute || op.name.rfind("dp.bucket", 0) != 0) continue;
      CAPTURE(op.name);
      const double per_el = op.name.find(".rs") != std::string::npos ? grad_b : 2.0;  // gradients; bf16 parameters
      const double el = op.bytes / per_el;
      const int i = index_of(t1.ranks.at(ri), op.name);
      REQUIRE(i >= 0);
      const double padded_el = t1.ranks.at(ri).ops.at(static_cast<std::size_t>(i)).bytes / per_el;
      CHECK(padded_el == std::ceil(el / 65536.0) * 65536.0);
      CHECK(padded_el - el < 65536.0);
      ++checked;
    }
  CHECK(checked >= 4);
  // Without the distributed optimizer Megatron's layout does not pad: nothing changes.
  ParamMap ddp = small({{"overlap_grad_reduce", "true"}}), ddp_pad = ddp;
  ddp_pad["ddp_pad_buckets_for_high_nccl_busbw"] = "true";
  const Trace d0 = workloads_test::gen(ddp), d1 = workloads_test::gen(ddp_pad);
  const int b0 = index_of(d0.ranks.at(0), "dp.bucket0.ar"), b1 = index_of(d1.ranks.at(0), "dp.bucket0.ar");
  REQUIRE(b0 >= 0);
  REQUIRE(b1 >= 0);
  CHECK(d0.ranks[0].ops[static_cast<std::size_t>(b0)].bytes == d1.ranks[0].ops[static_cast<std::size_t>(b1)].bytes);
  const auto imp = workloads_test::import_small("--use-distributed-optimizer --ddp-pad-buckets-for-high-nccl-busbw");
  CHECK(imp.params.at("ddp_pad_buckets_for_high_nccl_busbw") == true);
  CHECK(imp.not_modelled.empty());
}

TEST_CASE("cross_entropy_fusion_impl: Transformer Engine's fused cross entropy priced as the native one") {
  const ParamMap fused = small({{"cross_entropy_loss_fusion", "true"}});
  ParamMap te = fused;
  te["cross_entropy_fusion_impl"] = "te";
  CHECK(cfg(te).cross_entropy_fusion_impl == "te");
  // Both hold 6 bytes per logit element at the loss's peak (bf16 logits + fp32 softmax / gradient), against the
  // unfused vocab-parallel cross entropy's 14; the loss kernels are priced at the same measured rate.
  CHECK(gpt_memory_per_gpu(cfg(te)).activations_bytes == gpt_memory_per_gpu(cfg(fused)).activations_bytes);
  CHECK(gpt_memory_per_gpu(cfg(fused)).activations_bytes < gpt_memory_per_gpu(cfg(small())).activations_bytes);
  const Trace a = workloads_test::gen(fused), b = workloads_test::gen(te);
  CHECK(workloads_test::compute_s(a.ranks.back()) == workloads_test::compute_s(b.ranks.back()));
  CHECK(error_of([] { cfg(small({{"cross_entropy_fusion_impl", "triton"}})); })
            .find("cross_entropy_fusion_impl: expected native or te") != std::string::npos);
  const auto imp = workloads_test::import_small("--cross-entropy-loss-fusion --cross-entropy-fusion-impl te");
  CHECK(imp.params.at("cross_entropy_fusion_impl") == "te");
  CHECK(imp.not_modelled.empty());
}

TEST_CASE("distribute_saved_activations: full recompute's saved inputs split over TP, all-gathered before the recompute") {
  // TP 2 without sequence parallelism, every layer its own checkpoint; one stage (PP 1) on 4 GPUs.
  const ParamMap base = small({{"sequence_parallel", "false"}, {"recompute_granularity", "full"},
                               {"pipeline_model_parallel_size", "1"}, {"world_size", "4"}});
  ParamMap dist = base;
  dist["distribute_saved_activations"] = "true";
  // Memory: the peak holds 3 stored inputs (and the recomputed layer); each is now 1/2 of 2048 x 1024 x 2 bytes.
  const double input = 2048.0 * 1024.0 * 2.0;
  CHECK(gpt_memory_per_gpu(cfg(base)).activations_bytes - gpt_memory_per_gpu(cfg(dist)).activations_bytes ==
        doctest::Approx(3.0 * input / 2.0));
  const Trace t0 = workloads_test::gen(base), t1 = workloads_test::gen(dist);
  const RankTrace& r = t1.ranks.at(0);
  int splits = 0, gathers = 0;
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    const Op& op = r.ops[i];
    if (op.name.find(".checkpoint.split") != std::string::npos) {
      ++splits;
      // A copy of the rank's half of the input: read and write 2048 x 1024 x 2 / 2 bytes.
      CHECK(op.duration_s == doctest::Approx(kt(MemoryKernel::Copy, 2.0 * input / 2.0)).epsilon(1e-3));
    }
    if (op.name.find(".checkpoint.ag") != std::string::npos) {
      ++gathers;
      CHECK(op.kind == OpKind::Collective);
      CHECK(op.bytes == input);  // the whole input gathered over TP
      // the layer's recompute waits for it
      const std::string layer = op.name.substr(0, op.name.find(".checkpoint.ag"));
      const int re = index_of(r, layer + ".recompute.attn");
      REQUIRE(re > static_cast<int>(i));
    }
  }
  const int mbs = 8 / 2;  // global batch 8 over DP 2, micro-batch 1
  CHECK(splits == 4 * mbs);
  CHECK(gathers == 4 * mbs);
  CHECK(index_of(t0.ranks.at(0), "mb0.l0.checkpoint.ag") < 0);
  // Groups of 2 layers (uniform): one checkpoint, split and gather per group.
  ParamMap g2 = dist;
  g2["recompute_num_layers"] = "2";
  const Trace t2 = workloads_test::gen(g2);
  CHECK(index_of(t2.ranks.at(0), "mb0.l1.checkpoint.split") >= 0);
  CHECK(index_of(t2.ranks.at(0), "mb0.l0.checkpoint.split") < 0);
  CHECK(index_of(t2.ranks.at(0), "mb0.l3.checkpoint.ag") >= 0);
  CHECK(index_of(t2.ranks.at(0), "mb0.l2.checkpoint.ag") < 0);
  // Megatron's own checks.
  CHECK(error_of([&] { ParamMap p = dist; p["sequence_parallel"] = "true"; cfg(p); })
            .find("distribute_saved_activations: cannot be used with sequence_parallel") != std::string::npos);
  CHECK(error_of([&] { ParamMap p = dist; p["recompute_granularity"] = "selective"; cfg(p); })
            .find("distribute_saved_activations: applies to full recompute only") != std::string::npos);
  const auto imp = workloads_test::import_small("--tensor-model-parallel-size 2 --recompute-granularity full "
                                                 "--recompute-method uniform --distribute-saved-activations");
  CHECK(imp.params.at("distribute_saved_activations") == true);
  CHECK(imp.not_modelled.empty());
}
