#include "validate/fabric_mapping.hpp"

#include <cctype>
#include <regex>

#include "sim/base/error.hpp"
#include "topologies/fabrics.hpp"

namespace fabricsim::validate {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool has(const std::string& s, const char* w) { return s.find(w) != std::string::npos; }

std::string fmt_gbps(double g) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", g);
  return b;
}

}  // namespace

bool merge_nic_ports(int& count, double& gbps, int gpus_per_node) {
  if (gpus_per_node < 1 || count <= gpus_per_node || count % gpus_per_node != 0) return false;
  gbps *= count / gpus_per_node;
  count = gpus_per_node;
  return true;
}

FabricDescription describe_fabric(const std::string& source, const std::string& interconnect_in,
                                  const std::string& nic_in, int gpus_per_node) {
  const std::string ic = lower(interconnect_in), nic = lower(nic_in), all = ic + " | " + nic;
  FabricDescription d;
  if (ic.empty() && nic.empty())
    throw InputError(source, "a multi-host run needs its scale-out fabric described (which fabric, NICs per host, "
                             "Gb/s per NIC: a .meta.json sidecar's \"interconnect\" and \"nic\", the same keys in a "
                             "results JSON's \"system\", or --topology SERVER --param fabric=NAME --param "
                             "nics_per_node=N --param nic_bandwidth=RATE); none given");
  static const std::regex ib_word(R"((^|[^a-z])ib([^a-z]|$))");
  // Most specific first: Slingshot calls itself "HPC Ethernet", TCPXO contains "tcpx".
  if (has(all, "slingshot")) d.fabric = "slingshot";
  else if (has(all, "efa") || has(all, "elastic fabric")) d.fabric = "efa";
  else if (has(all, "tcpxo")) d.fabric = "tcpxo";
  else if (has(all, "tcpx")) d.fabric = "tcpx";
  else if (has(all, "roce")) d.fabric = "roce";
  else if (has(all, "infiniband") || std::regex_search(all, ib_word)) d.fabric = "infiniband";
  else if (has(all, "ethernet")) d.fabric = "ethernet";
  else
    throw InputError(source, "the interconnect '" + interconnect_in +
                                 "' names no scale-out fabric fabricsim models (InfiniBand EDR/HDR/NDR/XDR, RoCE, "
                                 "EFA, TCPX, TCPXO, Slingshot, Ethernet)");
  // NICs per host and line rate: "8x ConnectX-7 400 Gb/s", "4x100 Gbps EFA", "2x Slingshot 11 200 Gb/s".
  static const std::regex count_speed(R"((?:^|[^a-z0-9.])(\d+)\s*x(?=[\s\d])\s*(.{0,40}?)(\d+(\.\d+)?)\s*gb(ps|/s|it|\b))");
  static const std::regex count_only(R"((?:^|[^a-z0-9.])(\d+)\s*x\s+(efa|rdma|nic|hca|connectx|mellanox|infiniband|slingshot))");
  static const std::regex count_words(R"((\d+)\s+(rdma nics|nics|hcas|efa|ports))");
  static const std::regex per_node(R"((\d+(\.\d+)?)\s*gb(ps|/s)\s+(of\s+\S+\s+)?(per node|per instance))");
  std::smatch m;
  int count = 0;
  double gbps = 0;
  for (const std::string* s : {&nic, &ic})
    if (!count && std::regex_search(*s, m, count_speed)) {
      count = std::stoi(m[1].str());
      gbps = std::stod(m[3].str());
    }
  for (const std::string* s : {&nic, &ic})
    if (!count && (std::regex_search(*s, m, count_only) || std::regex_search(*s, m, count_words)))
      count = std::stoi(m[1].str());
  if (!gbps && count > 0 && std::regex_search(all, m, per_node)) gbps = std::stod(m[1].str()) / count;
  // The InfiniBand generation: named, else from the per-NIC speed.
  if (d.fabric == "infiniband") {
    if (has(all, "xdr")) d.fabric = "infiniband-xdr";
    else if (has(all, "ndr")) d.fabric = "infiniband-ndr";
    else if (has(all, "hdr")) d.fabric = "infiniband-hdr";
    else if (has(all, "edr")) d.fabric = "infiniband-edr";
    else if (gbps > 0) d.fabric = topo::infiniband_for_speed(gbps * 1e9 / 8).name;
    else
      throw InputError(source, "InfiniBand of unknown generation: the description names neither EDR/HDR/NDR/XDR nor "
                               "a per-NIC speed ('" + interconnect_in + "')");
  }
  const topo::FabricSpec fs = topo::fabric(d.fabric, source);
  if (!gbps) gbps = fs.nic_Bps * 8 / 1e9;
  if (count < 1)
    throw InputError(source, "the number of " + d.fabric + " NICs per host is missing from the description ('" +
                                 nic_in + "')");
  if (gbps <= 0)
    throw InputError(source, "the line rate of the " + d.fabric + " NICs is missing from the description ('" + nic_in +
                                 "')");
  d.rule = d.fabric + ", " + std::to_string(count) + "x " + fmt_gbps(gbps) + " Gb/s";
  // NCCL runs CollNet only with the SHARP plugin and switches that reduce (InfiniBand Quantum and later).
  d.sharp = fs.sharp && (has(all, "sharp") || has(all, "collnet"));
  if (d.sharp) d.rule += ", SHARP (CollNet allowed)";
  if (merge_nic_ports(count, gbps, gpus_per_node))
    d.rule += " -> " + std::to_string(count) + "x " + fmt_gbps(gbps) + " Gb/s (ports of one GPU merged)";
  d.nics_per_node = count;
  d.nic_gbps = gbps;
  return d;
}

}  // namespace fabricsim::validate
