#pragma once
// Megatron-LM style GPT training step generator. Parameter names follow Megatron-LM's command-line
// arguments (without the leading dashes, '-' -> '_'): num_layers, hidden_size, num_attention_heads,
// seq_length, padded_vocab_size, micro_batch_size, global_batch_size, tensor_model_parallel_size,
// pipeline_model_parallel_size, num_layers_per_virtual_pipeline_stage, sequence_parallel,
// recompute_granularity (full|selective|none), use_distributed_optimizer, overlap_grad_reduce,
// bucket_size (elements), ffn_hidden_size, plus world_size (GPUs) and gpu (model name).
//
// What is simulated (symmetry): one representative rank per pipeline stage (data-parallel replica 0,
// tensor-parallel rank 0). TP peers do identical work and are stand-ins; other DP replicas are stand-ins.
// Communicators still list every real member, so TP collectives are priced over the real TP group and DP
// collectives over the full DP group on the real fabric, with the other TP positions' concurrent DP
// groups as `mirrors` (they share the hosts' NICs). Pipeline sends go between the real stage ranks.
#include <cstdint>
#include <string>

#include "models/compute.hpp"
#include "workloads/params.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::workloads {

struct GptConfig {
  std::int64_t num_layers = 96;
  std::int64_t hidden_size = 12288;
  std::int64_t num_attention_heads = 96;
  std::int64_t ffn_hidden_size = 0;  // 0 = 4 * hidden_size
  std::int64_t seq_length = 2048;
  std::int64_t padded_vocab_size = 51200;
  std::int64_t micro_batch_size = 1;
  std::int64_t global_batch_size = 1536;
  std::int64_t tensor_model_parallel_size = 8;
  std::int64_t pipeline_model_parallel_size = 16;
  std::int64_t num_layers_per_virtual_pipeline_stage = 0;  // 0 = no interleaving
  std::int64_t world_size = 1024;
  bool sequence_parallel = false;
  std::string recompute_granularity = "full";  // "full" | "selective" | "none"
  bool use_distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  std::int64_t bucket_size = 40000000;  // gradient elements per DP bucket (Megatron DDP default 40M)
  bool grad_reduce_in_fp32 = false;     // DP gradient reduction in fp32 (4 bytes) instead of 2
  bool overlap_p2p_comm = false;        // false: compute waits for its pipeline send to complete (Megatron-LM
                                        // waits on its batched isend/irecv requests; --overlap-p2p-communication)
  std::string gpu = "a100-80gb";
  std::string precision = "fp16";        // fp16 | bf16
  std::int64_t gpus_per_host = 8;        // for placing mirrors; taken from the topology by the scenario

  std::int64_t data_parallel() const { return world_size / (tensor_model_parallel_size * pipeline_model_parallel_size); }
  std::int64_t ffn() const { return ffn_hidden_size ? ffn_hidden_size : 4 * hidden_size; }
};

// Reads and validates (divisibility, memory fit is checked by generate_gpt). Unknown keys are errors.
GptConfig gpt_config_from_params(const ParamMap& p, const std::string& where);
ParamMap gpt_config_to_params(const GptConfig& c);

// Megatron SC'21 model FLOPs per iteration: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) with full recompute,
// 72 (...) without (Narayanan et al., SC'21, Sec. 5.1 / Appendix).
double gpt_model_flops(const GptConfig& c);
// Parameters of the whole model (for reports): 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)).
double gpt_num_parameters(const GptConfig& c);

struct GptMemory {
  double params_bytes = 0;       // weights + grads + optimizer state on the most loaded GPU
  double activations_bytes = 0;  // stored activations on the most loaded GPU (stage 0, in-flight micro-batches)
  double total_bytes() const { return params_bytes + activations_bytes; }
};
GptMemory gpt_memory_per_gpu(const GptConfig& c);

// Builds the trace. `cm` prices the compute kernels (durations are written into the trace). Throws
// InputError (`where`) if the layout is invalid or the model does not fit in GPU memory.
Trace generate_gpt(const GptConfig& c, const models::ComputeModel& cm, const std::string& where);

}  // namespace fabricsim::workloads
