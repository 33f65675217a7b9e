// The all-to-all part of the imbalance cost (issue 21, replay/a2a_imbalance.hpp): skewed all_to_allv calls
// priced against their balanced counterparts on an idle fabric.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "models/gpu.hpp"
#include "replay/a2a_imbalance.hpp"
#include "replay/engine_comm_model.hpp"
#include "replay/executor.hpp"
#include "replay/outputs.hpp"
#include "replay/run_scenario.hpp"
#include "topologies/io.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {
using Matrix = std::vector<std::vector<double>>;

// A router's dispatch matrix: every source sends share[j] of its tokens to rank j, times f(i, j).
Matrix routed(const std::vector<double>& share, double other_server_factor = 1.0, int per_server = 1 << 30) {
  const std::size_t n = share.size();
  Matrix m(n, std::vector<double>(n));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      m[i][j] = share[j] * (int(i) / per_server != int(j) / per_server ? other_server_factor : 1.0);
  return m;
}
Matrix transpose(const Matrix& m) {
  Matrix t = m;
  for (std::size_t i = 0; i < m.size(); ++i)
    for (std::size_t j = 0; j < m.size(); ++j) t[i][j] = m[j][i];
  return t;
}
std::vector<double> hot_share(std::size_t n, double hot) {
  std::vector<double> s(n, (1.0 - hot) / double(n - 1));
  s[0] = hot;
  return s;
}
}  // namespace

TEST_CASE("a2a imbalance: the balanced counterpart of a router's matrix is the uniform router's") {
  // Plain dispatch (and its transpose, the combine): every pair total / n^2, diagonal included.
  for (const Matrix& m : {routed(hot_share(8, 0.4)), transpose(routed(hot_share(8, 0.4)))}) {
    const Matrix b = sim::balanced_a2a_matrix(m);
    for (const auto& row : b)
      for (double x : row) CHECK(x == doctest::Approx(1.0 / 8).epsilon(1e-12));
  }
  // Flex-style structure (pairs on other servers carry 0.6 of the bytes): the uniform router's matrix
  // with that structure, at the same total; the plain even spread would move bytes between servers.
  const Matrix flex = routed(hot_share(8, 0.4), 0.6, 4), flex_uniform = routed(std::vector<double>(8, 1.0 / 8), 0.6, 4);
  const Matrix b = sim::balanced_a2a_matrix(flex);
  double total = 0, total_u = 0;
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t j = 0; j < 8; ++j) total += flex[i][j], total_u += flex_uniform[i][j];
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t j = 0; j < 8; ++j) CHECK(b[i][j] == doctest::Approx(flex_uniform[i][j] * total / total_u).epsilon(1e-9));
  // A rank that receives nothing: no scaling balances it, the off-diagonal total is spread evenly.
  Matrix z = routed({0.5, 0.5, 0.0, 0.0});
  const Matrix bz = sim::balanced_a2a_matrix(z);
  CHECK(bz[0][0] == doctest::Approx(0.25));  // diagonal total 1 over 4 ranks
  CHECK(bz[2][3] == doctest::Approx(3.0 / 12));  // off-diagonal total 3 over 12 pairs
}

