// fabricsim import megatron SCRIPT|- --topology NAME|FILE [--var NAME=VALUE]... [--param k=v]... [-o scenario.json]:
// a Megatron-LM launch script (or command line) as a scenario that `fabricsim run` accepts
// (docs/workloads.md, "Megatron-LM launch scripts"; workloads/megatron_args.hpp).
// fabricsim import nemo CONFIG.yaml|- --topology NAME|FILE [--param k=v]... [--ignore-unknown] [-o scenario.json]:
// a NeMo training config the same way (docs/workloads.md, "Importing a NeMo config"; workloads/nemo_config.hpp).
// fabricsim import torchtitan CONFIG.toml|CONFIG.json|- --topology NAME|FILE [--gpus N] [--torchtitan-version V]
// [--param k=v]... [--ignore-unknown] [--section.option value]... [-o scenario.json]: a torchtitan job config
// (docs/workloads.md, "Importing a torchtitan config"; workloads/torchtitan_config.hpp).
#include <cctype>
#include <iostream>

#include "apps/cli.hpp"
#include "replay/run_scenario.hpp"
#include "sim/base/error.hpp"
#include "sim/base/input_file.hpp"
#include "workloads/config_path.hpp"
#include "workloads/megatron_args.hpp"
#include "workloads/nemo_config.hpp"
#include "workloads/params.hpp"
#include "workloads/scenario.hpp"
#include "workloads/torchtitan_config.hpp"

namespace fabricsim::cli {

void megatron_flags(Args& args) {
  args.flag({"--var", "", "NAME=VALUE",
             "set a shell variable the script uses ($NAME, ${NAME}) before it runs; the script's own assignments do "
             "not change it (repeatable)", "", true});
}

namespace {

// The generator's own checks against the topology, so that a configuration it cannot run writes nothing (an
// error about a parameter names where the user's file set it: `origins`); then what was left out, on stderr (the
// scenario and the run's result keep the same notes).
Json checked_import(const Args& args, Json doc, const std::string& name, const workloads::ParamOrigins& origins) {
  const workloads::Scenario s = workloads::scenario_from_json(doc, name);
  try {
    sim::check_scenario_inputs(s, sim::scenario_system(s));
  } catch (const InputError& e) {
    rethrow_at_origin(e, s.workload.where, origins);
  }
  const Json& notes = doc["workload"]["notes"];
  for (std::size_t k = 1; k < notes.size(); ++k) {
    const std::string n = notes[k].get<std::string>();
    const bool warn = n.rfind("not modelled", 0) == 0 || n.rfind("unknown", 0) == 0;
    std::cerr << "fabricsim " << args.command() << ": " << (warn ? "warning: " : "") << n << "\n";
  }
  return doc;
}

// Reads FILE (or stdin for "-"), converts it with `convert(name, text, origins)` and checks the scenario; the
// parameter origins go to `origins_out` when given.
template <class Convert>
Json import_file(const Args& args, const std::string& file, workloads::ParamOrigins* origins_out, Convert&& convert) {
  const std::string name = file == "-" ? std::string("<stdin>") : file;
  const std::string text = read_input_file(file == "-" ? std::string("/dev/stdin") : file);
  workloads::ParamOrigins origins;
  Json doc = checked_import(args, convert(name, text, &origins), name, origins);
  if (origins_out) *origins_out = std::move(origins);
  return doc;
}

}  // namespace

void rethrow_at_origin(const InputError& e, const std::string& params_where, const workloads::ParamOrigins& origins) {
  // The generator names a parameter as `params_where KEY: what` (ParamReader::fail, bad_value) or
  // `params_where/KEY: what` (a JSON string where a number was expected).
  const std::string msg = e.what();
  const std::size_t n = params_where.size();
  if (!params_where.empty() && msg.size() > n && msg.compare(0, n, params_where) == 0 && (msg[n] == ' ' || msg[n] == '/')) {
    const std::size_t colon = msg.find(": ", n + 1);
    const auto o = colon == std::string::npos ? origins.end() : origins.find(msg.substr(n + 1, colon - n - 1));
    if (o != origins.end()) {
      const std::string where = o->second.at + (o->second.name.empty() ? std::string() : ": " + o->second.name);
      const std::string what = msg.substr(colon + 2);
      if (dynamic_cast<const DoesNotFitError*>(&e)) throw DoesNotFitError(where, what);
      if (dynamic_cast<const workloads::ParamError*>(&e)) throw workloads::ParamError(where, what);
      throw InputError(where, what);
    }
  }
  throw;
}

Json megatron_scenario(const Args& args, const std::string& script, workloads::ParamOrigins* origins_out) {
  std::map<std::string, std::string> vars;
  for (const auto& v : args.all("--var")) {
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("--var", "expected NAME=VALUE, got '" + text_excerpt(v) + "'");
    vars[v.substr(0, eq)] = v.substr(eq + 1);
  }
  return import_file(args, script, origins_out,
                     [&](const std::string& name, const std::string& text, workloads::ParamOrigins* origins) {
                       return workloads::scenario_for_megatron(name, text, args.get("--topology"), args.params(), vars,
                                                               origins);
                     });
}

Json nemo_scenario(const Args& args, const std::string& config, workloads::ParamOrigins* origins_out) {
  return import_file(args, config, origins_out,
                     [&](const std::string& name, const std::string& text, workloads::ParamOrigins* origins) {
                       return workloads::scenario_for_nemo(name, text, args.get("--topology"), args.params(),
                                                           args.has("--ignore-unknown"), origins);
                     });
}

void torchtitan_flags(Args& args) {
  args.flag({"--gpus", "", "N", "torchtitan: the ranks torchrun starts (--nproc_per_node x --nnodes; default the "
             "product of the config's degrees, or the topology's GPUs when data_parallel_shard_degree is -1)", ""});
  args.flag({"--torchtitan-version", "", "DATE|COMMIT", "torchtitan: the commit the job ran (YYYY-MM-DD or a known "
             "commit), for the implementation choices that changed with it (default: the config schema's "
             "generation; docs/workloads.md)", ""});
}

std::vector<std::pair<std::string, std::string>> take_torchtitan_overrides(int& argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> out;
  int w = 0;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string name = a.rfind("--", 0) == 0 ? a.substr(2, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 2) : "";
    if (name.empty() || name.find('.') == std::string::npos || !std::isalpha(static_cast<unsigned char>(name[0]))) {
      argv[w++] = argv[i];
      continue;
    }
    if (a.find('=') != std::string::npos) {
      out.emplace_back(name, a.substr(a.find('=') + 1));
      continue;
    }
    const bool sw = workloads::torchtitan_option_is_switch(name);
    const std::string next = i + 1 < argc ? argv[i + 1] : "";
    const std::string low = workloads::lower(next);
    if (i + 1 < argc && next.rfind("--", 0) != 0 && (!sw || low == "true" || low == "false")) {
      out.emplace_back(name, next);
      ++i;
    } else if (sw) {
      out.emplace_back(name, "true");
    } else {
      throw InputError("--" + name, "expected a value (torchtitan's --section.option VALUE)");
    }
  }
  argc = w;
  return out;
}

