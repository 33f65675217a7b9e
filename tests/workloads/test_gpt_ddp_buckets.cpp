// Megatron-Core's DDP gradient buckets and the parameter all-gathers' dispatch (docs/workloads.md "Data-parallel
// buckets"): one DDP per model chunk, buckets only on pipeline stage 0's first chunk with overlap_grad_reduce,
// the default bucket size max(40M, 1M x DP x CP), ddp_num_buckets, align_param_gather and
// overlap_param_gather_with_optimizer_step. Bucket counts and sizes are worked out by hand from the layer sizes.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <string>
#include <vector>

#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/megatron_args.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

// The small model of workloads_test::small_llama made Llama-shaped (SwiGLU, RMSNorm, RoPE, no biases) with `layers`
// layers over `world` GPUs (TP 2), the distributed optimizer; `over` replaces or adds parameters.
ParamMap model(int layers, int world, int batch, ParamMap over = {}) {
  ParamMap p = workloads_test::small_llama(world, batch, {{"use_distributed_optimizer", "true"}, {"swiglu", "true"},
                                                          {"normalization", "RMSNorm"}, {"position_embedding_type", "rope"}});
  p["num_layers"] = std::to_string(layers);
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}

// One decoder layer's parameters on one of the 2 TP ranks: QKV + projection 4 d^2, SwiGLU 3 d f, two RMSNorm
// weights (replicated), with d 1024 and f 2816 -- and the word embedding's vocabulary shard.
const double kLayer = (4.0 * 1024 * 1024 + 3.0 * 1024 * 2816) / 2 + 2 * 1024;
const double kEmbedding = 32000.0 * 1024 / 2;

// Rank `r`'s ops named dp.bucket*.<kind> ("rs" reduce-scatter, "ag" all-gather), in trace order.
std::vector<const Op*> dp_ops(const Trace& t, std::size_t r, const std::string& kind) {
  std::vector<const Op*> v;
  for (const Op& op : t.ranks.at(r).ops)
    if (op.name.rfind("dp.bucket", 0) == 0 && op.name.size() > kind.size() &&
        op.name.compare(op.name.size() - kind.size() - 1, std::string::npos, "." + kind) == 0)
      v.push_back(&op);
  return v;
}

std::size_t index_of(const Trace& t, std::size_t r, const std::string& name) {
  const auto& ops = t.ranks.at(r).ops;
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].name == name) return i;
  FAIL("no op " << name);
  return 0;
}

}  // namespace

TEST_CASE("Megatron-Core DDP: one bucket per chunk except stage 0's first chunk with overlap_grad_reduce") {
  REQUIRE(kLayer == 6424576.0);
  // 8 layers on PP 2 x VP 2: 2 layers per chunk; DP 4. Bucket size 5M elements: each layer fills one.
  const ParamMap base = model(8, 16, 16, {{"virtual_pipeline_model_parallel_size", "2"}, {"bucket_size", "5000000"}});
  const Trace plain = workloads_test::gen(base);
  // Without overlap_grad_reduce Megatron's buckets are one per chunk on every stage (bucket_size None).
  CHECK(dp_ops(plain, 0, "rs").size() == 2);
  CHECK(dp_ops(plain, 1, "rs").size() == 2);
  ParamMap ov = base;
  ov["overlap_grad_reduce"] = "true";
  const Trace over = workloads_test::gen(ov);
  // Stage 0's first chunk (layers 0-1 + the embedding, backward order: layer 1, layer 0, embedding) is cut into
  // three buckets; its second chunk is one; stage 1 keeps one per chunk.
  const auto rs0 = dp_ops(over, 0, "rs");
  REQUIRE(rs0.size() == 4);
  CHECK(dp_ops(over, 1, "rs").size() == 2);
  // bf16 training reduces fp32 gradients, 4 bytes per element. Issued as each bucket's gradients are ready: chunk 1's whole buffer
  // first (its last backward comes before chunk 0's), then chunk 0's layer 1, layer 0, embedding.
  CHECK(rs0[0]->bytes == doctest::Approx(4 * 2 * kLayer));
  CHECK(rs0[1]->bytes == doctest::Approx(4 * kLayer));
  CHECK(rs0[2]->bytes == doctest::Approx(4 * kLayer));
  CHECK(rs0[3]->bytes == doctest::Approx(4 * kEmbedding));
  // The same gradient bytes either way.
  double a = 0, b = 0;
  for (const Op* op : dp_ops(plain, 0, "rs")) a += op->bytes;
  for (const Op* op : rs0) b += op->bytes;
  CHECK(a == doctest::Approx(b));
  // overlap_param_gather_with_optimizer_step: no chunk is bucketed.
  ParamMap og = ov;
  og["overlap_param_gather"] = "true", og["overlap_param_gather_with_optimizer_step"] = "true";
  CHECK(dp_ops(workloads_test::gen(og), 0, "rs").size() == 2);
}

