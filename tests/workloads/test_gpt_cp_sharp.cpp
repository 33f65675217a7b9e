// Hierarchical context parallelism (cp_comm_type a2a+p2p with hierarchical_context_parallel_sizes) and SHARP for
// the data-parallel group (use_sharp): the groups, bytes and kernels the gpt generator emits, and Megatron's
// refusals (docs/workloads.md, "Context parallelism", "SHARP for the data-parallel group").
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <string>
#include <vector>

#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

// 2 layers of a Llama-3-8B-shaped block (32 heads, 8 K/V heads of 128), 32K tokens, CP 16 over two hosts of
// 8 GPUs (TP 1, PP 1, DP 1).
ParamMap cp16(const std::string& type, const std::string& sizes = "") {
  ParamMap p = {{"num_layers", "2"},          {"hidden_size", "4096"},        {"num_attention_heads", "32"},
                {"num_query_groups", "8"},    {"ffn_hidden_size", "14336"},   {"swiglu", "true"},
                {"seq_length", "32768"},      {"padded_vocab_size", "32000"}, {"micro_batch_size", "1"},
                {"global_batch_size", "1"},   {"tensor_model_parallel_size", "1"},
                {"pipeline_model_parallel_size", "1"}, {"context_parallel_size", "16"}, {"world_size", "16"},
                {"gpus_per_host", "8"},       {"gpu", "h100"},                {"recompute_granularity", "none"},
                {"attention_backend", "fused"}, {"cp_comm_type", type}};
  if (!sizes.empty()) p["hierarchical_context_parallel_sizes"] = sizes;
  return p;
}

GptConfig cfg(const ParamMap& p) { return gpt_config_from_params(p, "--param"); }

const Communicator& comm_named(const Trace& t, const std::string& name) {
  for (const auto& c : t.comms)
    if (c.name == name) return c;
  FAIL("no communicator " << name);
  return t.comms.front();
}

