#include "workloads/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <set>

#include "models/calibration.hpp"
#include "sim/base/error.hpp"

namespace fabricsim::workloads {

namespace {

std::string fmt(double v, const char* f = "%.4g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// A fraction given as 0.5 or "50%".
double fraction(const Json& v, const JsonPath& at, bool allow_zero, double hi) {
  double x = 0;
  if (v.is_number()) {
    x = v.get<double>();
  } else if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s.empty() || s.back() != '%') json_fail(at, "a fraction such as 0.5 or \"50%\"");
    try {
      std::size_t used = 0;
      x = std::stod(s.substr(0, s.size() - 1), &used) / 100.0;
      if (used != s.size() - 1) json_fail(at, "a fraction such as 0.5 or \"50%\"");
    } catch (const std::logic_error&) {
      json_fail(at, "a fraction such as 0.5 or \"50%\"");
    }
  } else {
    json_fail(at, "a fraction such as 0.5 or \"50%\"");
  }
  if (!(x >= 0) || (!allow_zero && x == 0) || x > hi)
    json_fail(at, std::string("a fraction in ") + (allow_zero ? "[0, " : "(0, ") + fmt(hi) + "] (got " + fmt(x) + ")");
  return x;
}

// NAME(N) with N a decimal integer (random(SEED), segment(N)).
bool parse_call(const std::string& text, const std::string& name, std::uint64_t& n) {
  if (text.rfind(name + "(", 0) != 0 || text.back() != ')') return false;
  std::string d = text.substr(name.size() + 1, text.size() - name.size() - 2);
  if (d.empty() || d.size() > 19 || d.find_first_not_of("0123456789") != std::string::npos) return false;
  n = std::stoull(d);
  return true;
}
bool parse_random(const std::string& text, std::uint64_t& seed) { return parse_call(text, "random", seed); }
bool parse_segment(const std::string& text, std::int64_t& servers) {
  std::uint64_t n = 0;
  if (!parse_call(text, "segment", n) || n < 1 || n > (1u << 20)) return false;
  servers = static_cast<std::int64_t>(n);
  return true;
}

// Whole servers `hosts` (in order) grouped into segments of n servers inside one NVLink domain: per domain
// in order of first appearance, its servers in order, as many whole segments as it holds.
std::vector<std::size_t> segment_order(const topo::Topology& t, const ClusterLayout& L, const std::vector<std::size_t>& hosts,
                                       std::int64_t n) {
  std::vector<int> order;
  std::map<int, std::vector<std::size_t>> by_domain;
  for (auto h : hosts) {
    const int d = t.node(t.gpus()[static_cast<std::size_t>(L.host_gpus[h].front())]).nvlink_domain;
    const int key = d >= 0 ? d : -1 - static_cast<int>(h);  // no NVLink domain: the server is one
    if (!by_domain.count(key)) order.push_back(key);
    by_domain[key].push_back(h);
  }
  std::vector<std::size_t> out;
  for (int key : order) {
    const auto& hs = by_domain[key];
    const std::size_t whole = hs.size() / static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
    out.insert(out.end(), hs.begin(), hs.begin() + static_cast<std::ptrdiff_t>(whole));
  }
  return out;
}

}  // namespace

const char* placement_help() { return "packed, spread, random(SEED), rail-aligned, fill-racks or segment(N)"; }

bool is_placement(const std::string& text) {
  std::uint64_t seed = 0;
  std::int64_t servers = 0;
  return text == "packed" || text == "spread" || text == "rail-aligned" || text == "fill-racks" ||
         parse_random(text, seed) || parse_segment(text, servers);
}

FaultSpec parse_fault(const Json& j, const JsonPath& at) {
  if (!j.is_object()) json_fail(at, "a fault object");
  ObjectReader fr(j, at);
  FaultSpec x;
  x.where = at.str();
  int kinds = fr.has("link") + fr.has("switch") + fr.has("nic") + fr.has("gpu") + fr.has("node");
  if (kinds != 1) json_fail(at, "exactly one of \"link\", \"switch\", \"nic\", \"gpu\", \"node\"");
  if (fr.has("link")) {
    x.kind = "link";
    const Json& l = fr.array("link");
    if (l.size() != 2 || !l[0].is_string() || !l[1].is_string())
      json_fail(fr.path_of("link"), "the two node ids of the link, e.g. [\"n1.nic0\", \"leaf.r0.0\"]");
    x.a = l[0].get<std::string>();
    x.b = l[1].get<std::string>();
    const bool down = fr.boolean_or("down", false);
    if (down == fr.has("bandwidth"))
      json_fail(at, "exactly one of \"down\": true or \"bandwidth\" (the remaining fraction, e.g. \"50%\")");
    x.bandwidth_factor = down ? 0.0 : fraction(fr.raw("bandwidth"), fr.path_of("bandwidth"), false, 1.0);
  } else if (fr.has("switch") || fr.has("nic")) {
    x.kind = fr.has("switch") ? "switch" : "nic";
    x.a = fr.string(x.kind);
    if (!fr.boolean_or("down", true)) json_fail(fr.path_of("down"), "true (a switch or NIC fault takes it down)");
  } else if (fr.has("gpu")) {
    x.kind = "gpu";
    x.gpu = static_cast<std::int32_t>(fr.integer_in("gpu", 0, 10000000));
    x.slowdown = fraction(fr.raw("slowdown"), fr.path_of("slowdown"), false, 100.0);
  } else {
    x.kind = "node";
    x.host = static_cast<std::int32_t>(fr.integer_in("node", 0, 10000000));
    x.policy = fr.string_or("policy", "shrink");
    if (x.policy != "shrink" && x.policy != "spare") json_fail(fr.path_of("policy"), "shrink or spare");
  }
  fr.finish();
  return x;
}

