#pragma once
// Plain data-parallel training (PyTorch DDP style): every GPU holds the whole model, runs forward and
// backward on its share of the batch, and all-reduces gradients in buckets overlapped with the backward
// pass (a bucket's all-reduce starts when its gradients are ready), then runs the optimizer.
// Simulated: rank 0 only; its data-parallel peers are symmetric stand-ins and the all-reduce is priced
// over all world_size ranks.
#include <cstdint>
#include <string>

#include "models/compute.hpp"
#include "workloads/params.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::workloads {

struct DataParallelConfig {
  double num_parameters = 1.0e9;        // model parameters
  double flops_per_sample = 0;          // forward+backward FLOPs per sample (0 = 6 * num_parameters * tokens_per_sample)
  // For the 6*N*tokens rule and tokens/s. Default 2048: GPT-3's context length (Brown et al. 2020, "Language
  // Models are Few-Shot Learners", Table 2.1, n_ctx = 2048), so the default step is a language-model step
  // (1 token per sample gave 0.4 TFLOP/s per GPU, issue 26); set 1 with flops_per_sample for non-LM models.
  std::int64_t tokens_per_sample = 2048;
  std::int64_t global_batch_size = 256;
  std::int64_t world_size = 8;
  std::int64_t bucket_size = 25000000;  // gradient elements per bucket (PyTorch DDP bucket_cap_mb=25 -> ~25 MB;
                                        // here elements, for parity with Megatron's bucket_size)
  double grad_bytes = 2;                // bytes per gradient element on the wire (fp16/bf16)
  bool overlap_grad_reduce = true;
  std::string gpu = "a100-80gb";
  std::string precision = "fp16";
};

// Resource bounds (checked by dataparallel_config_from_params before anything is allocated): each bucket
// costs two ops, each rank one communicator entry. PyTorch DDP's default 25 MB buckets give 40,000 buckets
// only at 1e12 parameters, so the bucket limit refuses only degenerate settings such as bucket_size 1.
constexpr std::int64_t kMaxDataParallelBuckets = 100000;
constexpr std::int64_t kMaxDataParallelWorld = 1 << 20;

DataParallelConfig dataparallel_config_from_params(const ParamMap& p, const std::string& where);
Trace generate_dataparallel(const DataParallelConfig& c, const models::ComputeModel& cm, const std::string& where);

}  // namespace fabricsim::workloads
