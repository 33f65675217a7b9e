// fabricsim coll: simulate one NCCL collective over a size sweep and print the nccl-tests table
// (docs/collectives.md). Flags follow nccl-tests where it has them (-b -e -f -g -d -o -r).
#include <iostream>
#include <sstream>

#include "apps/cli.hpp"
#include "models/collectives.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"
#include "sim/replay/coll_sweep.hpp"
#include "sim/replay/outputs.hpp"

namespace fabricsim::cli {

namespace {

struct DType {
  const char* name;
  int bytes;
};
constexpr DType kTypes[] = {{"int8", 1},  {"uint8", 1}, {"int32", 4}, {"uint32", 4},   {"int64", 8},
                            {"uint64", 8}, {"half", 2}, {"float", 4}, {"double", 8}, {"bfloat16", 2}};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

}  // namespace

int cmd_coll(int argc, char** argv) {
  Args args("coll", "--topology PRESET|FILE --op OP [options]",
            "Simulate an NCCL collective on a topology over a size sweep and print the nccl-tests table\n"
            "(size, count, type, redop, root, time, algbw, busbw) plus the algorithm, protocol and fidelity\n"
            "used for each row. Sizes follow nccl-tests' semantics (docs/collectives.md).");
  args.topology_flags();
  args.flag({"--op", "", "OP",
             "all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, all_to_allv, send_recv",
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
  args.flag({"--root", "-r", "RANK", "root rank for broadcast/reduce (nccl-tests -r)", "0"});
  args.flag({"--algo", "", "ALGO", "ring, tree, nvls, collnet, pat, direct, pairwise, hierarchical (NCCL_ALGO)", "tuner"});
  args.flag({"--proto", "", "PROTO", "simple, ll, ll128 (NCCL_PROTO)", "tuner"});
  args.flag({"--channels", "", "N", "ring/tree channels", "NICs per host, 1 on one host"});
  args.flag({"--engine", "", "NAME", "fabricsim or simgrid", "fabricsim"});
  args.flag({"--fidelity", "", "LEVEL", "auto, step, phase or symmetry", "auto"});
  args.flag({"--calibration", "", "auto|default|shipped:NAME|FILE",
             "network calibration: auto = the shipped file fitted on matching hardware (validate/calibrations/), "
             "default = built-in cited defaults, or a JSON file (docs/calibration.md)", "auto"});
  args.flag({"--json", "", "FILE", "also write the results as JSON (schema in docs/collectives.md)", ""});
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
             "all_to_all(v) and send_recv (NCCL's default on rail-optimised systems), off otherwise", "auto"});
  if (!args.parse(argc, argv)) return 0;
  // Output paths are checked before simulating, so a bad one fails at once and nothing is written.
  args.check_output_flags({"--json", "--timeline", "--link-stats", "--report"});
  if (!args.positional().empty()) throw InputError(args.positional()[0], "unexpected argument");
  if (!args.has("--topology")) throw InputError("--topology", "a topology preset or JSON file is required");

  models::CollectiveSpec spec;
  if (!models::parse_op(args.get("--op", "all_reduce"), spec.op))
    throw InputError("--op " + args.get("--op"),
                     "one of all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, all_to_allv, "
                     "send_recv");
  std::string dtype = args.get("--datatype", "float");
  spec.elem_bytes = 0;
  for (const auto& t : kTypes)
    if (dtype == t.name) spec.elem_bytes = t.bytes;
  if (!spec.elem_bytes)
    throw InputError("--datatype " + dtype, "one of int8 uint8 int32 uint32 int64 uint64 half float double bfloat16");
  std::string redop = args.get("--redop", "sum");
  if (redop != "sum" && redop != "prod" && redop != "min" && redop != "max" && redop != "avg")
    throw InputError("--redop " + redop, "one of sum, prod, min, max, avg");
  if (args.has("--algo")) {
    models::Algorithm a;
    if (!models::parse_algorithm(args.get("--algo"), a))
      throw InputError("--algo " + args.get("--algo"),
                       "one of ring, tree, nvls, collnet, pat, direct, pairwise, hierarchical");
    spec.algorithm = a;
  }
  if (args.has("--proto")) {
    models::Protocol p;
    if (!models::parse_protocol(args.get("--proto"), p))
      throw InputError("--proto " + args.get("--proto"), "one of simple, ll, ll128");
    spec.protocol = p;
  }
  if (!models::parse_fidelity(args.get("--fidelity", "auto"), spec.fidelity))
    throw InputError("--fidelity " + args.get("--fidelity"), "one of auto, step, phase, symmetry");
  if (args.has("--channels")) {
    long long c = parse_int(args.get("--channels"), "--channels");
    if (c < 1 || c > 64) throw InputError("--channels", "an integer in 1..64");
    spec.channels = static_cast<int>(c);
  }
  int gpus_per_thread = 0;
  if (args.has("--gpus-per-thread")) {
    long long g = parse_int(args.get("--gpus-per-thread"), "--gpus-per-thread");
    if (g < 1 || g > 4096) throw InputError("--gpus-per-thread", "an integer in 1..4096 (GPUs one host thread drives)");
    gpus_per_thread = static_cast<int>(g);
  }
  int iters = 0;
  if (args.has("--iters")) {
    long long v = parse_int(args.get("--iters"), "--iters");
    if (v < 1 || v > 1000000) throw InputError("--iters", "an integer in 1..1000000 (calls per size)");
    iters = static_cast<int>(v);
  }
  const std::uint64_t minb = parse_size(args.get("--minbytes", "32M"), "-b");
  // Like nccl-tests, -e defaults to 32M; given -b alone, the sweep is that one size.
  const std::uint64_t maxb =
      parse_size(args.get("--maxbytes", args.has("--minbytes") && !args.has("--maxbytes") ? args.get("--minbytes") : "32M"), "-e");
  if (minb == 0) throw InputError("-b", "a size of at least 1 byte");
  if (maxb < minb) throw InputError("-e", "a size >= -b");
  const long long factor = parse_int(args.get("--stepfactor", "2"), "-f");
  if (factor < 1 || (factor < 2 && minb != maxb))
    throw InputError("-f", "an integer >= 2 (1 only when -b equals -e), got " + std::to_string(factor));
  sim::CollSweepRequest req;
  req.topology = args.get("--topology");
  req.params = args.params();
  req.datatype = dtype;
  req.redop = redop;
  req.min_bytes = minb;
  req.max_bytes = maxb;
  req.step_factor = factor;
  if (args.has("--ngpus")) req.ngpus = parse_int(args.get("--ngpus"), "-g");
  if (args.has("--comm")) req.comm = split(args.get("--comm"), ',');
  spec.root = static_cast<int>(parse_int(args.get("--root", "0"), "--root"));
  req.spec = spec;
  req.gpus_per_thread = gpus_per_thread;
  req.iters = iters;
  req.engine = args.get("--engine", "fabricsim");
  if (args.has("--batch-tolerance")) req.batch_tolerance_s = parse_time(args.get("--batch-tolerance"), "--batch-tolerance");
  req.calibration = args.get("--calibration", "auto");
  req.pxn = args.get("--pxn", "auto");
  req.want_run = args.has("--timeline") || args.has("--link-stats") || args.has("--report");
  const sim::CollSweep sweep = sim::run_coll_sweep(req);
  if (args.has("--json")) write_file_atomic(args.get("--json"), sweep.doc.dump(1) + "\n");
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
