// Generated topology presets: single servers (dgx-a100, dgx-h100, dgx-h200, dgx-b200, dgx-b300, dgx1-v100,
// pcie-server, mi300x-node), NVLink-domain systems (gb200-nvl72, gb300-nvl72, nvlink-switch-system) and `superpod` (N of those joined by a
// rail-optimised or host-based InfiniBand/Ethernet fat tree).
//
// Sources. "HS" = /work/shared/data/hardware/hardware_specs.json (fabricsim's shared hardware facts; the
// entity/fact named). Values HS marks "secondary"/"NOT verified" are flagged UNVERIFIED here as well.
// Latencies are ESTIMATES TO BE CALIBRATED (no primary source was available); models/calibration
// overrides them for timing studies.
//
// Bandwidths are per direction in bytes/s. A bundle of `count` physical links is one Link whose
// bandwidth is count * per-link bandwidth.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <sstream>

#include "sim/base/did_you_mean.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "topologies/io.hpp"
#include "topologies/presets_internal.hpp"

namespace fabricsim::topo {

namespace {

// ---- Hardware constants ---------------------------------------------------------------------------
// NVLink per-link bandwidth, per direction.
// NVLink2 (V100): 25 GB/s per direction per link. HS "V100 SXM2 / NVLink bandwidth per link" (UNVERIFIED,
// secondary source).
constexpr double kNvlink2LinkBps = 25e9;
// NVLink3 (A100): 12 links x 25 GB/s per direction = 300 GB/s. HS "A100 SXM4 / NVLink links per GPU and
// per-link speed" (primary: nvidia-smi output) and "A100 SXM4 / NVLink aggregate per GPU" (600 GB/s bidir).
constexpr double kNvlink3LinkBps = 25e9;
// NVLink4 (H100/H200): 18 links, 900 GB/s bidirectional per GPU -> 25 GB/s per direction per link.
// HS "H100/H200 SXM / NVLink links per GPU" (primary) and "H100 SXM5 / NVLink aggregate per GPU" (primary).
constexpr double kNvlink4LinkBps = 25e9;
// NVLink5 (B200): 18 links, 1.8 TB/s bidirectional per GPU -> 50 GB/s per direction per link.
// HS "B200 / NVLink links per GPU" and "NVLink5 (Blackwell) / per-GPU NVLink bandwidth" (both UNVERIFIED,
// secondary sources).
constexpr double kNvlink5LinkBps = 50e9;
// PCIe x16 per direction. Gen3 16 GB/s: HS "V100 SXM2 / NVLink links per GPU" quote ("El ancho de banda del
// enlace PCIe es de 16 GB/s", UNVERIFIED). Gen4 32 GB/s and Gen5 64 GB/s (128 GB/s bidirectional): HS
// "PCIe Gen4 x16 / Gen5 x16 / nominal bandwidth" (UNVERIFIED, secondary).
constexpr double kPcie3Bps = 16e9;
constexpr double kPcie4Bps = 32e9;
constexpr double kPcie5Bps = 64e9;
// PCIe 6.0 x16: 64 GT/s x 16 lanes = 128 GB/s per direction (PCI-SIG PCIe 6.0 specification announcement);
// ConnectX-8 SuperNICs attach over gen6 (NVIDIA ConnectX-8 SuperNIC datasheet, UNVERIFIED in this session).
constexpr double kPcie6Bps = 128e9;
// CPU socket-to-socket interconnect (UPI/xGMI/QPI), per direction. ESTIMATE, not from a source: modelled
// as one PCIe-kind link of the server's PCIe x16 bandwidth. Only pairs that cross sockets over PCIe use it.
// InfiniBand HDR 200 Gb/s, NDR 400 Gb/s per port: HS "InfiniBand HDR / NDR / per-port line rate" (primary).
constexpr double kHdrBps = 200 * kGbps;
constexpr double kNdrBps = 400 * kGbps;
// InfiniBand EDR 100 Gb/s (DGX-1 V100 had 4 EDR NICs): not in HS; DGX-1 product literature, UNVERIFIED.
constexpr double kEdrBps = 100 * kGbps;
// 800 Gb/s per port (ConnectX-8 SuperNIC, DGX B300 / GB300 NVL72): NVIDIA DGX B300 datasheet ("8x OSFP ports
// serving 8x single-port NVIDIA ConnectX-8 VPI, up to 800Gb/s") and GB300 NVL72 datasheet; not in HS,
// UNVERIFIED in this session.
constexpr double kXdrBps = 800 * kGbps;
// AMD Infinity Fabric (xGMI) between MI300X GPUs: x16 links at 32 GT/s per lane, 64 GB/s per direction per link
// (128 GB/s bidirectional). The Linux amdgpu driver's xGMI speeds (drivers/gpu/drm/amd/amdgpu/amdgpu_xgmi.h,
// enum amdgpu_xgmi_link_speed: 16, 25, 32 GT) and its per-link figure (amdgpu_xgmi.c
// __amdgpu_xgmi_get_max_bandwidth: "unidirectional bandwidth" = speed x link width); AMD's MI300X product
// page lists "Peak Infinity Fabric Link Bandwidth 128 GB/s" (bidirectional; read through secondary summaries,
// UNVERIFIED in this session against the page itself).
constexpr double kXgmi4LinkBps = 64e9;
// The largest per-NIC bandwidth a preset parameter accepts (Params::bandwidth says why).
constexpr double kMaxNicBps = 100000 * kGbps;

// Host (CPU) memory per server or compute tray, in decimal units as the datasheets print them (the DIMMs' and
// LPDDR5X packages' binary capacities are a few per cent larger: 2 TB of 64 GB DIMMs is 2 TiB, so these are the
// lower reading). Capacity against which offloaded state is checked (workloads/scenario.cpp).
// DGX H100 / DGX H200: "2 TB of DDR5 system memory" -- NVIDIA DGX BasePOD reference architecture, Core Components,
// "NVIDIA DGX H200 and H100 Systems" (docs.nvidia.com/dgx-basepod/reference-architecture-infrastructure-foundation-
// enterprise-ai/latest/core-components.html).
constexpr double kDgxH100HostMemory = 2e12;
// DGX B200: "System memory (DIMM): 2 TB using 32 x DIMMs (upgradable to 4 TB)" -- NVIDIA DGX B200 User Guide,
// "Introduction to NVIDIA DGX B200 Systems", component table (docs.nvidia.com/dgx/dgxb200-user-guide/
// introduction-to-dgxb200.html). The shipped 2 TB; a 4 TB server is `--param host_memory=4TB`.
constexpr double kDgxB200HostMemory = 2e12;
// DGX A100 640 GB (8x A100 80 GB, the preset's GPU): 2 TB of system memory (the 320 GB system had 1 TB). Read in
// secondary summaries of the DGX A100 datasheet (pcnews.ru on NVIDIA's DGX A100 documentation, "up to 2 TB"),
// UNVERIFIED against the datasheet itself.
constexpr double kDgxA100HostMemory = 2e12;
// GB200: 480 GB of LPDDR5X per Grace CPU, one Grace per 2 B200 GPUs ("up to 480 GB LPDDR5X" per GB200 superchip;
// the GB200 NVL72's 36 Grace CPUs, about 17 TB), read through secondary sources (yobitel.com GB200 knowledge base,
// "1x Grace CPU at 72 Neoverse V2 cores with up to 480 GB LPDDR5X"), UNVERIFIED against NVIDIA's datasheet.
constexpr double kGraceGb200Memory = 480e9;
// Not given (no source found in this session; a run on them does not check host memory unless `host_memory` is
// given): DGX B300, GB300 NVL72, DGX-1 V100, pcie-server, mi300x-node.

// Latencies (seconds): ESTIMATES TO BE CALIBRATED.
constexpr double kNvlinkLatS = 150e-9;   // GPU<->NVSwitch or GPU<->GPU NVLink hop (estimate)
constexpr double kPcieLatS = 250e-9;     // one PCIe hop through a switch/root port (estimate)
constexpr double kCpuLinkLatS = 300e-9;  // socket-to-socket hop (estimate)
// InfiniBand / Ethernet link latencies: per fabric in topologies/fabrics.cpp.

const std::vector<std::string> kGpuModels = {"a100-40gb", "a100-80gb", "h100", "h200", "b200", "gb200", "b300", "gb300", "v100",
                                             "mi300x"};

// ---- Parameters -------------------------------------------------------------------------------------
class Params {
 public:
  Params(std::string preset, const std::map<std::string, std::string>& given,
         std::vector<std::string> valid)
      : preset_(std::move(preset)), given_(given), valid_(std::move(valid)) {
    for (const auto& [k, v] : given_) {
      if (std::find(valid_.begin(), valid_.end(), k) == valid_.end()) {
        std::string list;
        for (const auto& s : valid_) list += (list.empty() ? "" : ", ") + s;
        throw InputError("--param " + k, "a parameter of preset '" + preset_ + "'" + did_you_mean(k, valid_) +
                                             " (valid: " + (list.empty() ? "none" : list) + ")");
      }
    }
  }
  bool has(const std::string& k) const { return given_.count(k) > 0; }
  std::string str(const std::string& k, const std::string& dflt, const std::vector<std::string>& allowed) const {
    auto it = given_.find(k);
    if (it == given_.end()) return dflt;
    if (std::find(allowed.begin(), allowed.end(), it->second) == allowed.end()) {
      std::string list;
      for (const auto& s : allowed) list += (list.empty() ? "" : ", ") + s;
      throw InputError("--param " + k, "one of " + list + " (got '" + it->second + "')");
    }
    return it->second;
  }
  long long integer(const std::string& k, long long dflt, long long lo, long long hi) const {
    auto it = given_.find(k);
    if (it == given_.end()) return dflt;
    long long v = parse_int(it->second, "--param " + k);
    if (v < lo || v > hi)
      throw InputError("--param " + k, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                           "] for preset '" + preset_ + "' (got " + it->second + ")");
    return v;
  }
  double real(const std::string& k, double dflt, double lo) const {
    auto it = given_.find(k);
    if (it == given_.end()) return dflt;
    double v = parse_double(it->second, "--param " + k);
    if (!(v >= lo) || !std::isfinite(v))
      throw InputError("--param " + k, "a number >= " + std::to_string(lo) + " (got " + it->second + ")");
    return v;
  }
  // A size in bytes with its unit ("1TB", "512GiB"): a bare number would be bytes, surely not what a user means.
  double size(const std::string& k, double dflt) const {
    auto it = given_.find(k);
    if (it == given_.end()) return dflt;
    const std::string& v = it->second;
    if (!v.empty() && v.find_first_not_of("0123456789.eE+-") == std::string::npos)
      throw InputError("--param " + k + "=" + v, "a size needs its unit, e.g. \"" + v + "TB\" or \"" + v + "GiB\"");
    const double bytes = static_cast<double>(parse_size(v, "--param " + k));
    if (!(bytes > 0)) throw InputError("--param " + k + "=" + v, "a size > 0");
    return bytes;
  }
  double bandwidth(const std::string& k, double dflt) const {
    auto it = given_.find(k);
    if (it == given_.end()) return dflt;
    // A bare number would be bytes/s (topology files' convention): on a preset parameter "400" is surely not
    // 400 B/s, so the unit is required (issue 20).
    const std::string& v = it->second;
    if (!v.empty() && v.find_first_not_of("0123456789.eE+-") == std::string::npos)
      throw InputError("--param " + k + "=" + v, "a bandwidth needs its unit, e.g. \"" + v + "Gbps\" or \"" + v + "GB/s\"");
    const double Bps = parse_bandwidth(v, "--param " + k);
    // Per-NIC sanity bound, no datasheet needed: 100 Tb/s is 125x the fastest NIC port modelled here (800 Gb/s,
    // kXdrBps) and 50x a PCIe 7.0 x16 host link (2 Tb/s per direction), so a larger value is a unit slip
    // (Tbps or TB/s for Gbps), not a design point.
    if (k == "nic_bandwidth" && Bps > kMaxNicBps)
      throw InputError("--param " + k + "=" + v, "at most 100Tbps per NIC (the fastest NIC port today is 800Gbps; "
                                                 "did you mean Gbps?)");
    return Bps;
  }

