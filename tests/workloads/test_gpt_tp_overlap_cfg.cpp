// Megatron-LM's / Transformer Engine's tensor-parallel overlap settings (tp_comm_overlap_ag / _rs / _rs_dgrad,
// tp_comm_bulk_dgrad, the per-GEMM tp_comm_overlap_cfg), fp8_wgrad and defer_embedding_wgrad_compute: each
// changes the step the way the source says, or is refused as Megatron-LM / Transformer Engine refuse it.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/megatron_args.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

// TP 2, PP 2, DP 2 (8 GPUs), 4 micro-batches, sequence parallel, userbuffers overlap on unless overridden.
ParamMap ovl(ParamMap over = {}) {
  ParamMap p = workloads_test::small_llama(8, 8, {{"tp_comm_overlap", "true"}});
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}

GptConfig cfg(const ParamMap& p) { return gpt_config_from_params(p, "--param"); }

models::ComputeModel cm_h100() {
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec("h100");
  return cm;
}

Trace gen(const ParamMap& p) { return generate_gpt(cfg(p), cm_h100(), "test"); }

gpt_detail::GptStepKernels kernels(const ParamMap& p) { return gpt_detail::gpt_step_kernels(cfg(p), cm_h100(), "test"); }

// Index of the op of `rank` named exactly `name`.
std::uint32_t idx(const Trace& t, const std::string& name, std::size_t rank = 0) {
  const auto& ops = t.ranks.at(rank).ops;
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].name == name) return static_cast<std::uint32_t>(i);
  FAIL("no op " << name);
  return 0u;
}
const Op& op(const Trace& t, const std::string& name, std::size_t rank = 0) { return t.ranks.at(rank).ops[idx(t, name, rank)]; }
bool dep(const Op& o, std::uint32_t d) { return std::find(o.deps.begin(), o.deps.end(), d) != o.deps.end(); }
std::size_t count_prefix(const Trace& t, const std::string& part, std::size_t rank) {
  std::size_t n = 0;
  for (const auto& o : t.ranks.at(rank).ops) n += o.name.find(part) != std::string::npos;
  return n;
}
double ns(double s) { return static_cast<double>(std::llround(s * 1e9)) * 1e-9; }
// The first rank of the last pipeline stage (the one with the loss).
std::size_t last_rank(const Trace& t) {
  for (std::size_t r = 0; r < t.ranks.size(); ++r)
    for (const auto& o : t.ranks[r].ops)
      if (o.name == "mb0.logits.bwd") return r;
  FAIL("no rank with the loss");
  return 0;
}

const double kDefault = 132.0 / 116.0;  // TE's default 16 communication SMs of H100's 132

}  // namespace

TEST_CASE("tp_comm_overlap_ag false: the ring-exchange all-gathers run before their GEMMs, as NCCL's") {
  const Trace on = gen(ovl()), off = gen(ovl({{"tp_comm_overlap_ag", "false"}}));
  // Forward: with the overlap the MLP's compute does not wait for the SP all-gather; without it, it does.
  CHECK_FALSE(dep(op(on, "mb0.l0.fwd.mlp"), idx(on, "mb0.l0.mlp.ag")));
  CHECK(dep(op(off, "mb0.l0.fwd.mlp"), idx(off, "mb0.l0.mlp.ag")));
  CHECK(op(on, "mb0.l0.mlp.ag").sm_ctas == 0);   // userbuffers: the SM cost is in the GEMMs
  CHECK(op(off, "mb0.l0.mlp.ag").sm_ctas != 0);  // NCCL's kernel, charged by the replay
  // Backward: the output gradient's all-gather before proj / fc2 dgrad (the last layer's backward on stage 1).
  const std::size_t L = last_rank(on);
  CHECK_FALSE(dep(op(on, "mb0.l3.bwd.mlp", L), idx(on, "mb0.l3.mlp.bwd.ag", L)));
  CHECK(dep(op(off, "mb0.l3.bwd.mlp", L), idx(off, "mb0.l3.mlp.bwd.ag", L)));
  // The pipelined reduce-scatter and its SM cost stay.
  CHECK(op(off, "mb0.l0.fwd.mlp").duration_s == op(on, "mb0.l0.fwd.mlp").duration_s);
}

