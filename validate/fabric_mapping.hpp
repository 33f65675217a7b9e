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

// `source` names the log in errors; gpus_per_node lets several ports per GPU merge into one modelled NIC.
FabricDescription describe_fabric(const std::string& source, const std::string& interconnect, const std::string& nic,
                                  int gpus_per_node);

}  // namespace fabricsim::validate
