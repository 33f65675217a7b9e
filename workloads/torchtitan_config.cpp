#include "workloads/torchtitan_config.hpp"

// toml++ 3.3's parser checks internal conditions with TOML_ASSERT_ASSUME, and one of them (parse_key's "a bare
// key character or a quote") fails on some mutated configs (found by fuzzing): without NDEBUG that is an abort,
// with NDEBUG under clang a __builtin_assume of false (undefined behaviour). Its checks are compiled out here in
// every build; the parser then goes on to refuse or read the input (ASan + UBSan clean over 20,000 mutated
// configs, tests/apps/test_fuzz.cpp's seeds).
#pragma push_macro("NDEBUG")
#undef NDEBUG
#define TOML_ASSERT(expr) static_cast<void>(0)
#include <toml++/toml.h>
#pragma pop_macro("NDEBUG")

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "sim/base/error.hpp"
#include "topologies/io.hpp"
#include "workloads/config_path.hpp"
#include "workloads/gpt.hpp"
#include "workloads/gpt_models.hpp"
#include "workloads/importers.hpp"
#include "workloads/megatron_args.hpp"

namespace fabricsim::workloads {

// pytorch/torchtitan: 9dec370 (2024-12-26, torchtitan/config_manager.py; the Dec 2024 benchmark runs),
// 820504e (2025-06-13) and 6fc499f6 (2025-08-14) (config_manager.py / torchtitan/config/job_config.py, the
// JobConfig dataclasses), 8a2686c4a (2025-09-30, the quantize refactor) and b5bcd76c6 (2026-08-21,
// torchtitan/trainer.py Trainer.Config and torchtitan/config/configs.py).
const char* const kTorchtitanCommits = "9dec370, 820504e, 6fc499f6, 8a2686c4a and b5bcd76c6";

namespace {

// Schema generations (bits): where a key exists.
constexpr unsigned k2024 = 1, k2025 = 2, k2025q = 4, k2026 = 8;
constexpr unsigned kToml = k2024 | k2025 | k2025q, kAll = kToml | k2026, kDataclass = k2025 | k2025q;

enum class Kind {
  kRead,         // read by a rule in Import::rules
  kIgnored,      // no effect on a step's time or memory
  kNotModelled,  // changes the step unless it has torchtitan's default `dflt`; fabricsim does not simulate it
  kSection,      // a whole table with no effect on a step (its keys are not checked)
};

struct Key {
  const char* path;
  unsigned schemas;
  char type;  // b bool, i int, f number, s string, l list, * any
  Kind kind;
  const char* dflt;  // kNotModelled: torchtitan's default as a value prints ("false", "[]", "")
};

// Every key of the four schemas: the argparse options of config_manager.py @9dec370, the JobConfig dataclasses
// @820504e / @6fc499f6 / @8a2686c4a, and the fields Trainer.Config.to_dict writes @b5bcd76c6.
const std::vector<Key>& torchtitan_keys() {
  using K = Kind;
  static const std::vector<Key> keys = {
      // Sections that log, profile, checkpoint, validate or schedule the learning rate; the tokenizer and data
      // loader (the step's shapes come from [training]); the optimizer's hyper-parameters (AdamW's state is
      // priced by the memory model whatever its lr / betas).
      {"job", kAll, '*', K::kSection, ""}, {"profiling", kToml, '*', K::kSection, ""},
      {"profiler", k2026, '*', K::kSection, ""}, {"metrics", kAll, '*', K::kSection, ""},
      {"checkpoint", kAll, '*', K::kSection, ""}, {"comm", kAll, '*', K::kSection, ""},
      {"memory_estimation", kToml, '*', K::kSection, ""}, {"validation", kDataclass, '*', K::kSection, ""},
      {"validator", k2026, '*', K::kSection, ""}, {"lr_scheduler", kAll, '*', K::kSection, ""},
      {"optimizer", kAll, '*', K::kSection, ""}, {"tokenizer", k2026, '*', K::kSection, ""},
      {"dataloader", k2026, '*', K::kSection, ""}, {"debug", k2026, '*', K::kSection, ""},
      {"override", k2026, '*', K::kSection, ""}, {"loss", k2026, '*', K::kSection, ""},
      {"fault_tolerance", kDataclass | k2026, '*', K::kSection, ""},
      {"hf_assets_path", k2026, 's', K::kIgnored, ""}, {"dump_folder", k2026, 's', K::kIgnored, ""},
      // [model]
      {"model.name", kToml, 's', K::kRead, ""}, {"model.flavor", kToml, 's', K::kRead, ""},
      {"model.norm_type", k2024, 's', K::kRead, ""}, {"model.tokenizer_path", kToml, 's', K::kIgnored, ""},
      {"model.hf_assets_path", kDataclass, 's', K::kIgnored, ""}, {"model.converters", kDataclass, 'l', K::kRead, ""},
      {"model.print_after_conversion", kDataclass, 'b', K::kIgnored, ""},
      {"model_spec.name", k2026, 's', K::kRead, ""}, {"model_spec.flavor", k2026, 's', K::kRead, ""},
      {"model_spec.model", k2026, '*', K::kSection, ""},
      // [training]
      {"training.dataset", kToml, 's', K::kIgnored, ""}, {"training.dataset_path", kToml, 's', K::kIgnored, ""},
      {"training.batch_size", k2024 | k2025, 'i', K::kRead, ""},
      {"training.local_batch_size", kDataclass, 'i', K::kRead, ""},
      {"training.global_batch_size", kDataclass, 'i', K::kRead, ""},
      {"training.seq_len", kToml, 'i', K::kRead, ""},
      {"training.num_tokens_per_microbatch_per_dp_rank", k2026, 'i', K::kRead, ""},
      {"training.num_tokens_per_train_step", k2026, 'i', K::kRead, ""},
      {"training.max_context_length", k2026, 'i', K::kRead, ""},
      {"training.warmup_steps", k2024 | k2025, 'i', K::kIgnored, ""}, {"training.max_norm", kAll, 'f', K::kIgnored, ""},
      {"training.steps", kAll, 'i', K::kIgnored, ""},
      {"training.data_parallel_replicate_degree", k2024 | k2025, 'i', K::kRead, ""},
      {"training.data_parallel_shard_degree", k2024 | k2025, 'i', K::kRead, ""},
      {"training.tensor_parallel_degree", k2024 | k2025, 'i', K::kRead, ""},
      {"training.enable_cpu_offload", kAll, 'b', K::kNotModelled, "false"},
      {"training.disable_loss_parallel", k2024 | k2025, 'b', K::kNotModelled, "false"},
      {"training.disable_cuda_graphs", k2026, 'b', K::kIgnored, ""},  // launch overhead is not priced
      {"training.dtype", kDataclass | k2026, 's', K::kRead, ""},
      {"training.mixed_precision_param", kAll, 's', K::kRead, ""},
      {"training.mixed_precision_reduce", kAll, 's', K::kRead, ""},
      {"training.compile", k2024 | k2025, 'b', K::kRead, ""},
      {"training.gc_freq", kAll, 'i', K::kIgnored, ""}, {"training.gc_debug", kDataclass | k2026, 'b', K::kIgnored, ""},
      {"training.seed", kToml, 'i', K::kIgnored, ""}, {"training.deterministic", kToml, 'b', K::kIgnored, ""},
      // [experimental] (2024: pipeline / context parallelism and async TP lived here)
      {"experimental.enable_async_tensor_parallel", k2024, 'b', K::kRead, ""},
      {"experimental.pipeline_parallel_degree", k2024, 'i', K::kRead, ""},
      {"experimental.pipeline_parallel_split_points", k2024, 'l', K::kNotModelled, "[]"},
      {"experimental.pipeline_parallel_schedule", k2024, 's', K::kRead, ""},
      {"experimental.pipeline_parallel_schedule_csv", k2024, 's', K::kNotModelled, ""},
      {"experimental.pipeline_parallel_microbatches", k2024, 'i', K::kRead, ""},
      {"experimental.enable_compiled_autograd", k2024, 'b', K::kNotModelled, "false"},
      {"experimental.context_parallel_degree", k2024, 'i', K::kRead, ""},
      {"experimental.context_parallel_rotate_method", k2024, 's', K::kRead, ""},
      {"experimental.custom_import", kDataclass, 's', K::kIgnored, ""},
      {"experimental.custom_args_module", kDataclass, 's', K::kIgnored, ""},
      // [parallelism]
      {"parallelism.data_parallel_replicate_degree", kDataclass | k2026, 'i', K::kRead, ""},
      {"parallelism.data_parallel_shard_degree", kDataclass | k2026, 'i', K::kRead, ""},
      {"parallelism.enable_compiled_autograd", kDataclass, 'b', K::kNotModelled, "false"},
      {"parallelism.fsdp_reshard_after_forward", kDataclass | k2026, 's', K::kRead, ""},
      {"parallelism.enable_fsdp_symm_mem", k2026, 'b', K::kNotModelled, "false"},
      {"parallelism.tensor_parallel_degree", kDataclass | k2026, 'i', K::kRead, ""},
      {"parallelism.enable_sequence_parallel", k2026, 'b', K::kRead, ""},
      {"parallelism.spmd_backend", k2026, 's', K::kIgnored, ""},
      {"parallelism.disable_loss_parallel", kDataclass, 'b', K::kNotModelled, "false"},
      {"parallelism.enable_async_tensor_parallel", kDataclass, 'b', K::kRead, ""},
      {"parallelism.pipeline_parallel_degree", kDataclass | k2026, 'i', K::kRead, ""},
      {"parallelism.pipeline_parallel_split_points", kDataclass, 'l', K::kNotModelled, "[]"},
      {"parallelism.module_fqns_per_model_part", kDataclass | k2026, 'l', K::kRead, ""},
      {"parallelism.pipeline_parallel_first_stage_less_layers", kDataclass | k2026, 'i', K::kRead, ""},
      {"parallelism.pipeline_parallel_last_stage_less_layers", kDataclass | k2026, 'i', K::kRead, ""},
      {"parallelism.pipeline_parallel_layers_per_stage", kDataclass | k2026, 'i', K::kRead, ""},
      {"parallelism.pipeline_parallel_schedule", kDataclass | k2026, 's', K::kRead, ""},
      {"parallelism.pipeline_parallel_schedule_csv", kDataclass | k2026, 's', K::kNotModelled, ""},
      {"parallelism.pipeline_parallel_microbatches", k2025, 'i', K::kRead, ""},
      {"parallelism.pipeline_parallel_microbatch_size", kDataclass, 'i', K::kRead, ""},
      {"parallelism.num_pp_microbatches", k2026, 'i', K::kRead, ""},
      {"parallelism.context_parallel_degree", kDataclass | k2026, 'i', K::kRead, ""},
      {"parallelism.context_parallel_rotate_method", kDataclass, 's', K::kRead, ""},
      // headtail is the load-balanced sharding fabricsim's CP model assumes
      {"parallelism.context_parallel_load_balancer", k2026, 's', K::kIgnored, ""},
      {"parallelism.context_parallel_ptrr_mask_key", k2026, 's', K::kIgnored, ""},
      {"parallelism.expert_parallel_degree", kDataclass | k2026, 'i', K::kRead, ""},
      {"parallelism.expert_tensor_parallel_degree", kDataclass, 'i', K::kRead, ""},
      // [activation_checkpoint] (2026: the policy's fields tell FullAC, SelectiveAC and MemoryBudgetAC apart)
      {"activation_checkpoint", k2026, '*', K::kRead, ""},  // null: no activation checkpointing
      {"activation_checkpoint.mode", kToml, 's', K::kRead, ""},
      {"activation_checkpoint.selective_ac_option", kToml, 's', K::kRead, ""},
      {"activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns", kDataclass, 'l', K::kIgnored, ""},
      {"activation_checkpoint.early_stop", k2025q, 'b', K::kIgnored, ""},
      {"activation_checkpoint.preserve_rng_state", k2026, 'b', K::kIgnored, ""},
      {"activation_checkpoint.determinism_check", k2026, 's', K::kIgnored, ""},
      {"activation_checkpoint.debug", k2026, 'b', K::kIgnored, ""},
      {"activation_checkpoint.force_recompute_mm_shapes_by_fqns", k2026, 'l', K::kRead, ""},
      {"activation_checkpoint.memory_budget", k2026, 'f', K::kRead, ""},
      {"activation_checkpoint.visualize_memory_budget_pareto", k2026, 'b', K::kIgnored, ""},
      // [float8] (2024: enable_float8_linear and scaling types; 2025: recipe_name under model.converters)
      {"float8.enable_float8_linear", k2024, 'b', K::kRead, ""},
      {"float8.enable_fsdp_float8_all_gather", k2024 | k2025, 'b', K::kRead, ""},
      // one amax all-reduce per step instead of one per weight: below the step's resolution
      {"float8.precompute_float8_dynamic_scale_for_fsdp", k2024 | k2025, 'b', K::kIgnored, ""},
      {"float8.scaling_type_input", k2024, 's', K::kRead, ""}, {"float8.scaling_type_weight", k2024, 's', K::kRead, ""},
      {"float8.scaling_type_grad_output", k2024, 's', K::kRead, ""},
      {"float8.recipe_name", k2025, 's', K::kRead, ""},
      {"float8.filter_fqns", k2025, 'l', K::kIgnored, ""},  // the output layer stays bf16, as fabricsim prices it
      {"float8.emulate", k2025, 'b', K::kNotModelled, "false"},
      {"float8.force_recompute_fp8_weight_in_bwd", k2025, 'b', K::kRead, ""},
      {"float8.moe_fqns_prototype", k2025, 'l', K::kNotModelled, "[]"},
      {"mx.use_fp8_dim1_cast_triton_kernel", k2025, 'b', K::kIgnored, ""},
      {"mx.mxfp8_dim1_cast_kernel_choice", k2025, 's', K::kIgnored, ""},
      {"mx.recipe_name", k2025, 's', K::kRead, ""}, {"mx.filter_fqns", k2025, 'l', K::kIgnored, ""},
      {"mx.moe_fqns_prototype", k2025, 'l', K::kNotModelled, "[]"},
      // [compile] (2025-09 on) and [quantize] (2025-09)
      {"compile.enable", k2025q | k2026, 'b', K::kRead, ""}, {"compile.components", k2025q | k2026, 'l', K::kRead, ""},
      {"compile.backend", k2026, 's', K::kNotModelled, "inductor"},
      {"compile.enable_async_tensor_parallel", k2026, 'b', K::kRead, ""},
      {"quantize.linear.float8.enable_fsdp_float8_all_gather", k2025q, 'b', K::kRead, ""},
      {"quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp", k2025q, 'b', K::kIgnored, ""},
      {"quantize.linear.float8.recipe_name", k2025q, 's', K::kRead, ""},
      {"quantize.linear.float8.filter_fqns", k2025q, 'l', K::kIgnored, ""},
      {"quantize.linear.float8.emulate", k2025q, 'b', K::kNotModelled, "false"},
      {"quantize.linear.mx.mxfp8_dim1_cast_kernel_choice", k2025q, 's', K::kIgnored, ""},
      {"quantize.linear.mx.recipe_name", k2025q, 's', K::kRead, ""},
      {"quantize.linear.mx.filter_fqns", k2025q, 'l', K::kIgnored, ""},
      {"quantize.grouped_mm.float8.fqns", k2025q, 'l', K::kNotModelled, "[]"},
      {"quantize.grouped_mm.mx.recipe_name", k2025q, 's', K::kIgnored, ""},
      {"quantize.grouped_mm.mx.fqns", k2025q, 'l', K::kNotModelled, "[]"},
  };
  return keys;
}

const Key* find_key(const std::string& path) {
  static const std::map<std::string, const Key*> table = [] {
    std::map<std::string, const Key*> t;
    for (const auto& k : torchtitan_keys()) t.emplace(k.path, &k);
    return t;
  }();
  const auto it = table.find(path);
  return it == table.end() ? nullptr : it->second;
}

// The section key (kSection) that contains `path`, if any.
const Key* section_of(const std::string& path) {
  const ConfigPath p = split_dots(path);
  for (std::size_t n = 1; n < p.size(); ++n)
    if (const Key* k = find_key(dotted(ConfigPath(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(n))));
        k && k->kind == Kind::kSection)
      return k;
  return nullptr;
}

// Whether some key of the table lies under `path` (an empty table of the schema is not an unknown key).
bool known_table(const std::string& path) {
  if (find_key(path) || section_of(path)) return true;
  for (const auto& k : torchtitan_keys())
    if (std::string(k.path).rfind(path + ".", 0) == 0) return true;
  return false;
}

// The line of the key at `p` in JSON text (a scan of the object nesting; 0 when not found).
int json_key_line(const std::string& text, const ConfigPath& p) {
  std::size_t want = 0;  // components of p matched so far
  int depth = 0, line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth < static_cast<int>(want)) return 0;  // left the matched object without the next key
    } else if (c == '"') {
      std::string s;
      std::size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size()) ++j;
        s += text[j];
      }
      std::size_t k = j + 1;
      while (k < text.size() && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r' || text[k] == '\n')) ++k;
      const bool is_key = k < text.size() && text[k] == ':';
      if (is_key && depth == static_cast<int>(want) + 1 && s == p[want]) {
        if (++want == p.size()) return line;
      }
      for (std::size_t x = i; x < j && x < text.size(); ++x)
        if (text[x] == '\n') ++line;
      i = j;
    }
  }
  return 0;
}

