#include "topologies/fabrics.hpp"

#include "sim/base/error.hpp"

namespace fabricsim::topo {
namespace {

constexpr double kGbps = 1e9 / 8;

std::vector<FabricSpec> make_fabrics() {
  std::vector<FabricSpec> f;
  // Multipath (FabricSpec::routing), per fabric below. A connection of NCCL's IB/RoCE transport is one queue
  // pair unless NCCL_IB_QPS_PER_CONNECTION says more (NCCL_PARAM(IbQpsPerConn, "IB_QPS_PER_CONNECTION", 1),
  // src/transport/net_ib.cc at v2.26.2-1), so what a fabric does with one QP's packets decides the spread.
  // InfiniBand line rates per 4x port: EDR 100, HDR 200, NDR 400, XDR 800 Gb/s (InfiniBand Trade Association
  // roadmap; tests/data/hardware/hardware_specs.json "InfiniBand HDR / NDR / per-port line rate" for HDR and
  // NDR; ConnectX-8 / Quantum-X800 datasheets for XDR, UNVERIFIED in this session).
  // Switch traversal: Quantum (HDR) QM8700 datasheet "130ns port-to-port latency"; Quantum-2 and X800 are
  // quoted in the same range. With ~5 ns/m of cable, 0.3 us per hop (the value presets.cpp used for every IB hop before).
  // NIC: ConnectX-6/7 datasheets quote "sub-600ns" end-to-end latency for small RDMA messages, i.e. about
  // 0.3 us per NIC; the NIC-to-leaf link carries one NIC's share, 0.3 us (the value presets.cpp used for
  // every IB hop before, so InfiniBand superpods keep their link latencies).
  // Radix: Quantum QM8700 40 ports (HDR, and EDR Switch-IB 36; 40 used), Quantum-2 QM9700 64 ports of NDR,
  // Quantum-X800 144 ports of XDR (datasheets, UNVERIFIED in this session). All support SHARP.
  // Multipath: D-mod-k. The subnet manager (OpenSM's ftree/updn engines, UFM) programs static, destination-based
  // forwarding tables that spread the destinations under a switch evenly over its up-ports (topologies/routing.cpp).
  f.push_back({"infiniband-edr", "InfiniBand EDR, 100 Gb/s per NIC (ConnectX-5, Switch-IB 2)", false, 100 * kGbps,
               0.3e-6, 0.3e-6, 40, true});
  f.push_back({"infiniband-hdr", "InfiniBand HDR, 200 Gb/s per NIC (ConnectX-6, Quantum QM8700, SHARP)", false,
               200 * kGbps, 0.3e-6, 0.3e-6, 40, true});
  f.push_back({"infiniband-ndr", "InfiniBand NDR, 400 Gb/s per NIC (ConnectX-7, Quantum-2 QM9700, SHARP)", false,
               400 * kGbps, 0.3e-6, 0.3e-6, 64, true});
  f.push_back({"infiniband-xdr", "InfiniBand XDR, 800 Gb/s per NIC (ConnectX-8, Quantum-X800, SHARP)", false,
               800 * kGbps, 0.3e-6, 0.3e-6, 144, true});
  // RoCE v2: the same ConnectX NICs over lossless Ethernet (Spectrum switches). ESTIMATE: Ethernet switches
  // of this class quote 0.3-0.6 us port-to-port; 0.6 us per hop with cable (the earlier presets.cpp value for every Ethernet hop); the NIC's
  // RDMA latency is the ConnectX one plus the UDP/IP encapsulation, ESTIMATE 0.6 us per NIC (not from a
  // datasheet). Line rate: the node preset's NICs. No in-network reduction.
  // Multipath: hashed ECMP. Ethernet switches pick among equal-cost next hops by a hash of the packet's 5-tuple
  // (Juniper, "Queue-Pair Hashing for RDMA Flows", Junos AI-ML Evo documentation: "Most load balancing
  // algorithms hash ... based on 5-tuple information"); RoCE v2 sets the UDP source port per queue pair so that
  // ECMP spreads QPs, not packets ("RoCE v2.0 UDP Source Port Entropy", linux-rdma RFC, Mellanox 2018; v2
  // 2020), so one connection's traffic follows one hashed path and two connections can collide on a spine
  // link. fabricsim hashes (source GPU, destination GPU, hop): one path per GPU pair (NCCL's channels open
  // their own connections, whose QPs could hash apart: not modelled).
  f.push_back({"roce", "RoCE v2 (RDMA over lossless Ethernet), the node's NIC speed", true, 0, 0.6e-6, 0.6e-6, 64,
               false, FabricRouting::Hash});
  // AWS EFA (Scalable Reliable Datagram through the Nitro card, NCCL's aws-ofi-nccl plugin). p5.48xlarge:
  // 3200 Gb/s of EFA v2 per instance as 32 devices (aws-samples/aws-hpc-tutorials; sidecar of
  // tests/data/nccl-tests-multinode/aws_p5_*), modelled as one 400 Gb/s NIC per GPU; p4d: 4x 100 Gb/s.
  // Per-message latency: AWS's own cost model of EFA in aws-ofi-nccl's tuner charges 20 us per inter-node
  // step ("TUNER_NET_LATENCY", 20, include/nccl_ofi_tuner.h at v1.8.0-aws, the same default in
  // include/nccl_ofi_param.h at v1.21.1; it replaces NCCL's network hwLatencies there: latency =
  // internode steps x net_lat + other steps x NVLink latency, src/tuner/nccl_ofi_model.c), plus 3 us of
  // device and completion overhead for Simple ("TUNER_NET_COMP_OVERHEAD", not modelled: the route carries one
  // latency for every protocol). A GPU-to-GPU route crosses two NIC-to-leaf links, so each carries half:
  // 10 us, and a step across EFA costs max(NCCL's step latency, 20 us + switch hops). aws-ofi-nccl's other
  // latency figure (src/platform-aws.c: 75 us on p4d/p5, 35 us on p5en/p6) is what the plugin reports to
  // NCCL's tuner, a tuning input ("NCCL's internal tuner choices work better with this value"), not used here.
  // Switch hops: ESTIMATE as RoCE's (AWS publishes none).
  // Multipath: balanced (D-mod-k). SRD does not keep packets in order, so the Nitro card sends one flow's packets
  // over many paths at once (ipspace.net, "A Quick Look at AWS Scalable Reliable Datagram Protocol", 2022: SRD
  // sends "packets in parallel over all alternate paths"; AWS HPC blog "In the search for performance, there's
  // more than one way to build a network", 2022): a flow is not pinned to one path, so no hash collisions; the
  // even spread is modelled by the balanced static routes.
  f.push_back({"efa", "AWS Elastic Fabric Adapter (SRD), the node's NIC speed", true, 0, 10e-6, 0.6e-6, 64, false});
  // GCP GPUDirect-TCPX (A3: 4x 200 Gb/s NICs per 8 GPUs) and TCPXO (A3 Mega: 8x 200 Gb/s): GPU memory to TCP
  // NICs without the host copy (GCP "GPU machine types" documentation, UNVERIFIED in this session). No RDMA:
  // the per-message latency of a TCP stack, ESTIMATE 5 us (TCPX) and 3 us (TCPXO, which offloads the
  // receive path to the NIC); unfitted.
  // Multipath: hashed ECMP: TCP connections over Ethernet switches, each pinned to the path of its 5-tuple's hash
  // (the Juniper page cited for RoCE).
  f.push_back({"tcpx", "GCP GPUDirect-TCPX (A3), 200 Gb/s per NIC", true, 200 * kGbps, 5e-6, 0.6e-6, 64, false,
               FabricRouting::Hash});
  f.push_back({"tcpxo", "GCP GPUDirect-TCPXO (A3 Mega), 200 Gb/s per NIC", true, 200 * kGbps, 3e-6, 0.6e-6, 64, false,
               FabricRouting::Hash});
  // HPE Slingshot 11: Cassini NICs, 200 Gb/s per port; Rosetta switches, 64 ports of 200 Gb/s
  // (glennklockwood.com/garden/slingshot; ALCF Aurora interconnect page "64-port switch ... 64 200 Gbps ports");
  // "< 350 ns" cut-through switching (systemspecbase.com Slingshot 11 table, secondary), 0.5 us per hop with
  // cable. NCCL reaches it through aws-ofi-nccl over libfabric CXI; NIC latency ESTIMATE 0.6 us as RoCE's.
  // Multipath: balanced (D-mod-k). Rosetta routes adaptively, packet by packet, toward the least-loaded output
  // port (De Sensi et al., "An In-Depth Analysis of the Slingshot Interconnect", SC'20, arXiv:2008.08886:
  // "efficient adaptive routing and congestion control"; ALCF Aurora interconnect page: "adaptive routing ...
  // fast, well-informed decisions about optimal paths"), so flows are not pinned to colliding paths.
  f.push_back({"slingshot", "HPE Slingshot 11 (Cassini NICs, Rosetta switches), 200 Gb/s per NIC", true, 200 * kGbps,
               0.6e-6, 0.5e-6, 64, false});
  // A generic Ethernet fabric (what `fabric=ethernet` always meant): 0.6 us per hop, NIC links included
  // (ESTIMATE, the earlier presets.cpp value), the node's NIC speed. For NCCL over sockets without RDMA the
  // per-message cost is tens of us more, which this does not include.
  // Multipath: hashed ECMP on the 5-tuple, as RoCE.
  f.push_back({"ethernet", "generic Ethernet fabric, the node's NIC speed", true, 0, 0.6e-6, 0.6e-6, 64, false,
               FabricRouting::Hash});
  return f;
}

}  // namespace

const std::vector<FabricSpec>& fabrics() {
  static const std::vector<FabricSpec> kFabrics = make_fabrics();
  return kFabrics;
}

std::vector<std::string> fabric_names() {
  std::vector<std::string> v = {"infiniband"};
  for (const auto& f : fabrics()) v.push_back(f.name);
  return v;
}

FabricSpec fabric(const std::string& name, const std::string& where) {
  for (const auto& f : fabrics())
    if (f.name == name) return f;
  std::string list;
  for (const auto& n : fabric_names()) list += (list.empty() ? "" : ", ") + n;
  throw InputError(where, "a fabric (" + list + "), got '" + name + "'");
}

FabricSpec infiniband_for_speed(double nic_Bps) {
  if (nic_Bps <= 100 * kGbps * 1.001) return fabric("infiniband-edr");
  if (nic_Bps <= 200 * kGbps * 1.001) return fabric("infiniband-hdr");
  if (nic_Bps <= 400 * kGbps * 1.001) return fabric("infiniband-ndr");
  return fabric("infiniband-xdr");
}

}  // namespace fabricsim::topo
