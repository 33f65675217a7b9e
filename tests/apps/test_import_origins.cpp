// Imported launch scripts and configs end to end: a value the gpt generator refuses is one error line naming the
// user's file, the line and what set it there (the Megatron-LM flag, also through a variable or an array; the
// NeMo YAML key; the torchtitan TOML key or command-line override; --param), not the JSON path of the scenario
// the importer made; and --param reaches the topology (node, nodes, fabric, ...), a key of neither being an error.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"

namespace {

namespace cli_test = fabricsim::cli_test;
namespace fs = std::filesystem;
using cli_test::Run;
using nlohmann::json;

fs::path scratch() {
  static const fs::path d = cli_test::scratch_dir("import_origins");
  return d;
}

void write(const std::string& name, const std::string& text) { cli_test::write_file(scratch() / name, text); }

// `fabricsim import ARGS` in the scratch directory is refused with exactly `message` (one line, exit 2, nothing
// written).
void refused(const std::string& args, const std::string& message) {
  CAPTURE(args);
  cli_test::check_refused(scratch(), "import " + args, scratch() / "never.json", message);
}

json imported(const std::string& args) {
  Run r = cli_test::run_in(scratch(), cli_test::fabricsim("import " + args));
  REQUIRE_MESSAGE(r.rc == 0, args << "\n" << r.err);
  return json::parse(r.out);
}

// A small Megatron-LM launch (16 heads) whose flags come from an array, a multi-line string and the command.
const std::string kScript =
    "#!/bin/bash\n"                                                                      // 1
    "MODEL_ARGS=(\n"                                                                     // 2
    "    --num-layers 2 --hidden-size 1024\n"                                            // 3
    "    --num-attention-heads 16\n"                                                     // 4
    ")\n"                                                                                // 5
    "PARALLEL_ARGS=\"--pipeline-model-parallel-size 1 \\\n"                              // 6
    "    --tensor-model-parallel-size ${TP:-2}\"\n"                                      // 7
    "torchrun --nproc-per-node 8 pretrain_gpt.py \"${MODEL_ARGS[@]}\" $PARALLEL_ARGS \\\n"  // 8
    "    --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --bf16 \\\n"  // 9
    "    --tokenizer-type GPT2BPETokenizer --global-batch-size 16 RECOMPUTE\n";          // 10

std::string script(const std::string& recompute) {
  std::string s = kScript;
  s.replace(s.find("RECOMPUTE"), 9, recompute);
  return s;
}

}  // namespace

TEST_CASE("import megatron: a value the generator refuses names the script line and flag, also through variables") {
  write("ok.sh", script(""));
  CHECK(imported("megatron ok.sh --topology dgx-h100")["workload"]["params"]["tensor_model_parallel_size"] == 2);
  // A flag written in the command.
  write("bad.sh", script("--recompute-granularity selective --recompute-modules core_attn bogus"));
  refused("megatron bad.sh --topology dgx-h100",
          "fabricsim import: error: bad.sh:10: --recompute-modules: expected core_attn, layernorm, mla_up_proj, mlp, "
          "moe, moe_act or shared_experts, got 'bogus'\n");
  // A flag inside a multi-line string, through $PARALLEL_ARGS: the line it is written on (7), and where it is used.
  refused("megatron ok.sh --topology dgx-h100 --var TP=3",
          "fabricsim import: error: ok.sh:7: --tensor-model-parallel-size (in $PARALLEL_ARGS, expanded on line 8): "
          "tensor (3) x pipeline (1) x context (1) parallel size must divide world_size 8\n");
  // A flag from an array element: the element's line.
  std::string heads = script("");
  heads.replace(heads.find("--num-attention-heads 16"), 24, "--num-attention-heads 24");
  write("heads.sh", heads);
  refused("megatron heads.sh --topology dgx-h100",
          "fabricsim import: error: heads.sh:3: --hidden-size (in $MODEL_ARGS, expanded on line 8): must be a "
          "multiple of num_attention_heads\n");
  // --param names itself; run --megatron names the same origin.
  refused("megatron ok.sh --topology dgx-h100 --param tensor_model_parallel_size=3",
          "fabricsim import: error: --param tensor_model_parallel_size: tensor (3) x pipeline (1) x context (1) "
          "parallel size must divide world_size 8\n");
  Run r = cli_test::run_in(scratch(), cli_test::fabricsim("run --megatron bad.sh --topology dgx-h100 -q"));
  CHECK(r.rc == 2);
  CHECK(r.err == "fabricsim run: error: bad.sh:10: --recompute-modules: expected core_attn, layernorm, mla_up_proj, "
                 "mlp, moe, moe_act or shared_experts, got 'bogus'\n");
}

