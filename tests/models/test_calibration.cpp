// Calibration defaults and strict JSON load/save.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>

#include <cmath>

#include "models/calibration.hpp"
#include "models/calibration_params.hpp"
#include "sim/base/error.hpp"

using namespace fabricsim;
using namespace fabricsim::models;

// Relative comparison (doctest's Approx adds an absolute margin of epsilon * 1.0 by default, far too
// loose for times in seconds); default tolerance 1e-12 relative.
static doctest::Approx approx(double v) { return doctest::Approx(v).epsilon(1e-12).scale(1e-300); }

TEST_CASE("default calibration: NCCL tuning.cc values and the log-derived factors") {
  Calibration c = default_calibration();
  // tuning.cc baseLatencies Ring {LL 6.6, LL128 14.0, Simple 8.4} us; hwLatencies NVLINK Ring Simple 3.4 us
  CHECK(c.of(Algorithm::Ring, Protocol::Simple).base_latency_s == approx(8.4e-6));
  CHECK(c.of(Algorithm::Ring, Protocol::LL).base_latency_s == approx(6.6e-6));
  CHECK(c.of(Algorithm::Ring, Protocol::Simple).step_latency_s == approx(3.4e-6));
  CHECK(c.of(Algorithm::Ring, Protocol::Simple).net_step_latency_s == approx(14e-6));
  CHECK(c.of(Algorithm::Ring, Protocol::LL).bw_efficiency == approx(0.5));
  CHECK_FALSE(c.has(Algorithm::Nvls, Protocol::LL));
  CHECK_THROWS_AS(c.of(Algorithm::Nvls, Protocol::LL), InputError);
  CHECK(c.nvlink_efficiency("a100-80gb") == approx(0.8));
  CHECK(c.nvlink_efficiency("h100") == approx(0.824));
  CHECK(c.nvlink_efficiency("unknown-gpu") == approx(0.8));
  // ring busbw on 8x H100 = 450 GB/s x 0.824 = 370.8 GB/s, the together_h100 ring log peaks at 368.09
  CHECK(450.0 * c.nvlink_efficiency("h100") == approx(368.09).epsilon(0.02));
  for (const auto& l : c.link) {
    CHECK(l.bw_efficiency == 1.0);
    CHECK(l.latency_s == 0.0);
  }
}

TEST_CASE("calibration JSON round-trips and overrides") {
  Calibration c = default_calibration();
  c.factors.network_efficiency = 0.5;
  c.algo[{Algorithm::Tree, Protocol::LL}].base_latency_s = 1e-6;
  Json j = calibration_to_json(c);
  Calibration d = calibration_from_json(j, "mem.json");
  CHECK(calibration_to_json(d) == j);
  CHECK(d.factor("network_efficiency") == 0.5);

  Json partial = parse_json_text(R"({"name": "fit", "algorithms": {"ring": {"simple": {"base_latency": "5us"}}},
                                     "links": {"nvlink": {"latency": "100ns"}}, "extra": {"nvls_efficiency": 0.7}})",
                                 "p.json");
  Calibration p = calibration_from_json(partial, "p.json");
  CHECK(p.name == "fit");
  CHECK(p.of(Algorithm::Ring, Protocol::Simple).base_latency_s == approx(5e-6));
  CHECK(p.of(Algorithm::Ring, Protocol::Simple).step_latency_s == approx(3.4e-6));  // default kept
  CHECK(p.of(topo::LinkKind::NVLink).latency_s == approx(100e-9));
  CHECK(p.factor("nvls_efficiency") == 0.7);
}

