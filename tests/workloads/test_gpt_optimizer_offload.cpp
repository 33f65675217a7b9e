// Megatron-Core's optimizer CPU offload (optimizer_cpu_offload, optimizer_offload_fraction,
// overlap_cpu_optimizer_d2h_h2d; docs/workloads.md): the offloaded share of the optimizer state leaves HBM, the
// host holds it, the step's host work is in the trace, Megatron-LM's refusals, the import of its flags.
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

// A small Llama-shaped model on two H100 nodes (TP 2, PP 2, DP 4), bf16, the distributed and precision-aware
// optimizer (which the offload needs); `over` adds or replaces parameters.
ParamMap base(ParamMap over = {}) {
  ParamMap p = workloads_test::small_llama(16, 16, {{"use_distributed_optimizer", "true"},
                                                    {"use_precision_aware_optimizer", "true"},
                                                    {"precision", "bf16"}});
  for (const auto& [k, v] : over) p[k] = v;
  return p;
}
ParamMap offload(const std::string& fraction, ParamMap over = {}) {
  over["optimizer_cpu_offload"] = "true";
  over["optimizer_offload_fraction"] = fraction;
  return base(over);
}
GptConfig cfg(const ParamMap& p) { return gpt_config_from_params(p, "--param"); }
GptMemory mem(const ParamMap& p) { return gpt_memory_per_gpu(cfg(p)); }
const Op* find_op(const Trace& t, const std::string& name) {
  for (const Op& op : t.ranks.at(0).ops)
    if (op.name == name) return &op;
  return nullptr;
}
int count_ops(const Trace& t, const std::string& prefix) {
  int n = 0;
  for (const Op& op : t.ranks.at(0).ops) n += op.name.rfind(prefix, 0) == 0;
  return n;
}
std::string error_of(const ParamMap& p) { return ::error_of([&] { cfg(p); }); }

}  // namespace

TEST_CASE("optimizer_cpu_offload: the offloaded share of the 12-byte state leaves HBM; the host holds 16 bytes per element") {
  // The precision-aware optimizer alone keeps bf16 parameters' masters as 2-byte remainders: 10 bytes. The
  // hybrid optimizer's GPU FusedAdam gets no precision-aware dtypes: 12 bytes for what stays on the GPU.
  CHECK(cfg(base()).adam_state_bytes() == 10.0);
  CHECK(cfg(offload("0.5")).adam_state_bytes() == 12.0);
  CHECK(cfg(offload("0.5", {{"exp_avg_dtype", "bf16"}, {"exp_avg_sq_dtype", "bf16"}})).adam_state_bytes() == 12.0);
  const GptMemory m10 = mem(base()), m0 = mem(offload("0")), mh = mem(offload("0.5")), m1 = mem(offload("1"));
  REQUIRE(m10.optimizer_bytes > 0);
  // The shard's elements: the 10-byte state over 10.
  const double el = m10.optimizer_bytes / 10.0;
  CHECK(m0.optimizer_bytes == doctest::Approx(12.0 * el));
  CHECK(m0.host_optimizer_bytes == 0.0);
  CHECK(mh.optimizer_bytes == doctest::Approx(6.0 * el));
  CHECK(mh.host_optimizer_elements == doctest::Approx(0.5 * el));
  CHECK(mh.host_optimizer_bytes == doctest::Approx(16.0 * 0.5 * el));
  CHECK(m1.optimizer_bytes == doctest::Approx(0.0));
  CHECK(m1.host_optimizer_bytes == doctest::Approx(16.0 * el));
  // Fraction 0.5 -> 1.0: HBM drops by the other half's 12 bytes; nothing else moves.
  CHECK(mh.total_bytes() - m1.total_bytes() == doctest::Approx(6.0 * el));
  CHECK(mh.weights_bytes == m1.weights_bytes);
  CHECK(mh.grads_bytes == m1.grads_bytes);
  CHECK(mh.activations_bytes == m1.activations_bytes);
}

