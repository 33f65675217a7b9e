// `fabricsim import torchtitan` end to end (tests/data/torchtitan-configs, provenance in its PROVENANCE.md): a
// 2025 [parallelism] config, a 2025-09 [compile] / [quantize] config and a current trainer JSON import with the
// parameters their keys say, the same bytes twice, and run; torchtitan's --section.option overrides win over
// the file; bad configs are one error line naming file, line and key, exit 2, nothing written. (The Dec 2024
// config against the validation's torchtitan_row: tests/replay/test_gpt_modern_validation.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"

namespace {

namespace cli_test = fabricsim::cli_test;
namespace fs = std::filesystem;
using cli_test::Run;
using nlohmann::json;

const std::string kDir = "tests/data/torchtitan-configs/";

fs::path scratch() {
  static const fs::path d = cli_test::scratch_dir("import_torchtitan");
  return d;
}

Run run_root(const std::string& args) { return cli_test::run_from_source(scratch(), args); }

json import_params(const std::string& args, Run* run = nullptr) {
  Run r = run_root("import torchtitan " + args);
  if (run) *run = r;
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  return json::parse(r.out)["workload"]["params"];
}

}  // namespace

TEST_CASE("import torchtitan: 2025 [parallelism] / 2025-09 [compile] and [quantize] / 2026 JSON configs import") {
  // torchtitan 820504e's Llama 3 70B preset on 64 GPUs: TP 8, FSDP over the 8 left (data_parallel_shard_degree
  // -1), local batch 8, full AC, no compile; the June 2025 implementation (embeddings in the root FSDP unit,
  // torch.nn.RMSNorm final norm).
  Run r;
  json p = import_params(kDir + "llama3_70b-820504e.toml --topology dgx-h100 --gpus 64", &r);
  CHECK(p["model"] == "llama3-70b");
  CHECK(p["world_size"] == 64);
  CHECK(p["tensor_model_parallel_size"] == 8);
  CHECK(p["sequence_parallel"] == true);
  CHECK(p["use_torch_fsdp2"] == true);
  CHECK(p["micro_batch_size"] == 8);
  CHECK(p["global_batch_size"] == 64);
  CHECK(p["seq_length"] == 8192);
  CHECK(p["recompute_granularity"] == "full");
  CHECK(p["torch_compile"] == false);
  CHECK(p["precision"] == "bf16");
  CHECK(p["fsdp_embeddings_in_root"] == true);
  CHECK_FALSE(p.contains("final_norm_eager"));
  CHECK(r.err.find("ignored (no effect on step time): ") != std::string::npos);
  CHECK(r.err.find("[checkpoint]") != std::string::npos);

  // 8a2686c4a's Llama 3 8B with its own commented-out float8 switched on from the command line, rowwise, compiled.
  p = import_params(kDir + "llama3_8b-8a2686c4a.toml --topology dgx-h100 --model.converters quantize.linear.float8 "
                    "--quantize.linear.float8.recipe_name rowwise --compile.enable");
  CHECK(p["model"] == "llama3-8b");
  CHECK(p["world_size"] == 8);  // shard -1 takes the topology's 8 GPUs
  CHECK(p["precision"] == "fp8");
  CHECK(p["fp8_recipe"] == "rowwise");
  CHECK(p["torch_compile"] == true);
  CHECK(p["cross_entropy_impl"] == "torch_compiled");  // compile.components has "loss"; after bbb1b616e
  CHECK(p["recompute_granularity"] == "selective");
  CHECK(p["selective_ac_option"] == "op");
  CHECK_FALSE(p.contains("fsdp_embeddings_in_root"));  // after 83e694105 (2025-07-28)

  // The resolved Trainer.Config JSON of b5bcd76c6: tokens per micro-batch / context length = 2 sequences, TP 2
  // with compile's async TP, SelectiveAC (its fields), compiled model and loss.
  const std::string json_cfg = kDir + "llama3_8b-trainer-config.json";
  p = import_params(json_cfg + " --topology dgx-h100");
  CHECK(p["micro_batch_size"] == 2);
  CHECK(p["seq_length"] == 8192);
  CHECK(p["global_batch_size"] == 8);  // 2 x DP 4
  CHECK(p["tensor_model_parallel_size"] == 2);
  CHECK(p["tp_comm_overlap"] == true);
  CHECK(p["tp_comm_overlap_impl"] == "symmetric_memory");  // PyTorch's micro-pipeline TP
  CHECK(p["tp_comm_bulk_wgrad"] == false);
  CHECK(p["selective_ac_option"] == "op");
  CHECK(p["cross_entropy_impl"] == "torch_compiled");

  // Same input, same bytes; and `run --torchtitan` simulates it.
  Run a = run_root("import torchtitan " + json_cfg + " --topology dgx-h100");
  Run b = run_root("import torchtitan " + json_cfg + " --topology dgx-h100");
  CHECK(a.out == b.out);
  Run sim = run_root("run --torchtitan " + json_cfg + " --topology dgx-h100 --comm-model analytic -q");
  REQUIRE_MESSAGE(sim.rc == 0, sim.err);
  CHECK(sim.out.find("tokens/s") != std::string::npos);
}

