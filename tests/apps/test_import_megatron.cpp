// `fabricsim import megatron` and `fabricsim run --megatron` end to end: the example launch script
// (examples/workloads/llama3-70b-fp8-64-h100.sh) gives the same scenario bytes twice, runs, and simulates the same
// step as the hand-written JSON example with Megatron-LM's padded vocabulary; bad scripts are one error line,
// exit 2 and no output file.
#include <doctest/doctest.h>

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
const std::string kScript = "examples/workloads/llama3-70b-fp8-64-h100.sh";

fs::path scratch() {
  static const fs::path d = cli_test::scratch_dir("import_megatron");
  return d;
}

// `fabricsim <args>` from the repository root (the example paths are relative to it).
Run run_root(const std::string& args) { return cli_test::run_from_source(scratch(), args); }

void write(const fs::path& p, const std::string& text) { cli_test::write_file(p, text); }

json run_json(const std::string& args, const std::string& name) {
  const fs::path out = scratch() / name;
  fs::remove(out);
  Run r = run_root(args + " -q --comm-model analytic --json " + cli_test::quoted(out.string()));
  REQUIRE_MESSAGE(r.rc == 0, args << "\n" << r.err);
  return json::parse(cli_test::slurp(out));
}

}  // namespace

TEST_CASE("import megatron: the example script's scenario, its bytes, its notes and its step") {
  const fs::path a = scratch() / "a.json", b = scratch() / "b.json";
  Run r1 = run_root("import megatron " + kScript + " --topology dgx-h100 -o " + cli_test::quoted(a.string()));
  REQUIRE_MESSAGE(r1.rc == 0, r1.err);
  CHECK(r1.out.empty());
  CHECK(r1.err.find("ignored (no effect on step time): --rotary-base 500000, --train-iters 100") != std::string::npos);
  CHECK(r1.err.find("warning: not modelled") == std::string::npos);  // every flag of the example is modelled or ignored
  Run r2 = run_root("import megatron " + kScript + " --topology dgx-h100 -o " + cli_test::quoted(b.string()));
  REQUIRE(r2.rc == 0);
  const std::string text = cli_test::slurp(a);
  CHECK(text == cli_test::slurp(b));  // same input, same bytes
  // stdin gives the same scenario (named <stdin> in its note).
  Run r3 = cli_test::run_in(scratch(), "cd " + cli_test::quoted(kSrc) + " && " +
                                           cli_test::fabricsim("import megatron - --topology dgx-h100 < " + kScript));
  REQUIRE(r3.rc == 0);
  json in_stdin = json::parse(r3.out), in_file = json::parse(text);
  CHECK(in_stdin["workload"]["params"] == in_file["workload"]["params"]);
  CHECK(in_stdin["topology"] == in_file["topology"]);

  // The hand-written example, with the vocabulary Megatron-LM pads Llama-3's 128,256 tokens to (128 x TP 8):
  // the same generator configuration and the same simulated step.
  json ex = json::parse(cli_test::slurp(kSrc + "/examples/workloads/llama3-70b-fp8-64-h100.json"));
  CHECK(in_file["topology"] == ex["topology"]);
  ex["workload"]["params"]["padded_vocab_size"] = 129024;
  // The import states the FLOP count the launched Megatron-LM logs (causal; docs/workloads.md "FLOPs and MFU").
  CHECK(in_file["workload"]["params"]["flops_convention"] == "megatron-core-causal");
  ex["workload"]["params"]["flops_convention"] = "megatron-core-causal";
  const fs::path exf = scratch() / "example_padded.json";
  write(exf, ex.dump(2));
  const json from_json = run_json("run " + cli_test::quoted(exf.string()), "r_json.json");
  const json from_import = run_json("run " + cli_test::quoted(a.string()), "r_import.json");
  const json from_script = run_json("run --megatron " + kScript + " --topology dgx-h100", "r_script.json");
  CHECK(from_json.at("iteration_s").get<double>() > 0);
  CHECK(from_import.at("iteration_s").get<double>() == from_json.at("iteration_s").get<double>());
  CHECK(from_script.at("iteration_s").get<double>() == from_json.at("iteration_s").get<double>());
  CHECK(from_script.at("tflops_per_gpu").get<double>() == from_json.at("tflops_per_gpu").get<double>());
  CHECK(from_script.at("metrics").at("memory_per_gpu_bytes.max") == from_json.at("metrics").at("memory_per_gpu_bytes.max"));
  // The run's result keeps the import's notes.
  bool noted = false;
  for (const auto& n : from_script.at("notes"))
    noted = noted || n.get<std::string>().rfind("imported from the Megatron-LM launch " + kScript, 0) == 0;
  CHECK(noted);
}

