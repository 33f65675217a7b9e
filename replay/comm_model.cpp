#include "replay/comm_model.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "sim/base/error.hpp"

namespace fabricsim::sim {

using workloads::CollOp;

AnalyticCommParams analytic_params(const models::Calibration& calib, const topo::Topology& t) {
  AnalyticCommParams p;
  const models::AlgoProtoParams& ring = calib.of(models::Algorithm::Ring, models::Protocol::Simple);
  p.base_latency_s = ring.base_latency_s;
  p.intra_step_latency_s = ring.step_latency_s;
  p.inter_step_latency_s = ring.net_step_latency_s;
  p.nvlink_efficiency = calib.nvlink_efficiency(t.gpus().empty() ? std::string("default") : t.node(t.gpus().front()).model);
  p.net_efficiency = calib.factors.network_efficiency;
  p.pcie_efficiency = calib.factors.pcie_efficiency;
  return p;
}

AnalyticCommModel::AnalyticCommModel(const topo::Topology& t)
    : AnalyticCommModel(t, analytic_params(models::default_calibration(), t)) {}

AnalyticCommModel::AnalyticCommModel(const topo::Topology& t, AnalyticCommParams p)
    : t_(t), p_(p), routing_(t) {
  const auto& gpus = t.gpus();
  nvlink_Bps_.assign(gpus.size(), 0);
  pcie_Bps_.assign(gpus.size(), 0);
  nic_Bps_.assign(gpus.size(), 0);
  auto net_bw = [&](topo::NodeId nic) {
    double bw = 0;
    for (const auto& [l, nb] : t.adjacent(nic)) {
      auto k = t.link(l).kind;
      if (k == topo::LinkKind::InfiniBand || k == topo::LinkKind::Ethernet) bw += t.link(l).bandwidth_Bps;
    }
    return bw;
  };
  for (std::size_t r = 0; r < gpus.size(); ++r) {
    for (const auto& [l, nb] : t.adjacent(gpus[r])) {
      if (t.link(l).kind == topo::LinkKind::NVLink) nvlink_Bps_[r] += t.link(l).bandwidth_Bps;
      if (t.link(l).kind == topo::LinkKind::PCIe) pcie_Bps_[r] = std::max(pcie_Bps_[r], t.link(l).bandwidth_Bps);
    }
    topo::NodeId nic = routing_.rail_nic(gpus[r]);
    if (nic != topo::kNoNode) nic_Bps_[r] = net_bw(nic);
  }
  for (topo::NodeId n = 0; n < t.num_nodes(); ++n)
    if (t.node(n).kind == topo::NodeKind::Nic && t.node(n).host >= 0) host_nic_Bps_[t.node(n).host] += net_bw(n);
}

double AnalyticCommModel::gpu_nvlink_Bps(std::int32_t rank) const { return nvlink_Bps_.at(rank); }
double AnalyticCommModel::host_nic_Bps(int host) const {
  auto it = host_nic_Bps_.find(host);
  return it == host_nic_Bps_.end() ? 0 : it->second;
}

std::string AnalyticCommModel::describe() const {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "communication: analytic NCCL ring model (no engine): base latency %.1f us, per step %.1f us "
                "intra / %.1f us inter-node, NVLink efficiency %.3f, network efficiency %.2f; concurrent identical "
                "groups ('mirrors') share host NICs; no contention between different collectives",
                p_.base_latency_s * 1e6, p_.intra_step_latency_s * 1e6, p_.inter_step_latency_s * 1e6,
                p_.nvlink_efficiency, p_.net_efficiency);
  return buf;
}

CommTiming AnalyticCommModel::collective(const workloads::Communicator& comm, CollOp op, double bytes,
                                         const std::string& algorithm) {
  auto key = std::make_tuple(static_cast<const void*>(&comm), static_cast<int>(op), bytes);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  return cache_[key] = idle_collective(comm, op, bytes, algorithm);
}

