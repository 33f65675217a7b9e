#pragma once
// The slowest placement class. Where the groups of one kind (tensor, context, expert, data parallel) are not all
// alike over the fabric, the step is as slow as the slowest group: every rank waits for it in the next
// collective they share (the gradient all-reduce, a pipeline send). A trace says so with placement-class
// communicators (docs/workloads.md "Trace format"; the gpt generator writes them): beside a simulated rank's
// communicator NAME, a communicator NAME@R holds the first group (first rank R) of each other shape the
// groups of NAME's kind take in its pipeline stage (the NVLink domains and servers their members occupy),
// called by no op. This pass prices the simulated ranks' calls on NAME alone on an idle fabric
// (CommModel::idle_collective) over NAME's group and over each NAME@R, and moves the calls to the slowest
// (NAME itself on ties, so where the classes price alike nothing changes). The choice is per communicator,
// and only for one with a single simulated member (a group inside one pipeline stage): the slowest
// tensor-parallel group and the slowest expert-parallel group of a stage may be different ranks' (a bound a
// little above any one rank's step). Cluster scenarios run it per job (replay/cluster_run.cpp).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "replay/comm_model.hpp"
#include "topologies/topology.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::sim {

// What the pass found, per category of the communicators with placement classes ("tp", "cp", "ep", ...).
struct PlacementClassChoice {
  std::size_t communicators = 0;  // with placement classes, called by a simulated rank
  std::size_t moved = 0;          // of those, whose calls now run over a slower class's group
  std::size_t classes = 0;        // the most classes (its own group included) of one communicator
  double own_s = 0;               // the simulated ranks' calls over their own groups, each alone on an idle fabric
  double priced_s = 0;            // the same calls over the groups they now run over
  // Where moving gained the most: the communicator, its own group and the slowest group, in words.
  std::string example, own_shape, slowest_shape;
  double largest_gain_s = -1;
};

// Moves the simulated ranks' calls on each communicator with placement classes to its slowest class's
// communicator (Op::comm). A trace without placement classes is left as it is.
std::map<std::string, PlacementClassChoice> price_slowest_placement_classes(workloads::Trace& trace,
                                                                            const topo::Topology& t, CommModel& comm);

// A group's shape in words: "ranks 64-127: 64 GPUs, 2 NVLink domains (8 + 56), 16 servers".
std::string group_shape(const topo::Topology& t, const std::vector<std::int32_t>& ranks);

// One note per category, and the metrics <prefix>placement.<category>.classes / .own_s / .priced_s (a cluster
// job's: prefix "job.NAME.").
void add_placement_class_results(const std::map<std::string, PlacementClassChoice>& choices,
                                 std::vector<std::string>& notes, std::map<std::string, double>& metrics,
                                 const std::string& prefix = "");

}  // namespace fabricsim::sim
