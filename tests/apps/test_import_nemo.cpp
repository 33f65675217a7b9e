// `fabricsim import nemo` end to end: the NeMo-Framework-Launcher's Llama 3 70B config (tests/data/nemo-configs,
// provenance in its README) gives the same scenario as the Megatron-LM command line that sets the same
// Megatron-Core fields, the same bytes twice, and runs; NeMo's own megatron_gpt_config.yaml imports with its
// interpolations; interpolations resolve within the file; bad configs are one error line, exit 2, nothing written.
#include <doctest/doctest.h>

#include <algorithm>
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

const std::string kSrc = FABRICSIM_SOURCE_DIR;
const std::string kLlama = "tests/data/nemo-configs/launcher-llama3_70b.yaml";
const std::string kGpt = "tests/data/nemo-configs/megatron_gpt_config.yaml";
const std::string kMixtral = "tests/data/nemo-configs/launcher-mixtral_8x7b.yaml";

fs::path scratch() {
  static const fs::path d = cli_test::scratch_dir("import_nemo");
  return d;
}

Run run_root(const std::string& args) { return cli_test::run_from_source(scratch(), args); }

void write(const fs::path& p, const std::string& text) { cli_test::write_file(p, text); }

// A small config in NeMo's layout; `model_extra` is added under model:.
std::string small_config(const std::string& model_extra = "", const std::string& trainer_extra = "") {
  return "trainer:\n  devices: 8\n  num_nodes: 1\n  precision: bf16-mixed\n" + trainer_extra +
         "model:\n  mcore_gpt: true\n  megatron_amp_O2: true\n  transformer_engine: true\n"
         "  gradient_accumulation_fusion: true\n  micro_batch_size: 1\n  global_batch_size: 16\n"
         "  tensor_model_parallel_size: 2\n  encoder_seq_length: 1024\n  num_layers: 2\n  hidden_size: 1024\n"
         "  num_attention_heads: 16\n  tokenizer:\n    library: megatron\n    type: GPT2BPETokenizer\n" +
         model_extra + "  optim:\n    name: mcore_distributed_optim\n";
}

}  // namespace

