// `fabricsim import megatron`: the file of --tp-comm-overlap-cfg (Transformer Engine's userbuffers settings per
// GEMM), read as Megatron-LM reads it (yaml.safe_load in _initialize_tp_communicators, megatron/training/
// initialize.py at NVIDIA/Megatron-LM@d98e8a64) into the JSON object the gpt generator's tp_comm_overlap_cfg takes.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "sim/base/error.hpp"
#include "workloads/megatron_args.hpp"

namespace fabricsim::workloads {

namespace {

// A YAML scalar as PyYAML's safe_load (YAML 1.1 resolvers) types it: null, bool, int, float, else string.
Json scalar_json(const std::string& s, bool quoted) {
  if (quoted) return Json(s);
  static const std::regex null_re("~|null|Null|NULL|"), true_re("yes|Yes|YES|true|True|TRUE|on|On|ON"),
      false_re("no|No|NO|false|False|FALSE|off|Off|OFF"), int_re("[-+]?(0|[1-9][0-9_]*)"),
      float_re("[-+]?([0-9][0-9_]*)?\\.[0-9_]*([eE][-+][0-9]+)?");
  if (std::regex_match(s, null_re)) return Json();
  if (std::regex_match(s, true_re)) return Json(true);
  if (std::regex_match(s, false_re)) return Json(false);
  std::string digits;
  for (char c : s)
    if (c != '_') digits += c;
  if (std::regex_match(s, int_re)) return Json(static_cast<std::int64_t>(std::stoll(digits)));
  if (std::regex_match(s, float_re) && s != "." && s != "-." && s != "+.") return Json(std::stod(digits));
  return Json(s);
}

Json yaml_json(const YAML::Node& n) {
  if (n.IsMap()) {
    Json o = Json::object();
    for (const auto& kv : n) o[kv.first.as<std::string>()] = yaml_json(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    Json a = Json::array();
    for (const auto& e : n) a.push_back(yaml_json(e));
    return a;
  }
  if (n.IsScalar()) return scalar_json(n.Scalar(), n.Tag() == "!");
  return Json();
}

}  // namespace

Json read_megatron_ub_cfg(const std::string& script_file, const std::string& path, int line) {
  namespace fs = std::filesystem;
  const fs::path p = fs::path(path).is_absolute() ? fs::path(path) : fs::path(script_file).parent_path() / path;
  const std::string at = script_file + ":" + std::to_string(line);
  std::ifstream in(p, std::ios::binary);
  if (!in)
    throw InputError(at, "--tp-comm-overlap-cfg: cannot read " + p.string() +
                             " (a relative path is taken from the script's directory)");
  std::ostringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    throw InputError(e.mark.line >= 0 ? p.string() + ":" + std::to_string(e.mark.line + 1) : p.string(),
                     "not valid YAML: " + e.msg);
  }
  const Json cfg = yaml_json(root);
  if (cfg.is_null()) return Json::object();  // an empty file: yaml.safe_load gives None, TE's defaults
  if (!cfg.is_object())
    throw InputError(p.string(), "expected a mapping of Transformer Engine GEMM names (qkv_fprop, proj_dgrad, ...) to "
                                 "userbuffers settings");
  return cfg;
}

}  // namespace fabricsim::workloads
