#pragma once
// Timing and memory figures shared by the bench/ programs.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "models/collectives.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "topologies/io.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::bench {

// Monotonic wall clock, seconds.
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time (user + system) of this process and its waited-for children, seconds: on a shared machine it is
// a steadier measure than wall time.
inline double cpu_s() {
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return sec(self.ru_utime) + sec(self.ru_stime) + sec(children.ru_utime) + sec(children.ru_stime);
}

// Peak RSS of this process and of any child it waited for (the SimGrid engine runs in a forked child), MiB.
inline double peak_rss_MiB() {
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  return static_cast<double>(std::max(self.ru_maxrss, children.ru_maxrss)) / 1024.0;  // KiB on Linux
}

// `--flag value` pairs over `defaults` (flag -> default value); an unknown flag or a missing value is an
// InputError naming the flag.
inline std::map<std::string, std::string> parse_flags(int argc, char** argv, std::map<std::string, std::string> defaults) {
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (!defaults.count(k) || i + 1 >= argc) throw InputError(k, "a known flag with a value (see the source header)");
    defaults[k] = argv[i + 1];
  }
  return defaults;
}

// Runs `body` (returning the exit status) as a bench program's main: an InputError prints "<name>: <what>" and
// exits 2, any other error "<name>: error: <what>" and exits 1.
template <class Body>
int run_main(const char* name, Body&& body) {
  try {
    return body();
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return 1;
  }
}

// The cluster of the collective and engine benchmarks: a superpod of gpus/8 DGX H100 servers with each host's
// NVSwitch planes merged (models::merge_nvswitch_planes). InputError unless gpus is a multiple of 8.
inline topo::Topology dgx_h100_superpod(long long gpus) {
  if (gpus < 8 || gpus % 8 != 0) throw InputError("--gpus", "a multiple of 8 (DGX H100 servers)");
  return models::merge_nvswitch_planes(
      topo::build_preset("superpod", {{"nodes", std::to_string(gpus / 8)}, {"node", "dgx-h100"}}));
}

// `hosts` one-GPU servers (A100 80 GB, PCIe 32 GB/s to one 200 Gb/s NIC) on one InfiniBand switch, which reduces
// in the network (SHARP) when `sharp`: the graph of the second fuzzing pass's hand-written topology file of 20,000
// such hosts (docs/reliability.md), node for node, so that a run here is a run of that file.
inline topo::Topology one_switch_star(long long hosts, bool sharp) {
  if (hosts < 2) throw InputError("--gpus", "at least 2 hosts");
  topo::TopologyBuilder b("star");
  std::vector<topo::NodeId> gpu, nic;
  for (long long h = 0; h < hosts; ++h) {
    topo::Node g;
    g.id = "h" + std::to_string(h) + ".gpu0";
    g.kind = topo::NodeKind::Gpu;
    g.model = "a100-80gb";
    g.host = static_cast<int>(h);
    g.local_index = 0;
    g.nvlink_domain = static_cast<int>(h);
    gpu.push_back(b.add_node(g));
    topo::Node n;
    n.id = "h" + std::to_string(h) + ".nic0";
    n.kind = topo::NodeKind::Nic;
    n.host = static_cast<int>(h);
    n.local_index = 0;
    n.rail = 0;
    n.port_Bps = 25e9;
    nic.push_back(b.add_node(n));
  }
  topo::Node sw;
  sw.id = "sw";
  sw.kind = topo::NodeKind::IbSwitch;
  sw.model = "quantum";
  sw.tier = 1;
  sw.rail = 0;
  sw.sharp = sharp;
  const topo::NodeId s = b.add_node(sw);
  for (long long h = 0; h < hosts; ++h) b.add_link(gpu[h], nic[h], topo::LinkKind::PCIe, 32e9, 250e-9);
  for (long long h = 0; h < hosts; ++h) b.add_link(nic[h], s, topo::LinkKind::InfiniBand, 25e9, 600e-9);
  return std::move(b).build("star");
}

// A copy of `t` in which link `l` has `factor` times its bandwidth (both directions): a degraded link.
inline topo::Topology with_link_scaled(const topo::Topology& t, topo::LinkId l, double factor) {
  if (l >= t.num_links()) throw InputError("degraded link", "link " + std::to_string(l) + " does not exist");
  if (!(factor > 0)) throw InputError("degraded link", "expected a bandwidth factor > 0");
  topo::TopologyBuilder b(t.name());
  b.properties_of(t);
  for (const topo::Node& n : t.nodes()) b.add_node(n);
  for (topo::LinkId i = 0; i < t.num_links(); ++i) {
    const topo::Link& k = t.link(i);
    b.add_link(k.a, k.b, k.kind, k.bandwidth_Bps * (i == l ? factor : 1.0), k.latency_s, k.count);
  }
  return std::move(b).build();
}

// The first link between a NIC and a fabric switch (the network link of rail 0 of the first host).
inline topo::LinkId first_nic_uplink(const topo::Topology& t) {
  for (topo::LinkId i = 0; i < t.num_links(); ++i) {
    const topo::Link& k = t.link(i);
    const auto ka = t.node(k.a).kind, kb = t.node(k.b).kind;
    const bool nic = ka == topo::NodeKind::Nic || kb == topo::NodeKind::Nic;
    const bool sw = ka == topo::NodeKind::IbSwitch || kb == topo::NodeKind::IbSwitch || ka == topo::NodeKind::EthSwitch ||
                    kb == topo::NodeKind::EthSwitch;
    if (nic && sw) return i;
  }
  throw InputError("degraded link", "topology '" + t.name() + "' has no NIC-to-switch link");
}

// A skewed MoE dispatch as an all_to_allv matrix over n expert-parallel ranks (one expert per rank): every
// rank sends `bytes_per_rank` in total, split over the destinations in proportion to a Zipf law, share of
// rank j ~ (1 + place(j))^-skew, where place is a permutation drawn from `seed` (a 64-bit LCG, Knuth's MMIX
// constants, and a Fisher-Yates shuffle: the same matrix on every platform). Blocks are rounded down to whole
// 4-byte elements. skew 0 is the uniform all_to_all.
inline std::vector<std::vector<std::uint64_t>> zipf_alltoallv_matrix(std::size_t n, std::uint64_t bytes_per_rank,
                                                                    double skew, std::uint64_t seed) {
  std::vector<std::size_t> place(n);
  std::iota(place.begin(), place.end(), std::size_t{0});
  std::uint64_t x = seed * 2862933555777941757ull + 3037000493ull;
  for (std::size_t i = n; i > 1; --i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(place[i - 1], place[(x >> 33) % i]);
  }
  std::vector<double> share(n);
  double sum = 0;
  for (std::size_t j = 0; j < n; ++j) sum += share[j] = std::pow(1.0 + static_cast<double>(place[j]), -skew);
  std::vector<std::vector<std::uint64_t>> m(n, std::vector<std::uint64_t>(n));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      m[i][j] = static_cast<std::uint64_t>(static_cast<double>(bytes_per_rank) * share[j] / sum / 4.0) * 4;
  return m;
}

}  // namespace fabricsim::bench
