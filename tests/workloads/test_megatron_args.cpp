// Megatron-LM launch scripts as gpt scenarios (workloads/megatron_args.hpp): the shell reading, the flag table
// (megatron/training/arguments.py @1e057005, @d48bd6be and @d98e8a64) and its four classes, Megatron-LM's derived defaults, the error lines.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <map>
#include <set>
#include <string>

#include "workloads/gpt.hpp"
#include "workloads/megatron_args.hpp"
#include "workloads/scenario.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

// The minimum Megatron-LM asks for, on one line after `launcher pretrain_gpt.py`.
const std::string kBase =
    " --num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024"
    " --micro-batch-size 1 --bf16 --tokenizer-type GPT2BPETokenizer";

std::vector<std::string> words(const MegatronLaunch& l) {
  std::vector<std::string> w;
  for (const auto& a : l.args) w.push_back(a.text);
  return w;
}

MegatronImport import_text(const std::string& text, std::int64_t world = 8, const ParamMap& over = {},
                           const std::map<std::string, std::string>& vars = {}) {
  return import_megatron_args(read_megatron_launch(text, "job.sh", vars), world, over);
}

Json scenario(const std::string& text, const std::string& topology = "dgx-h100") {
  return scenario_for_megatron("job.sh", text, topology, {}, {});
}

}  // namespace

TEST_CASE("megatron launch: continuations, comments, quotes, redirections and the launcher's world size") {
  const std::string text =
      "#!/bin/bash\n"
      "# a comment --not-a-flag\n"
      "torchrun --nproc-per-node 8 --nnodes=2 --master-addr host \\\n"
      "    pretrain_gpt.py \\\n"
      "    --num-layers 4 \\\n"
      "    --data-path 'my data/x' \"quoted dir\" > \"$LOGS/out.txt\" 2>&1 | tee x.log  # trailing comment\n"
      "echo done\n";
  const MegatronLaunch l = read_megatron_launch(text, "job.sh", {});
  CHECK(l.script == "pretrain_gpt.py");
  CHECK(l.line == 4);
  CHECK(l.nproc_per_node == 8);
  CHECK(l.nnodes == 2);
  CHECK(words(l) == std::vector<std::string>{"--num-layers", "4", "--data-path", "my data/x", "quoted dir"});
  CHECK(l.args[0].line == 5);
  CHECK(l.args[2].line == 6);
  // python -m torch.distributed.run and an absolute script path.
  const MegatronLaunch m = read_megatron_launch(
      "python -m torch.distributed.run --nproc_per_node=4 /opt/Megatron-LM/pretrain_gpt.py --bf16", "x", {});
  CHECK(m.nproc_per_node == 4);
  CHECK(m.nnodes == 0);
  CHECK(words(m) == std::vector<std::string>{"--bf16"});
}

// Found by fuzzing (2026-11-29): a here-document's body was read as commands (a second pretrain invocation, or one
// inside an unterminated body imported as the job's).
TEST_CASE("megatron launch: here-documents are text, not commands") {
  const std::string text =
      "#!/bin/bash\n"
      "cat > wrapper.sh <<'EOF'\n"
      "torchrun pretrain_gpt.py --num-layers 99\n"
      "EOF\n"
      "cat <<-END >> notes.txt\n"
      "\ttorchrun pretrain_gpt.py --num-layers 98\n"
      "\tEND\n"
      "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 <<< unused\n";
  const MegatronLaunch l = read_megatron_launch(text, "job.sh", {});
  CHECK(l.line == 8);
  CHECK(words(l) == std::vector<std::string>{"--num-layers", "4"});
  // Without its delimiter line the body runs to the end of the file (bash's reading): no command is left.
  CHECK_THROWS_WITH_AS(read_megatron_launch("cat <<EOF\ntorchrun pretrain_gpt.py --num-layers 4\n", "u.sh", {}),
                       doctest::Contains("no pretrain_gpt.py invocation found"), InputError);
}