TEST_CASE("import torchtitan: float8's backward weight re-cast is priced only where torchao's costs are") {
  // 820504e's 70B with float8 converted in from the command line (tensorwise, torch FSDP2).
  json p = import_params(kDir + "llama3_70b-820504e.toml --topology dgx-h100 --gpus 256 --model.converters float8 "
                         "--float8.force_recompute_fp8_weight_in_bwd");
  CHECK(p["fp8_recipe"] == "tensorwise");
  CHECK(p["force_recompute_fp8_weight_in_bwd"] == true);
  p = import_params(kDir + "llama3_70b-820504e.toml --topology dgx-h100 --gpus 256 --model.converters float8 "
                    "--float8.recipe_name rowwise --float8.force_recompute_fp8_weight_in_bwd");
  CHECK(p["fp8_recipe"] == "rowwise");
  CHECK_FALSE(p.contains("force_recompute_fp8_weight_in_bwd"));
}

TEST_CASE("import torchtitan: command-line overrides win over the file") {
  // 9dec370's 70B preset says batch_size 8, TP 8, full AC, compile false.
  json p = import_params(kDir + "llama3_70b-9dec370.toml --topology dgx-h100 --gpus 128 --training.batch_size 4 "
                         "--training.tensor_parallel_degree=4 --activation_checkpoint.mode selective "
                         "--activation_checkpoint.selective_ac_option 2 --training.compile true");
  CHECK(p["micro_batch_size"] == 4);
  CHECK(p["tensor_model_parallel_size"] == 4);
  CHECK(p["global_batch_size"] == 4 * 32);
  // every 2nd layer checkpointed: 40 of the 80 layers recomputed whole
  CHECK(p["recompute_granularity"] == "full");
  CHECK(p["recompute_method"] == "block");
  CHECK(p["recompute_num_layers"] == 40);
  CHECK(p["torch_compile"] == true);
  CHECK(p["cross_entropy_impl"] == "torch");  // Dec 2024: the loss ran eagerly
  CHECK(p["final_norm_eager"] == true);
  // --torchtitan-version moves the implementation rules; --param wins over everything.
  p = import_params(kDir + "llama3_70b-9dec370.toml --topology dgx-h100 --gpus 64 --training.compile "
                    "--torchtitan-version 2025-08-14 --param micro_batch_size=2");
  CHECK(p["cross_entropy_impl"] == "torch_compiled");
  CHECK_FALSE(p.contains("final_norm_eager"));
  CHECK_FALSE(p.contains("fsdp_embeddings_in_root"));
  CHECK(p["micro_batch_size"] == 2);
  // SDPA's cuDNN backend first on B200 from 5de055e30 (2025-05-20); flash before.
  p = import_params(kDir + "llama3_8b-8a2686c4a.toml --topology dgx-b200");
  CHECK(p["attention_backend"] == "fused");
  p = import_params(kDir + "llama3_8b-8a2686c4a.toml --topology dgx-b200 --torchtitan-version 9dec370");
  CHECK(p["attention_backend"] == "flash");
}