TEST_CASE("calibration JSON: unknown keys and bad values name the file and path") {
  auto fails = [](const char* text, const char* needle) {
    Json j = parse_json_text(text, "c.json");
    CHECK_THROWS_WITH_AS(calibration_from_json(j, "c.json"), doctest::Contains(needle), InputError);
  };
  fails(R"({"bogus": 1})", "c.json: /bogus");
  fails(R"({"links": {"nvlink": {"bw": 1}}})", "/links/nvlink/bw");
  fails(R"({"links": {"warp": {}}})", "/links/warp");
  fails(R"({"algorithms": {"ring": {"simple": {"bw_efficiency": 1.5}}}})", "fraction");
  fails(R"({"algorithms": {"nvls": {"ll": {}}}})", "/algorithms/nvls/ll");
  fails(R"({"algorithms": {"magic": {}}})", "/algorithms/magic");
  fails(R"({"extra": {"no_such_factor": 1}})", "/extra/no_such_factor");
  // The nearest declared name is offered.
  fails(R"({"extra": {"network_eficiency": 0.9}})", "c.json: /extra/network_eficiency: unknown parameter 'network_eficiency'; nearest known: 'network_efficiency'");
  // A removed parameter names its replacement.
  fails(R"({"extra": {"ring_outstanding_steps": 8}})",
        "c.json: /extra/ring_outstanding_steps: parameter 'ring_outstanding_steps' was removed: a ring hop's steps "
        "in flight are one parameter, 'ring_credit_steps'");
  fails(R"({"extra": {"kernel_launch_s": "4 furlongs"}})", "/extra/kernel_launch_s: expected a time");
  fails(R"({"extra": {"network_efficiency": "0.9"}})", "expected a number (fraction)");
  fails(R"({"extra": {"compute.gemm.flops_efficiency": 1.5}})", "/extra/compute.gemm.flops_efficiency: expected a fraction in (0, 1]");
  fails(R"({"extra": {"tree_efficiency": 2}})", "fraction");
  fails(R"({"extra": {"max_pipeline_chunks": 2.5}})", "integer");
  fails(R"({"algorithms": {"ring": {"simple": {"base_latency": "fast"}}}})", "base_latency");
}

TEST_CASE("load_calibration reads a file; a missing file is an InputError") {
  const char* path = "test_calibration_tmp.json";
  {
    std::ofstream f(path);
    f << calibration_to_json(default_calibration()).dump(1);
  }
  Calibration c = load_calibration(path);
  CHECK(c.factor("pat_efficiency") == 0.75);
  std::remove(path);
  CHECK_THROWS_AS(load_calibration("/nonexistent/calib.json"), InputError);
}

TEST_CASE("docs/calibration.schema.json lists exactly the keys calibration_to_json writes") {
  Json schema = load_json_file(std::string(FABRICSIM_SOURCE_DIR) + "/docs/calibration.schema.json");
  Json doc = calibration_to_json(default_calibration());
  const Json& props = schema["properties"];
  for (auto it = doc.begin(); it != doc.end(); ++it) CHECK(props.contains(it.key()));
  // extra factors: the schema names exactly the declared parameters (models/calibration_params.cpp); the
  // defaults write every parameter that has a default (compute.* keys have none: the compute preset applies).
  const Json& ex = props["extra"]["properties"];
  CHECK(ex.size() == calibration_params().size());
  std::size_t with_default = 0;
  for (const auto& d : calibration_params()) {
    CHECK_MESSAGE(ex.contains(d.name), d.name);
    with_default += std::isnan(d.default_value) ? 0 : 1;
  }
  CHECK(doc["extra"].size() == with_default);
  for (auto it = doc["extra"].begin(); it != doc["extra"].end(); ++it) CHECK(ex.contains(it.key()));
  // links
  for (auto it = doc["links"].begin(); it != doc["links"].end(); ++it) {
    CHECK(props["links"]["properties"].contains(it.key()));
    for (auto f = it.value().begin(); f != it.value().end(); ++f)
      CHECK(schema["$defs"]["link"]["properties"].contains(f.key()));
  }
  // algorithms and their protocols
  const Json& algos = props["algorithms"]["properties"];
  CHECK(algos.size() == doc["algorithms"].size());
  for (auto a = doc["algorithms"].begin(); a != doc["algorithms"].end(); ++a) {
    REQUIRE(algos.contains(a.key()));
    std::string ref = algos[a.key()]["$ref"];
    const Json& protos = schema["$defs"][ref.substr(ref.rfind('/') + 1)]["properties"];
    CHECK(protos.size() == a.value().size());
    for (auto p = a.value().begin(); p != a.value().end(); ++p) {
      CHECK(protos.contains(p.key()));
      for (auto f = p.value().begin(); f != p.value().end(); ++f)
        CHECK(schema["$defs"]["algoproto"]["properties"].contains(f.key()));
    }
  }
}

