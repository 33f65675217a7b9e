#include "workloads/dataparallel.hpp"

#include <cmath>
#include <cstdio>

#include "models/gpu.hpp"
#include "sim/base/error.hpp"

namespace fabricsim::workloads {

DataParallelConfig dataparallel_config_from_params(const ParamMap& p, const std::string& where) {
  ParamReader r(p, where);
  DataParallelConfig c;
  c.num_parameters = r.number("num_parameters", c.num_parameters, 1);
  c.tokens_per_sample = r.integer("tokens_per_sample", c.tokens_per_sample, 1);
  c.flops_per_sample = r.number("flops_per_sample", 0, 0);
  c.global_batch_size = r.integer("global_batch_size", c.global_batch_size, 1);
  c.world_size = r.integer("world_size", c.world_size, 1);
  c.bucket_size = r.integer("bucket_size", c.bucket_size, 1);
  c.grad_bytes = r.number("grad_bytes", c.grad_bytes, 1);
  c.overlap_grad_reduce = r.boolean("overlap_grad_reduce", true);
  c.gpu = r.string("gpu", c.gpu);
  c.precision = r.string("precision", c.precision);
  r.finish();
  models::gpu_spec(c.gpu, where + " gpu");
  models::Precision pr;
  if (!models::parse_precision(c.precision, pr)) r.fail("precision", "expected fp16, bf16, tf32 or fp32");
  // Resource bounds, checked before anything is allocated (docs/reliability.md): the generator builds one
  // backward op and one all-reduce per bucket and one communicator entry per rank.
  if (c.world_size > kMaxDataParallelWorld)
    r.fail("world_size", "expected at most " + std::to_string(kMaxDataParallelWorld) + " ranks, got " +
                             std::to_string(c.world_size));
  if (c.global_batch_size > (std::int64_t{1} << 40)) r.fail("global_batch_size", "expected at most 2^40 samples");
  if (c.tokens_per_sample > (std::int64_t{1} << 24)) r.fail("tokens_per_sample", "expected at most 2^24 tokens");
  if (!(c.num_parameters <= 1e15)) r.fail("num_parameters", "expected at most 1e15 parameters");
  if (!(c.grad_bytes <= 64)) r.fail("grad_bytes", "expected at most 64 bytes per gradient element");
  const double buckets = std::ceil(c.num_parameters / double(c.bucket_size));
  if (buckets > double(kMaxDataParallelBuckets))
    r.fail("bucket_size", "gives " + std::to_string(static_cast<long long>(buckets)) + " gradient buckets for " +
                              std::to_string(static_cast<long long>(c.num_parameters)) + " parameters; at most " +
                              std::to_string(kMaxDataParallelBuckets) +
                              " are simulated (use a bucket_size of at least num_parameters / " +
                              std::to_string(kMaxDataParallelBuckets) + ")");
  if (c.global_batch_size % c.world_size)
    r.fail("global_batch_size", "must be a multiple of world_size (" + std::to_string(c.world_size) + ")");
  return c;
}

Trace generate_dataparallel(const DataParallelConfig& c, const models::ComputeModel& cm, const std::string& where) {
  const auto& gpu = models::gpu_spec(c.gpu, where + " gpu");
  // Memory: 16 bytes per parameter for mixed-precision Adam (Rajbhandari et al., ZeRO, SC'20, Sec. 3.1).
  const double mem = 16.0 * c.num_parameters;
  if (mem > gpu.hbm_capacity_bytes) {
    char buf[300];
    std::snprintf(buf, sizeof buf,
                  "model does not fit in GPU memory: %.3g parameters need %.1f GiB (16 bytes each for weights, "
                  "gradients and Adam state) but %s has %.1f GiB; use the gpt generator with model parallelism",
                  c.num_parameters, mem / 1073741824.0, gpu.name.c_str(), gpu.hbm_capacity_bytes / 1073741824.0);
    throw DoesNotFitError(where, buf);
  }
  const double per_gpu_samples = double(c.global_batch_size / c.world_size);
  const double fps = c.flops_per_sample > 0 ? c.flops_per_sample : 6.0 * c.num_parameters * double(c.tokens_per_sample);
  const double flops = fps * per_gpu_samples;
  Trace tr;
  tr.name = "dataparallel";
  tr.world_size = static_cast<std::int32_t>(c.world_size);
  tr.gpu = gpu.name;
  tr.params = {{"num_parameters", std::to_string(c.num_parameters)}, {"global_batch_size", std::to_string(c.global_batch_size)},
               {"world_size", std::to_string(c.world_size)}, {"bucket_size", std::to_string(c.bucket_size)},
               {"overlap_grad_reduce", c.overlap_grad_reduce ? "true" : "false"}, {"gpu", gpu.name}};
  Communicator comm;
  comm.name = "dp";
  for (std::int32_t r = 0; r < tr.world_size; ++r) comm.ranks.push_back(r);
  comm.category = "dp";
  tr.comms.push_back(comm);
  RankTrace rt;
  rt.rank = 0;
  rt.streams = {"compute", "comm.dp"};
  auto compute = [&](const std::string& name, double f, std::vector<std::uint32_t> deps) {
    Op op;
    op.kind = OpKind::Compute;
    op.name = name;
    op.category = "compute";
    op.flops = f;
    op.duration_s = std::llround(cm.time_s(models::OpClass::Gemm, f, 0) * 1e9) * 1e-9;
    op.deps = std::move(deps);
    rt.ops.push_back(op);
    return static_cast<std::uint32_t>(rt.ops.size() - 1);
  };
  // Forward = 1/3 of the FLOPs, backward = 2/3 (the 6N rule: 2N forward, 4N backward per token).
  std::uint32_t last = compute("forward", flops / 3.0, {});
  const std::int64_t nb = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(c.num_parameters / double(c.bucket_size))));
  std::vector<std::uint32_t> ars;
  std::vector<std::uint32_t> bwd;
  for (std::int64_t k = 0; k < nb; ++k) {
    double elems = std::min(double(c.bucket_size), c.num_parameters - double(k) * double(c.bucket_size));
    last = compute("backward.bucket" + std::to_string(k), 2.0 * flops / 3.0 * elems / c.num_parameters, {});
    bwd.push_back(last);
  }
  for (std::int64_t k = 0; k < nb; ++k) {
    double elems = std::min(double(c.bucket_size), c.num_parameters - double(k) * double(c.bucket_size));
    if (c.world_size < 2) break;
    Op op;
    op.kind = OpKind::Collective;
    op.stream = 1;
    op.name = "dp.bucket" + std::to_string(k) + ".ar";
    op.category = "dp";
    op.coll = CollOp::AllReduce;
    op.comm = 0;
    op.bytes = elems * c.grad_bytes;
    op.deps = {c.overlap_grad_reduce ? bwd[k] : bwd.back()};
    rt.ops.push_back(op);
    ars.push_back(static_cast<std::uint32_t>(rt.ops.size() - 1));
  }
  // Optimizer: Adam, memory bound, 32 bytes per parameter (see gpt.cpp for the breakdown).
  Op opt;
  opt.kind = OpKind::Compute;
  opt.name = "optimizer.step";
  opt.category = "compute";
  opt.op_class = models::OpClass::Elementwise;
  opt.duration_s = std::llround(cm.time_s(models::OpClass::Elementwise, 0, 32.0 * c.num_parameters) * 1e9) * 1e-9;
  opt.deps = ars;
  opt.deps.push_back(last);
  rt.ops.push_back(opt);
  tr.ranks.push_back(std::move(rt));
  tr.metadata["samples_per_iteration"] = double(c.global_batch_size);
  if (c.tokens_per_sample > 1) tr.metadata["tokens_per_iteration"] = double(c.global_batch_size * c.tokens_per_sample);
  tr.metadata["model_flops_per_iteration"] = fps * double(c.global_batch_size);
  tr.metadata["memory_per_gpu_bytes.max"] = mem;
  tr.notes.push_back("dataparallel: simulated rank 0 of " + std::to_string(c.world_size) +
                     "; the other ranks are symmetric stand-ins; gradient all-reduce over all ranks in " +
                     std::to_string(nb) + " buckets" + (c.overlap_grad_reduce ? " overlapped with backward" : ""));
  return tr;
}

}  // namespace fabricsim::workloads