struct Leaf {
  Json value;
  int line = 0;        // 0: the command line
  std::string given;   // the command-line word, for overrides
};

// The config as dotted leaf paths (TOML tables and JSON objects walked; lists and the sections' contents are
// leaves).
class Doc {
 public:
  Doc(const std::string& file, const std::string& text) : file_(file) {
    std::size_t first = text.find_first_not_of(" \t\r\n");
    json_ = first != std::string::npos && text[first] == '{';
    if (json_) {
      const Json j = parse_json_text(text, file);
      if (!j.is_object()) throw InputError(file, "expected a torchtitan config: a JSON object");
      walk_json(j, {}, text);
      generation_ = k2026;
    } else {
      toml::table t;
      try {
        t = toml::parse(text, file);
      } catch (const toml::parse_error& e) {
        throw InputError(file + ":" + std::to_string(e.source().begin.line),
                         "not valid TOML: " + std::string(e.description()));
      }
      walk_toml(t, {});
      generation_ = has_table("quantize") || has_table("compile") ? k2025q
                    : has_table("parallelism")                     ? k2025
                                                                   : k2024;
    }
  }
  const std::string& file() const { return file_; }
  bool json() const { return json_; }
  unsigned generation() const { return generation_; }
  std::map<std::string, Leaf>& leaves() { return leaves_; }
  const std::map<std::string, Leaf>& leaves() const { return leaves_; }
  bool has_table(const std::string& t) const { return tables_.count(t) > 0; }

