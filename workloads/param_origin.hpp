#pragma once
// Where an imported scenario's parameter was set in the file the user wrote (workloads/megatron_args.hpp,
// nemo_config.hpp, torchtitan_config.hpp), so that an error the generator raises about the parameter names that
// place rather than the JSON path of the scenario the importer made (apps/cmd_import.cpp, rethrow_at_origin).
#include <map>
#include <string>

namespace fabricsim::workloads {

// `at`: the file and line ("train.sh:12"), or the command line ("--param tensor_model_parallel_size", "command
// line", "--gpus"); `name`: what set it there ("--recompute-modules", the YAML key path "model.num_layers", the
// TOML key "parallelism.tensor_parallel_degree"; "" when `at` says it all). A parameter from a default or the
// catalogue model has none.
struct ParamOrigin {
  std::string at;
  std::string name;
};
using ParamOrigins = std::map<std::string, ParamOrigin>;  // by generator parameter

}  // namespace fabricsim::workloads
