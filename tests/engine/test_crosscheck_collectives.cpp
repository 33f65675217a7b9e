// Both engines on the collective schedules of real presets (dgx-h100, a 4-node DGX H100 superpod): every
// operation with its default algorithm must give the same transfer times within 0.1 %. Byte counts are
// rounded to whole bytes first, because SimGrid's communication sizes are integers (docs/engine.md).
#include <doctest/doctest.h>

#include <cmath>

#include "bench/bench_util.hpp"
#include "models/collectives.hpp"
#include "models/system.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

#ifdef FABRICSIM_HAVE_SIMGRID

using namespace fabricsim;

namespace {
// Runs `s` (byte counts rounded to whole bytes first, as SimGrid's comm sizes are) on both engines and checks
// the makespan and every transfer's finish (and, with `starts`, start) within `rel` of SimGrid's.
void check_both_engines(models::Schedule s, const topo::Topology& t, topo::Routing& routing,
                        const models::Calibration& calib, double rel, bool starts) {
  for (auto& tr : s.transfers) tr.bytes = std::round(tr.bytes);
  sim::RunOptions oracle;
  oracle.engine = "simgrid";
  const auto a = sim::run_schedule(s, t, routing, calib);
  const auto b = sim::run_schedule(s, t, routing, calib, oracle);
  REQUIRE(a.transfers.size() == b.transfers.size());
  CHECK(a.makespan_s == doctest::Approx(b.makespan_s).epsilon(rel));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < a.transfers.size(); ++i) {
    const double tol = rel * b.transfers[i].finish_s;
    if (std::abs(a.transfers[i].finish_s - b.transfers[i].finish_s) > tol) ++bad;
    if (starts && std::abs(a.transfers[i].start_s - b.transfers[i].start_s) > tol) ++bad;
  }
  CHECK(bad == 0);
}
}  // namespace

TEST_CASE("cross-check against SimGrid: every collective on dgx-h100 and a 4-node superpod") {
  const std::vector<std::pair<std::string, std::map<std::string, std::string>>> systems = {
      {"dgx-h100", {}}, {"superpod", {{"nodes", "4"}}}};
  for (const auto& [preset, params] : systems) {
    const models::System sys(models::system_spec(preset, params, "default"));
    const topo::Topology& t = sys.topology();
    const models::Calibration& calib = sys.calibration();
    // 4 MiB at the default fidelity, and 64 MiB at step level (thousands of pipelined transfers)
    for (const auto& [bytes, fidelity] : {std::pair{std::uint64_t{4} << 20, models::Fidelity::Auto},
                                          std::pair{std::uint64_t{64} << 20, models::Fidelity::Step}})
    for (models::Op op : models::kAllOps) {
      if (op == models::Op::AllToAllv) continue;  // needs a matrix; same builder as all_to_all
      topo::Routing& routing = sys.routing();
      models::CollectiveSpec spec;
      spec.op = op;
      spec.bytes = bytes;
      spec.communicator = t.gpus();
      spec.fidelity = fidelity;
      const models::Schedule s = models::build_schedule(spec, t, routing, calib);
      INFO(preset << " " << bytes << " B " << models::to_string(op) << " " << s.algorithm << " " << s.fidelity << " ("
                  << s.transfers.size() << " transfers)");
      check_both_engines(s, t, routing, calib, 1e-3, false);
    }
  }
}


TEST_CASE("cross-check against SimGrid: step-level all_to_all on 64 GPUs (several driver actors per source)") {
  // 63 concurrent transfers per source GPU: more than one SimGrid driver actor per source (simgrid_backend.cpp
  // gives each at most 32 initial transfers), 4032 flows sharing NVLink, NICs, leaves and spines.
  const models::System sys(models::system_spec("superpod", {{"nodes", "8"}}, "default"));
  const topo::Topology& t = sys.topology();
  topo::Routing& routing = sys.routing();
  const models::Calibration& calib = sys.calibration();
  models::CollectiveSpec spec;
  spec.op = models::Op::AllToAll;
  spec.bytes = std::uint64_t{16} << 20;
  spec.communicator = t.gpus();
  spec.fidelity = models::Fidelity::Step;
  const models::Schedule s = models::build_schedule(spec, t, routing, calib);
  REQUIRE(s.transfers.size() == 64u * 63u);
  check_both_engines(s, t, routing, calib, 1e-4, true);
}

TEST_CASE("cross-check against SimGrid: skewed MoE all_to_allv (Zipf expert loads, EP 64 over 8 nodes)") {
  // Every rank dispatches 16 MiB split by a Zipf(1.0) expert load: blocks from 1.7 KiB to 3.6 MiB, so flows
  // finish at many different times and every completion changes the other flows' shares.
  const models::System sys(models::system_spec("superpod", {{"nodes", "8"}}, "default"));
  const topo::Topology& t = sys.topology();
  topo::Routing& routing = sys.routing(/*pxn=*/true);
  const models::Calibration& calib = sys.calibration();
  models::CollectiveSpec spec;
  spec.op = models::Op::AllToAllv;
  spec.bytes = std::uint64_t{16} << 20;
  spec.communicator = t.gpus();
  spec.matrix = bench::zipf_alltoallv_matrix(64, spec.bytes, 1.0, 1);
  const models::Schedule s = models::build_schedule(spec, t, routing, calib);
  REQUIRE(s.transfers.size() == 64u * 63u);
  // The load is skewed: the hottest expert receives about 40x the coldest.
  std::uint64_t lo = ~std::uint64_t{0}, hi = 0;
  for (auto b : spec.matrix[0]) lo = std::min(lo, b), hi = std::max(hi, b);
  CHECK(hi > 30 * lo);
  check_both_engines(s, t, routing, calib, 1e-4, true);
}
#endif