TEST_CASE("tp_comm_overlap_rs false: the row-parallel GEMM keeps its SMs and its reduce-scatter follows it") {
  const Trace none = gen(ovl({{"tp_comm_overlap", "false"}})), on = gen(ovl()), off = gen(ovl({{"tp_comm_overlap_rs", "false"}}));
  const auto K = kernels(ovl());
  const double base = op(none, "mb0.l0.fwd.mlp").duration_s;
  CHECK(op(on, "mb0.l0.fwd.mlp").duration_s ==
        doctest::Approx(base + (kDefault - 1.0) * K.layer.fwd_mlp.tp_gemm_seconds).epsilon(1e-6));
  CHECK(op(off, "mb0.l0.fwd.mlp").duration_s == base);
  // The reduce-scatter starts with the compute under the overlap; without it, after the compute.
  CHECK_FALSE(dep(op(on, "mb0.l0.mlp.rs"), idx(on, "mb0.l0.fwd.mlp")));
  CHECK(dep(op(off, "mb0.l0.mlp.rs"), idx(off, "mb0.l0.fwd.mlp")));
  // The all-gather stays overlapped.
  CHECK_FALSE(dep(op(off, "mb0.l0.fwd.mlp"), idx(off, "mb0.l0.mlp.ag")));
}

TEST_CASE("tp_comm_bulk_dgrad false: the input re-gather beside the dgrad is NCCL's and the dgrad keeps its SMs") {
  const auto K = kernels(ovl({{"tp_comm_bulk_dgrad", "false"}}));
  const Trace on = gen(ovl()), off = gen(ovl({{"tp_comm_bulk_dgrad", "false"}}));
  const std::string d = "mb0.l3.bwd.mlp.dgrad_in", w = "mb0.l3.bwd.mlp.wgrad_in";
  const std::size_t L = last_rank(on);
  CHECK(op(off, d, L).duration_s == doctest::Approx(K.layer.dgrad_mlp_in.seconds).epsilon(1e-6));
  CHECK(op(on, d, L).duration_s == doctest::Approx(K.layer.dgrad_mlp_in.seconds * kDefault).epsilon(1e-6));
  CHECK(op(off, w, L).duration_s == op(on, w, L).duration_s);  // the bulk wgrad overlap stays
  CHECK(op(on, "mb0.l3.mlp.bwd.ag.input", L).sm_ctas == 0);
  CHECK(op(off, "mb0.l3.mlp.bwd.ag.input", L).sm_ctas != 0);
}

TEST_CASE("tp_comm_overlap_rs_dgrad: the input-gradient reduce-scatter runs with the dgrad, no bulk overlap") {
  const ParamMap p = ovl({{"tp_comm_overlap_rs_dgrad", "true"}});
  const GptConfig c = cfg(p);
  CHECK_FALSE(c.tp_comm_bulk_wgrad);  // TE: ub_bulk_wgrad / ub_bulk_dgrad only without ub_overlap_rs_dgrad
  CHECK_FALSE(c.tp_comm_bulk_dgrad);
  const auto K = kernels(p);
  const Trace on = gen(ovl()), rs = gen(p);
  const std::string d = "mb0.l3.bwd.mlp.dgrad_in", w = "mb0.l3.bwd.mlp.wgrad_in";
  const std::size_t L = last_rank(on);
  CHECK(op(rs, d, L).duration_s == doctest::Approx(K.layer.dgrad_mlp_in.seconds * kDefault).epsilon(1e-6));
  CHECK(op(rs, w, L).duration_s == doctest::Approx(K.layer.wgrad_mlp_in.seconds).epsilon(1e-6));
  // The reduce-scatter does not wait for the dgrad GEMM (it is pipelined with its chunks); by default it
  // follows the dgrad (beside the wgrad).
  CHECK_FALSE(dep(op(rs, "mb0.l3.mlp.bwd.rs", L), idx(rs, d, L)));
  CHECK(idx(rs, "mb0.l3.mlp.bwd.rs", L) < idx(rs, d, L));
  CHECK(idx(on, "mb0.l3.mlp.bwd.rs", L) > idx(on, d, L));
  CHECK(op(rs, "mb0.l3.mlp.bwd.ag.input", L).sm_ctas != 0);  // the re-gather is NCCL's
}