TEST_CASE("megatron launch: variables, defaults, arithmetic, arrays and --var") {
  const std::string text =
      "TP=4\n"
      "export PP=2\n"
      "NODES=${NNODES:-3}\n"
      "WORLD=$(( $NODES * 8 ))\n"
      "MODEL_ARGS=(\n"
      "  --num-layers 32   # layers\n"
      "  --hidden-size \"4096\"\n"
      ")\n"
      "EXTRA=\"--swiglu --untie-embeddings-and-output-weights\"\n"
      "torchrun --nproc-per-node 8 --nnodes $NODES pretrain_gpt.py \"${MODEL_ARGS[@]}\" \\\n"
      "  --tensor-model-parallel-size $TP --pipeline-model-parallel-size ${PP} $EXTRA --lr \"$LR\" --x$WORLD\n";
  const MegatronLaunch l = read_megatron_launch(text, "job.sh", {});
  CHECK(l.nnodes == 3);
  const auto w = words(l);
  REQUIRE(w.size() == 13);
  CHECK(std::vector<std::string>(w.begin(), w.begin() + 4) ==
        std::vector<std::string>{"--num-layers", "32", "--hidden-size", "4096"});
  CHECK(w[5] == "4");
  CHECK(w[7] == "2");
  CHECK(w[8] == "--swiglu");  // unquoted: split into two words
  CHECK(w[9] == "--untie-embeddings-and-output-weights");
  CHECK(l.args[11].unresolved == "LR");  // left as it is: --lr changes nothing simulated
  CHECK(w[12] == "--x24");
  // --var is set before the script and wins over its assignments.
  const MegatronLaunch v = read_megatron_launch(text, "job.sh", {{"TP", "8"}, {"NNODES", "5"}, {"LR", "1e-4"}});
  CHECK(v.nnodes == 5);
  CHECK(words(v)[5] == "8");
  CHECK(words(v)[11] == "1e-4");
  CHECK(words(v)[12] == "--x40");
}

