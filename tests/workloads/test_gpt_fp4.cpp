// NVFP4 training (precision fp4: Megatron's --fp4-format e2m1 / --fp4-recipe nvfp4 / --fp4-param-gather) and the
// bf16 first / last layers of an FP8 / FP4 run (--first-last-layers-bf16 with --num-layers-at-start-in-bf16 /
// --num-layers-at-end-in-bf16). docs/workloads.md, "FP4 (NVFP4) and bf16 end layers". The FP4 GEMM times are
// borrowed (FP8 efficiency at the FP4 peak), so these tests check the structure -- which GEMMs run in FP4, the
// quantisation bytes, memory, the refusals -- not a measured FP4 throughput.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <string>

#include "models/kernel.hpp"
#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/megatron_args.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

// The 4-layer Llama of workloads_test at Llama-3-70B's width (d 8192, 64 heads, 8 KV groups, FFN 28672: GEMMs large
// enough for FP8 / FP4 to pay off over their casts) on B200s: TP 2, PP 2, DP 4, the distributed optimizer, 4
// micro-batches.
ParamMap small(ParamMap over = {}) {
  ParamMap p = workloads_test::small_llama(16, 16, {{"use_distributed_optimizer", "true"}, {"gpu", "b200"},
                                                    {"hidden_size", "8192"}, {"num_attention_heads", "64"},
                                                    {"num_query_groups", "8"}, {"ffn_hidden_size", "28672"}});
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}

GptConfig cfg(const ParamMap& p) { return gpt_config_from_params(p, "--param"); }
// Pipeline stage 0's memory (layers 0 and 1, the embedding).
GptMemory gpt_memory_of_stage0(const GptConfig& c) { return gpt_memory_of_stage(c, 0); }

models::ComputeModel cm_of(const GptConfig& c) {
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec(c.gpu);
  return cm;
}

gpt_detail::GptStepKernels kernels(const ParamMap& p) {
  const GptConfig c = cfg(p);
  return gpt_detail::gpt_step_kernels(c, cm_of(c), "test");
}

// One decoder layer's forward + backward seconds (one micro-batch).
double layer_s(const gpt_detail::LayerCosts& L) {
  return L.fwd_attn.seconds + L.fwd_mlp.seconds + L.bwd_attn.seconds + L.bwd_mlp.seconds;
}

double dp_ag_bytes(const Trace& t) {
  double b = 0;
  for (const Op& op : t.ranks.at(0).ops)
    if (op.name.rfind("dp.bucket", 0) == 0 && op.name.find(".ag") != std::string::npos) b += op.bytes;
  return b;
}

}  // namespace

TEST_CASE("fp4: the decoder GEMMs run at the FP4 peak, the quantisation kernels are memory-bound extra work") {
  const auto bf = kernels(small({{"precision", "bf16"}}));
  const auto f8 = kernels(small({{"precision", "fp8"}, {"fp8_recipe", "mxfp8"}}));
  const auto f4 = kernels(small({{"precision", "fp4"}}));
  // The same FLOPs in every precision; FP4 faster than MXFP8 faster than bf16 on these (small) GEMMs.
  CHECK(f4.layer.fwd_mlp.flops == doctest::Approx(bf.layer.fwd_mlp.flops));
  CHECK(layer_s(f4.layer) < layer_s(f8.layer));
  CHECK(layer_s(f8.layer) < layer_s(bf.layer));
  // An NVFP4 GEMM is priced with the FP8 efficiency at the FP4 peak: a large compute-bound GEMM takes
  // peak_fp8 / peak_fp4 = 4.5 / 9 of the FP8 time on a B200.
  const GptConfig c = cfg(small({{"precision", "fp4"}}));
  const models::ComputeModel cm = cm_of(c);
  const double t8 = cm.kernel_time_s(models::KernelDesc::gemm(16384, 16384, 16384, models::Precision::FP8));
  const double t4 = cm.kernel_time_s(models::KernelDesc::gemm(16384, 16384, 16384, models::Precision::FP4));
  CHECK(t4 / t8 == doctest::Approx(0.5).epsilon(0.02));
  // NVFP4 quantisation: amax pass (read 2) + fused RHT cast (read 2, write 2 x (0.5 + 1/16)); its TP all-gather
  // moves 0.5 + 1/16 bytes per element.
  CHECK(gpt_detail::fp8_cast_bytes_per_element("nvfp4") == 5.125);
  CHECK(gpt_detail::fp8_gather_bytes_per_element("nvfp4") == 0.5625);
  // The output layer stays bf16: its logits GEMMs are the same in every precision.
  CHECK(f4.logits_fwd.seconds == bf.logits_fwd.seconds);
}

TEST_CASE("fp4: the sequence-parallel all-gathers move NVFP4, the metadata peak is the FP4 one") {
  const Trace t4 = workloads_test::gen(small({{"precision", "fp4"}}));
  const Trace tb = workloads_test::gen(small({{"precision", "bf16"}}));
  auto ag = [](const Trace& t) {
    for (const Op& op : t.ranks.at(0).ops)
      if (op.name.find(".attn.ag") != std::string::npos) return op.bytes;
    return 0.0;
  };
  REQUIRE(ag(tb) > 0);
  CHECK(ag(t4) / ag(tb) == doctest::Approx(0.5625 / 2.0));
  CHECK(t4.metadata.at("peak_dense_flops_per_gpu") == doctest::Approx(9000e12));
}

