// Megatron-LM's chunked optimizer-state offload replayed (docs/workloads.md, "Chunked optimizer-state offload"): the
// simulated timeline keeps the chunk pipeline's order (copy in before the step, the staging slot's copy out before its
// next copy in), the step grows by the copies the pipeline cannot hide, and
// examples/workloads/llama3-70b-chunked-state-offload-8-h100.json fits one DGX H100 only with bounded chunks.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
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

// Llama-3-8B cut to 4 layers on one DGX H100 (TP 4, DP 2), the distributed optimizer.
Json one_node(const Json& extra) {
  Json j = Json::parse(R"({"topology":{"preset":"dgx-h100"},
      "workload":{"generator":"gpt","params":{"model":"llama3-8b","num_layers":4,"precision":"bf16",
      "tensor_model_parallel_size":4,"pipeline_model_parallel_size":1,"micro_batch_size":1,"global_batch_size":4,
      "sequence_parallel":true,"recompute_granularity":"none","use_distributed_optimizer":true}}})");
  for (const auto& [k, v] : extra.items()) j["workload"]["params"][k] = v;
  return j;
}

Json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return Json::parse(ss.str());
}

// Rank 0's ops by name.
std::map<std::string, sim::OpRecord> ops_of_rank0(const sim::RunResult& r) {
  std::map<std::string, sim::OpRecord> out;
  for (const auto& op : r.ops)
    if (op.rank == 0) out[op.name] = op;
  return out;
}
}  // namespace

TEST_CASE("gpt replay: the chunk pipeline's order holds in the timeline; the step grows by the unhidden copies") {
  const Json none = one_node({}),
             chunked = one_node({{"chunked_optimizer_state_offload", true}, {"optimizer_state_offload_chunk_size_mb", 128}}),
             window = one_node({{"chunked_optimizer_state_offload", true}}),
             even = one_node({{"chunked_optimizer_state_offload", true}, {"optimizer_state_offload_chunk_size_mb", 1024}}),
             half = one_node({{"chunked_optimizer_state_offload", true}, {"optimizer_state_offload_chunk_size_mb", 128},
                              {"optimizer_state_offload_fraction", 0.5}});
  const auto r0 = run_json(none), rc = run_json(chunked), rw = run_json(window), rh = run_json(half), re = run_json(even);
  const auto o0 = ops_of_rank0(r0), oc = ops_of_rank0(rc);
  REQUIRE(o0.count("optimizer.step") == 1);
  REQUIRE(oc.count("optimizer.masters.h2d") == 1);
  int n = 0;
  while (oc.count("optimizer.step.c" + std::to_string(n))) ++n;
  REQUIRE(n >= 3);
  double h2d = oc.at("optimizer.masters.h2d").end_s - oc.at("optimizer.masters.h2d").start_s, d2h = 0, steps = 0;
  for (int k = 0; k < n; ++k) {
    CAPTURE(k);
    const std::string kn = ".c" + std::to_string(k);
    const auto &in = oc.at("optimizer.state" + kn + ".h2d"), &step = oc.at("optimizer.step" + kn);
    h2d += in.end_s - in.start_s;
    steps += step.end_s - step.start_s;
    if (k + 1 < n) d2h += oc.at("optimizer.state" + kn + ".d2h").end_s - oc.at("optimizer.state" + kn + ".d2h").start_s;
    CHECK(step.start_s >= in.end_s - 1e-12);
    CHECK(step.start_s >= oc.at("optimizer.masters.h2d").end_s - 1e-12);
    if (k >= 2) {
      // The staging slot chunk k reuses is free only once chunk k-2's moments are on the host.
      CHECK(in.start_s >= oc.at("optimizer.state.c" + std::to_string(k - 2) + ".d2h").end_s - 1e-12);
    }
    if (k + 1 < n) CHECK(oc.at("optimizer.state" + kn + ".d2h").start_s >= step.end_s - 1e-12);
  }
  // The copies back start with the end of the backward, as the plain run's gradient finalization does; the plain
  // step starts `window` later (the gradient reduce-scatter's tail). All the copies in run one after the other on the
  // H2D stream, over PCIe Gen5 at a few tens of GB/s against the FusedAdam's HBM rate, so the pipeline cannot hide
  // them: the step grows by at least their time less that window.
  const double start = oc.at("optimizer.masters.h2d").start_s;
  const double window_s = o0.at("optimizer.step").start_s - start;
  CHECK(window_s >= 0.0);
  const double last_end = oc.at("optimizer.step.c" + std::to_string(n - 1)).end_s;
  CHECK(last_end - start >= h2d - 1e-9);
  CHECK(rc.iteration_s - r0.iteration_s >= h2d - window_s - 1e-9);
  // ... and by at most the copies in, the copies out the copies in wait for and the FusedAdam's own time.
  CHECK(last_end - start <= h2d + d2h + steps + 1e-9);
  // Chunks of about equal size (1024 MiB: the embedding's 525 MB of moments and layer pieces of 117 MB fill them)
  // step beside the copies: earlier than one window (chunk size 0), which steps only once everything is back. At
  // 128 MiB the embedding is an oversized chunk of its own, and the copy in two chunks later waits for its copy out
  // (the staging slot it reuses): slower than one window.
  CHECK(re.iteration_s < rw.iteration_s);
  CHECK(rc.iteration_s > rw.iteration_s);
  // Half the state offloaded: about half the copies exposed.
  CHECK(rh.iteration_s > r0.iteration_s);
  CHECK(rh.iteration_s < rc.iteration_s);
  // HBM: the peak falls from the plain run's with the state off the GPU for the forward and backward.
  CHECK(rc.metrics.at("memory_per_gpu_bytes.max") <= r0.metrics.at("memory_per_gpu_bytes.max"));
}

TEST_CASE("gpt replay: Llama-3-70B fits one DGX H100 with 1024 MiB chunks, not with one window (examples/workloads)") {
  const Json ex = read_json(std::string(FABRICSIM_SOURCE_DIR) + "/examples/workloads/llama3-70b-chunked-state-offload-8-h100.json");
  const auto r = run_json(ex);
  CHECK(r.iteration_s > 0);
  bool noted = false;
  for (const auto& note : r.notes) noted = noted || note.find("gpt: chunked_optimizer_state_offload: ") == 0;
  CHECK(noted);
  CHECK(r.metrics.at("memory_per_gpu_bytes.max") <= 80e9);
  // Chunk size 0 (one window of all the moments at the step), or no offload: the 8-way shard's state does not fit
  // beside the weights and gradients.
  Json whole = ex;
  whole["workload"]["params"]["optimizer_state_offload_chunk_size_mb"] = 0;
  CHECK_THROWS_AS(run_json(whole), DoesNotFitError);
  Json off = ex;
  for (const char* k : {"chunked_optimizer_state_offload", "optimizer_state_offload_chunk_size_mb"}) off["workload"]["params"].erase(k);
  CHECK_THROWS_AS(run_json(off), DoesNotFitError);
}
