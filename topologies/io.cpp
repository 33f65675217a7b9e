// JSON topology files, Graphviz export, load_topology and summaries.
#include "topologies/io.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include <boost/graph/push_relabel_max_flow.hpp>

#include "sim/base/did_you_mean.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "topologies/routing.hpp"

namespace fabricsim::topo {

// ---- JSON -------------------------------------------------------------------------------------------------

namespace {

int small_int(ObjectReader& r, const std::string& key, int dflt, int lo) {
  std::int64_t v = r.integer_or(key, dflt);
  if (v < lo || v > std::numeric_limits<int>::max())
    json_fail(r.path_of(key), "expected an integer >= " + std::to_string(lo) + ", found " + std::to_string(v));
  return static_cast<int>(v);
}

// In a host that has NICs, every GPU must reach one of them through that host's PCIe switches and CPUs, as
// routing looks for a GPU's NIC (Routing::rail_nic): a path through another GPU does not count. NCCL's paths are
// the same: its search from a NIC never passes through a GPU (ncclTopoSetPaths), every GPU has its own PCI path
// to every NIC, and PXN only relays a GPU's sends over NVLink to a peer that is closer to the NIC, receives
// landing on the GPU directly (ncclTopoComputePaths, "Only enabling it in the GPU->NIC direction"); NVIDIA/nccl
// src/graph/paths.cc @5067397c. Found by fuzzing: such a GPU loaded and then failed in routing. Linear in the
// links: the host's switches and CPUs are grouped into connected parts first, and a part that touches a NIC of
// its host serves every GPU linked to it.
void check_gpus_reach_nics(const TopologyBuilder& b, const std::vector<std::pair<std::size_t, std::size_t>>& ends,
                           const std::function<JsonPath(std::size_t)>& node_path) {
  const std::size_t n = b.num_nodes();
  auto kind = [&](std::size_t i) { return b.node(static_cast<NodeId>(i)).kind; };
  auto host = [&](std::size_t i) { return b.node(static_cast<NodeId>(i)).host; };
  auto transit = [&](std::size_t i) { return host(i) >= 0 && kind(i) != NodeKind::Gpu && kind(i) != NodeKind::Nic; };
  std::set<int> hosts_with_nic;
  for (std::size_t i = 0; i < n; ++i)
    if (kind(i) == NodeKind::Nic && host(i) >= 0) hosts_with_nic.insert(host(i));
  if (hosts_with_nic.empty()) return;
  std::vector<std::size_t> part(n);
  for (std::size_t i = 0; i < n; ++i) part[i] = i;
  auto part_of = [&](std::size_t x) {
    while (part[x] != x) x = part[x] = part[part[x]];
    return x;
  };
  for (auto [a, c] : ends)
    if (transit(a) && transit(c) && host(a) == host(c)) part[part_of(a)] = part_of(c);
  std::vector<char> part_has_nic(n, 0), gpu_ok(n, 0);
  for (auto [a, c] : ends)
    for (auto [x, y] : {std::pair{a, c}, std::pair{c, a}})
      if (kind(x) == NodeKind::Nic && transit(y) && host(y) == host(x)) part_has_nic[part_of(y)] = 1;
  for (auto [a, c] : ends)
    for (auto [g, y] : {std::pair{a, c}, std::pair{c, a}})
      if (kind(g) == NodeKind::Gpu && host(y) == host(g) &&
          (kind(y) == NodeKind::Nic || (transit(y) && part_has_nic[part_of(y)])))
        gpu_ok[g] = 1;
  for (std::size_t i = 0; i < n; ++i)
    if (kind(i) == NodeKind::Gpu && hosts_with_nic.count(host(i)) && !gpu_ok[i])
      json_fail(node_path(i), "expected a GPU with a path of links to a NIC of its host (host " + std::to_string(host(i)) +
                                  ") through that host's PCIe switches or CPUs: '" +
                                  text_excerpt(b.node(static_cast<NodeId>(i)).id) +
                                  "' has none that avoids another GPU (a GPU does not forward another's network traffic; "
                                  "NCCL gives every GPU its own PCIe path to a NIC)");
}

}  // namespace

Topology topology_from_json(const Json& doc, const std::string& file) {
  ObjectReader root(doc, JsonPath{file, ""});
  const std::string format = root.string("format");
  if (format != "fabricsim-topology") json_fail(root.path_of("format"), "expected \"fabricsim-topology\"");
  const std::int64_t version = root.integer("version");
  if (version != 1) json_fail(root.path_of("version"), "expected 1 (the only supported version)");
  TopologyBuilder b(root.string_or("name", "unnamed"));
  if (const Json* params = root.object_optional("params")) {
    for (auto it = params->begin(); it != params->end(); ++it) {
      if (!it->is_string()) json_fail(root.path_of("params").child(it.key()), "expected a string value");
      b.param(it.key(), it->get<std::string>());
    }
  }
  if (root.has("routing")) {
    const std::string routing = root.string("routing");
    FabricRouting r;
    if (!parse_fabric_routing(routing, r))
      json_fail(root.path_of("routing"), "expected one of dmodk, hash (found \"" + text_excerpt(routing) + "\")");
    b.routing(r);
  }
  const Json& nodes = root.array("nodes");
  std::map<std::string, std::size_t> ids;
  std::vector<bool> is_gpu;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    ObjectReader r(nodes[i], root.path_of("nodes").index(i));
    Node n;
    n.id = r.string("id");
    if (n.id.empty()) json_fail(r.path_of("id"), "expected a non-empty node id");
    auto [it, fresh] = ids.emplace(n.id, i);
    if (!fresh)
      json_fail(r.path_of("id"), "expected a unique node id ('" + text_excerpt(n.id) + "' is already used by /nodes/" +
                                     std::to_string(it->second) + ")");
    const std::string kind = r.string("kind");
    if (!parse_node_kind(kind, n.kind))
      json_fail(r.path_of("kind"),
                "expected one of gpu, nvswitch, pcie_switch, cpu, nic, ib_switch, eth_switch (found \"" + text_excerpt(kind) + "\")");
    n.model = r.string_or("model", "");
    n.host = small_int(r, "host", -1, -1);
    n.local_index = small_int(r, "local_index", -1, -1);
    n.rail = small_int(r, "rail", -1, -1);
    n.tier = small_int(r, "tier", -1, -1);
    n.nvls = r.boolean_or("nvls", false);
    n.sharp = r.boolean_or("sharp", false);
    n.nvlink_domain = small_int(r, "nvlink_domain", -1, -1);
    n.port_Bps = r.has("port_bandwidth") ? r.bandwidth("port_bandwidth") : r.bandwidth_or("port_bandwidth", 0);
    if (r.has("memory")) {
      // A CPU's host memory: a number of bytes or a size with its unit ("480GB", "1TiB").
      if (n.kind != NodeKind::Cpu) json_fail(r.path_of("memory"), "expected no memory on a " + kind + " node (host memory belongs to cpu nodes)");
      n.memory_bytes = static_cast<double>(r.size("memory"));
      if (!(n.memory_bytes > 0)) json_fail(r.path_of("memory"), "expected a host memory > 0 bytes");
    }
    r.finish();
    is_gpu.push_back(n.kind == NodeKind::Gpu);
    b.add_node(std::move(n));
  }
  // Routing finds a GPU's NICs by its host (topologies/routing.cpp): in a file where some GPU names a host, one
  // without would have no path out of its server.
  auto host_of = [&](std::size_t i) { return b.node(static_cast<NodeId>(i)).host; };
  std::size_t with_host = 0;
  while (with_host < nodes.size() && !(is_gpu[with_host] && host_of(with_host) >= 0)) ++with_host;
  for (std::size_t i = 0; i < nodes.size() && with_host < nodes.size(); ++i)
    if (is_gpu[i] && host_of(i) < 0)
      json_fail(root.path_of("nodes").index(i), "expected a \"host\": GPU '" + text_excerpt(nodes[i]["id"].get<std::string>()) +
                                                    "' has none while /nodes/" + std::to_string(with_host) + " names host " +
                                                    std::to_string(host_of(with_host)) + " (every GPU has a host, or none does)");
  const Json& links = root.array("links");
  std::vector<bool> connected(nodes.size(), false);
  std::vector<std::pair<std::size_t, std::size_t>> ends;  // each link's endpoints
  // Components of the link graph (union-find, links undirected): every GPU must reach every other.
  std::vector<std::size_t> comp(nodes.size());
  for (std::size_t i = 0; i < comp.size(); ++i) comp[i] = i;
  auto root_of = [&](std::size_t x) {
    while (comp[x] != x) x = comp[x] = comp[comp[x]];
    return x;
  };
  for (std::size_t i = 0; i < links.size(); ++i) {
    ObjectReader r(links[i], root.path_of("links").index(i));
    auto endpoint = [&](const std::string& key) -> NodeId {
      std::string id = r.string(key);
      auto it = ids.find(id);
      if (it == ids.end()) json_fail(r.path_of(key), "expected the id of a node in /nodes (no node '" + text_excerpt(id) + "')");
      return static_cast<NodeId>(it->second);
    };
    NodeId a = endpoint("a");
    NodeId c = endpoint("b");
    if (a == c) json_fail(r.path_of("b"), "expected a node other than a (self-loops are not allowed)");
    const std::string kind = r.string("kind");
    LinkKind lk;
    if (!parse_link_kind(kind, lk))
      json_fail(r.path_of("kind"), "expected one of nvlink, pcie, infiniband, ethernet (found \"" + text_excerpt(kind) + "\")");
    double bw = r.bandwidth("bandwidth");
    double lat = r.time_or("latency", 0.0);
    int count = small_int(r, "count", 1, 1);
    r.finish();
    connected[a] = connected[c] = true;
    ends.emplace_back(a, c);
    comp[root_of(a)] = root_of(c);
    b.add_link(a, c, lk, bw, lat, count);
  }
  const auto first_gpu = static_cast<std::size_t>(std::find(is_gpu.begin(), is_gpu.end(), true) - is_gpu.begin());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!is_gpu[i]) continue;
    if (!connected[i])
      json_fail(root.path_of("nodes").index(i), "expected a GPU connected by at least one link (no link names '" +
                                                    text_excerpt(nodes[i]["id"].get<std::string>()) + "')");
    if (root_of(i) != root_of(first_gpu))
      json_fail(root.path_of("nodes").index(i),
                "expected a GPU with a path of links to every other GPU (none from '" +
                    text_excerpt(nodes[i]["id"].get<std::string>()) + "' to '" +
                    text_excerpt(nodes[first_gpu]["id"].get<std::string>()) + "', /nodes/" + std::to_string(first_gpu) + ")");
  }
  check_gpus_reach_nics(b, ends, [&](std::size_t i) { return root.path_of("nodes").index(i); });
  root.finish();
  return std::move(b).build(file);
}