TEST_CASE("Megatron-Core DDP: the default bucket size grows with DP x CP; ddp_num_buckets splits the rank") {
  // 16 layers on PP 1 (one chunk): 16 x 6.44M + the embedding 16.4M (tied output weights).
  auto buckets = [](int world, ParamMap over) {
    ParamMap p = model(16, world, world, {{"pipeline_model_parallel_size", "1"}, {"overlap_grad_reduce", "true"}});
    for (const auto& [k, v] : over) p[k] = v;
    return dp_ops(workloads_test::gen(p), 0, "rs").size();
  };
  // DP 4: 40M elements -> 7 layers (45.1M), 7 layers, 2 layers + embedding = 3 buckets.
  CHECK(buckets(8, {}) == 3);
  // DP 64: 64M -> 10 layers (64.4M), 6 layers + embedding = 2 buckets; an explicit bucket_size wins.
  CHECK(buckets(128, {}) == 2);
  CHECK(buckets(128, {{"bucket_size", "40000000"}}) == 3);
  // ddp_num_buckets 4: the rank's 119.5M elements / 4 = 29.9M -> 5 layers (32.2M), 5, 5, 1 + embedding = 4;
  // it wins over bucket_size, as in Megatron-LM's resolve_ddp_bucket_size.
  CHECK(buckets(8, {{"ddp_num_buckets", "4"}}) == 4);
  CHECK(buckets(8, {{"ddp_num_buckets", "4"}, {"bucket_size", "1000000000"}}) == 4);
  // Without overlap_grad_reduce, one bucket whatever the size.
  ParamMap p = model(16, 8, 8, {{"pipeline_model_parallel_size", "1"}, {"bucket_size", "5000000"}});
  CHECK(dp_ops(workloads_test::gen(p), 0, "rs").size() == 1);
  // Megatron FSDP's strategies keep bucket_size across the stage (40M when not given).
  ParamMap z2 = model(16, 8, 8, {{"pipeline_model_parallel_size", "1"}, {"data_parallel_sharding_strategy", "optim_grads"}});
  CHECK(dp_ops(workloads_test::gen(z2), 0, "rs").size() == 3);
  CHECK(error_of([&] { workloads_test::gen(model(4, 8, 8, {{"pipeline_model_parallel_size", "1"},
                                                           {"use_torch_fsdp2", "true"}, {"use_distributed_optimizer", "false"},
                                                           {"untie_embeddings_and_output_weights", "true"},
                                                           {"ddp_num_buckets", "2"}})); })
            .find("ddp_num_buckets") != std::string::npos);
}