 private:
  // torchtitan's sections hold keys, a few levels at most: deeper nesting is refused before its dotted paths (each
  // as long as the nesting) fill memory (a 30,000-level dotted key took 5 GB: found by fuzzing).
  static constexpr std::size_t kMaxDepth = 16;
  void walk_toml(const toml::table& t, const ConfigPath& at) {
    for (auto&& [k, v] : t) {
      ConfigPath p = at;
      p.push_back(std::string(k.str()));
      const int line = static_cast<int>(k.source().begin.line);
      if (p.size() > kMaxDepth)
        throw InputError(file_ + ":" + std::to_string(line), "tables nested more than " + std::to_string(kMaxDepth) +
                                                                 " deep (torchtitan's sections hold keys)");
      const std::string d = dotted(p);
      if (const toml::table* sub = v.as_table()) {
        tables_.insert(d);
        if (sub->empty() && !known_table(d)) leaves_[d] = {Json::object(), line, ""};
        walk_toml(*sub, p);
        continue;
      }
      leaves_[d] = {toml_json(v), line, ""};
    }
  }
  static Json toml_json(const toml::node& v) {
    if (auto b = v.value_exact<bool>()) return *b;
    if (auto i = v.value_exact<std::int64_t>()) return *i;
    if (auto f = v.value_exact<double>()) return *f;
    if (auto s = v.value_exact<std::string>()) return *s;
    if (const toml::array* a = v.as_array()) {
      Json out = Json::array();
      for (const auto& e : *a) out.push_back(toml_json(e));
      return out;
    }
    if (v.is_table()) return Json::object();
    std::ostringstream os;  // dates and times: as TOML writes them
    if (auto d = v.value_exact<toml::date>()) os << *d;
    else if (auto t = v.value_exact<toml::time>()) os << *t;
    else if (auto dt = v.value_exact<toml::date_time>()) os << *dt;
    return os.str();
  }
  void walk_json(const Json& j, const ConfigPath& at, const std::string& text) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      ConfigPath p = at;
      p.push_back(it.key());
      if (p.size() > kMaxDepth)
        throw InputError(file_, dotted(ConfigPath(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(kMaxDepth))) +
                                    ": objects nested more than " + std::to_string(kMaxDepth) + " deep (torchtitan's sections hold keys)");
      const std::string d = dotted(p);
      if (it->is_object()) {
        tables_.insert(d);
        if (it->empty() && !known_table(d)) leaves_[d] = {Json::object(), json_key_line(text, p), ""};
        walk_json(*it, p, text);
        continue;
      }
      leaves_[d] = {*it, json_key_line(text, p), ""};
    }
  }

  std::string file_;
  bool json_ = false;
  unsigned generation_ = k2024;
  std::map<std::string, Leaf> leaves_;
  std::set<std::string> tables_;
};

std::string shown(const Json& v) {
  if (v.is_string()) return text_excerpt(v.get<std::string>(), 40);
  return text_excerpt(v.dump(), 40);
}

// Commit dates of the torchtitan changes the rules below depend on (pytorch/torchtitan).
struct Version {
  const char* commit;
  const char* date;
};
const std::vector<Version>& known_commits() {
  static const std::vector<Version> v = {{"9dec370", "2024-12-26"},   {"820504e", "2025-06-13"},
                                         {"e7c0cae", "2025-06-11"},   {"6fc499f6", "2025-08-14"},
                                         {"8a2686c4a", "2025-09-30"}, {"9810191bb", "2026-02-23"},
                                         {"b5bcd76c6", "2026-08-21"}};
  return v;
}

