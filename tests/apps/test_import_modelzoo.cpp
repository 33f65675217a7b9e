// Megatron-MoE-ModelZoo's DeepSeek-V3 and Kimi-K2 launch recipes (yanring/Megatron-MoE-ModelZoo@e865051, written
// out as the commands its sbatch_benchmarking.sh assembles: tests/data/modelzoo/PROVENANCE.md) through
// `fabricsim import megatron` and `fabricsim run`: the recompute modules and FP8 parameters they ask for are
// modelled, and what they change is the hand-computed amount.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"

namespace {

namespace cli_test = fabricsim::cli_test;
namespace fs = std::filesystem;
using cli_test::Run;
using nlohmann::json;

const std::string kDsv3 = "tests/data/modelzoo/deepseek_v3_h100_1024.sh";
const std::string kKimi = "tests/data/modelzoo/kimi_k2_gb200_128k.sh";

fs::path scratch() {
  static const fs::path d = cli_test::scratch_dir("import_modelzoo");
  return d;
}

Run run_root(const std::string& args) { return cli_test::run_from_source(scratch(), args); }

json import_scenario(const std::string& args, const std::string& name) {
  const fs::path out = scratch() / name;
  fs::remove(out);
  Run r = run_root("import megatron " + args + " -o " + cli_test::quoted(out.string()));
  REQUIRE_MESSAGE(r.rc == 0, args << "\n" << r.err);
  return json::parse(cli_test::slurp(out));
}

json run_json(const json& scenario, const std::string& name) {
  const fs::path sc = scratch() / (name + ".scenario.json"), out = scratch() / (name + ".json");
  cli_test::write_file(sc, scenario.dump(1));
  fs::remove(out);
  Run r = run_root("run " + cli_test::quoted(sc.string()) + " -q --comm-model analytic --json " + cli_test::quoted(out.string()));
  REQUIRE_MESSAGE(r.rc == 0, name << "\n" << r.err);
  return json::parse(cli_test::slurp(out));
}

double gib(const json& result, const std::string& term) {
  return result.at("metrics").at("memory_per_gpu_bytes." + term).get<double>() / double(1u << 30);
}

}  // namespace

TEST_CASE("modelzoo: DeepSeek-V3's H100 recipe imports and runs with mla_up_proj, mlp and FP8 parameters") {
  // DeepSeek-V3's tokenizer gives 129,280 tokens, a multiple of 3232 x TP 2: Megatron-LM keeps it.
  const json sc = import_scenario(kDsv3 + " --topology dgx-h100 --param padded_vocab_size=129280", "dsv3.json");
  const json& p = sc.at("workload").at("params");
  CHECK(p.at("world_size") == 1024);
  CHECK(p.at("recompute_granularity") == "selective");
  CHECK(p.at("recompute_modules") == "mla_up_proj mlp");
  CHECK(p.at("fp8_param_gather") == true);
  CHECK(p.at("multi_latent_attention") == true);
  // A shorter step for the test: 512 sequences, 8 micro-batches per DP rank (the interleaved schedule needs a
  // multiple of PP 8) instead of 128; the stored micro-batches at the peak are the recipe's.
  json small = sc;
  small["workload"]["params"]["global_batch_size"] = 512;
  const json r = run_json(small, "dsv3_run");
  CHECK(r.at("iteration_s").get<double>() > 0);
  // The same without mla_up_proj: each stored micro-batch keeps its layers' Q, K and V, bf16, per token on one
  // of TP 2's ranks (the heads split): 128 / 2 heads x (192 + 192 + 128) x 2 B = 65,536 B, x 4096 tokens.
  json keep = small;
  keep["workload"]["params"]["recompute_modules"] = "mlp";
  const json rk = run_json(keep, "dsv3_keep");
  const double qkv_layer_gib = 4096.0 * 64 * (192 + 192 + 128) * 2 / double(1u << 30);  // 0.25 GiB
  const double saved = gib(rk, "activations") - gib(r, "activations");
  CHECK(saved > 0);
  // The saving is a whole number of layer-micro-batches of Q/K/V, less the one layer holding them again.
  const double units = saved / qkv_layer_gib;
  CAPTURE(units);
  CHECK(std::abs(units - std::round(units)) < 1e-6);
  CHECK(units >= 1);
  // And the step pays the recomputed up-projections.
  CHECK(r.at("iteration_s").get<double>() > rk.at("iteration_s").get<double>());
  // (fp8_param_gather with MLA in the trace and the memory: tests/workloads/test_gpt_recompute_modules.cpp.)
}