Topology load_topology_file(const std::string& path) { return topology_from_json(load_json_file(path), path); }

Json topology_to_json(const Topology& t) {
  Json doc = Json::object();
  doc["format"] = "fabricsim-topology";
  doc["version"] = 1;
  doc["name"] = t.name();
  Json params = Json::object();
  for (const auto& [k, v] : t.params()) params[k] = v;
  doc["params"] = params;
  doc["routing"] = to_string(t.routing());
  Json nodes = Json::array();
  for (const Node& n : t.nodes()) {
    Json j = Json::object();
    j["id"] = n.id;
    j["kind"] = to_string(n.kind);
    if (!n.model.empty()) j["model"] = n.model;
    if (n.host >= 0) j["host"] = n.host;
    if (n.local_index >= 0) j["local_index"] = n.local_index;
    if (n.rail >= 0) j["rail"] = n.rail;
    if (n.tier >= 0) j["tier"] = n.tier;
    if (n.nvls) j["nvls"] = true;
    if (n.sharp) j["sharp"] = true;
    if (n.nvlink_domain >= 0) j["nvlink_domain"] = n.nvlink_domain;
    if (n.port_Bps > 0) j["port_bandwidth"] = n.port_Bps;
    if (n.memory_bytes > 0) j["memory"] = static_cast<std::uint64_t>(n.memory_bytes);
    nodes.push_back(std::move(j));
  }
  doc["nodes"] = std::move(nodes);
  Json links = Json::array();
  for (const Link& l : t.links()) {
    Json j = Json::object();
    j["a"] = t.node(l.a).id;
    j["b"] = t.node(l.b).id;
    j["kind"] = to_string(l.kind);
    j["bandwidth"] = l.bandwidth_Bps;  // bytes/s; nlohmann prints doubles with round-trip precision
    j["latency"] = l.latency_s;        // seconds
    if (l.count != 1) j["count"] = l.count;
    links.push_back(std::move(j));
  }
  doc["links"] = std::move(links);
  return doc;
}

