#include "workloads/dlrm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <utility>

#include "models/gpu.hpp"
#include "sim/base/did_you_mean.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace fabricsim::workloads {

double EmbeddingTable::lookups_per_sample() const {
  double s = 0;
  for (auto h : hotness) s += double(h);
  return s;
}

DlrmConfig load_dlrm_model(const std::string& configs_path, const std::string& model, const std::string& where) {
  Json doc = load_json_file(configs_path);
  JsonPath root{configs_path, ""};
  ObjectReader r(doc, root);
  r.raw_optional("source");
  r.raw_optional("schema_notes");
  const Json& models = r.object("models");
  r.finish();
  if (!models.contains(model)) {
    std::string known;
    std::vector<std::string> names;
    for (auto it = models.begin(); it != models.end(); ++it) known += (known.empty() ? "" : ", ") + it.key(), names.push_back(it.key());
    throw InputError(where + " model", "unknown model '" + text_excerpt(model) + "'" + did_you_mean(model, names) + " in " + configs_path +
                                           " (known: " + known.substr(0, 300) + (known.size() > 300 ? "..." : "") + ")");
  }
  JsonPath at = r.path_of("models").child(model);
  ObjectReader mr(models[model], at);
  DlrmConfig c;
  c.model = model;
  mr.string_or("name", "");
  const Json& ecs = mr.array("embedding_configs");
  int tix = 0;
  for (std::size_t i = 0; i < ecs.size(); ++i) {
    ObjectReader er(ecs[i], mr.path_of("embedding_configs").index(i));
    // Ranges before anything is allocated or multiplied (rows * width must not overflow; see dlrm.hpp).
    std::int64_t n = er.integer_in("num_tables", 1, kMaxDlrmTables);
    std::vector<std::int64_t> nnz;
    const Json& nz = er.array("nnz");
    if (nz.size() > 4096) json_fail(er.path_of("nnz"), "expected at most 4096 hotness entries");
    for (std::size_t k = 0; k < nz.size(); ++k) {
      if (!nz[k].is_number_integer() || nz[k].is_number_unsigned() && nz[k].get<std::uint64_t>() > (1u << 20) ||
          nz[k].get<std::int64_t>() < 1 || nz[k].get<std::int64_t>() > (1 << 20))
        json_fail(er.path_of("nnz").index(k), "expected a hotness in [1, 2^20]");
      nnz.push_back(nz[k].get<std::int64_t>());
    }
    std::int64_t rows = er.integer_in("num_rows", 1, std::int64_t{1} << 40);
    std::int64_t width = er.integer_in("width", 1, std::int64_t{1} << 20);
    bool shared = er.boolean_or("shared", false);
    er.finish();
    if (n < 1 || rows < 1 || width < 1 || nnz.empty()) json_fail(er.path(), "expected num_tables, num_rows, width >= 1 and a non-empty nnz");
    if (!shared && nnz.size() != 1)
      json_fail(er.path_of("nnz"), "non-shared multi-hot tables are not defined (one hotness per table expected)");
    if (static_cast<std::int64_t>(c.tables.size()) + n > kMaxDlrmTables)
      json_fail(er.path_of("num_tables"), "expected at most " + std::to_string(kMaxDlrmTables) + " tables in all");
    for (std::int64_t k = 0; k < n; ++k) {
      EmbeddingTable t;
      t.name = "t" + std::to_string(tix++);
      t.rows = rows;
      t.width = width;
      t.hotness = nnz;  // shared: one table looked up by len(nnz) inputs
      c.tables.push_back(t);
    }
  }
  const Json& mlp = mr.array("mlp_sizes");
  if (mlp.size() > 1024) json_fail(mr.path_of("mlp_sizes"), "expected at most 1024 layers");
  for (std::size_t k = 0; k < mlp.size(); ++k) {
    const Json& v = mlp[k];
    if (!v.is_number_integer() || v.is_number_unsigned() && v.get<std::uint64_t>() > (1u << 24) ||
        v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > (1 << 24))
      json_fail(mr.path_of("mlp_sizes").index(k), "expected a layer width in [1, 2^24], found " + json_excerpt(v));
    c.mlp_sizes.push_back(v.get<std::int64_t>());
  }
  c.num_numerical_features = mr.integer_in("num_numerical_features", 0, 1 << 24);
  if (mr.raw_optional("interact_stride"))  // null: no pooling
    c.interact_stride = mr.integer_in("interact_stride", 0, 1 << 24);
  for (const char* k : {"derived_num_tables", "derived_num_categorical_inputs", "derived_total_embedding_GiB_fp32"})
    mr.raw_optional(k);
  mr.finish();
  return c;
}