TEST_CASE("fp4: memory keeps NVFP4 weight copies and NVFP4 saved GEMM inputs") {
  const GptMemory b = gpt_memory_of_stage0(cfg(small({{"precision", "bf16"}})));
  const GptMemory f8 = gpt_memory_of_stage0(cfg(small({{"precision", "fp8"}, {"fp8_recipe", "mxfp8"}})));
  const GptMemory f4 = gpt_memory_of_stage0(cfg(small({{"precision", "fp4"}})));
  const double Pl = gpt_detail::layer_params_per_rank(cfg(small()));
  // Stage 0 holds 2 layers: FP8 keeps 2 bytes of copies per weight, NVFP4 2 x 0.5625.
  CHECK(f8.weights_bytes - b.weights_bytes == doctest::Approx(2.0 * 2.0 * Pl));
  CHECK(f4.weights_bytes - b.weights_bytes == doctest::Approx(2.0 * 1.125 * Pl));
  CHECK(f4.activations_bytes < f8.activations_bytes);
  CHECK(f8.activations_bytes < b.activations_bytes);
}

TEST_CASE("fp4_param_gather: NVFP4 weights replace the bf16 copy; the all-gather moves 4-bit data") {
  const ParamMap f4 = small({{"precision", "fp4"}});
  ParamMap pg = f4;
  pg["fp4_param_gather"] = "true";
  const GptConfig c = cfg(pg);
  const double layers_el = 2.0 * gpt_detail::layer_params_per_rank(c);
  CHECK(gpt_memory_of_stage0(cfg(f4)).weights_bytes - gpt_memory_of_stage0(c).weights_bytes ==
        doctest::Approx(2.0 * layers_el));
  const Trace t0 = workloads_test::gen(f4), t1 = workloads_test::gen(pg);
  CHECK(dp_ag_bytes(t0) - dp_ag_bytes(t1) == doctest::Approx((2.0 - 0.5) * layers_el));
  bool cast = false, amax = false;
  for (const Op& op : t1.ranks.at(0).ops) {
    if (op.name == "fp8_param_gather.cast") cast = op.duration_s > 0;
    // One fp32 amax per 16 x 16 block and one per tensor (4 linears per layer, 2 layers).
    if (op.name == "fp8_param_gather.amax.ar") amax = op.bytes == doctest::Approx(4.0 * layers_el / 256.0 + 4.0 * 8.0);
  }
  CHECK(cast);
  CHECK(amax);
}

TEST_CASE("fp4: refusals name the key") {
  // Hopper has no FP4 tensor cores.
  CHECK(error_of([] { cfg(small({{"precision", "fp4"}, {"gpu", "h100"}})); }).find("fp4 needs FP4 tensor cores") !=
        std::string::npos);
  CHECK(error_of([] { cfg(small({{"precision", "fp4"}, {"gpu", "a100"}})); }).find("precision") != std::string::npos);
  CHECK(error_of([] { cfg(small({{"precision", "fp4"}, {"fp4_recipe", "custom"}})); }).find("fp4_recipe: custom") !=
        std::string::npos);
  CHECK(error_of([] { cfg(small({{"fp4_param_gather", "true"}})); }).find("fp4_param_gather: needs precision fp4") !=
        std::string::npos);
  CHECK(error_of([] { cfg(small({{"fp4_format", "e2m1"}, {"fp8_format", "e4m3"}})); }).find("fp4_format") !=
        std::string::npos);
  CHECK(error_of([] { cfg(small({{"fp4_format", "e4m3"}})); }).find("expected e2m1") != std::string::npos);
  CHECK(error_of([] { cfg(small({{"precision", "fp4"}, {"tp_comm_overlap", "true"}})); })
            .find("tp_comm_overlap: with precision fp4 fails in Megatron-LM") != std::string::npos);
  CHECK(error_of([] {
          cfg(small({{"precision", "fp8"}, {"fp8_recipe", "delayed"}, {"first_last_layers_bf16", "true"}}));
        }).find("Delayed scaling does not support") != std::string::npos);
  // Megatron's bound under FP8: at most num_layers / PP (= 2) per end; under FP4 at most num_layers here.
  CHECK(error_of([] {
          cfg(small({{"precision", "fp8"}, {"fp8_recipe", "mxfp8"}, {"first_last_layers_bf16", "true"},
                     {"num_layers_at_start_in_bf16", "3"}}));
        }).find("num_layers_at_start_in_bf16: (3) must be between 0 and the layers per pipeline stage") !=
        std::string::npos);
  CHECK(error_of([] {
          cfg(small({{"precision", "fp4"}, {"first_last_layers_bf16", "true"}, {"num_layers_at_end_in_bf16", "5"}}));
        }).find("num_layers_at_end_in_bf16: (5) must be between 0 and num_layers") != std::string::npos);
  CHECK(cfg(small({{"precision", "fp4"}, {"first_last_layers_bf16", "true"}, {"num_layers_at_start_in_bf16", "3"}}))
            .bf16_layer(2));
}