namespace {

std::string dot_quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

const char* dot_shape(NodeKind k) {
  switch (k) {
    case NodeKind::Gpu: return "box";
    case NodeKind::NvSwitch: return "hexagon";
    case NodeKind::PcieSwitch: return "diamond";
    case NodeKind::Cpu: return "octagon";
    case NodeKind::Nic: return "ellipse";
    case NodeKind::IbSwitch: return "doubleoctagon";
    case NodeKind::EthSwitch: return "doubleoctagon";
  }
  return "ellipse";
}

const char* dot_color(LinkKind k) {
  switch (k) {
    case LinkKind::NVLink: return "darkgreen";
    case LinkKind::PCIe: return "gray40";
    case LinkKind::InfiniBand: return "blue";
    case LinkKind::Ethernet: return "orange";
  }
  return "black";
}

}  // namespace

std::string topology_to_dot(const Topology& t) {
  std::ostringstream o;
  o << "graph " << dot_quote(t.name()) << " {\n  graph [overlap=false];\n";
  std::map<int, std::vector<NodeId>> by_host;
  std::vector<NodeId> fabric;
  for (NodeId v = 0; v < t.num_nodes(); ++v) {
    if (t.node(v).host >= 0)
      by_host[t.node(v).host].push_back(v);
    else
      fabric.push_back(v);
  }
  auto emit = [&](NodeId v, const char* indent) {
    const Node& n = t.node(v);
    std::string label = n.id;
    if (!n.model.empty()) label += "\\n" + n.model;
    o << indent << dot_quote(n.id) << " [shape=" << dot_shape(n.kind) << ", label=" << dot_quote(label) << "];\n";
  };
  for (const auto& [h, vs] : by_host) {
    o << "  subgraph \"cluster_host" << h << "\" {\n    label=\"host " << h << "\";\n";
    for (NodeId v : vs) emit(v, "    ");
    o << "  }\n";
  }
  for (NodeId v : fabric) emit(v, "  ");
  for (const Link& l : t.links()) {
    std::string label = std::string(to_string(l.kind)) + (l.count > 1 ? " x" + std::to_string(l.count) : "") +
                        "\\n" + format_bandwidth(l.bandwidth_Bps);
    o << "  " << dot_quote(t.node(l.a).id) << " -- " << dot_quote(t.node(l.b).id) << " [color=" << dot_color(l.kind)
      << ", label=" << dot_quote(label) << "];\n";
  }
  o << "}\n";
  return o.str();
}

