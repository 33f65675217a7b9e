#pragma once
// JSON topology files (schema: docs/topology.schema.json), Graphviz export, presets and summaries.
#include <map>
#include <string>
#include <vector>

#include "sim/base/json_reader.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::topo {

// Parses a topology document; errors name `file` and the JSON path.
Topology topology_from_json(const Json& doc, const std::string& file);
Topology load_topology_file(const std::string& path);
Json topology_to_json(const Topology& t);  // round-trips through topology_from_json
std::string topology_to_dot(const Topology& t);

// Preset registry. `params` are the --param key=value pairs; unknown keys are errors.
struct PresetInfo {
  std::string name;
  std::string description;
  std::vector<std::pair<std::string, std::string>> params;  // name, description with default
};
const std::vector<PresetInfo>& presets();
bool is_preset(const std::string& name);
Topology build_preset(const std::string& name, const std::map<std::string, std::string>& params);
// How preset `name` (with `params`) reaches `gpus` GPUs, for a "too few GPUs" error: `preset` is `name` when it has a
// "nodes" parameter, else "superpod" (a superpod whose node is `name`, when the superpod takes it), with `params`
// kept; `nodes` is the smallest "nodes" giving at least `gpus` (0 if none does), `per_node` the GPUs one adds, and
// `max_nodes` the largest count the preset allows when that is below what `gpus` needs. All 0 (preset empty) when
// neither applies (a topology file, or a preset that takes no "nodes").
struct GrowHint {
  std::string preset;
  std::int64_t nodes = 0, per_node = 0, max_nodes = 0;
};
GrowHint preset_growth(const std::string& name, const std::map<std::string, std::string>& params, std::int64_t gpus);
// A preset name or a file path. `params_at` says where `params` came from when not the command line's
// --param (e.g. "scenario.json: /topology/params"); a bad parameter is then reported there.
Topology load_topology(const std::string& preset_or_file, const std::map<std::string, std::string>& params,
                       const std::string& params_at = "");

struct TopologySummary {
  std::map<std::string, int> node_counts;  // by kind name
  std::map<std::string, int> link_counts;  // by link kind name
  int gpus = 0;
  int hosts = 0;
  double gpu_nvlink_Bps = 0;   // per GPU, per direction, sum of NVLink bandwidth (first GPU)
  double gpu_network_Bps = 0;  // per GPU share of host NIC bandwidth per direction
  double bisection_Bps = 0;    // per direction, min over the GPU halving cut computed by max-flow
  int diameter_hops = 0;       // max over GPU pairs of route hop count
  std::map<std::string, int> physical_link_counts;  // by link kind, summing Link::count
  bool diameter_exact = true;  // false when only a subset of source GPUs was routed (large topologies)
  long long unreachable_gpu_pairs = 0;  // ordered GPU pairs without any route (among those examined)
};
struct SummaryOptions {
  bool bisection = true;
  bool diameter = true;
  // All GPU pairs are routed up to this many GPUs; above it the sources are the GPUs of the first and
  // last host (every GPU is a destination).
  std::size_t exact_diameter_max_gpus = 1024;
};
TopologySummary summarize(const Topology& t);
TopologySummary summarize(const Topology& t, const SummaryOptions& opt);
// Max-flow (Boost push-relabel) from GPU ranks [0, n/2) to [n/2, n) with every link carrying its
// bandwidth in each direction and every node able to forward; bytes/s per direction.
double bisection_bandwidth(const Topology& t);
std::string summary_text(const Topology& t, const TopologySummary& s);
Json summary_json(const Topology& t, const TopologySummary& s);

}  // namespace fabricsim::topo
