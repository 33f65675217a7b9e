// fabricsim run [scenario.json]: replay a training step (docs/workloads.md). Without a scenario file it runs
// the built-in flagship: GPT-3 175B (TP 8, PP 16 interleaved, DP 8) on 1024 A100 in a DGX A100 SuperPOD.
#include <cstdio>
#include <iostream>

#include "apps/cli.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "replay/outputs.hpp"
#include "replay/run_scenario.hpp"
#include "workloads/gpt.hpp"
#include "workloads/importers.hpp"
#include "workloads/scenario.hpp"

namespace fabricsim::cli {

int cmd_run(int argc, char** argv) {
  const auto titan_overrides = take_torchtitan_overrides(argc, argv);
  Args args("run", "[scenario.json] [options] | --trace FILE|PREFIX --topology NAME|FILE [--param k=v]... | --megatron SCRIPT|- --topology NAME|FILE [--var NAME=VALUE]... [--param k=v]... | --nemo CONFIG.yaml|- --topology NAME|FILE [--param k=v]... | --torchtitan CONFIG|- --topology NAME|FILE [--param k=v]... [--section.option VALUE]...",
            "Replay one training step of a scenario (topology + workload + calibration + outputs) and print\n"
            "the iteration time, throughput (samples/s, tokens/s, achieved TFLOP/s per GPU) and where the time\n"
            "goes (compute, exposed communication per kind, pipeline bubble, idle). Without a scenario file the\n"
            "built-in default runs: GPT-3 175B, TP 8, PP 16 (interleaved), DP 8 on 128 DGX A100 (1024 GPUs).\n"
            "Scenario format: docs/workloads.md and docs/scenario.schema.json. Another tool's workload runs without a\n"
            "scenario file: --trace names a Chakra trace (.et / JSON, a file or the PREFIX of PREFIX.<rank>.et), an\n"
            "ASTRA-sim 1.0 / SimAI text workload or a fabricsim trace, --topology the cluster (a server preset such\n"
            "as dgx-h100 grows into a superpod of enough servers for the workload's ranks). --megatron runs a\n"
            "Megatron-LM launch script as `fabricsim import megatron` would write its scenario, --nemo a NeMo\n"
            "training config (YAML) as `fabricsim import nemo` would, --torchtitan a torchtitan job config (TOML or\n"
            "JSON, with torchtitan's --section.option VALUE overrides) as `fabricsim import torchtitan` would.");
  args.flag({"--trace", "", "FILE|PREFIX", "run this workload file (Chakra, ASTRA-sim/SimAI text, fabricsim trace) instead of a scenario", ""});
  args.flag({"--megatron", "", "SCRIPT|-", "run this Megatron-LM launch script (or command line; - for stdin) instead of a scenario "
             "(fabricsim import megatron --help)", ""});
  args.flag({"--nemo", "", "CONFIG.yaml|-", "run this NeMo training config (- for stdin) instead of a scenario "
             "(fabricsim import nemo --help)", ""});
  args.flag({"--torchtitan", "", "CONFIG|-", "run this torchtitan job config (TOML or JSON; - for stdin) instead of a "
             "scenario (fabricsim import torchtitan --help)", ""});
  torchtitan_flags(args);
  args.flag({"--ignore-unknown", "", "", "with --nemo or --torchtitan: list keys the importer does not know instead of refusing the config", ""});
  args.flag({"--format", "", "FORMAT", "auto, chakra, astra or trace (with --trace)", "auto"});
  args.flag({"--topology", "", "NAME|FILE", "topology preset or file (with --trace, --megatron, --nemo or --torchtitan)", ""});
  args.flag({"--param", "-p", "KEY=VALUE", "workload parameter with --trace (repeatable): npus, comm_group, dims, cycle_ns; "
             "with --megatron, --nemo or --torchtitan a gpt parameter set after the import; with any of them also a "
             "parameter of --topology's preset (nodes=N, ...; a server preset's superpod parameters too)", "", true});
  megatron_flags(args);
  args.flag({"--comm-model", "", "MODEL", "shared (the default: all communication on one shared network, overlapping collectives contend), engine (the fast tier: NCCL schedules on the flow engine, each collective priced alone on an idle fabric) or analytic (closed form); overrides the scenario's comm_model", ""});
  args.flag({"--calibration", "", "auto|default|shipped:NAME|FILE",
             "network calibration, replacing the scenario's \"calibration\": auto = the shipped file fitted on matching "
             "hardware (validate/calibrations/), default = built-in cited defaults, shipped:NAME, or a JSON file "
             "such as `fabricsim calibrate -o` writes (relative to the current directory; docs/calibration.md)", ""});
  args.flag({"--compute-preset", "", "NAME",
             "compute efficiencies to start from, replacing the scenario's preset: default (cited hardware "
             "ceilings) or megatron-sc21 (fitted to Megatron-LM's measured GPT throughput; docs/workloads.md)",
             ""});
  args.flag({"--print-default", "", "", "print the built-in default scenario as JSON and exit", ""});
  args.flag({"--kernel-shapes", "", "FILE",
             "write the GEMM shapes the scenario's compute model prices (fabricsim-kernel-bench --shapes format, "
             "docs/validation.md) and exit without replaying", ""});
  args.flag({"--quiet", "-q", "", "no progress output", ""});
  for (const auto& f : sim::output_flags())
    if (f.name != "--quiet") args.flag({f.name, "", f.value_name, f.help, "", false});
  args.list_flag(Args::kTopologies | Args::kCalibrations | Args::kCompute | Args::kModels);
  if (!args.parse(argc, argv)) return 0;
  if (args.has("--print-default")) {
    std::cout << workloads::default_scenario_json().dump(2) << "\n";
    return 0;
  }
  if (args.positional().size() > 1) throw InputError("fabricsim run", "expected at most one scenario file");
  const bool from_trace = args.has("--trace"), from_megatron = args.has("--megatron"), from_nemo = args.has("--nemo"),
             from_titan = args.has("--torchtitan");
  if (int(from_trace) + int(from_megatron) + int(from_nemo) + int(from_titan) > 1)
    throw InputError("fabricsim run", "give one of --trace, --megatron, --nemo and --torchtitan");
  const bool imported = from_trace || from_megatron || from_nemo || from_titan;
  const char* source_flag = from_trace ? "--trace" : from_megatron ? "--megatron" : from_nemo ? "--nemo" : "--torchtitan";
  if (imported && !args.positional().empty())
    throw InputError("fabricsim run", std::string("give a scenario file or ") + source_flag + ", not both");
  if (imported != args.has("--topology"))
    throw InputError("fabricsim run", "--topology goes with --trace, --megatron, --nemo or --torchtitan");
  if (!imported && args.has("--param"))
    throw InputError("fabricsim run", "--param applies to --trace, --megatron, --nemo and --torchtitan");
  if (!from_nemo && !from_titan && args.has("--ignore-unknown"))
    throw InputError("fabricsim run", "--ignore-unknown applies to --nemo and --torchtitan");
  if (!from_titan && !titan_overrides.empty())
    throw InputError("--" + titan_overrides.front().first, "torchtitan's --section.option overrides apply to --torchtitan");
  for (const char* f : {"--gpus", "--torchtitan-version"})
    if (!from_titan && args.has(f)) throw InputError("fabricsim run", std::string(f) + " applies to --torchtitan");
  if (!from_trace && args.has("--format")) throw InputError("fabricsim run", "--format applies to --trace");
  if (!from_megatron && args.has("--var")) throw InputError("fabricsim run", "--var applies to --megatron");
  const std::string file = from_trace ? std::string("--trace ") + args.get("--trace")
                           : from_megatron ? (args.get("--megatron") == "-" ? std::string("<stdin>") : args.get("--megatron"))
                           : from_nemo ? (args.get("--nemo") == "-" ? std::string("<stdin>") : args.get("--nemo"))
                           : from_titan ? (args.get("--torchtitan") == "-" ? std::string("<stdin>") : args.get("--torchtitan"))
                           : args.positional().empty() ? std::string("<built-in>") : args.positional()[0];
  workloads::ParamOrigins origins;  // where an imported file set each parameter (errors of the run name it)
  Json doc = from_trace ? workloads::scenario_for_trace(args.get("--trace"), args.get("--format"), args.get("--topology"), args.params())
             : from_megatron ? megatron_scenario(args, args.get("--megatron"), &origins)
             : from_nemo ? nemo_scenario(args, args.get("--nemo"), &origins)
             : from_titan ? torchtitan_scenario(args, args.get("--torchtitan"), titan_overrides, &origins)
             : args.positional().empty() ? workloads::default_scenario_json() : load_json_file(file);
  if (args.has("--compute-preset"))
    workloads::set_compute_preset(doc, args.get("--compute-preset"), "--compute-preset");
  workloads::Scenario sc = workloads::scenario_from_json(doc, file);
  // The same spec and loader as coll's --calibration (models::System, models/system.hpp).
  if (args.has("--calibration")) sc.calibration_file = args.get("--calibration");
  // A catalogue model with no layout runs GPT-3 175B's (TP 8, PP 16, ...): said once per gpt workload.
  auto warn_layout = [](const workloads::WorkloadSpec& w) {
    if (w.kind != "generator" || w.generator != "gpt") return;
    const std::string msg = workloads::gpt_default_layout_warning(w.params);
    if (!msg.empty()) std::cerr << "fabricsim run: warning: " << w.where << ": " << msg << "\n";
  };
  warn_layout(sc.workload);
  for (const auto& j : sc.jobs) warn_layout(j.workload);
  if (args.has("--kernel-shapes")) {
    args.check_output_flags({"--kernel-shapes"});
    write_file_atomic(args.get("--kernel-shapes"), sim::scenario_gemm_shapes(sc));
    return 0;
  }
  sim::OutputOptions out;
  if (sc.outputs) out = sim::output_options_from_json(*sc.outputs, sc.outputs_at);
  sim::merge_output_flags(out, [&](const std::string& n) -> std::optional<std::string> {
    if (!args.has(n)) return std::nullopt;
    return args.get(n);
  });
  sim::check_output_paths(out);  // fail now, not after the simulation
  sim::ScenarioRunOptions opt;
  opt.comm_model = args.comm_model();
  if (!args.has("--quiet") && !out.quiet)
    std::cerr << "fabricsim run: " << (from_trace || from_megatron ? sc.file + " on " + doc["topology"].dump()
                                       : args.positional().empty() ? std::string("<built-in default>") : sc.file) << "\n";
  sim::ScenarioRun run = [&] {
    try {
      return sim::run_scenario(sc, opt);
    } catch (const InputError& e) {
      rethrow_at_origin(e, sc.workload.where, origins);
    }
  }();
  std::cout << sim::summary_text(run.result, out.top_links);
  char buf[200];
  std::snprintf(buf, sizeof buf, "simulated %zu trace ops on %d GPUs (generation %.2f s, replay %.2f s wall)\n",
                run.trace_ops, run.result.gpus, run.generate_wall_s, run.replay_wall_s);
  std::cerr << buf;
  sim::write_outputs(run.result, out);
  return 0;
}

}  // namespace fabricsim::cli