TEST_CASE("import nemo: the launcher's Llama 3 70B config is its Megatron-LM command line; same bytes; it runs") {
  // Llama 3's 128,256-token vocabulary padded as NeMo pads it: to a multiple of 128 x TP 4 = 512.
  const std::string vocab = " --param padded_vocab_size=128512";
  const fs::path a = scratch() / "llama_a.json", b = scratch() / "llama_b.json";
  Run r1 = run_root("import nemo " + kLlama + " --topology dgx-h100" + vocab + " -o " + cli_test::quoted(a.string()));
  REQUIRE_MESSAGE(r1.rc == 0, r1.err);
  CHECK(r1.out.empty());
  // What the config asks for that fabricsim does not simulate, by YAML path.
  CHECK(r1.err.find("fabricsim import: warning: not modelled (they change the step; fabricsim does not simulate "
                    "them): model.gc_interval=100\n") != std::string::npos);
  CHECK(r1.err.find("ignored (no effect on step time): ") != std::string::npos);
  CHECK(r1.err.find("exp_manager") != std::string::npos);
  Run r2 = run_root("import nemo " + kLlama + " --topology dgx-h100" + vocab + " -o " + cli_test::quoted(b.string()));
  REQUIRE(r2.rc == 0);
  const std::string text = cli_test::slurp(a);
  CHECK(text == cli_test::slurp(b));
  Run r3 = run_root("import nemo - --topology dgx-h100" + vocab + " < " + kLlama);
  REQUIRE_MESSAGE(r3.rc == 0, r3.err);
  json nemo = json::parse(text);
  CHECK(json::parse(r3.out)["workload"]["params"] == nemo["workload"]["params"]);

  // The same job written as a Megatron-LM launch, flag by flag from the YAML (trainer: 128 nodes x 8 GPUs, bf16;
  // model: mbs 1, gbs 2048, TP 4, PP 4, VPP 5, CP 2, 80 x 8192, FFN 28672, 64 heads in 8 groups, RMSNorm, no
  // biases, fast-swiglu, rope, untied embeddings, sequence parallel, userbuffers TP overlap, cross-entropy
  // fusion, mcore distributed optimizer with both overlaps and NeMo's default optim.average_in_collective True, the
  // output layer's wgrad deferred for 22 micro-batches).
  write(scratch() / "llama.sh",
        "torchrun --nproc-per-node 8 --nnodes 128 pretrain_gpt.py --bf16 --micro-batch-size 1 --global-batch-size 2048 "
        "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 5 "
        "--context-parallel-size 2 --seq-length 8192 --max-position-embeddings 8192 --num-layers 80 --hidden-size 8192 "
        "--ffn-hidden-size 28672 --num-attention-heads 64 --group-query-attention --num-query-groups 8 "
        "--hidden-dropout 0.0 --attention-dropout 0.0 --normalization RMSNorm --disable-bias-linear --swiglu "
        "--position-embedding-type rope --untie-embeddings-and-output-weights --sequence-parallel --tp-comm-overlap "
        "--cross-entropy-loss-fusion --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
        "--ddp-average-in-collective --defer-embedding-wgrad-compute --wgrad-deferral-limit 22\n");
  Run m = cli_test::run_in(scratch(), cli_test::fabricsim("import megatron llama.sh --topology dgx-h100" + vocab));
  REQUIRE_MESSAGE(m.rc == 0, m.err);
  json meg = json::parse(m.out);
  // A Megatron-LM launch states the FLOP count Megatron-LM logs (causal); the NeMo config the count NeMo logs, its
  // llama3 formula by run.name llama3_70b (docs/workloads.md "FLOPs and MFU").
  CHECK(meg["workload"]["params"]["flops_convention"] == "megatron-core-causal");
  CHECK(nemo["workload"]["params"]["flops_convention"] == "nemo-llama3");
  meg["workload"]["params"].erase("flops_convention");
  nemo["workload"]["params"].erase("flops_convention");
  CHECK(nemo["workload"]["params"] == meg["workload"]["params"]);
  CHECK(nemo["topology"] == meg["topology"]);
  CHECK(nemo["workload"]["params"]["world_size"] == 1024);

  // It runs (the scenario as written).
  Run run = run_root("run " + cli_test::quoted(a.string()) + " -q --comm-model analytic");
  REQUIRE_MESSAGE(run.rc == 0, run.err);
  CHECK(run.out.find("step time") != std::string::npos);
}

