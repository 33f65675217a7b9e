// The gpt generator on AMD's MI300X preset: which FP8 recipes it accepts (CDNA 3 has no MX block scaling) and
// what its 192 GB holds.
#include <doctest/doctest.h>

#include <string>

#include "models/gpu.hpp"
#include "sim/base/error.hpp"
#include "workloads/gpt.hpp"
#include "workloads/params.hpp"

using namespace fabricsim;
using namespace fabricsim::workloads;

namespace {
// Llama 3 8B, FSDP2 over 8 MI300X, local batch 1 x 8192 (torchao's MI300X rows, tests/data/training-modern).
ParamMap llama8b_on_mi300x(const std::string& recipe) {
  ParamMap p = {{"model", "llama3-8b"},      {"world_size", "8"},          {"use_torch_fsdp2", "true"},
                {"micro_batch_size", "1"},   {"global_batch_size", "8"},   {"seq_length", "8192"},
                {"gpu", "mi300x"},           {"attention_backend", "flash"}, {"recompute_granularity", "none"},
                {"tensor_model_parallel_size", "1"}, {"pipeline_model_parallel_size", "1"}};
  if (!recipe.empty()) p["precision"] = "fp8", p["fp8_recipe"] = recipe;
  return p;
}
}  // namespace

TEST_CASE("gpt on mi300x: tensorwise / rowwise FP8 accepted, mxfp8 refused (no MX scaling on CDNA 3)") {
  CHECK_NOTHROW(gpt_config_from_params(llama8b_on_mi300x(""), "--param"));
  CHECK_NOTHROW(gpt_config_from_params(llama8b_on_mi300x("tensorwise"), "--param"));
  CHECK_NOTHROW(gpt_config_from_params(llama8b_on_mi300x("rowwise"), "--param"));
  try {
    gpt_config_from_params(llama8b_on_mi300x("mxfp8"), "--param");
    FAIL("mxfp8 on mi300x was accepted");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK(what.find("fp8_recipe") != std::string::npos);
    CHECK(what.find("mi300x") != std::string::npos);
  }
  // FP4 (NVFP4) has no MI300X peak either.
  CHECK(models::gpu_spec("mi300x").peak_flops(models::Precision::FP4) == 0);
}

TEST_CASE("gpt on mi300x: the 192 GB part holds what an 80 GB H100 does not") {
  // Llama 3 8B, FSDP2 over 8, no activation recompute, local batch 2 x 8192: more than 80 GiB, less than 192 GB.
  ParamMap p = llama8b_on_mi300x("");
  p["micro_batch_size"] = "2";
  p["global_batch_size"] = "16";
  const double need = gpt_memory_per_gpu(gpt_config_from_params(p, "--param")).total_bytes();
  CHECK(need > models::gpu_spec("h100").hbm_capacity_bytes);
  CHECK(need < models::gpu_spec("mi300x").hbm_capacity_bytes);
}