TEST_CASE("import megatron: not-modelled flags warn; bad scripts are one line, exit 2, nothing written") {
  const std::string base =
      "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 2 --hidden-size 1024 --num-attention-heads 16 "
      "--seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --bf16 --tokenizer-type "
      "GPT2BPETokenizer --global-batch-size 16";
  write(scratch() / "ok.sh", base + " --manual-gc --lr 1e-4\n");
  Run ok = cli_test::run_in(scratch(), cli_test::fabricsim("run --megatron ok.sh --topology dgx-h100 -q"));
  REQUIRE_MESSAGE(ok.rc == 0, ok.err);
  CHECK(ok.err.find("fabricsim run: warning: not modelled (they change the step; fabricsim does not simulate them): "
                    "--manual-gc\n") != std::string::npos);
  CHECK(ok.out.find("step time") != std::string::npos);

  const fs::path out = scratch() / "never.json";
  struct Case {
    std::string script, message;
  };
  const Case cases[] = {
      {base + " \\\n  --no-such-flag\n",
       "fabricsim import: error: bad.sh:2: unknown Megatron-LM flag --no-such-flag (not in "
       "megatron/training/arguments.py @1e057005, @d48bd6be or @d98e8a64)\n"},
      {base + " --tensor-model-parallel-size $TP\n",
       "fabricsim import: error: bad.sh:1: variable $TP is not set (set it in the script or give --var TP=VALUE)\n"},
      {base + " --num-experts\n",
       "fabricsim import: error: bad.sh:1: --num-experts expects a value, got the end of the command\n"},
      {base + " --num-experts eight\n",
       "fabricsim import: error: bad.sh:1: --num-experts expects an integer, got 'eight'\n"},
      // The generator's own checks against the topology run before anything is written.
      {base + " --tensor-model-parallel-size 3\n", ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.script);
    write(scratch() / "bad.sh", c.script);
    fs::remove(out);
    Run r = cli_test::run_in(scratch(), cli_test::fabricsim("import megatron bad.sh --topology dgx-h100 -o " +
                                                            cli_test::quoted(out.string())));
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    if (!c.message.empty()) CHECK(r.err == c.message);
    CHECK_FALSE(fs::exists(out));
  }
  // --var supplies the variable.
  write(scratch() / "var.sh", base + " --tensor-model-parallel-size $TP\n");
  Run v = cli_test::run_in(scratch(), cli_test::fabricsim("import megatron var.sh --topology dgx-h100 --var TP=2"));
  REQUIRE_MESSAGE(v.rc == 0, v.err);
  CHECK(json::parse(v.out)["workload"]["params"]["tensor_model_parallel_size"] == 2);
}