TEST_CASE("tp_comm_overlap_cfg: num_sm and set_sm_margin set the SM share the GEMM loses") {
  const Trace none = gen(ovl({{"tp_comm_overlap", "false"}}));
  const auto K = kernels(ovl());
  const double base = op(none, "mb0.l0.fwd.mlp").duration_s, tg = K.layer.fwd_mlp.tp_gemm_seconds;
  const Trace sm32 = gen(ovl({{"tp_comm_overlap_cfg", R"({"fc2_fprop": {"num_sm": 32}})"}}));
  CHECK(op(sm32, "mb0.l0.fwd.mlp").duration_s == doctest::Approx(base + (132.0 / 100.0 - 1.0) * tg).epsilon(1e-6));
  const Trace nomargin = gen(ovl({{"tp_comm_overlap_cfg", R"({"fc2_fprop": {"set_sm_margin": false}})"}}));
  CHECK(op(nomargin, "mb0.l0.fwd.mlp").duration_s == base);
  // The entry of one GEMM leaves the others at TE's defaults: the attention block's projection still pays.
  const Trace dflt = gen(ovl());
  CHECK(op(nomargin, "mb0.l0.fwd.attn").duration_s == op(dflt, "mb0.l0.fwd.attn").duration_s);
  // The backward input projection: qkv_dgrad / fc1_wgrad given 8 SMs.
  const Trace b8 = gen(ovl({{"tp_comm_overlap_cfg", R"({"fc1_dgrad": {"num_sm": 8}, "fc1_wgrad": {"num_sm": 8}})"}}));
  const std::size_t L = last_rank(b8);
  CHECK(op(b8, "mb0.l3.bwd.mlp.dgrad_in", L).duration_s ==
        doctest::Approx(K.layer.dgrad_mlp_in.seconds * 132.0 / 124.0).epsilon(1e-6));
  CHECK(op(b8, "mb0.l3.bwd.mlp.wgrad_in", L).duration_s ==
        doctest::Approx(K.layer.wgrad_mlp_in.seconds * 132.0 / 124.0).epsilon(1e-6));
  // An empty object is TE's defaults: the same trace.
  const Trace empty = gen(ovl({{"tp_comm_overlap_cfg", "{}"}}));
  CHECK(op(empty, "mb0.l0.fwd.mlp").duration_s == op(dflt, "mb0.l0.fwd.mlp").duration_s);
  // TE's defaults per GEMM (initialize_ub): ring exchange over the TP size on 1 SM, else 4 splits on 16 SMs.
  const GptConfig c = cfg(ovl());
  CHECK(c.ub("qkv_fprop").method == "ring_exchange");
  CHECK(c.ub("qkv_fprop").num_splits == 2);
  CHECK(c.ub_sm_factor("qkv_fprop") == 1.0);
  CHECK(c.ub("proj_fprop").method == "pipeline");
  CHECK(c.ub("fc1_wgrad").method == "bulk");
  CHECK(c.ub_sm_factor("fc1_wgrad") == kDefault);
}

