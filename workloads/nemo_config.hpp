#pragma once
// NeMo 1.x training configs (YAML: NeMo's examples/nlp/language_modeling/conf/megatron_*_config.yaml and the
// NeMo-Framework-Launcher's conf/training/*/*.yaml) as `gpt` scenarios (`fabricsim import nemo`, `fabricsim run
// --nemo`; docs/workloads.md, "Importing a NeMo config"). NeMo's MegatronGPTModel builds Megatron-Core's
// TransformerConfig and ModelParallelConfig from the `model:` keys, so each key is translated into the
// Megatron-LM flag that sets the same field, and the launch goes through import_megatron_args and
// scenario_for_launch (workloads/megatron_args.hpp): one set of rules for Megatron-LM's defaults, one scenario
// writer. trainer.num_nodes x trainer.devices is the world size.
//
// Every key under `trainer:` and `model:` (and `model.optim:`) is in the importer's table: translated,
// read by a rule of NeMo's, or known to have no effect on a step (listed in the notes); a key in no list is an
// error naming file, line and YAML path, unless `ignore_unknown` (then it is listed in the notes). Top-level
// sections other than trainer and model (exp_manager, run, hydra, ...) do not change a step and are listed.
// `${a.b}` / `${.b}` / `${training.a.b}` interpolations are resolved within the file where a read value uses
// them; OmegaConf resolvers (`${multiply:...}`) and references outside the file are errors there.
#include <string>

#include "sim/base/json_reader.hpp"
#include "workloads/param_origin.hpp"
#include "workloads/params.hpp"

namespace fabricsim::workloads {

// The NeMo commit whose configs and model code the key table was read from.
extern const char* const kNemoCommit;

// `path` names the file in errors and notes; `text` is its contents. `overrides` (--param) are applied last: the
// gpt generator's parameters, and the topology's (split_import_overrides, workloads/importers.hpp). `origins`
// (optional) receives the YAML key and line that set each parameter (ParamOrigin).
Json scenario_for_nemo(const std::string& path, const std::string& text, const std::string& topology,
                       const ParamMap& overrides, bool ignore_unknown, ParamOrigins* origins = nullptr);

}  // namespace fabricsim::workloads
