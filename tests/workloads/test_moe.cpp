// Mixture-of-experts training (issue 21): catalogue shapes, the routing load model, expert-parallel
// dispatch as all_to_allv with the routing's per-destination bytes, expert compute at the busiest rank.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <set>
#include <string>

#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "workloads/gpt.hpp"
#include "workloads/moe.hpp"
#include "workloads/params.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;
using workloads_test::compute_s;
using workloads_test::gen;

namespace {

// A small MoE model (8 experts, top-2) on 16 H100s: PP 2, EP 8, TP 1.
ParamMap small_moe(ParamMap over = {}) {
  ParamMap p = {{"num_layers", "4"},          {"hidden_size", "1024"},        {"num_attention_heads", "16"},
                {"num_query_groups", "4"},    {"ffn_hidden_size", "2816"},    {"swiglu", "true"},
                {"normalization", "RMSNorm"}, {"position_embedding_type", "rope"},
                {"untie_embeddings_and_output_weights", "true"},
                {"seq_length", "2048"},       {"padded_vocab_size", "32000"}, {"micro_batch_size", "1"},
                {"global_batch_size", "16"},  {"tensor_model_parallel_size", "1"},
                {"pipeline_model_parallel_size", "2"}, {"world_size", "16"}, {"gpu", "h100"},
                {"recompute_granularity", "none"}, {"num_experts", "8"}, {"moe_router_topk", "2"},
                {"expert_model_parallel_size", "8"}, {"moe_token_dispatcher_type", "alltoall"},
                {"moe_grouped_gemm", "true"}};
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}

const Op& first_op(const Trace& t, const std::string& part, std::size_t rank = 0) {
  for (const auto& op : t.ranks.at(rank).ops)
    if (op.name.find(part) != std::string::npos) return op;
  FAIL("no op containing " << part);
  static Op none;
  return none;
}

double model_params(const std::string& model) {
  ParamMap p = {{"model", model}, {"world_size", "8"}, {"tensor_model_parallel_size", "1"},
                {"pipeline_model_parallel_size", "1"}, {"global_batch_size", "8"}, {"gpu", "h100"}};
  return gpt_num_parameters(gpt_config_from_params(p, "--param"));
}

}  // namespace

TEST_CASE("moe catalogue: total parameters match the published model sizes") {
  // Published totals: DeepSeek-V3 671B main model (arXiv:2412.19437 Sec. 1, MTP module not counted);
  // Qwen3-235B-A22B 235B and Qwen3-30B-A3B 30.5B (arXiv:2505.09388 Table 1/2); gpt-oss-120b 116.8B
  // (model card arXiv:2508.10925 Table 1); Mixtral 8x7B 46.7B (arXiv:2401.04088 Sec. 2.1); Mixtral 8x22B
  // 141B (Mistral's release announcement "Cheaper, Better, Faster, Stronger", 2024-04-17); Qwen2-57B-A14B
  // 57B (arXiv:2407.10671 Table 1; MoE Parallel Folding Sec. 4.1). Mixtral-8x22B-G8T8 splits each expert
  // into 8 (arXiv:2504.14960 Sec. 4.1), so it keeps Mixtral 8x22B's 141B. Llama 4 Scout 109B total, 17B
  // active (Meta, "The Llama 4 herd", 2025-04-05).
  const std::pair<const char*, double> published[] = {{"deepseek-v3", 671e9},  {"qwen3-235b-a22b", 235e9},
                                                      {"qwen3-30b-a3b", 30.5e9}, {"gpt-oss-120b", 116.8e9},
                                                      {"mixtral-8x7b", 46.7e9}, {"mixtral-8x22b", 141e9},
                                                      {"qwen2-57b-a14b", 57e9}, {"mixtral-8x22b-g8t8", 141e9},
                                                      {"llama4-scout", 109e9}};
  for (const auto& [m, n] : published) {
    CAPTURE(m);
    const double got = model_params(m);
    CAPTURE(got);
    CHECK(std::abs(got / n - 1.0) < 0.02);
  }
}

TEST_CASE("torchtitan flavors in the catalogue: total parameters match the flavor names") {
  // The sizes torchtitan's flavors are named by (pytorch/torchtitan@4a950eaab: qwen3 0.6B / 1.7B / 32B,
  // deepseek_v3 16B), and Llama 4 Maverick 400B total, 17B active (Meta, "The Llama 4 herd", 2025-04-05).
  // Qwen3-32B: 32.8B with untied embeddings; 0.6B and 1.7B tie them (enable_weight_tying).
  const std::pair<const char*, double> named[] = {{"qwen3-0.6b", 0.6e9}, {"qwen3-1.7b", 1.7e9}, {"qwen3-32b", 32.8e9},
                                                  {"deepseek-v3-16b", 16e9}, {"llama4-maverick", 400e9}};
  for (const auto& [m, n] : named) {
    CAPTURE(m);
    const double got = model_params(m);
    CAPTURE(got);
    CHECK(std::abs(got / n - 1.0) < 0.03);
  }
}

TEST_CASE("moe_layer_freq: integers and Megatron's list expressions") {
  auto ds = moe_layer_pattern("([0]*3+[1]*58)", 61, "t");
  CHECK(std::count(ds.begin(), ds.end(), true) == 58);
  CHECK(!ds[2]);
  CHECK(ds[3]);
  auto every2 = moe_layer_pattern("2", 4, "t");
  CHECK(every2 == std::vector<bool>{true, false, true, false});
  CHECK(moe_layer_pattern("[1,0,1]", 3, "t") == std::vector<bool>{true, false, true});
  CHECK(error_of([] { moe_layer_pattern("[1,1]", 3, "t"); }).find("2 entries but the model has 3 layers") != std::string::npos);
  CHECK(error_of([] { moe_layer_pattern("[1,2]*2", 4, "t"); }).find("0 (dense) or 1 (MoE)") != std::string::npos);
  CHECK(error_of([] { moe_layer_pattern("([0]*3+", 3, "t"); }).find("moe_layer_freq") != std::string::npos);
}

