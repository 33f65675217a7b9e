#pragma once
// Turns the engine's per-link-direction statistics into the LinkRecords the output writers read, for any
// subcommand that ran schedules on the engine (fabricsim coll, the replayer's engine comm model).
#include <functional>
#include <vector>

#include "sim/engine/schedule_runner.hpp"
#include "sim/replay/result.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::sim {

// Tier of a link for reports: 0 when both ends sit in a server (GPU, NVSwitch, PCIe switch, CPU, NIC);
// otherwise the highest fabric-switch tier among its endpoints (1 leaf, 2 spine, 3 core).
int link_tier(const topo::Topology& t, topo::LinkId l);

// One LinkRecord per link with traffic in either direction (ordered by link id). `dirs` is indexed by
// topo::LinkDir (2*link + dir), as ScheduleResult::link_dirs; `capacity_Bps(d)` gives a direction's effective
// capacity (e.g. Network::capacity_Bps); when empty, the link's nominal bandwidth_Bps is used.
std::vector<LinkRecord> link_records(const topo::Topology& t, const std::vector<LinkDirStats>& dirs,
                                     const std::function<double(topo::LinkDir)>& capacity_Bps = {});

}  // namespace fabricsim::sim