TEST_CASE("import nemo: NeMo's own megatron_gpt_config.yaml and the launcher's Mixtral 8x7B config") {
  Run g = run_root("import nemo " + kGpt + " --topology dgx-h100");
  REQUIRE_MESSAGE(g.rc == 0, g.err);
  const json p = json::parse(g.out)["workload"]["params"];
  CHECK(p["world_size"] == 1);
  CHECK(p["seq_length"] == 512);
  CHECK(p["padded_vocab_size"] == 50304);  // GPT-2 BPE's 50,257 padded to 128
  CHECK(p["ffn_hidden_size"] == 3072);
  CHECK(p["global_batch_size"] == 8);
  // Its defaults that Megatron-LM would not run: the legacy layers (not modelled) and no gradient-accumulation
  // fusion (modelled: docs/workloads.md "Gradient-accumulation fusion").
  CHECK(g.err.find("warning: not modelled (they change the step; fabricsim does not simulate them): "
                   "model.transformer_engine=False\n") != std::string::npos);
  CHECK(p["gradient_accumulation_fusion"] == false);

  // `run --nemo` simulates what `import nemo` writes.
  const fs::path gs = scratch() / "gpt.json", r1 = scratch() / "gpt_r1.json", r2 = scratch() / "gpt_r2.json";
  write(gs, g.out);
  Run a = run_root("run " + cli_test::quoted(gs.string()) + " -q --comm-model analytic --json " + cli_test::quoted(r1.string()));
  Run b = run_root("run --nemo " + kGpt + " --topology dgx-h100 -q --comm-model analytic --json " + cli_test::quoted(r2.string()));
  REQUIRE_MESSAGE(a.rc == 0, a.err);
  REQUIRE_MESSAGE(b.rc == 0, b.err);
  CHECK(b.err.find("fabricsim run: warning: not modelled") != std::string::npos);
  const json ra = json::parse(cli_test::slurp(r1)), rb = json::parse(cli_test::slurp(r2));
  CHECK(ra.at("iteration_s").get<double>() > 0);
  CHECK(rb.at("iteration_s").get<double>() == ra.at("iteration_s").get<double>());

  Run x = run_root("import nemo " + kMixtral + " --topology dgx-h100 --param padded_vocab_size=32768");
  REQUIRE_MESSAGE(x.rc == 0, x.err);
  const json q = json::parse(x.out)["workload"]["params"];
  CHECK(q["num_experts"] == 8);
  CHECK(q["moe_router_topk"] == 2);
  CHECK(q["expert_model_parallel_size"] == 8);
  CHECK(q["moe_token_dispatcher_type"] == "alltoall");
  // Falcon's customizations are off in it; what it changes that fabricsim does not simulate is listed.
  CHECK(x.err.find("warning: not modelled (they change the step; fabricsim does not simulate them): "
                   "model.masked_softmax_fusion=false, model.gc_interval=60\n") != std::string::npos);
  CHECK(x.err.find("model.mcore_customization_config.parallel_attention=false") != std::string::npos);
}