TEST_CASE("a2a imbalance: two hand-made calls cost the difference of directly priced calls") {
  // 16 H100s on two DGX servers; every rank dispatches with a hot rank 0 (30 % of the tokens) and combines
  // (the transpose), 64 MiB mean send buffer per rank.
  const topo::Topology topo = topo::load_topology("superpod", {{"nodes", "2"}, {"node", "dgx-h100"}});
  const models::Calibration calib = models::default_calibration();
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec("h100-sxm");
  const double bytes = 64.0 * (1 << 20);
  Trace t;
  t.name = "a2a";
  t.world_size = 16;
  std::vector<std::int32_t> all;
  for (int r = 0; r < 16; ++r) all.push_back(r);
  t.comms.push_back({"dispatch", all, 0, 1, "ep", routed(hot_share(16, 0.3)), {}});
  t.comms.push_back({"combine", all, 0, 1, "ep", transpose(routed(hot_share(16, 0.3))), {}});
  for (int r = 0; r < 16; ++r) {
    RankTrace rt;
    rt.rank = r;
    for (int c = 0; c < 2; ++c) {
      Op op;
      op.kind = OpKind::Collective;
      op.coll = CollOp::AllToAllv;
      op.comm = c;
      op.bytes = bytes;
      op.name = t.comms[c].name;
      rt.ops.push_back(op);
    }
    t.ranks.push_back(rt);
  }
  // The same group with the uniform router's matrix (every entry 1/16), made by hand.
  Communicator uniform{"uniform", all, 0, 1, "ep", Matrix(16, std::vector<double>(16, 1.0 / 16)), {}};
  sim::EngineCommModel direct(topo, calib);
  const double d = direct.collective(t.comms[0], CollOp::AllToAllv, bytes, "").duration_s;
  const double c = direct.collective(t.comms[1], CollOp::AllToAllv, bytes, "").duration_s;
  const double u = direct.collective(uniform, CollOp::AllToAllv, bytes, "").duration_s;
  REQUIRE(d > 1.1 * u);  // the hot receiver slows the dispatch
  REQUIRE(c > 1.1 * u);  // and the hot sender the combine
  SUBCASE("engine") {
    sim::EngineCommModel comm(topo, calib);
    const sim::RunResult r = sim::replay(t, topo, cm, comm);
    CHECK(r.metrics.at("moe.imbalance_all_to_all_s") == doctest::Approx((d - u) + (c - u)).epsilon(1e-12));
    // The replay's own call times are the directly priced ones (nothing else runs), and stay its own.
    CHECK(r.iteration_s == doctest::Approx(d + c).epsilon(1e-12));
    CHECK(comm.schedules_run() == 2);
  }
  SUBCASE("shared") {
    sim::SharedNetworkCommModel comm(topo, calib);
    const sim::RunResult r = sim::replay(t, topo, cm, comm);
    CHECK(r.metrics.at("moe.imbalance_all_to_all_s") == doctest::Approx((d - u) + (c - u)).epsilon(1e-12));
  }
  SUBCASE("analytic") {
    sim::AnalyticCommModel comm(topo);
    sim::AnalyticCommModel fresh(topo);
    const double ad = fresh.collective(t.comms[0], CollOp::AllToAllv, bytes, "").duration_s;
    const double ac = fresh.collective(t.comms[1], CollOp::AllToAllv, bytes, "").duration_s;
    const double au = fresh.collective(uniform, CollOp::AllToAllv, bytes, "").duration_s;
    const sim::RunResult r = sim::replay(t, topo, cm, comm);
    CHECK(ad > au);
    CHECK(r.metrics.at("moe.imbalance_all_to_all_s") == doctest::Approx((ad - au) + (ac - au)).epsilon(1e-12));
  }
}