TEST_CASE("megatron import: modelled flags become gpt parameters, with Megatron-LM's derived defaults") {
  const MegatronImport im = import_text(
      "torchrun pretrain_gpt.py" + kBase +
      " --num-layers 8 --global-batch-size 8 --tensor-model-parallel-size 8 --swiglu --sequence-parallel --recompute-activations"
      " --num-layers-per-virtual-pipeline-stage 1 --pipeline-model-parallel-size 4 --fp8-format hybrid"
      " --ddp-bucket-size 1000 --attention-backend fused --use-rotary-position-embeddings",
      64);
  const Json& p = im.params;
  CHECK(p["num_layers"] == 8);  // the last of two wins, as in argparse
  CHECK(p["tensor_model_parallel_size"] == 8);
  CHECK(p["pipeline_model_parallel_size"] == 4);
  CHECK(p["num_layers_per_virtual_pipeline_stage"] == 1);
  CHECK(p["overlap_p2p_comm"] == true);  // Megatron's default with the interleaved schedule
  CHECK(p["sequence_parallel"] == true);
  CHECK(p["recompute_granularity"] == "selective");
  CHECK(p["fp8_format"] == "hybrid");
  CHECK(p["bf16"] == true);
  CHECK(p["bucket_size"] == 1000);
  CHECK(p["attention_backend"] == "fused");
  CHECK(p["position_embedding_type"] == "rope");
  // Without --attention-backend (Megatron's default auto) the choice is Transformer Engine's: the generator's `auto`.
  CHECK(import_text("torchrun pretrain_gpt.py" + kBase, 8).params["attention_backend"] == "auto");
  CHECK(import_text("torchrun pretrain_gpt.py" + kBase + " --attention-backend local", 8).params["attention_backend"] ==
        "unfused");
  // validate_args: SwiGLU's FFN default int(4h x 2/3 / 64) x 64.
  CHECK(p["ffn_hidden_size"] == 2688);
  // GPT-2 BPE, 50,257 tokens, padded to a multiple of 128 x TP 8.
  CHECK(p["padded_vocab_size"] == 51200);
  CHECK(p["global_batch_size"] == 8);
  CHECK(p["world_size"] == 64);
  // The generator reads them all (names, values, cross-checks).
  ParamMap pm = params_from_json(p, JsonPath{"job.sh", "/workload/params"});
  pm["gpu"] = "h100";
  CHECK_NOTHROW(gpt_config_from_params(pm, "job.sh"));
  // MoE flags, lists (nargs) and the selective-recompute module list.
  const MegatronImport moe = import_text(
      "torchrun pretrain_gpt.py" + kBase +
          " --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 2 --moe-grouped-gemm"
          " --moe-token-dispatcher-type alltoall --moe-ffn-hidden-size 512 --context-parallel-size 2"
          " --cp-comm-type p2p p2p p2p p2p --recompute-granularity selective --recompute-modules core_attn layernorm",
      16);
  CHECK(moe.params["num_experts"] == 8);
  CHECK(moe.params["moe_router_topk"] == 2);
  CHECK(moe.params["expert_model_parallel_size"] == 2);
  CHECK(moe.params["moe_grouped_gemm"] == true);
  CHECK(moe.params["moe_token_dispatcher_type"] == "alltoall");
  CHECK(moe.params["moe_ffn_hidden_size"] == 512);
  CHECK(moe.params["cp_comm_type"] == "p2p");
  CHECK(moe.params["recompute_modules"] == "core_attn layernorm");
  ParamMap mp = params_from_json(moe.params, JsonPath{"job.sh", "/workload/params"});
  mp["gpu"] = "h100";
  CHECK_NOTHROW(gpt_config_from_params(mp, "job.sh"));
  // A type per layer (TransformerLayer takes entry layer_number - 1) travels as the generator's space-separated list.
  CHECK(import_text("torchrun pretrain_gpt.py" + kBase + " --cp-comm-type p2p a2a").params["cp_comm_type"] == "p2p a2a");
  // No recompute unless asked; FFN 4h without SwiGLU; sequence parallelism off with TP 1; no P2P overlap
  // without interleaving.
  const MegatronImport d = import_text("torchrun pretrain_gpt.py" + kBase + " --sequence-parallel", 8);
  CHECK(d.params["recompute_granularity"] == "none");
  CHECK(d.params["ffn_hidden_size"] == 4096);
  CHECK_FALSE(d.params.contains("sequence_parallel"));
  CHECK_FALSE(d.params.contains("overlap_p2p_comm"));
  CHECK(d.params["global_batch_size"] == 8);
  CHECK(d.params["padded_vocab_size"] == 50304);  // multiple of 128 x TP 1
}

TEST_CASE("megatron import: ignored and not-modelled flags are listed; a default value changes nothing") {
  const MegatronImport im = import_text("torchrun pretrain_gpt.py" + kBase +
                                        " --lr 3e-4 --data-path $DATA --save /ckpt --seed 7"
                                        " --no-persist-layer-norm --manual-gc --transformer-impl transformer_engine"
                                        " --transformer-impl local --optimizer adam --num-query-groups 4");
  CHECK(im.ignored == std::vector<std::string>{"--lr 3e-4", "--data-path ${DATA}", "--save /ckpt", "--seed 7",
                                               "--num-query-groups 4"});
  CHECK(im.not_modelled == std::vector<std::string>{"--no-persist-layer-norm", "--manual-gc", "--transformer-impl local"});
  CHECK(std::find(im.modelled.begin(), im.modelled.end(), "--num-layers 4") != im.modelled.end());
  CHECK_FALSE(im.params.contains("num_query_groups"));  // counts only with --group-query-attention
  // The scenario carries them as notes, which the run's result repeats.
  const Json doc = scenario("torchrun pretrain_gpt.py" + kBase + " --manual-gc --lr 1");
  const Json& notes = doc["workload"]["notes"];
  REQUIRE(notes.size() == 3);
  CHECK(notes[1] == "not modelled (they change the step; fabricsim does not simulate them): --manual-gc");
  CHECK(notes[2] == "ignored (no effect on step time): --lr 1");
  const Scenario s = scenario_from_json(doc, "job.json");
  CHECK(s.workload.notes.size() == 3);
}

