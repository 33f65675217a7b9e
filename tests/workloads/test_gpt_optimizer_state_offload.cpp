// Megatron-LM's --offload-optimizer-states (offload_optimizer_states; docs/workloads.md): the optimizer state in
// host memory between steps, back in HBM for the optimizer step; its two copies per step over the host link in the
// trace, the optimizer step waiting for the copy back; Megatron-LM's refusals; the import of the flag.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <algorithm>
#include <string>

#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/megatron_args.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

// A small Llama-shaped model on two H100 nodes (TP 2, PP 2, DP 4), bf16, with the distributed optimizer the
// offload needs; `over` adds or replaces parameters.
ParamMap base(ParamMap over = {}) {
  ParamMap p = workloads_test::small_llama(16, 16, {{"use_distributed_optimizer", "true"}, {"precision", "bf16"}});
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}
ParamMap offload(ParamMap over = {}) {
  over["offload_optimizer_states"] = "true";
  return base(over);
}
GptConfig cfg(const ParamMap& p) { return gpt_config_from_params(p, "--param"); }
const Op* find_op(const Trace& t, const std::string& name) {
  for (const Op& op : t.ranks.at(0).ops)
    if (op.name == name) return &op;
  return nullptr;
}
std::string error_of(const ParamMap& p) { return ::error_of([&] { cfg(p); }); }

}  // namespace

TEST_CASE("offload_optimizer_states: the state leaves HBM for the forward and backward and is back for the step") {
  for (int st = 0; st < 2; ++st) {
    CAPTURE(st);
    const GptMemory on = gpt_memory_of_stage(cfg(base()), st), off = gpt_memory_of_stage(cfg(offload()), st);
    REQUIRE(on.optimizer_bytes > 0);
    // The whole state (12 bytes per element of the shard: fp32 master and moments) moves, nothing else does.
    CHECK(off.optimizer_bytes == 0.0);
    CHECK(off.optimizer_offloaded_bytes == doctest::Approx(on.optimizer_bytes));
    CHECK(off.weights_bytes == on.weights_bytes);
    CHECK(off.grads_bytes == on.grads_bytes);
    CHECK(off.activations_bytes == on.activations_bytes);
    // The peak is the larger phase: the activations of the forward / backward or the state at the step.
    CHECK(off.total_bytes() == doctest::Approx(off.weights_bytes + off.grads_bytes +
                                               std::max(off.activations_bytes, off.optimizer_offloaded_bytes)));
    CHECK(on.total_bytes() - off.total_bytes() ==
          doctest::Approx(std::min(on.optimizer_bytes, on.activations_bytes)));
  }
  // With the precision-aware optimizer's bf16 moments (the 2-byte master remainders of bf16 parameters): 6 bytes.
  const GptMemory pa = gpt_memory_per_gpu(cfg(offload({{"use_precision_aware_optimizer", "true"},
                                                       {"exp_avg_dtype", "bf16"},
                                                       {"exp_avg_sq_dtype", "bf16"}})));
  const GptMemory full = gpt_memory_per_gpu(cfg(offload()));
  CHECK(pa.optimizer_offloaded_bytes / full.optimizer_offloaded_bytes == doctest::Approx(6.0 / 12.0));
}

TEST_CASE("offload_optimizer_states: one copy out at the step's start, one back before the optimizer step") {
  const Trace plain = workloads_test::gen(base()), tr = workloads_test::gen(offload());
  const GptConfig c = cfg(offload());
  const double bytes = gpt_memory_of_stage(c, 0).optimizer_offloaded_bytes;  // rank 0 is pipeline stage 0
  REQUIRE(bytes > 0);
  const double secs = bytes / gpt_detail::host_copy_Bps("h100");
  CHECK(find_op(plain, "optimizer.state.d2h") == nullptr);
  const Op *d2h = find_op(tr, "optimizer.state.d2h"), *h2d = find_op(tr, "optimizer.state.h2d"),
           *step = find_op(tr, "optimizer.step");
  REQUIRE(d2h != nullptr);
  REQUIRE(h2d != nullptr);
  REQUIRE(step != nullptr);
  // Both copies take the state's bytes over the H100's PCIe Gen5 x16 at the measured share of a pinned copy.
  CHECK(d2h->duration_s == doctest::Approx(secs).epsilon(1e-6));
  CHECK(h2d->duration_s == doctest::Approx(secs).epsilon(1e-6));
  const auto& r = tr.ranks.at(0);
  const auto idx = [&](const Op* op) { return std::uint32_t(op - &r.ops[0]); };
  // The copy out is the rank's first op, on a copy stream of its own; nothing waits for it but the copy back.
  CHECK(idx(d2h) == 0);
  CHECK(r.streams.at(d2h->stream) == "optimizer.state.d2h");
  CHECK(r.streams.at(h2d->stream) == "optimizer.state.h2d");
  CHECK(d2h->deps.empty());
  for (const Op& op : r.ops)
    if (&op != h2d) CHECK(std::count(op.deps.begin(), op.deps.end(), idx(d2h)) == 0);
  // The copy back follows the last backward and the copy out; the optimizer step waits for it.
  CHECK(std::count(h2d->deps.begin(), h2d->deps.end(), idx(d2h)) == 1);
  CHECK(std::count(step->deps.begin(), step->deps.end(), idx(h2d)) == 1);
  const std::uint32_t last_bwd = h2d->deps.at(0);
  CHECK(r.ops.at(last_bwd).stream == 0);
  CHECK(last_bwd < idx(step));
  // The GPU step itself is the same kernel.
  CHECK(step->duration_s == find_op(plain, "optimizer.step")->duration_s);
  // What is on the host, in the metadata and a note.
  CHECK(tr.metadata.at("memory_per_gpu_bytes.optimizer_offloaded") == doctest::Approx(gpt_memory_per_gpu(c).optimizer_offloaded_bytes));
  CHECK(tr.metadata.at("memory_per_gpu_bytes.optimizer") == 0.0);
  bool noted = false;
  for (const auto& n : tr.notes) noted = noted || n.find("gpt: offload_optimizer_states: ") == 0;
  CHECK(noted);
  CHECK(plain.metadata.count("memory_per_gpu_bytes.optimizer_offloaded") == 0);
  // With fine-grained activation offloading the copies queue on its D2H / H2D streams (one per link direction).
  const Trace fg = workloads_test::gen(offload({{"fine_grained_activation_offloading", "true"}, {"offload_modules", "attn_norm"}}));
  const Op* fd = find_op(fg, "optimizer.state.d2h");
  REQUIRE(fd != nullptr);
  CHECK(fg.ranks.at(0).streams.at(fd->stream) == "offload.d2h");
}

