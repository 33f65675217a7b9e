#pragma once
// Turns the engine's per-link-direction statistics into the LinkRecords the output writers read, for any
// subcommand that ran schedules on the engine (fabricsim coll, the replayer's engine comm model).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/schedule.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "replay/result.hpp"
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

// A RunResult for one collective run by `fabricsim coll` (so it gets the same timeline / link statistics /
// result JSON / report as a training run): one "collective" op per member GPU on stream "comm" spanning
// [0, makespan], plus, when the schedule has at most `max_transfer_ops` transfers, each transfer as a
// "send" op on its source GPU's stream "xfer.ch<channel>" (or a "recv" on the destination GPU for transfers
// that come from a switch, e.g. NVLS) over [start, finish] from `res.transfers`. Links from
// `res.link_dirs` (run the schedule with RunOptions::collect_link_stats) at nominal link bandwidth.
struct CollectiveRunInfo {
  std::string topology;                               // preset or file name
  std::map<std::string, std::string> topology_params;
  std::string op;                                     // "all_reduce", ...
  double bytes = 0;                                   // collective size
  std::vector<topo::NodeId> communicator;             // member GPUs
  std::size_t max_transfer_ops = 200000;
};
RunResult collective_run_result(const topo::Topology& t, const models::Schedule& s, const ScheduleResult& res,
                                const CollectiveRunInfo& info);

}  // namespace fabricsim::sim