TEST_CASE("megatron import: the error lines name file, line and flag") {
  auto err = [](const std::string& text, const std::map<std::string, std::string>& vars = {}) {
    return error_of([&] { import_text(text, 8, {}, vars); });
  };
  const std::string head = "torchrun \\\n  pretrain_gpt.py" + kBase + " \\\n  ";
  CHECK(err(head + "--num-layerz 3") ==
        "job.sh:3: unknown Megatron-LM flag --num-layerz (not in megatron/training/arguments.py @1e057005, "
        "@d48bd6be or @d98e8a64)");
  CHECK(err(head + "--tensor-model-parallel-size $TP") ==
        "job.sh:3: variable $TP is not set (set it in the script or give --var TP=VALUE)");
  CHECK(err(head + "--tensor-model-parallel-size $TP", {{"TP", "2"}}).empty());
  CHECK(err(head + "$EXTRA_ARGS") == "job.sh:3: variable $EXTRA_ARGS is not set (set it in the script or give --var "
                                     "EXTRA_ARGS=VALUE)");
  CHECK(err(head + "--hidden-size") == "job.sh:3: --hidden-size expects a value, got the end of the command");
  CHECK(err(head + "--hidden-size --bf16") == "job.sh:3: --hidden-size expects a value, got the flag --bf16");
  CHECK(err(head + "--hidden-size 1k") == "job.sh:3: --hidden-size expects an integer, got '1k'");
  CHECK(err(head + "--lr fast") == "job.sh:3: --lr expects a number, got 'fast'");
  CHECK(err(head + "--swiglu=1") == "job.sh:3: --swiglu takes no value (got '1')");
  CHECK(err(head + "somefile") == "job.sh:3: unexpected argument 'somefile' after pretrain_gpt.py (expected a --flag)");
  CHECK(err(head + "--batch-size 4") ==
        "job.sh:3: --batch-size: Megatron-LM refuses it (validate_args, megatron/training/arguments.py @d98e8a64): use "
        "--micro-batch-size");
  CHECK(err("torchrun pretrain_bert.py --bf16") ==
        "job.sh:1: pretrain_bert.py: only pretrain_gpt.py (GPT and MoE decoder models) and pretrain_hybrid.py (hybrid "
        "Mamba models) are modelled");
  CHECK(err("echo hello\n").find("job.sh: no pretrain_gpt.py invocation found") == 0);
  CHECK(err("torchrun --nnodes $N pretrain_gpt.py" + kBase) ==
        "job.sh:1: variable $N is not set (set it in the script or give --var N=VALUE)");
  CHECK(err("torchrun --nnodes 1:4 pretrain_gpt.py" + kBase).find("job.sh:1: --nnodes expects a positive number") == 0);
  CHECK(err("torchrun pretrain_gpt.py --num-layers 2").find("job.sh: --hidden-size is required") == 0);
  CHECK(err("torchrun pretrain_gpt.py --num-layers 2 --hidden-size 8 --num-attention-heads 1 --seq-length 8 "
            "--max-position-embeddings 8 --micro-batch-size 1") ==
        "job.sh: neither --bf16 nor --fp16: Megatron-LM would train in fp32, which fabricsim does not model");
  CHECK(err("torchrun pretrain_gpt.py" + kBase + " --tokenizer-type HuggingFaceTokenizer")
            .find("job.sh: the vocabulary size comes from the tokenizer's files (--tokenizer-type HuggingFaceTokenizer)") == 0);
  CHECK(err("X=\"unterminated\ntorchrun pretrain_gpt.py").find("job.sh:") == 0);
  // The launcher starts more processes than the topology has GPUs.
  CHECK(error_of([&] { scenario("torchrun --nproc-per-node 8 --nnodes 4 pretrain_gpt.py" + kBase, "dgx-h100"); })
            .empty());  // a server preset grows into a superpod of 4
  CHECK(error_of([&] { scenario("torchrun --nproc-per-node 8 --nnodes 40 pretrain_gpt.py" + kBase, "superpod"); })
            .find("job.sh:1: the launcher starts 320 processes") == 0);
}

