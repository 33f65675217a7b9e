// Small frictions of issue 26: `--list` on every command that takes presets, calibrations or models, and the
// data-parallel generator's defaults describing a language-model step (not 1 token per sample).
#include <doctest/doctest.h>

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
      {"run", {"topology presets", "superpod", "compute presets", "megatron-sc21", "compute calibrations", "h200",
               "models", "llama3-70b"}, {"network calibrations"}},
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
