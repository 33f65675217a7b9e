#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "sim/base/error.hpp"
#include "topologies/io.hpp"
#include "workloads/gpt.hpp"
#include "workloads/importers.hpp"

namespace fabricsim::workloads {

namespace {
std::string detect_format(const std::string& path) {
  if (looks_like_chakra(path)) return "chakra";
  if (!std::filesystem::is_regular_file(path))
    throw InputError(path, "no such file, and no Chakra rank files " + path + ".0.et / " + path + ".0.json");
  std::ifstream in(path, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  if (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f && static_cast<unsigned char>(head[1]) == 0x8b)
    throw InputError(path, "a gzip-compressed file: decompress it first (gunzip)");
  const auto first = head.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && head[first] == '{') {
    if (head.find("\"ranks\"") != std::string::npos || head.find("\"world_size\"") != std::string::npos) return "trace";
    if (head.find("\"schema\"") != std::string::npos && head.find("\"nodes\"") != std::string::npos)
      throw InputError(path, "a PyTorch execution trace (host ET), not a Chakra trace: convert it with chakra_trace_link "
                             "and chakra_converter first");
    return "chakra";
  }
  return "astra";
}

// Whether the first line (ASTRA-sim's header, a few words) states the rank count. Only its first 4 KiB are
// read: a path naming a device without newlines (/dev/zero) must not be read line-wise without end.
bool states_all_gpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head.substr(0, head.find('\n')).find("all_gpus:") != std::string::npos;
}
}  // namespace

namespace {
const topo::PresetInfo* preset_info(const std::string& name) {
  for (const auto& p : topo::presets())
    if (p.name == name) return &p;
  return nullptr;
}
bool single_server(const std::string& preset) { return topo::build_preset(preset, {}).num_hosts() == 1; }
// The topology parameters an import accepts on `topology`: a file's none, a preset's own, and for a server preset
// also the superpod's it grows into (node, nodes, fabric, ...).
std::vector<std::string> topology_param_names(const std::string& topology) {
  std::vector<std::string> out;
  if (std::filesystem::is_regular_file(topology)) return out;
  auto add = [&](const topo::PresetInfo& p) {
    for (const auto& [k, d] : p.params)
      if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  };
  const topo::PresetInfo* p = preset_info(topology);
  if (!p) topo::build_preset(topology, {});  // an unknown name lists the presets
  add(*p);
  if (single_server(topology)) add(*preset_info("superpod"));
  return out;
}
}  // namespace

std::string gpus_shortfall(const std::string& topology, const std::map<std::string, std::string>& params,
                           std::int64_t have, std::int64_t need, bool cli) {
  const std::string n = std::to_string(need);
  if (!topo::is_preset(topology))
    return "the topology file " + topology + " has " + std::to_string(have) + " GPUs; a job of " + n +
           " ranks needs a topology file with that many";
  std::string given;
  for (const auto& [k, v] : params) given += (given.empty() ? "" : ", ") + (cli ? "--param " + k + "=" + v : k + " " + v);
  const bool grown = single_server(topology) && (params.count("nodes") || params.count("node"));
  std::string out = "topology " + topology + (given.empty() ? std::string() : " (" + given + ")") +
                    (grown ? " is a superpod of such servers with " : " has ") + std::to_string(have) + " GPUs";
  const topo::GrowHint g = topo::preset_growth(topology, params, need);
  if (g.preset.empty()) return out;
  const std::string per = " (" + std::to_string(g.per_node) + " GPUs per node)";
  const bool same = g.preset == topology || (cli && single_server(topology));  // the --param nodes= of an import grows it
  if (!g.nodes) {
    const std::string most = std::to_string(g.max_nodes * g.per_node);
    return out + "; " + g.preset + " allows at most " + (cli ? "--param nodes=" : "\"nodes\": ") +
           std::to_string(g.max_nodes) + " (" + most + " GPUs), fewer than the " + n + " ranks need";
  }
  const std::string nodes = std::to_string(g.nodes);
  if (same)
    return out + "; " + (cli ? "--param nodes=" + nodes : "\"nodes\": " + nodes + " in /topology/params") + per +
           " fits the " + n + " ranks";
  return out + "; " +
         (cli ? "--topology superpod --param node=" + topology + " --param nodes=" + nodes
              : "\"topology\": {\"preset\": \"superpod\", \"params\": {\"node\": \"" + topology + "\", \"nodes\": " + nodes + "}}") +
         per + " fits the " + n + " ranks";
}

ImportOverrides split_import_overrides(const std::string& topology, const ParamMap& overrides,
                                       const std::set<std::string>& importer_names, UnknownParam unknown) {
  ImportOverrides out;
  std::vector<std::string> topo_names;
  bool topo_listed = false;
  for (const auto& [k, v] : overrides) {
    if (!importer_names.count(k)) {
      if (!topo_listed) topo_names = topology_param_names(topology), topo_listed = true;  // an unknown name lists the presets
      if (std::find(topo_names.begin(), topo_names.end(), k) != topo_names.end()) {
        out.topology[k] = v;
        continue;
      }
      if (unknown == UnknownParam::refuse) {
        std::string list;
        for (const auto& n : topo_names) list += (list.empty() ? "" : ", ") + n;
        throw InputError("--param " + text_excerpt(k, 40),
                         "unknown parameter: neither a gpt generator parameter (fabricsim gen --help; docs/workloads.md) nor " +
                             (std::filesystem::is_regular_file(topology)
                                  ? "a topology parameter (the topology file " + topology + " takes none)"
                                  : "a parameter of topology " + topology + " (" + list + ")"));
      }
    }
    out.importer[k] = v;
    if (overrides.quoted.count(k)) out.importer.quoted.insert(k);
  }
  return out;
}