TEST_CASE("moe load: uniform, seeded zipf / dirichlet, capacity dropping and padding") {
  MoeConfig m;
  m.num_experts = 16, m.moe_router_topk = 2;
  auto uni = moe_expert_shares(m, 2, "t");
  REQUIRE(uni.size() == 2);
  for (double x : uni[0]) CHECK(x == doctest::Approx(1.0 / 16));
  auto ul = moe_layer_load(m, uni[0], 1024, 4, 4);
  CHECK(ul.max_rank_tokens == doctest::Approx(ul.mean_rank_tokens));
  CHECK(ul.mean_rank_tokens == doctest::Approx(1024.0 * 2));  // 4 sources x 1024 x 2 slots / 4 ranks

  m.moe_load = "zipf", m.moe_load_skew = 1.2, m.moe_load_seed = 7;
  auto z1 = moe_expert_shares(m, 3, "t"), z2 = moe_expert_shares(m, 3, "t");
  CHECK(z1 == z2);                                    // same seed, same loads
  CHECK(std::accumulate(z1[0].begin(), z1[0].end(), 0.0) == doctest::Approx(1.0));
  CHECK(z1[0] != z1[1]);                              // each layer draws its own hot experts
  m.moe_load_seed = 8;
  CHECK(moe_expert_shares(m, 3, "t") != z1);
  auto zl = moe_layer_load(m, z1[0], 1024, 4, 4);
  CHECK(zl.max_rank_tokens > 1.3 * zl.mean_rank_tokens);
  CHECK(std::accumulate(zl.recv_share.begin(), zl.recv_share.end(), 0.0) == doctest::Approx(1.0));

  m.moe_load = "dirichlet", m.moe_load_skew = 0.5;
  auto d = moe_expert_shares(m, 1, "t");
  CHECK(std::accumulate(d[0].begin(), d[0].end(), 0.0) == doctest::Approx(1.0));
  CHECK(*std::max_element(d[0].begin(), d[0].end()) > 1.5 / 16);

  // Capacity factor 1: no expert gets more than ceil(1024 * 2 / 16) = 128 slots per source.
  m.moe_load = "zipf", m.moe_expert_capacity_factor = 1.0;
  auto cl = moe_layer_load(m, z1[0], 1024, 4, 4);
  for (double x : cl.expert_tokens) CHECK(x <= 4 * 128 + 1e-9);
  CHECK(cl.dropped_fraction > 0.05);
  CHECK(cl.max_rank_tokens < zl.max_rank_tokens);
  m.moe_pad_expert_input_to_capacity = true;
  auto pl = moe_layer_load(m, z1[0], 1024, 4, 4);
  for (double x : pl.expert_tokens) CHECK(x == doctest::Approx(4 * 128));
}

TEST_CASE("moe load from a file of per-expert token counts") {
  const std::string f = "test_moe_counts.json";
  {
    std::ofstream o(f);
    o << R"({"expert_token_counts": [[8, 0, 0, 0, 0, 0, 0, 0]]})";
  }
  MoeConfig m;
  m.num_experts = 8, m.moe_load = "file", m.moe_expert_token_counts_file = f;
  auto sh = moe_expert_shares(m, 3, "t");
  REQUIRE(sh.size() == 3);
  CHECK(sh[2][0] == doctest::Approx(1.0));
  {
    std::ofstream o(f);
    o << R"({"expert_token_counts": [[1, 2, 3]]})";
  }
  CHECK(error_of([&] { moe_expert_shares(m, 3, "t"); }).find("/expert_token_counts/0") != std::string::npos);
  std::remove(f.c_str());
}

TEST_CASE("moe generator: dispatch and combine are all_to_allv over EP with the routing's matrix") {
  Trace t = gen(small_moe());
  const Op& d = first_op(t, ".moe.dispatch");
  CHECK(d.kind == OpKind::Collective);
  CHECK(d.coll == CollOp::AllToAllv);
  CHECK(d.category == "ep");
  const Communicator& c = t.comms.at(d.comm);
  CHECK(c.ranks.size() == 8);
  REQUIRE(c.a2a_matrix.size() == 8);
  CHECK(c.a2a_matrix[3][5] == doctest::Approx(1.0 / 8));
  // 2048 tokens x top-2 x hidden 1024 x 2 bytes sent per rank.
  CHECK(d.bytes == doctest::Approx(2048.0 * 2 * 1024 * 2));
  CHECK(t.metadata.at("moe.tokens_per_rank.max_over_mean") == doctest::Approx(1.0));
  CHECK(t.metadata.at("moe.imbalance_compute_s") == doctest::Approx(0.0));

  // A skewed router: a hot EP rank receives more (a heavy matrix column), the combine is the transpose,
  // the expert compute is priced for the busiest rank, and the imbalance time is reported.
  Trace z = gen(small_moe({{"moe_load", "zipf"}, {"moe_load_skew", "1.5"}, {"moe_load_seed", "3"}}));
  const Op& zd = first_op(z, ".moe.dispatch");
  const auto& W = z.comms.at(zd.comm).a2a_matrix;
  const auto& WT = z.comms.at(first_op(z, ".moe.combine").comm).a2a_matrix;
  double hot = 0;
  std::size_t hot_j = 0;
  for (std::size_t j = 0; j < 8; ++j)
    if (W[0][j] > hot) hot = W[0][j], hot_j = j;
  CHECK(hot > 2.0 / 8);
  CHECK(WT[hot_j][0] == doctest::Approx(hot));
  CHECK(z.metadata.at("moe.tokens_per_rank.max_over_mean") > 2.0);
  CHECK(z.metadata.at("moe.all_to_all_max_over_mean_bytes") == doctest::Approx(hot * 8));
  CHECK(t.metadata.at("moe.all_to_all_max_over_mean_bytes") == doctest::Approx(1.0));
  CHECK(z.metadata.at("moe.imbalance_compute_s") > 0);
  CHECK(first_op(z, ".fwd.moe.experts").duration_s > 1.5 * first_op(t, ".fwd.moe.experts").duration_s);
  // Deterministic: the same seed gives the same trace.
  CHECK(trace_to_json(z).dump() ==
        trace_to_json(gen(small_moe({{"moe_load", "zipf"}, {"moe_load_skew", "1.5"}, {"moe_load_seed", "3"}}))).dump());
}

