// Megatron-LM's chunked optimizer-state offload (chunked_optimizer_state_offload, its deprecated spelling
// offload_optimizer_states, optimizer_state_offload_chunk_size_mb, optimizer_state_offload_fraction; docs/workloads.md):
// the selected state in host memory between steps, the masters window and two staging slots in HBM for the optimizer
// step; the copies over the host link in the trace and what waits for them; Megatron-LM's refusals; the import.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/megatron_args.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;
using workloads_test::with;

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
    // Chunk size 0 and fraction 1 (the deprecated spelling's defaults): the step restores everything at once.
    CHECK(off.optimizer_step_bytes == doctest::Approx(off.optimizer_offloaded_bytes));
    CHECK(off.state_offload.chunks() == 1);
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

TEST_CASE("offload_optimizer_states: one copy out at the step's start, the masters and the state back before the step") {
  const Trace plain = workloads_test::gen(base()), tr = workloads_test::gen(offload());
  const GptConfig c = cfg(offload());
  const GptMemory mem = gpt_memory_of_stage(c, 0);  // rank 0 is pipeline stage 0
  const double bytes = mem.optimizer_offloaded_bytes;
  REQUIRE(bytes > 0);
  const double link = gpt_detail::host_copy_Bps("h100");
  CHECK(find_op(plain, "optimizer.state.d2h") == nullptr);
  const Op *d2h = find_op(tr, "optimizer.state.d2h"), *mh2d = find_op(tr, "optimizer.masters.h2d"),
           *h2d = find_op(tr, "optimizer.state.c0.h2d"), *step = find_op(tr, "optimizer.step.c0");
  REQUIRE(d2h != nullptr);
  REQUIRE(mh2d != nullptr);
  REQUIRE(h2d != nullptr);
  REQUIRE(step != nullptr);
  // One chunk: no resident step, no other chunk.
  CHECK(find_op(tr, "optimizer.step") == nullptr);
  CHECK(find_op(tr, "optimizer.state.c1.h2d") == nullptr);
  // The copy out takes the whole state (masters and moments) over the H100's PCIe Gen5 x16 at the measured share of
  // a pinned copy; the copies back take the masters (4 of the 12 bytes) and the moments (8).
  CHECK(d2h->duration_s == doctest::Approx(bytes / link).epsilon(1e-6));
  CHECK(mh2d->duration_s == doctest::Approx(bytes / 3.0 / link).epsilon(1e-6));
  CHECK(h2d->duration_s == doctest::Approx(bytes * 2.0 / 3.0 / link).epsilon(1e-6));
  const auto& r = tr.ranks.at(0);
  const auto idx = [&](const Op* op) { return std::uint32_t(op - &r.ops[0]); };
  // The copy out is the rank's first op, on a copy stream of its own; nothing waits for it but the copies back.
  CHECK(idx(d2h) == 0);
  CHECK(r.streams.at(d2h->stream) == "optimizer.state.d2h");
  CHECK(r.streams.at(h2d->stream) == "optimizer.state.h2d");
  CHECK(r.streams.at(mh2d->stream) == "optimizer.state.h2d");
  CHECK(d2h->deps.empty());
  for (const Op& op : r.ops)
    if (&op != h2d && &op != mh2d) CHECK(std::count(op.deps.begin(), op.deps.end(), idx(d2h)) == 0);
  // The copies back follow the last backward and the copy out; the optimizer step waits for both.
  CHECK(std::count(h2d->deps.begin(), h2d->deps.end(), idx(d2h)) == 1);
  CHECK(std::count(step->deps.begin(), step->deps.end(), idx(h2d)) == 1);
  CHECK(std::count(step->deps.begin(), step->deps.end(), idx(mh2d)) == 1);
  const std::uint32_t last_bwd = h2d->deps.at(0);
  CHECK(mh2d->deps.at(0) == last_bwd);
  CHECK(r.ops.at(last_bwd).stream == 0);
  CHECK(last_bwd < idx(step));
  // The GPU step itself is the same kernel.
  CHECK(step->duration_s == find_op(plain, "optimizer.step")->duration_s);
  // What is on the host, in the metadata and a note.
  CHECK(tr.metadata.at("memory_per_gpu_bytes.optimizer_offloaded") == doctest::Approx(gpt_memory_per_gpu(c).optimizer_offloaded_bytes));
  CHECK(tr.metadata.at("memory_per_gpu_bytes.optimizer") == 0.0);
  CHECK(tr.metadata.at("optimizer_state_offload.chunks") == 1.0);
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
  CHECK(error_of(offload({{"optimizer", "sgd"}})).find("alias currently supports only Adam") != std::string::npos);
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
  // --optimizer-state-offload-fraction 0 turns it off; another fraction is the chunked offload's (the deprecated
  // spelling keeps chunk size 0 and fraction 1 only unless they are given, optimizer_config.py:418-430); 1 is the default.
  const MegatronImport zero = workloads_test::import_small(flags + " --optimizer-state-offload-fraction 0");
  CHECK_FALSE(zero.params.contains("offload_optimizer_states"));
  CHECK_FALSE(zero.params.contains("optimizer_state_offload_fraction"));
  CHECK(zero.not_modelled.empty());
  const MegatronImport half = workloads_test::import_small(flags + " --optimizer-state-offload-fraction 0.5");
  CHECK(half.params.at("offload_optimizer_states") == true);
  CHECK(half.not_modelled.empty());
  const MegatronImport one = workloads_test::import_small(flags + " --optimizer-state-offload-fraction 1.0");
  CHECK(one.params.at("offload_optimizer_states") == true);
  CHECK(one.not_modelled.empty());
  // Saving optimizer state with it needs the torch_dist checkpoint format, as Megatron-LM asserts.
  const std::string err = ::error_of([&] { workloads_test::import_small(flags + " --ckpt-format torch"); });
  CHECK(err.find("--offload-optimizer-states with --ckpt-format torch: Megatron-LM needs --ckpt-format torch_dist") !=
        std::string::npos);
  CHECK(::error_of([&] { workloads_test::import_small(flags + " --ckpt-format torch --no-save-optim --no-load-optim"); }).empty());
}