TEST_CASE("Megatron-Core DDP: when the overlapped parameter all-gathers are dispatched") {
  // 8 layers on PP 2 x VP 4 (one layer per chunk), DP 4, 4 micro-batches.
  const ParamMap base = model(8, 16, 16, {{"virtual_pipeline_model_parallel_size", "4"}, {"overlap_grad_reduce", "true"},
                                          {"overlap_param_gather", "true"}});
  const Trace t = workloads_test::gen(base);
  // Stage 1 (no bucketing): one all-gather per chunk. align_param_gather: chunks 0 and 1 at the schedule's
  // start (no dependency), chunks 2 and 3 by the schedule at a forward (after a compute op).
  const auto ag1 = dp_ops(t, 1, "ag");
  REQUIRE(ag1.size() == 4);
  CHECK(ag1[0]->deps.empty());
  CHECK(ag1[1]->deps.empty());
  CHECK_FALSE(ag1[2]->deps.empty());
  CHECK_FALSE(ag1[3]->deps.empty());
  // Stage 1 runs forward k of chunk c's micro-batch 0 one virtual micro-batch before stage 0 does: Megatron's
  // table (micro-batch group 2) is (0,0) (1,0) (0,1) (1,1) (0,2) ..., so stage 1 dispatches chunk 2 at its forward
  // 1 (micro-batch 1 of chunk 0: 1 + 1 = 2 is chunk 1's first) and chunk 3 at its forward 3.
  const std::size_t ag2 = static_cast<std::size_t>(ag1[2] - t.ranks[1].ops.data());
  CHECK(ag2 > index_of(t, 1, "mb0.c0.l1.fwd.attn"));
  CHECK(ag2 < index_of(t, 1, "mb1.c0.l1.fwd.attn"));
  const std::size_t ag3 = static_cast<std::size_t>(ag1[3] - t.ranks[1].ops.data());
  CHECK(ag3 > index_of(t, 1, "mb0.c1.l3.fwd.attn"));
  CHECK(ag3 < index_of(t, 1, "mb1.c1.l3.fwd.attn"));
  // Without align_param_gather each chunk's all-gather waits for its first forward: chunk 1's too.
  ParamMap na = base;
  na["align_param_gather"] = "false";
  const Trace tn = workloads_test::gen(na);  // named: dp_ops points into it
  const auto agn = dp_ops(tn, 1, "ag");
  REQUIRE(agn.size() == 4);
  CHECK_FALSE(agn[1]->deps.empty());
  // Non-interleaved: a later stage dispatches its one all-gather after its first receive, so its first forward
  // waits for it (Megatron forces align_param_gather off without virtual stages).
  const Trace nv = workloads_test::gen(model(8, 16, 16, {{"overlap_grad_reduce", "true"}, {"overlap_param_gather", "true"}}));
  const auto agv = dp_ops(nv, 1, "ag");
  REQUIRE(agv.size() == 1);
  const std::size_t recv = index_of(nv, 1, "mb0.l4.wait");
  REQUIRE(agv[0]->deps.size() == 1);
  CHECK(agv[0]->deps[0] == recv);
}

TEST_CASE("Megatron-Core DDP: overlap_param_gather_with_optimizer_step") {
  const ParamMap base = model(8, 16, 16, {{"virtual_pipeline_model_parallel_size", "2"}, {"overlap_grad_reduce", "true"},
                                          {"overlap_param_gather", "true"}});
  ParamMap og = base;
  og["overlap_param_gather_with_optimizer_step"] = "true";
  const Trace a = workloads_test::gen(base), b = workloads_test::gen(og);
  // The first chunk's optimizer steps first; its all-gather follows it and runs beside the other chunk's step.
  const std::size_t s0 = index_of(b, 0, "optimizer.step.c0"), s1 = index_of(b, 0, "optimizer.step");
  const auto ag = dp_ops(b, 0, "ag");
  REQUIRE(ag.size() == 2);
  const Op* first = nullptr;
  for (const Op* op : ag)
    if (!op->deps.empty() && op->deps[0] == s0) first = op;
  REQUIRE(first != nullptr);
  CHECK(static_cast<std::size_t>(first - b.ranks[0].ops.data()) < s1);
  // The step's optimizer work is split, not added: the two parts add up to within their kernel launches.
  const auto& ops_a = a.ranks[0].ops;
  const double whole = ops_a[index_of(a, 0, "optimizer.step")].duration_s;
  const double parts = b.ranks[0].ops[s0].duration_s + b.ranks[0].ops[s1].duration_s;
  CHECK(parts >= whole);
  CHECK(parts < whole * 1.2);
  // The first chunk's layers do not wait for an all-gather in the step: it ran after the previous step's.
  const Op& l0 = b.ranks[0].ops[index_of(b, 0, "mb0.c0.l0.fwd.attn")];
  for (auto d : l0.deps) CHECK(b.ranks[0].ops[d].name.rfind("dp.bucket", 0) == std::string::npos);
  const Op& l0a = a.ranks[0].ops[index_of(a, 0, "mb0.c0.l0.fwd.attn")];
  bool waits = false;
  for (auto d : l0a.deps) waits = waits || a.ranks[0].ops[d].name.rfind("dp.bucket", 0) == 0;
  CHECK(waits);
  // Megatron-LM's asserts.
  CHECK(error_of([&] {
          ParamMap p = og;
          p.erase("virtual_pipeline_model_parallel_size");
          workloads_test::gen(p);
        }).find("interleaved") != std::string::npos);
  CHECK(error_of([&] {
          ParamMap p = og;
          p["overlap_param_gather"] = "false";
          workloads_test::gen(p);
        }).find("needs overlap_param_gather") != std::string::npos);
}