TEST_CASE("optimizer_cpu_offload: the step's host work in the trace, serial or pipelined per parameter") {
  const Trace off = workloads_test::gen(base()), ser = workloads_test::gen(offload("0.5")),
              ovl = workloads_test::gen(offload("0.5", {{"overlap_cpu_optimizer_d2h_h2d", "true"}}));
  const GptConfig c = cfg(offload("0.5"));
  // Rank 0 is pipeline stage 0: its shard is the stage's parameters over DP 4 (gpt_memory_of_stage's count).
  const double el = gpt_memory_of_stage(c, 0).host_optimizer_elements;
  REQUIRE(el > 0);
  const auto o = gpt_detail::optimizer_offload_times(c, el);
  const double link = gpt_detail::host_copy_Bps("h100");
  CHECK(o.d2h_s == doctest::Approx(4.0 * el / link));
  CHECK(o.h2d_s == doctest::Approx(4.0 * el / link));
  // H100 servers: 8 DDR5-4800 channels per Xeon socket shared by 4 GPUs.
  CHECK(gpt_detail::host_dram_Bps("h100") == doctest::Approx(8 * 4800e6 * 8 / 4));
  CHECK(o.cpu_s == doctest::Approx(28.0 * el / gpt_detail::host_dram_Bps("h100")));
  // No offload: none of these ops. Fraction 0: the GPU step over the whole shard with the 12-byte state.
  CHECK(find_op(off, "optimizer.offload.d2h") == nullptr);
  const Trace none = workloads_test::gen(offload("0"));
  CHECK(find_op(none, "optimizer.offload.d2h") == nullptr);
  const Op* gpu_all = find_op(none, "optimizer.step");
  REQUIRE(gpu_all != nullptr);
  // Serial: D2H and H2D on the compute stream around the GPU step (half the shard), the CPU AdamW on its own.
  const Op *d2h = find_op(ser, "optimizer.offload.d2h"), *cpu = find_op(ser, "optimizer.offload.cpu_adamw"),
           *h2d = find_op(ser, "optimizer.offload.h2d"), *gpu = find_op(ser, "optimizer.step");
  REQUIRE(d2h != nullptr);
  REQUIRE(cpu != nullptr);
  REQUIRE(h2d != nullptr);
  REQUIRE(gpu != nullptr);
  CHECK(d2h->stream == 0);
  CHECK(h2d->stream == 0);
  CHECK(cpu->stream != 0);
  CHECK(d2h->duration_s == doctest::Approx(o.d2h_s).epsilon(1e-6));
  CHECK(cpu->duration_s == doctest::Approx(o.cpu_s).epsilon(1e-6));
  CHECK(gpu->duration_s == doctest::Approx(0.5 * gpu_all->duration_s).epsilon(0.02));
  const auto& ops = ser.ranks.at(0).ops;
  const auto idx = [&](const Op* op) { return std::uint32_t(op - &ops[0]); };
  CHECK(std::count(h2d->deps.begin(), h2d->deps.end(), idx(cpu)) == 1);
  CHECK(std::count(cpu->deps.begin(), cpu->deps.end(), idx(d2h)) == 1);
  // Overlapped: one D2H / CPU step / H2D per parameter piece on three streams; the same totals.
  const int n = count_ops(ovl, "optimizer.offload.cpu_adamw.p");
  CHECK(n == o.pieces);
  CHECK(n > 1);
  CHECK(count_ops(ovl, "optimizer.offload.d2h.p") == n);
  CHECK(count_ops(ovl, "optimizer.offload.h2d.p") == n);
  double cpu_sum = 0;
  for (const Op& op : ovl.ranks.at(0).ops)
    if (op.name.rfind("optimizer.offload.cpu_adamw.p", 0) == 0) cpu_sum += op.duration_s;
  CHECK(cpu_sum == doctest::Approx(o.cpu_s).epsilon(1e-4));
  REQUIRE(find_op(ovl, "optimizer.offload.h2d.done") != nullptr);
  // What is on the host, in the trace's metadata and notes.
  CHECK(ser.metadata.at("host_memory_per_gpu_bytes.optimizer") == doctest::Approx(gpt_memory_per_gpu(c).host_optimizer_bytes));
  bool noted = false;
  for (const auto& note : ser.notes) noted = noted || note.find("optimizer_cpu_offload: 0.5 of the optimizer shard") != std::string::npos;
  CHECK(noted);
  CHECK(off.metadata.count("host_memory_per_gpu_bytes.optimizer") == 0);
}

TEST_CASE("optimizer_cpu_offload: host_memory_bandwidth_per_gpu overrides the server's figure, with its unit") {
  const GptConfig c = cfg(offload("1", {{"host_memory_bandwidth_per_gpu", "153.6GB/s"}}));
  CHECK(c.host_memory_bandwidth_per_gpu == doctest::Approx(153.6e9));
  const auto fast = gpt_detail::optimizer_offload_times(c, 1e9), peak = gpt_detail::optimizer_offload_times(cfg(offload("1")), 1e9);
  CHECK(peak.cpu_s / fast.cpu_s == doctest::Approx(2.0));
  CHECK(fast.d2h_s == peak.d2h_s);
  CHECK(error_of(offload("1", {{"host_memory_bandwidth_per_gpu", "300"}}))
            .find("host_memory_bandwidth_per_gpu: expected a bandwidth with its unit") != std::string::npos);
  CHECK(error_of(base({{"host_memory_bandwidth_per_gpu", "300GB/s"}})).find("host_memory_bandwidth_per_gpu: needs optimizer_cpu_offload") !=
        std::string::npos);
}

