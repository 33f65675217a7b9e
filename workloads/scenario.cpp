#include "workloads/scenario.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "models/gpu.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "topologies/io.hpp"
#include "workloads/cluster.hpp"
#include "workloads/dataparallel.hpp"
#include "workloads/dlrm.hpp"
#include "workloads/gpt.hpp"
#include "workloads/importers.hpp"

namespace fabricsim::workloads {

namespace {
// A topology preset's parameters from a scenario: a plain number given as a JSON string ("nodes": "4") is an error
// naming its JSON path. The presets' string parameters (node, gpu, fabric, rail_optimized, sharp) never hold a plain
// number, and a bandwidth parameter needs its unit (the preset says so for "400" and for 400 alike).
std::map<std::string, std::string> topology_params_from_json(const Json& obj, const JsonPath& at) {
  const ParamMap p = params_from_json(obj, at);
  for (const auto& k : p.quoted) {
    const std::string& v = p.at(k);
    const bool bandwidth = k.size() >= 10 && k.compare(k.size() - 10, 10, "_bandwidth") == 0;
    bool plain_number = true;
    try {
      parse_double(v, k);
    } catch (const InputError&) {
      plain_number = false;
    }
    if (plain_number && !bandwidth) json_fail(at.child(k), "expected a number, found the string " + json_excerpt(Json(v)));
  }
  return p;
}

std::string resolve(const std::string& base_file, const std::string& name) {
  if (name.empty() || base_file.empty() || base_file == "<built-in>") return name;
  std::filesystem::path p(name);
  if (p.is_absolute()) return name;
  // A scenario embedded in another file is named "<file>#/<json pointer>": paths are relative to <file>.
  const std::string containing = base_file.substr(0, base_file.find('#'));
  return (std::filesystem::path(containing).parent_path() / p).lexically_normal().string();
}
}  // namespace

WorkloadSpec workload_from_json(const Json& doc, const JsonPath& at, const std::string& file) {
  ObjectReader wr(doc, at);
  int kinds = wr.has("generator") + wr.has("trace") + wr.has("chakra") + wr.has("astra");
  if (kinds != 1) json_fail(at, "expected exactly one of \"generator\", \"trace\", \"chakra\", \"astra\"");
  WorkloadSpec w;
  if (wr.has("generator")) {
    w.kind = "generator";
    w.generator = wr.string("generator");
    if (w.generator != "gpt" && w.generator != "dlrm" && w.generator != "dataparallel")
      json_fail(wr.path_of("generator"), "expected gpt, dlrm or dataparallel");
  } else {
    w.kind = wr.has("trace") ? "trace" : wr.has("chakra") ? "chakra" : "astra";
    w.file = resolve(file, wr.string(w.kind));
  }
  if (const Json* p = wr.object_optional("params")) {
    if (w.kind == "trace") json_fail(wr.path_of("params"), "\"params\" applies to generators, chakra and astra workloads only");
    w.params = params_from_json(*p, wr.path_of("params"));
    // File-valued generator parameters are relative to the scenario file, like every other path.
    for (const char* k : {"configs", "comm_group", "moe_expert_token_counts_file"})
      if (auto it = w.params.find(k); it != w.params.end()) it->second = resolve(file, it->second);
  }
  if (const Json* n = wr.array_optional("notes")) {
    // What an importer (`fabricsim import megatron`) recorded about the workload; the result repeats it.
    const JsonPath at_notes = wr.path_of("notes");
    for (std::size_t k = 0; k < n->size(); ++k) {
      if (!(*n)[k].is_string()) json_fail(at_notes.child(std::to_string(k)), "expected a string");
      w.notes.push_back((*n)[k].get<std::string>());
    }
  }
  w.where = wr.path_of("params").str();
  wr.finish();
  return w;
}

bool is_comm_model(const std::string& name) { return name == "engine" || name == "shared" || name == "analytic"; }
const char* comm_model_help() { return "shared, engine or analytic"; }

Scenario scenario_from_json(const Json& doc, const std::string& file) {
  Scenario s;
  s.file = file;
  // A result of `fabricsim run --json` handed back as a scenario: say what it is, not that its topology (a name
  // there) is not an object.
  if (doc.is_object() && doc.contains("schema_version") && doc.contains("iteration_s") && doc.contains("breakdown"))
    json_fail(JsonPath{file, ""}, "this is a result written by fabricsim run --json (it has schema_version, iteration_s "
                                  "and breakdown), not a scenario; give the scenario file that produced it");
  ObjectReader r(doc, JsonPath{file, ""});
  {
    ObjectReader tr(r.object("topology"), r.path_of("topology"));
    bool has_preset = tr.has("preset"), has_file = tr.has("file");
    if (has_preset == has_file) json_fail(r.path_of("topology"), "expected exactly one of \"preset\" or \"file\"");
    if (has_preset) {
      s.topology = tr.string("preset");
      if (!topo::is_preset(s.topology)) {
        std::string list;
        for (const auto& p : topo::presets()) list += (list.empty() ? "" : ", ") + p.name;
        json_fail(tr.path_of("preset"), "a topology preset name (" + list + "); a topology file goes in \"file\"");
      }
      if (const Json* p = tr.object_optional("params")) s.topology_params = topology_params_from_json(*p, tr.path_of("params"));
    } else {
      s.topology = resolve(file, tr.string("file"));
    }
    if (const Json* pl = tr.object_optional("placement")) {
      s.placement_at = tr.path_of("placement");
      ObjectReader pr(*pl, s.placement_at);
      s.placement_segment = pr.integer_in("segment", 1, 1 << 20);
      pr.finish();
      if (r.has("jobs"))
        json_fail(s.placement_at, "no \"placement\" here in a cluster scenario (each job has its own: \"placement\": "
                                  "\"segment(N)\" or \"gpus\")");
    }
    tr.finish();
  }
  if (r.has("jobs")) {
    if (r.has("workload")) json_fail(r.path_of("workload"), "either \"workload\" or \"jobs\", not both");
    parse_cluster(s, r, file);
  } else {
    if (r.has("faults") || r.has("jitter"))
      json_fail(r.path_of(r.has("faults") ? "faults" : "jitter"), "\"jobs\" (faults and jitter apply to cluster scenarios)");
    s.workload = workload_from_json(r.object("workload"), r.path_of("workload"), file);
  }
  if (r.has("calibration")) {
    // auto | default | shipped:NAME as every command's --calibration (models/system.hpp); else a file relative
    // to the scenario.
    const std::string c = r.string("calibration");
    s.calibration_file = c == "auto" || c == "default" || c.rfind("shipped:", 0) == 0 ? c : resolve(file, c);
  }
  if (const Json* c = r.object_optional("compute")) {
    s.compute = *c;
    s.compute_at = r.path_of("compute");
    // A compute calibration file path is relative to the scenario file, like every other path.
    if (c->contains("calibration") && (*c)["calibration"].is_string()) {
      const std::string v = (*c)["calibration"].get<std::string>();
      if (v.find('/') != std::string::npos || v.find(".json") != std::string::npos)
        (*s.compute)["calibration"] = resolve(file, v);
    }
    models::compute_efficiency_from_json(*c, s.compute_at, models::default_compute_efficiency());  // validate now
    models::compute_calibration_from_compute_json(*s.compute, s.compute_at);
  }
  s.comm_model = r.string_or("comm_model", "shared");
  if (!is_comm_model(s.comm_model))
    json_fail(r.path_of("comm_model"), std::string("expected one of ") + comm_model_help());
  s.comm_sm_contention = r.boolean_or("comm_sm_contention", true);
  s.comm_sm_contention_all_gpus = s.comm_sm_contention && r.has("comm_sm_contention");
  s.comm_start_delay = r.boolean_or("comm_start_delay", true);
  s.comm_start_delay_all_gpus = s.comm_start_delay && r.has("comm_start_delay");
  if (const Json* o = r.object_optional("outputs")) {
    Json resolved = *o;
    for (const char* k : {"timeline", "link_stats", "json", "report"})
      if (resolved.contains(k) && resolved[k].is_string()) resolved[k] = resolve(file, resolved[k].get<std::string>());
    s.outputs = resolved;
    s.outputs_at = r.path_of("outputs");
  }
  r.finish();
  return s;
}

Scenario load_scenario(const std::string& path) { return scenario_from_json(load_json_file(path), path); }

Json default_scenario_json() {
  return Json::parse(R"({
    "topology": {"preset": "superpod", "params": {"nodes": 128, "node": "dgx-a100"}},
    "workload": {"generator": "gpt", "params": {
      "num_layers": 96, "hidden_size": 12288, "num_attention_heads": 96, "seq_length": 2048,
      "padded_vocab_size": 51200, "micro_batch_size": 1, "global_batch_size": 1536,
      "tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 16,
      "num_layers_per_virtual_pipeline_stage": 3, "recompute_granularity": "full",
      "async_tensor_model_parallel_allreduce": false}},
    "compute": {"preset": "megatron-sc21"}
  })");
}