FaultSpec parse_fault_text(const std::string& text, const std::string& flag) {
  const JsonPath at{flag + " " + text_excerpt(text), ""};
  const std::string form =
      "a fault object as in a scenario's faults[] (e.g. {\"link\": [\"n1.nic0\", \"leaf.r0.0\"], \"bandwidth\": \"50%\"}) "
      "or link=A,B:50% | link=A,B:down | switch=ID | nic=ID | gpu=RANK:20% | node=HOST[:shrink|spare]";
  if (!text.empty() && text.front() == '{') {
    Json j;
    try {
      j = Json::parse(text);
    } catch (const std::exception&) {
      throw InputError(at.file, form + " (not valid JSON)");
    }
    FaultSpec f = parse_fault(j, at);
    f.where = at.file;
    return f;
  }
  // The compact form is the same object written as KIND=WHAT[:AMOUNT], read by the same parser.
  const auto eq = text.find('=');
  if (eq == std::string::npos) throw InputError(at.file, form);
  const std::string kind = text.substr(0, eq), rest = text.substr(eq + 1);
  const auto colon = rest.rfind(':');
  const std::string what = rest.substr(0, colon), amount = colon == std::string::npos ? "" : rest.substr(colon + 1);
  auto amount_json = [&]() -> Json {
    if (!amount.empty() && amount.back() == '%') return amount;
    try {
      std::size_t used = 0;
      const double v = std::stod(amount, &used);
      if (used == amount.size()) return v;
    } catch (const std::logic_error&) {
    }
    return amount;  // the fraction parser names what it expected
  };
  auto integer = [&](const std::string& s) -> Json {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return s;
    return std::stoll(s.substr(0, 12));
  };
  Json j = Json::object();
  if (kind == "link") {
    const auto comma = what.find(',');
    if (comma == std::string::npos || colon == std::string::npos)
      throw InputError(at.file, "link=A,B:FRACTION or link=A,B:down (the link's two node ids, e.g. "
                                "link=n1.nic0,leaf.r0.0:50%)");
    j["link"] = Json::array({what.substr(0, comma), what.substr(comma + 1)});
    if (amount == "down") j["down"] = true;
    else j["bandwidth"] = amount_json();
  } else if (kind == "switch" || kind == "nic") {
    if (colon != std::string::npos && amount != "down") throw InputError(at.file, kind + "=ID or " + kind + "=ID:down");
    j[kind] = what;
  } else if (kind == "gpu") {
    if (colon == std::string::npos) throw InputError(at.file, "gpu=RANK:SLOWDOWN, e.g. gpu=13:20%");
    j["gpu"] = integer(what);
    j["slowdown"] = amount_json();
  } else if (kind == "node") {
    j["node"] = integer(what);
    if (colon != std::string::npos) j["policy"] = amount;
  } else {
    throw InputError(at.file, form);
  }
  FaultSpec f = parse_fault(j, at);
  f.where = at.file;
  return f;
}

void parse_cluster(Scenario& s, ObjectReader& r, const std::string& file) {
  const Json& jobs = r.array("jobs");
  if (jobs.empty()) json_fail(r.path_of("jobs"), "at least one job");
  std::set<std::string> names;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const JsonPath at = r.path_of("jobs").index(i);
    if (!jobs[i].is_object()) json_fail(at, "a job object");
    ObjectReader jr(jobs[i], at);
    JobSpec j;
    j.where = at.str();
    j.name = jr.string("name");
    if (j.name.empty() || j.name.find('/') != std::string::npos)
      json_fail(jr.path_of("name"), "a non-empty name without '/'");
    if (!names.insert(j.name).second) json_fail(jr.path_of("name"), "a name no other job has (\"" + j.name + "\" repeats)");
    j.workload = workload_from_json(jr.object("workload"), jr.path_of("workload"), file);
    const bool has_gpus = jr.has("gpus"), has_pl = jr.has("placement");
    if (has_gpus == has_pl) json_fail(at, "exactly one of \"gpus\" (a list of GPU ranks) or \"placement\"");
    if (has_gpus) {
      const Json& g = jr.array("gpus");
      if (g.empty()) json_fail(jr.path_of("gpus"), "at least one GPU rank");
      std::set<std::int64_t> seen;
      for (std::size_t k = 0; k < g.size(); ++k) {
        if (!g[k].is_number_integer() || g[k].get<std::int64_t>() < 0 || g[k].get<std::int64_t>() > 10000000)
          json_fail(jr.path_of("gpus").index(k), "a GPU rank (integer >= 0)");
        if (!seen.insert(g[k].get<std::int64_t>()).second)
          json_fail(jr.path_of("gpus").index(k), "GPU ranks listed once (" + g[k].dump() + " repeats)");
        j.gpus.push_back(static_cast<std::int32_t>(g[k].get<std::int64_t>()));
      }
      j.placement = "explicit";
    } else {
      j.placement = jr.string("placement");
      if (!is_placement(j.placement)) json_fail(jr.path_of("placement"), std::string("one of ") + placement_help());
      parse_random(j.placement, j.placement_seed);
      parse_segment(j.placement, j.placement_segment);
      if (!j.workload.params.count("world_size"))
        json_fail(jr.path_of("workload").child("params"),
                  "a \"world_size\" parameter (the job's GPU count) with \"placement\"");
    }
    j.start_offset_s = jr.time_or("start_offset", 0);
    j.iterations = static_cast<int>(jr.integer_in_or("iterations", 1, 1000, 1));
    jr.finish();
    s.jobs.push_back(std::move(j));
  }
  s.stand_in_traffic = r.boolean_or("stand_in_traffic", true);
  if (const Json* f = r.array_optional("faults")) {
    for (std::size_t i = 0; i < f->size(); ++i) s.faults.push_back(parse_fault((*f)[i], r.path_of("faults").index(i)));
  }
  if (const Json* jt = r.object_optional("jitter")) {
    ObjectReader jr(*jt, r.path_of("jitter"));
    JitterSpec j;
    j.where = r.path_of("jitter").str();
    j.sigma = fraction(jr.raw("sigma"), jr.path_of("sigma"), true, 1.0);
    j.seed = static_cast<std::uint64_t>(jr.integer_in_or("seed", 0, std::int64_t{1} << 53, 0));
    j.scope = jr.string_or("scope", "kernel");
    if (j.scope != "kernel" && j.scope != "gpu") json_fail(jr.path_of("scope"), "kernel or gpu");
    jr.finish();
    s.jitter = j;
  }
}

// ---- topology faults ---------------------------------------------------------------------------------

