// The AMD MI300X preset (models/gpu.cpp, ROCm documentation's peak table) and what NCCL-style collective
// selection does on its Infinity Fabric node (topologies/presets.cpp mi300x-node): no switch, so no NVLS / CollNet.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/calibration.hpp"
#include "models/compute_calibration.hpp"
#include "models/gpu.hpp"
#include "models/system.hpp"
#include "models/tuner.hpp"
#include "sim/base/error.hpp"
#include "topologies/topology.hpp"

using namespace fabricsim;
using namespace fabricsim::models;

namespace {
// An all_reduce of `bytes` over every GPU of `t`, algorithm and protocol left to the tuner.
CollectiveSpec all_reduce_over(const topo::Topology& t, std::uint64_t bytes) {
  CollectiveSpec s;
  s.op = Op::AllReduce;
  s.bytes = bytes;
  s.communicator.assign(t.gpus().begin(), t.gpus().end());
  return s;
}
}  // namespace

TEST_CASE("gpu preset mi300x: AMD's dense peaks, 192 GB HBM3 at 5.3 TB/s, 304 CUs, no FP4") {
  const auto& g = gpu_spec("mi300x");
  CHECK(g.peak_flops(Precision::BF16) == doctest::Approx(1307.4e12));
  CHECK(g.peak_flops(Precision::FP16) == doctest::Approx(1307.4e12));
  CHECK(g.peak_flops(Precision::FP8) == doctest::Approx(2614.9e12));
  CHECK(g.peak_flops(Precision::TF32) == doctest::Approx(653.7e12));
  CHECK(g.peak_flops(Precision::FP32) == doctest::Approx(163.4e12));
  CHECK(g.peak_flops(Precision::FP4) == 0);
  CHECK(g.hbm_capacity_bytes == doctest::Approx(192e9));
  CHECK(g.hbm_bandwidth_Bps == doctest::Approx(5.3e12));
  CHECK(g.sm_count == 304);
  // No AMD kernel measurement: the kernel efficiencies are the H200's NVIDIA fit (docs/calibration.md).
  CHECK(&default_compute_calibration("mi300x") == &default_compute_calibration("h200"));
}

TEST_CASE("tuner on mi300x-node: ring / tree only, never NVLS or CollNet (no switch, no SHARP)") {
  const Calibration cal = default_calibration();
  for (const auto& [preset, params] :
       std::vector<std::pair<std::string, std::map<std::string, std::string>>>{
           {"mi300x-node", {}}, {"superpod", {{"nodes", "2"}, {"node", "mi300x-node"}}}}) {
    CAPTURE(preset);
    const System sys(system_spec(preset, params, "default"));
    const topo::Topology& t = sys.topology();
    topo::Routing& r = sys.routing();
    for (std::uint64_t bytes : {std::uint64_t{8}, std::uint64_t{1} << 20, std::uint64_t{8} << 30}) {
      CAPTURE(bytes);
      const TunerChoice c = tune(all_reduce_over(t, bytes), t, r, cal);
      CHECK((c.algorithm == Algorithm::Ring || c.algorithm == Algorithm::Tree));
      for (const auto& k : c.candidates) {
        CHECK(k.algorithm != Algorithm::Nvls);
        CHECK(k.algorithm != Algorithm::NvlsTree);
        CHECK(k.algorithm != Algorithm::CollNet);
      }
    }
    // Forcing NVLS is an input error naming the algorithm.
    CollectiveSpec n = all_reduce_over(t, 1 << 20);
    n.algorithm = Algorithm::Nvls;
    CHECK_THROWS_WITH_AS(tune(n, t, r, cal), doctest::Contains("nvls"), InputError);
  }
  // The tuner's intra-node bandwidth: all 7 Infinity Fabric links of a GPU (7 x 64 GB/s) at the default NVLink
  // efficiency (no MI300X calibration exists).
  const System node(system_spec("mi300x-node", {}, "default"));
  const CommBandwidths bw = comm_bandwidths(all_reduce_over(node.topology(), 1 << 20), node.topology(), node.routing(), cal);
  CHECK(bw.intra_Bps == doctest::Approx(448e9 * cal.nvlink_efficiency("mi300x")));
  CHECK(cal.nvlink_efficiency("mi300x") == cal.factors.nvlink_efficiency_default);
}

namespace {
// Payload bytes a ring all_reduce schedule (step fidelity, ring / simple forced) puts on each ordered GPU pair.
std::map<std::pair<topo::NodeId, topo::NodeId>, double> ring_pair_bytes(const topo::Topology& t, topo::Routing& r,
                                                                        const CollectiveSpec& base) {
  CollectiveSpec s = base;
  s.algorithm = Algorithm::Ring;
  s.protocol = Protocol::Simple;
  s.fidelity = Fidelity::Step;
  const Schedule sch = build_schedule(s, t, r, default_calibration());
  std::map<std::pair<topo::NodeId, topo::NodeId>, double> out;
  for (const auto& tr : sch.transfers) out[{tr.src, tr.dst}] += tr.payload_bytes * tr.weight * tr.steps * tr.replicas;
  return out;
}
}  // namespace

TEST_CASE("rings on a full mesh: the channels' rings use every Infinity Fabric link (RCCL spreads its rings)") {
  const Calibration cal = default_calibration();
  {
    // 8 GPUs: 7 channels on the 7 arc-disjoint rings of the mesh's Hamiltonian decomposition, so each of the
    // 56 ordered GPU pairs carries the same bytes (one channel's ring share), where one shared order would load
    // 8 pairs and leave 48 idle.
    const System sys(system_spec("mi300x-node", {}, "default"));
    const CollectiveSpec s = all_reduce_over(sys.topology(), std::uint64_t{1} << 30);
    CHECK(default_channels(s, sys.topology(), sys.routing()) == 7);
    const auto bytes = ring_pair_bytes(sys.topology(), sys.routing(), s);
    REQUIRE(bytes.size() == 56);
    // Ring all_reduce: each rank sends 2 (n - 1) / n of the buffer, split over 7 channels, each on one pair.
    const double per_pair = 2.0 * 7.0 / 8.0 * double(std::uint64_t{1} << 30) / 7.0;
    for (const auto& [pair, b] : bytes) CHECK(b == doctest::Approx(per_pair).epsilon(1e-9));
  }
  {
    // 4 GPUs (no Hamiltonian decomposition of the complete directed graph on 4 vertices exists, so 3 rings of
    // 4 pairs each cannot cover the 12 ordered pairs): 3 channels on greedy rings use 10 of them, where one
    // shared order would use 4.
    const System sys(system_spec("mi300x-node", {{"gpus_per_node", "4"}}, "default"));
    const CollectiveSpec s = all_reduce_over(sys.topology(), std::uint64_t{1} << 30);
    CHECK(default_channels(s, sys.topology(), sys.routing()) == 3);
    CHECK(ring_pair_bytes(sys.topology(), sys.routing(), s).size() == 10);
  }
  {
    // A switched host keeps one channel and one order (flows are not capped per channel there).
    const System sys(system_spec("dgx-h100", {}, "default"));
    CHECK(default_channels(all_reduce_over(sys.topology(), 1 << 20), sys.topology(), sys.routing()) == 1);
  }
}