Topology load_topology(const std::string& preset_or_file, const std::map<std::string, std::string>& params,
                       const std::string& params_at) {
  if (is_preset(preset_or_file)) {
    if (params_at.empty()) return build_preset(preset_or_file, params);
    try {
      return build_preset(preset_or_file, params);
    } catch (const InputError& e) {
      // The preset builder names parameters as command-line flags ("--param nodes: ..."); these came from a file.
      const std::string m = e.what();
      if (m.rfind("--param ", 0) == 0) throw InputError(params_at + "/" + m.substr(8));
      throw;
    }
  }
  std::error_code ec;
  if (std::filesystem::is_regular_file(preset_or_file, ec)) {
    if (!params.empty())
      throw InputError("--param " + params.begin()->first,
                       "no --param with a topology file (parameters apply to presets only)");
    return load_topology_file(preset_or_file);
  }
  std::string list;
  std::vector<std::string> names;
  for (const auto& p : presets()) list += (list.empty() ? "" : ", ") + p.name, names.push_back(p.name);
  throw InputError("topology '" + preset_or_file + "'",
                   "a preset name" + did_you_mean(preset_or_file, names) + " (" + list + ") or an existing JSON file");
}

// ---- Summary ----------------------------------------------------------------------------------------------

double bisection_bandwidth(const Topology& t) {
  const auto& g = t.gpus();
  if (g.size() < 2) return 0;
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using FlowGraph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<boost::edge_capacity_t, double,
                      boost::property<boost::edge_residual_capacity_t, double,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  const std::size_t n = t.num_nodes();
  FlowGraph fg(n + 2);
  auto cap = boost::get(boost::edge_capacity, fg);
  auto rev = boost::get(boost::edge_reverse, fg);
  auto add = [&](std::size_t u, std::size_t v, double c) {
    auto e1 = boost::add_edge(u, v, fg).first;
    auto e2 = boost::add_edge(v, u, fg).first;
    cap[e1] = c;
    cap[e2] = 0;
    rev[e1] = e2;
    rev[e2] = e1;
  };
  double total = 0;
  for (const Link& l : t.links()) {
    add(l.a, l.b, l.bandwidth_Bps);
    add(l.b, l.a, l.bandwidth_Bps);
    total += l.bandwidth_Bps;
  }
  const std::size_t s = n, sink = n + 1;
  const std::size_t half = g.size() / 2;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (i < half)
      add(s, g[i], 2 * total + 1);
    else
      add(g[i], sink, 2 * total + 1);
  }
  return boost::push_relabel_max_flow(fg, s, sink);
}