namespace {
ParamMap chunked(ParamMap over = {}) {
  over["chunked_optimizer_state_offload"] = "true";
  return base(over);
}
}  // namespace

TEST_CASE("chunked_optimizer_state_offload: HBM falls with the offloaded fraction; the host holds the rest") {
  // 16 layers: pipeline stage 1 holds 8 and the output layer, the optimizer's last parameter.
  const ParamMap layers = {{"num_layers", "16"}};
  const GptMemory none = gpt_memory_of_stage(cfg(base(layers)), 1);
  REQUIRE(none.optimizer_bytes > 0);
  double last_resident = none.optimizer_bytes;
  for (const std::string f : {"0.2", "0.4", "0.6", "1"}) {
    CAPTURE(f);
    const GptMemory m = gpt_memory_of_stage(cfg(chunked(with(layers, {{"optimizer_state_offload_fraction", f}}))), 1);
    const double frac = std::stod(f);
    REQUIRE(m.state_offload.children.size() == 1);  // a dense model: one distributed optimizer
    const auto& ch = m.state_offload.children[0];
    // Whole pieces until the fraction of the bytes is reached: at least the fraction, at most one piece more.
    CHECK(m.optimizer_offloaded_bytes >= frac * none.optimizer_bytes * (1 - 1e-12));
    CHECK(m.optimizer_offloaded_bytes < frac * none.optimizer_bytes + 12.0 * ch.piece + 1.0);
    CHECK(m.optimizer_bytes + m.optimizer_offloaded_bytes == doctest::Approx(none.optimizer_bytes));
    CHECK(m.optimizer_bytes < last_resident);
    CHECK(m.host_bytes() == doctest::Approx(m.optimizer_offloaded_bytes));
    // Chunk size 0: the step holds all the selected state at once (masters and moments).
    CHECK(m.optimizer_step_bytes == doctest::Approx(m.optimizer_offloaded_bytes));
    last_resident = m.optimizer_bytes;
  }
  CHECK(last_resident == 0.0);
  // Fraction 0 offloads nothing (Megatron-LM's training.py:2748-2752): the memory and the trace are the plain ones.
  const ParamMap zero = chunked({{"optimizer_state_offload_fraction", "0"}});
  const GptMemory z = gpt_memory_of_stage(cfg(zero), 0), plain0 = gpt_memory_of_stage(cfg(base()), 0);
  CHECK(z.optimizer_bytes == plain0.optimizer_bytes);
  CHECK(z.optimizer_offloaded_bytes == 0.0);
  CHECK(z.total_bytes() == plain0.total_bytes());
  CHECK(workloads_test::gen(zero).ranks.at(0).ops.size() == workloads_test::gen(base()).ranks.at(0).ops.size());
}

