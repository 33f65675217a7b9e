#pragma once
// Catalogue of named dense decoder-only models for the `gpt` generator (`"model": "llama3-70b"`). Each
// entry's configuration cites its source (gpt_models.cpp). Explicit generator parameters override it.
#include <cstdint>
#include <string>
#include <vector>

namespace fabricsim::workloads {

struct GptModelShape {
  std::string name;
  std::int64_t num_layers, hidden_size, ffn_hidden_size, num_attention_heads, num_query_groups, kv_channels,
      seq_length, padded_vocab_size;
  bool swiglu, untie_embeddings_and_output_weights;
  std::string normalization, position_embedding_type;
  double hidden_dropout, attention_dropout;
  std::string source;
  // Megatron-Core's --qk-layernorm and --add-qkv-bias (GptConfig), cited in gpt_models.cpp.
  bool qk_layernorm = false, add_qkv_bias = false;
  // Hybrid linear attention (GptConfig::experimental_attention_variant, linear_attention_freq; Megatron's default
  // GDN head shapes) and Megatron-Core's --attention-output-gate, cited in gpt_models.cpp.
  std::string experimental_attention_variant, linear_attention_freq;
  bool attention_output_gate = false;
};

const std::vector<GptModelShape>& gpt_model_catalogue();
// nullptr when unknown.
const GptModelShape* find_gpt_model(const std::string& name);
std::string gpt_model_names();  // "llama3-8b, llama3-70b, ..." for errors and help

}  // namespace fabricsim::workloads