TopologySummary summarize(const Topology& t, const SummaryOptions& opt) {
  TopologySummary s;
  for (const Node& n : t.nodes()) s.node_counts[to_string(n.kind)]++;
  for (const Link& l : t.links()) {
    s.link_counts[to_string(l.kind)]++;
    s.physical_link_counts[to_string(l.kind)] += l.count;
  }
  s.gpus = static_cast<int>(t.gpus().size());
  s.hosts = t.num_hosts();
  if (!t.gpus().empty()) {
    NodeId g0 = t.gpus()[0];
    for (auto [l, w] : t.adjacent(g0))
      if (t.link(l).kind == LinkKind::NVLink) s.gpu_nvlink_Bps += t.link(l).bandwidth_Bps;
    const int host = t.node(g0).host;
    if (host >= 0) {
      double nic = 0;
      int gpus_in_host = 0;
      for (NodeId v = 0; v < t.num_nodes(); ++v) {
        const Node& n = t.node(v);
        if (n.host != host) continue;
        if (n.kind == NodeKind::Gpu) ++gpus_in_host;
        if (n.kind != NodeKind::Nic) continue;
        if (n.port_Bps > 0) {
          nic += n.port_Bps;
        } else {
          for (auto [l, w] : t.adjacent(v))
            if (t.link(l).kind == LinkKind::InfiniBand || t.link(l).kind == LinkKind::Ethernet)
              nic += t.link(l).bandwidth_Bps;
        }
      }
      if (gpus_in_host > 0) s.gpu_network_Bps = nic / gpus_in_host;
    }
  }
  if (opt.bisection) s.bisection_Bps = bisection_bandwidth(t);
  if (opt.diameter) {
    Routing r(t);
    const auto& g = t.gpus();
    std::vector<NodeId> sources;
    if (g.size() <= opt.exact_diameter_max_gpus) {
      sources = g;
      s.diameter_exact = true;
    } else {
      // GPUs of the first and of the last host as sources, every GPU as destination.
      const int h0 = t.node(g.front()).host, h1 = t.node(g.back()).host;
      for (NodeId v : g)
        if (t.node(v).host == h0 || t.node(v).host == h1) sources.push_back(v);
      s.diameter_exact = false;
    }
    std::vector<LinkDir> path;
    for (NodeId a : sources)
      for (NodeId b : g) {
        try {
          r.compute_route(a, b, path);
        } catch (const InputError&) {
          ++s.unreachable_gpu_pairs;
          continue;
        }
        s.diameter_hops = std::max(s.diameter_hops, static_cast<int>(path.size()));
      }
  }
  return s;
}