TEST_CASE("chunked_optimizer_state_offload: chunks of whole pieces up to the chunk size; the step holds two slots") {
  const ParamMap layers = {{"num_layers", "16"}};
  const GptMemory full = gpt_memory_of_stage(cfg(chunked(layers)), 1);
  // The decoder layers' pieces: the QKV weight (1024 x (16 + 2 x 16) heads x 64, larger than the GELU fc1's 1024 x
  // 2816) on a TP rank (2) over the shard group (DP 4).
  const double layer_piece = 1024.0 * 48.0 * 64.0 / 2.0 / 4.0;
  // A chunk size of 2.5 layer pieces of fp32 moments (8 bytes per element): two pieces per chunk; the output layer
  // (32000 x 1024 / 2 / 4 elements, larger than the chunk size) its own chunk.
  const std::int64_t mb = static_cast<std::int64_t>(std::ceil(2.5 * layer_piece * 8.0 / 1048576.0));
  const double chunk_el = double(mb) * 1048576.0 / 8.0;
  REQUIRE(chunk_el < 3.0 * layer_piece);
  const GptMemory m = gpt_memory_of_stage(cfg(chunked(with(layers, {{"optimizer_state_offload_chunk_size_mb", std::to_string(mb)}}))), 1);
  const auto& ch = m.state_offload.children.at(0);
  CHECK(ch.piece == doctest::Approx(32000.0 * 1024.0 / 8.0));
  CHECK(ch.selected == doctest::Approx(full.state_offload.children.at(0).selected));
  double sum = 0;
  for (std::size_t k = 0; k < ch.chunks.size(); ++k) {
    CAPTURE(k);
    if (k + 1 < ch.chunks.size()) CHECK(ch.chunks[k] <= chunk_el);
    sum += ch.chunks[k];
  }
  CHECK(ch.chunks.front() == doctest::Approx(2.0 * layer_piece));
  CHECK(ch.chunks.back() == doctest::Approx(ch.piece));  // the output layer, oversized
  CHECK(sum == doctest::Approx(ch.selected));
  REQUIRE(ch.chunks.size() >= 4);
  // The step holds the masters window and the two slots (the oversized chunk's and a pair's), not the whole state.
  const double masters = 4.0 * ch.selected, slots = 8.0 * (ch.slot[0] + ch.slot[1]);
  CHECK(m.optimizer_step_bytes == doctest::Approx(masters + slots));
  CHECK(slots == doctest::Approx(8.0 * (ch.piece + 2.0 * layer_piece)));
  CHECK(m.optimizer_step_bytes < full.optimizer_step_bytes);
  CHECK(m.total_bytes() <= full.total_bytes());
  CHECK(m.optimizer_offloaded_bytes == doctest::Approx(full.optimizer_offloaded_bytes));
  // A chunk size below every piece: each piece is a chunk of its own (Megatron-LM's oversized chunks: the two slots
  // then exceed twice the target).
  const GptMemory tiny = gpt_memory_of_stage(cfg(chunked(with(layers, {{"optimizer_state_offload_chunk_size_mb", "1"}}))), 1);
  const auto& tc = tiny.state_offload.children.at(0);
  REQUIRE(layer_piece * 8.0 > 1048576.0);
  for (double e : tc.chunks) CHECK(e <= tc.piece);
  CHECK(tc.chunks.size() > ch.chunks.size());
  CHECK(8.0 * (tc.slot[0] + tc.slot[1]) > 2.0 * 1048576.0);
  // With the precision-aware optimizer's bf16 moments the same MiB hold twice the elements: five pieces per chunk.
  const GptMemory pa = gpt_memory_of_stage(cfg(chunked(with(layers, {{"optimizer_state_offload_chunk_size_mb", std::to_string(mb)},
                                                                     {"use_precision_aware_optimizer", "true"},
                                                                     {"exp_avg_dtype", "bf16"},
                                                                     {"exp_avg_sq_dtype", "bf16"}}))),
                                           1);
  CHECK(pa.state_offload.moment_bytes == 4.0);
  CHECK(pa.state_offload.children.at(0).chunks.front() == doctest::Approx(5.0 * layer_piece));
}