TEST_CASE("moe token spread: distinct destinations of a token against brute-force enumeration") {
  // No group limit: every 3-subset of 12 experts is equally likely; a set is reached when the subset meets
  // it. Sets of uneven size and position (a GPU, a node of 5 or 2 experts, a straddling range, everything).
  MoeConfig m;
  m.num_experts = 12, m.moe_router_topk = 3;
  const MoeTokenSpread u(m);
  const std::vector<std::pair<int, int>> sets = {{0, 5}, {5, 7}, {7, 12}, {3, 4}, {4, 9}, {0, 12}};
  for (const auto& [a, b] : sets) {
    int hit = 0, all = 0;
    for (int x = 0; x < 12; ++x)
      for (int y = x + 1; y < 12; ++y)
        for (int z = y + 1; z < 12; ++z) {
          ++all;
          hit += (x >= a && x < b) || (y >= a && y < b) || (z >= a && z < b);
        }
    CHECK(u.reach(a, b) == doctest::Approx(double(hit) / all).epsilon(1e-12));
    CHECK(u.copies_per_slot(a, b) == doctest::Approx(double(hit) / all / (3.0 * (b - a) / 12)).epsilon(1e-12));
  }
  // Group-limited: 8 experts in 4 groups of 2, 2 groups used, top-2. With topk / group_topk = 1 a group's
  // score is its best expert's, so the routing depends only on the order of the 8 scores: all 8! orders
  // are equally likely under i.i.d. scores. Megatron's rule on each order (moe_utils.py group_limited_topk):
  // the 2 groups with the best experts, then the best 2 experts of those 4.
  MoeConfig g = m;
  g.num_experts = 8, g.moe_router_topk = 2, g.moe_router_num_groups = 4, g.moe_router_group_topk = 2;
  const MoeTokenSpread s(g);
  const std::vector<std::pair<int, int>> gsets = {{0, 1}, {0, 2}, {1, 3}, {0, 4}, {2, 7}, {5, 8}};
  std::vector<int> rank(8);
  std::iota(rank.begin(), rank.end(), 0);  // rank[e]: expert e's place in the order (0 = best)
  std::vector<long> hit(gsets.size(), 0);
  long orders = 0, distinct = 0;
  do {
    ++orders;
    std::vector<int> groups = {0, 1, 2, 3};
    auto best = [&](int grp) { return std::min(rank[2 * grp], rank[2 * grp + 1]); };
    std::sort(groups.begin(), groups.end(), [&](int x, int y) { return best(x) < best(y); });
    std::vector<int> pool = {2 * groups[0], 2 * groups[0] + 1, 2 * groups[1], 2 * groups[1] + 1};
    std::sort(pool.begin(), pool.end(), [&](int x, int y) { return rank[x] < rank[y]; });
    for (std::size_t i = 0; i < gsets.size(); ++i) {
      const auto [a, b] = gsets[i];
      hit[i] += (pool[0] >= a && pool[0] < b) || (pool[1] >= a && pool[1] < b);
    }
    distinct += pool[0] / 2 == pool[1] / 2 ? 1 : 2;
  } while (std::next_permutation(rank.begin(), rank.end()));
  // The sampled profile (32768 tokens) leaves a standard error of about 0.003 on these probabilities.
  for (std::size_t i = 0; i < gsets.size(); ++i)
    CHECK(std::abs(s.reach(gsets[i].first, gsets[i].second) - double(hit[i]) / orders) < 0.01);
  // Distinct groups per token: here the limit binds nothing -- the best expert's group is kept, and so is the
  // group of the best expert outside it, so the top 2 of the kept groups are the top 2 overall -- and the
  // enumeration's count equals that of 2 experts drawn from all 8 without limit, 4 (1 - C(6, 2) / C(8, 2)) =
  // 13/7: the sampled profile must not invent a difference.
  double groups_reached = 0, groups_free = 0;
  MoeConfig free8 = g;
  free8.moe_router_num_groups = 0, free8.moe_router_group_topk = 0;
  const MoeTokenSpread f(free8);
  for (int grp = 0; grp < 4; ++grp) groups_reached += s.reach(2 * grp, 2 * grp + 2), groups_free += f.reach(2 * grp, 2 * grp + 2);
  CHECK(groups_free == doctest::Approx(13.0 / 7.0).epsilon(1e-12));
  CHECK(double(distinct) / orders == doctest::Approx(13.0 / 7.0).epsilon(1e-12));
  CHECK(std::abs(groups_reached - double(distinct) / orders) < 0.01);
  // DeepSeek-V3's node-limited routing (256 experts, 8 groups, 4 used, top-8, so a group scores by the sum of
  // its best 2): a separate sampling of Megatron's rule with all 256 i.i.d. uniform scores per token (60000
  // tokens, Python, 2026-11-27) reached 3.9546 groups and 7.4912 GPUs of 4 experts per token, standard errors
  // about 0.001 and 0.004.
  MoeConfig d;
  d.num_experts = 256, d.moe_router_topk = 8, d.moe_router_num_groups = 8, d.moe_router_group_topk = 4;
  const MoeTokenSpread ds(d);
  double nodes = 0, gpus = 0;
  for (int n = 0; n < 8; ++n) nodes += ds.reach(32 * n, 32 * n + 32);
  for (int q = 0; q < 64; ++q) gpus += ds.reach(4 * q, 4 * q + 4);
  CHECK(std::abs(nodes - 3.9546) < 0.005);
  CHECK(std::abs(gpus - 7.4912) < 0.02);
}