Scenario default_scenario() { return scenario_from_json(default_scenario_json(), "<built-in>"); }

void set_compute_preset(Json& doc, const std::string& name, const std::string& where) {
  models::compute_preset_named(name, where);  // an unknown name is an error naming `where`
  if (!doc.is_object()) return;  // scenario_from_json reports the malformed document
  if (!doc.contains("compute") || !doc["compute"].is_object()) doc["compute"] = Json::object();
  doc["compute"]["preset"] = name;
}

models::ComputeModel scenario_compute_model(const Scenario& s, const topo::Topology& t,
                                            const std::map<std::string, double>& calibration_extra) {
  models::ComputeModel cm;
  std::string gpu;
  auto it = s.workload.params.find("gpu");
  if (it != s.workload.params.end()) gpu = it->second;
  else if (!t.gpus().empty()) gpu = t.node(t.gpus()[0]).model;
  if (gpu.empty()) gpu = "a100-80gb";
  cm.gpu = models::gpu_spec(gpu, s.workload.where + " gpu");
  // defaults (or the scenario's compute preset) <- calibration "compute.*" keys <- scenario compute keys
  const models::ComputeEfficiency base = s.compute ? models::compute_preset_from_json(*s.compute, s.compute_at)
                                                   : models::default_compute_efficiency();
  cm.eff = models::compute_efficiency_from_extra(calibration_extra, base);
  if (s.compute) cm.eff = models::compute_efficiency_from_json(*s.compute, s.compute_at, cm.eff, false);
  if (s.compute) cm.kernels = models::compute_calibration_from_compute_json(*s.compute, s.compute_at);
  auto pr = s.workload.params.find("precision");
  if (pr != s.workload.params.end()) models::parse_precision(pr->second, cm.precision);
  return cm;
}