TEST_CASE("chunked_optimizer_state_offload: the trace pipelines copy in, step and copy out per chunk") {
  const Trace plain = workloads_test::gen(base({{"num_layers", "16"}}));
  // 16 layers: stage 0 (rank 0) holds the embedding (its own chunk) and 8 layers; 16 MiB chunks of five layer pieces.
  const ParamMap pm = chunked({{"num_layers", "16"},
                               {"optimizer_state_offload_chunk_size_mb", "16"},
                               {"optimizer_state_offload_fraction", "0.75"}});
  const Trace tr = workloads_test::gen(pm);
  const GptMemory mem = gpt_memory_of_stage(cfg(pm), 0);
  const auto& ch = mem.state_offload.children.at(0);
  const std::size_t n = ch.chunks.size();
  REQUIRE(n >= 3);
  const double link = gpt_detail::host_copy_Bps("h100");
  const models::ComputeModel cm = workloads_test::compute_of("h100");
  const gpt_detail::GptStepKernels K = gpt_detail::gpt_step_kernels(cfg(pm), cm, "test");
  const auto& r = tr.ranks.at(0);
  const auto idx = [&](const Op* op) { return std::uint32_t(op - &r.ops[0]); };
  const auto has_dep = [](const Op* op, std::uint32_t d) { return std::count(op->deps.begin(), op->deps.end(), d) == 1; };
  // The copy out at the step's start: the masters and the last chunk's moments.
  const Op* d2h = find_op(tr, "optimizer.state.d2h");
  REQUIRE(d2h != nullptr);
  CHECK(d2h->duration_s == doctest::Approx((4.0 * ch.selected + 8.0 * ch.chunks.back()) / link).epsilon(1e-6));
  // The resident quarter steps first, after the masters are back.
  const Op *resident = find_op(tr, "optimizer.step"), *masters = find_op(tr, "optimizer.masters.h2d");
  REQUIRE(resident != nullptr);
  REQUIRE(masters != nullptr);
  CHECK(has_dep(resident, idx(masters)));
  double steps = resident->duration_s;
  for (std::size_t k = 0; k < n; ++k) {
    CAPTURE(k);
    const std::string kn = ".c" + std::to_string(k);
    const Op *in = find_op(tr, "optimizer.state" + kn + ".h2d"), *step = find_op(tr, "optimizer.step" + kn),
             *out = find_op(tr, "optimizer.state" + kn + ".d2h");
    REQUIRE(in != nullptr);
    REQUIRE(step != nullptr);
    CHECK(in->duration_s == doctest::Approx(8.0 * ch.chunks[k] / link).epsilon(1e-6));
    CHECK(has_dep(step, idx(in)));
    // FusedAdam over the chunk's elements.
    CHECK(std::abs(step->duration_s - K.optimizer(cm, ch.chunks[k]).seconds) <= 1e-9);
    steps += step->duration_s;
    // Chunk k's copy out follows its step; the last one's is the next step's copy out at the start.
    if (k + 1 < n) {
      REQUIRE(out != nullptr);
      CHECK(has_dep(out, idx(step)));
      CHECK(out->stream == d2h->stream);
    } else {
      CHECK(out == nullptr);
    }
    // Chunk k's copy in (k >= 1) is issued before chunk k-1's step: after what the compute stream had then (chunk
    // k-2's step, or the resident one) and after chunk k-2's copy out, the staging slot it reuses.
    if (k >= 1) {
      const Op* prev_step = k >= 2 ? find_op(tr, "optimizer.step.c" + std::to_string(k - 2)) : resident;
      CHECK(has_dep(in, idx(prev_step)));
      CHECK(idx(in) < idx(find_op(tr, "optimizer.step.c" + std::to_string(k - 1))));
      if (k >= 2) CHECK(has_dep(in, idx(find_op(tr, "optimizer.state.c" + std::to_string(k - 2) + ".d2h"))));
    }
  }
  // The same FusedAdam work as without the offload, in n + 1 kernels (each with its own fixed cost).
  const double plain_step = find_op(plain, "optimizer.step")->duration_s;
  CHECK(steps >= plain_step);
  CHECK(std::abs(resident->duration_s - K.optimizer(cm, ch.elements - ch.selected).seconds) <= 1e-9);
  CHECK(tr.metadata.at("optimizer_state_offload.chunks") == double(gpt_memory_per_gpu(cfg(pm)).state_offload.chunks()));
  CHECK(tr.metadata.at("memory_per_gpu_bytes.optimizer_step") == doctest::Approx(gpt_memory_per_gpu(cfg(pm)).optimizer_step_bytes));
  bool noted = false;
  for (const auto& note : tr.notes) noted = noted || note.find("gpt: chunked_optimizer_state_offload: ") == 0;
  CHECK(noted);
}