Json torchtitan_scenario(const Args& args, const std::string& config,
                         const std::vector<std::pair<std::string, std::string>>& overrides,
                         workloads::ParamOrigins* origins_out) {
  workloads::TorchtitanOptions opt;
  opt.overrides = overrides;
  opt.ignore_unknown = args.has("--ignore-unknown");
  opt.version = args.get("--torchtitan-version");
  if (args.has("--gpus")) {
    std::int64_t n = 0;
    if (!workloads::parse_int(args.get("--gpus"), n) || n < 1)
      throw InputError("--gpus", "expected a positive integer, got '" + text_excerpt(args.get("--gpus")) + "'");
    opt.gpus = n;
  }
  return import_file(args, config, origins_out,
                     [&](const std::string& name, const std::string& text, workloads::ParamOrigins* origins) {
                       return workloads::scenario_for_torchtitan(name, text, args.get("--topology"), args.params(), opt,
                                                                 origins);
                     });
}

int cmd_import(int argc, char** argv) {
  const auto titan_overrides = take_torchtitan_overrides(argc, argv);
  Args args("import", "megatron SCRIPT|- | nemo CONFIG.yaml|- | torchtitan CONFIG.toml|CONFIG.json|- --topology NAME|FILE [--param KEY=VALUE]... [--section.option VALUE]... [-o FILE]",
            "Write the scenario (JSON, docs/workloads.md) equivalent to another tool's configuration, for\n"
            "`fabricsim run` to simulate. megatron: a Megatron-LM launch, a shell script or a command line (SCRIPT,\n"
            "or - for stdin) that runs pretrain_gpt.py, e.g. torchrun --nproc-per-node 8 --nnodes 16 pretrain_gpt.py\n"
            "--tensor-model-parallel-size 8 --num-layers 80 ... The script is read, not run: comments,\n"
            "continuations, quotes, VAR=value and VAR=( ... ) assignments and $VAR / \"${ARR[@]}\" are expanded;\n"
            "torchrun's --nproc-per-node x --nnodes is the world size. Every flag after pretrain_gpt.py must be\n"
            "one of Megatron-LM's: the flags fabricsim models become gpt parameters, the others are listed as\n"
            "ignored (no effect on step time) or, with a warning, as not modelled (the scenario's workload notes\n"
            "and the run's result list them too). nemo: a NeMo 1.x training config (YAML with trainer: and model:,\n"
            "as NeMo's megatron_gpt_config.yaml or the NeMo-Framework-Launcher's conf/training files); each model:\n"
            "key becomes the Megatron-LM flag that sets the same Megatron-Core field, trainer.num_nodes x\n"
            "trainer.devices is the world size, ${a.b} interpolations within the file are resolved, and a key the\n"
            "importer does not know is an error (--ignore-unknown lists them instead). torchtitan: a torchtitan job\n"
            "config (TOML of 2024-2025, or the JSON of the resolved config its trainer writes since 2026) with\n"
            "torchtitan's own --section.option VALUE overrides after it; [model] name + flavor pick the catalogue\n"
            "model, the degrees, batch, activation checkpointing, torch.compile, float8 / MX and async TP become gpt\n"
            "parameters, unknown keys are errors. Same input, same bytes out.");
  args.flag({"--topology", "-t", "NAME|FILE", "the cluster: topology preset or file (a server preset such as "
             "dgx-h100 grows into a superpod of enough servers for the launcher's world size)", ""});
  args.flag({"--param", "-p", "KEY=VALUE", "gpt generator parameter set after the import (repeatable): e.g. gpu, "
             "padded_vocab_size when the vocabulary comes from a tokenizer file", "", true});
  megatron_flags(args);
  torchtitan_flags(args);
  args.flag({"--ignore-unknown", "", "", "nemo, torchtitan: list keys the importer does not know (on stderr and in the notes) "
             "instead of refusing the config", ""});
  args.flag({"--output", "-o", "FILE", "scenario file to write (default: stdout)", ""});
  args.list_flag(Args::kTopologies);
  if (!args.parse(argc, argv)) return 0;
  const std::string kind = args.positional().empty() ? std::string() : args.positional()[0];
  if (args.positional().size() != 2 || (kind != "megatron" && kind != "nemo" && kind != "torchtitan"))
    throw InputError("fabricsim import", "expected: megatron SCRIPT (a Megatron-LM launch script, or - for stdin), "
                                         "nemo CONFIG.yaml (a NeMo training config, or - for stdin) or torchtitan "
                                         "CONFIG (a torchtitan TOML or JSON config, or - for stdin)");
  if (kind != "torchtitan" && !titan_overrides.empty())
    throw InputError("--" + titan_overrides.front().first, "torchtitan's --section.option overrides apply to torchtitan");
  if (kind != "torchtitan")
    for (const char* f : {"--gpus", "--torchtitan-version"})
      if (args.has(f)) throw InputError(f, "applies to torchtitan");
  if (!args.has("--topology")) throw InputError("--topology", "required: the cluster the job runs on (preset or file)");
  if (kind != "megatron" && args.has("--var")) throw InputError("--var", "applies to megatron (shell variables of a script)");
  if (kind == "megatron" && args.has("--ignore-unknown"))
    throw InputError("--ignore-unknown", "applies to nemo and torchtitan (an unknown Megatron-LM flag is always an error)");
  args.check_output_flags({"--output"});
  Json doc;
  if (kind == "megatron") {
    doc = megatron_scenario(args, args.positional()[1]);
  } else if (kind == "nemo") {
    doc = nemo_scenario(args, args.positional()[1]);
  } else {
    doc = torchtitan_scenario(args, args.positional()[1], titan_overrides);
  }
  const std::string text = doc.dump(2) + "\n";
  if (args.has("--output")) write_file_atomic(args.get("--output"), text);
  else std::cout << text;
  return 0;
}

}  // namespace fabricsim::cli