TEST_CASE("offload_optimizer_states: Megatron-LM's refusals") {
  CHECK(error_of(offload({{"optimizer", "sgd"}})).find("offload_optimizer_states: needs optimizer adam") != std::string::npos);
  ParamMap no_dist = offload();
  no_dist.erase("use_distributed_optimizer");
  CHECK(error_of(no_dist).find("offload_optimizer_states: needs use_distributed_optimizer") != std::string::npos);
  CHECK(error_of(offload({{"use_precision_aware_optimizer", "true"}, {"optimizer_cpu_offload", "true"}}))
            .find("offload_optimizer_states: cannot be combined with optimizer_cpu_offload") != std::string::npos);
  CHECK(error_of(offload({{"data_parallel_sharding_strategy", "optim_grads_params"}}))
            .find("offload_optimizer_states: does not support FSDP") != std::string::npos);
  CHECK(error_of(offload({{"use_precision_aware_optimizer", "true"}, {"exp_avg_dtype", "fp8"}}))
            .find("offload_optimizer_states: with use_precision_aware_optimizer needs exp_avg_dtype fp32 or bf16, got fp8") !=
        std::string::npos);
  CHECK(error_of(offload({{"use_precision_aware_optimizer", "true"}, {"main_params_dtype", "fp16"}}))
            .find("needs main_params_dtype fp32") != std::string::npos);
  // A scenario without it writes nothing; with it, the parameter round-trips.
  CHECK(gpt_config_to_params(cfg(base())).count("offload_optimizer_states") == 0);
  CHECK(gpt_config_to_params(cfg(offload())).at("offload_optimizer_states") == "true");
}

TEST_CASE("offload_optimizer_states: --offload-optimizer-states imports (Megatron-LM dev @d48bd6be) with its rules") {
  const std::string flags = "--use-distributed-optimizer --offload-optimizer-states";
  const MegatronImport on = workloads_test::import_small(flags);
  CHECK(on.params.at("offload_optimizer_states") == true);
  CHECK(on.not_modelled.empty());
  CHECK(std::string(find_megatron_flag("--offload-optimizer-states")->commits) == "d48bd6be");
  // --optimizer-state-offload-fraction 0 turns it off; another fraction below 1 is not modelled; 1 is the default.
  const MegatronImport zero = workloads_test::import_small(flags + " --optimizer-state-offload-fraction 0");
  CHECK_FALSE(zero.params.contains("offload_optimizer_states"));
  CHECK(zero.not_modelled.empty());
  const MegatronImport half = workloads_test::import_small(flags + " --optimizer-state-offload-fraction 0.5");
  CHECK_FALSE(half.params.contains("offload_optimizer_states"));
  CHECK(half.not_modelled.size() == 2);
  const MegatronImport one = workloads_test::import_small(flags + " --optimizer-state-offload-fraction 1.0");
  CHECK(one.params.at("offload_optimizer_states") == true);
  CHECK(one.not_modelled.empty());
  // Saving optimizer state with it needs the torch_dist checkpoint format, as Megatron-LM asserts.
  const std::string err = ::error_of([&] { workloads_test::import_small(flags + " --ckpt-format torch"); });
  CHECK(err.find("--offload-optimizer-states with --ckpt-format torch: Megatron-LM needs --ckpt-format torch_dist") !=
        std::string::npos);
  CHECK(::error_of([&] { workloads_test::import_small(flags + " --ckpt-format torch --no-save-optim --no-load-optim"); }).empty());
}