TEST_CASE("import torchtitan: bad configs are one line naming file, line and key; exit 2; nothing written") {
  const fs::path out = scratch() / "never.json";
  struct Case {
    std::string toml, message, extra;
  };
  const std::string base = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n\n[training]\nlocal_batch_size = 2\n";
  const Case cases[] = {
      {base + "batch_sise = 4\n",
       "fabricsim import: error: bad.toml:7: training.batch_sise: unknown key (not an option of torchtitan's configs "
       "at pytorch/torchtitan@9dec370, 820504e, 6fc499f6, 8a2686c4a and b5bcd76c6 as far as the importer knows; "
       "--ignore-unknown lists such keys and goes on)\n", ""},
      {base, "fabricsim import: error: command line: --training.local_batch_sizes: unknown torchtitan option (not one "
             "of the schemas of pytorch/torchtitan@9dec370, 820504e, 6fc499f6, 8a2686c4a and b5bcd76c6 as far as "
             "the importer knows; --ignore-unknown lists such options)\n", " --training.local_batch_sizes 4"},
      {base + "seq_len = \"long\"\n", "fabricsim import: error: bad.toml:7: training.seq_len: expected an integer, got long\n", ""},
      // NoPE layers with chunked attention are not modelled: the _irope flavors stay refused.
      {"[model]\nname = \"llama4\"\nflavor = \"17bx128e_irope\"\n", "", ""},
      {base + "[activation_checkpoint]\nmode = \"sometimes\"\n",
       "fabricsim import: error: bad.toml:8: activation_checkpoint.mode: expected none, selective or full, got "
       "'sometimes'\n", ""},
      {base + "[parallelism]\ntensor_parallel_degree = 3\n", "", ""},  // 8 GPUs are not a multiple of 3
      {base + "x = [1,\n", "", ""},  // not valid TOML (the parser's message)
      {base, "fabricsim import: error: command line: --training.local_batch_size: expected an integer, got 'two'\n",
       " --training.local_batch_size two"},
      // Async TP is an Inductor pass: torchtitan refuses it without compile.
      {base + "[parallelism]\ntensor_parallel_degree = 2\nenable_async_tensor_parallel = true\n",
       "fabricsim import: error: bad.toml:9: parallelism.enable_async_tensor_parallel: async TP needs the model "
       "compiled (torchtitan raises \"Async TP requires --training.compile\")\n", ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.toml);
    cli_test::write_file(scratch() / "bad.toml", c.toml);
    cli_test::check_refused(scratch(), "import torchtitan bad.toml --topology dgx-h100" + c.extra, out, c.message);
  }
  cli_test::write_file(scratch() / "irope.toml", "[model]\nname = \"llama4\"\nflavor = \"17bx128e_irope\"\n");
  Run r = cli_test::run_in(scratch(), cli_test::fabricsim("import torchtitan irope.toml --topology dgx-h100"));
  CHECK(r.err.find("irope.toml:3: model.flavor: the catalogue has no shape for torchtitan's llama4 flavor "
                   "'17bx128e_irope' (NoPE layers with chunked attention are not modelled; it has ") != std::string::npos);
  // --ignore-unknown lists the unknown key and goes on.
  cli_test::write_file(scratch() / "typo.toml", base + "batch_sise = 4\n");
  r = cli_test::run_in(scratch(), cli_test::fabricsim("import torchtitan typo.toml --topology dgx-h100 --ignore-unknown"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.err.find("unknown keys ignored (--ignore-unknown): training.batch_sise") != std::string::npos);
}

TEST_CASE("import torchtitan: uneven pipeline_parallel_layers_per_stage and module_fqns_per_model_part as layouts") {
  // Llama 3 8B (32 layers), PP 4, Interleaved1F1B, 3 layers per stage: torchtitan makes ceil((32 + 1 + 1) / 3) = 12
  // stages, 3 per rank, and generate_llm_fqn_per_model_part splits the 34 effective layers 2 each plus one on
  // each of the first 10 stages: 2 on stage 0 (the embedding weighs 1), 3 on stages 1-9, 2 on stage 10, 1 on
  // stage 11 (the output weighs 1). Stage s runs on rank s mod 4, Megatron's chunk placement.
  const std::string base = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n\n[training]\nlocal_batch_size = 8\n"
                           "seq_len = 2048\n\n[parallelism]\npipeline_parallel_degree = 4\n"
                           "pipeline_parallel_schedule = \"Interleaved1F1B\"\n";
  auto file = [&](const std::string& name, const std::string& text) {
    cli_test::write_file(scratch() / name, text);
    return (scratch() / name).string();
  };
  const std::string pp3 = file("pp3.toml", base + "pipeline_parallel_layers_per_stage = 3\n");
  json p = import_params(pp3 + " --topology dgx-h100");
  CHECK(p["pipeline_model_parallel_layout"] == "Ett|ttt|ttt|ttt|ttt|ttt|ttt|ttt|ttt|ttt|tt|tL");
  CHECK_FALSE(p.contains("virtual_pipeline_model_parallel_size"));
  CHECK_FALSE(p.contains("account_for_embedding_in_pipeline_split"));
  // The default, 2 stages per rank: 34 effective layers over 8 stages, 4 each and one more on stages 0 and 1.
  p = import_params(file("pp_default.toml", base) + " --topology dgx-h100");
  CHECK(p["pipeline_model_parallel_layout"] == "Etttt|ttttt|tttt|tttt|tttt|tttt|tttt|tttL");
  // An even split (405B: 126 + 2 over 8 stages) stays Megatron's flags, as before.
  p = import_params(file("pp_even.toml", base) + " --topology dgx-h100 --model.flavor 405B");
  CHECK_FALSE(p.contains("pipeline_model_parallel_layout"));
  CHECK(p["account_for_embedding_in_pipeline_split"] == true);
  CHECK(p["virtual_pipeline_model_parallel_size"] == 2);
  // module_fqns_per_model_part: the stages as given (4 layers each, the embedding and the output on top).
  std::string parts = "[[\"tok_embeddings\"";
  for (int l = 0; l < 32; ++l) parts += std::string(l && l % 4 == 0 ? "], [" : ", ") + "\"layers." + std::to_string(l) + "\"";
  parts += ", \"norm\", \"output\"]]";
  p = import_params(file("fqn.toml", base + "module_fqns_per_model_part = " + parts + "\n") + " --topology dgx-h100");
  CHECK(p["pipeline_model_parallel_layout"] == "Etttt|tttt|tttt|tttt|tttt|tttt|tttt|ttttL");
  // b5bcd76c6 names the output module lm_head.
  parts.replace(parts.find("\"output\""), 8, "\"lm_head\"");
  p = import_params(file("fqn2.toml", base + "module_fqns_per_model_part = " + parts + "\n") + " --topology dgx-h100");
  CHECK(p["pipeline_model_parallel_layout"] == "Etttt|tttt|tttt|tttt|tttt|tttt|tttt|ttttL");
  // The imported layout runs.
  const std::string out = (scratch() / "pp3.json").string();
  Run r = run_root("import torchtitan " + pp3 + " --topology dgx-h100 -o " + out);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  r = run_root("run " + out + " --quiet");
  CHECK_MESSAGE(r.rc == 0, r.err);
  // torchtitan's own refusal: 5 layers per stage gives ceil(34 / 5) = 7 stages, not a multiple of PP 4.
  r = run_root("import torchtitan " + file("pp5.toml", base + "pipeline_parallel_layers_per_stage = 5\n") +
               " --topology dgx-h100");
  CHECK(r.rc == 2);
  CHECK(r.err.find("parallelism.pipeline_parallel_layers_per_stage: gives 7 stages") != std::string::npos);
}

TEST_CASE("import torchtitan: DeepSeek-V3 without MTP, and the dense Qwen3, DeepSeek-V3 16B and Maverick flavors") {
  // torchtitan's deepseek_v3 flavors train no MTP (num_mtp_layers 0 in its model registry at b5bcd76c6; no MTP
  // module at 4a950eaab), so the import sets mtp_num_layers 0 and a pipeline split holds no MTP layer.
  const std::string ds = kDir + "deepseek_v3_671b-4a950eaab.toml --topology dgx-h100 --gpus 512 ";
  json p = import_params(ds + "--parallelism.pipeline_parallel_degree 4 --parallelism.expert_parallel_degree 64");
  CHECK(p["model"] == "deepseek-v3");
  CHECK(p["mtp_num_layers"] == 0);
  CHECK(p["pipeline_model_parallel_size"] == 4);
  p = import_params(ds + "--parallelism.expert_parallel_degree 64");
  CHECK(p["mtp_num_layers"] == 0);
  // --param still wins.
  p = import_params(ds + "--parallelism.expert_parallel_degree 64 --param mtp_num_layers=1");
  CHECK(p["mtp_num_layers"] == 1);

  // The flavors of torchtitan's own train_configs at 4a950eaab map to catalogue shapes; one runs.
  const std::pair<const char*, const char*> flavors[] = {{"qwen3 --model.flavor 0.6B", "qwen3-0.6b"},
                                                         {"qwen3 --model.flavor 1.7B", "qwen3-1.7b"},
                                                         {"qwen3 --model.flavor 32B", "qwen3-32b"},
                                                         {"deepseek_v3 --model.flavor 16B", "deepseek-v3-16b"},
                                                         {"llama4 --model.flavor 17bx128e", "llama4-maverick"}};
  for (const auto& [flags, model] : flavors) {
    CAPTURE(flags);
    p = import_params(kDir + "llama3_8b-8a2686c4a.toml --topology dgx-h100 --gpus 64 --model.name " + flags);
    CHECK(p["model"] == model);
    CHECK_FALSE(p.contains("mtp_num_layers"));
  }
  const std::string out = (scratch() / "qwen3_06b.json").string();
  Run r = run_root("import torchtitan " + kDir + "llama3_8b-8a2686c4a.toml --topology dgx-h100 --model.name qwen3 "
                   "--model.flavor 0.6B -o " + out);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  r = run_root("run " + out + " --quiet");
  CHECK_MESSAGE(r.rc == 0, r.err);
}
