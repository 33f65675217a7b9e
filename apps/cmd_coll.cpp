// fabricsim coll: simulate one NCCL collective over a size sweep and print the nccl-tests table
// (docs/collectives.md). Flags follow nccl-tests where it has them (-b -e -f -g -d -o -r).
#include <iostream>
#include <map>

#include "apps/cli.hpp"
#include "models/collectives.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"
#include "replay/coll_sweep.hpp"
#include "replay/outputs.hpp"
#include "validate/nccl_table.hpp"
#include "workloads/cluster.hpp"

namespace fabricsim::cli {

int cmd_coll(int argc, char** argv) {
  Args args("coll", "--topology PRESET|FILE --op OP [options]",
            "Simulate an NCCL collective on a topology over a size sweep and print the nccl-tests table\n"
            "(size, count, type, redop, root, time, algbw, busbw) plus the algorithm, protocol and fidelity\n"
            "used for each row. Sizes follow nccl-tests' semantics (docs/collectives.md).");
  args.topology_flags();
  args.flag({"--op", "", "OP",
             "all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, all_to_allv, send_recv, scatter",
             "all_reduce"});
  args.flag({"--minbytes", "-b", "SIZE", "smallest size (nccl-tests -b)", "32M"});
  args.flag({"--maxbytes", "-e", "SIZE", "largest size (nccl-tests -e)", "32M, or -b when only -b is given"});
  args.flag({"--stepfactor", "-f", "N", "multiply the size by N between rows (nccl-tests -f)", "2"});
  args.flag({"--ngpus", "-g", "N", "use the first N GPUs of the topology (rank order)", "all"});
  args.flag({"--gpus-per-thread", "", "N",
             "model an nccl-tests -g N run: one host thread launches on N GPUs, so each call takes at least N x "
             "kernel_launch_s (docs/validation.md, host launch floor)",
             "no floor"});
  args.flag({"--iters", "-n", "N",
             "time N back-to-back calls per size and print rank 0's time per call, as nccl-tests -n does: broadcast "
             "and reduce calls overlap (their period, not one call's latency; docs/validation.md, back-to-back calls), "
             "other operations' calls do not (one call's time)",
             "one call"});
  args.flag({"--comm", "", "R,R,...", "communicator as cluster GPU ranks (indices in the topology's GPU order)", ""});
  args.flag({"--ep", "", "N",
             "all_to_all(v) over an expert-parallel group of N GPUs laid out by --ep-span; also prints DeepEP-style "
             "dispatch/combine bandwidth per rank split into NVLink and RDMA parts", ""});
  args.flag({"--ep-span", "", "node|rail", "node: the group packs whole servers; rail: GPU 0 of N servers", "node"});
  args.flag({"--root", "-r", "RANK", "root rank for broadcast/reduce/scatter (nccl-tests -r)", "0"});
  args.flag({"--algo", "", "ALGO", "ring, tree, nvls, collnet, pat, direct, pairwise, hierarchical (NCCL_ALGO)", "tuner"});
  args.flag({"--proto", "", "PROTO", "simple, ll, ll128 (NCCL_PROTO)", "tuner"});
  args.flag({"--channels", "", "N", "ring/tree channels", "NICs per NCCL node (a multi-node NVLink domain is one) up to NCCL's search cap, 1 on one node"});
  args.flag({"--engine", "", "NAME", "fabricsim or simgrid", "fabricsim"});
  args.flag({"--fidelity", "", "LEVEL", "auto, step, phase or symmetry", "auto"});
  args.flag({"--calibration", "", "auto|default|shipped:NAME|FILE",
             "network calibration: auto = the shipped file fitted on matching hardware (validate/calibrations/), "
             "default = built-in cited defaults, or a JSON file (docs/calibration.md)", "auto"});
  args.flag({"--json", "", "FILE", "also write the results as JSON (schema in docs/collectives.md)", ""});
  args.flag({"--nccl-tests", "", "FILE", "also write the results as an nccl-tests log, which `fabricsim validate` reads", ""});
  args.flag({"--datatype", "-d", "TYPE", "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16", "float"});
  args.flag({"--redop", "-o", "OP", "sum, prod, min, max, avg (reductions only; printed)", "sum"});
  args.flag({"--batch-tolerance", "", "TIME",
             "engine completion batching window (flows finishing within it complete together)",
             "auto: exact below 20000 transfers, else 1us"});
  args.flag({"--timeline", "", "FILE", "Chrome trace of the largest size's transfers (docs/outputs.md)", ""});
  args.flag({"--link-stats", "", "FILE", "per-link statistics of the largest size; CSV, or JSON for *.json", ""});
  args.flag({"--report", "", "FILE", "HTML report of the largest size (docs/outputs.md)", ""});
  args.flag({"--pxn", "", "auto|on|off",
             "route cross-rail traffic through the peer GPU on the destination's rail (NCCL PXN); auto = on for "
             "all_to_all(v), send_recv and scatter (NCCL's default, NCCL_P2P_PXN_LEVEL=2, whatever the fabric), off otherwise", "auto"});
  args.flag({"--fault", "", "SPEC",
             "price on the topology with a fault, in a cluster scenario's faults[] vocabulary (docs/workloads.md): "
             "link=A,B:50% (the link between node ids A and B at 50 % of its bandwidth), link=A,B:down, switch=ID, "
             "nic=ID, or the JSON object itself, e.g. '{\"link\": [\"n1.nic0\", \"leaf.r0.0\"], \"bandwidth\": \"50%\"}'; "
             "repeatable. `fabricsim topo --export` writes the node ids",
             "none", true});
  args.list_flag(Args::kTopologies | Args::kCalibrations);
  if (!args.parse(argc, argv)) return 0;
  // Output paths are checked before simulating, so a bad one fails at once and nothing is written.
  args.check_output_flags({"--json", "--nccl-tests", "--timeline", "--link-stats", "--report"});
  if (!args.positional().empty()) throw InputError(args.positional()[0], "unexpected argument");
  if (!args.has("--topology")) throw InputError("--topology", "a topology preset or JSON file is required");

  // Every option coll knows, by its long name without the dashes, as the library's request builder takes them.
  std::map<std::string, std::string> opts;
  for (const char* f : {"topology", "op", "minbytes", "maxbytes", "stepfactor", "ngpus", "gpus-per-thread", "iters",
                        "comm", "root", "algo", "proto", "channels", "engine", "fidelity", "calibration", "datatype",
                        "redop", "batch-tolerance", "pxn", "ep", "ep-span"})
    if (args.has(std::string("--") + f)) opts[f] = args.get(std::string("--") + f);
  sim::CollSweepRequest req = sim::coll_request(opts, args.params());
  for (const auto& f : args.all("--fault")) req.faults.push_back(workloads::parse_fault_text(f, "--fault"));
  req.want_run = args.has("--timeline") || args.has("--link-stats") || args.has("--report");
  const sim::CollSweep sweep = sim::run_coll_sweep(req);
  if (args.has("--json")) write_file_atomic(args.get("--json"), sweep.doc.dump(1) + "\n");
  if (args.has("--nccl-tests"))
    write_file_atomic(args.get("--nccl-tests"), validate::simulation_as_nccl_tests_text(sweep.doc, "--nccl-tests"));
  if (req.want_run) {
    sim::OutputOptions out;
    out.timeline_path = args.get("--timeline");
    out.link_stats_path = args.get("--link-stats");
    out.report_path = args.get("--report");
    out.quiet = true;
    sim::write_outputs(sweep.last, out);
  }
  std::cout << sweep.text;
  return 0;
}

}  // namespace fabricsim::cli
