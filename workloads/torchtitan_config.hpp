#pragma once
// torchtitan job configs as `gpt` scenarios (`fabricsim import torchtitan`, `fabricsim run --torchtitan`;
// docs/workloads.md, "Importing a torchtitan config"). Four schema generations are read (pytorch/torchtitan):
//   2024     TOML, torchtitan/config_manager.py's argparse options (@9dec370, Dec 2024): [training] batch_size and
//            the DP/TP degrees, [experimental] pipeline / context parallelism and async TP, [float8].
//   2025     TOML, the JobConfig dataclasses (@820504e, @6fc499f6): [parallelism], local_batch_size,
//            model.converters = ["float8"] with [float8] recipe_name, [mx].
//   2025-09  TOML after the quantization refactor (@8a2686c4a): [compile], [quantize.linear.float8] /
//            [quantize.linear.mx], converters "quantize.linear.float8".
//   2026     JSON: the resolved Trainer.Config that torchtitan's trainer writes (debug.save_config_file /
//            print_config, Trainer.Config.to_dict @b5bcd76c6) since the Python config registry (9810191bb).
// Every key of these schemas is in one table (torchtitan_config.cpp): read by a rule below, ignored (no
// effect on a step), or not modelled (warned when it differs from torchtitan's default). Sections that only
// log, checkpoint, profile or schedule the learning rate are ignored whole. An unknown key is an error naming
// the file, line and dotted path, unless `ignore_unknown` (then it is listed in the notes).
// torchtitan's `--section.option value` command-line overrides are applied on top of the file.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/json_reader.hpp"
#include "workloads/param_origin.hpp"
#include "workloads/params.hpp"

namespace fabricsim::workloads {

// The torchtitan commits whose configuration schemas the key table was read from.
extern const char* const kTorchtitanCommits;

struct TorchtitanOptions {
  // torchtitan's `--section.option [value]` words, in command-line order (name without the leading --).
  std::vector<std::pair<std::string, std::string>> overrides;
  std::int64_t gpus = 0;       // ranks torchrun starts (0: the degrees' product, else the topology's GPUs)
  std::string version;         // torchtitan commit date YYYY-MM-DD or a known commit ("" = the schema's)
  bool ignore_unknown = false;
};

// Whether torchtitan's option `name` ("training.compile") is a switch: on the command line it takes a value
// only when the next word is true or false. Unknown names: false.
bool torchtitan_option_is_switch(const std::string& name);

// `path` names the file in errors and notes; `text` is its contents (TOML, or JSON when it starts with '{').
// `overrides` (--param) are applied last: the gpt generator's parameters, and the topology's
// (split_import_overrides, workloads/importers.hpp). `origins` (optional) receives the key (table.key and line,
// or the command line's --section.option) that set each parameter (ParamOrigin).
Json scenario_for_torchtitan(const std::string& path, const std::string& text, const std::string& topology,
                             const ParamMap& overrides, const TorchtitanOptions& opt, ParamOrigins* origins = nullptr);

}  // namespace fabricsim::workloads
