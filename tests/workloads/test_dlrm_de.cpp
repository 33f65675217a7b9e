// DLRM generator: distributed-embeddings' own table placement (DistEmbeddingStrategy at
// github:NVIDIA-Merlin/distributed-embeddings @ c6b2e2f) and the benchmark's per-step costs (host->device id
// copy, Horovod latency, TensorFlow op structure). Expected placements below are worked out by hand from
// the library's algorithm on the Small v3 model (107 tables), not read back from the implementation.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <algorithm>
#include <functional>
#include <set>
#include <vector>
#include <string>

#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "sim/base/error.hpp"
#include "workloads/dlrm.hpp"
#include "workloads/trace.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {
const std::string kConfigs =
    std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/training/distributed_embeddings_synthetic_configs.json";

std::set<int> tables_on(const ShardingPlan& p, int gpu) {
  std::set<int> out;
  for (const auto& s : p.shards)
    if (s.gpu == gpu) out.insert(s.table);
  return out;
}

constexpr double kGiB = 1073741824.0;
}  // namespace

TEST_CASE("DLRM distributed-embeddings memory_balanced placement matches the library's algorithm") {
  DlrmConfig c = load_dlrm_model(kConfigs, "small", "test");
  REQUIRE(c.tables.size() == 107);
  c.sharding = "memory_balanced";
  c.world_size = 16;
  ShardingPlan p = plan_sharding(c, 72.0 * kGiB, "test");
  CHECK(p.shards.size() == 107);  // no column_slice_threshold: no slices
  // Sorted by (rows*width, table id) descending: t9, t8 (50M x 32), t106..t80 (4M x 32), t7, t6, t5 (4M x 32,
  // shared). GPU i takes positions i and 31-i of the first 32: GPU 0 {t9, t5}, GPU 1 {t8, t6}, GPU 2 {t106, t7}.
  auto g0 = tables_on(p, 0), g1 = tables_on(p, 1), g2 = tables_on(p, 2);
  CHECK(g0.count(9) == 1);
  CHECK(g0.count(5) == 1);
  CHECK(g1.count(8) == 1);
  CHECK(g1.count(6) == 1);
  CHECK(g2.count(106) == 1);
  CHECK(g2.count(7) == 1);
  // Equal piece counts (107 over 16: 6 or 7 each).
  for (int g = 0; g < 16; ++g) {
    auto n = std::count_if(p.shards.begin(), p.shards.end(), [&](const Shard& s) { return s.gpu == g; });
    CHECK(n >= 6);
    CHECK(n <= 7);
  }
  // GPU 1 serves two 31-hot shared tables: 2 x 31 x 65536 ids plus its one-hot tables; the strategy balances
  // memory, not lookups, so it is the busiest GPU.
  std::vector<double> ids(16, 0);
  for (const auto& s : p.shards) ids[s.gpu] += s.ids;
  CHECK(std::max_element(ids.begin(), ids.end()) - ids.begin() == 1);
  CHECK(ids[1] >= 2.0 * 31 * 65536);
}

TEST_CASE("DLRM distributed-embeddings column slicing, basic and memory_optimized strategies, errors") {
  DlrmConfig c = load_dlrm_model(kConfigs, "small", "test");
  c.world_size = 8;
  c.sharding = "memory_balanced";
  c.column_slice_threshold = 1280LL * 1048576;  // the README's multi-GPU command
  ShardingPlan p = plan_sharding(c, 72.0 * kGiB, "test");
  // 50M x 32 = 1.6e9 elements > 1.34e9: 2 slices of width 16 for t8 and t9; everything else whole.
  CHECK(p.shards.size() == 109);
  int slices = 0;
  for (const auto& s : p.shards)
    if (s.table == 8 || s.table == 9) {
      ++slices;
      CHECK(s.kind == "column");
      CHECK(s.width == 16);
      CHECK(s.ids == doctest::Approx(65536.0 * (s.table == 8 ? 31 : 1)));
    }
  CHECK(slices == 4);

  // Medium: the 100M x 128 tables (1.28e10 elements) need 16 slices, capped at the world size.
  DlrmConfig m = load_dlrm_model(kConfigs, "medium", "test");
  m.sharding = "memory_balanced";
  m.world_size = 8;
  std::string e = error_of([&] { plan_sharding(m, 72.0 * kGiB, "scenario.json: /workload/params"); });
  CHECK(e.find("do not fit in GPU memory") != std::string::npos);  // unsliced: > 100 GiB on one GPU
  CHECK(e.find("column_slice_threshold") != std::string::npos);
  m.column_slice_threshold = 1280LL * 1048576;
  ShardingPlan mp = plan_sharding(m, 72.0 * kGiB, "test");
  int big = 0;
  for (const auto& s : mp.shards)
    if (s.rows == 100000000) {
      ++big;
      CHECK(s.width == 16);
    }
  CHECK(big == 16);  // two tables x 8 slices

  // basic: round robin in table order.
  c.sharding = "basic";
  c.column_slice_threshold = 0;
  ShardingPlan b = plan_sharding(c, 72.0 * kGiB, "test");
  for (const auto& s : b.shards) CHECK(s.gpu == s.table % 8);

  // memory_optimized: largest first onto the least-loaded GPU; total memory is the same as memory_balanced
  // and its fullest GPU is no fuller.
  c.sharding = "memory_optimized";
  ShardingPlan o = plan_sharding(c, 72.0 * kGiB, "test");
  c.sharding = "memory_balanced";
  ShardingPlan mb = plan_sharding(c, 72.0 * kGiB, "test");
  double so = 0, sb = 0;
  for (double x : o.memory_per_gpu_bytes) so += x;
  for (double x : mb.memory_per_gpu_bytes) sb += x;
  CHECK(so == doctest::Approx(sb));
  CHECK(*std::max_element(o.memory_per_gpu_bytes.begin(), o.memory_per_gpu_bytes.end()) <=
        *std::max_element(mb.memory_per_gpu_bytes.begin(), mb.memory_per_gpu_bytes.end()));

  // Fewer tables than GPUs: the library raises NotImplementedError.
  DlrmConfig t = load_dlrm_model(kConfigs, "tiny", "test");  // 55 tables
  t.sharding = "memory_balanced";
  t.world_size = 64;
  CHECK(error_of([&] { plan_sharding(t, 72.0 * kGiB, "test"); }).find("at least as many tables as GPUs") !=
        std::string::npos);
}

