// fabricsim import megatron SCRIPT|- --topology NAME|FILE [--var NAME=VALUE]... [--param k=v]... [-o scenario.json]:
// a Megatron-LM launch script (or command line) as a scenario that `fabricsim run` accepts
// (docs/workloads.md, "Megatron-LM launch scripts"; workloads/megatron_args.hpp).
// fabricsim import nemo CONFIG.yaml|- --topology NAME|FILE [--param k=v]... [--ignore-unknown] [-o scenario.json]:
// a NeMo training config the same way (docs/workloads.md, "Importing a NeMo config"; workloads/nemo_config.hpp).
#include <iostream>

#include "apps/cli.hpp"
#include "replay/run_scenario.hpp"
#include "sim/base/error.hpp"
#include "sim/base/input_file.hpp"
#include "workloads/megatron_args.hpp"
#include "workloads/nemo_config.hpp"
#include "workloads/scenario.hpp"

namespace fabricsim::cli {

void megatron_flags(Args& args) {
  args.flag({"--var", "", "NAME=VALUE",
             "set a shell variable the script uses ($NAME, ${NAME}) before it runs; the script's own assignments do "
             "not change it (repeatable)", "", true});
}

namespace {

// The generator's own checks against the topology, so that a configuration it cannot run writes nothing; then
// what was left out, on stderr (the scenario and the run's result keep the same notes).
Json checked_import(const Args& args, Json doc, const std::string& name) {
  const workloads::Scenario s = workloads::scenario_from_json(doc, name);
  sim::check_scenario_inputs(s, sim::scenario_system(s));
  const Json& notes = doc["workload"]["notes"];
  for (std::size_t k = 1; k < notes.size(); ++k) {
    const std::string n = notes[k].get<std::string>();
    const bool warn = n.rfind("not modelled", 0) == 0 || n.rfind("unknown", 0) == 0;
    std::cerr << "fabricsim " << args.command() << ": " << (warn ? "warning: " : "") << n << "\n";
  }
  return doc;
}

}  // namespace

Json megatron_scenario(const Args& args, const std::string& script) {
  std::map<std::string, std::string> vars;
  for (const auto& v : args.all("--var")) {
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("--var", "expected NAME=VALUE, got '" + text_excerpt(v) + "'");
    vars[v.substr(0, eq)] = v.substr(eq + 1);
  }
  const std::string name = script == "-" ? std::string("<stdin>") : script;
  const std::string text = read_input_file(script == "-" ? std::string("/dev/stdin") : script);
  return checked_import(args, workloads::scenario_for_megatron(name, text, args.get("--topology"), args.params(), vars),
                        name);
}

Json nemo_scenario(const Args& args, const std::string& config) {
  const std::string name = config == "-" ? std::string("<stdin>") : config;
  const std::string text = read_input_file(config == "-" ? std::string("/dev/stdin") : config);
  return checked_import(args, workloads::scenario_for_nemo(name, text, args.get("--topology"), args.params(),
                                                           args.has("--ignore-unknown")),
                        name);
}

int cmd_import(int argc, char** argv) {
  Args args("import", "megatron SCRIPT|- | nemo CONFIG.yaml|- --topology NAME|FILE [--param KEY=VALUE]... [-o FILE]",
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
            "importer does not know is an error (--ignore-unknown lists them instead). Same input, same bytes out.");
  args.flag({"--topology", "-t", "NAME|FILE", "the cluster: topology preset or file (a server preset such as "
             "dgx-h100 grows into a superpod of enough servers for the launcher's world size)", ""});
  args.flag({"--param", "-p", "KEY=VALUE", "gpt generator parameter set after the import (repeatable): e.g. gpu, "
             "padded_vocab_size when the vocabulary comes from a tokenizer file", "", true});
  megatron_flags(args);
  args.flag({"--ignore-unknown", "", "", "nemo: list keys the importer does not know (on stderr and in the notes) "
             "instead of refusing the config", ""});
  args.flag({"--output", "-o", "FILE", "scenario file to write (default: stdout)", ""});
  args.list_flag(Args::kTopologies);
  if (!args.parse(argc, argv)) return 0;
  const std::string kind = args.positional().empty() ? std::string() : args.positional()[0];
  if (args.positional().size() != 2 || (kind != "megatron" && kind != "nemo"))
    throw InputError("fabricsim import", "expected: megatron SCRIPT (a Megatron-LM launch script, or - for stdin) or "
                                         "nemo CONFIG.yaml (a NeMo training config, or - for stdin)");
  if (!args.has("--topology")) throw InputError("--topology", "required: the cluster the job runs on (preset or file)");
  if (kind == "nemo" && args.has("--var")) throw InputError("--var", "applies to megatron (shell variables of a script)");
  if (kind == "megatron" && args.has("--ignore-unknown"))
    throw InputError("--ignore-unknown", "applies to nemo (an unknown Megatron-LM flag is always an error)");
  args.check_output_flags({"--output"});
  Json doc;
  if (kind == "megatron") {
    doc = megatron_scenario(args, args.positional()[1]);
  } else {
    doc = nemo_scenario(args, args.positional()[1]);
  }
  const std::string text = doc.dump(2) + "\n";
  if (args.has("--output")) write_file_atomic(args.get("--output"), text);
  else std::cout << text;
  return 0;
}

}  // namespace fabricsim::cli