bool is_date(const std::string& s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

class Import {
 public:
  Import(Doc& doc, const TorchtitanOptions& opt) : doc_(doc), opt_(opt) {}

  std::vector<std::string> unknown, ignored, not_modelled;
  std::string date, date_from;
  ParamOrigins origins;  // the key (file:line, or the command line's --section.option) that set each parameter

  // Classifies every key; applies the command-line overrides first.
  void classify() {
    for (const auto& [name, value] : opt_.overrides) apply_override(name, value);
    for (const auto& [path, leaf] : doc_.leaves()) {
      const Key* k = find_key(path);
      if (!k) {
        if (const Key* s = section_of(path)) sections_.insert(s->path);
        else unknown.push_back(path);
        continue;
      }
      if (k->kind == Kind::kSection) {
        sections_.insert(path);
      } else if (k->kind == Kind::kIgnored) {
        ignored.push_back(show(path));
      } else if (k->kind == Kind::kNotModelled) {
        if (shown(leaf.value) != k->dflt && !(leaf.value.is_null() && std::string(k->dflt) == "null") &&
            !(leaf.value.is_array() && leaf.value.empty() && std::string(k->dflt) == "[]"))
          not_modelled.push_back(show(path));
        else
          ignored.push_back(show(path));
      }
    }
  }

  // `topo_params`: the --param overrides that are the topology's (split_import_overrides).
  Json rules(const std::string& topology, const ParamMap& overrides, const std::map<std::string, std::string>& topo_params,
             Json& topo_out);

  std::string generation_name() const {
    switch (doc_.generation()) {
      case k2024: return "2024 (config_manager.py @9dec370)";
      case k2025: return "2025 ([parallelism], JobConfig @820504e / @6fc499f6)";
      case k2025q: return "2025-09 ([compile] / [quantize], JobConfig @8a2686c4a)";
      default: return "2026 (Trainer.Config JSON @b5bcd76c6)";
    }
  }
  std::vector<std::string> sections() const { return {sections_.begin(), sections_.end()}; }

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    const auto it = doc_.leaves().find(path);
    const int line = it == doc_.leaves().end() ? 0 : it->second.line;
    if (it != doc_.leaves().end() && !it->second.given.empty())
      throw InputError("command line", "--" + path + ": " + what);
    throw InputError(doc_.file() + (line ? ":" + std::to_string(line) : std::string()), path + ": " + what);
  }
  // The parameter `param` was set by the key `path` (when the config or the command line gives it).
  void from(const std::string& param, const std::string& path) {
    const auto it = doc_.leaves().find(path);
    if (it == doc_.leaves().end()) return;
    if (!it->second.given.empty()) origins[param] = {"command line", "--" + path};
    else origins[param] = {doc_.file() + (it->second.line ? ":" + std::to_string(it->second.line) : std::string()), path};
  }
  std::string show(const std::string& path) const {
    const Leaf& l = doc_.leaves().at(path);
    return path + "=" + shown(l.value) + (l.given.empty() ? "" : " (command line)");
  }
  const Leaf* leaf(const std::string& path) const {
    const auto it = doc_.leaves().find(path);
    return it == doc_.leaves().end() || it->second.value.is_null() ? nullptr : &it->second;
  }
  bool has(const std::string& p) const { return leaf(p) != nullptr; }
  // The first of `paths` the config gives (the same option's names across generations).
  std::string pick(std::initializer_list<const char*> paths) const {
    for (const char* p : paths)
      if (has(p)) return p;
    return *paths.begin();
  }
  // torchtitan's split of the model into pipeline stages, as gpt parameters. The stages: one per rank
  // (single-stage schedules) or two (looped), or ceil((layers + first_stage_less_layers +
  // last_stage_less_layers) / pipeline_parallel_layers_per_stage) with its checks (models/llama3/infra/pipeline.py
  // at pytorch/torchtitan@6fc499f6 and @8a2686c4a, distributed/pipeline_parallel.py _get_pipeline_metadata at
  // @b5bcd76c6); their modules from module_fqns_per_model_part, else generate_llm_fqn_per_model_part
  // (distributed/pipeline_parallel.py at @6fc499f6 / @8a2686c4a, _generate_llm_fqn_per_model_part at @b5bcd76c6):
  // the embedding and the output weigh first/last_stage_less_layers layers, the effective layers are split evenly
  // with the remainder one each on the first stages. Looped schedules place stage s on rank s mod PP
  // (stage_ids_this_rank, style "loop"), Megatron's chunk placement (virtual stage k on rank k mod PP). A split
  // that Megatron's account_for_embedding/loss_in_pipeline_split gives is written that way; any other as
  // pipeline_model_parallel_layout. (pytorch/torchtitan@820504e's generate_split_points asserts that the layers
  // per stage fit exactly; the 2024 code splits without weights: both are priced with the same rule.)
  void pipeline_split(bool looped, bool dualpipe, std::int64_t pp, std::int64_t L, Json& p) const {
    const char* fk = "parallelism.pipeline_parallel_first_stage_less_layers";
    const char* lk = "parallelism.pipeline_parallel_last_stage_less_layers";
    const char* sk = "parallelism.pipeline_parallel_layers_per_stage";
    const char* mk = "parallelism.module_fqns_per_model_part";
    const std::int64_t iw = integer(fk, 1), ow = integer(lk, 1);
    if (iw < 0) fail(fk, "expected an integer >= 0");
    if (ow < 0) fail(lk, "expected an integer >= 0");
    if (dualpipe) {
      // DualPipeV: as before (Megatron's flags, two stages per rank in a V).
      p["account_for_embedding_in_pipeline_split"] = iw > 0;
      p["account_for_loss_in_pipeline_split"] = ow > 0;
      return;
    }
    if (L < 1) fail(sk, "needs the model's layer count (a catalogue model)");
    std::int64_t stages = looped ? 2 * pp : pp;
    std::vector<std::int64_t> counts;
    if (has(mk)) {
      // module_fqns_per_model_part: a list of lists of module names, one list per stage.
      const Json& v = leaf(mk)->value;
      if (!v.is_array() || v.empty()) fail(mk, "expected a list of lists of module names, one per pipeline stage");
      std::int64_t next = 0;
      for (std::size_t k = 0; k < v.size(); ++k) {
        if (!v[k].is_array()) fail(mk, "expected a list of lists of module names, got " + shown(v[k]));
        std::int64_t n = 0;
        for (const Json& e : v[k]) {
          const std::string name = e.is_string() ? e.get<std::string>() : "";
          const bool first = k == 0, last = k + 1 == v.size();
          if (name == "tok_embeddings" && first) continue;
          if ((name == "norm" || name == "output" || name == "lm_head") && last) continue;  // lm_head: @b5bcd76c6
          if (name.rfind("layers.", 0) == 0 && name.size() > 7 && name.find_first_not_of("0123456789", 7) == std::string::npos &&
              std::stoll(name.substr(7)) == next) {
            ++next, ++n;
            continue;
          }
          fail(mk, "stage " + std::to_string(k) + " holds " + shown(e) + ": fabricsim places tok_embeddings in the "
                   "first stage, norm and output (lm_head) in the last, and layers.0, layers.1, ... in order between them");
        }
        counts.push_back(n);
      }
      if (next != L) fail(mk, "names " + std::to_string(next) + " layers; the model has " + std::to_string(L));
      stages = static_cast<std::int64_t>(counts.size());
      if (stages % pp) fail(mk, "has " + std::to_string(stages) + " stages, not a multiple of the pipeline degree " + std::to_string(pp));
      if (looped && stages / pp < 2) fail(mk, "a looped schedule needs at least 2 stages per rank");
      if (!looped && stages != pp) fail(mk, "a single-stage schedule needs one stage per rank");
    } else {
      if (has(sk)) {
        const std::int64_t lps = integer(sk, 1);
        if (lps < 1) fail(sk, "expected an integer >= 1");
        stages = (L + iw + ow + lps - 1) / lps;
        if (stages % pp)
          fail(sk, "gives " + std::to_string(stages) + " stages (ceil((layers " + std::to_string(L) +
                       " + first/last_stage_less_layers) / layers per stage)), not a multiple of the pipeline degree " +
                       std::to_string(pp) + " (torchtitan refuses it)");
        if (looped && stages / pp < 2) fail(sk, "gives fewer than 2 stages per rank, which a looped schedule needs");
        if (!looped && stages != pp) fail(sk, "gives " + std::to_string(stages / pp) + " stages per rank; a single-stage schedule needs 1");
      }
      const std::int64_t eff = L + iw + ow, per = eff / stages, extra = eff % stages;
      if (stages > eff || per == 0)
        fail(sk, "gives more stages (" + std::to_string(stages) + ") than effective layers (" + std::to_string(eff) + ")");
      if (iw > per) fail(fk, "exceeds the minimum layers per stage (" + std::to_string(per) + ")");
      if (ow > per) fail(lk, "exceeds the minimum layers per stage (" + std::to_string(per) + ")");
      std::int64_t left = L;
      for (std::int64_t k = 0; k < stages; ++k) {
        std::int64_t n = per + (k < extra ? 1 : 0) - (k == 0 ? iw : 0) - (k == stages - 1 && stages > 1 ? ow : 0);
        n = std::min(std::max<std::int64_t>(n, 0), left);
        counts.push_back(n);
        left -= n;
      }
      if (left) fail(sk, "leaves " + std::to_string(left) + " layers out of the split");
      // The split Megatron's account_for_embedding/loss_in_pipeline_split makes: every stage the same effective
      // layers, the embedding / output one each.
      if (extra == 0 && iw <= 1 && ow <= 1 && stages > 1) {
        p["account_for_embedding_in_pipeline_split"] = iw > 0;
        p["account_for_loss_in_pipeline_split"] = ow > 0;
        if (looped) p["virtual_pipeline_model_parallel_size"] = stages / pp;
        return;
      }
    }
    p["pipeline_model_parallel_layout"] = pipeline_layout_of_counts(counts);
  }
  std::int64_t integer(const std::string& p, std::int64_t dflt) const {
    const Leaf* l = leaf(p);
    if (!l) return dflt;
    if (!l->value.is_number_integer()) fail(p, "expected an integer, got " + shown(l->value));
    return l->value.get<std::int64_t>();
  }
  double number(const std::string& p, double dflt) const {
    const Leaf* l = leaf(p);
    if (!l) return dflt;
    if (!l->value.is_number()) fail(p, "expected a number, got " + shown(l->value));
    return l->value.get<double>();
  }
  bool boolean(const std::string& p, bool dflt) const {
    const Leaf* l = leaf(p);
    if (!l) return dflt;
    if (l->value.is_string() && (lower(l->value.get<std::string>()) == "true" || lower(l->value.get<std::string>()) == "false"))
      return lower(l->value.get<std::string>()) == "true";  // a command-line word for a key of an ignored section
    if (!l->value.is_boolean()) fail(p, "expected true or false, got " + shown(l->value));
    return l->value.get<bool>();
  }
  std::string string(const std::string& p, const std::string& dflt) const {
    const Leaf* l = leaf(p);
    if (!l) return dflt;
    if (!l->value.is_string()) fail(p, "expected a string, got " + shown(l->value));
    return l->value.get<std::string>();
  }
  std::vector<std::string> list(const std::string& p) const {
    const Leaf* l = leaf(p);
    std::vector<std::string> out;
    if (!l) return out;
    if (!l->value.is_array()) fail(p, "expected a list of strings, got " + shown(l->value));
    for (const auto& e : l->value) {
      if (!e.is_string()) fail(p, "expected a list of strings, got " + shown(l->value));
      out.push_back(e.get<std::string>());
    }
    return out;
  }

  void apply_override(const std::string& name, const std::string& value) {
    const Key* k = find_key(name);
    if (!k || k->kind == Kind::kSection) {
      if (k || section_of(name)) {
        doc_.leaves()[name] = {Json(value), 0, "--" + name + " " + value};
        return;
      }
      if (opt_.ignore_unknown) {
        unknown.push_back("--" + name + " (command line)");
        return;
      }
      throw InputError("command line", "--" + name + ": unknown torchtitan option (not one of the schemas of "
                                           "pytorch/torchtitan@" + std::string(kTorchtitanCommits) +
                                           " as far as the importer knows; --ignore-unknown lists such options)");
    }
    Json v;
    const std::string low = lower(value);
    std::int64_t i = 0;
    double f = 0;
    switch (k->type) {
      case 'b':
        if (low == "true" || low == "1") v = true;
        else if (low == "false" || low == "0") v = false;
        else throw InputError("command line", "--" + name + ": expected true or false, got '" + text_excerpt(value) + "'");
        break;
      case 'i':
        if (!parse_int(value, i)) throw InputError("command line", "--" + name + ": expected an integer, got '" + text_excerpt(value) + "'");
        v = i;
        break;
      case 'f':
        if (!parse_float(value, f)) throw InputError("command line", "--" + name + ": expected a number, got '" + text_excerpt(value) + "'");
        v = f;
        break;
      case 'l': {
        // torchtitan's string_list: comma-separated
        v = Json::array();
        for (const auto& part : split_on(value, ','))
          if (!part.empty()) v.push_back(part);
        break;
      }
      default:
        v = value;
    }
    doc_.leaves()[name] = {v, 0, "--" + name + " " + value};
  }

  Doc& doc_;
  const TorchtitanOptions& opt_;
  std::set<std::string> sections_;
};

