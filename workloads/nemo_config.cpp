#include "workloads/nemo_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "sim/base/error.hpp"
#include "workloads/config_path.hpp"
#include "workloads/megatron_args.hpp"

namespace fabricsim::workloads {

// NVIDIA/NeMo e564e669 (2025-01-30, the last change to examples/nlp/language_modeling/conf/megatron_gpt_config.yaml):
// the keys below and their defaults are read from that file, megatron_llama_config.yaml, and the code that reads
// them, nemo/collections/nlp/models/language_modeling/megatron_base_model.py (build_model_parallel_config,
// build_transformer_config, _validate_and_override_config, configure_optimizers) and megatron_gpt_model.py
// (__init__, model_provider_func, build_transformer_config, setup_mcore_distributed_parallel,
// _validate_trainer); the NeMo-Framework-Launcher's launcher_scripts/conf/training/{gpt3,llama,mixtral}/*.yaml
// @26e42fa9 use the same keys.
const char* const kNemoCommit = "e564e669";

namespace {

using Path = ConfigPath;

// The YAML document and its values, interpolations resolved on read.
class Config {
 public:
  Config(const std::string& file, const std::string& text) : file_(file) {
    try {
      root_ = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw InputError(e.mark.line >= 0 ? file + ":" + std::to_string(e.mark.line + 1) : file, "not valid YAML: " + e.msg);
    }
    if (!root_.IsMap()) throw InputError(file, "expected a NeMo training config: a YAML mapping with trainer: and model:");
    check_keys_and_merge();
  }
  const std::string& file() const { return file_; }
  const YAML::Node& root() const { return root_; }
  // Every mapping's keys, once, before anything reads them: a key that is a list or a mapping (YAML's `? [a, b]`:
  // yaml-cpp's conversion to a name failed as an internal error) or a key given twice in one mapping (OmegaConf
  // refuses the config, yaml-cpp would keep the first silently) -- both found by fuzzing. Walked without recursion
  // (a deep document must not exhaust the stack), each mapping and list once by its place in the file (an alias is
  // the node it names: a billion aliases are not walked a billion times).
  // The same pass applies YAML 1.1 merge keys (`<<: *base`, `<<: [*a, *b]`), which PyYAML, and so OmegaConf and
  // NeMo, apply and yaml-cpp does not: a mapping gets every key of the merged mappings it does not give itself
  // (its own keys win; in a list, an earlier mapping wins over a later one), appended after its own keys. A
  // mapping is merged after everything inside it (a post-order walk): a merged mapping is written before the alias
  // that names it, so it is complete by then, or it encloses the merge (refused). Found by fuzzing: the keys were
  // not applied.
  void check_keys_and_merge() {
    struct Visit {
      YAML::Node n;
      std::string at;
      bool children_done;
    };
    std::vector<Visit> todo = {{root_, "", false}};
    std::map<std::pair<int, int>, bool> walked;  // place -> finished (false while its children are walked)
    auto place = [](const YAML::Node& n) { return std::pair{n.Mark().line, n.Mark().column}; };
    while (!todo.empty()) {
      if (todo.back().children_done) {
        const Visit v = todo.back();
        todo.pop_back();
        if (v.n.IsMap()) merge_keys(v.n, v.at, walked);
        walked[place(v.n)] = true;
        continue;
      }
      const YAML::Node n = todo.back().n;
      const std::string at = todo.back().at;
      if (!n.IsSequence() && !n.IsMap()) {
        todo.pop_back();
        continue;
      }
      if (!walked.emplace(place(n), false).second) {
        todo.pop_back();
        continue;
      }
      todo.back().children_done = true;
      // (YAML::Node's assignment rebinds the node it refers to, so Visits are only ever copy-constructed: the
      // children are pushed in reverse, to be walked in file order, not reversed in place)
      std::vector<Visit> children;
      if (n.IsSequence()) {
        for (std::size_t i = 0; i < n.size(); ++i) children.push_back({n[i], at + "[" + std::to_string(i) + "]", false});
      } else {
        std::set<std::string> seen;
        bool merge_seen = false;
        for (auto it = n.begin(); it != n.end(); ++it) {
          if (!it->first.IsScalar())
            throw InputError(file_ + ":" + std::to_string(it->first.Mark().line + 1),
                             (at.empty() ? std::string() : at + ": ") + "expected a key name, found a " +
                                 (it->first.IsSequence() ? "list" : "mapping") + " as a key");
          const std::string key = at.empty() ? it->first.Scalar() : at + "." + it->first.Scalar();
          if (is_merge_key(it->first)) {
            if (merge_seen)
              throw InputError(file_ + ":" + std::to_string(it->first.Mark().line + 1),
                               text_excerpt(key, 80) + ": a second merge key in one mapping (give one: <<: [*a, *b])");
            merge_seen = true;
          } else if (!seen.insert(it->first.Scalar()).second) {
            throw InputError(file_ + ":" + std::to_string(it->first.Mark().line + 1),
                             text_excerpt(key, 80) + ": duplicate key (OmegaConf refuses a key given twice in one mapping)");
          }
          children.push_back({it->second, key, false});
        }
      }
      for (auto c = children.rbegin(); c != children.rend(); ++c) todo.push_back(*c);
    }
  }
  // `<<` written plain (a quoted "<<" is an ordinary key, as in PyYAML).
  static bool is_merge_key(const YAML::Node& k) { return k.IsScalar() && k.Scalar() == "<<" && k.Tag() == "?"; }
  // Applies the merge key of mapping `m` (at `at`), whose contents are walked and merged already.
  void merge_keys(YAML::Node m, const std::string& at, const std::map<std::pair<int, int>, bool>& walked) {
    YAML::Node merge_key, value;
    bool found = false;
    for (auto it = m.begin(); it != m.end() && !found; ++it)
      if (is_merge_key(it->first)) merge_key.reset(it->first), value.reset(it->second), found = true;
    if (!found) return;
    const std::string where = file_ + ":" + std::to_string(merge_key.Mark().line + 1);
    const std::string name = at.empty() ? "<<" : at + ".<<";
    std::vector<YAML::Node> sources;
    if (value.IsSequence())
      for (std::size_t i = 0; i < value.size(); ++i) sources.push_back(value[i]);
    else
      sources.push_back(value);
    for (const YAML::Node& s : sources)
      if (!s.IsMap())
        throw InputError(where, text_excerpt(name, 80) + ": expected a mapping or a list of mappings to merge (a YAML merge "
                                "key), found " + (value.IsSequence() ? "a list holding " : "") + kind_of(s));
    std::vector<std::pair<YAML::Node, YAML::Node>> added;
    std::set<std::string> have;
    for (auto it = m.begin(); it != m.end(); ++it)
      if (!is_merge_key(it->first)) have.insert(it->first.Scalar());
    for (const YAML::Node& s : sources) {
      const auto w = walked.find({s.Mark().line, s.Mark().column});
      if (w == walked.end() || !w->second)
        throw InputError(where, text_excerpt(name, 80) + ": merges its own mapping or one around it (a merge key names "
                                "a mapping written before it)");
      for (auto it = s.begin(); it != s.end(); ++it)
        if (have.insert(it->first.Scalar()).second) added.emplace_back(it->first, it->second);
    }
    m.remove(merge_key);
    for (const auto& [k, v] : added) m.force_insert(k, v);
  }
  static std::string kind_of(const YAML::Node& n) {
    return n.IsMap() ? "a mapping" : n.IsSequence() ? "a list" : n.IsNull() ? "nothing" : "the value '" + text_excerpt(n.Scalar()) + "'";
  }

