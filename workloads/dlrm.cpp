#include "workloads/dlrm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "models/gpu.hpp"
#include "sim/base/error.hpp"

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
    for (auto it = models.begin(); it != models.end(); ++it) known += (known.empty() ? "" : ", ") + it.key();
    throw InputError(where + " model", "unknown model '" + model + "' in " + configs_path + " (known: " + known + ")");
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
    std::int64_t n = er.integer("num_tables");
    std::vector<std::int64_t> nnz;
    const Json& nz = er.array("nnz");
    for (std::size_t k = 0; k < nz.size(); ++k) {
      if (!nz[k].is_number_integer() || nz[k].get<std::int64_t>() < 1)
        json_fail(er.path_of("nnz").index(k), "expected a hotness >= 1");
      nnz.push_back(nz[k].get<std::int64_t>());
    }
    std::int64_t rows = er.integer("num_rows"), width = er.integer("width");
    bool shared = er.boolean_or("shared", false);
    er.finish();
    if (n < 1 || rows < 1 || width < 1 || nnz.empty()) json_fail(er.path(), "expected num_tables, num_rows, width >= 1 and a non-empty nnz");
    if (!shared && nnz.size() != 1)
      json_fail(er.path_of("nnz"), "non-shared multi-hot tables are not defined (one hotness per table expected)");
    for (std::int64_t k = 0; k < n; ++k) {
      EmbeddingTable t;
      t.name = "t" + std::to_string(tix++);
      t.rows = rows;
      t.width = width;
      t.hotness = nnz;  // shared: one table looked up by len(nnz) inputs
      c.tables.push_back(t);
    }
  }
  for (const auto& v : mr.array("mlp_sizes")) c.mlp_sizes.push_back(v.get<std::int64_t>());
  c.num_numerical_features = mr.integer("num_numerical_features");
  if (const Json* s = mr.raw_optional("interact_stride")) c.interact_stride = s->get<std::int64_t>();
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
  r.finish();
  if (c.sharding != "auto" && c.sharding != "table" && c.sharding != "column" && c.sharding != "row")
    r.fail("sharding", "expected auto, table, column or row");
  if (c.optimizer != "adagrad" && c.optimizer != "sgd") r.fail("optimizer", "expected adagrad or sgd");
  if (c.memory_fraction > 1) r.fail("memory_fraction", "expected a fraction in (0, 1]");
  if (c.global_batch_size % c.world_size) r.fail("global_batch_size", "must be a multiple of world_size");
  models::Precision pr;
  if (!models::parse_precision(c.precision, pr)) r.fail("precision", "expected fp16, bf16, tf32 or fp32");
  models::gpu_spec(c.gpu, where + " gpu");
  return c;
}

namespace {
double state_factor(const DlrmConfig& c) { return c.optimizer == "adagrad" ? 2.0 : 1.0; }  // weights (+ accumulator)
}  // namespace

