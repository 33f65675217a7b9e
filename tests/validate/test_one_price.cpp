// One price for a collective (issue 20): `fabricsim coll`, `fabricsim run` on a trace holding that one
// collective, and `fabricsim validate` on coll's result file give the IDENTICAL time for the same call on the
// same System, each through the library entry point its command calls (sim::run_coll_sweep, sim::run_scenario,
// validate::make_cases + compare with the calibration resolved per log as cmd_validate does). All three resolve
// the calibration with the one policy (models/system.hpp: auto = the shipped fit for the hardware), so on
// H100 systems all three use validate/calibrations/h100.json and name it.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "models/system.hpp"
#include "replay/coll_sweep.hpp"
#include "replay/run_scenario.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/engine/collective_time.hpp"
#include "validate/calibrate.hpp"
#include "validate/inputs.hpp"
#include "validate/report.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
namespace fs = std::filesystem;

namespace {

struct Prices {
  double coll_s = 0, run_s = 0, validate_s = 0;
  std::string coll_calibration, run_calibration, validate_calibration, algorithm;
};

// The three commands' library paths for one call of `bytes` (nccl-tests size; bf16 elements as training uses)
// of `op` over every GPU of the topology.
Prices prices(const std::string& preset, const std::map<std::string, std::string>& params, const std::string& op,
              std::uint64_t bytes, int gpus, const fs::path& dir) {
  Prices p;
  // coll: fabricsim coll --topology PRESET -p ... --op OP -b BYTES -d bfloat16 --json FILE
  std::map<std::string, std::string> opts = {
      {"topology", preset}, {"op", op}, {"minbytes", std::to_string(bytes)}, {"datatype", "bfloat16"}};
  const sim::CollSweep sweep = sim::run_coll_sweep(sim::coll_request(opts, params));
  REQUIRE(sweep.doc["rows"].size() == 1);
  REQUIRE(sweep.times_s.size() == 1);
  p.coll_s = sweep.times_s[0];
  p.algorithm = sweep.doc["rows"][0]["algorithm"].get<std::string>();
  p.coll_calibration = sweep.doc["calibration"].get<std::string>();
  const fs::path coll_json = dir / (op + ".json");
  std::ofstream(coll_json) << sweep.doc.dump(1) << "\n";

  // run: a fabricsim trace whose every rank runs that one collective, on the same topology.
  Json ranks = Json::array(), members = Json::array();
  for (int r = 0; r < gpus; ++r) members.push_back(r);
  for (int r = 0; r < gpus; ++r)
    ranks.push_back({{"rank", r},
                     {"ops", Json::array({{{"type", "collective"}, {"op", op}, {"comm", "world"},
                                           {"bytes", static_cast<double>(bytes)}}})}});
  const Json trace = {{"format", "fabricsim-trace"}, {"version", 1},  {"world_size", gpus},
                      {"communicators", Json::array({{{"name", "world"}, {"ranks", members}}})},
                      {"ranks", ranks}};
  const fs::path trace_file = dir / (op + ".trace.json");
  std::ofstream(trace_file) << trace.dump() << "\n";
  Json tparams = Json::object();
  for (const auto& [k, v] : params) tparams[k] = workloads::param_value_json(v);  // typed, as a scenario writes them
  const Json scen = {{"topology", {{"preset", preset}, {"params", tparams}}},
                     {"workload", {{"trace", trace_file.string()}}}};
  const sim::ScenarioRun run = sim::run_scenario(workloads::scenario_from_json(scen, (dir / "s.json").string()));
  p.run_s = run.result.iteration_s;
  p.run_calibration = run.result.calibration;

  // validate: coll's result file as the measurement, calibration resolved per log as cmd_validate does.
  auto ms = validate::load_all({coll_json.string()}, {});
  auto cases = validate::make_cases(ms);
  REQUIRE(cases.size() == 1);
  const models::CalibrationRef ref = models::resolve_calibration_ref("auto", cases[0].sys->system().topology());
  const models::Calibration calib = models::load_calibration_ref(ref);
  const validate::Report rep =
      validate::compare(cases, [&](std::size_t) -> const models::Calibration& { return calib; }, ref.label());
  REQUIRE(rep.logs.size() == 1);
  REQUIRE(rep.logs[0].points.size() == 1);
  p.validate_s = rep.logs[0].points[0].simulated_s;
  p.validate_calibration = ref.label();
  return p;
}

void check_identical(const std::string& preset, const std::map<std::string, std::string>& params, int gpus,
                     std::uint64_t bytes) {
  const fs::path dir = fs::temp_directory_path() / ("fabricsim_one_price_" + preset + std::to_string(gpus));
  fs::create_directories(dir);
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}) {
    const Prices p = prices(preset, params, op, bytes, gpus, dir);
    char line[300];
    std::snprintf(line, sizeof line, "%s %d GPUs %s %llu B: coll %.17g us (%s), run %.17g us, validate %.17g us",
                  preset.c_str(), gpus, op, static_cast<unsigned long long>(bytes), p.coll_s * 1e6, p.algorithm.c_str(),
                  p.run_s * 1e6, p.validate_s * 1e6);
    MESSAGE(line);
    CHECK(p.coll_s > 0);
    // Identical, not close: the three commands run the same function on the same System.
    CHECK(p.run_s == p.coll_s);
    CHECK(p.validate_s == p.coll_s);
    const std::string h100 = "h100 (fitted, validate/calibrations/h100.json)";
    CHECK(p.coll_calibration == h100);
    CHECK(p.run_calibration == h100);
    CHECK(p.validate_calibration == h100);
  }
  fs::remove_all(dir);
}

}  // namespace

TEST_CASE("one price: coll, run on a one-collective trace and validate agree exactly on dgx-h100") {
  check_identical("dgx-h100", {}, 8, 16ull << 20);
}

TEST_CASE("one price: coll, run on a one-collective trace and validate agree exactly on a 4-node superpod") {
  check_identical("superpod", {{"nodes", "4"}, {"node", "dgx-h100"}}, 32, 16ull << 20);
}

TEST_CASE("one price: the System names its calibration by the one policy") {
  models::SystemSpec spec;
  spec.topology = "dgx-h100";
  CHECK(models::System(spec).calibration_label() == "h100 (fitted, validate/calibrations/h100.json)");
  spec.calibration = "default";
  CHECK(models::System(spec).calibration_label() == "default (built-in cited defaults, models/calibration.cpp)");
  // A100-80GB systems keep the built-in defaults under auto (models/calibration_presets.cpp says why).
  spec.topology = "dgx-a100";
  spec.calibration = "auto";
  CHECK(models::System(spec).calibration_label() == "default (built-in cited defaults, models/calibration.cpp)");
  spec.calibration = "shipped:nope";
  CHECK_THROWS_WITH_AS(models::System{spec}, doctest::Contains("unknown shipped calibration"), InputError);
}
