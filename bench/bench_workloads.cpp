// Workload benchmarks (docs/performance.md, "Workloads"): wall time (trace generation + replay) and peak
// resident memory for GPT-3 175B (TP 8, PP 16, 1F1B, DP = the rest) on 1024, 4096 and 16384 A100 GPUs and a
// DLRM (distributed-embeddings "large") on 128 and 1024 GPUs, in DGX A100 SuperPODs, and Llama-3.1-405B on
// 16,384 H100 (examples/workloads/llama3.1-405b-16384-h100.json: TP 8, CP 1, PP 16, DP 128, seq 8192).
// DeepSeek-V3 on 2048 H800-class GPUs (examples/workloads/deepseek-v3-2048-h800.json: PP 16, EP 64, DP 128,
// flex dispatch, FP8).
// deepseekv3mz: the Megatron-MoE-ModelZoo DeepSeek-V3 recipe for 1,024 H100 (bench/deepseek_v3_modelzoo_1024_h100.json:
// TP 2, PP 8 x VPP 4 by the layout Et|(tt|)*30mL, EP 64, ETP 1, MTP 1, GBS 8192, FP8 blockwise; docs/performance.md);
// not part of `all` (about 70-110 s of CPU under the shared model).
// cluster100k: two Llama-3-70B jobs of 49,152 GPUs each (TP 8, PP 8, DP 768; one packed, one spread) on a
// 100,000-GPU H100 cluster (12,500 DGX H100, 3-tier radix-128 fat tree), bench/cluster_100k.json: with the
// default engine tier each call priced alone on an idle fabric, with --comm-model shared replayed together on
// the shared network and each alone where they meet (replay/cluster_run.hpp); not part of `all`.
// Usage: bench_workloads [all | gpt1024 | gpt4096 | gpt16384 | dlrm128 | dlrm1024 | llama405b16k | deepseekv3 |
//                         deepseekv3mz | cluster100k]
//        [--comm-model engine | shared | analytic]   (default engine)
//        [--step-limit N] [--no-link-stats]
// --step-limit sets EngineCommOptions::step_limit (1e18 = step fidelity everywhere, the old behaviour);
// --no-link-stats turns off the per-link statistics the engine comm model collects by default.
// `all` runs each case in its own child process so peak RSS is per case.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "bench/bench_util.hpp"
#include "replay/run_scenario.hpp"
#include "workloads/scenario.hpp"
#include "sim/base/allocator.hpp"

using namespace fabricsim;