CommTiming AnalyticCommModel::idle_collective(const workloads::Communicator& comm, CollOp op, double bytes,
                                              const std::string& algorithm) {
  const auto& gpus = t_.gpus();
  const int n = static_cast<int>(comm.ranks.size());
  CommTiming out;
  out.algorithm = (op == CollOp::AllToAll || op == CollOp::AllToAllv) ? "pairwise" : "ring";
  out.protocol = "simple";
  if (!algorithm.empty() && algorithm != out.algorithm)
    out.algorithm = algorithm + "(modelled as " + out.algorithm + ")";
  if (n <= 1 || bytes <= 0) {
    out.duration_s = 0;
    return out;
  }
  std::map<int, int> per_host;
  int domain = -2;
  double nv = 1e300, pcie = 1e300, nic = 1e300;
  for (auto r : comm.ranks) {
    if (r < 0 || static_cast<std::size_t>(r) >= gpus.size())
      throw InputError("communicator '" + comm.name + "'", "rank " + std::to_string(r) + " is not a GPU of the topology (" +
                                                              std::to_string(gpus.size()) + " GPUs)");
    const auto& node = t_.node(gpus[r]);
    ++per_host[node.host];
    int d = node.nvlink_domain;
    domain = (domain == -2) ? d : (domain == d ? d : -1);
    nv = std::min(nv, nvlink_Bps_[r]);
    pcie = std::min(pcie, pcie_Bps_[r]);
    nic = std::min(nic, nic_Bps_[r]);
  }
  const int nodes = static_cast<int>(per_host.size());
  int g = 0;
  for (const auto& [h, c] : per_host) g = std::max(g, c);
  const bool one_nvlink_domain = domain >= 0 && nv > 0;
  const double intra_bw = nv > 0 ? nv * p_.nvlink_efficiency : pcie * p_.pcie_efficiency;
  double busbw;
  bool crosses_net = !one_nvlink_domain && nodes > 1;
  if (!crosses_net) {
    busbw = intra_bw;
  } else {
    double host_bw = 1e300;
    for (const auto& [h, c] : per_host) host_bw = std::min(host_bw, host_nic_Bps(h));
    if (host_bw <= 0 || nic <= 0)
      throw InputError("communicator '" + comm.name + "'", "spans hosts but a host has no network interface");
    double inter = std::min(host_bw / (1.0 + comm.mirrors), g * nic) * p_.net_efficiency;
    busbw = g > 1 ? std::min(intra_bw, inter) : inter;
  }
  busbw = std::min(busbw, p_.busbw_cap_Bps);
  const int inter_nodes = crosses_net ? nodes : 1;
  int nsteps = 0, ninter = 0;
  double factor = 0;
  switch (op) {
    case CollOp::AllReduce:
      nsteps = 2 * (n - 1), ninter = 2 * (inter_nodes - 1), factor = 2.0 * (n - 1) / n;
      break;
    case CollOp::AllGather:
    case CollOp::ReduceScatter:
      nsteps = n - 1, ninter = inter_nodes - 1, factor = double(n - 1) / n;
      break;
    case CollOp::Broadcast:
    case CollOp::Reduce:
      nsteps = n, ninter = inter_nodes, factor = 1.0;
      break;
    case CollOp::AllToAllv:
    case CollOp::AllToAll: {
      // all_to_allv: priced as the uniform all_to_all of its busiest rank (largest send or receive share).
      if (op == CollOp::AllToAllv && !comm.a2a_matrix.empty()) {
        double worst = 0;
        for (std::size_t i = 0; i < comm.a2a_matrix.size(); ++i) {
          double row = 0, col = 0;
          for (std::size_t j = 0; j < comm.a2a_matrix.size(); ++j)
            row += comm.a2a_matrix[i][j], col += comm.a2a_matrix[j][i];
          worst = std::max({worst, row, col});
        }
        bytes *= worst;
      }
      // Each rank sends bytes/n to every other member; the part leaving the host crosses the host NICs,
      // shared by the host's g members (and by mirrors); the rest crosses NVLink.
      double lat = p_.base_latency_s + (crosses_net ? p_.inter_step_latency_s : p_.intra_step_latency_s);
      double t_intra = bytes * (g - 1) / n / intra_bw;
      double t_inter = 0;
      if (crosses_net) {
        double host_bw = 1e300;
        for (const auto& [h, c] : per_host) host_bw = std::min(host_bw, host_nic_Bps(h));
        t_inter = g * (1.0 + comm.mirrors) * bytes * double(n - g) / n / (host_bw * p_.net_efficiency);
      } else {
        t_intra = bytes * double(n - 1) / n / intra_bw;
      }
      out.duration_s = lat + std::max(t_intra, t_inter);
      return out;
    }
  }
  double lat = p_.base_latency_s + (nsteps - ninter) * p_.intra_step_latency_s + ninter * p_.inter_step_latency_s;
  out.duration_s = lat + factor * bytes / busbw;
  return out;
}

CommTiming AnalyticCommModel::p2p(std::int32_t src, std::int32_t dst, double bytes) {
  const auto& gpus = t_.gpus();
  if (src < 0 || dst < 0 || static_cast<std::size_t>(std::max(src, dst)) >= gpus.size())
    throw InputError("send/recv", "rank outside the topology's " + std::to_string(gpus.size()) + " GPUs");
  auto key = std::make_tuple(static_cast<const void*>(nullptr), src * 65536 + dst, bytes);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  topo::NodeId a = gpus[src], b = gpus[dst];
  const auto& na = t_.node(a);
  const auto& nb = t_.node(b);
  bool nvl = na.nvlink_domain >= 0 && na.nvlink_domain == nb.nvlink_domain;
  double eff = nvl ? p_.nvlink_efficiency : (na.host == nb.host ? p_.pcie_efficiency : p_.net_efficiency);
  CommTiming out;
  out.algorithm = "p2p";
  out.protocol = "simple";
  out.duration_s = p_.base_latency_s + routing_.latency(a, b) + bytes / (routing_.bottleneck_bandwidth(a, b) * eff);
  return cache_[key] = out;
}

}  // namespace fabricsim::sim
