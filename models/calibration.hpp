#pragma once
// The network model's parameters in one typed struct, loadable from / savable to JSON. Each default cites
// its source in calibration.cpp. `fabricsim calibrate` fits these to measurements; `--calibration FILE`
// loads a fitted file.
#include <array>
#include <map>
#include <string>

#include "sim/base/json_reader.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::models {

enum class Algorithm { Ring, Tree, Nvls, CollNet, Pat, Direct, Pairwise, Hierarchical };
enum class Protocol { Simple, LL, LL128 };
const char* to_string(Algorithm a);
const char* to_string(Protocol p);
bool parse_algorithm(const std::string& s, Algorithm& out);
bool parse_protocol(const std::string& s, Protocol& out);

struct LinkKindParams {
  double latency_s = 0;        // added per hop of this kind, on top of the topology's link latency
  double bw_efficiency = 1.0;  // achievable fraction of the nominal per-direction bandwidth
};

struct AlgoProtoParams {
  double base_latency_s = 0;   // once per collective call
  double step_latency_s = 0;   // per algorithm step
  double bw_efficiency = 1.0;  // protocol payload efficiency (LL: 8-byte lines carry 4 data bytes)
};

struct Calibration {
  std::string name = "default";
  std::string source;  // provenance of the values
  std::array<LinkKindParams, 4> link{};  // indexed by topo::LinkKind
  std::map<std::pair<Algorithm, Protocol>, AlgoProtoParams> algo;
  std::map<std::string, double> extra;  // model-specific named factors (documented where used)

  const LinkKindParams& of(topo::LinkKind k) const { return link[static_cast<int>(k)]; }
  LinkKindParams& of(topo::LinkKind k) { return link[static_cast<int>(k)]; }
  const AlgoProtoParams& of(Algorithm a, Protocol p) const;
};

Calibration default_calibration();
Calibration calibration_from_json(const Json& doc, const std::string& file);
Calibration load_calibration(const std::string& path);
Json calibration_to_json(const Calibration& c);

}  // namespace fabricsim::models