TEST_CASE("moe flex: a token crosses NVLink once per destination GPU; dropless forward dispatches wait on the host") {
  // EP 2 on one server, 4 of the 8 experts per rank, top-2: a token misses rank 1 with probability
  // (4/8)(3/7) = 3/14, so rank 1 receives 2 (1 - 3/14) / 2 = 11/14 of its slot bytes as distinct tokens.
  Trace a2a = gen(small_moe({{"expert_model_parallel_size", "2"}}));
  Trace flex = gen(small_moe({{"expert_model_parallel_size", "2"}, {"moe_token_dispatcher_type", "flex"}}));
  const auto& Wa = a2a.comms.at(first_op(a2a, ".moe.dispatch").comm).a2a_matrix;
  const auto& Wf = flex.comms.at(first_op(flex, ".moe.dispatch").comm).a2a_matrix;
  REQUIRE(Wf.size() == 2);
  CHECK(Wa[0][1] == doctest::Approx(0.5));
  CHECK(Wf[0][1] == doctest::Approx(0.5 * 11.0 / 14.0));
  CHECK(flex.comms.at(first_op(flex, ".moe.combine").comm).a2a_matrix[1][0] == doctest::Approx(0.5 * 11.0 / 14.0));
  // An EP group that fills its domains unevenly: EP 12 over 8-GPU servers puts ranks 0-7 (16 of the 24
  // experts) on one server and ranks 8-11 (8 experts) on the next. Top-4: the scale-out entries into each
  // server carry that server's distinct copies, 1 - C(24 - n, 4) / C(24, 4) per token for its n experts,
  // over its 4 n / 24 slots; the same-server entries a GPU's (n = 2).
  {
    Trace u = gen(small_moe({{"num_experts", "24"}, {"moe_router_topk", "4"}, {"expert_model_parallel_size", "12"},
                             {"pipeline_model_parallel_size", "1"}, {"world_size", "24"}, {"global_batch_size", "24"},
                             {"gpus_per_host", "8"}, {"moe_token_dispatcher_type", "flex"}}));
    const auto& W = u.comms.at(first_op(u, ".moe.dispatch").comm).a2a_matrix;
    REQUIRE(W.size() == 12);
    auto miss = [](double n) {
      double p = 1;
      for (int i = 0; i < 4; ++i) p *= (24.0 - n - i) / (24.0 - i);
      return p;
    };
    CHECK(W[0][8] == doctest::Approx((1 - miss(8)) / (4.0 * 8 / 24) / 12).epsilon(1e-9));
    CHECK(W[8][0] == doctest::Approx((1 - miss(16)) / (4.0 * 16 / 24) / 12).epsilon(1e-9));
    CHECK(W[0][1] == doctest::Approx((1 - miss(2)) / (4.0 * 2 / 24) / 12).epsilon(1e-9));
    CHECK(W[8][9] == doctest::Approx(W[0][1]).epsilon(1e-12));
    CHECK(u.comms.at(first_op(u, ".moe.combine").comm).a2a_matrix[8][0] == doctest::Approx(W[0][8]).epsilon(1e-12));
  }
  // One expert per rank (EP 8, top-2 on distinct experts): every slot goes to its own rank, nothing to merge.
  Trace one = gen(small_moe({{"moe_token_dispatcher_type", "flex"}}));
  CHECK(one.comms.at(first_op(one, ".moe.dispatch").comm).a2a_matrix[3][5] == doctest::Approx(1.0 / 8));

  // Host sync: one per forward dispatch (2 MoE layers per stage x 2 micro-batches on rank 0), none in the
  // backward, none with drop-and-pad (static sizes) or under the 1F1B A2A overlap.
  auto syncs = [](const Trace& t) {
    std::vector<const Op*> r;
    for (const auto& op : t.ranks.at(0).ops)
      if (op.name.find(".moe.host_sync") != std::string::npos) r.push_back(&op);
    return r;
  };
  for (const Trace* t : {&a2a, &flex}) {
    const auto s = syncs(*t);
    REQUIRE(s.size() == 4);
    for (const Op* op : s) {
      CHECK(op->name.find(".fwd.") != std::string::npos);
      CHECK(op->duration_s == doctest::Approx(10.56e-6));
      CHECK(op->stream == first_op(*t, ".fwd.moe.router").stream);
    }
  }
  CHECK(syncs(gen(small_moe({{"moe_expert_capacity_factor", "1"}, {"moe_pad_expert_input_to_capacity", "true"}}))).empty());
  CHECK(syncs(gen(small_moe({{"moe_expert_capacity_factor", "1"}}))).size() == 4);
  CHECK(syncs(gen(small_moe({{"overlap_moe_expert_parallel_comm", "true"}, {"num_layers", "8"},
                             {"virtual_pipeline_model_parallel_size", "2"}}))).empty());
}

TEST_CASE("moe generator: dispatchers, expert tensor parallelism, shared expert overlap, grouped GEMM") {
  // allgather dispatcher: all-gather / reduce-scatter over the EP group instead of all_to_allv.
  Trace ag = gen(small_moe({{"moe_token_dispatcher_type", "allgather"}}));
  CHECK(first_op(ag, ".moe.dispatch").coll == CollOp::AllGather);
  CHECK(first_op(ag, ".moe.combine").coll == CollOp::ReduceScatter);
  // ETP 2 x EP 4 (parallel folding over 8 GPUs of a stage): ETP all-gather / reduce-scatter around the experts.
  Trace et = gen(small_moe({{"expert_model_parallel_size", "4"}, {"expert_tensor_parallel_size", "2"}}));
  CHECK(et.comms.at(first_op(et, ".moe.dispatch").comm).ranks.size() == 4);
  CHECK(first_op(et, ".moe.etp.ag").coll == CollOp::AllGather);
  // Without grouped GEMM the experts run as a loop of GEMMs: more kernels, no faster. EP 2 leaves 4 local
  // experts (with EP 8 each rank has one expert, and one GEMM is a grouped GEMM of one).
  Trace loop = gen(small_moe({{"moe_grouped_gemm", "false"}, {"expert_model_parallel_size", "2"}}));
  Trace grouped = gen(small_moe({{"expert_model_parallel_size", "2"}}));
  CHECK(first_op(loop, ".fwd.moe.experts").duration_s >= first_op(grouped, ".fwd.moe.experts").duration_s);
  // Shared expert: computed beside the dispatch with moe_shared_expert_overlap (before the dispatched wait).
  Trace sh = gen(small_moe({{"moe_shared_expert_intermediate_size", "1024"}, {"moe_shared_expert_overlap", "true"}}));
  const auto& ops = sh.ranks.at(0).ops;
  std::size_t i_shared = 0, i_wait = 0;
  for (std::size_t i = 0; i < ops.size() && (!i_shared || !i_wait); ++i) {
    if (!i_shared && ops[i].name.find(".fwd.moe.shared") != std::string::npos) i_shared = i;
    if (!i_wait && ops[i].name.find(".fwd.moe.dispatched") != std::string::npos) i_wait = i;
  }
  CHECK(i_shared > 0);
  CHECK(i_shared < i_wait);
}