Trace generate(const std::string& generator, const ParamMap& params, const models::ComputeModel& cm_in,
               const std::string& where) {
  models::ComputeModel cm = cm_in;
  if (auto it = params.find("gpu"); it != params.end()) cm.gpu = models::gpu_spec(it->second, where + " gpu");
  if (auto it = params.find("precision"); it != params.end()) models::parse_precision(it->second, cm.precision);
  if (generator == "gpt") {
    ParamMap p = params;
    if (!p.count("gpu")) p["gpu"] = cm.gpu.name;
    return generate_gpt(gpt_config_from_params(p, where), cm, where);
  }
  if (generator == "dlrm") {
    ParamMap p = params;
    if (!p.count("gpu")) p["gpu"] = cm.gpu.name;
    return generate_dlrm(dlrm_config_from_params(p, where), cm, where);
  }
  if (generator == "dataparallel" || generator == "dp") {
    ParamMap p = params;
    if (!p.count("gpu")) p["gpu"] = cm.gpu.name;
    return generate_dataparallel(dataparallel_config_from_params(p, where), cm, where);
  }
  throw InputError(where, "unknown generator '" + generator + "' (expected gpt, dlrm or dataparallel)");
}

ParamMap generator_params(const Scenario& s, const topo::Topology& t, const models::ComputeModel& cm) {
  const auto& w = s.workload;
  const std::int64_t gpus = static_cast<std::int64_t>(t.gpus().size());
  ParamMap p = w.params;
  if (!p.count("world_size")) p["world_size"] = std::to_string(gpus);
  if (!p.count("gpu")) p["gpu"] = cm.gpu.name;
  if (w.generator == "gpt" && !p.count("gpus_per_host") && t.num_hosts() > 0)
    p["gpus_per_host"] = std::to_string(std::max<std::int64_t>(1, gpus / t.num_hosts()));
  if (w.generator == "gpt") {
    // Host memory is the topology's (one place): its servers' memory over their GPUs, the smallest over the
    // servers with GPUs; not known (not checked) when a server's CPUs do not give it.
    if (p.count("host_memory_per_gpu"))
      throw InputError(w.where + " host_memory_per_gpu", "no workload parameter: host memory is the topology's (a preset's "
                                                         "--param host_memory=1TB per server, or a cpu node's \"memory\")");
    std::map<int, std::int64_t> per_host;
    for (auto g : t.gpus()) ++per_host[t.node(g).host];
    double cap = 0;
    for (const auto& [h, n] : per_host) {
      const double m = h >= 0 ? t.host_memory_bytes(h) : 0.0;
      if (!(m > 0)) {
        cap = 0;
        break;
      }
      cap = cap > 0 ? std::min(cap, m / double(n)) : m / double(n);
    }
    if (cap > 0) p["host_memory_per_gpu"] = std::to_string(static_cast<std::uint64_t>(cap)) + "B";
  }
  if (w.generator == "gpt" && !p.count("gpus_per_nvlink_domain")) {
    // Largest NVLink domain (GB200 NVL72: 72 GPUs over 18 trays); MoE flex dispatch forwards inside it.
    std::map<int, std::int64_t> dom;
    for (auto g : t.gpus()) ++dom[t.node(g).nvlink_domain];
    std::int64_t mx = 1;
    for (const auto& [d, n] : dom) mx = std::max(mx, d >= 0 ? n : 1);
    p["gpus_per_nvlink_domain"] = std::to_string(mx);
  }
  // Megatron's use_sharp asks NCCL for SHARP on the data-parallel group (GptConfig::use_sharp): refused on a
  // fabric without SHARP switches, where NCCL has no CollNet to give it.
  if (w.generator == "gpt" && p.count("use_sharp") && (p.at("use_sharp") == "true" || p.at("use_sharp") == "1")) {
    if (std::none_of(t.nodes().begin(), t.nodes().end(), [](const topo::Node& nd) { return nd.sharp; }))
      throw InputError(w.where + " use_sharp", "needs InfiniBand switches with SHARP (superpod with sharp=true, or a "
                                               "topology file whose switches say \"sharp\": true); this topology has none");
  }
  return p;
}

