// Megatron-Core's optimizer CPU offload replayed (docs/workloads.md, "Optimizer CPU offload"): the step grows with
// the offloaded fraction by the host work the trace prices, the per-parameter overlap shortens it, and
// examples/workloads/llama3-70b-optimizer-offload-8-h100.json fits one DGX H100 only with the offload.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "replay/run_scenario.hpp"
#include "tests/replay/scenario_test_util.hpp"
#include "workloads/gpt.hpp"
#include "workloads/gpt_detail.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {
sim::RunResult run_json(const Json& j) { return replay_test::run_scenario_text(j.dump()); }

// Llama-3-8B cut to 4 layers on two DGX H100 (TP 8, DP 2), the distributed and precision-aware optimizer.
Json two_nodes(const Json& extra) {
  Json j = Json::parse(R"({"topology":{"preset":"superpod","params":{"nodes":2,"node":"dgx-h100"}},
      "workload":{"generator":"gpt","params":{"model":"llama3-8b","num_layers":4,"precision":"bf16",
      "tensor_model_parallel_size":8,"pipeline_model_parallel_size":1,"micro_batch_size":1,"global_batch_size":4,
      "sequence_parallel":true,"recompute_granularity":"none","use_distributed_optimizer":true,
      "use_precision_aware_optimizer":true}}})");
  for (const auto& [k, v] : extra.items()) j["workload"]["params"][k] = v;
  return j;
}

GptConfig config_of(const Json& scenario) {
  ParamMap p = params_from_json(scenario["workload"]["params"], JsonPath{"sc.json", "/workload/params"});
  p["world_size"] = "16";
  p["gpu"] = "h100";
  return gpt_config_from_params(p, "sc.json");
}

Json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return Json::parse(ss.str());
}
}  // namespace

TEST_CASE("gpt replay: optimizer_cpu_offload lengthens the step by its host work; the overlap pipelines it") {
  const Json half = two_nodes({{"optimizer_cpu_offload", true}, {"optimizer_offload_fraction", 0.5}}),
             full = two_nodes({{"optimizer_cpu_offload", true}, {"optimizer_offload_fraction", 1.0}}),
             ovl = two_nodes({{"optimizer_cpu_offload", true}, {"optimizer_offload_fraction", 1.0},
                              {"overlap_cpu_optimizer_d2h_h2d", true}}),
             zero = two_nodes({{"optimizer_cpu_offload", true}, {"optimizer_offload_fraction", 0.0}});
  const auto r0 = run_json(zero), rh = run_json(half), r1 = run_json(full), ro = run_json(ovl);
  const GptConfig c1 = config_of(full);
  const double el = gpt_memory_per_gpu(c1).host_optimizer_elements;
  REQUIRE(el > 0);
  const auto o = gpt_detail::optimizer_offload_times(c1, el);
  // The whole shard on the host, serially: gradients out, CPU AdamW, parameters back, less the GPU step it
  // replaces (a few percent of the CPU step at H100's 3.35 TB/s against 76.8 GB/s of host DRAM per GPU).
  const double host = o.d2h_s + o.cpu_s + o.h2d_s;
  CHECK(r1.iteration_s - r0.iteration_s == doctest::Approx(host).epsilon(0.05));
  CHECK(r1.iteration_s - r0.iteration_s < host);
  // Half the shard: about half the host work.
  CHECK(rh.iteration_s > r0.iteration_s);
  CHECK(r1.iteration_s > rh.iteration_s);
  CHECK(rh.iteration_s - r0.iteration_s == doctest::Approx(0.5 * host).epsilon(0.08));
  // Pipelined per parameter: the CPU AdamW (the slowest stage) plus one piece's copies in and out.
  CHECK(ro.iteration_s < r1.iteration_s);
  CHECK(ro.iteration_s - r0.iteration_s == doctest::Approx(o.cpu_s + (o.d2h_s + o.h2d_s) / double(o.pieces)).epsilon(0.05));
  // Twice the host DRAM bandwidth halves the CPU step.
  Json fast = ovl;
  fast["workload"]["params"]["host_memory_bandwidth_per_gpu"] = "153.6GB/s";
  const auto rf = run_json(fast);
  CHECK(rf.iteration_s - r0.iteration_s == doctest::Approx(0.5 * o.cpu_s + (o.d2h_s + o.h2d_s) / double(o.pieces)).epsilon(0.05));
}

TEST_CASE("gpt replay: Llama-3-70B fits one DGX H100 only with optimizer_cpu_offload (examples/workloads)") {
  const Json ex = read_json(std::string(FABRICSIM_SOURCE_DIR) + "/examples/workloads/llama3-70b-optimizer-offload-8-h100.json");
  const auto r = run_json(ex);
  CHECK(r.iteration_s > 0);
  bool noted = false;
  for (const auto& n : r.notes) noted = noted || n.find("optimizer_cpu_offload: 0.8 of the optimizer shard") != std::string::npos;
  CHECK(noted);
  // Without the offload, or with half of the state on the host, the 8-way shard of 70B parameters' 12-byte
  // state does not fit in 80 GB beside the weights and fp32 gradients.
  for (const double f : {0.0, 0.5}) {
    Json j = ex;
    j["workload"]["params"]["optimizer_offload_fraction"] = f;
    CAPTURE(f);
    CHECK_THROWS_AS(run_json(j), DoesNotFitError);
  }
  Json none = ex;
  for (const char* k : {"optimizer_cpu_offload", "optimizer_offload_fraction", "overlap_cpu_optimizer_d2h_h2d"})
    none["workload"]["params"].erase(k);
  CHECK_THROWS_AS(run_json(none), DoesNotFitError);
  // Serial host work is slower than the example's per-parameter overlap.
  Json serial = ex;
  serial["workload"]["params"]["overlap_cpu_optimizer_d2h_h2d"] = false;
  CHECK(run_json(serial).iteration_s > r.iteration_s);
}