TEST_CASE("chunked_optimizer_state_offload: Megatron-LM's refusals and the parameters' round trip") {
  CHECK(error_of(chunked({{"optimizer_state_offload_chunk_size_mb", "-1"}}))
            .find("optimizer_state_offload_chunk_size_mb: must be non-negative, got -1") != std::string::npos);
  CHECK(error_of(chunked({{"optimizer_state_offload_fraction", "1.5"}}))
            .find("optimizer_state_offload_fraction: must be in [0.0, 1.0], got 1.5") != std::string::npos);
  CHECK(error_of(chunked({{"optimizer_state_offload_fraction", "-0.1"}})).find("must be in [0.0, 1.0]") != std::string::npos);
  CHECK(error_of(chunked({{"optimizer", "sgd"}})).find("chunked_optimizer_state_offload: needs optimizer adam") != std::string::npos);
  CHECK(error_of(chunked({{"overlap_param_gather", "true"}, {"overlap_param_gather_with_optimizer_step", "true"},
                          {"virtual_pipeline_model_parallel_size", "2"}}))
            .find("with overlap_param_gather_with_optimizer_step is not modelled") != std::string::npos);
  CHECK(error_of(chunked({{"optimizer", "sgd"}})).find("supports Adam and Muon") != std::string::npos);
  CHECK(error_of(offload({{"optimizer", "sgd"}})).find("only Adam") != std::string::npos);
  CHECK(error_of(chunked({{"use_precision_aware_optimizer", "true"}, {"optimizer_cpu_offload", "true"}}))
            .find("chunked_optimizer_state_offload: cannot be combined with optimizer_cpu_offload") != std::string::npos);
  ParamMap no_dist = chunked();
  no_dist.erase("use_distributed_optimizer");
  CHECK(error_of(no_dist).find("chunked_optimizer_state_offload: needs use_distributed_optimizer") != std::string::npos);
  // Given without the switch they change nothing (Megatron reads them only with it).
  CHECK(error_of(base({{"optimizer_state_offload_chunk_size_mb", "64"}}))
            .find("optimizer_state_offload_chunk_size_mb: needs chunked_optimizer_state_offload") != std::string::npos);
  CHECK(error_of(base({{"optimizer_state_offload_fraction", "0.5"}}))
            .find("optimizer_state_offload_fraction: needs chunked_optimizer_state_offload") != std::string::npos);
  const ParamMap back = gpt_config_to_params(
      cfg(chunked({{"optimizer_state_offload_chunk_size_mb", "64"}, {"optimizer_state_offload_fraction", "0.5"}})));
  CHECK(back.at("chunked_optimizer_state_offload") == "true");
  CHECK(back.at("optimizer_state_offload_chunk_size_mb") == "64");
  CHECK(std::stod(back.at("optimizer_state_offload_fraction")) == 0.5);
  CHECK(gpt_config_to_params(cfg(base())).count("optimizer_state_offload_fraction") == 0);
}

TEST_CASE("chunked_optimizer_state_offload: Megatron-LM's flags import as modelled, with the training script's rules") {
  const std::string flags = "--use-distributed-optimizer --chunked-optimizer-state-offload";
  const MegatronImport on =
      workloads_test::import_small(flags + " --optimizer-state-offload-chunk-size-mb 256 --optimizer-state-offload-fraction 0.5");
  CHECK(on.params.at("chunked_optimizer_state_offload") == true);
  CHECK(on.not_modelled.empty());
  const GptConfig c = gpt_config_from_params(params_from_json(on.params, JsonPath{"import", ""}), "import");
  CHECK(c.optimizer_state_offload_chunk_size_mb == 256);
  CHECK(c.optimizer_state_offload_fraction == 0.5);
  CHECK(c.state_offload());
  // Alone, the chunk size and fraction change nothing: dropped, listed as without effect.
  const MegatronImport alone = workloads_test::import_small("--use-distributed-optimizer --optimizer-state-offload-chunk-size-mb 256");
  CHECK_FALSE(alone.params.contains("optimizer_state_offload_chunk_size_mb"));
  CHECK(alone.not_modelled.empty());
  CHECK(::error_of([&] { workloads_test::import_small(flags + " --optimizer-cuda-graph"); })
            .find("--chunked-optimizer-state-offload with --optimizer-cuda-graph: Megatron-LM refuses it") != std::string::npos);
  CHECK(::error_of([&] { workloads_test::import_small(flags + " --async-save"); })
            .find("--chunked-optimizer-state-offload with --async-save") != std::string::npos);
}