DlrmConfig dlrm_config_from_params(const ParamMap& p, const std::string& where) {
  ParamReader r(p, where);
  std::string model = r.string("model", "tiny");
  std::string configs = r.string("configs", "");
  if (configs.empty()) r.fail("configs", "required: path to a distributed-embeddings synthetic configs JSON "
                                         "(e.g. tests/data/training/distributed_embeddings_synthetic_configs.json)");
  DlrmConfig c = load_dlrm_model(configs, model, where);
  c.global_batch_size = r.integer("global_batch_size", c.global_batch_size, 1);
  c.world_size = r.integer("world_size", c.world_size, 1);
  c.sharding = r.string("sharding", c.sharding);
  c.optimizer = r.string("optimizer", c.optimizer);
  c.gpu = r.string("gpu", c.gpu);
  c.precision = r.string("precision", c.precision);
  c.memory_fraction = r.number("memory_fraction", c.memory_fraction, 0.01);
  c.embedding_ops = r.string("embedding_ops", c.embedding_ops);
  c.column_slice_threshold = r.integer("column_slice_threshold", c.column_slice_threshold, 0);
  c.index_bytes = r.number("index_bytes", c.index_bytes, 0);
  c.host_input = r.boolean("host_input", c.host_input);
  c.h2d_bandwidth_Bps = r.bandwidth("h2d_bandwidth", c.h2d_bandwidth_Bps);
  c.gpus_per_pcie_uplink = r.integer("gpus_per_pcie_uplink", c.gpus_per_pcie_uplink, 1);
  c.collective_latency_s = r.time("collective_latency", c.collective_latency_s);
  r.finish();
  if (c.sharding != "auto" && c.sharding != "table" && c.sharding != "column" && c.sharding != "row" &&
      c.sharding != "basic" && c.sharding != "memory_balanced" && c.sharding != "memory_optimized")
    r.fail("sharding", "expected auto, table, column, row (fabricsim's planner) or basic, memory_balanced, "
                       "memory_optimized (distributed-embeddings' strategies)");
  if (c.embedding_ops != "fused" && c.embedding_ops != "tensorflow") r.fail("embedding_ops", "expected fused or tensorflow");
  if (c.optimizer != "adagrad" && c.optimizer != "sgd") r.fail("optimizer", "expected adagrad or sgd");
  if (c.memory_fraction > 1) r.fail("memory_fraction", "expected a fraction in (0, 1]");
  if (c.global_batch_size % c.world_size) r.fail("global_batch_size", "must be a multiple of world_size");
  // Resource bounds before any allocation (dlrm.hpp): every rank is simulated, and a table is cut into at most
  // world_size column slices.
  if (c.world_size > kMaxDlrmWorld)
    r.fail("world_size", "expected at most " + std::to_string(kMaxDlrmWorld) + " ranks (every DLRM rank is simulated)");
  if (c.global_batch_size > (std::int64_t{1} << 40)) r.fail("global_batch_size", "expected at most 2^40 samples");
  if (double(c.tables.size()) * double(c.world_size) > double(kMaxDlrmShards))
    r.fail("world_size", std::to_string(c.tables.size()) + " tables on " + std::to_string(c.world_size) +
                             " ranks could make " + std::to_string(c.tables.size() * std::size_t(c.world_size)) +
                             " shards; at most " + std::to_string(kMaxDlrmShards) + " are simulated");
  if (c.index_bytes > 64) r.fail("index_bytes", "expected at most 64 bytes per id");
  models::Precision pr;
  if (!models::parse_precision(c.precision, pr)) r.fail("precision", "expected fp16, bf16, tf32 or fp32");
  models::gpu_spec(c.gpu, where + " gpu");
  return c;
}

namespace {
double state_factor(const DlrmConfig& c) { return c.optimizer == "adagrad" ? 2.0 : 1.0; }  // weights (+ accumulator)
}  // namespace

static bool is_de_strategy(const std::string& s) { return s == "basic" || s == "memory_balanced" || s == "memory_optimized"; }