TEST_CASE("Megatron-Core DDP flags import from a launch script") {
  const MegatronImport m = workloads_test::import_small(
      "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 --use-distributed-optimizer "
      "--overlap-grad-reduce --overlap-param-gather --overlap-param-gather-with-optimizer-step --no-align-param-gather "
      "--no-align-grad-reduce --ddp-num-buckets 3");
  CHECK(m.params.at("overlap_param_gather_with_optimizer_step") == true);
  CHECK(m.params.at("align_param_gather") == false);
  CHECK(m.params.at("align_grad_reduce") == false);
  CHECK(m.params.at("ddp_num_buckets") == 3);
  CHECK(m.not_modelled.empty());
}

TEST_CASE("Megatron-Core DDP: align_grad_reduce launches an interleaved chunk's reduction from the schedule") {
  // 8 layers on PP 2 x VP 2, 4 micro-batches (group 2). Stage 1's backward order: (0,c1) (1,c1) (0,c0) (1,c0)
  // (2,c1) (3,c1) (2,c0) (3,c0); pipeline rank 1 launches chunk 1's reduction one backward after chunk 1's last
  // (micro-batch 3), at the end of micro-batch 2's chunk-0 backward, and chunk 0's after the cool-down.
  auto deps_of = [](const std::string& align) {
    const Trace t = workloads_test::gen(model(8, 16, 16, {{"virtual_pipeline_model_parallel_size", "2"},
                                                          {"overlap_grad_reduce", "true"}, {"align_grad_reduce", align}}));
    std::vector<std::string> v;
    for (const Op* op : dp_ops(t, 1, "rs")) {
      // The bucket's 1 / DP gradient scale (ddp_average_in_collective false) runs first, right after that op.
      REQUIRE(op->deps.size() == 1);
      const Op& scale = t.ranks[1].ops[op->deps[0]];
      REQUIRE(scale.name.find(".scale") != std::string::npos);
      REQUIRE(scale.deps.size() == 1);
      v.push_back(t.ranks[1].ops[scale.deps[0]].name);
    }
    return v;
  };
  CHECK(deps_of("true") == std::vector<std::string>{"mb2.c0.send.bwd", "mb3.c0.send.bwd"});
  // Without it the DDP hooks launch each chunk's reduction as its last layer's gradient is ready.
  CHECK(deps_of("false") == std::vector<std::string>{"mb3.c1.l6.attn.bwd.join", "mb3.c0.l2.attn.bwd.join"});
}

TEST_CASE("Megatron-Core DDP: the expert reduction, issued at the backward's end, does not hold the dense buckets") {
  // 8 MoE layers of 8 experts on PP 2 x VP 2 over 32 GPUs, EP 4 -> expert data-parallel 2; overlap_grad_reduce.
  const Trace t = workloads_test::gen(model(8, 32, 32, {{"virtual_pipeline_model_parallel_size", "2"},
                                                        {"overlap_grad_reduce", "true"}, {"num_experts", "8"},
                                                        {"moe_router_topk", "2"}, {"moe_ffn_hidden_size", "1024"},
                                                        {"expert_model_parallel_size", "4"}, {"moe_grouped_gemm", "true"},
                                                        {"moe_token_dispatcher_type", "alltoall"}}));
  const auto& ops = t.ranks.at(0).ops;
  const std::size_t experts = index_of(t, 0, "edp.experts.rs");
  const auto rs = dp_ops(t, 0, "rs");
  REQUIRE(rs.size() == 2);
  // Both chunks' dense reductions come first on the in-order data-parallel stream; chunk 1's is launched before
  // the last backward (align_grad_reduce), the expert one after it.
  for (const Op* op : rs) CHECK(static_cast<std::size_t>(op - ops.data()) < experts);
  CHECK(rs[0]->deps.at(0) < ops[experts].deps.at(0));
  CHECK(ops[experts].stream == rs[0]->stream);
}
