#include "replay/placement_classes.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>

namespace fabricsim::sim {

using workloads::Communicator;
using workloads::OpKind;

std::string group_shape(const topo::Topology& t, const std::vector<std::int32_t>& ranks) {
  if (ranks.empty()) return "no ranks";
  std::vector<std::int64_t> per_dom;  // members per NVLink domain, in member order
  std::set<int> doms, hosts;
  int last = -2;
  for (auto r : ranks) {
    const auto& n = t.node(t.gpus()[static_cast<std::size_t>(r)]);
    if (n.nvlink_domain != last || per_dom.empty()) per_dom.push_back(0);
    ++per_dom.back(), last = n.nvlink_domain;
    doms.insert(n.nvlink_domain), hosts.insert(n.host);
  }
  bool contiguous = true;
  for (std::size_t k = 1; k < ranks.size(); ++k) contiguous = contiguous && ranks[k] == ranks[k - 1] + 1;
  std::string s = "ranks " + std::to_string(ranks.front()) + (contiguous ? "-" : ranks.size() == 2 ? ", " : ", ..., ") +
                  std::to_string(ranks.back()) +
                  ": " + std::to_string(ranks.size()) + " GPUs, " + std::to_string(doms.size()) + " NVLink domain" +
                  (doms.size() > 1 ? "s" : "");
  if (doms.size() > 1) {
    s += " (";
    for (std::size_t k = 0; k < per_dom.size(); ++k) s += (k ? " + " : "") + std::to_string(per_dom[k]);
    s += ")";
  }
  return s + ", " + std::to_string(hosts.size()) + " server" + (hosts.size() > 1 ? "s" : "");
}

std::map<std::string, PlacementClassChoice> price_slowest_placement_classes(workloads::Trace& trace,
                                                                            const topo::Topology& t, CommModel& comm) {
  std::map<std::string, PlacementClassChoice> out;
  // Class communicators by the name they stand beside.
  std::map<std::string, std::vector<std::int32_t>> classes;
  for (std::size_t k = 0; k < trace.comms.size(); ++k) {
    const std::string& n = trace.comms[k].name;
    const auto at = n.rfind('@');
    if (at == std::string::npos || at + 1 >= n.size()) continue;
    if (!std::all_of(n.begin() + static_cast<std::ptrdiff_t>(at) + 1, n.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      continue;
    classes[n.substr(0, at)].push_back(static_cast<std::int32_t>(k));
  }
  if (classes.empty()) return out;
  std::set<std::int32_t> simulated;
  for (const auto& rt : trace.ranks) simulated.insert(rt.rank);
  // The simulated ranks' distinct calls per communicator with classes, with how often each is made.
  std::map<std::int32_t, std::map<std::tuple<workloads::CollOp, double, std::string>, std::size_t>> calls;
  for (const auto& rt : trace.ranks)
    for (const auto& op : rt.ops)
      if (op.kind == OpKind::Collective && op.comm >= 0 && classes.count(trace.comms[static_cast<std::size_t>(op.comm)].name))
        ++calls[op.comm][{op.coll, op.bytes, op.algorithm}];
  std::map<std::int32_t, std::int32_t> moved;
  for (const auto& [ci, distinct] : calls) {
    const Communicator& c = trace.comms[static_cast<std::size_t>(ci)];
    std::size_t members = 0;
    for (auto r : c.ranks) members += simulated.count(r);
    if (members != 1) continue;
    auto total = [&, &distinct = distinct](const Communicator& g) {
      double s = 0;
      for (const auto& [call, n] : distinct)
        s += double(n) * comm.idle_collective(g, std::get<0>(call), std::get<1>(call), std::get<2>(call)).duration_s;
      return s;
    };
    const double own = total(c);
    double best = own;
    std::int32_t best_k = ci;
    const auto& cls = classes[c.name];
    for (auto k : cls) {
      const Communicator& g = trace.comms[static_cast<std::size_t>(k)];
      if (g.ranks.size() != c.ranks.size()) continue;  // not a group of the same kind
      const double s = total(g);
      if (s > best) best = s, best_k = k;
    }
    PlacementClassChoice& ch = out[c.category];
    ++ch.communicators;
    ch.classes = std::max(ch.classes, cls.size() + 1);
    ch.own_s += own, ch.priced_s += best;
    if (best_k != ci) ++ch.moved, moved[ci] = best_k;
    if (ch.own_shape.empty()) ch.own_shape = group_shape(t, c.ranks);  // the note names it when nothing moves
    if (best - own > ch.largest_gain_s) {
      ch.largest_gain_s = best - own;
      ch.example = c.name;
      ch.own_shape = group_shape(t, c.ranks);
      ch.slowest_shape = group_shape(t, trace.comms[static_cast<std::size_t>(best_k)].ranks);
    }
  }
  for (auto& rt : trace.ranks)
    for (auto& op : rt.ops)
      if (op.kind == OpKind::Collective && op.comm >= 0)
        if (auto it = moved.find(op.comm); it != moved.end()) op.comm = it->second;
  return out;
}

void add_placement_class_results(const std::map<std::string, PlacementClassChoice>& choices,
                                 std::vector<std::string>& notes, std::map<std::string, double>& metrics,
                                 const std::string& prefix) {
  auto ms = [](double s) {
    char b[48];
    std::snprintf(b, sizeof b, "%.3f ms", 1e3 * s);
    return std::string(b);
  };
  for (const auto& [cat, ch] : choices) {
    metrics[prefix + "placement." + cat + ".classes"] = double(ch.classes);
    metrics[prefix + "placement." + cat + ".own_s"] = ch.own_s;
    metrics[prefix + "placement." + cat + ".priced_s"] = ch.priced_s;
    std::string n = "placement: the " + cat + " groups of a pipeline stage take up to " + std::to_string(ch.classes) +
                    " shapes over the NVLink domains and servers; ";
    if (ch.moved == 0)
      n += "the simulated ranks' own groups are the slowest (" + ch.own_shape + "; " + ms(ch.own_s) +
           " of calls per step, each alone on an idle fabric)";
    else
      n += std::to_string(ch.moved) + " of " + std::to_string(ch.communicators) +
           " communicators run their calls over a slower group, slowest " + ch.slowest_shape + " (e.g. '" + ch.example +
           "'), not the simulated rank's own " + ch.own_shape + ": " + ms(ch.priced_s) + " of " + cat +
           " calls per step, each alone on an idle fabric, instead of " + ms(ch.own_s) + " (metrics " + prefix + "placement." + cat +
           ".*)";
    notes.push_back(std::move(n));
  }
}

}  // namespace fabricsim::sim