// torchtitan's model (name, flavor) in fabricsim's catalogue (workloads/gpt_models.cpp). The flavor names are
// torchtitan's (@8a2686c4a: torchtitan/models/llama3/__init__.py, models/deepseek_v3/__init__.py,
// experiments/llama4/__init__.py, experiments/qwen3/__init__.py; the same names @b5bcd76c6 under models/); its
// llama3 flavors are the Llama 3.1 shapes, which the catalogue's llama3-8b / llama3-70b / llama3.1-405b have.
std::string catalogue_model(const std::string& name, const std::string& flavor, std::string& missing) {
  static const std::map<std::pair<std::string, std::string>, std::string> m = {
      {{"llama3", "8B"}, "llama3-8b"},       {{"llama3", "70B"}, "llama3-70b"},
      {{"llama3", "405B"}, "llama3.1-405b"}, {{"llama", "8B"}, "llama3-8b"},
      {{"llama", "70B"}, "llama3-70b"},      {{"llama", "405B"}, "llama3.1-405b"},
      {{"llama4", "17bx16e"}, "llama4-scout"}, {{"deepseek_v3", "671B"}, "deepseek-v3"},
      {{"qwen3", "30B-A3B"}, "qwen3-30b-a3b"}, {{"qwen3", "235B-A22B"}, "qwen3-235b-a22b"},
      {{"qwen3", "0.6B"}, "qwen3-0.6b"},     {{"qwen3", "1.7B"}, "qwen3-1.7b"},
      {{"qwen3", "32B"}, "qwen3-32b"},       {{"deepseek_v3", "16B"}, "deepseek-v3-16b"},
      {{"llama4", "17bx128e"}, "llama4-maverick"},
  };
  const auto it = m.find({name, flavor});
  if (it != m.end()) return it->second;
  std::string known;
  for (const auto& [k, v] : m) known += (known.empty() ? "" : ", ") + k.first + " " + k.second;
  // Llama 4's _irope flavors (every_n_layers_nope 4: NoPE layers with chunked attention, llama4/__init__.py at
  // @4a950eaab) have an attention fabricsim does not price; the same shape with RoPE and full causal attention
  // on every layer is the flavor without the suffix.
  const bool irope = flavor.size() > 6 && flavor.compare(flavor.size() - 6, 6, "_irope") == 0;
  missing = "the catalogue has no shape for torchtitan's " + name + " flavor '" + flavor + "' (" +
            (irope ? "NoPE layers with chunked attention are not modelled; " : "") + "it has " + known +
            "; --param model=NAME picks a catalogue model of the same shape)";
  return "";
}

