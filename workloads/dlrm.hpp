#pragma once
// DLRM-style recommender training step with model-parallel embedding tables and data-parallel MLPs (the
// NVIDIA Merlin distributed-embeddings / TorchRec layout):
//   embedding lookups on the GPUs that own each table shard (for the whole global batch)
//   -> all-to-all (model parallel -> data parallel) -> interaction + MLP forward and backward on the local
//   batch -> all-to-all of embedding gradients back -> sparse embedding update (Adagrad/SGD); the MLP
//   gradient all-reduce overlaps the embedding backward.
// The sharding planner places tables table-wise, column-wise (width slices) or row-wise (row ranges)
// under the per-GPU memory capacity, balancing lookup bytes; it reports the memory it chose per GPU.
// All ranks are simulated (embedding load differs per GPU).
#include <cstdint>
#include <string>
#include <vector>

#include "models/compute.hpp"
#include "workloads/params.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::workloads {

struct EmbeddingTable {
  std::string name;
  std::int64_t rows = 0;
  std::int64_t width = 0;             // embedding dimension
  std::vector<std::int64_t> hotness;  // one entry per input looked up in this table (lookups per sample)
  double bytes_per_element = 4;       // fp32 by default
  double size_bytes() const { return double(rows) * double(width) * bytes_per_element; }
  double lookups_per_sample() const;  // sum of hotness
};

struct DlrmConfig {
  std::string model;                    // name in the configs file ("tiny", ...) or "custom"
  std::vector<EmbeddingTable> tables;
  std::vector<std::int64_t> mlp_sizes;  // top MLP hidden sizes (a final projection to 1 is added)
  std::vector<std::int64_t> bottom_mlp_sizes;  // optional bottom MLP on the dense features
  std::int64_t num_numerical_features = 0;
  std::int64_t interact_stride = 0;     // 0 = concatenation; >0 = 1-d pooling with this stride
  std::int64_t global_batch_size = 65536;
  std::int64_t world_size = 8;
  std::string sharding = "auto";        // auto | table | column | row
  std::string optimizer = "adagrad";    // adagrad (1 extra state per element) | sgd
  std::string gpu = "a100-80gb";
  std::string precision = "tf32";       // MLP math
  double memory_fraction = 0.9;         // usable share of HBM for embeddings + state
};

// Reads params: model + configs (path to distributed_embeddings_synthetic_configs.json) or the defaults;
// global_batch_size, world_size, sharding, optimizer, gpu, precision, memory_fraction.
DlrmConfig dlrm_config_from_params(const ParamMap& p, const std::string& where);
// Loads one model from a distributed-embeddings synthetic configs file.
DlrmConfig load_dlrm_model(const std::string& configs_path, const std::string& model, const std::string& where);

struct Shard {
  std::int32_t table = 0;
  std::int32_t gpu = 0;
  std::string kind;          // "table", "column", "row"
  std::int64_t rows = 0, width = 0;
  double lookup_fraction = 1;  // share of the table's lookups this shard serves (row-wise: rows/rows_total)
  double memory_bytes = 0;     // weights + optimizer state
  double lookup_bytes = 0;     // forward gather bytes per step
};

struct ShardingPlan {
  std::vector<Shard> shards;
  std::vector<double> memory_per_gpu_bytes;
  std::vector<double> lookup_bytes_per_gpu;
  std::vector<double> output_width_per_gpu;  // pooled output floats per sample produced by each GPU
  double capacity_bytes = 0;
};

// Throws InputError(where) when the tables cannot be placed within capacity (naming the table and sizes).
// `per_shard_cost_bytes` adds a fixed cost per shard to the load being balanced (the per-shard kernel/op
// overhead expressed in equivalent lookup bytes), so GPUs get similar numbers of shards too.
ShardingPlan plan_sharding(const DlrmConfig& c, double capacity_bytes, const std::string& where,
                           double per_shard_cost_bytes = 0);

Trace generate_dlrm(const DlrmConfig& c, const models::ComputeModel& cm, const std::string& where);

}  // namespace fabricsim::workloads
