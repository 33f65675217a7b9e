#include "workloads/gpt.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "models/gpu.hpp"
#include "sim/base/did_you_mean.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/gpt_models.hpp"

namespace fabricsim::workloads {

// Layer 1, model description: the configuration (shape, precision, parallel sizes, options), its
// validation and the pipeline layer split. Parameter counts, FLOPs and memory are in gpt_model.cpp.

namespace {
// Micro-batches x layers per iteration the generator builds a trace for (issue 24 resource bound): about 8 ops
// per micro-batch and layer (measured: 131,074 ops for 8,192 micro-batches of 2 layers, `fabricsim gen gpt`),
// so the limit is about 8.4 million ops; a run at 1/8 of it (65,536 micro-batches of 2 layers: 1,048,578 ops)
// peaked at 705 MB and 14 s (`fabricsim run`, shared 2-core machine), so the limit is about 6 GB. Real runs are
// far below it (the 405B / 16k-GPU example: 16 micro-batches x 126 layers).
constexpr std::int64_t kMaxGptMicroBatchLayers = 1 << 20;
}  // namespace

bool gpt_detail::is_blackwell(const std::string& gpu) {
  return gpu == "b200" || gpu == "gb200" || gpu == "b300" || gpu == "gb300";
}
bool gpt_detail::pre_hopper(const std::string& gpu) { return gpu.rfind("a100", 0) == 0 || gpu.rfind("v100", 0) == 0; }

// The attention backend a configuration runs on `gpu`: the one given, else flash from H100 on and the SC'21
// unfused layer before it. `auto` is Megatron-LM's --attention-backend auto (its default), which leaves the choice
// to Transformer Engine's get_attention_backend (transformer_engine/pytorch/attention/dot_product_attention/
// utils.py at NVIDIA/TransformerEngine@d0067d0da): below compute capability 8.0 it turns FlashAttention 2 and
// FusedAttention off (lines 569-575: V100 runs TE's unfused attention); from 9.0 on it prefers FusedAttention
// (cuDNN) when both qualify (lines 1647-1653: H100 and later); on A100 (8.0) FlashAttention stays. AMD GPUs run
// ROCm's TE, whose choice is not read here: the generator's default.
std::string gpt_detail::resolved_attention_backend(const std::string& backend, const std::string& gpu) {
  if (backend.empty()) return pre_hopper(gpu) ? "unfused" : "flash";
  if (backend != "auto") return backend;
  if (gpu.rfind("v100", 0) == 0) return "unfused";
  if (gpu.rfind("a100", 0) == 0 || gpu.rfind("mi", 0) == 0) return "flash";
  return "fused";
}

using gpt_detail::is_blackwell;
using gpt_detail::pre_hopper;

namespace {
// Longest layout the parser expands (one letter per layer: far above any real model's 2 + layers + MTP).
constexpr std::size_t kMaxLayoutLetters = 1 << 20;
// Longest string-form layout read.
constexpr std::size_t kMaxLayoutText = 4096;

// One pass of `pattern` over `text`, each match replaced by group 1 repeated group 2 times (Python's
// re.sub(pattern, lambda x: x.group(1) * int(x.group(2)), text) in parse_str_to_list).
std::string unroll(const std::string& text, const std::regex& pattern, const std::string& key) {
  std::string out;
  auto it = text.cbegin();
  std::smatch mt;
  while (std::regex_search(it, text.cend(), mt, pattern)) {
    out.append(it, mt[0].first);
    const std::string digits = mt[2].str();
    const std::string unit = mt[1].str();
    if (digits.size() > 7 || unit.size() * std::stoull(digits) > kMaxLayoutLetters)
      throw InputError(key, "repeats '" + unit + "' " + digits + " times: more than " +
                                         std::to_string(kMaxLayoutLetters) + " layers");
    for (unsigned long long k = std::stoull(digits); k > 0; --k) out += unit;
    if (out.size() > kMaxLayoutLetters)
      throw InputError(key, "expands to more than " + std::to_string(kMaxLayoutLetters) + " layers");
    it = mt[0].second;
  }
  out.append(it, text.cend());
  return out;
}
}  // namespace

std::vector<std::string> parse_pipeline_layout(const std::string& text, const std::string& key) {
  auto fail = [&](const std::string& what) -> void { throw InputError(key, what); };
  std::vector<std::string> stages;
  std::size_t first = text.find_first_not_of(" \t\n");
  if (first != std::string::npos && text[first] == '[') {
    // The list form (PipelineParallelLayerLayout.__init__ with a list): a list of virtual stages, each a list of
    // LayerType names (str.strip().lower(); megatron/core/transformer/enums.py LayerType).
    Json j;
    try {
      j = Json::parse(text);
    } catch (const std::exception&) {
      fail("a list that is not valid JSON: expected a list of lists of embedding / decoder / mtp / loss");
    }
    if (!j.is_array()) fail("expected a list of lists");
    for (const Json& row : j) {
      if (!row.is_array()) fail("must be a list of lists, got the element " + json_excerpt(row));
      std::string st;
      for (const Json& e : row) {
        if (!e.is_string()) fail("elements are LayerType names (strings), got " + json_excerpt(e));
        std::string n = e.get<std::string>();
        const auto b = n.find_first_not_of(" \t"), en = n.find_last_not_of(" \t");
        n = b == std::string::npos ? "" : n.substr(b, en - b + 1);
        for (auto& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (n == "embedding") st += 'E';
        else if (n == "decoder") st += 't';
        else if (n == "mtp") st += 'm';
        else if (n == "loss") st += 'L';
        else if (n == "encoder") fail("has an encoder layer: Megatron-LM does not support them in a flexible layout");
        else fail("'" + e.get<std::string>() + "' is not a LayerType (expected embedding, decoder, mtp or loss)");
        if (st.size() > kMaxLayoutLetters) fail("has too many layers");
      }
      stages.push_back(st);
    }
    if (stages.empty()) fail("is an empty list");
    return stages;
  }
  // The string form (PipelineParallelLayerLayout.parse_str_to_list): commas are cosmetic; "(...)*n" is unrolled
  // first, then "x*n"; `|` separates virtual stages.
  // (std::regex matches recursively: the text it reads is kept short; DeepSeek-V3's layout is 17 characters.)
  if (text.size() > kMaxLayoutText)
    fail("is longer than " + std::to_string(kMaxLayoutText) + " characters (repeat with (...)*n and x*n)");
  std::string t;
  for (char ch : text)
    if (ch != ',') t += ch;
  static const std::regex group(R"(\(([^)]+)\)\*(\d+))"), single(R"((.)\*(\d+))");
  t = unroll(unroll(t, group, key), single, key);
  stages.emplace_back();
  for (char ch : t) {
    if (ch == '|') {
      stages.emplace_back();
    } else if (ch == 'E' || ch == 't' || ch == 'm' || ch == 'L') {
      stages.back() += ch;
    } else {
      const std::string shown = std::isprint(static_cast<unsigned char>(ch)) ? std::string(1, ch) : "\\x" + std::to_string(int(ch));
      fail("invalid layer character '" + shown + "' (expected E embedding, t decoder layer, m MTP layer, L loss; "
           "| between virtual stages, (...)*n and x*n to repeat)");
    }
  }
  return stages;
}

std::string pipeline_layout_text(const std::vector<std::string>& stages) {
  std::string out;
  for (std::size_t k = 0; k < stages.size(); ++k) out += (k ? "|" : "") + stages[k];
  return out;
}

std::string pipeline_layout_of_counts(const std::vector<std::int64_t>& layers) {
  std::vector<std::string> st;
  for (std::size_t k = 0; k < layers.size(); ++k) {
    std::string stage = k == 0 ? "E" : "";
    stage.append(static_cast<std::size_t>(layers[k]), 't');
    if (k + 1 == layers.size()) stage += 'L';
    st.push_back(std::move(stage));
  }
  return pipeline_layout_text(st);
}

namespace {

// Checks a parsed pipeline_model_parallel_layout against the model (PipelineParallelLayerLayout.__init__ and
// validate_layer_layout at NVIDIA/Megatron-LM@d98e8a64dd, arguments.py validate_args and TransformerConfig's
// conflicts with the other split keys), and where fabricsim places less than Megatron: the embedding in the
// first virtual stage, the loss in the last.
template <class Fail>
void check_pipeline_layout(const GptConfig& c, Fail&& fail) {
  const char* K = "pipeline_model_parallel_layout";
  const auto& S = c.pipeline_layout;
  const std::int64_t p = c.pipeline_model_parallel_size, n = static_cast<std::int64_t>(S.size());
  if (n % p)
    fail(K, "has " + std::to_string(n) + " virtual stages, not a multiple of pipeline_model_parallel_size (" +
                std::to_string(p) + ")");
  for (const char* other : {"decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                            "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"}) {
    const bool set = std::string(other) == "decoder_first_pipeline_num_layers"   ? c.decoder_first_pipeline_num_layers != 0
                     : std::string(other) == "decoder_last_pipeline_num_layers"  ? c.decoder_last_pipeline_num_layers != 0
                     : std::string(other) == "account_for_embedding_in_pipeline_split" ? c.account_for_embedding_in_pipeline_split
                                                                                        : c.account_for_loss_in_pipeline_split;
    if (set) fail(K, std::string("cannot be combined with ") + other + " (Megatron-LM refuses it: the layout gives the whole split)");
  }
  if (c.num_layers_per_virtual_pipeline_stage)
    fail(K, "cannot be combined with num_layers_per_virtual_pipeline_stage (the layout's length sets the virtual stages)");
  if (c.virtual_pipeline_model_parallel_size && c.virtual_pipeline_model_parallel_size != std::max<std::int64_t>(1, n / p))
    fail(K, "has " + std::to_string(n / p) + " virtual stages per pipeline rank but virtual_pipeline_model_parallel_size is " +
                std::to_string(c.virtual_pipeline_model_parallel_size));
  std::string flat;
  for (const auto& st : S) flat += st;
  const auto count = [&](char ch) { return static_cast<std::int64_t>(std::count(flat.begin(), flat.end(), ch)); };
  if (flat.empty() || flat.front() != 'E') fail(K, "the first layer must be the embedding E");
  if (flat.back() != 'L') fail(K, "the last layer must be the loss L");
  if (count('E') != 1) fail(K, "must hold the embedding E exactly once");
  if (count('L') != 1) fail(K, "must hold the loss L exactly once");
  if (count('t') != c.num_layers)
    fail(K, "holds " + std::to_string(count('t')) + " decoder layers t, num_layers is " + std::to_string(c.num_layers));
  if (count('m') != c.moe.mtp_num_layers)
    fail(K, "holds " + std::to_string(count('m')) + " MTP layers m, mtp_num_layers is " + std::to_string(c.moe.mtp_num_layers));
  if (count('m') && flat.find('t', flat.find('m')) != std::string::npos)
    fail(K, "decoder layers must be placed before MTP layers");
  if (S.front().empty() || S.front()[0] != 'E')
    fail(K, "the embedding must open the first virtual stage (pipeline rank 0's first chunk), where fabricsim runs it");
  if (S.back().empty() || S.back().back() != 'L')
    fail(K, "the loss must close the last virtual stage (the last pipeline rank's last chunk), where fabricsim runs it");
  // Megatron's placement rules for the MTP layers: in the last virtual stage of whichever pipeline rank holds
  // them, all in that one stage.
  for (std::size_t k = 0; k < S.size(); ++k) {
    const auto in_stage = static_cast<std::int64_t>(std::count(S[k].begin(), S[k].end(), 'm'));
    if (!in_stage) continue;
    if (static_cast<std::int64_t>(k) / p != n / p - 1)
      fail(K, "puts MTP layers in virtual stage " + std::to_string(k) + " (pipeline rank " + std::to_string(k % p) +
                  "'s chunk " + std::to_string(k / p) + "): Megatron-LM restricts the MTP to the last virtual pipeline "
                  "stage of its rank");
    if (in_stage != count('m')) fail(K, "all of the MTP layers must be in the same one virtual pipeline stage");
    if (c.dualpipe() && static_cast<std::int64_t>(k) != n - 1)
      fail(K, "puts MTP layers before the loss's stage (Megatron's standalone MTP stage): fabricsim models it with "
              "Megatron's 1F1B / interleaved schedules, not DualPipe");
  }
}

// Layout with a failure callback (config validation) -- see gpt_layer_layout.
template <class Fail>
std::vector<std::vector<std::int64_t>> layout_of(const GptConfig& c, Fail&& fail) {
  const std::int64_t p = c.pipeline_model_parallel_size, v = c.vp(), L = c.num_layers;
  // No split gives a rank more virtual stages than the layers plus the embedding and the loss (the checks below say
  // which rule a smaller count breaks); refused before the per-stage tables are sized by it.
  if (c.pipeline_layout.empty() && v > L + 2)
    fail(c.num_layers_per_virtual_pipeline_stage ? "num_layers_per_virtual_pipeline_stage" : "virtual_pipeline_model_parallel_size",
         "gives " + std::to_string(v) + " virtual stages per pipeline rank for " + std::to_string(L) +
             " layers: each virtual stage holds at least one layer");
  std::vector<std::vector<std::int64_t>> out(p, std::vector<std::int64_t>(v, 0));
  // A hybrid pattern's '|' segments are the virtual stages (gpt_hybrid.cpp, check_hybrid).
  if (c.hybrid() && c.hybrid_layer_pattern.find('|') != std::string::npos) return gpt_detail::hybrid_segment_layout(c);
  if (!c.pipeline_layout.empty()) {
    // PipelineParallelLayerLayout.__init__: virtual stage k of the 1-D list is layout[k % PP][k / PP].
    check_pipeline_layout(c, fail);
    for (std::int64_t k = 0; k < p * v; ++k) {
      const auto& st = c.pipeline_layout[static_cast<std::size_t>(k)];
      out[k % p][k / p] = static_cast<std::int64_t>(std::count(st.begin(), st.end(), 't'));
    }
    return out;
  }
  const bool acc = c.account_for_embedding_in_pipeline_split || c.account_for_loss_in_pipeline_split;
  const bool uneven = c.decoder_first_pipeline_num_layers || c.decoder_last_pipeline_num_layers;
  if (acc && uneven)
    fail("account_for_embedding_in_pipeline_split",
         "cannot be combined with decoder_first/last_pipeline_num_layers (Megatron-LM allows one of them)");
  if (acc) {
    // Megatron-Core: the embedding and/or the loss count as one layer each in the split (Llama-3.1-405B's
    // 126 layers + 2 over PP 8 x VP 8 = 2 per chunk).
    const std::int64_t e = c.account_for_embedding_in_pipeline_split, l = c.account_for_loss_in_pipeline_split;
    const std::int64_t total = L + e + l;
    if (total % (p * v))
      fail("num_layers", "num_layers (" + std::to_string(L) + ") plus the embedding/loss counted as layers must be a "
                         "multiple of pipeline x virtual stages (" + std::to_string(p * v) + ")");
    const std::int64_t per = total / (p * v);
    for (auto& st : out) std::fill(st.begin(), st.end(), per);
    out[0][0] -= e;
    out[p - 1][v - 1] -= l;
    if (out[0][0] < 0 || out[p - 1][v - 1] < 0) fail("num_layers", "too few layers for the pipeline split");
    return out;
  }
  std::vector<std::int64_t> stage(p, 0);
  if (uneven) {
    const std::int64_t f = c.decoder_first_pipeline_num_layers, la = c.decoder_last_pipeline_num_layers;
    std::int64_t rest = L - f - la, middle = p - (f ? 1 : 0) - (la ? 1 : 0);
    if (p < 2) fail("decoder_first_pipeline_num_layers", "needs pipeline_model_parallel_size > 1");
    if (rest < 0 || (middle == 0 && rest != 0) || (middle > 0 && rest % middle))
      fail("decoder_first_pipeline_num_layers",
           "the layers left after the first/last stages (" + std::to_string(rest) + ") must split evenly over the " +
               std::to_string(middle) + " other stages");
    for (std::int64_t s = 0; s < p; ++s) stage[s] = middle ? rest / middle : 0;
    if (f) stage[0] = f;
    if (la) stage[p - 1] = la;
  } else {
    if (L % p)
      fail("num_layers", "must be a multiple of pipeline_model_parallel_size (" + std::to_string(p) + "): " +
                             std::to_string(L) + " layers; decoder_first_pipeline_num_layers and "
                             "decoder_last_pipeline_num_layers give the first and last stages other counts");
    std::fill(stage.begin(), stage.end(), L / p);
  }
  for (std::int64_t s = 0; s < p; ++s) {
    if (stage[s] % v) {
      if (c.num_layers_per_virtual_pipeline_stage)
        fail("num_layers_per_virtual_pipeline_stage",
             "must divide the layers per pipeline stage (" + std::to_string(stage[s]) + ")");
      fail("virtual_pipeline_model_parallel_size",
           "must divide the layers of pipeline stage " + std::to_string(s) + " (" + std::to_string(stage[s]) + ")");
    }
    std::fill(out[s].begin(), out[s].end(), stage[s] / v);
  }
  return out;
}

}  // namespace

namespace {
// The words of a Megatron module-list value, --recompute-modules or --offload-modules (spaces or commas between them).
std::vector<std::string> recompute_module_list(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : text + " ") {
    if (ch == ' ' || ch == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  return out;
}
}  // namespace

bool GptConfig::offloads(const std::string& module) const {
  if (!fine_grained_activation_offloading) return false;
  for (const auto& m : recompute_module_list(offload_modules))
    if (m == module) return true;
  return false;
}

bool GptConfig::recomputes(const std::string& module) const {
  if (recompute_granularity != "selective" || !selective_ac_option.empty()) return false;
  if (recompute_modules.empty()) return module == "core_attn";  // Megatron-Core's default list
  for (const auto& m : recompute_module_list(recompute_modules))
    if (m == module) return true;
  return false;
}

// Megatron-LM derives the virtual stages from num_layers_per_virtual_pipeline_stage over the layers per pipeline
// stage with the embedding and the loss counted as layers where account_for_*_in_pipeline_split says so
// (megatron/training/arguments.py validate_args at NVIDIA/Megatron-LM@d98e8a64dd).
std::int64_t GptConfig::split_layers() const {
  return num_layers + (account_for_embedding_in_pipeline_split ? 1 : 0) + (account_for_loss_in_pipeline_split ? 1 : 0);
}

std::int64_t GptConfig::mtp_virtual_stage() const {
  if (moe.mtp_num_layers <= 0) return -1;
  for (std::size_t k = 0; k < pipeline_layout.size(); ++k)
    if (pipeline_layout[k].find('m') != std::string::npos) return static_cast<std::int64_t>(k);
  return pipeline_model_parallel_size * vp() - 1;
}

std::string GptConfig::cp_impl() const {
  if (cp_comm_type != "a2a+p2p" || hierarchical_context_parallel_sizes.size() != 2) return cp_comm_type;
  if (hierarchical_context_parallel_sizes[0] == 1) return "p2p";
  if (hierarchical_context_parallel_sizes[1] == 1) return "a2a";
  return cp_comm_type;
}

std::int64_t GptConfig::vp() const {
  // A hybrid pattern's '|' segments over PP (megatron/training/arguments.py:840-858 @d98e8a64).
  if (hybrid() && hybrid_layer_pattern.find('|') != std::string::npos)
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::count(hybrid_layer_pattern.begin(), hybrid_layer_pattern.end(), '|') + 1) /
                                         pipeline_model_parallel_size);
  // arguments.py validate_args: the layout's length over PP sets the virtual stages.
  if (!pipeline_layout.empty())
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(pipeline_layout.size()) / pipeline_model_parallel_size);
  if (virtual_pipeline_model_parallel_size) return virtual_pipeline_model_parallel_size;
  if (num_layers_per_virtual_pipeline_stage) {
    const std::int64_t per_stage = split_layers() / pipeline_model_parallel_size;
    return std::max<std::int64_t>(1, per_stage / num_layers_per_virtual_pipeline_stage);
  }
  return 1;
}

std::vector<std::vector<std::int64_t>> gpt_layer_layout(const GptConfig& c) {
  return layout_of(c, [](const std::string& k, const std::string& w) -> void { throw InputError("gpt " + k, w); });
}

namespace {
// The words of a space-separated value, as Megatron-LM's nargs flags take them ("p2p a2a", "8 2").
std::vector<std::string> space_separated(const std::string& value) {
  std::vector<std::string> words;
  std::istringstream in(value);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Reads every parameter of the gpt generator (no cross-checks): gpt_config_from_params validates what it
// returns; gpt_param_names runs it over no parameters to list the names it reads.
GptConfig read_gpt_config(ParamReader& r, const std::string& where) {
  GptConfig c;
  c.model = r.string("model", "");
  if (!c.model.empty()) {
    const GptModelShape* m = find_gpt_model(c.model);
    if (!m) {
      std::vector<std::string> names;
      for (const auto& s : gpt_model_catalogue()) names.push_back(s.name);
      r.fail("model", "unknown model '" + c.model + "'" + did_you_mean(c.model, names) + " (expected one of " +
                          gpt_model_names() + ")");
    }
    c.num_layers = m->num_layers, c.hidden_size = m->hidden_size, c.ffn_hidden_size = m->ffn_hidden_size;
    c.num_attention_heads = m->num_attention_heads, c.num_query_groups = m->num_query_groups;
    c.kv_channels = m->kv_channels, c.seq_length = m->seq_length, c.padded_vocab_size = m->padded_vocab_size;
    c.swiglu = m->swiglu, c.untie_embeddings_and_output_weights = m->untie_embeddings_and_output_weights;
    c.normalization = m->normalization, c.position_embedding_type = m->position_embedding_type;
    c.hidden_dropout = m->hidden_dropout, c.attention_dropout = m->attention_dropout;
    c.qk_layernorm = m->qk_layernorm, c.add_qkv_bias = m->add_qkv_bias;
    c.experimental_attention_variant = m->experimental_attention_variant;
    c.linear_attention_freq = m->linear_attention_freq, c.attention_output_gate = m->attention_output_gate;
    moe_catalogue_defaults(c.model, c.moe);
    gpt_detail::hybrid_catalogue_defaults(c);
    // gpt-oss-120b: "alternating banded window (bandwidth 128 tokens) and fully dense" attention layers (model
    // card arXiv:2508.10925 Sec. 2.2; config.json sliding_window 128, layer_types starting with
    // "sliding_attention"): Megatron's window_size (128, 0) with window_attn_skip_freq 2 (layers 1, 3, ... windowed).
    if (c.model == "gpt-oss-120b") c.window_left = 128, c.window_right = 0, c.window_attn_skip_freq = "2";
  }
  c.num_layers = r.integer("num_layers", c.num_layers, 1);
  c.hidden_size = r.integer("hidden_size", c.hidden_size, 1);
  c.num_attention_heads = r.integer("num_attention_heads", c.num_attention_heads, 1);
  // Given, these are counts >= 1 (absent: MHA, h / a); 0 is not Megatron's way of leaving them out.
  c.num_query_groups = r.integer("num_query_groups", c.num_query_groups, r.has("num_query_groups") ? 1 : 0);
  c.kv_channels = r.integer("kv_channels", c.kv_channels, r.has("kv_channels") ? 1 : 0);
  c.ffn_hidden_size = r.integer("ffn_hidden_size", c.ffn_hidden_size, 0);
  c.seq_length = r.integer("seq_length", c.seq_length, 1);
  c.padded_vocab_size = r.integer("padded_vocab_size", c.padded_vocab_size, 1);
  c.swiglu = r.boolean("swiglu", c.swiglu);
  c.untie_embeddings_and_output_weights = r.boolean("untie_embeddings_and_output_weights",
                                                    c.untie_embeddings_and_output_weights);
  c.normalization = r.string("normalization", c.normalization);
  c.qk_layernorm = r.boolean("qk_layernorm", c.qk_layernorm);
  c.add_qkv_bias = r.boolean("add_qkv_bias", c.add_qkv_bias);
  c.squared_relu = r.boolean("squared_relu", c.squared_relu);
  c.position_embedding_type = r.string("position_embedding_type", c.position_embedding_type);
  c.hidden_dropout = r.number("hidden_dropout", c.hidden_dropout, 0);
  c.attention_dropout = r.number("attention_dropout", c.attention_dropout, 0);
  if (c.hidden_dropout > 1) r.fail("hidden_dropout", "a probability in [0, 1], got " + std::to_string(c.hidden_dropout));
  if (c.attention_dropout > 1)
    r.fail("attention_dropout", "a probability in [0, 1], got " + std::to_string(c.attention_dropout));
  c.micro_batch_size = r.integer("micro_batch_size", c.micro_batch_size, 1);
  c.global_batch_size = r.integer("global_batch_size", c.global_batch_size, 1);
  c.tensor_model_parallel_size = r.integer("tensor_model_parallel_size", c.tensor_model_parallel_size, 1);
  c.pipeline_model_parallel_size = r.integer("pipeline_model_parallel_size", c.pipeline_model_parallel_size, 1);
  c.context_parallel_size = r.integer("context_parallel_size", 1, 1);
  c.cp_comm_type = r.string("cp_comm_type", c.cp_comm_type);
  {
    // Space-separated, as Megatron's --cp-comm-type takes several (nargs); all alike is that one type.
    const std::vector<std::string> types = space_separated(c.cp_comm_type);
    if (types.empty()) r.fail("cp_comm_type", "is empty (expected p2p, all_gather, a2a or a2a+p2p, or one per layer)");
    c.cp_comm_type = types[0];
    if (std::any_of(types.begin(), types.end(), [&](const std::string& x) { return x != types[0]; })) c.cp_comm_types = types;
  }
  if (r.has("hierarchical_context_parallel_sizes")) {
    // Space-separated positive integers, as Megatron-LM's command line gives them.
    for (const std::string& tok : space_separated(r.string("hierarchical_context_parallel_sizes", ""))) {
      std::size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(tok, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != tok.size() || v < 1)
        r.fail("hierarchical_context_parallel_sizes", "expected space-separated integers >= 1 (e.g. \"8 2\"), got '" + tok + "'");
      c.hierarchical_context_parallel_sizes.push_back(v);
    }
    if (c.hierarchical_context_parallel_sizes.empty())
      r.fail("hierarchical_context_parallel_sizes", "expected space-separated integers >= 1 (e.g. \"8 2\")");
  }
  c.context_parallel_rotate_method = r.string("context_parallel_rotate_method", "");
  if (!c.context_parallel_rotate_method.empty() && r.has("cp_comm_type"))
    r.fail("context_parallel_rotate_method", "selects PyTorch's context parallelism; it replaces cp_comm_type (give one)");
  c.num_layers_per_virtual_pipeline_stage = r.integer("num_layers_per_virtual_pipeline_stage", 0, 0);
  c.virtual_pipeline_model_parallel_size =
      r.integer("virtual_pipeline_model_parallel_size", 0, r.has("virtual_pipeline_model_parallel_size") ? 1 : 0);
  c.decoder_first_pipeline_num_layers = r.integer("decoder_first_pipeline_num_layers", 0, 0);
  c.decoder_last_pipeline_num_layers = r.integer("decoder_last_pipeline_num_layers", 0, 0);
  c.account_for_embedding_in_pipeline_split = r.boolean("account_for_embedding_in_pipeline_split", false);
  c.account_for_loss_in_pipeline_split = r.boolean("account_for_loss_in_pipeline_split", false);
  if (r.has("pipeline_model_parallel_layout"))
    c.pipeline_layout = parse_pipeline_layout(r.string_or_list("pipeline_model_parallel_layout"),
                                              where + " pipeline_model_parallel_layout");
  c.microbatch_group_size_per_vp_stage = r.integer("microbatch_group_size_per_vp_stage", 0,
                                                   r.has("microbatch_group_size_per_vp_stage") ? 1 : 0);
  c.world_size = r.integer("world_size", c.world_size, 1);
  c.use_tp_pp_dp_mapping = r.boolean("use_tp_pp_dp_mapping", false);
  c.sequence_parallel = r.boolean("sequence_parallel", false);
  c.recompute_granularity = r.string("recompute_granularity", c.recompute_granularity);
  for (const auto& [k, v] : {std::pair<const char*, std::string>{"tensor_model_parallel_size",
                                                                  std::to_string(c.tensor_model_parallel_size)},
                              {"pipeline_model_parallel_size", std::to_string(c.pipeline_model_parallel_size)},
                              {"global_batch_size", std::to_string(c.global_batch_size)},
                              {"recompute_granularity", c.recompute_granularity}})
    if (!r.has(k)) c.defaulted_layout.push_back(std::string(k) + " " + v);
  c.recompute_method = r.string("recompute_method", c.recompute_method);
  c.distribute_saved_activations = r.boolean("distribute_saved_activations", false);
  c.recompute_num_layers = r.integer("recompute_num_layers", 0, 0);
  c.selective_ac_option = r.string("selective_ac_option", "");
  c.recompute_modules = r.string("recompute_modules", "");
  // moe_layer_recompute: Megatron-Core's older spelling of recompute_modules moe (transformer_config.py
  // @d98e8a64 __post_init__: "Do not set --moe-layer-recompute with full recompute granularity"; otherwise it
  // sets recompute_granularity selective and appends "moe" to recompute_modules, whose default is core_attn).
  if (r.boolean("moe_layer_recompute", false)) {
    if (c.recompute_granularity == "full")
      r.fail("moe_layer_recompute", "cannot be used with recompute_granularity full (Megatron-LM raises the same)");
    c.recompute_granularity = "selective";
    if (!c.recomputes("moe")) c.recompute_modules = (c.recompute_modules.empty() ? "core_attn" : c.recompute_modules) + " moe";
  }
  c.use_distributed_optimizer = r.boolean("use_distributed_optimizer", false);
  c.overlap_grad_reduce = r.boolean("overlap_grad_reduce", false);
  c.gradient_accumulation_fusion = r.boolean("gradient_accumulation_fusion", true);
  c.bias_swiglu_fusion = r.boolean("bias_swiglu_fusion", true);
  c.bias_gelu_fusion = r.boolean("bias_gelu_fusion", true);
  c.apply_rope_fusion = r.boolean("apply_rope_fusion", true);
  c.bias_dropout_fusion = r.boolean("bias_dropout_fusion", true);
  c.ddp_average_in_collective = r.boolean("ddp_average_in_collective", false);
  c.gradient_reduce_div_fusion = r.boolean("gradient_reduce_div_fusion", true);
  c.ddp_pad_buckets_for_high_nccl_busbw = r.boolean("ddp_pad_buckets_for_high_nccl_busbw", false);
  c.fp32_residual_connection = r.boolean("fp32_residual_connection", false);
  c.overlap_param_gather = r.boolean("overlap_param_gather", false);
  c.overlap_param_gather_with_optimizer_step = r.boolean("overlap_param_gather_with_optimizer_step", false);
  c.align_param_gather = r.boolean("align_param_gather", true);
  c.align_grad_reduce = r.boolean("align_grad_reduce", true);
  c.tp_comm_overlap = r.boolean("tp_comm_overlap", false);
  c.tp_comm_bulk_wgrad = r.boolean("tp_comm_bulk_wgrad", true);
  c.tp_comm_overlap_impl = r.string("tp_comm_overlap_impl", c.tp_comm_overlap_impl);
  c.tp_comm_overlap_ag = r.boolean("tp_comm_overlap_ag", true);
  c.tp_comm_overlap_rs = r.boolean("tp_comm_overlap_rs", true);
  c.tp_comm_bulk_dgrad = r.boolean("tp_comm_bulk_dgrad", true);
  c.tp_comm_overlap_rs_dgrad = r.boolean("tp_comm_overlap_rs_dgrad", false);
  if (const Json u = r.object("tp_comm_overlap_cfg", "an object of Transformer Engine userbuffers settings per GEMM "
                                                      "(the --tp-comm-overlap-cfg YAML as JSON)");
      !u.is_null())
    c.tp_comm_overlap_cfg = u.dump();
  c.fp8_wgrad = r.boolean("fp8_wgrad", true);
  c.defer_embedding_wgrad_compute = r.boolean("defer_embedding_wgrad_compute", false);
  c.wgrad_deferral_limit = r.integer("wgrad_deferral_limit", 0, 0);
  c.async_tensor_model_parallel_allreduce = r.boolean("async_tensor_model_parallel_allreduce", true);
  c.use_torch_fsdp2 = r.boolean("use_torch_fsdp2", false);
  c.data_parallel_sharding_strategy = r.string("data_parallel_sharding_strategy", c.data_parallel_sharding_strategy);
  c.use_megatron_fsdp = r.boolean("use_megatron_fsdp", false);
  c.num_distributed_optimizer_instances = r.integer("num_distributed_optimizer_instances", 1, 1);
  c.use_sharp = r.boolean("use_sharp", false);
  c.sharp_enabled_group = r.string("sharp_enabled_group", "");
  c.bucket_size = r.has("bucket_size") ? r.integer("bucket_size", 0, 1) : 0;          // 0: Megatron's default
  c.ddp_num_buckets = r.has("ddp_num_buckets") ? r.integer("ddp_num_buckets", 0, 1) : 0;  // 0: none
  c.overlap_p2p_comm = r.boolean("overlap_p2p_comm", false);
  c.pipeline_parallel_schedule = r.string("pipeline_parallel_schedule", "");
  c.dualpipe_zero_bubble = r.boolean("dualpipe_zero_bubble", c.dualpipe_zero_bubble);
  c.cross_entropy_loss_fusion = r.boolean("cross_entropy_loss_fusion", false);
  c.cross_entropy_impl = r.string("cross_entropy_impl", c.cross_entropy_impl);
  c.cross_entropy_fusion_impl = r.string("cross_entropy_fusion_impl", c.cross_entropy_fusion_impl);
  c.fsdp_embeddings_in_root = r.boolean("fsdp_embeddings_in_root", false);
  c.fsdp_reshard_after_forward = r.string("fsdp_reshard_after_forward", c.fsdp_reshard_after_forward);
  c.fsdp_expert_units = r.boolean("fsdp_expert_units", false);
  c.final_norm_eager = r.boolean("final_norm_eager", false);
  c.enable_fsdp_float8_all_gather = r.boolean("enable_fsdp_float8_all_gather", false);
  c.force_recompute_fp8_weight_in_bwd = r.boolean("force_recompute_fp8_weight_in_bwd", false);
  c.fsdp_flat_params = r.boolean("fsdp_flat_params", false);
  if (r.has("torch_compile")) c.torch_compile = r.boolean("torch_compile", false) ? "compiled" : "eager";
  c.norm_type = r.string("norm_type", c.norm_type);
  c.gpu = r.string("gpu", c.gpu);
  // Precision: "precision", or Megatron-LM's flags --bf16 / --fp16 / --fp8-format {e4m3, hybrid} / --fp4-format
  // e2m1 (megatron/core/transformer/transformer_config.py @d98e8a64: fp4 Literal['e2m1']; FP8 and FP4 exclusive).
  const bool has_prec = r.has("precision");
  c.precision = r.string("precision", pre_hopper(models::gpu_spec(c.gpu, where + " gpu").name) ? "fp16" : "bf16");
  const bool bf16 = r.boolean("bf16", false), fp16 = r.boolean("fp16", false);
  const std::string fp8_format = r.string("fp8_format", "");
  if (!fp8_format.empty() && fp8_format != "e4m3" && fp8_format != "hybrid")
    r.fail("fp8_format", "expected e4m3 or hybrid, got '" + fp8_format + "'");
  const std::string fp4_format = r.string("fp4_format", "");
  if (!fp4_format.empty() && fp4_format != "e2m1") r.fail("fp4_format", "expected e2m1, got '" + fp4_format + "'");
  if (!fp4_format.empty() && !fp8_format.empty())
    r.fail("fp4_format", "and fp8_format cannot be used together (Megatron-LM refuses the same)");
  if (int(bf16) + int(fp16) > 1) r.fail("bf16", "bf16 and fp16 are exclusive");
  // Megatron-LM without --bf16 / --fp16 / --fp8-format / --fp4-format trains in fp32, which is not modelled.
  if (r.has("bf16") && !bf16 && !fp16 && fp8_format.empty() && fp4_format.empty())
    r.fail("bf16", "false means fp32 training in Megatron-LM, which fabricsim does not model (give precision bf16, fp16, fp8 or fp4)");
  if (bf16 || fp16 || !fp8_format.empty() || !fp4_format.empty()) {
    std::string flag = !fp8_format.empty() ? "fp8" : !fp4_format.empty() ? "fp4" : bf16 ? "bf16" : "fp16";
    if (has_prec && c.precision != flag)
      r.fail("precision", "'" + c.precision + "' contradicts the Megatron flag that selects " + flag);
    c.precision = flag;
  }
  c.fp8_param_gather = r.boolean("fp8_param_gather", false);
  c.fp4_recipe = r.string("fp4_recipe", c.fp4_recipe);
  c.fp4_param_gather = r.boolean("fp4_param_gather", false);
  c.first_last_layers_bf16 = r.boolean("first_last_layers_bf16", false);
  c.num_layers_at_start_in_bf16 = r.integer("num_layers_at_start_in_bf16", 1, 0);
  c.num_layers_at_end_in_bf16 = r.integer("num_layers_at_end_in_bf16", 1, 0);
  c.cpu_offloading_num_layers = r.integer("cpu_offloading_num_layers", 0, 0);
  c.fine_grained_activation_offloading = r.boolean("fine_grained_activation_offloading", false);
  c.offload_modules = r.string("offload_modules", "");
  c.activation_offload_fraction = r.number("activation_offload_fraction", 1.0, 0.0);
  c.min_offloaded_tensor_size = r.integer("min_offloaded_tensor_size", c.min_offloaded_tensor_size, 0);
  c.fine_grained_offloading_max_inflight_offloads = r.integer("fine_grained_offloading_max_inflight_offloads", -1, -1);
  c.delta_offload_bytes_across_pp_ranks = r.integer("delta_offload_bytes_across_pp_ranks", 0, 0);
  // Megatron's --window-size, "(left, right)" or "left,right" (arguments.py tuple_type @d98e8a64).
  if (r.has("window_size")) {
    const std::string w = r.string("window_size", "");
    std::string t;
    for (char ch : w)
      if (ch != '(' && ch != ')' && ch != ' ') t += ch;
    const auto comma = t.find(',');
    auto integer = [&](const std::string& x) -> std::int64_t {
      std::size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(x, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (x.empty() || used != x.size() || v < -1)
        r.fail("window_size", "expected \"(left, right)\" with integers >= -1 (-1: unbounded), got '" + w + "'");
      return v;
    };
    if (comma == std::string::npos || t.find(',', comma + 1) != std::string::npos)
      r.fail("window_size", "expected \"(left, right)\" with integers >= -1 (-1: unbounded), got '" + w + "'");
    c.window_left = integer(t.substr(0, comma)), c.window_right = integer(t.substr(comma + 1));
  }
  c.window_attn_skip_freq = r.string("window_attn_skip_freq", c.window_attn_skip_freq);
  c.experimental_attention_variant = r.string("experimental_attention_variant", c.experimental_attention_variant);
  c.linear_attention_freq = r.string("linear_attention_freq", c.linear_attention_freq);
  c.linear_conv_kernel_dim = r.integer("linear_conv_kernel_dim", c.linear_conv_kernel_dim, 1);
  c.linear_key_head_dim = r.integer("linear_key_head_dim", c.linear_key_head_dim, 1);
  c.linear_value_head_dim = r.integer("linear_value_head_dim", c.linear_value_head_dim, 1);
  c.linear_num_key_heads = r.integer("linear_num_key_heads", c.linear_num_key_heads, 1);
  c.linear_num_value_heads = r.integer("linear_num_value_heads", c.linear_num_value_heads, 1);
  // Hybrid model (GptConfig::hybrid_layer_pattern). --hybrid-override-pattern is the deprecated name Megatron-LM
  // forwards to --hybrid-layer-pattern, refusing both at once (megatron/training/arguments.py:743-755 @d98e8a64); the
  // pattern sets num_layers (arguments.py:787-795); the ratios build a pattern over num_layers (pattern_from_ratios).
  if (r.has("hybrid_layer_pattern") && r.has("hybrid_override_pattern"))
    r.fail("hybrid_override_pattern", "cannot be given with hybrid_layer_pattern (Megatron-LM refuses both; the first is "
                                      "the deprecated name of the second)");
  c.hybrid_layer_pattern = r.string("hybrid_override_pattern", c.hybrid_layer_pattern);
  c.hybrid_layer_pattern = r.string("hybrid_layer_pattern", c.hybrid_layer_pattern);
  c.hybrid_attention_ratio = r.number("hybrid_attention_ratio", c.hybrid_attention_ratio);
  c.hybrid_mlp_ratio = r.number("hybrid_mlp_ratio", c.hybrid_mlp_ratio);
  if (c.hybrid_attention_ratio > 1.0 || c.hybrid_mlp_ratio > 1.0 || c.hybrid_attention_ratio + c.hybrid_mlp_ratio > 1.0)
    r.fail("hybrid_attention_ratio", "hybrid_attention_ratio and hybrid_mlp_ratio must be in [0, 1] with a sum <= 1");
  if (c.hybrid_attention_ratio > 0 || c.hybrid_mlp_ratio > 0) {
    if (r.has("hybrid_layer_pattern") || r.has("hybrid_override_pattern"))
      r.fail("hybrid_attention_ratio", "cannot be combined with hybrid_layer_pattern (Megatron's HybridModel refuses it)");
    c.hybrid_layer_pattern = gpt_detail::hybrid_pattern_from_ratios(c.num_layers, c.hybrid_attention_ratio, c.hybrid_mlp_ratio);
  }
  c.mamba_state_dim = r.integer("mamba_state_dim", c.mamba_state_dim, 1);
  c.mamba_head_dim = r.integer("mamba_head_dim", c.mamba_head_dim, 1);
  c.mamba_num_groups = r.integer("mamba_num_groups", c.mamba_num_groups, 1);
  c.mamba_num_heads = r.integer("mamba_num_heads", c.mamba_num_heads, r.has("mamba_num_heads") ? 1 : 0);
  if (c.hybrid()) c.num_layers = static_cast<std::int64_t>(c.hybrid_layers().size());
  c.attention_output_gate = r.boolean("attention_output_gate", c.attention_output_gate);
  c.gpt_j_residual = r.boolean("gpt_j_residual", c.gpt_j_residual);
  c.gpt_j_tied = r.boolean("gpt_j_tied", c.gpt_j_tied);
  c.use_precision_aware_optimizer = r.boolean("use_precision_aware_optimizer", false);
  c.optimizer = r.string("optimizer", c.optimizer);
  c.sgd_momentum = r.number("sgd_momentum", c.sgd_momentum, 0);
  c.main_grads_dtype = r.string("main_grads_dtype", c.main_grads_dtype);
  c.main_params_dtype = r.string("main_params_dtype", c.main_params_dtype);
  c.exp_avg_dtype = r.string("exp_avg_dtype", c.exp_avg_dtype);
  c.exp_avg_sq_dtype = r.string("exp_avg_sq_dtype", c.exp_avg_sq_dtype);
  c.optimizer_cpu_offload = r.boolean("optimizer_cpu_offload", false);
  c.optimizer_offload_fraction = r.number("optimizer_offload_fraction", c.optimizer_offload_fraction, 0);
  c.overlap_cpu_optimizer_d2h_h2d = r.boolean("overlap_cpu_optimizer_d2h_h2d", false);
  c.host_memory_bandwidth_per_gpu = r.bandwidth("host_memory_bandwidth_per_gpu", 0.0);
  c.offload_optimizer_states = r.boolean("offload_optimizer_states", false);
  c.chunked_optimizer_state_offload = r.boolean("chunked_optimizer_state_offload", false);
  // Megatron-LM's own bounds (optimizer_config.py:431-436 @d48bd6be), checked below with its words.
  c.optimizer_state_offload_chunk_size_mb =
      r.integer("optimizer_state_offload_chunk_size_mb", 0, std::numeric_limits<std::int64_t>::min());
  c.optimizer_state_offload_fraction = r.number("optimizer_state_offload_fraction", 1.0, -std::numeric_limits<double>::infinity());
  if (r.has("host_memory_per_gpu")) {
    // A size with its unit ("240GB", "223.5GiB", "240000000000B"): set by `fabricsim run` from the topology.
    const std::string v = r.string("host_memory_per_gpu", "");
    double bytes = 0;
    try {
      if (!v.empty() && v.find_first_not_of("0123456789.eE+-") != std::string::npos) bytes = static_cast<double>(parse_size(v, "host_memory_per_gpu"));
    } catch (const InputError&) {
    }
    if (!(bytes > 0)) r.fail("host_memory_per_gpu", "expected a size > 0 with its unit such as \"240GB\", got '" + v + "'");
    c.host_memory_per_gpu = bytes;
  }
  // Gradient reduction precision, one rule for every scenario. Megatron-LM turns fp32 gradient accumulation and
  // reduction on whenever the parameters are bf16 (megatron/training/arguments.py @d98e8a64, the `if args.bf16:`
  // block: accumulate_allreduce_grads_in_fp32 = True unless --grad-reduce-in-bf16; megatron/training/training.py
  // passes it on as DistributedDataParallelConfig.grad_reduce_in_fp32; the rule is already in
  // megatron/arguments.py @79a3bb6b of 2021) and leaves fp16 parameters' gradients in fp16. FP8 runs keep bf16
  // parameters (--bf16 with --fp8-format), so they reduce in fp32 too. torchtitan's FSDP2 default agrees
  // (torchtitan/config/configs.py @b5bcd76c: mixed_precision_reduce = "float32"). So the default follows the
  // parameter dtype; `grad_reduce_in_fp32` (DDP's name), `accumulate_allreduce_grads_in_fp32` (the training
  // argument) or `grad_reduce_in_bf16` (Megatron's opt-out flag) override it.
  {
    const bool fp16_params = fp16 || c.precision == "fp16";
    bool fp32 = !fp16_params;
    const char* set_by = nullptr;
    for (const char* k : {"grad_reduce_in_fp32", "accumulate_allreduce_grads_in_fp32"})
      if (r.has(k)) {
        const bool v = r.boolean(k, fp32);
        if (set_by && v != fp32) r.fail(k, std::string("contradicts ") + set_by);
        fp32 = v, set_by = k;
      }
    if (r.boolean("grad_reduce_in_bf16", false)) {
      if (set_by && fp32) r.fail("grad_reduce_in_bf16", std::string("contradicts ") + set_by + " true");
      if (fp16_params) r.fail("grad_reduce_in_bf16", "needs bf16 parameters (precision bf16 or fp8), not fp16");
      fp32 = false;
    }
    // The precision-aware optimizer's bf16 main gradients: Megatron-LM leaves accumulate_allreduce_grads_in_fp32
    // off for them and asserts "--main-grads-dtype can only be fp32 when --accumulate-allreduce-grads-in-fp32 is
    // set" (megatron/training/arguments.py @d98e8a64, the `if args.bf16:` block).
    if (c.main_grads_dtype == "bf16") {
      if (set_by && fp32) r.fail("main_grads_dtype", std::string("bf16 contradicts ") + set_by + " true (Megatron-LM asserts the same)");
      fp32 = false;
    }
    c.grad_reduce_in_fp32 = fp32;
  }
  c.fp8_recipe = r.string("fp8_recipe", c.fp8_recipe);
  c.attention_backend = r.string("attention_backend", "");
  c.flops_convention = r.string("flops_convention", "");
  c.gpus_per_host = r.integer("gpus_per_host", c.gpus_per_host, 1);
  c.gpus_per_nvlink_domain = r.integer("gpus_per_nvlink_domain", c.gpus_per_host, 1);
  read_moe_params(r, c.moe);
  // A hybrid pattern with '+' (MLA) layers turns multi_latent_attention on (megatron/training/arguments.py:918-923
  // @d98e8a64 infers it from the pattern).
  if (c.hybrid() && c.hybrid_layer_pattern.find('+') != std::string::npos) c.moe.multi_latent_attention = true;
  // and sets mtp_num_layers to its MTP depths (arguments.py:870-884; a differing value is refused in check_hybrid).
  if (c.hybrid() && c.moe.mtp_num_layers == 0) c.moe.mtp_num_layers = gpt_detail::hybrid_mtp_depths(c);
  // moe_router_padding_for_quantization's alignment, get_align_size_for_quantization (moe_utils.py @d98e8a64):
  // fp8 16, mxfp8 32 (get_fp8_align_size, megatron/core/fp8_utils.py), nvfp4 128 (get_fp4_align_size,
  // megatron/core/fp4_utils.py: the grouped NVFP4 quantisation's 128-token multiple).
  c.moe.moe_router_pad_multiple = c.fp4() ? 128 : c.fp8() ? (c.fp8_recipe == "mxfp8" ? 32 : 16) : 0;
  // Upper bounds, before any size is multiplied by another or sizes a table: the generator multiplies parallel
  // sizes, batch and sequence in 64-bit integers (a product that wraps to 0 and then divides crashed the process:
  // found by fuzzing, 2026-11-29), and sizes per-layer and per-expert tables. Each bound is far beyond any
  // cluster or model the generator is for (a million GPUs, 131,072 layers, 65,536 experts).
  constexpr std::int64_t kMaxRanks = std::int64_t{1} << 20;
  struct Bound {
    const char* key;
    std::int64_t value, max;
  };
  const Bound bounds[] = {
      {"tensor_model_parallel_size", c.tensor_model_parallel_size, kMaxRanks},
      {"pipeline_model_parallel_size", c.pipeline_model_parallel_size, kMaxRanks},
      {"context_parallel_size", c.context_parallel_size, kMaxRanks},
      {"world_size", c.world_size, kMaxRanks},
      {"expert_model_parallel_size", c.moe.expert_model_parallel_size, kMaxRanks},
      {"expert_tensor_parallel_size", c.moe.expert_tensor_parallel_size, kMaxRanks},
      {"gpus_per_host", c.gpus_per_host, kMaxRanks},
      {"gpus_per_nvlink_domain", c.gpus_per_nvlink_domain, kMaxRanks},
      {"micro_batch_size", c.micro_batch_size, kMaxRanks},
      {"global_batch_size", c.global_batch_size, std::int64_t{1} << 36},
      {"seq_length", c.seq_length, std::int64_t{1} << 23},
      {"num_layers", c.num_layers, std::int64_t{1} << 17},
      // (MTP depths are priced and traced one by one like decoder layers: 10^9 of them ran for minutes in a few
      // MB before any memory check; found probing the MoE path's bounds)
      {"mtp_num_layers", c.moe.mtp_num_layers, std::int64_t{1} << 17},
      {"hidden_size", c.hidden_size, std::int64_t{1} << 20},
      {"ffn_hidden_size", c.ffn_hidden_size, std::int64_t{1} << 22},
      {"num_attention_heads", c.num_attention_heads, std::int64_t{1} << 16},
      {"padded_vocab_size", c.padded_vocab_size, std::int64_t{1} << 24},
      {"num_experts", c.moe.num_experts, std::int64_t{1} << 16},
      {"moe_ffn_hidden_size", c.moe.moe_ffn_hidden_size, std::int64_t{1} << 22}};
  for (const Bound& b : bounds)
    if (b.value > b.max)
      r.bad_value(b.key, "expected at most " + std::to_string(b.max) + ", got " + std::to_string(b.value));
  // Per-layer, per-expert tables (router loads, expert token counts): their entries bounded too (DeepSeek-V3 has
  // 61 x 256, Kimi K2 61 x 384).
  constexpr std::int64_t kMaxLayerExperts = std::int64_t{1} << 24;
  if (c.num_layers * c.moe.num_experts > kMaxLayerExperts) {
    std::string what = "num_layers x num_experts is ";
    what.append(std::to_string(c.num_layers * c.moe.num_experts)).append(", expected at most ");
    what.append(std::to_string(kMaxLayerExperts)).append(" (a per-layer, per-expert table)");
    r.bad_value("num_experts", what);
  }
  return c;
}
}  // namespace

std::set<std::string> gpt_param_names() {
  const ParamMap none;
  ParamReader r(none, "gpt");
  read_gpt_config(r, "gpt");
  return r.names();
}

void check_gpt_params_read(const ParamMap& p, const std::string& where) {
  ParamReader r(p, where);
  read_gpt_config(r, where);
  r.finish();
}

namespace {
GptConfig checked_gpt_config(const ParamMap& p, const std::string& where) {
  ParamReader r(p, where);
  GptConfig c = read_gpt_config(r, where);
  r.finish();
  auto fail = [&](const std::string& k, const std::string& w) { r.fail(k, w); };
  auto one_of = [&](const std::string& k, const std::string& v, std::initializer_list<const char*> ok) {
    std::string list;
    for (const char* o : ok) {
      if (v == o) return;
      list += (list.empty() ? "" : ", ") + std::string(o);
    }
    fail(k, "expected one of " + list + ", got '" + v + "'");
  };
  if (!c.pipeline_layout.empty()) check_pipeline_layout(c, fail);
  one_of("recompute_granularity", c.recompute_granularity, {"full", "selective", "none"});
  one_of("recompute_method", c.recompute_method, {"uniform", "block"});
  one_of("precision", c.precision, {"fp16", "bf16", "fp8", "fp4"});
  one_of("fp8_recipe", c.fp8_recipe, {"delayed", "tensorwise", "rowwise", "mxfp8", "blockwise"});
  // Megatron's fp4_recipe: nvfp4 (Transformer Engine's NVFP4BlockScaling) or custom (a user quantizer factory,
  // whose kernels are unknown: not modelled).
  if (c.fp4() && c.fp4_recipe == "custom")
    fail("fp4_recipe", "custom runs a user-supplied quantizer factory, which fabricsim cannot price (modelled: nvfp4)");
  one_of("fp4_recipe", c.fp4_recipe, {"nvfp4", "custom"});
  one_of("normalization", c.normalization, {"LayerNorm", "RMSNorm"});
  // megatron/training/argument_utils.py @d98e8a64 (core_transformer_config_from_args): "if args.squared_relu:
  // assert not args.swiglu".
  if (c.squared_relu && c.swiglu) fail("squared_relu", "is the activation of the non-gated MLP; Megatron-LM refuses it with swiglu");
  one_of("position_embedding_type", c.position_embedding_type, {"learned_absolute", "rope", "none"});
  one_of("cp_comm_type", c.cp_comm_type, {"p2p", "all_gather", "a2a", "a2a+p2p"});
  if (!c.cp_comm_types.empty() && c.context_parallel_size > 1) {
    for (const auto& x : c.cp_comm_types) one_of("cp_comm_type", x, {"p2p", "all_gather", "a2a", "a2a+p2p"});
    // TransformerConfig.__post_init__ (transformer_config.py:3103-3110 @d98e8a64): one entry per layer.
    if (static_cast<std::int64_t>(c.cp_comm_types.size()) != c.num_layers)
      fail("cp_comm_type", "lists " + std::to_string(c.cp_comm_types.size()) + " types; a list needs one per decoder layer (" +
                               std::to_string(c.num_layers) + "), as Megatron-LM asserts");
    if (std::find(c.cp_comm_types.begin(), c.cp_comm_types.end(), "a2a+p2p") != c.cp_comm_types.end() ||
        c.has_bf16_layers() || c.attention_backend == "unfused" || c.window_left >= 0 || c.dualpipe())
      fail("cp_comm_type", "a list of different types per layer is modelled for p2p, all_gather and a2a with fused "
                           "attention (not a2a+p2p, first_last_layers_bf16, window_size or DualPipe)");
  }
  // Hierarchical context parallelism: megatron/training/arguments.py validate_args at NVIDIA/Megatron-LM@d98e8a64
  // asserts the sizes' product is context_parallel_size and that a2a+p2p has them; Transformer Engine's
  // attn_forward_func_with_cp (NVIDIA/TransformerEngine@d0067d0da) asserts cp_group = [a2a group, p2p group],
  // and flash_attn_a2a_communicate splits the heads into inner-size parts (a view of h into cp, h // cp).
  {
    const auto& hs = c.hierarchical_context_parallel_sizes;
    std::int64_t prod = 1;
    for (auto v : hs) prod *= v;
    if (!hs.empty() && prod != c.context_parallel_size)
      fail("hierarchical_context_parallel_sizes", "their product (" + std::to_string(prod) +
                                                      ") must equal context_parallel_size (" +
                                                      std::to_string(c.context_parallel_size) + "), as Megatron-LM asserts");
    if (c.cp_comm_type == "a2a+p2p" && c.context_parallel_size > 1) {
      if (hs.empty())
        fail("cp_comm_type", "a2a+p2p needs hierarchical_context_parallel_sizes (Megatron-LM asserts the same)");
      if (hs.size() != 2)
        fail("hierarchical_context_parallel_sizes", "a2a+p2p takes two levels, the all-to-all group's size then the "
                                                    "ring's (Transformer Engine asserts cp_group = [a2a, p2p]); got " +
                                                        std::to_string(hs.size()));
      const std::int64_t n = hs[0], a_t = c.num_attention_heads / c.tensor_model_parallel_size,
                         g_t = std::max<std::int64_t>(1, c.query_groups() / c.tensor_model_parallel_size);
      if (c.cp_impl() == "a2a+p2p" && (a_t % n || g_t % n))
        fail("hierarchical_context_parallel_sizes",
             "the all-to-all group's size (" + std::to_string(n) + ") must divide the attention heads (" +
                 std::to_string(a_t) + ") and key/value heads (" + std::to_string(g_t) +
                 ") per tensor-parallel rank: Transformer Engine's all-to-all splits them");
    }
  }
  // use_sharp: megatron/core/parallel_state.py at NVIDIA/Megatron-LM@d98e8a64 asserts sharp_enabled_group is
  // dp or dp_replica and only with use_sharp.
  if (!c.sharp_enabled_group.empty()) {
    if (!c.use_sharp) fail("sharp_enabled_group", "is only valid with use_sharp (Megatron-LM asserts the same)");
    if (c.sharp_enabled_group == "dp_replica")
      fail("sharp_enabled_group", "dp_replica (SHARP for the inter-instance group of num_distributed_optimizer_instances) "
                                  "is not modelled; dp is");
    one_of("sharp_enabled_group", c.sharp_enabled_group, {"dp", "dp_replica"});
  }
  if (c.use_sharp && c.num_distributed_optimizer_instances > 1)
    fail("use_sharp", "with num_distributed_optimizer_instances > 1 is not modelled (Megatron's SHARP group is the whole "
                      "data-parallel x context-parallel group, whose gradients then travel over the partial groups)");
  one_of("data_parallel_sharding_strategy", c.data_parallel_sharding_strategy,
         {"no_shard", "optim", "optim_grads", "optim_grads_params"});
  if (c.use_megatron_fsdp && c.use_torch_fsdp2)
    fail("use_megatron_fsdp", "and use_torch_fsdp2 are two different FSDP wrappers; set one");
  // Megatron-FSDP's no_shard keeps the main weights and the optimizer state whole on every rank
  // (param_and_grad_buffer.py:2330-2334 @d98e8a64: nothing is distributed); Megatron-LM turns
  // use_distributed_optimizer on for Megatron-FSDP v1 all the same (arguments.py:1124-1135), without effect here.
  if (c.use_megatron_fsdp && c.data_parallel_sharding_strategy == "no_shard" && c.use_distributed_optimizer)
    fail("use_distributed_optimizer", "shards nothing under use_megatron_fsdp with data_parallel_sharding_strategy "
                                      "no_shard (Megatron-FSDP keeps the optimizer state whole); set it false");
  // The precision-aware optimizer (megatron/training/arguments.py @d98e8a64 choices; Megatron-Core's
  // OptimizerConfig.__post_init__: "main_grads_dtype can only be fp32 when not using precision-aware optimizer",
  // the same for the other three; megatron/core/optimizer/__init__.py: "--use-precision-aware-optimizer only
  // supported with distributed optimizer").
  one_of("main_grads_dtype", c.main_grads_dtype, {"fp32", "bf16"});
  one_of("main_params_dtype", c.main_params_dtype, {"fp32", "fp16"});
  one_of("exp_avg_dtype", c.exp_avg_dtype, {"fp32", "fp16", "bf16", "fp8"});
  one_of("exp_avg_sq_dtype", c.exp_avg_sq_dtype, {"fp32", "fp16", "bf16", "fp8"});
  if (!c.use_precision_aware_optimizer)
    for (const auto& [k, v] : {std::pair<const char*, const std::string*>{"main_grads_dtype", &c.main_grads_dtype},
                               {"main_params_dtype", &c.main_params_dtype},
                               {"exp_avg_dtype", &c.exp_avg_dtype},
                               {"exp_avg_sq_dtype", &c.exp_avg_sq_dtype}})
      if (*v != "fp32") fail(k, "'" + *v + "' needs use_precision_aware_optimizer (Megatron-Core asserts the same)");
  one_of("optimizer", c.optimizer, {"adam", "sgd", "lamb"});
  if (c.optimizer != "adam" && c.use_precision_aware_optimizer)
    fail("optimizer", c.optimizer + " with use_precision_aware_optimizer is not modelled (its dtypes are Transformer "
                      "Engine's FusedAdam state)");
  // The parallel block: the tied form (one LayerNorm, MegaScale's) on dense Megatron / Transformer Engine layers.
  if (c.gpt_j_tied && !c.gpt_j_residual) fail("gpt_j_tied", "needs gpt_j_residual (GPT-NeoX ties the norms of the parallel block)");
  if (c.gpt_j_residual) {
    if (!c.gpt_j_tied)
      fail("gpt_j_residual", "is modelled with gpt_j_tied true (one LayerNorm feeding attention and MLP, MegaScale's "
                             "block); GPT-NeoX's untied form (two norms) is not modelled");
    if (c.moe.num_experts > 0 || c.gdn() || c.moe.multi_latent_attention || !c.torch_compile.empty() ||
        c.use_torch_fsdp2 || c.moe.mtp_num_layers > 0 || c.symm_mem_tp() || c.hybrid())
      fail("gpt_j_residual", "is modelled on dense Megatron-LM layers only (not with MoE, Gated DeltaNet, hybrid_layer_pattern, "
                             "multi_latent_attention, torch_compile, use_torch_fsdp2, MTP layers or "
                             "tp_comm_overlap_impl symmetric_memory)");
  }
  if (c.use_precision_aware_optimizer) {
    if (c.use_torch_fsdp2)
      fail("use_precision_aware_optimizer", "is Megatron-Core's distributed optimizer with Transformer Engine's FusedAdam; "
                                            "it is not modelled with use_torch_fsdp2");
    if (!c.use_distributed_optimizer)
      fail("use_precision_aware_optimizer", "needs use_distributed_optimizer (Megatron-Core raises the same)");
  }
  // Optimizer CPU offload (HybridDeviceOptimizer). Megatron-LM's rules at NVIDIA/Megatron-LM@d98e8a64:
  // megatron/training/arguments.py:1884-1888 asserts use_precision_aware_optimizer ("the hybrid device optimizer
  // reuses the code path of this flag"), which needs the distributed optimizer (megatron/core/optimizer/
  // __init__.py:1057-1060) and adam (optimizer_config.py:433-436); arguments.py:1889-1892 allows fp8_param_gather
  // only with fp8_recipe delayed; AdamW mode (decoupled_weight_decay, __init__.py:510-512) is OptimizerConfig's
  // default and no command-line flag turns it off.
  if (c.optimizer_offload_fraction > 1.0)
    fail("optimizer_offload_fraction", "must be in [0, 1] (the share of the optimizer's shard on the host), got " +
                                           std::to_string(c.optimizer_offload_fraction));
  if (c.optimizer_cpu_offload) {
    if (!c.use_precision_aware_optimizer)
      fail("optimizer_cpu_offload", "needs use_precision_aware_optimizer (Megatron-LM asserts it: the hybrid device "
                                    "optimizer reuses that code path; megatron/training/arguments.py:1884-1888 @d98e8a64)");
    if (c.fp8_param_gather && c.fp8_recipe != "delayed")
      fail("optimizer_cpu_offload", "with fp8_param_gather needs fp8_recipe delayed (Megatron-LM asserts it: "
                                    "megatron/training/arguments.py:1889-1892 @d98e8a64)");
    if (c.fp8_param_gather || c.fp4_param_gather)
      fail("optimizer_cpu_offload", "with FP8 / FP4 parameters (fp8_param_gather, fp4_param_gather) is not modelled");
    if (c.fsdp())
      fail("optimizer_cpu_offload", "is modelled with the distributed optimizer, not with FSDP (Megatron-Core's "
                                    "FSDP v2 optimizer refuses it: megatron/core/optimizer/fully_sharded_optimizer.py:79-80)");
  } else {
    // Read by Megatron only with the offload; given alone they change nothing, which a scenario should not claim.
    for (const char* k : {"optimizer_offload_fraction", "overlap_cpu_optimizer_d2h_h2d", "host_memory_bandwidth_per_gpu"})
      if (p.count(k)) fail(k, "needs optimizer_cpu_offload");
  }
  // The chunked optimizer-state offload (chunked_optimizer_state_offload, or its deprecated spelling
  // offload_optimizer_states): Megatron-LM's rules at NVIDIA/Megatron-LM dev @d48bd6be (megatron/core/optimizer/
  // optimizer_config.py OptimizerConfig.__post_init__: the chunk size and fraction bounds, lines 431-436; Adam only
  // for the deprecated alias, 439-443, Adam or Muon otherwise, 444-448; exclusive with optimizer_cpu_offload,
  // 450-452; with the precision-aware optimizer fp32 master weights and fp32 / bf16 moments, 457-470; Adam needs the
  // distributed optimizer, 481-487; megatron/training/arguments.py:2052-2054 refuses Megatron-FSDP), as at
  // core_dev_r0.16.0 @bfa1d316 (arguments.py:1316-1319: distributed optimizer, adam, no Megatron-FSDP).
  {
    const bool on = c.chunked_optimizer_state_offload || c.offload_optimizer_states;
    if (c.optimizer_state_offload_chunk_size_mb < 0)
      fail("optimizer_state_offload_chunk_size_mb", "must be non-negative, got " + std::to_string(c.optimizer_state_offload_chunk_size_mb) +
                                                        " (Megatron-LM: megatron/core/optimizer/optimizer_config.py:431-433 @d48bd6be)");
    if (!(c.optimizer_state_offload_fraction >= 0.0 && c.optimizer_state_offload_fraction <= 1.0))
      fail("optimizer_state_offload_fraction", "must be in [0.0, 1.0], got " + p.at("optimizer_state_offload_fraction") +
                                                   " (Megatron-LM: megatron/core/optimizer/optimizer_config.py:434-436 @d48bd6be)");
    // Read by Megatron only with the offload; given alone they change nothing, which a scenario should not claim.
    if (!on)
      for (const char* o : {"optimizer_state_offload_chunk_size_mb", "optimizer_state_offload_fraction"})
        if (p.count(o)) fail(o, "needs chunked_optimizer_state_offload");
  }
  if (c.state_offload()) {
    const char* k = c.chunked_optimizer_state_offload ? "chunked_optimizer_state_offload" : "offload_optimizer_states";
    if (!c.chunked_optimizer_state_offload && c.optimizer != "adam")
      fail(k, "needs optimizer adam (Megatron-LM: \"the deprecated --offload-optimizer-states alias currently supports "
              "only Adam\", megatron/core/optimizer/optimizer_config.py:439-443 @d48bd6be)");
    if (c.optimizer != "adam")
      fail(k, "needs optimizer adam (Megatron-LM: \"chunked optimizer state offload currently supports Adam and Muon\", "
              "megatron/core/optimizer/optimizer_config.py:444-448 @d48bd6be; Muon is not modelled)");
    if (c.optimizer_cpu_offload)
      fail(k, "cannot be combined with optimizer_cpu_offload (Megatron-LM: \"mutually exclusive\", "
              "megatron/core/optimizer/optimizer_config.py:450-452 @d48bd6be)");
    if (!c.megatron_ddp())
      fail(k, "does not support FSDP (Megatron-LM refuses Megatron-FSDP, megatron/training/arguments.py:2052-2054 "
              "@d48bd6be; it offloads the distributed optimizer's state)");
    if (!c.use_distributed_optimizer)
      fail(k, "needs use_distributed_optimizer (Megatron-LM: \"Adam optimizer state offload requires "
              "use_distributed_optimizer\", megatron/core/optimizer/optimizer_config.py:485-487 @d48bd6be)");
    if (c.use_precision_aware_optimizer) {
      if (c.main_params_dtype != "fp32")
        fail(k, "with use_precision_aware_optimizer needs main_params_dtype fp32 (megatron/core/optimizer/"
                "optimizer_config.py:457-461 @d48bd6be)");
      for (const auto& [key, v] : {std::pair<const char*, const std::string&>{"exp_avg_dtype", c.exp_avg_dtype},
                                   {"exp_avg_sq_dtype", c.exp_avg_sq_dtype}})
        if (v != "fp32" && v != "bf16")
          fail(k, std::string("with use_precision_aware_optimizer needs ") + key + " fp32 or bf16, got " + v +
                      " (megatron/core/optimizer/optimizer_config.py:462-470 @d48bd6be)");
    }
    // overlap_param_gather_with_optimizer_step splits the step per model chunk (one distributed optimizer each):
    // the chunked pipeline over those optimizers is not modelled.
    if (c.overlap_param_gather_with_optimizer_step)
      fail(k, "with overlap_param_gather_with_optimizer_step is not modelled");
  }
  if (p.count("host_memory_bandwidth_per_gpu")) {
    const std::string& v = p.at("host_memory_bandwidth_per_gpu");
    if (!v.empty() && (std::isdigit(static_cast<unsigned char>(v.back())) || v.back() == '.'))
      fail("host_memory_bandwidth_per_gpu", "expected a bandwidth with its unit such as \"300GB/s\", got '" + v + "'");
  }
  // Sliding-window attention: a causal decoder looks back `left` tokens; the right window of a causal mask is 0
  // (-1 accepted: nothing after the query is visible either way). Priced for flash / fused attention without
  // context parallelism (gpt_kernels.cpp attention_ring).
  if (c.window_left >= 0 || !c.window_attn_skip_freq.empty()) {
    if (c.window_left < 0 && c.window_right < 0 && !c.window_attn_skip_freq.empty())
      fail("window_attn_skip_freq", "needs window_size (Megatron-LM uses it only with a window)");
    if (c.window_right > 0)
      fail("window_size", "the right window of a causal decoder must be 0 (or -1), got " + std::to_string(c.window_right));
    if (c.attention_backend == "unfused") fail("window_size", "needs flash or fused attention");
    if (c.context_parallel_size > 1) fail("window_size", "is not modelled with context_parallel_size > 1");
    if (c.moe.multi_latent_attention) fail("window_size", "is not modelled with multi_latent_attention");
    c.window_layers();  // checks window_attn_skip_freq
  }
  // Gated DeltaNet layers: Megatron-Core's checks (TransformerConfig.__post_init__ at NVIDIA/Megatron-LM@d98e8a64:
  // linear_attention_freq must be set, value heads a multiple of key heads, both multiples of TP x CP); "gdn2" and
  // "dsa" (the other variants) have no kernels here. Under context parallelism a GDN layer exchanges its in_proj
  // output and its norm's output by all-to-all (a2a_cp_to_hp / a2a_hp_to_cp, megatron/core/ssm/gated_delta_net/;
  // gpt_kernels.cpp and gpt_trace.cpp).
  // A hybrid model's Gated DeltaNet layers are its pattern's 'G' symbols, with the same shape checks (Megatron-Core
  // builds them from the same TransformerConfig); linear_attention_freq is unused there.
  const bool hybrid_gdn = c.hybrid() && c.hybrid_layers().find('G') != std::string::npos;
  if (c.gdn() && c.hybrid())
    fail("experimental_attention_variant", "cannot be combined with hybrid_layer_pattern: its 'G' symbols place the "
                                           "Gated DeltaNet layers (Megatron's gdn2 variant of them is not modelled)");
  if (c.hybrid() && !c.linear_attention_freq.empty())
    fail("linear_attention_freq", "is not read by hybrid models: the 'G' symbols of hybrid_layer_pattern place the "
                                  "Gated DeltaNet layers");
  if (c.gdn()) {
    const std::string& v = c.experimental_attention_variant;
    if (v != "gated_delta_net" && v != "gdn")
      fail("experimental_attention_variant", "expected gated_delta_net or gdn (Gated DeltaNet); '" + v +
                                                 "' (Megatron's gdn2 / dsa) is not modelled");
    if (c.linear_attention_freq.empty())
      fail("linear_attention_freq", "must be set with experimental_attention_variant " + v +
                                        " (Megatron-Core asserts the same)");
    if (c.attention_backend == "unfused" || !c.torch_compile.empty() || c.moe.multi_latent_attention ||
        c.window_left >= 0 || !c.selective_ac_option.empty())
      fail("experimental_attention_variant", "Gated DeltaNet layers are modelled with Megatron-Core's fused "
                                             "attention layers only (not unfused attention, torch_compile, "
                                             "multi_latent_attention, window_size or selective_ac_option)");
    c.gdn_layers();  // checks linear_attention_freq
  } else if (!c.linear_attention_freq.empty()) {
    fail("linear_attention_freq", "needs experimental_attention_variant (gated_delta_net)");
  }
  if (c.gdn() || hybrid_gdn) {
    if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
      fail("linear_num_value_heads", "must be a multiple of linear_num_key_heads (" +
                                         std::to_string(c.linear_num_key_heads) + "), got " +
                                         std::to_string(c.linear_num_value_heads));
    const std::int64_t tc = c.tensor_model_parallel_size * c.context_parallel_size;
    if (c.linear_num_key_heads % tc != 0 || c.linear_num_value_heads % tc != 0)
      fail("linear_num_key_heads", "linear_num_key_heads and linear_num_value_heads must be multiples of "
                                   "tensor_model_parallel_size x context_parallel_size (" + std::to_string(tc) + ")");
  }
  if (c.hybrid()) gpt_detail::check_hybrid(c, fail);
  if (c.attention_output_gate && (c.moe.multi_latent_attention || c.attention_backend == "unfused" ||
                                  !c.torch_compile.empty()))
    fail("attention_output_gate", "is modelled for Megatron-Core's fused GQA / MHA attention only");
  // Activation offloading: Megatron-Core's TransformerConfig.__post_init__ @d98e8a64 ("CPU offloading can be done
  // only for layers less than num_layers", "no support for Pipeline parallelism with CPU offloading", "CPU
  // offloading does not work when activation recomputation is enabled").
  if (c.cpu_offloading_num_layers > 0) {
    if (c.cpu_offloading_num_layers >= c.num_layers)
      fail("cpu_offloading_num_layers", "must be less than num_layers (" + std::to_string(c.num_layers) + ")");
    if (c.pipeline_model_parallel_size > 1)
      fail("cpu_offloading_num_layers", "needs pipeline_model_parallel_size 1 (Megatron-Core refuses pipeline parallelism with CPU offloading)");
    if (c.recompute_granularity != "none")
      fail("cpu_offloading_num_layers", "needs recompute_granularity none (Megatron-Core refuses it with activation recomputation)");
    if (c.use_torch_fsdp2)
      fail("cpu_offloading_num_layers", "is Megatron-Core's Transformer Engine offloading; it is not modelled with use_torch_fsdp2");
  }
  // Fine-grained activation offloading: Megatron-Core's refusals, TransformerConfig.__post_init__
  // (megatron/core/transformer/transformer_config.py:2127-2195 at NVIDIA/Megatron-LM@d98e8a64), with its reasons.
  if (c.fine_grained_activation_offloading) {
    const char* k = "offload_modules";
    if (c.cpu_offloading_num_layers > 0)
      fail("fine_grained_activation_offloading", "cannot be enabled with cpu_offloading_num_layers (transformer_config.py:2128)");
    const auto mods = recompute_module_list(c.offload_modules);
    if (mods.empty()) fail(k, "expected at least one module name with fine_grained_activation_offloading (transformer_config.py:2131)");
    for (const auto& m : mods) {
      if (m != "core_attn" && m != "attn_proj" && m != "expert_fc1" && m != "fused_group_mlp" && m != "moe_act" &&
          m != "attn_norm" && m != "mlp_norm" && m != "qkv_linear" && m != "gdp_qkv")
        fail(k, "expected core_attn, attn_proj, expert_fc1, fused_group_mlp, moe_act, attn_norm, mlp_norm, qkv_linear or "
                "gdp_qkv, got '" + m + "' (transformer_config.py:2132-2147)");
      // fused_group_mlp needs use_transformer_engine_op_fuser (transformer_config.py:2186-2188) and gdp_qkv
      // GatedDeltaProduct layers, neither of which the gpt generator has.
      if (m == "fused_group_mlp" || m == "gdp_qkv")
        fail(k, "'" + m + "' offloads a module fabricsim does not price (" +
                    (m == "gdp_qkv" ? "GatedDeltaProduct layers" : "Transformer Engine's op fuser, use_transformer_engine_op_fuser") + ")");
      if ((m == "expert_fc1" || m == "moe_act") && !c.moe.enabled()) fail(k, "'" + m + "' needs num_experts");
      if ((m == "core_attn" || m == "attn_proj" || m == "qkv_linear") && (c.moe.multi_latent_attention || c.gdn()))
        fail(k, "'" + m + "' is modelled for GQA / MHA attention layers only (not multi_latent_attention or Gated DeltaNet)");
    }
    if (c.offloads("attn_proj") && !c.offloads("core_attn"))
      fail(k, "attn_proj cannot be offloaded without core_attn: its input is core_attn's output, which core_attn's "
              "backward needs (transformer_config.py:2148-2153)");
    if (c.recomputes("moe") && (c.offloads("expert_fc1") || c.offloads("moe_act")))
      fail(k, "cannot offload expert_fc1 / moe_act while recompute_modules recomputes the entire MoE layer "
              "(transformer_config.py:2165-2177)");
    if (c.activation_offload_fraction > 1.0)
      fail("activation_offload_fraction", "must be in range [0, 1] (transformer_config.py:2181-2183)");
    if (c.recompute_granularity == "full")
      fail("fine_grained_activation_offloading", "is not modelled with recompute_granularity full (a checkpointed "
                                                 "layer saves only its input; nothing inside it is left to offload)");
    if (c.use_torch_fsdp2 || c.attention_backend == "unfused" || !c.selective_ac_option.empty())
      fail("fine_grained_activation_offloading", "is modelled for Megatron-Core's flash / fused attention layers only "
                                                 "(not use_torch_fsdp2, unfused attention or selective_ac_option)");
    if (c.hybrid())
      fail("fine_grained_activation_offloading", "is not modelled with hybrid_layer_pattern (the offload groups of "
                                                 "Mamba sublayers are not priced)");
  } else if (!c.offload_modules.empty() || c.activation_offload_fraction != 1.0 ||
             c.min_offloaded_tensor_size != 1024 * 1024 || c.fine_grained_offloading_max_inflight_offloads != -1 ||
             c.delta_offload_bytes_across_pp_ranks != 0) {
    fail("offload_modules", "offload_modules, activation_offload_fraction, min_offloaded_tensor_size, "
                            "fine_grained_offloading_max_inflight_offloads and delta_offload_bytes_across_pp_ranks "
                            "need fine_grained_activation_offloading true");
  }
  // FP8 parameters (megatron/training/arguments.py @d98e8a64: "--fp8-param-gather only supported with distributed
  // optimizer, torch fsdp2, megatron fsdp, or inference mode"; under torch FSDP2 it turns the flag off with
  // Transformer Engine >= 2.0).
  if (c.fp8_param_gather) {
    if (!c.fp8()) fail("fp8_param_gather", "needs precision fp8 (it keeps the linear weights as FP8 tensors)");
    if (c.fp8_recipe == "rowwise")
      fail("fp8_param_gather", "is Transformer Engine's FP8 parameters; fp8_recipe rowwise is torchao's (no TE recipe)");
    if (c.use_torch_fsdp2)
      fail("fp8_param_gather", "is turned off by Megatron-LM under use_torch_fsdp2 (Transformer Engine >= 2.0); torchao's "
                               "float8 all-gather is enable_fsdp_float8_all_gather");
    if (c.fsdp()) fail("fp8_param_gather", "is not modelled with Megatron FSDP (modelled: the distributed optimizer)");
    if (!c.use_distributed_optimizer) fail("fp8_param_gather", "needs use_distributed_optimizer (Megatron-LM asserts the same)");
    // MoE: the experts' FP8 weights gathered over the expert data-parallel group (gpt_trace.cpp); MLA's five
    // linears are FP8 parameters like the other layers' (gpt_trace.cpp quantised_linears_per_layer).
  }
  // FP4 parameters (megatron/training/arguments.py @d98e8a64: "--fp4-param-gather must be used together with
  // --fp4-format"; the same buffer path as fp8_param_gather, modelled with the distributed optimizer).
  if (c.fp4_param_gather) {
    if (!c.fp4()) fail("fp4_param_gather", "needs precision fp4 (fp4_format e2m1; Megatron-LM asserts the same)");
    if (c.fsdp()) fail("fp4_param_gather", "is not modelled with FSDP (modelled: the distributed optimizer)");
    if (!c.use_distributed_optimizer) fail("fp4_param_gather", "needs use_distributed_optimizer (as fp8_param_gather)");
    if (c.moe.multi_latent_attention)
      fail("fp4_param_gather", "is not modelled with multi_latent_attention (MLA's NVFP4 weights are not priced)");
  }
  // FP4 is Transformer Engine's NVFP4 recipe under Megatron-Core: not torchao's, not torch FSDP2's float8.
  if (c.fp4() && (c.use_torch_fsdp2 || !c.torch_compile.empty()))
    fail("precision", "fp4 is Transformer Engine's NVFP4 recipe under Megatron-Core; it is not modelled with the torch "
                      "runtime (use_torch_fsdp2 / torch_compile)");
  // Megatron-LM @d98e8a64 registers Transformer Engine's userbuffers in the bf16 mode alone under --fp4-format
  // (megatron/training/initialize.py: UserBufferQuantizationMode.FP8 if args.fp8 else NONE), and an NVFP4 layer asks
  // for the quantised mode (get_ub(name, use_fp8=True), transformer_engine/pytorch/module/base.py at @d0067d0da,
  // raises "not registered").
  if (c.fp4() && c.tp_comm_overlap && c.tensor_model_parallel_size > 1)
    fail("tp_comm_overlap", "with precision fp4 fails in Megatron-LM (its userbuffers are registered for bf16 only "
                            "under --fp4-format; Transformer Engine's NVFP4 layers ask for the quantised ones)");
  // MoE under NVFP4: the grouped expert GEMMs, the shared expert and the latent projections at the FP4 rate with
  // the NVFP4 quantisation passes (gpt_kernels.cpp moe_costs). MLA's NVFP4 projections are not modelled.
  if (c.fp4() && c.moe.multi_latent_attention)
    fail("precision", "fp4 is not modelled with multi_latent_attention (MLA's NVFP4 projections are not priced)");
  // first_last_layers_bf16 (megatron/core/transformer/transformer_config.py __post_init__ @d98e8a64): refused with
  // FP8 delayed scaling ("Delayed scaling does not support first / last layer in BF16"); under FP8 each count must
  // lie in [0, num_layers / pipeline_model_parallel_size]. Without FP8 / FP4 the flags change nothing (as in
  // Megatron, whose quantisation contexts are the only readers).
  if (c.first_last_layers_bf16) {
    if (c.fp8() && c.fp8_recipe == "delayed")
      fail("first_last_layers_bf16", "is refused by Megatron-LM with fp8_recipe delayed (\"Delayed scaling does not "
                                     "support first / last layer in BF16\"); use tensorwise, mxfp8 or blockwise");
    if (c.fp8() && c.fp8_recipe == "rowwise")
      fail("first_last_layers_bf16", "is Megatron-Core's; fp8_recipe rowwise is torchao's (no Megatron recipe)");
    if (c.use_torch_fsdp2 || !c.torch_compile.empty())
      fail("first_last_layers_bf16", "is Megatron-Core's; it is not modelled with the torch runtime (use_torch_fsdp2 / "
                                     "torch_compile)");
    // MoE: the bf16 layers' MoE blocks run bf16 too (moe_costs per layer, gpt_kernels.cpp); MLA's are not priced.
    if (c.moe.multi_latent_attention)
      fail("first_last_layers_bf16", "is not modelled with multi_latent_attention (bf16 MLA layers in an FP8 run are not priced)");
    // (Megatron-LM bounds the counts under FP8 only; under FP4 any count is taken, layers past the ends simply all
    // bf16.)
    const std::int64_t per_stage = c.fp8() ? c.num_layers / c.pipeline_model_parallel_size : c.num_layers;
    for (const auto& [key, n] : {std::pair<const char*, std::int64_t>{"num_layers_at_start_in_bf16", c.num_layers_at_start_in_bf16},
                                 {"num_layers_at_end_in_bf16", c.num_layers_at_end_in_bf16}})
      if (n > per_stage)
        fail(key, "(" + std::to_string(n) + ") must be between 0 and " +
                      (c.fp8() ? "the layers per pipeline stage (" + std::to_string(per_stage) + "; Megatron-LM checks the same)"
                               : "num_layers (" + std::to_string(per_stage) + ")"));
  }
  const auto& gpu = models::gpu_spec(c.gpu, where + " gpu");
  c.gpu = gpu.name;
  c.attention_backend = gpt_detail::resolved_attention_backend(c.attention_backend, gpu.name);
  one_of("attention_backend", c.attention_backend, {"flash", "fused", "unfused"});
  if ((c.gdn() || c.attention_output_gate) && c.attention_backend == "unfused")
    fail(c.gdn() ? "experimental_attention_variant" : "attention_output_gate",
         "needs flash or fused attention (attention_backend unfused, the default on " + c.gpu +
             ", prices the SC'21 unfused layer)");
  // FP4 GEMMs need Blackwell's FP4 tensor cores (models/gpu.cpp peak_fp4_flops: b200, gb200, b300, gb300).
  if (c.fp4() && gpu.peak_fp4_flops <= 0)
    fail("precision", "fp4 needs FP4 tensor cores; " + gpu.name + " has none (Blackwell GPUs do: b200, gb200, b300, gb300)");
  if (c.fp4() && c.attention_backend == "unfused")
    fail("precision", "fp4 is Transformer Engine's recipe; attention_backend unfused is the SC'21-era path (no TE)");
  if (c.fp8()) {
    if (gpu.peak_fp8_flops <= 0)
      fail("precision", "fp8 needs FP8 tensor cores; " + gpu.name + " has none (Hopper or Blackwell GPUs do)");
    if (c.fp8_recipe == "mxfp8" && !is_blackwell(gpu.name))
      fail("fp8_recipe", "mxfp8 needs Blackwell tensor cores (b200, gb200, b300); " + gpu.name + " has none");
  }
  if (c.precision == "bf16" && gpu.peak_bf16_flops <= 0) fail("precision", gpu.name + " has no bf16 tensor cores");
  const auto t = c.tensor_model_parallel_size, pp = c.pipeline_model_parallel_size, cp = c.context_parallel_size;
  if (c.world_size % (t * pp * cp) != 0)
    fail("tensor_model_parallel_size", "tensor (" + std::to_string(t) + ") x pipeline (" + std::to_string(pp) +
                                           ") x context (" + std::to_string(cp) + ") parallel size must divide world_size " +
                                           std::to_string(c.world_size));
  if (c.num_attention_heads % t) fail("tensor_model_parallel_size", "must divide num_attention_heads (" + std::to_string(c.num_attention_heads) + ")");
  const auto g = c.query_groups();
  if (c.num_attention_heads % g) fail("num_query_groups", "must divide num_attention_heads");
  if (g % t && t % g) fail("num_query_groups", "must be a multiple or a divisor of tensor_model_parallel_size");
  if (!c.kv_channels && c.hidden_size % c.num_attention_heads) fail("hidden_size", "must be a multiple of num_attention_heads");
  if (c.padded_vocab_size % t) fail("padded_vocab_size", "must be a multiple of tensor_model_parallel_size");
  if (c.seq_length % (2 * cp) && cp > 1)
    fail("seq_length", "must be a multiple of 2 x context_parallel_size (load-balanced causal chunks)");
  if (c.num_layers_per_virtual_pipeline_stage && c.virtual_pipeline_model_parallel_size)
    fail("virtual_pipeline_model_parallel_size", "give it or num_layers_per_virtual_pipeline_stage, not both");
  if (c.num_layers_per_virtual_pipeline_stage &&
      (c.decoder_first_pipeline_num_layers || c.decoder_last_pipeline_num_layers))
    fail("num_layers_per_virtual_pipeline_stage",
         "cannot be combined with decoder_first/last_pipeline_num_layers: give virtual_pipeline_model_parallel_size "
         "(Megatron-LM's --num-virtual-stages-per-pipeline-rank) instead");
  if (c.num_layers_per_virtual_pipeline_stage && c.split_layers() % pp == 0 &&
      (c.split_layers() / pp) % c.num_layers_per_virtual_pipeline_stage)
    fail("num_layers_per_virtual_pipeline_stage",
         "must divide the layers per pipeline stage (" + std::to_string(c.split_layers() / pp) +
             (c.split_layers() != c.num_layers ? ", the embedding / loss counted as layers" : "") + ")");
  layout_of(c, fail);
  const auto dp = c.data_parallel();
  // Resource bound (docs/reliability.md), checked before anything is allocated: each simulated rank holds a
  // few ops per layer and micro-batch, so micro-batches x layers bounds the trace. An MoE layer (and an MTP depth
  // of an MoE model) counts as kMoeLayerSteps: router, permutation, dispatch / combine all-to-alls and expert GEMMs
  // make about four times a dense layer's ops and memory (measured with 256 layers x 512 micro-batches of a
  // 64-wide model on 8 GPUs, num_experts 64 against 0: `gen` 3,409,922 ops against 788,482, `run` peak 2.44 GB
  // against 0.58 GB), so an MoE model at the bound needs about what a dense one does.
  constexpr std::int64_t kMoeLayerSteps = 4;
  std::int64_t moe_layers = 0;
  for (bool m : gpt_detail::moe_layers_of(c)) moe_layers += m;
  const std::int64_t mtp = std::max<std::int64_t>(0, c.moe.mtp_num_layers);
  const std::int64_t layer_steps =
      c.num_layers + (kMoeLayerSteps - 1) * moe_layers + (moe_layers ? kMoeLayerSteps : 1) * mtp;
  if (double(c.global_batch_size) / (double(c.micro_batch_size) * double(dp)) * double(layer_steps) >
      double(kMaxGptMicroBatchLayers))
    fail("global_batch_size", "gives " + std::to_string(c.global_batch_size / (c.micro_batch_size * dp)) +
                                  " micro-batches (global_batch_size / (micro_batch_size x data-parallel size " +
                                  std::to_string(dp) + ")) of " + std::to_string(c.num_layers) + " layers" +
                                  (layer_steps != c.num_layers
                                       ? " (" + std::to_string(layer_steps) + " layer steps: an MoE layer and an MTP depth of an "
                                         "MoE model count as " + std::to_string(kMoeLayerSteps) + ")"
                                       : std::string()) +
                                  "; at most " + std::to_string(kMaxGptMicroBatchLayers) +
                                  " micro-batch x layer steps are simulated (raise micro_batch_size or the data-parallel size)");
  if (c.global_batch_size % (c.micro_batch_size * dp))
    fail("global_batch_size", "must be a multiple of micro_batch_size x data-parallel size (" +
                                  std::to_string(c.micro_batch_size) + " x " + std::to_string(dp) + ")");
  if (!c.pipeline_parallel_schedule.empty()) {
    one_of("pipeline_parallel_schedule", c.pipeline_parallel_schedule, {"1F1B", "Interleaved1F1B", "DualPipe"});
    if (c.pipeline_parallel_schedule == "Interleaved1F1B" && c.vp() < 2)
      fail("pipeline_parallel_schedule", "Interleaved1F1B needs virtual_pipeline_model_parallel_size > 1");
    if (c.pipeline_parallel_schedule == "1F1B" && c.vp() > 1)
      fail("pipeline_parallel_schedule", "1F1B has no virtual pipeline stages (use Interleaved1F1B)");
  }
  if (c.dualpipe()) {
    // github:deepseek-ai/DualPipe dualpipe/dualpipe.py DualPipe.step: an even number of ranks, an even number
    // of micro-batches, at least twice the ranks.
    const std::int64_t mbs = c.global_batch_size / (c.micro_batch_size * dp);
    if (pp < 2 || pp % 2) fail("pipeline_parallel_schedule", "DualPipe needs an even pipeline_model_parallel_size");
    if (mbs % 2 || mbs < 2 * pp)
      fail("pipeline_parallel_schedule", "DualPipe needs an even number of micro-batches, at least 2 x pipeline_model_parallel_size (" +
                                             std::to_string(mbs) + " micro-batches, " + std::to_string(pp) + " stages)");
    if (c.vp() > 1) fail("pipeline_parallel_schedule", "DualPipe has no virtual pipeline stages");
    if (c.fsdp()) fail("pipeline_parallel_schedule", "DualPipe is modelled without FSDP");
    if (c.moe.delay_wgrad_compute)
      fail("delay_wgrad_compute", "is Megatron's combined-1F1B option; DualPipe splits the weight gradients itself "
                                  "(dualpipe_zero_bubble)");
    if (c.account_for_embedding_in_pipeline_split || c.account_for_loss_in_pipeline_split)
      fail("pipeline_parallel_schedule", "DualPipe is modelled with an even or decoder_first/last split");
  }
  if (c.vp() > 1) {
    if (pp < 2) fail(c.virtual_pipeline_model_parallel_size ? "virtual_pipeline_model_parallel_size" : "num_layers_per_virtual_pipeline_stage",
                     "needs pipeline_model_parallel_size > 1");
    // Megatron-Core forward_backward_pipelining_with_interleaving (schedules.py @d98e8a64dd, lines 1160-1181):
    // PP <= N <= m, and m mod N is 0 or at least PP ("dependency bubbles" otherwise). With N = PP (the
    // default) m must be a multiple of PP. Below PP, Megatron's order with its warm-up count waits in a cycle:
    // with PP 4, VP 2, N 2, m 8, stage 0's 8th warm-up forward (micro-batch 3, chunk 1) needs the last stage's
    // forward of micro-batch 3, chunk 0, which that stage runs after its backward of micro-batch 0, chunk 0,
    // which needs stage 0's first backward, which runs after that forward (measured: the replay reports the
    // deadlock). The Llama 3 paper's schedule for N < PP (arXiv:2407.21783 Sec. 3.3.2) changes the order in a
    // way the paper does not specify, so it is not modelled.
    const std::int64_t m = c.global_batch_size / (c.micro_batch_size * dp), n = c.microbatch_group();
    const char* nk = c.microbatch_group_size_per_vp_stage ? "microbatch_group_size_per_vp_stage" : "global_batch_size";
    if (n > m)
      fail(nk, "the interleaved schedule's micro-batch group (N = " + std::to_string(n) + ") must not exceed the " +
                   std::to_string(m) + " micro-batches of the step");
    if (n < pp)
      fail("microbatch_group_size_per_vp_stage", "must be at least pipeline_model_parallel_size (" + std::to_string(pp) +
                                                     "), as Megatron-LM requires (below it Megatron's interleaved order "
                                                     "deadlocks; the Llama 3 paper's variant is not specified enough to model)");
    if (m % n && m % n < pp)
      fail(nk, "the interleaved schedule needs the number of micro-batches (" + std::to_string(m) +
                   ") to be a multiple of the micro-batch group N = " + std::to_string(n) +
                   (c.microbatch_group_size_per_vp_stage ? "" : " (pipeline_model_parallel_size)") +
                   ", or to leave at least pipeline_model_parallel_size over");
  } else if (c.microbatch_group_size_per_vp_stage) {
    fail("microbatch_group_size_per_vp_stage", "is the interleaved schedule's group size: it needs virtual pipeline stages");
  }
  if (c.sequence_parallel && t == 1) c.sequence_parallel = false;  // Megatron turns it off for TP=1
  if (c.tp_comm_overlap && t > 1 && !c.sequence_parallel)
    fail("tp_comm_overlap", "needs sequence_parallel (Megatron-LM asserts the same)");
  gpt_detail::check_tp_overlap_settings(c, where, fail);
  if (c.tp_comm_overlap_impl != "userbuffers" && c.tp_comm_overlap_impl != "symmetric_memory")
    fail("tp_comm_overlap_impl", "expected userbuffers or symmetric_memory, got '" + c.tp_comm_overlap_impl + "'");
  if (c.tp_comm_overlap_impl == "symmetric_memory" && c.torch_compile != "compiled")
    fail("tp_comm_overlap_impl", "symmetric_memory is PyTorch's async TP, an Inductor pass: it needs torch_compile true");
  if (c.overlap_param_gather && !c.use_distributed_optimizer && !c.fsdp())
    fail("overlap_param_gather", "needs use_distributed_optimizer (Megatron-LM asserts the same)");
  if (c.overlap_param_gather_with_optimizer_step) {
    // Megatron-LM's asserts (megatron/training/arguments.py:1066-1073 @d98e8a64).
    if (!c.use_distributed_optimizer || !c.megatron_ddp())
      fail("overlap_param_gather_with_optimizer_step", "needs use_distributed_optimizer (Megatron-Core's DDP, no FSDP)");
    if (!c.overlap_param_gather) fail("overlap_param_gather_with_optimizer_step", "needs overlap_param_gather");
    if (c.vp() < 2 || c.dualpipe())
      fail("overlap_param_gather_with_optimizer_step", "needs the interleaved pipeline schedule (virtual pipeline stages)");
    if (c.optimizer_cpu_offload)
      fail("overlap_param_gather_with_optimizer_step", "with optimizer_cpu_offload is not modelled");
  }
  if (c.ddp_num_buckets && !c.megatron_ddp())
    fail("ddp_num_buckets", "sets Megatron-Core DDP's buckets; FSDP and data_parallel_sharding_strategy runs use bucket_size");
  if (c.num_distributed_optimizer_instances > 1 && (dp * cp) % c.num_distributed_optimizer_instances)
    fail("num_distributed_optimizer_instances", "must divide the data-parallel x context-parallel size");
  if (c.recompute_num_layers && c.recompute_granularity != "full")
    fail("recompute_num_layers", "needs recompute_granularity full");
  if (c.moe.enabled() || c.moe.multi_latent_attention) {
    if (c.attention_backend == "unfused")
      fail("attention_backend", "MoE / multi-latent attention models need flash or fused attention");
    if (c.moe.multi_latent_attention && c.num_attention_heads % t)
      fail("tensor_model_parallel_size", "must divide num_attention_heads");
  }
  if (c.moe.overlap_moe_expert_parallel_comm && !c.moe.enabled())
    fail("overlap_moe_expert_parallel_comm", "needs num_experts");
  for (const auto& [k, on] : {std::pair<const char*, bool>{"moe_latent_size", c.moe.moe_latent_size > 0},
                              {"moe_shared_expert_gate", c.moe.moe_shared_expert_gate},
                              {"moe_router_dtype", !c.moe.moe_router_dtype.empty()},
                              {"moe_router_padding_for_quantization", c.moe.moe_router_padding_for_quantization}}) {
    if (on && !c.moe.enabled()) fail(k, "needs num_experts");
    if (on && (c.use_torch_fsdp2 || !c.torch_compile.empty()))
      fail(k, "is a Megatron-Core MoE setting; it is not modelled with the torch runtime (use_torch_fsdp2, torch_compile)");
  }
  if (!c.dualpipe_zero_bubble && !c.dualpipe())
    fail("dualpipe_zero_bubble", "needs pipeline_parallel_schedule DualPipe");
  // Megatron-Core transformer_config.py: "overlap_moe_expert_parallel_comm must be enabled when enabling
  // delay_wgrad_compute".
  if (c.moe.delay_wgrad_compute && !c.moe.overlap_moe_expert_parallel_comm)
    fail("delay_wgrad_compute", "needs overlap_moe_expert_parallel_comm (Megatron-LM asserts the same)");
  if (c.moe.enabled()) {
    const auto ep = c.moe.expert_model_parallel_size, etp = c.etp();
    if ((t * cp * dp) % (etp * ep))
      fail("expert_model_parallel_size", "expert tensor (" + std::to_string(etp) + ") x expert parallel (" +
                                             std::to_string(ep) + ") size must divide tensor x context x data "
                                             "parallel size (" + std::to_string(t * cp * dp) + ")");
    if (c.moe_ffn() % etp) fail("expert_tensor_parallel_size", "must divide moe_ffn_hidden_size");
    // The expert grid's pipeline groups must be the dense grid's (megatron/core/parallel_state.py @d98e8a64:
    // "Pipeline parallel groups are expected to be the same for Non-Expert and Expert part"); with the
    // pipeline before data that holds when ETP x EP spans the same ranks as TP x CP.
    if (c.use_tp_pp_dp_mapping && c.pipeline_model_parallel_size > 1 && etp * ep != t * cp)
      fail("use_tp_pp_dp_mapping", "with pipeline parallelism needs expert tensor x expert parallel size (" +
                                       std::to_string(etp * ep) + ") = tensor x context parallel size (" +
                                       std::to_string(t * cp) + "), else Megatron-Core's expert and dense "
                                       "pipeline groups differ (it asserts they are the same)");
    if (t > 1 && ep > 1 && !c.sequence_parallel)
      fail("sequence_parallel", "expert and tensor parallelism together need sequence_parallel (Megatron-LM asserts the same)");
    if (c.moe.overlap_moe_expert_parallel_comm) {
      if (c.moe.moe_token_dispatcher_type == "allgather")
        fail("overlap_moe_expert_parallel_comm", "needs moe_token_dispatcher_type alltoall or flex");
      if (c.fsdp() || cp > 1)
        fail("overlap_moe_expert_parallel_comm", "is modelled without FSDP and context parallelism");
    }
    if (c.moe.moe_shared_expert_overlap && !c.moe.moe_shared_expert_intermediate_size)
      fail("moe_shared_expert_overlap", "needs moe_shared_expert_intermediate_size");
    if (c.moe.moe_shared_expert_gate && !c.moe.moe_shared_expert_intermediate_size)
      fail("moe_shared_expert_gate", "needs moe_shared_expert_intermediate_size (the gate scales the shared expert)");
    // Megatron-Core transformer_config.py @d98e8a64: "fp8/fp4 must be specified when
    // moe_router_padding_for_quantization is True".
    if (c.moe.moe_router_padding_for_quantization && !c.quantized())
      fail("moe_router_padding_for_quantization", "needs precision fp8 or fp4 (Megatron-LM raises the same)");
    // moe_layer.py @d98e8a64 MoELayer.preprocess: "Shared expert overlap with MoE latent projections is not
    // supported during training".
    if (c.moe.moe_latent_size && c.moe.moe_shared_expert_overlap)
      fail("moe_latent_size", "with moe_shared_expert_overlap fails in Megatron-LM training (shared expert overlap "
                              "with MoE latent projections is not supported)");
    moe_layer_pattern(c.moe.moe_layer_freq, c.num_layers, where);
  }
  if (c.cross_entropy_impl != "megatron" && c.cross_entropy_impl != "torch" && c.cross_entropy_impl != "torch_compiled")
    fail("cross_entropy_impl", "expected megatron, torch or torch_compiled, got '" + c.cross_entropy_impl + "'");
  one_of("fsdp_reshard_after_forward", c.fsdp_reshard_after_forward, {"default", "always", "never"});
  if (c.fsdp_reshard_after_forward != "default" && !c.use_torch_fsdp2)
    fail("fsdp_reshard_after_forward", "describes torch FSDP2's units; it needs use_torch_fsdp2");
  if (c.fsdp_embeddings_in_root && !c.use_torch_fsdp2)
    fail("fsdp_embeddings_in_root", "describes torch FSDP2's units; it needs use_torch_fsdp2");
  if (c.fsdp_expert_units && !c.use_torch_fsdp2)
    fail("fsdp_expert_units", "describes torch FSDP2's units; it needs use_torch_fsdp2");
  if (c.final_norm_eager && !c.use_torch_fsdp2)
    fail("final_norm_eager", "describes torchtitan's eager RMSNorm; it needs use_torch_fsdp2");
  if (c.fsdp_flat_params && !c.use_torch_fsdp2)
    fail("fsdp_flat_params", "describes torch FSDP1's flat parameters; it needs use_torch_fsdp2");
  if (c.enable_fsdp_float8_all_gather && (!c.use_torch_fsdp2 || !c.fp8() || c.fp8_recipe != "tensorwise"))
    fail("enable_fsdp_float8_all_gather",
         "describes torchao's float8 all-gather under torch FSDP2; it needs use_torch_fsdp2, precision fp8 and "
         "fp8_recipe tensorwise");
  if (c.force_recompute_fp8_weight_in_bwd && !c.torchao_float8_weights())
    fail("force_recompute_fp8_weight_in_bwd",
         "describes torchao's Float8Linear under torch FSDP2; it needs use_torch_fsdp2, precision fp8 and fp8_recipe "
         "tensorwise");
  if (!c.torch_compile.empty() && !c.use_torch_fsdp2)
    fail("torch_compile", "describes torchtitan's model code (eager or torch.compile'd); it needs use_torch_fsdp2");
  // Megatron-LM's fusion switches describe Megatron's layer; torchtitan's block is set by torch_compile.
  for (const auto& [key, on] : {std::pair<const char*, bool>{"bias_swiglu_fusion", c.bias_swiglu_fusion},
                                {"bias_gelu_fusion", c.bias_gelu_fusion}, {"apply_rope_fusion", c.apply_rope_fusion},
                                {"bias_dropout_fusion", c.bias_dropout_fusion},
                                {"fp32_residual_connection", !c.fp32_residual_connection}})
    if (!on && !c.torch_compile.empty())
      fail(key, "is Megatron-LM's; torchtitan's block is described by torch_compile (eager or compiled)");
  if (!c.context_parallel_rotate_method.empty()) {
    if (c.context_parallel_rotate_method != "allgather" && c.context_parallel_rotate_method != "alltoall")
      fail("context_parallel_rotate_method", "expected allgather or alltoall (torchtitan's names), got '" +
                                                 c.context_parallel_rotate_method + "'");
    if (!c.use_torch_fsdp2)
      fail("context_parallel_rotate_method", "is PyTorch's context parallelism; it needs use_torch_fsdp2");
    if (c.context_parallel_size < 2) fail("context_parallel_rotate_method", "needs context_parallel_size >= 2");
    if (c.moe.multi_latent_attention)
      fail("context_parallel_rotate_method", "is not priced with multi_latent_attention (PyTorch CP of SDPA only)");
    if (c.attention_backend == "unfused")
      fail("context_parallel_rotate_method", "needs flash or fused attention (PyTorch CP wraps the SDPA kernels)");
  }
  if (c.norm_type != "rmsnorm" && c.norm_type != "fused_rmsnorm")
    fail("norm_type", "expected rmsnorm or fused_rmsnorm (torchtitan's RMSNorm modules), got '" + c.norm_type + "'");
  if (c.norm_type == "fused_rmsnorm" && (c.torch_compile.empty() || c.normalization != "RMSNorm"))
    fail("norm_type", "fused_rmsnorm is torchtitan's Triton RMSNorm; it needs torch_compile and normalization RMSNorm");
  if (!c.torch_compile.empty() && c.attention_backend == "unfused")
    fail("torch_compile", "prices torchtitan's block around SDPA; it needs flash or fused attention");
  // Megatron-LM's own checks (arguments.py:1410-1419, transformer_config.py:1934-1938 @d98e8a64).
  if (c.distribute_saved_activations) {
    if (c.tensor_model_parallel_size < 2) fail("distribute_saved_activations", "splits the saved inputs over TP; it needs tensor_model_parallel_size > 1");
    if (c.recompute_granularity != "full") fail("distribute_saved_activations", "applies to full recompute only (recompute_granularity full)");
    if (c.sequence_parallel) fail("distribute_saved_activations", "cannot be used with sequence_parallel (Megatron-Core refuses it)");
  }
  if (c.cross_entropy_fusion_impl != "native" && c.cross_entropy_fusion_impl != "te")
    fail("cross_entropy_fusion_impl", "expected native or te (Megatron-LM's choices), got '" + c.cross_entropy_fusion_impl + "'");
  if (c.cross_entropy_impl != "megatron" && c.cross_entropy_loss_fusion)
    fail("cross_entropy_loss_fusion", "is Megatron's fused cross entropy; it needs cross_entropy_impl megatron");
  if (!c.recompute_modules.empty()) {
    // Megatron-Core TransformerConfig.recompute_modules: core_attn, moe_act, layernorm, mla_up_proj, mlp,
    // moe, shared_experts; "recompute_modules is only for selective recompute granularity".
    if (c.recompute_granularity != "selective" || !c.selective_ac_option.empty())
      fail("recompute_modules", "needs recompute_granularity selective (Megatron-LM asserts the same) without selective_ac_option");
    if (c.attention_backend == "unfused") fail("recompute_modules", "needs flash or fused attention");
    const auto mods = recompute_module_list(c.recompute_modules);
    if (mods.empty()) fail("recompute_modules", "expected at least one module name");
    for (const auto& m : mods) {
      if (m != "core_attn" && m != "layernorm" && m != "moe_act" && m != "moe" && m != "mla_up_proj" && m != "mlp" &&
          m != "shared_experts")
        fail("recompute_modules",
             "expected core_attn, layernorm, mla_up_proj, mlp, moe, moe_act or shared_experts, got '" + m + "'");
      if ((m == "moe" || m == "moe_act") && !c.moe.enabled()) fail("recompute_modules", "'" + m + "' needs num_experts");
      // transformer_config.py:1969-1973 @d98e8a64: "mla_up_proj in recompute_modules is only supported with
      // multi_latent_attention"; :1991-1999: "shared_experts recompute cannot work with --moe-shared-expert-overlap".
      if (m == "mla_up_proj" && !c.moe.multi_latent_attention)
        fail("recompute_modules", "'mla_up_proj' needs multi_latent_attention (Megatron-Core raises the same)");
      if (m == "mla_up_proj" && c.moe.q_lora_rank == 0 && c.tensor_model_parallel_size > 1)
        fail("recompute_modules", "'mla_up_proj' without q_lora_rank is not modelled with tensor_model_parallel_size > 1 "
                                  "(its recomputed linear_q_proj would gather the layer input over TP again)");
      if (m == "shared_experts" && !c.moe.moe_shared_expert_intermediate_size)
        fail("recompute_modules", "'shared_experts' needs moe_shared_expert_intermediate_size (a shared expert)");
      if (m == "shared_experts" && c.moe.moe_shared_expert_overlap)
        fail("recompute_modules", "'shared_experts' cannot be used with moe_shared_expert_overlap (Megatron-Core raises the same)");
      if (m == "mlp" && c.parallel_block())
        fail("recompute_modules", "'mlp' is not modelled with the parallel block (gpt_j_residual with gpt_j_tied)");
    }
  }
  if (!c.selective_ac_option.empty()) {
    if (c.selective_ac_option != "op")
      fail("selective_ac_option", "expected op (torchtitan's per-op policy; for every N-th layer use "
                                  "recompute_granularity full with recompute_method/recompute_num_layers), got '" +
                                      c.selective_ac_option + "'");
    if (c.recompute_granularity != "selective") fail("selective_ac_option", "needs recompute_granularity selective");
    if (c.attention_backend == "unfused") fail("selective_ac_option", "needs flash or fused attention");
  }
  if (c.flops_convention.empty()) c.flops_convention = gpt_flops_convention(c);
  one_of("flops_convention", c.flops_convention,
         {"megatron-sc21", "megatron-core", "megatron-core-causal", "nemo-gpt3", "nemo-llama2", "nemo-llama3",
          "nemo-nemotron", "nemo-mixtral", "nemo-gpt3-causal", "nemo-llama2-causal", "nemo-llama3-causal",
          "nemo-nemotron-causal", "nemo-mixtral-causal"});
  if (c.flops_convention.rfind("nemo-mixtral", 0) == 0 && !c.moe.enabled())
    fail("flops_convention", c.flops_convention + " needs num_experts (NeMo's mixtral formula counts moe_router_topk experts)");
  return c;
}
}  // namespace

GptConfig gpt_config_from_params(const ParamMap& p, const std::string& where) {
  try {
    return checked_gpt_config(p, where);
  } catch (const DoesNotFitError&) {
    throw;
  } catch (const InputError& e) {
    // A layout error about values the scenario never gave (a catalogue model without tensor/pipeline sizes gets
    // GPT-3 175B's TP 8, PP 16 and, without expert_tensor_parallel_size, ETP = TP) says where they came from.
    const std::string msg = e.what();
    const GptConfig d{};
    std::string given;
    auto add = [&](const char* key, std::int64_t value, std::initializer_list<const char*> words) {
      if (p.count(key)) return;
      for (const char* w : words)
        if (msg.find(w) != std::string::npos) {
          given += (given.empty() ? "" : ", ") + std::string(key) + " " + std::to_string(value);
          return;
        }
    };
    add("tensor_model_parallel_size", d.tensor_model_parallel_size, {"tensor", "data-parallel", "data parallel"});
    add("pipeline_model_parallel_size", d.pipeline_model_parallel_size,
        {"pipeline", "data-parallel", "data parallel", "world_size"});
    add("global_batch_size", d.global_batch_size, {"global_batch_size"});
    // An unknown name with its suggestion (sim/base/did_you_mean.hpp) is about the name, not the defaults.
    if (given.empty() || msg.find("did you mean") != std::string::npos) throw;
    throw InputError(msg + " (not given, so the gpt generator's defaults, set for GPT-3 175B on 1024 GPUs: " + given + ")");
  }
}

namespace {
// The parameters gpt_defaults_text lists: the shape, batch and layout a scenario gets when it gives none.
constexpr const char* kDefaultKeys[] = {
    "num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "seq_length", "padded_vocab_size",
    "swiglu", "normalization", "position_embedding_type", "micro_batch_size", "global_batch_size",
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size", "sequence_parallel",
    "recompute_granularity"};
// The parameters that choose a layout: any of them given, the warning below stays silent.
constexpr const char* kLayoutKeys[] = {
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
    "num_layers_per_virtual_pipeline_stage", "pipeline_model_parallel_layout", "context_parallel_size",
    "expert_model_parallel_size", "expert_tensor_parallel_size"};
}  // namespace

std::string gpt_defaults_text() {
  const ParamMap d = gpt_config_to_params(GptConfig{});
  std::string s;
  for (const char* k : kDefaultKeys) s += (s.empty() ? "" : ", ") + std::string(k) + " " + d.at(k);
  return s + ", no virtual pipeline (virtual_pipeline_model_parallel_size unset)";
}

std::string gpt_default_layout_warning(const ParamMap& p) {
  if (!p.count("model")) return "";
  const ParamMap d = gpt_config_to_params(GptConfig{});
  if (std::any_of(std::begin(kLayoutKeys), std::end(kLayoutKeys), [&](const char* k) { return p.count(k) > 0; })) {
    // Part of a layout given (experts, say): the tensor / pipeline sizes left out are still GPT-3's.
    std::string missing;
    if (!p.count("tensor_model_parallel_size"))
      missing = "tensor_model_parallel_size " + d.at("tensor_model_parallel_size");
    if (!p.count("pipeline_model_parallel_size") && !p.count("pipeline_model_parallel_layout"))
      missing += (missing.empty() ? "" : ", ") + std::string("pipeline_model_parallel_size ") +
                 d.at("pipeline_model_parallel_size");
    if (missing.empty()) return "";
    return "model " + p.at("model") + " runs with " + missing +
           ", the gpt generator's defaults (set for GPT-3 175B on 1024 GPUs; Megatron-LM's own are 1): give them to "
           "choose the layout";
  }
  std::string s = "model " + p.at("model") + " with no parallelism parameter gets the gpt generator's defaults, set for "
                  "GPT-3 175B on 1024 GPUs: tensor_model_parallel_size " + d.at("tensor_model_parallel_size") +
                  ", pipeline_model_parallel_size " + d.at("pipeline_model_parallel_size") +
                  ", no virtual pipeline";
  for (const char* k : {"recompute_granularity", "global_batch_size"})
    if (!p.count(k)) s += std::string(", ") + k + " " + d.at(k);
  return s + " (give tensor_model_parallel_size and pipeline_model_parallel_size to choose the layout)";
}

ParamMap gpt_config_to_params(const GptConfig& c) {
  ParamMap m;
  auto I = [&](const char* k, std::int64_t v) { m[k] = std::to_string(v); };
  auto B = [&](const char* k, bool v) { m[k] = v ? "true" : "false"; };
  auto G = [&](const char* k, double v) {  // a number as %g
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    m[k] = buf;
  };
  if (!c.model.empty()) m["model"] = c.model;
  I("num_layers", c.num_layers);
  I("hidden_size", c.hidden_size);
  I("num_attention_heads", c.num_attention_heads);
  I("num_query_groups", c.query_groups());
  I("kv_channels", c.head_dim());
  I("ffn_hidden_size", c.ffn());
  I("seq_length", c.seq_length);
  I("padded_vocab_size", c.padded_vocab_size);
  B("swiglu", c.swiglu);
  B("untie_embeddings_and_output_weights", c.untie_embeddings_and_output_weights);
  m["normalization"] = c.normalization;
  if (c.qk_layernorm) B("qk_layernorm", true);
  if (c.add_qkv_bias) B("add_qkv_bias", true);
  if (c.squared_relu) B("squared_relu", true);
  m["position_embedding_type"] = c.position_embedding_type;
  m["attention_backend"] = c.attention_backend;
  I("micro_batch_size", c.micro_batch_size);
  I("global_batch_size", c.global_batch_size);
  I("tensor_model_parallel_size", c.tensor_model_parallel_size);
  I("pipeline_model_parallel_size", c.pipeline_model_parallel_size);
  I("context_parallel_size", c.context_parallel_size);
  if (c.context_parallel_size > 1 && c.context_parallel_rotate_method.empty()) {
    std::string types;
    for (const auto& x : c.cp_comm_types) types += (types.empty() ? "" : " ") + x;
    m["cp_comm_type"] = c.cp_comm_types.empty() ? c.cp_comm_type : types;
  }
  if (!c.hierarchical_context_parallel_sizes.empty()) {
    std::string hs;
    for (auto v : c.hierarchical_context_parallel_sizes) hs += (hs.empty() ? "" : " ") + std::to_string(v);
    m["hierarchical_context_parallel_sizes"] = hs;
  }
  if (c.use_sharp) B("use_sharp", true);
  if (!c.sharp_enabled_group.empty()) m["sharp_enabled_group"] = c.sharp_enabled_group;
  if (!c.context_parallel_rotate_method.empty()) m["context_parallel_rotate_method"] = c.context_parallel_rotate_method;
  I("num_layers_per_virtual_pipeline_stage", c.num_layers_per_virtual_pipeline_stage);
  I("virtual_pipeline_model_parallel_size", c.vp());
  if (!c.pipeline_layout.empty()) m["pipeline_model_parallel_layout"] = pipeline_layout_text(c.pipeline_layout);
  if (c.microbatch_group_size_per_vp_stage) I("microbatch_group_size_per_vp_stage", c.microbatch_group_size_per_vp_stage);
  I("world_size", c.world_size);
  if (c.use_tp_pp_dp_mapping) B("use_tp_pp_dp_mapping", true);
  I("data_parallel_size", c.data_parallel());
  B("sequence_parallel", c.sequence_parallel);
  m["recompute_granularity"] = c.recompute_granularity;
  if (!c.selective_ac_option.empty()) m["selective_ac_option"] = c.selective_ac_option;
  if (!c.recompute_modules.empty()) m["recompute_modules"] = c.recompute_modules;
  if (c.distribute_saved_activations) B("distribute_saved_activations", true);
  if (c.cross_entropy_impl != "megatron") m["cross_entropy_impl"] = c.cross_entropy_impl;
  if (c.cross_entropy_fusion_impl != "native") m["cross_entropy_fusion_impl"] = c.cross_entropy_fusion_impl;
  if (c.fsdp_embeddings_in_root) B("fsdp_embeddings_in_root", true);
  if (c.fsdp_reshard_after_forward != "default") m["fsdp_reshard_after_forward"] = c.fsdp_reshard_after_forward;
  if (c.fsdp_expert_units) B("fsdp_expert_units", true);
  if (c.final_norm_eager) B("final_norm_eager", true);
  if (c.enable_fsdp_float8_all_gather) B("enable_fsdp_float8_all_gather", true);
  if (c.force_recompute_fp8_weight_in_bwd) B("force_recompute_fp8_weight_in_bwd", true);
  if (c.fsdp_flat_params) B("fsdp_flat_params", true);
  if (!c.torch_compile.empty()) B("torch_compile", c.torch_compile == "compiled");
  if (c.norm_type != "rmsnorm") m["norm_type"] = c.norm_type;
  if (c.use_megatron_fsdp) B("use_megatron_fsdp", true);
  B("use_distributed_optimizer", c.use_distributed_optimizer);
  B("overlap_grad_reduce", c.overlap_grad_reduce);
  if (!c.gradient_accumulation_fusion) B("gradient_accumulation_fusion", false);
  if (!c.bias_swiglu_fusion) B("bias_swiglu_fusion", false);
  if (!c.bias_gelu_fusion) B("bias_gelu_fusion", false);
  if (!c.apply_rope_fusion) B("apply_rope_fusion", false);
  if (!c.bias_dropout_fusion) B("bias_dropout_fusion", false);
  if (c.ddp_average_in_collective) B("ddp_average_in_collective", true);
  if (!c.gradient_reduce_div_fusion) B("gradient_reduce_div_fusion", false);
  if (c.ddp_pad_buckets_for_high_nccl_busbw) B("ddp_pad_buckets_for_high_nccl_busbw", true);
  if (c.fp32_residual_connection) B("fp32_residual_connection", true);
  B("overlap_param_gather", c.overlap_param_gather);
  if (c.overlap_param_gather_with_optimizer_step) B("overlap_param_gather_with_optimizer_step", true);
  if (!c.align_param_gather) B("align_param_gather", false);
  if (!c.align_grad_reduce) B("align_grad_reduce", false);
  if (c.fp8_param_gather) B("fp8_param_gather", true);
  if (c.fp4_param_gather) B("fp4_param_gather", true);
  if (c.first_last_layers_bf16) {
    B("first_last_layers_bf16", true);
    I("num_layers_at_start_in_bf16", c.num_layers_at_start_in_bf16);
    I("num_layers_at_end_in_bf16", c.num_layers_at_end_in_bf16);
  }
  if (c.cpu_offloading_num_layers) I("cpu_offloading_num_layers", c.cpu_offloading_num_layers);
  if (c.fine_grained_activation_offloading) {
    B("fine_grained_activation_offloading", true);
    m["offload_modules"] = c.offload_modules;
    G("activation_offload_fraction", c.activation_offload_fraction);
    I("min_offloaded_tensor_size", c.min_offloaded_tensor_size);
    if (c.fine_grained_offloading_max_inflight_offloads >= 0)
      I("fine_grained_offloading_max_inflight_offloads", c.fine_grained_offloading_max_inflight_offloads);
    if (c.delta_offload_bytes_across_pp_ranks) I("delta_offload_bytes_across_pp_ranks", c.delta_offload_bytes_across_pp_ranks);
  }
  if (c.hybrid()) {
    m["hybrid_layer_pattern"] = c.hybrid_layer_pattern;
    I("mamba_state_dim", c.mamba_state_dim);
    I("mamba_head_dim", c.mamba_head_dim);
    I("mamba_num_groups", c.mamba_num_groups);
    I("mamba_num_heads", c.mamba_heads());
  }
  if (c.gdn()) {
    m["experimental_attention_variant"] = c.experimental_attention_variant;
    m["linear_attention_freq"] = c.linear_attention_freq;
    I("linear_conv_kernel_dim", c.linear_conv_kernel_dim);
    I("linear_key_head_dim", c.linear_key_head_dim);
    I("linear_value_head_dim", c.linear_value_head_dim);
    I("linear_num_key_heads", c.linear_num_key_heads);
    I("linear_num_value_heads", c.linear_num_value_heads);
  }
  if (c.attention_output_gate) B("attention_output_gate", true);
  if (c.gpt_j_residual) B("gpt_j_residual", true), B("gpt_j_tied", c.gpt_j_tied);
  if (c.window_left >= 0) {
    m["window_size"] = "(" + std::to_string(c.window_left) + ", " + std::to_string(c.window_right) + ")";
    if (!c.window_attn_skip_freq.empty()) m["window_attn_skip_freq"] = c.window_attn_skip_freq;
  }
  if (c.optimizer != "adam") {
    m["optimizer"] = c.optimizer;
    if (c.optimizer == "sgd") m["sgd_momentum"] = std::to_string(c.sgd_momentum);
  }
  if (c.use_precision_aware_optimizer) {
    B("use_precision_aware_optimizer", true);
    m["main_grads_dtype"] = c.main_grads_dtype, m["main_params_dtype"] = c.main_params_dtype;
    m["exp_avg_dtype"] = c.exp_avg_dtype, m["exp_avg_sq_dtype"] = c.exp_avg_sq_dtype;
  }
  if (c.optimizer_cpu_offload) {
    B("optimizer_cpu_offload", true);
    m["optimizer_offload_fraction"] = std::to_string(c.optimizer_offload_fraction);
    if (c.overlap_cpu_optimizer_d2h_h2d) B("overlap_cpu_optimizer_d2h_h2d", true);
    if (c.host_memory_bandwidth_per_gpu > 0) m["host_memory_bandwidth_per_gpu"] = format_bandwidth(c.host_memory_bandwidth_per_gpu);
  }
  if (c.offload_optimizer_states) B("offload_optimizer_states", true);
  if (c.chunked_optimizer_state_offload) B("chunked_optimizer_state_offload", true);
  if ((c.chunked_optimizer_state_offload || c.offload_optimizer_states) && c.optimizer_state_offload_chunk_size_mb != 0)
    m["optimizer_state_offload_chunk_size_mb"] = std::to_string(c.optimizer_state_offload_chunk_size_mb);
  if ((c.chunked_optimizer_state_offload || c.offload_optimizer_states) && c.optimizer_state_offload_fraction != 1.0)
    m["optimizer_state_offload_fraction"] = std::to_string(c.optimizer_state_offload_fraction);
  B("tp_comm_overlap", c.tp_comm_overlap);
  if (c.tp_comm_overlap && !c.tp_comm_bulk_wgrad) B("tp_comm_bulk_wgrad", false);
  if (c.tp_comm_overlap && c.tp_comm_overlap_impl != "userbuffers") m["tp_comm_overlap_impl"] = c.tp_comm_overlap_impl;
  if (c.tp_comm_overlap && !c.tp_comm_overlap_ag) B("tp_comm_overlap_ag", false);
  if (c.tp_comm_overlap && !c.tp_comm_overlap_rs) B("tp_comm_overlap_rs", false);
  if (c.tp_comm_overlap && !c.tp_comm_bulk_dgrad) B("tp_comm_bulk_dgrad", false);
  if (c.tp_comm_overlap && c.tp_comm_overlap_rs_dgrad) B("tp_comm_overlap_rs_dgrad", true);
  if (c.tp_comm_overlap && !c.tp_comm_overlap_cfg.empty()) m["tp_comm_overlap_cfg"] = c.tp_comm_overlap_cfg;
  if (c.bf16_wgrad()) B("fp8_wgrad", false);
  if (c.defer_embedding_wgrad_compute) B("defer_embedding_wgrad_compute", true), I("wgrad_deferral_limit", c.wgrad_deferral_limit);
  if (!c.async_tensor_model_parallel_allreduce) B("async_tensor_model_parallel_allreduce", false);
  B("fsdp", c.fsdp());
  B("overlap_p2p_comm", c.overlap_p2p_comm);
  if (c.dualpipe()) m["pipeline_parallel_schedule"] = c.pipeline_parallel_schedule;
  if (c.dualpipe()) B("dualpipe_zero_bubble", c.dualpipe_zero_bubble);
  if (c.bucket_size > 0) I("bucket_size", c.bucket_size);
  if (c.ddp_num_buckets > 0) I("ddp_num_buckets", c.ddp_num_buckets);
  m["gpu"] = c.gpu;
  m["precision"] = c.precision;
  if (c.fp8()) m["fp8_recipe"] = c.fp8_recipe;
  if (c.fp4()) m["fp4_recipe"] = c.fp4_recipe;
  m["flops_convention"] = c.flops_convention;
  if (c.moe.enabled()) {
    const auto& e = c.moe;
    I("num_experts", e.num_experts);
    I("moe_router_topk", e.moe_router_topk);
    I("moe_ffn_hidden_size", c.moe_ffn());
    I("moe_shared_expert_intermediate_size", e.moe_shared_expert_intermediate_size);
    B("moe_shared_expert_overlap", e.moe_shared_expert_overlap);
    if (e.moe_shared_expert_gate) B("moe_shared_expert_gate", true);
    if (e.moe_latent_size) I("moe_latent_size", e.moe_latent_size);
    if (!e.moe_router_dtype.empty()) m["moe_router_dtype"] = e.moe_router_dtype;
    if (e.moe_router_padding_for_quantization) B("moe_router_padding_for_quantization", true);
    m["moe_layer_freq"] = e.moe_layer_freq;
    I("expert_model_parallel_size", e.expert_model_parallel_size);
    I("expert_tensor_parallel_size", c.etp());
    I("expert_data_parallel_size", c.expert_data_parallel());
    m["moe_token_dispatcher_type"] = e.moe_token_dispatcher_type;
    if (e.moe_router_num_groups) I("moe_router_num_groups", e.moe_router_num_groups), I("moe_router_group_topk", e.moe_router_group_topk);
    B("moe_grouped_gemm", e.moe_grouped_gemm);
    m["moe_router_load_balancing_type"] = e.moe_router_load_balancing_type;
    G("moe_expert_capacity_factor", e.moe_expert_capacity_factor);
    B("moe_pad_expert_input_to_capacity", e.moe_pad_expert_input_to_capacity);
    B("moe_permute_fusion", e.moe_permute_fusion);
    if (e.moe_router_fusion) B("moe_router_fusion", true);
    if (e.moe_router_score_function != "softmax") m["moe_router_score_function"] = e.moe_router_score_function;
    if (e.moe_aux_loss_coeff > 0) G("moe_aux_loss_coeff", e.moe_aux_loss_coeff);
    if (e.moe_input_jitter_eps > 0) G("moe_input_jitter_eps", e.moe_input_jitter_eps);
    if (e.moe_z_loss_coeff > 0) G("moe_z_loss_coeff", e.moe_z_loss_coeff);
    if (e.moe_router_enable_expert_bias) B("moe_router_enable_expert_bias", true);
    if (e.moe_router_force_load_balancing) B("moe_router_force_load_balancing", true);
    B("overlap_moe_expert_parallel_comm", e.overlap_moe_expert_parallel_comm);
    if (e.delay_wgrad_compute) B("delay_wgrad_compute", true);
    m["moe_load"] = e.moe_load;
    if (e.moe_load == "zipf" || e.moe_load == "dirichlet") {
      G("moe_load_skew", e.moe_load_skew);
      I("moe_load_seed", e.moe_load_seed);
    }
  }
  if (c.moe.multi_latent_attention) {
    B("multi_latent_attention", true);
    I("q_lora_rank", c.moe.q_lora_rank);
    I("kv_lora_rank", c.moe.kv_lora_rank);
    I("qk_head_dim", c.moe.qk_head_dim);
    I("qk_pos_emb_head_dim", c.moe.qk_pos_emb_head_dim);
    I("v_head_dim", c.moe.v_head_dim);
  }
  if (c.moe.mtp_num_layers) I("mtp_num_layers", c.moe.mtp_num_layers);
  return m;
}

std::string gpt_flops_convention(const GptConfig& c) {
  if (!c.flops_convention.empty()) return c.flops_convention;
  // The SC'21 convention for the SC'21-shaped model (unfused attention, MHA, GELU, tied embeddings);
  // Megatron-Core's for everything else.
  const std::string backend = gpt_detail::resolved_attention_backend(c.attention_backend, c.gpu);
  const bool sc21 = backend == "unfused" && c.query_groups() == c.num_attention_heads && !c.swiglu &&
                    !c.untie_embeddings_and_output_weights &&
                    c.head_dim() * c.num_attention_heads == c.hidden_size;
  // Hybrid linear attention exists only in Megatron-LM versions that count causal attention halved (GDN's
  // gdn_layer_flops and linear_attention_freq are in num_floating_point_operations beside the causal term at
  // NVIDIA/Megatron-LM@d98e8a64): their TFLOP/s are in that convention.
  // Megatron-LM's hybrid_flops counts the core attention causal (halved) too.
  if (c.gdn() || c.hybrid()) return "megatron-core-causal";
  return sc21 ? "megatron-sc21" : "megatron-core";
}

namespace {
// NeMo's logged model FLOPs (flops_convention nemo-<family>[-causal]): the family's formula in nemo/utils/
// flops_formulas.py with the family's fixed vocabulary (LLM_VOCAB_SIZE_MAP, nemo/collections/common/parts/
// perf_metrics_utils.py), at NVIDIA/NeMo@e564e669 (gpt3 lines 33-41, llama2 44-61, llama3 64-81, nemotron 84-101,
// mixtral 104-121), the attention's s x s term halved with -causal as from NVIDIA/NeMo@6251117f4c (2025-08-09,
// "Discount FLOPs in dot-product att"). f is the FFN hidden size (NeMo reads model.ffn_hidden_size), g the query
// groups (num_attention_heads without GQA).
double nemo_model_flops(const GptConfig& c) {
  const std::string& conv = c.flops_convention;
  const bool causal = conv.size() > 7 && conv.compare(conv.size() - 7, 7, "-causal") == 0;
  const std::string family = conv.substr(5, conv.size() - 5 - (causal ? 7 : 0));
  const double k = causal ? 0.5 : 1.0;
  const double B = double(c.global_batch_size), s = double(c.seq_length), l = double(c.num_layers),
               h = double(c.hidden_size), f = double(c.ffn()), a = double(c.num_attention_heads),
               g = double(c.query_groups());
  if (family == "gpt3") return (24.0 * B * s * h * h + 4.0 * B * s * s * h * k) * (3.0 * l) + 6.0 * B * s * h * 51200.0;
  const double V = family == "llama2" || family == "mixtral" ? 32000.0 : family == "llama3" ? 128256.0 : 256000.0;
  const double mlp = family == "nemotron" ? 12.0 * f / h
                     : family == "mixtral" ? 18.0 * double(c.moe.moe_router_topk) * f / h
                                           : 18.0 * f / h;
  return B * s * l * h * h * (12.0 + 12.0 * g / a + mlp + 12.0 * s / h * k + 6.0 * V / (l * h));
}
}  // namespace

double gpt_model_flops(const GptConfig& c) {
  if (c.flops_convention.rfind("nemo-", 0) == 0) return nemo_model_flops(c);
  if (c.hybrid()) return gpt_detail::hybrid_model_flops(c);  // Megatron-LM's hybrid_flops
  if (gpt_detail::moe_model(c)) return gpt_detail::moe_model_flops(c);  // also hybrid GDN / gated attention
  const double B = double(c.global_batch_size), s = double(c.seq_length), l = double(c.num_layers),
               h = double(c.hidden_size), V = double(c.padded_vocab_size);
  if (gpt_flops_convention(c) == "megatron-sc21") {
    const double k = c.recompute_granularity == "full" ? 96.0 : 72.0;
    return k * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
  }
  const double a = double(c.num_attention_heads), g = double(c.query_groups()), f = double(c.ffn());
  const double q_ratio = double(c.head_dim()) * a / h;
  const double gated = c.swiglu ? 1.5 : 1.0;
  // megatron-core-causal: the core-attention term halved for the causal mask.
  const double core = gpt_flops_convention(c) == "megatron-core-causal" ? s / (2.0 * h) : s / h;
  return 12.0 * B * s * l * h * h * ((1.0 + g / a + core) * q_ratio + (f / h) * gated + V / (2.0 * l * h));
}

}  // namespace fabricsim::workloads