 private:
  std::string preset_;
  const std::map<std::string, std::string>& given_;
  std::vector<std::string> valid_;
};

std::string fmt_num(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}

}  // namespace

// ---- Server (host) builders ---------------------------------------------------------------------------

namespace {
// The server presets, in `topo --list` order, with their one-line descriptions.
const std::pair<const char*, const char*> kServerPresets[] = {
    {"dgx-a100", "8x A100 SXM4, 12 NVLink3 links each to 6 NVSwitches, 8x HDR 200 Gb/s NICs, PCIe gen4"},
    {"dgx-h100", "8x H100 SXM5, 18 NVLink4 links (5/4/4/5) to 4 NVLS NVSwitches, 8x NDR 400 Gb/s NICs"},
    {"dgx-h200", "8x H200 SXM 141 GB, 18 NVLink4 links (5/4/4/5) to 4 NVLS NVSwitches, 8x NDR 400 Gb/s NICs"},
    {"dgx-b200", "8x B200, 18 NVLink5 links (9/9) to 2 NVSwitches, 8x 400 Gb/s NICs"},
    {"dgx-b300", "8x B300 288 GB, 18 NVLink5 links (9/9) to 2 NVSwitches, 8x ConnectX-8 800 Gb/s NICs (PCIe gen6)"},
    {"dgx1-v100", "8x V100 SXM2 in the NVLink2 hybrid cube-mesh (no NVSwitch), 4x EDR NICs"},
    {"pcie-server", "8 GPUs behind 4 PCIe gen4 switches, no NVLink, 4x HDR NICs"},
    {"mi300x-node", "8x AMD MI300X fully connected by Infinity Fabric (7 links each, 64 GB/s per direction per link), "
                    "no switch, 8x 400 Gb/s NICs, PCIe gen5"}};
}  // namespace

std::vector<std::string> host_presets() {
  std::vector<std::string> v;
  for (const auto& [name, description] : kServerPresets) v.push_back(name);
  return v;
}

HostSpec host_spec(const std::string& preset) {
  HostSpec s;
  s.preset = preset;
  if (preset == "dgx-a100") {
    // HS "DGX A100 / GPUs and NICs" (primary, MLPerf v2.0 system JSON): 8x A100-SXM4-80GB, 8x CX-6 HDR
    // 200 Gb/s compute NICs, 2 CPUs. 6 NVSwitches: HS "DGX A100 / number of NVSwitch chips" (UNVERIFIED).
    // 12 NVLink3 links per GPU, 2 to each NVSwitch: HS "A100 SXM4 / NVLink links per GPU ..." (primary).
    s.gpu = "a100-80gb";
    s.gpus = 8;
    s.nvswitches = 6;
    s.links_per_switch = {2, 2, 2, 2, 2, 2};
    s.nvlink_link_Bps = kNvlink3LinkBps;
    s.nvls = false;  // HS "A100 / NVLS support": not supported (primary)
    s.nvswitch_model = "nvswitch-gen2";
    s.nics = 8;
    s.nic_Bps = kHdrBps;
    s.nic_model = "connectx-6-hdr";
    s.pcie_Bps = kPcie4Bps;  // HS "A100 SXM4 / PCIe": gen4
    // PCIe tree: 4 PCIe switches with 2 GPUs and 2 NICs each, 2 per CPU socket. Modelling choice matching
    // the DGX A100 system architecture whitepaper's block diagram (UNVERIFIED in this session).
    s.pcie_switches = 4;
    s.cpus = 2;
    s.host_memory_bytes = kDgxA100HostMemory;
  } else if (preset == "dgx-h100" || preset == "dgx-h200") {
    // HS "DGX H100 (NVIDIA Eos) / GPUs and NICs" (primary): 8x H100-SXM5-80GB, 8x CX-7 NDR 400 Gb/s, 2 CPUs.
    // 4 NVSwitches: HS "DGX H100 / number of NVSwitch chips" (UNVERIFIED). 18 NVLink4 links per GPU
    // (HS "H100/H200 SXM / NVLink links per GPU", primary) split 5/4/4/5 over the 4 NVSwitches, as in the
    // DGX H100 user guide's description of the board (UNVERIFIED in this session).
    // DGX H200: the same board with 8x H200 SXM 141 GB (NVIDIA DGX H200 datasheet: 4 NVSwitches, 900 GB/s
    // NVLink per GPU, 8x ConnectX-7 400 Gb/s; HS "H100/H200 SXM / NVLink links per GPU", primary).
    s.gpu = preset == "dgx-h200" ? "h200" : "h100";
    s.gpus = 8;
    s.nvswitches = 4;
    s.links_per_switch = {5, 4, 4, 5};
    s.nvlink_link_Bps = kNvlink4LinkBps;
    s.nvls = true;  // NVLink SHARP: HS "A100 / NVLS support" ("NVLS was a new feature of H100")
    s.nvswitch_model = "nvswitch-gen3";
    s.nics = 8;
    s.nic_Bps = kNdrBps;
    s.nic_model = "connectx-7-ndr";
    s.pcie_Bps = kPcie5Bps;  // HS "H100 SXM5 / PCIe": gen5
    s.pcie_switches = 4;     // modelling choice: 2 GPUs + 2 NICs per PCIe switch (UNVERIFIED)
    s.cpus = 2;
    s.host_memory_bytes = kDgxH100HostMemory;
  } else if (preset == "dgx-b200" || preset == "dgx-b300") {
    // 8x B200 with 18 NVLink5 links each (HS "B200 / NVLink links per GPU", UNVERIFIED). 2 NVSwitch chips
    // (fifth generation, 72 ports each: 8 GPUs x 18 links = 144 = 2 x 72) with 9 links per GPU to each:
    // DGX B200 user guide, UNVERIFIED in this session. 8x 400 Gb/s NICs (issue 2 / DGX B200 datasheet,
    // UNVERIFIED; line rate as HS "InfiniBand HDR / NDR").
    s.gpu = "b200";
    s.gpus = 8;
    s.nvswitches = 2;
    s.links_per_switch = {9, 9};
    s.nvlink_link_Bps = kNvlink5LinkBps;
    s.nvls = true;
    s.nvswitch_model = "nvswitch-gen4";
    s.nics = 8;
    s.nic_Bps = kNdrBps;
    s.nic_model = "connectx-7-ndr";
    s.pcie_Bps = kPcie5Bps;
    if (preset == "dgx-b300") {
      // DGX B300: 8x B300 (Blackwell Ultra) on the same NVLink5 board (1.8 TB/s per GPU, 2 NVSwitch chips) with
      // 8x ConnectX-8 800 Gb/s NICs on PCIe gen6: NVIDIA DGX B300 datasheet (UNVERIFIED in this session).
      s.gpu = "b300";
      s.nic_Bps = kXdrBps;
      s.nic_model = "connectx-8";
      s.pcie_Bps = kPcie6Bps;
    }
    s.pcie_switches = 4;  // modelling choice (UNVERIFIED)
    s.cpus = 2;
    if (preset == "dgx-b200") s.host_memory_bytes = kDgxB200HostMemory;
  } else if (preset == "dgx1-v100") {
    // 8x V100 SXM2, hybrid cube-mesh of NVLink2, 6 links per GPU, no NVSwitch: HS "V100 SXM2 / NVLink links
    // per GPU" and "V100 SXM2 (DGX-1 style 8-GPU) / topology" (UNVERIFIED, secondary). 4 PCIe gen3 switches
    // with 2 GPUs and 1 EDR NIC each, 2 CPUs: DGX-1 product literature (UNVERIFIED).
    s.gpu = "v100";
    s.gpus = 8;
    s.nvswitches = 0;
    s.nvlink_link_Bps = kNvlink2LinkBps;
    s.nics = 4;
    s.nic_Bps = kEdrBps;
    s.nic_model = "connectx-4-edr";
    s.pcie_Bps = kPcie3Bps;
    s.pcie_switches = 4;
    s.cpus = 2;
    s.cube_mesh = true;
  } else if (preset == "pcie-server") {
    // A generic 8-GPU PCIe server without NVLink: 4 PCIe gen4 switches with 2 GPUs and 1 HDR NIC each, 2 CPU
    // sockets. Illustrative configuration (not a specific product); gen4 x16 from HS "PCIe Gen4 x16".
    s.gpu = "a100-80gb";
    s.gpus = 8;
    s.nvswitches = 0;
    s.nvlink_link_Bps = 0;
    s.nics = 4;
    s.nic_Bps = kHdrBps;
    s.nic_model = "connectx-6-hdr";
    s.pcie_Bps = kPcie4Bps;
    s.pcie_switches = 4;
    s.cpus = 2;
  } else if (preset == "mi300x-node") {
    // An 8x AMD Instinct MI300X platform: ROCm documentation "AMD Instinct MI300 series microarchitecture",
    // node-level architecture (rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html): two EPYC sockets,
    // the 8 OAMs attached to the host by PCIe gen5 x16 (through optional PCIe switches), "seven high-bandwidth,
    // low-latency AMD Infinity Fabric links" per GPU "to form a fully connected 8-GPU system" -- one direct
    // link per GPU pair, no switch, so no in-network reduction (RCCL has no NVLS; the tuner cannot pick it).
    // Scale-out: one 400 Gb/s NIC per GPU on PCIe gen5, as AMD's MI300X reference platforms and the cloud
    // MI300X servers pair them (e.g. Azure ND MI300X v5: 8x 400 Gb/s InfiniBand; UNVERIFIED in this session);
    // 4 PCIe switches with 2 GPUs and 2 NICs each: modelling choice as for the DGX presets.
    s.gpu = "mi300x";
    s.gpus = 8;
    s.nvswitches = 0;
    s.nvlink_link_Bps = kXgmi4LinkBps;
    s.full_mesh = true;
    s.nics = 8;
    s.nic_Bps = kNdrBps;
    s.nic_model = "connectx-7-ndr";
    s.pcie_Bps = kPcie5Bps;
    s.pcie_switches = 4;
    s.cpus = 2;
  } else {
    throw InputError("--param node", "a server preset (one of dgx-a100, dgx-h100, dgx-h200, dgx-b200, dgx-b300, "
                                     "dgx1-v100, pcie-server, mi300x-node, gb200-nvl72, gb300-nvl72; got '" + preset + "')");
  }
  return s;
}

// DGX-1 V100 hybrid cube-mesh: (gpu a, gpu b, NVLink count). Multiplicities as in the commonly published
// `nvidia-smi topo -m` matrix of a DGX-1 V100 (UNVERIFIED against a primary source): each GPU has 6 links,
// at most 2 per pair, GPU0-GPU5/6/7 (and symmetric pairs) have none and go over PCIe (HS "V100 SXM2
// (DGX-1 style 8-GPU) / topology").
const std::vector<std::array<int, 3>>& cube_mesh_edges() {
  static const std::vector<std::array<int, 3>> e = {
      {0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1}, {1, 5, 2}, {2, 3, 2},
      {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1}, {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2}};
  return e;
}

namespace {

// ---- Nodes and the PCIe tree of one server or compute tray ------------------------------------------------
// Shared by the server presets (add_host), the NVL72 trays and racks (add_nvl72) and the tier-2 NVSwitches of
// the NVLink Switch System. Ids are "<prefix><kind><index>"; host -1 = a node outside every server.

// A node of kind `kind` with id "<prefix><name><index>", host `host` and local index `index`.
Node node_of(const std::string& prefix, const char* name, NodeKind kind, int host, int index, const std::string& model) {
  Node n;
  n.id = prefix + name + std::to_string(index);
  n.kind = kind;
  n.model = model;
  n.host = host;
  n.local_index = index;
  return n;
}

NodeId add_gpu(TopologyBuilder& b, const std::string& prefix, int host, int i, const std::string& model,
               int nvlink_domain) {
  Node n = node_of(prefix, "gpu", NodeKind::Gpu, host, i, model);
  n.nvlink_domain = nvlink_domain;
  return b.add_node(n);
}

NodeId add_nvswitch(TopologyBuilder& b, const std::string& prefix, int host, int j, const std::string& model, int tier,
                    bool nvls) {
  Node n = node_of(prefix, "nvsw", NodeKind::NvSwitch, host, j, model);
  n.tier = tier;
  n.nvls = nvls;
  return b.add_node(n);
}

NodeId add_nic(TopologyBuilder& b, const std::string& prefix, int host, int k, const std::string& model,
               double port_Bps) {
  Node n = node_of(prefix, "nic", NodeKind::Nic, host, k, model);
  n.rail = k;
  n.port_Bps = port_Bps;
  return b.add_node(n);
}

// PCIe tree: GPU i and NIC k hang off PCIe switch i*P/G and k*P/N; switch q goes to CPU q*C/P (GPUs and NICs
// go straight to the CPUs when there is no switch). Socket interconnect (ESTIMATE, see kCpuLinkLatS): a chain
// cpu0-cpu1-...
void add_pcie_tree(TopologyBuilder& b, const HostNodes& h, double pcie_Bps) {
  const int G = static_cast<int>(h.gpus.size()), N = static_cast<int>(h.nics.size());
  const int P = static_cast<int>(h.pcie_switches.size()), C = static_cast<int>(h.cpus.size());
  if (P > 0) {
    for (int i = 0; i < G; ++i) b.add_link(h.gpus[i], h.pcie_switches[i * P / G], LinkKind::PCIe, pcie_Bps, kPcieLatS);
    for (int k = 0; k < N; ++k) b.add_link(h.nics[k], h.pcie_switches[k * P / N], LinkKind::PCIe, pcie_Bps, kPcieLatS);
    if (C > 0)
      for (int q = 0; q < P; ++q) b.add_link(h.pcie_switches[q], h.cpus[q * C / P], LinkKind::PCIe, pcie_Bps, kPcieLatS);
  } else if (C > 0) {
    for (int i = 0; i < G; ++i) b.add_link(h.gpus[i], h.cpus[i * C / G], LinkKind::PCIe, pcie_Bps, kPcieLatS);
    for (int k = 0; k < N; ++k) b.add_link(h.nics[k], h.cpus[k * C / N], LinkKind::PCIe, pcie_Bps, kPcieLatS);
  }
  for (int c = 0; c + 1 < C; ++c) b.add_link(h.cpus[c], h.cpus[c + 1], LinkKind::PCIe, pcie_Bps, kCpuLinkLatS);
}

}  // namespace

HostNodes add_host(TopologyBuilder& b, const HostSpec& s, int host, int domain) {
  HostNodes out;
  const std::string p = "n" + std::to_string(host) + ".";
  const int gpu_domain = (s.nvswitches > 0 || s.cube_mesh || s.full_mesh) ? domain : -1;
  for (int i = 0; i < s.gpus; ++i) out.gpus.push_back(add_gpu(b, p, host, i, s.gpu, gpu_domain));
  for (int j = 0; j < s.nvswitches; ++j)
    out.nvswitches.push_back(add_nvswitch(b, p, host, j, s.nvswitch_model, 1, s.nvls));
  for (int c = 0; c < s.cpus; ++c) {
    Node cpu = node_of(p, "cpu", NodeKind::Cpu, host, c, "");
    cpu.memory_bytes = std::floor(s.host_memory_bytes / s.cpus);  // whole bytes (exports write integers)
    out.cpus.push_back(b.add_node(cpu));
  }
  for (int q = 0; q < s.pcie_switches; ++q)
    out.pcie_switches.push_back(b.add_node(node_of(p, "pcie", NodeKind::PcieSwitch, host, q, "")));
  for (int k = 0; k < s.nics; ++k) out.nics.push_back(add_nic(b, p, host, k, s.nic_model, s.nic_Bps));
  // NVLink.
  if (s.cube_mesh) {
    for (const auto& [a, c, cnt] : cube_mesh_edges())
      b.add_link(out.gpus[a], out.gpus[c], LinkKind::NVLink, cnt * s.nvlink_link_Bps, kNvlinkLatS, cnt);
  }
  // Full mesh (Infinity Fabric): one GPU-to-GPU link per pair, LinkKind::NVLink standing for the GPU fabric.
  if (s.full_mesh)
    for (int i = 0; i < s.gpus; ++i)
      for (int j = i + 1; j < s.gpus; ++j)
        b.add_link(out.gpus[i], out.gpus[j], LinkKind::NVLink, s.nvlink_link_Bps, kNvlinkLatS, 1);
  for (int i = 0; i < s.gpus; ++i)
    for (int j = 0; j < s.nvswitches; ++j) {
      int cnt = s.links_per_switch[j];
      b.add_link(out.gpus[i], out.nvswitches[j], LinkKind::NVLink, cnt * s.nvlink_link_Bps, kNvlinkLatS, cnt);
    }
  add_pcie_tree(b, out, s.pcie_Bps);
  return out;
}

// Applies the node-level parameters shared by server presets and superpod.
void apply_host_params(HostSpec& s, const std::map<std::string, std::string>& given, const std::string& preset,
                       const std::vector<std::string>& valid) {
  Params p(preset, given, valid);
  s.gpu = p.str("gpu", s.gpu, kGpuModels);
  if (s.cube_mesh) {
    s.gpus = static_cast<int>(p.integer("gpus_per_node", 8, 8, 8));  // the cube-mesh is defined for 8
  } else if (s.full_mesh) {
    s.gpus = static_cast<int>(p.integer("gpus_per_node", s.gpus, 2, 8));  // 7 Infinity Fabric links per GPU
  } else {
    s.gpus = static_cast<int>(p.integer("gpus_per_node", s.gpus, 1, 16));
  }
  s.nics = static_cast<int>(p.integer("nics_per_node", s.nics, 0, 16));
  s.nic_Bps = p.bandwidth("nic_bandwidth", s.nic_Bps);
  s.host_memory_bytes = p.size("host_memory", s.host_memory_bytes);
  if (p.has("host_memory") && s.cpus < 1) throw InputError("--param host_memory", "a server with a CPU");
  if (p.has("nvlink_bandwidth")) {
    if (s.nvswitches == 0 && !s.cube_mesh && !s.full_mesh)
      throw InputError("--param nvlink_bandwidth", "a preset with NVLink ('" + s.preset + "' has none)");
    double total = p.bandwidth("nvlink_bandwidth", 0);
    s.nvlink_link_Bps = total / host_gpu_links(s);
  }
  if (s.pcie_switches > 0) {
    // Keep the PCIe tree a tree: at most one switch per GPU.
    s.pcie_switches = std::max(1, std::min(s.pcie_switches, s.gpus));
  }
}

int host_gpu_links(const HostSpec& s) {
  int links = s.cube_mesh ? 6 : s.full_mesh ? s.gpus - 1 : 0;
  for (int c : s.links_per_switch) links += c;
  return links;
}

double host_nvlink_Bps(const HostSpec& s) { return host_gpu_links(s) * s.nvlink_link_Bps; }

namespace {

std::string bw_str(double Bps) { return fmt_num(Bps / 1e9) + "GB/s"; }

void record_host_params(TopologyBuilder& b, const HostSpec& s) {
  b.param("gpu", s.gpu);
  b.param("gpus_per_node", std::to_string(s.gpus));
  b.param("nics_per_node", std::to_string(s.nics));
  b.param("nic_bandwidth", bw_str(s.nic_Bps));
  if (s.nvswitches > 0 || s.cube_mesh || s.full_mesh) b.param("nvlink_bandwidth", bw_str(host_nvlink_Bps(s)));
}

// host_memory: recorded only when given (the preset's figure is on its CPU nodes).
void record_host_memory(TopologyBuilder& b, const std::map<std::string, std::string>& given) {
  if (auto it = given.find("host_memory"); it != given.end()) b.param("host_memory", it->second);
}

const std::vector<std::string> kHostParams = {"gpu", "gpus_per_node", "nics_per_node", "nic_bandwidth",
                                              "nvlink_bandwidth", "host_memory"};

// ---- NVLink-domain systems --------------------------------------------------------------------------

struct Nvl72Spec {
  std::string gpu = "gb200";  // the rack's own part (nvl72_params says why; gpu=b200 still selectable)
  std::string nic_model = "connectx-7-ndr";
  double pcie_Bps = kPcie5Bps;
  int trays = 18;
  int gpus_per_tray = 4;
  int nvswitch_chips = 18;
  double link_Bps = kNvlink5LinkBps;
  int nics_per_tray = 4;
  double nic_Bps = kNdrBps;
  double tray_memory_bytes = 2 * kGraceGb200Memory;  // host memory per compute tray (2 Grace CPUs); 0 = not given
};

// GB200 NVL72: 18 compute trays of 2 GB200 superchips (4 Blackwell GPUs, 2 Grace CPUs) and 9 NVSwitch trays
// of 2 NVSwitch chips (18 chips). Each GPU has 18 NVLink5 links, one to every NVSwitch chip, so the 72
// GPUs form one NVLink domain: HS "GB200 NVL72 / rack composition and NVLink bandwidth" (72 GPUs, 36 Grace,
// 9 NVSwitch trays, 1.8 TB/s per GPU; UNVERIFIED, secondary) and HS "B200 / NVLink links per GPU".
// Per tray: 4 ConnectX-7 400 Gb/s NICs (GB200 NVL72 reference design; UNVERIFIED); each superchip modelled
// with one PCIe gen5 switch joining its Grace CPU, its 2 GPUs and 2 NICs (modelling choice; the Grace-GPU
// NVLink-C2C link is not modelled).
void add_nvl72(TopologyBuilder& b, const Nvl72Spec& s, int rack, int host0, int domain, std::vector<HostNodes>& hosts) {
  std::vector<NodeId> sw;
  const std::string rp = "rack" + std::to_string(rack) + ".";
  for (int j = 0; j < s.nvswitch_chips; ++j) sw.push_back(add_nvswitch(b, rp, -1, j, "nvswitch-gen4", 1, true));
  for (int t = 0; t < s.trays; ++t) {
    int host = host0 + t;
    HostNodes hn;
    const std::string p = "n" + std::to_string(host) + ".";
    for (int i = 0; i < s.gpus_per_tray; ++i) hn.gpus.push_back(add_gpu(b, p, host, i, s.gpu, domain));
    const int sc = std::max(1, s.gpus_per_tray / 2);  // superchips per tray
    for (int c = 0; c < sc; ++c) {
      Node cpu = node_of(p, "cpu", NodeKind::Cpu, host, c, "grace");
      cpu.memory_bytes = std::floor(s.tray_memory_bytes / sc);
      hn.cpus.push_back(b.add_node(cpu));
      hn.pcie_switches.push_back(b.add_node(node_of(p, "pcie", NodeKind::PcieSwitch, host, c, "")));
    }
    for (int k = 0; k < s.nics_per_tray; ++k) hn.nics.push_back(add_nic(b, p, host, k, s.nic_model, s.nic_Bps));
    for (int i = 0; i < s.gpus_per_tray; ++i)
      for (int j = 0; j < s.nvswitch_chips; ++j)
        b.add_link(hn.gpus[i], sw[j], LinkKind::NVLink, s.link_Bps, kNvlinkLatS, 1);
    add_pcie_tree(b, hn, s.pcie_Bps);  // one switch per superchip, under its own Grace CPU
    hosts.push_back(std::move(hn));
  }
}

// GB300 NVL72: the same rack (18 trays of 4 GPUs + 2 Grace, 18 NVLink5 NVSwitch chips, 1.8 TB/s per GPU) with
// Blackwell Ultra GPUs and one ConnectX-8 800 Gb/s SuperNIC per GPU (4 per tray) on PCIe gen6: NVIDIA GB300
// NVL72 datasheet (UNVERIFIED in this session).
Nvl72Spec nvl72_spec(const std::string& rack) {
  Nvl72Spec s;
  if (rack == "gb300-nvl72") {
    s.gpu = "gb300";
    s.nic_model = "connectx-8";
    s.nic_Bps = kXdrBps;
    s.pcie_Bps = kPcie6Bps;
    s.tray_memory_bytes = 0;  // not given (see kGraceGb200Memory)
  }
  return s;
}

Nvl72Spec nvl72_params(const std::map<std::string, std::string>& given, const std::string& preset,
                       const std::vector<std::string>& valid, const std::string& rack = "gb200-nvl72") {
  Params p(preset, given, valid);
  Nvl72Spec s = nvl72_spec(rack);
  // gb200-nvl72 prices the GB200 part by default: the Blackwell GPU of a GB200 superchip at its 1,200 W clocks
  // (models/gpu.cpp "gb200": 2.5 PFLOP/s dense BF16, 186 GB, from the GB200 NVL72 datasheet's rack totals / 72).
  // gpu=b200 keeps the HGX B200 part (2.25 PFLOP/s, 180 GB, PCIe host link) for comparison. What keys on the
  // name: the network calibration (models/calibration_presets.cpp maps gb200 to the b200 fit on purpose), the
  // kernel efficiencies (both take the H200 fit, models/compute_calibration.cpp), the host link and host DRAM
  // rate of offloading (workloads/gpt_model.cpp: NVLink-C2C and Grace LPDDR5X for gb200).
  s.gpu = rack == "gb300-nvl72" ? p.str("gpu", "gb300", {"gb300"}) : p.str("gpu", "gb200", {"gb200", "b200"});
  s.nics_per_tray = static_cast<int>(p.integer("nics_per_node", s.nics_per_tray, 0, 8));
  s.nic_Bps = p.bandwidth("nic_bandwidth", s.nic_Bps);
  if (p.has("nvlink_bandwidth")) s.link_Bps = p.bandwidth("nvlink_bandwidth", 0) / s.nvswitch_chips;
  s.tray_memory_bytes = p.size("host_memory", s.tray_memory_bytes);
  return s;
}

void record_nvl72(TopologyBuilder& b, const Nvl72Spec& s) {
  b.param("gpu", s.gpu);
  b.param("nics_per_node", std::to_string(s.nics_per_tray));
  b.param("nic_bandwidth", bw_str(s.nic_Bps));
  b.param("nvlink_bandwidth", bw_str(s.link_Bps * s.nvswitch_chips));
}

Topology build_nvl72(const std::string& rack, const std::map<std::string, std::string>& given) {
  const std::vector<std::string> valid = {"gpu", "nics_per_node", "nic_bandwidth", "nvlink_bandwidth", "host_memory"};
  Nvl72Spec s = nvl72_params(given, rack, valid, rack);
  TopologyBuilder b(rack);
  b.param("preset", rack);
  record_nvl72(b, s);
  record_host_memory(b, given);
  std::vector<HostNodes> hosts;
  add_nvl72(b, s, 0, 0, 0, hosts);
  return std::move(b).build("preset " + rack);
}

// NVLink Switch System (Hopper): up to 32 DGX H100 servers (256 GPUs) in one NVLink network. HS "NVLink
// Switch System (Hopper) / max GPUs and all-to-all bandwidth" (primary: 256 GPUs, 57.6 TB/s all-to-all =
// 128 GPUs x 450 GB/s, i.e. non-blocking) and "Hopper NVLink Switch System / per-GPU bandwidth across
// servers" (900 GB/s bidirectional per GPU). Model: each server's 4 NVSwitches (tier 1) send as many NVLink4
// links up as they receive from GPUs (non-blocking) to tier-2 NVSwitch chips: 2*split[j] chips for the
// plane of switch j (10+8+8+10 = 36 chips, matching 18 two-chip NVLink Switch units), 4 links from every
// server's plane-j switch to each. Port counts of the real chips are not enforced (bandwidth-equivalent
// model, UNVERIFIED wiring).
Topology build_nvlink_switch_system(const std::map<std::string, std::string>& given) {
  const std::vector<std::string> valid = {"nodes", "gpu", "nics_per_node", "nic_bandwidth", "nvlink_bandwidth",
                                          "host_memory"};
  Params p("nvlink-switch-system", given, valid);
  const int nodes = static_cast<int>(p.integer("nodes", 32, 1, 32));
  std::map<std::string, std::string> hp;
  for (const auto& [k, v] : given)
    if (k != "nodes") hp[k] = v;
  HostSpec s = host_spec("dgx-h100");
  std::vector<std::string> hvalid = {"gpu", "nics_per_node", "nic_bandwidth", "nvlink_bandwidth", "host_memory"};
  {
    Params hpp("nvlink-switch-system", hp, hvalid);
    s.gpu = hpp.str("gpu", "h100", {"h100", "h200"});
    s.nics = static_cast<int>(hpp.integer("nics_per_node", s.nics, 0, 16));
    s.nic_Bps = hpp.bandwidth("nic_bandwidth", s.nic_Bps);
    if (hpp.has("nvlink_bandwidth")) s.nvlink_link_Bps = hpp.bandwidth("nvlink_bandwidth", 0) / 18.0;
    s.host_memory_bytes = hpp.size("host_memory", s.host_memory_bytes);
  }
  TopologyBuilder b("nvlink-switch-system");
  b.param("preset", "nvlink-switch-system");
  b.param("nodes", std::to_string(nodes));
  b.param("gpu", s.gpu);
  b.param("nics_per_node", std::to_string(s.nics));
  b.param("nic_bandwidth", bw_str(s.nic_Bps));
  b.param("nvlink_bandwidth", bw_str(host_nvlink_Bps(s)));
  record_host_memory(b, given);
  std::vector<HostNodes> hosts;
  for (int h = 0; h < nodes; ++h) hosts.push_back(add_host(b, s, h, 0));
  const int per = 4;  // links from one server's plane-j switch to one tier-2 chip
  for (int j = 0; j < s.nvswitches; ++j) {
    const int chips = 8 * s.links_per_switch[j] / per;  // = 2 * split[j] for 8 GPUs
    for (int c = 0; c < chips; ++c) {
      NodeId l2 = add_nvswitch(b, "l2.p" + std::to_string(j) + ".", -1, c, "nvswitch-gen3", 2, true);
      for (int h = 0; h < nodes; ++h)
        b.add_link(hosts[h].nvswitches[j], l2, LinkKind::NVLink, per * s.nvlink_link_Bps, kNvlinkLatS, per);
    }
  }
  return std::move(b).build("preset nvlink-switch-system");
}

}  // namespace

// ---- Fat tree ------------------------------------------------------------------------------------------

FatTreeShape plan_fat_tree(int endpoints_per_rail, int rails, int radix, double oversubscription, int tiers,
                           int host_block) {
  FatTreeShape f;
  if (radix < 4) throw InputError("--param radix", "a switch radix >= 4");
  // A leaf has at least one uplink, so d:u is at most (radix-1):1; a larger ratio is not buildable (before it
  // was clamped to that silently).
  if (!(oversubscription >= 1.0) || oversubscription > radix - 1)
  {
    char got[32];
    std::snprintf(got, sizeof got, "%g", oversubscription);
    throw InputError("--param oversubscription", "a number in [1, " + std::to_string(radix - 1) +
                                                     "] for switches of radix " + std::to_string(radix) + " (got " +
                                                     got + ")");
  }
  // Leaf: d downlinks, u uplinks, d:u = oversubscription (all ports at the same speed).
  f.down = static_cast<int>(std::lround(radix * oversubscription / (1.0 + oversubscription)));
  f.down = std::clamp(f.down, 1, radix - 1);
  f.up = radix - f.down;
  if (host_block > 0) {
    // Host-based leaves: a leaf takes whole hosts (all `host_block` NICs of each) when a host fits in its
    // downlinks, and the uplinks keep d:u = oversubscription on the ports used (a few ports may stay free).
    f.rail_optimized = false;
    f.host_block = host_block;
    if (host_block <= f.down) {
      f.down = f.down / host_block * host_block;
      f.up = std::clamp(static_cast<int>(std::lround(f.down / oversubscription)), 1, radix - f.down);
    }
  }
  f.leaves_per_rail = (endpoints_per_rail + f.down - 1) / f.down;
  f.rails = rails;
  const long long total_leaves = static_cast<long long>(f.leaves_per_rail) * rails;
  const long long leaf_uplinks = total_leaves * f.up;
  auto smallest_divisor_at_least = [](int n, long long need) -> int {
    for (int c = 1; c <= n; ++c)
      if (n % c == 0 && c >= need) return c;
    return -1;
  };
  auto fits2 = [&]() { return total_leaves <= radix; };
  if (tiers == 0) tiers = fits2() ? 2 : 3;
  f.tiers = tiers;
  if (tiers == 2) {
    if (!fits2())
      throw InputError("--param tiers", "3 tiers or a larger radix: a 2-tier fat tree of radix " +
                                            std::to_string(radix) + " connects at most " + std::to_string(radix) +
                                            " leaves, this one needs " + std::to_string(total_leaves));
    // Spines: every leaf connects to every spine with `bundle` links; the fewest spines whose ports
    // suffice.
    long long need = (leaf_uplinks + radix - 1) / radix;
    f.spines = smallest_divisor_at_least(f.up, need);
    f.leaf_spine_bundle = f.up / f.spines;
    f.pods = 1;
    f.leaves_per_pod = static_cast<int>(total_leaves);
    return f;
  }
  if (tiers != 3) throw InputError("--param tiers", "2 or 3 (got " + std::to_string(tiers) + ")");
  // Pods of up to radix/2 leaves; each leaf sends one link to each of the pod's `up` spines; spines send
  // radix/2 links up (non-blocking above the leaf) to core group s (spine index within the pod).
  f.leaves_per_pod = radix / 2;
  f.pods = static_cast<int>((total_leaves + f.leaves_per_pod - 1) / f.leaves_per_pod);
  if (f.leaves_per_pod > total_leaves) f.leaves_per_pod = static_cast<int>(total_leaves);
  f.spines_per_pod = f.up;
  f.leaf_spine_bundle = 1;
  const int spine_up = radix / 2;
  if (f.pods > radix)
    throw InputError("--param nodes", "a fabric that fits 3 tiers of radix " + std::to_string(radix) + " (needs " +
                                          std::to_string(f.pods) + " pods, at most " + std::to_string(radix) + ")");
  long long need = (static_cast<long long>(f.pods) * spine_up + radix - 1) / radix;
  f.cores_per_group = smallest_divisor_at_least(spine_up, need);
  if (f.cores_per_group < 0)
    throw InputError("--param nodes", "a fabric that fits 3 tiers of radix " + std::to_string(radix));
  f.spine_core_bundle = spine_up / f.cores_per_group;
  f.spines = f.pods * f.spines_per_pod;
  return f;
}

FatTreeNodes add_fat_tree(TopologyBuilder& b, const std::vector<std::vector<NodeId>>& rails, const FatTreeShape& f,
                          double port_Bps, const FabricSpec& fabric) {
  FatTreeNodes out;
  const bool ethernet = fabric.ethernet;
  const NodeKind sk = ethernet ? NodeKind::EthSwitch : NodeKind::IbSwitch;
  const LinkKind lk = ethernet ? LinkKind::Ethernet : LinkKind::InfiniBand;
  const double lat = fabric.switch_latency_s;      // topologies/fabrics.cpp cites both
  const double nic_lat = fabric.nic_latency_s;
  // IB switch model by port speed: Quantum (HDR, QM8700, 40 ports) / Quantum-2 (NDR, QM9700, 64 ports);
  // both support SHARP in-network reduction (NVIDIA Quantum / Quantum-2 datasheets; UNVERIFIED here).
  const std::string model = ethernet ? "ethernet-switch" : (port_Bps > kHdrBps ? "quantum-2" : "quantum");
  auto mk = [&](const std::string& id, int tier, int rail, int idx) {
    Node n;
    n.id = id;
    n.kind = sk;
    n.model = model;
    n.tier = tier;
    n.rail = rail;
    n.local_index = idx;
    n.sharp = fabric.sharp;
    return b.add_node(n);
  };
  // Leaves, ordered so that pod p holds consecutive groups of (endpoint group, all rails): leaf index
  // g*R + r is group g of rail r.
  // A non-rail tree has one endpoint list (host-major) and leaves "leaf.<g>" of no rail.
  const int R = f.rails;
  out.leaves.resize(static_cast<std::size_t>(f.leaves_per_rail) * R);
  for (int g = 0; g < f.leaves_per_rail; ++g)
    for (int r = 0; r < R; ++r) {
      out.leaves[g * R + r] = f.rail_optimized ? mk("leaf.r" + std::to_string(r) + "." + std::to_string(g), 1, r, g)
                                               : mk("leaf." + std::to_string(g), 1, -1, g);
      const auto& eps = rails[r];
      for (int e = g * f.down; e < std::min<int>((g + 1) * f.down, eps.size()); ++e)
        b.add_link(eps[e], out.leaves[g * R + r], lk, port_Bps, nic_lat, 1);
    }
  if (f.tiers == 2) {
    for (int s = 0; s < f.spines; ++s) out.spines.push_back(mk("spine." + std::to_string(s), 2, -1, s));
    for (NodeId leaf : out.leaves)
      for (NodeId sp : out.spines)
        b.add_link(leaf, sp, lk, f.leaf_spine_bundle * port_Bps, lat, f.leaf_spine_bundle);
    return out;
  }
  for (int p = 0; p < f.pods; ++p)
    for (int s = 0; s < f.spines_per_pod; ++s)
      out.spines.push_back(mk("spine.p" + std::to_string(p) + "." + std::to_string(s), 2, -1, s));
  for (std::size_t li = 0; li < out.leaves.size(); ++li) {
    int p = static_cast<int>(li / f.leaves_per_pod);
    for (int s = 0; s < f.spines_per_pod; ++s)
      b.add_link(out.leaves[li], out.spines[p * f.spines_per_pod + s], lk, port_Bps, lat, 1);
  }
  for (int g = 0; g < f.spines_per_pod; ++g)
    for (int c = 0; c < f.cores_per_group; ++c) {
      NodeId core = mk("core." + std::to_string(g) + "." + std::to_string(c), 3, -1, c);
      out.cores.push_back(core);
      for (int p = 0; p < f.pods; ++p)
        b.add_link(out.spines[p * f.spines_per_pod + g], core, lk, f.spine_core_bundle * port_Bps, lat,
                   f.spine_core_bundle);
    }
  return out;
}

namespace {

Topology build_server(const std::string& name, const std::map<std::string, std::string>& given) {
  HostSpec s = host_spec(name);
  apply_host_params(s, given, name, kHostParams);
  TopologyBuilder b(name);
  b.param("preset", name);
  record_host_params(b, s);
  record_host_memory(b, given);
  add_host(b, s, 0, 0);
  return std::move(b).build("preset " + name);
}

Topology build_superpod(const std::map<std::string, std::string>& given) {
  const std::vector<std::string> valid = {"nodes", "node", "gpu", "gpus_per_node", "nics_per_node", "nic_bandwidth",
                                          "nvlink_bandwidth", "tiers", "radix", "oversubscription", "fabric",
                                          "rail_optimized", "sharp", "routing", "host_memory"};
  Params p("superpod", given, valid);
  const int nodes = static_cast<int>(p.integer("nodes", 32, 1, 100000));
  std::vector<std::string> node_kinds = host_presets();
  node_kinds.push_back("gb200-nvl72");
  node_kinds.push_back("gb300-nvl72");
  const std::string node = p.str("node", "dgx-h100", node_kinds);
  const std::string fabric = p.str("fabric", "infiniband", fabric_names());
  const bool nic_given = p.has("nic_bandwidth");
  const int tiers = static_cast<int>(p.integer("tiers", 0, 2, 3));  // 0 (default): 2 if it fits, else 3
  const double over = p.real("oversubscription", 1.0, 1.0);
  const bool rail_optimized = p.str("rail_optimized", "true", {"true", "false"}) == "true";
  // SHARP in-network reduction (NCCL's CollNet, and NVLS across nodes) is off unless asked for: NCCL enables
  // CollNet only when the collective network plugin (the SHARP plugin) is loaded and NCCL_COLLNET_ENABLE=1
  // (src/init.cc at v2.26.2-1: collNetSupport(comm) is ncclCollNet != nullptr, src/include/coll_net.h; comm->
  // collNetSupport = 1 only when NCCL_COLLNET_ENABLE is "1"), and ncclTopoTuneModel disables CollNet Direct,
  // CollNet Chain and multi-node NVLS when collNetSupport == 0 (src/graph/tuning.cc at v2.26.2-1).
  const bool sharp = p.str("sharp", "false", {"true", "false"}) == "true";
  std::map<std::string, std::string> hp;
  for (const auto& [k, v] : given)
    if (std::find(kHostParams.begin(), kHostParams.end(), k) != kHostParams.end()) hp[k] = v;

  TopologyBuilder b("superpod");
  b.param("preset", "superpod");
  b.param("nodes", std::to_string(nodes));
  b.param("node", node);
  b.param("fabric", fabric);
  record_host_memory(b, given);
  std::vector<std::vector<NodeId>> rails;
  int per_host = 0;  // NICs per host (server or NVL72 tray)
  double port_Bps = 0;
  if (node == "gb200-nvl72" || node == "gb300-nvl72") {
    Nvl72Spec s = nvl72_params(hp, "superpod", valid, node);
    if (!nic_given && fabric != "infiniband" && topo::fabric(fabric).nic_Bps > 0) s.nic_Bps = topo::fabric(fabric).nic_Bps;
    if (p.has("gpus_per_node")) throw InputError("--param gpus_per_node", "no value for node=" + node + " (72 GPUs fixed)");
    if (s.nics_per_tray < 1) throw InputError("--param nics_per_node", "at least 1 NIC per tray for a superpod");
    record_nvl72(b, s);
    port_Bps = s.nic_Bps;
    per_host = s.nics_per_tray;
    rails.resize(s.nics_per_tray);
    for (int u = 0; u < nodes; ++u) {
      std::vector<HostNodes> hosts;
      add_nvl72(b, s, u, u * s.trays, u, hosts);
      for (const auto& h : hosts)
        for (int k = 0; k < s.nics_per_tray; ++k) rails[k].push_back(h.nics[k]);
    }
  } else {
    HostSpec s = host_spec(node);
    apply_host_params(s, hp, "superpod", valid);
    if (!nic_given && fabric != "infiniband" && topo::fabric(fabric).nic_Bps > 0) s.nic_Bps = topo::fabric(fabric).nic_Bps;
    if (s.nics < 1) throw InputError("--param nics_per_node", "at least 1 NIC per node for a superpod");
    record_host_params(b, s);
    port_Bps = s.nic_Bps;
    per_host = s.nics;
    rails.resize(s.nics);
    for (int h = 0; h < nodes; ++h) {
      HostNodes hn = add_host(b, s, h, h);
      for (int k = 0; k < s.nics; ++k) rails[k].push_back(hn.nics[k]);
    }
  }
  // The fabric's properties (topologies/fabrics.cpp): "infiniband" is the generation of the NICs' line rate.
  FabricSpec fs = fabric == "infiniband" ? infiniband_for_speed(port_Bps) : topo::fabric(fabric);
  if (sharp && !fs.sharp)
    throw InputError("--param sharp", "fabric " + fs.name + " has no in-network reduction; SHARP needs InfiniBand "
                                      "switches (infiniband, infiniband-edr/hdr/ndr/xdr)");
  fs.sharp = sharp;
  if (sharp) b.param("sharp", "true");
  // Multipath among equal-cost paths: the fabric's (topologies/fabrics.cpp says why per fabric) unless
  // `routing` names one. Recorded as a parameter where it is not D-mod-k or was given.
  FabricRouting routing = fs.routing;
  if (p.has("routing")) parse_fabric_routing(p.str("routing", "", {"dmodk", "hash"}), routing);
  b.routing(routing);
  if (p.has("routing") || routing != FabricRouting::DModK) b.param("routing", to_string(routing));
  // Switch radix default: the fabric's switch (40 ports for HDR/EDR Quantum QM8700, 64 for NDR Quantum-2
  // QM9700 and the Ethernet-class fabrics, 144 for XDR).
  const int radix = static_cast<int>(p.integer("radix", fs.radix, 4, 1024));
  if (!rail_optimized) {
    // Host-based leaves: one endpoint list, host by host (all NICs of host 0, then of host 1, ...).
    const std::size_t hosts = rails[0].size();
    std::vector<NodeId> all;
    for (std::size_t h = 0; h < hosts; ++h)
      for (const auto& rail : rails) all.push_back(rail[h]);
    rails.assign(1, std::move(all));
  }
  FatTreeShape f = plan_fat_tree(static_cast<int>(rails[0].size()), static_cast<int>(rails.size()), radix, over, tiers,
                                 rail_optimized ? 0 : per_host);
  b.param("tiers", std::to_string(f.tiers));
  b.param("radix", std::to_string(radix));
  b.param("oversubscription", fmt_num(over));
  b.param("rail_optimized", rail_optimized ? "true" : "false");
  add_fat_tree(b, rails, f, port_Bps, fs);
  return std::move(b).build("preset superpod");
}

// "2 TB", "960 GB": host memory as datasheets print it (decimal units).
std::string decimal_bytes(double bytes) {
  return bytes >= 1e12 ? fmt_num(bytes / 1e12) + " TB" : fmt_num(bytes / 1e9) + " GB";
}

std::vector<PresetInfo> make_presets() {
  auto host_params = [](const HostSpec& s) {
    std::vector<std::pair<std::string, std::string>> v = {
        {"gpu", "GPU model, one of a100-40gb a100-80gb h100 h200 b200 gb200 b300 gb300 v100 mi300x (default " + s.gpu + ")"},
        {"gpus_per_node", "GPUs in the server (default " + std::to_string(s.gpus) + ")"},
        {"nics_per_node", "network NICs (rails) in the server (default " + std::to_string(s.nics) + ")"},
        {"nic_bandwidth", "per-NIC bandwidth per direction, e.g. 200Gbps (default " + format_bandwidth(s.nic_Bps) + ")"},
        {"host_memory", "host (CPU) memory of the server, with its unit, e.g. 1TB (default " +
                            (s.host_memory_bytes > 0 ? decimal_bytes(s.host_memory_bytes) + ", the datasheet's"
                                                     : std::string("not given: host memory not checked")) + ")"}};
    if (s.full_mesh)
      v.push_back({"nvlink_bandwidth", "total Infinity Fabric bandwidth per GPU per direction over its gpus_per_node - 1 "
                                       "links, e.g. 448GB/s (default " + format_bandwidth(host_nvlink_Bps(s)) + ")"});
    else if (s.nvswitches > 0 || s.cube_mesh)
      v.push_back({"nvlink_bandwidth", "total NVLink bandwidth per GPU per direction, e.g. 450GB/s (default " +
                                           format_bandwidth(host_nvlink_Bps(s)) + ")"});
    else
      v.push_back({"nvlink_bandwidth", "not applicable (no NVLink); giving it is an error"});
    return v;
  };
  std::vector<PresetInfo> out;
  for (const auto& [name, description] : kServerPresets)
    out.push_back({name, description, host_params(host_spec(name))});
  // The NVL72 racks' parameters, defaults from nvl72_spec.
  auto nvl72_help = [](const std::string& rack, const std::string& gpu_help) {
    const Nvl72Spec s = nvl72_spec(rack);
    auto gbs = [](double Bps) {
      char b[32];
      std::snprintf(b, sizeof b, "%.1f GB/s", Bps / 1e9);
      return std::string(b);
    };
    return std::vector<std::pair<std::string, std::string>>{
        {"gpu", gpu_help},
        {"nics_per_node", "NICs per compute tray (default " + std::to_string(s.nics_per_tray) + ")"},
        {"nic_bandwidth", "per-NIC bandwidth per direction (default " + gbs(s.nic_Bps) + ")"},
        {"nvlink_bandwidth",
         "total NVLink bandwidth per GPU per direction (default " + gbs(s.link_Bps * s.nvswitch_chips) + ")"},
        {"host_memory", "host (CPU) memory per compute tray, with its unit, e.g. 960GB (default " +
                            (s.tray_memory_bytes > 0 ? decimal_bytes(s.tray_memory_bytes) + ": 2 Grace CPUs of 480 GB LPDDR5X"
                                                     : std::string("not given: host memory not checked")) + ")"}};
  };
  out.push_back({"gb200-nvl72", "72 GB200 GPUs (18 trays of 4) in one NVLink5 domain over 18 NVSwitch chips",
                 nvl72_help("gb200-nvl72", "gb200 (the GB200 superchip's GPU: 2.5 PFLOP/s bf16, 186 GB) or b200 (the HGX "
                                           "B200 part: 2.25 PFLOP/s, 180 GB) (default gb200)")});
  out.push_back({"gb300-nvl72", "72 Blackwell Ultra GPUs (18 trays of 4) in one NVLink5 domain, 4x ConnectX-8 800 Gb/s per tray",
                 nvl72_help("gb300-nvl72", "gb300 only (default gb300)")});
  out.push_back({"nvlink-switch-system", "up to 32 DGX H100 (256 GPUs) in one NVLink network via tier-2 NVSwitches",
                 {{"nodes", "DGX H100 servers, 1..32 (default 32)"},
                  {"gpu", "h100 or h200 (default h100)"},
                  {"nics_per_node", "NICs per server, not attached to a fabric (default 8)"},
                  {"nic_bandwidth", "per-NIC bandwidth per direction (default 50.0 GB/s)"},
                  {"nvlink_bandwidth", "total NVLink bandwidth per GPU per direction (default 450.0 GB/s)"},
                  {"host_memory", "host (CPU) memory per server, with its unit (default 2 TB, DGX H100's)"}}});
  out.push_back({"superpod", "N servers joined by a (rail-optimised by default) fat tree of a named scale-out fabric (InfiniBand, RoCE, EFA, TCPX/TCPXO, Slingshot, Ethernet)",
                 {{"nodes", "number of servers (racks for node=gb200-nvl72 / gb300-nvl72) (default 32)"},
                  {"node", "server preset: dgx-a100 dgx-h100 dgx-h200 dgx-b200 dgx-b300 dgx1-v100 pcie-server mi300x-node gb200-nvl72 gb300-nvl72 (default dgx-h100)"},
                  {"gpu", "GPU model override (default: the node preset's)"},
                  {"gpus_per_node", "GPUs per server (default: the node preset's)"},
                  {"nics_per_node", "NICs = rails per server (default: the node preset's)"},
                  {"nic_bandwidth", "per-NIC and per-fabric-port bandwidth per direction (default: the node preset's)"},
                  {"nvlink_bandwidth", "NVLink bandwidth per GPU per direction (default: the node preset's)"},
                  {"host_memory", "host (CPU) memory per server or compute tray, with its unit, e.g. 1TB (default: the "
                                  "node preset's)"},
                  {"tiers", "2 (leaf/spine) or 3 (leaf/spine/core) (default: 2 if it fits the radix, else 3)"},
                  {"radix", "switch ports (default 64; 40 for HDR-speed InfiniBand)"},
                  {"oversubscription", "leaf downlink:uplink bandwidth ratio, 1 to radix-1 (default 1)"},
                  {"rail_optimized", "true: NIC k of every server on rail k's leaves; false: host-based leaves, "
                                     "all NICs of a server on one leaf (default true)"},
                  {"fabric", "scale-out fabric: infiniband (the generation of the NICs' speed), infiniband-edr, "
                             "infiniband-hdr, infiniband-ndr, infiniband-xdr, roce, efa, tcpx, tcpxo, slingshot, ethernet; "
                             "sets the NIC speed unless nic_bandwidth is given, the NIC and switch latencies, the radix "
                             "and whether SHARP is possible (docs/collectives.md \"Scale-out fabrics\") (default infiniband)"},
                  {"sharp", "true: the InfiniBand switches reduce in the network and NCCL runs with the SHARP plugin "
                            "and NCCL_COLLNET_ENABLE=1, so CollNet can be chosen; false (default, as NCCL without the "
                            "plugin): no CollNet"},
                  {"routing", "multipath among equal-cost fabric paths: dmodk (balanced destination-based routes, as an "
                              "InfiniBand subnet manager computes them) or hash (per-GPU-pair hashed ECMP, as Ethernet "
                              "switches hash a flow's 5-tuple) (default: the fabric's: hash for roce, tcpx, tcpxo and "
                              "ethernet, dmodk for infiniband, efa and slingshot)"}}});
  return out;
}

}  // namespace

const std::vector<PresetInfo>& presets() {
  static const std::vector<PresetInfo> kPresets = make_presets();  // immutable after first use
  return kPresets;
}

bool is_preset(const std::string& name) {
  for (const auto& p : presets())
    if (p.name == name) return true;
  return false;
}

Topology build_preset(const std::string& name, const std::map<std::string, std::string>& params) {
  for (const auto& h : host_presets())
    if (name == h) return build_server(name, params);
  if (name == "gb200-nvl72" || name == "gb300-nvl72") return build_nvl72(name, params);
  if (name == "nvlink-switch-system") return build_nvlink_switch_system(params);
  if (name == "superpod") return build_superpod(params);
  std::string list;
  std::vector<std::string> names;
  for (const auto& p : presets()) list += (list.empty() ? "" : ", ") + p.name, names.push_back(p.name);
  throw InputError("topology '" + name + "'",
                   "a preset name" + did_you_mean(name, names) + " (" + list + ") or an existing JSON file");
}

GrowHint preset_growth(const std::string& name, const std::map<std::string, std::string>& params, std::int64_t gpus) {
  GrowHint h;
  if (!is_preset(name)) return h;
  auto gpus_of = [](const std::string& preset, const std::map<std::string, std::string>& p) -> std::int64_t {
    try {
      return static_cast<std::int64_t>(build_preset(preset, p).gpus().size());
    } catch (const InputError&) {
      return -1;  // a value the preset refuses (e.g. more servers than it allows)
    }
  };
  const PresetInfo* info = nullptr;
  for (const auto& p : presets())
    if (p.name == name) info = &p;
  const bool has_nodes = std::any_of(info->params.begin(), info->params.end(), [](const auto& q) { return q.first == "nodes"; });
  std::map<std::string, std::string> p = params;
  h.preset = name;
  if (!has_nodes) {
    // A server or rack preset: a superpod of such (its own parameters kept; one it refuses means no hint).
    std::map<std::string, std::string> one = params;
    one["node"] = name;
    one["nodes"] = "1";
    if (gpus_of("superpod", one) <= 0) return h;
    p = params;
    p["node"] = name;
    h.preset = "superpod";
  }
  p["nodes"] = "1";
  const std::int64_t per = gpus_of(h.preset, p);
  if (per <= 0) return {};
  h.per_node = per;
  const std::int64_t want = std::max<std::int64_t>(1, (gpus + per - 1) / per);
  p["nodes"] = std::to_string(want);
  if (gpus_of(h.preset, p) >= gpus) {
    h.nodes = want;
    return h;
  }
  // The preset caps its servers below `want`: the largest count it builds (a bisection; `want` is small here, as
  // the preset with a cap allows at most a few dozen servers).
  std::int64_t lo = 1, hi = want;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    p["nodes"] = std::to_string(mid);
    (gpus_of(h.preset, p) > 0 ? lo : hi) = mid;
  }
  h.max_nodes = lo;
  return h;
}

}  // namespace fabricsim::topo