Json Import::rules(const std::string& topology, const ParamMap& overrides,
                   const std::map<std::string, std::string>& topo_params, Json& topo_out) {
  const unsigned gen = doc_.generation();
  // The torchtitan version the implementation rules follow.
  if (!opt_.version.empty()) {
    if (is_date(opt_.version)) {
      date = opt_.version;
    } else {
      for (const auto& v : known_commits())
        if (opt_.version.size() >= 7 && std::string(v.commit).rfind(opt_.version.substr(0, 7), 0) == 0) date = v.date;
      if (date.empty())
        throw InputError("--torchtitan-version", "expected a commit date YYYY-MM-DD or one of the commits 9dec370, "
                                                 "820504e, e7c0cae, 6fc499f6, 8a2686c4a, 9810191bb, b5bcd76c6; got '" +
                                                     text_excerpt(opt_.version) + "'");
    }
    date_from = "--torchtitan-version " + opt_.version;
  } else {
    date = gen == k2024 ? "2024-12-26" : gen == k2025 ? "2025-06-13" : gen == k2025q ? "2025-09-30" : "2026-08-21";
    date_from = "the " + generation_name().substr(0, generation_name().find(' ')) + " schema";
  }

  Json p = Json::object();
  // Model.
  const std::string name = string(pick({"model.name", "model_spec.name"}), gen == k2024 ? "llama" : "llama3");
  const std::string flavor = string(pick({"model.flavor", "model_spec.flavor"}), "debugmodel");
  std::string missing;
  const std::string model = overrides.count("model") ? overrides.at("model") : catalogue_model(name, flavor, missing);
  if (model.empty()) fail(pick({"model.flavor", "model_spec.flavor"}), missing);
  p["model"] = model;
  from("model", pick({"model.flavor", "model_spec.flavor"}));
  // torchtitan trains no multi-token prediction in any catalogue flavor: MTP exists only from f59c215e8
  // (2026-08-10), built when model_registry(..., num_mtp_layers=N) is given N > 0, which only
  // deepseek_v3_debugmodel_mtp does (torchtitan/models/deepseek_v3/__init__.py and config_registry.py at
  // pytorch/torchtitan@b5bcd76c6, num_mtp_layers default 0; MTP.md there: it refuses PP and CP with MTP); the TOML
  // era (to 4a950eaab) has no MTP module at all. A catalogue model with MTP (deepseek-v3) is imported without it.
  if (MoeConfig moe; moe_catalogue_defaults(model, moe) && moe.mtp_num_layers > 0)
    p["mtp_num_layers"] = 0;
  const GptModelShape* shape = find_gpt_model(model);
  const std::int64_t layers = shape ? shape->num_layers : 0;
  if (gen == k2026 && doc_.has_table("model_spec.model"))
    not_modelled.push_back("model_spec.model (not read: the catalogue's " + model +
                           " shape is used, and float8 / MX set inside the model config is not seen)");
  const std::string norm = string("model.norm_type", "rmsnorm");
  if (norm == "fused_rmsnorm") p["norm_type"] = "fused_rmsnorm", from("norm_type", "model.norm_type");
  else if (norm != "rmsnorm")
    fail("model.norm_type", "'" + text_excerpt(norm) + "' is not modelled (fabricsim prices torchtitan's rmsnorm and fused_rmsnorm)");

  // Degrees. dp_shard -1 takes the ranks left over.
  const std::int64_t tp = integer(pick({"parallelism.tensor_parallel_degree", "training.tensor_parallel_degree"}), 1);
  const std::int64_t pp = integer(pick({"parallelism.pipeline_parallel_degree", "experimental.pipeline_parallel_degree"}), 1);
  const std::int64_t cp = integer(pick({"parallelism.context_parallel_degree", "experimental.context_parallel_degree"}), 1);
  const std::string rep_k = pick({"parallelism.data_parallel_replicate_degree", "training.data_parallel_replicate_degree"});
  const std::string shard_k = pick({"parallelism.data_parallel_shard_degree", "training.data_parallel_shard_degree"});
  const std::int64_t rep = integer(rep_k, 1);
  std::int64_t shard = integer(shard_k, -1);
  for (const auto& [k, v] : {std::pair<std::string, std::int64_t>{rep_k, rep}, {"tp", tp}, {"pp", pp}, {"cp", cp}})
    if (v < 1) fail(k == "tp"   ? pick({"parallelism.tensor_parallel_degree", "training.tensor_parallel_degree"})
                    : k == "pp" ? pick({"parallelism.pipeline_parallel_degree", "experimental.pipeline_parallel_degree"})
                    : k == "cp" ? pick({"parallelism.context_parallel_degree", "experimental.context_parallel_degree"})
                                : k,
                    "expected a positive degree, got " + std::to_string(v));
  if (shard == 0 || shard < -1) fail(shard_k, "expected a positive degree or -1 (the ranks left over), got " + std::to_string(shard));
  // Bounds that keep the products below in range (a million ranks, far beyond any fabric here).
  constexpr std::int64_t kMaxRanks = 1 << 20;
  std::int64_t product = 1;
  for (const auto& [k, v] : {std::pair<std::string, std::int64_t>{rep_k, rep}, {shard_k, shard},
                             {pick({"parallelism.tensor_parallel_degree", "training.tensor_parallel_degree"}), tp},
                             {pick({"parallelism.pipeline_parallel_degree", "experimental.pipeline_parallel_degree"}), pp},
                             {pick({"parallelism.context_parallel_degree", "experimental.context_parallel_degree"}), cp}}) {
    if (v > kMaxRanks) fail(k, "the degrees' product exceeds " + std::to_string(kMaxRanks) + " ranks");
    product *= v < 0 ? 1 : v;
    if (product > kMaxRanks) fail(k, "the degrees' product exceeds " + std::to_string(kMaxRanks) + " ranks");
  }
  if (opt_.gpus > kMaxRanks) throw InputError("--gpus", "expected at most " + std::to_string(kMaxRanks) + " ranks");
  std::int64_t topo_gpus = 0;
  std::int64_t world = opt_.gpus;
  if (!world && shard > 0) world = rep * shard * tp * pp * cp;
  std::string topo_gpu;  // the topology's first GPU model
  topo_out = topology_for_ranks(topology, world, &topo_gpus, topo_params, &topo_gpu);
  if (!world) world = topo_gpus;
  if (world > topo_gpus)
    throw InputError(doc_.file(), "the job has " + std::to_string(world) + " ranks but " +
                                      gpus_shortfall(topology, topo_params, topo_gpus, world, true));
  if (shard == -1) {
    if (world % (rep * tp * pp * cp))
      fail(shard_k, "-1 takes the ranks left over, but " + std::to_string(world) + " ranks are not a multiple of " +
                        "replicate x TP x PP x CP = " + std::to_string(rep * tp * pp * cp));
    shard = world / (rep * tp * pp * cp);
  }
  if (rep * shard * tp * pp * cp != world)
    fail(shard_k, "replicate " + std::to_string(rep) + " x shard " + std::to_string(shard) + " x TP " + std::to_string(tp) +
                      " x PP " + std::to_string(pp) + " x CP " + std::to_string(cp) + " is not the job's " +
                      std::to_string(world) + " ranks (--gpus or the topology's GPUs)");
  p["world_size"] = world;
  p["tensor_model_parallel_size"] = tp;
  p["pipeline_model_parallel_size"] = pp;
  p["context_parallel_size"] = cp;
  if (opt_.gpus) origins["world_size"] = {"--gpus", ""};
  else if (shard > 0) from("world_size", shard_k);
  from("tensor_model_parallel_size", pick({"parallelism.tensor_parallel_degree", "training.tensor_parallel_degree"}));
  from("pipeline_model_parallel_size", pick({"parallelism.pipeline_parallel_degree", "experimental.pipeline_parallel_degree"}));
  from("context_parallel_size", pick({"parallelism.context_parallel_degree", "experimental.context_parallel_degree"}));
  const bool sp = tp > 1 && boolean("parallelism.enable_sequence_parallel", true);
  p["sequence_parallel"] = sp;
  from("sequence_parallel", "parallelism.enable_sequence_parallel");
  if (tp > 1 && !sp) not_modelled.push_back("parallelism.enable_sequence_parallel=false (priced with sequence parallel norms)");
  const std::int64_t ep = integer("parallelism.expert_parallel_degree", 1);
  if (ep > 1) p["expert_model_parallel_size"] = ep, from("expert_model_parallel_size", "parallelism.expert_parallel_degree");
  const std::int64_t etp = integer("parallelism.expert_tensor_parallel_degree", 1);
  if (etp > 1)
    p["expert_tensor_parallel_size"] = etp, from("expert_tensor_parallel_size", "parallelism.expert_tensor_parallel_degree");

  // Data parallelism: FSDP2 over dp_shard (x CP); HSDP with replicas; DDP with replicas only.
  const bool ddp = rep > 1 && shard == 1 && cp == 1;
  if (!ddp) {
    p["use_torch_fsdp2"] = true;
    if (rep > 1) p["num_distributed_optimizer_instances"] = rep;
    // With EP, apply_fsdp makes each MoE layer's routed experts an FSDP2 unit over dp_mod_ep (from
    // pytorch/torchtitan@01f4e5022, 2025-07-08, where EP arrived; one unit per block with the experts on the
    // EDP mesh from 18a46d427, 2026-03-26: the same gathers and reduce-scatters per layer, back to back).
    if (ep > 1) p["fsdp_expert_units"] = true;
  } else {
    p["overlap_grad_reduce"] = true;
  }
  const std::string reshard = string("parallelism.fsdp_reshard_after_forward", "default");
  if (reshard != "default") {
    if (reshard != "always" && reshard != "never")
      fail("parallelism.fsdp_reshard_after_forward", "expected default, always or never, got '" + text_excerpt(reshard) + "'");
    // The gpt generator's fsdp_reshard_after_forward (torchtitan's names): "never" keeps each layer gathered
    // from its forward to its backward; "always" reshards after every forward (the default policy without PP).
    if (ddp) not_modelled.push_back(show("parallelism.fsdp_reshard_after_forward") + " (no FSDP2 here: replicas only)");
    else p["fsdp_reshard_after_forward"] = reshard, from("fsdp_reshard_after_forward", "parallelism.fsdp_reshard_after_forward");
  }

  // Precision: bf16 parameters in FSDP2's mixed precision, fp32 or bf16 gradient reduction.
  const std::string mpp = string("training.mixed_precision_param", "bfloat16");
  if (mpp != "bfloat16") fail("training.mixed_precision_param", "'" + text_excerpt(mpp) + "' is not modelled (fabricsim prices bfloat16 compute)");
  const std::string mpr = string("training.mixed_precision_reduce", "float32");
  if (mpr != "float32" && mpr != "bfloat16")
    fail("training.mixed_precision_reduce", "expected float32 or bfloat16, got '" + text_excerpt(mpr) + "'");
  p["grad_reduce_in_fp32"] = mpr == "float32";
  from("grad_reduce_in_fp32", "training.mixed_precision_reduce");
  const std::string dtype = string("training.dtype", "float32");
  if (dtype != "float32") not_modelled.push_back(show("training.dtype") + " (parameters kept in " + dtype + ")");
  p["attention_backend"] = "flash";  // PyTorch SDPA's flash backend (torchtitan models/attention.py)

  // Batch and sequence.
  std::int64_t seq = 0, local = 0;
  if (gen == k2026 || has("training.max_context_length") || has("training.num_tokens_per_microbatch_per_dp_rank")) {
    seq = integer("training.max_context_length", 2048);
    const std::int64_t tokens = integer("training.num_tokens_per_microbatch_per_dp_rank", 16384);
    if (seq < 1 || tokens % seq)
      fail("training.num_tokens_per_microbatch_per_dp_rank", "expected a multiple of training.max_context_length (" +
                                                                std::to_string(seq) + "), got " + std::to_string(tokens));
    local = tokens / seq;
  } else {
    seq = integer("training.seq_len", 2048);
    local = integer(pick({"training.local_batch_size", "training.batch_size"}), 8);
  }
  if (seq < 1 || seq > (1 << 24)) fail(pick({"training.seq_len", "training.max_context_length"}), "expected a length from 1 to 2^24");
  if (local < 1 || local > (1 << 20))
    fail(pick({"training.local_batch_size", "training.batch_size", "training.num_tokens_per_microbatch_per_dp_rank"}),
         "expected a batch from 1 to 2^20 sequences");
  p["seq_length"] = seq;
  from("seq_length", pick({"training.seq_len", "training.max_context_length"}));
  const std::int64_t dp = rep * shard;
  std::int64_t global = local * dp;
  if (has("training.global_batch_size") && integer("training.global_batch_size", -1) > 0) {
    global = integer("training.global_batch_size", -1);
    if (global % (local * dp))
      fail("training.global_batch_size", "expected a multiple of local_batch_size x DP = " + std::to_string(local * dp));
  }
  if (has("training.num_tokens_per_train_step") && integer("training.num_tokens_per_train_step", -1) > 0) {
    const std::int64_t t = integer("training.num_tokens_per_train_step", -1);
    if (t % (local * dp * seq))
      fail("training.num_tokens_per_train_step", "expected a multiple of the tokens of one micro-batch over DP = " +
                                                     std::to_string(local * dp * seq));
    global = t / seq;
  }
  std::int64_t micro = local;
  if (pp > 1) {
    // torchtitan splits each local batch into pipeline micro-batches: 2024 pipeline_parallel_microbatches (default
    // the pipeline degree), 2025 pipeline_parallel_microbatch_size (default 1), 2026 num_pp_microbatches.
    if (has("experimental.pipeline_parallel_microbatches") || has("parallelism.pipeline_parallel_microbatches") ||
        (gen == k2024 && !has("parallelism.pipeline_parallel_microbatch_size"))) {
      const std::string k = pick({"experimental.pipeline_parallel_microbatches", "parallelism.pipeline_parallel_microbatches"});
      const std::int64_t n = integer(k, pp);
      if (n < 1 || local % n) fail(k, "expected a divisor of the local batch " + std::to_string(local));
      micro = local / n;
      from("micro_batch_size", k);
    } else if (gen == k2026) {
      const std::int64_t n = integer("parallelism.num_pp_microbatches", 1);
      if (n < 1 || local % n) fail("parallelism.num_pp_microbatches", "expected a divisor of the local batch " + std::to_string(local));
      micro = local / n;
      from("micro_batch_size", "parallelism.num_pp_microbatches");
    } else {
      micro = integer("parallelism.pipeline_parallel_microbatch_size", 1);
      if (micro < 1 || local % micro)
        fail("parallelism.pipeline_parallel_microbatch_size", "expected a divisor of the local batch " + std::to_string(local));
      from("micro_batch_size", "parallelism.pipeline_parallel_microbatch_size");
    }
    const std::string sk = pick({"parallelism.pipeline_parallel_schedule", "experimental.pipeline_parallel_schedule"});
    const std::string sched = string(sk, "1F1B");
    const std::string ls = lower(sched);
    const bool looped = ls == "interleaved1f1b" || ls == "loopedbfs" || ls == "interleavedzerobubble" || ls == "zbvzerobubble";
    if (looped) {
      p["pipeline_parallel_schedule"] = "Interleaved1F1B";
      if (ls != "interleaved1f1b") not_modelled.push_back(show(sk) + " (priced as Interleaved1F1B)");
    } else if (ls == "1f1b" || ls == "gpipe") {
      p["pipeline_parallel_schedule"] = "1F1B";
      if (ls == "gpipe") not_modelled.push_back(show(sk) + " (priced as 1F1B)");
    } else if (ls == "dualpipev") {
      p["pipeline_parallel_schedule"] = "DualPipe";
    } else {
      fail(sk, "expected 1F1B, GPipe, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble or DualPipeV, "
               "got '" + text_excerpt(sched) + "'");
    }
    from("pipeline_parallel_schedule", sk);
    pipeline_split(looped, ls == "dualpipev", pp, layers, p);
  }
  p["micro_batch_size"] = micro;
  p["global_batch_size"] = global;
  {
    const std::string local_k =
        pick({"training.local_batch_size", "training.batch_size", "training.num_tokens_per_microbatch_per_dp_rank"});
    if (pp == 1 || !origins.count("micro_batch_size")) from("micro_batch_size", local_k);
    from("global_batch_size", has("training.num_tokens_per_train_step") ? "training.num_tokens_per_train_step"
                              : has("training.global_batch_size")       ? "training.global_batch_size"
                                                                        : local_k.c_str());
  }

  // Activation checkpointing.
  std::string mode = string("activation_checkpoint.mode", "selective");
  std::string sac = string("activation_checkpoint.selective_ac_option", "2");
  if (gen == k2026) {
    const auto it = doc_.leaves().find("activation_checkpoint");
    if (it != doc_.leaves().end() && it->second.value.is_null()) mode = "none";
    else if (has("activation_checkpoint.memory_budget")) {
      mode = "selective", sac = "op";
      not_modelled.push_back(show("activation_checkpoint.memory_budget") + " (MemoryBudgetAC, priced as per-op selective AC)");
    } else if (has("activation_checkpoint.force_recompute_mm_shapes_by_fqns")) mode = "selective", sac = "op";
    else if (doc_.has_table("activation_checkpoint")) mode = "full";
  }
  if (mode == "none") {
    p["recompute_granularity"] = "none";
  } else if (mode == "full") {
    p["recompute_granularity"] = "full";
  } else if (mode == "selective") {
    if (sac == "op") {
      p["recompute_granularity"] = "selective";
      p["selective_ac_option"] = "op";
    } else {
      std::int64_t every = 0;
      if (!parse_int(sac, every) || every < 1)
        fail("activation_checkpoint.selective_ac_option", "expected op or a positive integer (every N-th layer), got '" +
                                                              text_excerpt(sac) + "'");
      // Every N-th block checkpointed whole: the same count of full-recompute layers per pipeline stage.
      p["recompute_granularity"] = "full";
      if (every > 1) {
        p["recompute_method"] = "block";
        p["recompute_num_layers"] = std::max<std::int64_t>(1, layers / pp / every);
      }
    }
  } else {
    fail("activation_checkpoint.mode", "expected none, selective or full, got '" + text_excerpt(mode) + "'");
  }
  for (const char* k : {"recompute_granularity", "selective_ac_option", "recompute_method", "recompute_num_layers"})
    if (p.contains(k)) from(k, has("activation_checkpoint.selective_ac_option") && std::string(k) != "recompute_granularity"
                                   ? "activation_checkpoint.selective_ac_option" : "activation_checkpoint.mode");

  // torch.compile: 2024 / 2025 training.compile covers the blocks; from 2025-09 compile.components names them.
  bool compile_model = false, compile_loss = false;
  if (has("compile.enable") || gen & (k2025q | k2026)) {
    const bool on = boolean("compile.enable", false);
    std::vector<std::string> comps = has("compile.components") ? list("compile.components") : std::vector<std::string>{"model", "loss"};
    for (const auto& c : comps)
      if (c != "model" && c != "loss") fail("compile.components", "expected model and/or loss, got '" + text_excerpt(c) + "'");
    compile_model = on && std::find(comps.begin(), comps.end(), "model") != comps.end();
    compile_loss = on && std::find(comps.begin(), comps.end(), "loss") != comps.end();
  } else {
    compile_model = compile_loss = boolean("training.compile", false);
  }
  // The loss is compiled with the model from pytorch/torchtitan@bbb1b616e (2025-04-02, components/loss.py); before
  // it ran eagerly (e8977b007, Dec 2024).
  const bool loss_compiled = compile_loss && date >= "2025-04-02";
  p["cross_entropy_impl"] = loss_compiled ? "torch_compiled" : "torch";
  if (ddp && compile_model) {
    not_modelled.push_back("torch.compile under DDP (priced eager)");
  } else {
    p["torch_compile"] = compile_model;
    from("torch_compile", has("compile.enable") ? "compile.enable" : "training.compile");
  }

  // Float8 / MX linears.
  std::string recipe;
  bool fsdp_f8_ag = false;
  const std::vector<std::string> conv = list("model.converters");
  for (const auto& c : conv) {
    if (c == "float8" || c == "quantize.linear.float8") {
      const std::string rk = c == "float8" ? "float8.recipe_name" : "quantize.linear.float8.recipe_name";
      const std::string r = string(rk, "tensorwise");
      if (r == "tensorwise" || r == "rowwise") recipe = r;
      else if (r == "rowwise_with_gw_hp") recipe = "rowwise", not_modelled.push_back(show(rk) + " (priced as rowwise)");
      else fail(rk, "expected tensorwise, rowwise or rowwise_with_gw_hp, got '" + text_excerpt(r) + "'");
      fsdp_f8_ag = boolean(c == "float8" ? "float8.enable_fsdp_float8_all_gather"
                                         : "quantize.linear.float8.enable_fsdp_float8_all_gather", false);
    } else if (c == "mx" || c == "quantize.linear.mx") {
      const std::string rk = c == "mx" ? "mx.recipe_name" : "quantize.linear.mx.recipe_name";
      const std::string r = string(rk, "mxfp8");
      if (r.rfind("mxfp8", 0) != 0) fail(rk, "'" + text_excerpt(r) + "' is not modelled (fabricsim prices mxfp8)");
      recipe = "mxfp8";
    } else if (c == "quantize.grouped_mm.float8" || c == "quantize.grouped_mm.mx") {
      not_modelled.push_back("model.converters " + c + " (MoE grouped GEMMs priced in bf16)");
    } else {
      fail("model.converters", "expected float8, mx or quantize.{linear,grouped_mm}.{float8,mx}, got '" + text_excerpt(c) + "'");
    }
  }
  if (boolean("float8.enable_float8_linear", false)) {
    // 2024: dynamic scaling of all three tensors is torchao's tensorwise recipe; delayed is its delayed scaling.
    bool delayed = false;
    for (const char* k : {"float8.scaling_type_input", "float8.scaling_type_weight", "float8.scaling_type_grad_output"}) {
      const std::string s = string(k, "dynamic");
      if (s == "delayed") delayed = true;
      else if (s != "dynamic") fail(k, "expected dynamic or delayed, got '" + text_excerpt(s) + "'");
    }
    recipe = delayed ? "delayed" : "tensorwise";
    fsdp_f8_ag = boolean("float8.enable_fsdp_float8_all_gather", false);
  }
  if (!recipe.empty()) {
    p["precision"] = "fp8";
    p["fp8_recipe"] = recipe;
    for (const char* k : {"precision", "fp8_recipe"})
      from(k, has("float8.enable_float8_linear") && boolean("float8.enable_float8_linear", false) ? "float8.enable_float8_linear"
                                                                                                 : "model.converters");
    if (fsdp_f8_ag) p["enable_fsdp_float8_all_gather"] = true;
    // Float8Linear casts the weight again in the backward (torchtitan components/quantization/float8.py at
    // 820504e passes it to torchao's Float8LinearConfig): priced under torch FSDP2 with tensorwise scaling.
    if (boolean("float8.force_recompute_fp8_weight_in_bwd", false)) {
      if (recipe == "tensorwise" && p.value("use_torch_fsdp2", false)) p["force_recompute_fp8_weight_in_bwd"] = true;
      else not_modelled.push_back(show("float8.force_recompute_fp8_weight_in_bwd") + " (priced only for tensorwise float8 under FSDP2)");
    }
  } else {
    p["precision"] = "bf16";
  }

  // Async TP: PyTorch's symmetric-memory micro-pipeline TP (Inductor's _micro_pipeline_tp with
  // enable_symm_mem_for_group on the TP group, parallelize_llama.py apply_tp at pytorch/torchtitan@9dec370 /
  // 820504e), priced as tp_comm_overlap_impl symmetric_memory; no counterpart of Megatron's bulk wgrad overlap.
  // torchtitan refuses it without compile ("Async TP requires --training.compile", parallelize_llama.py at 9dec370).
  const std::string async_key = pick({"parallelism.enable_async_tensor_parallel", "experimental.enable_async_tensor_parallel",
                                      "compile.enable_async_tensor_parallel"});
  const bool async_tp = boolean(async_key, false);
  if (async_tp && tp > 1) {
    if (!compile_model)
      fail(async_key, "async TP needs the model compiled (torchtitan raises \"Async TP requires --training.compile\")");
    p["tp_comm_overlap"] = true;
    p["tp_comm_overlap_impl"] = "symmetric_memory";
    p["tp_comm_bulk_wgrad"] = false;
    for (const char* k : {"tp_comm_overlap", "tp_comm_overlap_impl", "tp_comm_bulk_wgrad"}) from(k, async_key);
  }
  // Context parallelism: PyTorch's context_parallel with torchtitan's rotate method (default allgather).
  if (cp > 1) {
    const std::string rk = pick({"parallelism.context_parallel_rotate_method", "experimental.context_parallel_rotate_method"});
    const std::string rot = string(rk, "allgather");
    if (rot != "allgather" && rot != "alltoall") fail(rk, "expected allgather or alltoall, got '" + text_excerpt(rot) + "'");
    p["context_parallel_rotate_method"] = rot;
    from("context_parallel_rotate_method", rk);
  }
  // Implementation choices that changed with torchtitan's commits (by `date`):
  //  - FSDP2 units of the embedding and output layer stay in the root unit before pytorch/torchtitan@83e694105
  //    (2025-07-28, "Improve reshard_after_forward logic").
  if (!ddp && date < "2025-07-28") p["fsdp_embeddings_in_root"] = true;
  //  - the final norm is torchtitan's own eager RMSNorm before pytorch/torchtitan@5078e92e4 (2025-04-17).
  if (date < "2025-04-17") p["final_norm_eager"] = true;
  //  - cuDNN attention first on compute capability 10.0 from pytorch/torchtitan@5de055e30 (2025-05-20).
  // the --param gpu, else the topology's (the server a preset is built of, or the file's first GPU)
  const std::string gpu = overrides.count("gpu") ? overrides.at("gpu") : topo_gpu;
  if ((gpu == "b200" || gpu == "gb200" || gpu == "b300") && date >= "2025-05-20") p["attention_backend"] = "fused";

  if (boolean("optimizer.early_step_in_backward", false))
    not_modelled.push_back(show("optimizer.early_step_in_backward"));
  if (boolean("fault_tolerance.enable", false)) not_modelled.push_back(show("fault_tolerance.enable"));
  // --param overrides (typed as JSON would give them).
  for (const auto& [k, v] : overrides) p[k] = param_value_json(v), origins[k] = {"--param " + k, ""};
  return p;
}

}  // namespace