TEST_CASE("tp_comm_overlap_cfg: refused as Transformer Engine refuses it, unknown names and keys are errors") {
  auto err = [](const std::string& json, ParamMap extra = {}) {
    return error_of([&] {
      ParamMap p = ovl({{"tp_comm_overlap_cfg", json}});
      for (const auto& [k, v] : extra) p[k] = v;
      cfg(p);
    });
  };
  CHECK(err(R"({"qkv_fprop": {"method": "pipeline"}})").find("tp_comm_overlap_cfg/qkv_fprop/method: pipeline is not supported for an all-gather") != std::string::npos);
  CHECK(err(R"({"qkv_dgrad": {"method": "ring_exchange"}, "qkv_wgrad": {"num_sm": 8}})")
            .find("tp_comm_overlap_cfg/qkv_wgrad: cannot be configured when qkv_dgrad uses a non-bulk method") != std::string::npos);
  CHECK(err(R"({"proj_wgrad": {"method": "bulk"}})").find("proj_wgrad/method: must be external") != std::string::npos);
  CHECK(err(R"({"fc1_fprop": {"method": "external"}})").find("external is only proj_wgrad's and fc2_wgrad's") != std::string::npos);
  CHECK(err(R"({"fc2_fprop": {"atomic_gemm": true}})").find("fc2_fprop/atomic_gemm: atomic GEMM overlap needs FP8") != std::string::npos);
  CHECK(err(R"({"qkv_fprop": {"atomic_gemm": true}})", {{"precision", "fp8"}})
            .find("tp_comm_overlap_cfg/proj_fprop: must use atomic_gemm with ring_exchange as qkv_fprop does") != std::string::npos);
  CHECK(err(R"({"qkv_fprop": {"atomic_gemm": true}, "proj_fprop": {"atomic_gemm": true, "method": "ring_exchange"}})",
            {{"precision", "fp8"}}) == "");
  CHECK(err(R"({"fc3_fprop": {}})").find("unknown GEMM 'fc3_fprop'") != std::string::npos);
  CHECK(err(R"({"fc2_fprop": {"num_sms": 8}})").find("fc2_fprop/num_sms: unknown userbuffers setting") != std::string::npos);
  CHECK(err(R"({"fc2_fprop": {"num_sm": "8"}})").find("fc2_fprop/num_sm: expected an integer >= 1") != std::string::npos);
  CHECK(err(R"({"fc2_fprop": {"num_sm": 132}})").find("leaves the GEMM no SM") != std::string::npos);
  CHECK(err("ub_cfg.yaml").find("tp_comm_overlap_cfg: expected an object of Transformer Engine userbuffers settings") != std::string::npos);
  // A scenario's string (a YAML path) is refused the same way.
  Json params = Json::object();
  params["tp_comm_overlap_cfg"] = "ub_cfg.yaml";
  ParamMap pm = params_from_json(params, JsonPath{"s.json", "/workload/params"});
  CHECK(error_of([&] { ParamReader r(pm, "s.json"); r.object("tp_comm_overlap_cfg", "an object"); }).find("expected an object") != std::string::npos);
  // A scenario's object is kept as one.
  params["tp_comm_overlap_cfg"] = Json::parse(R"({"fc2_fprop": {"num_sm": 32}})");
  pm = params_from_json(params, JsonPath{"s.json", "/workload/params"});
  ParamReader r(pm, "s.json");
  CHECK(r.object("tp_comm_overlap_cfg", "an object")["fc2_fprop"]["num_sm"] == 32);
  // `--param tp_comm_overlap_cfg='{...}'` on an imported run: the text becomes the scenario's object.
  CHECK(param_value_json(R"({"fc2_fprop": {"num_sm": 32}})").is_object());
  CHECK(param_value_json("{not json").is_string());
  // The userbuffers settings have no meaning under PyTorch's async TP.
  CHECK(error_of([] { cfg(ovl({{"tp_comm_overlap_impl", "symmetric_memory"}, {"torch_compile", "true"}, {"use_torch_fsdp2", "true"},
                               {"tp_comm_overlap_ag", "false"}})); })
            .find("tp_comm_overlap_ag: is a Transformer Engine userbuffers setting") != std::string::npos);
}

