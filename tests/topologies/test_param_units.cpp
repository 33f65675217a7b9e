// Preset bandwidth parameters need their unit: "400" would silently be 400 B/s (issue 20).
#include <doctest/doctest.h>

#include "sim/base/error.hpp"
#include "topologies/io.hpp"

using namespace fabricsim;

TEST_CASE("a preset bandwidth parameter without its unit is an error naming the unit") {
  CHECK_THROWS_WITH_AS(topo::load_topology("dgx-h100", {{"nic_bandwidth", "400"}}),
                       "--param nic_bandwidth=400: a bandwidth needs its unit, e.g. \"400Gbps\" or \"400GB/s\"",
                       InputError);
  // With the unit it builds: 8 NICs of 400 Gb/s = 50 GB/s each.
  const topo::Topology t = topo::load_topology("dgx-h100", {{"nic_bandwidth", "400Gbps"}});
  CHECK(t.gpus().size() == 8);
}