TEST_CASE("moe memory: expert weights sharded by EP, optimizer state by EDP") {
  auto mem = [](ParamMap over) {
    return gpt_memory_per_gpu(gpt_config_from_params(small_moe(over), "--param"));
  };
  const auto ep8 = mem({}), ep4 = mem({{"expert_model_parallel_size", "4"}});
  CHECK(ep4.weights_bytes > ep8.weights_bytes);
  // EP 4 on 8 GPUs per stage: expert data-parallel 2 shards the expert optimizer state with the
  // distributed optimizer.
  const auto ep4_do = mem({{"expert_model_parallel_size", "4"}, {"use_distributed_optimizer", "true"}});
  CHECK(ep4_do.optimizer_bytes < ep4.optimizer_bytes);
  // A skewed router needs more activation memory on the busiest rank.
  CHECK(mem({{"moe_load", "zipf"}, {"moe_load_skew", "1.5"}}).activations_bytes > ep8.activations_bytes);
}

TEST_CASE("moe with Megatron FSDP: each MoE layer's experts are gathered and reduce-scattered over EDP") {
  // 16 GPUs, PP 2 -> 8 per stage; EP 4, ETP 1 -> EDP 2. ZeRO-3 shards the experts over EDP, so every
  // layer's forward and backward gather its local experts (2 experts x 3 x 1024 x 2816 bf16) and its
  // backward reduce-scatters their gradients; the step-end expert reduce-scatter is then not needed.
  const ParamMap fsdp = {{"expert_model_parallel_size", "4"}, {"expert_tensor_parallel_size", "1"},
                         {"data_parallel_sharding_strategy", "optim_grads_params"}};
  const Trace t = gen(small_moe(fsdp));
  const double expert_bytes = 2.0 * 3.0 * 1024 * 2816 * 2.0;
  int ag = 0, rs = 0, step_end = 0;
  for (const Op& op : t.ranks.at(0).ops) {
    if (op.name.find("edp.experts") != std::string::npos) ++step_end;
    const bool is_ag = op.name.find(".fsdp.ag.experts") != std::string::npos,
               is_rs = op.name.find(".fsdp.rs.experts") != std::string::npos;
    if (!is_ag && !is_rs) continue;
    ag += is_ag, rs += is_rs;
    // bf16 weights gathered; gradients reduce-scattered in fp32 (Megatron's rule for bf16 parameters)
    CHECK(op.bytes == doctest::Approx(is_ag ? expert_bytes : 2.0 * expert_bytes));
    const Communicator& cm = t.comms.at(static_cast<std::size_t>(op.comm));
    CHECK(cm.ranks.size() == 2);  // the EDP group
    CHECK(cm.ranks[1] - cm.ranks[0] == 4);  // EDP is outermost in the stage's expert grid (ETP x EP = 4)
  }
  // Stage 0 holds 2 MoE layers; 16 / (1 x 8 DP) = 2 micro-batches: 2 x 2 forward + 2 x 2 backward gathers.
  CHECK(ag == 8);
  CHECK(rs == 4);
  CHECK(step_end == 0);
  // Without FSDP (distributed optimizer) the experts are not gathered per layer.
  const Trace d = gen(small_moe({{"expert_model_parallel_size", "4"}, {"use_distributed_optimizer", "true"}}));
  for (const Op& op : d.ranks.at(0).ops) CHECK(op.name.find(".fsdp.") == std::string::npos);
  // Memory: the running and the prefetched layer's gathered experts and the running one's gradient. EP 8 on
  // the 8 GPUs of a stage has EDP 1 (nothing sharded, nothing gathered); EP 4 holds twice the experts per
  // layer, sharded over EDP 2 (the same 2 bytes per local parameter in all) plus two gathered layers.
  auto mem = [](const ParamMap& over) { return gpt_memory_per_gpu(gpt_config_from_params(small_moe(over), "--param")); };
  const auto m4 = mem(fsdp), m8 = mem({{"data_parallel_sharding_strategy", "optim_grads_params"}});
  const double layer_experts = 2.0 * 3.0 * 1024 * 2816;  // EP 4: 2 local experts
  CHECK(m4.weights_bytes - m8.weights_bytes == doctest::Approx(2.0 * 2.0 * layer_experts));
  CHECK(m4.grads_bytes - m8.grads_bytes == doctest::Approx(4.0 * layer_experts));  // fp32 gradients (bf16 rule)
}

