#pragma once
// Building blocks of the presets (topologies/presets.cpp), exposed for tests and for composing custom
// clusters in code. Not a stable API.
#include <array>
#include <map>
#include <string>
#include <vector>

#include "topologies/fabrics.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::topo {

// One server: GPUs, NVSwitches, a PCIe tree (PCIe switches under CPU sockets) and NICs.
struct HostSpec {
  std::string preset;
  std::string gpu;                    // model name
  int gpus = 8;
  int nvswitches = 0;
  std::vector<int> links_per_switch;  // NVLinks from each GPU to NVSwitch j
  double nvlink_link_Bps = 0;         // one NVLink, per direction
  bool nvls = false;
  std::string nvswitch_model;
  bool cube_mesh = false;             // DGX-1 hybrid cube-mesh (8 GPUs, no NVSwitch)
  bool full_mesh = false;             // every GPU pair joined by one direct link (MI300X Infinity Fabric)
  int nics = 0;
  double nic_Bps = 0;                 // per NIC, per direction
  std::string nic_model;
  double pcie_Bps = 0;                // PCIe x16 per direction
  int pcie_switches = 0;
  int cpus = 0;
  double host_memory_bytes = 0;       // the server's host memory, split evenly over its CPUs (0 = not given)
};

struct HostNodes {
  std::vector<NodeId> gpus, nvswitches, cpus, pcie_switches, nics;
};

std::vector<std::string> host_presets();
HostSpec host_spec(const std::string& preset);  // InputError for unknown names
const std::vector<std::array<int, 3>>& cube_mesh_edges();
// Adds server `host` (ids "n<host>.gpu<i>", ...); GPUs get nvlink_domain `domain` when they have NVLink.
HostNodes add_host(TopologyBuilder& b, const HostSpec& s, int host, int domain);
void apply_host_params(HostSpec& s, const std::map<std::string, std::string>& given, const std::string& preset,
                       const std::vector<std::string>& valid);
int host_gpu_links(const HostSpec& s);      // NVLink / Infinity Fabric links per GPU
double host_nvlink_Bps(const HostSpec& s);  // per GPU per direction

// Fat tree, rail-optimised or not. Leaves have `down` endpoint ports and `up` uplinks (down:up =
// oversubscription, at most (radix-1):1); rail r's endpoints fill rail r's leaves in order. A non-rail
// (host-based) tree has one "rail": all NICs, host by host, `host_block` per host, and a leaf takes whole
// hosts (down rounded down to a multiple of host_block, up = down/oversubscription) so all NICs of a host
// share a leaf; its leaves have rail -1.
// 2 tiers: every leaf connects to every spine with `leaf_spine_bundle` links.
// 3 tiers: pods of `leaves_per_pod` leaves (all rails of consecutive endpoint groups) each with
// `spines_per_pod` spines (one link from every leaf of the pod); spine s of every pod connects to the
// `cores_per_group` cores of core group s with `spine_core_bundle` links each.
struct FatTreeShape {
  int tiers = 2, rails = 1, down = 0, up = 0, leaves_per_rail = 0;
  bool rail_optimized = true;
  int host_block = 0;  // non-rail: endpoints per host
  int spines = 0, leaf_spine_bundle = 1;
  int pods = 1, leaves_per_pod = 0, spines_per_pod = 0, cores_per_group = 0, spine_core_bundle = 1;
};
// tiers = 0 picks 2 if it fits, else 3. host_block > 0: the non-rail tree (rails must be 1). InputError if the
// radix cannot build it (an oversubscription outside [1, radix-1] included).
FatTreeShape plan_fat_tree(int endpoints_per_rail, int rails, int radix, double oversubscription, int tiers,
                           int host_block = 0);
struct FatTreeNodes {
  std::vector<NodeId> leaves, spines, cores;
};
// Links get the fabric's latencies: endpoint-to-leaf fabric.nic_latency_s, switch-to-switch
// fabric.switch_latency_s; switches are IB (with SHARP when fabric.sharp) or Ethernet by fabric.ethernet.
FatTreeNodes add_fat_tree(TopologyBuilder& b, const std::vector<std::vector<NodeId>>& rails, const FatTreeShape& f,
                          double port_Bps, const FabricSpec& fabric);

}  // namespace fabricsim::topo