TEST_CASE("fp8_wgrad false: the weight-gradient GEMMs in bf16 under the delayed FP8 recipe only") {
  // Llama-3-8B's layer shape (GEMMs large enough to run near their peak rate).
  const ParamMap l8 = {{"hidden_size", "4096"}, {"ffn_hidden_size", "14336"}, {"num_attention_heads", "32"},
                       {"num_query_groups", "8"}, {"seq_length", "4096"},
                       {"precision", "fp8"}};
  ParamMap l8bw = l8;
  l8bw["fp8_wgrad"] = "false";
  const auto f8 = kernels(ovl(l8)), bw = kernels(ovl(l8bw));
  // bf16 GEMMs at H100's dense bf16 peak, half the FP8 one: the wgrad GEMMs take longer, the forward is unchanged.
  CHECK(bw.layer.wgrad_mlp.seconds > 1.5 * f8.layer.wgrad_mlp.seconds);
  CHECK(bw.layer.wgrad_mlp_in.seconds > 1.5 * f8.layer.wgrad_mlp_in.seconds);
  CHECK(bw.layer.fwd_mlp.seconds == f8.layer.fwd_mlp.seconds);
  CHECK(bw.layer.dgrad_mlp_in.seconds == f8.layer.dgrad_mlp_in.seconds);
  CHECK(bw.layer.bwd_mlp.seconds - f8.layer.bwd_mlp.seconds ==
        doctest::Approx(bw.layer.wgrad_mlp.seconds - f8.layer.wgrad_mlp.seconds).epsilon(1e-9));
  // Megatron passes override_linear_precision to the delayed recipe only (get_fp8_recipe): no effect otherwise.
  const auto tw = kernels(ovl({{"precision", "fp8"}, {"fp8_recipe", "tensorwise"}}));
  const auto tw_bw = kernels(ovl({{"precision", "fp8"}, {"fp8_recipe", "tensorwise"}, {"fp8_wgrad", "false"}}));
  CHECK(tw_bw.layer.bwd_mlp.seconds == tw.layer.bwd_mlp.seconds);
  CHECK(kernels(ovl({{"fp8_wgrad", "false"}})).layer.bwd_mlp.seconds == kernels(ovl()).layer.bwd_mlp.seconds);
}

TEST_CASE("defer_embedding_wgrad_compute: the output layer's wgrad GEMMs wait for the pipeline flush") {
  const ParamMap on = ovl({{"defer_embedding_wgrad_compute", "true"}, {"overlap_grad_reduce", "true"}});
  const Trace base = gen(ovl({{"overlap_grad_reduce", "true"}})), def = gen(on);
  const auto K = kernels(on);
  const std::size_t last = last_rank(def);
  // Each micro-batch's loss backward loses the wgrad GEMM; the stage runs them all after its last backward.
  CHECK(K.logits_wgrad.seconds > 0.2 * K.logits_bwd.seconds);
  CHECK(op(def, "mb0.logits.bwd", last).duration_s ==
        doctest::Approx(op(base, "mb0.logits.bwd", last).duration_s - K.logits_wgrad.seconds).epsilon(1e-6));
  CHECK(count_prefix(def, ".logits.wgrad.deferred", last) == 4);
  CHECK(count_prefix(def, ".logits.wgrad.deferred", 0) == 0);  // the first stage has no output layer
  CHECK(op(def, "mb3.logits.wgrad.deferred", last).duration_s == ns(K.logits_wgrad.seconds));
  // The first gradient bucket (it holds the output layer) is reduced after the drain, not with the last layer.
  const std::uint32_t drained = idx(def, "mb3.logits.wgrad.deferred", last);
  // (through the bucket's 1 / DP gradient scale, which the reduction waits for)
  CHECK(dep(op(def, "dp.bucket0.ar", last), idx(def, "dp.bucket0.scale", last)));
  CHECK(dep(op(def, "dp.bucket0.scale", last), drained));
  CHECK_FALSE(dep(op(base, "dp.bucket0.scale", last), drained));
  // wgrad_deferral_limit: only the first micro-batches wait; the others compute it in their backward.
  const Trace lim = gen(ovl({{"defer_embedding_wgrad_compute", "true"}, {"wgrad_deferral_limit", "2"}}));
  CHECK(count_prefix(lim, ".logits.wgrad.deferred", last) == 2);
  CHECK(op(lim, "mb3.logits.bwd", last).duration_s == op(base, "mb3.logits.bwd", last).duration_s);
  CHECK(op(lim, "mb1.logits.bwd", last).duration_s == op(def, "mb1.logits.bwd", last).duration_s);
  // The deferred micro-batches' output-layer input and logit gradient stay in memory until the flush.
  CHECK(gpt_memory_per_gpu(cfg(on)).activations_bytes > gpt_memory_per_gpu(cfg(ovl())).activations_bytes);
  // Megatron-LM refuses it without pipeline parallelism, and a negative limit.
  CHECK(error_of([] { cfg(ovl({{"defer_embedding_wgrad_compute", "true"}, {"pipeline_model_parallel_size", "1"}})); })
            .find("defer_embedding_wgrad_compute: needs pipeline_model_parallel_size > 1") != std::string::npos);
  CHECK(error_of([] { cfg(ovl({{"defer_embedding_wgrad_compute", "true"}, {"wgrad_deferral_limit", "-1"}})); })
            .find("wgrad_deferral_limit") != std::string::npos);
}

