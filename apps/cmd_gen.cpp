// fabricsim gen gpt|dlrm|dp [--param k=v]... -o trace.json: write a workload trace (docs/trace.schema.json).
#include <iostream>

#include "apps/cli.hpp"
#include "models/compute.hpp"
#include "models/gpu.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "workloads/gpt.hpp"
#include "workloads/gpt_models.hpp"
#include "workloads/scenario.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::cli {

int cmd_gen(int argc, char** argv) {
  Args args("gen", "gpt|dlrm|dp [--param key=value]... -o trace.json",
            "Generate a workload trace. Parameters (docs/workloads.md):\n"
            "  gpt: model (" + workloads::gpt_model_names() + ") and Megatron-LM\n"
            "       argument names (num_layers, hidden_size, num_attention_heads, num_query_groups, swiglu,\n"
            "       seq_length, micro_batch_size, global_batch_size, tensor_model_parallel_size,\n"
            "       pipeline_model_parallel_size, context_parallel_size, sequence_parallel, attention_backend,\n"
            "       precision, fp8_recipe, recompute_granularity, use_distributed_optimizer, tp_comm_overlap,\n"
            "       use_torch_fsdp2, ...; the full list in docs/workloads.md), world_size, gpu, gpus_per_host.\n"
            "       Defaults (GPT-3 175B's; a model sets its shape, not its layout): " + workloads::gpt_defaults_text() +
            "; world_size 1024 here, the topology's GPUs in a scenario\n"
            "  dlrm: configs (distributed-embeddings synthetic configs JSON), model, global_batch_size,\n"
            "       world_size, sharding (auto|table|column|row), optimizer, gpu, precision\n"
            "  dp: num_parameters, tokens_per_sample, flops_per_sample, global_batch_size, world_size,\n"
            "       bucket_size, overlap_grad_reduce, gpu");
  args.flag({"--param", "-p", "KEY=VALUE", "generator parameter (repeatable)", "", true});
  args.flag({"--output", "-o", "FILE", "trace file to write", ""});
  args.flag({"--compute-preset", "", "NAME",
             "compute efficiencies for the kernel durations: default (cited hardware defaults) or megatron-sc21 "
             "(fitted to Megatron-LM's measured GPT throughput; docs/workloads.md)",
             "default"});
  args.list_flag(Args::kCompute | Args::kModels);
  if (!args.parse(argc, argv)) return 0;
  if (args.positional().size() != 1) throw InputError("fabricsim gen", "expected one generator: gpt, dlrm or dp");
  if (!args.has("--output")) throw InputError("--output", "required: the trace file to write");
  std::string gen = args.positional()[0];
  if (gen == "dp") gen = "dataparallel";
  if (gen != "gpt" && gen != "dlrm" && gen != "dataparallel")
    throw InputError("fabricsim gen", "unknown generator '" + gen + "' (expected gpt, dlrm or dp)");
  models::ComputeModel cm;
  cm.gpu = models::gpu_spec("a100-80gb");
  cm.eff = models::compute_preset_named(args.get("--compute-preset", "default"), "--compute-preset");
  if (gen == "gpt") {
    const std::string w = workloads::gpt_default_layout_warning(args.params());
    if (!w.empty()) std::cerr << "fabricsim gen: warning: --param " << w << "\n";
  }
  workloads::Trace tr = workloads::generate(gen, args.params(), cm, "--param");
  write_file_atomic(args.get("--output"), workloads::trace_to_json(tr).dump() + "\n");
  std::cerr << "fabricsim gen: wrote " << tr.num_ops() << " ops for " << tr.ranks.size() << " simulated of "
            << tr.world_size << " ranks to " << args.get("--output") << "\n";
  return 0;
}

}  // namespace fabricsim::cli