topo::Topology apply_topology_faults(const topo::Topology& t, const std::vector<FaultSpec>& faults,
                                     std::vector<std::string>& notes) {
  std::vector<double> factor(t.num_links(), 1.0);
  bool any = false;
  for (const auto& f : faults) {
    if (f.kind != "link" && f.kind != "switch" && f.kind != "nic") continue;
    any = true;
    auto node = [&](const std::string& id) {
      topo::NodeId n = t.find(id);
      if (n == topo::kNoNode) throw InputError(f.where, "a node id of the topology (no node '" + id + "')");
      return n;
    };
    if (f.kind == "link") {
      topo::NodeId a = node(f.a), b = node(f.b);
      int hit = 0;
      for (const auto& [l, nb] : t.adjacent(a))
        if (nb == b) {
          factor[l] = std::min(factor[l], f.bandwidth_factor);
          ++hit;
        }
      if (!hit) throw InputError(f.where, "a link of the topology (no link between '" + f.a + "' and '" + f.b + "')");
      notes.push_back("fault: link " + f.a + " <-> " + f.b +
                      (f.bandwidth_factor == 0 ? std::string(" down (routing takes the remaining shortest paths)")
                                               : " at " + fmt(100 * f.bandwidth_factor) + " % of its bandwidth") +
                      (hit > 1 ? " (" + std::to_string(hit) + " parallel links)" : ""));
    } else {
      topo::NodeId n = node(f.a);
      const auto k = t.node(n).kind;
      const bool sw = k == topo::NodeKind::IbSwitch || k == topo::NodeKind::EthSwitch;
      if (f.kind == "switch" && !sw) throw InputError(f.where, "a fabric switch ('" + f.a + "' is not one)");
      if (f.kind == "nic" && k != topo::NodeKind::Nic) throw InputError(f.where, "a NIC ('" + f.a + "' is not one)");
      for (const auto& [l, nb] : t.adjacent(n)) factor[l] = 0;
      notes.push_back("fault: " + f.kind + " " + f.a + " down: its " + std::to_string(t.adjacent(n).size()) +
                      " links removed" +
                      (f.kind == "nic" ? " (its GPUs leave the server through the next-closest NIC, as NCCL picks the "
                                         "closest usable NIC)"
                                       : " (routing takes the remaining shortest paths)"));
    }
  }
  if (!any) return t;
  topo::TopologyBuilder b(t.name());
  b.properties_of(t);
  for (const auto& n : t.nodes()) b.add_node(n);
  for (topo::LinkId l = 0; l < t.num_links(); ++l) {
    const auto& L = t.link(l);
    if (factor[l] <= 0) continue;
    b.add_link(L.a, L.b, L.kind, L.bandwidth_Bps * factor[l], L.latency_s, L.count);
  }
  return std::move(b).build("topology with faults");
}

// ---- placement ---------------------------------------------------------------------------------------

ClusterLayout cluster_layout(const topo::Topology& t) {
  ClusterLayout L;
  L.host_gpus.assign(static_cast<std::size_t>(std::max(0, t.num_hosts())), {});
  for (std::size_t r = 0; r < t.gpus().size(); ++r) {
    int h = t.node(t.gpus()[r]).host;
    if (h < 0) continue;
    if (static_cast<std::size_t>(h) >= L.host_gpus.size()) L.host_gpus.resize(h + 1);
    L.host_gpus[h].push_back(static_cast<std::int32_t>(r));
  }
  // Rack of a server: the leaf (tier-1 switch) its lowest-index NIC connects to, numbered by the leaf's
  // group index (a rail-optimised fabric has one leaf per rail in each group); servers without a fabric
  // are racks of their own.
  std::vector<int> leaf_group_of_host(L.host_gpus.size(), -1);
  std::vector<int> nic_index(L.host_gpus.size(), 1 << 30);
  for (topo::NodeId n = 0; n < t.num_nodes(); ++n) {
    const auto& nd = t.node(n);
    if (nd.kind != topo::NodeKind::Nic || nd.host < 0 || static_cast<std::size_t>(nd.host) >= L.host_gpus.size())
      continue;
    for (const auto& [l, nb] : t.adjacent(n)) {
      const auto& s = t.node(nb);
      if ((s.kind == topo::NodeKind::IbSwitch || s.kind == topo::NodeKind::EthSwitch) && s.tier == 1 &&
          nd.local_index < nic_index[nd.host]) {
        nic_index[nd.host] = nd.local_index;
        leaf_group_of_host[nd.host] = s.local_index;
      }
    }
  }
  std::map<int, int> rack_id;
  L.host_rack.assign(L.host_gpus.size(), 0);
  for (std::size_t h = 0; h < L.host_gpus.size(); ++h) {
    int key = leaf_group_of_host[h] >= 0 ? leaf_group_of_host[h] : -1 - static_cast<int>(h);
    auto it = rack_id.find(key);
    if (it == rack_id.end()) it = rack_id.emplace(key, static_cast<int>(rack_id.size())).first;
    L.host_rack[h] = it->second;
  }
  L.racks = static_cast<int>(rack_id.size());
  return L;
}

std::vector<std::vector<std::int32_t>> place_jobs(const topo::Topology& t, const std::vector<JobSpec>& jobs,
                                                  const std::vector<std::int64_t>& world_sizes) {
  const std::int32_t G = static_cast<std::int32_t>(t.gpus().size());
  const ClusterLayout L = cluster_layout(t);
  std::vector<char> used(G, 0);
  std::vector<std::vector<std::int32_t>> out(jobs.size());
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    if (jobs[j].gpus.empty()) continue;
    for (auto g : jobs[j].gpus) {
      if (g >= G) throw InputError(jobs[j].where + "/gpus", "GPU ranks below " + std::to_string(G) + " (got " + std::to_string(g) + ")");
      if (used[g]) throw InputError(jobs[j].where + "/gpus", "GPUs no other job uses (GPU " + std::to_string(g) + " is taken)");
      used[g] = 1;
    }
    out[j] = jobs[j].gpus;
  }
  auto free_in = [&](std::size_t h) {
    int n = 0;
    for (auto g : L.host_gpus[h]) n += !used[g];
    return n;
  };
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    if (!jobs[j].gpus.empty()) continue;
    const JobSpec& js = jobs[j];
    const std::int64_t need = world_sizes[j];
    std::vector<std::int32_t> got;
    if (js.placement == "packed") {
      for (std::int32_t g = 0; g < G && static_cast<std::int64_t>(got.size()) < need; ++g)
        if (!used[g]) got.push_back(g);
    } else {
      // Whole free servers in the policy's order (a job smaller than a server takes part of one).
      std::vector<std::size_t> hosts;
      for (std::size_t h = 0; h < L.host_gpus.size(); ++h)
        if (!L.host_gpus[h].empty() && free_in(h) == static_cast<int>(L.host_gpus[h].size())) hosts.push_back(h);
      if (js.placement == "rail-aligned") {
        const std::size_t per = hosts.empty() ? 1 : L.host_gpus[hosts[0]].size();
        if (need % static_cast<std::int64_t>(per) != 0)
          throw InputError(js.where + "/placement", "rail-aligned placement of whole servers: world_size a multiple of " +
                                                        std::to_string(per) + " GPUs per server (got " + std::to_string(need) + ")");
      } else if (js.placement == "spread") {
        // Round-robin over racks: the first free server of every rack, then the second, ...
        std::map<int, std::vector<std::size_t>> by_rack;
        for (auto h : hosts) by_rack[L.host_rack[h]].push_back(h);
        std::vector<std::size_t> order;
        for (std::size_t k = 0; order.size() < hosts.size(); ++k)
          for (const auto& [rk, hs] : by_rack)
            if (k < hs.size()) order.push_back(hs[k]);
        hosts = std::move(order);
      } else if (js.placement == "fill-racks") {
        // Best fit: racks with the fewest free servers first (finish partly used racks), then by rack.
        std::map<int, std::vector<std::size_t>> by_rack;
        for (auto h : hosts) by_rack[L.host_rack[h]].push_back(h);
        std::vector<std::pair<std::size_t, int>> racks;
        for (const auto& [rk, hs] : by_rack) racks.push_back({hs.size(), rk});
        std::sort(racks.begin(), racks.end());
        std::vector<std::size_t> order;
        for (const auto& [n, rk] : racks)
          for (auto h : by_rack[rk]) order.push_back(h);
        hosts = std::move(order);
      } else if (js.placement_segment > 0) {
        // segment(N), Slurm's --segment=N: whole segments of N free servers, each inside one NVLink domain.
        hosts = segment_order(t, L, hosts, js.placement_segment);
      } else {  // random(seed): Fisher-Yates with mt19937_64 (its output sequence is fixed by the standard)
        std::mt19937_64 rng(js.placement_seed);
        for (std::size_t i = hosts.size(); i > 1; --i) std::swap(hosts[i - 1], hosts[rng() % i]);
      }
      for (auto h : hosts)
        for (auto g : L.host_gpus[h])
          if (static_cast<std::int64_t>(got.size()) < need) got.push_back(g);
    }
    if (static_cast<std::int64_t>(got.size()) < need)
      throw InputError(js.where + "/placement", "room for " + std::to_string(need) + " GPUs (" + js.placement +
                                                    " found " + std::to_string(got.size()) + " free" +
                                                    (js.placement == "packed" ? "" : " on whole free servers") + ")");
    for (auto g : got) used[g] = 1;
    out[j] = std::move(got);
  }
  return out;
}