TEST_CASE("first_last_layers_bf16: the end layers' GEMMs in bf16 cost each stage their bf16-vs-FP4 difference") {
  for (const char* prec : {"fp4", "fp8"}) {
    CAPTURE(prec);
    const ParamMap q = small({{"precision", prec}, {"fp8_recipe", "mxfp8"}});
    ParamMap e = q;
    e["first_last_layers_bf16"] = "true";  // one layer at each end (Megatron's defaults)
    const auto Kq = kernels(q), Ke = kernels(e);
    const auto Kb = kernels(small({{"precision", "bf16"}}));
    REQUIRE(Ke.has_bf16_layers());
    CHECK(layer_s(Ke.layer_bf16) == doctest::Approx(layer_s(Kb.layer)));
    CHECK(Ke.layer_at(0).fwd_mlp.seconds == Kb.layer.fwd_mlp.seconds);
    CHECK(Ke.layer_at(1).fwd_mlp.seconds == Kq.layer.fwd_mlp.seconds);
    CHECK(Ke.layer_at(3).fwd_mlp.seconds == Kb.layer.fwd_mlp.seconds);
    // PP 2: each stage holds one bf16 layer; its compute grows by that layer's difference per micro-batch (4).
    const Trace tq = workloads_test::gen(q), te = workloads_test::gen(e);
    const double d = 4.0 * (layer_s(Kb.layer) - layer_s(Kq.layer));
    REQUIRE(d > 0);
    for (std::size_t st = 0; st < 2; ++st)
      CHECK(workloads_test::compute_s(te.ranks.at(st)) - workloads_test::compute_s(tq.ranks.at(st)) ==
            doctest::Approx(d).epsilon(1e-6));
    // Memory: stage 0 keeps no FP8 / NVFP4 copies for layer 0 and saves its GEMM inputs in bf16.
    const GptMemory mq = gpt_memory_of_stage0(cfg(q)), me = gpt_memory_of_stage0(cfg(e));
    const double Pl = gpt_detail::layer_params_per_rank(cfg(q));
    const double copies = std::string(prec) == "fp4" ? 1.125 : 2.0;
    CHECK(mq.weights_bytes - me.weights_bytes == doctest::Approx(copies * Pl));
    CHECK(me.activations_bytes > mq.activations_bytes);
  }
  // Without FP8 / FP4 the flags change nothing (Megatron reads them only in its quantisation contexts).
  const ParamMap b = small({{"precision", "bf16"}});
  ParamMap be = b;
  be["first_last_layers_bf16"] = "true";
  CHECK(workloads_test::compute_s(workloads_test::gen(be).ranks.at(0)) ==
        workloads_test::compute_s(workloads_test::gen(b).ranks.at(0)));
}

TEST_CASE("first_last_layers_bf16 with fp4_param_gather: the bf16 layers' weights gather in bf16") {
  ParamMap pg = small({{"precision", "fp4"}, {"fp4_param_gather", "true"}});
  ParamMap pe = pg;
  pe["first_last_layers_bf16"] = "true";
  const double Pl = gpt_detail::layer_params_per_rank(cfg(pg));
  // Stage 0: layer 0 is bf16, so its weights gather in 2 bytes instead of 0.5.
  CHECK(dp_ag_bytes(workloads_test::gen(pe)) - dp_ag_bytes(workloads_test::gen(pg)) == doctest::Approx(1.5 * Pl));
  CHECK(gpt_memory_of_stage0(cfg(pe)).weights_bytes - gpt_memory_of_stage0(cfg(pg)).weights_bytes ==
        doctest::Approx((2.0 - 1.125) * Pl));
}

TEST_CASE("fp4: Megatron-LM's flags import as modelled") {
  const MegatronImport im = import_megatron_args(
      read_megatron_launch("torchrun pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16"
                           " --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --bf16"
                           " --tokenizer-type GPT2BPETokenizer --use-distributed-optimizer"
                           " --fp4-format e2m1 --fp4-recipe nvfp4 --fp4-param-gather --first-last-layers-bf16"
                           " --num-layers-at-start-in-bf16 1 --num-layers-at-end-in-bf16 2",
                           "job.sh", {}),
      8, {});
  CHECK(im.not_modelled.empty());
  CHECK(im.params["fp4_format"] == "e2m1");
  ParamMap pm = params_from_json(im.params, JsonPath{"job.sh", "/workload/params"});
  pm["gpu"] = "gb200";
  const GptConfig c = gpt_config_from_params(pm, "job.sh");
  CHECK(c.fp4());
  CHECK(c.fp4_param_gather);
  CHECK(c.bf16_layer(0));
  CHECK_FALSE(c.bf16_layer(1));
  CHECK(c.bf16_layer(2));
  CHECK(c.bf16_layer(3));
}
