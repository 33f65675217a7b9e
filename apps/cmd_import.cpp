// fabricsim import megatron SCRIPT|- --topology NAME|FILE [--var NAME=VALUE]... [--param k=v]... [-o scenario.json]:
// a Megatron-LM launch script (or command line) as a scenario that `fabricsim run` accepts
// (docs/workloads.md, "Megatron-LM launch scripts"; workloads/megatron_args.hpp).
#include <iostream>

#include "apps/cli.hpp"
#include "replay/run_scenario.hpp"
#include "sim/base/error.hpp"
#include "sim/base/input_file.hpp"
#include "workloads/megatron_args.hpp"
#include "workloads/scenario.hpp"

namespace fabricsim::cli {

void megatron_flags(Args& args) {
  args.flag({"--var", "", "NAME=VALUE",
             "set a shell variable the script uses ($NAME, ${NAME}) before it runs; the script's own assignments do "
             "not change it (repeatable)", "", true});
}

Json megatron_scenario(const Args& args, const std::string& script) {
  std::map<std::string, std::string> vars;
  for (const auto& v : args.all("--var")) {
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("--var", "expected NAME=VALUE, got '" + text_excerpt(v) + "'");
    vars[v.substr(0, eq)] = v.substr(eq + 1);
  }
  const std::string name = script == "-" ? std::string("<stdin>") : script;
  const std::string text = read_input_file(script == "-" ? std::string("/dev/stdin") : script);
  Json doc = workloads::scenario_for_megatron(name, text, args.get("--topology"), args.params(), vars);
  // The generator's own checks against the topology, so that a script it cannot run writes nothing.
  const workloads::Scenario s = workloads::scenario_from_json(doc, name);
  sim::check_scenario_inputs(s, sim::scenario_system(s));
  // What was left out, on stderr (the scenario and the run's result keep the same notes).
  const Json& notes = doc["workload"]["notes"];
  for (std::size_t k = 1; k < notes.size(); ++k) {
    const std::string n = notes[k].get<std::string>();
    std::cerr << "fabricsim " << args.command() << ": " << (n.rfind("not modelled", 0) == 0 ? "warning: " : "") << n << "\n";
  }
  return doc;
}

int cmd_import(int argc, char** argv) {
  Args args("import", "megatron SCRIPT|- --topology NAME|FILE [--var NAME=VALUE]... [--param KEY=VALUE]... [-o FILE]",
            "Write the scenario (JSON, docs/workloads.md) equivalent to another tool's configuration, for\n"
            "`fabricsim run` to simulate. megatron: a Megatron-LM launch, a shell script or a command line (SCRIPT,\n"
            "or - for stdin) that runs pretrain_gpt.py, e.g. torchrun --nproc-per-node 8 --nnodes 16 pretrain_gpt.py\n"
            "--tensor-model-parallel-size 8 --num-layers 80 ... The script is read, not run: comments,\n"
            "continuations, quotes, VAR=value and VAR=( ... ) assignments and $VAR / \"${ARR[@]}\" are expanded;\n"
            "torchrun's --nproc-per-node x --nnodes is the world size. Every flag after pretrain_gpt.py must be\n"
            "one of Megatron-LM's: the flags fabricsim models become gpt parameters, the others are listed as\n"
            "ignored (no effect on step time) or, with a warning, as not modelled (the scenario's workload notes\n"
            "and the run's result list them too). Same input, same bytes out.");
  args.flag({"--topology", "-t", "NAME|FILE", "the cluster: topology preset or file (a server preset such as "
             "dgx-h100 grows into a superpod of enough servers for the launcher's world size)", ""});
  args.flag({"--param", "-p", "KEY=VALUE", "gpt generator parameter set after the import (repeatable): e.g. gpu, "
             "padded_vocab_size when the vocabulary comes from a tokenizer file", "", true});
  megatron_flags(args);
  args.flag({"--output", "-o", "FILE", "scenario file to write (default: stdout)", ""});
  args.list_flag(Args::kTopologies);
  if (!args.parse(argc, argv)) return 0;
  if (args.positional().size() != 2 || args.positional()[0] != "megatron")
    throw InputError("fabricsim import", "expected: megatron SCRIPT (a Megatron-LM launch script, or - for stdin)");
  if (!args.has("--topology")) throw InputError("--topology", "required: the cluster the job runs on (preset or file)");
  args.check_output_flags({"--output"});
  const Json doc = megatron_scenario(args, args.positional()[1]);
  const std::string text = doc.dump(2) + "\n";
  if (args.has("--output")) write_file_atomic(args.get("--output"), text);
  else std::cout << text;
  return 0;
}

}  // namespace fabricsim::cli
