#pragma once
// Shared by the replay tests: a small torch-FSDP2 Llama-3-8B scenario as JSON text, and a run of scenario JSON
// text on the analytic communication model.
#include <functional>
#include <string>

#include "replay/run_scenario.hpp"
#include "workloads/scenario.hpp"

namespace fabricsim::replay_test {

// Llama-3-8B under torch FSDP2 on two `node` servers (TP 1, PP 1, global batch 16, micro-batch 1) with the
// given recompute_granularity; `extra` (scenario keys, each with its trailing comma) goes before the workload.
inline std::string fsdp_llama8b_scenario(const std::string& extra, const std::string& recompute,
                                         const std::string& node = "dgx-h100") {
  return R"({"topology":{"preset":"superpod","params":{"nodes":2,"node":")" + node + R"("}},)" + extra +
         R"("workload":{"generator":"gpt","params":{"model":"llama3-8b","use_torch_fsdp2":true,
      "tensor_model_parallel_size":1,"pipeline_model_parallel_size":1,"global_batch_size":16,
      "micro_batch_size":1,"recompute_granularity":")" + recompute + R"("}}})";
}

// Runs scenario JSON text (named sc.json in errors) with the analytic communication model; `set` adjusts the
// replay options first.
inline sim::RunResult run_scenario_text(const std::string& text,
                                        const std::function<void(sim::ReplayOptions&)>& set = {}) {
  workloads::Scenario s = workloads::scenario_from_json(Json::parse(text), "sc.json");
  sim::ScenarioRunOptions o{"analytic", {}, {}};
  if (set) set(o.replay);
  return sim::run_scenario(s, o).result;
}

}  // namespace fabricsim::replay_test
