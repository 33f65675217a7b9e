#pragma once
// Scale-out fabrics as named, cited properties (the `superpod` preset's `fabric` parameter): per-NIC line rate,
// the NIC's per-message latency, the per-hop switch latency, the switch radix, whether the switches reduce in
// the network (SHARP, NCCL's CollNet) and whether the fabric is InfiniBand or Ethernet-class. topologies/
// fabrics.cpp cites each number and the multipath rule; docs/collectives.md "Scale-out fabrics" lists them.
#include <string>
#include <vector>

#include "topologies/topology.hpp"

namespace fabricsim::topo {

struct FabricSpec {
  std::string name;         // infiniband-ndr, roce, efa, ...
  std::string description;  // one line for `fabricsim topo --list` and errors
  bool ethernet = false;    // Ethernet-class switches (RoCE, EFA, TCPX/TCPXO, Slingshot, plain Ethernet)
  double nic_Bps = 0;       // line rate per NIC per direction; 0: keep the node preset's
  double nic_latency_s = 0;     // NIC + transport, one way, per message (the NIC-to-leaf link's latency)
  double switch_latency_s = 0;  // one switch traversal + cable (every switch-to-switch link's latency)
  int radix = 64;           // switch ports
  bool sharp = false;       // switches that can reduce in the network (NVIDIA SHARP on Quantum/Quantum-2/X800
                            // InfiniBand); superpod turns it on only with its `sharp=true` parameter
  // How the fabric spreads traffic over equal-cost paths (superpod's `routing` parameter overrides it):
  // DModK where the fabric balances (InfiniBand's subnet manager routes; EFA's SRD and Slingshot's adaptive
  // routing spread each flow over the paths), Hash where switches pin a flow to a 5-tuple-hashed path.
  FabricRouting routing = FabricRouting::DModK;
};

// Every fabric, in the order `fabricsim topo --list` prints them. "infiniband" is an alias of the InfiniBand
// generation that matches the node's NIC speed (infiniband_for_speed).
const std::vector<FabricSpec>& fabrics();
std::vector<std::string> fabric_names();  // names accepted by superpod's `fabric` (aliases included)
// InputError naming `where` for an unknown name.
FabricSpec fabric(const std::string& name, const std::string& where = "--param fabric");
// The InfiniBand generation of a line rate (<= 100 Gb/s EDR, <= 200 HDR, <= 400 NDR, else XDR).
FabricSpec infiniband_for_speed(double nic_Bps);

}  // namespace fabricsim::topo