TEST_CASE("NCCL versions and eras: version codes, the era table for a version, JSON round trip") {
  CHECK(nccl_version_code("2.8.4-1 (CUDA 11.2.2, OpenMPI 4.0.5)") == 208);
  CHECK(nccl_version_code("2.26.2; nccl-tests 2.17.9") == 226);
  CHECK(nccl_version_code("22602") == 226);  // NCCL_VERSION_CODE
  CHECK(nccl_version_code("2.29.7+cuda12.9") == 229);
  CHECK(nccl_version_code("not shown") == -1);
  CHECK(nccl_version_code("") == -1);

  Calibration c = default_calibration();
  CHECK(c.nccl_eras.empty());  // the defaults use the current NCCL table for every version
  c.nccl_eras = default_nccl_eras();
  REQUIRE(c.nccl_eras.size() == 1u);
  CHECK(c.nccl_eras[0].name == "2.8-2.17");
  CHECK(nccl_era_index(c, 208) == 0);
  CHECK(nccl_era_index(c, 217) == 0);
  CHECK(nccl_era_index(c, 218) == -1);
  CHECK(nccl_era_index(c, -1) == -1);
  // NCCL v2.8.4-1 tuning.cc: Ring LL baseLat 3.6 us, NVLINK hwLat 0.47 us, busBw / 4; Tree Simple hwLat 28 us
  Calibration old = for_nccl_version(c, "2.8.4-1");
  CHECK(old.of(Algorithm::Ring, Protocol::LL).base_latency_s == approx(3.6e-6));
  CHECK(old.of(Algorithm::Ring, Protocol::LL).step_latency_s == approx(0.47e-6));
  CHECK(old.of(Algorithm::Ring, Protocol::LL).bw_efficiency == approx(0.25));
  CHECK(old.of(Algorithm::Tree, Protocol::Simple).step_latency_s == approx(28e-6));
  CHECK(old.of(Algorithm::Nvls, Protocol::Simple).base_latency_s == approx(18.7e-6));  // not in the era: current
  Calibration now = for_nccl_version(c, "2.26.2");
  CHECK(now.of(Algorithm::Ring, Protocol::LL).base_latency_s == approx(6.6e-6));
  CHECK(for_nccl_version(c, "unknown").of(Algorithm::Ring, Protocol::LL).base_latency_s == approx(6.6e-6));

  c.nccl_eras[0].algo[{Algorithm::Ring, Protocol::Simple}].base_latency_s = 20e-6;
  Json j = calibration_to_json(c);
  Calibration d = calibration_from_json(j, "eras.json");
  CHECK(calibration_to_json(d) == j);
  CHECK(for_nccl_version(d, "2.10.3").of(Algorithm::Ring, Protocol::Simple).base_latency_s == approx(20e-6));
  // A built-in era named in a file starts from its cited table; a new one needs its version range.
  Calibration e = calibration_from_json(
      parse_json_text(R"({"nccl_eras": {"2.8-2.17": {"algorithms": {"ring": {"ll": {"base_latency": "5us"}}}}}})", "e.json"),
      "e.json");
  REQUIRE(e.nccl_eras.size() == 1u);
  CHECK(for_nccl_version(e, "2.8.4").of(Algorithm::Ring, Protocol::LL).base_latency_s == approx(5e-6));
  CHECK(for_nccl_version(e, "2.8.4").of(Algorithm::Ring, Protocol::LL).step_latency_s == approx(0.47e-6));
  auto fails = [](const char* text, const char* needle) {
    CHECK_THROWS_WITH_AS(calibration_from_json(parse_json_text(text, "c.json"), "c.json"), doctest::Contains(needle),
                         InputError);
  };
  fails(R"({"nccl_eras": {"mine": {"algorithms": {}}}})", "needs \"from\" and \"until\"");
  fails(R"({"nccl_eras": {"mine": {"from": "2.x", "until": "2.9"}}})", "/nccl_eras/mine/from");
  fails(R"({"nccl_eras": {"mine": {"from": "2.9", "until": "2.9"}}})", "\"until\" after \"from\"");
  fails(R"({"nccl_eras": {"2.8-2.17": {}, "mine": {"from": "2.10", "until": "2.20"}}})", "overlap");
  fails(R"({"nccl_eras": {"2.8-2.17": {"algorithms": {"nvls": {"simple": {}}}}}})", "/nccl_eras/2.8-2.17/algorithms/nvls/simple");
  fails(R"({"nccl_eras": {"2.8-2.17": {"bogus": 1}}})", "/nccl_eras/2.8-2.17/bogus");
}

