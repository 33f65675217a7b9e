#pragma once
// The scale-out fabric of a measured multi-host run, read from its description (a .meta.json sidecar's
// "interconnect" and "nic" text): which topologies/fabrics.hpp fabric, how many NICs per host and their line
// rate. A description that names no fabric fabricsim models, or leaves out what the model needs, is an
// InputError saying what is missing, never a silent default.
#include <string>

namespace fabricsim::validate {

struct FabricDescription {
  std::string fabric;    // a topo::fabric_names() name
  int nics_per_node = 0;  // NICs NCCL drives per host (ports of one GPU's NIC group merged: AWS p5's 32 EFA -> 8)
  double nic_gbps = 0;    // line rate per modelled NIC, Gb/s
  bool sharp = false;     // the description says the run used in-network reduction (SHARP / NCCL CollNet)
  std::string rule;       // what was read, for reports
};

// Ports beyond one per GPU act as one NIC per GPU, as NCCL drives them: NCCL merges the ports (PCI functions)
// of one multi-port NIC into one NIC node ("merge multi-port NICs into one PCI device", src/graph/topo.cc
// ncclTopoAddPci at v2.19.3-1: the function bits of the bus id are cleared) and, from v2.24.3-1, fuses them
// into one virtual NIC of their summed speed (topo.cc ncclTopoAutoMerge / ncclTopoMakeVnic,
// NCCL_NET_MERGE_LEVEL defaults to PORT). `count` ports of `gbps` each on a host whose run used
// `gpus_per_node` GPUs become gpus_per_node NICs of count / gpus_per_node x gbps when count is a multiple of
// it above it (AWS p5: 32 EFA of 100 Gb/s -> 8 x 400; OCI: 16 RDMA VFs of 100 Gb/s -> 8 x 200); returns
// whether it merged. Both the sidecar path (describe_fabric) and --topology's parameters use it.
bool merge_nic_ports(int& count, double& gbps, int gpus_per_node);

// `source` names the log in errors; gpus_per_node lets several ports per GPU merge into one modelled NIC.
FabricDescription describe_fabric(const std::string& source, const std::string& interconnect, const std::string& nic,
                                  int gpus_per_node);

}  // namespace fabricsim::validate