std::int64_t nvlink_run_length(const topo::Topology& t, const std::vector<std::int32_t>& gpus) {
  std::vector<std::int64_t> runs;
  std::set<int> seen;
  int cur = 0;
  for (std::size_t k = 0; k < gpus.size(); ++k) {
    const int d = t.node(t.gpus()[static_cast<std::size_t>(gpus[k])]).nvlink_domain;
    if (d < 0) return 0;
    if (k > 0 && d == cur) {
      ++runs.back();
      continue;
    }
    if (!seen.insert(d).second) return 0;  // back in a domain it left: no run form
    cur = d, runs.push_back(1);
  }
  if (runs.empty()) return 0;
  for (std::size_t k = 0; k + 1 < runs.size(); ++k)
    if (runs[k] != runs[0]) return 0;
  return runs.back() <= runs[0] ? runs[0] : 0;
}

std::vector<std::string> nvlink_straddle_warnings(const GptConfig& c, std::int64_t domain) {
  std::vector<std::string> out;
  const std::int64_t dom = std::max(domain, c.gpus_per_host);
  if (dom <= 0 || c.world_size <= dom) return out;
  // Megatron-Core's rank order (tp fastest, then cp, ep / dp, pp: megatron/core/parallel_state.py
  // RankGenerator at d98e8a64) makes each of these groups a block of consecutive ranks of its size.
  const std::int64_t ep = c.moe.enabled() ? c.moe.expert_model_parallel_size : 1;
  const std::pair<const char*, std::int64_t> groups[] = {
      {"tensor-parallel (TP)", c.tensor_model_parallel_size},
      {"tensor x context-parallel (TP x CP)", c.context_parallel_size > 1 ? c.tensor_model_parallel_size * c.context_parallel_size : 1},
      {"expert-parallel (EP x ETP)", ep * (c.moe.enabled() ? c.etp() : 1)}};
  for (const auto& [name, g] : groups) {
    if (g <= 1 || dom % g == 0 || g > dom) continue;  // fits every domain, or no placement keeps it in one
    const std::int64_t per = dom / g * g;  // the most GPUs per domain that keep whole groups
    std::string seg;
    if (per % c.gpus_per_host == 0)
      seg = "; Slurm --segment=" + std::to_string(per / c.gpus_per_host) + ", in a scenario the topology's \"placement\": "
            "{\"segment\": " + std::to_string(per / c.gpus_per_host) + "} or a cluster job's \"placement\": \"segment(" +
            std::to_string(per / c.gpus_per_host) + ")\"";
    out.push_back(std::string("warning: ") + name + " groups of " + std::to_string(g) + " GPUs straddle NVLink domains of " +
                  std::to_string(dom) + " GPUs (ranks fill each domain in order); " + std::to_string(per) +
                  " GPUs per domain keep each group in one" + seg);
  }
  return out;
}

