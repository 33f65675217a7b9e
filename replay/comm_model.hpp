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
#include <string>
#include <tuple>
#include <vector>

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

struct AnalyticCommParams {
  // NCCL 2.8-era src/graph/tuning.cc (github NVIDIA/nccl @01afd20): baseLat[Ring][Simple] = 8.4 us;
  // hwLat[NVLINK][Ring][Simple] = 3.4 us per intra-node step; hwLat[NET][Ring][Simple] = 9.6 us per
  // inter-node step; compCap80 (A100) caps ring busBw at 235 GB/s.
  double base_latency_s = 8.4e-6;
  double intra_step_latency_s = 3.4e-6;
  double inter_step_latency_s = 9.6e-6;
  double busbw_cap_Bps = 235e9;
  // NVLink achieved fraction: 8x A100-SXM4-80GB all_reduce peak busbw 231.58 GB/s over 12 NVLink3 x 25 GB/s
  // = 300 GB/s per direction -> 0.772 (/work/shared/data/nccl-tests/azure_ndv4_a100_1node_8gpu_all_reduce_
  // busbw_only.csv, 8 GiB row).
  double nvlink_efficiency = 0.772;
  // Network achieved fraction of NIC line rate. No large-message multi-node A100 measurement exists in
  // /work/shared/data (ABCI 4-node stops at 32 MiB, still rising: 31.3 GB/s busbw with 4 HDR NICs/node).
  // ASSUMPTION 0.9 (HDR 200 Gb/s = 25 GB/s line; NCCL reaches ~22-23 GB/s per NIC in practice); replace
  // with a fitted calibration ("net_efficiency") when one exists.
  double net_efficiency = 0.9;
  // PCIe fraction (PCIe-only hosts): same assumption class as the network.
  double pcie_efficiency = 0.8;
};

class AnalyticCommModel final : public CommModel {
 public:
  AnalyticCommModel(const topo::Topology& t, AnalyticCommParams p = {});
  CommTiming collective(const workloads::Communicator& comm, workloads::CollOp op, double bytes,
                        const std::string& algorithm) override;
  CommTiming p2p(std::int32_t src_rank, std::int32_t dst_rank, double bytes) override;
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