TEST_CASE("moe with torch FSDP2 expert units: each MoE layer's experts gathered and reduce-scattered over EDP") {
  // torchtitan with EP (fsdp_expert_units; pytorch/torchtitan@01f4e5022 apply_fsdp): 16 GPUs, PP 1, EP 4 -> EDP
  // 4. Every MoE layer gathers its 2 local experts (2 x 3 x 1024 x 2816 bf16) over EDP after its dense part on
  // the FSDP stream, with FSDP2's copy-in on the copy-in stream, and reduce-scatters their fp32 gradients over
  // EDP after its backward; no step-end expert reduce-scatter remains.
  const ParamMap units = {{"pipeline_model_parallel_size", "1"}, {"expert_model_parallel_size", "4"},
                          {"use_torch_fsdp2", "true"}, {"grad_reduce_in_fp32", "true"}, {"fsdp_expert_units", "true"}};
  const Trace t = gen(small_moe(units));
  const double expert_bytes = 2.0 * 3.0 * 1024 * 2816 * 2.0;
  const RankTrace& r0 = t.ranks.at(0);
  std::uint16_t fsdp_stream = 0, copy_in_stream = 0;
  for (std::size_t i = 0; i < r0.streams.size(); ++i) {
    if (r0.streams[i] == "comm.fsdp") fsdp_stream = static_cast<std::uint16_t>(i);
    if (r0.streams[i] == "fsdp.copy_in") copy_in_stream = static_cast<std::uint16_t>(i);
  }
  REQUIRE(fsdp_stream > 0);
  REQUIRE(copy_in_stream > 0);
  int ag = 0, rs = 0, step_end = 0, copy_in = 0, copy_out = 0, chunk_cat = 0;
  for (std::size_t i = 0; i < r0.ops.size(); ++i) {
    const Op& op = r0.ops[i];
    if (op.name.find("edp.experts") != std::string::npos) ++step_end;
    copy_in += op.name.find(".experts.copy_in") != std::string::npos && op.stream == copy_in_stream;
    copy_out += op.name.find(".experts.copy_out") != std::string::npos && op.stream == 0;
    chunk_cat += op.name.find(".fsdp.experts.chunk_cat") != std::string::npos && op.stream == 0;
    const bool is_ag = op.name.find(".fsdp.ag.experts") != std::string::npos,
               is_rs = op.name.find(".fsdp.rs.experts") != std::string::npos;
    if (!is_ag && !is_rs) continue;
    ag += is_ag, rs += is_rs;
    CHECK(op.stream == fsdp_stream);
    CHECK(op.bytes == doctest::Approx(is_ag ? expert_bytes : 2.0 * expert_bytes));  // bf16 gather, fp32 reduce
    const Communicator& cm = t.comms.at(static_cast<std::size_t>(op.comm));
    CHECK(cm.ranks.size() == 4);  // the EDP group
    if (is_ag) {
      // issued after the layer's dense gather (a dependency on it), as torchtitan's prefetch list orders them
      bool after_dense = false;
      for (auto d : op.deps) after_dense = after_dense || r0.ops[d].name.find(".fsdp.ag") != std::string::npos;
      CHECK(after_dense);
    }
  }
  // 4 MoE layers, 16 / (1 x 16 DP) = 1 micro-batch: 4 forward + 4 backward gathers (the backward regathers after
  // resharding), 4 reduce-scatters.
  CHECK(ag == 8);
  CHECK(rs == 4);
  CHECK(copy_in == 8);
  CHECK(copy_out == 8);
  CHECK(chunk_cat == 4);
  CHECK(step_end == 0);
  // Without the units (fabricsim before, and torch FSDP2 outside torchtitan's EP) one step-end reduce-scatter.
  ParamMap off = units;
  off["fsdp_expert_units"] = "false";
  int off_ag = 0, off_end = 0;
  const Trace t_off = gen(small_moe(off));  // named: a temporary would die before the loop reads its ops
  for (const Op& op : t_off.ranks.at(0).ops) {
    off_ag += op.name.find(".fsdp.ag.experts") != std::string::npos;
    off_end += op.name.find("edp.experts") != std::string::npos;
  }
  CHECK(off_ag == 0);
  CHECK(off_end == 1);
  // Memory: the running and the prefetched layer's gathered experts and the running one's fp32 gradient.
  auto mem = [](const ParamMap& over) { return gpt_memory_per_gpu(gpt_config_from_params(small_moe(over), "--param")); };
  const double layer_experts = 2.0 * 3.0 * 1024 * 2816;
  CHECK(mem(units).weights_bytes - mem(off).weights_bytes == doctest::Approx(2.0 * 2.0 * layer_experts));
  CHECK(mem(units).grads_bytes - mem(off).grads_bytes == doctest::Approx(4.0 * layer_experts));
  // It describes torch FSDP2's units.
  CHECK(error_of([] { gen(small_moe({{"fsdp_expert_units", "true"}})); }).find("fsdp_expert_units") != std::string::npos);
}

TEST_CASE("moe parameters: bad input names the parameter") {
  CHECK(error_of([] { gen(small_moe({{"expert_model_parallel_size", "3"}})); }).find("expert_model_parallel_size") != std::string::npos);
  CHECK(error_of([] { gen(small_moe({{"tensor_model_parallel_size", "2"}, {"expert_model_parallel_size", "4"}})); })
            .find("sequence_parallel") != std::string::npos);
  CHECK(error_of([] { gen(small_moe({{"moe_token_dispatcher_type", "deepep"}})); }).find("alltoall") != std::string::npos);
  CHECK(error_of([] { gen(small_moe({{"moe_load", "file"}})); }).find("moe_expert_token_counts_file") != std::string::npos);
  CHECK(error_of([] { gen(small_moe({{"moe_router_topk", "9"}})); }).find("moe_router_topk") != std::string::npos);
  CHECK(error_of([] { gen(small_moe({{"moe_capacity", "1"}})); }).find("moe_capacity") != std::string::npos);
}

TEST_CASE("moe trace: all_to_allv matrices round-trip through the trace JSON and are checked") {
  Trace t = gen(small_moe({{"moe_load", "zipf"}}));
  Json j = trace_to_json(t);
  Trace back = trace_from_json(j, "t.json");
  const Op& d = first_op(back, ".moe.dispatch");
  CHECK(back.comms.at(d.comm).a2a_matrix == t.comms.at(first_op(t, ".moe.dispatch").comm).a2a_matrix);
  for (auto& c : j["communicators"])
    if (c.contains("all_to_allv_matrix")) {
      c["all_to_allv_matrix"][0].erase(0);
      break;
    }
  CHECK(error_of([&] { trace_from_json(j, "t.json"); }).find("all_to_allv_matrix/0") != std::string::npos);
}

