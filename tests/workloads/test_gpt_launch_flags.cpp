// Launch flags of Megatron-LM and NeMo that a user pastes (docs/workloads.md "Gradient averaging", "Megatron-LM
// launch scripts", "FLOPs and MFU"): --no-gradient-reduce-div-fusion (Megatron-FSDP's 1 / DP multiply, priced by
// hand with the same compute model), the CUDA-graph flags (accepted with the not-modelled warning, no effect on the
// trace), and NeMo's logged FLOP count (flops_convention nemo-<family>, computed by hand).
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <algorithm>
#include <string>
#include <tuple>

#include "models/compute.hpp"
#include "sim/base/input_file.hpp"
#include "workloads/gpt.hpp"
#include "workloads/nemo_config.hpp"
#include "workloads/params.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;
using models::KernelDesc;
using models::MemoryKernel;
using models::Precision;

namespace {

// The small Llama-shaped model in bf16 on 4 H100s: TP 2, PP 1, so DP 2.
ParamMap small(ParamMap over = {}) {
  return workloads_test::with(
      workloads_test::small_llama(4, 4, {{"precision", "bf16"}, {"pipeline_model_parallel_size", "1"}}), over);
}

GptConfig cfg(const ParamMap& p) { return gpt_config_from_params(p, "--param"); }

const models::ComputeModel& cm() { return workloads_test::h100(); }

int index_of(const RankTrace& r, const std::string& name) {
  for (std::size_t i = 0; i < r.ops.size(); ++i)
    if (r.ops[i].name == name) return static_cast<int>(i);
  return -1;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Checks every data-parallel gradient collective of rank 0 whose name ends in `coll_tail`: the `.scale` op before it
// (<layer>.fsdp.rs.scale, dp.bucket<k>.scale), on the collective's stream, in its deps, priced as one in-place pass over
// the collective's bytes. Returns how many collectives had one.
int scaled(const Trace& t, const std::string& coll_tail, Precision prec) {
  const RankTrace& r = t.ranks.at(0);
  int n = 0;
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    const Op& coll = r.ops[i];
    if (coll.kind != OpKind::Collective || !ends_with(coll.name, coll_tail)) continue;
    if (coll.name.rfind("dp.bucket", 0) != 0 && coll.name.find(".fsdp.rs") == std::string::npos) continue;  // not DP
    if (ends_with(coll.name, ".replica.ar")) continue;  // HSDP's all-reduce over the replicas: no scale of its own
    CAPTURE(coll.name);
    const std::string scale_name = ends_with(coll.name, ".fsdp.rs") || ends_with(coll.name, ".fsdp.rs.experts")
                                       ? coll.name + ".scale"
                                       : coll.name.substr(0, coll.name.rfind('.')) + ".scale";
    const int s = index_of(r, scale_name);
    REQUIRE(s >= 0);
    const Op& sc = r.ops[static_cast<std::size_t>(s)];
    CHECK(sc.kind == OpKind::Compute);
    CHECK(sc.stream == coll.stream);
    CHECK(std::find(coll.deps.begin(), coll.deps.end(), static_cast<std::uint32_t>(s)) != coll.deps.end());
    // grad_data.mul_(scaling_factor): read and write the bucket in its reduction dtype.
    CHECK(sc.duration_s ==
          doctest::Approx(cm().kernel_time_s(KernelDesc::memory(MemoryKernel::Elementwise, 2.0 * coll.bytes, prec))).epsilon(1e-3));
    CHECK(sc.duration_s > 0);
    ++n;
  }
  return n;
}

int count_suffix(const Trace& t, const std::string& tail) {
  int n = 0;
  for (const Op& op : t.ranks.at(0).ops) n += ends_with(op.name, tail) ? 1 : 0;
  return n;
}

// The data-parallel bucket collectives dp.bucket<k><tail> of rank 0 (not HSDP's dp.bucket<k>.replica.ar).
int count_buckets(const Trace& t, const std::string& tail) {
  int n = 0;
  for (const Op& op : t.ranks.at(0).ops)
    n += op.name.rfind("dp.bucket", 0) == 0 && ends_with(op.name, tail) && !ends_with(op.name, ".replica.ar") ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("gradient_reduce_div_fusion: Megatron-FSDP's 1/DP multiply where NCCL's premul-sum does not take it") {
  // Megatron-FSDP (optim_grads_params): one gradient reduce-scatter per layer and micro-batch.
  const ParamMap fsdp = small({{"data_parallel_sharding_strategy", "optim_grads_params"}});
  REQUIRE(cfg(fsdp).grad_reduce_in_fp32);  // bf16 parameters: fp32 gradients (Megatron-LM's rule)
  ParamMap unfused = fsdp;
  unfused["gradient_reduce_div_fusion"] = "false";
  const Trace t0 = workloads_test::gen(fsdp), t1 = workloads_test::gen(unfused);
  const int rs = count_suffix(t0, ".fsdp.rs");
  CHECK(rs == 4 * 2);  // 4 layers x 2 micro-batches (global batch 4 over DP 2)
  // Fused (the default) with fp32 gradients: the scale rides in the collective (premul-sum), no kernel.
  CHECK(count_suffix(t0, ".scale") == 0);
  // Unfused: a multiply before each reduce-scatter, on its stream, over its fp32 bytes.
  CHECK(scaled(t1, ".fsdp.rs", Precision::FP32) == rs);
  CHECK(t1.ranks.at(0).ops.size() == t0.ranks.at(0).ops.size() + static_cast<std::size_t>(rs));
  CHECK(workloads_test::compute_s(t1.ranks.at(0)) > workloads_test::compute_s(t0.ranks.at(0)));
  // bf16 gradients: premul-sum is not used for bf16 (grad_data.dtype != torch.bfloat16), so the multiply runs
  // even with the fusion on.
  ParamMap bf16 = fsdp;
  bf16["grad_reduce_in_bf16"] = "true";
  CHECK(scaled(workloads_test::gen(bf16), ".fsdp.rs", Precision::BF16) == rs);
  // fp16 gradients (fp16 parameters): fused into the collective.
  ParamMap fp16 = fsdp;
  fp16["precision"] = "fp16";
  CHECK(count_suffix(workloads_test::gen(fp16), ".scale") == 0);
  // Averaged in the collective (ReduceOp.AVG): no multiply either way.
  ParamMap avg = unfused;
  avg["ddp_average_in_collective"] = "true";
  CHECK(count_suffix(workloads_test::gen(avg), ".scale") == 0);
  // Megatron-FSDP's optim_grads strategy reduces the stage's buckets (dp.bucket<k>.rs): the same multiply before
  // each, on the data-parallel stream.
  ParamMap og = unfused;
  og["data_parallel_sharding_strategy"] = "optim_grads";
  CHECK(scaled(workloads_test::gen(og), ".rs", Precision::FP32) >= 1);
  // Megatron-Core's DDP and torch FSDP2 do not read the flag: the same trace.
  for (const ParamMap& base : {small(), small({{"use_torch_fsdp2", "true"}, {"untie_embeddings_and_output_weights", "true"}})}) {
    ParamMap off = base;
    off["gradient_reduce_div_fusion"] = "false";
    const Trace a = workloads_test::gen(base), b = workloads_test::gen(off);
    CHECK(a.ranks.at(0).ops.size() == b.ranks.at(0).ops.size());
    CHECK(workloads_test::compute_s(a.ranks.at(0)) == workloads_test::compute_s(b.ranks.at(0)));
  }
  // The flag imports as the key.
  const auto imp = workloads_test::import_small("--use-megatron-fsdp --no-gradient-reduce-div-fusion");
  CHECK(imp.params.at("gradient_reduce_div_fusion") == false);
  CHECK(imp.not_modelled.empty());
}

TEST_CASE("use_megatron_fsdp with no_shard: Megatron-FSDP's all-reduce with its own scale rule, not DDP's") {
  // Megatron-Core's DDP (no_shard, no use_megatron_fsdp): its 1 / DP multiply runs on the compute stream
  // whatever gradient_reduce_div_fusion says.
  const Trace ddp = workloads_test::gen(small());
  const int ddp_scale = index_of(ddp.ranks.at(0), "dp.bucket0.scale");
  REQUIRE(ddp_scale >= 0);
  const int ddp_ar = index_of(ddp.ranks.at(0), "dp.bucket0.ar");
  REQUIRE(ddp_ar >= 0);
  CHECK(ddp.ranks.at(0).ops[static_cast<std::size_t>(ddp_scale)].stream != ddp.ranks.at(0).ops[static_cast<std::size_t>(ddp_ar)].stream);
  // Megatron-FSDP unsharded: the same all-reduces (no_shard), but gradient_reduce_preprocessing's rule: fp32
  // gradients with the fusion on go to NCCL's premul-sum, so no multiply at all.
  const ParamMap mf = small({{"use_megatron_fsdp", "true"}});
  REQUIRE(cfg(mf).megatron_fsdp());
  REQUIRE_FALSE(cfg(mf).megatron_ddp());
  const Trace t0 = workloads_test::gen(mf);
  const int ars = count_buckets(t0, ".ar");
  CHECK(ars >= 1);
  CHECK(count_buckets(t0, ".rs") == 0);  // nothing sharded
  CHECK(count_suffix(t0, ".scale") == 0);
  // Fusion off, or bf16 gradients: the multiply before each all-reduce, on the all-reduce's stream.
  ParamMap unfused = mf;
  unfused["gradient_reduce_div_fusion"] = "false";
  CHECK(scaled(workloads_test::gen(unfused), ".ar", Precision::FP32) == ars);
  ParamMap bf16 = mf;
  bf16["grad_reduce_in_bf16"] = "true";
  CHECK(scaled(workloads_test::gen(bf16), ".ar", Precision::BF16) == ars);
  // Megatron-FSDP's no_shard shards nothing: the distributed optimizer is refused, as is the other FSDP wrapper.
  ParamMap dist = mf;
  dist["use_distributed_optimizer"] = "true";
  CHECK_THROWS_WITH_AS(cfg(dist), doctest::Contains("use_distributed_optimizer"), InputError);
  ParamMap both = mf;
  both["use_torch_fsdp2"] = "true";
  both["untie_embeddings_and_output_weights"] = "true";
  CHECK_THROWS_WITH_AS(cfg(both), doctest::Contains("use_megatron_fsdp"), InputError);
  // The launch flags: --use-megatron-fsdp with no_shard imports as the key, and the --use-distributed-optimizer
  // Megatron-LM forces on has no effect there.
  const auto imp = workloads_test::import_small(
      "--use-megatron-fsdp --data-parallel-sharding-strategy no_shard --use-distributed-optimizer");
  CHECK(imp.params.at("use_megatron_fsdp") == true);
  CHECK(imp.params.at("data_parallel_sharding_strategy") == "no_shard");
  CHECK_FALSE(imp.params.contains("use_distributed_optimizer"));
  CHECK(imp.not_modelled.empty());
  // Sharded strategies keep their params as before (the strategy alone says Megatron-FSDP).
  CHECK_FALSE(workloads_test::import_small("--use-megatron-fsdp").params.contains("use_megatron_fsdp"));
}

TEST_CASE("Megatron-FSDP HSDP: each bucket all-reduced over the replicas after its shard reduction, unscaled") {
  // 8 H100s, TP 2: DP 4 in 2 replicas of 2 (num_distributed_optimizer_instances 2); global batch 8: 2 micro-batches.
  const ParamMap base = workloads_test::small_llama(
      8, 8, {{"precision", "bf16"}, {"pipeline_model_parallel_size", "1"}, {"num_distributed_optimizer_instances", "2"},
             {"gradient_reduce_div_fusion", "false"}});
  auto replica_comm = [](const Trace& t) {
    for (std::size_t i = 0; i < t.comms.size(); ++i)
      if (t.comms[i].ranks.size() == 2 && t.comms[i].ranks[1] - t.comms[i].ranks[0] == 4) return static_cast<std::int32_t>(i);
    return std::int32_t{-1};
  };
  // Checks each replica all-reduce (name ends in `ar_tail`): it follows the collective `coll_of(name)` (its deps),
  // on another stream, over the replica group, moving `fraction` of that collective's bytes, with no scale of its
  // own; returns how many there are.
  auto outer = [&](const Trace& t, const std::string& ar_tail, auto coll_of, double fraction) {
    const RankTrace& r = t.ranks.at(0);
    int n = 0;
    for (std::size_t i = 0; i < r.ops.size(); ++i) {
      const Op& ar = r.ops[i];
      if (!ends_with(ar.name, ar_tail)) continue;
      CAPTURE(ar.name);
      CHECK(ar.kind == OpKind::Collective);
      CHECK(ar.coll == CollOp::AllReduce);
      CHECK(ar.comm == replica_comm(t));
      CHECK(index_of(r, ar.name + ".scale") < 0);
      int inner = -1;
      for (auto d : ar.deps)
        if (r.ops[d].name == coll_of(ar.name)) inner = static_cast<int>(d);
      REQUIRE(inner >= 0);
      const Op& in = r.ops[static_cast<std::size_t>(inner)];
      CHECK(in.stream != ar.stream);
      CHECK(ar.bytes == doctest::Approx(fraction * in.bytes));
      ++n;
    }
    return n;
  };
  const auto strip = [](const std::string& name, const std::string& tail, const std::string& with) {
    return name.substr(0, name.size() - tail.size()) + with;
  };
  // optim_grads_params: per layer, on the last micro-batch only, the reduced shard (1 / 2 of the layer).
  ParamMap ogp = base;
  ogp["data_parallel_sharding_strategy"] = "optim_grads_params";
  const Trace t = workloads_test::gen(ogp);
  CHECK(replica_comm(t) >= 0);
  CHECK(outer(t, ".fsdp.ar", [&](const std::string& n) { return strip(n, ".fsdp.ar", ".fsdp.rs"); }, 0.5) == 4);
  CHECK(scaled(t, ".fsdp.rs", Precision::FP32) == 4 * 2);  // the only scale: 1 / DP before each shard reduce-scatter
  CHECK(count_suffix(t, ".scale") == 4 * 2);
  CHECK(index_of(t.ranks.at(0), "dp.replica.ar") < 0);  // not one all-reduce at the step's end
  // The optimizer waits for the replica all-reduces (the join on their stream).
  const int join = index_of(t.ranks.at(0), "fsdp.ar.done");
  REQUIRE(join >= 0);
  for (const Op& op : t.ranks.at(0).ops)
    if (ends_with(op.name, ".fsdp.ar")) CHECK(op.stream == t.ranks.at(0).ops[static_cast<std::size_t>(join)].stream);
  // optim_grads: the shard of each bucket; optim and no_shard: the whole bucket (the gradient buffer is not
  // distributed there).
  for (const auto& [strategy, coll, fraction] :
       {std::tuple<std::string, std::string, double>{"optim_grads", ".rs", 0.5}, {"optim", ".rs", 1.0}, {"no_shard", ".ar", 1.0}}) {
    CAPTURE(strategy);
    ParamMap q = base;
    q["data_parallel_sharding_strategy"] = strategy;
    if (strategy == "no_shard") q["use_megatron_fsdp"] = "true";
    const Trace tq = workloads_test::gen(q);
    const int n = outer(tq, ".replica.ar", [&](const std::string& nm) { return strip(nm, ".replica.ar", coll); }, fraction);
    CHECK(n >= 1);
    CHECK(scaled(tq, coll, Precision::FP32) == n);
    CHECK(count_suffix(tq, ".scale") == n);
    CHECK(count_buckets(tq, coll) == n);  // one replica all-reduce per bucket
    CHECK(index_of(tq.ranks.at(0), "dp.replica.ar") < 0);
    // The optimizer step waits for every replica all-reduce.
    const int step = index_of(tq.ranks.at(0), "optimizer.step");
    REQUIRE(step >= 0);
    const auto& deps = tq.ranks.at(0).ops[static_cast<std::size_t>(step)].deps;
    CHECK(std::find(deps.begin(), deps.end(), static_cast<std::uint32_t>(index_of(tq.ranks.at(0), "dp.bucket0.replica.ar"))) != deps.end());
  }
  // Megatron-Core's DDP with the distributed optimizer's instances keeps its single all-reduce at the end.
  ParamMap ddp = base;
  ddp["use_distributed_optimizer"] = "true";
  CHECK(index_of(workloads_test::gen(ddp).ranks.at(0), "dp.replica.ar") >= 0);
}

TEST_CASE("CUDA graphs: the flags are accepted with the not-modelled warning and change nothing simulated") {
  // fabricsim prices each kernel's in-graph launch (0.85 us, kernels2.csv) whether captured or not and no host-side
  // launch time, so capturing changes no op: every spelling is listed as not modelled.
  const auto plain = workloads_test::import_small("");
  for (const std::string flags : {"--enable-cuda-graph", "--external-cuda-graph", "--cuda-graph-impl local",
                                  "--cuda-graph-impl transformer_engine --cuda-graph-modules attn mlp",
                                  "--external-cuda-graph --cuda-graph-scope attn"}) {
    CAPTURE(flags);
    const auto imp = workloads_test::import_small(flags);
    CHECK(imp.params == plain.params);
    CHECK_FALSE(imp.not_modelled.empty());
    for (const auto& f : imp.not_modelled) CHECK(f.find("cuda-graph") != std::string::npos);
  }
  CHECK(workloads_test::import_small("--external-cuda-graph --cuda-graph-scope attn").not_modelled.size() == 2);
  // NeMo's enable_cuda_graph and external_cuda_graph: the same flags, listed by their YAML paths.
  const std::string path = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nemo-configs/megatron_gpt_config.yaml";
  const std::string text = read_input_file(path);
  const Json base = scenario_for_nemo(path, text, "dgx-h100", {}, false);
  for (const std::string key : {"enable_cuda_graph", "external_cuda_graph"}) {
    CAPTURE(key);
    std::string t = text;
    const std::string from = "  transformer_engine: False";
    const auto at = t.find(from);
    REQUIRE(at != std::string::npos);
    t.insert(at, "  " + key + ": True\n");
    const Json on = scenario_for_nemo(path, t, "dgx-h100", {}, false);
    CHECK(on["workload"]["params"] == base["workload"]["params"]);
    CHECK(on["workload"]["notes"].dump().find("model." + key) != std::string::npos);
  }
}

TEST_CASE("CUDA graphs: the combinations Megatron-LM refuses are errors naming the line and Megatron's words") {
  // validate_args (megatron/training/arguments.py), TransformerConfig.__post_init__ (transformer_config.py) and
  // cuda_graph_config.py at NVIDIA/Megatron-LM@d98e8a64. Each: one line, the script's line, the combination, the quote.
  auto refused = [](const std::string& flags, const std::string& expect) {
    CAPTURE(flags);
    try {
      workloads_test::import_small(flags);
      FAIL("accepted: " << flags);
    } catch (const InputError& e) {
      const std::string msg = e.what();
      CHECK(msg.find("job.sh:1: ") != std::string::npos);
      CHECK(msg.find("Megatron-LM") != std::string::npos);
      CHECK(msg.find("@d98e8a64") != std::string::npos);
      CHECK(msg.find(expect) != std::string::npos);
      CHECK(msg.find('\n') == std::string::npos);
    }
  };
  // The deprecated switches next to --cuda-graph-impl, and both at once.
  refused("--enable-cuda-graph --cuda-graph-impl local",
          "--enable-cuda-graph with --cuda-graph-impl local: Megatron-LM refuses it (validate_args, "
          "megatron/training/arguments.py @d98e8a64: \"Do not use --enable-cuda-graph or --external-cuda-graph with "
          "--cuda-graph-impl.\")");
  refused("--enable-cuda-graph --external-cuda-graph", "cannot be enabled at the same time.");
  refused("--cuda-graph-scope attn --cuda-graph-modules mlp", "--cuda-graph-scope and --cuda-graph-modules cannot be used together.");
  refused("--cuda-graph-impl local --cuda-graph-modules full attn", "full scope cannot be used with other scopes.");
  refused("--cuda-graph-impl transformer_engine --cuda-graph-modules full_iteration",
          "cuda_graph_modules='full_iteration' cannot be combined with cuda_graph_impl='transformer_engine'.");
  refused("--cuda-graph-impl transformer_engine --inference-cuda-graph-scope block",
          "Invalid inference CUDA graph scope 'block' for --cuda-graph-impl='transformer_engine'.");
  refused("--cuda-graph-impl local --inference-cuda-graph-scope none",
          "Invalid inference CUDA graph scope 'none' for --cuda-graph-impl='local'.");
  refused("--cuda-graph-impl full_iteration", "--no-check-for-nan-in-loss-and-grad should be set");
  refused("--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad --cuda-graph-modules attn",
          "--cuda-graph-modules must be empty when --cuda-graph-impl=full_iteration.");
  // TransformerConfig: CPU offloading, MoE modules on a dense model, full recompute, graphed recompute with dropout
  // (the default attention dropout 0.1 and recompute module core_attn under whole-layer graphs).
  refused("--cuda-graph-impl local --cpu-offloading-num-layers 1", "CUDA graphs not supported with CPU offloading.");
  refused("--cuda-graph-impl transformer_engine --cuda-graph-modules moe_router", "moe cuda graph is only supported for MoE.");
  refused("--cuda-graph-impl local --recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
          "full recompute is only supported with full iteration CUDA graph.");
  refused("--external-cuda-graph --recompute-activations",
          "--recompute-activations (recomputing core_attn) and attention dropout 0.1 with whole-layer CUDA graphs "
          "(--cuda-graph-impl transformer_engine, no --cuda-graph-modules): Megatron-LM refuses it "
          "(TransformerConfig.__post_init__, megatron/core/transformer/transformer_config.py @d98e8a64: \"attention "
          "dropout is not supported with graphed attention recomputation.\")");
  // Unknown values: Megatron's choices.
  refused("--cuda-graph-impl cudagraph", "expected none, local, transformer_engine or full_iteration");
  refused("--cuda-graph-impl local --cuda-graph-modules attention", "expected attn, mlp, moe");
  // What Megatron accepts stays accepted (listed as not modelled): the same settings made valid.
  for (const std::string ok : {"--enable-cuda-graph --cuda-graph-impl none", "--cuda-graph-impl local --inference-cuda-graph-scope block",
                               "--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad",
                               "--cuda-graph-impl full_iteration --no-check-for-nan-in-loss-and-grad --recompute-granularity full "
                               "--recompute-method uniform --recompute-num-layers 1",
                               "--external-cuda-graph --recompute-activations --attention-dropout 0.0",
                               "--cuda-graph-impl transformer_engine --cuda-graph-modules mlp --recompute-activations",
                               "--cuda-graph-impl local --cuda-graph-modules full"}) {
    CAPTURE(ok);
    CHECK_NOTHROW(workloads_test::import_small(ok));
  }
}

TEST_CASE("flops_convention nemo-<family>: the TFLOP/s NeMo logs, by hand on the launcher's Llama 3 70B") {
  const std::string path = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nemo-configs/launcher-llama3_70b.yaml";
  const std::string text = read_input_file(path);
  const ParamMap vocab = {{"padded_vocab_size", "128512"}};
  const Json doc = scenario_for_nemo(path, text, "dgx-h100", vocab, false);
  // run.name llama3_70b: NeMo's llama3 formula.
  REQUIRE(doc["workload"]["params"]["flops_convention"] == "nemo-llama3");
  const GptConfig c = gpt_config_from_params(params_from_json(doc["workload"]["params"], JsonPath()), "t");
  // B 2048, s 8192, l 80, h 8192, FFN 28672, 64 heads, 8 query groups, NeMo's llama3 vocabulary 128256
  // (nemo/utils/flops_formulas.py llama3 at NVIDIA/NeMo@e564e669):
  // B s l h^2 (12 + 12 g/a + 18 f/h + 12 s/h + 6 V/(l h)) = 2^56 x 1.25 x (12 + 1.5 + 63 + 12 + 1.17421875).
  const double Bslh2 = 2048.0 * 8192.0 * 80.0 * 8192.0 * 8192.0;
  CHECK(gpt_model_flops(c) == doctest::Approx(Bslh2 * (12.0 + 1.5 + 63.0 + 12.0 + 6.0 * 128256.0 / (80.0 * 8192.0))).epsilon(1e-12));
  CHECK(gpt_model_flops(c) == doctest::Approx(8.0771355629e18).epsilon(1e-9));
  // Megatron-Core's count differs by the padded vocabulary (128512), NeMo's -causal count (NeMo from 6251117f4c)
  // by half the attention's s/h term.
  GptConfig core = c, causal = c;
  core.flops_convention = "megatron-core";
  causal.flops_convention = "nemo-llama3-causal";
  CHECK(gpt_model_flops(core) == doctest::Approx(Bslh2 * (12.0 + 1.5 + 63.0 + 12.0 + 6.0 * 128512.0 / (80.0 * 8192.0))).epsilon(1e-12));
  CHECK(gpt_model_flops(c) - gpt_model_flops(causal) == doctest::Approx(Bslh2 * 6.0).epsilon(1e-12));
  // Mixtral 8x7B (run.name mixtral_8x7b, padded vocabulary 32768): 18 x topk x f/h with topk 2, NeMo's vocabulary 32000.
  const std::string mpath = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nemo-configs/launcher-mixtral_8x7b.yaml";
  const Json mdoc = scenario_for_nemo(mpath, read_input_file(mpath), "dgx-h100", {{"padded_vocab_size", "32768"}}, false);
  REQUIRE(mdoc["workload"]["params"]["flops_convention"] == "nemo-mixtral");
  const GptConfig m = gpt_config_from_params(params_from_json(mdoc["workload"]["params"], JsonPath()), "t");
  const double B = 256, s = 4096, l = 32, h = 4096;
  CHECK(gpt_model_flops(m) == doctest::Approx(B * s * l * h * h *
                                              (12.0 + 12.0 * 8.0 / 32.0 + 18.0 * 2.0 * 14336.0 / h + 12.0 * s / h +
                                               6.0 * 32000.0 / (l * h))).epsilon(1e-12));
  // GPT-3 (24 B s h^2 + 4 B s^2 h) x 3 l + 6 B s h x 51200, and Nemotron's ungated 12 f/h with 256000: on the
  // small model (B 4, s 2048, l 4, h 1024, FFN 2816, 16 heads, no GQA).
  auto flops = [](const std::string& conv) {
    return gpt_model_flops(cfg(small({{"flops_convention", conv}})));
  };
  const double b = 4, sq = 2048, ll = 4, hh = 1024, f = 2816;
  CHECK(flops("nemo-gpt3") == doctest::Approx((24 * b * sq * hh * hh + 4 * b * sq * sq * hh) * 3 * ll + 6 * b * sq * hh * 51200).epsilon(1e-12));
  CHECK(flops("nemo-gpt3-causal") == doctest::Approx((24 * b * sq * hh * hh + 2 * b * sq * sq * hh) * 3 * ll + 6 * b * sq * hh * 51200).epsilon(1e-12));
  CHECK(flops("nemo-nemotron") == doctest::Approx(b * sq * ll * hh * hh * (12 + 12 + 12 * f / hh + 12 * sq / hh + 6 * 256000 / (ll * hh))).epsilon(1e-12));
  CHECK(flops("nemo-llama2") == doctest::Approx(b * sq * ll * hh * hh * (12 + 12 + 18 * f / hh + 12 * sq / hh + 6 * 32000 / (ll * hh))).epsilon(1e-12));
  CHECK(error_of([] { cfg(small({{"flops_convention", "nemo-mixtral"}})); }).find("needs num_experts") != std::string::npos);
  CHECK(error_of([] { cfg(small({{"flops_convention", "nemo-bert"}})); }).find("flops_convention") != std::string::npos);
  // NeMo logs nothing without a known family in run.name, or with exp_manager.log_tflops_per_sec_per_gpu false:
  // the default convention stays.
  const std::string gpath = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nemo-configs/megatron_gpt_config.yaml";
  CHECK_FALSE(scenario_for_nemo(gpath, read_input_file(gpath), "dgx-h100", {}, false)["workload"]["params"].contains("flops_convention"));
  std::string off = text;
  const std::string from = "exp_manager:\n";
  const auto at = off.find(from);
  REQUIRE(at != std::string::npos);
  off.insert(at + from.size(), "  log_tflops_per_sec_per_gpu: false\n");
  CHECK_FALSE(scenario_for_nemo(path, off, "dgx-h100", vocab, false)["workload"]["params"].contains("flops_convention"));
  // --param flops_convention wins.
  ParamMap over = vocab;
  over["flops_convention"] = "megatron-core-causal";
  CHECK(scenario_for_nemo(path, text, "dgx-h100", over, false)["workload"]["params"]["flops_convention"] == "megatron-core-causal");
}
