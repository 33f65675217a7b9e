// Preset bandwidth parameters need their unit: "400" would silently be 400 B/s (issue 20).
#include <doctest/doctest.h>

#include <string>

#include "sim/base/error.hpp"
#include "topologies/io.hpp"

using namespace fabricsim;

TEST_CASE("a preset bandwidth parameter without its unit is an error naming the unit") {
  CHECK_THROWS_WITH_AS(topo::load_topology("dgx-h100", {{"nic_bandwidth", "400"}}),
                       "--param nic_bandwidth=400: a bandwidth needs its unit, e.g. \"400Gbps\" or \"400GB/s\"",
                       InputError);
  // A size unit where a rate is expected: the message offers the units that work (not a bare number, refused above).
  try {
    topo::load_topology("dgx-h100", {{"nic_bandwidth", "400GB"}});
    FAIL("400GB accepted as a bandwidth");
  } catch (const InputError& e) {
    const std::string m = e.what();
    CHECK(m.find("a positive bandwidth with its unit, such as 400Gbps, 25GB/s or 25GiB/s") != std::string::npos);
    CHECK(m.find("as a number") == std::string::npos);
  }
  // With the unit it builds: 8 NICs of 400 Gb/s = 50 GB/s each.
  const topo::Topology t = topo::load_topology("dgx-h100", {{"nic_bandwidth", "400Gbps"}});
  CHECK(t.gpus().size() == 8);
}
