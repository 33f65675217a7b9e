// fabricsim run --kernel-shapes: the GEMMs a scenario prices, in the format fabricsim-kernel-bench --shapes
// reads, so the compute harness measures exactly the step's shapes (docs/validation.md).
#include <doctest/doctest.h>

#include "cli_test_util.hpp"

using namespace fabricsim::cli_test;

TEST_CASE("run --kernel-shapes: Llama-3-70B FP8 at TP 8 lists its layer GEMMs and replays nothing") {
  fs::path d = scratch_dir("kernel_shapes");
  const std::string ex = std::string(FABRICSIM_SOURCE_DIR) + "/examples/workloads/llama3-70b-fp8-64-h100.json";
  Run r = run_in(d, fabricsim::cli_test::fabricsim("run " + quoted(ex) + " --kernel-shapes shapes.txt"));
  CHECK(r.rc == 0);
  CHECK(r.out == "");  // no step summary: nothing was replayed
  const std::string s = slurp(d / "shapes.txt");
  // 8192 tokens per micro-batch; Llama-3-70B (hidden 8192, 64 heads, 8 KV heads of 128, FFN 28672) at TP 8:
  CHECK(s.find("\n8192 1280 8192 fp8 ") != std::string::npos);  // QKV forward: (64 + 2 x 8) x 128 / 8 outputs
  CHECK(s.find("\n8192 7168 8192 fp8 ") != std::string::npos);  // SwiGLU fc1 forward: 2 x 28672 / 8
  CHECK(s.find("\n8192 8192 3584 fp8 ") != std::string::npos);  // fc2 forward: 28672 / 8 inputs
  // The output layer (vocabulary 128256 / 8 = 16032 per rank) stays in bf16, as Transformer Engine keeps it.
  CHECK(s.find("\n8192 16032 8192 bf16 ") != std::string::npos);
  int bf16 = 0;
  for (auto p = s.find(" bf16 "); p != std::string::npos; p = s.find(" bf16 ", p + 1)) ++bf16;
  CHECK(bf16 == 2);  // its forward and its dgrad/wgrad shape; every layer GEMM is FP8
#ifdef FABRICSIM_KERNEL_BENCH
  // The bench reads the file (then stops for want of a GPU here, or measures where there is one).
  Run b = run_in(d, quoted(FABRICSIM_KERNEL_BENCH) + " --shapes shapes.txt -o k.json --only gemm");
  CHECK(b.rc != 2);
#endif
  Run bad = run_in(d, fabricsim::cli_test::fabricsim("run " + quoted(ex) + " --kernel-shapes no/such/dir/s.txt"));
  CHECK(bad.rc == 2);
}
