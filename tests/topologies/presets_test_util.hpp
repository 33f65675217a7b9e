#pragma once
// Shared by the preset tests in tests/topologies: counts out of a TopologySummary, and the checks every
// 72-GPU NVL72 rack preset (gb200-nvl72, gb300-nvl72) passes.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "topologies/io.hpp"

namespace fabricsim::presets_test {

// m[k], 0 when absent.
inline int count(const std::map<std::string, int>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

// One NVL72 rack: 72 GPUs on 18 compute trays, 18 NVSwitch chips, each GPU bundled to every NVSwitch,
// 18 x 50 GB/s of NVLink per GPU and half the GPUs' NVLink across the bisection.
inline void check_nvl72_rack(const topo::TopologySummary& s) {
  CHECK(s.gpus == 72);
  CHECK(s.hosts == 18);
  CHECK(count(s.node_counts, "nvswitch") == 18);
  CHECK(count(s.link_counts, "nvlink") == 72 * 18);
  CHECK(s.gpu_nvlink_Bps == doctest::Approx(900e9));
  CHECK(s.bisection_Bps == doctest::Approx(36 * 900e9));
}

}  // namespace fabricsim::presets_test
