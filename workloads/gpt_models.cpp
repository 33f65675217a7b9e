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
  // Mixtral 8x7B: Jiang et al. 2024 "Mixtral of Experts" (arXiv:2401.04088) Table 1: dim 4096, 32 layers,
  //   head_dim 128, hidden_dim 14336, 32 heads, 8 kv heads, context 32768, vocab 32000; SwiGLU/RMSNorm/RoPE
  //   as Mistral 7B (arXiv:2310.06825 Sec. 2). Experts (8, top-2) in workloads/moe.cpp.
  // Mixtral 8x22B: config.json of mistralai/Mixtral-8x22B-v0.1: 56 layers, hidden 6144, intermediate 16384,
  //   48 heads, 8 kv heads, vocab 32000, max_position_embeddings 65536; the same shape is in
  //   tests/data/training-modern/moe_h100.csv (arch_source column). Training runs override seq_length.
  // Mixtral-8x22B-G8T8 (MoE Parallel Folding, arXiv:2504.14960 Sec. 4.1): Mixtral 8x22B "re-parameterized
  //   to 64 experts and 8 active experts per token", each expert 1/8 of the original hidden size (fine-grained
  //   upcycling, arXiv:2410.07524); attention, embeddings and vocabulary are Mixtral 8x22B's (above). Experts
  //   in workloads/moe.cpp. Same shape in tests/data/training-modern/moe_h100.csv (arch columns, row 10).
  // Llama3-8x70B (MoE Parallel Folding, arXiv:2504.14960 Sec. 4.1): Llama3-70B "upcycled to 8 experts"
  //   (sparse upcycling, arXiv:2212.05055): the dense shape is Llama 3 70B's (Llama 3 Herd of Models Table 3,
  //   above); every FFN becomes 8 copies of the 28672-wide SwiGLU MLP (moe_h100.csv arch columns, row 15).
  // Qwen2-57B-A14B: Qwen2 Technical Report (arXiv:2407.10671) Table 1: 28 layers, hidden 3584, 28 query
  //   heads, 4 KV heads, head size 128, untied embeddings; vocab_size 151936 as every Qwen2(-MoE) config.json
  //   (the tokenizer's 151,646 padded); dense intermediate_size 18944 of its config.json is unused (every
  //   layer is MoE, decoder_sparse_step 1). The shape is also moe_h100.csv's arch columns (row 5).
  // DeepSeek-V3: arXiv:2412.19437 Sec. 4.2 and config.json (deepseek-ai/DeepSeek-V3): 61 layers, hidden
  //   7168, dense-layer intermediate 18432, 128 heads (MLA, workloads/moe.cpp), vocab 129280, untied,
  //   pre-training sequence length 4096 (Sec. 4.2 "Hyper-Parameters"). kv_channels is unused under MLA.
  // Qwen3-30B-A3B / Qwen3-235B-A22B: Qwen3 Technical Report (arXiv:2505.09388) Table 2 and config.json:
  //   48 / 94 layers, hidden 2048 / 4096, 32 / 64 query heads, 4 kv heads, head_dim 128, vocab 151936,
  //   tie_word_embeddings false, intermediate_size 6144 / 12288 (unused: every layer is MoE); pre-training
  //   stage S1/S2 sequence length 4096 (report Sec. 3.2). QK-Norm on every layer, no QKV bias (report Sec. 2:
  //   Qwen2's QKV bias removed, QK-Norm introduced); Megatron-LM's own launch arguments for both
  //   models pass --qk-layernorm with --disable-bias-linear (examples/post_training/modelopt/conf/Qwen/
  //   Qwen3-30B-A3B.sh and Qwen3-235B-A22B.sh at NVIDIA/Megatron-LM@d98e8a64).
  // Qwen3-Next-80B-A3B: the Megatron arguments of yanring/Megatron-MoE-ModelZoo@e8650517
  //   model_configs/benchmarking/Qwen3-Next-80B-A3B.yaml (the run configuration of moe_h100.csv row 98): 48 layers,
  //   hidden 2048, ffn 5120 (unused: every layer MoE), 16 heads, 2 query groups, kv_channels 256, --qk-layernorm,
  //   --attention-output-gate, RMSNorm, SwiGLU, RoPE, untied embeddings, dropout 0, vocabulary padded to a
  //   multiple of 1187 (151936 = 128 x 1187, Qwen's vocab_size); --linear-attention-type gated_delta_net (the
  //   yaml's name for Megatron's experimental_attention_variant) with --linear-attention-freq 4 (three GDN layers,
  //   then one full-attention layer) and the GDN shapes 16 key heads x 128, 32 value heads x 128, conv kernel 4
  //   (Megatron's defaults, GptConfig). Its --rotary-percent 0.25 is not modelled (RoPE is priced over the whole
  //   head). seq_length: the yaml leaves it to ${SEQ_LEN}; 4096 is the row's. Experts and MTP in workloads/moe.cpp.
  // Qwen2's attention has QKV biases and no other linear biases (Qwen2 report arXiv:2407.10671 Sec. 2.2, its
  //   dense and MoE models alike); Megatron-LM runs the Qwen2 family with --add-qkv-bias and
  //   --disable-bias-linear (examples/multimodal/nvlm/pretrain_qwen20_72b_internvit_6b.sh at
  //   NVIDIA/Megatron-LM@d98e8a64).
  // Llama 4 Scout (17B active, 16 experts): torchtitan's "17bx16e" (pytorch/torchtitan
  //   torchtitan/models/llama4/__init__.py: dim 5120, 48 layers, 40 heads, 8 kv heads, every layer MoE,
  //   16 experts; ffn_dim_multiplier 1.2, multiple_of 2048, so the MoE hidden size is int(1.2 x int(8 x 5120 /
  //   3)) / (top_k 1 + 1 shared expert) rounded up to 2048 = 8192 for the routed and the shared expert), the same
  //   shape as meta-llama/Llama-4-Scout-17B-16E config.json (head_dim 128, intermediate_size 8192, vocab 202048,
  //   untied). ffn_hidden_size 16384 (intermediate_size_mlp) is unused: every layer is MoE. Chunked attention
  //   (8192-token blocks) and NoPE layers are not modelled (full causal attention; the same at seq <= 8192).
  // torchtitan's flavors at pytorch/torchtitan@4a950eaab (the last commit with train_configs TOMLs; the same
  //   shapes in the model registries at @b5bcd76c6), cited field by field:
  // Qwen3 0.6B / 1.7B / 32B (torchtitan/models/qwen3/__init__.py qwen3_args, model/args.py, model/model.py):
  //   28 / 28 / 64 layers, dim 1024 / 2048 / 5120, hidden_dim 3072 / 6144 / 25600, 16 / 16 / 64 heads, 8 kv
  //   heads, head_dim 128, vocab 151936, max_seq_len 4096, qk_norm, bias-free projections, SwiGLU FeedForward,
  //   RMSNorm, RoPE; enable_weight_tying True for 0.6B and 1.7B, default False for 32B.
  // DeepSeek-V3 16B (torchtitan/models/deepseek_v3/__init__.py deepseekv3_args["16B"], model/args.py): 27
  //   layers, dim 2048, inter_dim 10944 (the dense first layer), 16 heads (MLA), vocab 102400, max_seq_len
  //   default 4096 x 4 with the TOML's training.seq_len 4096; untied output. Experts and MLA in workloads/moe.cpp.
  // Llama 4 Maverick (torchtitan/models/llama4/__init__.py llama4_args["17bx128e"], model/args.py,
  //   model/model.py TransformerBlock): dim 5120, 48 layers, 40 heads, 8 kv heads, vocab 202048 (args default),
  //   ffn_dim_multiplier 1.2, multiple_of 2048: the dense layers' FeedForward(4 x dim) is int(1.2 x int(2 x 20480
  //   / 3)) rounded up to 2048 = 16384; interleave_moe_layer_step default 2 (MoE on layers with (layer_id + 1) % 2
  //   == 0, workloads/moe.cpp). No every_n_layers_nope and sdpa causal attention in this flavor: RoPE on every
  //   layer and full causal attention, which is what is priced. The _irope flavors (NoPE layers, chunked
  //   attention) have no catalogue entry.
  // gpt-oss-120b: model card (arXiv:2508.10925) and config.json (openai/gpt-oss-120b): 36 layers, hidden
  //   2880, 64 query heads, 8 kv heads, head_dim 64, vocab 201088, untied, gated (SwiGLU-style) experts of
  //   2880, initial_context_length 4096. Its banded-window attention on alternate layers is set with the MoE
  //   defaults (workloads/gpt.cpp: window_size (128, 0), window_attn_skip_freq 2); attention sinks are not
  //   modelled.
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
       "Mixtral of Experts, arXiv:2401.04088 Table 1"},
      {"mixtral-8x22b", 56, 6144, 16384, 48, 8, 128, 65536, 32000, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "config.json of mistralai/Mixtral-8x22B-v0.1"},
      {"mixtral-8x22b-g8t8", 56, 6144, 16384, 48, 8, 128, 65536, 32000, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "MoE Parallel Folding, arXiv:2504.14960 Sec. 4.1 (Mixtral 8x22B, 64 experts of 2048, top-8)"},
      {"llama3-8x70b", 80, 8192, 28672, 64, 8, 128, 8192, 128256, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "MoE Parallel Folding, arXiv:2504.14960 Sec. 4.1 (Llama 3 70B upcycled to 8 experts)"},
      {"qwen2-57b-a14b", 28, 3584, 18944, 28, 4, 128, 4096, 151936, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "Qwen2 Technical Report, arXiv:2407.10671 Table 1; config.json", false, true},
      {"deepseek-v3", 61, 7168, 18432, 128, 128, 128, 4096, 129280, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "DeepSeek-V3 Technical Report, arXiv:2412.19437 Sec. 4.2; config.json"},
      {"qwen3-30b-a3b", 48, 2048, 6144, 32, 4, 128, 4096, 151936, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "Qwen3 Technical Report, arXiv:2505.09388 Table 2; config.json", true, false},
      {"qwen3-235b-a22b", 94, 4096, 12288, 64, 4, 128, 4096, 151936, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "Qwen3 Technical Report, arXiv:2505.09388 Table 2; config.json", true, false},
      {"llama4-scout", 48, 5120, 16384, 40, 8, 128, 8192, 202048, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "torchtitan llama4 17bx16e (torchtitan/models/llama4/__init__.py); Llama-4-Scout-17B-16E config.json"},
      {"qwen3-0.6b", 28, 1024, 3072, 16, 8, 128, 4096, 151936, true, false, "RMSNorm", "rope", 0.0, 0.0,
       "torchtitan qwen3 0.6B (pytorch/torchtitan@4a950eaab torchtitan/models/qwen3/__init__.py)", true, false},
      {"qwen3-1.7b", 28, 2048, 6144, 16, 8, 128, 4096, 151936, true, false, "RMSNorm", "rope", 0.0, 0.0,
       "torchtitan qwen3 1.7B (pytorch/torchtitan@4a950eaab torchtitan/models/qwen3/__init__.py)", true, false},
      {"qwen3-32b", 64, 5120, 25600, 64, 8, 128, 4096, 151936, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "torchtitan qwen3 32B (pytorch/torchtitan@4a950eaab torchtitan/models/qwen3/__init__.py)", true, false},
      {"deepseek-v3-16b", 27, 2048, 10944, 16, 16, 128, 4096, 102400, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "torchtitan deepseek_v3 16B (pytorch/torchtitan@4a950eaab torchtitan/models/deepseek_v3/__init__.py)"},
      {"llama4-maverick", 48, 5120, 16384, 40, 8, 128, 8192, 202048, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "torchtitan llama4 17bx128e (pytorch/torchtitan@4a950eaab torchtitan/models/llama4/__init__.py)"},
      {"gpt-oss-120b", 36, 2880, 2880, 64, 8, 64, 4096, 201088, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "gpt-oss-120b model card, arXiv:2508.10925; config.json"},
      {"qwen3-next-80b-a3b", 48, 2048, 5120, 16, 2, 256, 4096, 151936, true, true, "RMSNorm", "rope", 0.0, 0.0,
       "yanring/Megatron-MoE-ModelZoo@e8650517 model_configs/benchmarking/Qwen3-Next-80B-A3B.yaml", true, false,
       "gated_delta_net", "4", true},
      // Hybrid Mamba models (Megatron-LM's hybrid model): the pattern, the Mamba-2 shape, squared ReLU and the
      // MoE settings are set by hybrid_catalogue_defaults (workloads/gpt_hybrid.cpp), with their sources there.
      // NoPE attention (position_embedding_type none: Nemotron-H-56B-Base-8K.sh; the HF NemotronH attention has
      // no rotary embedding). Vocabulary 131072 (vocab_size of HF NemotronHConfig; the Nemotron-3 tokenizer is
      // "...128k.vocab.json" in Megatron's tests/functional_tests/test_cases/hybrid/
      // hybrid_dynamic_inference_tp1_ep8_nanov3_chunked_prefill/model_config.yaml @d98e8a64).
      {"nemotron-h-8b", 52, 4096, 21504, 32, 8, 128, 4096, 131072, false, true, "RMSNorm", "none", 0.0, 0.0,
       "NVIDIA/Megatron-LM@d98e8a64 examples/post_training/modelopt/conf/nvidia/Nemotron-H-8B-Base-8K.sh"},
      {"nemotron-h-56b", 118, 8192, 32768, 64, 8, 128, 8192, 131072, false, true, "RMSNorm", "none", 0.0, 0.0,
       "NVIDIA/Megatron-LM@d98e8a64 examples/post_training/modelopt/conf/nvidia/Nemotron-H-56B-Base-8K.sh"},
      {"nemotron-3-nano-30b-a3b", 52, 2688, 1856, 32, 2, 128, 8192, 131072, false, true, "RMSNorm", "none", 0.0, 0.0,
       "NVIDIA/Megatron-LM@d98e8a64 examples/post_training/modelopt/conf/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.sh"},
      {"nemotron-3-super-120b-a12b", 88, 4096, 2688, 32, 2, 128, 8192, 131072, false, true, "RMSNorm", "none", 0.0, 0.0,
       "NVIDIA/Megatron-LM@d98e8a64 examples/post_training/modelopt/conf/nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16.sh"},
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
