// fabricsim topo <preset|file> [--param k=v]... [--dot FILE] [--export FILE] [--json FILE] [--list]
#include <filesystem>
#include <iostream>

#include "apps/cli.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "topologies/io.hpp"

namespace fabricsim::cli {

int cmd_topo(int argc, char** argv) {
  Args args("topo", "<preset|file> [options]",
            "Builds a topology preset or loads a JSON topology file and prints a summary: node and link counts\n"
            "by kind, per-GPU NVLink and NIC bandwidth, bisection bandwidth and diameter. Can export the\n"
            "topology as Graphviz DOT or as the JSON topology format (docs/topology.md).");
  args.topology_flags();
  args.flag({"--dot", "", "FILE", "write the topology as Graphviz DOT", "", false});
  args.flag({"--export", "", "FILE", "write the topology as a JSON topology file (re-importable)", "", false});
  args.flag({"--json", "", "FILE", "write the summary as JSON", "", false});
  args.flag({"--list", "", "", "list the presets with their parameters and defaults", "", false});
  if (!args.parse(argc, argv)) return 0;
  if (args.has("--list")) {
    for (const auto& p : topo::presets()) {
      std::cout << p.name << ": " << p.description << "\n";
      for (const auto& [k, d] : p.params) std::cout << "    --param " << k << "=...  " << d << "\n";
    }
    return 0;
  }
  std::string what;
  const auto& pos = args.positional();
  if (pos.size() > 1) throw InputError(pos[1], "at most one topology argument (see --help)");
  if (args.has("--topology")) {
    if (!pos.empty()) throw InputError("--topology", "either a positional topology or --topology, not both");
    what = args.get("--topology");
  } else if (!pos.empty()) {
    what = pos[0];
  } else {
    throw InputError("fabricsim topo", "a topology preset name or JSON file (see --list)");
  }
  // Output directories must exist before anything is written, so one bad path leaves no other output behind.
  args.check_output_flags({"--dot", "--export", "--json"});
  const topo::Topology t = topo::load_topology(what, args.params());
  const topo::TopologySummary s = topo::summarize(t);
  // Build every output before writing any, so a failure leaves no partial outputs.
  std::string dot, exported, summary;
  if (args.has("--dot")) dot = topo::topology_to_dot(t);
  if (args.has("--export")) exported = topo::topology_to_json(t).dump(1) + "\n";
  if (args.has("--json")) summary = topo::summary_json(t, s).dump(2) + "\n";
  if (args.has("--dot")) write_file_atomic(args.get("--dot"), dot);
  if (args.has("--export")) write_file_atomic(args.get("--export"), exported);
  if (args.has("--json")) write_file_atomic(args.get("--json"), summary);
  std::cout << topo::summary_text(t, s);
  return 0;
}

}  // namespace fabricsim::cli
