#include "validate/simulate.hpp"

#include <cstdio>

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>

#include "models/benchmark_loop.hpp"
#include "models/collectives.hpp"
#include "models/tuner.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "topologies/fabrics.hpp"
#include "sim/engine/collective_time.hpp"
#include "topologies/io.hpp"
#include "topologies/routing.hpp"
#include "topologies/topology.hpp"
#include "validate/fabric_mapping.hpp"

namespace fabricsim::validate {
namespace {

// nccl-tests' default -n (iterations per size) when a log does not print its header (src/common.cu).
constexpr int kNcclTestsDefaultIters = 20;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool contains(const std::string& s, const char* sub) { return s.find(sub) != std::string::npos; }

// Multi-host text logs: the GPU model fixes the server, not the network between servers, so the mapping is
// made only when a sidecar states the system (and, checked by finish_mapping through describe_fabric, its
// network), and a system-specific rule (`only_for`, e.g. ABCI's node types) only for that system.
void check_multi_host(SystemMapping& s, const Measurement& m, const char* only_for) {
  if (m.num_nodes <= 1 || m.format.rfind("fabricsim-json", 0) == 0) return;
  const std::string how = "pass --topology PRESET (with --param nics_per_node=N nic_bandwidth=... fabric=...) or a "
                          ".meta.json sidecar stating \"system\" and \"interconnect\"";
  if (m.stated_system.empty())
    throw InputError(m.source, "a " + std::to_string(m.num_nodes) + "-host run whose log does not say which system and "
                               "network it ran on, so no topology is certain; " + how);
  if (only_for && !contains(lower(m.stated_system), only_for))
    throw InputError(m.source, "the rule '" + s.rule + "' describes " + only_for + " nodes, but the sidecar's system is '" +
                                   text_excerpt(m.stated_system) + "'; " + how);
}

std::string fmt_gbps_param(double gbps) {
  char b[32];
  std::snprintf(b, sizeof b, "%gGbps", gbps);
  return b;
}

void finish_mapping(SystemMapping& s, const Measurement& m) {
  if (m.num_nodes < 1)
    throw InputError(m.source, "the number of hosts is unknown (no rank lines); use the log's .meta.json sidecar");
  if (m.nranks % m.num_nodes != 0)
    throw InputError(m.source, std::to_string(m.nranks) + " ranks do not spread evenly over " +
                                   std::to_string(m.num_nodes) + " hosts");
  s.ranks_per_host = m.nranks / m.num_nodes;
  if (m.num_nodes > 1) {
    std::map<std::string, std::string> p = s.params;
    // The scale-out fabric from the run's own description (validate/fabric_mapping.hpp), unless the user named it.
    if (!p.count("fabric") && m.format == "fabricsim-json-simulation" && m.interconnect.empty() && m.nic.empty()) {
      // A fabricsim simulation's own results: superpod's default fabric (its JSON does not carry the fabric).
      p["fabric"] = "infiniband";
      s.rule += ", fabricsim simulation: superpod's default fabric";
    } else if (!p.count("fabric")) {
      const FabricDescription fd = describe_fabric(m.source, m.interconnect, m.nic, s.ranks_per_host);
      p["fabric"] = fd.fabric;
      p["nics_per_node"] = std::to_string(fd.nics_per_node);
      p["nic_bandwidth"] = fmt_gbps_param(fd.nic_gbps);
      // SHARP named in the description: the superpod's switches reduce and NCCL may choose CollNet.
      if (fd.sharp) p["sharp"] = "true";
      s.rule += ", fabric " + fd.rule;
      // The described NICs serve the GPUs the run used: a run of 4 ranks per host with 2 NICs per host (ALCF
      // Polaris: 4 A100 and 2 Slingshot NICs per node) is a 4-GPU server with one NIC per two GPUs, not the
      // first 4 GPUs of an 8-GPU DGX A100 with its 2 NICs, which leaves GPUs 0-3 on the first NIC alone.
      if (!p.count("gpus_per_node") && fd.nics_per_node <= s.ranks_per_host)
        p["gpus_per_node"] = std::to_string(s.ranks_per_host);
    } else if (p.count("nics_per_node")) {
      // The user's own NIC count (--topology ... --param nics_per_node=16): ports beyond one per GPU merge as
      // the sidecar path merges them (merge_nic_ports, NCCL's NIC port merging), at the given or the fabric's
      // line rate.
      int count = static_cast<int>(parse_int(p.at("nics_per_node"), "--param nics_per_node"));
      const int given = count;
      const bool several = s.ranks_per_host > 0 && count > s.ranks_per_host && count % s.ranks_per_host == 0;
      double gbps = 0;
      if (p.count("nic_bandwidth")) gbps = parse_bandwidth(p.at("nic_bandwidth"), "--param nic_bandwidth") * 8 / 1e9;
      else if (several && p.at("fabric") != "infiniband")
        gbps = topo::fabric(p.at("fabric"), "--param fabric").nic_Bps * 8 / 1e9;
      if (gbps <= 0 && several)
        throw InputError("--param nics_per_node", std::to_string(count) + " NIC ports for " +
                                                      std::to_string(s.ranks_per_host) + " GPUs per host need " +
                                                      "--param nic_bandwidth (fabric " + p.at("fabric") +
                                                      " has no line rate of its own) to merge into one NIC per GPU");
      if (merge_nic_ports(count, gbps, s.ranks_per_host)) {
        p["nics_per_node"] = std::to_string(count);
        p["nic_bandwidth"] = fmt_gbps_param(gbps);
        s.rule += ", " + std::to_string(given) + " NIC ports per host -> " + std::to_string(count) + "x " +
                  fmt_gbps_param(gbps) + " (ports of one GPU merged, as NCCL does)";
      }
    }
    // CollNet only where the superpod has SHARP (from the description, or the user's --param sharp=true), as NCCL
    // runs it only with the SHARP plugin.
    s.allow_collnet = s.allow_collnet || (p.count("sharp") && p.at("sharp") == "true");
    p["node"] = s.preset;
    p["nodes"] = std::to_string(m.num_nodes);
    s.params = p;
    s.preset = "superpod";
    s.rule += ", " + std::to_string(m.num_nodes) + " hosts -> superpod";
  }
}

}  // namespace

SystemMapping map_system(const Measurement& m) {
  const std::string g = lower(m.gpu_model);
  SystemMapping s;
  const char* only_for = nullptr;  // a rule describing one site's nodes
  if (contains(g, "a100") && contains(g, "40gb")) {
    // ABCI 2.0 A node: 8x A100-SXM4-40GB on NVSwitch, 4x InfiniBand HDR per node (abci_* .meta.json "nic").
    s.preset = "dgx-a100";
    s.params = {{"gpu", "a100-40gb"}, {"nics_per_node", "4"}};
    s.family = "a100";
    s.rule = "A100-SXM4-40GB -> dgx-a100 gpu=a100-40gb nics_per_node=4 (ABCI A node)";
    // The server is a DGX A100 40GB anywhere; across hosts the NIC count and speed come from the run's own
    // fabric description (finish_mapping), so this rule is not limited to ABCI (the V100 one below is: its
    // 4-GPU NVLink mesh is ABCI's node).
  } else if (contains(g, "a100")) {
    s.preset = "dgx-a100";
    s.family = "a100";
    s.rule = "A100 -> dgx-a100";
  } else if (contains(g, "h100") || contains(g, "h200")) {
    s.preset = "dgx-h100";
    if (contains(g, "h200")) s.params = {{"gpu", "h200"}};
    s.family = "h100";
    s.rule = "H100 -> dgx-h100";
  } else if (contains(g, "gb200")) {
    // "NVIDIA GB200" contains "b200": without this rule a GB200 log would be mapped to an 8-GPU DGX B200. Its
    // rack (MNNVL across 18 trays) is not a server preset; no GB200 log is in the validated data.
    throw InputError(m.source, "no automatic topology mapping for GPU '" + m.gpu_model +
                                   "' (a GB200 NVL72 rack is not a server); pass --topology superpod "
                                   "--param node=gb200-nvl72 --param nodes=N");
  } else if (contains(g, "b200")) {
    s.preset = "dgx-b200";
    s.family = "b200";
    s.rule = "B200 -> dgx-b200";
  } else if (contains(g, "v100")) {
    // ABCI V node: 4x V100 SXM2 and 2 EDR 100 Gb/s ports per node (abci_*vnode* .meta.json "nic"). Its four
    // GPUs are fully connected by NVLink2 (6 links per GPU, 25 GB/s per direction each:
    // /work/shared/data/hardware/hardware_specs.json "V100 SXM2"); NCCL runs several rings over all six
    // links. No preset has a 4-GPU full mesh, and dgx1-v100's cube-mesh (GPUs 0-3 of it have single-link
    // pairs) is a different wiring, so the node is approximated by a 4-GPU NVSwitch crossbar with the same
    // per-GPU NVLink total (6 x 25 = 150 GB/s per direction). docs/validation.md discusses the error.
    s.preset = "dgx-a100";
    s.params = {{"gpu", "v100"}, {"gpus_per_node", "4"}, {"nvlink_bandwidth", "150GB/s"},
                {"nics_per_node", "2"}, {"nic_bandwidth", "100Gbps"}};
    s.family = "v100";
    s.rule = "V100 -> dgx-a100 gpu=v100 gpus_per_node=4 nvlink_bandwidth=150GB/s nics_per_node=2 "
             "nic_bandwidth=100Gbps (ABCI V node, 4-GPU NVLink2 mesh as a crossbar)";
    only_for = "abci";
  } else {
    throw InputError(m.source, "no topology mapping for GPU '" + m.gpu_model +
                                   "' (known: A100, H100/H200, B200, V100); pass --topology");
  }
  check_multi_host(s, m, only_for);
  finish_mapping(s, m);
  return s;
}

SystemMapping map_system(const Measurement& m, const std::string& preset,
                         const std::map<std::string, std::string>& params) {
  if (preset.empty()) return map_system(m);
  SystemMapping s;
  s.preset = preset;
  s.params = params;
  SystemMapping guess;
  try {
    guess = map_system(m);
  } catch (const InputError&) {
  }
  s.family = guess.family;
  s.rule = "--topology " + preset;
  finish_mapping(s, m);
  return s;
}

namespace {

// Algorithms the measured NCCL had (the tuner's choice is restricted to them when the log does not pin one):
//  - hierarchical is fabricsim's own two-level all_reduce; no NCCL release has it, so a measured run is
//    never predicted with it. (It used to stand in for NCCL's multi-node rings and trees, which were too slow
//    on hosts with fewer NICs than GPUs until rings and tree heads followed NCCL's one-NIC-per-channel
//    paths; leave-one-out with it allowed: >= 1 MiB median 9.4 %, p90 41.5 %; without it: 5.9 %, 46.0 %,
//    docs/validation.md);
//  - CollNet needs the SHARP plugin (SystemMapping::allow_collnet);
//  - NVLS appeared in NCCL 2.17 and PAT in NCCL 2.23 (NVIDIA NCCL release notes), so older logs
//    (ABCI's NCCL 2.8.4) cannot have used them.
bool nccl_has_algorithm(const SystemMapping& map, const std::string& nccl_version, models::Algorithm a) {
  const int v = models::nccl_version_code(nccl_version);
  switch (a) {
    case models::Algorithm::Hierarchical: return false;
    case models::Algorithm::CollNet: return map.allow_collnet;
    case models::Algorithm::Nvls: return v < 0 || v >= 217;
    // NCCL_ALGO_NVLS_TREE first appears in NCCL 2.18 (src/include/devcomm.h at v2.18.1-1; absent at v2.17.1-1).
    case models::Algorithm::NvlsTree: return v < 0 || v >= 218;
    case models::Algorithm::Pat: return v < 0 || v >= 223;
    default: return true;
  }
}

// fabricsim's algorithm for an NCCL algorithm name as NCCL logs it (lower-cased: "ring", "tree", "nvls",
// "nvls_tree", "pat", "collnet_direct"); nullopt for the one fabricsim does not model (collnet_chain), which the
// tuner then replaces.
std::optional<models::Algorithm> modelled_nccl_algorithm(const std::string& nccl_name) {
  models::Algorithm a;
  if (!models::parse_algorithm(nccl_name == "collnet_direct" ? "collnet" : nccl_name, a)) return std::nullopt;
  return a;
}

}  // namespace

models::NcclChannelEnv nccl_channel_env(const std::map<std::string, std::string>& env, const std::string& where) {
  models::NcclChannelEnv out;
  auto get = [&](const char* name, int& field) {
    auto it = env.find(name);
    if (it == env.end()) return;
    std::size_t used = 0;
    long v = 0;
    try {
      v = std::stol(it->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != it->second.size())
      throw InputError(where, std::string(name) + "=" + it->second + ": expected an integer channel count");
    // NCCL ignores NCCL_MIN_CTAS / NCCL_MAX_CTAS <= 0 ("too low, leaving it", src/init.cc at v2.26.2-1) and a
    // negative NCCL_MIN_NCHANNELS (src/graph/connect.cc ncclMinNchannels); NCCL_MAX_NCHANNELS < 1 becomes 1
    // (ncclMaxNchannels).
    if (std::string(name) == "NCCL_MAX_NCHANNELS") field = static_cast<int>(std::clamp(v, 1L, 1L << 20));
    else field = v > 0 ? static_cast<int>(std::min(v, 1L << 20)) : 0;
  };
  get("NCCL_MIN_NCHANNELS", out.min_nchannels);
  get("NCCL_MAX_NCHANNELS", out.max_nchannels);
  get("NCCL_MIN_CTAS", out.min_ctas);
  get("NCCL_MAX_CTAS", out.max_ctas);
  return out;
}

struct SimSystem::Impl {
  models::System sys;
  models::CollectiveSpec base;
  std::string nccl_version;
  // NCCL_NVLS_ENABLE=0 in the run's environment: NCCL had no NVLS or NVLS_TREE (src/transport/nvls.cc,
  // ncclNvlsInit leaves nvlsSupport 0 when the parameter is 0, and the tuner then skips both).
  bool nvls_disabled = false;
  int gpus_per_thread = 0;
  int iters = 0;  // the measurement loop's back-to-back calls (nccl-tests -n; 20, its default, when unknown)
  // Whose loop time the measurement reports: nccl-tests prints rank 0's (src/common.cu, only process 0
  // prints), fabricsim-nccl-bench the slowest rank's (validate/nccl_bench time_op).
  bool slowest_rank = false;
  bool single_call = false;  // the measurement is one call per size, not a loop
  std::map<std::uint64_t, NcclChoice> nccl_choices;  // Measurement::nccl_choices
  explicit Impl(models::System s) : sys(std::move(s)) {}
};

SimSystem::SimSystem(const SystemMapping& map, const Measurement& m) : map_(map) {
  // The System every command builds (models/system.hpp); the calibration is the caller's per simulate() call
  // (the fitter tries many), the one named here is only the System's default.
  models::SystemSpec spec;
  spec.topology = map.preset;
  spec.params = map.params;
  spec.calibration = "default";
  impl_ = std::make_unique<Impl>(models::System(spec));
  const auto& t = impl_->sys.topology();
  // Communicator: the first ranks_per_host GPUs of each host, host-major like nccl-tests' rank order.
  std::map<int, std::vector<topo::NodeId>> by_host;
  for (topo::NodeId gid : t.gpus()) by_host[t.node(gid).host].push_back(gid);
  const int hosts = std::max(1, m.num_nodes);
  if (static_cast<int>(by_host.size()) < hosts)
    throw InputError(m.source, "topology '" + map.preset + "' has " + std::to_string(by_host.size()) +
                                   " hosts, the run used " + std::to_string(hosts));
  int h = 0;
  for (const auto& [host, gpus] : by_host) {
    if (h++ >= hosts) break;
    if (static_cast<int>(gpus.size()) < map.ranks_per_host)
      throw InputError(m.source, "topology '" + map.preset + "' has " + std::to_string(gpus.size()) +
                                     " GPUs per host, the run used " + std::to_string(map.ranks_per_host));
    for (int i = 0; i < map.ranks_per_host; ++i) impl_->base.communicator.push_back(gpus[i]);
  }
  if (!models::parse_op(m.op, impl_->base.op))
    throw InputError(m.source, "collective '" + m.op + "' is not simulated by fabricsim");
  if (!m.algorithm.empty()) {
    models::Algorithm a;
    if (!models::parse_algorithm(lower(m.algorithm), a))
      throw InputError(m.source, "unknown NCCL algorithm '" + m.algorithm + "'");
    impl_->base.algorithm = a;
  }
  if (!m.protocol.empty()) {
    models::Protocol p;
    if (!models::parse_protocol(lower(m.protocol), p))
      throw InputError(m.source, "unknown NCCL protocol '" + m.protocol + "'");
    impl_->base.protocol = p;
  }
  impl_->base.where = m.source;
  impl_->nccl_version = m.nccl_version;
  impl_->gpus_per_thread = m.gpus_per_thread;
  impl_->iters = m.loop_iters > 0 ? m.loop_iters : kNcclTestsDefaultIters;
  impl_->slowest_rank = m.slowest_rank_time;
  // A `fabricsim coll --json` file is one call per size unless it simulated the loop (--iters).
  impl_->single_call = m.format == "fabricsim-json-simulation" && m.loop_iters == 0;
  impl_->nccl_choices = m.nccl_choices;
  if (auto e = m.env.find("NCCL_NVLS_ENABLE"); e != m.env.end()) impl_->nvls_disabled = e->second == "0";
  impl_->base.nccl_env = nccl_channel_env(m.env, m.source);
}

SimSystem::~SimSystem() = default;

int SimSystem::nranks() const { return static_cast<int>(impl_->base.communicator.size()); }

std::vector<std::string> SimSystem::gpu_models() const {
  std::set<std::string> s;
  for (auto g : impl_->base.communicator) s.insert(impl_->sys.topology().node(g).model);
  return {s.begin(), s.end()};
}

namespace {
double nccl_nvls_tree_net_latency_ratio(int nccl_version) {
  // NVIDIA/nccl src/graph/tuning.cc, hwLat[NCCL_HW_NET][NCCL_ALGO_NVLS_TREE][NCCL_PROTO_SIMPLE] (per tree level
  // and direction), read at every release tag: 19 us from v2.18.1-1 to v2.18.6-1, 14 us from v2.19.1-1 to
  // v2.28.7-1, 20.9 us from v2.28.9-1 and at 5067397c (the current value, models/calibration.cpp).
  // nccl_version_code drops the patch release, so 2.28 (and an unknown release) keeps the current value.
  constexpr double kCurrent = 20.9;
  if (nccl_version == 218) return 19.0 / kCurrent;
  if (nccl_version >= 219 && nccl_version < 228) return 14.0 / kCurrent;
  return 1.0;
}
}  // namespace

SimPoint SimSystem::simulate(std::uint64_t size_bytes, const models::Calibration& calib_all) const {
  // The measured NCCL's tuning table (models::NcclEra) when the calibration has one for its version.
  models::Calibration with_era;
  if (!calib_all.nccl_eras.empty()) with_era = models::for_nccl_version(calib_all, impl_->nccl_version);
  const models::Calibration& calib_era = calib_all.nccl_eras.empty() ? calib_all : with_era;
  // NCCL's NVLS_TREE network latency changed between releases: the calibration holds the current one
  // (models/calibration.cpp), scaled here by NCCL's own ratio for the log's release, so that the tuner prices
  // NVLS_TREE as the NCCL that ran priced it, and the schedule charges that latency.
  const double nvls_tree_scale = nccl_nvls_tree_net_latency_ratio(models::nccl_version_code(impl_->nccl_version));
  const bool rescale = nvls_tree_scale != 1.0 && calib_era.has(models::Algorithm::NvlsTree, models::Protocol::Simple);
  models::Calibration with_nvls_tree;
  if (rescale) {
    with_nvls_tree = calib_era;
    with_nvls_tree.algo[{models::Algorithm::NvlsTree, models::Protocol::Simple}].net_step_latency_s *= nvls_tree_scale;
  }
  const models::Calibration& calib = rescale ? with_nvls_tree : calib_era;
  models::CollectiveSpec spec = impl_->base;
  // A calibration that prices older NCCL releases (it carries NCCL eras: `--nccl-eras`, `--split-fit`) prices a
  // run of such a release with that release's tuner rules too (models::nccl_tuner_rules); otherwise every run
  // gets the current rules, as the current latency table. Measured on the ABCI logs (NCCL 2.8.4) with the
  // built-in defaults, the older rules take Ring LL across hosts where NCCL 2.8.4 does, which the lockstep ring
  // schedule prices 2x slow, and through the shared fit they moved the single-host held-out figures
  // (docs/validation.md "Multi-node logs", known limits).
  if (models::nccl_era_index(calib_all, models::nccl_version_code(impl_->nccl_version)) >= 0)
    spec.nccl_version = models::nccl_version_code(impl_->nccl_version);
  spec.bytes = size_bytes;
  spec.where = impl_->base.where + " size " + std::to_string(size_bytes);
  // NCCL's own choice for this size, when the log recorded it (NCCL_DEBUG_SUBSYS=TUNING) and fabricsim models
  // that algorithm: simulate what NCCL ran rather than what our tuner would pick.
  const NcclChoice* logged = nullptr;
  if (auto it = impl_->nccl_choices.find(size_bytes); it != impl_->nccl_choices.end()) {
    const auto a = modelled_nccl_algorithm(it->second.algorithm);
    models::Protocol pr;
    if (a && models::parse_protocol(it->second.protocol, pr)) {
      logged = &it->second;
      spec.algorithm = *a;
      spec.protocol = pr;
    }
  }
  sim::CollectiveCall call;
  // PXN (cross-rail traffic through the peer GPU on the destination's rail) appeared in NCCL 2.12 (NVIDIA NCCL
  // 2.12 release notes) and is on by default since; older runs (ABCI's 2.8.4) routed without it.
  const int version = models::nccl_version_code(impl_->nccl_version);
  if (version >= 0 && version < 212) call.pxn = false;
  call.spec = spec;
  topo::Routing& routing = sim::call_routing(impl_->sys, call);
  // A logged algorithm that does not apply to the simulated communicator (NVLS_TREE named for a one-host
  // all_gather) is replaced by the tuner's choice, as an unmodelled one is.
  if (logged && !models::why_not_applicable(spec, *spec.algorithm, impl_->sys.topology(), routing).empty()) {
    logged = nullptr;
    spec.algorithm = impl_->base.algorithm;
    spec.protocol = impl_->base.protocol;
  }
  models::TunerChoice tc = models::tune(spec, impl_->sys.topology(), routing, calib);
  spec.algorithm = tc.algorithm;
  spec.protocol = tc.protocol;
  auto had = [&](models::Algorithm a) {
    if (impl_->nvls_disabled && (a == models::Algorithm::Nvls || a == models::Algorithm::NvlsTree)) return false;
    return nccl_has_algorithm(map_, impl_->nccl_version, a);
  };
  if (!logged && !had(tc.algorithm)) {
    // Fastest predicted candidate that the measured NCCL had (see nccl_has_algorithm; NCCL_NVLS_ENABLE=0).
    const models::Candidate* best = nullptr;
    for (const auto& c : tc.candidates)
      if (had(c.algorithm) &&
          (!best || c.predicted_s < best->predicted_s))
        best = &c;
    if (!best)
      throw InputError(spec.where, std::string("only ") + models::to_string(tc.algorithm) +
                                       " applies, which the measured NCCL (" + impl_->nccl_version + ") lacks");
    spec.algorithm = best->algorithm;
    spec.protocol = best->protocol;
  }
  // The one price of a call (sim/engine/collective_time.hpp), as `fabricsim coll` and the replay use it. Rooted
  // pipelines overlap from one call to the next in the measurement loop, so what rank 0 measures is their
  // period, not one call's latency (models/benchmark_loop.hpp); the loop's host launch floor (nccl-tests -g:
  // one thread launching a kernel on each GPU) grows with the channels the call runs on.
  call.spec = spec;
  call.iters = impl_->single_call ? 0 : impl_->iters;
  call.slowest_rank = impl_->slowest_rank;
  call.gpus_per_thread = impl_->gpus_per_thread;
  if (logged) call.floor_channels = logged->channels;
  const sim::CollectiveTime ct = sim::time_collective(impl_->sys, call, calib);
  SimPoint p;
  p.size_bytes = size_bytes;
  p.time_s = ct.time_s;
  p.at_host_floor = ct.at_host_floor;
  p.algorithm = ct.algorithm;
  p.protocol = ct.protocol;
  p.from_log = logged != nullptr;
  return p;
}

const models::System& SimSystem::system() const { return impl_->sys; }

NcclEnvEffects nccl_env_effects(const std::map<std::string, std::string>& env) {
  NcclEnvEffects out;
  for (const auto& [k, v] : env) {
    const std::string kv = k + "=" + v;
    if (k == "NCCL_ALGO" || k == "NCCL_PROTO" || (k == "NCCL_NVLS_ENABLE" && v == "0") || k == "NCCL_MIN_CTAS" ||
        k == "NCCL_MAX_CTAS" || k == "NCCL_MIN_NCHANNELS" || k == "NCCL_MAX_NCHANNELS") {
      // The channel settings (nccl_channel_env) set the channels each Ring/Tree and NVLS call runs on as NCCL's
      // do (models/tuner.hpp nccl_channels_with_env, nccl_nvls_channels_with_env).
      out.honoured.push_back(kv);
    } else if (k.rfind("NCCL_DEBUG", 0) == 0 || k == "NCCL_SOCKET_IFNAME" || k == "NCCL_IB_HCA" ||
               k == "NCCL_IB_GID_INDEX" || k == "NCCL_TOPO_FILE" || (k == "NCCL_IB_DISABLE" && v == "0")) {
      // Logging, or which devices NCCL opens: the simulated machine comes from the sidecar's description.
      out.no_effect.push_back(kv);
    } else if (k == "NCCL_IB_QPS_PER_CONNECTION") {
      // NVIDIA/nccl src/transport/net_ib.cc: N queue pairs per connection and NIC; from 2.20 (NCCL_IB_SPLIT_DATA_ON_QPS
      // 0) each message goes whole on the next QP in turn, before it was split across them. Neither changes a
      // bandwidth in NCCL; what a second QP changes is how the fabric's per-flow routing spreads the traffic.
      out.not_modelled.push_back(kv + ": queue pairs per connection; fabricsim models a NIC's bandwidth and routes a "
                                      "connection's flow on one path, not per queue pair");
    } else {
      out.not_modelled.push_back(kv + ": not modelled");
    }
  }
  return out;
}

}  // namespace fabricsim::validate
