// Both engines on the collective schedules of real presets (dgx-h100, a 4-node DGX H100 superpod): every
// operation with its default algorithm must give the same transfer times within 0.1 %. Byte counts are
// rounded to whole bytes first, because SimGrid's communication sizes are integers (docs/engine.md).
#include <doctest/doctest.h>

#include <cmath>

#include "models/collectives.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"

#ifdef FABRICSIM_HAVE_SIMGRID

using namespace fabricsim;

TEST_CASE("cross-check against SimGrid: every collective on dgx-h100 and a 4-node superpod") {
  const std::vector<std::pair<std::string, std::map<std::string, std::string>>> systems = {
      {"dgx-h100", {}}, {"superpod", {{"nodes", "4"}}}};
  const auto calib = models::default_calibration();
  for (const auto& [preset, params] : systems) {
    const topo::Topology t = models::merge_nvswitch_planes(topo::build_preset(preset, params));
    // 4 MiB at the default fidelity, and 64 MiB at step level (thousands of pipelined transfers)
    for (const auto& [bytes, fidelity] : {std::pair{std::uint64_t{4} << 20, models::Fidelity::Auto},
                                          std::pair{std::uint64_t{64} << 20, models::Fidelity::Step}})
    for (models::Op op : models::kAllOps) {
      if (op == models::Op::AllToAllv) continue;  // needs a matrix; same builder as all_to_all
      topo::Routing routing(t);
      models::CollectiveSpec spec;
      spec.op = op;
      spec.bytes = bytes;
      spec.communicator = t.gpus();
      spec.fidelity = fidelity;
      models::Schedule s = models::build_schedule(spec, t, routing, calib);
      for (auto& tr : s.transfers) tr.bytes = std::round(tr.bytes);
      INFO(preset << " " << bytes << " B " << models::to_string(op) << " " << s.algorithm << " " << s.fidelity << " ("
                  << s.transfers.size() << " transfers)");
      sim::RunOptions oracle;
      oracle.engine = "simgrid";
      const auto a = sim::run_schedule(s, t, routing, calib);
      const auto b = sim::run_schedule(s, t, routing, calib, oracle);
      REQUIRE(a.transfers.size() == b.transfers.size());
      CHECK(a.makespan_s == doctest::Approx(b.makespan_s).epsilon(1e-3));
      std::size_t bad = 0;
      for (std::size_t i = 0; i < a.transfers.size(); ++i)
        if (std::abs(a.transfers[i].finish_s - b.transfers[i].finish_s) > 1e-3 * b.transfers[i].finish_s) ++bad;
      CHECK(bad == 0);
    }
  }
}

#endif