namespace {

// The repository root, from this file's compile-time path (CMake compiles with absolute paths).
std::string source_dir() {
  std::string f = __FILE__;
  auto pos = f.rfind("/bench/");
  return pos == std::string::npos ? "." : f.substr(0, pos);
}

Json gpt_case(int gpus) {
  // 2048 DGX A100 need switches of radix 64 for a 3-tier fat tree (radix 40 HDR switches top out below).
  Json tp = {{"nodes", gpus / 8}, {"node", "dgx-a100"}};
  if (gpus > 8192) tp["radix"] = 64;
  return {{"topology", {{"preset", "superpod"}, {"params", tp}}},
          {"workload",
           {{"generator", "gpt"},
            {"params",
             {{"num_layers", 96}, {"hidden_size", 12288}, {"num_attention_heads", 96}, {"seq_length", 2048},
              {"padded_vocab_size", 51200}, {"micro_batch_size", 1}, {"global_batch_size", 1536},
              {"tensor_model_parallel_size", 8}, {"pipeline_model_parallel_size", 16},
              {"recompute_granularity", "full"}}}}}};
}

Json dlrm_case(int gpus) {
  return {{"topology", {{"preset", "superpod"}, {"params", {{"nodes", gpus / 8}, {"node", "dgx-a100"}}}}},
          {"workload",
           {{"generator", "dlrm"},
            {"params",
             {{"configs", source_dir() + "/tests/data/training/distributed_embeddings_synthetic_configs.json"},
              {"model", "large"}, {"global_batch_size", 65536}}}}}};
}

int run_one(const std::string& name, const std::string& comm, const sim::EngineCommOptions& eng) {
  Json sc;
  if (name == "gpt1024") sc = gpt_case(1024);
  else if (name == "gpt4096") sc = gpt_case(4096);
  else if (name == "gpt16384") sc = gpt_case(16384);
  else if (name == "dlrm128") sc = dlrm_case(128);
  else if (name == "dlrm1024") sc = dlrm_case(1024);
  else if (name == "llama405b16k") sc = load_json_file(source_dir() + "/examples/workloads/llama3.1-405b-16384-h100.json");
  else if (name == "deepseekv3") sc = load_json_file(source_dir() + "/examples/workloads/deepseek-v3-2048-h800.json");
  else if (name == "deepseekv3mz")
    sc = load_json_file(source_dir() + "/bench/deepseek_v3_modelzoo_1024_h100.json");
  else if (name == "cluster100k") sc = load_json_file(source_dir() + "/bench/cluster_100k.json");
  else {
    std::fprintf(stderr, "unknown case %s\n", name.c_str());
    return 2;
  }
  const double t0 = bench::now_s();
  auto s = workloads::scenario_from_json(sc, name);
  sim::ScenarioRunOptions opt;
  opt.comm_model = comm;
  opt.engine = eng;
  auto run = sim::run_scenario(s, opt);
  const double wall = bench::now_s() - t0;
  std::printf("%-9s gpus=%-6d ops=%-8zu step=%.6f s  wall=%.2f s (generate %.2f, replay %.2f)  peak_rss=%.0f MiB\n",
              name.c_str(), run.result.gpus, run.trace_ops, run.result.iteration_s, wall, run.generate_wall_s,
              run.replay_wall_s, bench::peak_rss_MiB());
  auto metric = [&](const char* k) {
    auto it = run.result.metrics.find(k);
    return it == run.result.metrics.end() ? 0.0 : it->second;
  };
  std::printf("          schedules=%.0f (phase fidelity %.0f)  links=%zu  tflops/gpu=%.2f\n",
              metric("replay.schedules_run"), metric("replay.schedules_run_phase_fidelity"),
              run.result.links.size(), run.result.tflops_per_gpu);
  for (const auto& j : run.result.jobs)
    std::printf("          job %s: %d GPUs, step %.6f s together, %.6f s alone, slowdown %.4f\n", j.name.c_str(), j.gpus,
                j.iteration_s, j.iteration_s_alone, j.slowdown);
  if (name == "deepseekv3")
    std::printf("          tokens/s/gpu=%.1f  (DeepSeek-V3 report: 1543.2, tests/data/training-modern/deepseek_v3.csv)\n",
                run.result.tokens_per_s / run.result.gpus);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  fabricsim::retain_freed_memory();  // as the CLI does (sim/base/allocator.hpp)
  std::string which = argc > 1 ? argv[1] : "all";
  std::string comm = "engine";
  sim::EngineCommOptions eng;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--comm-model") == 0 && i + 1 < argc) comm = argv[++i];
    else if (std::strcmp(argv[i], "--step-limit") == 0 && i + 1 < argc) eng.step_limit = std::atof(argv[++i]);
    else if (std::strcmp(argv[i], "--no-link-stats") == 0) eng.collect_link_stats = false;
    else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (which != "all") {
    try {
      return run_one(which, comm, eng);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_workloads: error: %s\n", e.what());
      return 2;
    }
  }
  for (const char* c : {"gpt1024", "gpt4096", "gpt16384", "dlrm128", "dlrm1024", "llama405b16k", "deepseekv3"}) {
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      int rc = 1;
      try {
        rc = run_one(c, comm, eng);
      } catch (const std::exception& e) {
        std::printf("%s: error: %s\n", c, e.what());
      }
      std::fflush(stdout);
      _exit(rc);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) std::printf("%s failed\n", c);
  }
  return 0;
}
