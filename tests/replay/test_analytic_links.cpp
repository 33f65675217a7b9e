// comm_model "analytic": per-link bytes from the calls' NCCL schedules, busy for the analytic time
// (replay/engine_comm_model.hpp, AnalyticLinksCommModel).
#include <doctest/doctest.h>
#include <map>
#include <string>
#include "replay/outputs.hpp"
#include "replay/run_scenario.hpp"
#include "sim/base/json_reader.hpp"
#include "workloads/scenario.hpp"
using namespace fabricsim;

TEST_CASE("analytic comm model: links.by_class has the same per-class bytes as the engine model, and utilisation") {
  // TP 4, PP 2, DP 2 on two DGX A100: NVLink (tensor-parallel), NIC/leaf (data-parallel and pipeline) traffic.
  workloads::Scenario s = workloads::scenario_from_json(
      Json::parse(R"({"topology":{"preset":"superpod","params":{"nodes":2,"node":"dgx-a100"}},
      "workload":{"generator":"gpt","params":{"num_layers":8,"hidden_size":2048,"num_attention_heads":16,
      "seq_length":1024,"micro_batch_size":2,"global_batch_size":32,"tensor_model_parallel_size":4,
      "pipeline_model_parallel_size":2}}})"),
      "sc.json");
  sim::ScenarioRunOptions an, en;
  an.comm_model = "analytic";
  en.comm_model = "engine";
  const sim::RunResult a = sim::run_scenario(s, an).result, e = sim::run_scenario(s, en).result;
  CHECK(a.comm_model == "analytic");
  const Json ja = sim::result_json(a, 10), je = sim::result_json(e, 10);
  std::map<std::string, double> ba, be, ua;
  for (const auto& c : ja["links"]["by_class"]) {
    ba[c["class"].get<std::string>()] = c["bytes"].get<double>();
    ua[c["class"].get<std::string>()] = c["util_avg_run_mean"].get<double>();
  }
  for (const auto& c : je["links"]["by_class"]) be[c["class"].get<std::string>()] = c["bytes"].get<double>();
  REQUIRE(be.size() >= 2);  // in-host NVLink and the network
  REQUIRE(ba.size() == be.size());
  for (const auto& [cls, b] : be) {
    CAPTURE(cls);
    REQUIRE(ba.count(cls));
    CHECK(b > 0);
    CHECK(ba[cls] == doctest::Approx(b).epsilon(1e-12));
    CHECK(ua[cls] > 0);
    CHECK(ua[cls] <= 1);
  }
  // The analytic model's times are its own (the link figures do not change them).
  sim::ScenarioRunOptions plain = an;
  plain.engine.collect_link_stats = false;
  const sim::RunResult p = sim::run_scenario(s, plain).result;
  CHECK(p.links.empty());
  CHECK(p.iteration_s == a.iteration_s);
  CHECK(a.metrics.at("link_bytes.priced_groups.tier0") == doctest::Approx(e.metrics.at("link_bytes.priced_groups.tier0")).epsilon(1e-12));
}
