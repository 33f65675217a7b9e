// Scale-out fabrics (topologies/fabrics.hpp) and the superpod preset's `fabric` and `routing` parameters.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "sim/base/error.hpp"
#include "topologies/fabrics.hpp"
#include "topologies/io.hpp"
#include "topologies/topology.hpp"

using namespace fabricsim;
using namespace fabricsim::topo;

namespace {
// Latency of the first link from a NIC to a switch, and of the first switch-to-switch link.
std::pair<double, double> link_latencies(const Topology& t) {
  double nic = -1, sw = -1;
  auto is_switch = [&](NodeId v) { return t.node(v).kind == NodeKind::IbSwitch || t.node(v).kind == NodeKind::EthSwitch; };
  for (NodeId v = 0; v < t.num_nodes(); ++v)
    for (const auto& [l, nb] : t.adjacent(v)) {
      if (t.node(v).kind == NodeKind::Nic && is_switch(nb) && nic < 0) nic = t.link(l).latency_s;
      if (is_switch(v) && is_switch(nb) && sw < 0) sw = t.link(l).latency_s;
    }
  return {nic, sw};
}
}  // namespace

TEST_CASE("every named fabric builds a superpod with its line rate, latencies, radix and SHARP") {
  for (const auto& f : fabrics()) {
    CAPTURE(f.name);
    Topology t = build_preset("superpod", {{"nodes", "4"}, {"fabric", f.name}});
    // SHARP only when asked for (NCCL runs CollNet only with the SHARP plugin and NCCL_COLLNET_ENABLE=1), and
    // only on a fabric whose switches reduce.
    for (NodeId v = 0; v < t.num_nodes(); ++v) CHECK_FALSE(t.node(v).sharp);
    CHECK(t.params().count("sharp") == 0);
    if (f.sharp) {
      Topology s = build_preset("superpod", {{"nodes", "4"}, {"fabric", f.name}, {"sharp", "true"}});
      int sharp = 0;
      for (NodeId v = 0; v < s.num_nodes(); ++v) sharp += s.node(v).sharp ? 1 : 0;
      CHECK(sharp > 0);
    } else {
      CHECK_THROWS_WITH_AS(build_preset("superpod", {{"nodes", "4"}, {"fabric", f.name}, {"sharp", "true"}}),
                           doctest::Contains("no in-network reduction"), InputError);
    }
    const double nic_Bps = f.nic_Bps > 0 ? f.nic_Bps : 50e9;  // dgx-h100's 400 Gb/s NICs otherwise
    bool any_switch = false;
    for (NodeId v = 0; v < t.num_nodes(); ++v) {
      const auto k = t.node(v).kind;
      if (k != NodeKind::IbSwitch && k != NodeKind::EthSwitch) continue;
      any_switch = true;
      CHECK((k == NodeKind::EthSwitch) == f.ethernet);
    }
    CHECK(any_switch);
    auto [nic_lat, sw_lat] = link_latencies(t);
    CHECK(nic_lat == doctest::Approx(f.nic_latency_s));
    CHECK(sw_lat == doctest::Approx(f.switch_latency_s));
    CHECK(t.params().at("radix") == std::to_string(f.radix));
    // The NIC's port speed.
    for (NodeId v = 0; v < t.num_nodes(); ++v)
      if (t.node(v).kind == NodeKind::Nic) {
        for (const auto& [l, nb] : t.adjacent(v))
          if (t.node(nb).kind == NodeKind::IbSwitch || t.node(nb).kind == NodeKind::EthSwitch)
            CHECK(t.link(l).bandwidth_Bps == doctest::Approx(nic_Bps));
        break;
      }
  }
}

TEST_CASE("fabric=infiniband follows the NIC speed; nic_bandwidth overrides a fabric's rate; unknown names fail") {
  CHECK(infiniband_for_speed(100e9 / 8).name == "infiniband-edr");
  CHECK(infiniband_for_speed(200e9 / 8).name == "infiniband-hdr");
  CHECK(infiniband_for_speed(400e9 / 8).name == "infiniband-ndr");
  CHECK(infiniband_for_speed(800e9 / 8).name == "infiniband-xdr");
  // dgx-a100's HDR NICs: 40-port Quantum switches.
  CHECK(build_preset("superpod", {{"nodes", "4"}, {"node", "dgx-a100"}}).params().at("radix") == "40");
  Topology s = build_preset("superpod", {{"nodes", "2"}, {"fabric", "slingshot"}, {"nic_bandwidth", "100Gbps"}});
  CHECK(s.params().at("nic_bandwidth") == "12.5GB/s");
  CHECK_THROWS_WITH_AS(build_preset("superpod", {{"fabric", "omnipath"}}), doctest::Contains("slingshot"), InputError);
  CHECK_THROWS_WITH_AS(build_preset("superpod", {{"sharp", "yes"}}), doctest::Contains("true, false"), InputError);
}

TEST_CASE("the fabric decides the multipath: hashed ECMP on RoCE, TCPX/TCPXO and Ethernet, D-mod-k elsewhere") {
  // topologies/fabrics.cpp cites each: Ethernet switches hash the 5-tuple (RoCE v2: one UDP source port per QP);
  // InfiniBand's subnet manager routes are destination-based; SRD (EFA) sprays, Slingshot routes adaptively.
  const std::map<std::string, FabricRouting> want = {
      {"infiniband", FabricRouting::DModK},     {"infiniband-edr", FabricRouting::DModK},
      {"infiniband-hdr", FabricRouting::DModK}, {"infiniband-ndr", FabricRouting::DModK},
      {"infiniband-xdr", FabricRouting::DModK}, {"roce", FabricRouting::Hash},
      {"efa", FabricRouting::DModK},            {"tcpx", FabricRouting::Hash},
      {"tcpxo", FabricRouting::Hash},           {"slingshot", FabricRouting::DModK},
      {"ethernet", FabricRouting::Hash}};
  REQUIRE(want.size() == fabric_names().size());
  for (const auto& name : fabric_names()) {
    CAPTURE(name);
    REQUIRE(want.count(name) == 1);
    const Topology t = build_preset("superpod", {{"nodes", "2"}, {"fabric", name}});
    CHECK(t.routing() == want.at(name));
    // Recorded as a parameter where it is not the InfiniBand default (InfiniBand superpods keep their parameters).
    CHECK(t.params().count("routing") == (want.at(name) == FabricRouting::Hash ? 1u : 0u));
    // `routing` overrides the fabric's, both ways, and is then recorded.
    for (const char* r : {"dmodk", "hash"}) {
      const Topology o = build_preset("superpod", {{"nodes", "2"}, {"fabric", name}, {"routing", r}});
      CHECK(std::string(to_string(o.routing())) == r);
      CHECK(o.params().at("routing") == r);
    }
  }
  // Presets without a scale-out fabric keep D-mod-k; a bad value names the accepted ones.
  CHECK(build_preset("dgx-h100", {}).routing() == FabricRouting::DModK);
  CHECK_THROWS_WITH_AS(build_preset("superpod", {{"fabric", "roce"}, {"routing", "ecmp"}}),
                       doctest::Contains("--param routing: one of dmodk, hash (got 'ecmp')"), InputError);
  CHECK_THROWS_WITH_AS(build_preset("dgx-h100", {{"routing", "hash"}}), doctest::Contains("--param routing"), InputError);
}