void check_generator_params(const Scenario& s, const topo::Topology& t, const models::ComputeModel& cm) {
  const auto& w = s.workload;
  if (w.kind != "generator") return;
  ParamMap p = generator_params(s, t, cm);
  if (auto it = p.find("gpu"); it != p.end()) models::gpu_spec(it->second, w.where + " gpu");
  if (auto it = p.find("precision"); it != p.end()) {
    models::Precision pr;
    models::parse_precision(it->second, pr);
  }
  // Each generator's parameter reader checks names, types and ranges (unknown keys are errors) without
  // generating anything.
  if (w.generator == "gpt") gpt_config_from_params(p, w.where);
  else if (w.generator == "dlrm") dlrm_config_from_params(p, w.where);
  else dataparallel_config_from_params(p, w.where);
}

Trace build_workload(const Scenario& s, const topo::Topology& t, const models::ComputeModel& cm) {
  const auto& w = s.workload;
  const std::int64_t gpus = static_cast<std::int64_t>(t.gpus().size());
  Trace tr;
  if (w.kind == "generator") {
    ParamMap p = generator_params(s, t, cm);
    tr = generate(w.generator, p, cm, w.where);
    if (w.generator == "gpt" && s.nvlink_warnings) {
      const GptConfig c = gpt_config_from_params(p, w.where);
      for (auto& n : nvlink_straddle_warnings(c, c.gpus_per_nvlink_domain)) tr.notes.push_back(std::move(n));
    }
  } else if (w.kind == "trace") {
    tr = load_trace_file(w.file);
  } else if (w.kind == "chakra") {
    tr = import_chakra_file(w.file, w.params, w.where);
  } else {
    ParamMap p = w.params;
    if (!p.count("gpus_per_host") && t.num_hosts() > 0)
      p["gpus_per_host"] = std::to_string(std::max<std::int64_t>(1, gpus / t.num_hosts()));
    tr = import_astra_file(w.file, p, w.where);
  }
  if (tr.world_size > gpus)
    throw InputError(w.kind == "generator" ? w.where + " world_size" : w.file,
                     "workload needs " + std::to_string(tr.world_size) + " GPUs but " +
                         gpus_shortfall(s.topology, s.topology_params, gpus, tr.world_size, false));
  return tr;
}

}  // namespace fabricsim::workloads
