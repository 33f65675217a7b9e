// TopologyBuilder validation and basic graph invariants.
#include <doctest/doctest.h>

#include <string>

#include "sim/base/error.hpp"
#include "topologies/topology.hpp"

using namespace fabricsim;
using namespace fabricsim::topo;

namespace {
Node gpu(const std::string& id, int host, int idx) {
  Node n;
  n.id = id;
  n.kind = NodeKind::Gpu;
  n.host = host;
  n.local_index = idx;
  return n;
}
Node sw(const std::string& id) {
  Node n;
  n.id = id;
  n.kind = NodeKind::NvSwitch;
  return n;
}
std::string error_of(TopologyBuilder&& b) {
  try {
    std::move(b).build("test");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("kind names round-trip") {
  for (NodeKind k : {NodeKind::Gpu, NodeKind::NvSwitch, NodeKind::PcieSwitch, NodeKind::Cpu, NodeKind::Nic,
                     NodeKind::IbSwitch, NodeKind::EthSwitch}) {
    NodeKind out;
    REQUIRE(parse_node_kind(to_string(k), out));
    CHECK(out == k);
  }
  for (LinkKind k : {LinkKind::NVLink, LinkKind::PCIe, LinkKind::InfiniBand, LinkKind::Ethernet}) {
    LinkKind out;
    REQUIRE(parse_link_kind(to_string(k), out));
    CHECK(out == k);
  }
  NodeKind nk;
  CHECK_FALSE(parse_node_kind("tpu", nk));
  LinkKind lk;
  CHECK_FALSE(parse_link_kind("nvlink5", lk));
}

TEST_CASE("build seals graph, adjacency and GPU rank order") {
  TopologyBuilder b("t");
  NodeId g1 = b.add_node(gpu("h1.g0", 1, 0));
  NodeId g0b = b.add_node(gpu("h0.g1", 0, 1));
  NodeId g0a = b.add_node(gpu("h0.g0", 0, 0));
  NodeId s = b.add_node(sw("s"));
  b.add_link(g1, s, LinkKind::NVLink, 1e9, 1e-7);
  b.add_link(g0a, s, LinkKind::NVLink, 2e9, 0, 2);
  b.add_link(g0b, s, LinkKind::NVLink, 1e9, 0);
  b.param("k", "v");
  Topology t = std::move(b).build();
  CHECK(t.name() == "t");
  CHECK(t.num_nodes() == 4);
  CHECK(t.num_links() == 3);
  CHECK(t.gpus() == std::vector<NodeId>{g0a, g0b, g1});
  CHECK(t.num_hosts() == 2);
  CHECK(t.find("s") == s);
  CHECK(t.find("nope") == kNoNode);
  CHECK(t.adjacent(s).size() == 3);
  CHECK(boost::num_vertices(t.graph()) == 4);
  CHECK(boost::num_edges(t.graph()) == 3);
  CHECK(t.params().at("k") == "v");
  LinkDir d = t.dir_from(1, s);
  CHECK(t.dir_src(d) == s);
  CHECK(t.dir_dst(d) == g0a);
  CHECK(Topology::link_of(d) == 1);
}

TEST_CASE("build rejects invalid graphs with the element named") {
  {
    TopologyBuilder b("t");
    NodeId a = b.add_node(gpu("x", 0, 0));
    NodeId c = b.add_node(gpu("x", 0, 1));
    b.add_link(a, c, LinkKind::NVLink, 1e9, 0);
    std::string e = error_of(std::move(b));
    CHECK(e.find("'x'") != std::string::npos);
    CHECK(e.find("unique") != std::string::npos);
  }
  {
    TopologyBuilder b("t");
    NodeId a = b.add_node(gpu("g", 0, 0));
    b.add_link(a, 7, LinkKind::NVLink, 1e9, 0);
    std::string e = error_of(std::move(b));
    CHECK(e.find("link 0") != std::string::npos);
    CHECK(e.find("exist") != std::string::npos);
  }
  for (double bw : {0.0, -5.0}) {
    TopologyBuilder b("t");
    NodeId a = b.add_node(gpu("g", 0, 0));
    NodeId c = b.add_node(sw("s"));
    b.add_link(a, c, LinkKind::NVLink, bw, 0);
    std::string e = error_of(std::move(b));
    CHECK(e.find("g - s") != std::string::npos);
    CHECK(e.find("positive") != std::string::npos);
  }
  {
    TopologyBuilder b("t");
    NodeId a = b.add_node(gpu("g", 0, 0));
    NodeId c = b.add_node(sw("s"));
    b.add_link(a, c, LinkKind::NVLink, 1e9, -1e-9);
    CHECK(error_of(std::move(b)).find("non-negative") != std::string::npos);
  }
  {
    TopologyBuilder b("t");
    NodeId a = b.add_node(gpu("g", 0, 0));
    NodeId c = b.add_node(sw("s"));
    b.add_node(gpu("lonely", 0, 1));
    b.add_link(a, c, LinkKind::NVLink, 1e9, 0);
    std::string e = error_of(std::move(b));
    CHECK(e.find("'lonely'") != std::string::npos);
    CHECK(e.find("connected") != std::string::npos);
  }
}