TEST_CASE("import megatron: flags of Megatron-LM d98e8a64 (2026) import, and so do flags it dropped") {
  // Qwen3-30B-A3B's shape on 8 layers (examples/sweeps/moe_small.json), EP 16 over four DGX H100.
  const std::string moe =
      "torchrun --nproc-per-node 8 --nnodes 4 pretrain_gpt.py --num-layers 8 --hidden-size 2048 "
      "--num-attention-heads 32 --group-query-attention --num-query-groups 4 --kv-channels 128 --seq-length 4096 "
      "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 --bf16 --swiglu "
      "--normalization RMSNorm --disable-bias-linear --position-embedding-type rope --tokenizer-type GPT2BPETokenizer "
      "--num-experts 128 --moe-router-topk 8 --moe-ffn-hidden-size 768 --expert-model-parallel-size 16 "
      "--moe-token-dispatcher-type alltoall --moe-grouped-gemm --use-distributed-optimizer";
  auto step = [&](const std::string& name, const std::string& extra) {
    write(scratch() / name, moe + extra + "\n");
    const fs::path out = scratch() / (name + ".json");
    fs::remove(out);
    Run r = cli_test::run_in(scratch(), cli_test::fabricsim("run --megatron " + name + " --topology dgx-h100 -q "
                                                            "--comm-model engine --json " + out.string()));
    REQUIRE_MESSAGE(r.rc == 0, name << "\n" << r.err);
    CHECK(r.err.find("unknown") == std::string::npos);
    return json::parse(cli_test::slurp(out));
  };
  // New in d98e8a64 and modelled: the EP all-to-all overlapped with the other micro-batch's compute, and the
  // experts' weight gradients delayed behind the combine (Megatron-LM asserts the second needs the first).
  const json base = step("moe.sh", "");
  const json ovl = step("moe_ovl.sh", " --overlap-moe-expert-parallel-comm");
  const json delay = step("moe_delay.sh", " --overlap-moe-expert-parallel-comm --delay-wgrad-compute");
  CHECK(ovl.at("iteration_s").get<double>() < base.at("iteration_s").get<double>());
  CHECK(delay.at("iteration_s").get<double>() < ovl.at("iteration_s").get<double>());
  // The same compute, once the time compute beside communication kernels added is taken out (the two
  // overlaps put different communication beside it).
  auto alone_compute = [](const json& r) {
    return r.at("breakdown").at("compute_s").get<double>() - r.at("metrics").at("replay.comm_sm_contention_s").get<double>();
  };
  CHECK(alone_compute(delay) == doctest::Approx(alone_compute(ovl)).epsilon(1e-6));
  // New in d98e8a64 and not modelled / no effect: accepted, with the warning for the first.
  write(scratch() / "new.sh", moe + " --moe-ncclep-zero-copy --muon-momentum 0.95 --flight-recorder-trace-buffer-size 100\n");
  Run n = cli_test::run_in(scratch(), cli_test::fabricsim("import megatron new.sh --topology dgx-h100"));
  REQUIRE_MESSAGE(n.rc == 0, n.err);
  CHECK(n.err.find("warning: not modelled (they change the step; fabricsim does not simulate them): "
                   "--moe-ncclep-zero-copy\n") != std::string::npos);
  CHECK(n.err.find("ignored (no effect on step time): --muon-momentum 0.95, --flight-recorder-trace-buffer-size 100") !=
        std::string::npos);
  CHECK(json::parse(n.out)["workload"]["notes"][0].get<std::string>().find(
            "(flags of megatron/training/arguments.py @1e057005, @d48bd6be and @d98e8a64)") != std::string::npos);
  // Dropped after 1e057005, still read: --use-custom-fsdp (now --use-megatron-fsdp: the same scenario) and
  // --moe-extended-tp (not modelled).
  const std::string fsdp = moe + " --data-parallel-sharding-strategy optim_grads_params";
  write(scratch() / "old.sh", fsdp + " --use-custom-fsdp --moe-extended-tp\n");
  write(scratch() / "new_fsdp.sh", fsdp + " --use-megatron-fsdp\n");
  Run o = cli_test::run_in(scratch(), cli_test::fabricsim("import megatron old.sh --topology dgx-h100"));
  Run m = cli_test::run_in(scratch(), cli_test::fabricsim("import megatron new_fsdp.sh --topology dgx-h100"));
  REQUIRE_MESSAGE(o.rc == 0, o.err);
  REQUIRE_MESSAGE(m.rc == 0, m.err);
  CHECK(o.err.find("--moe-extended-tp") != std::string::npos);
  const json po = json::parse(o.out)["workload"]["params"], pm = json::parse(m.out)["workload"]["params"];
  CHECK(po["data_parallel_sharding_strategy"] == "optim_grads_params");
  CHECK(po == pm);
}

TEST_CASE("import megatron: --pipeline-model-parallel-layout and the interleaved schedule's N") {
  // 8 GPUs: TP 1, PP 4, DP 2; a layout of 8 virtual stages (VP 2, one of them empty) in Megatron's string
  // form, N = 8 (16 micro-batches).
  const std::string script =
      "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 10 --hidden-size 2048 --num-attention-heads 16 "
      "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 32 --bf16 "
      "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 --tokenizer-type GPT2BPETokenizer "
      "--pipeline-model-parallel-layout 'Et|(tt|)*3,|t|t|tL' --microbatch-group-size-per-virtual-pipeline-stage 8\n";
  const fs::path sh = scratch() / "layout.sh";
  write(sh, script);
  Run r = run_root("import megatron " + cli_test::quoted(sh.string()) + " --topology dgx-h100");
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  const json p = json::parse(r.out)["workload"]["params"];
  CHECK(p["pipeline_model_parallel_layout"] == "Et|(tt|)*3,|t|t|tL");
  CHECK(p["microbatch_group_size_per_vp_stage"] == 8);
  CHECK(p["overlap_p2p_comm"] == true);  // Megatron's default with virtual stages
  CHECK(r.err.find("warning: not modelled") == std::string::npos);
  const json res = run_json("run --megatron " + cli_test::quoted(sh.string()) + " --topology dgx-h100", "r_layout.json");
  CHECK(res.at("iteration_s").get<double>() > 0);
  // A layout with the wrong number of decoder layers: one error line naming the script line and the flag (the
  // generator's check, reported where the script sets the layout: tests/apps/test_import_origins.cpp).
  write(sh, std::string(script).replace(script.find("--num-layers 10"), 15, "--num-layers 12"));
  r = run_root("import megatron " + cli_test::quoted(sh.string()) + " --topology dgx-h100");
  CHECK(r.rc == 2);
  CHECK(r.err.find("layout.sh:1: --pipeline-model-parallel-layout: holds 10 decoder layers t, num_layers is 12\n") !=
        std::string::npos);
}
