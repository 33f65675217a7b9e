#pragma once
// How long a collective or a point-to-point message takes on the fabric, as the replay executor asks it.
// Three implementations:
//  - AnalyticCommModel ("analytic"): closed-form NCCL ring/all-to-all costs from the topology (per-GPU
//    NVLink bandwidth, host NIC bandwidth shared by concurrent groups, NCCL's latency table).
//  - EngineCommModel ("engine", replay/engine_comm_model.hpp): each collective's NCCL schedule priced on
//    the flow-level engine on an idle fabric, cached (the fast tier: overlapping collectives do not contend).
//  - SharedNetworkCommModel ("shared", same header): every collective and message on one shared network on
//    the replay's clock, so overlapping communication contends for links.
// Models cache results per (communicator, op, bytes): a training step repeats the same collectives.
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "models/calibration.hpp"
#include "sim/engine/event_queue.hpp"
#include "topologies/routing.hpp"
#include "topologies/topology.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::sim {

struct CommTiming {
  double duration_s = 0;
  std::string algorithm;  // e.g. "ring"
  std::string protocol;   // e.g. "simple"
};

class CommModel {
 public:
  virtual ~CommModel() = default;
  // `comm` lists all member ranks (global); `mirrors` identical groups run concurrently (see trace.hpp).
  virtual CommTiming collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                                const std::string& algorithm) = 0;
  virtual CommTiming p2p(std::int32_t src_rank, std::int32_t dst_rank, double bytes) = 0;
  virtual std::string describe() const = 0;  // one line for RunResult::notes
  // The call alone on an idle fabric, priced as this model prices a call that nothing else shares links with
  // (the engine models: their idle-fabric price; analytic: its closed form). No link statistics, no counters:
  // an estimate beside the replay (replay/a2a_imbalance.hpp prices a skewed all_to_allv against its balanced
  // counterpart with it). `comm` may be a temporary (a model may cache by the call's contents, never by its
  // address). Default: collective() (a model that caches by communicator address must override this).
  virtual CommTiming idle_collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                                     const std::string& algorithm) {
    return collective(comm, op, bytes, algorithm);
  }
  // The algorithm and protocol this model runs the call with, known before it starts (duration_s may be 0):
  // the replay counts the CTAs of the call's NCCL kernel from them (models/compute_contention.hpp). No link
  // statistics, no counters. Default: not known (empty names; the replay then counts a ring with the simple
  // protocol, which is what the analytic model prices).
  virtual CommTiming collective_plan(const workloads::Communicator& /*comm*/, workloads::CollOp /*op*/,
                                     double /*bytes*/, const std::string& /*algorithm*/) {
    return {};
  }
  // idle_collective's price of a call the replay already priced exactly so (`comm` one of the replayed
  // trace's communicators), without pricing it again; nullopt when the replay did not.
  virtual std::optional<CommTiming> replayed_idle_price(const workloads::Communicator& /*comm*/,
                                                        workloads::CollOp /*op*/, double /*bytes*/,
                                                        const std::string& /*algorithm*/) const {
    return std::nullopt;
  }

  // Asynchronous models put every collective and message on one shared network that runs on the replay's
  // own EventQueue (one clock for compute, messages and collectives). The replay calls bind(q) once before
  // it starts, then start_collective / start_p2p at q.now(), the simulated time the operation starts;
  // `done(end_s, timing)` is called from inside the queue's event processing (or from inside the start_*
  // call, for an operation that takes no time) with the absolute finish time, which is q.now() then.
  // A start_* call may throw ReplayRestart (below): the replay then discards everything simulated so far,
  // calls bind() again on a fresh queue and reruns from time 0.
  using Done = std::function<void(double end_s, const CommTiming& timing)>;
  virtual bool asynchronous() const { return false; }
  // Called by the replay once with the whole trace before anything runs (a model may look ahead).
  virtual void prepare(const workloads::Trace& /*trace*/) {}
  virtual void bind(EventQueue& /*q*/) {}
  virtual void start_collective(const workloads::Communicator& /*comm*/, workloads::CollOp /*op*/, double /*bytes*/,
                                const std::string& /*algorithm*/, Done /*done*/) {
    throw std::logic_error("CommModel: not an asynchronous model");
  }
  virtual void start_p2p(std::int32_t /*src_rank*/, std::int32_t /*dst_rank*/, double /*bytes*/, Done /*done*/) {
    throw std::logic_error("CommModel: not an asynchronous model");
  }
  // Called once the replay's queue ran dry, before results are read: an asynchronous model that finds
  // now that an assumption it made during the run was wrong may throw ReplayRestart here.
  virtual void end_of_replay() {}
  // Which model this is, as results name it: "engine", "shared", "analytic".
  virtual std::string name() const { return "custom"; }
};

// Thrown by an asynchronous model's start_* when what it assumed about the rest of the replay turned out
// wrong (SharedNetworkCommModel: two operations of a communicator it priced as isolated overlap in time);
// the model has already changed its assumption, and the replay starts over (replay/executor.cpp).
class ReplayRestart : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The closed-form model's constants. No literal lives here: analytic_params derives them from the System's
// network calibration (models/calibration.cpp cites every value), so the analytic tier and the engine price
// with the same NCCL constants.
struct AnalyticCommParams {
  double base_latency_s = 0;        // ring/simple base_latency (once per call)
  double intra_step_latency_s = 0;  // ring/simple step_latency (per step inside an NVLink domain)
  double inter_step_latency_s = 0;  // ring/simple net_step_latency (per step across the network)
  // NCCL src/graph/tuning.cc (read at NVIDIA/nccl 01afd20, NCCL 2.8): compute capability 8.0 (A100) caps ring
  // busBw at 235 GB/s; applied to every GPU by this closed form.
  double busbw_cap_Bps = 235e9;
  double nvlink_efficiency = 0;     // calibration nvlink_efficiency.<first GPU's model>
  double net_efficiency = 0;        // calibration network_efficiency
  double pcie_efficiency = 0;       // calibration pcie_efficiency
};

// The constants above from a network calibration, for the GPUs of `t` (the first GPU's model).
AnalyticCommParams analytic_params(const models::Calibration& calib, const topo::Topology& t);

class AnalyticCommModel final : public CommModel {
 public:
  // Constants from models::default_calibration() (the System's calibration: analytic_params).
  explicit AnalyticCommModel(const topo::Topology& t);
  AnalyticCommModel(const topo::Topology& t, AnalyticCommParams p);
  CommTiming collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                        const std::string& algorithm) override;
  CommTiming p2p(std::int32_t src_rank, std::int32_t dst_rank, double bytes) override;
  CommTiming idle_collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                             const std::string& algorithm) override;
  std::string describe() const override;
  std::string name() const override { return "analytic"; }

  // Per-GPU figures derived from the topology (bytes/s, per direction), exposed for tests.
  double gpu_nvlink_Bps(std::int32_t rank) const;
  double host_nic_Bps(int host) const;

 private:
  const topo::Topology& t_;
  AnalyticCommParams p_;
  topo::Routing routing_;
  std::vector<double> nvlink_Bps_;           // per rank
  std::vector<double> pcie_Bps_;             // per rank
  std::vector<double> nic_Bps_;              // per rank: its rail NIC's network bandwidth
  std::map<int, double> host_nic_Bps_;       // per host
  std::map<std::tuple<const void*, int, double>, CommTiming> cache_;
};

}  // namespace fabricsim::sim
