// The all-to-all class totals (metrics all_to_all.link_bytes.<class> / link_time_s.<class>) of the shared model
// count one replay: a pass the replay abandons (ReplayRestart: idle-window pricing found a call that shared its
// links) must not add to them.
#include <doctest/doctest.h>

#include <string>

#include "replay/run_scenario.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

TEST_CASE("shared model: a restarted replay's all-to-all class totals equal those of a replay without restart") {
  // EP 16 over two DGX x 2 pipeline stages, flex dispatcher, Zipf router: dispatch/combine meet pipeline sends on
  // the NICs, so idle windows fail and the replay restarts; without the isolation shortcut it runs once.
  const std::string f = std::string(FABRICSIM_SOURCE_DIR) + "/examples/sweeps/moe_small.json";
  Json j = load_json_file(f);
  auto& p = j["workload"]["params"];
  p["expert_model_parallel_size"] = 16, p["moe_token_dispatcher_type"] = "flex", p["moe_load"] = "zipf";
  p["moe_load_skew"] = 1.2, p["pipeline_model_parallel_size"] = 2;
  Scenario s = scenario_from_json(j, f);
  sim::ScenarioRunOptions with, without;
  with.comm_model = without.comm_model = "shared";
  without.engine.shared_isolation_shortcut = false;
  const sim::RunResult a = sim::run_scenario(s, with).result, b = sim::run_scenario(s, without).result;
  CHECK(a.metrics.at("replay.restarts") > 0);
  CHECK(b.metrics.count("replay.restarts") == 0);  // the metric is written when the replay restarted
  CHECK(a.iteration_s == doctest::Approx(b.iteration_s).epsilon(1e-9));
  std::size_t n = 0;
  for (const auto& [k, v] : b.metrics) {
    if (k.rfind("all_to_all.link_", 0) != 0) continue;
    ++n;
    INFO(k);
    REQUIRE(a.metrics.count(k) == 1);
    CHECK(a.metrics.at(k) == doctest::Approx(v).epsilon(1e-9));
  }
  CHECK(n >= 2);
}
