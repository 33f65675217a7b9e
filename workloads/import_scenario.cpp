#include <filesystem>
#include <fstream>

#include "sim/base/error.hpp"
#include "topologies/io.hpp"
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

Json topology_for_ranks(const std::string& topology, std::int64_t ranks, std::int64_t* gpus) {
  if (std::filesystem::is_regular_file(topology)) {
    if (gpus) *gpus = static_cast<std::int64_t>(topo::load_topology_file(topology).gpus().size());
    return {{"file", std::filesystem::absolute(topology).string()}};
  }
  const topo::Topology t = topo::build_preset(topology, {});  // an unknown name lists the presets
  const auto preset_gpus = static_cast<std::int64_t>(t.gpus().size());
  if (t.num_hosts() == 1 && ranks > preset_gpus) {
    const std::int64_t nodes = (ranks + preset_gpus - 1) / preset_gpus;
    if (gpus) *gpus = nodes * preset_gpus;
    return {{"preset", "superpod"}, {"params", {{"node", topology}, {"nodes", nodes}}}};
  }
  if (gpus) *gpus = preset_gpus;
  return {{"preset", topology}};
}

Json scenario_for_trace(const std::string& path, const std::string& format_in, const std::string& topology,
                        const ParamMap& params) {
  const std::string format = format_in.empty() || format_in == "auto" ? detect_format(path) : format_in;
  if (format != "chakra" && format != "astra" && format != "trace")
    throw InputError("--format", "expected auto, chakra, astra or trace");
  if (format == "trace" && !params.empty()) throw InputError("--param", "a fabricsim trace takes no workload params");
  ParamMap p = params;
  std::int64_t preset_gpus = 0;
  if (!std::filesystem::is_regular_file(topology))
    topology_for_ranks(topology, 0, &preset_gpus);  // an unknown name lists the presets
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
  doc["topology"] = topology_for_ranks(topology, ranks);
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