TEST_CASE("import nemo and torchtitan: a value the generator refuses names the YAML key / TOML key and its line") {
  write("bad.yaml",
        "trainer:\n  devices: 8\n  num_nodes: 1\n  precision: bf16-mixed\n"
        "model:\n  mcore_gpt: true\n  megatron_amp_O2: true\n  transformer_engine: true\n"
        "  micro_batch_size: 1\n  global_batch_size: 16\n"
        "  tensor_model_parallel_size: 3\n"  // line 11
        "  encoder_seq_length: 1024\n  num_layers: 2\n  hidden_size: 1024\n"
        "  num_attention_heads: 16\n  tokenizer:\n    library: megatron\n    type: GPT2BPETokenizer\n"
        "  optim:\n    name: mcore_distributed_optim\n");
  refused("nemo bad.yaml --topology dgx-h100",
          "fabricsim import: error: bad.yaml:11: model.tensor_model_parallel_size: tensor (3) x pipeline (1) x "
          "context (1) parallel size must divide world_size 8\n");
  write("bad.toml", "[model]\nname = \"llama3\"\nflavor = \"8B\"\n\n[training]\nlocal_batch_size = 2\n\n"
                    "[parallelism]\ntensor_parallel_degree = 3\n");  // line 9
  refused("torchtitan bad.toml --topology dgx-h100 --gpus 24",
          "fabricsim import: error: bad.toml:9: parallelism.tensor_parallel_degree: must divide num_attention_heads "
          "(32)\n");
  write("ok.toml", "[model]\nname = \"llama3\"\nflavor = \"8B\"\n\n[training]\nlocal_batch_size = 2\n");
  refused("torchtitan ok.toml --topology dgx-h100 --gpus 24 --parallelism.tensor_parallel_degree 3",
          "fabricsim import: error: command line: --parallelism.tensor_parallel_degree: must divide "
          "num_attention_heads (32)\n");
}

