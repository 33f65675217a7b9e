#pragma once
// The SimGrid 3.32 oracle backend (implemented in simgrid_backend.cpp, built only with SimGrid).
#include "sim/engine/schedule_runner.hpp"

namespace fabricsim::sim {

#ifdef FABRICSIM_HAVE_SIMGRID
// Runs `s` on SimGrid in a forked child process (SimGrid's engine is a process-wide singleton that cannot be
// re-created), returning the same result type as our engine. Link statistics are not collected.
ScheduleResult run_schedule_simgrid(const models::Schedule& s, const topo::Topology& t, topo::Routing& routing,
                                    const models::Calibration& calib, const RunOptions& opt);
#endif

}  // namespace fabricsim::sim