TEST_CASE("import nemo: interpolations resolve within the file") {
  write(scratch() / "interp.yaml",
        "defaults:\n  - _self_\nrun:\n  name: interp\n"
        "trainer:\n  devices: ${training.model.tensor_model_parallel_size}\n  num_nodes: 1\n  precision: bf16\n"
        "model:\n  mcore_gpt: true\n  megatron_amp_O2: true\n  transformer_engine: true\n"
        "  gradient_accumulation_fusion: true\n  micro_batch_size: 2\n"
        "  global_batch_size: ${.micro_batch_size}\n  tensor_model_parallel_size: 8\n"
        "  encoder_seq_length: ${model.data.seq_length}\n  max_position_embeddings: ${.encoder_seq_length}\n"
        "  num_layers: 2\n  hidden_size: 1024\n  num_attention_heads: 16\n  activation: ${.act}-swiglu\n"
        "  act: fast\n"
        "  tokenizer:\n    library: megatron\n    type: GPT2BPETokenizer\n"
        "  data:\n    seq_length: 2048\n    data_prefix: ${data_dir}/x\n"
        "  optim:\n    name: mcore_distributed_optim\n");
  // model.act is no NeMo key: --ignore-unknown lists it and goes on.
  Run r = cli_test::run_in(scratch(), cli_test::fabricsim("import nemo interp.yaml --topology dgx-h100 --ignore-unknown"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.err.find("fabricsim import: warning: unknown keys ignored (--ignore-unknown): model.act\n") != std::string::npos);
  const json p = json::parse(r.out)["workload"]["params"];
  CHECK(p["world_size"] == 8);        // devices = ${training.model.tensor_model_parallel_size}
  CHECK(p["global_batch_size"] == 2);  // ${.micro_batch_size}
  CHECK(p["seq_length"] == 2048);      // ${model.data.seq_length}
  CHECK(p["swiglu"] == true);          // "${.act}-swiglu" = fast-swiglu
}

TEST_CASE("import nemo: YAML merge keys (<<) apply as OmegaConf applies them") {
  // model: merges two anchored mappings; `wide` merges a third itself. The mapping's own keys win (hidden_size),
  // an earlier mapping of the list wins over a later one (ffn_hidden_size), a merged mapping's own merge applies.
  write(scratch() / "merge.yaml",
        "base: &b\n  num_layers: 6\n  hidden_size: 512\n  ffn_hidden_size: 4096\n"
        "seq: &s\n  encoder_seq_length: 2048\n"
        "wide: &w\n  <<: *s\n  hidden_size: 2048\n  ffn_hidden_size: 8192\n  num_attention_heads: 32\n"
        "trainer:\n  devices: 8\n  num_nodes: 1\n  precision: bf16-mixed\n"
        "model:\n  <<: [*b, *w]\n  hidden_size: 1024\n  mcore_gpt: true\n  megatron_amp_O2: true\n"
        "  transformer_engine: true\n  micro_batch_size: 1\n  global_batch_size: 16\n"
        "  tensor_model_parallel_size: 2\n  tokenizer:\n    library: megatron\n    type: GPT2BPETokenizer\n"
        "  optim:\n    name: mcore_distributed_optim\n");
  Run r = cli_test::run_in(scratch(), cli_test::fabricsim("import nemo merge.yaml --topology dgx-h100 --ignore-unknown"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.err.find("unknown keys ignored (--ignore-unknown): base, seq, wide\n") != std::string::npos);
  const json p = json::parse(r.out)["workload"]["params"];
  CHECK(p["num_layers"] == 6);             // from base
  CHECK(p["hidden_size"] == 1024);         // model's own key wins over base's and wide's
  CHECK(p["ffn_hidden_size"] == 4096);     // base (first in the list) wins over wide
  CHECK(p["num_attention_heads"] == 32);   // from wide
  CHECK(p["seq_length"] == 2048);          // wide's own merge of seq
  // A quoted "<<" is an ordinary key (PyYAML's rule): nothing is merged, so num_layers is missing.
  std::string quoted = cli_test::slurp(scratch() / "merge.yaml");
  quoted.replace(quoted.find("  <<: [*b, *w]"), 14, "  \"<<\": [*b, *w]");
  write(scratch() / "quoted.yaml", quoted);
  Run q = cli_test::run_in(scratch(), cli_test::fabricsim("import nemo quoted.yaml --topology dgx-h100 --ignore-unknown"));
  CHECK(q.rc == 2);
  CHECK(q.err.find("quoted.yaml:16: model.num_layers: required") != std::string::npos);
}

TEST_CASE("import nemo: bad configs are one line naming file, line and key; exit 2; nothing written") {
  const fs::path out = scratch() / "never.json";
  struct Case {
    std::string yaml, message, extra;
  };
  const Case cases[] = {
      {small_config("  no_such_key: 1\n"),
       "fabricsim import: error: bad.yaml:20: model.no_such_key: unknown key (not one NeMo's GPT model reads at "
       "NVIDIA/NeMo@e564e669 as far as the importer knows; --ignore-unknown lists such keys and goes on)\n", ""},
      {small_config("", "  no_such_trainer_key: 1\n"),
       "fabricsim import: error: bad.yaml:5: trainer.no_such_trainer_key: unknown key (not one NeMo's GPT model "
       "reads at NVIDIA/NeMo@e564e669 as far as the importer knows; --ignore-unknown lists such keys and goes on)\n", ""},
      {small_config("  kv_channels: 1k\n"),
       "fabricsim import: error: bad.yaml:20: model.kv_channels: expected an integer, got '1k'\n", ""},
      {"trainer:\n  devices: 8\n  precision: 32\nmodel:\n  num_layers: 2\n",
       "fabricsim import: error: bad.yaml:4: model.hidden_size: required (NeMo's GPT model reads it with no default)\n", ""},
      {small_config("", "  accumulate_grad_batches: 4\n"),
       "fabricsim import: error: bad.yaml:5: trainer.accumulate_grad_batches: NeMo's GPT model refuses it "
       "(megatron_gpt_model.py _validate_trainer): gradient accumulation follows from global_batch_size\n", ""},
      {small_config("  fp8: true\n"),
       "fabricsim import: error: bad.yaml:20: model.fp8: fp8 is on but neither fp8_e4m3 nor fp8_hybrid is (NeMo "
       "refuses it)\n", ""},
      {small_config("  override_vocab_size: ${multiply:2, 3}\n"),
       "fabricsim import: error: bad.yaml:20: model.override_vocab_size: '${multiply:2, 3}' uses OmegaConf's "
       "resolver 'multiply', which the importer does not evaluate: write the value\n", ""},
      {small_config("  kv_channels: ${base_kv}\n"),
       "fabricsim import: error: bad.yaml:20: model.kv_channels: '${base_kv}' points to base_kv, which the file "
       "does not have (interpolations are resolved within the file)\n", ""},
      {"trainer:\n  devices: 8\n  precision: bf16\nmodel:\n  micro_batch_size: 1\n  global_batch_size: 8\n"
       "  encoder_seq_length: 1024\n  num_layers: ${.hidden_size}\n  hidden_size: ${..model.num_layers}\n",
       "fabricsim import: error: bad.yaml:9: model.hidden_size: interpolation loop through '${..model.num_layers}'\n", ""},
      {small_config("  activations_checkpoint_granularity: full\n"),
       "fabricsim import: error: bad.yaml:20: model.activations_checkpoint_granularity: full needs "
       "activations_checkpoint_method uniform or block (Megatron-Core's TransformerConfig refuses none)\n", ""},
      {small_config("  position_embedding_type: alibi\n"),
       "fabricsim import: error: bad.yaml:20: model.position_embedding_type: 'alibi' is not modelled (fabricsim's "
       "GPT models learned_absolute and rope position embeddings)\n", ""},
      {"trainer: [1, 2]\nmodel: {}\n",
       "fabricsim import: error: bad.yaml: expected a NeMo training config with a trainer: mapping\n", ""},
      {"trainer:\n  devices: 8\n  precision: bf16\n model: x\n",
       "", ""},  // not valid YAML (the parser's message)
      // The generator's own checks run before anything is written (16 heads over TP 3).
      {small_config(), "", " --param tensor_model_parallel_size=3"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.yaml);
    write(scratch() / "bad.yaml", c.yaml);
    cli_test::check_refused(scratch(), "import nemo bad.yaml --topology dgx-h100" + c.extra, out, c.message);
  }
  // fp32 training and a tokenizer whose size lives in its files.
  write(scratch() / "fp32.yaml", small_config("", "") );
  std::string t = small_config();
  t.replace(t.find("bf16-mixed"), 10, "32");
  write(scratch() / "fp32.yaml", t);
  Run f = cli_test::run_in(scratch(), cli_test::fabricsim("import nemo fp32.yaml --topology dgx-h100"));
  CHECK(f.rc == 2);
  CHECK(f.err == "fabricsim import: error: fp32.yaml:4: trainer.precision: '32' is fp32 training, which fabricsim "
                 "does not model (give bf16-mixed or 16-mixed)\n");
  t = small_config();
  t.replace(t.find("library: megatron"), 17, "library: huggingface");
  write(scratch() / "hf.yaml", t);
  Run h = cli_test::run_in(scratch(), cli_test::fabricsim("import nemo hf.yaml --topology dgx-h100"));
  CHECK(h.rc == 2);
  CHECK(h.err.find("hf.yaml:") != std::string::npos);
  CHECK(h.err.find("model.tokenizer: the vocabulary size comes from the tokenizer's files (library huggingface, type "
                   "GPT2BPETokenizer), which the importer does not read: give --param padded_vocab_size=N") !=
        std::string::npos);
  Run h2 = cli_test::run_in(scratch(), cli_test::fabricsim("import nemo hf.yaml --topology dgx-h100 --param padded_vocab_size=50304"));
  CHECK(h2.rc == 0);
  // The options that belong to the other importer.
  Run v = cli_test::run_in(scratch(), cli_test::fabricsim("import nemo hf.yaml --topology dgx-h100 --var X=1"));
  CHECK(v.rc == 2);
  CHECK(v.err == "fabricsim import: error: --var: applies to megatron (shell variables of a script)\n");
}