ShardingPlan plan_sharding(const DlrmConfig& c, double capacity, const std::string& where,
                           double per_shard_cost_bytes) {
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

Trace generate_dlrm(const DlrmConfig& c, const models::ComputeModel& cm_in, const std::string& where) {
  models::ComputeModel cm = cm_in;
  cm.gpu = models::gpu_spec(c.gpu, where + " gpu");
  models::parse_precision(c.precision, cm.precision);
  const int N = static_cast<int>(c.world_size);
  const double B = double(c.global_batch_size), Bl = B / N;
  // MLP parameters and FLOPs (fp32 weights, 4 bytes).
  double emb_width = 0;
  for (const auto& t : c.tables) emb_width += double(t.width) * double(t.hotness.size());
  double dense = double(c.num_numerical_features);
  std::vector<std::pair<double, double>> layers;  // (in, out)
  if (!c.bottom_mlp_sizes.empty()) {
    double in = dense;
    for (auto s : c.bottom_mlp_sizes) {
      layers.push_back({in, double(s)});
      in = double(s);
    }
    dense = in;
  }
  double feat = emb_width + dense;
  if (c.interact_stride > 0) feat = std::ceil(feat / double(c.interact_stride));
  {
    double in = feat;
    for (auto s : c.mlp_sizes) {
      layers.push_back({in, double(s)});
      in = double(s);
    }
    layers.push_back({in, 1.0});
  }
  double mlp_params = 0, mlp_flops_fwd = 0, mlp_bytes_fwd = 0;
  for (const auto& [in, out] : layers) {
    mlp_params += in * out + out;
    mlp_flops_fwd += 2.0 * Bl * in * out;
    mlp_bytes_fwd += 4.0 * (in * out + Bl * (in + out));
  }
  const double mlp_kernels = double(layers.size());
  // Memory: weights + optimizer state of embeddings, plus MLP weights/state (4 copies: weight, grad, 2 state).
  const double capacity = cm.gpu.hbm_capacity_bytes * c.memory_fraction - 4.0 * 4.0 * mlp_params;
  // Balance lookup time plus per-shard overhead (3 kernels per shard per step, see below), in bytes.
  const double shard_cost = 3.0 * cm.eff.kernel_overhead_s * cm.gpu.hbm_bandwidth_Bps * cm.eff.mem_eff(models::OpClass::Embedding);
  ShardingPlan plan = plan_sharding(c, capacity, where, shard_cost);

  Trace tr;
  tr.name = "dlrm";
  tr.world_size = static_cast<std::int32_t>(N);
  tr.gpu = cm.gpu.name;
  tr.params = {{"model", c.model}, {"global_batch_size", std::to_string(c.global_batch_size)},
               {"world_size", std::to_string(N)}, {"sharding", c.sharding}, {"optimizer", c.optimizer},
               {"gpu", cm.gpu.name}, {"precision", c.precision}, {"tables", std::to_string(c.tables.size())}};
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
  // all_to_all bytes (NCCL convention: each rank's send buffer): the busiest sender's pooled outputs for
  // the global batch, or the receive side (B/N samples x all outputs), whichever is larger.
  const double a2a_bytes = std::max(B * max_out * 4.0, Bl * emb_width * 4.0);
  std::vector<int> shards_per_gpu(N, 0);
  for (const auto& s : plan.shards) ++shards_per_gpu[s.gpu];
  const double upd_factor = c.optimizer == "adagrad" ? 4.0 : 2.0;  // read+write weight (+ accumulator) per gathered element
  for (int g = 0; g < N; ++g) {
    RankTrace rt;
    rt.rank = g;
    rt.streams = {"compute", "comm.a2a", "comm.dp"};
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
    auto coll = [&](const std::string& name, CollOp k, std::int32_t comm, double bytes, std::uint16_t stream,
                    const char* cat, std::vector<std::uint32_t> deps) {
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
    const double lb = plan.lookup_bytes_per_gpu[g];
    const double out_bytes = B * plan.output_width_per_gpu[g] * 4.0;
    const int ks = std::max(1, shards_per_gpu[g]);
    auto e_f = comp("embedding.fwd", models::OpClass::Embedding, 0, lb + out_bytes, ks, {});
    std::uint32_t last = e_f;
    if (N > 1) last = coll("embedding.fwd.all_to_all", CollOp::AllToAll, 0, a2a_bytes, 1, "all_to_all", {e_f});
    last = comp("interaction.fwd", models::OpClass::Elementwise, 0, 2.0 * 4.0 * Bl * feat, 1, {last});
    last = comp("mlp.fwd", models::OpClass::Gemm, mlp_flops_fwd, mlp_bytes_fwd, static_cast<int>(2 * mlp_kernels), {last});
    last = comp("mlp.bwd", models::OpClass::Gemm, 2.0 * mlp_flops_fwd, 2.0 * mlp_bytes_fwd, static_cast<int>(3 * mlp_kernels), {last});
    std::uint32_t mlp_done = last;
    last = comp("interaction.bwd", models::OpClass::Elementwise, 0, 2.0 * 4.0 * Bl * feat, 1, {last});
    if (N > 1) last = coll("embedding.bwd.all_to_all", CollOp::AllToAll, 0, a2a_bytes, 1, "all_to_all", {last});
    last = comp("embedding.bwd_update", models::OpClass::Embedding, 0, upd_factor * lb + out_bytes, 2 * ks, {last});
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
  if (N <= 64)
    for (int g = 0; g < N; ++g) tr.metadata["memory_per_gpu_bytes.gpu" + std::to_string(g)] = plan.memory_per_gpu_bytes[g];
  tr.notes.push_back("dlrm: all " + std::to_string(N) + " ranks simulated; " + std::to_string(c.tables.size()) +
                     " tables placed as " + std::to_string(plan.shards.size()) + " shards (sharding=" + c.sharding +
                     "); per-GPU embedding memory max " + std::to_string(mx / 1073741824.0) + " GiB");
  return tr;
}

}  // namespace fabricsim::workloads
