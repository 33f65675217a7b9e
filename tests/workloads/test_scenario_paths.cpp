#include <doctest/doctest.h>

#include "workloads/scenario.hpp"

using namespace fabricsim;

TEST_CASE("paths in a scenario are relative to the file that names them, also for embedded scenarios") {
  Json sc = Json::parse(R"({"topology": {"preset": "dgx-a100"},
    "workload": {"generator": "dlrm", "params": {"configs": "tables.json", "model": "tiny"}}})");
  auto a = workloads::scenario_from_json(sc, "studies/x/scenario.json");
  CHECK(a.workload.params.at("configs") == "studies/x/tables.json");
  // A sweep names its inline base scenario "<sweep file>#/scenario".
  auto b = workloads::scenario_from_json(sc, "studies/x/sweep.json#/scenario");
  CHECK(b.workload.params.at("configs") == "studies/x/tables.json");
  sc["workload"]["params"]["configs"] = "/abs/tables.json";
  CHECK(workloads::scenario_from_json(sc, "studies/x/sweep.json#/scenario").workload.params.at("configs") ==
        "/abs/tables.json");
}