ShardingPlan plan_sharding(const DlrmConfig& c, double capacity, const std::string& where,
                           double per_shard_cost_bytes) {
  if (is_de_strategy(c.sharding)) return plan_sharding_de(c, capacity, where);
  const int N = static_cast<int>(c.world_size);
  const double B = double(c.global_batch_size);
  ShardingPlan plan;
  plan.capacity_bytes = capacity;
  auto lookup_bytes = [&](const EmbeddingTable& t, std::int64_t width, double fraction) {
    return B * t.lookups_per_sample() * double(width) * t.bytes_per_element * fraction;
  };
  double total_cost = 0;
  for (const auto& t : c.tables) total_cost += lookup_bytes(t, t.width, 1.0);
  const double target = total_cost / N;
  std::vector<Shard> shards;
  for (std::size_t i = 0; i < c.tables.size(); ++i) {
    const auto& t = c.tables[i];
    const double mem = t.size_bytes() * state_factor(c);
    auto add = [&](const std::string& kind, std::int64_t rows, std::int64_t width, double frac) {
      Shard s;
      s.table = static_cast<std::int32_t>(i);
      s.kind = kind;
      s.rows = rows;
      s.width = width;
      s.lookup_fraction = frac;
      s.memory_bytes = double(rows) * double(width) * t.bytes_per_element * state_factor(c);
      s.lookup_bytes = lookup_bytes(t, width, frac);
      s.ids = B * t.lookups_per_sample() * frac;
      s.inputs = static_cast<std::int32_t>(t.hotness.size());
      shards.push_back(s);
    };
    std::string mode = c.sharding;
    if (mode == "auto") {
      // Table-wise unless the table alone exceeds the balanced load or half a GPU's capacity; then column
      // slices (the fewest that divide the width and fix it); then row-wise if slices still do not fit.
      mode = (lookup_bytes(t, t.width, 1.0) > target && N > 1) || mem > capacity / 2 ? "column" : "table";
      if (mode == "column") {
        std::int64_t k = 1;
        for (std::int64_t d = 2; d <= std::min<std::int64_t>(N, t.width); ++d)
          if (t.width % d == 0) {
            k = d;
            if (lookup_bytes(t, t.width / d, 1.0) <= target && mem / d <= capacity / 2) break;
          }
        if (mem / k > capacity / 2 || k == 1) mode = N > 1 ? "row" : "table";
        else {
          for (std::int64_t s = 0; s < k; ++s) add("column", t.rows, t.width / k, 1.0);
          continue;
        }
      }
    }
    if (mode == "table" || N == 1) {
      add("table", t.rows, t.width, 1.0);
    } else if (mode == "column") {
      std::int64_t k = 1;
      for (std::int64_t d = std::min<std::int64_t>(N, t.width); d >= 1; --d)
        if (t.width % d == 0) {
          k = d;
          break;
        }
      for (std::int64_t s = 0; s < k; ++s) add("column", t.rows, t.width / k, 1.0);
    } else {  // row
      std::int64_t base = t.rows / N, extra = t.rows % N;
      for (int g = 0; g < N; ++g) {
        std::int64_t rows = base + (g < extra ? 1 : 0);
        if (rows > 0) add("row", rows, t.width, double(rows) / double(t.rows));
      }
    }
  }
  // Greedy placement: biggest lookup cost first onto the least-loaded GPU that has memory left. Row
  // shards of one table go one per GPU (in order).
  std::vector<std::size_t> order(shards.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (shards[a].lookup_bytes != shards[b].lookup_bytes) return shards[a].lookup_bytes > shards[b].lookup_bytes;
    return shards[a].memory_bytes > shards[b].memory_bytes;
  });
  plan.memory_per_gpu_bytes.assign(N, 0);
  plan.lookup_bytes_per_gpu.assign(N, 0);
  plan.output_width_per_gpu.assign(N, 0);
  std::map<std::int32_t, int> next_row_gpu;
  std::vector<double> load(N, 0);  // lookup bytes + per-shard cost
  for (std::size_t oi : order) {
    Shard& s = shards[oi];
    int best = -1;
    if (s.kind == "row") {
      best = next_row_gpu[s.table]++ % N;
      if (plan.memory_per_gpu_bytes[best] + s.memory_bytes > capacity) best = -1;
    } else {
      for (int g = 0; g < N; ++g) {
        if (plan.memory_per_gpu_bytes[g] + s.memory_bytes > capacity) continue;
        if (best < 0 || load[g] < load[best] ||
            (load[g] == load[best] && plan.memory_per_gpu_bytes[g] < plan.memory_per_gpu_bytes[best]))
          best = g;
      }
    }
    if (best < 0) {
      const auto& t = c.tables[s.table];
      char buf[400];
      std::snprintf(buf, sizeof buf,
                    "embedding tables do not fit in GPU memory: table %s (%lld x %lld, %s shard of %.2f GiB with "
                    "optimizer state) has no GPU with room left (capacity %.1f GiB per GPU x %d GPUs, total needed "
                    "%.1f GiB); use more GPUs or sharding=row",
                    t.name.c_str(), static_cast<long long>(t.rows), static_cast<long long>(t.width), s.kind.c_str(),
                    s.memory_bytes / 1073741824.0, capacity / 1073741824.0, N,
                    [&] {
                      double tot = 0;
                      for (const auto& x : c.tables) tot += x.size_bytes() * state_factor(c);
                      return tot / 1073741824.0;
                    }());
      throw InputError(where, buf);
    }
    s.gpu = best;
    load[best] += s.lookup_bytes + per_shard_cost_bytes;
    plan.memory_per_gpu_bytes[best] += s.memory_bytes;
    plan.lookup_bytes_per_gpu[best] += s.lookup_bytes;
    plan.output_width_per_gpu[best] += double(s.width) * double(c.tables[s.table].hotness.size());
  }
  std::stable_sort(shards.begin(), shards.end(), [](const Shard& a, const Shard& b) {
    return a.gpu != b.gpu ? a.gpu < b.gpu : a.table < b.table;
  });
  plan.shards = std::move(shards);
  return plan;
}

