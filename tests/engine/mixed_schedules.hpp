#pragma once
// One fixture for the engine tests that run mixed traffic on 4 DGX H100 nodes (32 GPUs): a Zipf(1.2)
// all_to_allv with PXN (bundles that split), an all_reduce ring on the default routes sharing the NICs, and a
// uniform all_to_all. Used by the flow-bundle and the transfer-times tests.
#include <cstdint>
#include <memory>
#include <vector>

#include "bench/bench_util.hpp"
#include "models/collectives.hpp"
#include "models/system.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/network.hpp"

namespace fabricsim::test {

struct MixedSchedules {
  models::System sys{models::system_spec("superpod", {{"nodes", "4"}}, "default")};
  std::shared_ptr<const models::Schedule> skewed = build(models::Op::AllToAllv, std::uint64_t{8} << 20, true, true);
  std::shared_ptr<const models::Schedule> uniform = build(models::Op::AllToAll, std::uint64_t{4} << 20, true, false);
  std::shared_ptr<const models::Schedule> ring = build(models::Op::AllReduce, std::uint64_t{32} << 20, false, false);

  // Starts the mix on `net` (bound to `q`): the skewed all_to_allv (PXN) and the ring at time 0, the uniform
  // all_to_all (PXN) at 2e-4 s, their runs into out[0..2]; when out has 4 entries, the skewed schedule again
  // at 5e-4 s (from the network's cached plan, while the ring runs) into out[3]. Call q.run() next.
  void start(sim::Network& net, sim::EventQueue& q, std::vector<sim::ScheduleRun>& out) const {
    net.start_schedule(skewed, skewed->fixed_latency_s, [&out](sim::ScheduleRun& r) { out[0] = std::move(r); }, true);
    net.start_schedule(ring, [&out](sim::ScheduleRun& r) { out[1] = std::move(r); });
    q.schedule(2e-4, [this, &net, &out] {
      net.start_schedule(uniform, uniform->fixed_latency_s, [&out](sim::ScheduleRun& r) { out[2] = std::move(r); },
                         true);
    });
    if (out.size() < 4) return;
    q.schedule(5e-4, [this, &net, &out] {
      net.start_schedule(skewed, skewed->fixed_latency_s, [&out](sim::ScheduleRun& r) { out[3] = std::move(r); },
                         true);
    });
  }

  std::shared_ptr<const models::Schedule> build(models::Op op, std::uint64_t bytes, bool pxn, bool zipf) {
    const topo::Topology& t = sys.topology();
    models::CollectiveSpec spec;
    spec.op = op;
    spec.bytes = bytes;
    spec.communicator = t.gpus();
    spec.fidelity = models::Fidelity::Step;
    if (zipf) spec.matrix = bench::zipf_alltoallv_matrix(t.gpus().size(), bytes, 1.2, 7);
    return std::make_shared<const models::Schedule>(
        models::build_schedule(spec, t, sys.routing(pxn), sys.calibration()));
  }
};

}  // namespace fabricsim::test
