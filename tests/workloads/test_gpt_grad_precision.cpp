// Gradient reduction precision (docs/workloads.md "Precision"): Megatron-LM's rule -- bf16 parameters (precision
// bf16 or fp8) accumulate and reduce gradients in fp32 unless told otherwise, fp16 parameters in fp16 -- and
// its effect on the DP traffic and the gradient memory.
#include <doctest/doctest.h>

#include "workloads_test_util.hpp"

#include <string>

#include "workloads/gpt.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {

// A small Llama-shaped model on two H100 nodes with DP 4 (TP 2, PP 2).
ParamMap grad_small(ParamMap over = {}) { return workloads_test::small_llama(16, 16, over); }

bool fp32(const ParamMap& p) { return gpt_config_from_params(p, "--param").grad_reduce_in_fp32; }

// Bytes of rank 0's step-end DP gradient reduction (the dp.bucket* all-reduces / reduce-scatters).
double dp_grad_bytes(const ParamMap& p) {
  const Trace t = workloads_test::gen(p);
  double b = 0;
  for (const Op& op : t.ranks.at(0).ops)
    if (op.name.rfind("dp.bucket", 0) == 0 && (op.name.find(".ar") != std::string::npos ||
                                              op.name.find(".rs") != std::string::npos))
      b += op.bytes;
  return b;
}

}  // namespace

TEST_CASE("gpt gradient reduction precision follows Megatron-LM: fp32 with bf16 parameters, fp16 with fp16") {
  // The default follows the parameter dtype, whichever vocabulary selects it.
  CHECK(fp32(grad_small()));                                      // H100 default precision: bf16
  CHECK(fp32(grad_small({{"precision", "bf16"}})));
  CHECK(fp32(grad_small({{"bf16", "true"}})));                    // Megatron's --bf16
  CHECK(fp32(grad_small({{"precision", "fp8"}})));                // FP8 runs keep bf16 parameters
  CHECK(fp32(grad_small({{"bf16", "true"}, {"fp8_format", "hybrid"}})));
  CHECK_FALSE(fp32(grad_small({{"precision", "fp16"}})));
  CHECK_FALSE(fp32(grad_small({{"fp16", "true"}})));              // Megatron's --fp16
  CHECK_FALSE(fp32(grad_small({{"fp16", "true"}, {"fp8_format", "hybrid"}})));  // fp16 parameters under FP8
  CHECK_FALSE(fp32(grad_small({{"gpu", "a100-80gb"}})));          // A100 default precision: fp16 (SC'21 runs)
  // Overrides: Megatron's opt-out flag, DDP's key and the training argument's name.
  CHECK_FALSE(fp32(grad_small({{"grad_reduce_in_bf16", "true"}})));
  CHECK_FALSE(fp32(grad_small({{"grad_reduce_in_fp32", "false"}})));
  CHECK(fp32(grad_small({{"precision", "fp16"}, {"grad_reduce_in_fp32", "true"}})));
  CHECK(fp32(grad_small({{"fp16", "true"}, {"accumulate_allreduce_grads_in_fp32", "true"}})));
  CHECK(fp32(grad_small({{"grad_reduce_in_fp32", "true"}, {"accumulate_allreduce_grads_in_fp32", "true"}})));
  // Contradictions are errors naming the key.
  CHECK(error_of([] { fp32(grad_small({{"grad_reduce_in_fp32", "true"}, {"grad_reduce_in_bf16", "true"}})); })
            .find("grad_reduce_in_bf16") != std::string::npos);
  CHECK(error_of([] {
          fp32(grad_small({{"grad_reduce_in_fp32", "false"}, {"accumulate_allreduce_grads_in_fp32", "true"}}));
        }).find("accumulate_allreduce_grads_in_fp32") != std::string::npos);
  CHECK(error_of([] { fp32(grad_small({{"fp16", "true"}, {"grad_reduce_in_bf16", "true"}})); })
            .find("needs bf16 parameters") != std::string::npos);
}

TEST_CASE("gpt gradient reduction precision: fp32 doubles the DP gradient bytes and the gradient buffer") {
  for (const char* dopt : {"false", "true"}) {
    CAPTURE(dopt);
    const ParamMap bf16 = grad_small({{"use_distributed_optimizer", dopt}});
    ParamMap bf16_wire = bf16;
    bf16_wire["grad_reduce_in_bf16"] = "true";
    const double b32 = dp_grad_bytes(bf16), b16 = dp_grad_bytes(bf16_wire);
    REQUIRE(b16 > 0);
    CHECK(b32 == doctest::Approx(2.0 * b16));
    const GptMemory m32 = gpt_memory_per_gpu(gpt_config_from_params(bf16, "--param")),
                    m16 = gpt_memory_per_gpu(gpt_config_from_params(bf16_wire, "--param"));
    REQUIRE(m16.grads_bytes > 0);
    CHECK(m32.grads_bytes == doctest::Approx(2.0 * m16.grads_bytes));
  }
}