TEST_CASE("DLRM distributed-embeddings step: host->device id copy, Horovod latency, TensorFlow ops, params") {
  ParamMap p = {{"configs", kConfigs},        {"model", "small"},
                {"world_size", "8"},          {"sharding", "memory_balanced"},
                {"embedding_ops", "tensorflow"}, {"host_input", "true"},
                {"collective_latency", "0.5ms"}, {"h2d_bandwidth", "20GB/s"}};
  DlrmConfig c = dlrm_config_from_params(p, "--param");
  CHECK(c.host_input);
  CHECK(c.collective_latency_s == doctest::Approx(0.5e-3));
  CHECK(c.h2d_bandwidth_Bps == doctest::Approx(20e9));
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec("a100-80gb");
  Trace t = generate_dlrm(c, cm, "test");
  REQUIRE(t.ranks.size() == 8);
  ShardingPlan plan = plan_sharding(c, 1e30, "test");
  std::vector<double> ids(8, 0);
  for (const auto& s : plan.shards) ids[s.gpu] += s.ids;
  for (const auto& rt : t.ranks) {
    int waits = 0;
    bool h2d = false;
    for (const auto& op : rt.ops) {
      if (op.name == "input.h2d") {
        h2d = true;
        // 8-byte ids; GPUs 2k and 2k+1 share one 20 GB/s PCIe uplink fairly: the smaller copy (a bytes)
        // ends at 2a/bw, the larger (b) at (a+b)/bw.
        double mine = 8.0 * ids[rt.rank], other = 8.0 * ids[rt.rank ^ 1];
        double expect = mine <= other ? 2.0 * mine / 20e9 : (mine + other) / 20e9;
        CHECK(op.duration_s == doctest::Approx(expect).epsilon(1e-6));
        CHECK(rt.streams.at(op.stream) == "copy.h2d");
      }
      if (op.name.rfind("framework.wait.", 0) == 0) {
        ++waits;
        CHECK(op.duration_s == doctest::Approx(0.5e-3));
      }
    }
    CHECK(h2d);
    CHECK(waits == 3);  // forward all_to_all, backward all_to_all, MLP gradient all_reduce
  }
  // One GPU: no collectives, the copy gets the whole uplink.
  ParamMap p1 = p;
  p1["world_size"] = "1";
  Trace t1 = generate_dlrm(dlrm_config_from_params(p1, "--param"), cm, "test");
  for (const auto& op : t1.ranks[0].ops) {
    CHECK(op.kind == OpKind::Compute);
    if (op.name == "input.h2d") CHECK(op.duration_s == doctest::Approx(65536.0 * 8 * (98 + 9 * 31) / 20e9).epsilon(1e-6));
  }
  // The TensorFlow op structure costs more per-op overhead than the fused kernels (more ops per shard).
  cm.eff.kernel_overhead_s = 50e-6;
  ParamMap pf = p;
  pf["embedding_ops"] = "fused";
  Trace tf = generate_dlrm(dlrm_config_from_params(pf, "--param"), cm, "test");
  Trace tt = generate_dlrm(dlrm_config_from_params(p, "--param"), cm, "test");
  auto dur = [](const Trace& tr, const std::string& name) {
    for (const auto& op : tr.ranks[0].ops)
      if (op.name == name) return op.duration_s;
    return -1.0;
  };
  CHECK(dur(tt, "embedding.fwd") > dur(tf, "embedding.fwd"));
  CHECK(dur(tt, "embedding.bwd_update") > 0);
  // Parameter errors name the parameter.
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"embedding_ops", "xla"}, {"collective_latency", "soon"}, {"h2d_bandwidth", "fast"}, {"sharding", "greedy"}}) {
    ParamMap bad = p;
    bad[k] = v;
    std::string e = error_of([&] { dlrm_config_from_params(bad, "--param"); });
    CHECK_MESSAGE(e.find(k) != std::string::npos, k << ": " << e);
  }
}
