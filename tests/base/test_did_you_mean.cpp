// "Did you mean": one suggestion, only for a likely typo (sim/base/did_you_mean.hpp).
#include <doctest/doctest.h>

#include "sim/base/did_you_mean.hpp"

using namespace fabricsim;

TEST_CASE("edit_distance: insertions, deletions, substitutions and neighbour swaps cost 1; case is ignored") {
  CHECK(edit_distance("all_reduce", "all_reduce") == 0);
  CHECK(edit_distance("allreduce", "all_reduce") == 1);
  CHECK(edit_distance("nodez", "nodes") == 1);
  CHECK(edit_distance("ndoes", "nodes") == 1);  // a swap
  CHECK(edit_distance("DGX-H100", "dgx-h100") == 0);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
}

TEST_CASE("closest_name: one suggestion when close, none when far, tied or known") {
  const std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                                        "all_to_all", "all_to_allv", "send_recv"};
  CHECK(closest_name("allreduce", ops) == "all_reduce");
  CHECK(closest_name("alltoall", ops) == "all_to_all");
  CHECK(closest_name("broadcats", ops) == "broadcast");
  CHECK(closest_name("sum", ops).empty());      // nothing close
  CHECK(closest_name("foo_bar", ops).empty());
  CHECK(closest_name("all_reduce", ops).empty());  // known
  // Equally near: the one of the same length; still tied: none.
  CHECK(closest_name("nodez", {"nodes", "node"}) == "nodes");
  CHECK(closest_name("abc", {"abd", "abe"}).empty());
  // One or two characters: only a change of case.
  CHECK(closest_name("y", {"x"}).empty());
  CHECK(closest_name("nn", {"n", "k"}).empty());
  CHECK(closest_name("TP", {"tp", "pp"}) == "tp");
  // Every word of the name in a known name, in order: the nearest such (a plain edit distance would pick
  // context_parallel_size, 5 away, over tensor_model_parallel_size, 6 away).
  const std::vector<std::string> params = {"tensor_model_parallel_size", "pipeline_model_parallel_size",
                                           "context_parallel_size", "expert_tensor_parallel_size"};
  CHECK(closest_name("tensor_parallel_size", params) == "tensor_model_parallel_size");
  CHECK(closest_name("pipeline_parallel_size", params) == "pipeline_model_parallel_size");
  // A start of a known name.
  CHECK(closest_name("--target-tokens", {"--target-tokens-per-day", "--target-step-time", "--top"}) ==
        "--target-tokens-per-day");
  CHECK(did_you_mean("dgx-h10", {"dgx-h100", "dgx-a100", "dgx-h200"}) == " (did you mean 'dgx-h100'?)");
  CHECK(did_you_mean("zzz", {"dgx-h100"}).empty());
}