TEST_CASE("optimizer_cpu_offload: Megatron-LM's refusals") {
  ParamMap no_pao = offload("1");
  no_pao.erase("use_precision_aware_optimizer");
  CHECK(error_of(no_pao).find("optimizer_cpu_offload: needs use_precision_aware_optimizer") != std::string::npos);
  // The precision-aware optimizer itself needs the distributed optimizer.
  ParamMap no_dist = offload("1");
  no_dist.erase("use_distributed_optimizer");
  CHECK(error_of(no_dist).find("use_precision_aware_optimizer: needs use_distributed_optimizer") != std::string::npos);
  CHECK(error_of(offload("1", {{"precision", "fp8"}, {"fp8_recipe", "tensorwise"}, {"fp8_param_gather", "true"}}))
            .find("optimizer_cpu_offload: with fp8_param_gather needs fp8_recipe delayed") != std::string::npos);
  CHECK(error_of(offload("1.5")).find("optimizer_offload_fraction: must be in [0, 1]") != std::string::npos);
  CHECK(error_of(base({{"optimizer_offload_fraction", "0.5"}})).find("optimizer_offload_fraction: needs optimizer_cpu_offload") !=
        std::string::npos);
  CHECK(error_of(base({{"overlap_cpu_optimizer_d2h_h2d", "true"}})).find("needs optimizer_cpu_offload") != std::string::npos);
  // The default fraction is Megatron-LM's argparse default, 1.0.
  ParamMap dflt = offload("1");
  dflt.erase("optimizer_offload_fraction");
  CHECK(cfg(dflt).optimizer_offload_fraction == 1.0);
}

TEST_CASE("optimizer_cpu_offload: Megatron-LM's flags import as modelled; without the switch the others change nothing") {
  const std::string head =
      "torchrun pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024"
      " --max-position-embeddings 1024 --micro-batch-size 1 --bf16 --tokenizer-type GPT2BPETokenizer"
      " --use-distributed-optimizer --use-precision-aware-optimizer";
  const MegatronImport on = import_megatron_args(
      read_megatron_launch(head + " --optimizer-cpu-offload --optimizer-offload-fraction 0.25 --overlap-cpu-optimizer-d2h-h2d",
                           "job.sh", {}),
      8, {});
  CHECK(on.not_modelled.empty());
  CHECK(on.params["optimizer_cpu_offload"] == true);
  CHECK(on.params["optimizer_offload_fraction"] == doctest::Approx(0.25));
  CHECK(on.params["overlap_cpu_optimizer_d2h_h2d"] == true);
  ParamMap pm = params_from_json(on.params, JsonPath{"job.sh", "/workload/params"});
  pm["gpu"] = "h100";
  const GptConfig c = gpt_config_from_params(pm, "job.sh");
  CHECK(c.optimizer_host_fraction() == doctest::Approx(0.25));
  CHECK(c.overlap_cpu_optimizer_d2h_h2d);
  const MegatronImport alone =
      import_megatron_args(read_megatron_launch(head + " --optimizer-offload-fraction 0.25", "job.sh", {}), 8, {});
  CHECK_FALSE(alone.params.contains("optimizer_offload_fraction"));
  CHECK(alone.ignored.size() >= 1);
  CHECK(alone.not_modelled.empty());
}

TEST_CASE("optimizer_cpu_offload: nothing on the host leaves the trace as it was but for the GPU step's 12-byte state") {
  const Trace a = workloads_test::gen(base()), b = workloads_test::gen(offload("0"));
  REQUIRE(a.ranks.size() == b.ranks.size());
  for (std::size_t r = 0; r < a.ranks.size(); ++r) {
    const auto &x = a.ranks[r], &y = b.ranks[r];
    CHECK(x.streams == y.streams);
    REQUIRE(x.ops.size() == y.ops.size());
    for (std::size_t i = 0; i < x.ops.size(); ++i) {
      CAPTURE(x.ops[i].name);
      CHECK(x.ops[i].name == y.ops[i].name);
      CHECK(x.ops[i].deps == y.ops[i].deps);
      // The optimizer step reads and writes the state: 8 + 2 x 10 = 28 bytes per element -> 8 + 2 x 12 = 32.
      if (x.ops[i].name == "optimizer.step") CHECK(y.ops[i].duration_s / x.ops[i].duration_s == doctest::Approx(32.0 / 28.0).epsilon(0.02));
      else CHECK(x.ops[i].duration_s == y.ops[i].duration_s);
    }
  }
}