  // The node at `p` as written (no interpolation), or an undefined node.
  YAML::Node raw(const Path& p) const {
    YAML::Node n = root_;
    for (const auto& k : p) {
      if (!n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
      const YAML::Node& cn = n;
      YAML::Node next = cn[k];
      // An absent key gives yaml-cpp's invalid ("zombie") node, whose type queries throw: an undefined one instead.
      if (!next.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
      n.reset(next);
    }
    return n;
  }
  // The line of the key `p`, or of the closest enclosing key the file has (an absent key is reported at its
  // section).
  int line(const Path& p) const {
    for (std::size_t len = p.size(); len > 0; --len) {
      const YAML::Node parent = raw(Path(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(len - 1)));
      if (!parent.IsMap()) continue;
      for (auto it = parent.begin(); it != parent.end(); ++it)
        if (it->first.IsScalar() && it->first.Scalar() == p[len - 1] && it->first.Mark().line >= 0)
          return it->first.Mark().line + 1;
    }
    return 0;
  }
  [[noreturn]] void fail(const Path& p, const std::string& what) const {
    const int l = line(p);
    throw InputError(file_ + (l ? ":" + std::to_string(l) : std::string()), dotted(p) + ": " + what);
  }

  // The value at `p` with interpolations resolved (undefined when the key is absent).
  YAML::Node value(const Path& p) const { return resolve(raw(p), p, 0); }
  bool has(const Path& p) const {
    const YAML::Node v = value(p);
    return v.IsDefined() && !v.IsNull();
  }
  std::string scalar(const Path& p) const {
    const YAML::Node v = value(p);
    if (!v.IsScalar()) fail(p, "expected a value, got " + std::string(v.IsMap() ? "a mapping" : "a list"));
    if (v.Scalar() == "???") fail(p, "is ??? (OmegaConf's missing value): give it");
    return v.Scalar();
  }
  std::int64_t integer(const Path& p) const {
    const std::string s = scalar(p);
    std::int64_t v = 0;
    if (!parse_int(s, v)) fail(p, "expected an integer, got '" + text_excerpt(s) + "'");
    return v;
  }
  std::int64_t count(const Path& p) const {
    const std::int64_t v = integer(p);
    if (v < 1) fail(p, "expected a positive integer, got " + std::to_string(v));
    return v;
  }
  double number(const Path& p) const {
    const std::string s = scalar(p);
    double v = 0;
    if (!parse_float(s, v)) fail(p, "expected a number, got '" + text_excerpt(s) + "'");
    return v;
  }
  bool boolean(const Path& p) const {
    const std::string s = lower(scalar(p));
    if (s == "true") return true;
    if (s == "false") return false;
    fail(p, "expected true or false, got '" + text_excerpt(scalar(p)) + "'");
  }
  // Absent or null: `dflt` (NeMo's default for the key).
  bool boolean_or(const Path& p, bool dflt) const { return has(p) ? boolean(p) : dflt; }
  std::int64_t integer_or(const Path& p, std::int64_t dflt) const { return has(p) ? integer(p) : dflt; }
  std::string string_or(const Path& p, const std::string& dflt) const { return has(p) ? scalar(p) : dflt; }
  // The value as the notes show it: scalars as written (after interpolation), lists in brackets.
  std::string shown(const Path& p) const {
    const YAML::Node v = value(p);
    if (!v.IsDefined() || v.IsNull()) return "null";
    if (v.IsScalar()) return text_excerpt(v.Scalar(), 40);
    if (v.IsSequence()) {
      std::string s;
      for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + (v[i].IsScalar() ? v[i].Scalar() : "...");
      return "[" + text_excerpt(s, 40) + "]";
    }
    return "{...}";
  }

 private:
  // `${...}` pieces of a scalar: resolved whole (a value that is one interpolation keeps the target's type) or
  // spliced into the text.
  YAML::Node resolve(const YAML::Node& n, const Path& at, int depth) const {
    if (!n.IsDefined() || !n.IsScalar()) return n;
    const std::string& s = n.Scalar();
    if (s.find("${") == std::string::npos) return n;
    if (depth > 20) fail(at, "interpolation loop through '" + text_excerpt(s) + "'");
    std::string out;
    std::size_t i = 0;
    while (i < s.size()) {
      const std::size_t open = s.find("${", i);
      if (open == std::string::npos) {
        out += s.substr(i);
        break;
      }
      out += s.substr(i, open - i);
      int nest = 0;
      std::size_t close = open + 2;
      for (; close < s.size(); ++close) {
        if (s.compare(close, 2, "${") == 0) ++nest, ++close;
        else if (s[close] == '}' && nest-- == 0) break;
      }
      if (close >= s.size()) fail(at, "unterminated interpolation in '" + text_excerpt(s) + "'");
      const std::string body = s.substr(open + 2, close - open - 2);
      const Path target = reference(body, at);
      const YAML::Node v = resolve(raw(target), target, depth + 1);
      if (open == 0 && close + 1 == s.size()) return v;  // the whole value
      if (!v.IsScalar()) fail(at, "${" + body + "} is not a single value, so it cannot be part of a string");
      out += v.Scalar();
      i = close + 1;
    }
    return YAML::Node(out);
  }
  // The key an interpolation names: ${a.b} from the root, ${.b} beside the key, ${..b} one level up; the
  // NeMo-Framework-Launcher composes a training config under `training:`, so ${training.a.b} is ${a.b}.
  Path reference(const std::string& body, const Path& at) const {
    if (body.find(':') != std::string::npos)
      fail(at, "'${" + text_excerpt(body) + "}' uses OmegaConf's resolver '" + body.substr(0, body.find(':')) +
                   "', which the importer does not evaluate: write the value");
    Path target;
    std::string rest = body;
    if (!rest.empty() && rest[0] == '.') {
      std::size_t dots = 0;
      while (dots < rest.size() && rest[dots] == '.') ++dots;
      if (dots > at.size()) fail(at, "'${" + body + "}' climbs above the file's root");
      target.assign(at.begin(), at.end() - static_cast<std::ptrdiff_t>(dots));
      rest = rest.substr(dots);
    }
    Path tail = split_dots(rest);
    if (target.empty() && tail.size() > 1 && tail[0] == "training" && !raw({"training"}).IsDefined())
      tail.erase(tail.begin());
    target.insert(target.end(), tail.begin(), tail.end());
    for (const auto& k : target)
      if (k.empty()) fail(at, "'${" + text_excerpt(body) + "}' is not an interpolation the importer reads (${a.b}, ${.b})");
    if (!raw(target).IsDefined())
      fail(at, "'${" + text_excerpt(body) + "}' points to " + dotted(target) +
                   ", which the file does not have (interpolations are resolved within the file)");
    return target;
  }

  std::string file_;
  YAML::Node root_;
};

// How the importer treats a key.
enum class Kind {
  kFlag,         // the Megatron-LM flag that sets the same Megatron-Core field (its class in megatron_flags decides)
  kRule,         // read by one of NeMo's rules below
  kIgnored,      // no effect on a step's time or memory
  kNotModelled,  // changes the step unless it has `dflt`; fabricsim does not simulate it
  kSection,      // a whole sub-mapping with no effect on a step
};

struct Key {
  const char* path;  // "model.num_layers"
  Kind kind;
  const char* arg;   // kFlag: the Megatron-LM option; kNotModelled: NeMo's default as written ("false", "null", "[]")
};

// Every key the importer knows under trainer:, model: and model.optim:, in the order of NeMo's
// megatron_gpt_config.yaml (@kNemoCommit), then the launcher's additions, then keys only NeMo's code reads.
const std::vector<Key>& nemo_keys() {
  using K = Kind;
  static const std::vector<Key> keys = {
      // trainer: the job's size and precision; the rest is PyTorch Lightning's loop and logging.
      {"trainer.devices", K::kRule, ""}, {"trainer.num_nodes", K::kRule, ""}, {"trainer.precision", K::kRule, ""},
      {"trainer.accumulate_grad_batches", K::kRule, ""}, {"trainer.accelerator", K::kIgnored, ""},
      {"trainer.logger", K::kIgnored, ""}, {"trainer.enable_checkpointing", K::kIgnored, ""},
      {"trainer.use_distributed_sampler", K::kIgnored, ""}, {"trainer.max_epochs", K::kIgnored, ""},
      {"trainer.max_steps", K::kIgnored, ""}, {"trainer.max_time", K::kIgnored, ""},
      {"trainer.log_every_n_steps", K::kIgnored, ""}, {"trainer.val_check_interval", K::kIgnored, ""},
      {"trainer.limit_val_batches", K::kIgnored, ""}, {"trainer.limit_test_batches", K::kIgnored, ""},
      {"trainer.gradient_clip_val", K::kIgnored, ""}, {"trainer.benchmark", K::kIgnored, ""},
      {"trainer.enable_model_summary", K::kIgnored, ""}, {"trainer.num_sanity_val_steps", K::kIgnored, ""},
      {"trainer.enable_progress_bar", K::kIgnored, ""}, {"trainer.check_val_every_n_epoch", K::kIgnored, ""},
      // model: continual training, batch and parallelism.
      {"model.restore_from_path", K::kIgnored, ""}, {"model.restore_from_ckpt", K::kIgnored, ""},
      {"model.mcore_gpt", K::kRule, ""}, {"model.skip_train", K::kFlag, "--skip-train"},
      {"model.micro_batch_size", K::kFlag, "--micro-batch-size"},
      {"model.global_batch_size", K::kFlag, "--global-batch-size"},
      {"model.rampup_batch_size", K::kFlag, "--rampup-batch-size"},
      {"model.tensor_model_parallel_size", K::kFlag, "--tensor-model-parallel-size"},
      {"model.pipeline_model_parallel_size", K::kFlag, "--pipeline-model-parallel-size"},
      {"model.virtual_pipeline_model_parallel_size", K::kRule, ""},
      {"model.context_parallel_size", K::kFlag, "--context-parallel-size"},
      {"model.expert_model_parallel_size", K::kFlag, "--expert-model-parallel-size"},
      {"model.expert_tensor_parallel_size", K::kFlag, "--expert-tensor-parallel-size"},
      // model architecture
      {"model.encoder_seq_length", K::kRule, ""}, {"model.max_position_embeddings", K::kRule, ""},
      {"model.num_layers", K::kFlag, "--num-layers"}, {"model.hidden_size", K::kFlag, "--hidden-size"},
      {"model.ffn_hidden_size", K::kRule, ""}, {"model.num_attention_heads", K::kFlag, "--num-attention-heads"},
      {"model.init_method_std", K::kFlag, "--init-method-std"}, {"model.use_scaled_init_method", K::kIgnored, ""},
      {"model.hidden_dropout", K::kFlag, "--hidden-dropout"}, {"model.attention_dropout", K::kFlag, "--attention-dropout"},
      {"model.ffn_dropout", K::kIgnored, ""},  // Megatron-Core's TransformerConfig has no FFN dropout to set
      {"model.kv_channels", K::kFlag, "--kv-channels"}, {"model.apply_query_key_layer_scaling", K::kRule, ""},
      {"model.normalization", K::kRule, ""}, {"model.layernorm_epsilon", K::kFlag, "--norm-epsilon"},
      {"model.layernorm_zero_centered_gamma", K::kFlag, "--apply-layernorm-1p"},
      {"model.do_layer_norm_weight_decay", K::kIgnored, ""},
      {"model.make_vocab_size_divisible_by", K::kFlag, "--make-vocab-size-divisible-by"},
      {"model.pre_process", K::kIgnored, ""}, {"model.post_process", K::kIgnored, ""},
      // Megatron-Core's Transformer Engine layers do not read it (only its local fused LayerNorm does).
      {"model.persist_layer_norm", K::kIgnored, ""},
      {"model.bias", K::kRule, ""}, {"model.qkv_bias", K::kFlag, "--add-qkv-bias"}, {"model.activation", K::kRule, ""},
      // The legacy (non-Megatron-Core) GPT's options; NeMo's Megatron-Core model does not read them.
      {"model.headscale", K::kIgnored, ""}, {"model.transformer_block_type", K::kIgnored, ""},
      {"model.openai_gelu", K::kFlag, "--openai-gelu"}, {"model.normalize_attention_scores", K::kIgnored, ""},
      {"model.position_embedding_type", K::kRule, ""}, {"model.rotary_percentage", K::kFlag, "--rotary-percent"},
      {"model.rotary_base", K::kFlag, "--rotary-base"}, {"model.rotary_interleaved", K::kFlag, "--rotary-interleaved"},
      {"model.attention_type", K::kIgnored, ""}, {"model.apply_embedding_scaling", K::kIgnored, ""}, {"model.share_embeddings_and_output_weights", K::kRule, ""},
      {"model.overlap_p2p_comm", K::kRule, ""}, {"model.batch_p2p_comm", K::kIgnored, ""},
      {"model.seq_len_interpolation_factor", K::kFlag, "--rotary-seq-len-interpolation-factor"},
      {"model.num_query_groups", K::kRule, ""}, {"model.scale_positional_embedding", K::kIgnored, ""},
      {"model.drop_layers", K::kNotModelled, "[]"}, {"model.reset_lr", K::kIgnored, ""},
      {"model.reset_lr_steps", K::kIgnored, ""}, {"model.tokenizer", K::kRule, ""},
      {"model.override_vocab_size", K::kRule, ""},
      // mixed precision
      {"model.native_amp_init_scale", K::kIgnored, ""}, {"model.native_amp_growth_interval", K::kIgnored, ""},
      {"model.hysteresis", K::kFlag, "--hysteresis"},
      {"model.fp32_residual_connection", K::kFlag, "--fp32-residual-connection"},
      {"model.fp16_lm_cross_entropy", K::kFlag, "--fp16-lm-cross-entropy"}, {"model.megatron_amp_O2", K::kRule, ""},
      {"model.grad_allreduce_chunk_size_mb", K::kIgnored, ""}, {"model.precision", K::kRule, ""},
      // fusions
      {"model.grad_div_ar_fusion", K::kIgnored, ""}, {"model.gradient_accumulation_fusion", K::kRule, ""},
      {"model.bias_activation_fusion", K::kRule, ""}, {"model.bias_dropout_add_fusion", K::kRule, ""},
      {"model.masked_softmax_fusion", K::kRule, ""}, {"model.get_attention_mask_from_fusion", K::kIgnored, ""},
      {"model.apply_rope_fusion", K::kRule, ""}, {"model.cross_entropy_loss_fusion", K::kFlag, "--cross-entropy-loss-fusion"},
      // miscellaneous
      {"model.seed", K::kFlag, "--seed"}, {"model.resume_from_checkpoint", K::kIgnored, ""},
      {"model.use_cpu_initialization", K::kFlag, "--use-cpu-initialization"}, {"model.onnx_safe", K::kIgnored, ""},
      {"model.apex_transformer_log_level", K::kIgnored, ""}, {"model.gradient_as_bucket_view", K::kIgnored, ""},
      {"model.sync_batch_comm", K::kIgnored, ""},
      {"model.nccl_communicator_config_path", K::kFlag, "--nccl-communicator-config-path"},
      {"model.validation_param_sync_overlap", K::kIgnored, ""},
      {"model.deterministic_mode", K::kFlag, "--deterministic-mode"}, {"model.gc_interval", K::kRule, ""},
      {"model.defer_embedding_wgrad_compute", K::kFlag, "--defer-embedding-wgrad-compute"},
      {"model.wgrad_deferral_limit", K::kRule, ""}, {"model.name", K::kRule, ""},
      // mcore_model_customize (megatron_gpt_model.py) and Falcon's layer spec read these sub-keys.
      {"model.mcore_customization_config.new_decoder_architecture", K::kNotModelled, "false"},
      {"model.mcore_customization_config.parallel_attention", K::kNotModelled, "false"},
      {"model.mcore_customization_config.final_logit_softcapping", K::kIgnored, ""},
      {"model.mcore_customization_config.attn_logit_softcapping", K::kIgnored, ""},
      // FSDP (PyTorch's, NeMo's torch FSDP strategy) and distributed checkpoints
      {"model.fsdp", K::kNotModelled, "false"}, {"model.fsdp_sharding_strategy", K::kIgnored, ""},
      {"model.fsdp_grad_reduce_dtype", K::kIgnored, ""}, {"model.fsdp_sharded_checkpoint", K::kIgnored, ""},
      {"model.dist_ckpt_format", K::kIgnored, ""}, {"model.dist_ckpt_load_on_device", K::kIgnored, ""},
      {"model.dist_ckpt_parallel_save", K::kIgnored, ""}, {"model.dist_ckpt_parallel_save_within_dp", K::kIgnored, ""},
      {"model.dist_ckpt_parallel_load", K::kIgnored, ""}, {"model.dist_ckpt_torch_dist_multiproc", K::kIgnored, ""},
      {"model.dist_ckpt_assume_constant_structure", K::kIgnored, ""},
      {"model.dist_ckpt_parallel_dist_opt", K::kIgnored, ""}, {"model.dist_ckpt_load_strictness", K::kIgnored, ""},
      // activation checkpointing, sequence parallelism
      {"model.activations_checkpoint_granularity", K::kRule, ""}, {"model.activations_checkpoint_method", K::kRule, ""},
      {"model.activations_checkpoint_num_layers", K::kRule, ""},
      {"model.num_micro_batches_with_partial_activation_checkpoints", K::kNotModelled, "null"},
      {"model.activations_checkpoint_layers_per_pipeline", K::kNotModelled, "null"},
      {"model.sequence_parallel", K::kFlag, "--sequence-parallel"},
      // Transformer Engine, FP8, tensor-parallel overlap
      {"model.transformer_engine", K::kRule, ""}, {"model.fp8", K::kRule, ""}, {"model.fp8_e4m3", K::kRule, ""},
      {"model.fp8_hybrid", K::kRule, ""}, {"model.fp8_margin", K::kFlag, "--fp8-margin"},
      {"model.fp8_interval", K::kFlag, "--fp8-interval"}, {"model.fp8_amax_history_len", K::kFlag, "--fp8-amax-history-len"},
      {"model.fp8_amax_compute_algo", K::kFlag, "--fp8-amax-compute-algo"}, {"model.reduce_amax", K::kIgnored, ""},
      {"model.fp8_wgrad", K::kFlag, "--no-fp8-wgrad"}, {"model.fp8_params", K::kFlag, "--fp8-param-gather"},
      {"model.tp_only_amax_red", K::kIgnored, ""}, {"model.use_emha", K::kIgnored, ""},
      {"model.ub_tp_comm_overlap", K::kRule, ""}, {"model.ub_tp_comm_overlap_cfg", K::kNotModelled, "null"},
      {"model.ub_tp_comm_bootstrap_backend", K::kIgnored, ""},
      // TE's attention picks its backend itself; this switch is the legacy model's.
      {"model.use_flash_attention", K::kIgnored, ""}, {"model.attention_backend", K::kRule, ""},
      {"model.cpu_offloading", K::kRule, ""}, {"model.cpu_offloading_num_layers", K::kRule, ""},
      {"model.cpu_offloading_activations", K::kRule, ""}, {"model.cpu_offloading_weights", K::kIgnored, ""},
      {"model.sharp", K::kFlag, "--use-sharp"}, {"model.enable_megatron_timers", K::kIgnored, ""},
      {"model.enable_cuda_graph", K::kFlag, "--enable-cuda-graph"}, {"model.use_te_rng_tracker", K::kFlag, "--te-rng-tracker"},
      // TransformerConfig's external_cuda_graph (gpt_full_te_layer_autocast_spec.py:273 captures the layer with it)
      {"model.external_cuda_graph", K::kFlag, "--external-cuda-graph"},
      // mixture of experts (megatron_gpt_model.py build_transformer_config; the others are TransformerConfig fields)
      {"model.num_moe_experts", K::kFlag, "--num-experts"}, {"model.moe_router_topk", K::kFlag, "--moe-router-topk"},
      {"model.moe_grouped_gemm", K::kFlag, "--moe-grouped-gemm"},
      {"model.moe_token_dispatcher_type", K::kFlag, "--moe-token-dispatcher-type"},
      {"model.moe_router_load_balancing_type", K::kFlag, "--moe-router-load-balancing-type"},
      {"model.moe_aux_loss_coeff", K::kFlag, "--moe-aux-loss-coeff"}, {"model.moe_z_loss_coeff", K::kFlag, "--moe-z-loss-coeff"},
      {"model.moe_input_jitter_eps", K::kFlag, "--moe-input-jitter-eps"}, {"model.moe_token_dropping", K::kNotModelled, "false"},
      {"model.moe_expert_capacity_factor", K::kFlag, "--moe-expert-capacity-factor"},
      {"model.moe_pad_expert_input_to_capacity", K::kFlag, "--moe-pad-expert-input-to-capacity"},
      {"model.moe_ffn_hidden_size", K::kFlag, "--moe-ffn-hidden-size"},
      {"model.moe_shared_expert_intermediate_size", K::kFlag, "--moe-shared-expert-intermediate-size"},
      {"model.moe_shared_expert_overlap", K::kFlag, "--moe-shared-expert-overlap"},
      {"model.moe_permute_fusion", K::kFlag, "--moe-permute-fusion"}, {"model.moe_layer_freq", K::kFlag, "--moe-layer-freq"},
      // sections with no effect on a step
      {"model.data", K::kSection, ""}, {"model.nsys_profile", K::kSection, ""},
      {"model.megatron_timer_kwargs", K::kSection, ""},
      // optimizer (megatron_base_model.py configure_optimizers, megatron_gpt_model.py setup_mcore_distributed_parallel)
      {"model.optim.name", K::kRule, ""}, {"model.optim.lr", K::kFlag, "--lr"},
      {"model.optim.weight_decay", K::kFlag, "--weight-decay"}, {"model.optim.betas", K::kIgnored, ""},
      {"model.optim.eps", K::kIgnored, ""}, {"model.optim.sched", K::kSection, ""},
      {"model.optim.bucket_cap_mb", K::kRule, ""}, {"model.optim.overlap_grad_sync", K::kRule, ""},
      {"model.optim.overlap_param_sync", K::kRule, ""}, {"model.optim.contiguous_grad_buffer", K::kIgnored, ""},
      {"model.optim.contiguous_param_buffer", K::kIgnored, ""}, {"model.optim.grad_sync_dtype", K::kRule, ""},
      {"model.optim.param_sync_dtype", K::kIgnored, ""}, {"model.optim.dtype", K::kIgnored, ""},
      {"model.optim.ddp_bucket_size", K::kRule, ""}, {"model.optim.num_distributed_optimizer_instances", K::kRule, ""},
      {"model.optim.check_for_nan_in_grad", K::kIgnored, ""}, {"model.optim.average_in_collective", K::kRule, ""},
      {"model.optim.align_param_gather", K::kFlag, "--no-align-param-gather"},
      {"model.optim.overlap_param_gather_with_optimizer_step", K::kFlag, "--overlap-param-gather-with-optimizer-step"},
  };
  return keys;
}

// Top-level sections besides trainer and model: Hydra's composition, the launcher's job settings, logging and
// checkpointing.
const std::set<std::string>& top_level_ignored() {
  static const std::set<std::string> s = {"defaults", "hydra", "name", "run", "exp_manager", "s3_checkpointing"};
  return s;
}

// The importer's state: the launch it builds and what it lists.
struct Import {
  const Config& cfg;
  MegatronLaunch launch;
  LaunchSource source;
  std::vector<std::string> unknown;
  bool overrides_vocab = false;  // --param padded_vocab_size

  std::string display(const Path& p) const { return dotted(p) + "=" + cfg.shown(p); }
  // A key NeMo's code reads with a default: as written, or the default it took.
  std::string display_or(const Path& p, const std::string& dflt) const {
    return cfg.raw(p).IsDefined() ? display(p) : dotted(p) + "=" + dflt + " (NeMo's default)";
  }
  void emit(const std::string& option, const std::vector<std::string>& values, const Path& key,
            const std::string& shown = "") {
    const int line = cfg.line(key);
    launch.args.push_back({option, line, "", 0, ""});
    for (const auto& v : values) launch.args.push_back({v, line, "", 0, ""});
    source.names[option] = shown.empty() ? display(key) : shown;
    if (cfg.raw(key).IsDefined()) source.paths[option] = dotted(key);  // a key the file has: errors name it
  }
  void ignored(const std::string& s) { source.ignored.push_back(s); }
  void not_modelled(const std::string& s) { source.not_modelled.push_back(s); }

  // A key that sets the Megatron-Core field of a Megatron-LM flag: typed by the flag.
  void flag(const Path& key, const char* option) {
    const MegatronFlag* f = find_megatron_flag(option);
    if (!f) throw InputError("internal: " + dotted(key) + " maps to " + option + ", which megatron_flags() lacks");
    const bool model = f->cls == MegatronFlag::kModel;
    if (!cfg.has(key)) {
      if (!model) ignored(dotted(key) + "=null");
      return;
    }
    switch (f->kind) {
      case MegatronFlag::kTrue:
      case MegatronFlag::kFalse:
        if (cfg.boolean(key) == (f->kind == MegatronFlag::kTrue)) emit(option, {}, key);
        else if (!model) ignored(display(key));
        return;
      case MegatronFlag::kInt: {
        // A whole number written as a float (rotary_base: 1000000.0) is the integer; NeMo passes it on as is.
        double d = 0;
        std::int64_t i = 0;
        if (!parse_int(cfg.scalar(key), i) && parse_float(cfg.scalar(key), d) && d == std::floor(d) && std::fabs(d) < 1e18)
          i = static_cast<std::int64_t>(d);
        else
          i = cfg.integer(key);
        emit(option, {std::to_string(i)}, key);
        return;
      }
      case MegatronFlag::kFloat: cfg.number(key); emit(option, {cfg.scalar(key)}, key); return;
      case MegatronFlag::kStr: emit(option, {cfg.scalar(key)}, key); return;
      default: break;
    }
    // Lists: a YAML sequence or one scalar.
    const YAML::Node v = cfg.value(key);
    std::vector<std::string> values;
    if (v.IsSequence()) {
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (!v[i].IsScalar()) cfg.fail(key, "expected a list of values");
        values.push_back(v[i].Scalar());
      }
    } else {
      values.push_back(cfg.scalar(key));
    }
    for (const auto& x : values) {
      std::int64_t iv;
      double dv;
      if (f->kind == MegatronFlag::kInts && !parse_int(x, iv)) cfg.fail(key, "expected integers, got '" + text_excerpt(x) + "'");
      if (f->kind == MegatronFlag::kFloats && !parse_float(x, dv)) cfg.fail(key, "expected numbers, got '" + text_excerpt(x) + "'");
    }
    if (values.empty()) {
      if (!model) ignored(display(key));
      return;
    }
    emit(option, values, key);
  }

  void not_modelled_unless(const Path& key, const std::string& dflt) {
    const YAML::Node v = cfg.value(key);
    bool is_default = !v.IsDefined() || v.IsNull();
    if (!is_default && dflt == "false") is_default = !cfg.boolean(key);
    if (!is_default && dflt == "[]") is_default = v.IsSequence() && v.size() == 0;
    (is_default ? source.ignored : source.not_modelled).push_back(display(key));
  }

  void walk(const Path& at, const std::map<std::string, const Key*>& table) {
    const YAML::Node n = cfg.raw(at);
    if (!n.IsMap()) cfg.fail(at, "expected a mapping of keys");
    for (auto it = n.begin(); it != n.end(); ++it) {
      Path p = at;
      p.push_back(it->first.Scalar());  // a name: Config::check_keys_and_merge
      const std::string name = dotted(p);
      if (name == "model.optim" || name == "model.mcore_customization_config") {
        walk(p, table);
        continue;
      }
      const auto k = table.find(name);
      if (k == table.end()) {
        if (name.rfind("model.optim.", 0) != 0 && name.rfind("model.", 0) != 0 && name.rfind("trainer.", 0) != 0)
          cfg.fail(p, "internal: unexpected section");
        unknown.push_back(name);
        continue;
      }
      switch (k->second->kind) {
        case Kind::kFlag: flag(p, k->second->arg); break;
        case Kind::kRule: break;
        case Kind::kIgnored: ignored(it->second.IsScalar() && it->second.Scalar().find("${") == std::string::npos
                                        ? dotted(p) + "=" + text_excerpt(it->second.Scalar(), 40)
                                        : dotted(p));
          break;
        case Kind::kNotModelled: not_modelled_unless(p, k->second->arg); break;
        case Kind::kSection: ignored(dotted(p)); break;
      }
    }
  }

  void rules();
};

// NeMo's own reading of the keys that do not map one to one.
void Import::rules() {
  const Path m = {"model"}, o = {"model", "optim"};
  auto key = [](const Path& base, const char* k) {
    Path p = base;
    p.push_back(k);
    return p;
  };
  auto require = [&](const char* k) {
    if (!cfg.has(key(m, k))) cfg.fail(key(m, k), "required (NeMo's GPT model reads it with no default)");
  };
  for (const char* k : {"num_layers", "hidden_size", "num_attention_heads", "encoder_seq_length", "micro_batch_size",
                        "global_batch_size"})
    require(k);

  // The job: trainer.num_nodes x trainer.devices processes.
  const Path td = {"trainer", "devices"}, tn = {"trainer", "num_nodes"};
  if (!cfg.has(td)) cfg.fail(td, "required: the GPUs per node (a number)");
  std::int64_t per_node = 0;
  if (!parse_int(cfg.scalar(td), per_node) || per_node < 1)
    cfg.fail(td, "expected the number of GPUs per node, got '" + text_excerpt(cfg.scalar(td)) +
                     "' ('auto' and -1 do not say how many GPUs the job runs on)");
  launch.nproc_per_node = per_node;
  launch.nnodes = cfg.has(tn) ? cfg.count(tn) : 1;
  source.world_from = "trainer.devices " + std::to_string(launch.nproc_per_node) + " x trainer.num_nodes " +
                      std::to_string(launch.nnodes);
  const Path tag = {"trainer", "accumulate_grad_batches"};
  if (cfg.has(tag) && cfg.integer(tag) != 1)
    cfg.fail(tag, "NeMo's GPT model refuses it (megatron_gpt_model.py _validate_trainer): gradient accumulation "
                  "follows from global_batch_size");
  else if (cfg.has(tag)) ignored(display(tag));

  // Precision: model.precision, else trainer.precision (megatron_base_model.py __init__).
  const Path prec_key = cfg.has(key(m, "precision")) ? key(m, "precision") : Path{"trainer", "precision"};
  if (!cfg.has(prec_key)) cfg.fail(prec_key, "required: bf16-mixed, 16-mixed (fabricsim does not model fp32 training)");
  const std::string prec = cfg.scalar(prec_key);
  bool fp16 = false;
  if (prec == "bf16" || prec == "bf16-mixed") emit("--bf16", {}, prec_key);
  else if (prec == "16" || prec == "16-mixed") emit("--fp16", {}, prec_key), fp16 = true;
  else if (prec == "32" || prec == "32-true" || prec == "64")
    cfg.fail(prec_key, "'" + prec + "' is fp32 training, which fabricsim does not model (give bf16-mixed or 16-mixed)");
  else cfg.fail(prec_key, "expected bf16, bf16-mixed, 16 or 16-mixed, got '" + text_excerpt(prec) + "'");
  if (prec_key[0] == "model" && cfg.has({"trainer", "precision"})) ignored(display({"trainer", "precision"}));

  // FP8 (megatron_gpt_model.py build_transformer_config): e4m3 wins over hybrid; neither is an error.
  if (cfg.boolean_or(key(m, "fp8"), false)) {
    const char* fmt = cfg.boolean_or(key(m, "fp8_e4m3"), false)     ? "e4m3"
                      : cfg.boolean_or(key(m, "fp8_hybrid"), false) ? "hybrid"
                                                                    : nullptr;
    if (!fmt) cfg.fail(key(m, "fp8"), "fp8 is on but neither fp8_e4m3 nor fp8_hybrid is (NeMo refuses it)");
    emit("--fp8-format", {fmt}, key(m, "fp8"), "model.fp8=" + cfg.shown(key(m, "fp8")) + " (" + fmt + ")");
  } else {
    for (const char* k : {"fp8", "fp8_e4m3", "fp8_hybrid"})
      if (cfg.raw(key(m, k)).IsDefined()) ignored(display(key(m, k)));
  }

  // Which model NeMo builds: Megatron-Core's GPTModel (mcore_gpt), Transformer Engine layers (transformer_engine,
  // spec name '' or 'te_gpt'), main parameters kept by Megatron's O2 wrapper (megatron_amp_O2). Their defaults in
  // NeMo's code are false.
  if (!cfg.boolean_or(key(m, "mcore_gpt"), false))
    not_modelled(display_or(key(m, "mcore_gpt"), "false") + " (NeMo's legacy GPT; priced as Megatron-Core's)");
  const bool te = cfg.boolean_or(key(m, "transformer_engine"), false);
  if (!te) emit("--transformer-impl", {"local"}, key(m, "transformer_engine"), display_or(key(m, "transformer_engine"), "false"));
  const std::string spec = cfg.string_or(key(m, "name"), "");
  if (!spec.empty() && spec != "te_gpt") not_modelled(display(key(m, "name")) + " (a layer spec other than te_gpt)");
  const bool o2 = cfg.boolean_or(key(m, "megatron_amp_O2"), false);
  if (!o2) not_modelled(display_or(key(m, "megatron_amp_O2"), "false") + " (PyTorch autocast over fp32 parameters)");

  // Shape. Megatron-Core's GPTModel sizes its position table by encoder_seq_length (max_sequence_length);
  // max_position_embeddings is the legacy model's.
  const std::int64_t seq = cfg.count(key(m, "encoder_seq_length"));
  emit("--seq-length", {std::to_string(seq)}, key(m, "encoder_seq_length"));
  emit("--max-position-embeddings", {std::to_string(seq)}, key(m, "encoder_seq_length"));
  if (cfg.raw(key(m, "max_position_embeddings")).IsDefined()) ignored("model.max_position_embeddings");
  // TransformerConfig: ffn_hidden_size defaults to 4 x hidden_size, gated or not.
  const std::int64_t h = cfg.count(key(m, "hidden_size"));
  emit("--ffn-hidden-size", {std::to_string(cfg.has(key(m, "ffn_hidden_size")) ? cfg.count(key(m, "ffn_hidden_size")) : 4 * h)},
       key(m, "ffn_hidden_size"));
  if (cfg.has(key(m, "num_query_groups"))) {
    emit("--group-query-attention", {}, key(m, "num_query_groups"));
    emit("--num-query-groups", {std::to_string(cfg.count(key(m, "num_query_groups")))}, key(m, "num_query_groups"));
  }
  // normalization (megatron_gpt_model.py build_transformer_config): layernorm1p is LayerNorm with zero-centred gamma.
  const std::string norm = lower(cfg.string_or(key(m, "normalization"), "layernorm"));
  if (norm == "layernorm" || norm == "layernorm1p") emit("--normalization", {"LayerNorm"}, key(m, "normalization"));
  else if (norm == "rmsnorm") emit("--normalization", {"RMSNorm"}, key(m, "normalization"));
  else cfg.fail(key(m, "normalization"), "expected layernorm, layernorm1p or rmsnorm, got '" + text_excerpt(norm) + "'");
  // Linear biases (default true). fabricsim gives LayerNorm models biases and RMSNorm models none.
  const bool bias = cfg.boolean_or(key(m, "bias"), true);
  if (!bias) emit("--disable-bias-linear", {}, key(m, "bias"));
  else if (norm == "rmsnorm") not_modelled(display(key(m, "bias")) + " (with rmsnorm)");
  // activation: a *glu is Megatron-Core's gated linear unit (megatron_base_model.py build_transformer_config).
  const std::string act = cfg.string_or(key(m, "activation"), "gelu");
  const bool gated = act.size() >= 3 && act.compare(act.size() - 3, 3, "glu") == 0;
  if (act == "swiglu" || act == "fast-swiglu") {
    emit("--swiglu", {}, key(m, "activation"));
  } else if (gated) {
    emit("--swiglu", {}, key(m, "activation"));
    not_modelled(display(key(m, "activation")) + " (priced as swiglu, the same gated shape)");
  } else if (act == "squared-relu") {
    emit("--squared-relu", {}, key(m, "activation"));
  } else if (act != "gelu") {
    cfg.fail(key(m, "activation"), "expected one of gelu, geglu, swiglu, reglu, squared-relu, fast-geglu, "
                                   "fast-swiglu, fast-reglu, got '" + text_excerpt(act) + "'");
  }
  const std::string pos = cfg.string_or(key(m, "position_embedding_type"), "learned_absolute");
  if (pos != "learned_absolute" && pos != "rope")
    cfg.fail(key(m, "position_embedding_type"), "'" + text_excerpt(pos) + "' is not modelled (fabricsim's GPT "
                                                "models learned_absolute and rope position embeddings)");
  emit("--position-embedding-type", {pos}, key(m, "position_embedding_type"));
  if (!cfg.boolean_or(key(m, "share_embeddings_and_output_weights"), true))
    emit("--untie-embeddings-and-output-weights", {}, key(m, "share_embeddings_and_output_weights"));
  // Softmax scaling by layer number: NeMo keeps it only in fp16.
  if (cfg.boolean_or(key(m, "apply_query_key_layer_scaling"), false)) {
    if (fp16) emit("--apply-query-key-layer-scaling", {}, key(m, "apply_query_key_layer_scaling"));
    else ignored(display(key(m, "apply_query_key_layer_scaling")) + " (off unless fp16)");
  }

  // Parallelism. virtual_pipeline_model_parallel_size 1 is none (_validate_and_override_config).
  const std::int64_t tp = cfg.has(key(m, "tensor_model_parallel_size")) ? cfg.count(key(m, "tensor_model_parallel_size")) : 1;
  const std::int64_t pp = cfg.has(key(m, "pipeline_model_parallel_size")) ? cfg.count(key(m, "pipeline_model_parallel_size")) : 1;
  const std::int64_t cp = cfg.has(key(m, "context_parallel_size")) ? cfg.count(key(m, "context_parallel_size")) : 1;
  const Path vpk = key(m, "virtual_pipeline_model_parallel_size");
  const std::int64_t vp = cfg.has(vpk) ? cfg.count(vpk) : 1;
  if (vp > 1) emit("--num-virtual-stages-per-pipeline-rank", {std::to_string(vp)}, vpk);
  // P2P overlap: ModelParallelConfig's default (false) unless set; it matters only with virtual stages.
  if (vp > 1 && !cfg.boolean_or(key(m, "overlap_p2p_comm"), false))
    emit("--no-overlap-p2p-communication", {}, key(m, "overlap_p2p_comm"), display_or(key(m, "overlap_p2p_comm"), "false"));
  else if (vp == 1 && cfg.raw(key(m, "overlap_p2p_comm")).IsDefined())
    ignored(display(key(m, "overlap_p2p_comm")) + " (no virtual stages)");
  const bool sp = cfg.boolean_or(key(m, "sequence_parallel"), false) && tp > 1;
  // Userbuffers TP overlap needs sequence parallelism (_validate_and_override_config turns it off otherwise).
  if (cfg.boolean_or(key(m, "ub_tp_comm_overlap"), false)) {
    if (sp) emit("--tp-comm-overlap", {}, key(m, "ub_tp_comm_overlap"));
    else ignored(display(key(m, "ub_tp_comm_overlap")) + " (off without sequence_parallel)");
  }
  if (cfg.has(key(m, "attention_backend"))) {
    const std::string a = cfg.scalar(key(m, "attention_backend"));
    if (a != "auto" && a != "flash" && a != "fused" && a != "unfused" && a != "local")
      cfg.fail(key(m, "attention_backend"), "expected auto, flash, fused, unfused or local, got '" + text_excerpt(a) + "'");
    emit("--attention-backend", {a}, key(m, "attention_backend"));
  }

  // Activation offloading: model.cpu_offloading gates model.cpu_offloading_num_layers (TransformerConfig's
  // cpu_offloading / cpu_offloading_num_layers, Megatron-LM's --cpu-offloading-num-layers). Offloading without
  // the activations (cpu_offloading_activations false) would offload only weights, which Transformer Engine
  // ignores (deprecated, "does not have any effect": transformer_engine/pytorch/cpu_offload.py @d0067d0da).
  {
    const Path ok = key(m, "cpu_offloading"), nk2 = key(m, "cpu_offloading_num_layers"),
               ak = key(m, "cpu_offloading_activations");
    if (cfg.boolean_or(ok, false) && cfg.boolean_or(ak, true)) {
      emit("--cpu-offloading-num-layers", {std::to_string(cfg.count(nk2))}, nk2);
    } else {
      for (const Path& k : {ok, nk2, ak}) {
        const YAML::Node v = cfg.raw(k);
        if (!v.IsDefined()) continue;
        // (an interpolation, as NeMo's ${sum:...} default, is listed unevaluated)
        ignored(v.IsScalar() && v.Scalar().find("${") == std::string::npos ? display(k) : dotted(k));
      }
    }
  }

  // Activation recompute (TransformerConfig: recompute_granularity / _method / _num_layers).
  const Path gk = key(m, "activations_checkpoint_granularity"), mk = key(m, "activations_checkpoint_method"),
             nk = key(m, "activations_checkpoint_num_layers");
  if (cfg.has(gk)) {
    const std::string g = cfg.scalar(gk);
    if (g != "selective" && g != "full") cfg.fail(gk, "expected selective, full or null, got '" + text_excerpt(g) + "'");
    emit("--recompute-granularity", {g}, gk);
    if (g == "full") {
      if (!cfg.has(mk))
        cfg.fail(gk, "full needs activations_checkpoint_method uniform or block (Megatron-Core's TransformerConfig "
                     "refuses none)");
      const std::string meth = cfg.scalar(mk);
      if (meth != "uniform" && meth != "block") cfg.fail(mk, "expected uniform or block, got '" + text_excerpt(meth) + "'");
      emit("--recompute-method", {meth}, mk);
      emit("--recompute-num-layers", {std::to_string(cfg.has(nk) ? cfg.count(nk) : 1)}, nk);
    } else {
      for (const Path& k : {mk, nk})
        if (cfg.raw(k).IsDefined()) ignored(display(k));
    }
  } else {
    for (const Path& k : {gk, mk, nk})
      if (cfg.raw(k).IsDefined()) ignored(display(k));
  }

  // Fusions Megatron-LM has on by default: NeMo's switches (defaults as megatron_base_model.py reads them).
  if (!cfg.boolean_or(key(m, "bias_activation_fusion"), true))
    emit(gated ? "--no-bias-swiglu-fusion" : "--no-bias-gelu-fusion", {}, key(m, "bias_activation_fusion"));
  if (!cfg.boolean_or(key(m, "bias_dropout_add_fusion"), true))
    emit("--no-bias-dropout-fusion", {}, key(m, "bias_dropout_add_fusion"));
  if (!cfg.boolean_or(key(m, "masked_softmax_fusion"), true))
    emit("--no-masked-softmax-fusion", {}, key(m, "masked_softmax_fusion"));
  if (pos == "rope" && !cfg.boolean_or(key(m, "apply_rope_fusion"), false))
    emit("--no-rope-fusion", {}, key(m, "apply_rope_fusion"), display_or(key(m, "apply_rope_fusion"), "false"));
  else if (cfg.raw(key(m, "apply_rope_fusion")).IsDefined() && pos != "rope") ignored(display(key(m, "apply_rope_fusion")));

  // Optimizer: Megatron-Core's distributed optimizer (mcore_distributed_optim) or Apex's distributed Adam
  // (distributed_fused_adam) shard the optimizer state, overlapping as optim.overlap_grad_sync /
  // overlap_param_sync say (default false in megatron_gpt_model.py); another optimizer under the O2 wrapper
  // all-reduces gradients asynchronously with PP 1, no sequence parallelism and no gradient-accumulation fusion
  // (configure_optimizers).
  const std::string opt = cfg.string_or(key(o, "name"), "fused_adam");
  const bool mcore_opt = opt == "mcore_distributed_optim", dist = mcore_opt || opt == "distributed_fused_adam";
  const std::int64_t world = launch.nproc_per_node * launch.nnodes;
  const std::int64_t dp = world % (tp * pp * cp) ? 0 : world / (tp * pp * cp);
  // Gradient-accumulation fusion: NeMo turns it off without O2, and with DP > 1 and PP 1 unless distributed
  // (_validate_and_override_config); Megatron-LM has it on.
  bool gaf = cfg.boolean_or(key(m, "gradient_accumulation_fusion"), false);
  if (gaf && (!o2 || (dp > 1 && pp == 1 && !dist))) gaf = false;
  if (!gaf)
    emit("--no-gradient-accumulation-fusion", {}, key(m, "gradient_accumulation_fusion"),
         cfg.boolean_or(key(m, "gradient_accumulation_fusion"), false)
             ? display(key(m, "gradient_accumulation_fusion")) + " (NeMo turns it off here)"
             : display_or(key(m, "gradient_accumulation_fusion"), "false"));
  if (dist) {
    emit("--use-distributed-optimizer", {}, key(o, "name"));
    if (cfg.boolean_or(key(o, "overlap_grad_sync"), false)) emit("--overlap-grad-reduce", {}, key(o, "overlap_grad_sync"));
    if (cfg.boolean_or(key(o, "overlap_param_sync"), false)) {
      if (!cfg.boolean_or(key(o, "overlap_grad_sync"), false))
        cfg.fail(key(o, "overlap_param_sync"), "needs overlap_grad_sync (NeMo refuses it without)");
      emit("--overlap-param-gather", {}, key(o, "overlap_param_sync"));
    }
  } else {
    const bool async = o2 && pp == 1 && !sp && !gaf;
    if (async) emit("--overlap-grad-reduce", {}, key(o, "name"), "model.optim.name=" + opt + " (O2 asynchronous all-reduce)");
    for (const char* k : {"overlap_grad_sync", "overlap_param_sync"})
      if (cfg.raw(key(o, k)).IsDefined()) ignored(display(key(o, k)) + " (distributed optimizers only)");
  }
  // Bucket sizes: Megatron-Core DDP's ddp_bucket_size (parameters); Apex's bucket_cap_mb is not the same unit.
  if (cfg.has(key(o, "ddp_bucket_size"))) {
    if (mcore_opt) emit("--ddp-bucket-size", {std::to_string(cfg.count(key(o, "ddp_bucket_size")))}, key(o, "ddp_bucket_size"));
    else ignored(display(key(o, "ddp_bucket_size")) + " (mcore_distributed_optim only)");
  }
  // Gradient averaging: NeMo builds Megatron-Core's DDP with average_in_collective = optim.average_in_collective,
  // default True (megatron_gpt_model.py setup_mcore_distributed_parallel), where Megatron-LM's default is False.
  if (mcore_opt && cfg.boolean_or(key(o, "average_in_collective"), true))
    emit("--ddp-average-in-collective", {}, key(o, "average_in_collective"), display_or(key(o, "average_in_collective"), "true"));
  else if (!mcore_opt && cfg.raw(key(o, "average_in_collective")).IsDefined())
    ignored(display(key(o, "average_in_collective")) + " (mcore_distributed_optim only)");
  if (cfg.raw(key(o, "bucket_cap_mb")).IsDefined()) {
    if (opt == "distributed_fused_adam") not_modelled(display(key(o, "bucket_cap_mb")) + " (Apex's bucket size)");
    else ignored(display(key(o, "bucket_cap_mb")));
  }
  if (cfg.has(key(o, "num_distributed_optimizer_instances"))) {
    if (mcore_opt)
      emit("--num-distributed-optimizer-instances", {std::to_string(cfg.count(key(o, "num_distributed_optimizer_instances")))},
           key(o, "num_distributed_optimizer_instances"));
    else ignored(display(key(o, "num_distributed_optimizer_instances")));
  }
  // Gradient reduction dtype (DistributedDataParallelConfig.grad_reduce_in_fp32 = grad_sync_dtype == 'fp32').
  if (cfg.has(key(o, "grad_sync_dtype"))) {
    const std::string d = cfg.scalar(key(o, "grad_sync_dtype"));
    if (d == "bf16" && mcore_opt) emit("--grad-reduce-in-bf16", {}, key(o, "grad_sync_dtype"));
    else if (d == "fp32" || !mcore_opt) ignored(display(key(o, "grad_sync_dtype")));
    else cfg.fail(key(o, "grad_sync_dtype"), "expected fp32 or bf16, got '" + text_excerpt(d) + "'");
  }

  // Manual garbage collection every gc_interval steps (0: Python's own).
  if (cfg.integer_or(key(m, "gc_interval"), 0) > 0) {
    emit("--manual-gc", {}, key(m, "gc_interval"));
    emit("--manual-gc-interval", {std::to_string(cfg.integer(key(m, "gc_interval")))}, key(m, "gc_interval"));
  } else if (cfg.raw(key(m, "gc_interval")).IsDefined()) {
    ignored(display(key(m, "gc_interval")));
  }
  if (cfg.has(key(m, "wgrad_deferral_limit"))) {
    if (cfg.boolean_or(key(m, "defer_embedding_wgrad_compute"), false))
      emit("--wgrad-deferral-limit", {std::to_string(cfg.integer(key(m, "wgrad_deferral_limit")))}, key(m, "wgrad_deferral_limit"));
    else ignored(display(key(m, "wgrad_deferral_limit")));
  }

  // Vocabulary: NeMo pads the tokenizer's size as Megatron-LM does (_vocab_size_with_padding); only Megatron's
  // GPT-2 BPE has a size the importer knows without the tokenizer's files. override_vocab_size is used as given.
  const Path ov = key(m, "override_vocab_size");
  if (cfg.has(ov)) {
    emit("--padded-vocab-size", {std::to_string(cfg.count(ov))}, ov);
  } else {
    const std::string lib = cfg.string_or({"model", "tokenizer", "library"}, "");
    const std::string type = cfg.string_or({"model", "tokenizer", "type"}, "");
    if (lib == "megatron" && type == "GPT2BPETokenizer") {
      emit("--tokenizer-type", {"GPT2BPETokenizer"}, {"model", "tokenizer", "type"});
    } else if (!overrides_vocab) {
      cfg.fail({"model", "tokenizer"},
               "the vocabulary size comes from the tokenizer's files (library " + (lib.empty() ? "?" : text_excerpt(lib)) +
                   ", type " + (type.empty() ? "?" : text_excerpt(type)) +
                   "), which the importer does not read: give --param padded_vocab_size=N (N as NeMo logs it: "
                   "'Padded vocab_size: N')");
    }
  }
}

// The model family whose formula NeMo logs TFLOP/s per GPU with: FLOPsMeasurementCallback (nemo/collections/
// common/metrics/perf_metrics.py at NVIDIA/NeMo@e564e669, lines 52-90 and 136-158), which megatron_trainer_builder.py
// :183-184 adds unless exp_manager.log_tflops_per_sec_per_gpu is false, takes the first of gpt3, llama2, llama3,
// nemotron, mixtral (then bert, not a GPT) whose name is in run.name, lower-cased; its formula reads the model keys
// below, and NeMo logs -1 when one is missing (None in the arithmetic). "" when NeMo logs no TFLOP/s.
std::string nemo_flops_family(const Config& cfg) {
  if (!cfg.boolean_or({"exp_manager", "log_tflops_per_sec_per_gpu"}, true)) return "";
  const std::string name = lower(cfg.string_or({"run", "name"}, ""));
  for (const std::string f : {"gpt3", "llama2", "llama3", "nemotron", "mixtral"}) {
    if (name.find(f) == std::string::npos) continue;
    std::vector<std::string> keys = {"global_batch_size", "encoder_seq_length", "hidden_size", "num_layers"};
    if (f != "gpt3") keys.insert(keys.end(), {"num_attention_heads", "ffn_hidden_size"});
    if (f == "mixtral") keys.push_back("moe_router_topk");
    for (const auto& k : keys)
      if (!cfg.has({"model", k})) return "";
    return f;
  }
  return "";
}

}  // namespace

Json scenario_for_nemo(const std::string& path, const std::string& text, const std::string& topology,
                       const ParamMap& overrides, bool ignore_unknown, ParamOrigins* origins) {
  const Config cfg(path, text);
  for (const char* s : {"trainer", "model"})
    if (!cfg.raw({s}).IsMap()) throw InputError(path, std::string("expected a NeMo training config with a ") + s + ": mapping");
  Import im{cfg, {}, {}, {}};
  im.launch.file = path;
  im.launch.script = "pretrain_gpt.py";
  im.overrides_vocab = overrides.count("padded_vocab_size") > 0;
  std::map<std::string, const Key*> table;
  for (const auto& k : nemo_keys()) table.emplace(k.path, &k);
  std::vector<std::string> sections;
  for (auto it = cfg.root().begin(); it != cfg.root().end(); ++it) {
    const std::string name = it->first.Scalar();  // a name: Config::check_keys_and_merge
    if (name == "trainer" || name == "model") im.walk({name}, table);
    else if (top_level_ignored().count(name)) sections.push_back(name);
    else im.unknown.push_back(name);
  }
  if (!im.unknown.empty() && !ignore_unknown)
    cfg.fail(split_dots(im.unknown.front()),
             "unknown key (not one NeMo's GPT model reads at NVIDIA/NeMo@" + std::string(kNemoCommit) +
                 " as far as the importer knows; --ignore-unknown lists such keys and goes on)");
  im.rules();
  im.source.ignored.insert(im.source.ignored.end(), sections.begin(), sections.end());
  im.source.origin = "imported from the NeMo config " + path + " (keys of NVIDIA/NeMo@" + kNemoCommit +
                     " megatron_gpt_config.yaml, as Megatron-LM flags of " + megatron_args_at("and") + ")";
  Json doc = scenario_for_launch(im.launch, topology, overrides, im.source, origins);
  if (origins && !overrides.count("world_size")) {
    const int line = cfg.line({"trainer", "devices"});
    (*origins)["world_size"] = {path + (line ? ":" + std::to_string(line) : std::string()),
                                "trainer.devices x trainer.num_nodes"};
  }
  // TFLOP/s in the count NeMo logs (GptConfig flops_convention nemo-<family>), unless --param says otherwise.
  Json& params = doc["workload"]["params"];
  const std::string family = nemo_flops_family(cfg);
  if (!family.empty() && !params.contains("flops_convention")) params["flops_convention"] = "nemo-" + family;
  note_unknown_keys(doc, im.unknown);
  return doc;
}

}  // namespace fabricsim::workloads