std::int64_t segment_capacity(const topo::Topology& t, std::int64_t n) {
  const ClusterLayout L = cluster_layout(t);
  std::vector<std::size_t> hosts;
  for (std::size_t h = 0; h < L.host_gpus.size(); ++h)
    if (!L.host_gpus[h].empty()) hosts.push_back(h);
  std::int64_t gpus = 0;
  for (auto h : segment_order(t, L, hosts, n)) gpus += static_cast<std::int64_t>(L.host_gpus[h].size());
  return gpus;
}

Scenario one_job_cluster(const Scenario& s, const topo::Topology& t) {
  Scenario c = s;
  JobSpec j;
  j.name = "job";
  j.workload = s.workload;
  j.placement = "segment(" + std::to_string(s.placement_segment) + ")";
  j.placement_segment = s.placement_segment;
  j.where = s.placement_at.str();
  if (j.workload.kind != "generator")
    throw InputError(j.where, "a generator workload (a trace's ranks are fixed; place it with a cluster job's \"gpus\")");
  if (!j.workload.params.count("world_size")) {
    const std::int64_t cap = segment_capacity(t, s.placement_segment);
    if (cap < 1) throw InputError(j.where + "/segment", "a segment that fits an NVLink domain (none holds " +
                                                            std::to_string(s.placement_segment) + " servers)");
    j.workload.params["world_size"] = std::to_string(cap);
  }
  c.jobs = {j};
  c.placement_segment = 0;
  return c;
}

// ---- jitter ------------------------------------------------------------------------------------------

namespace {

// Upper-tail standard normal quantile z with P(Z > z) = q, for q in (0, 1) (Acklam's algorithm: rational
// approximations in the central region and in the tails; P. J. Acklam, "An algorithm for computing the
// inverse normal cumulative distribution function", 2003, relative error below 1.15e-9).
double upper_quantile(double q) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double lo = 0.02425;
  auto tail = [&](double p) {  // lower tail quantile for small p
    double x = std::sqrt(-2 * std::log(p));
    return (((((c[0] * x + c[1]) * x + c[2]) * x + c[3]) * x + c[4]) * x + c[5]) /
           ((((d[0] * x + d[1]) * x + d[2]) * x + d[3]) * x + 1);
  };
  if (q < lo) return -tail(q);
  if (q > 1 - lo) return tail(1 - q);
  double p = 1 - q, x = p - 0.5, r = x * x;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * x /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

// A uniform in (0, 1) from 53 random bits.
double uniform01(std::mt19937_64& rng) { return (static_cast<double>(rng() >> 11) + 0.5) / 9007199254740992.0; }

// The largest of m independent standard normals, drawn exactly by its order statistic: the maximum of m
// uniforms is U^(1/m), whose upper tail 1 - U^(1/m) = -expm1(ln U / m) keeps precision for large m.
double max_of_normals(std::mt19937_64& rng, double m) {
  return upper_quantile(-std::expm1(std::log(uniform01(rng)) / m));
}

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

std::int64_t param_int(const ParamMap& p, const char* k, std::int64_t dflt) {
  auto it = p.find(k);
  if (it == p.end()) return dflt;
  try {
    return std::stoll(it->second);
  } catch (const std::logic_error&) {
    return dflt;  // the generator reports the bad value with its path
  }
}

// GPUs of one model replica: what a job loses per lost replica when it shrinks.
std::int64_t replica_gpus(const JobSpec& j) {
  const auto& p = j.workload.params;
  if (j.workload.kind != "generator")
    throw InputError(j.where, "a generator workload to shrink after a node loss (traces have a fixed size; use "
                              "\"policy\": \"spare\")");
  if (j.workload.generator == "gpt")
    return param_int(p, "tensor_model_parallel_size", 1) * param_int(p, "pipeline_model_parallel_size", 1) *
           param_int(p, "context_parallel_size", 1);
  if (j.workload.generator == "dataparallel") return 1;
  throw InputError(j.where, "shrink after a node loss for gpt and dataparallel jobs (use \"policy\": \"spare\")");
}

}  // namespace

double normal_quantile(double p) { return upper_quantile(1 - p); }

// ---- per-job traces ----------------------------------------------------------------------------------