TEST_CASE("import: --param sets the topology's parameters; a key of neither the gpt generator nor the topology is an error") {
  write("ok.sh", script(""));
  // A superpod parameter makes the server preset a superpod (enough servers for the 8 ranks unless nodes says).
  json t = imported("megatron ok.sh --topology dgx-h100 --param fabric=roce")["topology"];
  CHECK(t == json::parse(R"({"preset": "superpod", "params": {"node": "dgx-h100", "nodes": 1, "fabric": "roce"}})"));
  t = imported("megatron ok.sh --topology dgx-h100 --param node=gb200-nvl72 --param nodes=2")["topology"];
  CHECK(t == json::parse(R"({"preset": "superpod", "params": {"node": "gb200-nvl72", "nodes": 2}})"));
  // The preset's own parameter keeps the preset; gpu stays the generator's.
  json doc = imported("megatron ok.sh --topology dgx-h100 --param nic_bandwidth=200Gbps --param gpu=h200");
  CHECK(doc["topology"] == json::parse(R"({"preset": "dgx-h100", "params": {"nic_bandwidth": "200Gbps"}})"));
  CHECK(doc["workload"]["params"]["gpu"] == "h200");
  // Too few GPUs for the launcher is the importer's error, as without the parameter.
  write("big.sh", script("").replace(script("").find("--nproc-per-node 8"), 18, "--nproc-per-node 8 --nnodes 4"));
  // The error names what the topology is (a superpod of 2 such servers, not one dgx-h100) and how to get enough.
  refused("megatron big.sh --topology dgx-h100 --param nodes=2",
          "fabricsim import: error: big.sh:8: the launcher starts 32 processes (--nproc-per-node 8 x --nnodes 4) but "
          "topology dgx-h100 (--param nodes=2) is a superpod of such servers with 16 GPUs; --param nodes=4 (8 GPUs per "
          "node) fits the 32 ranks\n");
  refused("megatron big.sh --topology superpod --param nodes=2 --param node=dgx-a100",
          "fabricsim import: error: big.sh:8: the launcher starts 32 processes (--nproc-per-node 8 x --nnodes 4) but "
          "topology superpod (--param node=dgx-a100, --param nodes=2) has 16 GPUs; --param nodes=4 (8 GPUs per node) "
          "fits the 32 ranks\n");
  CHECK(imported("megatron big.sh --topology superpod --param nodes=4 --param node=dgx-a100")["topology"] ==
        json::parse(R"({"preset": "superpod", "params": {"node": "dgx-a100", "nodes": 4}})"));
  // A rack preset takes no nodes: the superpod of such racks; a preset with a cap says so.
  write("rack.sh", script("").replace(script("").find("--nproc-per-node 8"), 18, "--nproc-per-node 4 --nnodes 36"));
  refused("megatron rack.sh --topology gb200-nvl72",
          "fabricsim import: error: rack.sh:8: the launcher starts 144 processes (--nproc-per-node 4 x --nnodes 36) but "
          "topology gb200-nvl72 has 72 GPUs; --topology superpod --param node=gb200-nvl72 --param nodes=2 (72 GPUs per "
          "node) fits the 144 ranks\n");
  write("huge.sh", script("").replace(script("").find("--nproc-per-node 8"), 18, "--nproc-per-node 8 --nnodes 40"));
  refused("megatron huge.sh --topology nvlink-switch-system",
          "fabricsim import: error: huge.sh:8: the launcher starts 320 processes (--nproc-per-node 8 x --nnodes 40) but "
          "topology nvlink-switch-system has 256 GPUs; nvlink-switch-system allows at most --param nodes=32 (256 GPUs), "
          "fewer than the 320 ranks need\n");
  refused("megatron ok.sh --topology dgx-h100 --param no_such_key=1",
          "fabricsim import: error: --param no_such_key: unknown parameter: neither a gpt generator parameter "
          "(fabricsim gen --help; docs/workloads.md) nor a parameter of topology dgx-h100 (gpu, gpus_per_node, "
          "nics_per_node, nic_bandwidth, host_memory, nvlink_bandwidth, nodes, node, tiers, radix, oversubscription, "
          "rail_optimized, fabric, sharp, routing)\n");
  refused("megatron ok.sh --topology dgx-h100 --param fabric=carrier-pigeon",
          "fabricsim import: error: --param fabric: one of infiniband, infiniband-edr, infiniband-hdr, infiniband-ndr, "
          "infiniband-xdr, roce, efa, tcpx, tcpxo, slingshot, ethernet (got 'carrier-pigeon')\n");
  // NeMo and torchtitan take them the same way.
  write("ok.yaml",
        "trainer:\n  devices: 8\n  num_nodes: 2\n  precision: bf16-mixed\n"
        "model:\n  mcore_gpt: true\n  megatron_amp_O2: true\n  transformer_engine: true\n"
        "  micro_batch_size: 1\n  global_batch_size: 16\n  tensor_model_parallel_size: 2\n"
        "  encoder_seq_length: 1024\n  num_layers: 2\n  hidden_size: 1024\n"
        "  num_attention_heads: 16\n  tokenizer:\n    library: megatron\n    type: GPT2BPETokenizer\n"
        "  optim:\n    name: mcore_distributed_optim\n");
  CHECK(imported("nemo ok.yaml --topology dgx-h100 --param sharp=true")["topology"] ==
        json::parse(R"({"preset": "superpod", "params": {"node": "dgx-h100", "nodes": 2, "sharp": true}})"));
  write("ok.toml", "[model]\nname = \"llama3\"\nflavor = \"8B\"\n\n[training]\nlocal_batch_size = 2\n");
  CHECK(imported("torchtitan ok.toml --topology dgx-h100 --gpus 16 --param node=dgx-b200")["topology"] ==
        json::parse(R"({"preset": "superpod", "params": {"node": "dgx-b200", "nodes": 2}})"));
}
