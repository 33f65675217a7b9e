#pragma once
// The network model's parameters in one typed struct, loadable from / savable to JSON
// (docs/calibration.md, docs/calibration.schema.json). Each default cites its source in calibration.cpp.
// `fabricsim calibrate` fits these to measurements; `--calibration FILE` loads a fitted file.
//
// Where each group is applied:
//  - link[kind]: by the engine, per hop of that link kind (extra latency, capacity fraction). Defaults are
//    neutral (0 s, 1.0) because the topology already carries nominal link latency/bandwidth and the
//    achievable fraction is applied per transfer by the collective builder (below), so it is never
//    applied twice.
//  - algo[(algorithm, protocol)]: by models::build_schedule and the tuner: per-call base latency, per-step
//    latency inside an NVLink domain and across the network, and the protocol/algorithm payload
//    efficiency (wire bytes = payload bytes / efficiency).
//  - factors: the named factors (the JSON "extra" object), typed fields declared once with unit, range,
//    default and citation in models/calibration_params.cpp; unknown names are rejected when loading.
#include <array>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/calibration_params.hpp"
#include "sim/base/json_reader.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::models {

// NvlsTree: NCCL's NVLS_TREE (NCCL >= 2.18): NVLink SHARP inside each host, a double binary tree between hosts.
enum class Algorithm { Ring, Tree, Nvls, NvlsTree, CollNet, Pat, Direct, Pairwise, Hierarchical };
enum class Protocol { Simple, LL, LL128 };
const char* to_string(Algorithm a);
const char* to_string(Protocol p);
bool parse_algorithm(const std::string& s, Algorithm& out);  // "ring", "tree", "nvls", "nvls_tree", "collnet", ...
bool parse_protocol(const std::string& s, Protocol& out);    // "simple", "ll", "ll128"
constexpr std::array<Algorithm, 9> kAllAlgorithms = {Algorithm::Ring,   Algorithm::Tree,     Algorithm::Nvls,
                                                     Algorithm::NvlsTree, Algorithm::CollNet, Algorithm::Pat,
                                                     Algorithm::Direct,
                                                     Algorithm::Pairwise, Algorithm::Hierarchical};
constexpr std::array<Protocol, 3> kAllProtocols = {Protocol::Simple, Protocol::LL, Protocol::LL128};

struct LinkKindParams {
  double latency_s = 0;        // added per hop of this kind, on top of the topology's link latency
  double bw_efficiency = 1.0;  // achievable fraction of the nominal per-direction bandwidth
};

struct AlgoProtoParams {
  double base_latency_s = 0;      // once per collective call
  double step_latency_s = 0;      // per algorithm step between GPUs of one NVLink domain
  double net_step_latency_s = 0;  // per algorithm step that crosses the network (NIC)
  double bw_efficiency = 1.0;     // protocol payload efficiency (LL: 8-byte lines carry 4 data bytes)
};

// Latency/efficiency table of a range of NCCL releases whose tuning model (src/graph/tuning.cc) differs
// from the current one. For a measured run whose NCCL version falls in [from_code, until_code), the
// entries of `algo` replace those of Calibration::algo (see for_nccl_version); everything else (link
// efficiencies, extra factors) is shared by all versions. Codes are major * 100 + minor (2.8 -> 208).
struct NcclEra {
  std::string name;  // "2.8-2.17"
  int from_code = 0;
  int until_code = 0;
  std::map<std::pair<Algorithm, Protocol>, AlgoProtoParams> algo;
};

struct Calibration {
  std::string name = "default";
  std::string source;  // provenance of the values
  std::array<LinkKindParams, 4> link{};  // indexed by topo::LinkKind
  std::map<std::pair<Algorithm, Protocol>, AlgoProtoParams> algo;
  CalibrationFactors factors = default_calibration_factors();  // the named factors, read by field
  std::vector<NcclEra> nccl_eras;        // older NCCL tuning tables, applied by for_nccl_version

  const LinkKindParams& of(topo::LinkKind k) const { return link[static_cast<int>(k)]; }
  LinkKindParams& of(topo::LinkKind k) { return link[static_cast<int>(k)]; }
  // Throws InputError when the pair has no entry (the protocol does not exist for that algorithm).
  const AlgoProtoParams& of(Algorithm a, Protocol p) const;
  bool has(Algorithm a, Protocol p) const { return algo.count({a, p}) > 0; }
  // A named factor by its declared name (the fitter, reports and files; the models read `factors` directly).
  // factor throws InputError for an undeclared name or an unset one (compute.* without a value).
  double factor(std::string_view key) const;
  bool has_factor(std::string_view key) const;
  void set_factor(std::string_view key, double value);  // throws InputError for an undeclared name
  // The set factors by name, sorted (the file's "extra" object).
  std::map<std::string, double> named_factors() const;
  // Achievable fraction of nominal NVLink bandwidth for a GPU model ("a100-80gb" matches
  // "nvlink_efficiency.a100"); falls back to "nvlink_efficiency.default".
  double nvlink_efficiency(const std::string& gpu_model) const;
};

// Shortest time per call, in seconds, that a host thread driving `gpus_per_thread` GPUs can sustain when it
// issues back-to-back collectives (nccl-tests' timing loop): it launches one kernel per GPU per call, so
// calls complete no faster than gpus_per_thread x (factor "kernel_launch_s" + (channels - 1) x factor
// "channel_launch_s"), where `channels` is what the call runs on (tuner.hpp nccl_call_channels; values < 1
// count as 1). A measured time is max(simulated collective time, this floor).
double host_launch_floor_s(const Calibration& c, int gpus_per_thread, int channels = 1);
// What each channel beyond the first adds to that floor, in seconds: gpus_per_thread x "channel_launch_s".
double host_channel_launch_s(const Calibration& c, int gpus_per_thread);

Calibration default_calibration();  // no NCCL eras: the current NCCL tables for every version
// NCCL's older tuning tables with their cited values (calibration.cpp): today the NCCL 2.8-2.17 table.
// `fabricsim calibrate/validate --split-fit` fits them (validate/calibrate.hpp FitOptions).
std::vector<NcclEra> default_nccl_eras();
// NCCL version as major * 100 + minor from "2.8.4-1 (...)", "2.26.2; ...", "22602" (NCCL_VERSION_CODE of
// releases >= 2.9); -1 when unknown.
int nccl_version_code(const std::string& version);
// Index into c.nccl_eras of the era holding `code`, or -1 (unknown version or current tables).
int nccl_era_index(const Calibration& c, int code);
// The calibration as it applies to a run of that NCCL version: the era's table entries replace `algo`'s
// (a copy; unchanged when no era matches or the version is unknown).
Calibration for_nccl_version(const Calibration& c, const std::string& version);
// Starts from the defaults and overrides what the document names; unknown keys are errors naming
// `file` and the JSON path.
Calibration calibration_from_json(const Json& doc, const std::string& file);
Calibration load_calibration(const std::string& path);
Json calibration_to_json(const Calibration& c);  // full document; round-trips through calibration_from_json

}  // namespace fabricsim::models
