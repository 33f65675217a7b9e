#pragma once
// One fixture for the engine tests that run mixed traffic on 4 DGX H100 nodes (32 GPUs): a Zipf(1.2)
// all_to_allv with PXN (bundles that split), an all_reduce ring on the default routes sharing the NICs, and a
// uniform all_to_all. Used by the flow-bundle and the transfer-times tests.
#include <cstdint>
#include <memory>

#include "bench/bench_util.hpp"
#include "models/collectives.hpp"
#include "models/system.hpp"

namespace fabricsim::test {

struct MixedSchedules {
  models::System sys{models::system_spec("superpod", {{"nodes", "4"}}, "default")};
  std::shared_ptr<const models::Schedule> skewed = build(models::Op::AllToAllv, std::uint64_t{8} << 20, true, true);
  std::shared_ptr<const models::Schedule> uniform = build(models::Op::AllToAll, std::uint64_t{4} << 20, true, false);
  std::shared_ptr<const models::Schedule> ring = build(models::Op::AllReduce, std::uint64_t{32} << 20, false, false);

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
