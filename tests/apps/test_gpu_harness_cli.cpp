// The GPU harnesses' behaviour that needs no GPU: flags, input errors, and the clear exit when no GPU is
// there. Compiled only where CMake could build them (CUDA found); their GPU runs are recorded in
// tests/data/nccl-harness-h200, tests/data/hardware/h200-kernel-bench and h100-comm-overlap.
#include <doctest/doctest.h>

#include "cli_test_util.hpp"

using namespace fabricsim::cli_test;

#ifdef FABRICSIM_KERNEL_BENCH
TEST_CASE("fabricsim-kernel-bench: help, bad shapes file with its line, no GPU or a JSON") {
  fs::path d = scratch_dir("kernel_bench");
  const std::string kb = quoted(FABRICSIM_KERNEL_BENCH);
  Run h = run_in(d, kb + " --help");
  CHECK(h.rc == 0);
  CHECK(h.out.find("--shapes FILE") != std::string::npos);
  {
    std::ofstream f(d / "shapes.txt");
    f << "# M N K precision label\n4096 4096 4096 bf16 square\n\n8192 0 64 fp8\n";
  }
  Run bad = run_in(d, kb + " -o k.json --shapes shapes.txt");
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("shapes.txt:4: expected 'M N K bf16|fp8 [label]'") != std::string::npos);
  Run only = run_in(d, kb + " -o k.json --only gemm,attention");
  CHECK(only.rc == 2);
  CHECK(only.err.find("--only: unknown kind 'attention'") != std::string::npos);
  Run no_out = run_in(d, kb);
  CHECK(no_out.rc == 2);
  CHECK(no_out.err.find("-o/--out: required") != std::string::npos);
  CHECK(h.out.find("--overlap FILE") != std::string::npos);
  Run ov = run_in(d, kb + " --overlap o.csv --quick");  // no -o needed with --overlap
  if (ov.rc == 1) {
    CHECK(ov.err.find("no usable CUDA GPU") != std::string::npos);
    CHECK_FALSE(fs::exists(d / "o.csv"));
  } else {
    CHECK(ov.rc == 0);
    CHECK(slurp(d / "o.csv").rfind("test,precision,m,n,k,comm_kind,comm_ctas", 0) == 0);
  }
  Run r = run_in(d, kb + " -o k.json --quick");
  if (r.rc == 1) {
    CHECK(r.err.find("no usable CUDA GPU") != std::string::npos);
    CHECK_FALSE(fs::exists(d / "k.json"));  // nothing half-written
  } else {
    CHECK(r.rc == 0);
    CHECK(slurp(d / "k.json").find("\"schema\": \"fabricsim.kernel_measurements/1\"") != std::string::npos);
  }
}
#endif

#ifdef FABRICSIM_NCCL_BENCH
TEST_CASE("fabricsim-nccl-bench: --self-test flags are checked before any GPU work") {
  fs::path d = scratch_dir("nccl_bench");
  const std::string nb = quoted(FABRICSIM_NCCL_BENCH);
  Run h = run_in(d, nb + " --help");
  CHECK(h.rc == 0);
  CHECK(h.out.find("--self-test ") != std::string::npos);
  Run bad = run_in(d, nb + " --self-test --self-test-stall 0s");
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("--self-test-stall: expected a time in (0, 10s]") != std::string::npos);
  Run r = run_in(d, nb + " --self-test");
  if (r.rc == 1) CHECK(r.err.find("no usable CUDA GPU") != std::string::npos);
  else CHECK(r.rc == 0);
}
#endif