TEST_CASE("fabricsim import megatron: the userbuffers flags and the --tp-comm-overlap-cfg YAML") {
  const std::string dir = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/tp-comm-overlap/";
  auto import = [&](const std::string& extra) {
    return import_megatron_args(
        read_megatron_launch("torchrun pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16"
                             " --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --bf16"
                             " --tokenizer-type GPT2BPETokenizer --tensor-model-parallel-size 2"
                             " --pipeline-model-parallel-size 2 --sequence-parallel" + extra,
                             dir + "job.sh", {}),
        8, {});
  };
  const MegatronImport im = import(" --tp-comm-overlap --tp-comm-overlap-cfg ub_cfg.yaml --disable-tp-comm-overlap-ag"
                                   " --tp-comm-overlap-rs-dgrad --disable-tp-comm-bulk-dgrad --no-fp8-wgrad"
                                   " --defer-embedding-wgrad-compute --wgrad-deferral-limit 2 --no-tp-comm-split-ag");
  CHECK(im.not_modelled.empty());
  CHECK(im.params["tp_comm_overlap_ag"] == false);
  CHECK(im.params["tp_comm_overlap_rs_dgrad"] == true);
  CHECK(im.params["tp_comm_bulk_dgrad"] == false);
  CHECK(im.params["fp8_wgrad"] == false);
  CHECK(im.params["defer_embedding_wgrad_compute"] == true);
  CHECK(im.params["wgrad_deferral_limit"] == 2);
  CHECK(std::find(im.ignored.begin(), im.ignored.end(), "--no-tp-comm-split-ag") != im.ignored.end());
  // The YAML as TE reads it (yaml.safe_load: True / false are booleans, numbers integers).
  CHECK(im.params["tp_comm_overlap_cfg"]["fc2_fprop"]["num_sm"] == 32);
  CHECK(im.params["tp_comm_overlap_cfg"]["fc2_fprop"]["set_sm_margin"] == true);
  CHECK(im.params["tp_comm_overlap_cfg"]["proj_fprop"]["set_sm_margin"] == false);
  ParamMap pm = params_from_json(im.params, JsonPath{"job.sh", "/workload/params"});
  pm["gpu"] = "h100";
  const GptConfig c = gpt_config_from_params(pm, "job.sh");
  CHECK(c.ub("fc2_fprop").num_sm == 32);
  CHECK(c.ub_sm_factor("proj_fprop") == 1.0);
  // Without --tp-comm-overlap Megatron never reads the file: listed as ignored, not read.
  const MegatronImport no = import(" --tp-comm-overlap-cfg missing.yaml");
  CHECK_FALSE(no.params.contains("tp_comm_overlap_cfg"));
  CHECK(std::find(no.ignored.begin(), no.ignored.end(), "--tp-comm-overlap-cfg missing.yaml") != no.ignored.end());
  CHECK(error_of([&] { import(" --tp-comm-overlap --tp-comm-overlap-cfg missing.yaml"); })
            .find("--tp-comm-overlap-cfg: cannot read") != std::string::npos);
  CHECK(error_of([&] { import(" --tp-comm-overlap --tp-comm-overlap-cfg not_a_mapping.yaml"); })
            .find("expected a mapping of Transformer Engine GEMM names") != std::string::npos);
  CHECK(error_of([&] { import(" --defer-embedding-wgrad-compute --no-gradient-accumulation-fusion"); })
            .find("Megatron-LM refuses it") != std::string::npos);
}
