#pragma once
// Shared by the tests in tests/workloads.
#include <functional>
#include <string>

#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "sim/base/error.hpp"
#include "workloads/gpt.hpp"
#include "workloads/megatron_args.hpp"
#include "workloads/params.hpp"

// The message of the InputError `f` throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fabricsim::InputError& e) {
    return e.what();
  }
  return "";
}

namespace workloads_test {

// The default compute model of a GPU.
inline fabricsim::models::ComputeModel compute_of(const std::string& gpu) {
  fabricsim::models::ComputeModel cm;
  cm.gpu = fabricsim::models::gpu_spec(gpu);
  return cm;
}

// The default H100 compute model, built once.
inline const fabricsim::models::ComputeModel& h100() {
  static const fabricsim::models::ComputeModel m = compute_of("h100");
  return m;
}

// `base` with the entries of `over` replaced or added.
inline fabricsim::workloads::ParamMap with(fabricsim::workloads::ParamMap base,
                                          const fabricsim::workloads::ParamMap& over) {
  for (const auto& [k, v] : over) base[k] = v;
  return base;
}

// The gpt generator's trace for `p` (--param names), priced with the default compute model of its GPU.
inline fabricsim::workloads::Trace gen(const fabricsim::workloads::ParamMap& p) {
  fabricsim::workloads::GptConfig c = fabricsim::workloads::gpt_config_from_params(p, "--param");
  return fabricsim::workloads::generate_gpt(c, compute_of(c.gpu), "test");
}

// A rank's compute time: the sum of its compute ops' durations.
inline double compute_s(const fabricsim::workloads::RankTrace& r) {
  double s = 0;
  for (const auto& op : r.ops) s += op.kind == fabricsim::workloads::OpKind::Compute ? op.duration_s : 0.0;
  return s;
}

// A small Llama-shaped model on H100s: 4 layers of d 1024 (16 heads, FFN 2816), sequence 2048, vocabulary
// 32000, TP 2, PP 2, sequence parallel, no recompute, micro-batch 1, over `world` GPUs (DP = world / 4) with a
// global batch of `batch` sequences; `over` replaces or adds parameters.
inline fabricsim::workloads::ParamMap small_llama(int world, int batch, const fabricsim::workloads::ParamMap& over = {}) {
  fabricsim::workloads::ParamMap p = {
      {"num_layers", "4"},          {"hidden_size", "1024"},     {"num_attention_heads", "16"},
      {"ffn_hidden_size", "2816"},  {"seq_length", "2048"},      {"padded_vocab_size", "32000"},
      {"micro_batch_size", "1"},    {"tensor_model_parallel_size", "2"}, {"pipeline_model_parallel_size", "2"},
      {"gpu", "h100"},              {"recompute_granularity", "none"},   {"sequence_parallel", "true"}};
  p["world_size"] = std::to_string(world), p["global_batch_size"] = std::to_string(batch);
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}

// A small pretrain_gpt.py launch (4 layers of hidden 1024, sequence 2048, global batch 8, bf16) with `flags`
// appended, imported for 8 GPUs.
inline fabricsim::workloads::MegatronImport import_small(const std::string& flags) {
  using namespace fabricsim::workloads;
  return import_megatron_args(
      read_megatron_launch("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
                           "--num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
                           "--global-batch-size 8 --bf16 --padded-vocab-size 32000 " + flags,
                           "job.sh", {}),
      8, {});
}

}  // namespace workloads_test