TEST_CASE("megatron flags: the table against the generator's own parameter names") {
  const std::set<std::string> names = gpt_param_names();
  CHECK(names.count("num_layers"));
  CHECK(names.count("torch_compile"));  // read only behind has(): the reader lists what it was asked about too
  CHECK(names.count("moe_router_topk"));
  std::set<std::string> dests;
  for (const auto& f : megatron_flags()) {
    CAPTURE(f.option);
    CHECK(find_megatron_flag(f.option) == &f);
    dests.insert(f.dest);
    if (f.cls == MegatronFlag::kModel) {
      // A modelled flag sets a parameter the generator has, or is read by one of the importer's rules.
      const std::string k = megatron_param_name(f.dest);
      if (!k.empty()) CHECK(names.count(k) == 1);
    } else {
      // A flag the generator models under Megatron's own name is not listed as ignored or not modelled.
      CHECK(names.count(f.dest) == 0);
    }
    if (f.cls == MegatronFlag::kRejected) CHECK_FALSE(megatron_rejected_hint(f.dest).empty());
  }
  // scripts/megatron_flags.py over arguments.py @1e057005 (486 option strings, 485 flags), the dev branch's
  // @d48bd6be and @d98e8a64 (878 option strings, with its ArgumentGroupFactory groups): 954 option strings, 914 flags;
  // 29 option strings only 1e057005 has, 47 only d48bd6be (--offload-optimizer-states among them), 41 only d98e8a64.
  CHECK(megatron_flags().size() == 954);
  CHECK(dests.size() == 914);
  std::map<std::string, int> by_commits;
  for (const auto& f : megatron_flags()) ++by_commits[f.commits];
  CHECK(by_commits == std::map<std::string, int>{{"1e057005 d48bd6be d98e8a64", 457},
                                                 {"d48bd6be d98e8a64", 380},
                                                 {"d48bd6be", 47},
                                                 {"d98e8a64", 41},
                                                 {"1e057005", 29}});
  CHECK(std::string(kMegatronArgsCommit) == "d98e8a64");
  CHECK(find_megatron_flag("--persistent-save-interval") != nullptr);  // a second option string of one flag
}

TEST_CASE("megatron import: the same script gives the same scenario, and --param overrides") {
  const std::string text = "torchrun --nproc-per-node 8 --nnodes 2 pretrain_gpt.py" + kBase + " --lr 1";
  CHECK(scenario(text).dump(2) == scenario(text).dump(2));
  const Json doc = scenario_for_megatron("job.sh", text, "dgx-h100", {{"padded_vocab_size", "51200"}, {"gpu", "h200"}}, {});
  CHECK(doc["workload"]["params"]["padded_vocab_size"] == 51200);
  CHECK(doc["workload"]["params"]["gpu"] == "h200");
  CHECK(doc["topology"] == Json::parse(R"({"preset": "superpod", "params": {"node": "dgx-h100", "nodes": 2}})"));
}