// Rank 0's collective ops whose name ends with `suffix`, in trace order.
std::vector<const Op*> colls(const Trace& t, const std::string& suffix) {
  std::vector<const Op*> out;
  for (const auto& op : t.ranks.front().ops)
    if (op.kind == OpKind::Collective && op.name.size() >= suffix.size() &&
        op.name.compare(op.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(&op);
  return out;
}

// Bytes rank 0 sends to the other host in one collective (hand formulas: an all-to-all of S bytes per rank over
// n ranks sends S / n to each peer; a ring all-gather of output S over n ranks forwards (n - 1) / n S on every
// ring link, and a ring over two hosts crosses between them).
double cross_host_bytes(const Trace& t, const Op& op, int gpus_per_host) {
  const auto& r = t.comms[static_cast<std::size_t>(op.comm)].ranks;
  const double n = double(r.size());
  double remote = 0;
  for (auto x : r) remote += x / gpus_per_host != r.front() / gpus_per_host ? 1.0 : 0.0;
  if (remote == 0) return 0;
  if (op.coll == CollOp::AllToAll) return op.bytes / n * remote;
  return op.bytes * (n - 1) / n;  // AllGather / ReduceScatter rings: every link carries it
}

}  // namespace

TEST_CASE("gpt a2a+p2p: the all-to-all inside a host on NVLink, the K/V ring across hosts with heads / 8") {
  const Trace h = workloads_test::gen(cp16("a2a+p2p", "8 2"));
  // Megatron's hierarchical groups of CP rank 0 (create_hierarchical_groups): level 0 ranks 0-7 (one host),
  // level 1 every 8th (0 and 8: one per host).
  CHECK(comm_named(h, "cp.a2a.stage0").ranks == std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(comm_named(h, "cp.p2p.stage0").ranks == std::vector<std::int32_t>{0, 8});
  // Bytes, by hand: local tokens 32768 / 16 = 2048; Q, K, V of 32 + 2 x 8 heads of 128 bf16 values:
  // 2048 x 48 x 128 x 2 = 25,165,824 B per rank into the all-to-all; the output 2048 x 32 x 128 x 2 =
  // 16,777,216 B back. The ring gathers K and V of the whole sequence for 8 / 8 = 1 K/V head:
  // 2 x 32768 x 1 x 128 x 2 = 16,777,216 B (the pure p2p ring: 8 K/V heads, 134,217,728 B).
  const auto a2a = colls(h, "l0.attn.cp.a2a"), a2a2 = colls(h, "l0.attn.cp.a2a2"), kv = colls(h, "l0.attn.cp.kv");
  REQUIRE(a2a.size() == 1);
  REQUIRE(a2a2.size() == 1);
  REQUIRE(kv.size() == 1);
  CHECK(a2a[0]->bytes == 25165824.0);
  CHECK(a2a2[0]->bytes == 16777216.0);
  CHECK(kv[0]->bytes == 16777216.0);
  CHECK(h.comms[static_cast<std::size_t>(a2a[0]->comm)].name == "cp.a2a.stage0");
  CHECK(h.comms[static_cast<std::size_t>(kv[0]->comm)].name == "cp.p2p.stage0");
  // The backward: dout's all-to-all, the ring's K/V and dK/dV, then dQ/dK/dV back.
  CHECK(colls(h, "l0.attn.bwd.cp.a2a")[0]->bytes == 16777216.0);
  CHECK(colls(h, "l0.attn.bwd.cp.kv")[0]->bytes == 16777216.0);
  CHECK(colls(h, "l0.attn.bwd.cp.dkv")[0]->bytes == 16777216.0);
  CHECK(colls(h, "l0.attn.bwd.cp.a2a2")[0]->bytes == 25165824.0);

  // What crosses between the hosts per rank and layer forward, by hand: pure a2a over CP 16 sends 8 / 16 of
  // 25,165,824 + 16,777,216 B = 20,971,520 B; pure p2p rings 15 / 16 of 134,217,728 B = 125,829,120 B;
  // a2a+p2p only its 2-rank ring, 1 / 2 of 16,777,216 B = 8,388,608 B.
  const Trace a = workloads_test::gen(cp16("a2a")), p = workloads_test::gen(cp16("p2p"));
  auto fwd_cross = [](const Trace& t) {
    double s = 0;
    for (const char* k : {"l0.attn.cp.a2a", "l0.attn.cp.a2a2", "l0.attn.cp.kv"})
      for (const Op* op : colls(t, k)) s += cross_host_bytes(t, *op, 8);
    return s;
  };
  CHECK(fwd_cross(a) == 20971520.0);
  CHECK(fwd_cross(p) == 125829120.0);
  CHECK(fwd_cross(h) == 8388608.0);
}

TEST_CASE("gpt a2a+p2p: the attention as the ring of cp / inner steps over heads / inner") {
  auto layer = [](const ParamMap& p) {
    const GptConfig c = cfg(p);
    return gpt_detail::gpt_step_kernels(c, workloads_test::compute_of(c.gpu), "test").layer;
  };
  const auto h = layer(cp16("a2a+p2p", "8 2")), a = layer(cp16("a2a")), p = layer(cp16("p2p"));
  // The same causal FLOPs in every form.
  CHECK(h.fwd_attn.flops == doctest::Approx(a.fwd_attn.flops));
  CHECK(h.bwd_attn.flops == doctest::Approx(p.bwd_attn.flops));
  // A ring of 2 steps: one later step (an attention kernel and two merges) more than a2a's single kernel, where
  // the 16-rank ring has 15.
  CHECK(h.fwd_attn.kernels == a.fwd_attn.kernels + 3);
  CHECK(p.fwd_attn.kernels == a.fwd_attn.kernels + 3 * 15);
  // Fewer, larger kernels than the 16-step ring: faster; more than the one kernel: slower.
  CHECK(h.fwd_attn.seconds < p.fwd_attn.seconds);
  CHECK(h.bwd_attn.seconds < p.bwd_attn.seconds);
  CHECK(h.fwd_attn.seconds > a.fwd_attn.seconds);
  // A level of size 1 is the other form (Transformer Engine falls back to it).
  CHECK(layer(cp16("a2a+p2p", "1 16")).fwd_attn.seconds == p.fwd_attn.seconds);
  CHECK(layer(cp16("a2a+p2p", "16 1")).bwd_attn.seconds == a.bwd_attn.seconds);
  const Trace one = workloads_test::gen(cp16("a2a+p2p", "1 16"));
  CHECK(colls(one, "l0.attn.cp.a2a").empty());
  CHECK(colls(one, "l0.attn.cp.kv")[0]->bytes == 134217728.0);
}

TEST_CASE("gpt a2a+p2p and use_sharp: Megatron-LM's and Transformer Engine's refusals, one line each") {
  auto err = [](const ParamMap& p) { return error_of([&] { cfg(p); }); };
  CHECK(err(cp16("a2a+p2p")).find("a2a+p2p needs hierarchical_context_parallel_sizes") != std::string::npos);
  CHECK(err(cp16("a2a+p2p", "4 2")).find("product (8) must equal context_parallel_size (16)") != std::string::npos);
  CHECK(err(cp16("p2p", "4 2")).find("product (8) must equal") != std::string::npos);
  CHECK(err(cp16("a2a+p2p", "2 2 4")).find("takes two levels") != std::string::npos);
  CHECK(err(cp16("a2a+p2p", "16x")).find("expected space-separated integers") != std::string::npos);
  // 8 K/V heads cannot be split 16 ways by the all-to-all... (TP 2 leaves 4 per rank for an inner group of 8).
  ParamMap tp2 = cp16("a2a+p2p", "8 2");
  tp2["tensor_model_parallel_size"] = "2", tp2["world_size"] = "32";
  CHECK(err(tp2).find("must divide the attention heads (16) and key/value heads (4)") != std::string::npos);
  // Hierarchical sizes with another type: accepted (Megatron builds the groups and uses them only for a2a+p2p).
  CHECK(err(cp16("p2p", "8 2")).empty());
  CHECK(gpt_config_to_params(cfg(cp16("a2a+p2p", "8 2"))).at("hierarchical_context_parallel_sizes") == "8 2");

  ParamMap s = cp16("p2p");
  s["sharp_enabled_group"] = "dp";
  CHECK(err(s).find("sharp_enabled_group: is only valid with use_sharp") != std::string::npos);
  s["use_sharp"] = "true";
  CHECK(err(s).empty());
  s["sharp_enabled_group"] = "dp_replica";
  CHECK(err(s).find("dp_replica") != std::string::npos);
  s["sharp_enabled_group"] = "tp";
  CHECK(err(s).find("expected") != std::string::npos);
}

TEST_CASE("gpt use_sharp: only the data-parallel communicators may use NCCL's SHARP algorithms") {
  ParamMap p = workloads_test::small_llama(16, 8, {{"pipeline_model_parallel_size", "1"}});
  const Trace off = workloads_test::gen(p);
  for (const auto& c : off.comms) CHECK_FALSE(c.collnet_enable);  // Megatron creates none with NCCL_COLLNET_ENABLE
  p["use_sharp"] = "true";
  const Trace on = workloads_test::gen(p);
  int dp = 0;
  for (const auto& c : on.comms) {
    CAPTURE(c.name);
    CHECK(c.collnet_enable == (c.name.rfind("dp.stage", 0) == 0));
    dp += c.collnet_enable ? 1 : 0;
  }
  CHECK(dp == 1);
  // The trace file keeps the mark (only where false: other generators' and files' communicators default true).
  const Trace back = trace_from_json(trace_to_json(on), "t.json");
  for (std::size_t i = 0; i < on.comms.size(); ++i) CHECK(back.comms[i].collnet_enable == on.comms[i].collnet_enable);
  CHECK(trace_to_json(on).dump().find("\"collnet_enable\":true") == std::string::npos);
}