TEST_CASE("a2a imbalance: a Zipf router's MoE step reports a positive all-to-all part, the uniform router 0") {
  const std::string dir = std::string(FABRICSIM_SOURCE_DIR) + "/examples/sweeps/";
  auto run = [&](const std::string& load, const std::string& model) {
    Json j = load_json_file(dir + "moe_small.json");
    j["workload"]["params"]["expert_model_parallel_size"] = 16;
    j["workload"]["params"]["moe_load"] = load;
    if (load == "zipf") j["workload"]["params"]["moe_load_skew"] = 1.0;
    Scenario s = scenario_from_json(j, dir + "moe_small.json");
    return sim::run_scenario(s, {model, {}, {}}).result;
  };
  for (const char* model : {"engine", "shared", "analytic"}) {
    CAPTURE(model);
    const sim::RunResult uni = run("uniform", model), hot = run("zipf", model);
    CHECK(uni.metrics.at("moe.imbalance_all_to_all_s") == 0.0);
    CHECK(hot.metrics.at("moe.imbalance_all_to_all_s") > 0.0);
    CHECK(hot.metrics.at("moe.imbalance_compute_s") > 0.0);
    if (std::string(model) == "engine") {
      // Without A2A overlap every dispatch/combine is exposed and priced alone: the all-to-all part is
      // exactly what the skew adds to the exposed EP time.
      auto ep = [](const sim::RunResult& r) { return r.breakdown.exposed_comm_s.at("ep"); };
      CHECK(hot.metrics.at("moe.imbalance_all_to_all_s") == doctest::Approx(ep(hot) - ep(uni)).epsilon(1e-9));
    }
    // The text summary's imbalance line shows both parts.
    auto ms = [](double s) {
      char b[64];
      std::snprintf(b, sizeof b, "%.3f ms", s * 1e3);
      return std::string(b);
    };
    const std::string text = sim::summary_text(hot, 0);
    CHECK(text.find("imbalance    time lost to routing skew vs a uniform router: expert compute " +
                    ms(hot.metrics.at("moe.imbalance_compute_s")) + ", all-to-all " +
                    ms(hot.metrics.at("moe.imbalance_all_to_all_s"))) != std::string::npos);
  }
  // The flex dispatcher's matrices carry the per-server structure; with a uniform router they are balanced.
  Json j = load_json_file(dir + "moe_small.json");
  for (auto [k, v] : std::map<std::string, Json>{{"expert_model_parallel_size", 32}, {"moe_token_dispatcher_type", "flex"},
                                                  {"moe_router_num_groups", 4}, {"moe_router_group_topk", 2}, {"moe_load", "uniform"}})
    j["workload"]["params"][k] = v;
  const sim::RunResult flex = sim::run_scenario(scenario_from_json(j, dir + "moe_small.json"), {"engine", {}, {}}).result;
  CHECK(flex.metrics.at("moe.imbalance_all_to_all_s") == 0.0);
}

namespace {
// A call's idle-fabric price from a model that has priced nothing before (no cache can answer).
template <class Model>
double fresh_idle(const topo::Topology& topo, const models::Calibration& calib, const Communicator& c, double bytes) {
  Model m(topo, calib);
  return m.idle_collective(c, CollOp::AllToAllv, bytes, "").duration_s;
}
}  // namespace

TEST_CASE("a2a imbalance: idle prices shared by calls with the same schedule inputs are each call's own") {
  // 32 H100s on four DGX servers. Calls priced one after the other by one model (idle_collective caches by
  // the schedule's inputs) must each get exactly the price a fresh model gives them: equal byte matrices
  // share a price, different ranks, mirrors, matrices or sizes do not.
  const topo::Topology topo = topo::load_topology("superpod", {{"nodes", "4"}, {"node", "dgx-h100"}});
  const models::Calibration calib = models::default_calibration();
  const double bytes = 64.0 * (1 << 20);
  std::vector<std::int32_t> lo, hi;
  for (int r = 0; r < 16; ++r) lo.push_back(r), hi.push_back(16 + r);
  const Matrix m = routed(hot_share(16, 0.3), 0.6, 8);
  Matrix m_bits = m;  // the same matrix up to the last bits (as the fitted balanced matrices of two layers)
  for (auto& row : m_bits)
    for (double& x : row) x *= 1.0 + 4e-16;
  REQUIRE(m_bits != m);
  const std::vector<Communicator> calls = {
      {"a", lo, 0, 1, "ep", m, {}},
      {"a.bits", lo, 0, 1, "ep", m_bits, {}},
      {"b.hotter", lo, 0, 1, "ep", routed(hot_share(16, 0.31), 0.6, 8), {}},
      {"c.other_servers", hi, 0, 1, "ep", m, {}},
      {"d.mirrored", lo, 1, 16, "ep", m, {}},
      {"e.transpose", lo, 0, 1, "ep", transpose(m), {}},
      {"a.again", lo, 0, 1, "ep", m, {}},
  };
  auto check = [&](auto& model, auto tag) {
    using Model = typename decltype(tag)::type;
    std::vector<double> got;
    for (const Communicator& c : calls) {
      CAPTURE(c.name);
      got.push_back(model.idle_collective(c, CollOp::AllToAllv, bytes, "").duration_s);
      CHECK(got.back() == fresh_idle<Model>(topo, calib, c, bytes));
    }
    // A second size is another price.
    CHECK(model.idle_collective(calls[0], CollOp::AllToAllv, bytes / 2, "").duration_s ==
          fresh_idle<Model>(topo, calib, calls[0], bytes / 2));
    CHECK(got[1] == got[0]);
    CHECK(got[6] == got[0]);
    CHECK(got[2] != got[0]);   // a hotter rank 0 costs more
    CHECK(model.schedules_run() == 0);  // pricing beside the replay leaves its counters alone
  };
  struct EngineTag { using type = sim::EngineCommModel; };
  struct SharedTag { using type = sim::SharedNetworkCommModel; };
  sim::EngineCommModel engine(topo, calib);
  check(engine, EngineTag{});
  sim::SharedNetworkCommModel shared(topo, calib);
  check(shared, SharedTag{});
}

