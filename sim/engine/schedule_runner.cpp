#include "sim/engine/schedule_runner.hpp"

#include <memory>
#include <stdexcept>

#include "models/benchmark_loop.hpp"
#include "sim/base/error.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/network.hpp"
#include "sim/engine/simgrid_backend.hpp"

namespace fabricsim::sim {

namespace {
ScheduleResult run_fabricsim(const models::Schedule& s, const topo::Topology& t, topo::Routing& routing,
                             const models::Calibration& calib, const RunOptions& opt) {
  if (!(s.fixed_latency_s >= 0)) throw InputError("schedule: fixed_latency_s", "expected a time >= 0 seconds");
  EventQueue q;
  Network net(q, t, routing, calib, NetworkOptions{opt.batch_tolerance_s});
  // Non-owning: the schedule outlives this call.
  std::shared_ptr<const models::Schedule> sp(&s, [](const models::Schedule*) {});
  ScheduleResult res;
  bool done = false;
  double last = 0;
  net.start_schedule(sp, 0.0, [&](ScheduleRun& r) {
    res.transfers = std::move(r.transfers);
    last = r.finish_s;
    done = true;
  });
  q.run();
  if (!done) throw std::logic_error("run_schedule: the schedule did not complete");
  res.makespan_s = s.fixed_latency_s + last;
  if (opt.collect_link_stats) res.link_dirs = net.link_stats();
  res.events = q.processed();
  return res;
}
}  // namespace

ScheduleResult run_schedule(const models::Schedule& s, const topo::Topology& t, topo::Routing& routing,
                            const models::Calibration& calib, const RunOptions& opt) {
  if (opt.engine == "fabricsim") return run_fabricsim(s, t, routing, calib, opt);
  if (opt.engine == "simgrid") {
#ifdef FABRICSIM_HAVE_SIMGRID
    return run_schedule_simgrid(s, t, routing, calib, opt);
#else
    throw InputError("--engine", "engine 'simgrid' is not built into this binary (built: fabricsim)");
#endif
  }
  std::string names;
  for (const auto& n : engine_names()) names += (names.empty() ? "" : ", ") + n;
  throw InputError("--engine", "unknown engine '" + opt.engine + "' (expected one of: " + names + ")");
}

std::vector<std::string> engine_names() {
#ifdef FABRICSIM_HAVE_SIMGRID
  return {"fabricsim", "simgrid"};
#else
  return {"fabricsim"};
#endif
}

double run_benchmark_loop(const models::Schedule& s, int iters, topo::NodeId printing_gpu, const topo::Topology& t,
                          topo::Routing& routing, const models::Calibration& calib, const RunOptions& opt) {
  const models::BackToBack b = models::back_to_back(s, models::kLoopCopies, t);
  const ScheduleResult r = run_schedule(b.schedule, t, routing, calib, opt);
  std::vector<double> finish;
  finish.reserve(r.transfers.size());
  for (const auto& x : r.transfers) finish.push_back(x.finish_s);
  return models::loop_time_per_call_s(models::copy_finish_s(b, finish, printing_gpu), models::steady_period_s(b, finish),
                                      iters);
}

}  // namespace fabricsim::sim
