#include <doctest/doctest.h>

#include "models/calibration_presets.hpp"
#include "sim/base/error.hpp"
#include "topologies/io.hpp"

using namespace fabricsim;

TEST_CASE("--calibration auto picks the shipped file fitted on matching hardware") {
  auto h100 = topo::build_preset("dgx-h100", {});
  CHECK(models::matching_calibration_name(h100) == "h100");
  auto c = models::resolve_calibration("auto", h100);
  CHECK(c.name != models::default_calibration().name);
  CHECK(c.source.find("together_h100") != std::string::npos);

  auto a100_80 = topo::build_preset("dgx-a100", {});
  CHECK(models::matching_calibration_name(a100_80) == "");
  CHECK(models::resolve_calibration("auto", a100_80).name == models::default_calibration().name);

  auto a100_40 = topo::build_preset("dgx-a100", {{"gpu", "a100-40gb"}});
  CHECK(models::matching_calibration_name(a100_40) == "a100");
  auto abci = topo::build_preset("superpod", {{"nodes", "2"}, {"node", "dgx-a100"}, {"gpu", "a100-40gb"}});
  CHECK(models::matching_calibration_name(abci) == "multinode-ib");

  CHECK(models::resolve_calibration("default", h100).name == models::default_calibration().name);
  CHECK_THROWS_AS(models::resolve_calibration("shipped:nonexistent", h100), InputError);
  CHECK_THROWS_AS(models::resolve_calibration("/no/such/file.json", h100), InputError);
  for (const auto& e : models::embedded_calibrations())
    CHECK_NOTHROW(models::resolve_calibration(std::string("shipped:") + e.name, h100));
}