TEST_CASE("a2a imbalance: the replay's own idle prices, reused, are those of pricing each call alone") {
  // The Zipf-routed MoE step of the test above: every skewed call the replay priced on an idle fabric (engine:
  // all of them; shared: those whose links nothing else used) has that price reused, and the metric equals
  // the one computed by pricing every call and its balanced counterpart with a fresh model.
  const std::string dir = std::string(FABRICSIM_SOURCE_DIR) + "/examples/sweeps/";
  Json j = load_json_file(dir + "moe_small.json");
  j["workload"]["params"]["expert_model_parallel_size"] = 16;
  j["workload"]["params"]["moe_load"] = "zipf";
  j["workload"]["params"]["moe_load_skew"] = 1.0;
  const Scenario s = scenario_from_json(j, dir + "moe_small.json");
  const models::System sys = sim::scenario_system(s);
  const topo::Topology& topo = sys.topology();
  const models::Calibration& calib = sys.calibration();
  const models::ComputeModel cm = scenario_compute_model(s, topo, calib.named_factors());
  const Trace trace = build_workload(s, topo, cm);
  auto reference = [&](auto tag) {
    using Model = typename decltype(tag)::type;
    std::map<std::pair<std::int32_t, double>, double> delta;  // per distinct call: skewed - balanced
    double worst = 0;
    bool any = false;
    for (const auto& rt : trace.ranks) {
      double sum = 0;
      for (const auto& op : rt.ops) {
        if (op.kind != OpKind::Collective || op.coll != CollOp::AllToAllv || op.comm < 0) continue;
        const Communicator& c = trace.comms[static_cast<std::size_t>(op.comm)];
        if (c.a2a_matrix.empty()) continue;
        auto [it, fresh] = delta.emplace(std::make_pair(op.comm, op.bytes), 0.0);
        if (fresh) {
          Communicator u = c;
          u.a2a_matrix = sim::balanced_a2a_matrix(c.a2a_matrix);
          REQUIRE(u.a2a_matrix != c.a2a_matrix);  // every layer's router is skewed
          it->second = fresh_idle<Model>(topo, calib, c, op.bytes) - fresh_idle<Model>(topo, calib, u, op.bytes);
        }
        sum += it->second;
      }
      worst = any ? std::max(worst, sum) : sum, any = true;
    }
    return worst;
  };
  auto run = [&](auto& model, auto tag) {
    using Model = typename decltype(tag)::type;
    const sim::RunResult r = sim::replay(trace, topo, cm, model);
    std::size_t reused = 0, calls = 0;
    for (std::size_t k = 0; k < trace.comms.size(); ++k) {
      const Communicator& c = trace.comms[k];
      if (c.a2a_matrix.empty()) continue;
      for (const auto& rt : trace.ranks)
        for (const auto& op : rt.ops)
          if (op.kind == OpKind::Collective && op.comm == static_cast<std::int32_t>(k)) {
            ++calls;
            if (const auto p = model.replayed_idle_price(c, op.coll, op.bytes, op.algorithm)) {
              ++reused;
              CHECK(p->duration_s == fresh_idle<Model>(topo, calib, c, op.bytes));
            }
          }
    }
    CHECK(calls > 0);
    CHECK(r.metrics.at("moe.imbalance_all_to_all_s") == reference(tag));
    return std::make_pair(reused, calls);
  };
  struct EngineTag { using type = sim::EngineCommModel; };
  struct SharedTag { using type = sim::SharedNetworkCommModel; };
  sim::EngineCommModel engine(topo, calib);
  const auto [e_reused, e_calls] = run(engine, EngineTag{});
  CHECK(e_reused == e_calls);
  sim::SharedNetworkCommModel shared(topo, calib);
  const auto [s_reused, s_calls] = run(shared, SharedTag{});
  MESSAGE("shared: " << s_reused << " of " << s_calls << " skewed calls priced on an idle fabric by the replay");
}

