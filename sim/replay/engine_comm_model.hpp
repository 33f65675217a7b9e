#pragma once
// Engine-backed communication costs: each distinct (communicator, operation, bytes) is turned into an NCCL
// schedule by models::build_schedule (algorithm/protocol from the tuner unless the trace forces one) and
// run on the flow-level engine (sim::run_schedule) on an idle fabric; the makespan is cached. Concurrent
// identical groups (`mirrors`, ranks shifted by k * mirror_stride) are merged into the same schedule so
// that they contend for shared links (e.g. the 8 data-parallel rings of a DGX node on the rails and
// spines). Different collectives in flight at the same time do not contend with each other in this
// model (stated in RunResult::notes).
#include <map>
#include <memory>
#include <tuple>

#include "models/calibration.hpp"
#include "sim/replay/comm_model.hpp"
#include "topologies/routing.hpp"

namespace fabricsim::sim {

class EngineCommModel final : public CommModel {
 public:
  EngineCommModel(const topo::Topology& t, const models::Calibration& calib);
  ~EngineCommModel() override;
  CommTiming collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                        const std::string& algorithm) override;
  CommTiming p2p(std::int32_t src_rank, std::int32_t dst_rank, double bytes) override;
  std::string describe() const override;
  std::size_t schedules_run() const { return runs_; }

 private:
  const topo::Topology& t_;
  const models::Calibration& calib_;
  topo::Routing routing_;
  std::map<std::tuple<const void*, int, double>, CommTiming> cache_;
  std::map<std::tuple<std::int32_t, std::int32_t, double>, CommTiming> p2p_cache_;
  std::size_t runs_ = 0;
};

}  // namespace fabricsim::sim
