#include "workloads/gpt_models.hpp"

namespace fabricsim::workloads {

const std::vector<GptModelShape>& gpt_model_catalogue() {
  // Llama 3 / 3.1: "The Llama 3 Herd of Models" (arXiv:2407.21783) Table 3: layers 32/80/126, model
  //   dimension 4096/8192/16384, FFN dimension 14336/28672/53248, attention heads 32/64/128, key/value heads
  //   8, SwiGLU, RoPE, vocabulary 128K; the released checkpoints' config.json have vocab_size 128256,
  //   rms_norm and tie_word_embeddings false. Pre-training sequence length 8192 (paper Sec. 3.4.1).
  //   The same shapes are in tests/data/training-modern/llama3_405b_h100.csv and torchtitan.csv (arch columns).
  // GPT-3 175B: Brown et al. 2020 (arXiv:2005.14165) Table 2.1 (96 layers, d_model 12288, 96 heads, context
  //   2048); vocabulary 50257 padded to 51200 as in Megatron-LM (Narayanan et al. SC'21 Sec. 5.1); GELU,
  //   LayerNorm, learned positions, tied embeddings, dropout 0.1 (Megatron defaults).
  // Mixtral 8x7B, dense shape of one expert path: Jiang et al. 2024 "Mixtral of Experts" (arXiv:2401.04088)
  //   Table 1: dim 4096, 32 layers, head_dim 128, hidden_dim 14336, 32 heads, 8 kv heads, context 32768,
  //   vocab 32000; SwiGLU/RMSNorm/RoPE as Mistral 7B (arXiv:2310.06825 Sec. 2). The router and the other
  //   experts are not modelled (top-1 dense equivalent).
  static const std::vector<GptModelShape> v = {
      {"llama3-8b", 32, 4096, 14336, 32, 8, 128, 8192, 128256, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "Llama 3 Herd of Models, arXiv:2407.21783 Table 3"},
      {"llama3-70b", 80, 8192, 28672, 64, 8, 128, 8192, 128256, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "Llama 3 Herd of Models, arXiv:2407.21783 Table 3"},
      {"llama3.1-405b", 126, 16384, 53248, 128, 8, 128, 8192, 128256, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "Llama 3 Herd of Models, arXiv:2407.21783 Table 3"},
      {"gpt3-175b", 96, 12288, 49152, 96, 96, 128, 2048, 51200, false, false, "LayerNorm", "learned_absolute",
       0.1, 0.1, "Brown et al. 2020, arXiv:2005.14165 Table 2.1; vocab padding as Megatron-LM SC'21"},
      {"mixtral-8x7b", 32, 4096, 14336, 32, 8, 128, 32768, 32000, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "Mixtral of Experts, arXiv:2401.04088 Table 1 (dense shape of one expert path)"},
  };
  return v;
}

const GptModelShape* find_gpt_model(const std::string& name) {
  std::string n = name;
  if (n == "llama3-405b" || n == "llama3.1-8b" || n == "llama3.1-70b") {
    n = n == "llama3-405b" ? "llama3.1-405b" : (n == "llama3.1-8b" ? "llama3-8b" : "llama3-70b");
  }
  for (const auto& m : gpt_model_catalogue())
    if (m.name == n) return &m;
  return nullptr;
}

std::string gpt_model_names() {
  std::string s;
  for (const auto& m : gpt_model_catalogue()) s += (s.empty() ? "" : ", ") + m.name;
  return s;
}

}  // namespace fabricsim::workloads