TEST_CASE("multi_host_base_latency_factor defaults to NCCL's model (1) and is a positive factor") {
  Calibration c = default_calibration();
  CHECK(c.factor("multi_host_base_latency_factor") == 1.0);
  CHECK_THROWS_AS(calibration_from_json(parse_json_text(R"({"extra": {"multi_host_base_latency_factor": 0}})", "c.json"),
                                        "c.json"),
                  InputError);
  Calibration d = calibration_from_json(
      parse_json_text(R"({"extra": {"multi_host_base_latency_factor": 2.5}})", "c.json"), "c.json");
  CHECK(d.factor("multi_host_base_latency_factor") == 2.5);
}

TEST_CASE("host launch floor: one kernel launch per GPU a thread drives, per call") {
  Calibration c = default_calibration();
  // [LOG-together_h100_1node_8gpu_all_gather_ring]: 34.28 us with -g 8.
  CHECK(c.factor("kernel_launch_s") == doctest::Approx(34.28e-6 / 8));
  CHECK(host_launch_floor_s(c, 8) == doctest::Approx(34.28e-6));
  CHECK(host_launch_floor_s(c, 1) == doctest::Approx(34.28e-6 / 8));
  CHECK(host_launch_floor_s(c, 0) == host_launch_floor_s(c, 1));  // unknown launch mode: one GPU per thread
  Calibration d = calibration_from_json(parse_json_text(R"({"extra": {"kernel_launch_s": 5e-6}})", "c.json"), "c.json");
  CHECK(host_launch_floor_s(d, 4) == doctest::Approx(20e-6));
  CHECK_THROWS_WITH_AS(calibration_from_json(parse_json_text(R"({"extra": {"kernel_launch_s": -1}})", "c.json"), "c.json"),
                       doctest::Contains("kernel_launch_s"), InputError);
}

TEST_CASE("host launch floor grows with the channels a call runs on") {
  Calibration c = default_calibration();
  // [LOG-together_h100_1node_8gpu_all_gather_ring]: 34.28 us on one channel, 41.47 us on all 24.
  CHECK(host_launch_floor_s(c, 8, 1) == doctest::Approx(34.28e-6));
  CHECK(host_launch_floor_s(c, 8, 24) == doctest::Approx(41.47e-6));
  CHECK(host_launch_floor_s(c, 8, 16) == doctest::Approx(34.28e-6 + 15 * (41.47e-6 - 34.28e-6) / 23));
  CHECK(host_launch_floor_s(c, 8, 0) == host_launch_floor_s(c, 8, 1));  // no channel count: one channel
  Calibration d = calibration_from_json(
      parse_json_text(R"({"extra": {"kernel_launch_s": 5e-6, "channel_launch_s": 1e-7}})", "c.json"), "c.json");
  CHECK(host_launch_floor_s(d, 2, 11) == doctest::Approx(2 * (5e-6 + 10 * 1e-7)));
  CHECK_THROWS_WITH_AS(calibration_from_json(parse_json_text(R"({"extra": {"channel_launch_s": 0}})", "c.json"), "c.json"),
                       doctest::Contains("channel_launch_s"), InputError);
}