namespace {

// Rewrites `tr` (local ranks) onto global GPU ranks, repeats it `iterations` times (each rank's next step
// starts when all its streams finished the previous one) after a `offset_s` delay op.
Trace place_trace(const Trace& tr, const std::vector<std::int32_t>& gpus, const std::string& job, int iterations,
                  double offset_s, std::int32_t world, bool stand_ins, std::vector<std::string>& notes) {
  Trace out;
  out.name = job;
  out.world_size = world;
  out.gpu = tr.gpu;
  auto g = [&](std::int32_t local) {
    if (local < 0 || static_cast<std::size_t>(local) >= gpus.size())
      throw InputError("job '" + job + "'", "trace ranks below its GPU count " + std::to_string(gpus.size()) +
                                               " (rank " + std::to_string(local) + ")");
    return gpus[local];
  };
  int dropped = 0;
  for (const auto& c : tr.comms) {
    Communicator m = c;
    m.name = job + "/" + c.name;
    for (auto& r : m.ranks) r = g(r);
    // Mirrors are shifted copies (ranks + k x stride); the placement must keep that shift for every member.
    bool ok = true;
    for (std::int32_t k = 1; k <= c.mirrors && ok; ++k)
      for (auto r : c.ranks) {
        std::int64_t lr = r + static_cast<std::int64_t>(k) * c.mirror_stride;
        if (lr >= static_cast<std::int64_t>(gpus.size()) ||
            g(static_cast<std::int32_t>(lr)) != g(r) + static_cast<std::int64_t>(k) * c.mirror_stride) {
          ok = false;
          break;
        }
      }
    if (!ok) {
      m.mirrors = 0;
      ++dropped;
    }
    out.comms.push_back(std::move(m));
  }
  if (dropped)
    notes.push_back("job " + job + ": " + std::to_string(dropped) + " communicator(s) lost their co-located mirror "
                    "groups (the placement does not keep their GPU offsets); " +
                    (stand_ins ? "those groups are placed as explicit stand-in groups instead"
                               : "those groups' traffic is not placed (stand_in_traffic false)"));
  for (const auto& rt : tr.ranks) {
    RankTrace o;
    o.rank = g(rt.rank);
    o.streams = rt.streams;
    const std::uint32_t n = static_cast<std::uint32_t>(rt.ops.size());
    const std::uint32_t head = offset_s > 0 ? 1 : 0;
    o.ops.reserve(static_cast<std::size_t>(n) * iterations + head);
    if (head) {
      Op d;
      d.kind = OpKind::Compute;
      d.stream = 0;
      d.name = "start_offset";
      d.category = "idle";
      d.duration_s = offset_s;
      o.ops.push_back(std::move(d));
    }
    // Last op of each stream in one iteration (barrier for the next one).
    std::vector<std::int64_t> last(rt.streams.size(), -1);
    for (std::uint32_t i = 0; i < n; ++i) last[rt.ops[i].stream] = i;
    for (int it = 0; it < iterations; ++it) {
      const std::uint32_t base = head + static_cast<std::uint32_t>(it) * n;
      std::vector<char> first_seen(rt.streams.size(), 0);
      for (std::uint32_t i = 0; i < n; ++i) {
        Op op = rt.ops[i];
        for (auto& d : op.deps) d += base;
        if (op.kind == OpKind::Send || op.kind == OpKind::Recv) {
          op.peer = g(op.peer);
          op.tag = op.tag * 1000 + it;  // each iteration's messages match among themselves
        }
        if (!first_seen[op.stream]) {
          first_seen[op.stream] = 1;
          if (it == 0 && head) op.deps.push_back(0);
          if (it > 0)
            for (auto l : last)
              if (l >= 0) op.deps.push_back(base - n + static_cast<std::uint32_t>(l));
        }
        if (iterations > 1 && !op.name.empty()) op.name = "it" + std::to_string(it) + "." + op.name;
        o.ops.push_back(std::move(op));
      }
    }
    out.ranks.push_back(std::move(o));
  }
  std::sort(out.ranks.begin(), out.ranks.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace

// ---- stand-in groups ------------------------------------------------------------------------------
//
// A job's trace simulates some ranks; every other rank is a stand-in for the simulated rank below it (the
// simulated ranks split [0, world) into blocks: [sim_i, sim_{i+1}), the first block from 0, the last to the
// world size; for a GPT job one block per pipeline stage). A stand-in rank does what its simulated rank
// does on its own groups: a group of the trace (a communicator with its mirrors, or a message pair) has
// copies made of the stand-in ranks at the same offsets inside their blocks. The copies are found as the
// translates of the group's footprint that tile the blocks it touches: with O_b the footprint's offsets in
// block b of size S_b, the copies are O_b + k P for k = 1 .. N - 1, where N = S_b / |O_b| (the same in every
// touched block) and P is the smallest shift for which the N translates are disjoint inside every block.
// Megatron's rank order (tensor fastest, then context, data, pipeline) makes each stage's groups such
// tilings: a tensor-parallel group of t ranks at P = t, a pipeline message between stages at P = 1 (every
// rank of the stage sends to its counterpart), an expert-parallel group of e consecutive ranks at P = e;
// a data-parallel group with its co-located mirrors covers its stage (N = 1, no copy).

namespace {

struct Tiling {
  std::int64_t period = 0, copies = 1;  // copies = N (1: the footprint covers its blocks, nothing to add)
  bool ok = false;
};

class StandIns {
 public:
  StandIns(const std::vector<std::int32_t>& sim, std::int64_t world) : sim_(sim), world_(world) {}

  std::size_t block_of(std::int64_t r) const {
    auto it = std::upper_bound(sim_.begin(), sim_.end(), r);
    return it == sim_.begin() ? 0 : static_cast<std::size_t>(it - sim_.begin() - 1);
  }
  std::int64_t start(std::size_t b) const { return b == 0 ? 0 : sim_[b]; }
  std::int64_t end(std::size_t b) const { return b + 1 < sim_.size() ? sim_[b + 1] : world_; }

  // The tiling of a footprint (local ranks); cached by its shape (offsets per block size).
  Tiling tiling(const std::vector<std::int64_t>& footprint) {
    std::map<std::size_t, std::vector<std::int64_t>> by_block;
    for (auto r : footprint) {
      const std::size_t b = block_of(r);
      by_block[b].push_back(r - start(b));
    }
    std::vector<std::pair<std::int64_t, std::vector<std::int64_t>>> key;
    for (auto& [b, o] : by_block) {
      std::sort(o.begin(), o.end());
      o.erase(std::unique(o.begin(), o.end()), o.end());
      key.emplace_back(end(b) - start(b), o);
    }
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    Tiling out;
    std::int64_t n = -1;
    bool even = true;
    for (const auto& [size, o] : key) {
      if (size % static_cast<std::int64_t>(o.size()) != 0) even = false;
      const std::int64_t nb = size / static_cast<std::int64_t>(o.size());
      if (n >= 0 && nb != n) even = false;
      n = nb;
    }
    if (!even || n < 1) return cache_[key] = out;
    if (n == 1) {
      out.ok = true;
      return cache_[key] = out;
    }
    // Smallest P with disjoint translates; P cannot exceed (S - 1 - max offset) / (N - 1) in any block.
    std::int64_t pmax = std::numeric_limits<std::int64_t>::max();
    for (const auto& [size, o] : key) pmax = std::min(pmax, (size - 1 - o.back()) / (n - 1));
    std::vector<char> mark;
    std::int64_t work = 0;
    for (std::int64_t P = 1; P <= pmax && work < (std::int64_t{1} << 26); ++P) {
      bool good = true;
      for (const auto& [size, o] : key) {
        mark.assign(static_cast<std::size_t>(size), 0);
        for (std::int64_t k = 0; k < n && good; ++k)
          for (auto off : o) {
            char& m = mark[static_cast<std::size_t>(off + k * P)];
            if (m) {
              good = false;
              break;
            }
            m = 1;
          }
        work += size;
        if (!good) break;
      }
      if (good) {
        out.ok = true, out.period = P, out.copies = n;
        break;
      }
    }
    return cache_[key] = out;
  }

 private:
  std::vector<std::int32_t> sim_;
  std::int64_t world_;
  std::map<std::vector<std::pair<std::int64_t, std::vector<std::int64_t>>>, Tiling> cache_;
};

// Whether every GPU of `ranks` (global) sits in one server: such a group's traffic stays on that server's
// links, which no other group of the cluster uses.
bool one_server(const topo::Topology& t, const std::vector<std::int32_t>& ranks) {
  const int h = t.node(t.gpus()[ranks.front()]).host;
  if (h < 0) return false;
  for (auto r : ranks)
    if (t.node(t.gpus()[r]).host != h) return false;
  return true;
}

// Fills the placed trace's communicators' stand_ins and the job's p2p_stand_ins from the job's own trace
// (local ranks, its mirrors as generated) and its GPUs.
void place_stand_ins(const Trace& local, const topo::Topology& t, PlacedJob& pj) {
  std::vector<std::int32_t> sim;
  for (const auto& rt : local.ranks) sim.push_back(rt.rank);
  if (sim.empty()) return;
  StandIns si(sim, local.world_size);
  const auto& gpus = pj.gpus;
  auto global = [&](const std::vector<std::int64_t>& l) {
    std::vector<std::int32_t> g;
    g.reserve(l.size());
    for (auto r : l) g.push_back(gpus[static_cast<std::size_t>(r)]);
    return g;
  };
  std::size_t untiled = 0;
  for (std::size_t c = 0; c < local.comms.size(); ++c) {
    const Communicator& lc = local.comms[c];
    Communicator& pc = pj.trace.comms[c];
    // Only communicators a simulated rank calls carry traffic.
    bool called = false;
    for (auto r : lc.ranks) called = called || std::binary_search(sim.begin(), sim.end(), r);
    if (!called || lc.ranks.size() < 2) continue;
    // The group and its mirrors as generated (local ranks).
    std::vector<std::vector<std::int64_t>> groups;
    std::vector<std::int64_t> footprint;
    for (std::int32_t m = 0; m <= lc.mirrors; ++m) {
      std::vector<std::int64_t> g;
      for (auto r : lc.ranks) g.push_back(r + static_cast<std::int64_t>(m) * lc.mirror_stride);
      footprint.insert(footprint.end(), g.begin(), g.end());
      groups.push_back(std::move(g));
    }
    // Mirrors the placement dropped (their GPU offsets broke) are placed as explicit groups instead.
    if (pc.mirrors == 0)
      for (std::size_t m = 1; m < groups.size(); ++m) {
        auto g = global(groups[m]);
        if (one_server(t, g)) ++pj.stand_ins_in_server;
        else pc.stand_ins.push_back(std::move(g));
      }
    const Tiling tl = si.tiling(footprint);
    if (!tl.ok) {
      ++untiled;
      continue;
    }
    for (std::int64_t k = 1; k < tl.copies; ++k)
      for (const auto& g0 : groups) {
        std::vector<std::int64_t> g = g0;
        for (auto& r : g) r += k * tl.period;
        auto gg = global(g);
        if (one_server(t, gg)) {
          ++pj.stand_ins_in_server;
          continue;
        }
        pc.stand_ins.push_back(std::move(gg));
        ++pj.stand_in_groups;
      }
  }
  std::set<std::pair<std::int32_t, std::int32_t>> pairs;
  for (const auto& rt : local.ranks)
    for (const auto& op : rt.ops)
      if (op.kind == OpKind::Send) pairs.insert({rt.rank, op.peer});
  for (const auto& [a, b] : pairs) {
    const Tiling tl = si.tiling({a, b});
    if (!tl.ok) {
      ++untiled;
      continue;
    }
    auto& out = pj.p2p_stand_ins[{gpus[static_cast<std::size_t>(a)], gpus[static_cast<std::size_t>(b)]}];
    for (std::int64_t k = 1; k < tl.copies; ++k) {
      const auto g = global({a + k * tl.period, b + k * tl.period});
      if (one_server(t, g)) {
        ++pj.stand_ins_in_server;
        continue;
      }
      out.emplace_back(g[0], g[1]);
      ++pj.stand_in_pairs;
    }
  }
  // Placement-class communicators (NAME@R beside NAME, docs/workloads.md "Symmetry"): the replay may price
  // NAME's calls over the class group instead (replay/placement_classes.hpp), so the class group runs with the
  // groups NAME's call runs with: NAME's group, its co-located mirrors and its stand-in copies, less the class
  // group and its own mirrors. Both prices then cover the same concurrent groups, each with its own matrices
  // for the pair it heads. Only where NAME has stand-in copies (else NAME runs alone with its mirrors, and so
  // does the class group).
  std::map<std::string, std::size_t> by_name;
  for (std::size_t c = 0; c < local.comms.size(); ++c) by_name.emplace(local.comms[c].name, c);
  auto sorted = [](std::vector<std::int32_t> g) {
    std::sort(g.begin(), g.end());
    return g;
  };
  for (std::size_t c = 0; c < local.comms.size(); ++c) {
    const std::string& n = local.comms[c].name;
    const auto at = n.rfind('@');
    if (at == std::string::npos || at + 1 >= n.size() ||
        !std::all_of(n.begin() + static_cast<std::ptrdiff_t>(at) + 1, n.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      continue;
    auto own_at = by_name.find(n.substr(0, at));
    if (own_at == by_name.end()) continue;
    const Communicator& own = pj.trace.comms[own_at->second];
    Communicator& cls = pj.trace.comms[c];
    if (own.stand_ins.empty() || own.ranks.size() != cls.ranks.size() || !cls.stand_ins.empty()) continue;
    std::set<std::vector<std::int32_t>> mine;
    for (std::int32_t m = 0; m <= cls.mirrors; ++m) {
      std::vector<std::int32_t> g = cls.ranks;
      for (auto& r : g) r += m * cls.mirror_stride;
      mine.insert(sorted(std::move(g)));
    }
    auto add = [&](std::vector<std::int32_t> g) {
      if (g.size() == cls.ranks.size() && !mine.count(sorted(g))) cls.stand_ins.push_back(std::move(g));
    };
    for (std::int32_t m = 0; m <= own.mirrors; ++m) {
      std::vector<std::int32_t> g = own.ranks;
      for (auto& r : g) r += m * own.mirror_stride;
      add(std::move(g));
    }
    for (const auto& g : own.stand_ins) add(g);
  }
  pj.notes.push_back("job " + pj.name + ": stand-in traffic: " + std::to_string(pj.stand_in_groups) +
                     " communicator copies and " + std::to_string(pj.stand_in_pairs) +
                     " message-pair copies of the stand-in ranks placed on the fabric beside the simulated ranks' (" +
                     std::to_string(pj.stand_ins_in_server) + " copies inside one server left out: their traffic "
                     "stays on that server's links" +
                     (untiled ? "; " + std::to_string(untiled) + " groups whose stand-in copies are not a tiling of "
                                "their blocks left without copies"
                              : std::string()) +
                     ")");
}

}  // namespace

ClusterPlan plan_cluster(const Scenario& s, const topo::Topology& t,
                         const std::map<std::string, double>& calibration_extra) {
  ClusterPlan plan;
  const std::int32_t G = static_cast<std::int32_t>(t.gpus().size());
  std::vector<JobSpec> jobs = s.jobs;
  std::vector<std::int64_t> world(jobs.size());
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    auto it = jobs[j].workload.params.find("world_size");
    if (!jobs[j].gpus.empty()) {
      world[j] = static_cast<std::int64_t>(jobs[j].gpus.size());
      if (it != jobs[j].workload.params.end() && param_int(jobs[j].workload.params, "world_size", -1) != world[j])
        throw InputError(jobs[j].workload.where + " world_size",
                         "the job's GPU count " + std::to_string(world[j]) + " (\"gpus\" lists that many), got " + it->second);
    } else {
      world[j] = param_int(jobs[j].workload.params, "world_size", 0);
      if (world[j] < 1 || world[j] > G)
        throw InputError(jobs[j].workload.where + " world_size",
                         "an integer in [1, " + std::to_string(G) + "] (the topology's GPUs), got " + it->second);
    }
  }
  std::vector<std::vector<std::int32_t>> placed = place_jobs(t, jobs, world);
  const ClusterLayout L = cluster_layout(t);
  std::vector<std::vector<std::string>> job_notes(jobs.size());

  // Node losses, after placement (the scheduler placed the jobs on the healthy cluster).
  std::set<std::int32_t> lost_hosts;
  for (const auto& f : s.faults)
    if (f.kind == "node") {
      if (f.host >= static_cast<std::int32_t>(L.host_gpus.size()) || L.host_gpus[f.host].empty())
        throw InputError(f.where + "/node", "a server index below " + std::to_string(L.host_gpus.size()));
      lost_hosts.insert(f.host);
    }
  for (const auto& f : s.faults) {
    if (f.kind != "node") continue;
    const std::set<std::int32_t> lost(L.host_gpus[f.host].begin(), L.host_gpus[f.host].end());
    bool hit = false;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      std::vector<std::int32_t> keep;
      for (auto g : placed[j])
        if (!lost.count(g)) keep.push_back(g);
      const std::int64_t gone = static_cast<std::int64_t>(placed[j].size() - keep.size());
      if (gone == 0) continue;
      hit = true;
      if (f.policy == "shrink") {
        const std::int64_t rep = std::max<std::int64_t>(1, replica_gpus(jobs[j]));
        const std::int64_t drop = (gone + rep - 1) / rep * rep;
        const std::int64_t nw = static_cast<std::int64_t>(placed[j].size()) - drop;
        if (nw < rep) throw InputError(f.where, "a job that keeps at least one replica (job '" + jobs[j].name + "' would have none)");
        keep.resize(static_cast<std::size_t>(nw));
        const std::int64_t dp_old = static_cast<std::int64_t>(placed[j].size()) / rep, dp_new = nw / rep;
        job_notes[j].push_back("fault: server " + std::to_string(f.host) + " lost: job " + jobs[j].name + " continues on " +
                               std::to_string(nw) + " of " + std::to_string(placed[j].size()) + " GPUs, " +
                               std::to_string(dp_old) + " -> " + std::to_string(dp_new) +
                               " data-parallel replicas of " + std::to_string(rep) + " GPUs, same global batch");
        placed[j] = std::move(keep);
        jobs[j].workload.params["world_size"] = std::to_string(nw);
        jobs[j].gpus = placed[j];
      } else {
        std::set<std::int32_t> in_use;
        for (const auto& p : placed)
          for (auto g : p) in_use.insert(g);
        std::int32_t spare = -1;
        for (std::size_t h = 0; h < L.host_gpus.size() && spare < 0; ++h) {
          if (lost_hosts.count(static_cast<std::int32_t>(h)) || L.host_gpus[h].size() < static_cast<std::size_t>(gone)) continue;
          bool free = true;
          for (auto g : L.host_gpus[h]) free = free && !in_use.count(g);
          if (free) spare = static_cast<std::int32_t>(h);
        }
        if (spare < 0) throw InputError(f.where, "a free server to replace server " + std::to_string(f.host) + " (none left)");
        std::size_t k = 0;
        for (auto& g : placed[j])
          if (lost.count(g)) g = L.host_gpus[spare][k++];
        jobs[j].gpus = placed[j];
        job_notes[j].push_back("fault: server " + std::to_string(f.host) + " lost: job " + jobs[j].name +
                               " restarts on spare server " + std::to_string(spare) +
                               " (the step after the swap; the restart itself is not simulated)");
      }
    }
    if (!hit) plan.notes.push_back("fault: server " + std::to_string(f.host) + " lost (no job used it)");
  }

  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const JobSpec& js = jobs[j];
    Scenario one = s;
    one.jobs.clear();
    one.workload = js.workload;
    models::ComputeModel cm = scenario_compute_model(one, t, calibration_extra);
    ParamMap& p = one.workload.params;
    if (one.workload.kind == "generator") p["world_size"] = std::to_string(placed[j].size());
    // The NVLink domains as the job's ranks meet them (a job placed 64 per NVL72 rack: domains of 64 ranks),
    // where the placement has that form; else the topology's largest domain (generator_params).
    // Without that form the straddle warning (nvlink_straddle_warnings) would describe a placement the job
    // does not have: none.
    if (one.workload.kind == "generator" && one.workload.generator == "gpt" && !p.count("gpus_per_nvlink_domain")) {
      const std::int64_t run = nvlink_run_length(t, placed[j]);
      if (run > 0) p["gpus_per_nvlink_domain"] = std::to_string(run);
      one.nvlink_warnings = run > 0;
    }
    Trace tr = build_workload(one, t, cm);
    if (tr.world_size != static_cast<std::int32_t>(placed[j].size()))
      throw InputError(js.where, "a workload of " + std::to_string(placed[j].size()) + " ranks (its GPUs), got world_size " +
                                     std::to_string(tr.world_size));
    PlacedJob pj;
    pj.name = js.name;
    pj.placement = js.placement;
    pj.gpus = placed[j];
    pj.world_size = tr.world_size;
    pj.start_offset_s = js.start_offset_s;
    pj.iterations = js.iterations;
    pj.metadata = tr.metadata;
    pj.params = tr.params;
    pj.workload = js.workload.kind == "generator" ? js.workload.generator : js.workload.file;
    pj.notes = job_notes[j];

    // Compute factors per simulated rank: the rank stands in for the local ranks from it up to the next
    // simulated rank (one pipeline stage of a GPT job), so a slow GPU among them slows the stand-in (a
    // synchronous step waits for its slowest member) and jitter takes the maximum over them.
    std::vector<std::int32_t> sim;
    for (const auto& rt : tr.ranks) sim.push_back(rt.rank);
    auto stand_in = [&](std::int32_t local) {
      auto it = std::upper_bound(sim.begin(), sim.end(), local);
      return it == sim.begin() ? std::size_t{0} : static_cast<std::size_t>(it - sim.begin() - 1);
    };
    std::vector<double> slow(sim.size(), 1.0);
    std::vector<double> members(sim.size(), 0);
    for (std::int32_t l = 0; l < tr.world_size; ++l) members[stand_in(l)] += 1;
    std::map<std::int32_t, std::int32_t> local_of;
    for (std::size_t l = 0; l < placed[j].size(); ++l) local_of[placed[j][l]] = static_cast<std::int32_t>(l);
    for (const auto& f : s.faults) {
      if (f.kind != "gpu") continue;
      auto it = local_of.find(f.gpu);
      if (it == local_of.end()) continue;
      std::size_t r = stand_in(it->second);
      slow[r] = std::max(slow[r], 1 + f.slowdown);
      pj.notes.push_back("fault: GPU " + std::to_string(f.gpu) + " (job " + js.name + " rank " + std::to_string(it->second) +
                         ") computes " + fmt(100 * f.slowdown) + " % slower; simulated rank " + std::to_string(sim[r]) +
                         ", which stands in for it, runs every kernel at that speed");
    }
    std::vector<double> gpu_factor(sim.size(), 1.0);
    if (s.jitter && s.jitter->sigma > 0 && s.jitter->scope == "gpu") {
      for (std::int32_t l = 0; l < tr.world_size; ++l) {
        std::mt19937_64 rng(mix(s.jitter->seed, static_cast<std::uint64_t>(placed[j][l])));
        double z = max_of_normals(rng, 1);
        std::size_t r = stand_in(l);
        gpu_factor[r] = std::max(gpu_factor[r], std::max(0.0, 1 + s.jitter->sigma * z));
      }
    }
    for (std::size_t r = 0; r < tr.ranks.size(); ++r) {
      std::mt19937_64 rng(mix(mix(s.jitter ? s.jitter->seed : 0, j + 1), static_cast<std::uint64_t>(sim[r])));
      const bool kernel_jitter = s.jitter && s.jitter->sigma > 0 && s.jitter->scope == "kernel";
      for (auto& op : tr.ranks[r].ops) {
        if (op.kind != OpKind::Compute) continue;
        double d = op.duration_s >= 0 ? op.duration_s : cm.time_s(op.op_class, op.flops, op.mem_bytes);
        double f = slow[r] * gpu_factor[r];
        if (kernel_jitter) f *= std::max(0.0, 1 + s.jitter->sigma * max_of_normals(rng, members[r]));
        op.duration_s = d * f;
        if (op.kernel_wait_s > 0) op.kernel_wait_s *= f;  // its kernels are that much slower too
      }
    }
    if (s.jitter && s.jitter->sigma > 0)
      pj.notes.push_back(
          "jitter: compute times x (1 + " + fmt(s.jitter->sigma) + " Z), Z standard normal, seed " +
          std::to_string(s.jitter->seed) +
          (s.jitter->scope == "kernel"
               ? ", drawn per kernel; a simulated rank standing in for m GPUs takes the largest of m draws per kernel "
                 "(exact order statistic), i.e. every kernel waits for its slowest GPU (an upper bound when GPUs "
                 "synchronise less often than every kernel)"
               : ", one factor per GPU for the whole run; a simulated rank runs at the slowest factor of the GPUs it "
                 "stands in for"));
    pj.trace = place_trace(tr, placed[j], js.name, js.iterations, js.start_offset_s, G, s.stand_in_traffic, pj.notes);
    if (s.stand_in_traffic) place_stand_ins(tr, t, pj);
    plan.jobs.push_back(std::move(pj));
  }
  return plan;
}

Trace merge_jobs(const std::vector<const PlacedJob*>& jobs, std::int32_t world_size) {
  Trace out;
  out.name = "cluster";
  out.world_size = world_size;
  std::set<std::int32_t> taken;
  for (const PlacedJob* j : jobs) {
    for (auto g : j->gpus)
      if (!taken.insert(g).second)
        throw InputError("job '" + j->name + "'", "GPUs no other job uses (GPU " + std::to_string(g) + " is shared)");
    const std::int32_t off = static_cast<std::int32_t>(out.comms.size());
    for (const auto& c : j->trace.comms) out.comms.push_back(c);
    for (const auto& rt : j->trace.ranks) {
      RankTrace r = rt;
      for (auto& op : r.ops)
        if (op.kind == OpKind::Collective) op.comm += off;
      out.ranks.push_back(std::move(r));
    }
    if (out.gpu.empty()) out.gpu = j->trace.gpu;
  }
  std::sort(out.ranks.begin(), out.ranks.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace fabricsim::workloads