bool torchtitan_option_is_switch(const std::string& name) {
  const Key* k = find_key(name);
  return k && k->type == 'b';
}

Json scenario_for_torchtitan(const std::string& path, const std::string& text, const std::string& topology,
                             const ParamMap& overrides_in, const TorchtitanOptions& opt, ParamOrigins* origins) {
  const ImportOverrides split = split_import_overrides(topology, overrides_in);
  Doc doc(path, text);
  Import im(doc, opt);
  im.classify();
  if (!im.unknown.empty() && !opt.ignore_unknown) {
    const std::string& u = im.unknown.front();
    const auto it = doc.leaves().find(u);
    const int line = it == doc.leaves().end() ? 0 : it->second.line;
    throw InputError(path + (line ? ":" + std::to_string(line) : std::string()),
                     u + ": unknown key (not an option of torchtitan's configs at pytorch/torchtitan@" +
                         std::string(kTorchtitanCommits) +
                         " as far as the importer knows; --ignore-unknown lists such keys and goes on)");
  }
  Json topo;
  Json params = im.rules(topology, split.importer, split.topology, topo);
  if (origins) *origins = im.origins;
  std::vector<std::string> ignored = im.ignored;
  for (const auto& s : im.sections())
    if (s != "model_spec.model") ignored.push_back("[" + s + "]");  // listed with the reason by the rules
  const std::string origin = "imported from the torchtitan config " + path + " (schema " + im.generation_name() +
                             "; implementation as of torchtitan " + im.date + ", from " + im.date_from + ")";
  Json doc_out = imported_gpt_scenario(topo, params, origin, im.not_modelled, ignored);
  note_unknown_keys(doc_out, im.unknown);
  return doc_out;
}

}  // namespace fabricsim::workloads