TEST_CASE("moe example: DeepSeek-V3 on 2048 H800 generates with flex dedup and forwarding, FP8 dispatch, MTP, DualPipe") {
  const std::string f = std::string(FABRICSIM_SOURCE_DIR) + "/examples/workloads/deepseek-v3-2048-h800.json";
  Json sc = load_json_file(f);
  ParamMap p = params_from_json(sc["workload"]["params"], JsonPath{f, "/workload/params"});
  p["gpus_per_host"] = "8";
  p["gpu"] = "h100";  // the scenario takes it from the topology (dgx-h100 servers)
  Trace t = gen(p);
  CHECK(t.ranks.size() == 16);
  // Stage 0 holds the 3 dense layers; stage 1 the first MoE layers.
  const Op& d = first_op(t, ".fwd.moe.dispatch", 1);
  const auto& W = t.comms.at(d.comm).a2a_matrix;
  REQUIRE(W.size() == 64);
  // Node-limited routing to 4 of 8 nodes, top-8 (MoeTokenSpread, checked in "moe token spread" above): a
  // token reaches 3.9545 nodes and 7.4907 GPUs, so remote entries carry 3.9545 / 8 = 0.4943 copies per slot
  // and same-server ones 7.4907 / 8 = 0.9363.
  CHECK(W[0][1] == doctest::Approx(0.9363 / 64).epsilon(0.001));
  CHECK(W[0][8] == doctest::Approx(0.4943 / 64).epsilon(0.001));
  // FP8 forward dispatch (1 + 4/128 bytes per element), BF16 combine: 4096 tokens x 8 x 7168.
  CHECK(d.bytes == doctest::Approx(4096.0 * 8 * 7168 * (1.0 + 4.0 / 128)));
  CHECK(first_op(t, ".fwd.moe.combine", 1).bytes == doctest::Approx(4096.0 * 8 * 7168 * 2));
  // DualPipe (the scenario's pipeline_parallel_schedule): every MoE layer sits on two ranks, one per
  // direction, each with its own EP group: 2 x 58 dispatch communicators, and the MTP layer's (an MoE layer, as
  // DeepSeek-V3's last layer) on the two ranks that end the model.
  auto ends_with = [](const std::string& a, const std::string& b) {
    return a.size() >= b.size() && a.compare(a.size() - b.size(), b.size(), b) == 0;
  };
  int moe_comms = 0, nvl_comms = 0;
  for (const auto& c : t.comms) moe_comms += ends_with(c.name, ".dispatch"), nvl_comms += ends_with(c.name, ".dispatch.nvlink");
  CHECK(moe_comms == 2 * 58 + 2);
  // flex's NVLink forwarding leg, one per dispatch: GPU i of a server forwards to GPU j of the same server
  // the slots that the 7 sources with i's local index in the other 7 servers routed to j (uniform router:
  // 1/64 of each source's slots, one copy per destination GPU: x 0.9363), nothing across servers.
  CHECK(nvl_comms == 2 * 58 + 2);
  const Op& fwd = first_op(t, ".fwd.moe.dispatch.nvlink", 1);
  const auto& F = t.comms.at(fwd.comm).a2a_matrix;
  REQUIRE(F.size() == 64);
  CHECK(F[0][1] == doctest::Approx(7.0 * 0.9363 / 64).epsilon(0.001));
  CHECK(F[0][0] == 0.0);
  CHECK(F[0][8] == 0.0);
  CHECK(fwd.bytes == doctest::Approx(d.bytes));
  bool mtp = false;
  for (const auto& op : t.ranks.back().ops) mtp = mtp || op.name.find(".mtp0.fwd.moe.dispatch") != std::string::npos;
  CHECK(mtp);
  CHECK(t.metadata.at("memory_per_gpu_bytes.max") < 80.0 * 1024 * 1024 * 1024);
}

TEST_CASE("moe overlap_moe_expert_parallel_comm: checked against what is modelled") {
  CHECK(error_of([] { gen(small_moe({{"overlap_moe_expert_parallel_comm", "true"}, {"moe_token_dispatcher_type", "allgather"}})); })
            .find("alltoall or flex") != std::string::npos);
  {
    // With virtual pipeline stages and as many micro-batches as stages (2 on PP 2 x VP 2, 4 chunk passes per
    // stage): Megatron pairs only its steady-state (forward k + warm-up, backward k) steps. Stage 0 warms up
    // with (2 - 1) * 2 + (2 - 1) * 2 + 1 = 5 >= 4 passes, i.e. all of them (get_pp_rank_microbatches'
    // are_all_microbatches_in_warmup): no pair; stage 1 with 0 + 2 + 1 = 3: one pair.
    const Trace t = gen(small_moe({{"overlap_moe_expert_parallel_comm", "true"}, {"num_layers", "8"},
                                   {"virtual_pipeline_model_parallel_size", "2"}}));
    auto joins = [](const RankTrace& r) {
      int n = 0;
      for (const auto& op : r.ops) n += op.name.find(".a2a_overlap.join") != std::string::npos;
      return n;
    };
    CHECK(joins(t.ranks.at(0)) == 0);
    CHECK(joins(t.ranks.at(1)) == 1);
  }
  {
    // 4 micro-batches, PP 2 x VP 2: stage 0 warms up with Megatron's (p - 1) * 2 + (v - 1) * p = 4 forward
    // chunks, one more with the overlap (schedules.py get_pp_rank_microbatches); the first steady-state
    // forward is then paired, its first layer emitted before the paired backward. Forward chunks started
    // before the first backward op: 4 + 1 = 5 without the overlap, 5 + 1 = 6 with it.
    auto started_before_backward = [](const Trace& t) {
      std::set<std::string> fwd;
      for (const auto& op : t.ranks.at(0).ops) {
        if (op.name.find(".bwd.") != std::string::npos) break;
        const auto at = op.name.find(".l");
        if (op.name.find(".fwd.attn") != std::string::npos) fwd.insert(op.name.substr(0, at));
      }
      return fwd.size();
    };
    ParamMap vpp = {{"num_layers", "8"}, {"virtual_pipeline_model_parallel_size", "2"}, {"global_batch_size", "32"}};
    CHECK(started_before_backward(gen(small_moe(vpp))) == 5);
    vpp["overlap_moe_expert_parallel_comm"] = "true";
    CHECK(started_before_backward(gen(small_moe(vpp))) == 6);
  }
  // The dense path of the generator is untouched by the option's pairing (a dense model rejects it).
  CHECK(error_of([] { gen(small_moe({{"overlap_moe_expert_parallel_comm", "true"}, {"num_experts", "0"}})); })
            .find("needs num_experts") != std::string::npos);
  Trace t = gen(small_moe({{"overlap_moe_expert_parallel_comm", "true"}}));
  int joins = 0;
  for (const auto& op : t.ranks.at(0).ops) joins += op.name.find(".a2a_overlap.join") != std::string::npos;
  CHECK(joins > 0);
}