TEST_CASE("a2a imbalance: 0 with a uniform router when flex EP groups straddle NVL72 racks unevenly") {
  // 128 ranks packed on two GB200 NVL72 racks (GPUs 0-127), PP 2: the second stage's EP 64 group (simulated)
  // has 8 ranks on rack 0 and 56 on rack 1, so the flex dispatch's copies per slot (DeepEP: one NVLink copy per destination GPU, one
  // RDMA copy per destination domain) give unequal row sums even with a uniform router. That is placement,
  // not routing skew: the metric compares with the uniform router's matrix the generator gives.
  const std::string dir = std::string(FABRICSIM_SOURCE_DIR) + "/examples/sweeps/";
  auto scenario = [&](const std::string& load) {
    Json j = load_json_file(dir + "moe_small.json");
    j["topology"] = Json::parse(R"({"preset": "superpod", "params": {"nodes": 2, "node": "gb200-nvl72"}})");
    for (auto [k, v] : std::map<std::string, Json>{{"expert_model_parallel_size", 64}, {"moe_token_dispatcher_type", "flex"},
                                                    {"world_size", 128}, {"global_batch_size", 128}, {"num_layers", 2}, {"pipeline_model_parallel_size", 2},
                                                    {"moe_load", load}})
      j["workload"]["params"][k] = v;
    if (load == "zipf") j["workload"]["params"]["moe_load_skew"] = 1.0;
    return scenario_from_json(j, dir + "moe_small.json");
  };
  {
    // The straddling group's uniform-router matrix is not balanced (the old reference would call it skew),
    // and the generator hands it over as the reference.
    const Scenario s = scenario("uniform");
    const models::System sys = sim::scenario_system(s);
    const Trace tr = build_workload(s, sys.topology(), scenario_compute_model(s, sys.topology(), {}));
    int straddling = 0;
    for (const auto& c : tr.comms) {
      if (c.a2a_matrix.empty()) continue;
      REQUIRE(c.a2a_uniform.size() == c.a2a_matrix.size());
      for (std::size_t a = 0; a < c.a2a_matrix.size(); ++a)  // uniform router: the matrix is its own reference
        for (std::size_t b = 0; b < c.a2a_matrix.size(); ++b)
          REQUIRE(c.a2a_uniform[a][b] == doctest::Approx(c.a2a_matrix[a][b]).epsilon(1e-12));
      if (c.ranks.front() == 64 && c.name.find(".dispatch") != std::string::npos &&
          sim::balanced_a2a_matrix(c.a2a_matrix) != c.a2a_matrix)
        ++straddling;
    }
    CHECK(straddling > 0);
  }
  for (const char* model : {"engine", "shared"}) {
    CAPTURE(model);
    const sim::RunResult uni = sim::run_scenario(scenario("uniform"), {model, {}, {}}).result;
    const sim::RunResult hot = sim::run_scenario(scenario("zipf"), {model, {}, {}}).result;
    CHECK(uni.metrics.at("moe.imbalance_all_to_all_s") == 0.0);
    CHECK(hot.metrics.at("moe.imbalance_all_to_all_s") > 0.0);
  }
}