// distributed-embeddings' placement, as DistEmbeddingStrategy does it (github:NVIDIA-Merlin/distributed-
// embeddings @ c6b2e2f, the commit whose synthetic-model step times the README still reports;
// distributed_embeddings/python/layers/dist_model_parallel.py):
//  - world size 1: every table on the one GPU, unsliced.
//  - maybe_slice_table_column: a table of rows*width elements above column_slice_threshold is cut into
//    N column slices, N = the smallest power of 2 that brings rows*width/N under the threshold, capped at
//    the world size and the width; the first width%N slices get one extra column.
//  - apply_stragety over all slices (size = rows*width elements):
//      basic:            round robin of the slices in table order;
//      memory_balanced:  slices sorted by (size, table id) descending; GPU i takes sorted[i::2N] and
//                        sorted[2N-1-i::2N] (equal slice counts, sizes paired large/small);
//      memory_optimized: largest first onto the GPU with the least total size (ties: Python list order).
//  - every input of a table is looked up by each of its slices (input_table_map), so a slice serves all
//    of its table's inputs for the global batch (model-parallel input, dp_input=False in the benchmark).
// The library does not check memory; here a GPU above capacity is an InputError (it would run out of
// memory), and fewer tables than GPUs is one too (the library raises NotImplementedError).
ShardingPlan plan_sharding_de(const DlrmConfig& c, double capacity, const std::string& where) {
  const int N = static_cast<int>(c.world_size);
  const double B = double(c.global_batch_size);
  if (N > 1 && c.tables.size() < static_cast<std::size_t>(N))
    throw InputError(where + " sharding", "distributed-embeddings needs at least as many tables as GPUs (" +
                                              std::to_string(c.tables.size()) + " tables, " + std::to_string(N) +
                                              " GPUs)");
  struct Piece {
    std::int64_t size = 0;  // elements
    std::int32_t table = 0;
    std::int64_t width = 0;
    bool sliced = false;
  };
  std::vector<Piece> pieces;  // in table order, slices of a table adjacent
  for (std::size_t i = 0; i < c.tables.size(); ++i) {
    const auto& t = c.tables[i];
    std::int64_t k = 1;
    if (N > 1 && c.column_slice_threshold > 0) {
      double size = double(t.rows) * double(t.width);
      while (size > double(c.column_slice_threshold)) {
        k *= 2;
        size /= 2;
      }
      k = std::min<std::int64_t>({k, N, t.width});
    }
    for (std::int64_t s = 0; s < k; ++s) {
      std::int64_t w = t.width / k + (s < t.width % k ? 1 : 0);
      pieces.push_back({t.rows * w, static_cast<std::int32_t>(i), w, k > 1});
    }
  }
  std::vector<std::vector<std::size_t>> per_gpu(N);  // indices into pieces, in the library's order
  if (N == 1) {
    for (std::size_t p = 0; p < pieces.size(); ++p) per_gpu[0].push_back(p);
  } else if (c.sharding == "basic") {
    for (std::size_t p = 0; p < pieces.size(); ++p) per_gpu[p % N].push_back(p);
  } else {
    std::vector<std::size_t> sorted(pieces.size());
    std::iota(sorted.begin(), sorted.end(), 0);
    // Python sorted(zip(sizes, ids)): ascending by (size, table id); slices of one table compare equal and
    // keep their order (stable sort).
    std::stable_sort(sorted.begin(), sorted.end(), [&](std::size_t a, std::size_t b) {
      if (pieces[a].size != pieces[b].size) return pieces[a].size < pieces[b].size;
      return pieces[a].table < pieces[b].table;
    });
    if (c.sharding == "memory_balanced") {
      std::reverse(sorted.begin(), sorted.end());  // reverse=True
      const std::size_t M = sorted.size(), step = 2 * static_cast<std::size_t>(N);
      for (int i = 0; i < N; ++i) {
        for (std::size_t k = static_cast<std::size_t>(i); k < M; k += step) per_gpu[i].push_back(sorted[k]);
        for (std::size_t k = step - 1 - static_cast<std::size_t>(i); k < M; k += step) per_gpu[i].push_back(sorted[k]);
      }
    } else {  // memory_optimized: pop the largest onto res[0], then re-sort res by (total, table ids)
      std::vector<std::pair<std::pair<std::int64_t, std::vector<std::int32_t>>, std::vector<std::size_t>>> res(N);
      for (std::size_t k = sorted.size(); k-- > 0;) {
        const Piece& pc = pieces[sorted[k]];
        res[0].first.first += pc.size;
        res[0].first.second.push_back(pc.table);
        res[0].second.push_back(sorted[k]);
        std::stable_sort(res.begin(), res.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      for (int i = 0; i < N; ++i) per_gpu[i] = res[i].second;
    }
  }
  ShardingPlan plan;
  plan.capacity_bytes = capacity;
  plan.memory_per_gpu_bytes.assign(N, 0);
  plan.lookup_bytes_per_gpu.assign(N, 0);
  plan.output_width_per_gpu.assign(N, 0);
  for (int g = 0; g < N; ++g) {
    for (std::size_t p : per_gpu[g]) {
      const Piece& pc = pieces[p];
      const auto& t = c.tables[pc.table];
      Shard s;
      s.table = pc.table;
      s.gpu = g;
      s.kind = pc.sliced ? "column" : "table";
      s.rows = t.rows;
      s.width = pc.width;
      s.memory_bytes = double(t.rows) * double(pc.width) * t.bytes_per_element * state_factor(c);
      s.ids = B * t.lookups_per_sample();
      s.lookup_bytes = s.ids * double(pc.width) * t.bytes_per_element;
      s.inputs = static_cast<std::int32_t>(t.hotness.size());
      plan.memory_per_gpu_bytes[g] += s.memory_bytes;
      plan.lookup_bytes_per_gpu[g] += s.lookup_bytes;
      plan.output_width_per_gpu[g] += double(s.width) * double(s.inputs);
      plan.shards.push_back(s);
    }
    if (plan.memory_per_gpu_bytes[g] > capacity) {
      char buf[400];
      std::snprintf(buf, sizeof buf,
                    "embedding tables do not fit in GPU memory: distributed-embeddings strategy '%s' puts %.1f GiB "
                    "(weights and optimizer state) on GPU %d, capacity %.1f GiB; set column_slice_threshold "
                    "(elements per slice) or use more GPUs",
                    c.sharding.c_str(), plan.memory_per_gpu_bytes[g] / 1073741824.0, g, capacity / 1073741824.0);
      throw InputError(where, buf);
    }
  }
  return plan;
}

namespace {

// generate_dlrm in layers: model description (the MLP stack of the configuration) -> placement (the
// sharding plan and what each GPU looks up) -> per-GPU kernels (embedding forward / backward bytes and
// kernel counts) -> schedule (one step: lookup, all-to-all, interaction, MLPs, gradient exchange, update)
// -> trace.

// Model description: bottom + top MLP layers (in, out) and their per-GPU work for Bl samples (fp32).
struct DlrmMlp {
  double emb_width = 0, feat = 0;
  std::vector<std::pair<double, double>> layers;  // (in, out)
  double params = 0, flops_fwd = 0, bytes_fwd = 0;
  double kernels() const { return double(layers.size()); }
};
DlrmMlp dlrm_mlp(const DlrmConfig& c, double Bl) {
  DlrmMlp M;
  for (const auto& t : c.tables) M.emb_width += double(t.width) * double(t.hotness.size());
  double dense = double(c.num_numerical_features);
  if (!c.bottom_mlp_sizes.empty()) {
    double in = dense;
    for (auto s : c.bottom_mlp_sizes) {
      M.layers.push_back({in, double(s)});
      in = double(s);
    }
    dense = in;
  }
  M.feat = M.emb_width + dense;
  if (c.interact_stride > 0) M.feat = std::ceil(M.feat / double(c.interact_stride));
  {
    double in = M.feat;
    for (auto s : c.mlp_sizes) {
      M.layers.push_back({in, double(s)});
      in = double(s);
    }
    M.layers.push_back({in, 1.0});
  }
  for (const auto& [in, out] : M.layers) {
    M.params += in * out + out;
    M.flops_fwd += 2.0 * Bl * in * out;
    M.bytes_fwd += 4.0 * (in * out + Bl * (in + out));
  }
  return M;
}

// Placement: per GPU the ids it looks up, its input features and table shards (from the sharding plan).
struct DlrmPlacement {
  std::vector<double> ids, inputs, shards;
};
DlrmPlacement dlrm_placement(const ShardingPlan& plan, int N) {
  DlrmPlacement P;
  P.ids.assign(N, 0), P.inputs.assign(N, 0), P.shards.assign(N, 0);
  for (const auto& s : plan.shards) {
    P.ids[s.gpu] += s.ids;
    P.inputs[s.gpu] += s.inputs;
    P.shards[s.gpu] += 1;
  }
  return P;
}

// Host->device copy of the categorical ids (host_input): the distributed-embeddings synthetic benchmark
// (c6b2e2f examples/benchmarks/synthetic_models/synthetic_models.py, gen_power_law_data; main.py default
// alpha 1.05) builds the ids with numpy (int64) and tf.convert_to_tensor, i.e. host tensors that the
// GPU lookups copy in every step (convert_to_tensor creates the eager tensor on the CPU device, even
// under tf.device("GPU"): github:tensorflow/tensorflow issue #42242, TF 2.3).
// Default h2d_bandwidth 26.28 GB/s: measured nvbandwidth host-to-device on A100 (ND A100 v4),
// /work/shared/data/hardware/hardware_specs.json facts[12]. The uplink is shared by the GPUs behind one
// PCIe switch (gpus_per_pcie_uplink consecutive ranks; 2 on DGX A100 as in the dgx-a100 preset's PCIe
// tree), all starting their copies with the step: fair sharing, so a GPU's copy ends when
//   t_i = t_(i-1) + (bytes_i - bytes_(i-1)) * (GPUs still copying) / bandwidth   (bytes sorted ascending).
std::vector<double> dlrm_h2d_seconds(const DlrmConfig& c, const std::vector<double>& ids, int N) {
  std::vector<double> h2d_s(N, 0);
  if (!c.host_input) return h2d_s;
  const int G = static_cast<int>(std::min<std::int64_t>(N, c.gpus_per_pcie_uplink));
  for (int first = 0; first < N; first += G) {
    std::vector<std::pair<double, int>> grp;
    for (int g = first; g < std::min(N, first + G); ++g) grp.push_back({ids[g] * c.index_bytes, g});
    std::sort(grp.begin(), grp.end());
    double t = 0, prev = 0;
    for (std::size_t i = 0; i < grp.size(); ++i) {
      t += (grp[i].first - prev) * double(grp.size() - i) / c.h2d_bandwidth_Bps;
      prev = grp[i].first;
      h2d_s[grp[i].second] = t;
    }
  }
  return h2d_s;
}

// Per-GPU embedding kernels: bytes and kernel counts of the forward lookup and the backward + update.
// Embedding kernels and bytes per GPU (distributed-embeddings with a sum combiner, TensorFlow ops):
//  forward, per local input: ReadVariableNoCopy + EmbeddingLookupConstantHotness (embedding.py,
//    embedding_lookup_ops.py): reads the ids (index_bytes each) and the gathered rows, writes the pooled
//    [B x width] output.
//  backward, per local input: EmbeddingLookupConstantHotnessGrad writes one gradient row per id (an
//    IndexedSlices, not a dense gradient), DistributedGradientTape scales it by 1/world size (read +
//    write, dist_model_parallel.py), plus a reshape of the ids; per table shard (one variable): the Keras
//    optimizer's sparse path de-duplicates the ids (Unique + UnsortedSegmentSum: reads the ids and the
//    gradient rows) and applies ResourceSparseApplyAdagradV2 to the unique rows. With the benchmark's
//    power-law ids (alpha 1.05) the unique rows are a minority of the ids; their update is not
//    counted separately (the fitted embedding memory efficiency absorbs it).
//  So: forward = ids*index_bytes + gathered bytes + pooled outputs, 2 ops per input; backward = pooled
//  gradient + 4 x gathered bytes (write, scale r+w, segment-sum read) + ids*index_bytes, 3 ops per
//  input + 3 per table shard.
// "fused" (fabricsim's default): one fused lookup kernel per shard forward; one fused backward +
// optimizer per shard that reads the pooled gradient and reads + writes each gathered row and its
// optimizer state in place (Adagrad: weight + accumulator = 4 x gathered bytes, SGD: 2 x).
struct DlrmEmbeddingWork {
  double idx_bytes = 0, fwd_bytes = 0, bwd_bytes = 0;
  int fwd_ops = 1, bwd_ops = 1;
};
DlrmEmbeddingWork dlrm_embedding_work(const DlrmConfig& c, const ShardingPlan& plan, const DlrmPlacement& P, double B,
                                      int g) {
  DlrmEmbeddingWork w;
  const double gathered = plan.lookup_bytes_per_gpu[g];
  const double out_bytes = B * plan.output_width_per_gpu[g] * 4.0;
  w.idx_bytes = P.ids[g] * c.index_bytes;
  const bool tf_ops = c.embedding_ops == "tensorflow";
  w.fwd_ops = tf_ops ? std::max(1, static_cast<int>(2 * P.inputs[g])) : std::max(1, static_cast<int>(P.shards[g]));
  w.bwd_ops = tf_ops ? std::max(1, static_cast<int>(3 * P.inputs[g] + 3 * P.shards[g]))
                     : 2 * std::max(1, static_cast<int>(P.shards[g]));
  w.fwd_bytes = tf_ops ? w.idx_bytes + gathered + out_bytes : gathered + out_bytes;
  w.bwd_bytes = tf_ops ? out_bytes + 4.0 * gathered + w.idx_bytes
                       : (c.optimizer == "adagrad" ? 4.0 : 2.0) * gathered + out_bytes;
  return w;
}

}  // namespace

Trace generate_dlrm(const DlrmConfig& c, const models::ComputeModel& cm_in, const std::string& where) {
  models::ComputeModel cm = cm_in;
  cm.gpu = models::gpu_spec(c.gpu, where + " gpu");
  models::parse_precision(c.precision, cm.precision);
  const int N = static_cast<int>(c.world_size);
  const double B = double(c.global_batch_size), Bl = B / N;
  // Model: MLP parameters and FLOPs (fp32 weights, 4 bytes).
  const DlrmMlp mlp = dlrm_mlp(c, Bl);
  const double emb_width = mlp.emb_width, feat = mlp.feat, mlp_params = mlp.params, mlp_flops_fwd = mlp.flops_fwd,
               mlp_bytes_fwd = mlp.bytes_fwd, mlp_kernels = mlp.kernels();
  // Memory: weights + optimizer state of embeddings, plus MLP weights/state (4 copies: weight, grad, 2 state).
  const double capacity = cm.gpu.hbm_capacity_bytes * c.memory_fraction - 4.0 * 4.0 * mlp_params;
  // The MLPs alone beyond a GPU: said as such (the planner would report a negative room for the first table).
  if (!(capacity > 0)) {
    char buf[300];
    std::snprintf(buf, sizeof buf,
                  "the MLPs of model '%s' do not fit in GPU memory: %.4g parameters need %.1f GiB per GPU (weights, "
                  "gradients and two optimizer states in fp32) but %s has %.1f GiB x memory_fraction %.2f",
                  c.model.substr(0, 60).c_str(), mlp_params, 16.0 * mlp_params / 1073741824.0, cm.gpu.name.c_str(),
                  cm.gpu.hbm_capacity_bytes / 1073741824.0, c.memory_fraction);
    throw InputError(where, buf);
  }
  // fabricsim's planner balances lookup time plus a per-shard overhead (the 3 per-shard optimizer ops of the
  // backward, see below), in equivalent bytes.
  const double shard_cost = 3.0 * cm.eff.kernel_overhead_s * cm.gpu.hbm_bandwidth_Bps * cm.eff.mem_eff(models::OpClass::Embedding);
  ShardingPlan plan = plan_sharding(c, capacity, where, shard_cost);

  Trace tr;
  tr.name = "dlrm";
  tr.world_size = static_cast<std::int32_t>(N);
  tr.gpu = cm.gpu.name;
  tr.params = {{"model", c.model}, {"global_batch_size", std::to_string(c.global_batch_size)},
               {"world_size", std::to_string(N)}, {"sharding", c.sharding}, {"optimizer", c.optimizer},
               {"gpu", cm.gpu.name}, {"precision", c.precision}, {"tables", std::to_string(c.tables.size())},
               {"embedding_ops", c.embedding_ops}};
  Communicator world;
  world.name = "world";
  for (int g = 0; g < N; ++g) world.ranks.push_back(g);
  world.category = "all_to_all";
  tr.comms.push_back(world);
  Communicator dp = world;
  dp.name = "dp";
  dp.category = "dp";
  tr.comms.push_back(dp);
  double max_out = 0;
  for (double w : plan.output_width_per_gpu) max_out = std::max(max_out, w);
  // all_to_all bytes (NCCL convention: each rank's send buffer). distributed-embeddings calls
  // hvd.alltoall on each GPU's concatenated outputs [B x local widths] with equal splits (dist_model_parallel.py
  // _call_base), so sizes differ per GPU; the trace's collective has one size, the larger of the busiest
  // sender's (B x its widths) and the receive side (B/N samples x all widths).
  const double a2a_bytes = std::max(B * max_out * 4.0, Bl * emb_width * 4.0);
  // Placement: per-GPU embedding work from the plan, host->device id copies.
  const DlrmPlacement place = dlrm_placement(plan, N);
  const std::vector<double>& ids = place.ids;
  const std::vector<double> h2d_s = dlrm_h2d_seconds(c, ids, N);
  for (int g = 0; g < N; ++g) {
    RankTrace rt;
    rt.rank = g;
    rt.streams = {"compute", "comm.a2a", "comm.dp"};
    if (c.host_input) rt.streams.push_back("copy.h2d");
    auto add = [&](Op op) {
      rt.ops.push_back(std::move(op));
      return static_cast<std::uint32_t>(rt.ops.size() - 1);
    };
    auto comp = [&](const std::string& name, models::OpClass cls, double flops, double bytes, int kernels,
                    std::vector<std::uint32_t> deps) {
      Op op;
      op.kind = OpKind::Compute;
      op.name = name;
      op.category = "compute";
      op.op_class = cls;
      op.flops = flops;
      op.duration_s = std::llround(cm.time_s(cls, flops, bytes, kernels) * 1e9) * 1e-9;
      op.deps = std::move(deps);
      return add(op);
    };
    auto fixed = [&](const std::string& name, std::uint16_t stream, double seconds, std::vector<std::uint32_t> deps) {
      Op op;
      op.kind = OpKind::Compute;
      op.stream = stream;
      op.name = name;
      op.category = "compute";
      op.duration_s = std::llround(seconds * 1e9) * 1e-9;
      op.deps = std::move(deps);
      return add(op);
    };
    auto coll = [&](const std::string& name, CollOp k, std::int32_t comm, double bytes, std::uint16_t stream,
                    const char* cat, std::vector<std::uint32_t> deps) {
      // Framework latency first (collective_latency), on the collective's stream so it delays only the
      // collective. For distributed-embeddings this is Horovod (hvd.alltoall / DistributedGradientTape in
      // dist_model_parallel.py): a collective runs from Horovod's background thread, which cycles every
      // HOROVOD_CYCLE_TIME (default 1 ms since Horovod v0.21.0, changelog "Changed default cycle time from
      // 5ms to 1ms"), so it waits half a cycle on average (0.5 ms, dlrm_fit.json).
      if (c.collective_latency_s > 0) deps = {fixed("framework.wait." + name, stream, c.collective_latency_s, std::move(deps))};
      Op op;
      op.kind = OpKind::Collective;
      op.stream = stream;
      op.name = name;
      op.category = cat;
      op.coll = k;
      op.comm = comm;
      op.bytes = bytes;
      op.deps = std::move(deps);
      return add(op);
    };
    // Per-GPU kernels, then the step's schedule.
    const DlrmEmbeddingWork ew = dlrm_embedding_work(c, plan, place, B, g);
    const double idx_bytes = ew.idx_bytes, fwd_bytes = ew.fwd_bytes, bwd_bytes = ew.bwd_bytes;
    const int fwd_ops = ew.fwd_ops, bwd_ops = ew.bwd_ops;
    std::vector<std::uint32_t> first_deps;
    if (c.host_input && idx_bytes > 0)
      first_deps.push_back(fixed("input.h2d", 3, h2d_s[g], {}));
    auto e_f = comp("embedding.fwd", models::OpClass::Embedding, 0, fwd_bytes, fwd_ops, first_deps);
    std::uint32_t last = e_f;
    if (N > 1) last = coll("embedding.fwd.all_to_all", CollOp::AllToAll, 0, a2a_bytes, 1, "all_to_all", {e_f});
    last = comp("interaction.fwd", models::OpClass::Elementwise, 0, 2.0 * 4.0 * Bl * feat, 1, {last});
    last = comp("mlp.fwd", models::OpClass::Gemm, mlp_flops_fwd, mlp_bytes_fwd, static_cast<int>(2 * mlp_kernels), {last});
    last = comp("mlp.bwd", models::OpClass::Gemm, 2.0 * mlp_flops_fwd, 2.0 * mlp_bytes_fwd, static_cast<int>(3 * mlp_kernels), {last});
    std::uint32_t mlp_done = last;
    last = comp("interaction.bwd", models::OpClass::Elementwise, 0, 2.0 * 4.0 * Bl * feat, 1, {last});
    if (N > 1) last = coll("embedding.bwd.all_to_all", CollOp::AllToAll, 0, a2a_bytes, 1, "all_to_all", {last});
    last = comp("embedding.bwd_update", models::OpClass::Embedding, 0, bwd_bytes, bwd_ops, {last});
    std::vector<std::uint32_t> fin = {last};
    if (N > 1) fin.push_back(coll("mlp.grad.all_reduce", CollOp::AllReduce, 1, 4.0 * mlp_params, 2, "dp", {mlp_done}));
    comp("mlp.optimizer", models::OpClass::Elementwise, 0, 4.0 * 4.0 * 3.0 * mlp_params, 1, fin);
    tr.ranks.push_back(std::move(rt));
  }
  double mx = 0, mn = 1e300, sum = 0;
  for (double m : plan.memory_per_gpu_bytes) {
    mx = std::max(mx, m);
    mn = std::min(mn, m);
    sum += m;
  }
  tr.metadata["samples_per_iteration"] = B;
  tr.metadata["model_flops_per_iteration"] = 3.0 * mlp_flops_fwd * N;
  tr.metadata["memory_per_gpu_bytes.max"] = mx;
  tr.metadata["memory_per_gpu_bytes.min"] = mn;
  tr.metadata["memory_per_gpu_bytes.mean"] = sum / N;
  tr.metadata["embedding_shards"] = double(plan.shards.size());
  tr.metadata["all_to_all_bytes"] = a2a_bytes;
  tr.metadata["embedding_ids_per_gpu.max"] = *std::max_element(ids.begin(), ids.end());
  if (N <= 64)
    for (int g = 0; g < N; ++g) tr.metadata["memory_per_gpu_bytes.gpu" + std::to_string(g)] = plan.memory_per_gpu_bytes[g];
  tr.notes.push_back("dlrm: all " + std::to_string(N) + " ranks simulated; " + std::to_string(c.tables.size()) +
                     " tables placed as " + std::to_string(plan.shards.size()) + " shards (sharding=" + c.sharding +
                     "); per-GPU embedding memory max " + std::to_string(mx / 1073741824.0) + " GiB");
  if (c.host_input)
    tr.notes.push_back("dlrm: categorical ids (" + std::to_string(static_cast<int>(c.index_bytes)) +
                       " bytes each) copied host->device every step, " + format_bandwidth(c.h2d_bandwidth_Bps) +
                       " per PCIe uplink shared by " + std::to_string(std::min<std::int64_t>(N, c.gpus_per_pcie_uplink)) +
                       " GPUs (op input.h2d, counted as compute in the breakdown)");
  if (c.collective_latency_s > 0)
    tr.notes.push_back("dlrm: framework latency " + format_time(c.collective_latency_s) +
                       " before each collective (ops framework.wait.*, counted as compute in the breakdown)");
  return tr;
}

}  // namespace fabricsim::workloads