TEST_CASE("modelzoo: Kimi-K2's GB200 recipe imports and runs as written, its optimizer state offloaded") {
  // The GB200 pair of NVL72 racks the recipe runs on (128 of the 144 GPUs), as a topology file.
  const fs::path topo = scratch() / "gb200x2.json";
  Run t = run_root("topo superpod --param nodes=2 --param node=gb200-nvl72 --param gpu=gb200 --export " +
                   cli_test::quoted(topo.string()));
  REQUIRE_MESSAGE(t.rc == 0, t.err);
  // As written: --offload-optimizer-states is a flag of Megatron-LM's dev branch (@d48bd6be), which the recipe
  // needs; the flags left unmodelled are Python's manual garbage collection (host pauses, not simulated), HybridEP's
  // kernel settings and the MXFP8 gradient-buffer reuse.
  const fs::path out = scratch() / "kimi.json";
  fs::remove(out);
  Run im = run_root("import megatron " + kKimi + " --topology " + cli_test::quoted(topo.string()) + " -o " +
                    cli_test::quoted(out.string()));
  REQUIRE_MESSAGE(im.rc == 0, im.err);
  CHECK(im.err.find("warning: not modelled (they change the step; fabricsim does not simulate them): "
                    "--manual-gc, --manual-gc-interval 10, --moe-permute-fusion-into-hybridep, --moe-hybridep-num-sms 32, "
                    "--reuse-grad-buf-for-mxfp8-param-ag\n") !=
        std::string::npos);
  // --enable-experimental (the fused routing-map kernels, the path fabricsim prices) is listed as ignored;
  // --moe-flex-dispatcher-backend hybridep is the flex model's dispatch, in neither list.
  const auto ign = im.err.find("ignored (no effect on step time): ");
  REQUIRE(ign != std::string::npos);
  CHECK(im.err.find("--enable-experimental", ign) != std::string::npos);
  CHECK(im.err.find("--moe-flex-dispatcher-backend") == std::string::npos);
  json sc = json::parse(cli_test::slurp(out));
  const json& p = sc.at("workload").at("params");
  CHECK(p.at("world_size") == 128);
  CHECK(p.at("offload_optimizer_states") == true);
  CHECK(p.at("recompute_modules") == "mla_up_proj mlp layernorm moe_act");
  CHECK(p.at("fp8_param_gather") == true);
  CHECK(p.at("fp8_recipe") == "mxfp8");
  CHECK(p.at("seq_length") == 131072);
  CHECK(p.at("moe_token_dispatcher_type") == "flex");
  // The step as the import wrote it, ranks filled rack after rack (memory does not depend on the placement).
  const json r = run_json(sc, "kimi_run");
  CHECK(r.at("iteration_s").get<double>() > 0);
  const double hbm_gib = 186e9 / double(1u << 30);  // GB200: 186 GB of HBM3e per GPU (models/gpu.cpp)
  const double peak = gib(r, "max");
  CAPTURE(peak);
  CHECK(peak <= hbm_gib);
  // The peak stage holds no optimizer state in the forward and backward; what it copies out and back is at least
  // its experts' state: EDP 1, so the whole state of its 6 experts (384 / EP 64) in each of its 30 MoE layers,
  // 3 x 7168 x 2048 weights each (SwiGLU fc1 and fc2), 8 bytes per weight (fp32 master for the MXFP8 parameters,
  // bf16 moments).
  CHECK(gib(r, "optimizer") == 0.0);
  const double experts_gib = 30.0 * 6 * 3 * 7168 * 2048 * 8 / double(1u << 30);  // 59.06 GiB
  const double offloaded = gib(r, "optimizer_offloaded");
  CAPTURE(offloaded);
  CHECK(offloaded >= experts_gib);
  CHECK(offloaded < experts_gib + 3.0);  // + the stage's dense shard over DP 4 (attention, norms, output layer)
  CHECK(r.at("metrics").at("host_memory_per_gpu_bytes.optimizer").get<double>() / double(1u << 30) == doctest::Approx(offloaded));
  // Host memory, checked against the topology's: a GB200 tray's 2 Grace CPUs of 480 GB LPDDR5X over its 4 GPUs
  // (topologies/presets.cpp); pinned per GPU, the optimizer state and the offloaded expert_fc1 activations.
  const auto& metrics = r.at("metrics");
  CHECK(metrics.at("host_memory_per_gpu_bytes.capacity").get<double>() == 240e9);
  const double host = metrics.at("host_memory_per_gpu_bytes.max").get<double>() / double(1u << 30);
  CHECK(host == doctest::Approx(offloaded + gib(r, "activations_offloaded")));
  CHECK(host < 240e9 / double(1u << 30));
  // Without the offload the same stage would not fit: the state on top of the forward / backward peak.
  CHECK(gib(r, "weights_grads_optimizer") + gib(r, "activations") + offloaded > hbm_gib);
  // The recipe's Slurm --segment=16 (SEGMENT=16, sbatch_benchmarking.sh at e865051): 16 trays of 4 GPUs per rack,
  // so that each pipeline stage's TP 16 and EP 64 groups stay in one rack's NVLink domain. Filled rack after rack,
  // stage 1's groups straddle the two racks and its TP traffic crosses InfiniBand.
  json placed = sc;
  placed["topology"]["placement"] = {{"segment", 16}};
  const fs::path placed_file = scratch() / "kimi_placed.scenario.json", placed_out = scratch() / "kimi_placed.json";
  cli_test::write_file(placed_file, placed.dump(1));
  fs::remove(placed_out);
  Run pr = run_root("run " + cli_test::quoted(placed_file.string()) + " -q --json " + cli_test::quoted(placed_out.string()));
  REQUIRE_MESSAGE(pr.rc == 0, pr.err);
  const double placed_s = json::parse(cli_test::slurp(placed_out)).at("iteration_s").get<double>();
  CAPTURE(placed_s);
  CHECK(placed_s < r.at("iteration_s").get<double>());
  // The copy back before the optimizer step costs at most its own time: the same model at a shorter sequence
  // (32K) and batch, which fits without the offload, with and without it (the state is the same size).
  json small = sc;
  small["workload"]["params"]["global_batch_size"] = 8;
  small["workload"]["params"]["seq_length"] = 32768;
  json kept = small;
  kept["workload"]["params"].erase("offload_optimizer_states");
  const json rs = run_json(small, "kimi_small"), rk = run_json(kept, "kimi_kept");
  const double copy_s = offloaded * double(1u << 30) / (450e9 * 26.28 / 32.0);  // NVLink-C2C, the pinned-copy share
  const double cost = rs.at("iteration_s").get<double>() - rk.at("iteration_s").get<double>();
  CAPTURE(cost);
  CAPTURE(copy_s);
  CHECK(cost > 0);
  CHECK(cost <= copy_s * 1.001);
}