ImportOverrides split_import_overrides(const std::string& topology, const ParamMap& overrides) {
  static const std::set<std::string> gpt = gpt_param_names();
  return split_import_overrides(topology, overrides, gpt, UnknownParam::refuse);
}

Json topology_for_ranks(const std::string& topology, std::int64_t ranks, std::int64_t* gpus,
                        const std::map<std::string, std::string>& params, std::string* gpu_model) {
  if (std::filesystem::is_regular_file(topology)) {
    if (!params.empty())
      throw InputError("--param " + params.begin()->first, "the topology file " + topology + " takes no parameters");
    const topo::Topology t = topo::load_topology_file(topology);
    if (gpus) *gpus = static_cast<std::int64_t>(t.gpus().size());
    if (gpu_model && !t.gpus().empty()) *gpu_model = t.node(t.gpus()[0]).model;
    return {{"file", std::filesystem::absolute(topology).string()}};
  }
  const topo::Topology t = topo::build_preset(topology, {});  // an unknown name lists the presets
  auto typed = [](const std::map<std::string, std::string>& m) {
    Json o = Json::object();
    for (const auto& [k, v] : m) o[k] = param_value_json(v);
    return o;
  };
  // Built as the scenario will build it (a bad value is an error naming --param KEY now).
  auto built = [&](const std::string& preset, const std::map<std::string, std::string>& p) {
    const topo::Topology b = topo::build_preset(preset, p);
    if (gpus) *gpus = static_cast<std::int64_t>(b.gpus().size());
    if (gpu_model && !b.gpus().empty()) *gpu_model = b.node(b.gpus()[0]).model;
  };
  const topo::PresetInfo& own = *preset_info(topology);
  bool superpod_key = false;  // a parameter only the superpod has (node, nodes, fabric, ...)
  for (const auto& [k, v] : params)
    if (std::none_of(own.params.begin(), own.params.end(), [&](const auto& q) { return q.first == k; })) superpod_key = true;
  if (t.num_hosts() == 1 && (superpod_key || ranks > static_cast<std::int64_t>(t.gpus().size()))) {
    // A superpod of enough such servers (or of the --param node's), unless --param nodes says how many.
    std::map<std::string, std::string> p = params;
    if (!p.count("node")) p["node"] = topology;
    if (!p.count("nodes")) {
      std::map<std::string, std::string> one = p;
      one["nodes"] = "1";
      const auto per_node = static_cast<std::int64_t>(topo::build_preset("superpod", one).gpus().size());
      p["nodes"] = std::to_string(std::max<std::int64_t>(1, (ranks + per_node - 1) / per_node));
    }
    built("superpod", p);
    return {{"preset", "superpod"}, {"params", typed(p)}};
  }
  if (params.empty()) {
    built(topology, {});
    return {{"preset", topology}};
  }
  built(topology, params);
  return {{"preset", topology}, {"params", typed(params)}};
}

Json scenario_for_trace(const std::string& path, const std::string& format_in, const std::string& topology,
                        const ParamMap& params) {
  const std::string format = format_in.empty() || format_in == "auto" ? detect_format(path) : format_in;
  if (format != "chakra" && format != "astra" && format != "trace")
    throw InputError("--format", "expected auto, chakra, astra or trace");
  // --param: the importer's parameters, and the topology's (a key of the preset, or of the superpod a server preset
  // grows into, as the other imports take them); any other key stays the importer's, which refuses it.
  static const std::set<std::string> kImporterParams = {"npus", "comm_group", "dims", "cycle_ns", "gpus_per_host"};
  if (!std::filesystem::is_regular_file(topology)) topology_param_names(topology);  // an unknown name lists the presets
  ImportOverrides split = split_import_overrides(topology, params, kImporterParams, UnknownParam::importer);
  ParamMap& p = split.importer;
  const std::map<std::string, std::string>& topo_params = split.topology;
  if (format == "trace" && !p.empty()) throw InputError("--param", "a fabricsim trace takes no workload params");
  std::int64_t preset_gpus = 0;
  if (!std::filesystem::is_regular_file(topology)) topology_for_ranks(topology, 0, &preset_gpus, topo_params);
  if (format == "astra" && !p.count("npus") && !states_all_gpus(path) && preset_gpus > 0)
    p["npus"] = std::to_string(preset_gpus);
  // The workload's rank count decides the cluster size for single-server presets.
  std::int64_t ranks = 0;
  if (format == "chakra") {
    ChakraOptions o = chakra_options_from_params(p, "--param");
    o.quiet = true;  // the run imports it again and says what it noticed then
    ranks = import_chakra(path, o).world_size;
  } else if (format == "astra") {
    ranks = import_astra_file(path, p, "--param").world_size;
  } else {
    ranks = load_trace_file(path).world_size;
  }
  Json doc;
  std::int64_t gpus = 0;
  doc["topology"] = topology_for_ranks(topology, ranks, &gpus, topo_params);
  if (ranks > gpus)
    throw InputError(path, "the workload has " + std::to_string(ranks) + " ranks but " +
                               gpus_shortfall(topology, topo_params, gpus, ranks, true));
  Json w;
  w[format] = std::filesystem::absolute(path).string();
  if (!p.empty()) {
    Json jp = Json::object();
    for (const auto& [k, v] : p) jp[k] = param_value_json(v);  // typed: a quoted number is an error
    w["params"] = jp;
  }
  doc["workload"] = w;
  return doc;
}

}  // namespace fabricsim::workloads