TopologySummary summarize(const Topology& t) { return summarize(t, SummaryOptions{}); }

std::string summary_text(const Topology& t, const TopologySummary& s) {
  std::ostringstream o;
  o << "topology: " << t.name() << "\n";
  if (!t.params().empty()) {
    o << "parameters:";
    for (const auto& [k, v] : t.params()) o << " " << k << "=" << v;
    o << "\n";
  }
  o << "GPUs: " << s.gpus << " on " << s.hosts << " host(s)\n";
  if (!t.gpus().empty() && t.node(t.gpus()[0]).host >= 0) {
    // The first GPU's server: its CPUs' memory (docs/topology.md "Host memory"), when the topology gives it.
    const int host = t.node(t.gpus()[0]).host;
    const double mem = t.host_memory_bytes(host);
    if (mem > 0) {
      int gpus_in_host = 0;
      for (NodeId g : t.gpus()) gpus_in_host += t.node(g).host == host;
      char b[160];
      std::snprintf(b, sizeof b, "host memory: %.4g GB per host (%.4g GB per GPU)\n", mem / 1e9, mem / 1e9 / gpus_in_host);
      o << b;
    }
  }
  o << "nodes: " << t.num_nodes() << " (";
  bool first = true;
  for (const auto& [k, v] : s.node_counts) {
    o << (first ? "" : ", ") << k << " " << v;
    first = false;
  }
  o << ")\n";
  o << "links: " << t.num_links() << " (";
  first = true;
  for (const auto& [k, v] : s.link_counts) {
    o << (first ? "" : ", ") << k << " " << v;
    auto it = s.physical_link_counts.find(k);
    if (it != s.physical_link_counts.end() && it->second != v) o << " = " << it->second << " physical";
    first = false;
  }
  o << ")\n";
  o << "per-GPU NVLink bandwidth: " << format_bandwidth(s.gpu_nvlink_Bps) << " per direction\n";
  o << "per-GPU network (NIC) bandwidth: " << format_bandwidth(s.gpu_network_Bps) << " per direction\n";
  o << "bisection bandwidth: " << format_bandwidth(s.bisection_Bps)
    << " per direction (min cut between GPU ranks [0, n/2) and [n/2, n))\n";
  o << "diameter: " << s.diameter_hops << " hops over routed GPU pairs"
    << (s.diameter_exact ? " (all pairs)" : " (sources: GPUs of the first and last host)") << "\n";
  if (s.unreachable_gpu_pairs > 0)
    o << "warning: " << s.unreachable_gpu_pairs << " ordered GPU pairs have no route (disconnected graph)\n";
  return o.str();
}

Json summary_json(const Topology& t, const TopologySummary& s) {
  Json j = Json::object();
  j["name"] = t.name();
  Json params = Json::object();
  for (const auto& [k, v] : t.params()) params[k] = v;
  j["params"] = params;
  j["nodes"] = t.num_nodes();
  j["links"] = t.num_links();
  j["node_counts"] = s.node_counts;
  j["link_counts"] = s.link_counts;
  j["physical_link_counts"] = s.physical_link_counts;
  j["gpus"] = s.gpus;
  j["hosts"] = s.hosts;
  j["gpu_nvlink_Bps"] = s.gpu_nvlink_Bps;
  j["gpu_network_Bps"] = s.gpu_network_Bps;
  j["bisection_Bps"] = s.bisection_Bps;
  j["diameter_hops"] = s.diameter_hops;
  j["diameter_exact"] = s.diameter_exact;
  j["unreachable_gpu_pairs"] = s.unreachable_gpu_pairs;
  return j;
}

}  // namespace fabricsim::topo
