#include "sim/engine/collective_time.hpp"

#include <algorithm>
#include <optional>

#include "models/benchmark_loop.hpp"
#include "models/ring_stream.hpp"
#include "sim/base/error.hpp"
#include "sim/engine/quotient_flows.hpp"
#include "sim/engine/ring_stream.hpp"

namespace fabricsim::sim {

namespace {

// Transfers above which completions are batched within 1 us (docs/engine.md "Completion batching": 10x fewer
// engine steps for < 0.05 % error; 256-GPU all_to_all 64 MiB: 1530.96 vs 1531.29 us exact, 0.47 vs 48 s).
constexpr std::size_t kAutoBatchTransfers = 20000;
constexpr double kAutoBatchToleranceS = 1e-6;

void check_engine(const std::string& name) {
  std::string names;
  for (const auto& n : engine_names()) {
    if (n == name) return;
    names += (names.empty() ? "" : ", ") + n;
  }
  throw InputError("--engine " + name, "one of the engines built in: " + names);
}

}  // namespace

topo::Routing& call_routing(const models::System& sys, const CollectiveCall& call) {
  const models::Op op = call.spec.op;
  const bool pxn = call.pxn ? *call.pxn
                            : op == models::Op::AllToAll || op == models::Op::AllToAllv || op == models::Op::SendRecv ||
                                  op == models::Op::Scatter;
  return sys.routing(pxn);
}

models::CollectiveSpec tuned_spec(const models::System& sys, const CollectiveCall& call,
                                  const models::Calibration& calib, double* predicted_s) {
  const topo::Topology& t = sys.topology();
  topo::Routing& routing = call_routing(sys, call);
  models::validate_spec(call.spec, t, routing);
  const models::TunerChoice tc = models::tune(call.spec, t, routing, calib);
  models::CollectiveSpec s = call.spec;
  s.algorithm = tc.algorithm;
  s.protocol = tc.protocol;
  if (predicted_s) *predicted_s = tc.predicted_s;
  return s;
}

models::Schedule collective_schedule(const models::System& sys, const CollectiveCall& call,
                                     const models::Calibration& calib) {
  const models::CollectiveSpec s = tuned_spec(sys, call, calib);
  return models::build_schedule(s, sys.topology(), call_routing(sys, call), calib);
}

models::Schedule collective_schedule(const models::System& sys, const CollectiveCall& call) {
  return collective_schedule(sys, call, sys.calibration());
}

CollectiveTime time_collective(const models::System& sys, const CollectiveCall& call) {
  return time_collective(sys, call, sys.calibration());
}

CollectiveTime time_collective(const models::System& sys, const CollectiveCall& call, const models::Calibration& calib) {
  return time_collective(sys.topology(), call_routing(sys, call), calib, call);
}

CollectiveTime time_collective(const topo::Topology& t, topo::Routing& routing, const models::Calibration& calib,
                               const CollectiveCall& call) {
  check_engine(call.engine);
  CollectiveTime out;
  models::validate_spec(call.spec, t, routing);
  const models::TunerChoice tc = models::tune(call.spec, t, routing, calib);
  models::CollectiveSpec fixed = call.spec;
  fixed.algorithm = tc.algorithm;
  fixed.protocol = tc.protocol;
  out.predicted_s = tc.predicted_s;
  const models::Op op = fixed.op;
  const bool loop = call.iters > 0 && models::calls_overlap(op);
  const int floor_channels = call.floor_channels > 0 ? call.floor_channels : models::nccl_call_channels(fixed, t);
  auto apply_floor = [&](double time_s) {
    const double floor_s = call.gpus_per_thread > 0 ? models::host_launch_floor_s(calib, call.gpus_per_thread, floor_channels) : 0.0;
    out.at_host_floor = floor_s > time_s;
    out.time_s = std::max(time_s, floor_s);
  };
  // A step-level ring runs streamed, without materialising its transfers (docs/engine.md, "Streamed step-level
  // rings"); its time is the price even when the caller also wants the materialised run's per-transfer and
  // link results (keep_run), so that asking for outputs never changes a time.
  const bool ring_op = op == models::Op::AllReduce || op == models::Op::AllGather || op == models::Op::ReduceScatter;
  std::optional<double> streamed_s;
  if (call.engine == "fabricsim" && !loop && ring_op && *fixed.algorithm == models::Algorithm::Ring) {
    if (const auto rs = models::build_ring_stream(fixed, t, routing, calib)) {
      RingStreamOptions so;
      so.batch_tolerance_s = call.batch_tolerance_s ? *call.batch_tolerance_s
                             : rs->transfers() > static_cast<double>(kAutoBatchTransfers) ? kAutoBatchToleranceS
                                                                                        : 0.0;
      // The certified bounds first (sim/engine/ring_bounds.hpp, docs/engine.md "Certified bounds"): when they
      // close, their midpoint is the exact fluid model's makespan within 1e-9 relative, without events and
      // without the batching tolerance; otherwise the events run as before.
      so.certify = true;
      const RingStreamResult rr = run_ring_stream(*rs, t, routing, calib, so);
      streamed_s = rr.makespan_s;
      out.certified = rr.certified;
      out.certify_reason = rr.certify_reason;
      out.algorithm = rs->algorithm;
      out.protocol = rs->protocol;
      out.fidelity = "step";
      out.method = "ring-stream";
      out.transfers = static_cast<std::size_t>(rs->transfers());
      if (!call.keep_run) {
        apply_floor(*streamed_s);
        return out;
      }
    }
  }
  // A direct all_to_all(v) on a symmetric fabric: the exact quotient by its route classes, without
  // materialising its flows (docs/engine.md, "Quotient of a symmetric all-to-all"); as for the ring, its
  // time is the price even when the materialised run is kept for its outputs.
  std::optional<double> quotient_s;
  if (call.engine == "fabricsim" && !loop && (op == models::Op::AllToAll || op == models::Op::AllToAllv) &&
      *fixed.algorithm == models::Algorithm::Direct) {
    QuotientOptions qo;
    qo.tolerance_for_flows = [&](std::size_t flows) {
      return call.batch_tolerance_s ? *call.batch_tolerance_s : flows > kAutoBatchTransfers ? kAutoBatchToleranceS : 0.0;
    };
    models::Schedule head;
    const QuotientResult q = run_collective_quotient(fixed, t, routing, calib, qo, &head);
    if (q.applied) {
      quotient_s = q.makespan_s;
      out.algorithm = head.algorithm;
      out.protocol = head.protocol;
      out.fidelity = head.fidelity;
      out.method = "quotient";
      out.transfers = q.flows;
      if (!call.keep_run) {
        apply_floor(*quotient_s);
        return out;
      }
    } else {
      out.quotient_reason = q.reason;
    }
  }
  auto sch = std::make_shared<models::Schedule>(models::build_schedule(fixed, t, routing, calib));
  RunOptions o;
  o.engine = call.engine;
  const std::size_t transfers = models::counted_transfers(*sch);  // joins left out (models/schedule.hpp)
  o.batch_tolerance_s = call.batch_tolerance_s ? *call.batch_tolerance_s
                        : transfers > kAutoBatchTransfers ? kAutoBatchToleranceS
                                                          : 0.0;
  out.algorithm = sch->algorithm;
  out.protocol = sch->protocol;
  out.fidelity = sch->fidelity;
  out.transfers = transfers;
  double time_s = 0;
  if (call.keep_run || !loop) {
    RunOptions ro = o;
    ro.collect_link_stats = call.keep_run;
    auto res = std::make_shared<ScheduleResult>(run_schedule(*sch, t, routing, calib, ro));
    time_s = streamed_s ? *streamed_s : quotient_s ? *quotient_s : res->makespan_s;
    if (call.keep_run) {
      out.run = res;
      out.schedule = sch;
    }
  }
  if (loop) {
    // The loop of a rooted pipeline: its period, not one call's latency (the kept run still shows one call).
    models::CollectiveSpec looped = fixed;
    models::prepare_loop_spec(looped, t, routing);
    time_s = run_benchmark_loop(models::build_schedule(looped, t, routing, calib), call.iters,
                                call.slowest_rank ? topo::kNoNode : looped.communicator.front(), t, routing, calib, o);
  }
  apply_floor(time_s);
  return out;
}

}  // namespace fabricsim::sim
