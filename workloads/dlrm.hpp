#pragma once
// DLRM-style recommender training step with model-parallel embedding tables and data-parallel MLPs (the
// NVIDIA Merlin distributed-embeddings / TorchRec layout):
//   [optional: host->device copy of the categorical ids, as the distributed-embeddings synthetic benchmark
//   feeds them] -> embedding lookups on the GPUs that own each table shard (for the whole global batch)
//   -> all-to-all (model parallel -> data parallel) -> interaction + MLP forward and backward on the local
//   batch -> all-to-all of embedding gradients back -> sparse embedding update (Adagrad/SGD); the MLP
//   gradient all-reduce overlaps the embedding backward. An optional framework latency (Horovod's cycle)
//   precedes each collective.
// Two planners: fabricsim's own ("auto" | "table" | "column" | "row": table-wise, column-wise (width slices)
// or row-wise (row ranges) under the per-GPU memory capacity, balancing lookup bytes) and the placement
// strategies of NVIDIA Merlin distributed-embeddings itself ("basic" | "memory_balanced" |
// "memory_optimized", with its column_slice_threshold), reproduced from the library's source
// (github:NVIDIA-Merlin/distributed-embeddings @ c6b2e2f, distributed_embeddings/python/layers/
// dist_model_parallel.py, DistEmbeddingStrategy) so that its per-GPU load imbalance is simulated as it is.
// Both report the memory they chose per GPU. All ranks are simulated (embedding load differs per GPU).
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
  // Embedding kernels: "fused" (one fused lookup kernel per shard forward, one fused backward + optimizer
  // update per shard, FBGEMM/TorchRec style) or "tensorflow" (distributed-embeddings' TensorFlow ops: per
  // input lookup, gradient, scaling; per table de-duplication and sparse update; see dlrm.cpp).
  std::string embedding_ops = "fused";
  // distributed-embeddings column_slice_threshold (elements per slice upper bound; 0 = none). Used by the
  // "basic" / "memory_balanced" / "memory_optimized" strategies only.
  std::int64_t column_slice_threshold = 0;
  double index_bytes = 8;               // bytes per categorical id (int64, as the synthetic benchmark feeds)
  // Categorical ids live in host memory and are copied host->device every step (the distributed-
  // embeddings synthetic benchmark: numpy power-law ids via tf.convert_to_tensor, see dlrm.cpp).
  bool host_input = false;
  double h2d_bandwidth_Bps = 26.28e9;   // per PCIe uplink to the CPU (see dlrm.cpp for the source)
  std::int64_t gpus_per_pcie_uplink = 2;  // GPUs sharing one uplink (DGX A100: 2 per PCIe switch)
  // Framework latency before each collective (Horovod: wait for the background thread's next cycle).
  double collective_latency_s = 0;
};

// Resource bounds, checked while reading (before anything is allocated); far above the largest published
// synthetic model (tests/data/training/distributed_embeddings_synthetic_configs.json: 2,002 tables).
constexpr std::int64_t kMaxDlrmTables = 100000;   // tables in one model
constexpr std::int64_t kMaxDlrmWorld = 65536;     // ranks (all of them are simulated)
constexpr std::int64_t kMaxDlrmShards = 10000000; // tables x ranks: the most shards a plan could make

// Reads params: model + configs (path to distributed_embeddings_synthetic_configs.json) or the defaults;
// global_batch_size, world_size, sharding, optimizer, gpu, precision, memory_fraction, embedding_ops,
// column_slice_threshold, index_bytes, host_input, h2d_bandwidth, gpus_per_pcie_uplink, collective_latency.
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
  double ids = 0;              // categorical ids this shard looks up per step (global batch)
  std::int32_t inputs = 1;     // inputs (lookups producing one pooled output each) served by this shard
};

struct ShardingPlan {
  std::vector<Shard> shards;
  std::vector<double> memory_per_gpu_bytes;
  std::vector<double> lookup_bytes_per_gpu;
  std::vector<double> output_width_per_gpu;  // pooled output floats per sample produced by each GPU
  double capacity_bytes = 0;
};

// Throws InputError(where) when the tables cannot be placed within capacity (naming the table and sizes).
// Dispatches on c.sharding: fabricsim's planner or the distributed-embeddings strategies (below).
// `per_shard_cost_bytes` adds a fixed cost per shard to the load being balanced (the per-shard kernel/op
// overhead expressed in equivalent lookup bytes), so GPUs get similar numbers of shards too.
ShardingPlan plan_sharding(const DlrmConfig& c, double capacity_bytes, const std::string& where,
                           double per_shard_cost_bytes = 0);

// distributed-embeddings' own placement (c.sharding = basic | memory_balanced | memory_optimized, with
// c.column_slice_threshold); InputError when a GPU exceeds `capacity_bytes` or there are fewer tables than
// GPUs (the library raises NotImplementedError then).
ShardingPlan plan_sharding_de(const DlrmConfig& c, double capacity_bytes, const std::string& where);

Trace generate_dlrm(const DlrmConfig& c, const models::ComputeModel& cm, const std::string& where);

}  // namespace fabricsim::workloads