TEST_CASE("megatron import: a script of 2026 (flags new in d98e8a64) and one of 2025 (flags dropped since) import") {
  // New and modelled: the same generator parameters; --padded-vocab-size as given; --use-megatron-fsdp shards by
  // d98e8a64's default strategy, optim_grads_params.
  const MegatronImport n = import_text("torchrun pretrain_gpt.py" + kBase +
                                       " --num-experts 8 --expert-model-parallel-size 8 --moe-token-dispatcher-type "
                                       "alltoall --overlap-moe-expert-parallel-comm --delay-wgrad-compute "
                                       "--padded-vocab-size 51200 --moe-router-fusion --moe-ncclep-zero-copy --lion-beta1 0.9",
                                       8);
  CHECK(n.params.at("overlap_moe_expert_parallel_comm") == true);
  CHECK(n.params.at("delay_wgrad_compute") == true);
  CHECK(n.params.at("padded_vocab_size") == 51200);
  CHECK(n.params.at("moe_router_fusion") == true);
  CHECK(n.not_modelled == std::vector<std::string>{"--moe-ncclep-zero-copy"});
  CHECK(n.ignored == std::vector<std::string>{"--lion-beta1 0.9"});
  ParamMap pm = params_from_json(n.params, JsonPath{"job.sh", "/workload/params"});
  pm["gpu"] = "h100";
  CHECK_NOTHROW(gpt_config_from_params(pm, "job.sh"));
  const MegatronImport f = import_text("torchrun pretrain_gpt.py" + kBase + " --use-distributed-optimizer --use-megatron-fsdp");
  CHECK(f.params.at("data_parallel_sharding_strategy") == "optim_grads_params");
  // Dropped after 1e057005 and still read, each in its class: --use-custom-fsdp modelled, --moe-extended-tp not
  // modelled, --retro-add-retriever ignored.
  const MegatronImport o = import_text("torchrun pretrain_gpt.py" + kBase +
                                       " --use-distributed-optimizer --use-custom-fsdp --data-parallel-sharding-strategy "
                                       "optim_grads --moe-extended-tp --retro-add-retriever");
  CHECK(o.params.at("data_parallel_sharding_strategy") == "optim_grads");
  CHECK(o.params.at("overlap_grad_reduce") == true);
  CHECK(o.not_modelled == std::vector<std::string>{"--moe-extended-tp"});
  CHECK(o.ignored == std::vector<std::string>{"--retro-add-retriever"});
  for (const char* old_only : {"--use-custom-fsdp", "--moe-extended-tp", "--retro-add-retriever"}) {
    CAPTURE(old_only);
    REQUIRE(find_megatron_flag(old_only) != nullptr);
    CHECK(std::string(find_megatron_flag(old_only)->commits) == "1e057005");
  }
  CHECK(std::string(find_megatron_flag("--delay-wgrad-compute")->commits) == "d48bd6be d98e8a64");
  CHECK(std::string(find_megatron_flag("--num-layers")->commits) == "1e057005 d48bd6be d98e8a64");
}

TEST_CASE("megatron import: the router's losses, expert bias and forced balance as the generator's parameters") {
  const std::string moe = " --num-experts 8 --expert-model-parallel-size 8 --moe-token-dispatcher-type alltoall";
  const MegatronImport n = import_text("torchrun pretrain_gpt.py" + kBase + moe +
                                           " --moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4 "
                                           "--moe-z-loss-coeff 1e-3 --moe-router-score-function sigmoid "
                                           "--moe-router-enable-expert-bias --moe-router-force-load-balancing",
                                       8);
  CHECK(n.params.at("moe_router_load_balancing_type") == "seq_aux_loss");
  CHECK(n.params.at("moe_aux_loss_coeff") == doctest::Approx(1e-4));
  CHECK(n.params.at("moe_z_loss_coeff") == doctest::Approx(1e-3));
  CHECK(n.params.at("moe_router_score_function") == "sigmoid");
  CHECK(n.params.at("moe_router_enable_expert_bias") == true);
  CHECK(n.params.at("moe_router_force_load_balancing") == true);
  CHECK(n.not_modelled.empty());
  ParamMap pm = params_from_json(n.params, JsonPath{"job.sh", "/workload/params"});
  pm["gpu"] = "h100";
  const GptConfig c = gpt_config_from_params(pm, "job.sh");
  CHECK(c.moe.aux_loss_on());
  // A coefficient alone keeps Megatron's default type (aux_loss).
  CHECK(import_text("torchrun pretrain_gpt.py" + kBase + moe + " --moe-aux-loss-coeff 0.01", 8).params.at("moe_aux_loss_coeff") ==
        doctest::Approx(0.01));
  // Several types (a list, one coefficient each) are one run's losses together: refused, naming the line.
  const std::string two = "torchrun pretrain_gpt.py" + kBase + moe +
                          " \\\n --moe-router-load-balancing-type aux_loss seq_aux_loss --moe-aux-loss-coeff 1e-3 1e-4";
  CHECK(error_of([&] { import_text(two, 8); }).find("job.sh:2: --moe-router-load-balancing-type with 2 types") != std::string::npos);
  CHECK(error_of([&] { import_text("torchrun pretrain_gpt.py" + kBase + moe + " --moe-aux-loss-coeff 1e-3 1e-4", 8); })
            .find("--moe-aux-loss-coeff with 2 values") != std::string::npos);
}
