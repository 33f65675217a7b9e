// `fabricsim calibrate --compute` end to end: fit the H200 kernel folder, then price kernels the fit never saw
// (the H100's measured rows: same GH100 chip, other HBM) from the written calibration file.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "models/compute_calibration.hpp"

namespace {
namespace fs = std::filesystem;
namespace cli_test = fabricsim::cli_test;
using namespace fabricsim::models;
const std::string kHw = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/hardware/";
cli_test::Run run(const std::string& args, const fs::path& dir) { return cli_test::run_in(dir, cli_test::fabricsim(args)); }
}  // namespace

TEST_CASE("fabricsim calibrate --compute: fit on H200, predict held-out H100 kernels") {
  const fs::path d = cli_test::scratch_dir("test_compute_calibrate");
  const cli_test::Run r = run("calibrate --compute " + kHw + "h200-kernels -o h200.json", d);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("NOT held out") != std::string::npos);
  const ComputeCalibration c = load_compute_calibration((d / "h200.json").string());
  CHECK(c.gpu == "h200");
  // Same output for the same input (byte-identical), and equal to the shipped file but for its source path.
  REQUIRE(run("calibrate --compute " + kHw + "h200-kernels -o again.json", d).rc == 0);
  CHECK(cli_test::slurp(d / "h200.json") == cli_test::slurp(d / "again.json"));

  // Held-out rows: tests/data/hardware/h100-kernels (gemm.csv line 334: llama3-70b tp4 fc2 dgrad 16384 x
  // 7168 x 8192 bf16; grouped_gemm.csv line 11: deepseek-v3 1024 tokens/expert; attention.csv line 25:
  // cuDNN b1 h32 kv8 s16384 fwd).
  const KernelMeasurements h100 = load_kernel_measurements(kHw + "h100-kernels");
  const GpuSpec gpu = gpu_spec("h100");
  auto find = [&](const std::string& where_suffix, bool bwd) -> const KernelMeasurement* {
    for (const auto& row : h100.rows)
      if (row.where.size() >= where_suffix.size() &&
          row.where.compare(row.where.size() - where_suffix.size(), where_suffix.size(), where_suffix) == 0 &&
          row.kernel.backward == bwd)
        return &row;
    return nullptr;
  };
  for (const char* w : {"/gemm.csv:334", "/grouped_gemm.csv:11", "/attention.csv:25"}) {
    CAPTURE(w);
    const KernelMeasurement* m = find(w, false);
    REQUIRE(m);
    const double err = calibrated_kernel_time_s(c, gpu, m->kernel) / m->time_s - 1;
    CHECK(std::fabs(err) < 0.10);
  }
  // With --held-out and --compute-check the held-out table is printed.
  // The command of docs/validation.md "Compute kernels" (run from the repository root there).
  const cli_test::Run h = run("calibrate --compute " + kHw + "h200-kernels --held-out --compute-check " + kHw +
                                  "h100-kernels -o h.json",
                              d);
  REQUIRE(h.rc == 0);
  CHECK(h.out.find("| h200 -> h100 | gemm-bf16 | 229 |") != std::string::npos);
  CHECK(h.out.find("| leave-one-group-out h200 | gemm-bf16 | 224 |") != std::string::npos);
  // docs/validation.md "Kernels measured after the fit".
  const cli_test::Run n = run("calibrate --compute " + kHw + "h200-kernels --compute-check " + kHw +
                                  "h200-heldout/kernels.json -o n.json",
                              d);
  REQUIRE(n.rc == 0);
  CHECK(n.out.find("| h200 -> h200 (other measurements) | gemm-fp8 | 10 |") != std::string::npos);
  // The H100 command of docs/calibration.md reproduces the shipped file (up to its source string).
  REQUIRE(run("calibrate --compute " + kHw + "h100-kernels --start " + std::string(FABRICSIM_SOURCE_DIR) +
                  "/validate/compute_calibrations/h200.json -o h100.json",
              d).rc == 0);
  auto no_source = [](const std::string& path) {
    nlohmann::json j = nlohmann::json::parse(cli_test::slurp(path));
    j.erase("source");
    return j;
  };
  CHECK(no_source((d / "h100.json").string()) ==
        no_source(std::string(FABRICSIM_SOURCE_DIR) + "/validate/compute_calibrations/h100.json"));
  // Bad input: one line naming the file and location, exit 2.
  const cli_test::Run bad = run("calibrate --compute " + kHw + "h200-kernels/gemm.csv -o x.json", d);
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("gemm.csv") != std::string::npos);
  const cli_test::Run none = run("calibrate --compute " + kHw + "h200-kernels", d);
  CHECK(none.rc == 2);
  CHECK(none.err.find("--output") != std::string::npos);
}