TEST_CASE("moe delay_wgrad_compute: the experts' weight gradient runs while the combine all-to-all is in flight") {
  CHECK(error_of([] { gen(small_moe({{"delay_wgrad_compute", "true"}})); }).find("needs overlap_moe_expert_parallel_comm") !=
        std::string::npos);
  const Trace on = gen(small_moe({{"overlap_moe_expert_parallel_comm", "true"}, {"delay_wgrad_compute", "true"}}));
  const Trace off = gen(small_moe({{"overlap_moe_expert_parallel_comm", "true"}}));
  for (const RankTrace& r : on.ranks) {
    CAPTURE(r.rank);
    int wgrad = 0;
    for (std::size_t i = 0; i < r.ops.size(); ++i) {
      const Op& op = r.ops[i];
      if (op.name.find(".bwd.moe.combine") != std::string::npos && op.kind == OpKind::Collective) {
        // The combine (the input gradient going back to the tokens' ranks) starts after the experts' input
        // gradient, not after their weight gradient: the next op is that weight gradient, depending on the
        // same experts op, with the combine not among its dependencies.
        REQUIRE(i + 1 < r.ops.size());
        const Op& w = r.ops[i + 1];
        CHECK(w.name.find(".bwd.moe.experts.wgrad") != std::string::npos);
        CHECK(w.deps == op.deps);
        ++wgrad;
      }
    }
    CHECK(wgrad > 0);
  }
  // The same kernels, regrouped: per rank the compute is unchanged.
  for (std::size_t st = 0; st < on.ranks.size(); ++st) {
    CHECK(compute_s(on.ranks[st]) == doctest::Approx(compute_s(off.ranks[st])).epsilon(1e-6));
  }
  // The first layer of a chunk (the last in backward) runs its attention weight gradient after the
  // micro-batch's pipeline send (stage 1 sends its input gradient to stage 0).
  const RankTrace& r1 = on.ranks.at(1);
  long send = -1, w = -1;
  for (std::size_t i = 0; i < r1.ops.size(); ++i) {
    if (r1.ops[i].name == "mb0.send.bwd") send = static_cast<long>(i);
    if (r1.ops[i].name == "mb0.l2.bwd.attn.wgrad") w = static_cast<long>(i);
  }
  CHECK(send >= 0);
  CHECK(w > send);
}

TEST_CASE("moe recompute_modules: moe reruns the MoE layer forward with its all-to-alls, and stores less") {
  auto count = [](const Trace& t, const std::string& part) {
    int n = 0;
    for (const auto& op : t.ranks.at(0).ops) n += op.name.find(part) != std::string::npos;
    return n;
  };
  auto compute_s = [](const Trace& t) {
    double s = 0;
    for (const auto& op : t.ranks.at(0).ops) s += op.kind == OpKind::Compute ? op.duration_s : 0.0;
    return s;
  };
  const ParamMap sel = {{"recompute_granularity", "selective"}};
  const Trace none = gen(small_moe());
  const Trace core = gen(small_moe(sel));  // Megatron's default list: core_attn
  ParamMap mo = sel;
  mo["recompute_modules"] = "layernorm moe";
  const Trace moe = gen(small_moe(mo));
  // The recomputed MoE forward: one more dispatch and combine per MoE layer and micro-batch, named .recompute.
  CHECK(count(none, ".recompute.moe.dispatch") == 0);
  CHECK(count(core, ".recompute.moe.dispatch") == 0);
  CHECK(count(moe, ".recompute.moe.dispatch") == count(moe, ".bwd.moe.dispatch"));
  CHECK(count(moe, ".recompute.moe.combine") == count(moe, ".fwd.moe.combine"));
  // Time: the MoE forward (router, experts, unpermute) and two norms again, but no attention recompute.
  CHECK(compute_s(moe) > compute_s(none));
  CHECK(compute_s(core) > compute_s(none));
  // Memory: the MoE layer keeps only its input; layernorm drops the norm outputs.
  auto act = [](ParamMap over) {
    return gpt_memory_per_gpu(gpt_config_from_params(small_moe(over), "--param")).activations_bytes;
  };
  ParamMap ln = sel, ma = sel;
  ln["recompute_modules"] = "layernorm";
  ma["recompute_modules"] = "moe_act";
  CHECK(act(mo) < act(ln));
  CHECK(act(ln) < act(sel));
  CHECK(act(ma) < act(sel));
  // Megatron's rules and the modules not modelled are refused with the parameter's name.
  ParamMap bad = {{"recompute_modules", "moe"}};
  CHECK(error_of([&] { gen(small_moe(bad)); }).find("needs recompute_granularity selective") != std::string::npos);
  // (mlp and shared_experts are priced since 2026-11-29, tests/workloads/test_gpt_recompute_modules.cpp; mla_up_proj
  // needs multi-latent attention, as Megatron-Core says.)
  ParamMap up = sel;
  up["recompute_modules"] = "mla_up_proj";
  CHECK(error_of([&] { gen(small_moe(up)); }).find("needs multi_latent_attention") != std::string::npos);
  ParamMap typo = sel;
  typo["recompute_modules"] = "layernorm, moe_acts";
  CHECK(error_of([&] { gen(small_moe(typo)); }).find("moe_acts") != std::string::npos);
}
