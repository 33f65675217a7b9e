// Small frictions of issue 26: `--list` on every command that takes presets, calibrations or models, and the
// data-parallel generator's defaults describing a language-model step (not 1 token per sample).
#include <doctest/doctest.h>

#include <algorithm>

#include "cli_test_util.hpp"
#include "sim/base/json_reader.hpp"

using namespace fabricsim;
namespace cli_test = fabricsim::cli_test;
using cli_test::Run;
using cli_test::run_in;
using cli_test::scratch_dir;
using cli_test::slurp;
namespace fs = std::filesystem;

TEST_CASE("--list prints what each command accepts") {
  const fs::path d = scratch_dir("frictions_list");
  struct Want {
    const char* cmd;
    std::vector<const char*> has, lacks;
  };
  const Want wants[] = {
      {"run", {"topology presets", "superpod", "network calibrations", "shipped:h100", "compute presets",
               "megatron-sc21", "compute calibrations", "h200", "models", "llama3-70b"}, {}},
      {"sweep", {"superpod", "megatron-sc21", "llama3-70b"}, {"network calibrations"}},
      {"plan", {"superpod", "megatron-sc21", "llama3-70b"}, {"network calibrations"}},
      {"gen", {"megatron-sc21", "llama3-70b"}, {"topology presets"}},
      {"coll", {"superpod", "network calibrations", "shipped:a100", "shipped:multinode-ib"}, {"models"}},
      {"validate", {"superpod", "shipped:h100"}, {"models"}},
      {"calibrate", {"superpod", "shipped:v100", "compute calibrations"}, {"models ("}},
  };
  for (const auto& w : wants) {
    CAPTURE(w.cmd);
    const Run r = run_in(d, cli_test::fabricsim(std::string(w.cmd) + " --list"));
    CHECK_MESSAGE(r.rc == 0, r.err);
    for (const char* h : w.has) CHECK_MESSAGE(r.out.find(h) != std::string::npos, h);
    for (const char* h : w.lacks) CHECK_MESSAGE(r.out.find(h) == std::string::npos, h);
  }
  // --help names the flag.
  CHECK(run_in(d, cli_test::fabricsim("coll --help")).out.find("--list") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("gen dp defaults: 2048 tokens per sample, so a default step is a language-model step") {
  const fs::path d = scratch_dir("frictions_dp");
  const Run r = run_in(d, cli_test::fabricsim("gen dp -o dp.json"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  const Json j = Json::parse(slurp(d / "dp.json"));
  CHECK(j["metadata"]["tokens_per_iteration"].get<double>() == 256.0 * 2048);  // global_batch_size x 2048
  // 6 x 1e9 parameters x 2048 tokens per sample: 1.2e13 FLOPs per sample (was 6e9 at 1 token per sample).
  CHECK(j["metadata"]["model_flops_per_iteration"].get<double>() == doctest::Approx(256 * 6.0 * 1e9 * 2048));
  fs::remove_all(d);
}

TEST_CASE("gpt defaults: listed by gen --help and docs/workloads.md; a catalogue model without a layout warns") {
  const fs::path d = scratch_dir("frictions_gpt_defaults");
  // The list gen --help prints is the one docs/workloads.md shows.
  const Run h = run_in(d, cli_test::fabricsim("gen --help"));
  REQUIRE(h.rc == 0);
  const std::string open = "Defaults (GPT-3 175B's; a model sets its shape, not its layout): ";
  const auto a = h.out.find(open), b = h.out.find("; world_size 1024 here");
  REQUIRE(a != std::string::npos);
  REQUIRE(b != std::string::npos);
  const std::string list = h.out.substr(a + open.size(), b - a - open.size());
  for (const char* k : {"tensor_model_parallel_size 8", "pipeline_model_parallel_size 16", "global_batch_size 1536",
                        "recompute_granularity full", "no virtual pipeline"})
    CHECK_MESSAGE(list.find(k) != std::string::npos, k);
  CHECK(slurp(fs::path(FABRICSIM_SOURCE_DIR) / "docs/workloads.md").find(list) != std::string::npos);
  // --help names every catalogue model (the models --list prints).
  CHECK(h.out.find("qwen3-next-80b-a3b") != std::string::npos);

  // {"model": "llama3-8b"} on 16 DGX H100: one warning line naming what was applied.
  cli_test::write_file(d / "m.json",
                       R"({"topology": {"preset": "superpod", "params": {"nodes": 16, "node": "dgx-h100"}},
                           "workload": {"generator": "gpt", "params": {"model": "llama3-8b"}}})");
  Run r = run_in(d, cli_test::fabricsim("run m.json -q --kernel-shapes k.txt"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.err == "fabricsim run: warning: m.json: /workload/params: model llama3-8b with no parallelism parameter gets "
                 "the gpt generator's defaults, set for GPT-3 175B on 1024 GPUs: tensor_model_parallel_size 8, "
                 "pipeline_model_parallel_size 16, no virtual pipeline, recompute_granularity full, global_batch_size "
                 "1536 (give tensor_model_parallel_size and pipeline_model_parallel_size to choose the layout)\n");
  // What is given is not listed as a default; tensor and pipeline sizes given silence it. (The runs below give a
  // global batch of 16: 1536 micro-batches of the default take most of a minute under the sanitizers.)
  cli_test::write_file(d / "g.json",
                       R"({"topology": {"preset": "superpod", "params": {"nodes": 16, "node": "dgx-h100"}},
                           "workload": {"generator": "gpt", "params": {"model": "llama3-8b", "global_batch_size": 16,
                                                                       "recompute_granularity": "none"}}})");
  r = run_in(d, cli_test::fabricsim("run g.json -q --kernel-shapes k.txt"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.err.find("pipeline_model_parallel_size 16, no virtual pipeline (give") != std::string::npos);
  cli_test::write_file(d / "t.json",
                       R"({"topology": {"preset": "superpod", "params": {"nodes": 16, "node": "dgx-h100"}},
                           "workload": {"generator": "gpt", "params": {"model": "llama3-8b", "tensor_model_parallel_size": 8,
                                                                       "global_batch_size": 16}}})");
  r = run_in(d, cli_test::fabricsim("run t.json -q --kernel-shapes k.txt"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  // Part of a layout given: the size left out is still GPT-3's, and the warning names it alone.
  CHECK(r.err == "fabricsim run: warning: t.json: /workload/params: model llama3-8b runs with "
                 "pipeline_model_parallel_size 16, the gpt generator's defaults (set for GPT-3 175B on 1024 GPUs; "
                 "Megatron-LM's own are 1): give them to choose the layout\n");
  cli_test::write_file(d / "tp.json",
                       R"({"topology": {"preset": "superpod", "params": {"nodes": 16, "node": "dgx-h100"}},
                           "workload": {"generator": "gpt", "params": {"model": "llama3-8b", "tensor_model_parallel_size": 8,
                                                                       "pipeline_model_parallel_size": 2,
                                                                       "global_batch_size": 16}}})");
  r = run_in(d, cli_test::fabricsim("run tp.json -q --kernel-shapes k.txt"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.err.empty());
  // No model: the shape is the defaults' own (GPT-3 175B), nothing to warn about.
  r = run_in(d, cli_test::fabricsim("gen gpt --param world_size=128 --param global_batch_size=16 -o x.json"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.err.find("warning") == std::string::npos);
  r = run_in(d, cli_test::fabricsim("gen gpt --param model=llama3-8b --param world_size=128 --param global_batch_size=16 -o x.json"));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.err.rfind("fabricsim gen: warning: --param model llama3-8b with no parallelism parameter", 0) == 0);
  fs::remove_all(d);
}

TEST_CASE("a command-line error names the command once") {
  const fs::path d = scratch_dir("frictions_prefix");
  std::ofstream(d / "s.json") << cli_test::small_gpt_scenario(2, 16, 4, 2);
  const Run r = run_in(d, cli_test::fabricsim("run s.json --topology dgx-h100"));
  CHECK(r.rc == 2);
  CHECK(r.err == "fabricsim run: error: --topology goes with --trace, --megatron, --nemo or --torchtitan\n");
  const Run two = run_in(d, cli_test::fabricsim("run s.json s.json"));
  CHECK(two.rc == 2);
  CHECK(two.err.find("fabricsim run: error: expected at most one scenario file") == 0);
}

TEST_CASE("run given a result JSON says it is a result, not a scenario") {
  const fs::path d = scratch_dir("frictions_result");
  std::ofstream(d / "s.json") << cli_test::small_gpt_scenario(2, 16, 4, 2);
  REQUIRE(run_in(d, cli_test::fabricsim("run s.json -q --json r.json")).rc == 0);
  const Run r = run_in(d, cli_test::fabricsim("run r.json -q"));
  CHECK(r.rc == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("r.json") != std::string::npos);
  CHECK(r.err.find("this is a result written by fabricsim run --json") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("short options take their value attached (-j2, -b8G, -pnodes=2) as getopt does") {
  const fs::path d = scratch_dir("frictions_short");
  const Run a = run_in(d, cli_test::fabricsim("coll -tsuperpod -pnodes=2 --op all_reduce -b8M -e8M"));
  const Run b = run_in(d, cli_test::fabricsim("coll -t superpod -p nodes=2 --op all_reduce -b 8M -e 8M"));
  REQUIRE_MESSAGE(a.rc == 0, a.err);
  CHECK(a.out == b.out);
  // A switch keeps refusing what follows it, and an unknown short option is still one line.
  const Run q = run_in(d, cli_test::fabricsim("coll -t superpod --op all_reduce -qx"));
  CHECK(q.rc == 2);
  CHECK(q.err.find("-qx: unknown option") != std::string::npos);
}
